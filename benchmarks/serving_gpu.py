"""Batched generation throughput against concurrency, measured, next to fitbench's estimates.

A ~1.1B-parameter Llama-shaped model with random weights (nothing is downloaded) generates
`--new-tokens` tokens for `--concurrency` prompts of `--prompt-tokens` tokens at once:

* ``eager``: transformers' batched ``generate`` with its default dynamic cache (eager PyTorch,
  the host issues every kernel): compared with fitbench's default-profile generation estimate;
* ``compiled``: ``generate`` with a static cache, which transformers compiles on a GPU
  (``torch.compile``, mode reduce-overhead: CUDA graphs) in its first call, so each level is
  warmed up before it is timed: compared with fitbench's tuned profile (a compiled static-cache
  decode step), which is also what ``estimate --serve`` uses;
* ``cb`` (only when asked for): transformers' continuous batching (``generate_batch``). Its
  scheduler is Python on the host, stepping requests one batch at a time; it is shown for what
  it is, not as a serving engine: fitbench's serving curve models vLLM, which this is not.

Decode throughput: a logits processor stamps the time (after a device synchronise) at every
step; tokens/s = concurrency x (steps - 1) / (last stamp - first stamp), so prefill and setup
fall outside it (the first stamp comes after the prefill). Prints a table and writes JSON
(--out); ``--rescore FILE`` recomputes a saved run's estimates with today's estimator and prints
the README's rows.

H200:  PYTHONPATH=src python benchmarks/serving_gpu.py --out benchmarks/results/serving-h200.json
Offline: PYTHONPATH=src python benchmarks/serving_gpu.py --rescore benchmarks/results/serving-h200.json
CPU proof: PYTHONPATH=src python benchmarks/serving_gpu.py --device cpu --tiny --out /tmp/serving.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from fitbench.catalog import resolve_gpus
from fitbench.estimate.api import estimate
from fitbench.estimate.serving import ServeConfig, decode_point, memory_plan
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# ~1.1B parameters: Llama-3.2-1B's shape with a 32k vocabulary.
MODEL = {
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 8192,
    "vocab_size": 32000,
}
TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 256,
}


def fitbench_workload(cfg: dict[str, int], batch: int, prompt: int, new: int) -> Workload:
    arch = TransformerArch(
        kind="decoder",
        vocab_size=cfg["vocab_size"],
        hidden_size=cfg["hidden_size"],
        num_layers=cfg["num_hidden_layers"],
        num_heads=cfg["num_attention_heads"],
        num_kv_heads=cfg["num_key_value_heads"],
        intermediate_size=cfg["intermediate_size"],
        mlp="swiglu",
        norm="rmsnorm",
        position="rotary",
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
        pooler=False,
        num_labels=0,
        max_positions=8192,
    )
    return Workload(
        name="llama-1b-random",
        arch=arch,
        mode="infer",
        precision="bf16",
        batch_size=batch,
        prompt_tokens=prompt,
        new_tokens=new,
    )


def build_model(cfg: dict[str, int], device: str, dtype: Any) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**cfg, max_position_embeddings=8192, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype)
    return model.eval()


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _stamps(device: str) -> Any:
    """A logits processor that records when each generation step's logits are ready."""
    from transformers import LogitsProcessor

    class Stamps(LogitsProcessor):
        def __init__(self) -> None:
            self.times: list[float] = []

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            _sync(device)
            self.times.append(time.perf_counter())
            return scores

    return Stamps()


