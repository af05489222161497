"""Host operations of one eager Hugging Face `generate` decode step, counted the way it issues them.

In eager mode the host pays for every Python-level torch call: argument parsing, the dispatcher,
the kernel launch. That is the unit here, one call = one operation of
`profiles.toml: generate_host_seconds_per_op`: the calls a `TorchFunctionMode` sees in a decode
step, less the attribute reads (`.shape`, `.dtype`, `.device`), which the mode also reports but
which are C getters costing nanoseconds. Aten operations are not the unit: one Python call
issues zero (a view's metadata), one, or several of them (an RMSNorm's `.to`), and on the H200
the host time per decode layer divided by Python calls came out the same for dense and MoE
layers (9.9-10.2 us) where per aten op it did not (8.8 and 11.9 us).

The parts follow transformers 5's Llama-family modelling code (Llama, Mistral, Qwen2/3,
Mixtral, Qwen-MoE) with the dynamic cache and SDPA attention, and its `generate` loop with
greedy search, `min_new_tokens` and an end-of-sequence token; tests/unit/test_generate_ops.py
counts the real tiny models with a TorchFunctionMode and requires equality. Families with other
block code (Falcon's fused QKV split, Gemma-2's eager attention with soft-capping, DeepSeek's
latent attention, gpt-oss's sinks and router...) issue more or fewer calls than their parts:
`CallCounts.family_layer` / `family_moe_layer` / `family_fixed` hold the difference, counted
the same way on a tiny model of every family of the model library
(benchmarks/generate_ops_families.py). A family counted nowhere takes its parts alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fitbench.estimate.weights import BNB_METHODS, quantized_matrices
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# One decoder layer, attention side: two RMSNorms (8 calls each: to, pow, mean, add, rsqrt, mul,
# to, mul), q/k/v/o projections, the view/transpose/reshape/contiguous of the heads, the cache's
# two concatenations, SDPA and the two residual adds: 35 calls (transformers >= 5.23 reshapes
# SDPA's output once more, undoing its query packing: 36).
ATTENTION_BLOCK_CALLS = 35
# Rotary embedding on queries and keys: cos/sin unsqueeze, and per tensor x*cos, the two halves,
# neg, cat, *sin, add (apply_rotary_pos_emb, rotate_half).
ROTARY_CALLS = 16
# One RMSNorm (the per-head query and key norms of Qwen3 / Gemma-3 are one each).
RMSNORM_CALLS = 8
# The MLP's residual add, which a layer without an MLP does not issue.
MLP_RESIDUAL_CALLS = 1
# A sliding-window layer's cache keeps only its window: two slices on update.
SLIDING_LAYER_CALLS = 2
# SwiGLU MLP: gate, up, down projections, the activation and the product; GELU MLP: two and one.
MLP_CALLS = {"swiglu": 5, "gelu": 3}
# Qwen-MoE's shared expert gate: linear, sigmoid, product; the shared expert's output is cast
# and added to the routed one: two calls.
SHARED_GATE_CALLS = 3
SHARED_EXPERT_ADD_CALLS = 2
# Latent attention's query compression (q_lora_rank > 0: DeepSeek-V2/V3): a down-projection,
# its RMSNorm and an up-projection where other layers have one query projection.
LATENT_QUERY_LORA_CALLS = RMSNORM_CALLS + 1
# A model whose every layer slides builds no full causal mask: two calls fewer.
ALL_SLIDING_SAVES = 2
# The first transformers release whose SDPA path folds a single query's heads onto the key/value
# heads under a mask (integrations/sdpa_attention.py `pack_gqa`) instead of copying keys and
# values to every query head (`repeat_kv`).
PACK_GQA_SINCE = (5, 23)


@dataclass(frozen=True)
class CallCounts:
    """The parts of a decode step's count that differ between transformers releases.

    Two sets, each counted on real tiny models (tests/unit/test_generate_ops.py runs against the
    installed release; benchmarks/results/generate-ops-transformers-5.17.txt holds the 5.17
    run): the releases before PACK_GQA_SINCE (verified on 5.17, the H200 reference stack) and
    from it on (verified on 5.24). A release in between takes the set of its side of the
    boundary, which the SDPA change fixes exactly and the rest approximately."""

    # Calls of a layer's attention block, at ATTENTION_BLOCK_CALLS plus this (output reshape).
    attention_extra: int
    # A GQA layer attending through a materialised mask (a reached sliding window): repeat_kv's
    # index, expand and reshape for keys and values (6) before 5.23; pack_gqa's reshape (1) after.
    masked_gqa: int
    # transformers' default experts path (integrations/moe.py, `grouped_mm`): router linear,
    # softmax, top-k, renormalisation, the sort of token-expert pairs, histc/cumsum offsets,
    # gathers, two grouped matmuls, chunk, activation, weighting and the scatter back, plus the
    # reshapes of the sparse block, whatever the number of experts a step reaches (Mixtral's
    # renormalised top-k; a router without it issues 3 calls fewer, not distinguished).
    moe_block: int
    # The same block through the batched_mm experts that generate's decode loop runs on a GPU
    # (generation/utils.py _optimize_model_for_decode): the repeated input, the clamp, two weight
    # gathers and two bmm in place of the sort, offsets, grouped products and reordering.
    batched_moe_block: int
    # Per step outside the layers, the model's and the generate loop's: the embedding, cache
    # position and rotary cos/sin, the causal-mask check (one device sync), final norm and head,
    # then greedy search's logits processors (min_new_tokens), argmax, end-of-sequence stopping
    # criteria, the unfinished-sequence bookkeeping, the concatenations of input_ids and the
    # attention mask and prepare_inputs_for_generation's slices. 5.17's rotary embedding runs its
    # product under a disabled autocast (a matmul, expand, float, transpose and two grad-mode
    # switches) and its loop keeps one more mask concatenation: 12 calls more.
    fixed: int
    # A sliding-window mask that cannot be skipped (the context has reached the window): the
    # padding and window mask functions evaluated on index tensors every step.
    sliding_mask: int
    # Calls a family adds outside the layers (5.17's Qwen2/Qwen3: three more casts), and to each
    # of its dense and MoE layers beyond their parts (benchmarks/generate_ops_families.py, whose
    # output for each release is benchmarks/results/generate-ops-families-transformers-*.txt).
    # Qwen2-MoE is left to its parts: its router issues three calls fewer without norm_topk_prob
    # (the 57B checkpoint) than with it, which the arch does not record.
    family_fixed: dict[str, int]
    family_layer: dict[str, int]
    family_moe_layer: dict[str, int]
    # A linear-attention layer's calls beyond an attention layer's of the same family (Qwen3.5's
    # and Qwen3-Next's Gated DeltaNet decode step: projections, the causal convolution's state
    # update, the recurrent rule's passes, the gated norm; Granite 4.0-H's Mamba-2 step alike;
    # LFM2's short convolution: fewer calls than its attention layer's, so negative;
    # TransformerArch.linear_layers; benchmarks/linear_attention_counts.py --decode-calls).
    family_linear_layer: dict[str, int]
    # A layer without an MLP (TransformerArch.mlp_free_layers): the calls a family's MLP block
    # issues beyond the MLP, its RMSNorm and its residual add that the parts take off (Nemotron-H:
    # the block's cast to the norm's dtype, its norm's cast of the weight, the squared ReLU's
    # second call), so negative.
    family_mlp_free_layer: dict[str, int]
    # Families whose model builds a sliding-window mask beside the causal one every step even
    # with no sliding layer (Qwen2-MoE), counted with no window set.
    unused_sliding_mask: dict[str, int]


BEFORE_PACK_GQA = CallCounts(
    attention_extra=0,
    masked_gqa=6,
    moe_block=46,
    batched_moe_block=32,
    fixed=77,
    sliding_mask=24,
    family_fixed={
        "nemotron-h": -15,
        # forward and generate's loop over the hybrid cache, counted on 5.17
        # (benchmarks/generate_ops_families.py with that release first on PYTHONPATH)
        "qwen3-5-text": 19,
        "qwen3-5-moe-text": 19,
        "qwen3-next": 5,
        "granitemoehybrid": -14,
        "bamba": 1,
        "lfm2": 3,
        "lfm2-moe": 3,
        "qwen2": 3,
        "qwen3": 3,
        "cohere": 7,
        "cohere2": 18,
        "deepseek-v2": -3,
        "ernie4-5": 1,
        "ernie4-5-moe": 1,
        "falcon": 4,
        "gemma2": 52,
        "gemma3-text": -1,
        "gpt-neox": -6,
        "gpt-oss": 44,
        "gpt2": -14,
        "gptj": -7,
        "llama4-text": 13,
        "olmo": -4,
        "olmo2": 1,
        "phi3": 3,
        "phimoe": 3,
        "starcoder2": -3,
        "dots1": 3,
        "gpt-bigcode": -17,
        "granitemoe": 2,
        "stablelm": -7,
        "helium": 1,
        "minicpm3": 3,
        "ministral": 14,
        "jais2": -7,  # the final LayerNorm module for RMSNorm's passes
        "nemotron": -6,
        "phi": -6,
        "exaone4": 6,
        "exaone-moe": 6,
        "afmoe": 11,
        "flex-olmo": 1,
        "olmo3": -5,
    },
    family_layer={
        "nemotron-h": 3,
        "qwen3-5-text": 19,
        "granitemoehybrid": 2,
        "bamba": 6,
        "cohere": 2,
        "cohere2": 2,
        "deepseek-v2": 19,
        "deepseek-v3": 24,
        "ernie4-5": 12,
        "ernie4-5-moe": 12,
        "falcon": -13,
        "gemma2": 41,
        "gemma3-text": 28,
        "glm4-moe": 6,
        "gpt-neox": -11,
        "gpt2": 10,
        "gptj": 26,  # eager attention: 5.17 builds GPT-J without SDPA (execution.SDPA_SINCE)
        "olmo": -8,
        "olmo2": 2,
        "phi3": 9,
        "seed-oss": 2,  # its two residual dropouts, called in eval mode too
        "starcoder2": -12,
        "gpt-bigcode": -16,
        "stablelm": -7,
        "apertus": 14,
        "arcee": 1,
        "helium": 8,
        "minicpm3": 20,
        "nemotron": -5,
        "ministral3": 9,  # Llama 4's query scale, recomputed in every layer
        "youtu": 24,  # DeepSeek-V3's latent attention, as its dense layers
        "jais2": -13,  # LayerNorm modules for RMSNorm's passes, ReLU squared for SwiGLU
        "afmoe": 19,  # the output gate, query/key norms, four norms a block
    },
    family_moe_layer={
        "nemotron-h": 18,
        "qwen3-5-moe-text": 18,
        "qwen3-next": 18,
        "deepseek-v2": 18,
        "deepseek-v3": 40,
        "ernie4-5-moe": 17,
        "glm4-moe": 22,
        "solar-open": 16,  # GLM-4.5's router and experts, its attention not half-rotated
        "exaone-moe": 16,
        "afmoe": 23,
        "gpt-oss": 26,
        "llama4-text": -10,
        "minimax-m2": 9,
        "olmoe": -2,
        "phimoe": 5,
        "qwen3-moe": -2,
        "dots1": 13,
        "granitemoe": 1,
        "lfm2-moe": 3,
    },
    family_linear_layer={
        "nemotron-h": 62,
        "qwen3-5-text": 32,
        "qwen3-5-moe-text": 32,
        "qwen3-next": 52,
        "granitemoehybrid": 60,
        "bamba": 38,
        "lfm2": -32,
        "lfm2-moe": -32,
    },
    family_mlp_free_layer={"nemotron-h": -2},
    unused_sliding_mask={"qwen2-moe": 31},
)
FROM_PACK_GQA = CallCounts(
    attention_extra=1,
    masked_gqa=1,
    moe_block=40,
    batched_moe_block=31,
    fixed=65,
    sliding_mask=19,
    family_fixed={
        "nemotron-h": -9,
        "qwen3-5-text": 18,
        "qwen3-5-moe-text": 18,
        "qwen3-next": 2,
        "granitemoehybrid": -9,
        "bamba": 1,
        "cohere": 5,
        "cohere2": 11,
        "deepseek-v2": -4,
        "ernie4-5": -2,
        "ernie4-5-moe": -2,
        "falcon": 2,
        "gemma2": 40,
        "gemma3-text": -1,
        "gpt-neox": -6,
        "gpt-oss": 32,
        "gpt2": -10,
        "gptj": -14,
        "llama4-text": -11,
        "exaone4": -2,
        "exaone-moe": -5,
        "afmoe": 6,
        "flex-olmo": -2,
        "olmo": -7,
        "olmo2": -2,
        "olmo3": -5,
        "phi3": 3,
        "phimoe": 2,
        "starcoder2": -3,
        "dots1": -8,
        "gpt-bigcode": -12,
        "granitemoe": 2,
        "stablelm": -7,
        "helium": 1,
        "minicpm3": 3,
        "ministral": 6,
        "jais2": -7,  # the final LayerNorm module for RMSNorm's passes
        "nemotron": -6,
        "phi": -6,
    },
    family_layer={
        "nemotron-h": 5,
        "qwen3-5-text": 19,
        "granitemoehybrid": 2,
        "bamba": 6,
        "cohere": 2,
        "cohere2": 2,
        "deepseek-v2": 19,
        "deepseek-v3": 24,
        "ernie4-5": 12,
        "ernie4-5-moe": 12,
        "falcon": -14,
        "gemma2": 40,
        "gemma3-text": 28,
        "glm4-moe": 6,
        "gpt-neox": -11,
        "gpt2": 10,
        "gptj": 8,
        "olmo": -8,
        "olmo2": 2,
        "phi3": 9,
        "seed-oss": 2,  # its two residual dropouts, called in eval mode too
        "starcoder2": -12,
        "gpt-bigcode": -16,
        "stablelm": -7,
        "apertus": 14,
        "arcee": 1,
        "helium": 8,
        "minicpm3": 20,
        "nemotron": -5,
        "ministral3": 9,  # Llama 4's query scale, recomputed in every layer
        "youtu": 24,  # DeepSeek-V3's latent attention, as its dense layers
        "jais2": -13,  # LayerNorm modules for RMSNorm's passes, ReLU squared for SwiGLU
        "afmoe": 19,  # the output gate, query/key norms, four norms a block
    },
    family_moe_layer={
        "nemotron-h": 20,
        "qwen3-5-moe-text": 18,
        "qwen3-next": 18,
        "deepseek-v2": 18,
        "deepseek-v3": 40,
        "ernie4-5-moe": 17,
        "glm4-moe": 22,
        "solar-open": 16,  # GLM-4.5's router and experts, its attention not half-rotated
        "exaone-moe": 16,
        "afmoe": 23,
        "gpt-oss": 25,
        "llama4-text": -4,
        "minimax-m2": 9,
        "olmoe": -2,
        "phimoe": 5,
        "qwen3-moe": -2,
        "dots1": 13,
        "granitemoe": 1,
        "lfm2-moe": 3,
    },
    family_linear_layer={
        "nemotron-h": 61,
        "qwen3-5-text": 31,
        "qwen3-5-moe-text": 31,
        "qwen3-next": 51,
        "granitemoehybrid": 61,
        "bamba": 39,
        "lfm2": -33,
        "lfm2-moe": -33,
    },
    family_mlp_free_layer={"nemotron-h": -3},
    unused_sliding_mask={"qwen2-moe": 21},
)


def release(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a transformers version string ("5.17.0", "5.23.0.dev0"); None when it
    is missing or does not start with two numbers."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def call_counts(transformers: str | None) -> CallCounts:
    """The count set of a transformers release; an unknown or missing one counts as the newest."""
    known = release(transformers)
    return FROM_PACK_GQA if known is None or known >= PACK_GQA_SINCE else BEFORE_PACK_GQA


def repeats_kv(arch: TransformerArch, context: int, transformers: str | None) -> bool:
    """Whether a decode step copies keys and values to every query head on its sliding layers:
    the window's mask is materialised (window_reached), the layers group query heads (GQA), and
    the release predates pack_gqa. SDPA's fused kernels take no GQA with a mask; the copy writes
    the window's keys and values for every query head, and the attention reads them all."""
    grouped = arch.num_kv_heads is not None and arch.num_kv_heads < arch.num_heads
    return grouped and window_reached(arch, context) and call_counts(transformers) is BEFORE_PACK_GQA


