"""How fast torch's grouped GEMM reads expert weights at decode shapes (a few tokens an expert).

transformers 5 runs routed experts through `torch.nn.functional.grouped_mm` (or
`torch._grouped_mm`): the token-expert pairs sorted by expert, one grouped product for gate/up and
one for down (integrations/moe.py `grouped_mm_experts_forward`, weights (experts, out, in) taken
transposed). While decoding, each expert sees a handful of rows, so the product is a stream of
expert weights; this script times it for the library's MoE shapes at 1 to 128 rows an expert,
every expert hit, and prints the weight bytes read per second and their share of the card's
streaming bandwidth (GpuSpec.stream_bandwidth_bytes_s), which the estimate assumes for them.

    python benchmarks/grouped_mm_rate.py --out benchmarks/results/grouped-mm-rate-h200-DATE.json
    python benchmarks/grouped_mm_rate.py --device cpu --tiny     # a smoke test of the bookkeeping

With --training it times the training shapes instead: hundreds to thousands of rows an expert,
drawn at random as a router at initialisation spreads them (uneven groups), the forward
product and its backward (the input's and the weights' gradients) of each grouped product, beside
one dense matmul of the same FLOPs, in TFLOP/s; and the FP32 experts autocast leaves to
grouped_mm's fallback (one mm per expert, forward and backward) at a few of those sizes.

    python benchmarks/grouped_mm_rate.py --training \
        --out benchmarks/results/grouped-mm-training-h200-DATE.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# (name, experts, hidden, expert intermediate): gate/up reads (experts, 2 x inter, hidden), down
# reads (experts, hidden, inter).
SHAPES = [
    ("mixtral-8x7b", 8, 4096, 14336),
    ("qwen3-30b-a3b", 128, 2048, 768),
    ("olmoe-1b-7b", 64, 2048, 1024),
    ("deepseek-v2-lite", 64, 2048, 1408),
]
TINY = [("tiny", 4, 64, 96)]
ROWS = (1, 2, 4, 8, 32, 128)
TRAINING_ROWS = (64, 128, 256, 512, 1024, 2048)
FP32_ROWS = (128, 512)


def grouped(torch: Any, x: Any, w: Any, offs: Any) -> Any:
    f = getattr(torch.nn.functional, "grouped_mm", None)
    wt = w.transpose(-2, -1)
    if f is not None:
        return f(x, wt, offs=offs)
    if hasattr(torch, "_grouped_mm"):
        return torch._grouped_mm(x, wt, offs=offs)
    return torch.cat(
        [x[a:b] @ wt[i] for i, (a, b) in enumerate(zip([0, *offs.tolist()[:-1]], offs.tolist(), strict=True))]
    )


def time_ms(torch: Any, fn: Any, device: str, reps: int) -> float:
    for _ in range(3):
        fn()
    if not device.startswith("cuda"):
        import time

        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def uneven_offsets(torch: Any, experts: int, rows: int, device: str) -> Any:
    """Group ends for experts * rows token-expert pairs, each sent to an expert drawn uniformly."""
    gen = torch.Generator().manual_seed(experts * 1000 + rows)
    ids = torch.randint(0, experts, (experts * rows,), generator=gen)
    counts = torch.bincount(ids, minlength=experts)
    return torch.cumsum(counts, 0).to(device=device, dtype=torch.int32)


def fallback_mm(torch: Any, x: Any, w: Any, offs: Any) -> Any:
    """grouped_mm's fallback as aten runs it for FP32: the offsets on the host, one mm a group."""
    ends = offs.tolist()
    return torch.cat([x[a:b] @ w[i].t() for i, (a, b) in enumerate(zip([0, *ends[:-1]], ends, strict=True))])


