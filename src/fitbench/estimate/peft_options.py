"""The ways to fine-tune one job on one GPU, side by side: full, LoRA and QLoRA.

For the advice on a fine-tune that does not fit (advise.fixes). Why a module of its own: it
re-estimates variants of the job, so it sits above the memory model, the time models and the
largest-batch search, and asks each the way the API does; the PEFT model itself (peft.py,
peft_speed.py) stays below and never calls up.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fitbench.core.gpu import GpuSpec
from fitbench.estimate import peft_speed, speed
from fitbench.estimate.breakdown import required_bytes
from fitbench.estimate.limits import max_batch_size
from fitbench.estimate.memory import memory_breakdown
from fitbench.estimate.peft import adapted_arch, trainable_param_count
from fitbench.estimate.profile import Profile
from fitbench.estimate.verdict import verdict
from fitbench.workloads.workload import Workload


def _half(workload: Workload, gpu: GpuSpec) -> str:
    """The 16-bit dtype a frozen base is held in: the workload's own, else bf16 where the card
    has BF16 tensor cores, fp16 elsewhere."""
    compute = workload.precision_info.compute
    if compute in ("fp16", "bf16"):
        return compute
    return "bf16" if gpu.bf16 else "fp16"


def _full_precision(workload: Workload) -> str:
    """A full fine-tune keeps the workload's precision, except that a PEFT workload's pure 16-bit
    base becomes mixed precision (FP32 weights and Adam state, autocast): the usual way to train
    every parameter."""
    p = workload.precision_info
    if workload.peft and not p.amp and p.compute in ("fp16", "bf16"):
        return f"amp-{p.compute}"
    return workload.precision


def peft_options(workload: Workload, gpu: GpuSpec, profile: Profile) -> list[dict[str, Any]]:
    """Full fine-tuning, LoRA (16-bit base) and QLoRA (NF4 base), each without and with activation
    checkpointing: peak memory, verdict, largest batch and step time on `gpu`.

    For the advice on a fine-tune that does not fit: six rows in that order. The full row is the
    workload without PEFT; the LoRA/QLoRA rows keep its batch, sequence, rank and targets and hold
    the base in 16 bit (`_half`).
    """
    adapted_arch(workload)
    if not workload.is_training:
        raise ValueError("peft_options compares ways to fine-tune: the workload must train")
    if workload.gpus > 1:
        raise ValueError("peft_options compares fine-tuning on one GPU")
    half = _half(workload, gpu)
    variants = [
        ("full", dataclasses.replace(workload, peft=None, precision=_full_precision(workload))),
        ("lora", dataclasses.replace(workload, peft="lora", precision=half)),
        ("qlora", dataclasses.replace(workload, peft="qlora", precision=half)),
    ]
    rows: list[dict[str, Any]] = []
    for method, base in variants:
        for ckpt in (False, True):
            w = dataclasses.replace(base, checkpointing=ckpt)
            mem = memory_breakdown(w, profile)
            if method == "full":
                timing = speed.training_step(w, gpu, profile)
                trainable = w.param_count()
            else:
                timing = peft_speed.training_step(w, gpu, profile)
                trainable = trainable_param_count(w)
            rows.append(
                {
                    "method": method,
                    "precision": w.precision,
                    "checkpointing": ckpt,
                    "lora_rank": w.lora_rank if method != "full" else None,
                    "lora_targets": w.lora_targets if method != "full" else None,
                    "trainable_params": trainable,
                    "peak_memory_bytes": mem.total,
                    "required_memory_bytes": required_bytes(mem),
                    "usable_memory_bytes": gpu.usable_bytes,
                    "headroom_bytes": gpu.usable_bytes - required_bytes(mem),
                    # the same rule as api.estimate: what must fit, without reclaimable allocator cache
                    "verdict": verdict(required_bytes(mem), gpu.usable_bytes),
                    "max_batch_size": max_batch_size(w, gpu, profile),
                    "step_seconds": timing.seconds,
                    "breakdown": mem.to_dict(),
                }
            )
    return rows
