"""`estimate(workload, gpu)`: memory, verdict, max batch and speed in one `Estimate`.

The top of the estimator's one-way road: the execution plan (execution.workload_as_run: the
precision and optimizer a mode really runs) feeds the memory model (memory.py), the time model
(timing.py) and the searches (limits.py), whose answers, with the verdict and the assumptions,
make one Estimate. Nothing below imports this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fitbench.core import names
from fitbench.core.gpu import GpuSpec
from fitbench.estimate.assumptions import estimate_assumptions, first_step_assumptions, host_bound_assumptions
from fitbench.estimate.breakdown import MemoryBreakdown, required_bytes, within_card
from fitbench.estimate.distributed import global_batch_size
from fitbench.estimate.execution import workload_as_run
from fitbench.estimate.limits import max_batch_size, max_context_tokens
from fitbench.estimate.memory import memory_breakdown
from fitbench.estimate.model_flops import mfu, model_flops_per_step
from fitbench.estimate.profile import Profile, get_profile
from fitbench.estimate.timing import generation, step_timing
from fitbench.estimate.verdict import verdict
from fitbench.estimate.weights import weight_bytes
from fitbench.workloads.workload import Workload


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """What the estimator predicts for one workload on one GPU (all units in the names)."""

    workload: Workload
    gpu: GpuSpec
    framework: str
    exec_mode: str
    memory: MemoryBreakdown
    verdict: str
    max_batch_size: int
    max_context_tokens: int | None
    step_seconds: float | None
    epoch_seconds: float | None
    samples_per_second: float | None
    tokens_per_second: float | None
    prefill_seconds: float | None
    roofline_tokens_per_second: float | None
    bottleneck: str
    flops_per_step: float
    bytes_per_step: float
    model_flops_per_step: float | None
    mfu: float | None
    gpu_seconds: float
    host_seconds: float
    assumptions: tuple[str, ...] = field(default_factory=tuple)

    @property
    def peak_memory_bytes(self) -> int:
        return self.memory.total

    @property
    def breakdown(self) -> dict[str, int]:
        return self.memory.to_dict()

    @property
    def required_memory_bytes(self) -> int:
        """What must fit: the peak less the allocator's reclaimable cache (see required_bytes)."""
        return required_bytes(self.memory)

    @property
    def headroom_bytes(self) -> int:
        return self.gpu.usable_bytes - self.required_memory_bytes

    @property
    def decode_tokens_per_second(self) -> float | None:
        """Generation: tokens a second over the batch while decoding (what `tokens_per_second` is)."""
        return self.tokens_per_second if self.workload.is_generation else None

    @property
    def end_to_end_tokens_per_second(self) -> float | None:
        """Generation: new tokens over the whole call, prefill included (what a user's stopwatch sees)."""
        w = self.workload
        if not w.is_generation or self.step_seconds is None or not w.new_tokens:
            return None
        seconds = (self.prefill_seconds or 0.0) + w.new_tokens * self.step_seconds
        return w.batch_size * w.new_tokens / seconds if seconds > 0 else None

    @property
    def limited_by(self) -> str:
        """What limits the job: `memory-capacity` when it does not fit, else the speed bottleneck with
        `memory` spelled out as `memory-bandwidth` (`bottleneck` keeps its short value for scripts)."""
        if self.verdict == "oom":
            return "memory-capacity"
        return "memory-bandwidth" if self.bottleneck == "memory" else self.bottleneck

    def to_dict(self) -> dict[str, Any]:
        w = self.workload
        oom = self.verdict == "oom"
        return {
            "gpu": self.gpu.id,
            "gpu_name": self.gpu.name,
            "workload": w.name,
            "family": w.family,
            "mode": w.mode,
            "precision": w.precision,
            "optimizer": w.optimizer if w.is_training else None,
            "optimizer_impl": w.optimizer_impl if w.is_training else None,
            "grad_accum": w.grad_accum if w.is_training else None,
            "batch_size": w.batch_size,
            "seq_len": w.seq_len,
            "image_size": w.image_size,
            "prompt_tokens": w.prompt_tokens if w.is_generation else None,
            "new_tokens": w.new_tokens if w.is_generation else None,
            "checkpointing": w.checkpointing,
            "peft": w.peft,
            "lora_rank": w.lora_rank if w.peft else None,
            "lora_targets": w.lora_targets if w.peft else None,
            "gpus": w.gpus,
            "strategy": w.strategy if w.gpus > 1 else None,
            "params": w.param_count(),
            "active_params": w.active_param_count(),
            "framework": self.framework,
            "exec_mode": self.exec_mode,
            "verdict": self.verdict,
            "peak_memory_bytes": self.peak_memory_bytes,
            "required_memory_bytes": self.required_memory_bytes,
            "usable_memory_bytes": self.gpu.usable_bytes,
            "headroom_bytes": self.headroom_bytes,
            "breakdown": self.breakdown,
            "first_step_reserve_bytes": self.memory.details.get("first_step_segments") or None,
            "capture_warmup_reserve_bytes": self.memory.details.get("capture_warmup_reserve") or None,
            "loss_logits_cached_bytes": self.memory.details.get("loss_logits_block") or None,
            "peak_phase": self.memory.phase,
            "max_batch_size": self.max_batch_size,
            "max_context_tokens": self.max_context_tokens,
            "weights": w.weight_format.label if w.weight_format is not None else None,
            "weight_bits_per_weight": weight_bits(w),
            "kv_cache_dtype": w.kv_cache_dtype if w.is_generation else None,
            "step_seconds": self.step_seconds,
            "epoch_seconds": self.epoch_seconds,
            "samples_per_second": self.samples_per_second,
            # A job that does not fit has no speed: the would-be figure keeps its own name.
            "tokens_per_second": None if oom else self.tokens_per_second,
            "tokens_per_second_if_it_fit": self.tokens_per_second if oom else None,
            "decode_tokens_per_second": None if oom else self.decode_tokens_per_second,
            "end_to_end_tokens_per_second": None if oom else self.end_to_end_tokens_per_second,
            "prefill_seconds": self.prefill_seconds,
            "roofline_tokens_per_second": self.roofline_tokens_per_second,
            "bottleneck": self.bottleneck,
            "limited_by": self.limited_by,
            "flops_per_step": self.flops_per_step,
            "model_flops_per_step": self.model_flops_per_step,
            "mfu": self.mfu,
            "bytes_per_step": self.bytes_per_step,
            "gpu_seconds": self.gpu_seconds,
            "host_seconds": self.host_seconds,
            "assumptions": list(self.assumptions),
        }


