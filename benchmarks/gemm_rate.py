"""The rate a long torch.mm sustains on this GPU, per precision: the catalog's gemm_tflops.

The estimator runs a card's matmuls at the profile's share of the datasheet peak times the card's
published sustained GEMM share over the reference card's (estimate/speed.py gemm_rate_factor;
the reference is the H200, on which the profile's matmul and attention shares were measured).
This script measures that share the way the catalog's published figures were taken: torch.mm of
square matrices at PyTorch's defaults (FP32 with TF32 off, TF32 with
torch.backends.cuda.matmul.allow_tf32 on, FP16 and BF16 inputs), at 8192 and 10240, each run for
`--seconds` so that the card settles at the clock its power limit holds (a 72 W L4 runs a 35 ms
burst 40 % faster than a long run). Per size it prints TFLOP/s and the share of the catalog
peak; the summary row per precision is the mean of the two sizes, the catalog's statistic.

    python benchmarks/gemm_rate.py --out benchmarks/results/gemm-rate-h200-DATE.json
    python benchmarks/gemm_rate.py --device cpu --tiny --out /tmp/gemm-rate.json  # smoke test
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

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
SIZES = (8192, 10240)
TINY_SIZES = (128, 256)


def _dtype(precision: str) -> Any:
    import torch

    return {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[
        precision
    ]


def measure(precision: str, n: int, device: str, seconds: float) -> dict[str, Any]:
    """TFLOP/s of torch.mm(a, b) on n x n matrices, timed over back-to-back calls for `seconds`."""
    import torch

    tf32_before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        a = torch.randn(n, n, device=device, dtype=_dtype(precision))
        b = torch.randn(n, n, device=device, dtype=_dtype(precision))
        out = torch.empty_like(a)
        torch.mm(a, b, out=out)  # library heuristics, first launch
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        sync()
        once = max(time.perf_counter() - t0, 1e-6)
        reps = int(max(seconds / once, 3))
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b, out=out)
        sync()
        elapsed = time.perf_counter() - t0
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    flops = 2.0 * n**3 * reps
    tflops = flops / elapsed / 1e12
    return {"precision": precision, "n": n, "reps": reps, "seconds": elapsed, "tflops": tflops}


def summarise(rows: list[dict[str, Any]], peaks: dict[str, float] | None) -> dict[str, dict[str, Any]]:
    """Per precision: the mean TFLOP/s over the sizes (the catalog's gemm_tflops) and its share of
    the catalog peak, where the card is in the catalog."""
    out: dict[str, dict[str, Any]] = {}
    for p in PRECISIONS:
        part = [r["tflops"] for r in rows if r["precision"] == p]
        if not part:
            continue
        mean = statistics.mean(part)
        peak = (peaks or {}).get(p)
        out[p] = {"tflops": round(mean, 2), "share_of_peak": round(mean / peak, 3) if peak else None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="128 and 256 matrices (CPU smoke test)")
    ap.add_argument("--seconds", type=float, default=8.0, help="timing per precision and size")
    ap.add_argument("--gpu", help="catalog id, for the datasheet peaks (default: detected)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import torch

    seconds = 0.05 if args.tiny else args.seconds
    sizes = TINY_SIZES if args.tiny else SIZES
    gpu_id, peaks = args.gpu, None
    if args.device == "cuda":
        from fitbench.catalog import get_gpu
        from fitbench.catalog.detect import detect_local_gpus

        if not gpu_id:
            found = detect_local_gpus()
            gpu_id = found[0].catalog_id if found else None
        if gpu_id:
            card = get_gpu(gpu_id)
            peaks = {p: card.peak(p) / 1e12 for p in PRECISIONS}
    rows = []
    for p in PRECISIONS:
        for n in sizes:
            r = measure(p, n, args.device, seconds)
            rows.append(r)
            share = f"{r['tflops'] / peaks[p]:.3f}" if peaks else "-"
            print(f"{p:5s} {n:6d}  {r['tflops']:9.2f} TFLOP/s  share of peak {share}  ({r['reps']} calls)")
    summary = summarise(rows, peaks)
    line = ", ".join(f"{p} = {s['tflops']}" for p, s in summary.items())
    print(f"gemm_tflops = {{ {line} }}")
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor(),
        "gpu": gpu_id,
        "seconds_per_size": seconds,
    }
    out = {
        "benchmark": "gemm_rate",
        "date": dt.date.today().isoformat(),
        "environment": env,
        "rows": rows,
        "summary": summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
