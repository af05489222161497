"""Peak device memory as a named breakdown whose parts add up to the peak.

The peak of a training step is found by walking the backward pass (Segment list in forward
order): while block i runs backward, the activations of blocks <= i are still alive and the
gradients of blocks >= i already exist (gradients are set to None between steps, PyTorch's
default `zero_grad(set_to_none=True)`). With gradient accumulation (Workload.grad_accum > 1)
zero_grad runs once every N micro-batches, so from the second micro-batch on every gradient is
alive through the forward and the whole backward. The optimizer step is the other candidate: every
gradient plus the optimizer's scratch, with activations gone. The breakdown reports the parts
at whichever moment is larger, so it describes a real instant, not a sum of maxima.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise

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
        return arch.linear_params()
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


# Where a block matrix lives, as module paths spell it after the layer index (the first path
# is the one fitbench names; the rest are the other families' spellings a skip list may use).
_ATTENTION_PARENTS = ("self_attn", "attn", "attention", "self_attention")
_ALIASES = {"kv_a_proj": ("kv_a_proj_with_mqa",), "gate_proj": ("w1",), "up_proj": ("w3",),
            "down_proj": ("w2",), "fc1": ("c_fc", "dense_h_to_4h"), "fc2": ("c_proj", "dense_4h_to_h")}
_MLP_PARENTS = ("mlp", "feed_forward", "block_sparse_moe")


@dataclass(frozen=True)
class QuantMatrix:
    """A matrix shape of the model: `copies` of its `total` instances (layers, or layers x
    experts) are stored in the weight format, the rest in 16 bit."""

    name: str
    fin: int
    fout: int
    copies: int
    total: int


def _module_paths(name: str) -> list[str]:
    """The module paths below `layers.N.` a block matrix called `name` goes by: attention
    matrices under self_attn (attn, attention, self_attention), MLP ones under mlp
    (feed_forward; Mixtral's block_sparse_moe with w1/w2/w3), routed experts under
    mlp.experts, shared experts under mlp.shared_experts (Qwen-MoE: shared_expert), the router
    as mlp.gate (mlp.router)."""
    part, _, leaf = name.rpartition(".")
    leaves = (leaf, *_ALIASES.get(leaf, ()))
    if name == "router":
        return [f"{p}.{r}" for p in _MLP_PARENTS for r in ("gate", "router")]
    if part == "experts":
        return [f"{p}.experts.{lf}" for p in _MLP_PARENTS for lf in leaves]
    if part == "shared_experts":
        return [f"{p}.{s}.{lf}" for p in _MLP_PARENTS for s in ("shared_experts", "shared_expert")
                for lf in leaves]
    if leaf in ("gate_proj", "up_proj", "down_proj", "fc1", "fc2"):
        return [f"{p}.{lf}" for p in _MLP_PARENTS for lf in leaves]
    return [f"{p}.{lf}" for p in _ATTENTION_PARENTS for lf in leaves]


def _contains(tokens: list[str], path: list[str]) -> bool:
    n = len(tokens)
    return any(path[i:i + n] == tokens for i in range(len(path) - n + 1))


def kept_in_16_bit(entry: str, layer: int, paths: list[str]) -> bool:
    """Whether a modules_to_not_convert / ignore entry keeps layer `layer`'s matrix (known by
    `paths`) unquantized, matching module names as transformers does, by dotted parts:
    'mlp' or 'self_attn' (a whole part), 'down_proj' (that matrix everywhere), 'mlp.gate' (the
    router, not gate_proj), 'model.layers.3.mlp.down_proj' (one layer's; 'layers.3' all of
    it), and compressed-tensors' 're:' regular expressions against 'model.layers.N.<path>'."""
    if entry.startswith("re:"):
        try:
            pattern = re.compile(entry[3:])
        except re.error:
            return False
        return any(pattern.search(f"model.layers.{layer}.{path}") for path in paths)
    tokens = [t for t in entry.split(".") if t]
    index = next((i for i, t in enumerate(tokens) if t.isdigit()), None)
    if index is not None:
        if int(tokens[index]) != layer:
            return False
        rest = tokens[index + 1:]
        return not rest or any(path.split(".")[:len(rest)] == rest for path in paths)
    return bool(tokens) and any(_contains(tokens, path.split(".")) for path in paths)


