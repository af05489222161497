"""A generation's allocator reserve above its allocated peak: Llama-shaped, MoE, Gemma, OLMo-2, GPT-NeoX.

What nvidia-smi shows for `fitbench run` generating with transformers is the caching allocator's
reserve. Above the allocated peak it holds blocks that no later request fitted: the LM head's own
weight that loading a model with tied embeddings makes and frees, and the pieces the prefill's
transients leave when the KV cache's persistent copies are cut from their freed blocks. This module
lays out the allocations and frees a decoder makes, in transformers' order, and replays them
through the allocator's rules (allocator.SegmentedPool, which merges freed neighbours as PyTorch
does); the reserve's excess is the difference of the replay's two peaks.

The order is transformers' own, read from a trace of the real model on the meta device
(benchmarks/allocator_replay.py traces any library model; tests/backends/test_generation_reserve_trace.py
holds this layout to that trace): per block, the RMSNorm's FP32 upcast, square and product and
their 16-bit casts, the q, k and v projections (Qwen3's query and key norms right after their
projections), rotary positions (product with cos, the negated half, its concatenation, product
with sin, sum) on q and on k, the cache's copies of k and v, the attention output and its
contiguous copy, the output projection, the residual sum, the second norm, the SwiGLU (gate,
activation, up, product, down) and the second residual sum. Gemma-2 and -3 scale the embedding,
keep their norms in FP32 to the end, norm after attention and after the MLP too, and (Gemma-3)
norm the queries and keys after all three projections. Eager attention (asked for, or Gemma-2's,
which has no SDPA) adds the masks made before the first block and, per block, the keys and values
repeated to every head, the score matrices (batch x heads x prompt^2: scaled, Gemma-2's soft cap,
masked, an FP32 softmax and its cast back) and the weights the block holds to its end; SDPA on a
sliding layer whose window the prompt reaches gets a boolean mask, which it makes additive before
its kernel runs, and repeated keys and values.
Experts run as transformers' grouped_mm path does (router, sorted token-expert pairs, gathered
inputs, the two grouped products, the routing weights' product, the reordered and summed output;
Qwen2-MoE's gated and DeepSeek's plain shared experts), and DeepSeek-V2's latent attention as its
modelling code runs it. Then the decode steps: each concatenates a token to every layer's keys
and values, a longer copy made before the old one goes (_decode), and a MoE layer's experts run as
generate runs them on a GPU, through batched_mm: every token-expert pair's gate/up and down
weights gathered into two copies held together (expert_cost.decode_expert_gathers, 2.6 GiB a
layer for Mixtral at batch 4), freed when the layer ends. The regrown caches are how a long generation
at a wide batch leaves block after block cached (tens of GB on an H200 for a 6.7B model at batch
48). `fitbench run` generates twice (a warm-up, then the measured one), and the second finds the
first's freed blocks cached, so the replay runs both. Phi-3's fused q/k/v and gate/up
projections, GLM-4-MoE's half-rotary heads and FP32 router weight, and ERNIE-4.5's FP32
interleaved rotary positions and shared experts ahead of the routed ones are laid out too, and
OLMo-2's blocks (norms after attention and the MLP only, FP32 rotary), and GPT-NeoX's (LayerNorm,
one fused q/k/v projection, rotary positions on a quarter of each head, a GELU MLP beside or after
attention). Other layouts (GPT-J, Falcon, StarCoder2, Command-R, GPT-2, gpt-oss's and Llama-4's
experts, quantized weights or caches) keep the profile's fragmentation share and
kv_cache.outgrown_cache_bytes for the decode steps, with at least a tied LM head's freed
block (single_device): laying them out is the same work, family by family.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial
from itertools import count

from fitbench.estimate import expert_cost, transformer_cost
from fitbench.estimate.allocator import SegmentedPool
from fitbench.estimate.execution import attention_as_run
from fitbench.estimate.first_step import weight_matrices
from fitbench.estimate.generate_ops import release
from fitbench.workloads.arch import TransformerArch, layer_types
from fitbench.workloads.workload import Workload


def applies(workload: Workload) -> bool:
    """A Llama-shaped decoder (transformers' grouped_mm experts and DeepSeek-V2's latent
    attention included), a Gemma, an OLMo-2 or a GPT-NeoX decoder (with SDPA) generating through
    transformers' eager path in 16-bit weights and a 16-bit cache; not one with linear-attention
    layers, whose blocks the replay does not walk."""
    arch = workload.arch
    return (
        workload.is_generation
        and workload.gpus == 1
        and workload.weight_format is None
        and workload.kv_cache_dtype in ("fp16", "bf16")  # transformers' quantized caches run otherwise
        and isinstance(arch, TransformerArch)
        and arch.kind == "decoder"
        and (not arch.is_moe or arch.rules_type in GROUPED_EXPERT_TYPES)
        and (not arch.is_mla or arch.rules_type in LATENT_ATTENTION_TYPES)
        and not arch.linear_layers  # the replay walks attention blocks only
        and ((_neox(arch) and not _eager(workload)) or (not arch.parallel_block and arch.norm == "rmsnorm"))
        and arch.position == "rotary"
        and not arch.patch_size
        and workload.precision_info.weight_bytes == 2
        and (_llama_shaped(arch) or arch.rules_type in (*GEMMA_TYPES, "olmo2", *NEOX_TYPES))
    )


def _neox(arch: TransformerArch) -> bool:
    return arch.rules_type in NEOX_TYPES and not arch.is_moe


def _llama_shaped(arch: TransformerArch) -> bool:
    return (
        arch.norms_per_layer == 2
        and not transformer_cost.gemma_norms(arch)  # Gemma's and OLMo-2's norms run otherwise
        # fused projections: Phi-3's are laid out; GPT-2's, GPT-NeoX's and GLM-4's are not
        and (transformer_cost.fused_projections(arch) == (False, False) or arch.rules_type == "phi3")
        and arch.mlp == "swiglu"
    )


# Families whose experts transformers runs through integrations/moe.py's grouped_mm path, with
# Llama's attention around them (DeepSeek-V2: latent attention).
GROUPED_EXPERT_TYPES = (
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "olmoe",
    "deepseek_v2",
    "minimax_m2",
    "glm4_moe",
    "solar_open",
    "exaone_moe",
    "ernie4_5_moe",
    "dots1",
    "granitemoe",
    "granitemoeshared",
)
# Families whose rotary positions run in FP32 on interleaved pairs.
FP32_ROTARY_TYPES = ("ernie4_5_moe",)
# Families that rotate part of each head (transformers' default factor for the family) and join
# the rotated part to the rest by a concatenation.
PARTIAL_ROTARY = {"glm4_moe": 0.5, "gpt_neox": 0.25}
# GPT-NeoX's blocks (Pythia, StableLM-alpha, Dolly-v2 share the class): LayerNorm, one fused
# q/k/v projection, rotary positions on a quarter of each head, a GELU MLP, and attention and MLP
# side by side from the block's input (use_parallel_residual) or one after the other.
NEOX_TYPES = ("gpt_neox",)
LATENT_ATTENTION_TYPES = ("deepseek_v2",)
# The last transformers release whose grouped_mm experts copy both grouped products through
# masked_fill outside expert parallelism (5.18's integrations/moe.py guards them).
MASKED_FILL_COPIES_UNTIL = (5, 17)
# Routers that take an FP32 copy of their input to an FP32 linear (DeepSeek, GLM-4-MoE, ERNIE-4.5).
FP32_ROUTER_TYPES = (
    "deepseek_v2",
    "deepseek_v3",
    "glm4_moe",
    "solar_open",
    "exaone_moe",
    "dots1",
    "ernie4_5_moe",
)
# `fitbench run` generates once to warm up, then measures: the second generation finds the
# first one's freed blocks cached and may place its tensors so that more segments are needed.
GENERATIONS = 2
# The most cache updates one generation's decode replays one token at a time (about 0.1 s);
# longer ones go several tokens a step (_decode).
DECODE_UPDATES = 20_000
# Gemma's blocks: FP32 norms to the end (around attention and MLP for Gemma-2 and -3), a scaled
# embedding, query/key norms (Gemma-3), and Gemma-2's eager attention with soft-capped scores.
GEMMA_TYPES = ("gemma2", "gemma3_text", "gemma3")
# The sliding-window layers' places: every layer but each period-th (Gemma-2: 2, Gemma-3: 6).
SLIDING_PERIOD = {"gemma2": 2, "gemma3_text": 6, "gemma3": 6, "olmo3": 4, "exaone4": 4}


class _Replay:
    """Allocations and frees, as they happen, on one SegmentedPool."""

    def __init__(self, masked_fill_copies: bool = False) -> None:
        self.pool = SegmentedPool()
        self.masked_fill_copies = masked_fill_copies  # transformers <= 5.17's experts (_routed_experts)
        self.events: list[tuple[str, int, float]] = []  # what tests hold against a trace
        self.caches: list[list[float]] = []  # [key, bytes a token of the batch] of each cache tensor
        self._ids = count()

    def alloc(self, nbytes: float) -> int:
        key = next(self._ids)
        self.pool.malloc(key, nbytes)
        self.events.append(("alloc", key, nbytes))
        return key

    def keep(self, nbytes_per_token: float, tokens: int) -> int:
        """A cache tensor: allocated now, regrown by the decode steps."""
        key = self.alloc(nbytes_per_token * tokens)
        self.caches.append([key, nbytes_per_token])
        return key

    def free(self, *keys: int) -> None:
        for key in keys:
            self.pool.free(key)
            self.events.append(("free", key, 0.0))


# A norm over `width` elements a token: (replay, tokens, width, bytes an element) -> its output
Norm = Callable[[_Replay, int, int, int], int]


def _norm(r: _Replay, tokens: int, h: int, a: int) -> int:
    """transformers' RMSNorm over `h` elements a token: the FP32 upcast, its square, the
    normalised product, its cast back and the weight's product; the output stays."""
    up, square = r.alloc(tokens * h * 4), r.alloc(tokens * h * 4)
    r.free(square)
    normed = r.alloc(tokens * h * 4)
    r.free(up)
    cast, out = r.alloc(tokens * h * a), r.alloc(tokens * h * a)
    r.free(cast, normed)
    return out


