"""Peak memory of a full-parameter job on one device, as a named breakdown.

Training peaks in the backward walk or at the optimizer step (liveness.py decides which, from
the segments of resnet_cost / transformer_cost); inference at its forward pass; generation with
its KV cache. Why a module of its own: this is the breakdown the other models start from:
PEFT replaces its trainable parts (peft.py), several GPUs shard it (sharding.py).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from fitbench.core.names import Framework
from fitbench.estimate import (
    expert_cost,
    first_step,
    generation_reserve,
    kv_cache,
    liveness,
    resnet_cost,
    transformer_cost,
)
from fitbench.estimate.breakdown import PART_NAMES, MemoryBreakdown
from fitbench.estimate.execution import (
    cleared_with_step_features,
    sixteen_bit_tied_head_params,
    sixteen_bit_weights,
)
from fitbench.estimate.liveness import GradedSegment
from fitbench.estimate.optimizer import optimizer_bytes
from fitbench.estimate.profile import Profile
from fitbench.estimate.segments import Segment
from fitbench.estimate.weights import weight_bytes
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload


def training_segments(
    workload: Workload, framework: str, *, compiled: bool = False, release: str | None = None
) -> list[Segment]:
    """The segments of a training step in forward order, as the model's cost module counts them
    (`compiled`: a transformer's compiled step, transformer_cost.compiled_step; `release`: the
    transformers release the profile runs, Profile.transformers_version)."""
    if workload.is_resnet:
        return resnet_cost.training_segments(workload, framework)
    return transformer_cost.training_segments(workload, compiled=compiled, release=release)


def autocast_copy_bytes(workload: Workload, framework: str) -> float:
    """Autocast's cached 16-bit copies of the weights, alive for the whole autocast region.

    One rule for every phase: the weights the segments mark as cast (those of Linear layers,
    convolutions and heads; embeddings and norms run in FP32 and are not cast). PyTorch caches a
    weight's cast while autocast is entered (torch.autocast's cache_enabled default) whether or
    not autograd records: training keeps them until backward, a forward pass until it ends,
    `generate` under one autocast context for the whole generation (its decode kernels read
    these copies, speed.generation's 16-bit weight traffic). Zero outside AMP.
    """
    cast_b = workload.precision_info.cast_cache_bytes
    if not cast_b:
        return 0.0
    return sum(seg.cast_params for seg in training_segments(workload, framework)) * cast_b


def graded_segments(
    workload: Workload,
    framework: str,
    *,
    compiled: bool = False,
    release: str | None = None,
    sixteen_bit: bool = False,
) -> list[GradedSegment]:
    """The segments of a full-parameter step, each with the precision's gradient bytes
    (`sixteen_bit`: the step keeps the cast weights in bf16, execution.sixteen_bit_weights)."""
    grad_b = workload.precision_info.grad_bytes
    segments = training_segments(workload, framework, compiled=compiled, release=release)
    if sixteen_bit:
        return [_in_sixteen_bits(seg, grad_b, workload) for seg in segments]
    return [(seg, grad_b) for seg in segments]


def sixteen_bit_params(seg: Segment, workload: Workload) -> int:
    """The parameters of `seg` that a step keeping 16-bit weights holds in bf16: the ones autocast
    would cast, except a head tied to the embedding (the embedding's FP32 weight, cast as before)."""
    tied_head = seg.name == "head" and sixteen_bit_tied_head_params(workload) > 0
    return 0 if tied_head else min(seg.cast_params, seg.params)


def _in_sixteen_bits(seg: Segment, grad_b: float, workload: Workload) -> GradedSegment:
    """`seg` with its 16-bit weights' gradients at 2 bytes (the gradient bytes become the
    segment's mean) and no autocast copies of them."""
    sixteen = sixteen_bit_params(seg, workload)
    if not sixteen:
        return seg, grad_b
    mean_grad = (grad_b * seg.params - (grad_b - 2.0) * sixteen) / seg.params
    return replace(seg, cast_params=seg.cast_params - sixteen), mean_grad


def sixteen_bit_total(workload: Workload, framework: str) -> int:
    """The parameters a step keeping 16-bit weights holds in bf16 (with FP32 masters)."""
    return sum(sixteen_bit_params(seg, workload) for seg in training_segments(workload, framework))


def activation_peak(workload: Workload, framework: str, release: str | None = None) -> dict[str, float]:
    """The backward walk's moment with the most activations, autocast copies and temporaries,
    gradients left out (liveness.activation_moment), of a full-parameter step (`release`: the
    transformers release the mode runs, as training_segments)."""
    return liveness.activation_moment(
        graded_segments(workload, framework, release=release),
        cast_bytes=workload.precision_info.cast_cache_bytes,
        checkpointing=workload.checkpointing,
        grad_accum=workload.grad_accum,
    )


def step_peak(
    workload: Workload,
    framework: str,
    fragmentation: float = 0.0,
    *,
    compiled: bool = False,
    release: str | None = None,
    sixteen_bit: bool = False,
) -> tuple[str, dict[str, float]]:
    """The larger of the backward walk's largest moment and the optimizer step, as parts, judged
    with the allocator's `fragmentation` share that the breakdown adds (liveness.step_peak)."""
    _, _, scratch = optimizer_bytes(workload, framework)
    return liveness.step_peak(
        graded_segments(workload, framework, compiled=compiled, release=release, sixteen_bit=sixteen_bit),
        cast_bytes=workload.precision_info.cast_cache_bytes,
        checkpointing=workload.checkpointing,
        grad_accum=workload.grad_accum,
        optimizer_scratch=scratch,
        fragmentation=fragmentation,
    )


def single_device_breakdown(workload: Workload, profile: Profile, *, reserve: bool = True) -> MemoryBreakdown:
    """Full-parameter training, inference or generation on one device. `reserve`: replay the
    allocator (first_step, generation_reserve) for what it holds above the allocated peak; a
    search for what must fit (which leaves the fragmentation part out) skips it."""
    framework = profile.framework
    weights, scales = weight_bytes(workload)
    p = workload.precision_info
    parts: dict[str, float] = dict.fromkeys(PART_NAMES, 0.0)
    parts["weights"] = weights
    parts["quantization_scales"] = scales
    details: dict[str, int] = {}
    first: tuple[float, first_step.FirstStep] | None = None
    compiled = False
    if workload.is_training:
        state, master, _ = optimizer_bytes(workload, framework)
        parts["optimizer_state"] = state
        parts["master_weights"] = master
        compiled = transformer_cost.compiled_step(workload, profile)
        share = _fragmentation_share(workload, profile)
        release = profile.transformers_version
        sixteen_bit = sixteen_bit_weights(workload, workload.precision, profile.exec_mode, framework)
        sixteen = sixteen_bit_total(workload, framework) if sixteen_bit else 0
        # 16-bit weights with FP32 masters: 2 + 4 bytes where autocast's FP32 weights take 4
        parts["weights"] -= (p.weight_bytes - 2.0) * sixteen
        parts["master_weights"] += 4.0 * sixteen
        phase, dynamic = step_peak(
            workload, framework, share, compiled=compiled, release=release, sixteen_bit=sixteen_bit
        )
        parts.update(dynamic)
        grads = workload.trained_param_count() * p.grad_bytes - (p.grad_bytes - 2.0) * sixteen
        details["gradients_total"] = int(grads)
        if sixteen:
            details["sixteen_bit_weights"] = sixteen
        # The tuned mode compiles by running one real step (the first optimizer step included)
        # and empties the cache only after it (backends/torch/tuned.py _release_compile_memory):
        # the process peak nvidia-smi shows has seen the first step's segments in both modes.
        if reserve:
            first = _first_step_reserve(workload, framework, compiled, release, sixteen_bit)
    elif workload.is_generation:
        phase = "generate"
        parts["kv_cache"] = kv_cache.kv_cache_bytes(workload)
        # Prefill scratch, or while decoding one layer's K/V being re-grown by concatenation.
        arch = workload.arch
        assert isinstance(arch, TransformerArch)
        # transformers' generate on a GPU: a decode step's batched_mm experts hold two gathered
        # copies of every token-expert pair's weights (Profile.decode_experts_batched).
        batched = profile.decode_experts_batched
        gathers = expert_cost.decode_expert_gathers(workload) if batched else (0.0, 0.0)
        parts["temporaries"] = max(
            transformer_cost.inference_transient_bytes(workload, profile.transformers_version),
            parts["kv_cache"] / arch.num_layers,
            sum(gathers),
        )
        parts["amp_weight_copies"] = autocast_copy_bytes(workload, framework) * profile.autocast_cache_share
    else:
        phase = "forward"
        parts["amp_weight_copies"] = autocast_copy_bytes(workload, framework) * profile.autocast_cache_share
        if workload.is_resnet:
            parts["temporaries"] = resnet_cost.inference_transient_bytes(workload)
        else:
            parts["temporaries"] = transformer_cost.inference_transient_bytes(
                workload, profile.transformers_version
            )
    dynamic_total = parts["activations"] + parts["temporaries"] + parts["kv_cache"] + parts["gradients"]
    parts["workspace"] = profile.workspace_bytes
    parts["fragmentation"] = _cached_beside_peak(workload, profile, dynamic_total, details)
    # transformers' own generate: what the replay lays out, and where a tied head is freed at load
    transformers_generate = framework == Framework.TORCH and profile.exec_mode == "default"
    laid_out = transformers_generate and generation_reserve.applies(workload)
    if laid_out and reserve:
        # transformers' own load, prefill and decode steps, twice (the warm-up and the measured
        # generation), replayed through the allocator: the caches' regrowth included
        excess = generation_reserve.reserve_excess(workload, profile.transformers_version)
        if excess > parts["fragmentation"]:
            details["generation_reserve"] = int(excess)
            parts["fragmentation"] = excess
    elif workload.is_generation and not laid_out:
        outgrown = kv_cache.outgrown_cache_bytes(workload, profile.kv_growth_stale_share)
        parts["fragmentation"] += outgrown
        if outgrown:
            details["outgrown_kv_cache_blocks"] = int(outgrown)
        # A tied LM head's freed block (the replay's _load does this for the families it lays
        # out): the run's allocations are carved from it, so the reserve above the weights is
        # at least that block.
        head = transformer_cost.tied_head_load_block_bytes(workload) if transformers_generate else 0.0
        above = parts["kv_cache"] + parts["temporaries"] + parts["fragmentation"]
        if reserve and head > above:
            parts["fragmentation"] += head - above
            details["tied_head_load_block"] = int(head)
    parts["cuda_context"] = profile.context_bytes
    if first is not None:
        # a compiled step keeps the family's share beside the replay (its tensors are not the
        # eager step's that the replay lays out)
        kept = _fragmentation_share(workload, profile) * dynamic_total if compiled else 0.0
        first_step.replace_with_replayed_reserve(parts, details, *first, kept=kept)
    return MemoryBreakdown(parts={k: round(v) for k, v in parts.items()}, phase=phase, details=details)


def _cached_beside_peak(
    workload: Workload, profile: Profile, dynamic_total: float, details: dict[str, int]
) -> float:
    """What the allocator holds cached beside the peak's live tensors, before any replay: the
    family's fragmentation share of the dynamic part, the LM loss's freed 16-bit logits
    (transformer_cost.loss_logits_cached_bytes) and a compiled step's capture warm-up
    (Profile.capture_warmup_share); the named parts are recorded in `details`."""
    compiled = transformer_cost.compiled_step(workload, profile)
    cached = _fragmentation_share(workload, profile) * dynamic_total
    loss_block = transformer_cost.loss_logits_cached_bytes(workload, compiled=compiled)
    if loss_block:
        cached += loss_block
        details["loss_logits_block"] = int(loss_block)
    if compiled:
        warmup = profile.capture_warmup_share * dynamic_total
        cached += warmup
        details["capture_warmup_reserve"] = int(warmup)
    return cached


@cleared_with_step_features
@lru_cache(maxsize=1024)
def _first_step_reserve(
    workload: Workload, framework: str, compiled: bool, release: str | None = None, sixteen_bit: bool = False
) -> tuple[float, first_step.FirstStep] | None:
    """What the first two training steps reserve beyond the weights (first_step.py: their
    allocations replayed through the allocator's segments), with the replay behind it. None
    where first_step does not apply. Cached: the searches and the advice ask for the same job
    on many cards."""
    graded = graded_segments(workload, framework, compiled=compiled, release=release, sixteen_bit=sixteen_bit)
    first = first_step.first_step(
        workload, framework, [seg for seg, _ in graded], compiled=compiled, sixteen_bit=sixteen_bit
    )
    if first is None:
        return None
    return first.peak_reserved_bytes, first


def _fragmentation_share(workload: Workload, profile: Profile) -> float:
    """The caching allocator's reserved-over-allocated excess for this model family."""
    return profile.fragmentation_cnn if workload.is_resnet else profile.fragmentation