def quantized_layers(fmt: WeightFormat, name: str, layers: list[int]) -> int:
    """How many of a block matrix's copies in `layers` `fmt` quantizes: all, unless a skip
    entry (kept_in_16_bit) names the matrix, its part or its layer."""
    if not fmt.skip:
        return len(layers)
    paths = _module_paths(name)
    return sum(1 for i in layers if not any(kept_in_16_bit(e, i, paths) for e in fmt.skip))


def router_quantized(fmt: WeightFormat) -> bool:
    """The MoE router (`mlp.gate`, a Linear(hidden, experts)) is converted only by bitsandbytes,
    which replaces every nn.Linear but the skipped ones; GPTQ and AWQ quantizers list the
    expert and attention matrices per model and leave the router alone, DeepSeek-V3's fp8
    checkpoint keeps it in bf16, and llama.cpp keeps `ffn_gate_inp` unquantized."""
    return fmt.method in ("bnb-int8", "bnb-4bit")


def quantized_matrices(workload: Workload) -> list[QuantMatrix]:
    """The matrices `weight_format` may store quantized, with how many copies it does: each
    block's attention matrices (latent attention's low-rank ones included), the dense blocks'
    MLP, every routed expert's and the shared experts' matrices of the MoE blocks (memory holds
    them all), the router where the method converts it, the LM head where quantized, and for
    GGUF (whose published bits per weight cover every tensor) the token embedding too."""
    fmt = workload.weight_format
    arch = workload.arch
    assert fmt is not None and isinstance(arch, TransformerArch)
    return list(_quantized_matrices(fmt, arch))


@lru_cache(maxsize=64)
def _quantized_matrices(fmt: WeightFormat, arch: TransformerArch) -> tuple[QuantMatrix, ...]:
    """quantized_matrices for one format and architecture (the largest-batch and longest-context
    searches ask for the same answer hundreds of times)."""
    every = list(range(arch.num_layers))
    moe = [i for i in every if arch.is_moe_layer(i)]
    dense = [i for i in every if not arch.is_moe_layer(i)]
    attention = {name for name, _, _ in arch.attention_linears()}
    mats = []
    for name, fin, fout in transformer_cost._gemms(arch):
        layers = every if name in attention else dense
        if layers:
            mats.append(QuantMatrix(name, fin, fout, quantized_layers(fmt, name, layers), len(layers)))
    if moe:
        parts = transformer_cost.expert_gemms(arch)
        for name, fin, fout in parts["experts"]:
            n = arch.num_experts
            mats.append(QuantMatrix(name, fin, fout, n * quantized_layers(fmt, name, moe), n * len(moe)))
        for name, fin, fout in parts["shared"]:
            mats.append(QuantMatrix(name, fin, fout, quantized_layers(fmt, name, moe), len(moe)))
        for name, fin, fout in parts["router"]:
            copies = quantized_layers(fmt, name, moe) if router_quantized(fmt) else 0
            mats.append(QuantMatrix(name, fin, fout, copies, len(moe)))
    head = (arch.kind == "decoder" and fmt.quantize_head
            and not any(e.split(".")[-1] == "lm_head" for e in fmt.skip))
    if head:
        mats.append(QuantMatrix("lm_head", arch.hidden_size, arch.vocab_size, 1, 1))
    if fmt.method == "gguf" and not (arch.tie_embeddings and head):
        mats.append(QuantMatrix("embed_tokens", arch.hidden_size, arch.vocab_size, 1, 1))
    return tuple(mats)


def checkpoint_weight_bytes(workload: Workload) -> int | None:
    """The weights' exact bytes from the checkpoint's safetensors headers, where they describe
    what is loaded: a checkpoint stored at the workload's weight width (a bf16 checkpoint run in
    fp16 or bf16), or a pre-quantized one (under 16 bits an element on average, packed weights
    and their scales together) loaded in a 16-bit mode. The headers win over a
    quantization_config's layout (they are that layout, counted exactly), so the two are never
    added. None otherwise (the count decides): training, or a 16-bit checkpoint that --weights
    or --precision int8/int4 quantizes while loading."""
    if not workload.checkpoint_bytes or not workload.checkpoint_params or workload.is_training:
        return None
    p = workload.precision_info
    fmt = workload.weight_format
    per_element = workload.checkpoint_bytes / workload.checkpoint_params
    if fmt is None and abs(per_element - p.weight_bytes) <= 0.01 * p.weight_bytes:
        return workload.checkpoint_bytes
    if fmt is None and p.weight_bytes == 2 and per_element < 1.9:
        return workload.checkpoint_bytes
    # A quantization_config says the stored tensors are the quantized ones. Their elements are
    # packed (GPTQ/AWQ: eight 4-bit values an int32), so the check is bytes per model parameter.
    if (fmt is not None and fmt.source == "quantization_config" and p.weight_bytes == 2
            and workload.checkpoint_bytes < 1.9 * workload.param_count()):
        return workload.checkpoint_bytes
    return None


