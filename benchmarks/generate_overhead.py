"""Does `fitbench run`'s measurement slow a host-bound decode loop? Its decode speed, four ways.

`fitbench run` measured 33 ms a decode step for Qwen2.5-1.5B at batch 8, prompt 1024 on an H200,
where a standalone loop (benchmarks/decode_attention.py) measured 20 ms. Eager `generate` at that
size is host-bound: the GPU waits for Python. So anything the measuring process runs beside or
inside the timed region could show up in the step. In the child (fitbench/measure/child.py):

* the NVML memory sampler, a daemon thread waking every 50 ms (two pynvml queries through ctypes,
  which release the GIL, and Python around them, which holds it);
* `session.sync()` after every timed call (one per generate call, not per token);
* progress events: written between timed calls (throttled to one per 0.2 s), outside the timing;
* GenerateSession runs generate under torch.inference_mode and the precision's autocast context
  (a null context for pure bf16); a standalone loop usually uses torch.no_grad;
* the arithmetic: decode = median(generate(n)) - median(prefill()), per token / n, so generate's
  own per-call overhead (setup, first-token handling) is spread over the n tokens, while
  differencing two generations, (t(n) - t(2)) / (n - 2), cancels it.

This script measures, in one process and interleaved so that host-speed drift hits all alike:

* `diff_no_grad_ms`, `diff_inference_mode_ms`: (t(n) - t(2)) / (n - 2) of the session's model
  under each grad mode (the standalone method);
* `session_diff_ms`: the same differencing through GenerateSession.decode (fitbench's code);
* `child_sampler_ms`, `child_no_sampler_ms`: decode_seconds / n from the child's own
  measurement (fitbench.measure.child.Measurement, in process) with the NVML sampler thread
  running, and with it not started (on a CPU, where there is no NVML, "running" forces the
  sampler's thread on anyway, so its wake-ups and Python still happen);
* `child_sampler_1ms_ms`: the child with the sampler waking every 1 ms (50x the real rate), to
  show whether a thread of this kind can matter at all;
* `per_call_overhead_ms`: t(n) - prefill - (n - 1) x step, what generate adds once per call;
  `child_call_overhead_ms` and `child_decode_step_ms`: the child's own figures for the same
  (generate_call_overhead_seconds, decode_step_seconds: differencing against a one-token call).

    PYTHONPATH=src python benchmarks/generate_overhead.py --out benchmarks/results/generate-overhead-h200.json
    PYTHONPATH=src python benchmarks/generate_overhead.py --device cpu --tiny   # a smoke test

Models are built from benchmarks/configs with random weights; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

# label -> (config file, workload fields)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen2.5-1.5b b8 p1024": (
        "qwen2.5-1.5b.json",
        {"mode": "infer", "batch_size": 8, "prompt_tokens": 1024, "precision": "bf16"},
    ),
    "llama-3.2-1b b16 p1024": (
        "llama-3.2-1b.json",
        {"mode": "infer", "batch_size": 16, "prompt_tokens": 1024, "precision": "bf16"},
    ),
}


def _median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1e3, 3)


@contextlib.contextmanager
def sampler_mode(mode: str, interval: float) -> Iterator[None]:
    """Patch fitbench.measure.nvml.MemorySampler for one in-process measurement.

    "off": the thread is never started (phase-boundary samples still run); "on": the thread
    runs even where NVML is absent (a CPU), at `interval` seconds; "as-is": untouched.
    """
    from fitbench.measure import nvml

    original_start, original_init = nvml.MemorySampler.start, nvml.MemorySampler.__init__

    def start_off(self: Any) -> Any:
        return self

    def start_forced(self: Any) -> Any:
        import threading

        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="fitbench-nvml", daemon=True)
            self._thread.start()
        return self

    def init(self: Any, index: int, **kwargs: Any) -> None:
        original_init(self, index, **{**kwargs, "interval": interval})

    try:
        if mode == "off":
            nvml.MemorySampler.start = start_off  # type: ignore[method-assign]
        elif mode == "on":
            nvml.MemorySampler.start = start_forced  # type: ignore[method-assign]
            nvml.MemorySampler.__init__ = init  # type: ignore[method-assign]
        yield
    finally:
        nvml.MemorySampler.start = original_start  # type: ignore[method-assign]
        nvml.MemorySampler.__init__ = original_init  # type: ignore[method-assign]


def child_decode(workload: Any, device: str, sampler: str, interval: float, min_steps: int) -> dict[str, Any]:
    """The child's own measurement, in this process: decode seconds per token and the rest."""
    from fitbench.backends.base import RunOptions
    from fitbench.measure import child, runner

    with tempfile.TemporaryDirectory() as tmp:
        request = runner.build_request(
            workload,
            "torch",
            RunOptions(device=device),
            min_steps=min_steps,
            min_seconds=0.0,
            warmup=1,
            max_seconds=120.0,
            workdir=Path(tmp),
        )
        request["progress_path"] = None
        measurement = child.Measurement(request)
        with sampler_mode(sampler, interval):
            if sampler == "on" and measurement.cuda_index is None:
                from fitbench.measure import nvml

                measurement.sampler = nvml.MemorySampler(0, interval=interval).start()
            result = measurement.run()
            if measurement.sampler is not None:
                measurement.sampler.stop()
        if measurement.session is not None:
            measurement.session.close()
    if result["status"] != "ok":
        raise RuntimeError(f"measurement failed: {result.get('error')}")
    n = int(workload.new_tokens)
    step = result.get("decode_step_seconds")
    return {
        "per_token_ms": round(result["decode_seconds"] / n * 1e3, 3),
        "decode_step_ms": None if step is None else round(step * 1e3, 3),
        "call_overhead_ms": round(result["generate_call_overhead_seconds"] * 1e3, 3),
        "prefill_ms": round(result["prefill_seconds"] * 1e3, 3),
        "generate_ms": round(result["step_seconds"] * 1e3, 3),
        "nvml_samples": result.get("nvml_samples"),
    }