def window_reached(arch: TransformerArch, context: int) -> bool:
    """Whether sliding-window layers attend through a materialised window mask at `context`."""
    return bool(arch.sliding_layers) and arch.sliding_window is not None and context >= arch.sliding_window


def layer_calls(
    arch: TransformerArch,
    *,
    moe: bool,
    sliding: bool,
    window_full: bool = False,
    transformers: str | None = None,
    batched_experts: bool = False,
    mlp: bool = True,
) -> int:
    """Python-level torch calls of one decoder layer in a decode step (`batched_experts`: its
    experts through batched_mm, as generate runs them on a GPU; `mlp` False: a layer without an
    MLP, TransformerArch.mlp_free_layers, whose MLP, its norm and its residual add are not
    issued)."""
    counts = call_counts(transformers)
    calls = ATTENTION_BLOCK_CALLS + counts.attention_extra
    if arch.position == "rotary":
        calls += ROTARY_CALLS
    if arch.qk_norm != "none":
        calls += 2 * RMSNORM_CALLS
    if arch.q_lora_rank:
        calls += LATENT_QUERY_LORA_CALLS
    calls += _family(counts.family_moe_layer if moe else counts.family_layer, arch)
    if sliding:
        calls += SLIDING_LAYER_CALLS
        grouped = arch.num_kv_heads is not None and arch.num_kv_heads < arch.num_heads
        if window_full and grouped:
            calls += counts.masked_gqa
    if not mlp:
        calls -= RMSNORM_CALLS + MLP_RESIDUAL_CALLS
        calls += _family(counts.family_mlp_free_layer, arch)
    elif moe:
        calls += counts.batched_moe_block if batched_experts else counts.moe_block
        if arch.shared_intermediate_size:
            calls += MLP_CALLS[arch.mlp] + SHARED_EXPERT_ADD_CALLS
            calls += SHARED_GATE_CALLS if arch.shared_expert_gate else 0
    else:
        calls += MLP_CALLS[arch.mlp]
    return calls


