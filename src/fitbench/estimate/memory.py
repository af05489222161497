"""Peak device memory as a named breakdown whose parts add up to the peak.

The peak of a training step is found by walking the backward pass (Segment list in forward
order): while block i runs backward, the activations of blocks <= i are still alive and the
gradients of blocks >= i already exist (gradients are set to None between steps, PyTorch's
default `zero_grad(set_to_none=True)`). The optimizer step is the other candidate: every
gradient plus the optimizer's scratch, with activations gone. The breakdown reports the parts
at whichever moment is larger, so it describes a real instant, not a sum of maxima.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fitbench.core.quant import WeightFormat, matrix_bytes
from fitbench.estimate import resnet_cost, transformer_cost
from fitbench.estimate.profile import Profile
from fitbench.estimate.segments import Segment
from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.workload import Workload

PART_NAMES = (
    "weights",
    "quantization_scales",
    "master_weights",
    "amp_weight_copies",
    "gradients",
    "optimizer_state",
    "activations",
    "kv_cache",
    "temporaries",
    "workspace",
    "fragmentation",
    "cuda_context",
)

# Adam keeps two moments per parameter, momentum SGD one buffer, plain SGD nothing.
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "momentum": 1, "sgd": 0}


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    """Named parts in bytes, summing to `total`; `phase` says which moment is the peak."""

    parts: dict[str, int]
    phase: str
    details: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def to_dict(self) -> dict[str, int]:
        return dict(self.parts)


def quantizable_params(workload: Workload) -> int:
    """Matrix weights that weight-only quantization converts: every block's Linear layers
    (embeddings, norms and the LM head stay 16-bit, as in bitsandbytes/GPTQ defaults), or every
    convolution of a ResNet."""
    arch = workload.arch
    if isinstance(arch, TransformerArch):
        return arch.num_layers * arch.linear_params_per_layer()
    assert isinstance(arch, ResNetArch)
    return sum(c.in_channels * c.out_channels * c.kernel**2 for c in arch.convs(224))


def quantized_rows(workload: Workload) -> int:
    """Output rows of the quantized matrices (int8 keeps one FP32 scale per row)."""
    arch = workload.arch
    if isinstance(arch, TransformerArch):
        per_layer = sum(fout for _, _, fout in transformer_cost._gemms(arch))
        return arch.num_layers * per_layer
    assert isinstance(arch, ResNetArch)
    return sum(c.out_channels for c in arch.convs(224))


def quantized_layers(fmt: WeightFormat, name: str, num_layers: int) -> int:
    """How many of a block matrix's `num_layers` copies `fmt` quantizes: all, unless
    modules_to_not_convert / ignore names it (the matrix itself, its block part 'self_attn' /
    'mlp', or one layer of it as in 'model.layers.3.mlp.down_proj')."""
    mlp = ("gate_proj", "up_proj", "down_proj", "fc1", "fc2")
    parts = ("mlp",) if name in mlp else ("self_attn", "attn", "attention")
    kept: set[int] = set()
    for entry in fmt.skip:
        tokens = entry.split(".")
        named = set(tokens) & {*mlp, "q_proj", "k_proj", "v_proj", "o_proj"}
        if (name not in named) if named else not set(tokens) & set(parts):
            continue
        index = next((int(t) for t in tokens if t.isdigit()), None)
        if index is None:
            return 0
        if 0 <= index < num_layers:
            kept.add(index)
    return num_layers - len(kept)


def head_quantized(fmt: WeightFormat, workload: Workload) -> bool:
    """The LM head of a decoder is quantized only where the format says so (GGUF, GPTQModel's
    lm_head, compressed-tensors without it in `ignore`) and no skip entry names it."""
    arch = workload.arch
    return (isinstance(arch, TransformerArch) and arch.kind == "decoder" and fmt.quantize_head
            and not any(e.split(".")[-1] == "lm_head" for e in fmt.skip))


def quantized_matrices(workload: Workload) -> list[tuple[str, int, int, int]]:
    """(name, in_features, out_features, copies quantized) of the matrices `weight_format`
    stores quantized: each block Linear, the LM head where quantized, and for GGUF (whose
    published bits per weight cover every tensor) the token embedding too."""
    fmt = workload.weight_format
    arch = workload.arch
    assert fmt is not None and isinstance(arch, TransformerArch)
    mats = [(name, fin, fout, quantized_layers(fmt, name, arch.num_layers))
            for name, fin, fout in transformer_cost._gemms(arch)]
    if head_quantized(fmt, workload):
        mats.append(("lm_head", arch.hidden_size, arch.vocab_size, 1))
    if fmt.method == "gguf" and not (arch.tie_embeddings and head_quantized(fmt, workload)):
        mats.append(("embed_tokens", arch.hidden_size, arch.vocab_size, 1))
    return mats


def weight_bytes(workload: Workload) -> tuple[int, int]:
    """(weights, quantization scales) in bytes for the stored model.

    Unquantized: every parameter in the precision's dtype. Quantized: the matrices the format
    converts at their layout's bytes (core.quant.matrix_bytes: packed values as weights, scales,
    zero points and indices as scales); everything else (embeddings, norms, biases, the LM head
    unless quantized, skipped modules) in 16 bit.
    """
    p = workload.precision_info
    params = workload.param_count()
    fmt = workload.weight_format
    if fmt is None:
        return int(params * p.weight_bytes), 0
    if workload.is_resnet:  # int8 / int4 of a ResNet: its convolutions, as bitsandbytes would
        q = quantizable_params(workload)
        packed = q * int(fmt.bits) // 8
        scales = quantized_rows(workload) * 4 if fmt.method == "bnb-int8" else (q // 64) * 4
        return int((params - q) * 2 + packed), int(scales)
    values = meta = 0
    converted = 0
    for _, fin, fout, copies in quantized_matrices(workload):
        v, m = matrix_bytes(fmt, fin, fout)
        values += copies * v
        meta += copies * m
        converted += copies * fin * fout
    return int((params - converted) * 2 + values), int(meta)


def master_weights_kept(workload: Workload, framework: str) -> bool:
    """Whether the optimizer updates FP32 master copies of 16-bit weights: Paddle's O2 (pure
    fp16/bf16) uses multi_precision; PyTorch's pure half updates the 16-bit weights in place."""
    p = workload.precision_info
    return framework == "paddle" and not p.amp and p.weight_bytes == 2