def _rotary(r: _Replay, tokens: int, width: int, a: int, products: float | None = None) -> int:
    """x * cos + rotate_half(x) * sin over `width` elements a token: the products, the negated
    half, its concatenation, the sum (x itself is the caller's to free). The products and the sum
    are `products` bytes an element (FP32 against OLMo-2's FP32 cos and sin), else x's."""
    p = a if products is None else products
    with_cos, half = r.alloc(tokens * width * p), r.alloc(tokens * width * a / 2)
    rotated = r.alloc(tokens * width * a)
    r.free(half)
    with_sin = r.alloc(tokens * width * p)
    r.free(rotated)
    out = r.alloc(tokens * width * p)
    r.free(with_cos, with_sin)
    return out


def _partial_rotary(r: _Replay, tokens: int, arch: TransformerArch, a: int) -> tuple[int, int]:
    """The family's share of each query and key head rotated (PARTIAL_ROTARY), each joined back
    to the full width by a concatenation; the unrotated inputs stay the caller's to free."""
    part = PARTIAL_ROTARY[arch.rules_type]
    q, kv = arch.q_dim, arch.kv_dim
    rotated_q, rotated_k = _rotary(r, tokens, q * part, a), _rotary(r, tokens, kv * part, a)
    query = r.alloc(tokens * q * a)
    r.free(rotated_q)
    key = r.alloc(tokens * kv * a)
    r.free(rotated_k)
    return query, key


