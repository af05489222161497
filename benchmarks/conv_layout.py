"""Where an eager ResNet-50 training step spends its GPU time, by memory layout and precision.

Measured ResNet-50 steps (PyTorch default: NCHW, cudnn.benchmark off, cuDNN TF32 on) ran at
about 29 TFLOP/s in FP32 and in AMP-bf16 alike on an H200, where the estimator assumes TF32 /
bf16 tensor cores at 0.45 of peak. This script separates the candidate causes: cuDNN's layout
conversions around NCHW convolutions (nchwToNhwc / nhwcToNchw kernels), the convolution kernels
cuDNN's heuristics pick (tensor-core or not), and the elementwise work. For each of NCHW and
channels_last, FP32 and AMP-bf16, it times SGD-momentum steps and sums the profiler's CUDA
kernel time by kernel class.

    python benchmarks/conv_layout.py --out benchmarks/results/conv-layout-h200-DATE.json
    python benchmarks/conv_layout.py --device cpu --tiny --out /tmp/conv-layout.json  # smoke test
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import time
from pathlib import Path
from typing import Any

CLASSES = (("layout", ("nchwtonhwc", "nhwctonchw", "transpose")),
           ("conv", ("conv", "xmma", "implicit", "wgrad", "dgrad", "fprop", "cutlass", "sm90", "sm80")),
           ("batchnorm", ("bn_", "batch_norm", "batchnorm")),
           ("cast", ("copy", "to_copy")))


def kernel_class(name: str) -> str:
    """The class of a CUDA kernel, from its (lower-cased) name; 'other' when none matches."""
    low = name.lower()
    for cls, keys in CLASSES:
        if any(k in low for k in keys):
            return cls
    return "other"


def one_config(*, device: str, channels_last: bool, amp: bool, batch: int, image: int, tiny: bool,
               steps: int) -> dict[str, Any]:
    import torch

    import accuracy
    from fitbench.backends.torch.models import build_model

    torch.manual_seed(0)
    workload, _ = accuracy.build_workload("resnet-50.json", {"mode": "train", "batch_size": batch,
                                                             "image_size": image}, smoke=tiny)
    model, _ = build_model(workload, device=device)
    model.train()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 3, image, image, device=device).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (batch,), device=device)  # class ids valid for any head
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step() -> None:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    seconds = (time.perf_counter() - t0) / steps
    by_class: dict[str, float] = {}
    top: list[tuple[str, float]] = []
    if device == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            sync()
        for ev in prof.key_averages():
            us = getattr(ev, "device_time_total", getattr(ev, "cuda_time_total", 0.0))
            if us <= 0:
                continue
            by_class[kernel_class(ev.key)] = by_class.get(kernel_class(ev.key), 0.0) + us * 1e-6
            top.append((ev.key[:120], us * 1e-6))
        top.sort(key=lambda kv: -kv[1])
    return {"channels_last": channels_last, "amp_bf16": amp, "batch": batch, "image": image,
            "step_seconds": seconds, "kernel_seconds_by_class": by_class, "top_kernels": top[:12]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="a shrunk ResNet at 32 px, batch 4 (CPU smoke test)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import torch

    shapes = [(4, 32)] if args.tiny else [(128, 128), (64, 224), (128, 224)]
    rows = []
    for batch, image in shapes:
        for channels_last in (False, True):
            for amp in (False, True):
                rows.append(one_config(device=args.device, channels_last=channels_last, amp=amp, batch=batch,
                                       image=image, tiny=args.tiny, steps=2 if args.tiny else args.steps))
                r = rows[-1]
                classes = " ".join(f"{k}={v * 1e3:.1f}ms"
                                   for k, v in sorted(r["kernel_seconds_by_class"].items()))
                print(f"b{batch} {image}px {'NHWC' if channels_last else 'NCHW'} "
                      f"{'amp-bf16' if amp else 'fp32'}: {r['step_seconds'] * 1e3:.1f} ms  {classes}")
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version() if args.device == "cuda" else None,
           "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
           "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
           "cudnn_benchmark": torch.backends.cudnn.benchmark}
    out = {"benchmark": "conv_layout", "date": dt.date.today().isoformat(), "environment": env, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
