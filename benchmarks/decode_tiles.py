"""Which layout of the batched decode tiles reads weights fastest, and why the first one lost.

`decode_kernels.py --batch 2,8,32` found fitbench's first batched tiles (`_*_rows_kernel`: a
program multiplies its weight rows with every sequence's activations by tl.dot) at 0.6-2.4 TB/s
on the projections with RMSNorm folded in (qkv, gate_up, LM head) and 2.4-3.5 TB/s on the ones
without (o, down), against cuBLAS' 2.5-4.1. Two suspects, timed apart here on one standalone tile
kernel with the same main loop:

1. the orientation: those tiles computed acc[rows, weight rows] = x @ W^T, so the small
   activation tile was tl.dot's A operand (M = 16 or 32 padded sequences) and Hopper's wgmma,
   which needs M >= 64, out of reach. "swap" computes acc^T = W @ x^T instead: the weight tile
   is A (M = 64 or 128 weight rows), the activations B (N = 16 or 32). On an H200 it won at
   every shape and batch (decode-tiles-h200-2026-12-05.json), and the decode kernels now use it;
2. the folded RMSNorm: each K step also sums x^2 per row ("squares") and multiplies x by the
   norm weight g before the dot ("gamma"), which puts arithmetic between the load and the
   tensor cores.

Every shape of the 6.7B model's step (qkv, o, gate_up, down, LM head) at batches 2 and 32 (16
and 32 padded rows), each layout x norm mode x tile, against cuBLAS (torch.matmul) on the same
weights; weights rotate among copies that exceed the L2, timings are CUDA graphs of many
launches (the median of several replays), and every variant is checked against float64 first.

    python benchmarks/decode_tiles.py                 # the full sweep (~1 min on an H200)
    python benchmarks/decode_tiles.py --smoke         # tiny shapes, correctness only (a CPU runs
                                                      # it under Triton's interpreter)

Prints the best variant of each shape and batch beside cuBLAS; --json FILE writes every figure.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

import torch

from fitbench.backends.torch import decode_kernels as dk  # sets up Triton's interpreter off CUDA

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode_kernels import graph_time, rel

triton = dk.triton
tl = dk.tl

DTYPE = torch.float16
EPS = 1e-6
COPIES = 6
SHAPES = {
    "qkv": (12288, 4096),
    "o": (4096, 4096),
    "gate_up": (22016, 4096),
    "down": (4096, 11008),
    "head": (32000, 4096),
}
BATCHES = (2, 32)
# (swap, tile rows, block_k, warps, stages)
TILES = [
    (False, 16, 256, 4, 4),
    (False, 32, 256, 4, 3),
    (False, 64, 128, 4, 4),
    (True, 64, 64, 4, 6),
    (True, 64, 128, 4, 4),
    (True, 64, 256, 4, 3),
    (True, 64, 128, 8, 4),
    (True, 128, 64, 4, 5),
    (True, 128, 128, 8, 4),
    (True, 32, 256, 4, 4),
]
MODES = ("plain", "squares", "gamma")  # no norm; sum x^2 only; sum x^2 and x * g before the dot


@triton.jit
def _tile_kernel(
    x_ptr,
    w_ptr,
    g_ptr,
    out_ptr,
    N,
    K: tl.constexpr,
    eps,
    BATCH,
    ROWS_PAD: tl.constexpr,
    TILE: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SWAP: tl.constexpr,
    SQUARES: tl.constexpr,
    GAMMA: tl.constexpr,
):
    """out[r, rows] = (x[r] * g) @ W[rows]^T * (1 / RMS(x[r]) with a norm) for TILE weight rows."""
    rows = tl.program_id(0) * TILE + tl.arange(0, TILE)
    seqs = tl.arange(0, ROWS_PAD)
    x_ok = seqs < BATCH
    offs_k = tl.arange(0, BLOCK_K)
    w_ptrs = w_ptr + rows[:, None].to(tl.int64) * K + offs_k[None, :]
    x_ptrs = x_ptr + seqs[:, None] * K + offs_k[None, :]
    if SWAP:
        acc = tl.zeros((TILE, ROWS_PAD), dtype=tl.float32)
    else:
        acc = tl.zeros((ROWS_PAD, TILE), dtype=tl.float32)
    squares = tl.zeros((ROWS_PAD,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        w = tl.load(w_ptrs + k0)
        x = tl.load(x_ptrs + k0, mask=x_ok[:, None], other=0.0)
        if SQUARES:
            xf = x.to(tl.float32)
            squares += tl.sum(xf * xf, axis=1)
            if GAMMA:
                g = tl.load(g_ptr + k0 + offs_k).to(tl.float32)
                x = (xf * g[None, :]).to(w.dtype)
        if SWAP:  # noqa: SIM108 (constexpr branches, compiled apart)
            acc = tl.dot(w, tl.trans(x), acc)
        else:
            acc = tl.dot(x, tl.trans(w), acc)
    if SWAP:  # noqa: SIM108
        y = tl.trans(acc)
    else:
        y = acc
    if SQUARES:
        y = y * (1.0 / tl.sqrt(squares / K + eps))[:, None]
    where = seqs[:, None] * N + rows[None, :]
    tl.store(out_ptr + where, y.to(out_ptr.dtype.element_ty), mask=x_ok[:, None])


def launch(
    x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, out: torch.Tensor, tile: tuple, mode: str
) -> None:
    swap, rows, block_k, warps, stages = tile
    n, k = w.shape
    tuning = {} if dk.INTERPRETED else {"num_warps": warps, "num_stages": stages}
    _tile_kernel[(n // rows,)](
        x,
        w,
        g,
        out,
        n,
        k,
        EPS,
        x.shape[0],
        ROWS_PAD=dk.rows_pad(x.shape[0]),
        TILE=rows,
        BLOCK_K=block_k,
        SWAP=swap,
        SQUARES=mode != "plain",
        GAMMA=mode == "gamma",
        **tuning,
    )


def reference(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, mode: str) -> torch.Tensor:
    xd, wd, gd = x.double(), w.double(), g.double()
    if mode == "plain":
        return xd @ wd.T
    scale = 1.0 / torch.sqrt((xd * xd).mean(dim=1, keepdim=True) + EPS)
    return (xd * (gd if mode == "gamma" else 1.0)) @ wd.T * scale


def check(n: int, k: int, batch: int, tile: tuple, mode: str, device: str) -> float:
    """Relative error of one variant against float64 on fresh random inputs (NaN-poisoned output)."""
    x = torch.randn(batch, k, device=device, dtype=DTYPE)
    w = torch.randn(n, k, device=device, dtype=DTYPE) * 0.02
    g = (1 + 0.1 * torch.randn(k, device=device)).to(DTYPE)
    out = torch.full((batch, n), float("nan"), device=device, dtype=DTYPE)
    launch(x, w, g, out, tile, mode)
    return rel(out, reference(x, w, g, mode))


def sweep(batches: tuple[int, ...]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, (n, k) in SHAPES.items():
        ws = [torch.randn(n, k, device="cuda", dtype=DTYPE) * 0.02 for _ in range(COPIES)]
        g = (1 + 0.1 * torch.randn(k, device="cuda")).to(DTYPE)
        wbytes = n * k * 2
        for batch in batches:
            x = torch.randn(batch, k, device="cuda", dtype=DTYPE)
            out = torch.empty(batch, n, device="cuda", dtype=DTYPE)
            t = graph_time([functools.partial(torch.matmul, x, w.t(), out=out) for w in ws])
            base = {"gemv": name, "n": n, "k": k, "batch": batch}
            rows.append({**base, "impl": "cublas", "us": t * 1e6, "TBps": wbytes / t / 1e12})
            for tile in TILES:
                for mode in MODES:
                    swap, rows_a, block_k, warps, stages = tile
                    layout = "swap" if swap else "xw"
                    label = f"{layout} t={rows_a} bk={block_k} w={warps} st={stages} {mode}"
                    try:
                        error = check(n, k, batch, tile, mode, "cuda")
                        t = graph_time([functools.partial(launch, x, w, g, out, tile, mode) for w in ws])
                    except Exception as exc:  # a tile that does not compile is a row, not a stop
                        rows.append({**base, "impl": label, "error": str(exc).splitlines()[0][:160]})
                        continue
                    rows.append(
                        {
                            **base,
                            "impl": label,
                            "mode": mode,
                            "swap": tile[0],
                            "us": t * 1e6,
                            "TBps": wbytes / t / 1e12,
                            "rel_error": error,
                        }
                    )
        del ws
        torch.cuda.empty_cache()
    return rows


def table(rows: list[dict[str, Any]]) -> None:
    print(f"{'gemv':8} {'batch':>5} {'cublas TB/s':>11}  best per layout and mode (TB/s, impl)")
    keys = sorted({(r["gemv"], r["batch"]) for r in rows}, key=lambda kb: (list(SHAPES).index(kb[0]), kb[1]))
    for name, batch in keys:
        group = [r for r in rows if r["gemv"] == name and r["batch"] == batch and "TBps" in r]
        cublas = next(r["TBps"] for r in group if r["impl"] == "cublas")
        cells = []
        for swap in (False, True):
            for mode in MODES:
                cand = [r for r in group if r.get("swap") is swap and r.get("mode") == mode]
                if cand:
                    best = max(cand, key=lambda r: r["TBps"])
                    cells.append(f"{'swap' if swap else 'xw'}/{mode} {best['TBps']:.2f}")
        print(f"{name:8} {batch:>5} {cublas:>11.2f}  " + " | ".join(cells))
    worst = max((r.get("rel_error", 0.0) for r in rows), default=0.0)
    print(f"largest relative error against float64: {worst:.2e}")
    best = {}
    for r in rows:
        if "TBps" in r and r["impl"] != "cublas":
            key = (r["gemv"], r["batch"], r["mode"])
            if key not in best or r["TBps"] > best[key]["TBps"]:
                best[key] = r
    print("best tile of each shape, batch and mode:")
    for (name, batch, mode), r in sorted(
        best.items(), key=lambda kv: (list(SHAPES).index(kv[0][0]), kv[0][1])
    ):
        print(f"  {name:8} b{batch:<3} {mode:8} {r['TBps']:.2f} TB/s  {r['impl']}")


def smoke() -> int:
    """Every layout and mode at tiny shapes, against float64 (CPU interpreter or GPU)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    worst = 0.0
    for tile in [(False, 16, 32, 4, 3), (True, 64, 32, 4, 3), (True, 32, 64, 4, 3)]:
        for mode in MODES:
            for batch in (2, 5):
                error = check(128, 128, batch, tile, mode, device)
                print(f"tile {tile} {mode:8} batch {batch}: relative error {error:.2e}")
                worst = max(worst, error)
    ok = worst < 1e-2
    print("smoke:", "ok" if ok else "FAILED", f"(worst {worst:.2e})")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, correctness only")
    parser.add_argument("--batch", default=",".join(map(str, BATCHES)), help="comma-separated batches")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    if args.smoke:
        return smoke()
    if not torch.cuda.is_available():
        print("decode_tiles: needs a CUDA GPU (or --smoke)", file=sys.stderr)
        return 2
    rows = sweep(tuple(int(b) for b in args.batch.split(",")))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "triton": triton.__version__,
                    "rows": rows,
                },
                fh,
                indent=1,
            )
    table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