def _rotated_cast_back(
    r: _Replay, tokens: int, arch: TransformerArch, query: int, key: int, rotary: Callable[..., int], a: int
) -> tuple[int, int]:
    """Query and key rotated in FP32 by `rotary`, both cast back, then the FP32 results and the
    unrotated inputs freed (ERNIE-4.5, OLMo-2)."""
    q, kv = arch.q_dim, arch.kv_dim
    rotated_q, rotated_k = rotary(r, tokens, q, a), rotary(r, tokens, kv, a)
    query_rot, key_rot = r.alloc(tokens * q * a), r.alloc(tokens * kv * a)
    r.free(rotated_q, rotated_k, query, key)
    return query_rot, key_rot


def _normed_projections(
    r: _Replay, tokens: int, arch: TransformerArch, norm: Callable[[_Replay, int, int, int], int], a: int
) -> tuple[int, int, int]:
    """q, k and v projected, the query and the key each normed right after its projection
    (Qwen3, OLMoE, OLMo-2), the projections freed once normed."""
    q, kv = arch.q_dim, arch.kv_dim
    projected_q = r.alloc(tokens * q * a)
    query = norm(r, tokens, q, a)
    r.free(projected_q)
    projected_k = r.alloc(tokens * kv * a)
    key = norm(r, tokens, kv, a)
    r.free(projected_k)
    return query, key, r.alloc(tokens * kv * a)


def _rotary_fp32(r: _Replay, tokens: int, width: int, a: int) -> int:
    """ERNIE-4.5's rotary positions, in FP32 on interleaved pairs: the FP32 copy times cos; the
    negated odd half stacked with the even one (16-bit), its FP32 copy times sin; the sum (FP32,
    cast back by the caller)."""
    up = r.alloc(tokens * width * 4)
    with_cos = r.alloc(tokens * width * 4)
    r.free(up)
    negated = r.alloc(tokens * width * a / 2)
    stacked = r.alloc(tokens * width * a)
    r.free(negated)
    stacked_up = r.alloc(tokens * width * 4)
    r.free(stacked)
    with_sin = r.alloc(tokens * width * 4)
    r.free(stacked_up)
    out = r.alloc(tokens * width * 4)
    r.free(with_cos, with_sin)
    return out


def _rotary_beside_pass(r: _Replay, tokens: int, width: int, a: int) -> int:
    """Phi-3's rotary positions: rotated over the rotary part of each head, then concatenated
    with the rest (none where the whole head rotates: the concatenation still copies)."""
    rotated = _rotary(r, tokens, width, a)
    out = r.alloc(tokens * width * a)
    r.free(rotated)
    return out


def _load(r: _Replay, arch: TransformerArch, a: int) -> None:
    """Every matrix in construction order; with tied embeddings the LM head's own weight is made
    and freed when it is tied."""
    for segment in weight_matrices(arch):
        for matrix in segment:
            r.alloc(matrix.elements * (4 if matrix.fp32 else a))
    if arch.tie_embeddings:
        r.free(r.alloc(arch.vocab_size * arch.hidden_size * a))


def _gemma_norm(r: _Replay, tokens: int, width: int, a: int) -> int:
    """Gemma's RMSNorm, FP32 to the end: the upcast, its square, the normalised product, its
    product with (1 + weight), and only then the cast back; the output stays."""
    up, square = r.alloc(tokens * width * 4), r.alloc(tokens * width * 4)
    r.free(square)
    normed = r.alloc(tokens * width * 4)
    r.free(up)
    weighted = r.alloc(tokens * width * 4)
    r.free(normed)
    out = r.alloc(tokens * width * a)
    r.free(weighted)
    return out


def _dense_mlp(r: _Replay, tokens: int, h: int, f: int, a: int) -> int:
    """A gated MLP of width `f` (SwiGLU; Gemma's GeGLU): gate, its activation, up, their
    product, down; returns down."""
    gate, act = r.alloc(tokens * f * a), r.alloc(tokens * f * a)
    r.free(gate)
    up, product = r.alloc(tokens * f * a), r.alloc(tokens * f * a)
    r.free(act, up)
    down = r.alloc(tokens * h * a)
    r.free(product)
    return down


def _mlp(
    r: _Replay,
    tokens: int,
    arch: TransformerArch,
    normed: int,
    a: int,
    moe: bool = False,
    fused: bool = False,
) -> int:
    """The block's MLP, dense or of experts; the normed input is freed when it is done with.
    Fused (Phi-3's gate_up_proj): one projection, the gate's activation and the product of the
    up half, then down; the fused output goes with the product."""
    if moe:
        return _moe(r, arch, tokens, normed, a)
    h, f = arch.hidden_size, arch.intermediate_size
    if not fused:
        down = _dense_mlp(r, tokens, h, f, a)
        r.free(normed)
        return down
    gate_up = r.alloc(tokens * 2 * f * a)
    act, product = r.alloc(tokens * f * a), r.alloc(tokens * f * a)
    r.free(act)
    down = r.alloc(tokens * h * a)
    r.free(product, gate_up, normed)
    return down


