"""Parameter-efficient fine-tuning: memory and step time of LoRA and QLoRA.

LoRA (Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", 2021) freezes the base
model and adds to each targeted Linear W (in x out) a trainable update B·A of rank r: A is
r x in, B is out x r, so r*(in+out) parameters per Linear, scaled by alpha/r. QLoRA (Dettmers
et al., "QLoRA: Efficient Finetuning of Quantized LLMs", 2023) stores the frozen Linear weights
as 4-bit NormalFloat (NF4) and trains the same adapters on top.

What changes against full fine-tuning, and why (the `peft` and `bitsandbytes` code the torch
backend runs):
  * weights: the frozen base stays as loaded (16 bit, or FP32 under autocast), or NF4 for QLoRA;
    no gradients, no optimizer state and no master copy for it.
  * adapters: peft creates them in FP32 (`get_peft_model(..., autocast_adapter_dtype=True)`, the
    default, upcasts fp16/bf16 adapter weights to float32: peft/tuners/tuners_utils.py
    cast_adapter_dtype). Their gradients and Adam moments are FP32 too. Encoders also train the
    classifier (peft's task type SEQ_CLS puts it in `modules_to_save`: a trainable copy in the
    base dtype next to the frozen original; the pooler stays frozen).
  * activations: autograd saves a Linear's input only for its weight gradient, so the frozen
    Linears keep nothing; every op the gradient must flow through (norms, SiLU/GELU, attention)
    keeps what its input gradient needs. The LoRA branch of each targeted Linear,
    `B(A(dropout(x.to(fp32)))) * scaling` (peft/tuners/lora/layer.py Linear.forward), keeps the
    dropout mask, the dropped FP32 input (A's weight gradient) and A's output (B's). With a
    16-bit base those FP32 copies outweigh what the frozen Linears no longer keep: without
    checkpointing a LoRA step saves more activations than full 16-bit training does. (Checked
    against the tensors autograd saves for the tiny models, tests/backends/test_peft_torch.py.)
  * step time: the frozen matmuls need only the input gradient in backward (2x the forward FLOPs
    per step instead of 3x); the adapters add small GEMMs and elementwise passes; QLoRA
    dequantizes each weight to 16 bit in forward and again in backward.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from fitbench.core.gpu import GpuSpec
from fitbench.estimate import transformer_cost
from fitbench.estimate.dtypes import ActivationDtypes, activation_dtypes
from fitbench.estimate.memory import (
    OPTIMIZER_STATES,
    PART_NAMES,
    MemoryBreakdown,
    quantizable_params,
)
from fitbench.estimate.profile import Profile
from fitbench.estimate.segments import Kernel, Segment
from fitbench.estimate.speed import (
    BACKWARD_HOST_SHARE,
    FOREACH_OPTIMIZER_OPS,
    FUSED_OPTIMIZER_OPS,
    FUSED_OPTIMIZER_PASSES,
    OPTIMIZER_PASSES,
    STEP_FIXED_OPS,
    Timing,
    overlapped_seconds,
    time_kernels,
)
from fitbench.estimate.verdict import max_fitting, verdict
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# -- the adapter as apply_lora builds it (fitbench.backends.torch.peft_support) -------------------
LORA_DROPOUT = 0.05          # LoraConfig(lora_dropout=...): a dropout before A, so its mask is saved
LORA_ALPHA_PER_RANK = 2      # lora_alpha = 2r, a common choice (scaling alpha/r = 2)
ADAPTER_BYTES = 4            # FP32 adapters: peft's autocast_adapter_dtype=True default
MASK_BYTES = 1               # torch's fused CUDA dropout keeps a bool mask

# -- NF4 storage (Dettmers et al. 2023, section 3, and bitsandbytes Linear4bit defaults) ---------
NF4_BITS = 4
NF4_BLOCK = 64               # one absmax constant per 64 weights
DOUBLE_QUANT_BLOCK = 256     # double quantization: 8-bit constants, one FP32 per 256 of them
# Bits per quantized weight spent on block constants:
#   without double quantization: 32 / 64 = 0.5 bits
#   with it: 8 / 64 + 32 / (64 * 256) = 0.127 bits (the paper's "0.127 bits per parameter")
NF4_CONSTANT_BITS = {
    False: 32 / NF4_BLOCK,
    True: 8 / NF4_BLOCK + 32 / (NF4_BLOCK * DOUBLE_QUANT_BLOCK),
}
DOUBLE_QUANT = True          # bitsandbytes Linear4bit(compress_statistics=True), the QLoRA setup
# bitsandbytes' MatMul4Bit dequantizes the whole weight to 16 bit, multiplies, frees it, and does
# the same again in backward (it saves only the packed weight): one largest-layer weight in
# 16 bit is alive at a time; the allocator may hold a forward and a backward copy together.
DEQUANT_COPIES = 2

# Model types whose blocks fuse Linears (what LoRA then adapts as one matrix).
FUSED_QKV = ("gpt2", "chatglm", "phi3")          # c_attn / query_key_value / qkv_proj
FUSED_GATE_UP = ("chatglm", "phi3")              # dense_h_to_4h / gate_up_proj

# peft's LoRA forward per targeted Linear, as framework ops besides the A and B matmuls: the
# input cast to the FP32 adapter dtype, dropout, the scaling multiply, the add and the cast back
# to the base dtype: 7 Python-level torch calls with A and B (benchmarks/lora_ops.py counts them
# in the real models). In the estimator's unit (a decoder block's 55 calls are 48 operations)
# those are 6.1 operations: A, B and these 4. (Measured: LoRA of the 6.7B decoder at seq 512
# steps in 233 ms on an H200 host, overhead-bound.)
LORA_ELEMENTWISE_OPS = 4.0

# Backward host work, as the autograd nodes backward executes per block (benchmarks/lora_ops.py,
# real Qwen2 and Llama blocks through the torch backend's session): a trained block 84 (Qwen2:
# q/k/v biases) or 81 (Llama), 82.5 between them, for the 48 forward operations the estimator
# counts (transformer_cost); its BACKWARD_HOST_SHARE of those, 24, is 0.29 of an operation per
# node. A frozen block executes 65 nodes (no AccumulateGrad, no transposed weight's TBackward:
# a frozen Linear computes only its input gradient); each adapted Linear adds 15 (the casts,
# dropout, A, B, scaling and add with their views, and A's and B's AccumulateGrad) for its 6
# forward operations. At 0.29 of an operation per node:
TRAINED_BLOCK_NODES = 82.5
FROZEN_BLOCK_NODES = 65.0
BLOCK_FORWARD_OPS = 48.0
LORA_LINEAR_NODES = 15.0
# 0.394 of a forward operation for the frozen base's backward (full training: 0.5) ...
FROZEN_BACKWARD_SHARE = BACKWARD_HOST_SHARE * FROZEN_BLOCK_NODES / TRAINED_BLOCK_NODES
# ... and 0.727 for the adapters' (2.5 nodes per forward operation against a block's 1.72).
LORA_BACKWARD_SHARE = (BACKWARD_HOST_SHARE * (LORA_LINEAR_NODES / (2 + LORA_ELEMENTWISE_OPS))
                       / (TRAINED_BLOCK_NODES / BLOCK_FORWARD_OPS))


def _arch(workload: Workload) -> TransformerArch:
    if not isinstance(workload.arch, TransformerArch):
        raise TypeError("parameter-efficient fine-tuning applies to transformer workloads")
    return workload.arch


def _fused_qkv(arch: TransformerArch) -> bool:
    # A decoder the torch backend builds as GPT-2 (gelu MLP, learned positions) has c_attn too.
    gpt2_like = arch.kind == "decoder" and arch.mlp == "gelu" and arch.position == "learned"
    return arch.model_type in FUSED_QKV or (not arch.model_type and gpt2_like)


# -- adapter arithmetic -------------------------------------------------------------------------
def lora_linears(workload: Workload) -> list[tuple[str, int, int]]:
    """(name, in_features, out_features) of one block's Linears that carry an adapter.

    'attention': the q, k, v and output projections; 'attention-mlp' and 'all-linear': those and
    every MLP matrix (the same set for these architectures: the LM head and classifier are not
    adapted, and BERT's pooler is outside the blocks). Fused layouts adapt the fused matrix once.
    """
    arch = _arch(workload)
    h, f, q, kv = arch.hidden_size, arch.intermediate_size, arch.q_dim, arch.kv_dim
    attn = [("qkv", h, q + 2 * kv)] if _fused_qkv(arch) else [("q", h, q), ("k", h, kv), ("v", h, kv)]
    attn.append(("o", q, h))
    if workload.lora_targets == "attention":
        return attn
    if arch.mlp == "swiglu":
        mlp = [("gate_up", h, 2 * f)] if arch.model_type in FUSED_GATE_UP else [("gate", h, f), ("up", h, f)]
        mlp.append(("down", f, h))
    else:
        mlp = [("fc1", h, f), ("fc2", f, h)]
    return attn + mlp


def lora_params_per_layer(workload: Workload) -> int:
    """Adapter parameters of one block: r*(in+out) per adapted Linear (A: r x in, B: out x r)."""
    r = workload.lora_rank
    return sum(r * (fin + fout) for _, fin, fout in lora_linears(workload))


def lora_param_count(workload: Workload) -> int:
    """Adapter parameters of the whole model (what `peft` names lora_A / lora_B)."""
    return _arch(workload).num_layers * lora_params_per_layer(workload)


def head_trainable_params(workload: Workload) -> int:
    """Trainable parameters outside the adapters: an encoder's classifier (peft SEQ_CLS
    modules_to_save); a decoder trains nothing else (its LM head stays frozen)."""
    arch = _arch(workload)
    if arch.kind == "encoder":
        return arch.hidden_size * arch.num_labels + arch.num_labels
    return 0


def trainable_param_count(workload: Workload) -> int:
    """What `PeftModel.get_nb_trainable_parameters()` reports as trainable."""
    return lora_param_count(workload) + head_trainable_params(workload)


@dataclass(frozen=True, kw_only=True)
class _Bytes:
    """Bytes per element of what a PEFT step stores.

    base      non-quantized frozen parameters (16 bit when the precision is fp16/bf16; FP32 as
              loaded under autocast or fp32)
    head      the trainable classifier copy (peft copies the original in its dtype)
    lora      the adapter branch's saved activations: FP32 (the input is cast to the adapters'
              dtype), or 16 bit under autocast (A's matmul saves its own autocast copy)
    compute   the dtype QLoRA dequantizes into (bnb_4bit_compute_dtype)
    """

    base: int
    head: int
    lora: int
    compute: int


def _bytes(workload: Workload) -> _Bytes:
    p = workload.precision_info
    base = int(p.weight_bytes)
    return _Bytes(base=base, head=base, lora=p.activation_bytes if p.amp else ADAPTER_BYTES,
                  compute=p.activation_bytes)


# -- weights ------------------------------------------------------------------------------------
def base_weight_bytes(workload: Workload) -> tuple[int, int]:
    """(frozen base weights, quantization constants) in bytes.

    LoRA: every parameter in the base dtype. QLoRA: the blocks' Linear weights as packed NF4
    (0.5 byte each) plus their block constants; embeddings, norms, biases and the LM head or
    classifier stay in the base dtype, as bitsandbytes leaves them.
    """
    b = _bytes(workload)
    params = workload.param_count()
    if workload.peft != "qlora":
        return params * b.base, 0
    q = quantizable_params(workload)
    packed = q * NF4_BITS // 8
    constants = q * NF4_CONSTANT_BITS[DOUBLE_QUANT] / 8
    return int(packed + (params - q) * b.base), round(constants)


def dequant_workspace_bytes(workload: Workload) -> int:
    """QLoRA: the largest block Linear dequantized to the compute dtype, DEQUANT_COPIES times."""
    if workload.peft != "qlora":
        return 0
    arch = _arch(workload)
    largest = max(fin * fout for _, fin, fout in transformer_cost._gemms(arch))
    return DEQUANT_COPIES * largest * _bytes(workload).compute


# -- activations --------------------------------------------------------------------------------
def frozen_savings_per_token(arch: TransformerArch, dt: ActivationDtypes) -> float:
    """Bytes per token and block that full training saves only for weight gradients.

    Mirrors transformer_cost.layer_saved_bytes_per_token term by term:
      * the inputs of the Linears (q/k/v, MLP in, attention output projection, MLP out): a frozen
        Linear saves nothing, its input gradient needs only the weight;
      * RMSNorm with a frozen scale saves only its FP32 input (`weight * x` keeps x only for the
        weight's gradient), 4h instead of 8h/6h; LayerNorm's backward needs its input anyway.
    """
    h, f, q = arch.hidden_size, arch.intermediate_size, arch.q_dim
    if arch.kind == "encoder":
        qkv_in = dt.linear_input(h, 3)
        mlp_in = dt.linear_input(h, 1)
        norms = 0.0
    else:
        qkv_in = dt.linear_input(h, 3)
        mlp_in = dt.linear_input(h, 2)
        rms = transformer_cost.rms_saved_bytes_per_token(h, dt)
        norms = 2 * (rms - 4 * h) if arch.norm == "rmsnorm" else 0.0
    out_proj_in = q * dt.act          # attention output (contiguous copy) feeding the o projection
    mlp_out_in = f * dt.act           # SiLU(gate)*up, or GELU's output, feeding the last MLP matrix
    return qkv_in + mlp_in + norms + out_proj_in + mlp_out_in


def lora_saved_bytes_per_token(workload: Workload, dt: ActivationDtypes) -> float:
    """Bytes per token and block the adapter branches save.

    Per adapted Linear of in x out: the dropout mask (in, bool), A's input (in: the dropped FP32
    copy, or under autocast A's 16-bit cast of it), and B's input (r, A's output). Linears that
    share an input (q, k, v) each cast and drop it separately, so each keeps its own copy.
    """
    b = _bytes(workload)
    mask = MASK_BYTES if LORA_DROPOUT > 0 else 0
    r = workload.lora_rank
    return sum(fin * (b.lora + mask) + r * b.lora for _, fin, _ in lora_linears(workload))


def peft_segments(workload: Workload) -> list[tuple[Segment, int]]:
    """Segments in forward order, each with the bytes per element of its trainable parameters'
    gradients (FP32 adapters; the classifier copy in the base dtype)."""
    arch = _arch(workload)
    b = _bytes(workload)
    dropout = arch.kind == "encoder"
    dt = activation_dtypes(workload, dropout=dropout)
    batch = workload.batch_size
    s = workload.seq_len or workload.tokens_per_sequence
    tokens = batch * s
    h, v = arch.hidden_size, arch.vocab_size
    full = transformer_cost.layer_saved_bytes_per_token(arch, dt, s, workload.attention)
    per_token = full - frozen_savings_per_token(arch, dt) + lora_saved_bytes_per_token(workload, dt)
    # The embeddings are frozen and their output needs no gradient: nothing is saved there, and
    # a decoder's first RMSNorm (whose input needs no gradient either) saves nothing.
    first_norm = 4 * h if (arch.kind == "decoder" and arch.norm == "rmsnorm") else 0
    # The first block's q/k/v adapters read that gradient-free input too: their dropout keeps
    # no mask (nothing flows back through it), only A's input.
    mask = MASK_BYTES if LORA_DROPOUT > 0 else 0
    first_masks = mask * sum(fin for name, fin, _ in lora_linears(workload) if name in ("q", "k", "v", "qkv"))
    per_input = transformer_cost.layer_input_bytes_per_token(arch, dt) * tokens
    per_transient = transformer_cost.layer_transient_bytes_per_token(arch, dt, s, workload.attention) * tokens
    # Autocast casts each frozen FP32 weight to 16 bit per use (not cached: the weight needs no
    # gradient) and the matmul keeps that copy for the input gradient, as in full AMP training.
    # QLoRA's 4-bit layers dequantize inside their own autograd function and keep nothing.
    cast = arch.linear_params_per_layer() if (dt.amp and workload.peft == "lora") else 0
    lora_layer = lora_params_per_layer(workload)
    segs: list[tuple[Segment, int]] = [
        (Segment(name="embeddings", saved_bytes=0.0, input_bytes=0.0, params=0), ADAPTER_BYTES)]
    for i in range(arch.num_layers):
        saved = (per_token - (first_norm + first_masks if i == 0 else 0)) * tokens
        segs.append((Segment(name=f"layer{i}", saved_bytes=saved, input_bytes=per_input, params=lora_layer,
                             cast_params=cast, transient_bytes=per_transient), ADAPTER_BYTES))
    if arch.kind == "encoder":
        # Pooler and classifier on the [CLS] token only (as in full training: b*h, negligible).
        head_saved = batch * h * (dt.act * 3)
        head_transient = batch * h * 8.0
        head_cast = arch.head_params() if dt.amp else 0
    else:
        # Frozen final norm (its FP32 input) and the FP32 logits' log_softmax kept for the loss;
        # the frozen LM head keeps no input.
        head_saved = tokens * (4 * h + v * 4)
        head_transient = tokens * v * (4 + 4 + dt.act)
        head_cast = (v * h if not arch.tie_embeddings else 0) if dt.amp else 0
    segs.append((Segment(name="head", saved_bytes=head_saved, input_bytes=batch * h * dt.res,
                         params=head_trainable_params(workload), cast_params=head_cast,
                         transient_bytes=head_transient), b.head))
    return segs


def _backward_peak(workload: Workload) -> tuple[str, dict[str, float]]:
    """The largest moment of forward+backward or of the optimizer step (memory._backward_peak's
    walk, with per-segment gradient dtypes)."""
    p = workload.precision_info
    segs = peft_segments(workload)
    cast_b = p.cast_cache_bytes
    prefix_act: list[float] = []
    prefix_cast: list[float] = []
    acts_before = casts_before = 0.0
    for seg, _ in segs:
        prefix_act.append(acts_before)
        prefix_cast.append(casts_before)
        checkpointed = workload.checkpointing and seg.name.startswith("layer")
        acts_before += seg.input_bytes if checkpointed else seg.saved_bytes
        casts_before += seg.cast_params * cast_b
    best: dict[str, float] = {}
    best_total = -1.0
    grads_after = 0.0
    all_grads = sum(seg.params * grad_b for seg, grad_b in segs)
    for i in range(len(segs) - 1, -1, -1):
        seg, grad_b = segs[i]
        grads_after += seg.params * grad_b
        if workload.grad_accum > 1:  # accumulated gradients stay alive (memory._backward_peak)
            grads_after = all_grads
        acts = prefix_act[i] + seg.saved_bytes
        casts = prefix_cast[i] + seg.cast_params * cast_b
        total = acts + casts + grads_after + seg.transient_bytes
        if total > best_total:
            best_total = total
            best = {"activations": acts, "amp_weight_copies": casts, "gradients": grads_after,
                    "temporaries": seg.transient_bytes}
    if all_grads + optimizer_scratch_bytes(workload) > best_total:
        return "optimizer", {"activations": 0.0, "amp_weight_copies": 0.0, "gradients": all_grads,
                             "temporaries": optimizer_scratch_bytes(workload)}
    return "backward", best


def _trainable_bytes(workload: Workload) -> int:
    """Bytes of the trainable parameters (and so of their gradients): FP32 adapters plus an
    encoder's classifier copy in the base dtype."""
    head = head_trainable_params(workload) * _bytes(workload).head
    return lora_param_count(workload) * ADAPTER_BYTES + head


def optimizer_state_bytes(workload: Workload) -> int:
    """Moments of the trainable parameters only, in their dtype (Adam: 2, momentum: 1)."""
    return OPTIMIZER_STATES[workload.optimizer] * _trainable_bytes(workload)


def optimizer_scratch_bytes(workload: Workload) -> int:
    """The optimizer step's temporaries over the trainable parameters, by implementation
    (memory.optimizer_step_scratch reads them from torch/optim/adam.py): foreach 1.00x the
    trainable bytes (its square-root list; with the adapters and an encoder's head in two dtype
    groups the first group's list is still referenced while the second's is made, so the sum),
    fused nothing, for-loop twice the largest trainable tensor (a LoRA matrix or the head)."""
    if OPTIMIZER_STATES[workload.optimizer] < 2 or workload.optimizer_impl == "fused":
        return 0
    if workload.optimizer_impl == "for-loop":
        arch = _arch(workload)
        widest = max(arch.hidden_size, arch.intermediate_size, arch.q_dim)
        largest = max(workload.lora_rank * widest * ADAPTER_BYTES,
                      head_trainable_params(workload) * _bytes(workload).head)
        return 2 * largest
    return _trainable_bytes(workload)


# Parts of a PEFT breakdown: memory's names with the adapters and QLoRA's dequantization
# workspace named on their own.
PEFT_PART_NAMES = (*PART_NAMES[:2], "adapter_weights", *PART_NAMES[2:-3], "dequant_workspace",
                   *PART_NAMES[-3:])


def memory_breakdown(workload: Workload, profile: Profile) -> MemoryBreakdown:
    """Peak memory of one LoRA/QLoRA training step on one device, as named parts."""
    if not workload.peft or not workload.is_training:
        raise ValueError("peft.memory_breakdown needs a training workload with peft set")
    parts: dict[str, float] = dict.fromkeys(PEFT_PART_NAMES, 0.0)
    weights, constants = base_weight_bytes(workload)
    parts["weights"] = weights
    parts["quantization_scales"] = constants
    lora = lora_param_count(workload)
    head = head_trainable_params(workload)
    parts["adapter_weights"] = _trainable_bytes(workload)
    parts["optimizer_state"] = optimizer_state_bytes(workload)
    phase, dynamic = _backward_peak(workload)
    parts.update(dynamic)
    parts["dequant_workspace"] = dequant_workspace_bytes(workload)
    dynamic_total = parts["activations"] + parts["temporaries"] + parts["gradients"]
    parts["workspace"] = profile.workspace_bytes
    parts["fragmentation"] = profile.fragmentation * dynamic_total
    parts["cuda_context"] = profile.context_bytes
    details = {
        "trainable_params": lora + head,
        "adapter_params": lora,
        "head_trainable_params": head,
        "frozen_params": workload.param_count(),
        "quantized_params": quantizable_params(workload) if workload.peft == "qlora" else 0,
        "gradients_total": _trainable_bytes(workload),
    }
    return MemoryBreakdown(parts={k: round(v) for k, v in parts.items()}, phase=phase, details=details)


def assumptions(workload: Workload) -> tuple[str, ...]:
    """One line per modelling choice that a reader of a PEFT estimate should know."""
    p = workload.precision_info
    targets = ", ".join(name for name, _, _ in lora_linears(workload))
    head = " (an encoder's classifier is trained)" if head_trainable_params(workload) else ""
    lines = [f"{workload.peft}: rank {workload.lora_rank} adapters on {targets} in every block "
             f"({lora_param_count(workload):,} params, FP32 as peft creates them); the LM head/classifier "
             f"is not adapted{head}"]
    if workload.peft == "qlora":
        dq = "with" if DOUBLE_QUANT else "without"
        lines.append(f"qlora: block Linear weights in NF4 (blocks of {NF4_BLOCK}, {dq} double quantization: "
                     f"{NF4_CONSTANT_BITS[DOUBLE_QUANT]:.3f} bits/param of constants); embeddings, norms and "
                     "the head in the base dtype; one dequantized layer at a time")
    if p.amp:
        lines.append(f"{workload.precision}: the frozen base stays in FP32 as loaded (autocast computes in "
                     "16 bit); use --precision bf16/fp16 to hold it in 16 bit")
    return tuple(lines)


# -- step time ----------------------------------------------------------------------------------
def _frozen_backward(forward: list[Kernel]) -> list[Kernel]:
    """Backward of the base forward with frozen weights.

    Matmuls of frozen weights compute only the input gradient: as many FLOPs and bytes as their
    forward (full training: 2x, the weight gradient being the other product). An encoder's
    classifier (trained) keeps 2x. Attention (2.5x: recomputes the scores) and elementwise
    backward (2x the bytes) are unchanged. The frozen embeddings have no backward at all, and
    of a frozen Linear's autocast casts only the input's is cast back in backward. The host
    issues FROZEN_BACKWARD_SHARE of a forward operation per operation (fewer autograd nodes than
    full training's BACKWARD_HOST_SHARE); the trained classifier keeps the latter.
    """
    out = []
    for k in forward:
        if k.name == "embedding":
            continue
        casts = k.cast_ops
        if k.kind == "matmul":
            factor = 2.0 if k.name == "classifier" else 1.0
            flops, nbytes = k.flops * factor, k.bytes * factor
            if k.name != "classifier" and casts:
                casts = float(transformer_cost.input_casts(k.name))
        elif k.kind == "attention":
            flops, nbytes = k.flops * 2.5, k.bytes * 2.0
        else:
            flops, nbytes = k.flops * 2.0, k.bytes * 2.0
        share = BACKWARD_HOST_SHARE if k.name == "classifier" else FROZEN_BACKWARD_SHARE
        out.append(dataclasses.replace(k, name=k.name + ".backward", flops=flops, bytes=nbytes,
                                       ops=k.ops * share, cast_ops=casts))
    return out


def lora_kernels(workload: Workload) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of the adapter branches over one step's tokens.

    Forward per adapted Linear: A (2*T*in*r FLOPs), B (2*T*r*out) and the elementwise passes:
    the input cast to FP32 (or autocast's cast back to 16 bit), dropout (read, write, mask),
    the scaling, the add into the base output and its cast back. Backward: A and B each compute
    an input and a weight gradient (2x), elementwise about 2x the bytes; the host issues
    LORA_BACKWARD_SHARE of a forward operation per operation (the nodes autograd executes).
    """
    arch = _arch(workload)
    dt = activation_dtypes(workload, dropout=arch.kind == "encoder")
    b = _bytes(workload)
    tokens = workload.batch_size * (workload.seq_len or 1)
    r = workload.lora_rank
    a, lb, w = dt.act, b.lora, ADAPTER_BYTES
    mask = MASK_BYTES if LORA_DROPOUT > 0 else 0
    L = arch.num_layers
    fwd: list[Kernel] = []
    for name, fin, fout in lora_linears(workload):
        fwd.append(Kernel(name=f"lora.{name}.A", kind="matmul", flops=2.0 * tokens * fin * r,
                          bytes=tokens * (fin + r) * lb + fin * r * w, count=L))
        fwd.append(Kernel(name=f"lora.{name}.B", kind="matmul", flops=2.0 * tokens * r * fout,
                          bytes=tokens * (r + fout) * lb + r * fout * w, count=L))
        cast_in = fin * (a + 4) if a != 4 else 0.0
        dropout = fin * (4 + 4 + mask)
        out = fout * (4 + 4) + fout * (a + 4 + 4) + fout * (4 + a)   # scale, add, cast back
        fwd.append(Kernel(name=f"lora.{name}.elementwise", kind="memory", flops=0.0,
                          bytes=tokens * (cast_in + dropout + out), count=L, ops=LORA_ELEMENTWISE_OPS))
    bwd = [dataclasses.replace(k, name=k.name + ".backward", flops=k.flops * 2.0, bytes=k.bytes * 2.0,
                               ops=k.ops * LORA_BACKWARD_SHARE) for k in fwd]
    return fwd, bwd


def dequant_kernels(workload: Workload) -> list[Kernel]:
    """QLoRA: one pass of dequantization over every block Linear (read NF4 and its constants,
    write the 16-bit weight that the following GEMM reads; that read is in forward_kernels)."""
    if workload.peft != "qlora":
        return []
    arch = _arch(workload)
    b = _bytes(workload)
    consts = NF4_CONSTANT_BITS[DOUBLE_QUANT] / 8
    return [Kernel(name=f"dequant.{name}", kind="memory", flops=0.0,
                   bytes=fin * fout * (NF4_BITS / 8 + consts + b.compute), count=arch.num_layers, ops=2.0)
            for name, fin, fout in transformer_cost._gemms(arch)]


def optimizer_kernels(workload: Workload) -> list[Kernel]:
    """The optimizer over the trainable parameters only (speed.optimizer_kernels' passes per
    implementation, once every grad_accum micro-batches)."""
    fused = workload.optimizer_impl == "fused"
    passes = (FUSED_OPTIMIZER_PASSES if fused else OPTIMIZER_PASSES)[workload.optimizer]
    ops = FUSED_OPTIMIZER_OPS if fused else FOREACH_OPTIMIZER_OPS
    share = 1.0 / workload.grad_accum
    return [Kernel(name="optimizer", kind="memory", flops=0.0,
                   bytes=passes * _trainable_bytes(workload) * share, count=1, ops=ops * share)]


def _add(t1: Timing, t2: Timing, profile: Profile) -> Timing:
    """Two parts of one step: GPU and host times add; the step is the longer of the two plus the
    share of the shorter that does not overlap (speed.time_kernels' rule)."""
    gpu = t1.gpu_seconds + t2.gpu_seconds
    host = t1.host_seconds + t2.host_seconds
    return Timing(seconds=overlapped_seconds(gpu, host, profile.overlap_loss), gpu_seconds=gpu,
                  host_seconds=host,
                  compute_seconds=t1.compute_seconds + t2.compute_seconds,
                  memory_seconds=t1.memory_seconds + t2.memory_seconds,
                  floor_seconds=t1.floor_seconds + t2.floor_seconds,
                  flops=t1.flops + t2.flops, bytes=t1.bytes + t2.bytes)


def training_step(workload: Workload, gpu: GpuSpec, profile: Profile) -> Timing:
    """One LoRA/QLoRA training step.

    Base: forward + input-gradient-only backward (+ a second forward with checkpointing), at the
    workload's compute precision. QLoRA: a dequantization pass per weight in forward and in
    backward (and in the recomputed forward). Adapters: their GEMMs and elementwise passes, timed
    at FP32 rates (peft computes the FP32 adapters in FP32; autocast runs them in 16 bit), and the
    optimizer over the trainable parameters only.
    """
    _arch(workload)
    fwd = transformer_cost.forward_kernels(workload, workload.batch_size, workload.seq_len or 1)
    base = fwd + _frozen_backward(fwd)
    passes = 2
    if workload.checkpointing:
        base += fwd
        passes += 1
    base += [dataclasses.replace(k, count=k.count * passes) for k in dequant_kernels(workload)]
    main = time_kernels(base, workload, gpu, profile, host_seconds_per_op=profile.host_seconds_per_op,
                        fixed_ops=STEP_FIXED_OPS)
    lora_fwd, lora_bwd = lora_kernels(workload)
    adapters = lora_fwd + lora_bwd + (lora_fwd if workload.checkpointing else [])
    adapters += optimizer_kernels(workload)
    fp32 = workload if workload.precision_info.amp else dataclasses.replace(workload, precision="fp32")
    extra = time_kernels(adapters, fp32, gpu, profile, host_seconds_per_op=profile.host_seconds_per_op)
    return _add(main, extra, profile)


# -- options for the advice ---------------------------------------------------------------------
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
    from fitbench.estimate import speed
    from fitbench.estimate.api import needed_bytes, required_bytes
    from fitbench.estimate.memory import memory_breakdown as breakdown

    _arch(workload)
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
            mem = breakdown(w, profile)
            if method == "full":
                timing = speed.training_step(w, gpu, profile)
                trainable = w.param_count()
            else:
                timing = training_step(w, gpu, profile)
                trainable = trainable_param_count(w)
            rows.append({
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
                "max_batch_size": max_fitting(lambda n, w=w: needed_bytes(w.replace(batch_size=n), profile),
                                              gpu.usable_bytes),
                "step_seconds": timing.seconds,
                "breakdown": mem.to_dict(),
            })
    return rows
