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
    python benchmarks/conv_layout.py --score benchmarks/results/conv-layout-h200-2026-12-03.json

`--score FILE` prints today's estimate of every stored step beside the measurement (no framework
import, no GPU): the eager default profile, in the row's memory format and precision. The
estimator's native-NCHW batch-norm efficiency was fitted on one row of the 2026-12-03 file
(FIT_ROW); the other rows are out of sample.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import time
from pathlib import Path
from typing import Any

CLASSES = (
    ("layout", ("nchwtonhwc", "nhwctonchw", "transpose")),
    ("conv", ("conv", "xmma", "implicit", "wgrad", "dgrad", "fprop", "cutlass", "sm90", "sm80")),
    ("batchnorm", ("bn_", "batch_norm", "batchnorm")),
    ("cast", ("copy", "to_copy")),
)


# The one row of conv-layout-h200-2026-12-03.json that profiles.toml's bn_native_nchw_efficiency
# was fitted on: (channels_last, amp_bf16, batch, image).
FIT_ROW = (False, True, 64, 224)


def row_workload(row: dict[str, Any], *, tiny: bool = False) -> Any:
    """The fitbench workload of one stored row: ResNet-50 training with SGD momentum (foreach, as
    torch.optim picks on CUDA), FP32 (cuDNN TF32 convolutions) or AMP-bf16."""
    import accuracy

    overrides = {
        "mode": "train",
        "batch_size": row["batch"],
        "image_size": row["image"],
        "precision": "amp-bf16" if row["amp_bf16"] else "fp32",
        "optimizer": "momentum",
    }
    return accuracy.build_workload("resnet-50.json", overrides, smoke=tiny)[0]


def score(data: dict[str, Any], gpu_id: str = "h200") -> list[dict[str, Any]]:
    """Each stored row estimated by today's estimator (built-in torch default profile, the row's
    memory format): estimated and measured step seconds and the relative error."""
    from fitbench.catalog import get_gpu
    from fitbench.estimate import speed
    from fitbench.estimate.profile import get_profile

    gpu, profile = get_gpu(gpu_id), get_profile("torch", "default", use_user=False)
    rows = []
    for r in data["rows"]:
        est = speed.training_step(row_workload(r), gpu, profile, channels_last=r["channels_last"]).seconds
        key = (r["channels_last"], r["amp_bf16"], r["batch"], r["image"])
        layout = "channels_last" if r["channels_last"] else "NCHW"
        precision = "amp-bf16" if r["amp_bf16"] else "fp32"
        rows.append(
            {
                "label": f"b{r['batch']} {r['image']}px {layout} {precision}",
                "channels_last": r["channels_last"],
                "fitted": key == FIT_ROW,
                "estimated_seconds": est,
                "measured_seconds": r["step_seconds"],
                "error": est / r["step_seconds"] - 1.0,
            }
        )
    return rows


def kernel_class(name: str, classes: tuple[tuple[str, tuple[str, ...]], ...] = CLASSES) -> str:
    """The class of a CUDA kernel, from its (lower-cased) name and `classes` (name fragments, first
    match wins); 'other' when none matches."""
    low = name.lower()
    for cls, keys in classes:
        if any(k in low for k in keys):
            return cls
    return "other"


def one_config(
    *, device: str, channels_last: bool, amp: bool, batch: int, image: int, tiny: bool, steps: int
) -> dict[str, Any]:
    import torch

    from fitbench.backends.torch.models import build_model

    torch.manual_seed(0)
    workload = row_workload({"batch": batch, "image": image, "amp_bf16": amp}, tiny=tiny)
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
    return {
        "channels_last": channels_last,
        "amp_bf16": amp,
        "batch": batch,
        "image": image,
        "step_seconds": seconds,
        "kernel_seconds_by_class": by_class,
        "top_kernels": top[:12],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="a shrunk ResNet at 32 px, batch 4 (CPU smoke test)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--score", type=Path, metavar="FILE", help="estimate the stored rows of FILE and exit")
    args = ap.parse_args()
    if args.score:
        for r in score(json.loads(args.score.read_text())):
            note = "  (fitted)" if r["fitted"] else ""
            print(
                f"{r['label']:33s} estimated {r['estimated_seconds'] * 1e3:6.1f} ms  measured "
                f"{r['measured_seconds'] * 1e3:6.1f} ms  {r['error']:+6.1%}{note}"
            )
        return
    if not args.out:
        ap.error("--out is required to measure")
    import torch

    shapes = [(4, 32)] if args.tiny else [(128, 128), (64, 224), (128, 224)]
    rows = []
    for batch, image in shapes:
        for channels_last in (False, True):
            for amp in (False, True):
                rows.append(
                    one_config(
                        device=args.device,
                        channels_last=channels_last,
                        amp=amp,
                        batch=batch,
                        image=image,
                        tiny=args.tiny,
                        steps=2 if args.tiny else args.steps,
                    )
                )
                r = rows[-1]
                classes = " ".join(
                    f"{k}={v * 1e3:.1f}ms" for k, v in sorted(r["kernel_seconds_by_class"].items())
                )
                print(
                    f"b{batch} {image}px {'NHWC' if channels_last else 'NCHW'} "
                    f"{'amp-bf16' if amp else 'fp32'}: {r['step_seconds'] * 1e3:.1f} ms  {classes}"
                )
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version() if args.device == "cuda" else None,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    }
    out = {"benchmark": "conv_layout", "date": dt.date.today().isoformat(), "environment": env, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