def optimizer_element_bytes(workload: Workload, framework: str) -> int:
    """Bytes per element of the optimizer's state and of the weights its update reads and
    writes: the parameter dtype (FP32 under AMP, 16-bit in PyTorch's pure half), or FP32 where
    master weights are kept. Memory (optimizer_bytes) and time (speed.optimizer_kernels) both
    use it, so the update's traffic moves the bytes the breakdown holds."""
    return 4 if master_weights_kept(workload, framework) else int(workload.precision_info.weight_bytes)


def optimizer_bytes(workload: Workload, framework: str) -> tuple[int, int, int]:
    """(optimizer state, master weights, optimizer-step scratch) in bytes.

    PyTorch keeps state in the parameter dtype (FP32 under AMP, 16-bit in pure half). Paddle's
    O2 (pure fp16/bf16) uses multi_precision: FP32 master weights and FP32 moments. The
    foreach Adam step allocates temporaries of about twice the parameters (the square root of
    the second moment and the grouped update; measured: ResNet-50's optimizer-step peak is
    weights + gradients + moments + 2x parameters on an H200).
    """
    if not workload.is_training:
        return 0, 0, 0
    params = workload.param_count()
    states = OPTIMIZER_STATES[workload.optimizer]
    state_bytes = optimizer_element_bytes(workload, framework)
    master = 4 * params if master_weights_kept(workload, framework) else 0
    scratch = 2 * params * state_bytes if states == 2 else 0
    return params * states * state_bytes, master, scratch


def _segments(workload: Workload, framework: str) -> list[Segment]:
    if workload.is_resnet:
        return resnet_cost.training_segments(workload, framework)
    return transformer_cost.training_segments(workload)


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
    return sum(seg.cast_params for seg in _segments(workload, framework)) * cast_b