def differenced(generate: Callable[[int], None], sync: Callable[[], None], n: int, repeats: int) -> float:
    """(t(n) - t(2)) / (n - 2): one decode step, generate's per-call work cancelled; median."""

    def timed(k: int) -> float:
        sync()
        t0 = time.perf_counter()
        generate(k)
        sync()
        return time.perf_counter() - t0

    timed(2)
    return statistics.median((timed(n) - timed(2)) / (n - 2) for _ in range(repeats))


def one_case(
    label: str,
    config: str,
    fields: dict[str, Any],
    *,
    device: str,
    tiny: bool,
    new_tokens: int,
    rounds: int,
    repeats: int,
) -> dict[str, Any]:
    import torch

    import accuracy
    from fitbench.backends.base import RunOptions
    from fitbench.backends.torch.session import open_default

    workload, _ = accuracy.build_workload(config, fields, smoke=tiny)
    workload = dataclasses.replace(workload, new_tokens=new_tokens)
    dev = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    row: dict[str, Any] = {
        "case": label,
        "batch": workload.batch_size,
        "prompt_tokens": workload.prompt_tokens,
        "new_tokens": new_tokens,
        "tiny": tiny,
    }
    series: dict[str, list[float]] = {
        k: []
        for k in (
            "diff_no_grad_ms",
            "diff_inference_mode_ms",
            "session_diff_ms",
            "child_sampler_ms",
            "child_no_sampler_ms",
            "child_sampler_1ms_ms",
        )
    }
    prefill: list[float] = []
    generate_total: list[float] = []
    samples: list[Any] = []
    child_step: list[float] = []
    call_overhead: list[float] = []

    session = open_default(workload, RunOptions(device=device))
    model, ids, mask = session.model, session.input_ids, session.attention_mask  # type: ignore[attr-defined]

    def plain(grad_mode: Any) -> Callable[[int], None]:
        def run(k: int) -> None:
            with grad_mode():
                model.generate(ids, attention_mask=mask, max_new_tokens=k, min_new_tokens=k, do_sample=False)

        return run

    for _ in range(rounds):  # interleaved, so that drift in host speed hits every variant alike
        series["diff_no_grad_ms"].append(differenced(plain(torch.no_grad), sync, new_tokens, repeats) * 1e3)
        series["diff_inference_mode_ms"].append(
            differenced(plain(torch.inference_mode), sync, new_tokens, repeats) * 1e3
        )
        series["session_diff_ms"].append(differenced(session.decode, sync, new_tokens, repeats) * 1e3)
        for key, mode, interval in (
            ("child_sampler_ms", "as-is" if dev.type == "cuda" else "on", 0.05),
            ("child_no_sampler_ms", "off", 0.05),
            ("child_sampler_1ms_ms", "on", 0.001),
        ):
            out = child_decode(workload, device, mode, interval, min_steps=repeats)
            series[key].append(out["per_token_ms"])
            if key == "child_sampler_ms":
                child_step.append(out["decode_step_ms"])
                call_overhead.append(out["call_overhead_ms"])
                prefill.append(out["prefill_ms"])
                generate_total.append(out["generate_ms"])
                samples.append(out["nvml_samples"])
    session.close()
    for key, values in series.items():
        row[key] = round(statistics.median(values), 3)
        row[key.removesuffix("_ms") + "_rounds_ms"] = [round(v, 3) for v in values]
    row["prefill_ms"] = round(statistics.median(prefill), 3)
    row["generate_ms"] = round(statistics.median(generate_total), 3)
    row["nvml_samples"] = samples
    steps = [v for v in child_step if v is not None]
    row["child_decode_step_ms"] = round(statistics.median(steps), 3) if steps else None
    row["child_call_overhead_ms"] = round(statistics.median(call_overhead), 3)
    step = row["diff_inference_mode_ms"]
    row["per_call_overhead_ms"] = round(row["generate_ms"] - row["prefill_ms"] - (new_tokens - 1) * step, 3)
    return row


COLUMNS = (
    "diff_no_grad_ms",
    "diff_inference_mode_ms",
    "session_diff_ms",
    "child_sampler_ms",
    "child_no_sampler_ms",
    "child_sampler_1ms_ms",
    "child_decode_step_ms",
    "prefill_ms",
    "per_call_overhead_ms",
    "child_call_overhead_ms",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="toy models (CPU smoke test)")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved repetitions of every variant")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per variant per round")
    ap.add_argument("--only", help="cases whose label contains this text")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch

    if args.device == "cpu":
        torch.set_num_threads(1)  # a host-bound toy model gains nothing from intra-op threads
    rows = []
    for label, (config, fields) in CASES.items():
        if args.only and args.only not in label:
            continue
        rows.append(
            one_case(
                label,
                config,
                fields,
                device=args.device,
                tiny=args.tiny,
                new_tokens=args.new_tokens,
                rounds=args.rounds,
                repeats=args.repeats,
            )
        )
        cells = "  ".join(f"{k.removesuffix('_ms')}={rows[-1][k]}" for k in COLUMNS)
        print(f"{label:26s} {cells}", flush=True)
    on_cuda = args.device.startswith("cuda")
    doc = {
        "benchmark": "generate_overhead",
        "date": dt.date.today().isoformat(),
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if on_cuda else platform.machine(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "switch_interval_s": sys.getswitchinterval(),
        "rows": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