def time_generate(
    model: Any, c: int, prompt: int, new: int, device: str, repeats: int, cache: str
) -> dict[str, Any]:
    """Median decode seconds per step of a batched generate (`cache`: 'dynamic' or 'static'),
    after a warm-up call of the same shape (the static cache compiles there on a GPU)."""
    import torch
    from transformers import LogitsProcessorList

    ids = torch.randint(3, model.config.vocab_size, (c, prompt), device=device)
    mask = torch.ones_like(ids)
    extra: dict[str, Any] = (
        {"cache_implementation": "static"} if cache == "static" else {"disable_compile": True}
    )

    def run() -> tuple[float, float]:
        stamps = _stamps(device)
        _sync(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                pad_token_id=0,
                logits_processor=LogitsProcessorList([stamps]),
                **extra,
            )
        t = stamps.times
        return t[0] - t0, (t[-1] - t[0]) / max(len(t) - 1, 1)

    t_warm = time.perf_counter()
    run()  # warm-up of this shape: allocator, kernels, and the compile of a static cache
    warm = time.perf_counter() - t_warm
    runs = [run() for _ in range(repeats)]
    out: dict[str, Any] = {
        "cache": cache,
        "warmup_seconds": warm,
        "prefill_seconds": statistics.median(r[0] for r in runs),
        "decode_step_seconds": statistics.median(r[1] for r in runs),
    }
    try:
        from torch._dynamo.utils import counters

        out["compiled_graphs"] = int(counters["stats"]["unique_graphs"])
    except (ImportError, KeyError):
        pass
    return out


def time_continuous_batching(model: Any, c: int, prompt: int, new: int) -> dict[str, Any]:
    """transformers' generate_batch over `c` requests submitted together, warmed up with the same
    requests first; decode step = (all tokens - one token) / (new - 1), both warm."""
    import torch
    from transformers import GenerationConfig

    if not hasattr(model, "generate_batch"):
        return {"error": "this transformers has no generate_batch"}
    inputs = [torch.randint(3, model.config.vocab_size, (prompt,)).tolist() for _ in range(c)]

    def gen(n: int) -> Any:
        return GenerationConfig(
            max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=-1, pad_token_id=0
        )

    def run(n: int) -> float:
        _sync(str(model.device))
        t0 = time.perf_counter()
        model.generate_batch(inputs=inputs, generation_config=gen(n), progress_bar=False)
        _sync(str(model.device))
        return time.perf_counter() - t0

    try:
        warm = run(new)
        full, one = run(new), run(1)
    except Exception as exc:  # the API moves between releases: record, do not crash the run
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    # What a one-token call costs (manager start, cache setup, prefill) is outside the step.
    return {
        "warmup_seconds": warm,
        "prefill_seconds": one,
        "decode_step_seconds": max(full - one, 1e-9) / max(new - 1, 1),
    }


def estimates(cfg: dict[str, int], gpu_id: str, c: int, prompt: int, new: int) -> dict[str, float | None]:
    """Today's estimates for one concurrency: default (eager) and tuned (compiled static-cache)
    generation, and the serving curve's decode point (what --serve prints)."""
    gpu = resolve_gpus([gpu_id])[0]
    w = fitbench_workload(cfg, c, prompt, new)
    return {
        "estimate_eager_tokens_per_second": estimate(w, gpu).tokens_per_second,
        "estimate_tuned_tokens_per_second": estimate(w, gpu, exec_mode="tuned").tokens_per_second,
        "estimate_serving_tokens_per_second": decode_point(
            w, gpu, c, prompt + new // 2, "torch"
        ).tokens_per_second,
    }


def decode_tps(c: int, new: int, m: dict[str, Any]) -> float | None:
    """Tokens/s of all `c` sequences while decoding (older runs stored whole-call seconds)."""
    if "decode_step_seconds" in m:
        return c / m["decode_step_seconds"] if m["decode_step_seconds"] > 0 else None
    if "seconds" not in m:
        return None
    decode = m["seconds"] - m["prefill_seconds"]
    return c * (new - 1) / decode if decode > 0 else None


# Measured key -> the estimate it is compared with, and the column's name.
COLUMNS = (
    ("eager", "estimate_eager_tokens_per_second", "eager generate (dynamic cache)"),
    ("compiled", "estimate_tuned_tokens_per_second", "compiled generate (static cache)"),
    ("cb", "estimate_serving_tokens_per_second", "transformers CB (Python scheduler)"),
)


