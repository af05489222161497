"""Mixture-of-experts layers as transformers runs them: what their routing and experts save for
the backward, hold while they run, move and launch.

transformers 5 runs a family's experts one of three ways (integrations/moe.py): grouped_mm over
the tokens sorted by expert (training and prefill), batched_mm over gathered copies of each
token's experts (generate's decode steps on a GPU), or, for Llama-4, every expert on every
token. Each way decides memory and time in ways a FLOP count would not (the routed copies, the
FP32 routing weights, the gathers' reads), which is why they are counted here apart from the
dense block's cost (transformer_cost.py, which asks these functions for its MoE layers).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fitbench.estimate.dtypes import ActivationDtypes, activation_dtypes
from fitbench.estimate.matrices import expert_gemms
from fitbench.estimate.segments import Kernel
from fitbench.estimate.weights import experts_stay_16_bit
from fitbench.workloads.arch import TransformerArch, expected_distinct_experts
from fitbench.workloads.workload import Workload

# Operations a family's experts add to the grouped_mm path (transformers 5's
# use_experts_implementation, counted with a dispatch mode on tiny models): gpt-oss adds its two
# expert biases, a clamped gate (two clamps, a sigmoid, two more multiplies, an add) and two more
# index operations, 27 against OLMoE's 17 beside views.
EXPERT_EXTRA_OPS = {"gpt_oss": 10.0}


# transformers families whose MoE block runs every expert on every token: Llama-4's
# Llama4TextMoe repeats the tokens once per expert, scales each copy by its sigmoid router score
# (zero for the experts not chosen) and runs two batched matmuls over all experts, so a step does
# E experts' work and reads every expert's weights however few tokens it has. A mode's profile
# says whether it runs that code (Profile.runs_all_experts; engines route).
ALL_EXPERT_TYPES = ("llama4_text",)


# transformers' batched_mm experts (integrations/moe.py), which generate runs for its decode steps
# on a GPU: each token-expert pair's expert weights are gathered into a new tensor (written) and
# the copy read by a batched matmul: two passes a pair. The gather's read is one per expert
# reached within each launch of the index kernel (batched_gather_reads). Its operations: the
# repeated input, the id clamp, two weight gathers, two bmm, the activation, its product with up,
# the routing weights' product, the sum per token and its cast.
BATCHED_PAIR_PASSES = 2


# The largest output one launch of PyTorch's index kernel addresses (32-bit offsets, in bytes):
# TensorIterator splits a larger one along its largest dimension, the pairs, in halves.
INDEX_LAUNCH_BYTES = 2**31


BATCHED_EXPERT_OPS = 11.0


# Llama4TextMoe's operations beside the shared expert: the repeat, the score multiply, two views,
# two bmm, the chunk, the activation, its product, the sum over experts and the add.
ALL_EXPERT_OPS = 10.0


# and its router's: the linear, top-k, full_like, scatter_, the FP32 sigmoid and its cast back
ALL_EXPERT_ROUTER_OPS = 6.0


def batched_gather_reads(num_experts: int, top_k: int, tokens: int, matrix_bytes: float) -> float:
    """Expert matrices of `matrix_bytes` that batched_mm's gather (`weights[expert_ids]`) reads
    from memory for `tokens` tokens of `top_k` experts: every pair's copy is written, but the
    index kernel reads an expert's matrix about once for all the pairs of one launch that share
    it, and an output over INDEX_LAUNCH_BYTES is split into launches of fewer pairs, each reading
    its own experts. Timed on an H100 (benchmarks/gather_reuse.py,
    gather-reuse-h100-2026-12-07.json): four layouts at batch 32 within 6 % of this count, in any
    routing order, where one read a pair would put them at 1.1-1.6 times the copy's rate."""
    pairs = tokens * top_k
    pieces = 1
    while pieces < pairs and -(-pairs // pieces) * matrix_bytes > INDEX_LAUNCH_BYTES:
        pieces *= 2
    return pieces * expected_distinct_experts(num_experts, top_k, max(tokens // pieces, 1))


def _gathered_matrix_bytes(arch: TransformerArch, total: float) -> list[float]:
    """The stacked expert tensors batched_mm indexes, as `total` (one expert's matrices, as read)
    divides between them: gate and up as one gate_up tensor (transformers 5's layout) and down;
    a two-matrix MLP's up and down."""
    h, fe = arch.hidden_size, arch.expert_intermediate_size
    elements = [2 * h * fe, fe * h] if arch.mlp == "swiglu" else [h * fe, fe * h]
    return [total * e / sum(elements) for e in elements]


def runs_every_expert(arch: TransformerArch) -> bool:
    """Whether transformers' code for this family runs every expert on every token (ALL_EXPERT_TYPES)."""
    return arch.rules_type in ALL_EXPERT_TYPES


def routed_copies(arch: TransformerArch, *, all_experts: bool = True) -> int:
    """Copies of each token an MoE block's experts work on: every expert where the family's code
    runs them all (ALL_EXPERT_TYPES, `all_experts`: the mode runs that code), else the top-k."""
    if all_experts and runs_every_expert(arch):
        return arch.num_experts
    return arch.experts_per_token


# transformers families whose router hands the experts FP32 routing weights (its scores stay
# FP32: DeepSeek's and GLM-4-MoE's FP32 router linear, Mixtral's and MiniMax's softmax); the
# others cast them to the hidden dtype. Weighting the experts' outputs then promotes them to FP32
# (integrations/moe.py `proj_out * sample_weights_g`), and so does their reordering. Read from
# the weights' dtype grouped_mm_experts_forward receives, under transformers 5.17 and 5.24
# (tests/backends/test_family_transients.py holds it).
FP32_ROUTING_WEIGHT_TYPES = (
    "mixtral",
    "deepseek_v2",
    "deepseek_v3",
    "glm4_moe",
    "solar_open",
    "exaone_moe",
    "afmoe",
    "dots1",
    "minimax_m2",
)


def experts_unquantized(workload: Workload) -> bool:
    """Whether the routed experts are held in 16 bit (or FP32): no weight format, or one that
    transformers' loading leaves them out of (weights.experts_stay_16_bit: bitsandbytes)."""
    fmt, arch = workload.weight_format, workload.transformer
    return fmt is None or experts_stay_16_bit(fmt, arch)


def decode_expert_gathers(workload: Workload) -> tuple[float, float]:
    """Bytes of the two weight gathers one MoE layer makes in a decode step of transformers'
    generate on a GPU (batched_mm experts: Profile.decode_experts_batched): every token-expert
    pair of the batch copies its expert's gate/up matrices, then its down matrix, in the
    experts' weight dtype; the first copy stays alive until the second is made (integrations/
    moe.py rebinds one name), so the step holds both. (0, 0) for dense models, families that run
    every expert (ALL_EXPERT_TYPES) and quantized experts."""
    arch = workload.transformer
    if not arch.is_moe or runs_every_expert(arch) or not experts_unquantized(workload):
        return 0.0, 0.0
    dt = activation_dtypes(workload, dropout=False)
    w = 4 if experts_in_weight_dtype(arch, dt) else workload.precision_info.weight_bytes
    pairs = workload.batch_size * arch.experts_per_token
    h, fe = arch.hidden_size, arch.expert_intermediate_size
    up = 2 if arch.mlp == "swiglu" else 1
    return pairs * up * h * fe * w, pairs * fe * h * w


# Families whose MoE block runs its shared experts before the routed ones and holds their output
# through the routed stage (ERNIE-4.5; AFMoE), where DeepSeek's and the others' run after.
SHARED_FIRST_TYPES = ("ernie4_5_moe", "afmoe")


def shared_experts_first(arch: TransformerArch) -> bool:
    """Whether an MoE block computes its shared experts before the routed ones (SHARED_FIRST_TYPES,
    and Qwen2-MoE's gated shared expert), so that their output lives through the routed stage."""
    return bool(arch.shared_intermediate_size) and (
        arch.shared_expert_gate or arch.rules_type in SHARED_FIRST_TYPES
    )


def moe_transient_bytes_per_token(arch: TransformerArch, dt: ActivationDtypes) -> float:
    """The largest moment of an MoE block's forward without autograd, per token (transformers 5's
    grouped_mm experts; tests/backends/test_family_transients.py measures it on the CPU), the
    larger of its two stages. Expanding: each of the k routed copies holds its gathered input
    while the expert's gate_up output (2 x the expert width), its activation and their product
    (one width each) exist, in the experts' dtype. Combining: the gathered input and the down
    projection's output (the hidden width, experts' dtype) beside the weighted output and its
    copy back in token order (the hidden width, in FP32 where the routing weights are:
    FP32_ROUTING_WEIGHT_TYPES). Either way the router's FP32 logits and softmax and the
    residual stream's tensors as a dense block has them. Shared experts run after the routed
    ones, as a dense MLP of their width, or before them (SHARED_FIRST_TYPES, Qwen2-MoE's gated
    ones), whose output then waits through the routed stage."""
    h, k, fe = arch.hidden_size, routed_copies(arch), arch.expert_intermediate_size
    e = 4 if experts_in_weight_dtype(arch, dt) else dt.act
    weighted = 4 if arch.rules_type in FP32_ROUTING_WEIGHT_TYPES else e
    stream = 4 * h * dt.res
    expanding = (h + 4 * fe) * e
    combining = h * (2 * e + 2 * weighted)
    routed = k * max(expanding, combining) + 8 * arch.num_experts + stream
    if shared_experts_first(arch):
        routed += h * dt.act
    shared = 3 * arch.shared_intermediate_size * dt.act + stream + h * dt.act
    return max(routed, shared)


def experts_in_weight_dtype(arch: TransformerArch, dt: ActivationDtypes) -> bool:
    """Whether routed experts run in their weights' dtype rather than autocast's: under autocast.

    transformers 5 runs routed experts through torch's grouped_mm (integrations/moe.py), which
    autocast does not cover; it casts the gathered input to the weights' dtype instead. Under
    AMP the weights are the FP32 master weights, so the experts' GEMMs run in FP32 (at the FP32
    rate; PyTorch leaves TF32 off for matmuls), their activations are FP32, and autocast makes
    no 16-bit copies of them. fitbench's Paddle backend builds no experts; Paddle estimates
    follow the same count. Llama-4's experts (ALL_EXPERT_TYPES) are batched matmuls, which
    autocast covers: 16-bit there, from cached 16-bit copies of the expert weights."""
    return dt.amp and not runs_every_expert(arch)


# gpt-oss's experts clamp gate and up and take glu = gate * sigmoid(alpha * gate), out =
# (up + 1) * glu: eager autograd keeps the gate_up output (two widths, the clamps' inputs), the
# sigmoid's output, the clamped gate, up + 1, glu and the product, seven expert widths where
# SwiGLU keeps four (read from the meta-device trace's saved tensors).
CLAMPED_SWIGLU_TYPES = ("gpt_oss",)


def moe_mlp_saved_bytes_per_token(
    arch: TransformerArch, dt: ActivationDtypes, *, compiled: bool = False
) -> float:
    """What one mixture-of-experts MLP saves for backward, per token (transformers 5's grouped_mm
    experts, integrations/moe.py, checked tensor by tensor on the CPU).

    The router: its Linear's input, the FP32 softmax, the top-k indices (int64) and the
    renormalisation's operands. Each of the k routed copies of the token: the gathered input,
    the expert's gate, activation, up and product (as a dense SwiGLU keeps), the expert's output
    (kept by the routing-weight multiply), the weight and the gather index. The routed tensors
    are in the experts' weights' dtype (experts_in_weight_dtype): FP32 under autocast. Shared
    experts save as a dense MLP of their width, with Qwen2-MoE's gate (its input, the sigmoid,
    the gated output). `compiled` (the tuned step, benchmarks/compiled_saved.py): inductor's
    partitioner keeps each expert's gate_up output and product and recomputes the activation,
    three tensors of the expert width where eager keeps four."""
    h, k, fe = arch.hidden_size, routed_copies(arch), arch.expert_intermediate_size
    swiglu = arch.mlp == "swiglu"
    widths = (3 if compiled else 4) if swiglu else 2
    if arch.rules_type in CLAMPED_SWIGLU_TYPES and not compiled:
        widths = 7
    e = 4 if experts_in_weight_dtype(arch, dt) else dt.act
    # The norm's output feeds the router, the shared experts' Linears and their gate: one saved
    # tensor without autocast, a 16-bit copy for each under it (ActivationDtypes.linear_input).
    consumers = 1
    shared = 0.0
    if arch.shared_intermediate_size:
        consumers += 2 if swiglu else 1
        shared = widths * arch.shared_intermediate_size * dt.act
        if arch.shared_expert_gate:
            consumers += 1
            shared += h * dt.act + 4
    router = 4 * arch.num_experts + 12 * k + 4
    routed = k * (e * (2 * h + widths * fe) + 4 + 8)
    return dt.linear_input(h, consumers) + router + routed + shared


Traffic = Callable[[str, int, int], tuple[float, float, str]]


# The share of the streaming rate the routed copies' unvectorized passes reach, by the bytes of
# their elements (2: bf16/fp16, 4: FP32), on the reference card. transformers' grouped_mm path
# (integrations/moe.py) masks its sentinel rows with a [S, 1] mask broadcast over the row (5.17:
# masked_fill three times in the forward, three in the backward), weights each copy by its
# [S, 1] routing weight, and runs the activation and its product on the two halves of the
# gate/up output (strided views): TensorIterator cannot vectorise a broadcast or strided
# operand, and its per-element index arithmetic, not the bytes, bounds those kernels, at one
# rate in elements per SM whatever the dtype. Measured on an H100 (kernel-classes-moe-h100-
# 2026-12-06.json, OLMoE's 24 masked fills a step: bf16 1.61 G elements in 4.77 ms, 1.35 TB/s;
# FP32 under autocast the same elements in 5.52 ms, 2.33 TB/s; its strided silu_backward 298 G
# elements/s) and carried to the H200 per SM (speed.own_share: the same 132 SMs): 1.35 and 2.33
# TB/s of its 4.22.
ROUTED_INDEX_SHARE = {2: 0.32, 4: 0.55}


def routing_weight_bytes(arch: TransformerArch, e: float) -> float:
    """Bytes of a routed copy's weighted output: FP32 where the routing weights are
    (FP32_ROUTING_WEIGHT_TYPES) or the experts run in FP32 (`e` 4), else the experts' `e`."""
    return 4.0 if e >= 4 or arch.rules_type in FP32_ROUTING_WEIGHT_TYPES else e


def routing_masks(release: str | None) -> tuple[int, int]:
    """(hidden-width, gate/up-width) sentinel masks transformers' grouped_mm path applies to the
    routed copies in a forward at `release` (integrations/moe.py): up to 5.16 the gathered input
    and the weighted output, in place; 5.17 the gathered input, the gate/up output and the down
    output; from 5.18 none without expert parallelism. An unknown release counts as the newest."""
    match = re.match(r"(\d+)\.(\d+)", release or "")
    if match is None:
        return 0, 0
    version = (int(match.group(1)), int(match.group(2)))
    if version >= (5, 18):
        return 0, 0
    return (2, 1) if version == (5, 17) else (2, 0)


def expert_routing_bytes_per_token(
    arch: TransformerArch, e: float, w: float, masks: tuple[int, int] = (0, 0)
) -> tuple[float, float, float, float]:
    """(unvectorized forward, unvectorized backward, streaming forward, streaming backward) bytes
    one token's routed copies move in one MoE layer, with `masks` (routing_masks) sentinel masks
    (expert_routing_kernels says which passes; benchmarks/elementwise_traffic.py counts them on
    the CPU)."""
    k, h, fe = arch.experts_per_token, arch.hidden_size, arch.expert_intermediate_size
    gated = arch.mlp == "swiglu"
    kh, kf = k * h, k * fe
    # each mask reads and writes its rows; its backward masks the gradient the same way
    mask = masks[0] * 2 * kh * e + masks[1] * 4 * kf * e
    # the routing-weight product; the activation and its product on the gate/up halves
    index_fwd = kh * (e + w) + (5 * kf * e if gated else 0.0) + mask
    # the product's and the halves' gradients; the two gathers' index backward (accumulating)
    index_bwd = kh * (e + 5 * w) + (6 * kf * e if gated else 0.0) + mask
    cast = h * (w + e) if w != e else 0.0
    # the gather of each copy's input (from the token's row), the gather back, the sum over k
    stream_fwd = kh * e + h * e + 2 * kh * w + kh * w + h * w + cast + (0.0 if gated else 2 * kf * e)
    # the sum's gradient copied to each of the k copies, the zeros the index backward accumulates
    # into, the routing weights' gradient (a product and a sum over the width), the product's
    # gradient cast back from FP32 weights, the up half's gradient and the halves put together
    # (or the plain activation's gradient)
    cast_back = kh * (w + e) if w != e else 0.0
    stream_bwd = h * w + kh * (5 * w + e) + cast_back + (7 if gated else 3) * kf * e
    return index_fwd, index_bwd, stream_fwd, stream_bwd


def expert_routing_kernels(
    arch: TransformerArch, tokens: int, e: float, w: float, masks: tuple[int, int] = (0, 0)
) -> list[Kernel]:
    """The memory passes transformers' grouped_mm path makes over each token's k routed copies, per
    MoE layer (integrations/moe.py grouped_mm_experts_forward, 5.17 and 5.24): `e` the experts'
    activation bytes, `w` the routing weights' (FP32_ROUTING_WEIGHT_TYPES, or FP32 experts).

    Unvectorized (ROUTED_INDEX_SHARE), forward: the sentinel masks the release applies
    (routing_masks; 5.17's over the gathered input, the gate/up output and the down output, read
    and written each), the activation and its product on the gate/up halves, the routing-weight
    product. Backward: the same masks and products backward, and the two gathers' index backward
    (index_put with accumulate). Streaming (the profile's share), forward: the gather of each
    copy's input, the gather back to token order, the sum over the k copies (and its cast where
    the weights are FP32); backward: the sum's gradient copied to every copy, the routing
    weights' gradient (a product and a sum over the width), the gate/up halves' gradients put
    together, the zeros the index backward accumulates into. Their operations are the experts
    kernel's (its 15); a launch each here."""
    index_fwd, index_bwd, stream_fwd, stream_bwd = expert_routing_bytes_per_token(arch, e, w, masks)
    gated, cast = arch.mlp == "swiglu", w != e
    unvectorized = (2 if gated else 0) + 1 + sum(masks)
    n = arch.moe_layers
    return [
        Kernel(
            name="expert_routing_masked",
            kind="memory",
            flops=0.0,
            bytes=tokens * index_fwd,
            backward_bytes=tokens * index_bwd,
            count=n,
            ops=0.0,
            launches=float(unvectorized),
            backward_launches=float(unvectorized + 2),
            memory_efficiency=ROUTED_INDEX_SHARE[4 if e >= 4 else 2],
        ),
        Kernel(
            name="expert_routing_copies",
            kind="memory",
            flops=0.0,
            bytes=tokens * stream_fwd,
            backward_bytes=tokens * stream_bwd,
            count=n,
            ops=0.0,
            launches=4.0 if cast else 3.0,
            backward_launches=5.0,
        ),
    ]


def expert_kernels(
    arch: TransformerArch,
    tokens: int,
    act_bytes: float,
    w_bytes: float,
    *,
    amp: bool,
    traffic: Traffic | None = None,
    fp32_experts: bool = False,
    all_experts: bool = False,
    batched: bool = False,
    batched_fp8: bool = False,
    torch_grouped: bool = False,
    non_bf16_experts: bool = False,
    release: str | None = None,
) -> list[Kernel]:
    """The router, routed experts and shared experts of the MoE blocks, for `tokens` tokens.

    FLOPs count the experts each token runs (top-k plus shared); weight bytes count the experts
    the tokens reach: expected_distinct_experts (k for one token while decoding, near all of
    them for a prefill or a large batch). Each expert's matrices are read once per step, at
    `w_bytes` an element or, with quantized weights, at what `traffic(name, in, out)` says
    (packed values plus scales, the dequantisation a prefill pays, the tensor-core type).
    Framework operations follow transformers 5's default `grouped_mm` experts path
    (integrations/moe.py): the router's linear, softmax, top-k and renormalisation (7), then one
    sort, gathers, a histogram, two grouped matmuls, the activation and the weighted scatter
    (15) whatever the number of experts hit. `fp32_experts` (experts_in_weight_dtype, unquantized
    weights): the routed experts read their FP32 weights and run FP32 GEMMs on FP32 activations.
    Families with more pointwise work around the grouped products add EXPERT_EXTRA_OPS.
    `torch_grouped` (transformers' grouped_mm runs the experts in their own dtype): one grouped
    kernel per product where torch has it for the card (bf16 on compute capability 9.0 / 10.0),
    else one mm per expert with tokens (Kernel.fallback_launches); `non_bf16_experts`: FP16 or
    FP32 weights, which take that fallback on every card. Either way the routed copies' memory
    passes follow (expert_routing_kernels, with the sentinel masks of transformers `release`).
    `all_experts` (the mode runs transformers' code): ALL_EXPERT_TYPES do every expert's work on
    every token and read every expert, plus the repeated, score-scaled copies of the tokens.
    `batched` (a decode step of transformers' generate on a GPU: Profile.decode_experts_batched,
    16-bit or FP32 weights): the batched_mm path gathers each token-expert pair's expert weights
    into a new tensor and a batched matmul reads that copy: two passes a pair, plus the gather's
    read of each expert reached within one launch of the index kernel (batched_gather_reads);
    BATCHED_EXPERT_OPS operations. Measured on an H100 (profile-mixtral-h100-2026-12-05.txt):
    the gathers and bmm of Mixtral's decode steps at batch 4 took 85 % of its GPU time.
    `batched_fp8` (the same switch over fp8 block-scaled experts: integrations/finegrained_fp8.py
    fp8_batched_mm_experts_forward): its kernel reads each pair's expert weights and scales by
    expert id, one pass per pair, no copy.
    """
    h, fe = arch.hidden_size, arch.expert_intermediate_size
    k = routed_copies(arch, all_experts=all_experts)
    dense = k == arch.num_experts and runs_every_expert(arch)
    mats = 3 if arch.mlp == "swiglu" else 2
    n = arch.moe_layers
    distinct = expected_distinct_experts(arch.num_experts, k, tokens)
    parts = expert_gemms(arch)

    def weights(part: str) -> tuple[float, float, str]:
        """(bytes read, dequantisation bytes, tensor-core type) of one instance of a part."""
        if traffic is None:
            return sum(fin * fout for _, fin, fout in parts[part]) * w_bytes, 0.0, ""
        each = [traffic(name, fin, fout) for name, fin, fout in parts[part]]
        return sum(r for r, _, _ in each), sum(d for _, d, _ in each), each[0][2]

    r_read, r_dq, r_compute = weights("router")
    e_read, e_dq, e_compute = weights("experts")
    e_act, e_casts, e_launches, e_back_launches = act_bytes, 2.0 if amp else 0.0, None, None
    fallback_fields: tuple[float, float, float] | None = None
    e_ops = 15.0 + EXPERT_EXTRA_OPS.get(arch.rules_type, 0.0)
    r_ops, copies = 7.0, 0.0
    if dense:
        # the repeat (write), the score multiply (read, write): three passes over the copies
        e_ops, r_ops, copies = ALL_EXPERT_OPS, ALL_EXPERT_ROUTER_OPS, 3.0 * tokens * k * h * act_bytes
    gathered = batched and not dense
    # fp8's batched kernel: each pair reads its expert, beyond the distinct experts' one read
    per_pair = (tokens * k - distinct) * e_read if batched_fp8 and not dense else 0.0
    if fp32_experts:
        # experts_in_weight_dtype: the FP32 master weights read as they are, FP32 activations,
        # the FP32 rate; one cast of the gathered input, no autocast copies of the weights.
        # grouped_mm's fast path takes bf16 only: FP32 runs its fallback, one mm per expert that
        # has tokens, issued from C++ (a dispatch each, like autocast's casts) for each of the
        # two grouped products, in place of the two grouped kernels.
        e_read *= 4 / w_bytes
        e_act, e_compute = 4.0, "fp32"
        e_casts = 1.0 + 2.0 * distinct
        e_launches = e_ops - 2.0 + 2.0 * distinct
        # its backward: the input's and the weight's gradient, an mm each per expert and product
        e_back_launches = e_ops - 2.0 + 4.0 * distinct
    elif torch_grouped and not gathered and not dense:
        # Experts in their own dtype on transformers' grouped_mm: torch's grouped kernel takes bf16
        # on compute capability 9.0 / 10.0 only (speed.grouped_mm_fast_path); FP16 and FP32
        # weights everywhere, and bf16 on other cards, take the per-expert fallback as above.
        fallback = (e_ops - 2.0 + 2.0 * distinct, e_ops - 2.0 + 4.0 * distinct, e_casts + 2.0 * distinct)
        if non_bf16_experts:
            e_launches, e_back_launches, e_casts = fallback
        else:
            fallback_fields = fallback
    # transformers' grouped_mm path, with torch's grouped kernel or its per-expert fallback
    grouped = (torch_grouped or fp32_experts) and not gathered and not dense
    ks = [
        Kernel(
            name="router",
            kind="matmul",
            flops=2.0 * tokens * h * arch.num_experts,
            bytes=tokens * (h + arch.num_experts) * act_bytes + r_read,
            count=n,
            ops=r_ops,
            cast_ops=2.0 if amp else 0.0,
            compute=r_compute,
            dequant_bytes=r_dq,
        ),
        # Each routed token's expert MLP reads its input once per matrix and writes its output.
        Kernel(
            name="experts",
            kind="matmul",
            flops=2.0 * tokens * k * mats * h * fe,
            bytes=tokens * k * mats * (h + fe) * e_act
            + (
                BATCHED_PAIR_PASSES * tokens * k * e_read
                + sum(
                    batched_gather_reads(arch.num_experts, k, tokens, size) * size
                    for size in _gathered_matrix_bytes(arch, e_read)
                )
                if gathered
                else distinct * e_read
            )
            + per_pair
            + copies,
            count=n,
            ops=BATCHED_EXPERT_OPS if gathered else e_ops,
            cast_ops=e_casts,
            compute=e_compute,
            dequant_bytes=distinct * e_dq,
            launches=e_launches,
            backward_launches=e_back_launches,
            grouped=grouped,
            fallback_launches=fallback_fields[0] if fallback_fields else None,
            fallback_backward_launches=fallback_fields[1] if fallback_fields else None,
            fallback_cast_ops=fallback_fields[2] if fallback_fields else None,
        ),
    ]
    if grouped:
        w = routing_weight_bytes(arch, e_act)
        ks.extend(expert_routing_kernels(arch, tokens, e_act, w, routing_masks(release)))
    if arch.shared_intermediate_size:
        fs = arch.shared_intermediate_size
        s_read, s_dq, s_compute = weights("shared")
        ks.append(
            Kernel(
                name="shared_experts",
                kind="matmul",
                flops=2.0 * tokens * mats * h * fs,
                bytes=tokens * mats * (h + fs) * act_bytes + s_read,
                count=n,
                ops=float(mats),
                cast_ops=float(mats) if amp else 0.0,
                compute=s_compute,
                dequant_bytes=s_dq,
            )
        )
    return ks