def training_rows(torch: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Forward and backward TFLOP/s of each grouped product at training sizes, beside a dense mm."""
    out: list[dict[str, Any]] = []
    head = f"{'shape':18s} {'product':8s} {'dtype':5s} {'rows/expert':>11s} {'fwd ms':>8s} {'bwd ms':>8s}"
    print(head + f" {'fwd TF/s':>8s} {'bwd TF/s':>8s} {'dense TF/s':>10s}")
    for name, experts, hidden, inter in TINY if args.tiny else SHAPES:
        for product, (out_dim, in_dim) in (("gate_up", (2 * inter, hidden)), ("down", (hidden, inter))):
            for kind in ("bf16", "fp32"):
                sizes = (2, 4) if args.tiny else TRAINING_ROWS if kind == "bf16" else FP32_ROWS
                for m in sizes:
                    row = time_product(torch, args, kind, experts, m, in_dim, out_dim)
                    row = {"shape": name, "product": product, **row}
                    out.append(row)
                    print(
                        f"{name:18s} {product:8s} {kind:5s} {m:11d} "
                        f"{row['fwd_ms']:8.3f} {row['bwd_ms']:8.3f} "
                        f"{row['fwd_tflops']:8.1f} {row['bwd_tflops']:8.1f} {row['dense_tflops']:10.1f}",
                        flush=True,
                    )
    return out


def time_product(
    torch: Any, args: argparse.Namespace, kind: str, experts: int, m: int, in_dim: int, out_dim: int
) -> dict[str, Any]:
    """One grouped product's forward and backward times (bf16 grouped_mm, or FP32 per-expert
    mms as the fallback runs them) and a dense mm of the same FLOPs."""
    dt = torch.bfloat16 if kind == "bf16" and args.device.startswith("cuda") else torch.float32
    w = (torch.randn(experts, out_dim, in_dim, device=args.device, dtype=dt) * 0.02).requires_grad_()
    offs = uneven_offsets(torch, experts, m, args.device)
    pairs = experts * m
    x = torch.randn(pairs, in_dim, device=args.device, dtype=dt, requires_grad=True)
    g = torch.randn(pairs, out_dim, device=args.device, dtype=dt)

    def run() -> Any:
        return grouped(torch, x, w, offs) if kind == "bf16" else fallback_mm(torch, x, w, offs)

    def forward() -> Any:
        with torch.no_grad():
            return run()

    a = torch.randn(pairs, in_dim, device=args.device, dtype=dt)
    b = torch.randn(in_dim, out_dim, device=args.device, dtype=dt)
    fwd = time_ms(torch, forward, args.device, args.reps)
    bwd = time_ms(torch, lambda: torch.autograd.grad(run(), (x, w), g), args.device, args.reps) - fwd
    dense = time_ms(torch, lambda: a @ b, args.device, args.reps)
    flops = 2.0 * pairs * in_dim * out_dim
    return {
        "dtype": kind,
        "experts": experts,
        "rows_per_expert": m,
        "fwd_ms": round(fwd, 4),
        "bwd_ms": round(bwd, 4),
        "fwd_tflops": round(flops / fwd / 1e9, 1),
        "bwd_tflops": round(2 * flops / max(bwd, 1e-6) / 1e9, 1),
        "dense_tflops": round(flops / dense / 1e9, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--training", action="store_true", help="training sizes, forward and backward")
    args = ap.parse_args(argv)
    import torch

    if args.training:
        rows = training_rows(torch, args)
        if args.out:
            args.out.write_text(
                json.dumps(
                    {"benchmark": "grouped_mm_rate --training", "torch": torch.__version__, "rows": rows},
                    indent=1,
                )
            )
        return 0

    from fitbench.catalog import get_gpu
    from fitbench.catalog.detect import detect_local_gpus

    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    stream = None
    if args.device.startswith("cuda"):
        found = detect_local_gpus()
        stream = (
            get_gpu(found[0].catalog_id).stream_bandwidth_bytes_s if found and found[0].catalog_id else None
        )
    rows = []
    print(f"{'shape':18s} {'product':8s} {'rows/expert':>11s} {'ms':>8s} {'TB/s':>6s} {'of stream':>9s}")
    for name, experts, hidden, inter in TINY if args.tiny else SHAPES:
        for product, (out_dim, in_dim) in (("gate_up", (2 * inter, hidden)), ("down", (hidden, inter))):
            w = torch.randn(experts, out_dim, in_dim, device=args.device, dtype=dtype) * 0.02
            for m in (1, 2) if args.tiny else ROWS:
                x = torch.randn(experts * m, in_dim, device=args.device, dtype=dtype)
                offs = torch.arange(1, experts + 1, device=args.device, dtype=torch.int32) * m
                ms = time_ms(
                    torch, lambda x=x, w=w, offs=offs: grouped(torch, x, w, offs), args.device, args.reps
                )
                weight_bytes = w.numel() * w.element_size()
                tbs = weight_bytes / (ms / 1e3) / 1e12
                share = tbs * 1e12 / stream if stream else None
                rows.append(
                    {
                        "shape": name,
                        "product": product,
                        "experts": experts,
                        "rows_per_expert": m,
                        "weight_bytes": weight_bytes,
                        "ms": round(ms, 4),
                        "weight_tb_s": round(tbs, 3),
                        "share_of_stream": None if share is None else round(share, 3),
                    }
                )
                shown = "-" if share is None else f"{share:.2f}"
                print(f"{name:18s} {product:8s} {m:11d} {ms:8.3f} {tbs:6.2f} {shown:>9s}", flush=True)
            del w
    if args.out:
        args.out.write_text(
            json.dumps({"benchmark": "grouped_mm_rate", "torch": torch.__version__, "rows": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