def _router(r: _Replay, arch: TransformerArch, tokens: int, a: int) -> list[int]:
    """The router: its logits (an FP32 linear of an FP32 copy of the input for DeepSeek,
    GLM-4-MoE and ERNIE-4.5, else the activations' dtype), their FP32 softmax, and the top-k
    weights and indices; returns what the block keeps to its end (the logits, the top-k)."""
    e, k = arch.num_experts, arch.experts_per_token
    if arch.rules_type in FP32_ROUTER_TYPES:
        upcast = r.alloc(tokens * arch.hidden_size * 4)
        logits = r.alloc(tokens * e * 4)
        r.free(upcast)
        probabilities = r.alloc(tokens * e * 4)
    else:
        logits = r.alloc(tokens * e * a)
        upcast = r.alloc(tokens * e * 4)
        probabilities = r.alloc(tokens * e * 4)
        r.free(upcast)
    top = [r.alloc(tokens * k * 4), r.alloc(tokens * k * 8)]
    r.free(probabilities)
    return [logits, *top]


def _routed_experts(r: _Replay, arch: TransformerArch, tokens: int, a: int) -> int:
    """transformers' grouped_mm experts (integrations/moe.py): the token-expert pairs sorted by
    expert, each token's input gathered once a pair, the gate_up grouped product (up alone for
    two-matrix experts), the gate's activation and its product with up, the down product, the
    routing weights' product (FP32 where the router hands FP32 weights), the pairs put back in
    token order and summed per token (cast back from FP32). transformers 5.17 and before also
    copy both grouped products through masked_fill (expert-parallel sentinels; the replay's
    `masked_fill_copies`); 5.18 on do that under expert parallelism only."""
    h, fe = arch.hidden_size, arch.expert_intermediate_size
    pairs = tokens * arch.experts_per_token
    weighted_bytes = 4 if arch.rules_type in expert_cost.FP32_ROUTING_WEIGHT_TYPES else a
    order = [r.alloc(pairs * 8), r.alloc(pairs * 8)]  # sorted expert ids, permutation
    source = r.alloc(pairs * 8)
    gathered = r.alloc(pairs * h * a)
    r.free(source)
    up = 2 if arch.mlp == "swiglu" else 1  # gate and up, or up alone (Nemotron-H's squared ReLU)
    gate_up = r.alloc(pairs * up * fe * a)
    if r.masked_fill_copies:
        copied = r.alloc(pairs * up * fe * a)
        r.free(gate_up)
        gate_up = copied
    act = r.alloc(pairs * fe * a)
    product = r.alloc(pairs * fe * a)
    r.free(act, gate_up)
    down = r.alloc(pairs * h * a)
    r.free(product)
    if r.masked_fill_copies:
        copied = r.alloc(pairs * h * a)
        r.free(down)
        down = copied
    weighted = r.alloc(pairs * h * weighted_bytes)
    inverse = r.alloc(pairs * 8)
    r.free(r.alloc(pairs * 8))  # the arange it scatters
    reordered = r.alloc(pairs * h * weighted_bytes)
    r.free(weighted)
    summed = r.alloc(tokens * h * weighted_bytes)
    out = summed
    if weighted_bytes != a:
        out = r.alloc(tokens * h * a)
    r.free(*order, gathered, down, reordered, inverse)
    if out != summed:
        r.free(summed)
    return out


def _moe(r: _Replay, arch: TransformerArch, tokens: int, normed: int, a: int) -> int:
    """A mixture-of-experts MLP: router, routed experts, and the shared experts where the family
    has them (Qwen2-MoE runs them first and gates them by a sigmoid, ERNIE-4.5 first too;
    DeepSeek after the routed ones); the normed input is freed at the end."""
    h, shared_width = arch.hidden_size, arch.shared_intermediate_size
    shared_first = expert_cost.shared_experts_first(arch)
    shared = None
    if shared_first:
        shared = _dense_mlp(r, tokens, h, shared_width, a)
    kept = _router(r, arch, tokens, a)
    out = _routed_experts(r, arch, tokens, a)
    if shared_width and not shared_first:
        shared = _dense_mlp(r, tokens, h, shared_width, a)
    if shared is not None:
        if arch.shared_expert_gate:
            gated = r.alloc(tokens * h * a)
            r.free(shared)
            shared = gated
        total = r.alloc(tokens * h * a)
        r.free(out, shared)
        out = total
    r.free(*kept, normed)
    return out


def _cache_copies(
    r: _Replay, tokens: int, arch: TransformerArch, key_rot: int, value: int | None, a: int
) -> None:
    """The cache's copies of the rotated keys and the values, kept for the decode steps (the
    values are a view of a fused projection where there is one, freed with it)."""
    for _ in ("key", "value"):
        r.keep(arch.kv_dim * a, tokens)
    r.free(key_rot, *([] if value is None else [value]))


