"""Speed benchmark: the code most users write, the tuned code, and the roofline, side by side.

For the brief's three scenarios, on the local CUDA GPU, through fitbench's own runner (a fresh
child process per measurement, as `fitbench run` does):

    resnet50-cifar10   ResNet-50 training, CIFAR-10 shapes, batch 128        (images/s)
    bert-base-imdb     BERT-base fine-tuning, seq 512, batch 16, AMP         (step time)
    llm-6b             6.7B Llama-style decoder, FP16, batch 1, 50 + 100     (decode tokens/s)
    llama-1b-train     Llama-3.2-1B full fine-tune, seq 2048, batch 8,       (step time, MFU)
                       amp-bf16, AdamW
    llama-1b-lora      the same with LoRA rank 16 on attention and MLP       (step time, MFU)

Training rows carry MFU (model FLOPs utilization: the step's model FLOPs, without recomputation,
over the step time and the card's dense peak at the precision in effect; fitbench.estimate.
model_flops), measured and estimated. The two Llama-3.2-1B rows are the bundled model's config
(`fitbench models`); with --tiny they run the tiny Llama preset with the same settings at seq 64.

Each scenario runs with `--exec default` and `--exec tuned`, next to the estimator's tuned
prediction and the roofline (the step's FLOPs at the dense peak or its bytes at the datasheet
bandwidth, whichever takes longer; for decoding, every weight byte read once per token). The
table goes to stdout; every number (measurements with their raw samples, estimates, diagnoses,
versions, machine) goes to benchmarks/results/speed-<gpu>-<date>.json.

The tuned runs take RunOptions' default compile choice, as `fitbench run --exec tuned` does: on
a CUDA GPU with Triton the training and classification steps are compiled (torch.compile,
inductor) before capture, 30-45 s once per measurement, which the timeout allows
(TIMEOUT_S); each run's `compiled_step` and `compile_seconds` are kept beside its figures.

    python benchmarks/speed.py                      # the local GPU, about 6 minutes
    python benchmarks/speed.py --only llm-6b        # one scenario
    python benchmarks/speed.py --only llama-1b-train --only llama-1b-lora   # decoder training
    python benchmarks/speed.py --cpu --tiny         # tiny models on the CPU: checks the script
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import re
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fitbench
from fitbench.advise.diagnosis import compute_class, diagnose
from fitbench.backends.base import RunOptions
from fitbench.core.gpu import GpuSpec
from fitbench.core.units import format_rate, format_seconds
from fitbench.estimate.api import estimate
from fitbench.estimate.execution import precision_as_run
from fitbench.measure.runner import measure
from fitbench.records.measurement import Measurement
from fitbench.records.run import EstimateSummary
from fitbench.results.table import render_table
from fitbench.workloads import library
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
#: seconds per measurement: loading, a tuned step's compile (30-45 s on an H200, up to a minute
#: on a slower host), capture, warm-up and the timed windows.
TIMEOUT_S = 300.0


@dataclass(frozen=True, kw_only=True)
class Target:
    """A goal for the tuned run on a real GPU: `metric` compared with `value`."""

    metric: str  # samples_per_second | step_seconds | decode_tokens_per_second | mfu (the diagnosis's)
    at_least: bool  # True: measured >= value; False: measured <= value
    value: float
    text: str


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A preset by `name` with `overrides`, or a bundled model (`model`, `fitbench models`) with
    them; a bundled model's tiny variant is the tiny preset `tiny_preset` with the same overrides
    and `tiny_overrides` on top (bundled models have no tiny variant of their own)."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    target: Target | None = None
    model: str | None = None
    tiny_preset: str = "llm-6b"
    tiny_overrides: dict[str, Any] = field(default_factory=dict)

    def workload(self, *, tiny: bool) -> Workload:
        if self.model is None:
            return get_workload(self.name, tiny=tiny, **self.overrides)
        if tiny:
            asked = {**self.overrides, **self.tiny_overrides}
            return get_workload(self.tiny_preset, tiny=True).with_overrides(**asked)
        return library.workload_for_model(self.model, **self.overrides)


# A 1B-class decoder trained at seq 2048: batch 8 takes ~80 GiB of the H200's 140 (estimate).
LLAMA_1B_TRAIN = {
    "mode": "train",
    "seq_len": 2048,
    "batch_size": 8,
    "precision": "amp-bf16",
    "optimizer": "adamw",
}
TINY_TRAIN = {"seq_len": 64, "batch_size": 2}


SCENARIOS = (
    Scenario(
        name="resnet50-cifar10",
        target=Target(metric="samples_per_second", at_least=True, value=20_000, text=">= 20,000 images/s"),
    ),
    Scenario(
        name="bert-base-imdb",
        overrides={"precision": "amp-fp16"},  # the brief's AMP run; tuned runs amp-bf16 where it can
        target=Target(metric="step_seconds", at_least=False, value=0.022, text="<= 22 ms per step"),
    ),
    Scenario(
        name="llm-6b",
        target=Target(metric="decode_tokens_per_second", at_least=True, value=250, text=">= 250 tokens/s"),
    ),
    Scenario(
        name="llama-1b-train",
        model="llama-3.2-1b-instruct",
        overrides=LLAMA_1B_TRAIN,
        tiny_overrides=TINY_TRAIN,
        target=Target(metric="mfu", at_least=True, value=0.45, text=">= 45 % MFU"),
    ),
    Scenario(
        name="llama-1b-lora",
        model="llama-3.2-1b-instruct",
        overrides={**LLAMA_1B_TRAIN, "peft": "lora", "lora_rank": 16, "lora_targets": "attention-mlp"},
        tiny_overrides=TINY_TRAIN,
    ),
)


# -- the card ----------------------------------------------------------------------------------
def local_gpu(gpu_id: str | None, device: str) -> tuple[GpuSpec | None, str | None]:
    """The catalog card to estimate for: --gpu, or the local GPU found through NVML."""
    from fitbench.cli.run import pick_gpu

    return pick_gpu(gpu_id, device)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


# -- one scenario --------------------------------------------------------------------------------
def tuned_precision(workload: Workload, gpu: GpuSpec | None, measured: dict[str, Any] | None) -> str:
    """The precision the tuned run used (from its notes), or the one it will use on `gpu`."""
    if measured and measured.get("precision_in_effect"):
        return str(measured["precision_in_effect"])
    return precision_as_run(workload, "tuned", gpu)


def headline(m: dict[str, Any], workload: Workload) -> tuple[float | None, str]:
    """The number a scenario is judged by, and its unit."""
    if workload.is_generation:
        return m.get("decode_tokens_per_second"), "tok/s"
    if workload.is_resnet:
        return m.get("samples_per_second"), "img/s"
    step = m.get("step_seconds")
    return step, "s/step"


def roofline(workload: Workload, est: dict[str, Any] | None, gpu: GpuSpec | None) -> tuple[float | None, str]:
    """The roofline in the headline's unit: the step's FLOPs at the dense peak of its precision or
    its bytes at the datasheet bandwidth, whichever is longer (for decoding, the estimator's
    bandwidth roofline: every weight and KV-cache byte read once per token)."""
    if est is None or gpu is None:
        return None, ""
    if workload.is_generation:
        return est.get("roofline_tokens_per_second"), "tok/s"
    peak = gpu.peak(compute_class(workload.precision, workload.family))
    seconds = max(est["flops_per_step"] / peak, est["bytes_per_step"] / gpu.bandwidth_bytes_s)
    if seconds <= 0:
        return None, ""
    if workload.is_resnet:
        return workload.batch_size / seconds, "img/s"
    return seconds, "s/step"


def run_scenario(
    scenario: Scenario, *, tiny: bool, device: str, gpu: GpuSpec | None, min_seconds: float | None
) -> dict[str, Any]:
    workload = scenario.workload(tiny=tiny)
    out: dict[str, Any] = {
        "scenario": scenario.name,
        "tiny": tiny,
        "workload": workload.to_dict(),
        "runs": {},
    }
    for mode in ("default", "tuned"):
        print(f"  {scenario.name}: --exec {mode} ...", file=sys.stderr, flush=True)
        m = measure(
            workload,
            "torch",
            # compile_step left to the mode: the tuned step compiled where inductor can
            RunOptions(device=device, exec_mode=mode),
            timeout_s=TIMEOUT_S,
            min_seconds=min_seconds,
        )
        ran = workload
        if mode == "tuned":
            ran = workload.replace(precision=tuned_precision(workload, gpu, m))
        est = None
        if gpu is not None:
            est = estimate(ran, gpu, framework="torch", exec_mode=mode).to_dict()
        summary = EstimateSummary.from_dict(est) if est is not None else None
        diag = diagnose(Measurement.from_dict(m), summary, gpu).to_dict()
        value, unit = headline(m, workload)
        roof, roof_unit = roofline(ran, est, gpu)
        notes = m.get("backend_notes") or {}
        out["runs"][mode] = {
            "status": m.get("status"),
            "error": m.get("error"),
            "precision": m.get("precision_in_effect") or ran.precision,
            "headline": value,
            "headline_unit": unit,
            "estimate_headline": headline_from_estimate(est, workload),
            "roofline": roof,
            "roofline_unit": roof_unit,
            "mfu": diag.get("mfu"),
            "estimate_mfu": est.get("mfu") if est is not None else None,
            "compiled_step": notes.get("compiled_step"),
            "compile_seconds": notes.get("compile_seconds"),
            "measurement": m,
            "estimate": est,
            "diagnosis": diag,
        }
        if m.get("status") != "ok":
            print(f"    {m.get('status')}: {m.get('error')}", file=sys.stderr, flush=True)
        else:
            # the table comes at the end: a run stopped by a time limit still shows each row here
            measured = _fmt(value, unit)
            estimated = _fmt(out["runs"][mode]["estimate_headline"], unit)
            print(f"    {measured} (estimate {estimated})", file=sys.stderr, flush=True)
    default, tuned = out["runs"]["default"]["measurement"], out["runs"]["tuned"]["measurement"]
    out["speedup"] = speedup(default, tuned, workload)
    # Whether the tuned training / classification step ran compiled (generation compiles or
    # fuses its decode step either way: the notes say which, the table does not repeat it).
    out["tuned_step_compiled"] = None if workload.is_generation else out["runs"]["tuned"]["compiled_step"]
    target = scenario.target
    if target is not None:
        value = target_value(target, out["runs"]["tuned"])
        judged = not tiny and device.startswith("cuda")
        met = None
        if judged and value is not None:
            met = value >= target.value if target.at_least else value <= target.value
        out["target"] = {
            "metric": target.metric,
            "goal": target.text,
            "value": value,
            "met": met,
            "judged": judged,
        }
    return out


def target_value(target: Target, run: dict[str, Any]) -> float | None:
    """The tuned run's figure a target judges: a measurement's, or the diagnosis's MFU."""
    if run["status"] != "ok":
        return None
    if target.metric == "mfu":
        return run["mfu"]
    return run["measurement"].get(target.metric)