def weight_bits(workload: Workload) -> float | None:
    """Bits per parameter of the stored model (values, scales and 16-bit parts together)."""
    if workload.weight_format is None:
        return None
    weights, scales = weight_bytes(workload)
    return round(8 * (weights + scales) / workload.param_count(), 4)


def estimate(
    workload: Workload,
    gpu: GpuSpec,
    *,
    framework: str = "torch",
    exec_mode: str = "default",
    profile: Profile | None = None,
) -> Estimate:
    """Predict memory, verdict, largest batch and speed of `workload` on `gpu`, as `exec_mode`
    runs it (the tuned mode may change the precision: fitbench.estimate.execution)."""
    # Checked once, here, against fitbench.core.names; kept as plain text in the Estimate.
    framework, exec_mode = names.framework(framework).value, names.exec_mode(exec_mode).value
    profile = profile or get_profile(framework, exec_mode)
    requested, requested_attention = workload.precision, workload.attention
    workload = workload_as_run(workload, exec_mode, gpu, framework)
    mem = within_card(memory_breakdown(workload, profile), gpu.usable_bytes)
    assumptions = estimate_assumptions(workload, requested, gpu, profile)
    assumptions += first_step_assumptions(mem)
    if workload.attention != requested_attention:
        assumptions.insert(
            3,
            f"attention: {workload.attention} where {requested_attention} was asked: transformers has no "
            "SDPA for this model, or its SDPA call takes the math path (estimate/execution.attention_as_run)",
        )
    step_s = epoch_s = sps = tps = prefill_s = roof = None
    if workload.is_generation:
        gen = generation(workload, gpu, profile)
        timing = gen.decode
        tps = gen.tokens_per_second
        prefill_s = gen.prefill.seconds
        roof = gen.roofline_tokens_per_second
        step_s = timing.seconds
    else:
        timing = step_timing(workload, gpu, profile)
        step_s = timing.seconds
        # With data parallelism each GPU takes --batch samples a step: throughput is global.
        global_batch = global_batch_size(workload)
        sps = global_batch / step_s
        if workload.dataset_size:
            epoch_s = step_s * math.ceil(workload.dataset_size / global_batch)
        if workload.family == "decoder":
            tps = sps * (workload.seq_len or 1)
    assumptions += host_bound_assumptions(timing, profile, generation=workload.is_generation)
    model_flops = model_flops_per_step(workload, profile)
    return Estimate(
        workload=workload,
        gpu=gpu,
        framework=framework,
        exec_mode=exec_mode,
        memory=mem,
        verdict=verdict(required_bytes(mem), gpu.usable_bytes),
        max_batch_size=max_batch_size(workload, gpu, profile),
        max_context_tokens=max_context_tokens(workload, gpu, profile),
        step_seconds=step_s,
        epoch_seconds=epoch_s,
        samples_per_second=sps,
        tokens_per_second=tps,
        prefill_seconds=prefill_s,
        roofline_tokens_per_second=roof,
        bottleneck=timing.bottleneck,
        flops_per_step=timing.flops,
        bytes_per_step=timing.bytes,
        model_flops_per_step=model_flops,
        mfu=mfu(model_flops, step_s, gpu, workload.precision, workload.family) if model_flops else None,
        gpu_seconds=timing.gpu_seconds,
        host_seconds=timing.host_seconds,
        assumptions=tuple(assumptions),
    )
