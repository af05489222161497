"""How fast transformers' batched_mm experts gather their weights, by routing order and expert size.

In a decode step on a GPU, transformers' batched_mm experts (integrations/moe.py) copy the
gate/up and down matrices of every token-expert pair (`gate_up_proj[expert_ids]`) before their
batched matmuls read the copies. estimate/transformer_cost.py counts three passes over the pairs'
weights (read, write, read). Whether the gather's read comes from HBM each time depends on how
soon the same expert comes back: where an expert is small next to the card's L2 cache and the
pairs repeat it within a few tokens, part of the read is served from L2.

This script times the gather alone (CUDA events, median of repeats) for expert layouts of
published MoE models at decode pair counts, in three routing orders:

* `random`: each token's top-k of a random score (what a decode step with a random-weight router
  sees; the estimator's accuracy points run such models);
* `spread`: expert ids cycling 0..E-1, each expert's next use E pairs later (the least reuse);
* `sorted`: the random pairs sorted by expert (every repeat adjacent, the most reuse),

and prints the effective bandwidth of the gather counted as one read and one write of every
pair's weights, next to the datasheet bandwidth of the local card.

    python benchmarks/gather_reuse.py --out results/gather-reuse.json
    python benchmarks/gather_reuse.py --device cpu --tiny          # a smoke test
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

# (name, experts, expert width, hidden, top-k): gate/up is [E, 2 * width, hidden]
LAYOUTS: list[tuple[str, int, int, int, int]] = [
    ("lfm2-8b-a1b", 32, 1792, 2048, 4),
    ("qwen3-30b-a3b", 128, 768, 2048, 8),
    ("olmoe-1b-7b", 64, 1024, 2048, 8),
    ("mixtral-8x7b", 8, 14336, 4096, 2),
]
BATCHES = (1, 8, 32)


def routing(order: str, tokens: int, experts: int, top_k: int, torch: Any, device: str) -> Any:
    """Expert ids of the (token, slot) pairs in the order the gather reads them."""
    if order == "spread":
        return torch.arange(tokens * top_k, device=device) % experts
    scores = torch.rand(tokens, experts, device=device)
    ids = scores.topk(top_k, dim=-1).indices.reshape(-1)
    return ids.sort().values if order == "sorted" else ids


def time_gather(weights: Any, ids: Any, torch: Any, device: str, repeats: int) -> float:
    """Median seconds of `weights[ids]`."""
    samples = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = weights[ids]
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e-3)
        else:
            t0 = time.perf_counter()
            out = weights[ids]
            samples.append(time.perf_counter() - t0)
        del out
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="small layouts (CPU smoke test)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    layouts = [(n, e, w // 16, h // 16, k) for n, e, w, h, k in LAYOUTS[:2]] if args.tiny else LAYOUTS
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    rows = []
    for name, experts, width, hidden, top_k in layouts:
        weights = torch.randn(experts, 2 * width, hidden, device=args.device, dtype=dtype)
        expert_bytes = weights[0].numel() * weights.element_size()
        for batch in BATCHES:
            row: dict[str, Any] = {
                "layout": name,
                "experts": experts,
                "expert_mb": expert_bytes / 1e6,
                "batch": batch,
                "pairs": batch * top_k,
            }
            for order in ("random", "spread", "sorted"):
                ids = routing(order, batch, experts, top_k, torch, args.device)
                time_gather(weights, ids, torch, args.device, 3)  # warm-up
                seconds = time_gather(weights, ids, torch, args.device, args.repeats)
                moved = 2 * ids.numel() * expert_bytes
                row[order] = {
                    "seconds": seconds,
                    "gb_per_s": moved / seconds / 1e9,
                    "distinct": int(ids.unique().numel()),
                }
            rows.append(row)
        del weights
    print(f"{'layout':16} {'MB/expert':>9} {'batch':>5} {'pairs':>5}   GB/s: random  spread  sorted")
    for r in rows:
        print(
            f"{r['layout']:16} {r['expert_mb']:9.1f} {r['batch']:5d} {r['pairs']:5d}        "
            f"{r['random']['gb_per_s']:7.0f} {r['spread']['gb_per_s']:7.0f} {r['sorted']['gb_per_s']:7.0f}"
            f"  ({r['random']['distinct']} distinct)"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
        payload = {"benchmark": "gather_reuse", "device_name": device_name, "torch": torch.__version__}
        args.out.write_text(json.dumps({**payload, "rows": rows}, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