def _llama_layer(
    r: _Replay, arch: TransformerArch, batch: int, prompt: int, masked: bool, eager: bool, moe: bool, a: int
) -> int:
    """One Llama-shaped block (latent attention and experts where the model has them); returns
    its output (the input stays the caller's)."""
    tokens = batch * prompt
    h, q, kv = arch.hidden_size, arch.q_dim, arch.kv_dim
    normed = _norm(r, tokens, h, a)
    weights = None
    fused_qkv, fused_gate_up = transformer_cost.fused_projections(arch)
    if arch.is_mla:
        projected = _latent_attention(r, arch, tokens, normed, a)
    else:
        if arch.qk_norm != "none":  # Qwen3: each projection normed before the next
            query, key, value = _normed_projections(r, tokens, arch, _norm, a)
        elif fused_qkv:  # Phi-3: one projection; q, k and v are views of it
            qkv = r.alloc(tokens * (q + 2 * kv) * a)
        else:
            query, key, value = r.alloc(tokens * q * a), r.alloc(tokens * kv * a), r.alloc(tokens * kv * a)
        if fused_qkv:
            query_rot = _rotary_beside_pass(r, tokens, q, a)
            key_rot = _rotary_beside_pass(r, tokens, kv, a)
            _cache_copies(r, tokens, arch, key_rot, None, a)
        elif arch.rules_type in FP32_ROTARY_TYPES:  # ERNIE-4.5: FP32, interleaved pairs
            query_rot, key_rot = _rotated_cast_back(r, tokens, arch, query, key, _rotary_fp32, a)
            _cache_copies(r, tokens, arch, key_rot, value, a)
        elif arch.rules_type in PARTIAL_ROTARY:  # GLM-4-MoE: both rotated, then joined
            query_rot, key_rot = _partial_rotary(r, tokens, arch, a)
            r.free(query, key)
            _cache_copies(r, tokens, arch, key_rot, value, a)
        else:
            query_rot, key_rot = _rotary(r, tokens, q, a), _rotary(r, tokens, kv, a)
            r.free(query, key)
            _cache_copies(r, tokens, arch, key_rot, value, a)
        contiguous, weights = _attend(r, arch, batch, prompt, masked, eager, a)
        projected = r.alloc(tokens * h * a)
        r.free(contiguous)
        if fused_qkv:
            r.free(qkv)
        r.free(query_rot, normed)
    return _block_tail(r, tokens, arch, projected, weights, a, pre_norm=_norm, moe=moe, fused=fused_gate_up)


def _latent_attention(r: _Replay, arch: TransformerArch, tokens: int, normed: int, a: int) -> int:
    """DeepSeek-V2's latent attention as transformers runs it: the query (through its low-rank
    projection and norm where q_lora_rank is set), the compressed latent and rotary key, the
    latent's norm, the rotary positions as complex products in FP32 on the query's and the
    key's rotary parts, the cache's copies of the normed latent and the rotary key, the query
    reassembled, keys and values expanded from the cached latent, the key reassembled, SDPA's
    output and its contiguous copy, the output projection; returns the projection."""
    heads, rope, nope, v = arch.num_heads, arch.qk_rope_head_dim, arch.qk_nope_head_dim, arch.v_head_dim
    latent = arch.kv_lora_rank
    if arch.q_lora_rank:
        low = r.alloc(tokens * arch.q_lora_rank * a)
        low_normed = _norm(r, tokens, arch.q_lora_rank, a)
        query = r.alloc(tokens * heads * (nope + rope) * a)
        r.free(low_normed, low)
    else:
        query = r.alloc(tokens * heads * (nope + rope) * a)
    compressed = r.alloc(tokens * (latent + rope) * a)
    latent_normed = _norm(r, tokens, latent, a)
    query_up, key_up = r.alloc(tokens * heads * rope * 4), r.alloc(tokens * rope * 4)
    product = r.alloc(tokens * heads * rope * 4)
    query_rot = r.alloc(tokens * heads * rope * a)
    r.free(product)
    product = r.alloc(tokens * rope * 4)
    key_rot = r.alloc(tokens * rope * a)
    r.free(product, query_up, key_up)
    r.keep(latent * a, tokens)  # the cache's copies, kept for the decode steps
    r.keep(rope * a, tokens)
    r.free(latent_normed, key_rot)
    query_states = r.alloc(tokens * heads * (nope + rope) * a)
    expanded = r.alloc(tokens * heads * (nope + v) * a)
    key_states = r.alloc(tokens * heads * (nope + rope) * a)
    attended = r.alloc(tokens * heads * v * a)
    contiguous = r.alloc(tokens * heads * v * a)
    r.free(attended)
    projected = r.alloc(tokens * arch.hidden_size * a)
    r.free(contiguous, query, query_rot, compressed, query_states, key_states, expanded, normed)
    return projected


def _block_tail(
    r: _Replay,
    tokens: int,
    arch: TransformerArch,
    projected: int,
    weights: int | None,
    a: int,
    *,
    pre_norm: Norm | None,
    post_norm: Norm | None = None,
    moe: bool = False,
    fused: bool = False,
) -> int:
    """A block after its attention's output projection: that output's post-norm where the block
    has one (Gemma-2/3, OLMo-2), the residual sum, the MLP on the sum normed by `pre_norm` (on the
    sum itself without one: OLMo-2), the MLP output's post-norm, the second residual sum; eager
    attention's weights, held by the block, go at its end. Returns the block's output."""
    h = arch.hidden_size
    post = projected
    if post_norm is not None:
        post = post_norm(r, tokens, h, a)
        r.free(projected)
    mid = r.alloc(tokens * h * a)
    r.free(post)
    if pre_norm is not None:
        down = _mlp(r, tokens, arch, pre_norm(r, tokens, h, a), a, moe, fused=fused)
    else:
        down = _dense_mlp(r, tokens, h, arch.intermediate_size, a)
    post = down
    if post_norm is not None:
        post = post_norm(r, tokens, h, a)
        r.free(down)
    out = r.alloc(tokens * h * a)
    r.free(post, mid)
    if weights is not None:
        r.free(weights)
    return out


