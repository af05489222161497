"""Achieved bandwidth of memory-bound kernels across sizes: the streaming rate and the fixed cost.

The estimator times a memory-bound kernel as bytes / (datasheet bandwidth x the memory type's
streaming efficiency x the kernel's share) + a fixed cost per launch (estimate/speed.py). This
script measures what that model assumes on the local GPU: read (every byte read once, next to
nothing written: torch.sum of the tensor into one value, the stream a decode step's weight reads
are), copy (read + write), scale (x * a), add (x + y), triad (x + a * y) and a batch-norm-like
normalisation of an NCHW tensor (statistics over N, H, W per channel, then (x - mean) * rstd * w +
b) on tensors from 1 KB to 1 GB. Each size is timed with CUDA events over many back-to-back
launches; bytes count every element read and written once. It prints the curve (GB/s and share of
the datasheet bandwidth), and fits the two constants per kernel on the large and small sizes: the
streaming rate (largest sizes) and the fixed cost (the time of the smallest sizes; an upper bound
where the host issues the tiny launches more slowly than the GPU runs them, as eager code does
too). Beside each measurement it prints the estimator's time for the same kernel on the catalog
card (its memory type's streaming share, the profile's memory_efficiency or cuDNN's batch-norm
share, kernel_fixed_seconds), so the run is the check of that model: the summary gives its median
error on large and on small tensors.

read is one pass: PyTorch reduces a whole tensor to one value in a single kernel launch (its
blocks combine their partial sums through a small global buffer), as long as the tensor's byte
offsets fit 32-bit indexing (below 2 GiB; the largest size here is 1 GiB), else it splits the
tensor into several launches. On CUDA the script counts the kernels one call of each kernel at the
largest size launches (torch.profiler) and stores that count beside the row (`kernels_per_call`),
so the stored figure says whether read was one pass. --kernels runs a subset (e.g. read,copy).

    python benchmarks/memory_kernels.py --out benchmarks/results/memory-kernels-h200-DATE.json
    python benchmarks/memory_kernels.py --kernels read,copy --out DIR/memory-kernels-read.json
    python benchmarks/memory_kernels.py --device cpu --tiny --out /tmp/memory-kernels.json  # smoke test
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

KERNELS = ("read", "copy", "scale", "add", "triad", "bn_like")
# Element bytes read plus written by one launch, per element of the first tensor (read writes one
# value, nothing beside the bytes it reads).
PASSES = {"read": 1, "copy": 2, "scale": 2, "add": 3, "triad": 3, "bn_like": 3}


def sizes(tiny: bool) -> list[int]:
    """Tensor sizes in bytes (of the first input): 1 KB .. 1 GB by factors of 4 (1 KB .. 1 MB tiny)."""
    top = 1 << 20 if tiny else 1 << 30
    out, s = [], 1 << 10
    while s <= top:
        out.append(s)
        s *= 4
    return out


def _time(fn: Any, device: str, budget_s: float) -> float:
    """Seconds of one call of `fn`, from back-to-back calls (CUDA events on a GPU)."""
    import torch

    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    once = max(time.perf_counter() - t0, 1e-6)
    reps = int(min(max(budget_s / once, 3), 2000))
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e-3 / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def measure(
    kernel: str, nbytes: int, device: str, dtype_name: str, budget_s: float, *, count_kernels: bool = False
) -> dict[str, Any]:
    """One kernel at one size: seconds a launch and GB/s (`count_kernels`: also the kernels one call
    launches, on CUDA)."""
    import torch

    dtype = getattr(torch, dtype_name)
    elem = torch.empty((), dtype=dtype).element_size()
    n = max(nbytes // elem, 64)
    x = torch.randn(n, device=device, dtype=dtype)
    # The second input and the output only where the kernel uses them (1 GB each at the top size).
    y = torch.randn(n, device=device, dtype=dtype) if kernel in ("add", "triad") else x
    out = torch.empty_like(x) if kernel in ("copy", "scale", "add", "triad") else x
    if kernel == "read":
        total = torch.empty((), device=device, dtype=dtype)
        fn = lambda: torch.sum(x, dim=0, out=total)  # noqa: E731  (x is 1-D: all of it)
    elif kernel == "copy":
        fn = lambda: out.copy_(x)  # noqa: E731
    elif kernel == "scale":
        fn = lambda: torch.mul(x, 1.5, out=out)  # noqa: E731
    elif kernel == "add":
        fn = lambda: torch.add(x, y, out=out)  # noqa: E731
    elif kernel == "triad":
        fn = lambda: torch.add(x, y, alpha=1.5, out=out)  # noqa: E731
    else:  # batch norm in training: statistics per channel, then the normalisation (NCHW, 64 channels)
        c = 64
        hw = max(n // (c * 8), 1)
        xb = torch.randn(8, c, hw, 1, device=device, dtype=dtype)
        w = torch.ones(c, device=device, dtype=dtype)
        b = torch.zeros(c, device=device, dtype=dtype)
        fn = lambda: torch.nn.functional.batch_norm(xb, None, None, w, b, training=True)  # noqa: E731
        n = xb.numel()
    seconds = _time(fn, device, budget_s)
    moved = PASSES[kernel] * n * elem
    return {
        "kernel": kernel,
        "bytes_per_tensor": n * elem,
        "bytes_moved": moved,
        "seconds": seconds,
        "gb_s": moved / seconds / 1e9,
        "kernels_per_call": kernels_per_call(fn) if count_kernels and device == "cuda" else None,
    }


def kernels_per_call(fn: Any) -> int | None:
    """GPU kernels one call of `fn` launches (torch.profiler's device activity; None if the
    profiler fails): 1 says the reduction read its tensor in one pass."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    try:
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        launches = 0
        for e in prof.key_averages():
            us = getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0.0)) or 0.0
            if us > 0 and e.count and "memset" not in e.key.lower() and "memcpy" not in e.key.lower():
                launches += e.count
        return launches
    except Exception:  # a figure beside the row, never a reason to stop the run
        return None


