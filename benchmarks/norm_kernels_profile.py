"""Kernel by kernel: where one BERT-base residual site's forward + backward spends its time.

benchmarks/dropout_norm.py times a site's forward + backward as a whole (in a CUDA graph, the
leaves' gradient accumulation included). This script runs the same site eagerly under
torch.profiler and lists each CUDA kernel's mean time per call, for fitbench's fused operator
(backends/torch/dropout_layer_norm) at the launch settings given and for inductor's compiled
dropout + residual + LayerNorm, so that the fused kernels can be compared with the bytes they move.

    PYTHONPATH=src:benchmarks python benchmarks/norm_kernels_profile.py --configs 4:8:1:4:4:3
    PYTHONPATH=src:benchmarks python benchmarks/norm_kernels_profile.py --device cpu --tiny   # smoke

A config is F_ROWS:F_WARPS:B_ROWS:B_PER_SM:B_WARPS:B_STAGES (norm_kernels' launch settings).
Prints a table; --out writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

SETTINGS = (
    "FORWARD_ROWS",
    "FORWARD_WARPS",
    "BACKWARD_ROWS",
    "BACKWARD_PROGRAMS_PER_SM",
    "BACKWARD_WARPS",
    "BACKWARD_STAGES",
)


def kernel_times(fn: Any, calls: int) -> dict[str, float]:
    """Mean device seconds per call of each kernel `fn` launches (CPU: operator self time)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            fn()
        if cuda:
            torch.cuda.synchronize()
    out: dict[str, float] = defaultdict(float)
    for event in prof.events():
        device_us = getattr(event, "device_time", 0.0) if cuda else event.self_cpu_time_total
        if cuda and event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        out[event.name[:90]] += device_us * 1e-6 / calls
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.nn.functional as F

    from fitbench.backends.torch import norm_kernels
    from fitbench.backends.torch.dropout_layer_norm import dropout_add_layer_norm

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument(
        "--configs", default="", help="comma-separated launch settings (default: the module's)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    device = args.device
    tokens, hidden = (64, 48) if args.tiny else (8192, 768)
    torch.manual_seed(0)
    x = torch.randn(tokens, hidden, device=device, requires_grad=True)
    y = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.ones(hidden, device=device, requires_grad=True)
    b = torch.zeros(hidden, device=device, requires_grad=True)
    g32 = torch.randn(tokens, hidden, device=device)
    g16 = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16)
    seed = torch.zeros((), device=device, dtype=torch.int64)

    def fused() -> None:
        out32, out16 = dropout_add_layer_norm(x, y, w, b, seed=seed, site=1, p=0.1, eps=1e-12)
        torch.autograd.backward((out32, out16), (g32, g16))

    def site(x: Any, y: Any, w: Any, b: Any) -> Any:
        out = F.layer_norm(x + F.dropout(y, 0.1, True), (hidden,), w, b, 1e-12)
        return out, out.to(torch.bfloat16)

    compiled = torch.compile(site, options={"fallback_random": True}) if device.startswith("cuda") else site

    def inductor() -> None:
        torch.autograd.backward(compiled(x, y, w, b), (g32, g16))

    rows: list[dict[str, Any]] = []
    variants: list[tuple[str, Any, dict[str, int]]] = [("inductor (fallback_random)", inductor, {})]
    for config in [c for c in args.configs.split(",") if c] or [""]:
        values = dict(zip(SETTINGS, map(int, config.split(":")), strict=True)) if config else {}
        variants.append((f"fitbench[{config or 'default'}]", fused, values))
    defaults = {n: getattr(norm_kernels, n) for n in SETTINGS}
    for name, fn, values in variants:
        for n, v in {**defaults, **values}.items():
            setattr(norm_kernels, n, v)
        times = kernel_times(fn, args.calls)
        x.grad = y.grad = w.grad = b.grad = None
        print(f"\n{name}: {sum(times.values()) * 1e6:.1f} us of kernels a call")
        for kernel, seconds in sorted(times.items(), key=lambda kv: -kv[1]):
            print(f"  {seconds * 1e6:8.1f} us  {kernel}")
            rows.append({"variant": name, "kernel": kernel, "seconds": seconds})
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"benchmark": "norm_kernels_profile", "rows": rows}, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