def _eager_scores(r: _Replay, arch: TransformerArch, batch: int, prompt: int, a: int) -> int:
    """Eager attention's scores: the query's contiguous copy, q @ k^T, its scaling, Gemma-2's
    soft cap (divide, tanh, multiply), the mask's sum, the FP32 softmax and its cast back; the
    cast weights are returned (the block keeps them to its end)."""
    scores_bytes = batch * arch.num_heads * prompt * prompt * a
    query_copy = r.alloc(batch * prompt * arch.q_dim * a)
    current = r.alloc(scores_bytes)
    r.free(query_copy)
    capped = ("divide", "tanh", "multiply") if arch.rules_type == "gemma2" else ()
    for _ in ("scale", *capped, "mask"):
        following = r.alloc(scores_bytes)
        r.free(current)
        current = following
    up = r.alloc(scores_bytes * 4 / a)
    probabilities = r.alloc(scores_bytes * 4 / a)
    r.free(up)
    weights = r.alloc(scores_bytes)
    r.free(probabilities, current)
    return weights


def _attend(
    r: _Replay, arch: TransformerArch, batch: int, prompt: int, masked: bool, eager: bool, a: int
) -> tuple[int, int | None]:
    """Attention over the cached keys and values: (its output made contiguous, eager attention's
    weights or None). Keys and values are repeated to every query head where attention has a
    mask (eager attention's always; SDPA's on a sliding layer whose window the prompt reaches),
    else SDPA reads the grouped heads itself."""
    tokens, q = batch * prompt, arch.q_dim
    repeated = [r.alloc(tokens * q * a) for _ in ("key", "value")] if masked and arch.kv_dim < q else []
    weights = _eager_scores(r, arch, batch, prompt, a) if eager else None
    # SDPA makes a boolean mask additive in the query's dtype before its kernel runs
    # (convert_boolean_attn_mask: at::where over the batch's query-key pairs), then drops it.
    additive = [r.alloc(batch * prompt * prompt * a)] if masked and not eager else []
    attended = r.alloc(tokens * q * a)
    r.free(*additive)
    contiguous = r.alloc(tokens * q * a)
    r.free(attended, *repeated)
    return contiguous, weights


def _gemma_layer(
    r: _Replay, arch: TransformerArch, batch: int, prompt: int, masked: bool, eager: bool, a: int
) -> int:
    """One Gemma block (Gemma-2 and -3: norms after attention and after the MLP too)."""
    tokens = batch * prompt
    h, q, kv = arch.hidden_size, arch.q_dim, arch.kv_dim
    normed = _gemma_norm(r, tokens, h, a)
    query, key, value = r.alloc(tokens * q * a), r.alloc(tokens * kv * a), r.alloc(tokens * kv * a)
    if arch.qk_norm != "none":  # Gemma-3: both normed after the three projections
        normed_query = _gemma_norm(r, tokens, q, a)
        r.free(query)
        normed_key = _gemma_norm(r, tokens, kv, a)
        r.free(key)
        query, key = normed_query, normed_key
    query_rot, key_rot = _rotary(r, tokens, q, a), _rotary(r, tokens, kv, a)
    r.free(query, key)
    _cache_copies(r, tokens, arch, key_rot, value, a)
    contiguous, weights = _attend(r, arch, batch, prompt, masked, eager, a)
    projected = r.alloc(tokens * h * a)
    r.free(contiguous, query_rot, normed)
    post_norm = _gemma_norm if arch.norms_per_layer == 4 else None
    return _block_tail(r, tokens, arch, projected, weights, a, pre_norm=_gemma_norm, post_norm=post_norm)


def _olmo2_norm(r: _Replay, tokens: int, width: int, a: int) -> int:
    """OLMo-2's RMSNorm: FP32 through the weight's product, then cast back (the normalised
    tensor goes after the cast)."""
    up, square = r.alloc(tokens * width * 4), r.alloc(tokens * width * 4)
    r.free(square)
    normed = r.alloc(tokens * width * 4)
    r.free(up)
    weighted = r.alloc(tokens * width * 4)
    out = r.alloc(tokens * width * a)
    r.free(weighted, normed)
    return out


def _olmo2_layer(
    r: _Replay, arch: TransformerArch, batch: int, prompt: int, masked: bool, eager: bool, a: int
) -> int:
    """One OLMo-2 block: no norm before attention or the MLP, one after each; query and key
    normed over all heads right after their projections, rotated in FP32 and cast back."""
    tokens = batch * prompt
    h = arch.hidden_size
    query, key, value = _normed_projections(r, tokens, arch, _olmo2_norm, a)
    fp32_products = partial(_rotary, products=4)
    query_rot, key_rot = _rotated_cast_back(r, tokens, arch, query, key, fp32_products, a)
    _cache_copies(r, tokens, arch, key_rot, value, a)
    contiguous, weights = _attend(r, arch, batch, prompt, masked, eager, a)
    projected = r.alloc(tokens * h * a)
    r.free(contiguous, query_rot)
    return _block_tail(r, tokens, arch, projected, weights, a, pre_norm=None, post_norm=_olmo2_norm)


def _head_norm(r: _Replay, tokens: int, width: int, heads: int, a: int) -> int:
    """_norm over each of `heads` heads of a `width`-wide query or key, with its FP32 statistics
    (the mean square, plus epsilon, its reciprocal root: a number a head and token), which
    reach the large pool when many heads and tokens make them a megabyte or more."""
    up, square = r.alloc(tokens * width * 4), r.alloc(tokens * width * 4)
    mean = r.alloc(tokens * heads * 4)
    r.free(square)
    shifted = r.alloc(tokens * heads * 4)
    root = r.alloc(tokens * heads * 4)
    r.free(shifted)
    normed = r.alloc(tokens * width * 4)
    r.free(root, up)
    cast, out = r.alloc(tokens * width * a), r.alloc(tokens * width * a)
    r.free(cast, normed, mean)
    return out


