"""A generation's allocator reserve above its allocated peak, for Llama-shaped decoders.

What nvidia-smi shows for `fitbench run` generating with transformers is the caching allocator's
reserve. Above the allocated peak it holds blocks that no later request fitted: the LM head's own
weight that loading a model with tied embeddings makes and frees, and the pieces the prefill's
transients leave when the KV cache's persistent copies are cut from their freed blocks. This module
lays out the allocations and frees a Llama-shaped decoder makes, in transformers' order, and
replays them through the allocator's rules (allocator.SegmentedPool, which merges freed
neighbours as PyTorch does); the reserve's excess is the difference of the replay's two peaks.

The order is transformers' own, read from a trace of the real model on the meta device
(benchmarks/allocator_replay.py traces any library model; tests/backends/test_generation_reserve_trace.py
holds this layout to that trace): per block, the RMSNorm's FP32 upcast, square and product and
their 16-bit casts, the q, k and v projections (Qwen3's query and key norms right after their
projections), rotary positions (product with cos, the negated half, its concatenation, product
with sin, sum) on q and on k, the cache's copies of k and v, the attention output and its
contiguous copy, the output projection, the residual sum, the second norm, the SwiGLU (gate,
activation, up, product, down) and the second residual sum. The decode steps' regrown caches are
transformer_cost.outgrown_cache_bytes's. Other layouts (LayerNorm, GELU, parallel blocks, fused
projections, experts, latent attention, Gemma's and OLMo-2's norms) keep the profile's
fragmentation share: laying them out is the same work, family by family.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import count

from fitbench.estimate import transformer_cost
from fitbench.estimate.allocator import SegmentedPool
from fitbench.estimate.first_step import weight_matrices
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload


def applies(workload: Workload) -> bool:
    """A Llama-shaped decoder generating through transformers' eager path in 16-bit weights."""
    arch = workload.arch
    return (
        workload.is_generation
        and workload.gpus == 1
        and workload.weight_format is None
        and isinstance(arch, TransformerArch)
        and arch.kind == "decoder"
        and not arch.is_moe
        and not arch.is_mla
        and not arch.parallel_block
        and arch.norm == "rmsnorm"
        and arch.norms_per_layer == 2
        and not transformer_cost.gemma_norms(arch)  # Gemma's and OLMo-2's norms run otherwise
        and transformer_cost.fused_projections(arch) == (False, False)  # Phi-3's, GLM-4's fused
        and arch.mlp == "swiglu"
        and arch.position == "rotary"
        and not arch.patch_size
        and workload.precision_info.weight_bytes == 2
    )


class _Replay:
    """Allocations and frees, as they happen, on one SegmentedPool."""

    def __init__(self) -> None:
        self.pool = SegmentedPool()
        self._ids = count()

    def alloc(self, nbytes: float) -> int:
        key = next(self._ids)
        self.pool.malloc(key, nbytes)
        return key

    def free(self, *keys: int) -> None:
        for key in keys:
            self.pool.free(key)


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


def _rotary(r: _Replay, tokens: int, width: int, a: int) -> int:
    """x * cos + rotate_half(x) * sin over `width` elements a token: the products, the negated
    half, its concatenation, the sum (x itself is the caller's to free)."""
    with_cos, half = r.alloc(tokens * width * a), r.alloc(tokens * width * a / 2)
    rotated = r.alloc(tokens * width * a)
    r.free(half)
    with_sin = r.alloc(tokens * width * a)
    r.free(rotated)
    out = r.alloc(tokens * width * a)
    r.free(with_cos, with_sin)
    return out


def _load(r: _Replay, arch: TransformerArch, a: int) -> None:
    """Every matrix in construction order; with tied embeddings the LM head's own weight is made
    and freed when it is tied."""
    for segment in weight_matrices(arch):
        for matrix in segment:
            r.alloc(matrix.elements * a)
    if arch.tie_embeddings:
        r.free(r.alloc(arch.vocab_size * arch.hidden_size * a))


def _prefill(r: _Replay, arch: TransformerArch, tokens: int, a: int) -> None:
    """The prompt's forward pass (the cached keys and values stay)."""
    h, q, kv, f = arch.hidden_size, arch.q_dim, arch.kv_dim, arch.intermediate_size
    embedded = x = r.alloc(tokens * h * a)
    for _ in range(arch.num_layers):
        normed = _norm(r, tokens, h, a)
        if arch.qk_norm != "none":  # Qwen3: each projection normed before the next
            projected_q = r.alloc(tokens * q * a)
            query = _norm(r, tokens, q, a)
            r.free(projected_q)
            projected_k = r.alloc(tokens * kv * a)
            key = _norm(r, tokens, kv, a)
            r.free(projected_k)
            value = r.alloc(tokens * kv * a)
        else:
            query, key, value = r.alloc(tokens * q * a), r.alloc(tokens * kv * a), r.alloc(tokens * kv * a)
        query_rot, key_rot = _rotary(r, tokens, q, a), _rotary(r, tokens, kv, a)
        r.free(query, key)
        for _ in ("key", "value"):  # the cache's copies, kept for the decode steps
            r.alloc(tokens * kv * a)
        r.free(key_rot, value)
        attended = r.alloc(tokens * q * a)
        contiguous = r.alloc(tokens * q * a)
        r.free(attended)
        projected = r.alloc(tokens * h * a)
        r.free(contiguous, query_rot, normed)
        mid = r.alloc(tokens * h * a)
        r.free(projected)
        normed = _norm(r, tokens, h, a)
        gate, act = r.alloc(tokens * f * a), r.alloc(tokens * f * a)
        r.free(gate)
        up, product = r.alloc(tokens * f * a), r.alloc(tokens * f * a)
        r.free(act, up)
        down = r.alloc(tokens * h * a)
        r.free(product, normed)
        out = r.alloc(tokens * h * a)
        r.free(down, mid)
        if x != embedded:
            r.free(x)
        x = out
    r.free(_norm(r, tokens, h, a), x, embedded)


@lru_cache(maxsize=256)
def reserve_excess(workload: Workload) -> float:
    """Bytes the allocator holds above the allocated peak of a generation (its replay's reserved
    peak less its allocated peak after loading: nvidia-smi's peak is the reserve, the breakdown's
    allocated parts are the run's), for workloads that `applies` to; else 0."""
    if not applies(workload):
        return 0.0
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    a = int(workload.precision_info.weight_bytes)
    batch, prompt = workload.batch_size, workload.prompt_tokens or 1
    r = _Replay()
    _load(r, arch, a)
    r.pool.reset_peak_allocated()  # as `fitbench run` does before it measures
    _prefill(r, arch, batch * prompt, a)
    return float(r.pool.peak_reserved - r.pool.peak_allocated)