def weight_bytes(workload: Workload) -> tuple[int, int]:
    """(weights, quantization scales) in bytes for the stored model.

    Unquantized: every parameter in the precision's dtype. Quantized: the matrices the format
    converts at their layout's bytes (core.quant.matrix_bytes: packed values as weights, scales,
    zero points and indices as scales); everything else (embeddings, norms, biases, the LM head
    unless quantized, skipped modules) in 16 bit. A model folder's safetensors headers, where
    they describe what is loaded, give the exact bytes instead (checkpoint_weight_bytes).
    """
    p = workload.precision_info
    params = workload.param_count()
    fmt = workload.weight_format
    exact = checkpoint_weight_bytes(workload)
    if exact is not None:
        return exact, 0
    if fmt is None:
        return int(params * p.weight_bytes), 0
    if workload.is_resnet:  # int8 / int4 of a ResNet: its convolutions, as bitsandbytes would
        q = quantizable_params(workload)
        packed = q * int(fmt.bits) // 8
        scales = quantized_rows(workload) * 4 if fmt.method == "bnb-int8" else (q // 64) * 4
        return int((params - q) * 2 + packed), int(scales)
    values = meta = 0
    converted = 0
    for m in quantized_matrices(workload):
        v, scales = matrix_bytes(fmt, m.fin, m.fout)
        values += m.copies * v
        meta += m.copies * scales
        converted += m.copies * m.fin * m.fout
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


def param_sizes_in_order(workload: Workload) -> list[int]:
    """Elements of every parameter tensor, in the order `model.parameters()` yields them for
    the model the torch backend builds (torchvision's ResNet layout; transformers' BERT, Llama,
    Qwen2 and GPT-2; a tied LM head is the embedding, yielded once). A for-loop optimizer
    visits them in this order, and what it holds at once depends on neighbours."""
    arch = workload.arch
    if isinstance(arch, ResNetArch):
        out: list[int] = []
        for conv in arch.convs(224):
            weight = conv.in_channels * conv.out_channels * conv.kernel**2
            out += [weight, conv.out_channels, conv.out_channels]  # with its BatchNorm
        return [*out, arch.feature_dim * arch.num_classes, arch.num_classes]
    h, f, q, kv, v = arch.hidden_size, arch.intermediate_size, arch.q_dim, arch.kv_dim, arch.vocab_size
    norm = [h, h] if arch.norm == "layernorm" else [h]

    def linear(fin: int, fout: int, bias: bool) -> list[int]:
        return [fin * fout, fout] if bias else [fin * fout]

    attention = linear(h, q, arch.qkv_bias) + 2 * linear(h, kv, arch.qkv_bias) + linear(q, h, arch.out_bias)

    if arch.kind == "encoder":  # BertForSequenceClassification
        out = [v * h, arch.max_positions * h, max(arch.type_vocab_size, 1) * h, *norm]
        layer = attention + norm + linear(h, f, arch.mlp_bias) + linear(f, h, arch.mlp_bias) + norm
        out += layer * arch.num_layers
        out += linear(h, h, True) if arch.pooler else []
        return out + linear(h, arch.num_labels, True)
    if arch.position == "learned":  # GPT-2: fused c_attn, layer norms before each half
        out = [v * h, arch.max_positions * h]
        layer = norm + linear(h, 3 * h, True) + linear(h, h, True) + norm
        layer += linear(h, f, True) + linear(f, h, True)
    else:  # Llama / Qwen2: attention, MLP, then the two RMSNorms
        out = [v * h]
        layer = attention + 2 * linear(h, f, arch.mlp_bias) + linear(f, h, arch.mlp_bias) + norm + norm
    out += layer * arch.num_layers
    out += norm
    return out if arch.tie_embeddings else [*out, v * h]


def largest_param_tensor(workload: Workload) -> int:
    """Elements of the largest single parameter tensor (a word embedding or LM head, a wide
    Linear, a convolution or the classifier)."""
    return max(param_sizes_in_order(workload))


def optimizer_step_scratch(workload: Workload, framework: str) -> int:
    """Bytes the optimizer step allocates beyond its state, at its largest moment.

    Read from torch/optim/adam.py (AdamW runs the same functions) and sgd.py:

    * foreach (`_multi_tensor_adam`): `exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)`
      allocates one tensor per parameter, kept until the final `_foreach_addcdiv_`: 1.00x the
      parameter bytes of the (device, dtype) group. Coupled weight decay's `_foreach_add(grads,
      params)` copy is deleted (`del device_grads`) before the square root, so it never adds.
    * fused (`_fused_adam`): one `torch._fused_adam_` kernel updates in place: nothing.
    * for-loop (`_single_tensor_adam`): `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)`
      holds the square root and the quotient of one parameter at once, while `denom` still
      refers to the previous parameter's: the most, over the parameters in order, of twice a
      tensor plus the one before it (about twice the largest tensor).
    * SGD and momentum SGD (every implementation): `buf.mul_(momentum).add_(grad)` and
      `param.add_(grad, alpha=-lr)` run in place: nothing (no Nesterov, no weight decay).

    Counting every tensor an op creates in a real step (tests/unit/test_optimizer_scratch.py)
    gives exactly these figures; an H200 measurement at LLM scale gave foreach 1.00x and fused 0.
    Paddle 3.3.1 (paddle/optimizer/adam.py:387 `_C_ops.adam_`, :801 `_C_ops.merged_adam_` with
    use_multi_tensor; adamw.py:538 `_C_ops.adamw_`; momentum.py:314 `_C_ops.momentum_`) updates each
    parameter, its moments and, under multi_precision, its FP32 master weight in one in-place
    kernel: nothing either (master weights and FP32 moments are state, master_weights_kept).
    """
    if not workload.is_training or OPTIMIZER_STATES[workload.optimizer] < 2 or framework == "paddle":
        return 0
    state_bytes = optimizer_element_bytes(workload, framework)
    if workload.optimizer_impl == "fused":
        return 0
    if workload.optimizer_impl == "for-loop":
        sizes = [0, *param_sizes_in_order(workload)]
        return max(prev + 2 * cur for prev, cur in pairwise(sizes)) * state_bytes
    return workload.param_count() * state_bytes


def optimizer_bytes(workload: Workload, framework: str) -> tuple[int, int, int]:
    """(optimizer state, master weights, optimizer-step scratch) in bytes.

    PyTorch keeps state in the parameter dtype (FP32 under AMP, 16-bit in pure half). Paddle's
    O2 (pure fp16/bf16) uses multi_precision: FP32 master weights and FP32 moments. The scratch
    depends on the implementation (optimizer_step_scratch).
    """
    if not workload.is_training:
        return 0, 0, 0
    params = workload.param_count()
    states = OPTIMIZER_STATES[workload.optimizer]
    state_bytes = optimizer_element_bytes(workload, framework)
    master = 4 * params if master_weights_kept(workload, framework) else 0
    return params * states * state_bytes, master, optimizer_step_scratch(workload, framework)


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


def activation_peak(workload: Workload, framework: str) -> dict[str, float]:
    """The moment of the backward walk with the most activations, autocast copies and
    temporaries, gradients left out: for strategies that hold every gradient for the whole step
    (DeepSpeed's ZeRO counts them in its model states)."""
    _, parts = _backward_peak(workload, framework, gradients=False)
    return parts


def _backward_peak(
    workload: Workload, framework: str, *, gradients: bool = True
) -> tuple[str, dict[str, float]]:
    """The largest moment of forward+backward, or the optimizer step, as parts (with
    `gradients` False: of forward+backward only, not counting gradients)."""
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
    all_grads = sum(s.params for s in segs) * grad_b
    grads_after = 0.0
    for i in range(n - 1, -1, -1):
        seg = segs[i]
        grads_after += seg.params * grad_b
        if workload.grad_accum > 1:
            # Accumulating: the previous micro-batches' gradients exist through this backward.
            grads_after = all_grads
        acts = prefix_act[i] + seg.saved_bytes
        total = acts + prefix_cast[i] + seg.cast_params * cast_b + seg.transient_bytes
        total += grads_after if gradients else 0.0
        if total > best_total:
            best_total = total
            best = {
                "activations": acts,
                "amp_weight_copies": prefix_cast[i] + seg.cast_params * cast_b,
                "gradients": grads_after,
                "temporaries": seg.transient_bytes,
            }
    _, _, opt_scratch = optimizer_bytes(workload, framework)
    if gradients and all_grads + opt_scratch > best_total:
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
