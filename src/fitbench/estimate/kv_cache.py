"""What a generation's cache holds: the KV cache per token and layer, the fixed state of the
linear-attention layers, and what the allocator keeps cached while a cache grows by copies.

Why a module of its own: the single-device breakdown, the serving planner (paged blocks sized
from the bytes one token keeps), the generation reserve and the decode kernels all ask these
figures, and none of them needs the rest of the transformer's cost model to do so.
"""

from __future__ import annotations

from fitbench.core.quant import kv_cache_element_bytes, kv_cache_scale_bytes_per_head
from fitbench.estimate.dtypes import activation_dtypes
from fitbench.workloads.workload import Workload


def kv_bytes_per_token_layer(workload: Workload, *, tp: int = 1) -> float:
    """Bytes one layer's cache keeps per token and sequence, on one of `tp` tensor-parallel GPUs.

    Elements (TransformerArch.kv_elements_per_token): K and V, 2 * kv_dim (key/value heads split
    up to their number, replicated beyond it), or for latent attention the compressed latent plus
    the shared rotary key (kv_lora_rank + qk_rope_head_dim, as MLA-aware runtimes cache it,
    replicated on every GPU). Each element in the KV cache dtype (`Workload.kv_cache_dtype`:
    --kv-cache, else the activations' dtype, FP16 for 16-bit and quantized-weight models); an
    int8 cache adds a scale and zero point per head and token for each of K and V (one per token
    for the latent, which has no heads).
    """
    arch = workload.transformer
    dtype = workload.kv_cache_dtype
    if arch.is_mla:
        scale = kv_cache_scale_bytes_per_head(dtype)
        return arch.kv_elements_per_token() * kv_cache_element_bytes(dtype) + scale
    split = min(tp, arch.kv_heads)
    return (
        2 * arch.kv_dim * kv_cache_element_bytes(dtype)
        + 2 * arch.kv_heads * kv_cache_scale_bytes_per_head(dtype)
    ) / split


def kv_cache_bytes_per_token(workload: Workload, *, tp: int = 1) -> float:
    """The cache of one token over every layer, on one of `tp` tensor-parallel GPUs: layers x
    kv_bytes_per_token_layer (K and V, or latent attention's compressed latent and rotary key, in
    the KV cache dtype).

    A paged cache (vLLM, SGLang) sizes its blocks from this figure, so whatever changes the bytes
    a token keeps changes it here.
    """
    return workload.transformer.attention_layers * kv_bytes_per_token_layer(workload, tp=tp)


# transformers' linear-attention layers compute the gated delta rule in FP32 (the torch code's
# upcast, flash-linear-attention's state alike) and keep the state they return: 4 bytes an element.
LINEAR_STATE_BYTES = 4


def linear_state_bytes_per_sequence(workload: Workload) -> float:
    """The fixed state one sequence keeps in the linear-attention layers
    (TransformerArch.linear_state_elements): the FP32 recurrent state and the convolution's last
    inputs in the activations' dtype, whatever the sequence's length."""
    arch = workload.transformer
    if not arch.linear_layers:
        return 0.0
    recurrent, conv = arch.linear_state_elements()
    act = activation_dtypes(workload, dropout=False).act
    return arch.linear_layers * (recurrent * LINEAR_STATE_BYTES + conv * act)


def kv_cache_bytes(workload: Workload, tokens: int | None = None) -> float:
    """The cache of the batch: batch x (token slots held, summed over layers) x the bytes of one
    token in one layer, plus each sequence's linear-attention state. Sliding-window layers hold a
    window-long tensor while decoding and the whole prompt right after a longer prefill
    (TransformerArch.cached_tokens)."""
    arch = workload.transformer
    t = tokens if tokens is not None else workload.tokens_per_sequence
    prompt = (workload.prompt_tokens or 0) if tokens is None else 0
    per_layer_token = kv_bytes_per_token_layer(workload)
    state = linear_state_bytes_per_sequence(workload)
    return workload.batch_size * (arch.cached_tokens(t, prompt) * per_layer_token + state)


# PyTorch's CUDA caching allocator: a request above 10 MiB gets a segment of its own, rounded up
# to 2 MiB, and a cached segment only serves requests no larger than itself (c10/cuda/
# CUDACachingAllocator.cpp: kLargeBuffer, kRoundLarge).
ALLOCATOR_OWN_SEGMENT_BYTES = 10 * 2**20


ALLOCATOR_ROUND_BYTES = 2 * 2**20


def outgrown_cache_bytes(workload: Workload, stale_share: float) -> float:
    """Allocator memory left cached, and unusable, while a KV cache grows by concatenation.

    transformers' DynamicCache appends each new token with torch.cat: every decode step replaces
    each layer's K and V by a copy one token longer. Once those copies pass 10 MiB, each lives
    in its own 2 MiB-rounded segment; whenever the length crosses into the next 2 MiB size
    class, the 2 x layers outgrown segments are freed into the cache but are too small for any
    later request, and so is the one spare segment of that class (the first tensor of each step
    allocates its longer copy before freeing the old one): the reserved memory climbs by
    (2 x layers + 1) segments per size class left behind. The classes passed, from the first
    size above 10 MiB (s_lo) to the last (s_hi), are summed as the arithmetic series they are,
    with a continuous count: the real sum jumps by a class whenever a boundary is crossed, but
    an estimate that fell when the prompt grew by a token would help nobody. `stale_share` is
    the part of that sum that stays (some outgrown blocks serve smaller requests); 0 for a
    preallocated static cache. The allocator returns this memory when a request would otherwise
    fail, so it is reclaimable: on a roomy card it shows in the peak, on a tight one the job
    still fits.
    """
    if stale_share <= 0 or not workload.is_generation:
        return 0.0
    arch = workload.transformer
    # one layer's K (or V; half the latent cache), one token
    per_token = workload.batch_size * kv_bytes_per_token_layer(workload) / 2
    first = workload.prompt_tokens or 1
    last = first + max((workload.new_tokens or 1) - 1, 0)
    s_hi = float(per_token * last)
    s_lo = max(float(per_token * first), float(ALLOCATOR_OWN_SEGMENT_BYTES))
    if s_hi <= s_lo:
        return 0.0
    classes = (s_hi - s_lo) / ALLOCATOR_ROUND_BYTES
    outgrown = classes * (s_lo + s_hi - ALLOCATOR_ROUND_BYTES) / 2
    # Sliding-window layers replace their cache by a window-long copy each step once full: only
    # the other layers (and sliding ones that never fill) keep outgrowing size classes.
    growing = arch.num_layers
    if arch.sliding_layers and arch.sliding_window is not None and last >= arch.sliding_window:
        growing -= arch.sliding_layers
    return stale_share * (2 * growing + 1) * outgrown if growing else 0.0