def _exaone4_layer(
    r: _Replay,
    arch: TransformerArch,
    batch: int,
    prompt: int,
    masked: bool,
    eager: bool,
    rotated: bool,
    a: int,
) -> int:
    """One EXAONE 4.0 block: OLMo-2's order (no norm before attention or the MLP, one after
    each) with Llama's RMSNorm; q, k and v projected, then the query and the key normed head by
    head; rotary positions on the `rotated` layers only (a hybrid model's global layers use
    none)."""
    tokens = batch * prompt
    h, q, kv = arch.hidden_size, arch.q_dim, arch.kv_dim
    query, key, value = r.alloc(tokens * q * a), r.alloc(tokens * kv * a), r.alloc(tokens * kv * a)
    normed_query = _head_norm(r, tokens, q, arch.num_heads, a)
    r.free(query)
    normed_key = _head_norm(r, tokens, kv, arch.kv_heads, a)
    r.free(key)
    query, key = normed_query, normed_key
    if rotated:
        query, key = _rotary(r, tokens, q, a), _rotary(r, tokens, kv, a)
        r.free(normed_query, normed_key)
    _cache_copies(r, tokens, arch, key, value, a)
    contiguous, weights = _attend(r, arch, batch, prompt, masked, eager, a)
    projected = r.alloc(tokens * h * a)
    r.free(contiguous, query)
    return _block_tail(r, tokens, arch, projected, weights, a, pre_norm=None, post_norm=_norm)


def _layer_norm(r: _Replay, tokens: int, width: int, a: int) -> int:
    """LayerNorm in the activations' dtype: its output (its FP32 mean and rstd are a number a
    token, small-pool requests)."""
    return r.alloc(tokens * width * a)


def _gelu_mlp(r: _Replay, tokens: int, h: int, f: int, a: int) -> int:
    """LayerNorm, then up, GELU, down (biases inside the GEMMs); returns down."""
    normed = _layer_norm(r, tokens, h, a)
    up = r.alloc(tokens * f * a)
    act = r.alloc(tokens * f * a)
    r.free(up)
    down = r.alloc(tokens * h * a)
    r.free(act, normed)
    return down


def _neox_layer(r: _Replay, arch: TransformerArch, batch: int, prompt: int, a: int) -> int:
    """One GPT-NeoX block under SDPA: LayerNorm, the fused q/k/v projection (the cache copies its
    keys and values; the value is a view of it), the rotated quarter of each query and key head
    joined back to the full width, attention, the dense projection; the MLP on the block's input
    (parallel) or on the attention's residual sum; returns the block's output."""
    tokens = batch * prompt
    h, q, kv = arch.hidden_size, arch.q_dim, arch.kv_dim
    normed = _layer_norm(r, tokens, h, a)
    qkv = r.alloc(tokens * (q + 2 * kv) * a)
    query, key = _partial_rotary(r, tokens, arch, a)
    _cache_copies(r, tokens, arch, key, None, a)
    contiguous, _ = _attend(r, arch, batch, prompt, False, False, a)
    attended = r.alloc(tokens * h * a)
    r.free(contiguous)
    r.free(qkv, query, normed)
    if arch.parallel_block:  # mlp(ln2(x)) + attention + x
        down = _gelu_mlp(r, tokens, h, arch.intermediate_size, a)
        both = r.alloc(tokens * h * a)
        out = r.alloc(tokens * h * a)
        r.free(both, attended, down)
        return out
    mid = r.alloc(tokens * h * a)  # attention + x, then mlp(ln2(that)) + that
    r.free(attended)
    down = _gelu_mlp(r, tokens, h, arch.intermediate_size, a)
    out = r.alloc(tokens * h * a)
    r.free(down, mid)
    return out


def _sliding(arch: TransformerArch) -> list[bool]:
    """Which layers attend to a window, in the family's pattern."""
    types = layer_types(arch, SLIDING_PERIOD.get(arch.transformers_type, 1))  # the family's own layout
    return [t == "sliding_attention" for t in types] if types else [False] * arch.num_layers


def _masks(r: _Replay, arch: TransformerArch, batch: int, prompt: int, eager: bool, a: int) -> list[int]:
    """The attention masks made before the first block, kept to the end: eager attention's
    additive ones (causal, and windowed where layers slide), or SDPA's boolean windowed one
    where the prompt reaches the window (a causal mask SDPA does without). Booleans are one byte
    a query-key pair, shared by the batch; additive ones are the activations' width, per row."""
    kept = []
    if eager:
        causal = r.alloc(prompt * prompt)
        kept.append(r.alloc(batch * prompt * prompt * a))
        r.free(causal)
    if arch.sliding_layers and (eager or prompt >= (arch.sliding_window or 0)):
        past = r.alloc(prompt * prompt)  # (past the window's start) & causal
        windowed = r.alloc(prompt * prompt)
        r.free(past)
        causal = r.alloc(prompt * prompt)
        both = r.alloc(prompt * prompt)
        r.free(causal, windowed)
        if eager:
            kept.append(r.alloc(batch * prompt * prompt * a))
            r.free(both)
        else:
            kept.append(both)
    return kept