def linear_layer_extra_calls(arch: TransformerArch, transformers: str | None = None) -> int:
    """A linear-attention layer's decode calls beyond an attention layer's of the same family
    (CallCounts.family_linear_layer, counted with grouped keys: as many key as value heads make
    no repeat_interleave of the queries and keys, two calls fewer; a Mamba-2 layer repeats its B
    and C whatever the group count)."""
    grouped = arch.linear_value_heads != arch.linear_key_heads or arch.linear_kind == "mamba2"
    return _family(call_counts(transformers).family_linear_layer, arch) - (0 if grouped else 2)


def _family(table: dict[str, int], arch: TransformerArch) -> int:
    """A family's own count where it was counted, else its twin's (arch.rules_type: OLMo-3's
    layers are OLMo-2's), else none (Llama's)."""
    own = arch.model_type.lower().replace("_", "-")
    return table.get(own, table.get(arch.rules_type.replace("_", "-"), 0))


def layers_calls(
    arch: TransformerArch, context: int, transformers: str | None = None, *, batched_experts: bool = False
) -> int:
    """Calls of all layers of one decode step: dense and MoE layers, sliding and full."""
    full = window_reached(arch, context)
    total = arch.linear_layers * linear_layer_extra_calls(arch, transformers)
    for i in range(arch.num_layers):
        sliding = i < arch.sliding_layers
        total += layer_calls(
            arch,
            moe=arch.is_moe_layer(i),
            sliding=sliding,
            window_full=full,
            transformers=transformers,
            batched_experts=batched_experts,
            mlp=not arch.is_mlp_free_layer(i),
        )
    return total


