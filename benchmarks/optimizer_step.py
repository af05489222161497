"""What one torch.optim step allocates beyond its state, per implementation: the figures behind
the estimator's optimizer-step temporaries (optimizer.optimizer_step_scratch).

For each model (the torch backend's own, FP32 weights, random gradients) and each optimizer
(Adam, AdamW, momentum SGD) x implementation (foreach, fused, for-loop), the second step (state
exists) is measured:

  on CUDA  torch.cuda.max_memory_allocated() during the step minus memory_allocated() before
           it (and the same for reserved memory: what the caching allocator keeps on top)
  on CPU   the most bytes of operator-created tensors alive at once (backends.torch.live_tensors)

and printed beside the estimator's figure and as a multiple of the parameter bytes.

    python benchmarks/optimizer_step.py --out benchmarks/results/optimizer-step-h200.json
    python benchmarks/optimizer_step.py --device cpu --tiny --out /tmp/optimizer-step.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
from pathlib import Path
from typing import Any

from fitbench.estimate.optimizer import optimizer_step_scratch
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

# A 1.1B decoder of TinyLlama's shape (Zhang et al. 2024: 22 layers, width 2048, 4 KV heads),
# ResNet-50 (ImageNet head) and BERT-large: LLM scale, and the models the old factor came from.
TINYLLAMA = TransformerArch(
    kind="decoder",
    vocab_size=32000,
    hidden_size=2048,
    num_layers=22,
    num_heads=32,
    num_kv_heads=4,
    intermediate_size=5632,
    mlp="swiglu",
    norm="rmsnorm",
    position="rotary",
    qkv_bias=False,
    out_bias=False,
    mlp_bias=False,
    pooler=False,
    model_type="llama",
)
OPTIMIZERS = ("adam", "adamw", "momentum")
IMPLS = ("foreach", "fused", "for-loop")


def workloads(tiny: bool) -> list[Workload]:
    if tiny:
        shape = {"llm-6b": {"seq_len": 16}}
        return [
            get_workload(n, tiny=True, mode="train", precision="fp32", **shape.get(n, {}))
            for n in ("resnet50-cifar10", "bert-base-imdb", "llm-6b")
        ]
    return [
        Workload(name="decoder-1.1b", arch=TINYLLAMA, seq_len=512, precision="fp32"),
        get_workload("resnet50-imagenet", precision="fp32"),
        get_workload("bert-large-imdb", precision="fp32"),
    ]


def measure_step(workload: Workload, device: str) -> dict[str, int | None]:
    """Bytes the second optimizer step allocates beyond its inputs (and reserves, on CUDA)."""
    import torch

    from fitbench.backends.torch.live_tensors import LiveTensors
    from fitbench.backends.torch.models import build_model
    from fitbench.backends.torch.session import make_optimizer

    torch.manual_seed(0)
    model, _ = build_model(workload, device=device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(workload.optimizer, params, workload.optimizer_impl)
    out: dict[str, int | None] = {}
    for _ in range(2):  # the second step: state exists
        for p in params:
            p.grad = torch.randn_like(p)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
            optimizer.step()
            torch.cuda.synchronize()
            out = {
                "allocated": torch.cuda.max_memory_allocated() - before,
                "reserved": torch.cuda.max_memory_reserved() - reserved,
            }
        else:
            counter = LiveTensors()
            with counter:
                optimizer.step()
            out = {"allocated": counter.peak, "reserved": None}
    del optimizer, model, params
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="the tiny presets (a CPU smoke test)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args()
    import torch

    rows: list[dict[str, Any]] = []
    print(
        f"{'model':18} {'optimizer':9} {'impl':8} {'params MiB':>10} {'allocated MiB':>13} "
        f"{'x params':>8} {'estimate MiB':>12} {'reserved MiB':>12}"
    )
    for base in workloads(args.tiny):
        for name in OPTIMIZERS:
            for impl in IMPLS:
                w = base.replace(optimizer=name, optimizer_impl=impl)
                got = measure_step(w, args.device)
                param_bytes = w.param_count() * 4
                est = optimizer_step_scratch(w, "torch")
                row = {
                    "model": w.name,
                    "params": w.param_count(),
                    "optimizer": name,
                    "impl": impl,
                    "allocated_bytes": got["allocated"],
                    "reserved_bytes": got["reserved"],
                    "estimated_bytes": est,
                    "allocated_over_params": got["allocated"] / param_bytes,
                }
                rows.append(row)
                reserved = "-" if got["reserved"] is None else f"{got['reserved'] / 2**20:.1f}"
                print(
                    f"{w.name:18} {name:9} {impl:8} {param_bytes / 2**20:10.1f} "
                    f"{got['allocated'] / 2**20:13.1f} {row['allocated_over_params']:8.3f} "
                    f"{est / 2**20:12.1f} {reserved:>12}"
                )
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor()
    result = {
        "benchmark": "optimizer_step",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": args.device,
        "device_name": device_name,
        "torch": torch.__version__,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