def _prefill(r: _Replay, arch: TransformerArch, batch: int, prompt: int, eager: bool, a: int) -> None:
    """The prompt's forward pass (the cached keys and values stay)."""
    tokens, h = batch * prompt, arch.hidden_size
    gemma = arch.rules_type in GEMMA_TYPES
    if gemma:  # the embedding scaled by sqrt(hidden): the unscaled one goes
        unscaled = r.alloc(tokens * h * a)
        embedded = x = r.alloc(tokens * h * a)
        r.free(unscaled)
    else:
        embedded = x = r.alloc(tokens * h * a)
    masks = _masks(r, arch, batch, prompt, eager, a)
    window = arch.sliding_window or 0
    for i, sliding in enumerate(_sliding(arch)):
        masked = eager or (sliding and prompt >= window)
        held = len(r.caches)
        if gemma:
            out = _gemma_layer(r, arch, batch, prompt, masked, eager, a)
        elif arch.rules_type == "olmo2":
            out = _olmo2_layer(r, arch, batch, prompt, masked, eager, a)
        elif arch.rules_type == "exaone4":
            rotated = sliding or not arch.sliding_layers
            out = _exaone4_layer(r, arch, batch, prompt, masked, eager, rotated, a)
        elif _neox(arch):
            out = _neox_layer(r, arch, batch, prompt, a)
        else:
            out = _llama_layer(r, arch, batch, prompt, masked, eager, arch.is_moe_layer(i), a)
        for cache in r.caches[held:]:
            cache.append(window if sliding else 0)
        if x != embedded:
            r.free(x)
        x = out
    final_norm = (
        _gemma_norm
        if gemma
        else _olmo2_norm
        if arch.rules_type == "olmo2"
        else _layer_norm
        if _neox(arch)
        else _norm
    )
    r.free(final_norm(r, tokens, h, a), x, embedded, *masks)


def _decode(
    r: _Replay, batch: int, prompt: int, new: int, gathers: list[tuple[float, float]] | None = None
) -> None:
    """The decode steps' cache updates: each step concatenates one token to every layer's keys
    and values (DynamicCache: the longer copy is made, then the old one freed); a sliding layer
    keeps a view of its last window - 1 tokens, so once its window is reached each update makes
    a window-long copy and frees the previous one (after a longer prompt, the prompt-long
    prefill copy). After its caches, a MoE layer's batched_mm experts gather every token-expert
    pair's gate/up and then down weights (`gathers`, one (gate/up, down) pair of sizes a layer,
    zeros for dense layers: expert_cost.decode_expert_gathers) and free both. The steps'
    other tensors are one token wide, small-pool requests that leave the large pool alone. The
    caches are freed at the end, as the generation returns. Past DECODE_UPDATES cache updates
    the steps are replayed `stride` tokens at a time, each update growing by that many tokens."""
    layers = len(gathers) if gathers else 1
    per_layer = max(1, len(r.caches) // layers)
    stride = max(1, -(-(new - 1) * len(r.caches) // DECODE_UPDATES))
    for step in [*range(stride, new - 1, stride), new - 1] if new > 1 else []:
        length = prompt + step
        for i, cache in enumerate(r.caches):
            key, per_token, window = cache
            tokens = min(length, window) if window else length
            grown = r.alloc(per_token * batch * tokens)
            r.free(int(key))
            cache[0] = grown
            layer_done = (i + 1) % per_layer == 0
            if gathers and layer_done and gathers[min(i // per_layer, layers - 1)][0]:
                up, down = gathers[min(i // per_layer, layers - 1)]
                first = r.alloc(up)
                second = r.alloc(down)  # made while the first copy is still bound
                r.free(first, second)
    r.free(*(int(cache[0]) for cache in r.caches))
    r.caches.clear()


def prefill_events(workload: Workload) -> list[tuple[str, int, float]]:
    """The prefill's allocations and frees as laid out here, in order: ('alloc', key, bytes) and
    ('free', key, 0); what tests compare with transformers' traced ones."""
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    r = _Replay()
    a = int(workload.precision_info.weight_bytes)
    _prefill(r, arch, workload.batch_size, workload.prompt_tokens or 1, _eager(workload), a)
    return r.events


def _eager(workload: Workload) -> bool:
    """Whether transformers runs eager attention for the workload (asked for, or the model has
    no SDPA: Gemma-2)."""
    return attention_as_run(workload) == "eager"


@lru_cache(maxsize=256)
def reserve_excess(workload: Workload, transformers: str | None = None) -> float:
    """Bytes the allocator holds above the allocated peak of a generation (its replay's reserved
    peak less its allocated peak after loading: nvidia-smi's peak is the reserve, the breakdown's
    allocated parts are the run's), for workloads that `applies` to; else 0. The replay runs
    GENERATIONS generations of prefill and decode steps, as `fitbench run` does, following the
    `transformers` release's code where it matters (None: the newest laid out)."""
    if not applies(workload):
        return 0.0
    return replayed_gap(workload, GENERATIONS, decode=True, transformers=transformers)


def replayed_gap(
    workload: Workload, generations: int, *, decode: bool, transformers: str | None = None
) -> float:
    """The replay's reserved peak less its allocated peak after loading, over `generations`
    prefills (with their decode steps where `decode`); what tests hold against a trace."""
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    a = int(workload.precision_info.weight_bytes)
    batch, prompt = workload.batch_size, workload.prompt_tokens or 1
    new = (workload.new_tokens or 1) if decode else 1
    known = release(transformers)
    r = _Replay(masked_fill_copies=known is not None and known <= MASKED_FILL_COPIES_UNTIL)
    _load(r, arch, a)
    r.pool.reset_peak_allocated()  # as `fitbench run` does before it measures
    each = expert_cost.decode_expert_gathers(workload)
    gathers = [each if arch.is_moe_layer(i) else (0.0, 0.0) for i in range(arch.num_layers)]
    for _ in range(generations):
        _prefill(r, arch, batch, prompt, _eager(workload), a)
        _decode(r, batch, prompt, new, gathers if arch.is_moe else None)
    return float(r.pool.peak_reserved - r.pool.peak_allocated)