def fixed_calls(arch: TransformerArch, context: int, transformers: str | None = None) -> int:
    """Calls of one decode step outside the layers, at `context` tokens already cached."""
    counts = call_counts(transformers)
    calls = counts.fixed + _family(counts.family_fixed, arch)
    if arch.sliding_layers == arch.num_layers:
        calls -= ALL_SLIDING_SAVES
    if window_reached(arch, context):
        calls += counts.sliding_mask
    if not arch.sliding_layers:
        calls += _family(counts.unused_sliding_mask, arch)
    return calls


def decode_step_calls(
    arch: TransformerArch, context: int, transformers: str | None = None, *, batched_experts: bool = False
) -> int:
    """Host operations (Python-level torch calls) of one decode step of `generate` under the
    given transformers release (None: the newest counted); `batched_experts`: the experts run
    through batched_mm, as generate's decode loop runs them on a GPU."""
    layers = layers_calls(arch, context, transformers, batched_experts=batched_experts)
    return layers + fixed_calls(arch, context, transformers)


def bnb_linear_calls(workload: Workload) -> int:
    """bitsandbytes Linear layers one forward runs: every block Linear fitbench's loader and
    transformers' integration convert (quantized_matrices: attention, dense MLPs, shared experts;
    a MoE's router module and stacked routed experts stay 16-bit, and so does the LM head),
    each a Linear4bit or Linear8bitLt whose forward issues its own Python-level calls (profiles.
    toml bnb_4bit_linear_host_calls, bnb_int8_linear_host_calls). Other formats: none."""
    fmt = workload.weight_format
    if fmt is None or fmt.method not in BNB_METHODS or not isinstance(workload.arch, TransformerArch):
        return 0
    return sum(m.copies for m in quantized_matrices(workload) if not m.name.startswith("experts."))


def fp8_linear_calls(workload: Workload) -> int:
    """fp8 Linear layers one decode step runs, each its own kernel launch from Python.

    transformers' FP8Linear (integrations/finegrained_fp8.py) multiplies an fp8 block-scaled
    weight through a Triton kernel (the finegrained-fp8 matmul, activation quantisation fused;
    DeepGEMM where installed): every quantized attention, dense-MLP, shared-expert, router and
    head matrix is one such call a layer. Routed experts run as two grouped launches a MoE layer
    (the stacked gate/up and the down projection), whatever the experts a step reaches. Other
    weight formats and 16-bit weights: none (their Linear is the one call layer_calls counts)."""
    fmt = workload.weight_format
    if fmt is None or fmt.method != "fp8" or not isinstance(workload.arch, TransformerArch):
        return 0
    mats = quantized_matrices(workload)
    calls = sum(m.copies for m in mats if not m.name.startswith("experts."))
    if any(m.copies for m in mats if m.name.startswith("experts.")):
        arch = workload.arch
        calls += 2 * sum(1 for i in range(arch.num_layers) if arch.is_moe_layer(i))
    return calls
