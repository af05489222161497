"""What share of the dense peak a transformer layer's GEMMs reach, by shape.

The estimator runs every matmul at one share of the peak (profiles.toml matmul_efficiency). A
GEMM's share depends on its shape: a short reduction (K) spends a larger part of each output
tile in the pipeline's fill and the epilogue, and a small output grid leaves part of the last wave
of SMs idle. This script times, in bf16 inside a CUDA graph (as the tuned step runs them), the
forward GEMM of each projection of a transformer layer and the two GEMMs of its backward
(input gradient: M x K by N; weight gradient: N x K by M), over hidden sizes and token counts,
and prints the achieved TFLOP/s and the share of the card's dense bf16 peak per shape.

    PYTHONPATH=src python benchmarks/gemm_shapes.py --out FILE.json      # ~1 min on an H200
    PYTHONPATH=src python benchmarks/gemm_shapes.py --cpu --tiny --out /tmp/g.json   # smoke test
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import graph_timing  # benchmarks/ on the path: the CUDA-graph timer

HIDDEN = (768, 1024, 2048, 4096)
TOKENS = (2048, 8192, 32768)
TINY_HIDDEN = (32,)
TINY_TOKENS = (64,)
GRAPH_CALLS = 20  # GEMMs captured per graph replay
REPLAYS = 5  # timed replays; their median is the figure


def layer_gemms(hidden: int, tokens: int) -> list[tuple[str, int, int, int]]:
    """(name, M, N, K) of a layer's forward and backward GEMMs (C[M, N] = A[M, K] @ B[K, N])."""
    ffn = 4 * hidden
    out = []
    for proj, n, k in (
        ("qkv", 3 * hidden, hidden),
        ("o", hidden, hidden),
        ("up", ffn, hidden),
        ("down", hidden, ffn),
    ):
        out.append((f"{proj} fwd", tokens, n, k))
        out.append((f"{proj} dgrad", tokens, k, n))
        out.append((f"{proj} wgrad", n, k, tokens))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument(
        "--peak-tflops", type=float, default=None, help="dense bf16 peak (default: the catalog's)"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import torch

    device = "cpu" if args.cpu else "cuda"
    dtype = torch.float32 if args.cpu else torch.bfloat16
    peak = args.peak_tflops
    if peak is None and device == "cuda":
        from fitbench.catalog.detect import detect_local_gpus, spec_for_local

        found = detect_local_gpus()
        gpu = spec_for_local(found[0]) if found else None
        peak = gpu.peak("bf16") / 1e12 if gpu is not None else None
    rows = []
    for hidden in TINY_HIDDEN if args.tiny else HIDDEN:
        for tokens in TINY_TOKENS if args.tiny else TOKENS:
            for name, m, n, k in layer_gemms(hidden, tokens):
                a = torch.randn(m, k, device=device, dtype=dtype)
                b = torch.randn(k, n, device=device, dtype=dtype)
                c = torch.empty(m, n, device=device, dtype=dtype)
                mm = lambda a=a, b=b, c=c: torch.mm(a, b, out=c)  # noqa: E731
                seconds = statistics.median(graph_timing.replay_seconds(mm, device, GRAPH_CALLS, REPLAYS))
                tflops = 2.0 * m * n * k / seconds / 1e12
                row = {
                    "hidden": hidden,
                    "tokens": tokens,
                    "gemm": name,
                    "m": m,
                    "n": n,
                    "k": k,
                    "seconds": seconds,
                    "tflops": tflops,
                    "share": tflops / peak if peak else None,
                }
                rows.append(row)
                share = f"{row['share']:.2f}" if row["share"] is not None else "-"
                print(
                    f"h{hidden:5d} t{tokens:6d} {name:12s} {m:6d}x{n:6d}x{k:6d} {seconds * 1e6:9.1f} us "
                    f"{tflops:7.1f} TFLOP/s  {share}"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "benchmark": "gemm_shapes",
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "dtype": str(dtype),
        "peak_tflops": peak,
        "rows": rows,
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
