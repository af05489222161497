"""A step's kernels by class, measured beside the estimate: where the eager step's GPU time goes.

Reads what `benchmarks/profile_step.py --holdout TEXT --json FILE` appended (every CUDA kernel
of a few profiled steps, by class: GEMMs, fused attention, the optimizer's kernels, the LM
loss's softmax, and memory-bound elementwise, reduction and copy kernels) and prints, offline and
without a framework, per point:

* each class's measured time against the estimator's GPU time for the same kernels (the
  estimate's kernels of that class, on the card the profile ran on: --gpu);
* the same point's step as `benchmarks/accuracy.py` measured it on that card (its stored result
  files, matched by label), the kernels' sum and the estimate's host time. A step that is
  GPU-bound ends (step - kernel sum) after its kernels; over the host time that is the share of
  the host that did not overlap, which `overlap_loss` in profiles.toml states;
* for Hugging Face RMSNorm decoders under autocast, the share of the streaming rate their
  elementwise kernels reached: the estimate's bytes at that rate plus the other memory kernels
  equal the measured memory class (`mixed_dtype_memory_efficiency`, the median of these); a LoRA
  step's share is that of its converting passes around the adapters and its base's, shown beside
  them and left out of the median.

    PYTHONPATH=src python benchmarks/kernel_classes.py benchmarks/results/kernel-classes-h100-2026-12-05.json
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import statistics
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.core.gpu import GpuSpec
from fitbench.estimate import peft_speed, speed
from fitbench.estimate.api import step_timing
from fitbench.estimate.profile import Profile, get_profile
from fitbench.estimate.segments import Kernel
from fitbench.workloads.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
CLASSES = ("matmul", "conv", "attention", "memory", "optimizer", "loss")


def estimate_kernels(w: Workload, profile: Profile) -> list[tuple[Kernel, Workload]]:
    """The estimator's kernels of one training step, each with the workload it is timed as
    (speed.training_kernels; a LoRA step's from peft_speed.step_kernels, its adapters and
    optimizer as peft_speed.adapter_workload)."""
    if not w.peft:
        return [(k, w) for k in speed.training_kernels(w, profile)]
    base, adapters = peft_speed.step_kernels(w, profile)
    timed_as = peft_speed.adapter_workload(w)
    return [(k, w) for k in base] + [(k, timed_as) for k in adapters + peft_speed.optimizer_kernels(w)]


def kernel_class(k: Kernel) -> str:
    """The class a measured kernel of this estimate kernel falls in (profile_step.KERNEL_CLASSES)."""
    if k.name == "optimizer":
        return "optimizer"
    if k.name.startswith("lm_loss"):
        return "loss"
    return k.kind if k.kind in CLASSES else "memory"


def estimated_classes(w: Workload, gpu: GpuSpec, profile: Profile) -> tuple[dict[str, float], float, float]:
    """(GPU ms per class, the mixed-dtype elementwise kernels' ms, the other memory kernels' ms)."""
    out = dict.fromkeys(CLASSES, 0.0)
    mixed = other = 0.0
    for k, job in estimate_kernels(w, profile):
        ms = 1e3 * speed.time_kernels([k], job, gpu, profile, host_seconds_per_op=0.0).gpu_seconds
        cls = kernel_class(k)
        out[cls] += ms
        if cls == "memory":
            if k.mixed_dtypes:
                mixed += ms
            else:
                other += ms
    return out, mixed, other


# The fields that make two stored points the same job (a label fragment alone also matches other
# jobs of the model that later sets measured).
JOB_FIELDS = ("mode", "precision", "batch_size", "seq_len", "peft", "lora_rank", "optimizer", "checkpointing")


def _job(workload: dict[str, Any]) -> tuple[Any, ...]:
    arch = workload.get("arch") or {}
    return (*(workload.get(f) for f in JOB_FIELDS), arch.get("num_layers"), arch.get("hidden_size"))


def measured_steps(gpu_id: str) -> dict[str, tuple[tuple[Any, ...], float]]:
    """accuracy.py's measured step (seconds) per point label on `gpu_id`, from the stored files,
    with the point's job (_job) to tell apart labels that share a fragment."""
    steps: dict[str, tuple[tuple[Any, ...], float]] = {}
    for path in sorted(glob.glob(str(RESULTS / "accuracy-*.json"))):
        data = json.loads(Path(path).read_text())
        if data.get("gpu") != gpu_id:
            continue
        for p in data.get("points", []):
            m = p.get("measurement") or {}
            if m.get("status") == "ok" and m.get("step_seconds"):
                steps.setdefault(p["label"], (_job(p.get("workload") or {}), m["step_seconds"]))
    return steps