def _backward_peak(workload: Workload, framework: str) -> tuple[str, dict[str, float]]:
    """The largest moment of forward+backward, or the optimizer step, as parts."""
    p = workload.precision_info
    segs = _segments(workload, framework)
    grad_b = p.grad_bytes
    cast_b = p.cast_cache_bytes
    n = len(segs)
    best: dict[str, float] = {}
    best_total = -1.0
    acts_before = 0.0  # activations of segments < i (checkpointed: their inputs only)
    casts_before = 0.0
    prefix_act: list[float] = []
    prefix_cast: list[float] = []
    for seg in segs:
        prefix_act.append(acts_before)
        prefix_cast.append(casts_before)
        acts_before += (
            seg.input_bytes
            if workload.checkpointing and seg.name.startswith("layer")
            else seg.saved_bytes
        )
        casts_before += seg.cast_params * cast_b
    grads_after = 0.0
    for i in range(n - 1, -1, -1):
        seg = segs[i]
        grads_after += seg.params * grad_b
        acts = prefix_act[i] + seg.saved_bytes
        total = acts + prefix_cast[i] + seg.cast_params * cast_b + grads_after + seg.transient_bytes
        if total > best_total:
            best_total = total
            best = {
                "activations": acts,
                "amp_weight_copies": prefix_cast[i] + seg.cast_params * cast_b,
                "gradients": grads_after,
                "temporaries": seg.transient_bytes,
            }
    _, _, opt_scratch = optimizer_bytes(workload, framework)
    all_grads = sum(s.params for s in segs) * grad_b
    if all_grads + opt_scratch > best_total:
        return "optimizer", {
            "activations": 0.0,
            "amp_weight_copies": 0.0,
            "gradients": all_grads,
            "temporaries": opt_scratch,
        }
    return "backward", best


def memory_breakdown(workload: Workload, profile: Profile) -> MemoryBreakdown:
    """Peak memory of one step (training), forward (inference) or generation, as parts.

    Several GPUs (per-GPU memory after sharding) and parameter-efficient fine-tuning (frozen
    base weights, small adapters) have their own modules.
    """
    if workload.gpus > 1:
        from fitbench.estimate import distributed

        return distributed.memory_breakdown(workload, profile)
    if workload.peft:
        from fitbench.estimate import peft

        return peft.memory_breakdown(workload, profile)
    return single_device_breakdown(workload, profile)


def single_device_breakdown(workload: Workload, profile: Profile) -> MemoryBreakdown:
    """Full-parameter training, inference or generation on one device."""
    framework = profile.framework
    weights, scales = weight_bytes(workload)
    p = workload.precision_info
    parts: dict[str, float] = dict.fromkeys(PART_NAMES, 0.0)
    parts["weights"] = weights
    parts["quantization_scales"] = scales
    details: dict[str, int] = {}
    if workload.is_training:
        state, master, _ = optimizer_bytes(workload, framework)
        parts["optimizer_state"] = state
        parts["master_weights"] = master
        phase, dynamic = _backward_peak(workload, framework)
        parts.update(dynamic)
        details["gradients_total"] = int(workload.param_count() * p.grad_bytes)
    elif workload.is_generation:
        phase = "generate"
        parts["kv_cache"] = transformer_cost.kv_cache_bytes(workload)
        # Prefill scratch, or while decoding one layer's K/V being re-grown by concatenation.
        arch = workload.arch
        assert isinstance(arch, TransformerArch)
        parts["temporaries"] = max(
            transformer_cost.inference_transient_bytes(workload), parts["kv_cache"] / arch.num_layers
        )
        parts["amp_weight_copies"] = autocast_copy_bytes(workload, framework) * profile.autocast_cache_share
    else:
        phase = "forward"
        parts["amp_weight_copies"] = autocast_copy_bytes(workload, framework) * profile.autocast_cache_share
        module = resnet_cost if workload.is_resnet else transformer_cost
        parts["temporaries"] = module.inference_transient_bytes(workload)
    dynamic_total = parts["activations"] + parts["temporaries"] + parts["kv_cache"] + parts["gradients"]
    parts["workspace"] = profile.workspace_bytes
    fragmentation = profile.fragmentation_cnn if workload.is_resnet else profile.fragmentation
    parts["fragmentation"] = fragmentation * dynamic_total
    if workload.is_generation:
        outgrown = transformer_cost.outgrown_cache_bytes(workload, profile.kv_growth_stale_share)
        parts["fragmentation"] += outgrown
        if outgrown:
            details["outgrown_kv_cache_blocks"] = int(outgrown)
    parts["cuda_context"] = profile.context_bytes
    return MemoryBreakdown(parts={k: round(v) for k, v in parts.items()}, phase=phase, details=details)
