"""Fused Triton kernels for one batch-1 decode step of a Llama-style decoder.

Why fitbench has kernels of its own: at batch 1 a decode step is a stream of weight bytes
(13.2 GB per token for a 6.7B FP16 model) cut into ~430 kernels by PyTorch's operators, even
when inductor fuses what it can. cuBLAS' GEMVs reach ~3.6 TB/s on an H200, split the long
reductions (split-K, then a separate reduce kernel), and every one of the ~13 small kernels per
layer (RMSNorm, rotary, two cache stores, the masked attention, SiLU-and-multiply, residual adds)
pays a launch and a ramp of a few microseconds. Here a layer is five kernels, and everything
that is not a weight read rides along with one:

  qkv_rope      RMSNorm folded into the GEMV (its scale 1 / RMS(x) is one number for the whole
                token, applied to the finished dot products), bias, rotary positions on q and
                k, k and v written into the cache at the current position, q into a buffer
  attention     one program per query head, online softmax over the cache slots 0..pos
  linear        o-projection with the residual add in its epilogue (x += W_o @ attn)
  swiglu        RMSNorm folded in, gate and up rows of one program side by side, silu(g) * u
  linear        down-projection with the residual add (x += W_down @ h)

and the LM head is one more `linear` with the final RMSNorm folded in. The position is read
from a device tensor inside the kernels, so a step has no host reads and is captured once in
a CUDA graph.

Every GEMV program reads 2 * BLOCK_N weight rows over the whole of K (no split-K: no reduce
kernel, and each weight byte is read exactly once) and accumulates BLOCK_N x BLOCK_K partial
products in FP32 registers, reducing them once at the end. Pairs of row blocks are the unit
because two of the kernels need pairs (gate with up, a rotary dimension with its partner half a
head away); the plain GEMV takes two adjacent blocks.

On a machine without CUDA the kernels are defined under Triton's interpreter, which runs them
on CPU tensors with NumPy: that is how the tests check them against PyTorch's operators.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

import torch

# Triton reads TRITON_INTERPRET once, when it is first imported (its own library functions are
# decorated then): without a CUDA device, ask for the interpreter before that happens.
if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton
import triton.language as tl

RMS_EPS_DEFAULT = 1e-6
INTERPRETED = bool(triton.knobs.runtime.interpret)


@triton.jit
def _accumulate(
    acc_a,
    acc_b,
    squares,
    x_ptr,
    w_a,
    w_b,
    g_ptr,
    ks,
    K: tl.constexpr,
    ok_a,
    ok_b,
    MASK_K: tl.constexpr,
    MASK_N: tl.constexpr,
    NORM: tl.constexpr,
):
    """One BLOCK_K step of _paired_rows_dot; masks only where the shape needs them."""
    if MASK_K:
        k_ok = ks < K
        x = tl.load(x_ptr + ks, mask=k_ok, other=0.0).to(tl.float32)
        a = tl.load(w_a + ks[None, :], mask=ok_a[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_b + ks[None, :], mask=ok_b[:, None] & k_ok[None, :], other=0.0)
        if NORM:
            squares += x * x
            x = x * tl.load(g_ptr + ks, mask=k_ok, other=0.0).to(tl.float32)
    else:
        x = tl.load(x_ptr + ks).to(tl.float32)
        if MASK_N:
            a = tl.load(w_a + ks[None, :], mask=ok_a[:, None], other=0.0)
            b = tl.load(w_b + ks[None, :], mask=ok_b[:, None], other=0.0)
        else:
            a = tl.load(w_a + ks[None, :])
            b = tl.load(w_b + ks[None, :])
        if NORM:
            squares += x * x
            x = x * tl.load(g_ptr + ks).to(tl.float32)
    acc_a += a.to(tl.float32) * x[None, :]
    acc_b += b.to(tl.float32) * x[None, :]
    return acc_a, acc_b, squares


@triton.jit
def _paired_rows_dot(
    x_ptr,
    w_ptr,
    g_ptr,
    rows_a,
    rows_b,
    ok_a,
    ok_b,
    K: tl.constexpr,
    NORM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    """Dot products of two blocks of weight rows with x (optionally x * g): FP32 [BLOCK_N] each,
    and sum(x^2) over K (for the RMSNorm scale, applied by the caller).

    Whole BLOCK_K steps run without column masks; a K that BLOCK_K does not divide (11,008 in
    Llama-7B's down projection) ends with one masked step.
    """
    K_FULL: tl.constexpr = (K // BLOCK_K) * BLOCK_K
    offs_k = tl.arange(0, BLOCK_K)
    acc_a = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    acc_b = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    squares = tl.zeros((BLOCK_K,), dtype=tl.float32)
    w_a = w_ptr + rows_a[:, None].to(tl.int64) * K
    w_b = w_ptr + rows_b[:, None].to(tl.int64) * K
    for k0 in range(0, K_FULL, BLOCK_K):
        acc_a, acc_b, squares = _accumulate(
            acc_a, acc_b, squares, x_ptr, w_a, w_b, g_ptr, k0 + offs_k, K, ok_a, ok_b, False, not EVEN_N, NORM
        )
    if K_FULL < K:
        acc_a, acc_b, squares = _accumulate(
            acc_a,
            acc_b,
            squares,
            x_ptr,
            w_a,
            w_b,
            g_ptr,
            K_FULL + offs_k,
            K,
            ok_a,
            ok_b,
            True,
            not EVEN_N,
            NORM,
        )
    return tl.sum(acc_a, axis=1), tl.sum(acc_b, axis=1), tl.sum(squares, axis=0)


@triton.jit
def _paired_rows(
    x_ptr,
    w_ptr,
    b_ptr,
    g_ptr,
    rows_a,
    rows_b,
    ok_a,
    ok_b,
    K: tl.constexpr,
    eps,
    NORM: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    """W[rows] @ rms_norm(x, g) [+ b[rows]] for two blocks of rows, in FP32.

    The RMSNorm scale 1 / RMS(x) is one number for the whole of x, so it multiplies the finished
    dot products instead of every element of x.
    """
    a, b, squares = _paired_rows_dot(
        x_ptr, w_ptr, g_ptr, rows_a, rows_b, ok_a, ok_b, K, NORM, BLOCK_N, BLOCK_K, EVEN_N
    )
    if NORM:
        scale = 1.0 / tl.sqrt(squares / K + eps)
        a, b = a * scale, b * scale
    if HAS_BIAS:
        a += tl.load(b_ptr + rows_a, mask=ok_a, other=0.0).to(tl.float32)
        b += tl.load(b_ptr + rows_b, mask=ok_b, other=0.0).to(tl.float32)
    return a, b


@triton.jit
def _linear_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    g_ptr,
    res_ptr,
    out_ptr,
    N,
    K: tl.constexpr,
    eps,
    NORM: tl.constexpr,
    RESIDUAL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    """out = [res +] W @ norm(x) [+ b] for 2 * BLOCK_N rows of W per program."""
    first = tl.program_id(0) * 2 * BLOCK_N
    rows_a = first + tl.arange(0, BLOCK_N)
    rows_b = rows_a + BLOCK_N
    ok_a, ok_b = rows_a < N, rows_b < N
    y_a, y_b = _paired_rows(
        x_ptr,
        w_ptr,
        b_ptr,
        g_ptr,
        rows_a,
        rows_b,
        ok_a,
        ok_b,
        K,
        eps,
        NORM,
        HAS_BIAS,
        BLOCK_N,
        BLOCK_K,
        EVEN_N,
    )
    if RESIDUAL:
        y_a += tl.load(res_ptr + rows_a, mask=ok_a, other=0.0).to(tl.float32)
        y_b += tl.load(res_ptr + rows_b, mask=ok_b, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows_a, y_a.to(out_ptr.dtype.element_ty), mask=ok_a)
    tl.store(out_ptr + rows_b, y_b.to(out_ptr.dtype.element_ty), mask=ok_b)


@triton.jit
def _swiglu_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    g_ptr,
    out_ptr,
    FFN,
    K: tl.constexpr,
    eps,
    NORM: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    """out[i] = silu(gate_i . norm(x)) * (up_i . norm(x)); W stacks gate [FFN, K] over up [FFN, K]."""
    gate_rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = gate_rows < FFN
    up_rows = gate_rows + FFN
    gate, up = _paired_rows(
        x_ptr,
        w_ptr,
        b_ptr,
        g_ptr,
        gate_rows,
        up_rows,
        ok,
        ok,
        K,
        eps,
        NORM,
        HAS_BIAS,
        BLOCK_N,
        BLOCK_K,
        EVEN_N,
    )
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + gate_rows, y.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _qkv_rope_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    g_ptr,
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    cos_ptr,
    sin_ptr,
    pos_ptr,
    K: tl.constexpr,
    eps,
    HEADS,
    KV_HEADS,
    CACHE_LEN,
    HEAD_DIM: tl.constexpr,
    NORM: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr,
):
    """One head's dimensions i and i + HEAD_DIM/2 (a rotary pair) for BLOCK_N values of i.

    Program (h, j): h < HEADS is a query head, then KV_HEADS key heads, then KV_HEADS value
    heads (the rows of W in that order). Queries and keys are rotated by the angle table row
    `pos`; queries go to q [HEADS * HEAD_DIM], keys and values into cache slot `pos` of
    their head ([KV_HEADS, CACHE_LEN, HEAD_DIM], batch 1).
    """
    HALF: tl.constexpr = HEAD_DIM // 2
    head = tl.program_id(0)
    dims = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = dims < HALF
    rows_a = head * HEAD_DIM + dims
    rows_b = rows_a + HALF
    a, b = _paired_rows(
        x_ptr, w_ptr, b_ptr, g_ptr, rows_a, rows_b, ok, ok, K, eps, NORM, HAS_BIAS, BLOCK_N, BLOCK_K, EVEN_N
    )
    pos = tl.load(pos_ptr)
    if head < HEADS + KV_HEADS:  # rotary (transformers' Llama halves: cos and sin repeat per half)
        cos = tl.load(cos_ptr + pos * HEAD_DIM + dims, mask=ok, other=1.0)
        sin = tl.load(sin_ptr + pos * HEAD_DIM + dims, mask=ok, other=0.0)
        a, b = a * cos - b * sin, b * cos + a * sin
    if head < HEADS:
        dest = q_ptr + head * HEAD_DIM + dims
    elif head < HEADS + KV_HEADS:
        dest = k_cache_ptr + ((head - HEADS) * CACHE_LEN + pos) * HEAD_DIM + dims
    else:
        dest = v_cache_ptr + ((head - HEADS - KV_HEADS) * CACHE_LEN + pos) * HEAD_DIM + dims
    tl.store(dest, a.to(dest.dtype.element_ty), mask=ok)
    tl.store(dest + HALF, b.to(dest.dtype.element_ty), mask=ok)


@triton.jit
def _decode_attention_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    out_ptr,
    pos_ptr,
    GROUPS,
    sm_scale,
    CACHE_LEN: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_L: tl.constexpr,
):
    """softmax(q . K[0..pos] * scale) @ V[0..pos] for one query head (online softmax over slots).

    The loop runs over the whole cache with a compile-time bound; the blocks past `pos` are
    fully masked, so their loads are predicated off and move no bytes.
    """
    head = tl.program_id(0)
    kv_head = head // GROUPS
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + head * HEAD_DIM + dims).to(tl.float32) * sm_scale
    k_base = k_cache_ptr + kv_head * CACHE_LEN * HEAD_DIM
    v_base = v_cache_ptr + kv_head * CACHE_LEN * HEAD_DIM
    visible = tl.load(pos_ptr) + 1
    best = tl.full((), float("-inf"), tl.float32)
    total = tl.zeros((), dtype=tl.float32)
    acc = tl.zeros((HEAD_DIM,), dtype=tl.float32)
    for start in range(0, CACHE_LEN, BLOCK_L):
        slots = start + tl.arange(0, BLOCK_L)
        seen = slots < visible
        offsets = slots[:, None] * HEAD_DIM + dims[None, :]
        k = tl.load(k_base + offsets, mask=seen[:, None], other=0.0).to(tl.float32)
        scores = tl.where(seen, tl.sum(k * q[None, :], axis=1), float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, axis=0))
        weights = tl.exp(scores - new_best)
        shrink = tl.exp(best - new_best)
        v = tl.load(v_base + offsets, mask=seen[:, None], other=0.0).to(tl.float32)
        total = total * shrink + tl.sum(weights, axis=0)
        acc = acc * shrink + tl.sum(weights[:, None] * v, axis=0)
        best = new_best
    out = acc / total
    tl.store(out_ptr + head * HEAD_DIM + dims, out.to(out_ptr.dtype.element_ty))


# -- launch configuration ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class GemvConfig:
    """Tile sizes of one GEMV launch: 2 * block_n weight rows per program, block_k columns a step."""

    block_n: int = 8
    block_k: int = 512
    num_warps: int = 4
    num_stages: int = 3


DEFAULT_CONFIG = GemvConfig()


def _pow2_at_most(limit: int, cap: int) -> int:
    """The largest power of two <= min(limit, cap) (at least 1)."""
    return 1 << max(0, int(math.log2(max(1, min(limit, cap)))))


def _fit(config: GemvConfig, rows: int, k: int, rows_per_program: int = 1) -> tuple[int, int, bool]:
    """block_n and block_k shrunk for small shapes (tiny models), and whether the programs'
    rows cover `rows` exactly (no row masks)."""
    block_n = _pow2_at_most(rows, config.block_n)
    block_k = _pow2_at_most(k, config.block_k)
    return block_n, block_k, rows % (block_n * rows_per_program) == 0


def _launch_kwargs(num_warps: int, num_stages: int | None = None) -> dict[str, int]:
    """Warps (and stages) for a compiled launch; the interpreter takes neither."""
    if INTERPRETED:
        return {}
    tuning = {"num_warps": num_warps}
    if num_stages is not None:
        tuning["num_stages"] = num_stages
    return tuning


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    out: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    norm_weight: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    eps: float = RMS_EPS_DEFAULT,
    config: GemvConfig = DEFAULT_CONFIG,
) -> torch.Tensor:
    """out = [residual +] weight @ rms_norm(x, norm_weight) [+ bias], x of one token [K].

    `residual` may be `out` itself (an in-place residual add: each element is read and written by
    the same program). `out` may be FP32 (logits) while the weights are 16-bit.
    """
    n, k = weight.shape
    block_n, block_k, even_n = _fit(config, n, k, rows_per_program=2)
    grid = (triton.cdiv(n, 2 * block_n),)
    _linear_kernel[grid](
        x,
        weight,
        bias if bias is not None else weight,
        norm_weight if norm_weight is not None else x,
        residual if residual is not None else out,
        out,
        n,
        k,
        eps,
        NORM=norm_weight is not None,
        RESIDUAL=residual is not None,
        HAS_BIAS=bias is not None,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        EVEN_N=even_n,
        **_launch_kwargs(config.num_warps, config.num_stages),
    )
    return out


def swiglu(
    x: torch.Tensor,
    weight: torch.Tensor,
    out: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    norm_weight: torch.Tensor | None = None,
    eps: float = RMS_EPS_DEFAULT,
    config: GemvConfig = DEFAULT_CONFIG,
) -> torch.Tensor:
    """out [ffn] = silu(gate @ rms_norm(x)) * (up @ rms_norm(x)), weight = gate [ffn, K] over up."""
    two_ffn, k = weight.shape
    ffn = two_ffn // 2
    block_n, block_k, even_n = _fit(config, ffn, k)
    _swiglu_kernel[(triton.cdiv(ffn, block_n),)](
        x,
        weight,
        bias if bias is not None else weight,
        norm_weight if norm_weight is not None else x,
        out,
        ffn,
        k,
        eps,
        NORM=norm_weight is not None,
        HAS_BIAS=bias is not None,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        EVEN_N=even_n,
        **_launch_kwargs(config.num_warps, config.num_stages),
    )
    return out


def qkv_rope(
    x: torch.Tensor,
    weight: torch.Tensor,
    *,
    q_out: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    pos: torch.Tensor,
    heads: int,
    kv_heads: int,
    head_dim: int,
    bias: torch.Tensor | None = None,
    norm_weight: torch.Tensor | None = None,
    eps: float = RMS_EPS_DEFAULT,
    config: GemvConfig = DEFAULT_CONFIG,
) -> None:
    """q/k/v of one token; rotary on q and k at `pos`; k and v stored in cache slot `pos`.

    k_cache / v_cache [kv_heads, cache_len, head_dim] (contiguous, batch 1); cos / sin
    [cache_len, head_dim] FP32 (transformers' Llama layout: the angle table repeats per half).
    """
    if head_dim % 2:
        raise ValueError("rotary positions need an even head size")
    half = head_dim // 2
    k = weight.shape[1]
    block_n, block_k, even_n = _fit(config, half, k)
    grid = (heads + 2 * kv_heads, triton.cdiv(half, block_n))
    _qkv_rope_kernel[grid](
        x,
        weight,
        bias if bias is not None else weight,
        norm_weight if norm_weight is not None else x,
        q_out,
        k_cache,
        v_cache,
        cos,
        sin,
        pos,
        k,
        eps,
        heads,
        kv_heads,
        k_cache.shape[-2],
        HEAD_DIM=head_dim,
        NORM=norm_weight is not None,
        HAS_BIAS=bias is not None,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        EVEN_N=even_n,
        **_launch_kwargs(config.num_warps, config.num_stages),
    )


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    out: torch.Tensor,
    *,
    pos: torch.Tensor,
    heads: int,
    kv_heads: int,
    block_l: int = 64,
    num_warps: int = 4,
) -> torch.Tensor:
    """Attention of one token's query heads over cache slots 0..pos (inclusive), batch 1.

    q and out [heads * head_dim]; caches [kv_heads, cache_len, head_dim]. Query head h reads
    kv head h // (heads / kv_heads), as grouped-query attention does.
    """
    head_dim = k_cache.shape[-1]
    if head_dim & (head_dim - 1):
        raise ValueError(f"the decode attention kernel needs a power-of-two head size, got {head_dim}")
    _decode_attention_kernel[(heads,)](
        q,
        k_cache,
        v_cache,
        out,
        pos,
        heads // kv_heads,
        1.0 / math.sqrt(head_dim),
        CACHE_LEN=k_cache.shape[-2],
        HEAD_DIM=head_dim,
        BLOCK_L=block_l,
        **_launch_kwargs(num_warps),
    )
    return out