def rescore(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of a run with today's estimates, printed as a table and as README rows. A run from
    before the eager/compiled split measured 'generate' with a static cache: its compiled column."""
    rows = []
    for r in run["rows"]:
        r = dict(r)
        if "generate" in r and "compiled" not in r:
            r["compiled"] = r.pop("generate")
        r.update(
            estimates(
                run["model"],
                run.get("estimates_for", "h200"),
                r["concurrency"],
                run["prompt_tokens"],
                run["new_tokens"],
            )
        )
        for key, _, _ in COLUMNS:
            if isinstance(r.get(key), dict):
                r[f"measured_{key}_tokens_per_second"] = decode_tps(
                    r["concurrency"], run["new_tokens"], r[key]
                )
        rows.append(r)
    present = [col for col in COLUMNS if any(f"measured_{col[0]}_tokens_per_second" in r for r in rows)]

    def num(v: float | None) -> str:
        return f"{v:,.0f}" if v else "-"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}" if a and b else "-"

    print("decode tok/s, measured / fitbench (ratio):")
    print(f"{'conc':>5} " + " ".join(f"{key + ' meas':>14} {'est':>8} {'ratio':>6}" for key, _, _ in present))
    for r in rows:
        cells = []
        for key, est_key, _ in present:
            m = r.get(f"measured_{key}_tokens_per_second")
            cells.append(f"{num(m):>14} {num(r[est_key]):>8} {ratio(m, r[est_key]):>6}")
        print(f"{r['concurrency']:>5} " + " ".join(cells))
    print("\nREADME rows:")
    print("| concurrency | " + " | ".join(f"{label} | fitbench" for _, _, label in present) + " |")
    print("|---:|" + "---:|---:|" * len(present))
    for r in rows:
        print(
            f"| {r['concurrency']} | "
            + " | ".join(
                f"{num(r.get(f'measured_{key}_tokens_per_second'))} | {num(r[est_key])}"
                for key, est_key, _ in present
            )
            + " |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--gpu", default="h200", help="catalog card the estimates are for (default h200)")
    p.add_argument("--tiny", action="store_true", help="a tiny model (a CPU proof of the script)")
    p.add_argument("--concurrency", default="1,4,16,64,256")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--modes",
        default="eager,compiled",
        help="eager, compiled, cb (comma-separated; cb is transformers' continuous batching)",
    )
    p.add_argument(
        "--budget-seconds",
        type=float,
        default=150.0,
        help="skip the remaining levels once this much time has passed (default 150)",
    )
    p.add_argument("--out", metavar="PATH", help="write the results as JSON")
    p.add_argument("--rescore", metavar="FILE", help="re-score a saved run with today's estimator (no torch)")
    args = p.parse_args(argv)
    if args.rescore:
        rescore(json.loads(Path(args.rescore).read_text()))
        return 0
    started = time.perf_counter()

    import torch

    cfg = TINY if args.tiny else MODEL
    levels = [int(x) for x in args.concurrency.split(",")]
    if args.tiny:
        levels = [c for c in levels if c <= 16] or [1]
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    model = build_model(cfg, args.device, dtype)
    gpu = resolve_gpus([args.gpu])[0]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    rows = []
    for c in levels:
        if time.perf_counter() - started > args.budget_seconds:
            print(f"concurrency {c}: skipped (time budget spent)", flush=True)
            continue
        row: dict[str, Any] = {"concurrency": c}
        for mode in modes:
            if mode in ("eager", "compiled"):
                row[mode] = time_generate(
                    model,
                    c,
                    args.prompt_tokens,
                    args.new_tokens,
                    args.device,
                    args.repeats,
                    "dynamic" if mode == "eager" else "static",
                )
            elif mode == "cb":
                row[mode] = time_continuous_batching(model, c, args.prompt_tokens, args.new_tokens)
        rows.append(row)
        print(f"concurrency {c}: done ({time.perf_counter() - started:.0f} s)", flush=True)
    plan = memory_plan(fitbench_workload(cfg, 1, args.prompt_tokens, args.new_tokens), gpu, ServeConfig())
    out = {
        "model": cfg,
        "params": fitbench_workload(cfg, 1, 1, 1).param_count(),
        "device": args.device,
        "device_name": (
            torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor()
        ),
        "torch": torch.__version__,
        "estimates_for": gpu.id,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "serving_kv_cache_tokens": plan.kv_tokens,
        "rows": rows,
    }
    try:
        import transformers

        out["transformers"] = transformers.__version__
    except ImportError:
        pass
    out["rows"] = rescore(out)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
