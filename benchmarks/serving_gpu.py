"""Batched generation throughput against concurrency, measured, next to fitbench's estimates.

A ~1.1B-parameter Llama-shaped model with random weights (nothing is downloaded) generates
`--new-tokens` tokens for `--concurrency` prompts of `--prompt-tokens` tokens at once, two ways:

* ``generate``: transformers' batched ``generate`` with a static cache (eager PyTorch, the
  host issues every kernel): compared with fitbench's default-profile generation estimate;
* ``cb``: transformers' continuous batching (``generate_batch``, paged KV cache, CUDA graphs
  where the installed version captures them), the closest thing to a serving engine that runs
  here: compared with fitbench's serving curve (`estimate --serve`, the tuned profile).

Decode throughput = concurrency x (new tokens - 1) / (time of the whole generation - time of a
one-token generation, i.e. the prefill). Prints a table and writes JSON (--out).

H200:  PYTHONPATH=src python benchmarks/serving_gpu.py --out benchmarks/results/serving-h200.json
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
MODEL = {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
         "intermediate_size": 8192, "vocab_size": 32000}
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": 256}


def fitbench_workload(cfg: dict[str, int], batch: int, prompt: int, new: int) -> Workload:
    arch = TransformerArch(kind="decoder", vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
                           num_layers=cfg["num_hidden_layers"], num_heads=cfg["num_attention_heads"],
                           num_kv_heads=cfg["num_key_value_heads"],
                           intermediate_size=cfg["intermediate_size"],
                           mlp="swiglu", norm="rmsnorm", position="rotary", qkv_bias=False, out_bias=False,
                           mlp_bias=False, pooler=False, num_labels=0, max_positions=8192)
    return Workload(name="llama-1b-random", arch=arch, mode="infer", precision="bf16", batch_size=batch,
                    prompt_tokens=prompt, new_tokens=new)


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


def time_generate(model: Any, c: int, prompt: int, new: int, device: str, repeats: int) -> dict[str, float]:
    """Median seconds of a batched generate of `new` tokens and of a one-token one (the prefill)."""
    import torch

    ids = torch.randint(3, model.config.vocab_size, (c, prompt), device=device)
    mask = torch.ones_like(ids)

    def run(n: int) -> float:
        _sync(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                           do_sample=False, cache_implementation="static", pad_token_id=0)
        _sync(device)
        return time.perf_counter() - t0

    run(2)  # warm-up: allocator, kernels, static cache
    full = statistics.median(run(new) for _ in range(repeats))
    first = statistics.median(run(1) for _ in range(repeats))
    return {"seconds": full, "prefill_seconds": first}


def time_continuous_batching(model: Any, c: int, prompt: int, new: int) -> dict[str, float] | dict[str, str]:
    """transformers' generate_batch over `c` requests submitted together (None where absent)."""
    import torch
    from transformers import GenerationConfig

    if not hasattr(model, "generate_batch"):
        return {"error": "this transformers has no generate_batch"}
    inputs = [torch.randint(3, model.config.vocab_size, (prompt,)).tolist() for _ in range(c)]
    gen = GenerationConfig(max_new_tokens=new, min_new_tokens=new, do_sample=False, eos_token_id=-1,
                           pad_token_id=0)
    try:
        model.generate_batch(inputs=inputs[: min(c, 4)], generation_config=gen, progress_bar=False)  # warm-up
        _sync(str(model.device))
        t0 = time.perf_counter()
        model.generate_batch(inputs=inputs, generation_config=gen, progress_bar=False)
        _sync(str(model.device))
        seconds = time.perf_counter() - t0
        one = GenerationConfig(max_new_tokens=1, min_new_tokens=1, do_sample=False, eos_token_id=-1,
                               pad_token_id=0)
        t1 = time.perf_counter()
        model.generate_batch(inputs=inputs, generation_config=one, progress_bar=False)
        _sync(str(model.device))
        return {"seconds": seconds, "prefill_seconds": time.perf_counter() - t1}
    except Exception as exc:  # the API moves between releases: record, do not crash the run
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def decode_tps(c: int, new: int, m: dict[str, Any]) -> float | None:
    if "seconds" not in m:
        return None
    decode = m["seconds"] - m["prefill_seconds"]
    return c * (new - 1) / decode if decode > 0 else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--gpu", default="h200", help="catalog card the estimates are for (default h200)")
    p.add_argument("--tiny", action="store_true", help="a tiny model (a CPU proof of the script)")
    p.add_argument("--concurrency", default="1,4,16,64,256")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--modes", default="generate,cb", help="generate, cb or both (comma-separated)")
    p.add_argument("--budget-seconds", type=float, default=150.0,
                   help="skip the remaining levels once this much time has passed (default 150)")
    p.add_argument("--out", metavar="PATH", help="write the results as JSON")
    args = p.parse_args(argv)
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
    mean_kv = args.prompt_tokens + args.new_tokens // 2
    rows = []
    for c in levels:
        if time.perf_counter() - started > args.budget_seconds:
            print(f"concurrency {c}: skipped (time budget spent)", flush=True)
            continue
        w = fitbench_workload(cfg, c, args.prompt_tokens, args.new_tokens)
        row: dict[str, Any] = {"concurrency": c,
                               "estimate_generate_tokens_per_second": estimate(w, gpu).tokens_per_second,
                               "estimate_serving_tokens_per_second":
                                   decode_point(w, gpu, c, mean_kv, "torch").tokens_per_second}
        if "generate" in modes:
            m = time_generate(model, c, args.prompt_tokens, args.new_tokens, args.device, args.repeats)
            row["generate"] = m
            row["measured_generate_tokens_per_second"] = decode_tps(c, args.new_tokens, m)
        if "cb" in modes:
            m = time_continuous_batching(model, c, args.prompt_tokens, args.new_tokens)
            row["cb"] = m
            row["measured_cb_tokens_per_second"] = decode_tps(c, args.new_tokens, m)
        rows.append(row)
        print(f"concurrency {c}: done", flush=True)
    plan = memory_plan(fitbench_workload(cfg, 1, args.prompt_tokens, args.new_tokens), gpu, ServeConfig())

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}" if a and b else "-"

    print(f"\n{'conc':>5} {'generate meas':>14} {'est (eager)':>12} {'ratio':>6} {'cb meas':>10} "
          f"{'est (serve)':>12} {'ratio':>6}")
    for r in rows:
        g, ge = r.get("measured_generate_tokens_per_second"), r["estimate_generate_tokens_per_second"]
        cb, se = r.get("measured_cb_tokens_per_second"), r["estimate_serving_tokens_per_second"]
        print(f"{r['concurrency']:>5} {g or 0:>14.0f} {ge:>12.0f} {ratio(g, ge):>6} {cb or 0:>10.0f} "
              f"{se:>12.0f} "
              f"{ratio(cb, se):>6}")
    out = {"model": cfg, "params": fitbench_workload(cfg, 1, 1, 1).param_count(), "device": args.device,
           "device_name": (torch.cuda.get_device_name() if args.device.startswith("cuda")
                           else platform.processor()),
           "torch": torch.__version__, "estimates_for": gpu.id, "prompt_tokens": args.prompt_tokens,
           "new_tokens": args.new_tokens, "serving_kv_cache_tokens": plan.kv_tokens, "rows": rows}
    try:
        import transformers

        out["transformers"] = transformers.__version__
    except ImportError:
        pass
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
