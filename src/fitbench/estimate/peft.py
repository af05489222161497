"""Parameter-efficient fine-tuning: what LoRA and QLoRA add and store, and their peak memory.

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
    dequantizes each weight to 16 bit in forward and again in backward (peft_speed.py).

The breakdown is the one-device model of an adapted job: the memory model's entry (memory.py)
picks it instead of single_device.py, and sharding.py spreads it over several GPUs like any
other; nothing here calls back up.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from fitbench.estimate import expert_cost, first_step, liveness, transformer_cost
from fitbench.estimate.breakdown import PART_NAMES, MemoryBreakdown, with_part
from fitbench.estimate.dtypes import ActivationDtypes, activation_dtypes, keeps_dropout_masks
from fitbench.estimate.liveness import GradedSegment
from fitbench.estimate.matrices import block_gemms
from fitbench.estimate.optimizer import OPTIMIZER_STATES
from fitbench.estimate.profile import Profile
from fitbench.estimate.segments import Segment
from fitbench.estimate.weights import quantizable_params, stacked_expert_params
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# -- the adapter as apply_lora builds it (fitbench.backends.torch.peft_support) -------------------
LORA_DROPOUT = 0.05  # LoraConfig(lora_dropout=...): a dropout before A, so its mask is saved
LORA_ALPHA_PER_RANK = 2  # lora_alpha = 2r, a common choice (scaling alpha/r = 2)
ADAPTER_BYTES = 4  # FP32 adapters: peft's autocast_adapter_dtype=True default
MASK_BYTES = 1  # torch's fused CUDA dropout keeps a bool mask

# -- NF4 storage (Dettmers et al. 2023, section 3, and bitsandbytes Linear4bit defaults) ---------
NF4_BITS = 4
NF4_BLOCK = 64  # one absmax constant per 64 weights
DOUBLE_QUANT_BLOCK = 256  # double quantization: 8-bit constants, one FP32 per 256 of them
# Bits per quantized weight spent on block constants:
#   without double quantization: 32 / 64 = 0.5 bits
#   with it: 8 / 64 + 32 / (64 * 256) = 0.127 bits (the paper's "0.127 bits per parameter")
NF4_CONSTANT_BITS = {
    False: 32 / NF4_BLOCK,
    True: 8 / NF4_BLOCK + 32 / (NF4_BLOCK * DOUBLE_QUANT_BLOCK),
}
DOUBLE_QUANT = True  # bitsandbytes Linear4bit(compress_statistics=True), the QLoRA setup
# bitsandbytes' MatMul4Bit dequantizes the whole weight to 16 bit, multiplies, frees it, and does
# the same again in backward (it saves only the packed weight): one largest-layer weight in
# 16 bit is alive at a time; the allocator may hold a forward and a backward copy together.
DEQUANT_COPIES = 2

# Model types whose blocks fuse Linears (what LoRA then adapts as one matrix).
# c_attn / query_key_value (ChatGLM, GPT-NeoX, Falcon) / qkv_proj
FUSED_QKV = ("gpt2", "gpt-bigcode", "chatglm", "gpt-neox", "falcon", "phi3")
FUSED_GATE_UP = ("chatglm", "phi3", "glm4")  # dense_h_to_4h / gate_up_proj

# Mixture-of-experts families whose routed experts peft adapts through a v4-style target list
# (gate_proj/up_proj/down_proj; Mixtral's w1/w3/w2) on transformers 5, where they are stacked
# 3-D parameters, not Linears: peft (0.19 on; utils/transformers_weight_conversion.py, its family
# map as of 0.21.2) turns those names into target_parameters and wraps each stacked parameter in
# a ParamWrapper. Qwen2-MoE itself is not in that map: only its shared expert's Linears are adapted.
PEFT_STACKED_EXPERT_TYPES = frozenset(
    {
        "mixtral",
        "minimax",
        "minimax_m2",
        "qwen3_moe",
        "qwen3_next",
        "olmoe",
        "flex_olmo",
        "deepseek_v2",
        "deepseek_v3",
        "dots1",
        "ernie4_5_moe",
        "glm4_moe",
        "glm4_moe_lite",
        "hunyuan_v1_moe",
        "exaone_moe",
        "cohere2_moe",
        "afmoe",
        "solar_open",
        "mellum",
        "longcat_flash",
    }
)

# MoE families whose shared experts carry names LoRA's MLP targets do not reach (Granite MoE's
# shared_mlp: input_linear and output_linear).
SHARED_MLP_UNREACHED_TYPES = frozenset({"granitemoeshared"})

# peft's LoRA forward per targeted Linear, as framework ops besides the A and B matmuls: the
# input cast to the FP32 adapter dtype, dropout, the scaling multiply, the add and the cast back
# to the base dtype: 7 Python-level torch calls with A and B (benchmarks/lora_ops.py counts them
# in the real models). In the estimator's unit (a decoder block's 55 calls are 48 operations)
# those are 6.1 operations: A, B and these 4. (Measured: LoRA of the 6.7B decoder at seq 512
# steps in 233 ms on an H200 host, overhead-bound.)
LORA_ELEMENTWISE_OPS = 4.0


def adapted_arch(workload: Workload) -> TransformerArch:
    if not isinstance(workload.arch, TransformerArch):
        raise TypeError("parameter-efficient fine-tuning applies to transformer workloads")
    return workload.arch


def _fused_qkv(arch: TransformerArch) -> bool:
    # A decoder the torch backend builds as GPT-2 (gelu MLP, learned positions) has c_attn too.
    gpt2_like = arch.kind == "decoder" and arch.mlp == "gelu" and arch.position == "learned"
    return arch.model_type in FUSED_QKV or (not arch.model_type and gpt2_like)


# -- adapter arithmetic -------------------------------------------------------------------------
def lora_linears(workload: Workload, *, moe_layer: bool | None = None) -> list[tuple[str, int, int]]:
    """(name, in_features, out_features) of one block's Linears that carry an adapter.

    'attention': the q, k, v and output projections; 'attention-mlp' and 'all-linear': those and
    every MLP matrix (the same set for these architectures: the LM head and classifier are not
    adapted, and BERT's pooler is outside the blocks). Fused layouts adapt the fused matrix once.
    A mixture-of-experts block (`moe_layer`; None: the model has experts) has no MLP Linear but
    its shared experts' (transformers 5 stacks the routed experts into 3-D parameters and its
    router is no Linear): expert_adapters says what peft adapts there instead.
    """
    arch = adapted_arch(workload)
    h, f, q, kv = arch.hidden_size, arch.intermediate_size, arch.q_dim, arch.kv_dim
    if arch.is_mla:
        # latent attention: the query's projection(s), the compressed key/value one, its
        # expansion and the output, each a Linear of its own
        attn = list(arch.attention_linears())
    else:
        attn = [("qkv", h, q + 2 * kv)] if _fused_qkv(arch) else [("q", h, q), ("k", h, kv), ("v", h, kv)]
        attn.append(("o", q, h))
    if workload.lora_targets == "attention":
        return attn
    if arch.rules_type in PEFT_STACKED_EXPERT_TYPES or arch.rules_type in SHARED_MLP_UNREACHED_TYPES:
        # peft moves the MLP names from target_modules to the stacked experts' target_parameters
        # (utils/transformers_weight_conversion.py _convert_peft_config_moe), so no Linear of those
        # names is adapted: not a dense layer's MLP, not the shared experts'
        return attn
    moe = arch.is_moe if moe_layer is None else moe_layer
    if moe:
        f = arch.shared_intermediate_size
        if not f:
            return attn
    if arch.mlp == "swiglu":
        mlp = [("gate_up", h, 2 * f)] if arch.model_type in FUSED_GATE_UP else [("gate", h, f), ("up", h, f)]
        mlp.append(("down", f, h))
    else:
        mlp = [("fc1", h, f), ("fc2", f, h)]
    return attn + mlp


def expert_adapters(workload: Workload) -> list[tuple[str, int, int, int]]:
    """(name, in_features, out_features, rank) of the stacked expert parameters peft adapts in
    one MoE block, each for all E experts at once: none for 'attention', or outside
    PEFT_STACKED_EXPERT_TYPES. A ParamWrapper holds lora_A as (rank x E) x in and lora_B as
    out x (rank x E): rank x E x (in + out) parameters; the fused gate/up stack takes twice the
    rank (peft's rank_pattern for two fused v4 targets)."""
    arch = adapted_arch(workload)
    if not arch.is_moe or workload.lora_targets == "attention":
        return []
    if arch.rules_type not in PEFT_STACKED_EXPERT_TYPES:
        return []
    h, fe, r = arch.hidden_size, arch.expert_intermediate_size, workload.lora_rank
    if arch.mlp == "swiglu":
        return [("experts.gate_up", h, 2 * fe, 2 * r), ("experts.down", fe, h, r)]
    return [("experts.up", h, fe, r), ("experts.down", fe, h, r)]


def expert_adapter_params(workload: Workload) -> int:
    """Adapter parameters of one MoE block's stacked experts (expert_adapters)."""
    e = adapted_arch(workload).num_experts
    return sum(rank * e * (fin + fout) for _, fin, fout, rank in expert_adapters(workload))


def lora_dropout(workload: Workload) -> float:
    """The adapters' dropout: LORA_DROPOUT, or none where peft adapts stacked experts (its
    ParamWrapper refuses lora_dropout != 0, and one LoraConfig holds every target)."""
    return 0.0 if expert_adapters(workload) else LORA_DROPOUT


def merged_expert_stack_bytes(workload: Workload) -> list[float]:
    """Bytes of each merged expert stack of one MoE block, in forward order: peft folds W + B·A
    into a new tensor the size of each adapted stack on every forward (a baddbmm in the weights'
    dtype, _LoraFactorsProxy), and the grouped product saves it for the input gradient."""
    e, b = adapted_arch(workload).num_experts, peft_bytes(workload).base
    return [e * fin * fout * b for _, fin, fout, _ in expert_adapters(workload)]


def merged_expert_bytes(workload: Workload) -> float:
    """Bytes of one MoE block's merged expert stacks (merged_expert_stack_bytes), all saved."""
    return sum(merged_expert_stack_bytes(workload))


def merged_expert_gradient_bytes(workload: Workload) -> float:
    """What one MoE block's merged stacks add at their backward's peak: each stack's gradient is
    written while the stacks backward already went through are freed (their saved merged copies
    go with their nodes), so the largest of stack - stacks freed before it, walking the stacks in
    backward order (Mixtral's down stack, then gate_up: one stack's size, where both were counted;
    the meta-device trace's peak holds one gradient beside the saved copies)."""
    peak = freed = 0.0
    for stack in reversed(merged_expert_stack_bytes(workload)):
        peak = max(peak, stack - freed)
        freed += stack
    return peak


def lora_params_per_layer(workload: Workload, *, moe_layer: bool | None = None) -> int:
    """Adapter parameters of one block: r*(in+out) per adapted Linear (A: r x in, B: out x r),
    and in a MoE block (`moe_layer`; None: the model has experts) its stacked experts'."""
    arch = adapted_arch(workload)
    moe = arch.is_moe if moe_layer is None else moe_layer
    r = workload.lora_rank
    linears = sum(r * (fin + fout) for _, fin, fout in lora_linears(workload, moe_layer=moe))
    return linears + (expert_adapter_params(workload) if moe else 0)


def lora_param_count(workload: Workload) -> int:
    """Adapter parameters of the whole model (what `peft` names lora_A / lora_B)."""
    arch = adapted_arch(workload)
    return sum(
        lora_params_per_layer(workload, moe_layer=arch.is_moe_layer(i)) for i in range(arch.num_layers)
    )


def trainable_tensor_count(workload: Workload) -> int:
    """Trainable parameter tensors: lora_A and lora_B of every adapted Linear and stacked expert
    parameter, and an encoder's classifier weight and bias."""
    arch = adapted_arch(workload)
    adapters = 0
    for i in range(arch.num_layers):
        moe = arch.is_moe_layer(i)
        adapters += 2 * (
            len(lora_linears(workload, moe_layer=moe)) + (len(expert_adapters(workload)) if moe else 0)
        )
    return adapters + (2 if head_trainable_params(workload) else 0)


def head_trainable_params(workload: Workload) -> int:
    """Trainable parameters outside the adapters: an encoder's classifier (peft SEQ_CLS
    modules_to_save); a decoder trains nothing else (its LM head stays frozen)."""
    arch = adapted_arch(workload)
    if arch.kind == "encoder":
        return arch.hidden_size * arch.num_labels + arch.num_labels
    return 0


def trainable_param_count(workload: Workload) -> int:
    """What `PeftModel.get_nb_trainable_parameters()` reports as trainable."""
    return lora_param_count(workload) + head_trainable_params(workload)


@dataclass(frozen=True, kw_only=True)
class PeftBytes:
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


def peft_bytes(workload: Workload) -> PeftBytes:
    p = workload.precision_info
    base = int(p.weight_bytes)
    return PeftBytes(
        base=base, head=base, lora=p.activation_bytes if p.amp else ADAPTER_BYTES, compute=p.activation_bytes
    )


# -- weights ------------------------------------------------------------------------------------
def base_weight_bytes(workload: Workload) -> tuple[int, int]:
    """(frozen base weights, quantization constants) in bytes.

    LoRA: every parameter in the base dtype. QLoRA: the blocks' Linear weights as packed NF4
    (0.5 byte each) plus their block constants; embeddings, norms, biases and the LM head or
    classifier stay in the base dtype, as bitsandbytes leaves them, and so do a MoE's routed
    experts, which transformers 5 stacks into 3-D parameters that are no Linear
    (weights.stacked_expert_params; its routers are no Linear either and were never counted).
    """
    b = peft_bytes(workload)
    params = workload.param_count()
    if workload.peft != "qlora":
        return params * b.base, 0
    q = quantizable_params(workload) - stacked_expert_params(adapted_arch(workload))
    packed = q * NF4_BITS // 8
    constants = q * NF4_CONSTANT_BITS[DOUBLE_QUANT] / 8
    return int(packed + (params - q) * b.base), round(constants)


def dequant_workspace_bytes(workload: Workload) -> int:
    """QLoRA: the largest block Linear dequantized to the compute dtype, DEQUANT_COPIES times."""
    if workload.peft != "qlora":
        return 0
    arch = adapted_arch(workload)
    largest = max(fin * fout for _, fin, fout in block_gemms(arch))
    return DEQUANT_COPIES * largest * peft_bytes(workload).compute


# -- activations --------------------------------------------------------------------------------
def frozen_savings_per_token(
    arch: TransformerArch, dt: ActivationDtypes, *, adapted_experts: bool = False
) -> float:
    """Bytes per token and block that full training saves only for weight gradients.

    Mirrors transformer_cost.layer_saved_bytes_per_token term by term:
      * the inputs of the Linears (q/k/v, MLP in, attention output projection, MLP out): a frozen
        Linear saves nothing, its input gradient needs only the weight;
      * a norm with a frozen scale keeps less (transformer_cost.frozen_norm_saved_bytes_per_token:
        an RMSNorm only its FP32 input), for each of the block's norms (Gemma-2/3: four, FP32 to
        the end) and its query/key norms (Qwen3, Gemma-3, OLMo-2); LayerNorm's backward needs its
        input anyway.
    """
    h, f, q = arch.hidden_size, arch.intermediate_size, arch.q_dim
    if arch.kind == "encoder":
        qkv_in = dt.linear_input(h, 3)
        mlp_in = dt.linear_input(h, 1)
        norms = 0.0
    else:
        # as full training counts them: a fused projection keeps one autocast copy
        qkv_in, mlp_in = transformer_cost.decoder_linear_inputs_saved_bytes_per_token(arch, dt)

        def saving(width: int, input_bytes: float) -> float:
            trained = transformer_cost.norm_saved_bytes_per_token(arch, width, input_bytes)
            return trained - transformer_cost.frozen_norm_saved_bytes_per_token(arch, width, input_bytes)

        norms = arch.norms_per_layer * saving(h, dt.res)
        if arch.qk_norm != "none":
            norms += saving(arch.q_dim + arch.kv_dim, dt.act)
    out_proj_in = q * dt.act  # attention output (contiguous copy) feeding the o projection
    mlp_out_in = f * dt.act  # SiLU(gate)*up, or GELU's output, feeding the last MLP matrix
    if transformer_cost.python_xielu(arch):
        # xIELU's (expm1(min(x, eps)) - x) * a_n keeps its left operand only for a_n's gradient
        # (transformer_cost.xielu_saved_bytes): a frozen a_n needs none.
        mlp_out_in += f * dt.act
    if arch.is_moe:
        # A frozen MoE block (moe_mlp_saved_bytes_per_token's count): each routed copy's gathered
        # input and the product feeding its down projection serve only the experts' weight
        # gradients, which `adapted_experts` (peft's merged stacks: expert_adapters) need again.
        # The router's input stays (its scores' gradient flows back through it).
        k, fe = expert_cost.routed_copies(arch), arch.expert_intermediate_size
        e = 4 if expert_cost.experts_in_weight_dtype(arch, dt) else dt.act
        mlp_in, mlp_out_in = 0.0, 0.0 if adapted_experts else k * (h + fe) * e
    return qkv_in + mlp_in + norms + out_proj_in + mlp_out_in


def lora_saved_bytes_per_token(workload: Workload, dt: ActivationDtypes) -> float:
    """Bytes per token and block the adapter branches save.

    Per adapted Linear of in x out: the dropout mask (in, bool), A's input (in: the dropped FP32
    copy, or under autocast A's 16-bit cast of it), and B's input (r, A's output). Linears that
    share an input (q, k, v) each cast and drop it separately, so each keeps its own copy.
    """
    b = peft_bytes(workload)
    mask = MASK_BYTES if lora_dropout(workload) > 0 else 0
    r = workload.lora_rank
    return sum(fin * (b.lora + mask) + r * b.lora for _, fin, _ in lora_linears(workload))


def compiled_frozen_layer_bytes_per_token(arch: TransformerArch, dt: ActivationDtypes) -> float:
    """Bytes per token one frozen block of the compiled step saves (AOT autograd's min-cut
    partitioner, checked on the CPU by benchmarks/compiled_saved.py), adapters left out.

    Frozen Linears keep no input and frozen norms only what their input gradient needs (their
    input and FP32 rstd: transformer_cost.compiled_norm_saved_bytes_per_token); attention keeps
    Q, K, V, SDPA's output and log-sum-exp (the output projection is frozen: no contiguous copy);
    SwiGLU keeps gate and up (SiLU and the product are recomputed), GELU its input; BERT's hidden
    dropouts their bool masks.
    """
    h, f, q, kv = arch.hidden_size, arch.intermediate_size, arch.q_dim, arch.kv_dim
    norms = 2 * transformer_cost.compiled_norm_saved_bytes_per_token(h, dt)
    attention = (q + 2 * kv) * dt.act + q * dt.act + arch.num_heads * 4
    mlp = (2 if arch.mlp == "swiglu" else 1) * f * dt.act
    masks = 2 * h * dt.mask if arch.kind == "encoder" else 0.0
    return norms + attention + mlp + masks


def layer_saved_bytes_per_token(workload: Workload, *, compiled: bool = False) -> float:
    """Bytes per token one adapted block saves: the frozen block's share (what full training saves
    less what only weight gradients need, or the compiled step's own count) plus the adapters'."""
    arch = adapted_arch(workload)
    dt = activation_dtypes(workload, dropout=keeps_dropout_masks(arch))
    s = workload.seq_len or workload.tokens_per_sequence
    # The compiled count was read for dense blocks (benchmarks/compiled_saved.py); what inductor's
    # partitioner keeps of a frozen MoE block was not, so the eager count stands in for it.
    if compiled and workload.attention == "fused" and not arch.is_moe:
        frozen = compiled_frozen_layer_bytes_per_token(arch, dt)
    else:
        # a MoE model's blocks are counted as its MoE blocks (the few dense ones of DeepSeek and
        # GLM-4.5 included)
        full = transformer_cost.layer_saved_bytes_per_token(arch, dt, s, workload.attention, moe=arch.is_moe)
        frozen = full - frozen_savings_per_token(arch, dt, adapted_experts=bool(expert_adapters(workload)))
    return frozen + lora_saved_bytes_per_token(workload, dt)


def peft_segments(workload: Workload, *, compiled: bool = False) -> list[GradedSegment]:
    """Segments in forward order, each with the bytes per element of its trainable parameters'
    gradients (FP32 adapters; the classifier copy in the base dtype). `compiled`: the step
    torch.compile runs (the tuned profile's), which saves what AOT autograd's partitioner keeps."""
    arch = adapted_arch(workload)
    b = peft_bytes(workload)
    dropout = keeps_dropout_masks(arch)
    dt = activation_dtypes(workload, dropout=dropout)
    batch = workload.batch_size
    s = workload.seq_len or workload.tokens_per_sequence
    tokens = batch * s
    h, v = arch.hidden_size, arch.vocab_size
    per_token = layer_saved_bytes_per_token(workload, compiled=compiled)
    # The embeddings are frozen and their output needs no gradient: nothing is saved there, and
    # a decoder's first RMSNorm (whose input needs no gradient either) saves nothing.
    first_norm = 4 * h if (arch.kind == "decoder" and arch.norm == "rmsnorm") else 0
    # The first block's q/k/v adapters read that gradient-free input too: their dropout keeps
    # no mask (nothing flows back through it), only A's input.
    mask = MASK_BYTES if lora_dropout(workload) > 0 else 0
    first_masks = mask * sum(fin for name, fin, _ in lora_linears(workload) if name in ("q", "k", "v", "qkv"))
    per_input = transformer_cost.layer_input_bytes_per_token(arch, dt) * tokens
    per_transient = transformer_cost.layer_transient_bytes_per_token(arch, dt, s, workload.attention) * tokens
    # Autocast casts each frozen FP32 weight to 16 bit per use (not cached: the weight needs no
    # gradient) and the matmul keeps that copy for the input gradient, as in full AMP training.
    # QLoRA's 4-bit layers dequantize inside their own autograd function and keep nothing.
    # Routed experts run in their weights' dtype under autocast (grouped_mm: no copy) but where
    # they are batched matmuls (transformer_cost.autocast_params_at, as full training counts).
    amp_lora = dt.amp and workload.peft == "lora"
    # A MoE block whose stacked experts carry adapters saves their merged copies
    # (merged_expert_bytes) and writes their gradients in backward, one stack at a time
    # (merged_expert_gradient_bytes).
    merged = merged_expert_bytes(workload)
    merged_gradient = merged_expert_gradient_bytes(workload)
    segs: list[GradedSegment] = [
        (Segment(name="embeddings", saved_bytes=0.0, input_bytes=0.0, params=0), ADAPTER_BYTES)
    ]
    for i in range(arch.num_layers):
        moe = arch.is_moe_layer(i)
        saved = (per_token - (first_norm + first_masks if i == 0 else 0)) * tokens
        segs.append(
            (
                Segment(
                    name=f"layer{i}",
                    saved_bytes=saved + (merged if moe else 0.0),
                    input_bytes=per_input,
                    params=lora_params_per_layer(workload, moe_layer=moe),
                    cast_params=transformer_cost.autocast_params_at(arch, i) if amp_lora else 0,
                    transient_bytes=per_transient + (merged_gradient if moe else 0.0),
                ),
                ADAPTER_BYTES,
            )
        )
    if arch.kind == "encoder":
        # Pooler and classifier on the [CLS] token only (as in full training: b*h, negligible).
        head_saved = batch * h * (dt.act * 3)
        head_transient = batch * h * 8.0
        head_cast = arch.head_params() if dt.amp else 0
    else:
        # Frozen final norm (its FP32 input) and the FP32 logits' log_softmax kept for the loss;
        # the frozen LM head keeps no input.
        head_saved = tokens * (4 * h + v * 4 + (v * dt.act if transformer_cost.softcapped(arch) else 0))
        head_transient = tokens * v * (4 + 4)
        if compiled:
            head = transformer_cost.compiled_head_bytes_per_token(arch, dt, frozen=True)
            head_saved, head_transient = tokens * head[0], tokens * head[1]
        # the frozen head's 16-bit copy, kept for the input gradient; a tied head's too (its
        # weight is the embedding's FP32 one, which autocast casts as any other)
        head_cast = v * h if dt.amp else 0
    segs.append(
        (
            Segment(
                name="head",
                saved_bytes=head_saved,
                input_bytes=batch * h * dt.res,
                params=head_trainable_params(workload),
                cast_params=head_cast,
                transient_bytes=head_transient,
            ),
            b.head,
        )
    )
    return segs


def step_peak(
    workload: Workload, fragmentation: float = 0.0, *, compiled: bool = False
) -> tuple[str, dict[str, float]]:
    """The largest moment of forward+backward or of the optimizer step (liveness.step_peak),
    over the PEFT segments with their own gradient dtypes, judged with the breakdown's
    `fragmentation` share."""
    return liveness.step_peak(
        peft_segments(workload, compiled=compiled),
        cast_bytes=workload.precision_info.cast_cache_bytes,
        checkpointing=workload.checkpointing,
        grad_accum=workload.grad_accum,
        optimizer_scratch=optimizer_scratch_bytes(workload),
        fragmentation=fragmentation,
    )


def trainable_bytes(workload: Workload) -> int:
    """Bytes of the trainable parameters (and so of their gradients): FP32 adapters plus an
    encoder's classifier copy in the base dtype."""
    head = head_trainable_params(workload) * peft_bytes(workload).head
    return lora_param_count(workload) * ADAPTER_BYTES + head


def optimizer_state_bytes(workload: Workload) -> int:
    """Moments of the trainable parameters only, in their dtype (Adam: 2, momentum: 1)."""
    return OPTIMIZER_STATES[workload.optimizer] * trainable_bytes(workload)


def optimizer_scratch_bytes(workload: Workload) -> int:
    """The optimizer step's temporaries over the trainable parameters, by implementation
    (optimizer.optimizer_step_scratch reads them from torch/optim/adam.py): foreach 1.00x the
    trainable bytes (its square-root list; with the adapters and an encoder's head in two dtype
    groups the first group's list is still referenced while the second's is made, so the sum),
    fused nothing, for-loop twice the largest trainable tensor (a LoRA matrix or the head)."""
    if OPTIMIZER_STATES[workload.optimizer] < 2 or workload.optimizer_impl == "fused":
        return 0
    if workload.optimizer_impl == "for-loop":
        arch = adapted_arch(workload)
        widest = max(arch.hidden_size, arch.intermediate_size, arch.q_dim)
        largest = max(
            workload.lora_rank * widest * ADAPTER_BYTES,
            head_trainable_params(workload) * peft_bytes(workload).head,
        )
        return 2 * largest
    return trainable_bytes(workload)


# Parts of a PEFT breakdown: memory's names with the adapters and QLoRA's dequantization
# workspace named on their own.
PEFT_PART_NAMES = with_part(
    with_part(PART_NAMES, "adapter_weights", after="quantization_scales"),
    "dequant_workspace",
    after="temporaries",
)


def memory_breakdown(workload: Workload, profile: Profile, *, reserve: bool = True) -> MemoryBreakdown:
    """Peak memory of one LoRA/QLoRA training step on one device, as named parts. `reserve`:
    replay the allocator (first_step) for what it holds above the allocated peak; a search for
    what must fit (which leaves the fragmentation part out) skips it."""
    if not workload.peft or not workload.is_training:
        raise ValueError("peft.memory_breakdown needs a training workload with peft set")
    parts: dict[str, float] = dict.fromkeys(PEFT_PART_NAMES, 0.0)
    weights, constants = base_weight_bytes(workload)
    parts["weights"] = weights
    parts["quantization_scales"] = constants
    lora = lora_param_count(workload)
    head = head_trainable_params(workload)
    parts["adapter_weights"] = trainable_bytes(workload)
    parts["optimizer_state"] = optimizer_state_bytes(workload)
    compiled = transformer_cost.compiled_step(workload, profile)
    phase, dynamic = step_peak(workload, profile.fragmentation, compiled=compiled)
    parts.update(dynamic)
    parts["dequant_workspace"] = dequant_workspace_bytes(workload)
    dynamic_total = parts["activations"] + parts["temporaries"] + parts["gradients"]
    parts["workspace"] = profile.workspace_bytes
    parts["fragmentation"] = profile.fragmentation * dynamic_total
    # the LM loss's freed 16-bit logits, cached beside its backward's FP32 blocks
    loss_block = transformer_cost.loss_logits_cached_bytes(workload, compiled=compiled)
    parts["fragmentation"] += loss_block
    # a captured compiled step's side-stream warm-up (Profile.capture_warmup_share)
    warmup = profile.capture_warmup_share * dynamic_total if compiled else 0.0
    parts["fragmentation"] += warmup
    parts["cuda_context"] = profile.context_bytes
    details = {
        "trainable_params": lora + head,
        "adapter_params": lora,
        "head_trainable_params": head,
        "frozen_params": workload.param_count(),
        "quantized_params": (
            quantizable_params(workload) - stacked_expert_params(adapted_arch(workload))
            if workload.peft == "qlora"
            else 0
        ),
        "gradients_total": trainable_bytes(workload),
    }
    if warmup:
        details["capture_warmup_reserve"] = int(warmup)
    if loss_block:
        details["loss_logits_block"] = int(loss_block)
    replay = _replayed(workload, profile.framework, compiled) if reserve else None
    if replay is not None:
        # LoRA keeps the family's share under the replay's reserve: its blocks are activations
        # alone, and each block's transients, which the replay does not lay out, take their own
        kept = profile.fragmentation * dynamic_total
        first_step.replace_with_replayed_reserve(
            parts, details, replay.peak_reserved_bytes, replay, kept=kept
        )
    return MemoryBreakdown(parts={k: round(v) for k, v in parts.items()}, phase=phase, details=details)


@lru_cache(maxsize=1024)
def _replayed(workload: Workload, framework: str, compiled: bool) -> first_step.FirstStep | None:
    """The first two steps replayed through the allocator (first_step.py): the frozen model's
    activation blocks and the LM loss's; None where the replay does not apply. Cached: the
    searches and the advice ask for the same job on many cards."""
    segments = [seg for seg, _ in peft_segments(workload, compiled=compiled)]
    arch = adapted_arch(workload)
    r = workload.lora_rank
    per_layer = {
        moe: [
            first_step.Matrix(n)
            for _, fin, fout in lora_linears(workload, moe_layer=moe)
            for n in (r * fin, fout * r)
        ]
        for moe in (False, True)
    }
    adapters = [
        per_layer[arch.is_moe_layer(int(seg.name[len("layer") :]))] if seg.name.startswith("layer") else []
        for seg in segments
    ]
    # the merged expert stacks a MoE block saves, at their own sizes
    stacks = merged_expert_stack_bytes(workload)
    merged = [
        stacks if seg.name.startswith("layer") and arch.is_moe_layer(int(seg.name[len("layer") :])) else []
        for seg in segments
    ]
    return first_step.first_step(
        workload, framework, segments, compiled=compiled, adapters=adapters, merged=merged
    )


def assumptions(workload: Workload) -> tuple[str, ...]:
    """One line per modelling choice that a reader of a PEFT estimate should know."""
    p = workload.precision_info
    targets = ", ".join(name for name, _, _ in lora_linears(workload))
    head = " (an encoder's classifier is trained)" if head_trainable_params(workload) else ""
    lines = [
        f"{workload.peft}: rank {workload.lora_rank} adapters on {targets} in every block "
        f"({lora_param_count(workload):,} params, FP32 as peft creates them); the LM head/classifier "
        f"is not adapted{head}"
    ]
    stacks = expert_adapters(workload)
    if stacks:
        e = adapted_arch(workload).num_experts
        names = ", ".join(n for n, *_ in stacks)
        lines.append(
            f"{workload.peft}: peft adapts the stacked routed experts ({names}) of every MoE block for "
            f"all {e} experts (ParamWrapper, rank x {e}); each forward folds W + B·A into a new stack, "
            f"which the grouped product saves: {merged_expert_bytes(workload) / 2**30:.2f} GiB a block, "
            "and as much again for its gradient in backward"
        )
    if workload.peft == "qlora":
        dq = "with" if DOUBLE_QUANT else "without"
        lines.append(
            f"qlora: block Linear weights in NF4 (blocks of {NF4_BLOCK}, {dq} double quantization: "
            f"{NF4_CONSTANT_BITS[DOUBLE_QUANT]:.3f} bits/param of constants); embeddings, norms and "
            "the head in the base dtype; one dequantized layer at a time"
        )
        stacked = stacked_expert_params(adapted_arch(workload))
        if stacked:
            lines.append(
                f"qlora: the routed experts ({stacked:,} params) stay in the base dtype: transformers 5 "
                "stacks them into 3-D parameters, which bitsandbytes does not convert (it swaps "
                "nn.Linear modules only; bitsandbytes issue #1849)"
            )
    if p.amp:
        lines.append(
            f"{workload.precision}: the frozen base stays in FP32 as loaded (autocast computes in "
            "16 bit); use --precision bf16/fp16 to hold it in 16 bit"
        )
    return tuple(lines)
