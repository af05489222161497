"""How fast torch.optim's Adam/AdamW update streams, per implementation and state dtype.

The estimator times the optimizer step as its passes over the parameters (speed.optimizer_kernels:
20 for foreach AdamW, 7 fused) at the card's streaming bandwidth. This script times the real step
on the local GPU over parameter lists of two layouts: an LLM's (matrices of 4096 x 11008 and
4096 x 4096) and an MoE's stacked experts (a few tensors of 64 x 2048 x 2048), in FP32 (AMP's
master weights) and BF16 (pure 16-bit training), foreach and fused. Each row prints the achieved
bandwidth (the estimator's passes x elements x element size / measured time), its share of the
card's streaming bandwidth (GpuSpec.stream_bandwidth_bytes_s, what a copy reaches) and the
estimator's time for the same update (its passes at speed.optimizer_series's share for the card,
which this script's H200 and H100 runs set).

    python benchmarks/optimizer_rate.py --out benchmarks/results/optimizer-rate-h200-DATE.json
    python benchmarks/optimizer_rate.py --out benchmarks/results/optimizer-rate-h100-DATE.json
    python benchmarks/optimizer_rate.py --device cpu --tiny   # a smoke test: sizes and bookkeeping only
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.catalog.detect import detect_local_gpus
from fitbench.estimate import speed
from fitbench.estimate.speed import FUSED_OPTIMIZER_PASSES, OPTIMIZER_PASSES

LAYOUTS = {
    # 2 x (gate, up, down) of a 7B block and its four attention matrices, 4 blocks: 1.08 G elements
    "llm": [(4096, 11008)] * 12 + [(4096, 4096)] * 16,
    # OLMoE-style stacked experts: gate_up (64, 2048, 2048) and down (64, 2048, 1024), 4 blocks
    "moe": [(64, 2048, 2048), (64, 1024, 2048)] * 4,
}
TINY = {"llm": [(64, 96)] * 4, "moe": [(4, 32, 32)] * 2}


def _params(torch: Any, shapes: list[tuple[int, ...]], dtype: Any, device: str) -> list[Any]:
    params = []
    for shape in shapes:
        p = torch.nn.Parameter(torch.randn(shape, device=device, dtype=dtype) * 0.02)
        p.grad = torch.randn_like(p) * 1e-3
        params.append(p)
    return params


def time_step(torch: Any, optimizer: Any, device: str, steps: int) -> float:
    """Median seconds of one optimizer.step() over `steps` after three warm-up steps."""
    for _ in range(3):
        optimizer.step()
    samples = []
    for _ in range(steps):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            optimizer.step()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            optimizer.step()
            samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu", help="catalog id of the card (default: detected)")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    import torch

    cuda = args.device.startswith("cuda")
    gpu_id = args.gpu or next((g.catalog_id for g in detect_local_gpus() if g.catalog_id), None) or "h200"
    gpu = get_gpu(gpu_id)
    layouts = TINY if args.tiny else LAYOUTS
    rows = []
    header = ("layout", "dtype", "impl", "elements", "ms", "TB/s", "of stream", "estimate ms")
    print("{:<6} {:<5} {:<8} {:>10} {:>8} {:>6} {:>9} {:>12}".format(*header))
    for layout, shapes in layouts.items():
        for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            for impl in ("foreach", "fused"):
                params = _params(torch, shapes, dtype, args.device)
                flags = {"foreach": True} if impl == "foreach" else {"fused": True}
                optimizer = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **flags)
                seconds = time_step(torch, optimizer, args.device, args.steps)
                elements = sum(p.numel() for p in params)
                passes = (FUSED_OPTIMIZER_PASSES if impl == "fused" else OPTIMIZER_PASSES)["adamw"]
                nbytes = passes * elements * params[0].element_size()
                rate = nbytes / seconds
                asymptote, sm_rate = speed.optimizer_series((impl, params[0].element_size()))
                share = speed.series_share(asymptote, sm_rate, gpu)
                estimate = nbytes / (gpu.stream_bandwidth_bytes_s * share)
                row = {
                    "layout": layout,
                    "dtype": dtype_name,
                    "impl": impl,
                    "tensors": len(params),
                    "elements": elements,
                    "passes": passes,
                    "seconds": seconds,
                    "bytes_per_second": rate,
                    "share_of_stream": rate / gpu.stream_bandwidth_bytes_s if cuda else None,
                    "estimate_seconds": estimate,
                }
                rows.append(row)
                share = f"{row['share_of_stream']:.2f}" if cuda else "-"
                print(
                    f"{layout:<6} {dtype_name:<5} {impl:<8} {elements / 1e6:>9.0f}M {seconds * 1e3:>8.2f} "
                    f"{rate / 1e12:>6.2f} {share:>9} {estimate * 1e3:>12.2f}",
                    flush=True,
                )
                del optimizer, params
                if cuda:
                    torch.cuda.empty_cache()
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "benchmark": "optimizer_rate",
                    "date": dt.date.today().isoformat(),
                    "gpu": gpu.id,
                    "device": torch.cuda.get_device_name() if cuda else "cpu",
                    "torch": torch.__version__,
                    "stream_bandwidth_bytes_s": gpu.stream_bandwidth_bytes_s,
                    "rows": rows,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
