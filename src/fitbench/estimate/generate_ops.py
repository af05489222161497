"""Host operations of one eager Hugging Face `generate` decode step, counted the way it issues them.

In eager mode the host pays for every Python-level torch call: argument parsing, the dispatcher,
the kernel launch. That is the unit here, one call = one operation of
`profiles.toml: generate_host_seconds_per_op`: the calls a `TorchFunctionMode` sees in a decode
step, less the attribute reads (`.shape`, `.dtype`, `.device`), which the mode also reports but
which are C getters costing nanoseconds. Aten operations are not the unit: one Python call
issues zero (a view's metadata), one, or several of them (an RMSNorm's `.to`), and on the H200
the host time per decode layer divided by Python calls came out the same for dense and MoE
layers (9.9-10.2 us) where per aten op it did not (8.8 and 11.9 us).

The counts follow transformers 5's Llama-family modelling code (Llama, Mistral, Qwen2/3,
Mixtral, Qwen-MoE) with the dynamic cache and SDPA attention, and its `generate` loop with
greedy search, `min_new_tokens` and an end-of-sequence token; tests/unit/test_generate_ops.py
counts the real tiny models with a TorchFunctionMode and requires equality. Families with other
block code (GPT-2, GPT-NeoX, Falcon, latent attention) take the same parts by their shape
(norms, rotary, MLP kind), which is an approximation of a few calls a layer.
"""

from __future__ import annotations

from fitbench.estimate.weights import quantized_matrices
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# One decoder layer, attention side: two RMSNorms (8 calls each: to, pow, mean, add, rsqrt, mul,
# to, mul), q/k/v/o projections, the view/transpose/reshape/contiguous of the heads, the cache's
# two concatenations, SDPA and the two residual adds: 36 calls.
ATTENTION_BLOCK_CALLS = 36
# Rotary embedding on queries and keys: cos/sin unsqueeze, and per tensor x*cos, the two halves,
# neg, cat, *sin, add (apply_rotary_pos_emb, rotate_half).
ROTARY_CALLS = 16
# One RMSNorm (the per-head query and key norms of Qwen3 / Gemma-3 are one each).
RMSNORM_CALLS = 8
# A sliding-window layer's cache keeps only its window: two slices on update while the context
# is shorter than the window, and a third call (the mask's window reshape) once it has reached it.
SLIDING_LAYER_CALLS = 2
SLIDING_FULL_LAYER_CALLS = 3
# SwiGLU MLP: gate, up, down projections, the activation and the product; GELU MLP: two and one.
MLP_CALLS = {"swiglu": 5, "gelu": 3}
# transformers 5's default experts path (integrations/moe.py, `grouped_mm`): router linear,
# softmax, top-k, renormalisation, the sort of token-expert pairs, histc/cumsum offsets, gathers,
# two grouped matmuls, chunk, activation, weighting and the scatter back, plus the reshapes of the
# sparse block: 40 calls whatever the number of experts a step reaches. That includes the top-k
# renormalisation (sum, float, in-place division: Mixtral, and checkpoints with norm_topk_prob);
# a router without it issues 3 calls fewer, which the estimate does not distinguish.
MOE_BLOCK_CALLS = 40
# Qwen-MoE's shared expert gate: linear, sigmoid, product; the shared expert's output is cast
# and added to the routed one: two calls.
SHARED_GATE_CALLS = 3
SHARED_EXPERT_ADD_CALLS = 2
# Per step outside the layers, the model's and the generate loop's: the embedding, cache
# position and rotary cos/sin, the causal-mask check (one device sync), final norm and head, then
# greedy search's logits processors (min_new_tokens), argmax, end-of-sequence stopping criteria,
# the unfinished-sequence bookkeeping, the concatenations of input_ids and the attention mask
# and prepare_inputs_for_generation's slices: 65 calls.
FIXED_CALLS = 65
# A model whose every layer slides builds no full causal mask: two calls fewer. A sliding-window
# mask that cannot be skipped (the context has reached the window) evaluates the padding and
# window mask functions on index tensors every step: 19 calls more. (Hybrid models are taken as
# the full mask plus the window's, not counted here.)
ALL_SLIDING_SAVES = 2
SLIDING_MASK_CALLS = 19
# Families whose model builds a sliding-window mask beside the causal one every step even with no
# sliding layer (transformers 5's Qwen2-MoE): 21 calls, counted with no window set.
UNUSED_SLIDING_MASK = {"qwen2-moe": 21}


def window_reached(arch: TransformerArch, context: int) -> bool:
    """Whether sliding-window layers attend through a materialised window mask at `context`."""
    return bool(arch.sliding_layers) and arch.sliding_window is not None and context >= arch.sliding_window


def layer_calls(arch: TransformerArch, *, moe: bool, sliding: bool, window_full: bool = False) -> int:
    """Python-level torch calls of one decoder layer in a decode step."""
    calls = ATTENTION_BLOCK_CALLS
    if arch.position == "rotary":
        calls += ROTARY_CALLS
    if arch.qk_norm != "none":
        calls += 2 * RMSNORM_CALLS
    if sliding:
        calls += SLIDING_FULL_LAYER_CALLS if window_full else SLIDING_LAYER_CALLS
    if moe:
        calls += MOE_BLOCK_CALLS
        if arch.shared_intermediate_size:
            calls += MLP_CALLS[arch.mlp] + SHARED_EXPERT_ADD_CALLS
            calls += SHARED_GATE_CALLS if arch.shared_expert_gate else 0
    else:
        calls += MLP_CALLS[arch.mlp]
    return calls


def layers_calls(arch: TransformerArch, context: int) -> int:
    """Calls of all layers of one decode step: dense and MoE layers, sliding and full."""
    full = window_reached(arch, context)
    total = 0
    for i in range(arch.num_layers):
        sliding = i < arch.sliding_layers
        total += layer_calls(arch, moe=arch.is_moe_layer(i), sliding=sliding, window_full=full)
    return total


def fixed_calls(arch: TransformerArch, context: int) -> int:
    """Calls of one decode step outside the layers, at `context` tokens already cached."""
    calls = FIXED_CALLS
    if arch.sliding_layers == arch.num_layers:
        calls -= ALL_SLIDING_SAVES
    if window_reached(arch, context):
        calls += SLIDING_MASK_CALLS
    if not arch.sliding_layers:
        calls += UNUSED_SLIDING_MASK.get(arch.model_type, 0)
    return calls


def decode_step_calls(arch: TransformerArch, context: int) -> int:
    """Host operations (Python-level torch calls) of one decode step of `generate`."""
    return layers_calls(arch, context) + fixed_calls(arch, context)


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
