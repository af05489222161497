"""`estimate(workload, gpu)`: memory, verdict, max batch and speed in one `Estimate`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from fitbench.core import names
from fitbench.core.gpu import GpuSpec
from fitbench.core.units import GiB
from fitbench.estimate import speed
from fitbench.estimate.execution import workload_as_run
from fitbench.estimate.memory import MemoryBreakdown, memory_breakdown
from fitbench.estimate.profile import Profile, get_profile
from fitbench.estimate.verdict import TIGHT_MARGIN, max_fitting, verdict
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import LIMITS, Workload


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
            "bytes_per_step": self.bytes_per_step,
            "gpu_seconds": self.gpu_seconds,
            "host_seconds": self.host_seconds,
            "assumptions": list(self.assumptions),
        }


def training_assumptions(workload: Workload, framework: str) -> list[str]:
    """What the optimizer step and gradient accumulation are taken to be."""
    from fitbench.estimate.memory import optimizer_step_scratch

    scratch = optimizer_step_scratch(workload, framework) / GiB
    if framework == "torch":
        lines = [f"optimizer: {workload.optimizer} ({workload.optimizer_impl} implementation); "
                 f"its step allocates {scratch:.2f} GiB of temporaries beyond its state"]
    else:
        lines = [f"optimizer: {workload.optimizer}, updated in place by {framework}'s kernels "
                 "(no step temporaries)"]
    if workload.grad_accum > 1:
        lines.append(f"gradient accumulation over {workload.grad_accum} micro-batches: every gradient "
                     "stays alive through forward and backward; a step is one micro-batch, the "
                     f"optimizer runs every {workload.grad_accum}")
    else:
        lines.append("gradients are freed between steps (zero_grad(set_to_none=True)): they exist "
                     "only from their backward to the optimizer step")
    return lines


def required_bytes(memory: MemoryBreakdown) -> int:
    """The peak without the fragmentation part.

    On a card with room to spare the caching allocator keeps freed blocks (the peak counts them:
    it is what nvidia-smi shows). Under memory pressure it releases cached segments and retries
    before failing, so what must fit is less: measured on an H200 capped to a 12 GB or 24 GB
    card's memory, the largest batch that ran matched the peak without this part.
    """
    return memory.total - memory.parts.get("fragmentation", 0)


@lru_cache(maxsize=4096)
def peak_bytes(workload: Workload, profile: Profile) -> int:
    """Peak memory only (cached: the max-batch search evaluates many batch sizes)."""
    return memory_breakdown(workload, profile).total


@lru_cache(maxsize=4096)
def needed_bytes(workload: Workload, profile: Profile) -> int:
    """Memory that must fit for the job to run (cached like peak_bytes)."""
    return required_bytes(memory_breakdown(workload, profile))


def max_batch_size(workload: Workload, gpu: GpuSpec, profile: Profile) -> int:
    return max_fitting(lambda b: needed_bytes(workload.replace(batch_size=b), profile), gpu.usable_bytes)


def max_context_tokens(workload: Workload, gpu: GpuSpec, profile: Profile) -> int | None:
    """The longest sequence that fits at the workload's batch: prompt plus new tokens for
    generation (the prompt grows, the new tokens stay; fewer if they alone do not fit), the
    sequence length for training and classification; None for a ResNet. Found by bisection on
    the memory model, like the largest batch, and capped at the model's positions."""
    arch = workload.arch
    if not isinstance(arch, TransformerArch):
        return None
    cap = min(arch.max_positions, LIMITS["seq_len"])
    usable = gpu.usable_bytes
    if workload.is_generation:
        new = workload.new_tokens or 1
        if cap < 2:
            return 0

        def need(total: int) -> int:  # total >= 2: at least one prompt and one new token
            new_tokens = min(new, total - 1)
            return needed_bytes(workload.replace(prompt_tokens=total - new_tokens, new_tokens=new_tokens),
                                profile)

        longest = max_fitting(lambda t: need(t + 1), usable, limit=cap - 1)
        return longest + 1 if longest else 0
    return max_fitting(lambda s: needed_bytes(workload.replace(seq_len=s), profile), usable, limit=cap)


def weight_bits(workload: Workload) -> float | None:
    """Bits per parameter of the stored model (values, scales and 16-bit parts together)."""
    from fitbench.estimate.memory import weight_bytes

    if workload.weight_format is None:
        return None
    weights, scales = weight_bytes(workload)
    return round(8 * (weights + scales) / workload.param_count(), 4)


