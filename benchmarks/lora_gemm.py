"""The rank-r products of a LoRA adapter on this GPU, beside the estimator's time for them.

A LoRA step adds two products per adapted Linear: A (in -> r) and B (r -> out), and in backward
their input and weight gradients. With r of 8-256 every one of them has a dimension of r: A's
forward and B's input gradient read a [tokens, in] or [tokens, out] matrix into a few columns,
B's forward and A's input gradient write one out of a few, the weight gradients reduce over the
tokens into r rows (cuBLAS splits them along the tokens and adds the parts). They move their
activations once and do little arithmetic per byte, so they are memory-bound at small ranks,
and the question is the share of the card's stream they reach (the estimator times them as
peft_speed.adapter_gemms at the profile's matmul shares, FP32 ones at its
fp32_adapter_gemm_stream_share, which two H100 kernel profiles set).

Per dtype (FP32 adapters beside a 16-bit base, which peft computes in FP32 with TF32 off, and
bf16: autocast's), rank and shape, this times the GPU kernels of one adapted Linear's forward and
backward of the two products (x requires a gradient, as a block's input does) with the torch
profiler over repeated calls, and prints it beside the estimate, with the stream share the
measured time implies for the estimate's bytes.

    python benchmarks/lora_gemm.py --out benchmarks/results/lora-gemm-h100-DATE.json
    python benchmarks/lora_gemm.py --device cpu --tiny     # a smoke test of the script
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import platform
import time
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.estimate import speed
from fitbench.estimate.peft_speed import adapter_gemms
from fitbench.estimate.profile import get_profile
from fitbench.workloads.presets import get_workload

RANKS = (8, 16, 64, 256)
# (in, out) of typical adapted Linears: a 1.5B model's q/o, its gate/up and down; a 7B's.
SHAPES = ((1536, 1536), (1536, 8960), (8960, 1536), (4096, 4096), (4096, 14336))
TOKENS = 4096
TINY = {"ranks": (4,), "shapes": ((32, 48),), "tokens": 64}


def measure(dtype_name: str, rank: int, fin: int, fout: int, tokens: int, device: str, reps: int) -> float:
    """Seconds of GPU kernels a call of one adapted Linear's A and B forward and backward takes (no
    elementwise passes: no dropout, no scaling): the torch profiler's kernel times over `reps`
    calls after a warm-up. Kernel time, not wall time: at these sizes a call's launches take the
    host longer than its kernels take the GPU. On a CPU: wall time (a smoke test)."""
    import torch

    dtype = torch.float32 if dtype_name == "fp32" else torch.bfloat16
    torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default: FP32 products in FP32
    a = torch.nn.Linear(fin, rank, bias=False, device=device, dtype=dtype)
    b = torch.nn.Linear(rank, fout, bias=False, device=device, dtype=dtype)
    x = torch.randn(tokens, fin, device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn(tokens, fout, device=device, dtype=dtype)

    def once() -> None:
        y = b(a(x))
        y.backward(grad)
        x.grad = a.weight.grad = b.weight.grad = None

    for _ in range(3):
        once()
    if device != "cuda":
        t0 = time.perf_counter()
        for _ in range(reps):
            once()
        return (time.perf_counter() - t0) / reps
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            once()
        torch.cuda.synchronize()
    kernels_us = 0.0
    for e in prof.key_averages():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):  # the kernels, not the ops
            us = getattr(e, "self_device_time_total", None)
            kernels_us += us if us is not None else getattr(e, "self_cuda_time_total", 0.0)
    return kernels_us / 1e6 / reps


def estimated(dtype_name: str, rank: int, fin: int, fout: int, tokens: int, gpu_id: str) -> dict[str, float]:
    """The estimator's seconds and bytes for the same products: adapter_gemms forward, twice
    that backward (input and weight gradients), timed at the dtype's rate on `gpu_id`, FP32 ones
    at the profile's fp32_adapter_gemm_stream_share (as peft_speed.step_kernels times them)."""
    profile = get_profile("torch", "default", use_user=False)
    act = 4.0 if dtype_name == "fp32" else 2.0
    fwd = adapter_gemms("x", fin, fout, rank, tokens, act)
    if dtype_name == "fp32":
        fwd = [dataclasses.replace(k, stream_share=profile.fp32_adapter_gemm_stream_share) for k in fwd]
    kernels = fwd + [dataclasses.replace(k, flops=2 * k.flops, bytes=2 * k.bytes) for k in fwd]
    workload = get_workload("llm-6b", mode="train", precision=dtype_name, seq_len=tokens)
    timing = speed.time_kernels(kernels, workload, get_gpu(gpu_id), profile, host_seconds_per_op=0.0)
    return {"seconds": timing.gpu_seconds, "bytes": sum(k.bytes for k in kernels)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu", default=None, help="the catalog card for the estimate (default: detected)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="one small shape (a smoke test)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    import torch

    ranks, shapes, tokens = RANKS, SHAPES, TOKENS
    if args.tiny:
        ranks, shapes, tokens = TINY["ranks"], TINY["shapes"], TINY["tokens"]
    gpu_id = args.gpu
    if gpu_id is None:
        gpu_id = "h100-sxm"
        if args.device == "cuda":
            from fitbench.catalog.detect import match_catalog

            props = torch.cuda.get_device_properties(0)
            gpu_id = match_catalog(props.name, props.total_memory) or gpu_id
    stream = get_gpu(gpu_id).stream_bandwidth_bytes_s
    rows: list[dict[str, Any]] = []
    header = ("dtype", "rank", "in", "out", "measured ms", "estimate ms", "est/meas", "share")
    print("{:5} {:>4} {:>6} {:>6} {:>12} {:>12} {:>8} {:>6}".format(*header))
    for dtype_name in ("fp32", "bf16"):
        for rank in ranks:
            for fin, fout in shapes:
                seconds = measure(dtype_name, rank, fin, fout, tokens, args.device, args.reps)
                est = estimated(dtype_name, rank, fin, fout, tokens, gpu_id)
                share = est["bytes"] / seconds / stream
                rows.append(
                    {
                        "dtype": dtype_name,
                        "rank": rank,
                        "in": fin,
                        "out": fout,
                        "tokens": tokens,
                        "measured_seconds": seconds,
                        "estimated_seconds": est["seconds"],
                        "estimated_bytes": est["bytes"],
                        "stream_share_of_estimated_bytes": share,
                    }
                )
                print(
                    f"{dtype_name:5} {rank:4d} {fin:6d} {fout:6d} {seconds * 1e3:12.3f} "
                    f"{est['seconds'] * 1e3:12.3f} {est['seconds'] / seconds:8.2f} {share:6.2f}"
                )
    if args.out:
        result = {
            "benchmark": "lora_gemm",
            "date": dt.date.today().isoformat(),
            "gpu": gpu_id,
            "device": torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor(),
            "environment": {"torch": torch.__version__, "python": platform.python_version()},
            "rows": rows,
        }
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