def modelled_seconds(kernel: str, moved: float, gpu_id: str | None) -> float | None:
    """The estimator's time for one launch of `kernel` moving `moved` bytes on the catalog card:
    bytes at the streaming bandwidth times the kernel's share, plus the fixed cost per launch."""
    if not gpu_id:
        return None
    from fitbench.catalog import get_gpu
    from fitbench.estimate import resnet_cost, speed
    from fitbench.estimate.profile import get_profile

    gpu, profile = get_gpu(gpu_id), get_profile("torch", "default", use_user=False)
    share = (
        speed.own_share(resnet_cost.CUDNN_BN_NCHW_SHARE, gpu)
        if kernel == "bn_like"
        else profile.memory_efficiency
    )
    return moved / (gpu.stream_bandwidth_bytes_s * share) + profile.kernel_fixed_seconds


def fit(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Streaming rate (median GB/s of the two largest sizes) and fixed cost (median time of the two
    smallest sizes, whose bytes take a negligible share of it at that rate)."""
    by_size = sorted(rows, key=lambda r: r["bytes_moved"])
    stream = statistics.median(r["gb_s"] for r in by_size[-2:])
    fixed = statistics.median(r["seconds"] for r in by_size[:2])
    return {"stream_gb_s": stream, "fixed_us": fixed * 1e6}


def pick_kernels(text: str | None) -> tuple[str, ...]:
    """--kernels: a comma-separated subset of KERNELS, in KERNELS' order (None: all of them)."""
    if not text:
        return KERNELS
    asked = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in asked if k not in KERNELS]
    if unknown or not asked:
        raise ValueError(
            f"unknown kernel(s) {', '.join(unknown) or '(none given)'}: choose from {', '.join(KERNELS)}"
        )
    return tuple(k for k in KERNELS if k in asked)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="float32", help="float32 (default), bfloat16 or float16")
    ap.add_argument("--tiny", action="store_true", help="sizes 1 KB .. 1 MB, short timings (CPU smoke test)")
    ap.add_argument("--budget", type=float, default=0.25, help="seconds of timing per size and kernel")
    ap.add_argument("--gpu", help="catalog id, for the datasheet bandwidth (default: detected)")
    ap.add_argument("--kernels", help=f"comma-separated subset of {','.join(KERNELS)} (default: all)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        kernels = pick_kernels(args.kernels)
    except ValueError as exc:
        ap.error(f"--kernels: {exc}")
    import torch

    budget = 0.01 if args.tiny else args.budget
    datasheet = None
    gpu_id = args.gpu
    if args.device == "cuda":
        from fitbench.catalog import get_gpu
        from fitbench.catalog.detect import detect_local_gpus

        if not gpu_id:
            found = detect_local_gpus()
            gpu_id = found[0].catalog_id if found else None
        datasheet = get_gpu(gpu_id).bandwidth_bytes_s / 1e9 if gpu_id else None
    rows = []
    for kernel in kernels:
        top = sizes(args.tiny)[-1]
        for size in sizes(args.tiny):
            r = measure(kernel, size, args.device, args.dtype, budget, count_kernels=size == top)
            r["model_seconds"] = modelled_seconds(kernel, r["bytes_moved"], gpu_id)
            rows.append(r)
            share = f"{r['gb_s'] / datasheet:5.2f}" if datasheet else "    -"
            model = ""
            if r["model_seconds"]:
                err = r["model_seconds"] / r["seconds"] - 1
                model = f"  model {r['model_seconds'] * 1e6:10.2f} us ({err:+.0%})"
            if r["kernels_per_call"] is not None:
                model += f"  {r['kernels_per_call']} kernel(s) a call"
            print(
                f"{kernel:8s} {r['bytes_per_tensor'] / 1e6:10.3f} MB  {r['seconds'] * 1e6:10.2f} us  "
                f"{r['gb_s']:9.1f} GB/s  share {share}{model}"
            )
    fits = {k: fit([r for r in rows if r["kernel"] == k]) for k in kernels}
    for k, f in fits.items():
        share = f" ({f['stream_gb_s'] / datasheet:.2f} of {datasheet:.0f})" if datasheet else ""
        print(f"{k:8s} streaming {f['stream_gb_s']:8.1f} GB/s{share}, fixed cost {f['fixed_us']:.2f} us")
    checked = [r for r in rows if r["model_seconds"]]
    if checked:
        for name, part in (
            ("tensors >= 64 MB", [r for r in checked if r["bytes_per_tensor"] >= 1 << 26]),
            ("tensors <= 64 KB", [r for r in checked if r["bytes_per_tensor"] <= 1 << 16]),
        ):
            errs = [abs(r["model_seconds"] / r["seconds"] - 1) for r in part]
            if errs:
                print(
                    f"model vs measured, {name}: median abs error {statistics.median(errs):.0%}, "
                    f"worst {max(errs):.0%} ({len(errs)} rows)"
                )
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor(),
        "gpu": gpu_id,
        "datasheet_gb_s": datasheet,
        "dtype": args.dtype,
        "kernels": list(kernels),
    }
    out = {
        "benchmark": "memory_kernels",
        "date": dt.date.today().isoformat(),
        "environment": env,
        "rows": rows,
        "fits": fits,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