def headline_from_estimate(est: dict[str, Any] | None, workload: Workload) -> float | None:
    if est is None:
        return None
    if workload.is_generation:
        return est.get("tokens_per_second")
    if workload.is_resnet:
        return est.get("samples_per_second")
    return est.get("step_seconds")


def speedup(default: dict[str, Any], tuned: dict[str, Any], workload: Workload) -> float | None:
    if default.get("status") != "ok" or tuned.get("status") != "ok":
        return None
    if workload.is_generation:
        a, b = default.get("decode_tokens_per_second"), tuned.get("decode_tokens_per_second")
        return b / a if a and b else None
    a, b = default.get("step_seconds"), tuned.get("step_seconds")
    return a / b if a and b else None


# -- output ---------------------------------------------------------------------------------------
def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s/step":
        return format_seconds(value)
    return format_rate(value, unit)


def table(results: list[dict[str, Any]]) -> str:
    rows: list[list[str]] = []
    for r in results:
        for mode, run in r["runs"].items():
            diag = run["diagnosis"]
            of_roof = ""
            if run["headline"] and run["roofline"]:
                ratio = run["headline"] / run["roofline"]
                of_roof = f"{(1 / ratio if run['headline_unit'] == 's/step' else ratio):.0%}"
            measured = _fmt(run["headline"], run["headline_unit"]) if run["status"] == "ok" else run["status"]
            rows.append(
                [
                    r["scenario"] + (" (tiny)" if r["tiny"] else ""),
                    mode,
                    run["precision"] or "",
                    measured,
                    _fmt(run["estimate_headline"], run["headline_unit"]),
                    _fmt(run["roofline"], run["roofline_unit"] or run["headline_unit"]),
                    of_roof,
                    _share(run.get("mfu")),
                    _share(run.get("estimate_mfu")),
                    diag.get("bottleneck") or "",
                ]
            )
        extra = []
        if r.get("speedup"):
            extra.append(f"tuned {r['speedup']:.2f}x default")
        compiled = r.get("tuned_step_compiled")
        if compiled is False:
            extra.append("tuned step uncompiled")
        elif compiled:
            extra.append(f"tuned step compiled in {r['runs']['tuned'].get('compile_seconds') or 0:.0f} s")
        target = r.get("target")
        if target and target["judged"]:
            verdict = {True: "met", False: "NOT met", None: "not measured"}[target["met"]]
            extra.append(f"target {target['goal']}: {verdict}")
        if extra:
            rows.append(["", "", "", "; ".join(extra), "", "", "", "", "", ""])
    head = [
        "scenario",
        "exec",
        "precision",
        "measured",
        "estimate",
        "roofline",
        "of roofline",
        "MFU",
        "est. MFU",
        "bottleneck",
    ]
    return render_table(head, rows, align="lllrrrrrrl")


