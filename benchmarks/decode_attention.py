"""Which attention kernel eager `generate` runs per decode step, and what it costs.

Batched decoding of GQA models at prompts of 512-1024 tokens measured about half the speed the
estimator expects, while batch 4 at 2048 tokens and batch 16 at 1024 matched. The leading
candidate is the kernel PyTorch's scaled_dot_product_attention dispatches for a one-token query
against a long cache: depending on shapes it may pick cuDNN attention (which plans per shape),
memory-efficient attention or the math path. This script times one decode step of the same
models under each SDPA backend forced (`torch.nn.attention.sdpa_kernel`) and under the default
choice, and lists the heaviest CUDA kernels of the default per decode step.

    PYTHONPATH=src python benchmarks/decode_attention.py --out results/decode-attention.json
    PYTHONPATH=src python benchmarks/decode_attention.py --device cpu --tiny   # a smoke test

Models are built from the configs in benchmarks/configs (random weights); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).parent / "configs"

# label -> (config file, batch, prompt tokens)
CASES: dict[str, tuple[str, int, int]] = {
    "qwen2.5-1.5b b8 p1024": ("qwen2.5-1.5b.json", 8, 1024),
    "qwen2.5-1.5b b8 p512": ("qwen2.5-1.5b.json", 8, 512),
    "qwen2.5-1.5b b4 p2048": ("qwen2.5-1.5b.json", 4, 2048),
    "llama-3.2-1b b16 p1024": ("llama-3.2-1b.json", 16, 1024),
    "llama-3.2-1b b8 p1024": ("llama-3.2-1b.json", 8, 1024),
    "llama-3.2-1b b1 p1024": ("llama-3.2-1b.json", 1, 1024),
}

BACKENDS = ("default", "flash", "efficient", "cudnn", "math")


def build(config_file: str, device: str, tiny: bool) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = json.loads((CONFIGS / config_file).read_text())
    if tiny:
        fields.update(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=512,
        )
    cfg = AutoConfig.for_model(**fields)
    cfg._attn_implementation = "sdpa"
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model.eval()


def backend_context(name: str) -> Any:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }
    return contextlib.nullcontext() if name == "default" else sdpa_kernel([chosen[name]])


def decode_step_seconds(
    model: Any, batch: int, prompt: int, new: int, device: str, inference_mode: bool = False
) -> float:
    """Seconds of one decode step of eager `generate`: (t(new) - t(2)) / (new - 2), best of 3.
    `inference_mode` runs generate under torch.inference_mode (as `fitbench run` does) instead
    of torch.no_grad."""
    import torch

    grad_mode = torch.inference_mode if inference_mode else torch.no_grad

    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)
    mask = torch.ones_like(ids)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def timed(n: int) -> float:
        sync()
        t0 = time.perf_counter()
        with grad_mode():
            model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        sync()
        return time.perf_counter() - t0

    timed(4)
    return min((timed(new) - timed(2)) / (new - 2) for _ in range(3))


def heaviest_kernels(
    model: Any, batch: int, prompt: int, new: int, device: str, top: int = 12
) -> list[dict[str, Any]]:
    """The CUDA kernels with the most GPU time per decode step (generate(new) - generate(2))."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)
    mask = torch.ones_like(ids)

    def per_kernel(n: int) -> dict[str, tuple[float, int]]:
        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        out: dict[str, tuple[float, int]] = {}
        for e in prof.key_averages():
            us = getattr(e, "self_device_time_total", 0.0) or 0.0
            if us > 0 and not e.key.startswith("aten::"):
                out[e.key] = (us * 1e-6, e.count)
        return out

    per_kernel(3)
    long, short = per_kernel(new), per_kernel(2)
    rows = []
    for key, (sec, count) in long.items():
        s0, c0 = short.get(key, (0.0, 0))
        rows.append(
            {
                "kernel": key[:160],
                "seconds_per_step": (sec - s0) / (new - 2),
                "calls_per_step": (count - c0) / (new - 2),
            }
        )
    rows.sort(key=lambda r: -r["seconds_per_step"])
    return rows[:top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="two small cases (CPU smoke test)")
    ap.add_argument("--new-tokens", type=int, default=34)
    ap.add_argument("--backends", default=",".join(BACKENDS), help="SDPA backends to time")
    ap.add_argument("--only", help="cases whose label contains this text")
    ap.add_argument("--inference-mode", action="store_true", help="generate under torch.inference_mode")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch

    cases = dict(list(CASES.items())[:2]) if args.tiny else CASES
    prompt_scale = 16 if args.tiny else 1
    backends = ("default", "math") if args.device == "cpu" else tuple(args.backends.split(","))
    if args.only:
        cases = {k: v for k, v in cases.items() if args.only in k}
    results: list[dict[str, Any]] = []
    models: dict[str, Any] = {}
    for label, (cfg, batch, prompt) in cases.items():
        prompt //= prompt_scale
        model = models.get(cfg) or models.setdefault(cfg, build(cfg, args.device, args.tiny))
        row: dict[str, Any] = {"case": label, "batch": batch, "prompt_tokens": prompt, "step_seconds": {}}
        for name in backends:
            try:
                with backend_context(name):
                    row["step_seconds"][name] = decode_step_seconds(
                        model, batch, prompt, args.new_tokens, args.device, args.inference_mode
                    )
            except RuntimeError as exc:
                row["step_seconds"][name] = None
                row.setdefault("errors", {})[name] = str(exc).splitlines()[0][:200]
        if args.device.startswith("cuda") and "default" in backends:
            row["heaviest_kernels_default"] = heaviest_kernels(
                model, batch, prompt, args.new_tokens, args.device
            )
        results.append(row)
        cells = "  ".join(f"{n}={(s or float('nan')) * 1e3:7.2f}ms" for n, s in row["step_seconds"].items())
        print(f"{label:26s} {cells}", flush=True)
        for k in row.get("heaviest_kernels_default", [])[:6]:
            print(f"    {k['seconds_per_step'] * 1e3:7.3f} ms x{k['calls_per_step']:5.1f} {k['kernel'][:90]}")
    doc = {
        "benchmark": "decode_attention",
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "inference_mode": args.inference_mode,
        "results": results,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
