"""Memory segments and kernels of BERT-style encoders and Llama/GPT-style decoders.

Saved activations follow Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models" (2022), eq. 1: s*b*h*(34 + 5*a*s/h) bytes per layer with 16-bit
activations and dropout — itemised here per tensor so FP32, AMP (mixed dtypes) and fused
attention (no s*s score matrix; FlashAttention keeps only the output and a log-sum-exp per
row, Dao et al. 2022) each get their own count. Names in comments are the tensors autograd
saves in the Hugging Face implementations the backends run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from fitbench.core.quant import matrix_total_bytes
from fitbench.estimate import linear_attention
from fitbench.estimate.dtypes import ActivationDtypes, activation_dtypes, keeps_dropout_masks
from fitbench.estimate.execution import (
    runs_residual_site_operator,
    sdpa_math_only,
    sixteen_bit_residual,
    sixteen_bit_tied_head_params,
)
from fitbench.estimate.expert_cost import (
    expert_kernels,
    experts_in_weight_dtype,
    experts_unquantized,
    moe_mlp_saved_bytes_per_token,
    moe_transient_bytes_per_token,
    runs_every_expert,
)
from fitbench.estimate.kv_cache import kv_bytes_per_token_layer, linear_state_bytes_per_sequence
from fitbench.estimate.matrices import block_gemms, layer_gemms
from fitbench.estimate.segments import Kernel, Segment
from fitbench.estimate.weights import (
    checkpoint_weight_bytes,
    quantized_matrices,
    stacked_expert_params,
)
from fitbench.workloads.arch import TransformerArch, expected_distinct_experts
from fitbench.workloads.workload import Workload

if TYPE_CHECKING:
    from fitbench.estimate.profile import Profile


def compiled_step(workload: Workload, profile: Profile) -> bool:
    """Whether the step's memory is the compiled step's: a transformer's training step under a
    profile that compiles it (torch's tuned mode: Profile.fuses_pointwise). Its time is modelled
    compiled through Kernel.fused; its saved activations through compiled_layer_saved_bytes_per_
    token. ResNets keep the eager count (their compiled saves are not measured)."""
    return profile.fuses_pointwise and workload.is_training and not workload.is_resnet


def rms_saved_bytes_per_token(h: int, dt: ActivationDtypes) -> int:
    """One HF RMSNorm with a trainable weight: it upcasts to FP32 and saves its input and the
    normalised tensor (8h bytes), or an FP32 copy plus a 16-bit copy in pure half (6h)."""
    return 8 * h if dt.res == 4 else 6 * h


# Families whose transformers config defaults to `gelu_new` (NewGELUActivation: Python, not one
# kernel): GPT-2, GPT-J and Phi-1/1.5/2. GPT-BigCode, GPT-2's layout otherwise, defaults to
# `gelu_pytorch_tanh`: one fused kernel, which saves only its input.
PYTHON_GELU_TYPES = ("gpt2", "gptj", "phi")


def gpt2_python_gelu(arch: TransformerArch) -> bool:
    """Whether the model's MLP activation is NewGELUActivation: a family of PYTHON_GELU_TYPES, or
    GPT-2's layout (GELU MLP, learned positions) without a model type (the presets)."""
    if arch.kind != "decoder" or arch.mlp != "gelu":
        return False
    kind = arch.rules_type
    return kind in PYTHON_GELU_TYPES or (not kind and arch.position == "learned")


def python_gelu_saved_bytes(dt: ActivationDtypes) -> int:
    """Bytes saved per MLP-width element by `0.5*x*(1+tanh(c*(x+0.044715*pow(x,3))))`: autograd
    keeps x (for pow), tanh's output, 0.5*x and 1+tanh (the product's operands), and the product
    is the next matmul's input: five tensors where a fused GELU saves two. Under CUDA autocast pow
    runs in FP32 (torch.amp's float32 list), so pow keeps x's FP32 cast and everything after it
    but 0.5*x is FP32; the FP32 product is cast back to 16 bits for c_proj, which keeps the cast:
    x's FP32 copy, tanh's output, 1+tanh, 0.5*x and the cast, 4+4+4+2+2 bytes (the 16-bit x
    itself is kept by nothing; read from the meta-device trace's saved tensors)."""
    return 2 * dt.act + 3 * 4 if dt.amp else 5 * dt.act


# Families whose MLP activation is transformers' xIELU, written in Python unless the optional
# `xielu` CUDA package is installed (Apertus).
XIELU_TYPES = ("apertus",)


def python_xielu(arch: TransformerArch) -> bool:
    """Whether the block's two-matrix MLP runs transformers' Python xIELU (XIELU_TYPES)."""
    return arch.kind == "decoder" and arch.mlp == "gelu" and arch.rules_type in XIELU_TYPES


# Families whose two-matrix MLP squares a ReLU (Arcee, Nemotron: `relu2`): two cheap pointwise
# kernels, none of GELU's arithmetic.
RELU2_TYPES = ("arcee", "nemotron", "jais2", "nemotron_h")
#: families whose attention scales its rotated queries by position (Ministral 3: Llama 4's
#: attention scale from rope_parameters, recomputed in every layer): the position ids divided,
#: floored, incremented, logged, scaled and incremented, a view, a cast, and the product over q
POSITION_SCALED_QUERY_TYPES = ("ministral3",)
POSITION_SCALE_OPS = 9


def xielu_saved_bytes(dt: ActivationDtypes) -> int:
    """Bytes saved per MLP-width element by transformers' Python xIELU, `where(x > 0, a_p*x*x +
    b*x, (expm1(min(x, eps)) - x)*a_n + b*x)`, with its output as the next matmul's input:
    autograd keeps the bool mask, x, a_p*x, expm1's output and expm1 - x (counted on the CPU:
    9 bytes in bf16, tests/unit/test_activation_saved.py; with a_n frozen, as under LoRA,
    expm1 - x is not kept: peft.frozen_savings_per_token). Under autocast the FP32 scalars a_p
    and a_n (one-element tensors, not 0-dim) promote a_p*x and the output to FP32, and the
    down projection keeps its 16-bit cast: 11 + 2 bytes."""
    return 13 if dt.amp else 5 * dt.act + 1


def xielu_bytes(dt: ActivationDtypes) -> int:
    """Bytes per MLP-width element the Python xIELU's twelve forward kernels read and write (gt,
    five products, two sums, min, expm1, a difference, where: 29 element accesses), about a
    third more under autocast, where the a_p and a_n products and the output run in FP32."""
    return 80 if dt.amp else 29 * dt.act


def python_gelu_bytes(dt: ActivationDtypes) -> int:
    """Bytes per MLP-width element that NewGELUActivation's eight kernels read and write: pow,
    four scalar ops, tanh, 0.5*x and the product (18 element accesses). Under CUDA autocast x is
    cast to FP32 for pow and the FP32 product back to 16 bits for c_proj (ten kernels, every
    intermediate but 0.5*x in FP32: 6+8+8+10+8+8+8+4+10+6 bytes)."""
    return 76 if dt.amp else 18 * dt.act


# Families whose q, k and v are slices of one fused projection's output (query_key_value,
# qkv_proj) and whose rotary embedding makes new query and key tensors: the value stays a view of
# the fused output, so what attention saves for it keeps the whole fused tensor alive.
FUSED_QKV_VIEW_TYPES = ("gpt_neox", "falcon", "phi3")


def fused_projections(arch: TransformerArch) -> tuple[bool, bool]:
    """Whether the model transformers builds projects q, k, v with one Linear (GPT-2's and
    GPT-BigCode's c_attn,
    GPT-NeoX's and Falcon's query_key_value, Phi-3's qkv_proj) and gate and up with one (Phi-3,
    GLM-4, Granite 4.0's input_linear): under autocast each Linear casts its input once, so a
    fused one saves one 16-bit copy where three (or two) separate ones save their own."""
    model_type = arch.rules_type
    gpt2_like = (
        not model_type and arch.kind == "decoder" and arch.mlp == "gelu" and arch.position == "learned"
    )
    qkv = model_type in ("gpt2", "gpt_bigcode", "gpt_neox", "falcon", "phi3") or gpt2_like
    return qkv, model_type in ("phi3", "glm4", "granitemoehybrid")


def fused_qkv_view(arch: TransformerArch) -> bool:
    return arch.position == "rotary" and arch.rules_type in FUSED_QKV_VIEW_TYPES


def gemma_norms(arch: TransformerArch) -> bool:
    """Gemma's RMSNorm (and OLMo-2's) computes in FP32 to the end: it saves the FP32 input and the
    FP32 normalised tensor (8 bytes an element) whatever the activations' dtype, where Llama's
    casts the normalised tensor back before its weight; Qwen3-Next's and Qwen3.5's zero-centred
    norms, `(x * (1 + weight)).type_as(x)`, alike."""
    return arch.rules_type in GEMMA_NORM_TYPES


GEMMA_NORM_TYPES = (
    "gemma",
    "gemma2",
    "gemma3_text",
    "gemma3",
    "olmo2",
    "qwen3_next",
    "qwen3_5_text",
    "qwen3_5_moe_text",
)


# RMSNorms that multiply the FP32 normalised tensor by the weight and cast after it,
# `(weight * x).to(input_dtype)`, as OLMo-2's does: they keep the same 8 bytes an element (found
# in transformers' modeling files; gpt-oss checked on the meta-device trace's saved tensors).
FP32_WEIGHT_NORM_TYPES = ("olmo3", "flex_olmo", "gpt_oss")


# Command-R's norm (CohereLayerNorm): in FP32, the mean subtracted twice (once for the variance,
# once to normalise), each difference kept by its product, and the normalised tensor kept for
# the weight's gradient: three FP32 tensors, two with the weight frozen.
COHERE_NORM_TYPES = ("cohere", "cohere2")


def frozen_norm_saved_bytes_per_token(arch: TransformerArch, width: int, input_bytes: float) -> float:
    """One norm with its weight frozen (LoRA): an RMSNorm keeps only its FP32 input (`weight * x`
    keeps x only for the weight's gradient), Command-R's norm its two mean-subtracted copies; a
    LayerNorm's backward needs what norm_saved_bytes_per_token says anyway."""
    if arch.rules_type in COHERE_NORM_TYPES:
        return width * 8
    if arch.norm == "rmsnorm":
        return width * 4
    return norm_saved_bytes_per_token(arch, width, input_bytes)


def norm_saved_bytes_per_token(arch: TransformerArch, width: int, input_bytes: float) -> float:
    """One norm over `width` elements a token whose input is `input_bytes` an element: an RMSNorm
    with a weight keeps its FP32 input and its normalised tensor (Llama: at the input's width,
    rms_saved_bytes_per_token; Gemma, OLMo-2: FP32, gemma_norms), a LayerNorm its input (its
    per-row statistics are negligible); OLMo-1's LayerNorm without parameters upcasts first
    (`F.layer_norm(x.float())`), so it keeps an FP32 copy whatever the input's dtype."""
    if arch.norm == "nonparametric":
        return width * 4
    if arch.rules_type in COHERE_NORM_TYPES:
        return width * 12
    if arch.norm != "rmsnorm":
        return width * input_bytes
    fp32_to_the_end = gemma_norms(arch) or arch.rules_type in FP32_WEIGHT_NORM_TYPES
    return width * (8 if fp32_to_the_end else 4 + input_bytes)


def qk_norm_saved_bytes_per_token(arch: TransformerArch, dt: ActivationDtypes) -> float:
    """Qwen3 / Gemma-3 (per head) and OLMo-2 (over all heads) normalise queries and keys after
    their projections: two RMSNorms over q_dim and kv_dim at the activations' width."""
    if arch.qk_norm == "none":
        return 0.0
    return norm_saved_bytes_per_token(arch, arch.q_dim + arch.kv_dim, dt.act)


# Gemma-2 soft-caps its attention scores and its logits, cap * tanh(x / cap): autograd keeps
# tanh's output, one more score matrix a head (eager attention) and one more logits tensor.
SOFTCAPPED_MODEL_TYPES = ("gemma2",)


# cap * tanh(x / cap): three pointwise operations (divide, tanh, multiply), each reading and
# writing the tensor once.
SOFTCAP_OPS = 3.0
SOFTCAP_PASSES = 2 * 3

# gpt-oss's eager attention with sinks (models/gpt_oss/modeling_gpt_oss.py): the sink logits
# expanded and concatenated to the scores (a new [.., keys + 1] tensor: read, write), the row max
# (read) subtracted (read, write) before the softmax, whose output is sliced back to the keys (a
# view). Three more operations (beside the views) and five more passes over the scores; autograd
# keeps only the softmax output, as without sinks. The concatenated copy is one more score matrix
# at once.
SINK_OPS = 3.0
SINK_PASSES = 5


def softcapped(arch: TransformerArch) -> bool:
    return arch.rules_type in SOFTCAPPED_MODEL_TYPES


def autocast_params_at(arch: TransformerArch, i: int) -> int:
    """Weights autocast copies to 16 bit in block i: its Linears' matrices, routed experts left
    out (experts_in_weight_dtype): the router and the shared experts are Linears."""
    if not arch.is_moe_layer(i):
        return _dense_block_linear_params(arch, i)
    h, mats = arch.hidden_size, (3 if arch.mlp == "swiglu" else 2)
    attn = _mixer_linear_params(arch, i)
    gate = h if arch.shared_expert_gate else 0
    routed = mats * h * arch.num_experts * arch.expert_intermediate_size
    experts = routed if runs_every_expert(arch) else 0  # bmm: autocast-enabled
    return attn + h * arch.num_experts + mats * h * arch.shared_intermediate_size + gate + experts


def _dense_block_linear_params(arch: TransformerArch, i: int = 0) -> int:
    """Dense block i's matrices (every block of a dense model, DeepSeek's first layers; a block
    without an MLP, its mixer's only)."""
    attn = _mixer_linear_params(arch, i)
    if arch.is_mlp_free_layer(i):
        return attn
    return attn + (3 if arch.mlp == "swiglu" else 2) * arch.hidden_size * arch.intermediate_size


def _mixer_linear_params(arch: TransformerArch, i: int) -> int:
    """Block i's token mixer's matrices: its attention's, or a linear-attention / convolution
    block's projections where block i is one (LFM2's in_proj and out_proj)."""
    linear = arch.is_linear_attention_layer(i)
    linears = arch.linear_attention_linears() if linear else arch.attention_linears()
    return sum(fin * fout for _, fin, fout in linears)


def decoder_linear_inputs_saved_bytes_per_token(
    arch: TransformerArch, dt: ActivationDtypes
) -> tuple[float, float]:
    """Bytes per token a decoder block's q/k/v and MLP-input Linears save of their inputs (the
    norm outputs): one tensor a group without autocast, a 16-bit copy a Linear under it, so a
    fused projection (Phi-3's qkv_proj and gate_up_proj) keeps one copy where separate ones keep
    three or two. With one norm for a parallel block (GPT-J, Falcon-7B), attention and MLP read
    one norm output, which without autocast is one saved tensor for both."""
    h = arch.hidden_size
    fused_qkv, fused_gate_up = fused_projections(arch)
    qkv_in = dt.linear_input(h, 1 if fused_qkv else 3)
    mlp_consumers = 2 if arch.mlp == "swiglu" and not fused_gate_up else 1
    one_norm_output = arch.parallel_block and arch.norms_per_layer == 1 and not dt.amp
    return qkv_in, 0.0 if one_norm_output else dt.linear_input(h, mlp_consumers)


def layer_saved_bytes_per_token(
    arch: TransformerArch,
    dt: ActivationDtypes,
    seq: int,
    attention: str,
    *,
    moe: bool = False,
    mlp: bool = True,
) -> float:
    """Bytes one block saves for backward, per token of the batch (`moe`: a block with experts;
    `mlp` False: a decoder block without an MLP, TransformerArch.mlp_free_layers, which keeps
    neither the MLP's tensors nor its norm's)."""
    h, f = arch.hidden_size, arch.intermediate_size
    if arch.kind == "encoder":
        # Post-LN BERT block with dropout after attention probabilities, attention output and MLP.
        qkv_in = dt.linear_input(h, 3)  # Q, K, V Linear inputs
        mlp_in = dt.linear_input(h, 1)  # intermediate.dense input
        norms = 2 * h * dt.res  # LayerNorm inputs (residual sums)
        mlp_saved = 2 * f * dt.act  # GELU input, GELU output (fc2 input)
        masks = 2 * h * dt.mask  # hidden dropout masks
    else:
        # Pre-norm Llama block: the inputs of q/k/v and of the MLP's first matrices are the
        # (FP32 or 16-bit) norm outputs, and each norm saves what rms_saved_bytes_per_token says.
        # Norms: each block's own number (Gemma-2/3 and GLM-4 add post-norms), plus the query/key
        # norms. A parallel block's norms all read the block's input, one saved tensor (GPT-NeoX's
        # two LayerNorms); with one norm (GPT-J, Falcon-7B) attention and MLP also read one norm
        # output, which without autocast is one saved tensor for both.
        qkv_in, mlp_in = decoder_linear_inputs_saved_bytes_per_token(arch, dt)
        if arch.parallel_block and arch.norm != "rmsnorm":
            norms = h * dt.res  # the LayerNorms' shared input
        else:
            own = arch.norms_per_layer if mlp else arch.norms_per_layer - 1
            norms = own * norm_saved_bytes_per_token(arch, h, dt.res)
        norms += qk_norm_saved_bytes_per_token(arch, dt)
        if not mlp:
            mlp_in = mlp_saved = 0.0
        elif moe:
            mlp_in, mlp_saved = 0.0, moe_mlp_saved_bytes_per_token(arch, dt)
        elif gpt2_python_gelu(arch):
            mlp_saved = f * python_gelu_saved_bytes(dt)
        elif python_xielu(arch):
            mlp_saved = f * xielu_saved_bytes(dt)
        else:
            n_mlp = 4 if arch.mlp == "swiglu" else 2  # gate, SiLU(gate), up, product | fc1, GELU
            mlp_saved = n_mlp * f * dt.act
        masks = 2 * h * dt.mask  # GPT-2's residual dropouts (keeps_dropout_masks)
    # Q, K, V as attention inputs (rotary outputs for decoders), repeated for GQA in eager.
    attn = _attention_saved_bytes_per_token(arch, dt, seq, attention)
    if arch.attention_output_gate:  # the attention output and its sigmoid gate, kept by their product
        attn += 2 * arch.q_dim * dt.act
    return qkv_in + attn + masks + norms + mlp_in + mlp_saved


def linear_layer_saved_bytes_per_token(
    arch: TransformerArch,
    dt: ActivationDtypes,
    seq: int,
    attention: str,
    *,
    moe: bool = False,
    mlp: bool = True,
    release: str | None = None,
) -> float:
    """What a linear-attention block saves per token: an attention block's, less its attention
    (and query/key norms), plus the linear mixer's (linear_attention.saved_bytes_per_token: Gated
    DeltaNet's or Mamba-2's)."""
    block = layer_saved_bytes_per_token(arch, dt, seq, attention, moe=moe, mlp=mlp)
    attn = _attention_saved_bytes_per_token(arch, dt, seq, attention) + qk_norm_saved_bytes_per_token(
        arch, dt
    )
    if arch.attention_output_gate:
        attn += 2 * arch.q_dim * dt.act
    return block - attn + linear_attention.saved_bytes_per_token(arch, seq, release, dt.act)


def compiled_norm_saved_bytes_per_token(h: int, dt: ActivationDtypes) -> int:
    """One norm of the compiled step: its input (or normalised output, the same size) at the
    residual stream's dtype and one FP32 statistic per row (rstd), whatever its weight needs:
    the partitioner recomputes the FP32 upcast, the scaling and the 16-bit cast from those."""
    return h * dt.res + 4


def compiled_qk_norm_saved_bytes_per_token(arch: TransformerArch, dt: ActivationDtypes) -> int:
    """The query/key norms of the compiled step: each keeps its 16-bit input and one FP32 rstd a
    row (a head's, or the token's for OLMo-2's norm over all heads), as compiled_norm_saved_bytes_
    per_token does for the block's norms."""
    if arch.qk_norm == "none":
        return 0
    rows = arch.num_heads + arch.kv_heads if arch.qk_norm == "head" else 2
    return (arch.q_dim + arch.kv_dim) * dt.act + 4 * rows


def residual_stream_dtypes(workload: Workload, dt: ActivationDtypes) -> ActivationDtypes:
    """`dt` for the blocks of a tuned (compiled) step: the residual stream in bf16 where
    execution.sixteen_bit_residual says the tuned encoder keeps it so (only a step that runs the
    residual-site operator does), else `dt` as autocast keeps it."""
    if sixteen_bit_residual(workload, workload.precision, "tuned"):
        return replace(dt, res=dt.act)
    return dt


def compiled_layer_saved_bytes_per_token(
    arch: TransformerArch,
    dt: ActivationDtypes,
    seq: int,
    attention: str,
    *,
    fused_residual_norm: bool = False,
    moe: bool = False,
    mlp: bool = True,
) -> float:
    """Bytes one block of the compiled step (torch.compile: AOT autograd with inductor's min-cut
    partitioner) saves for backward, per token of the batch.

    What the partitioner keeps, checked tensor by tensor on the CPU (benchmarks/compiled_saved.py):
      * one 16-bit copy of each shared Linear input: autocast's casts of one tensor for q, k and v
        (or gate and up) are the same op, merged into one (eager autograd keeps one per Linear);
      * each norm's input at the residual's dtype plus its FP32 rstd (compiled_norm_saved_bytes_
        per_token), not the normalised FP32 copy as well;
      * the MLP's matmul outputs, not what pointwise work makes of them: SwiGLU keeps gate, up and
        their product (down's input) and recomputes SiLU(gate); GELU keeps fc1's output and GELU's
        output (fc2's input), Python GELU included (its chain fuses like any other);
      * attention as in eager (Q, K, V, SDPA's output and its contiguous copy, log-sum-exp), and
        BERT's two hidden dropouts as bool masks.
    With `fused_residual_norm` (the tuned BERT-style encoder's sites are fitbench's operator,
    backends/torch/dropout_layer_norm) each site keeps its sum x + dropout(y) at the residual
    stream's width (residual_stream_dtypes) and two FP32 statistics a row (mean, rstd), and no
    mask: the backward hashes it again. Without an `mlp` (TransformerArch.mlp_free_layers) the
    block keeps neither the MLP's tensors nor its norm's.
    """
    h, f = arch.hidden_size, arch.intermediate_size
    linear_inputs = 2 * dt.linear_input(h, 1)  # q/k/v's input, the MLP's input
    if fused_residual_norm:
        norms = 2 * (h * dt.res + RESIDUAL_SITE_ROW_STATS_BYTES)
        masks = 0.0
    else:
        own = arch.norms_per_layer if mlp else arch.norms_per_layer - 1
        norms = own * compiled_norm_saved_bytes_per_token(h, dt)
        norms += compiled_qk_norm_saved_bytes_per_token(arch, dt)
        masks = 2 * h * dt.mask if arch.kind == "encoder" else 0.0
    mlp_saved = (3 if arch.mlp == "swiglu" else 2) * f * dt.act
    if not mlp:
        linear_inputs, mlp_saved = dt.linear_input(h, 1), 0.0
    elif moe:
        # transformers' grouped experts with FP32 weights take its opaque fallback operator under
        # dynamo, in FP32: their routed copies as moe_mlp_saved_bytes_per_token(compiled=True).
        linear_inputs = dt.linear_input(h, 1)
        mlp_saved = moe_mlp_saved_bytes_per_token(arch, dt, compiled=True)
    attn = _attention_saved_bytes_per_token(arch, dt, seq, attention)
    return linear_inputs + norms + mlp_saved + masks + attn


def _attention_saved_bytes_per_token(
    arch: TransformerArch, dt: ActivationDtypes, seq: int, attention: str
) -> float:
    """Q, K, V as attention inputs and what attention keeps for its backward (eager and compiled alike)."""
    q, kv, heads = arch.q_dim, arch.kv_dim, arch.num_heads
    kv_saved = 2 * kv if attention == "fused" else 2 * q
    qkv_out = (q + kv_saved) * dt.act
    if fused_qkv_view(arch):
        qkv_out += (q + kv) * dt.act
    if attention == "fused":
        # SDPA output and its contiguous (b, s, h) copy for the output projection; log-sum-exp.
        return qkv_out + 2 * q * dt.act + heads * 4
    if sdpa_math_only(arch):
        return (q + kv) * dt.act * fused_qkv_view(arch) + math_sdpa_saved_bytes_per_token(arch, dt, seq)
    # probs (FP32 under autocast, or where the softmax is taken in FP32: eager_softmax_in_fp32),
    # dropout mask, the matmul's own input (the dropped probs, or their 16-bit cast); a
    # soft-capped model's tanh output (the 16-bit or FP32 scores).
    return qkv_out + q * dt.act + heads * seq * sum(eager_saved_score_bytes(arch, dt))


def eager_saved_score_bytes(arch: TransformerArch, dt: ActivationDtypes) -> list[float]:
    """Bytes an element of each [heads, seq, seq] tensor eager attention keeps for backward: the
    probabilities (FP32 under autocast, or where the softmax is taken in FP32:
    eager_softmax_in_fp32), the dropout mask, the matmul's own input (the dropped probabilities,
    or their 16-bit cast), a soft-capped model's tanh output; SDPA's math path keeps its FP32
    probabilities (math_sdpa_saved_bytes_per_token)."""
    if sdpa_math_only(arch):
        return [4.0]
    upcast = dt.amp or (eager_softmax_in_fp32(arch) and dt.act != 4)
    tensors = [4.0 if upcast else float(dt.act), float(dt.mask)]
    tensors.append(float(dt.act) if (dt.mask or upcast) else 0.0)
    tensors.append(float(dt.act) if softcapped(arch) else 0.0)
    return [t for t in tensors if t]


def math_sdpa_saved_bytes_per_token(arch: TransformerArch, dt: ActivationDtypes, seq: int) -> float:
    """What SDPA's math path keeps for backward a token, where the model hands it fewer key/value
    heads than query heads without enable_gqa (execution.sdpa_math_only: Falcon-7B).

    PyTorch's composite math attention (aten _scaled_dot_product_attention_math) computes 16-bit
    inputs in FP32 (torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp is off by default):
    the scaled FP32 query and the FP32 keys and values broadcast to every query head (torch.matmul
    copies a broadcast operand before its batched product) are the products' saved inputs, and
    the FP32 probabilities are kept for both the softmax's backward and the product with V; the
    16-bit output feeds the dense projection. Eager attention keeps the probabilities in 16 bit:
    the math path keeps about twice its scores (Falcon-7B LoRA b2 s1024 on an H100: 52.6 GB
    allocated, runs-newest-h100-2026-12-05.json). An explicit `--attention eager` on Falcon-7B
    (16-bit scores) is counted the same way: after execution.attention_as_run both read "eager",
    so the estimate is high there by about half the scores."""
    q = arch.q_dim
    return 3 * q * 4 + q * dt.act + arch.num_heads * seq * 4


def eager_softmax_in_fp32(arch: TransformerArch) -> bool:
    """transformers' shared eager attention (Llama's and the families written from it, ViT's)
    takes the softmax in FP32 and casts the probabilities back, `softmax(..., dtype=float32)
    .to(query.dtype)`: in 16-bit weights both are kept for backward, the FP32 probabilities and
    their 16-bit copy. BERT/RoBERTa, GPT-2, Falcon and gpt-oss take it in the scores' dtype
    (EAGER_SOFTMAX_IN_SCORE_DTYPE; gpt-oss keeps one 16-bit tensor of probabilities and its sink
    column, read from the meta-device trace's saved tensors), GPT-J on FP32 scores of its own."""
    if arch.patch_size:
        return True
    own = ("gptj", *EAGER_SOFTMAX_IN_SCORE_DTYPE)
    return arch.kind == "decoder" and arch.position != "learned" and arch.rules_type not in own


def layer_input_bytes_per_token(arch: TransformerArch, dt: ActivationDtypes) -> float:
    """What activation checkpointing keeps per block: its input only."""
    return arch.hidden_size * dt.res


def layer_transient_bytes_per_token(
    arch: TransformerArch, dt: ActivationDtypes, seq: int, attention: str
) -> float:
    """Scratch during one block's backward: gradients of its largest activations."""
    h, f, q = arch.hidden_size, arch.intermediate_size, arch.q_dim
    mlp = f * dt.act + 2 * h * dt.res
    attn = 3 * q * dt.act + q * 4 if attention == "fused" else 2 * arch.num_heads * seq * 4
    return max(mlp, attn)


def training_segments(
    workload: Workload, *, dropout: bool | None = None, compiled: bool = False, release: str | None = None
) -> list[Segment]:
    """The step's segments in forward order; `compiled`: the step torch.compile runs (the tuned
    profile's, Profile.fuses_pointwise), whose blocks and LM loss save what AOT autograd's
    partitioner keeps (compiled_layer_saved_bytes_per_token, compiled_head_bytes_per_token);
    `release`: the transformers release the mode runs (a Mamba-2 scan's working set depends on
    it: mamba_mixer.broadcasts; None: the newest)."""
    arch = workload.transformer
    if dropout is None:
        dropout = keeps_dropout_masks(arch)
    dt = activation_dtypes(workload, dropout=dropout)
    b = workload.batch_size
    s = workload.seq_len or workload.tokens_per_sequence
    tokens = b * s
    h, v = arch.hidden_size, arch.vocab_size
    segs: list[Segment] = []
    # Embeddings: lookups save only indices; BERT adds a LayerNorm (FP32 input) and a dropout.
    emb_saved = (h * dt.res + h * dt.mask) if arch.kind == "encoder" else 0.0
    segs.append(
        Segment(
            name="embeddings", saved_bytes=tokens * emb_saved, input_bytes=0.0, params=arch.embedding_params()
        )
    )
    residual_op = compiled and runs_residual_site_operator(workload)
    block_dt = residual_stream_dtypes(workload, dt) if compiled else dt
    if compiled:
        per_layer = tokens * compiled_layer_saved_bytes_per_token(
            arch, block_dt, s, workload.attention, fused_residual_norm=residual_op
        )
        moe_layer = tokens * compiled_layer_saved_bytes_per_token(arch, dt, s, workload.attention, moe=True)
    else:
        per_layer = layer_saved_bytes_per_token(arch, dt, s, workload.attention) * tokens
        moe_layer = layer_saved_bytes_per_token(arch, dt, s, workload.attention, moe=True) * tokens
    per_input = layer_input_bytes_per_token(arch, block_dt) * tokens
    per_transient = layer_transient_bytes_per_token(arch, block_dt, s, workload.attention) * tokens
    linear_transient = max(
        per_transient, linear_attention.backward_transient_bytes_per_token(arch, s, release, dt.act) * tokens
    )
    mlp_free_layer = 0.0
    if arch.mlp_free_layers:
        mlp_free_layer = tokens * (
            compiled_layer_saved_bytes_per_token(arch, block_dt, s, workload.attention, mlp=False)
            if compiled
            else layer_saved_bytes_per_token(arch, dt, s, workload.attention, mlp=False)
        )
    for i in range(arch.num_layers):
        cast = autocast_params_at(arch, i) if dt.amp else 0
        mlp = not arch.is_mlp_free_layer(i)
        saved = (moe_layer if arch.is_moe_layer(i) else per_layer) if mlp else mlp_free_layer
        transient = per_transient
        if arch.is_linear_attention_layer(i):
            moe = arch.is_moe_layer(i)
            saved = tokens * linear_layer_saved_bytes_per_token(
                arch, dt, s, workload.attention, moe=moe, mlp=mlp, release=release
            )
            transient = linear_transient
        segs.append(
            Segment(
                name=f"layer{i}",
                saved_bytes=saved,
                input_bytes=per_input,
                params=arch.layer_params_at(i),
                cast_params=cast,
                transient_bytes=transient,
            )
        )
    if arch.kind == "encoder":
        # Pooler and classifier act on the [CLS] token only.
        head_saved = b * h * (dt.act * 3)
        head_transient = b * h * 8.0
        head_cast = arch.head_params() if dt.amp else 0
    else:
        # Final norm, lm_head input, and log_softmax of the FP32 logits kept for the loss; the
        # transient part is the loss's backward (loss_logits_cached_bytes).
        head_saved = tokens * (
            norm_saved_bytes_per_token(arch, h, dt.res)
            + h * dt.act
            + v * 4
            + (v * dt.act if softcapped(arch) else 0)
        )
        head_transient = tokens * v * (4 + 4)
        if compiled:
            saved, transient = compiled_head_bytes_per_token(arch, dt, frozen=False)
            head_saved, head_transient = tokens * saved, tokens * transient
        # The LM head's matmul runs under autocast whether its weight is its own or the tied
        # embedding's: either way a 16-bit copy of [vocab, hidden] is cast and cached.
        head_cast = v * h if dt.amp else 0
    segs.append(
        Segment(
            name="head",
            saved_bytes=head_saved,
            input_bytes=b * h * dt.res,
            params=arch.head_params(),
            cast_params=head_cast,
            transient_bytes=head_transient,
        )
    )
    return segs


def loss_logits_cached_bytes(workload: Workload, *, compiled: bool = False) -> float:
    """The 16-bit logits' block a decoder's LM loss leaves cached at its largest moment.

    transformers' ForCausalLMLoss copies the 16-bit logits to FP32, takes log_softmax (its output
    saved) and drops both the copy and the 16-bit logits when the forward returns. Its backward
    then holds three FP32 blocks of [tokens, vocab] at once (the saved output, nll_loss's
    gradient, log_softmax's gradient: the allocated peak, traced in
    benchmarks/training_replay.py), and the freed 16-bit block, half their size, serves none of
    them: it stays reserved beside them, cached memory that nvidia-smi shows and the allocator
    would give back under pressure. None for FP32 logits (no copy) or a compiled step (which
    keeps the 16-bit logits instead: compiled_head_bytes_per_token)."""
    arch = workload.arch
    if (
        compiled
        or not workload.is_training
        or not isinstance(arch, TransformerArch)
        or arch.kind != "decoder"
    ):
        return 0.0
    act = workload.precision_info.activation_bytes
    if act >= 4:
        return 0.0
    return workload.batch_size * (workload.seq_len or workload.tokens_per_sequence) * arch.vocab_size * act


def compiled_head_bytes_per_token(
    arch: TransformerArch, dt: ActivationDtypes, *, frozen: bool
) -> tuple[float, float]:
    """(saved, transient) bytes per token of a decoder's final norm, LM head and loss, compiled.

    The partitioner keeps the final norm's input and rstd, the LM head's 16-bit input (unless the
    head is frozen) and the 16-bit logits with two FP32 numbers per row (the max and the log of
    the sum: log_softmax's statistics); the FP32 logits and log_softmax's output are recomputed
    in backward. There one fused kernel turns the saved logits and statistics into the 16-bit
    logits gradient the head's matmul reads: the only vocabulary-wide temporary, where eager
    autograd holds the FP32 and 16-bit gradients together.
    """
    h, v = arch.hidden_size, arch.vocab_size
    head_input = 0 if frozen else h * dt.act
    saved = compiled_norm_saved_bytes_per_token(h, dt) + head_input + v * dt.act + 2 * 4
    return saved, v * dt.act


def eager_masks(arch: TransformerArch) -> int:
    """Additive masks transformers' eager attention holds through a decoder's forward pass: the
    causal one, and a windowed one where layers slide; each a row's query-key pairs at the
    activations' width."""
    return 1 + bool(arch.sliding_layers)


def eager_decoder_transient_bytes_per_token(
    arch: TransformerArch, dt: ActivationDtypes, seq: int, mlp_bytes: float
) -> float:
    """A decoder block's peak scratch a token under transformers' eager attention (read from its
    eager_attention_forward and traced on the meta device: benchmarks/allocator_replay.py): the
    masked scores in the activations' dtype beside their FP32 copy (none for FP32 scores) and FP32
    softmax; the cast-back weights are returned to the block, which holds them through its MLP.
    Beside the scores live
    the embedded input, the block's input and its normed copy, the rotated query and its
    contiguous copy for the matmul, and the keys and values repeated to every query head. The
    masks (eager_masks) are held through every block."""
    scores = arch.num_heads * seq
    h, q = arch.hidden_size, arch.q_dim
    beside = (3 * h + 2 * q + (2 * q if arch.kv_dim < q else 0)) * dt.act
    upcast = 4 if dt.act != 4 else 0
    attention = scores * (dt.act + upcast + 4) + beside
    return max(attention, mlp_bytes + scores * dt.act) + eager_masks(arch) * seq * dt.act


def inference_transient_bytes(workload: Workload, release: str | None = None) -> float:
    """Peak scratch of one forward pass without autograd: a block's largest live tensors
    (`release`: the transformers release the mode runs, as training_segments)."""
    arch = workload.transformer
    dt = activation_dtypes(workload, dropout=False)
    s = workload.seq_len or workload.prompt_tokens or 1
    tokens = workload.batch_size * s
    per_token = 3 * arch.intermediate_size * dt.act + 4 * arch.hidden_size * dt.res
    if arch.is_moe:
        per_token = max(per_token if arch.dense_mlp_layers else 0.0, moe_transient_bytes_per_token(arch, dt))
    if workload.attention == "eager":
        scores = arch.num_heads * s
        if arch.attention_sinks or arch.kind != "decoder" or sdpa_math_only(arch):
            # the scores' FP32 softmax and its cast back; with sinks (gpt-oss) the scores, the
            # concatenated copy and the max-subtracted one, all in the scores' dtype
            per_score = 3 * dt.act if arch.attention_sinks else 2 * 4
            per_token = max(per_token, scores * per_score)
        else:
            per_token = eager_decoder_transient_bytes_per_token(arch, dt, s, per_token)
    if arch.linear_layers:  # the chunked delta rule's FP32 working set
        per_token = max(
            per_token, linear_attention.prefill_transient_bytes_per_token(arch, s, release, dt.act)
        )
    logits = workload.batch_size * arch.vocab_size * 4 * 2 if arch.kind == "decoder" else 0
    return tokens * per_token + logits


def _expert_assumptions(workload: Workload, arch: TransformerArch) -> list[str]:
    """The mixture-of-experts lines of arch_assumptions: routing, and how transformers runs the
    experts (grouped_mm's FP32 fallback under autocast, MXFP4 kernels)."""
    if not arch.is_moe:
        return []
    tokens = workload.batch_size * (1 if workload.is_generation else workload.seq_len or 1)
    distinct = expected_distinct_experts(arch.num_experts, arch.experts_per_token, tokens)
    shared = " plus the shared experts" if arch.shared_intermediate_size else ""
    lines = [
        f"mixture of experts: memory holds all {arch.num_experts} experts of {arch.moe_layers} layers "
        f"({arch.param_count():,} params); each token runs {arch.experts_per_token}{shared} "
        f"({arch.active_param_count():,} active params); a step of {tokens} tokens reads "
        f"{distinct:.1f} distinct experts a layer, E*(1-(1-k/E)^tokens) with uniform routing"
    ]
    if runs_every_expert(arch):
        lines.append(
            f"experts as transformers runs Llama-4: every token through all {arch.num_experts} experts "
            "(the tokens repeated per expert and scaled by their router scores, zero where not "
            "chosen, then two batched matmuls), so PyTorch's modes do and read every expert's work "
            "each step; serving engines (--serve) run the routed ones only"
        )
    fmt = workload.weight_format
    if fmt is not None and fmt.method == "mxfp4":
        lines.append(
            "MXFP4 experts: transformers keeps them packed and runs its triton kernels (matmul_ogs) "
            "where `kernels` and triton >= 3.4 are installed on a CUDA card of capability 7.5 or "
            "newer; without them it dequantizes the checkpoint to bf16 (estimate that with "
            "--weights none)"
        )
    if workload.precision_info.amp and fmt is None and not runs_every_expert(arch):
        lines.append(
            "experts under autocast: transformers' grouped experts are not autocast-enabled and run in "
            "their FP32 master weights' dtype (FP32 GEMMs and activations, no 16-bit copies of them), "
            "through grouped_mm's FP32 fallback: one mm per expert with tokens, and a host-GPU "
            "synchronisation per grouped product that the estimate does not count"
        )
    elif fmt is None and not runs_every_expert(arch):
        lines.append(
            "experts through torch's grouped_mm: one grouped kernel per product for bf16 weights on "
            "compute capability 9.0 / 10.0 (Hopper, B200); FP16 or FP32 weights, and bf16 on other "
            "cards, loop over the experts with one mm each (counted) after a host-GPU "
            "synchronisation per grouped product (not counted)"
        )
    return lines


def arch_assumptions(workload: Workload) -> list[str]:
    """One line per architecture feature whose modelling a reader should know (experts, latent
    attention, sliding windows, exact checkpoint bytes)."""
    arch = workload.arch
    if not isinstance(arch, TransformerArch):
        return []
    lines = _expert_assumptions(workload, arch)
    if arch.attention_sinks:
        lines.append(
            "attention sinks: one learned logit per head joins every softmax row; SDPA has no input "
            "for it, so transformers runs eager attention, concatenating the sink column to the "
            "scores and subtracting the row maximum before the softmax"
        )
    if arch.vision_params:
        lines.append(
            f"multimodal checkpoint: the {arch.vision_tower} vision tower and its projector "
            f"({arch.vision_params:,} params) are loaded beside the language model and counted in the "
            "weights; text prompts do not run them, and an image's tokens would lengthen the prompt"
        )
    if arch.linear_layers and arch.linear_kind == "mamba2":
        state = linear_state_bytes_per_sequence(workload) / 2**20
        lines.append(
            f"state-space layers: {arch.linear_layers} of {arch.num_layers} layers are Mamba-2 layers, "
            f"which keep {state:.1f} MiB of state per sequence (FP32 recurrent state and the "
            "convolution's last inputs) instead of a KV cache; timed as transformers' PyTorch code runs "
            "them without mamba-ssm and causal-conv1d installed: FP32 decay and score matrices of "
            f"{arch.linear_chunk_size} x {arch.linear_chunk_size} per chunk and head for a prompt or a "
            "training step (kept for backward), and before transformers 5.18 FP32 broadcast products "
            "of chunk x state per token and head while the scan runs (the profile's release decides); "
            "FP32 passes over the state for each decoded token"
        )
    elif arch.linear_layers and arch.linear_kind == "short_conv":
        state = linear_state_bytes_per_sequence(workload) / 2**10
        lines.append(
            f"short convolutions: {arch.linear_layers} of {arch.num_layers} layers are LFM2's gated "
            f"short convolutions (width {arch.linear_conv_kernel}), which keep {state:.1f} KiB per "
            "sequence (the convolution's last inputs) instead of a KV cache; timed as transformers' "
            "PyTorch code runs them without causal-conv1d installed: a few elementwise passes a layer "
            "whatever the length"
        )
    elif arch.linear_layers:
        state = linear_state_bytes_per_sequence(workload) / 2**20
        lines.append(
            f"linear attention: {arch.linear_layers} of {arch.num_layers} layers are Gated DeltaNet "
            f"layers, which keep {state:.1f} MiB of state per sequence (FP32 recurrent state and the "
            "convolution's last inputs) instead of a KV cache; timed as transformers' PyTorch code runs "
            "them without flash-linear-attention and causal-conv1d installed: a Python loop over "
            f"{linear_attention.CHUNK}-token chunks for a prompt or a training step, FP32 passes over "
            "the state for each decoded token"
        )
    if arch.is_mla:
        lines.append(
            f"latent attention: the cache keeps the {arch.kv_lora_rank}-wide latent and the "
            f"{arch.qk_rope_head_dim}-wide rotary key per token and layer, as transformers (5.17 on) "
            "and MLA-aware runtimes (vLLM, SGLang) do"
        )
    if arch.sliding_layers and arch.sliding_window:
        lines.append(
            f"sliding window: {arch.sliding_layers} of {arch.num_layers} layers attend to the last "
            f"{arch.sliding_window} tokens; transformers' DynamicSlidingWindowLayer concatenates the new "
            f"keys, attends, then keeps the last {arch.sliding_window - 1} as a view, so a "
            f"{arch.sliding_window}-token tensor stays allocated while decoding and, after a longer "
            "prompt, the whole prompt's K/V until the layer's next update: the cache's peak is the "
            "larger of the two moments"
        )
    if workload.checkpoint_bytes:
        line = (
            f"checkpoint: {workload.checkpoint_bytes:,} bytes of {workload.checkpoint_params:,} "
            "stored elements read from the safetensors headers; weights use them when the "
            "checkpoint's width is the one loaded"
        )
        fmt = workload.weight_format
        if fmt is not None and checkpoint_weight_bytes(workload) is not None:
            line += (
                f" (pre-quantized: these exact bytes, packed values and scales together, replace the "
                f"{fmt.describe()} layout's count, not added to it)"
            )
        elif fmt is not None:
            line += f" (weights counted as {fmt.describe()}, the format they are loaded in, instead)"
        lines.append(line)
    return lines


def tied_head_load_block_bytes(workload: Workload) -> float:
    """The block a tied LM head leaves cached at load: transformers builds the model with an
    lm_head weight of its own (vocab x hidden in the weights' dtype), then ties it to the input
    embedding, which frees it. The allocator keeps the freed block; the run's first requests are
    carved from it (best fit, split), so it shows in the reserve until the run needs more
    (Command-R's 256k vocabulary: 4.2 GB). 0 without tied embeddings or for weights quantized
    at load (another loader)."""
    arch = workload.arch
    if not isinstance(arch, TransformerArch) or not arch.tie_embeddings or workload.weight_format is not None:
        return 0.0
    return float(arch.vocab_size * arch.hidden_size * workload.precision_info.weight_bytes)


# ---------------------------------------------------------------------------------------------
# Kernels


# Linears whose input is a norm's output, which stays FP32 under autocast (LayerNorm runs in
# FP32; HF's RMSNorm returns the residual stream's dtype, FP32 with FP32 weights): autocast casts
# that input to 16 bit. The others take a 16-bit input (attention output, activation output).
_NORM_FED = frozenset(
    {"q_proj", "k_proj", "v_proj", "output_gate_proj", "gate_proj", "up_proj", "fc1", "lm_head"}
)


def _autocast_casts(arch: TransformerArch, name: str) -> int:
    """Casts autocast issues for one Linear of a block: its weight, its bias if it has one, and
    its input if a norm feeds it: 16 a BERT block, as a dispatch mode counts them in the real
    models (tests/backends/test_autocast_casts.py).
    Weights are cast again every forward in training (the cast cache lives for one autocast
    region); the cost is the host's, the bytes are in the elementwise and matmul kernels."""
    return 1 + int(_has_bias(arch, name)) + input_casts(name)


def _has_bias(arch: TransformerArch, name: str) -> bool:
    """Whether a block's Linear `name` has a bias."""
    return {
        "q_proj": arch.qkv_bias,
        "k_proj": arch.qkv_bias,
        "v_proj": arch.qkv_bias,
        "output_gate_proj": False,
        "o_proj": arch.out_bias,
    }.get(name, arch.mlp_bias)


#: elements a 16-bit GEMM dimension must be a multiple of for cuBLAS's tensor-core kernels (16
#: bytes: their vectorised loads); below it they fall back to align-1 kernels
GEMM_ALIGN_ELEMENTS = 8


def misaligned_gemm(workload: Workload, *dims: int) -> int:
    """The alignment, in elements, of a 16-bit GEMM over `dims` whose dimensions are not all a
    multiple of GEMM_ALIGN_ELEMENTS: the largest of 4, 2 and 1 that divides them all; 0 where
    they are (or where the GEMM is not 16-bit: FP32 SIMT kernels load single elements anyway).

    cuBLAS's tensor-core kernels load 16 bytes at a time; a dimension that allows only narrower
    loads (GPT-2's vocabulary of 50,257: 2 bytes; OLMo-3's 100,278: 4 bytes) takes kernels that
    issue one load per 2, 4 or 8 bytes, and their rate falls with the load's width
    (speed._compute_share). nanoGPT pads GPT-2's vocabulary to 50,304 for this reason."""
    if workload.precision_info.compute not in ("fp16", "bf16"):
        return 0
    align = GEMM_ALIGN_ELEMENTS
    while align > 1 and any(d % align for d in dims):
        align //= 2
    return 0 if align == GEMM_ALIGN_ELEMENTS else align


def input_casts(name: str) -> int:
    """Casts of one Linear's input under autocast (1 where a norm feeds it). Of a frozen
    Linear's casts only this one has a backward: its weight and bias take no gradient."""
    return int(name in _NORM_FED)


# Framework operations of a block that launch no GPU kernel (views, transposes, reshapes).
VIEW_OPS_PER_BLOCK = 8


def _elementwise_launches(
    arch: TransformerArch, dt: ActivationDtypes, ops: float, views: int = VIEW_OPS_PER_BLOCK
) -> float:
    """GPU kernels of one block's elementwise work: its operations less the `views`, plus the
    16-bit copies autocast makes of the norm outputs that feed Linears."""
    casts = len(_NORM_FED & {n for n, _, _ in block_gemms(arch)}) if dt.amp else 0
    return max(1.0, ops - views + casts)


def _qk_norm_width(arch: TransformerArch) -> int:
    """Elements a token's query and key norms pass over (none without them)."""
    return 0 if arch.qk_norm == "none" else arch.q_dim + arch.kv_dim


# Forward kernels outside the blocks: the embedding lookup, the LM head, the loss, a classifier
# and the bias-gradient sums (a backward-only pass).
OUTSIDE_BLOCKS = ("embedding", "lm_head", "lm_loss", "classifier", "bias_gradients")
# A dense block's last product (its MLP's down projection) and, under LoRA, its adapter's B.
LAST_PRODUCTS = ("down_proj", "fc2", "lora.down.B", "lora.fc2.B")
# Blocks that save their MLP output for a norm after it (post-norms): OLMo-2/3, FlexOlmo,
# EXAONE 4.0; Gemma-2/3 and GLM-4 say so by their four norms a block.
POST_NORM_TYPES = ("olmo2", "olmo3", "flex_olmo", "exaone4")


def recompute_stops_early(arch: TransformerArch) -> bool:
    """Whether a checkpointed block's recomputation stops before its last product.

    torch.utils.checkpoint without reentrancy (what `fitbench run` asks transformers for) stops
    recomputing once every tensor the block saved is back (`set_checkpoint_early_stop`, on by
    default). In a decoder block that ends with a plain residual add, the down projection's
    output is saved by nothing (the add saves no input), so neither it nor the add runs again.
    Where something after it saves a tensor, it does: a post-norm (its input), GPT-2's and
    GPT-BigCode's residual dropout (its mask), an encoder's LayerNorm, or an MoE block's weighted
    sum of the experts (their outputs). Counted on a real tiny Llama: six of its seven products a
    block run again (tests/backends/test_recompute.py)."""
    if arch.kind != "decoder" or arch.norms_per_layer == 4 or arch.rules_type in POST_NORM_TYPES:
        return False
    return arch.residual_dropout_p == 0.0


def recomputed_kernels(forward: list[Kernel], workload: Workload, *, early_stop: bool = True) -> list[Kernel]:
    """What a checkpointed step's backward runs again of `forward`: the blocks' forward only.

    Hugging Face's gradient checkpointing wraps each block (transformers' GradientCheckpointingLayer
    calls torch.utils.checkpoint on a decoder or encoder layer), so the embedding, the final head
    and the loss run once (their activations are kept), and under autocast only the blocks'
    weights are cast again (the recompute's region makes fresh casts), not the head's (tied or
    not: its cast belongs to the head's product). Where the recomputation stops early
    (recompute_stops_early) the dense blocks' last product is not run again either; an MoE
    model's dense layers are its down_proj kernel's count, so they stop early too. `early_stop`
    False: a reentrant recomputation, which runs the whole block (Paddle's fleet recompute)."""
    arch = workload.arch
    early = early_stop and recompute_stops_early(arch)
    out = []
    for k in forward:
        if k.name.split(".")[0] in OUTSIDE_BLOCKS or (early and k.name in LAST_PRODUCTS):
            continue
        if k.name == "weight_casts" and k.bytes:
            params = k.bytes / 6.0  # the casts' FP32 read and 16-bit write per parameter
            head = arch.vocab_size * arch.hidden_size if arch.kind == "decoder" else 0
            last = arch.hidden_size * arch.intermediate_size * arch.dense_mlp_layers if early else 0
            k = replace(k, bytes=k.bytes * max(0.0, params - head - last) / params)
        out.append(k)
    return out


def casts_of_sixteen_bit_step(forward: list[Kernel], workload: Workload) -> list[Kernel]:
    """`forward` of a step that keeps its Linear weights in bf16 with FP32 masters
    (execution.sixteen_bit_weights): autocast casts none of them, so the weight_casts kernel
    keeps only a tied LM head's (the embedding's FP32 matrix, cast at each use as before)."""
    kept = sixteen_bit_tied_head_params(workload)
    out = []
    for k in forward:
        if k.name == "weight_casts" and k.bytes:
            k = replace(
                k,
                bytes=kept * 6.0,
                backward_bytes=kept * 6.0,
                launches=1.0 if kept else 0.0,
            )
        out.append(k)
    return out


def norm_weight_gradient_bytes_per_token(arch: TransformerArch, dt: ActivationDtypes) -> float:
    """Bytes per token and block that the RMSNorm weights' gradients move in backward, part of
    the backward elementwise work (twice the forward's) that a frozen base does not do.

    Hugging Face's RMSNorm multiplies the normalised tensor by its weight as an operator of its
    own, so autograd computes the weight's gradient as a product over the norm's width (the
    output's gradient and the normalised tensor read, one tensor written) and a sum of it over the
    tokens (read once): four passes. A frozen weight (LoRA's base) needs neither. The product
    runs in FP32 where the norm stays in FP32 to its weight (Gemma's, OLMo-3's) and under
    autocast, whose FP32 weight promotes it, else at the activations' width; under autocast a
    query or key norm's normalised tensor is 16-bit (its input is a 16-bit projection). Held
    against the real models on a CPU (benchmarks/elementwise_traffic.py
    norm_weight_gradient_per_token: exact for Llama-3.2-1B, Qwen3-0.6B, Gemma-2-2B, Gemma-3-1B and
    OLMo-2-7B, in bf16 and under autocast): Llama-3.2-1B 65,536 bytes a token under autocast
    (49,152 for the product, 16,384 for the sum), 32,768 in bf16. LayerNorm computes its weight's
    gradient inside its own backward kernel: none counted."""
    if arch.norm != "rmsnorm":
        return 0.0
    a = dt.act
    if gemma_norms(arch) or arch.rules_type in FP32_WEIGHT_NORM_TYPES:
        main = qk = 16.0
    elif dt.amp:
        main, qk = 16.0, 12.0 + a
    else:
        main = qk = 4.0 * a
    norms = arch.block_norms / arch.num_layers  # the mean block's (MLP-free blocks have one fewer)
    return float(norms * arch.hidden_size * main + _qk_norm_width(arch) * qk)


#: the passes of Hugging Face's RMSNorm (upcast, pow, mean, add, rsqrt and two products) and of
#: its rotary embedding over q and k (slices, a negation, a concatenation, products and sums)
RMSNORM_OPS = 7
ROTARY_OPS = 12


def mlp_share(arch: TransformerArch) -> float:
    """The share of the blocks that have an MLP or experts (TransformerArch.mlp_free_layers): the
    mean block runs that much of one MLP's elementwise work."""
    return arch.mlp_layers / arch.num_layers


def _rmsnorm_ops(arch: TransformerArch) -> float:
    """The RMSNorm passes of the mean block: its own norms and the query and key norms."""
    own = arch.block_norms / arch.num_layers
    return RMSNORM_OPS * own + (2 * RMSNORM_OPS if arch.qk_norm != "none" else 0)


def _activation_ops(arch: TransformerArch, dt: ActivationDtypes) -> int:
    """Operations of one block's MLP activation: SwiGLU's activation and product, GPT-2's Python
    GELU, xIELU and ReLU squared written out as tensor operations, else one GELU module."""
    if arch.mlp == "swiglu":
        return 2
    if gpt2_python_gelu(arch):
        return 10 if dt.amp else 8
    if python_xielu(arch):
        return 12
    if arch.rules_type in RELU2_TYPES:
        return 2
    return 1


def _elementwise_bytes_per_token(
    arch: TransformerArch, dt: ActivationDtypes, *, attention: bool = True
) -> tuple[float, float]:
    """(bytes, ops) of one block's forward elementwise work per token: norms, activations,
    dropout, residual adds and autocast casts (each reads its inputs and writes its output). An
    MoE block's activation is its shared experts' (the routed copies' passes are
    expert_routing_kernels'), so the width is the layers' mean. Without `attention` (a
    linear-attention block) the heads' views and the cache's concatenation are not counted."""
    h = arch.hidden_size
    shared = arch.shared_intermediate_size if arch.is_moe else 0
    f = (arch.dense_mlp_layers * arch.intermediate_size + arch.moe_layers * shared) / arch.num_layers
    if arch.norm == "rmsnorm":
        # HF RMSNorm: upcast, pow, mean, add, rsqrt, mul, mul, each pass over the FP32 width; a
        # block runs its own number of them (Gemma-2/3 and GLM-4 four: pre and post norms) and
        # Qwen3's, Gemma-3's and OLMo-2's query and key norms over q and k.
        widths = arch.block_norms / arch.num_layers * h + _qk_norm_width(arch)
        norms = RMSNORM_OPS * 2 * widths * 4
        norm_ops = _rmsnorm_ops(arch)
    else:
        norms, norm_ops = 2 * 2 * h * dt.res, 2
    if arch.mlp == "swiglu":
        act = 2 * f * dt.act + 3 * f * dt.act
    elif gpt2_python_gelu(arch):
        act = f * python_gelu_bytes(dt)
    elif python_xielu(arch):
        act = f * xielu_bytes(dt)
    elif arch.rules_type in RELU2_TYPES:
        act = 4 * f * dt.act  # relu, then its square: each reads and writes
    else:
        act = 2 * f * dt.act
    residuals = 1 + mlp_share(arch)  # the mixer's residual add, and the MLP's where there is one
    adds = residuals * 3 * h * dt.res
    dropout = 2 * (2 * h * dt.act + h) if dt.mask else 0.0
    drop_ops = 2 if dt.mask else 0
    rotary = 6 * (arch.q_dim + arch.kv_dim) * dt.act if arch.position == "rotary" else 0.0
    rotary_ops = ROTARY_OPS if arch.position == "rotary" else 0
    if arch.rules_type in POSITION_SCALED_QUERY_TYPES:  # the queries' product reads and writes q
        rotary += 2 * arch.q_dim * dt.act
        rotary_ops += POSITION_SCALE_OPS
    # Autocast's 16-bit copies of the FP32 norm outputs that feed Linears (their host cost is
    # counted with the Linears: _autocast_casts).
    casts = len(_NORM_FED & {n for n, _, _ in block_gemms(arch)}) * h * (4 + dt.act) if dt.amp else 0.0
    # Views, transposes and reshapes launch no kernel but cost the host as much as one (module
    # calls, dispatch, autograd nodes): 8 per block in the Hugging Face attention code.
    view_ops = VIEW_OPS_PER_BLOCK if attention else 0
    cache_ops = 2 if arch.kind == "decoder" and attention else 0  # K/V concatenation into the cache
    act_ops = _activation_ops(arch, dt) * mlp_share(arch)
    ops = norm_ops + act_ops + residuals + drop_ops + rotary_ops + view_ops + cache_ops
    return norms + act + adds + dropout + rotary + casts, ops


def elementwise_tensor_ops(arch: TransformerArch, dt: ActivationDtypes) -> float:
    """Of a block's forward elementwise operations (_elementwise_bytes_per_token), those that are
    tensor-level calls on activations (Kernel.tensor_ops): the RMSNorm passes, the rotary
    embedding's, and an activation written out as tensor operations. A LayerNorm, a GELU module,
    dropout, the residual adds, the views and the cache's concatenation are counted as reference
    operations, as in the BERT-base steps the reference was fitted on."""
    norms = _rmsnorm_ops(arch) if arch.norm == "rmsnorm" else 0
    act = _activation_ops(arch, dt)
    written_out = act * mlp_share(arch) if act > 1 else 0  # one GELU module is a reference operation
    rotary = ROTARY_OPS if arch.position == "rotary" else 0
    if arch.rules_type in POSITION_SCALED_QUERY_TYPES:
        rotary += POSITION_SCALE_OPS
    return float(norms + written_out + rotary)


def fused_pointwise_bytes_per_token(
    arch: TransformerArch, dt: ActivationDtypes, *, fused_residual_norm: bool = False, training: bool = True
) -> tuple[float, float, float, float]:
    """(norm regions' bytes, their kernels, the other regions' bytes, their kernels) of one
    block's forward per token when a compiler fuses its pointwise work (torch.compile's inductor).

    A fused region reads its inputs and writes its outputs once, whatever it computes inside:
    * each of the block's two norms, with the residual add before it and the dropout on the
      branch it adds: read the branch output (16-bit) and the residual stream, write the new
      residual stream, the norm's output at the width the next Linear reads (autocast's cast
      folds in: one 16-bit copy whatever the number of Linears it feeds) and the dropout mask;
    * rotary positions: read and write q and k;
    * the MLP activation: SwiGLU reads gate and up and writes their product, GELU reads and
      writes its input (the Linear's bias is in the GEMM's epilogue).
    The inductor kernels of the compiled steps (benchmarks/results/compiled-step-profile-h200-
    2026-12-04.json) are these regions: `triton_*_fused_add_native_dropout_native_layer_norm_*`,
    `*_fused_mul_silu_*`, and no elementwise kernel beside them.

    With `fused_residual_norm` (the tuned BERT-style encoder: fitbench's own operator,
    backends/torch/dropout_layer_norm) a norm site is one kernel that reads the branch output and
    the residual stream and writes the sum s = x + dropout(y) for its backward, the new residual
    stream (both at the stream's width: FP32 under autocast, bf16 in the tuned encoder's 16-bit
    stream, residual_stream_dtypes) and its 16-bit copy (the sum only when `training`: nothing
    needs it in inference); no mask is stored (the backward hashes it again).
    `fused_norm_backward_bytes_per_token` gives its backward.
    """
    h, f = arch.hidden_size, arch.intermediate_size
    norm_out = dt.act if dt.amp else dt.res
    if fused_residual_norm:
        norms = 2 * h * _residual_site_bytes(dt, saves_sum=training)
    else:
        norms = 2 * h * (dt.act + 2 * dt.res + norm_out + dt.mask)
    act = 3 * f * dt.act if arch.mlp == "swiglu" else 2 * f * dt.act
    rotary = 2 * (arch.q_dim + arch.kv_dim) * dt.act if arch.position == "rotary" else 0.0
    regions = 1.0 + (1.0 if rotary else 0.0)
    return float(norms), 2.0, float(act + rotary), regions


#: the FP32 mean and 1/std (a row) fitbench's residual-site operator keeps for its backward
#: beside the sum x + dropout(y), which it keeps at the residual stream's width
RESIDUAL_SITE_ROW_STATS_BYTES = 2 * 4
#: its backward's kernels per site: the row kernel, then the weight's and the bias's column sums
RESIDUAL_SITE_BACKWARD_KERNELS = 3


def _residual_site_bytes(dt: ActivationDtypes, *, saves_sum: bool = True) -> float:
    """Bytes per element of one direction of fitbench's residual-site operator: forward reads y
    (16-bit) and x (residual) and writes out (residual), out's 16-bit copy and, for a backward,
    s (residual); backward reads the two outputs' gradients and s and writes x's and y's
    gradients: the same count. 16 bytes with autocast's FP32 stream, 10 with a bf16 one."""
    return 2 * dt.act + 2 * dt.res + (dt.res if saves_sum else 0)


def fused_norm_backward_bytes_per_token(
    arch: TransformerArch, dt: ActivationDtypes, *, fused_residual_norm: bool
) -> float:
    """A block's two norm sites' backward bytes per token, compiled: inductor's fused backward moves
    about twice its forward region (the gradients in and out, the saved input and mask); fitbench's
    operator moves what `_residual_site_bytes` counts."""
    if fused_residual_norm:
        return 2 * arch.hidden_size * _residual_site_bytes(dt)
    return 2.0 * fused_pointwise_bytes_per_token(arch, dt)[0]


def _quantized_counts(workload: Workload, *, engine: bool = False) -> dict[str, tuple[int, int]]:
    """Per matrix name, (copies the weight format stores quantized, copies in the model); empty
    when the weights are not quantized. `engine`: as a serving engine loads them
    (weights.quantized_matrices)."""
    if workload.weight_format is None:
        return {}
    return {m.name: (m.copies, m.total) for m in quantized_matrices(workload, engine=engine)}


def _weight_traffic(
    workload: Workload,
    quantized: dict[str, tuple[int, int]],
    name: str,
    fin: int,
    fout: int,
    w_bytes: float,
    kv_len: int | None,
) -> tuple[float, float, str]:
    """(weight bytes one instance reads, dequantisation traffic, tensor-core type) of a matrix.

    Unquantized: fin * fout at the precision's bytes. Quantized: the format's packed values plus
    scales (core.quant.matrix_bytes), averaged over the copies (layers, experts) of which some
    are kept in 16 bit; a matrix the format leaves alone (an LM head, a router) reads 16-bit
    weights. Decode steps (kv_len given) read the packed weights in fused kernels; prefill and
    classification pay the expansion to 16 bit (written once, read back by the GEMM) unless the
    card has the format's tensor cores.
    """
    fmt = workload.weight_format
    if fmt is None:
        return fin * fout * w_bytes, 0.0, ""
    copies, total = quantized.get(name, (0, 1))
    share = copies / total if total else 0.0
    dense = fin * fout * 2.0
    read = share * matrix_total_bytes(fmt, fin, fout) + (1 - share) * dense
    # LLM.int8 multiplies int8 weights directly (no 16-bit copy); the others expand them.
    expands = kv_len is None and fmt.method != "bnb-int8"
    dequant = share * 2 * dense if expands else 0.0
    compute = fmt.compute if fmt.compute in ("fp8", "int8") and share else ""
    return read, dequant, compute


# Eager attention's passes over its (batch, heads, queries, keys) scores in a forward, as the
# Hugging Face and NVIDIA DLE BERT / GPT-2 code runs them: QK^T written, the scaling (a multiply
# or a division: read and write), the mask (an add or a where: read and write), softmax (read and
# write) and the read of the probabilities by the product with V. With attention dropout in
# training, PyTorch's fused dropout reads and writes them once more and writes a one-byte mask.
# tests/unit/test_eager_attention_passes.py counts them in real models.
EAGER_SCORE_PASSES = 8
EAGER_DROPOUT_PASSES = 2


# transformers' shared eager attention (eager_attention_forward: Llama, Qwen, Mistral, Gemma and
# most decoders) takes softmax in FP32, `softmax(scores, dtype=torch.float32).to(query.dtype)`:
# with 16-bit scores a copy up (read 16 bits, write 32), softmax over FP32 and a copy down. Its
# backward moves 1.125 times the forward's score bytes (the two copies' gradients and softmax's
# over FP32), where plain elementwise work moves twice. Counted on tiny CPU models in bf16
# (tests/unit/test_eager_attention_passes.py): Llama 32 bytes an element forward and 36 backward,
# Gemma-2 44 and 50 with its soft-capping; measured on an H100 in Gemma-2-9B's LoRA step
# (kernel-classes-gemma-2-9b-lora-4k-h100-2026-12-06.json): the copies up and down took 197 and
# 140 ms, beside 84 ms of softmax. GPT-2's, Falcon's and gpt-oss's own eager code keep softmax in
# the scores' dtype (16 bytes in bf16; gpt-oss: `softmax(..., dtype=combined_logits.dtype)` over
# the scores and its sink), and so do the encoders'.
EAGER_SOFTMAX_IN_SCORE_DTYPE = ("gpt2", "falcon", "gpt_oss")
EAGER_UPCAST_BACKWARD_RATIO = 1.125


def eager_upcasts(arch: TransformerArch, dt: ActivationDtypes) -> bool:
    """Whether eager attention's softmax runs in FP32 over 16-bit scores (EAGER_SOFTMAX_IN_SCORE_DTYPE)."""
    return dt.act < 4 and arch.kind == "decoder" and arch.rules_type not in EAGER_SOFTMAX_IN_SCORE_DTYPE


def eager_score_bytes(dt: ActivationDtypes, *, upcast: bool = False) -> float:
    """Bytes eager attention moves per score element in a forward (`upcast`: its softmax in FP32
    over scores of dt.act bytes, eager_upcasts)."""
    passes = EAGER_SCORE_PASSES + (EAGER_DROPOUT_PASSES if dt.mask else 0)
    copies = (dt.act + 4) * 2 + 2 * (4 - dt.act) if upcast else 0.0  # up, down, softmax's wider passes
    return passes * dt.act + dt.mask + copies


def dense_score_factor(workload: Workload, seq: int) -> float:
    """How many times the causal (and windowed) attention FLOPs a forward over `seq` tokens
    really computes, layer mean.

    Eager attention multiplies every query by every key (torch.matmul knows no mask) and masks
    afterwards; SDPA given a materialised mask (a sliding window the sequence outgrows, whose
    mask transformers builds) runs a kernel that takes the mask as data and skips no block. Both
    compute the whole seq x seq square, where the estimate's causal count is half of it and its
    windowed count half of the window's band. Fused attention without a mask (causal flash)
    computes what the count says: 1."""
    arch = workload.transformer
    if arch.kind != "decoder" and workload.attention != "eager":
        return 1.0
    windowed = arch.attended_tokens(seq) if arch.sliding_layers else float(seq)
    counted = (0.5 if arch.kind == "decoder" else 1.0) * windowed
    if workload.attention == "eager":
        return seq / counted
    window = arch.sliding_window
    if not arch.sliding_layers or window is None or seq <= window:
        return 1.0
    # sliding layers: the whole square; full layers: causal flash, half of it
    full = arch.num_layers - arch.sliding_layers
    computed = (arch.sliding_layers * seq + full * 0.5 * seq) / arch.num_layers
    return computed / counted


def _pointwise_kernels(
    workload: Workload, arch: TransformerArch, dt: ActivationDtypes, tokens: int
) -> list[Kernel]:
    """The blocks' kernels beside their GEMMs and token mixers: those of the attention layers,
    and of the linear-attention layers, whose mixer (linear_attention.mixer_kernel) counts its
    own elementwise work: they have no rotary embedding, query/key norms, head views or KV
    concatenation of their own here."""
    ks = _block_pointwise_kernels(workload, arch, dt, tokens, arch.attention_layers)
    if arch.linear_layers:
        bare = replace(arch, qk_norm="none", position="learned")
        ks += _block_pointwise_kernels(workload, bare, dt, tokens, arch.linear_layers, attention=False)
    return [k for k in ks if k.count]


def _block_pointwise_kernels(
    workload: Workload,
    arch: TransformerArch,
    dt: ActivationDtypes,
    tokens: int,
    L: int,
    *,
    attention: bool = True,
) -> list[Kernel]:
    """`L` blocks' kernels beside their GEMMs and attention: the LayerNorms (where the block has
    them), the exact GELU, and the rest of its elementwise work; each with its compiled form."""
    ks: list[Kernel] = []
    ew_bytes, ew_ops = _elementwise_bytes_per_token(arch, dt, attention=attention)
    residual_op = runs_residual_site_operator(workload)
    site_dt = residual_stream_dtypes(workload, dt)
    norm_fused, norm_regions, rest_fused, rest_regions = fused_pointwise_bytes_per_token(
        arch, site_dt, fused_residual_norm=residual_op, training=workload.is_training
    )
    norm_fused_backward = fused_norm_backward_bytes_per_token(arch, site_dt, fused_residual_norm=residual_op)
    if arch.norm == "layernorm":
        # The two LayerNorms of a block run kernels of their own (see LAYER_NORM_SHARE).
        ln_bytes, ln_ops = 2 * 2 * arch.hidden_size * dt.res, 2
        ew_bytes, ew_ops = ew_bytes - ln_bytes, ew_ops - ln_ops
        ks.append(
            Kernel(
                name="layer_norm",
                kind="memory",
                flops=0.0,
                bytes=tokens * ln_bytes,
                count=L,
                ops=ln_ops,
                launches=2.0,
                backward_launches=4.0,  # the input gradient, and gamma's and beta's reduction
                memory_efficiency=layer_norm_share(dt),
                fused=Kernel(
                    name="layer_norm",
                    kind="memory",
                    flops=0.0,
                    bytes=tokens * norm_fused,
                    count=L,
                    ops=ln_ops,
                    launches=norm_regions,
                    backward_bytes=tokens * norm_fused_backward,
                    backward_launches=2.0 * RESIDUAL_SITE_BACKWARD_KERNELS if residual_op else 4.0,
                ),
            )
        )
    ew_launches = _elementwise_launches(arch, dt, ew_ops, VIEW_OPS_PER_BLOCK if attention else 0)
    tensor_ops = elementwise_tensor_ops(arch, dt)
    if erf_gelu(arch):
        # The GELU is a kernel of its own whose FP32 arithmetic can outlast its bytes.
        gelu = gelu_kernel(arch, dt, tokens)
        ks.append(gelu)
        ew_bytes, ew_ops, ew_launches = ew_bytes - gelu.bytes / tokens, ew_ops - 1, ew_launches - 1
        rest_fused, rest_regions = rest_fused - gelu.bytes / tokens, rest_regions - 1
    ks.append(
        Kernel(
            name="elementwise",
            kind="memory",
            flops=0.0,
            bytes=tokens * ew_bytes,
            count=L,
            ops=ew_ops,
            tensor_ops=tensor_ops,
            launches=ew_launches,
            # HF's RMSNorm upcasts to FP32 and casts back around its passes beside autocast's
            # 16-bit branch outputs and the FP32 residual stream (Kernel.mixed_dtypes).
            mixed_dtypes=dt.amp and arch.norm == "rmsnorm",
            fused=Kernel(
                name="elementwise",
                kind="memory",
                flops=0.0,
                bytes=tokens * (rest_fused + (norm_fused if arch.norm != "layernorm" else 0.0)),
                count=L,
                ops=ew_ops,
                tensor_ops=tensor_ops,
                launches=rest_regions + (norm_regions if arch.norm != "layernorm" else 0.0),
            ),
        )
    )
    return ks


def attention_query_bytes(workload: Workload, tokens: int) -> float:
    """The bytes an attention kernel reads and writes for its `tokens` queries: the queries in,
    the output out (the keys and values it reads are the cache's, counted apart)."""
    arch = workload.transformer
    a = activation_dtypes(workload, dropout=keeps_dropout_masks(arch)).act
    return float(tokens * (arch.q_dim + arch.attn_out_dim) * a)


def forward_kernels(
    workload: Workload,
    batch: int,
    seq: int,
    *,
    kv_len: int | None = None,
    with_head: bool = True,
    all_experts: bool = False,
    batched_experts: bool = False,
    engine: bool = False,
    release: str | None = None,
) -> list[Kernel]:
    """Kernels of one forward pass over batch x seq new tokens (kv_len > seq while decoding);
    `all_experts`: the mode runs transformers' MoE code (Profile.runs_all_experts);
    `batched_experts`: routed experts through transformers' batched_mm path (expert_kernels);
    `engine`: the weights as a serving engine loads them (Profile.engine_loading); `release`: the
    transformers release the mode runs (Profile.transformers_version; None: the newest)."""
    arch = workload.transformer
    dt = activation_dtypes(workload, dropout=keeps_dropout_masks(arch))
    p = workload.precision_info
    tokens = batch * seq
    context = kv_len if kv_len is not None else seq
    w_bytes = 2 if p.amp else p.weight_bytes  # autocast's matmuls read 16-bit weight copies
    a = dt.act
    ks: list[Kernel] = []
    quantized = _quantized_counts(workload, engine=engine)
    for name, fin, fout, count in layer_gemms(arch):
        if count == 0:
            continue
        w_read, dequant, compute = _weight_traffic(workload, quantized, name, fin, fout, w_bytes, kv_len)
        ks.append(
            Kernel(
                name=name,
                kind="matmul",
                flops=2.0 * tokens * fin * fout,
                bytes=tokens * (fin + fout) * a + w_read,
                count=count,
                ops=1.0,
                cast_ops=_autocast_casts(arch, name) if dt.amp else 0.0,
                compute=compute,
                dequant_bytes=dequant,
            )
        )
    if arch.is_moe:

        def traffic(name: str, fin: int, fout: int) -> tuple[float, float, str]:
            return _weight_traffic(workload, quantized, name, fin, fout, w_bytes, kv_len)

        fp32_experts = experts_in_weight_dtype(arch, dt) and workload.weight_format is None
        # bitsandbytes leaves the stacked experts 16-bit (experts_stay_16_bit): they still run
        # transformers' grouped_mm path, routed copies and all
        torch_grouped = not engine and experts_unquantized(workload) and not fp32_experts
        ks.extend(
            expert_kernels(
                arch,
                tokens,
                a,
                w_bytes,
                amp=dt.amp,
                traffic=traffic,
                fp32_experts=fp32_experts,
                all_experts=all_experts,
                batched=batched_experts and not engine and experts_unquantized(workload),
                batched_fp8=batched_experts
                and not engine
                and workload.weight_format is not None
                and workload.weight_format.method == "fp8",
                torch_grouped=torch_grouped,
                non_bf16_experts=torch_grouped and workload.precision_info.compute != "bf16",
                release=release,
            )
        )
    causal = arch.kind == "decoder"
    # Keys each query sees: the context, or the window on sliding-window layers (layer mean).
    seen = arch.attended_tokens(context) if arch.sliding_layers else context
    # QK^T and PV: 4 * tokens * context * q_dim FLOPs; causal prefill computes about half.
    if arch.is_mla:
        attn_flops = 2.0 * tokens * seen * (arch.q_dim + arch.attn_out_dim)
    else:
        attn_flops = 4.0 * tokens * seen * arch.q_dim
    attn_flops *= 0.5 if causal and kv_len is None else 1.0
    # a window mask the sequence outgrows sends the scores through a kernel that skips no block
    dense = dense_score_factor(workload, seq) if kv_len is None else 1.0
    masked = dense != 1.0
    fused = workload.attention == "fused"
    if not arch.is_mla:
        attn_flops *= dense
    # read per step, per attention layer
    cache_context = arch.cached_tokens(context) / arch.attention_layers if arch.sliding_layers else context
    # a quantized cache is read at its own size while decoding; a prefill attends to fresh K/V
    cache_read = (
        kv_bytes_per_token_layer(workload)
        if workload.kv_cache and kv_len is not None
        else arch.kv_elements_per_token() * a
    )
    attn_bytes = attention_query_bytes(workload, tokens) + batch * cache_context * cache_read
    capping = softcapped(arch) and workload.attention == "eager"
    sinks = arch.attention_sinks and workload.attention == "eager"
    extra_ops = (SOFTCAP_OPS if capping else 0.0) + (SINK_OPS if sinks else 0.0)
    # SDPA's math path (Falcon-7B's one key/value head): FP32 products on the CUDA cores and
    # FP32 scores (math_sdpa_saved_bytes_per_token), whatever the activations' dtype
    math_fp32 = workload.attention == "eager" and kv_len is None and sdpa_math_only(arch)
    attn_backward_bytes = None
    if workload.attention == "eager" and kv_len is None:
        upcast = not math_fp32 and eager_upcasts(arch, dt)
        per_score = (
            (EAGER_SCORE_PASSES * 4 if math_fp32 else eager_score_bytes(dt, upcast=upcast))
            + (SOFTCAP_PASSES * dt.act if capping else 0)
            + (SINK_PASSES * dt.act if sinks else 0)
        )
        score_bytes = batch * arch.num_heads * seq * context * per_score
        if upcast:
            attn_backward_bytes = 2.0 * attn_bytes + EAGER_UPCAST_BACKWARD_RATIO * score_bytes
        attn_bytes += score_bytes
    ks.extend(
        linear_attention.mixer_kernels(
            arch, dt, batch, seq, kv_len=kv_len, training=workload.is_training, release=release
        )
    )
    ks.append(
        Kernel(
            name="attention",
            kind="attention",
            flops=attn_flops,
            bytes=attn_bytes,
            count=arch.attention_layers,
            ops=1.0 if workload.attention == "fused" else 5.0 + extra_ops,
            # eager attention under autocast: the scores up to FP32 for softmax, the probabilities
            # back to 16 bit for the product with V
            cast_ops=2.0 if dt.amp and workload.attention == "eager" else 0.0,
            compute="fp32" if math_fp32 and dt.act != 4 else "",
            backward_bytes=attn_backward_bytes,
            # SDPA's causal fused kernels over a prefill's or a training step's sequence, where no
            # materialised window mask sends the sliding layers to a kernel that takes it as data
            attended_keys=seq if causal and kv_len is None and fused and not masked else 0,
        )
    )
    ks.extend(_pointwise_kernels(workload, arch, dt, tokens))
    emb_rows = arch.hidden_size * dt.res  # FP32 tables under autocast, 16-bit in pure half
    ks.append(
        Kernel(
            name="embedding",
            kind="memory",
            flops=0.0,
            bytes=tokens * emb_rows * 3,
            count=1,
            ops=4.0 if arch.kind == "encoder" else 1.0,
        )
    )
    if with_head:
        if arch.kind == "decoder":
            head_tokens = tokens if workload.is_training else batch
            h, v = arch.hidden_size, arch.vocab_size
            head_w, head_dq, head_compute = _weight_traffic(
                workload, quantized, "lm_head", h, v, w_bytes, kv_len
            )
            capped = SOFTCAP_PASSES * a if softcapped(arch) else 0.0
            ks.append(
                Kernel(
                    name="lm_head",
                    kind="matmul",
                    flops=2.0 * head_tokens * arch.hidden_size * arch.vocab_size,
                    bytes=head_w + head_tokens * arch.vocab_size * (a + 4 + capped),
                    compute=head_compute,
                    dequant_bytes=head_dq,
                    count=1,
                    ops=3.0 + (SOFTCAP_OPS if softcapped(arch) else 0.0),
                    cast_ops=(1.0 + input_casts("lm_head")) if dt.amp else 0.0,  # weight, final norm output
                    misaligned=misaligned_gemm(workload, v),
                )
            )
        else:
            ks.append(
                Kernel(
                    name="classifier",
                    kind="matmul",
                    flops=2.0 * batch * arch.hidden_size * arch.hidden_size,
                    bytes=arch.hidden_size * arch.hidden_size * w_bytes,
                    count=1,
                    ops=6.0,
                    # pooler input, weight and bias; classifier weight and bias
                    cast_ops=(3.0 * arch.pooler + 2.0) if dt.amp else 0.0,
                )
            )
    if workload.is_training and kv_len is None and with_head:
        ks.extend(_training_step_traffic(workload, arch, dt, tokens, a))
    return ks


# FP32 operations per element of an exact (erf) GELU, counting an FMA as two as the datasheet FP32
# peak does: its arithmetic (erff and the conversions around it) runs on the CUDA cores and can
# take longer than its bytes. On an H200 (67 TFLOP/s FP32, 4.22 TB/s streaming) PyTorch's GELU
# took 189.7 us for a [32768, 4096] FP16 tensor (benchmarks/results/profile-bert-large-fp16-
# infer-b64-h200-2026-12-04.txt; its 537 MB stream in 127 us): 95 operations an element; its
# gelu_backward 61.0 us for [8192, 4096] (profile-bert-large-amp-train-h200-2026-12-03.txt; 201 MB,
# 48 us): 122. inductor's fused GELU in the tuned BERT step computes the same erf (39.3 and 55.6 us
# for [8192, 3072] BF16 forward and backward, compiled-step-profile-h200-2026-12-04-bert.json: 105
# and 148). On a card whose FP32 rate is lower against its bandwidth (an A100: 19.5 TFLOP/s for
# 2 TB/s) the GELU is compute-bound by more; GeForce cards stay bandwidth-bound.
GELU_FLOPS_PER_ELEMENT = 95.0
GELU_BACKWARD_FLOPS_PER_ELEMENT = 122.0


def erf_gelu(arch: TransformerArch) -> bool:
    """Whether the block's MLP activation is one exact-GELU kernel (BERT, ViT, GPT-NeoX, Falcon):
    a GELU MLP whose activation transformers does not write in Python (gpt2_python_gelu,
    python_xielu) and is no squared ReLU (RELU2_TYPES)."""
    return (
        arch.mlp == "gelu"
        and not gpt2_python_gelu(arch)
        and not python_xielu(arch)
        and arch.rules_type not in RELU2_TYPES
    )


def gelu_kernel(arch: TransformerArch, dt: ActivationDtypes, tokens: int) -> Kernel:
    """A block's GELU over the MLP width: reads fc1's output and writes its own (16-bit under
    autocast), GELU_FLOPS_PER_ELEMENT on the FP32 cores; backward reads the gradient and the input
    and writes the input gradient at GELU_BACKWARD_FLOPS_PER_ELEMENT. Compiled, it is inductor's
    pointwise region of the same reads, writes and erf."""
    elements = float(tokens * arch.intermediate_size)
    kernel = Kernel(
        name="gelu",
        kind="memory",
        flops=elements * GELU_FLOPS_PER_ELEMENT,
        bytes=2.0 * elements * dt.act,
        count=arch.num_layers,
        ops=1.0,
        launches=1.0,
        compute="fp32",
        backward_flops=elements * GELU_BACKWARD_FLOPS_PER_ELEMENT,
    )
    return replace(kernel, fused=kernel)


# Share of the card's streaming bandwidth that PyTorch's LayerNorm kernels reach on a block's
# [tokens, hidden] rows (vectorized_layer_norm forward; backward its input-gradient kernel and
# GammaBetaBackward): the eager BERT-large AMP-fp16 step on an H200 (benchmarks/results/
# profile-bert-large-amp-train-h200-2026-12-03.txt) spent 4.91 ms a step in its 48 block
# LayerNorms forward and backward for the 9.66 GB counted here (read and write the FP32 rows
# forward, twice that backward): 4.55 ms beside 2.5 us for each of their 144 launches, 2.12 TB/s,
# 0.50 of the H200's streaming 4.22 TB/s.
LAYER_NORM_SHARE = 0.50
# The same kernels on 16-bit rows (pure FP16 / BF16, where autocast does not run the norm in FP32):
# each thread still loads four elements a step (PyTorch's aten/src/ATen/native/cuda/
# layer_norm_kernel.cu: vec_size = 4 for every dtype), half the bytes in flight, so they stream
# slower. The BERT-large FP16 inference step on an H200 (b64 seq 512, benchmarks/results/
# profile-bert-large-fp16-infer-b64-h200-2026-12-04.txt) spent 88.4 us in each of its 49 forward
# LayerNorms over [32768, 1024] FP16 rows (134 MB): 1.52 TB/s, 0.36 of streaming; the FP32 rows
# of the training profile above ran their forward at 0.54.
LAYER_NORM_SHARE_16BIT = 0.36


def layer_norm_share(dt: ActivationDtypes) -> float:
    """The streaming share of PyTorch's LayerNorm kernels on rows of the residual stream's width."""
    return LAYER_NORM_SHARE_16BIT if dt.res == 2 else LAYER_NORM_SHARE


# Share of the card's streaming bandwidth that a bias gradient's reduction reaches: PyTorch sums
# the output gradient [tokens, out] over its tokens in a strided reduce_kernel, one a biased
# Linear. The eager BERT-large AMP-fp16 step on an H200 (seq 512, b16; benchmarks/results/
# profile-bert-large-amp-train-h200-2026-12-03.txt) spent 3.09 ms a step in its 147 aten::sum
# calls, which read 3.62 GB of 16-bit gradients: 2.72 ms beside the profile's 2.5 us a launch,
# 1.33 TB/s, 0.31 of the H200's streaming 4.22 TB/s.
BIAS_GRADIENT_SHARE = 0.31


def _kv_elements_every_query_head(arch: TransformerArch) -> float:
    """Key and value elements of one token once its key/value heads are copied to every query
    head (repeat_kv, or the math path's broadcast)."""
    return arch.kv_elements_per_token() * arch.num_heads / (arch.num_kv_heads or arch.num_heads)


def repeated_kv_kernel(workload: Workload, batch: int, context: int) -> Kernel:
    """The copies of keys and values to every query head on the sliding layers of a decode step
    (generate_ops.repeats_kv says when transformers makes them).

    transformers' repeat_kv expands each layer's K and V from its key/value heads to its query
    heads and reshapes them into new tensors: two copies a layer reading the window's cache and
    writing it once per query head; the attention then reads the expanded tensors instead of the
    cache. Per layer: the read, the write and the attention's extra read, 2x the expanded bytes."""
    arch = workload.transformer
    a = activation_dtypes(workload, dropout=False).act
    window = min(context, arch.sliding_window or context)
    expanded = _kv_elements_every_query_head(arch)
    return Kernel(
        name="repeat_kv",
        kind="memory",
        flops=0.0,
        bytes=2.0 * batch * window * expanded * a,
        count=arch.sliding_layers,
        ops=0.0,
        launches=2.0,
    )


#: The share of the streaming rate PyTorch's math-path SDPA reaches on its broadcast FP32 copies of
#: the keys and values (an unvectorized elementwise kernel that converts each element and reads a
#: single cached head for every query head): Falcon-7B decoding at batch 4 and a 2k context on an
#: H200 wrote 2 x 151 MB a layer a step in 2 x 160 us (profile-falcon-h200-2026-12-05.txt:
#: elementwise_kernel<128, 2> 662 ms over 4,128 calls), 0.94 TB/s, 0.22 of the H200's stream.
MATH_SDPA_COPY_SHARE = 0.22


def math_sdpa_kv_kernels(workload: Workload, batch: int, context: int) -> list[Kernel]:
    """The keys and values of a decode step's math-path SDPA, where the model hands SDPA fewer
    key/value heads than query heads and a mask (execution.sdpa_math_only: Falcon-7B).

    PyTorch's math path computes half-precision inputs in FP32
    (torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp is off by default) and broadcasts the
    cached key/value head to every query head: two copies a layer write the keys and the values
    once per query head in FP32, at their own rate (MATH_SDPA_COPY_SHARE), and the two batched
    products (scores, then the weighted values) read them back, beside the cache read the
    attention kernel counts: 4 bytes an expanded element each way."""
    arch = workload.transformer
    copies = Kernel(
        name="math_sdpa_kv",
        kind="memory",
        flops=0.0,
        bytes=4.0 * batch * context * _kv_elements_every_query_head(arch),
        count=arch.attention_layers,
        ops=0.0,
        launches=2.0,
        memory_efficiency=MATH_SDPA_COPY_SHARE,
    )
    # the products' reads: launched as part of the attention, at the step's stream
    reads = replace(copies, name="math_sdpa_kv_read", launches=0.0, memory_efficiency=None)
    return [copies, reads]


def cache_append_kernel(workload: Workload, batch: int, context: int) -> Kernel:
    """Each layer's keys and values grown by the decode step's token by concatenation.

    transformers' DynamicCache (cache_utils.DynamicLayer.update: `self.keys = torch.cat([self.keys,
    key_states], dim=-2)`, the same for the values) and fitbench's Paddle decoder replace every
    layer's K and V by a copy one token longer at each step: the whole cache read and written
    again beside the attention's read of it (a sliding layer's full window: the same count as
    the attention's). Two copies a layer; their Python calls are in the decode step's counted
    calls (generate_ops), so none here. A static or paged cache writes the new token in place."""
    arch = workload.transformer
    per_layer = arch.cached_tokens(context) / arch.attention_layers if arch.sliding_layers else float(context)
    return Kernel(
        name="kv_append",
        kind="memory",
        flops=0.0,
        bytes=2.0 * batch * per_layer * kv_bytes_per_token_layer(workload),
        count=arch.attention_layers,
        ops=0.0,
        launches=2.0,
    )


def latent_expansion_kernels(workload: Workload, batch: int, context: int) -> list[Kernel]:
    """A decode step's re-expansion of each layer's whole cached latent (latent attention, as
    transformers runs it: Profile.expands_latent_cache).

    transformers' DeepSeek-V2/V3 attention (5.17 and later) caches the compressed latent and
    the rotary key, then at every step `expand_kv` passes all `context` cached latents through
    kv_b_proj (a GEMM of kv_lora_rank -> heads x (qk_nope + v) per cached token), assembles
    each head's key in a new tensor (two copies: the non-rotary part and the broadcast rotary
    key) and attends over the expanded keys and values, where MLA-aware runtimes fold kv_b_proj
    into the query and the output and read only the latent. Per layer: the GEMM over the
    context, then the copies (read and write of heads x qk_head_dim a token) and the
    attention's read of the expanded K and V beyond the latent it is counted with."""
    arch = workload.transformer
    a = activation_dtypes(workload, dropout=False).act
    tokens = batch * context
    heads = arch.num_heads
    kv_out = heads * (arch.qk_nope_head_dim + arch.v_head_dim)
    key_width = heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim)
    expanded = key_width + heads * arch.v_head_dim
    w_bytes = 2 if workload.precision_info.amp else workload.precision_info.weight_bytes
    return [
        Kernel(
            name="kv_b_proj_context",
            kind="matmul",
            flops=2.0 * tokens * arch.kv_lora_rank * kv_out,
            bytes=tokens * (arch.kv_lora_rank + kv_out) * a + arch.kv_lora_rank * kv_out * w_bytes,
            count=arch.num_layers,
            ops=0.0,
        ),
        Kernel(
            name="latent_keys",
            kind="memory",
            flops=0.0,
            bytes=tokens * (2.0 * key_width + expanded - arch.kv_elements_per_token()) * a,
            count=arch.num_layers,
            ops=0.0,
            launches=2.0,
        ),
    ]