def _share(value: float | None) -> str:
    """MFU as a percentage; '-' where there is none (not training, a CPU run, no estimate)."""
    return "-" if value is None else f"{value:.1%}"


def environment(results: list[dict[str, Any]]) -> dict[str, Any]:
    for r in results:
        for run in r["runs"].values():
            env = run["measurement"].get("environment") or {}
            if env:
                return env
    return {}


def run_header(
    benchmark: str,
    argv: list[str] | None,
    *,
    started: dt.datetime,
    t0: float,
    device: str,
    device_name: str | None,
) -> dict[str, Any]:
    """The head of a benchmark's JSON record (compiled_step.py, inductor_options.py): which script
    with which arguments, when, for how long, on which machine."""
    return {
        "benchmark": benchmark,
        "fitbench_version": fitbench.__version__,
        "command": " ".join(
            ["python", f"benchmarks/{benchmark}.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "elapsed_seconds": round(time.perf_counter() - t0, 1),
        "machine": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "device": device,
            "device_name": device_name,
        },
    }


def output_path(folder: Path, gpu_slug: str) -> Path:
    day = dt.date.today().isoformat()
    path = folder / f"speed-{gpu_slug}-{day}.json"
    n = 2
    while path.exists():
        path = folder / f"speed-{gpu_slug}-{day}-{n}.json"
        n += 1
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cpu", action="store_true", help="measure on the CPU (no CUDA needed)")
    parser.add_argument("--tiny", action="store_true", help="tiny variants of the scenarios")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default cuda; cpu with --cpu)")
    parser.add_argument("--gpu", default=None, help="catalog GPU for estimates (default: the local GPU)")
    parser.add_argument("--only", action="append", choices=[s.name for s in SCENARIOS], help="one scenario")
    parser.add_argument("--min-seconds", type=float, default=None, help="timed seconds per run (default 3)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON result")
    args = parser.parse_args(argv)

    device = args.device or ("cpu" if args.cpu else "cuda")
    gpu, note = local_gpu(args.gpu, device)
    if note:
        print(f"note: {note}", file=sys.stderr)
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only]
    started = dt.datetime.now(dt.UTC)
    results: list[dict[str, Any]] = []
    path: Path | None = None
    for scenario in chosen:
        results.append(
            run_scenario(scenario, tiny=args.tiny, device=device, gpu=gpu, min_seconds=args.min_seconds)
        )
        # rewritten after each scenario: a run stopped midway keeps the rows it measured
        path = _write_record(args, results, device=device, gpu=gpu, started=started, path=path)
    print(table(results))
    print(f"\nwrote {path}")
    failed = [r["scenario"] for r in results for run in r["runs"].values() if run["status"] != "ok"]
    return 1 if failed else 0


def _write_record(
    args: argparse.Namespace,
    results: list[dict[str, Any]],
    *,
    device: str,
    gpu: GpuSpec | None,
    started: dt.datetime,
    path: Path | None,
) -> Path:
    """Write the JSON record of the scenarios measured so far to `path` (None: a new file); its path."""
    device_name = next(
        (
            run["measurement"].get("device_name")
            for r in results
            for run in r["runs"].values()
            if run["measurement"].get("device_name")
        ),
        None,
    )
    gpu_slug = "cpu" if device == "cpu" else (gpu.id if gpu is not None else slug(device_name or device))
    record = {
        "benchmark": "speed",
        "fitbench_version": fitbench.__version__,
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
            "device": device,
            "device_name": device_name,
        },
        "versions": environment(results),
        "gpu": {
            "id": gpu.id,
            "name": gpu.name,
            "bandwidth_bytes_s": gpu.bandwidth_bytes_s,
            "peak_flops": dict(gpu.peak_flops),
        }
        if gpu is not None
        else None,
        "settings": {"tiny": args.tiny, "min_seconds": args.min_seconds, "timeout_s": TIMEOUT_S},
        "scenarios": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = path or output_path(args.out, gpu_slug)
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