def analyse(rows: list[dict[str, Any]], gpu: GpuSpec) -> dict[str, Any]:
    """Per point: classes measured and estimated, the non-overlapped host share of GPU-bound
    steps, and the mixed-dtype elementwise share of RMSNorm decoders under autocast."""
    profile = get_profile("torch", "default", use_user=False)
    # the shares below are measured against kernels timed at the same-dtype rate
    same_rate = dataclasses.replace(profile, mixed_dtype_memory_efficiency=1.0)
    steps = measured_steps(gpu.id)
    out = []
    for r in rows:
        w = Workload.from_dict(r["workload"])
        measured = {c: r["kernel_classes"].get(c, {}).get("ms_per_step", 0.0) for c in CLASSES}
        est, _, _ = estimated_classes(w, gpu, profile)
        _, mixed, other = estimated_classes(w, gpu, same_rate)
        kernels = sum(measured.values())
        host = 1e3 * step_timing(w, gpu, profile).host_seconds
        job = _job(r["workload"])
        label = next((lbl for lbl, (j, _) in steps.items() if r["label"] in lbl and j == job), None)
        step = 1e3 * steps[label][1] if label else None
        row = {
            "label": r["label"],
            "measured_ms": measured,
            "estimated_ms": est,
            "kernel_sum_ms": kernels,
            "estimated_host_ms": host,
            "step_ms": step,
            "gpu_bound": bool(step and kernels > host),
            "host_not_overlapped": (step - kernels) / host if step and kernels > host else None,
            "mixed_dtype_share": (
                mixed / (measured["memory"] - other) if mixed and measured["memory"] > other else None
            ),
            "peft": w.peft,
        }
        out.append(row)
    losses = [x["host_not_overlapped"] for x in out if x["host_not_overlapped"] is not None]
    # the profile's constant is the autocast decoders' (their norms and residual stream); a LoRA
    # step's converting passes around its adapters are reported beside it, not folded in
    shares = [x["mixed_dtype_share"] for x in out if x["mixed_dtype_share"] is not None and not x["peft"]]
    return {
        "gpu": gpu.id,
        "points": out,
        "host_not_overlapped_median": statistics.median(losses) if losses else None,
        "mixed_dtype_share_median": statistics.median(shares) if shares else None,
    }


def print_table(result: dict[str, Any]) -> None:
    head = f"{'point':44} " + " ".join(f"{c:>15}" for c in CLASSES) + "  kernels   step   host  loss  mixed"
    print(head)
    print(f"{'':44} " + " ".join(f"{'meas / est':>15}" for _ in CLASSES))
    for x in result["points"]:
        cells = " ".join(f"{x['measured_ms'][c]:6.1f} /{x['estimated_ms'][c]:6.1f} " for c in CLASSES)
        step = f"{x['step_ms']:6.1f}" if x["step_ms"] else "     -"
        loss = f"{x['host_not_overlapped']:5.2f}" if x["host_not_overlapped"] is not None else "    -"
        mixed = f"{x['mixed_dtype_share']:5.2f}" if x["mixed_dtype_share"] is not None else "    -"
        host = f"{x['estimated_host_ms']:6.1f}"
        print(f"{x['label'][:44]:44} {cells} {x['kernel_sum_ms']:7.1f} {step} {host} {loss} {mixed}")

    def median(key: str) -> str:  # none where no point is of that kind (a single LoRA profile)
        return "-" if result[key] is None else f"{result[key]:.2f}"

    print(
        f"\nms per step on {result['gpu']}; loss = (step - kernel sum) / estimated host time of the "
        f"GPU-bound steps (median {median('host_not_overlapped_median')}); mixed = the share of the "
        f"streaming rate the mixed-dtype elementwise kernels reached (median of the autocast RMSNorm "
        f"decoders without LoRA: {median('mixed_dtype_share_median')})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="a JSON written by profile_step.py --json")
    parser.add_argument("--gpu", default="h100-sxm", help="the catalog card the profiles ran on")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    result = analyse(json.loads(args.file.read_text()), get_gpu(args.gpu))
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