def step_timing(workload: Workload, gpu: GpuSpec, profile: Profile) -> speed.Timing:
    """One training step or forward pass; multi-GPU and PEFT have their own models."""
    if workload.gpus > 1:
        from fitbench.estimate import distributed

        return distributed.step_timing(workload, gpu, profile)
    if workload.peft:
        from fitbench.estimate import peft

        return peft.training_step(workload, gpu, profile)
    return (speed.training_step if workload.is_training else speed.inference_step)(workload, gpu, profile)


def storage_assumptions(workload: Workload, gpu: GpuSpec) -> list[str]:
    """Where the precision, the weight format and the KV cache dtype came from, and how the
    quantized matmuls are computed on this card."""
    out = list(workload.origin)
    fmt = workload.weight_format
    if fmt is not None:
        out.append(f"weights: {fmt.describe()} from {fmt.source}; embeddings, norms"
                   + ("" if fmt.quantize_head else " and the LM head") + " stay 16-bit"
                   + (f"; kept 16-bit: {', '.join(fmt.skip[:6])}" if fmt.skip else ""))
        if fmt.compute in ("fp8", "int8"):
            if gpu.has_rate(fmt.compute):
                out.append(f"{fmt.compute} matmuls run on {gpu.name}'s {fmt.compute} tensor cores")
            else:
                out.append(f"{gpu.name} has no {fmt.compute} tensor cores: prefill expands the weights "
                           f"to {workload.precision} and runs at its rate")
        else:
            out.append("prefill expands the quantized weights to 16 bit before each GEMM; decoding reads "
                       "the packed weights and their scales")
    if workload.kv_cache is not None and not any(o.startswith("KV cache") for o in out):
        out.append(f"KV cache in {workload.kv_cache} (--kv-cache)")
    return out


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
    requested = workload.precision
    workload = workload_as_run(workload, exec_mode, gpu, framework)
    mem = memory_breakdown(workload, profile)
    assumptions = [
        f"{framework} {exec_mode} execution; efficiencies from {profile.provenance or 'profiles.toml'}",
        f"'tight' means less than {TIGHT_MARGIN:.0%} of the {gpu.usable_bytes / GiB:.1f} GiB usable "
        "memory is left",
        f"attention: {workload.attention} "
        f"({'no' if workload.attention == 'fused' else 'a'} score matrix stored)",
    ]
    if workload.precision != requested:
        assumptions.append(f"{exec_mode} runs {workload.precision} where {requested} was asked")
    assumptions.extend(storage_assumptions(workload, gpu))
    if workload.is_training:
        assumptions.extend(training_assumptions(workload, framework))
    if not workload.is_resnet:
        from fitbench.estimate.transformer_cost import arch_assumptions

        assumptions.extend(arch_assumptions(workload))
    if workload.peft:
        from fitbench.estimate import peft

        assumptions.extend(peft.assumptions(workload))
    distributed = None
    if workload.gpus > 1:
        from fitbench.estimate import distributed

        assumptions.extend(distributed.assumptions(workload, gpu))
    if framework == "torch" and workload.precision_info.compute == "fp32" and "tf32" in gpu.peak_flops:
        assumptions.append(
            f"fp32: matmuls at {gpu.name}'s FP32 peak, not its TF32 tensor cores: PyTorch leaves TF32 off "
            "for matmuls by default (cuDNN convolutions use it); `--precision tf32` estimates it on"
        )
    if not gpu.measured:
        assumptions.append(f"{gpu.name}: its framework path has never been measured by fitbench; the "
                           "efficiencies are those measured on NVIDIA cards, so this is arithmetic only")
    if not gpu.bf16 and workload.precision_info.compute == "bf16":
        assumptions.append(f"{gpu.name} has no BF16 tensor cores: bf16 runs at FP32 rates; prefer fp16")
    step_s = epoch_s = sps = tps = prefill_s = roof = None
    if workload.is_generation:
        gen = (distributed or speed).generation(workload, gpu, profile)
        timing = gen.decode
        tps = gen.tokens_per_second
        prefill_s = gen.prefill.seconds
        roof = gen.roofline_tokens_per_second
        step_s = timing.seconds
    else:
        timing = step_timing(workload, gpu, profile)
        step_s = timing.seconds
        # With data parallelism each GPU takes --batch samples a step: throughput is global.
        global_batch = distributed.global_batch_size(workload) if distributed else workload.batch_size
        sps = global_batch / step_s
        if workload.dataset_size:
            epoch_s = step_s * math.ceil(workload.dataset_size / global_batch)
        if workload.family == "decoder":
            tps = sps * (workload.seq_len or 1)
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
        gpu_seconds=timing.gpu_seconds,
        host_seconds=timing.host_seconds,
        assumptions=tuple(assumptions),
    )