def _bias_gradient_kernels(workload: Workload, arch: TransformerArch, tokens: int, a: float) -> list[Kernel]:
    """The bias gradients of the blocks' Linears in backward (nothing in forward): each reads the
    output gradient once (tokens x out_features at the activation width) in a reduction of its
    own. Frozen PEFT bases take no bias gradient."""
    if workload.peft:
        return []
    read = launches = 0.0
    for name, _, fout, count in layer_gemms(arch):
        if _has_bias(arch, name) and count:
            read += count * tokens * fout * a
            launches += count
    if not launches:
        return []
    return [
        Kernel(
            name="bias_gradients",
            kind="memory",
            flops=0.0,
            bytes=0.0,
            backward_bytes=read,
            ops=0.0,  # issued by the Linears' backward nodes, whose host cost is counted
            launches=0.0,
            backward_launches=launches,
            memory_efficiency=BIAS_GRADIENT_SHARE,
        )
    ]


def _training_step_traffic(
    workload: Workload, arch: TransformerArch, dt: ActivationDtypes, tokens: int, a: float
) -> list[Kernel]:
    """Memory-bound work of a training step that no layer kernel carries.

    The language-model loss (transformers' ForCausalLMLoss): 16-bit logits are copied to FP32
    (read 2 + write 4 bytes a logit), log_softmax reads them three times and writes once (16),
    its backward reads the gradient and the output and writes (12), the logits' gradient is
    zero-filled (4) and cast back to 16 bit (6). The lm_head GEMM's roofline hides these bytes;
    on an H200 the Llama-3.2-1B AMP step spent 5.1 ms in them (benchmarks/results/
    gpu-gap-analysis-2026-12-03.md). Encoders' classifiers have a few labels: nothing to count.

    Autocast's weight casts: every GEMM weight is read in FP32 and written in 16 bit once a
    forward (4 + 2 bytes a parameter), and its 16-bit gradient is read and written to the FP32
    `.grad` once a backward (2 + 4; frozen PEFT weights have none); the host side of these casts
    is in the layers' cast_ops.
    """
    ks = []
    if arch.kind == "decoder":
        logits = tokens * arch.vocab_size
        cast = 6.0 if a < 4 else 0.0  # FP32 logits need no copy either way
        ks.append(
            Kernel(
                name="lm_loss",
                kind="memory",
                flops=0.0,
                bytes=logits * (cast + 16.0),
                backward_bytes=logits * (cast + 16.0),
                ops=0.0,  # issued inside the loss call, whose host cost the head already counts
                launches=3.0,
                # compiled: the upcast folds into one reduction that reads the logits twice (the
                # max, then the sum of exponentials), and the backward reads them once more and
                # writes their gradient at the logits' width
                fused=Kernel(
                    name="lm_loss",
                    kind="memory",
                    flops=0.0,
                    bytes=logits * 2.0 * a,
                    backward_bytes=logits * 2.0 * a,
                    ops=0.0,
                    launches=1.0,
                ),
            )
        )
    ks += _bias_gradient_kernels(workload, arch, tokens, a)
    if dt.amp:
        untied_embedding = 0 if arch.tie_embeddings else arch.vocab_size * arch.hidden_size
        positions = arch.max_positions * arch.hidden_size if arch.position == "learned" else 0
        # routed experts run in their FP32 weights' dtype on grouped_mm: autocast casts none of
        # them (experts_in_weight_dtype; autocast_params_at counts the same for memory)
        uncast = stacked_expert_params(arch) if experts_in_weight_dtype(arch, dt) else 0
        cast_params = workload.trained_param_count() - untied_embedding - positions - uncast
        casts = sum(_autocast_casts(arch, n) - input_casts(n) for n, _, _ in block_gemms(arch))
        ks.append(
            Kernel(
                name="weight_casts",
                kind="memory",
                flops=0.0,
                bytes=cast_params * 6.0,
                backward_bytes=0.0 if workload.peft else cast_params * 6.0,  # frozen: no weight gradient
                ops=0.0,
                launches=float(casts * arch.num_layers),
            )
        )
    return ks
