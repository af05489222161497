"""Fused Triton kernels for one decode step of a Llama-style decoder, for 1 to 32 sequences.

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
  attention     one program per query head, online softmax over the cache slots 0..pos (a
                long cache is cut into splits run side by side and merged: flash-decoding)
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

A batch of B > 1 sequences (all at the same position: the static generator's prompts have one
length) runs the same five kernels a layer with batched tiles (`_*_rows_kernel`): a program reads
its 2 * BLOCK_N weight rows once and multiplies them with all B activation rows by tl.dot (B
padded to 16 or 32 rows, masked; the weight tile is the product's first operand, so 64 or 128
weight rows reach Hopper's wgmma), so weight bytes per step do not grow with B; every epilogue
(RMSNorm scale from each row's own sum of squares, bias, rotary, cache stores, SwiGLU, residual
add) is per row, and attention is one program per (query head, sequence). The tensor cores'
padded rows are free in a kernel bound by the weight stream; per-row FP32 accumulation, as at
batch 1, would need B x BLOCK_N x BLOCK_K registers. Batch 1 keeps its GEMV kernels (tuned on an
H200; a [1, K] activation runs them), whose FP32 products of x * g differ in rounding from the
batched tiles' 16-bit operands.

The two kinds differ in their main loops and in how a program's rows are laid out; their
epilogues are shared. Each step (RMSNorm scale, bias or residual add, rotary, where q, k and v
go, SwiGLU, the store) is one @triton.jit helper that both call, on [BLOCK_N] vectors at batch 1
and on [rows, BLOCK_N] tiles batched; Triton inlines it, so a kernel compiles as if its lines
stood in place. One launcher (_launch_gemv) picks the kernel by the activation's rows.

On a machine without CUDA the kernels are defined under Triton's interpreter, which runs them
on CPU tensors with NumPy: that is how the tests check them against PyTorch's operators.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# Triton reads TRITON_INTERPRET once, when it is first imported (its own library functions are
# decorated then): without a CUDA device, ask for the interpreter before that happens.
if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton
import triton.language as tl

RMS_EPS_DEFAULT = 1e-6
INTERPRETED = bool(triton.knobs.runtime.interpret)


# -- epilogues ---------------------------------------------------------------------------------------
# What a kernel does with its finished dot products, shared by the batch-1 GEMVs and the batched
# tiles. Triton inlines @triton.jit helpers, so a kernel compiles as if these lines stood in it.
# The batch-1 kernels pass vectors [BLOCK_N]; the batched ones pass tiles [ROWS_PAD, BLOCK_N] (a
# row per sequence), against which a vector of per-column values (bias, cos, sin) broadcasts.


@triton.jit
def _rms_scale(squares, K: tl.constexpr, eps):
    """The RMSNorm scale 1 / RMS(x) from sum(x^2) over K (one number per activation row)."""
    return 1.0 / tl.sqrt(squares / K + eps)


@triton.jit
def _add_loaded(y, ptr, offsets, mask):
    """y + ptr[offsets] in FP32 (a bias or the residual), masked elements adding nothing."""
    return y + tl.load(ptr + offsets, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _store(dest, y, mask):
    """Store FP32 y at dest in dest's element type."""
    tl.store(dest, y.to(dest.dtype.element_ty), mask=mask)


@triton.jit
def _silu_mul(gate, up):
    """SwiGLU: silu(gate) * up."""
    return gate / (1.0 + tl.exp(-gate)) * up


@triton.jit
def _rotate(a, b, cos_ptr, sin_ptr, pos, dims, ok, HEAD_DIM: tl.constexpr):
    """Rotary positions on the pairs (a, b) = (dimension i, i + HEAD_DIM / 2) for i in dims, at
    angle-table row `pos` (transformers' Llama halves: cos and sin repeat per half)."""
    cos = tl.load(cos_ptr + pos * HEAD_DIM + dims, mask=ok, other=1.0)
    sin = tl.load(sin_ptr + pos * HEAD_DIM + dims, mask=ok, other=0.0)
    return a * cos - b * sin, b * cos + a * sin


@triton.jit
def _qkv_dest(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    pos,
    head,
    q_head,
    kv_head,
    dims,
    HEADS,
    KV_HEADS,
    CACHE_LEN,
    HEAD_DIM: tl.constexpr,
):
    """Where dimensions `dims` of program head `head` go (their partners i + HEAD_DIM / 2 at
    + HEAD_DIM / 2): a query head's into q row q_head, a key or value head's into cache slot
    `pos` of cache row kv_head - HEADS (keys) or kv_head - HEADS - KV_HEADS (values).

    One sequence passes q_head = kv_head = head; sequence r of a batch passes q_head =
    r * HEADS + head and kv_head = r * KV_HEADS + head (its cache rows follow sequence r - 1's).
    A cache slot's element offset is 64-bit: a batch's caches can pass 2^31 elements (with the
    generator's int64 `pos` the slot is 64-bit already and the cast changes nothing).
    """
    if head < HEADS:
        dest = q_ptr + q_head * HEAD_DIM + dims
    elif head < HEADS + KV_HEADS:
        slot = (kv_head - HEADS) * CACHE_LEN + pos
        dest = k_cache_ptr + slot.to(tl.int64) * HEAD_DIM + dims
    else:
        slot = (kv_head - HEADS - KV_HEADS) * CACHE_LEN + pos
        dest = v_cache_ptr + slot.to(tl.int64) * HEAD_DIM + dims
    return dest


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
        scale = _rms_scale(squares, K, eps)
        a, b = a * scale, b * scale
    if HAS_BIAS:
        a = _add_loaded(a, b_ptr, rows_a, ok_a)
        b = _add_loaded(b, b_ptr, rows_b, ok_b)
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
        y_a = _add_loaded(y_a, res_ptr, rows_a, ok_a)
        y_b = _add_loaded(y_b, res_ptr, rows_b, ok_b)
    _store(out_ptr + rows_a, y_a, ok_a)
    _store(out_ptr + rows_b, y_b, ok_b)


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
    y = _silu_mul(gate, up)
    _store(out_ptr + gate_rows, y, ok)


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
    if head < HEADS + KV_HEADS:  # queries and keys
        a, b = _rotate(a, b, cos_ptr, sin_ptr, pos, dims, ok, HEAD_DIM)
    dest = _qkv_dest(
        q_ptr, k_cache_ptr, v_cache_ptr, pos, head, head, head, dims, HEADS, KV_HEADS, CACHE_LEN, HEAD_DIM
    )
    _store(dest, a, ok)
    _store(dest + HALF, b, ok)


@triton.jit
def _decode_attention_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    out_ptr,
    part_acc_ptr,
    part_stats_ptr,
    pos_ptr,
    HEADS,
    KV_HEADS,
    GROUPS,
    sm_scale,
    CACHE_LEN: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_L: tl.constexpr,
    SPLIT_LEN: tl.constexpr,
    SPLITS: tl.constexpr,
):
    """softmax(q . K[0..pos] * scale) @ V[0..pos] for one query head of one sequence (online
    softmax over slots); program (h, r, c) is query head h of sequence r over split c, slots
    c * SPLIT_LEN .. (c + 1) * SPLIT_LEN - 1.

    With one split (SPLIT_LEN covers the cache) the program writes the normalised output. With
    several (flash-decoding) it leaves its unnormalised sum of weighted values, its running
    maximum and its sum of weights for _decode_attention_combine_kernel; a split wholly past
    `pos` leaves (0, -inf, 0). The loop has a compile-time bound; blocks past `pos` are fully
    masked, so their loads are predicated off and move no bytes.
    """
    head = tl.program_id(0)
    seq = tl.program_id(1)
    split = tl.program_id(2)
    kv_head = seq * KV_HEADS + head // GROUPS
    dims = tl.arange(0, HEAD_DIM)
    q_row = (seq * HEADS + head) * HEAD_DIM
    q = tl.load(q_ptr + q_row + dims).to(tl.float32) * sm_scale
    k_base = k_cache_ptr + kv_head.to(tl.int64) * CACHE_LEN * HEAD_DIM
    v_base = v_cache_ptr + kv_head.to(tl.int64) * CACHE_LEN * HEAD_DIM
    visible = tl.load(pos_ptr) + 1
    best = tl.full((), float("-inf"), tl.float32)
    total = tl.zeros((), dtype=tl.float32)
    acc = tl.zeros((HEAD_DIM,), dtype=tl.float32)
    for start in range(0, SPLIT_LEN, BLOCK_L):
        slots = split * SPLIT_LEN + start + tl.arange(0, BLOCK_L)
        seen = (slots < visible) & (slots < CACHE_LEN)
        offsets = slots[:, None] * HEAD_DIM + dims[None, :]
        k = tl.load(k_base + offsets, mask=seen[:, None], other=0.0).to(tl.float32)
        scores = tl.where(seen, tl.sum(k * q[None, :], axis=1), float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, axis=0))
        # Nothing seen yet (a split past pos): subtract 0, not -inf, so exp gives 0, never NaN.
        anchor = tl.where(new_best == float("-inf"), 0.0, new_best)
        weights = tl.exp(scores - anchor)
        shrink = tl.exp(best - anchor)
        v = tl.load(v_base + offsets, mask=seen[:, None], other=0.0).to(tl.float32)
        total = total * shrink + tl.sum(weights, axis=0)
        acc = acc * shrink + tl.sum(weights[:, None] * v, axis=0)
        best = new_best
    if SPLITS == 1:
        out = acc / total
        tl.store(out_ptr + q_row + dims, out.to(out_ptr.dtype.element_ty))
    else:
        part = (seq * HEADS + head) * SPLITS + split
        tl.store(part_acc_ptr + part * HEAD_DIM + dims, acc)
        tl.store(part_stats_ptr + part * 2, best)
        tl.store(part_stats_ptr + part * 2 + 1, total)


@triton.jit
def _decode_attention_combine_kernel(
    part_acc_ptr,
    part_stats_ptr,
    out_ptr,
    HEADS,
    HEAD_DIM: tl.constexpr,
    SPLITS: tl.constexpr,
    SPLITS_PAD: tl.constexpr,
):
    """The splits of one query head of one sequence merged: each split's sums rescaled to the
    largest maximum (split 0 always holds slot 0, so that maximum is finite), then normalised."""
    head = tl.program_id(0)
    seq = tl.program_id(1)
    dims = tl.arange(0, HEAD_DIM)
    splits = tl.arange(0, SPLITS_PAD)
    real = splits < SPLITS
    parts = (seq * HEADS + head) * SPLITS + splits
    best = tl.load(part_stats_ptr + parts * 2, mask=real, other=float("-inf"))
    total = tl.load(part_stats_ptr + parts * 2 + 1, mask=real, other=0.0)
    acc = tl.load(part_acc_ptr + parts[:, None] * HEAD_DIM + dims[None, :], mask=real[:, None], other=0.0)
    scale = tl.exp(best - tl.max(best, axis=0))
    out = tl.sum(scale[:, None] * acc, axis=0) / tl.sum(scale * total, axis=0)
    tl.store(out_ptr + (seq * HEADS + head) * HEAD_DIM + dims, out.to(out_ptr.dtype.element_ty))


# -- batches of B sequences -------------------------------------------------------------------------
# B > 1 sequences share one position (the static generator's prompts have one length), so a step
# is B activation rows against the same weights. Each program reads its tile of weight rows once
# and applies it to all B rows with tl.dot: the weight tile [2 * BLOCK_N, BLOCK_K] against the
# activations' transpose [BLOCK_K, ROWS_PAD] (B rows padded to at least 16, the padding masked:
# its loads move no bytes). The kernel stays bound by the weight stream, so the tensor cores'
# wasted padded columns cost nothing, and registers hold only the [2 * BLOCK_N, ROWS_PAD] FP32
# accumulator (per-row FMA accumulation would need B x BLOCK_N x BLOCK_K registers). With the
# activations as the first operand instead (M = ROWS_PAD = 16 or 32, below wgmma's 64), the
# tiles that fold an RMSNorm in read weights at a third to a half of the rate
# (benchmarks/decode_tiles.py).
#
# A program's 2 * BLOCK_N weight rows are one tile: two kernels need rows in pairs (gate with up,
# a rotary dimension with its partner half a head away), so their tiles interleave the pairs
# (row 2j is a, row 2j + 1 is b) and the epilogue splits the accumulator's columns into a and b.
# Every program re-reads the B activation rows (from L2): B / (2 * BLOCK_N) activation bytes per
# weight byte, which is why the batched tiles are taller than batch 1's, and why the GEMVs with
# 4096 outputs stop at 32 rows (128 programs: about one per SM of an H100 / H200).


@triton.jit
def _rows_step(
    acc,
    squares,
    x_tile,
    w_tile,
    g_ptr,
    ks,
    K: tl.constexpr,
    x_ok,
    w_ok,
    MASK_K: tl.constexpr,
    MASK_N: tl.constexpr,
    NORM: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One BLOCK_K step of _rows: acc [TILE, ROWS_PAD] += W @ x^T (x * g with a norm).

    The weight tile is tl.dot's first operand and the activations its second, so the M of the
    product is the weight rows (64 or 128 reach Hopper's wgmma, which needs M >= 64) and the
    loads feed the tensor cores without detours; only a norm puts arithmetic (x * g) between
    the activation load and the dot. The sum of squares comes from the same loaded tile.
    """
    if MASK_K:
        k_ok = ks < K
        x = tl.load(x_tile + ks[None, :], mask=x_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_tile + ks[None, :], mask=w_ok[:, None] & k_ok[None, :], other=0.0)
        if NORM:
            xf = x.to(tl.float32)
            squares += tl.sum(xf * xf, axis=1)
            x = xf * tl.load(g_ptr + ks, mask=k_ok, other=0.0).to(tl.float32)[None, :]
    else:
        x = tl.load(x_tile + ks[None, :], mask=x_ok[:, None], other=0.0)
        if MASK_N:
            w = tl.load(w_tile + ks[None, :], mask=w_ok[:, None], other=0.0)
        else:
            w = tl.load(w_tile + ks[None, :])
        if NORM:
            xf = x.to(tl.float32)
            squares += tl.sum(xf * xf, axis=1)
            x = xf * tl.load(g_ptr + ks).to(tl.float32)[None, :]
    acc = tl.dot(w, tl.trans(x.to(w.dtype)), acc, input_precision=PRECISION)
    return acc, squares


@triton.jit
def _rows(
    x_ptr,
    w_ptr,
    b_ptr,
    g_ptr,
    rows,
    ok,
    K: tl.constexpr,
    eps,
    BATCH,
    ROWS_PAD: tl.constexpr,
    NORM: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    TILE: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """rms_norm(x[r], g) @ W[rows]^T [+ b[rows]] for every activation row r < BATCH: FP32
    [ROWS_PAD, TILE] (rows r >= BATCH are zeros; the caller masks them).

    Accumulated as its transpose [TILE, ROWS_PAD] (see _rows_step) and turned once at the end,
    so the epilogues see a row per sequence. The RMSNorm scale 1 / RMS(x[r]) is one number per
    activation row, applied to that row's finished dot products (each row's own sum of squares
    over K).
    """
    K_FULL: tl.constexpr = (K // BLOCK_K) * BLOCK_K
    offs_k = tl.arange(0, BLOCK_K)
    seqs = tl.arange(0, ROWS_PAD)
    x_ok = seqs < BATCH
    x_tile = x_ptr + seqs[:, None] * K
    w_tile = w_ptr + rows[:, None].to(tl.int64) * K
    acc = tl.zeros((TILE, ROWS_PAD), dtype=tl.float32)
    squares = tl.zeros((ROWS_PAD,), dtype=tl.float32)
    for k0 in range(0, K_FULL, BLOCK_K):
        acc, squares = _rows_step(
            acc, squares, x_tile, w_tile, g_ptr, k0 + offs_k, K, x_ok, ok, False, not EVEN_N, NORM, PRECISION
        )
    if K_FULL < K:
        acc, squares = _rows_step(
            acc,
            squares,
            x_tile,
            w_tile,
            g_ptr,
            K_FULL + offs_k,
            K,
            x_ok,
            ok,
            True,
            not EVEN_N,
            NORM,
            PRECISION,
        )
    acc = tl.trans(acc)
    if NORM:
        acc = acc * _rms_scale(squares, K, eps)[:, None]
    if HAS_BIAS:
        acc = _add_loaded(acc, b_ptr, rows, ok)
    return acc


@triton.jit
def _pairs(acc, ROWS_PAD: tl.constexpr, BLOCK_N: tl.constexpr):
    """Interleaved columns (a0, b0, a1, b1, ...) of a [ROWS_PAD, 2 * BLOCK_N] tile as a and b."""
    return tl.split(tl.reshape(acc, (ROWS_PAD, BLOCK_N, 2)))


@triton.jit
def _linear_rows_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    g_ptr,
    res_ptr,
    out_ptr,
    N,
    K: tl.constexpr,
    eps,
    BATCH,
    ROWS_PAD: tl.constexpr,
    NORM: tl.constexpr,
    RESIDUAL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """out[r] = [res[r] +] W @ norm(x[r]) [+ b] for 2 * BLOCK_N rows of W and every row r."""
    rows = tl.program_id(0) * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
    ok = rows < N
    y = _rows(
        x_ptr,
        w_ptr,
        b_ptr,
        g_ptr,
        rows,
        ok,
        K,
        eps,
        BATCH,
        ROWS_PAD,
        NORM,
        HAS_BIAS,
        2 * BLOCK_N,
        BLOCK_K,
        EVEN_N,
        PRECISION,
    )
    seqs = tl.arange(0, ROWS_PAD)
    where = seqs[:, None] * N + rows[None, :]
    mask = (seqs < BATCH)[:, None] & ok[None, :]
    if RESIDUAL:
        y = _add_loaded(y, res_ptr, where, mask)
    _store(out_ptr + where, y, mask)


@triton.jit
def _swiglu_rows_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    g_ptr,
    out_ptr,
    FFN,
    K: tl.constexpr,
    eps,
    BATCH,
    ROWS_PAD: tl.constexpr,
    NORM: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """out[r, i] = silu(gate_i . norm(x[r])) * (up_i . norm(x[r])) for BLOCK_N values of i."""
    first = tl.program_id(0) * BLOCK_N
    tile = tl.arange(0, 2 * BLOCK_N)
    pair = first + tile // 2
    rows = pair + (tile % 2) * FFN  # gate row i, then up row i
    y = _rows(
        x_ptr,
        w_ptr,
        b_ptr,
        g_ptr,
        rows,
        pair < FFN,
        K,
        eps,
        BATCH,
        ROWS_PAD,
        NORM,
        HAS_BIAS,
        2 * BLOCK_N,
        BLOCK_K,
        EVEN_N,
        PRECISION,
    )
    gate, up = _pairs(y, ROWS_PAD, BLOCK_N)
    h = _silu_mul(gate, up)
    cols = first + tl.arange(0, BLOCK_N)
    seqs = tl.arange(0, ROWS_PAD)
    mask = (seqs < BATCH)[:, None] & (cols < FFN)[None, :]
    _store(out_ptr + seqs[:, None] * FFN + cols[None, :], h, mask)


@triton.jit
def _qkv_rope_rows_kernel(
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
    BATCH,
    ROWS_PAD: tl.constexpr,
    NORM: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """_qkv_rope_kernel for every sequence r < BATCH: program (h, j) as there; q into q[r]
    [HEADS * HEAD_DIM], k and v into slot `pos` of sequence r's cache ([BATCH, KV_HEADS,
    CACHE_LEN, HEAD_DIM]). All sequences are at the same position, so one angle serves them all.
    """
    HALF: tl.constexpr = HEAD_DIM // 2
    head = tl.program_id(0)
    tile = tl.arange(0, 2 * BLOCK_N)
    pair = tl.program_id(1) * BLOCK_N + tile // 2
    rows = head * HEAD_DIM + pair + (tile % 2) * HALF  # dimension i, then its partner i + HALF
    y = _rows(
        x_ptr,
        w_ptr,
        b_ptr,
        g_ptr,
        rows,
        pair < HALF,
        K,
        eps,
        BATCH,
        ROWS_PAD,
        NORM,
        HAS_BIAS,
        2 * BLOCK_N,
        BLOCK_K,
        EVEN_N,
        PRECISION,
    )
    a, b = _pairs(y, ROWS_PAD, BLOCK_N)
    dims = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = dims < HALF
    pos = tl.load(pos_ptr)
    if head < HEADS + KV_HEADS:  # queries and keys
        a, b = _rotate(a, b, cos_ptr, sin_ptr, pos, dims, ok, HEAD_DIM)
    seqs = tl.arange(0, ROWS_PAD)[:, None]
    mask = (seqs < BATCH) & ok[None, :]
    q_head, kv_head = seqs * HEADS + head, seqs * KV_HEADS + head
    dest = _qkv_dest(
        q_ptr,
        k_cache_ptr,
        v_cache_ptr,
        pos,
        head,
        q_head,
        kv_head,
        dims,
        HEADS,
        KV_HEADS,
        CACHE_LEN,
        HEAD_DIM,
    )
    _store(dest, a, mask)
    _store(dest + HALF, b, mask)


# -- launch configuration ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class GemvConfig:
    """Tile sizes of one GEMV launch: 2 * block_n weight rows per program, block_k columns a step."""

    block_n: int = 8
    block_k: int = 512
    num_warps: int = 4
    num_stages: int = 3


DEFAULT_CONFIG = GemvConfig()
MIN_DOT = 16  # tl.dot's smallest M, N and K on NVIDIA GPUs (older Tritons): rows and tiles pad up to it
MAX_BATCH = 32  # the batched tiles' accumulator [rows padded, 2 * block_n]; see rows_pad


def _pow2_at_most(limit: int, cap: int) -> int:
    """The largest power of two <= min(limit, cap) (at least 1)."""
    return 1 << max(0, int(math.log2(max(1, min(limit, cap)))))


def rows_pad(batch: int) -> int:
    """Activation rows a batched tile holds: the batch rounded up to a power of two, at least 16."""
    return max(MIN_DOT, 1 << max(0, (batch - 1).bit_length()))


def _fit(
    config: GemvConfig, rows: int, k: int, rows_per_program: int = 1, *, batched: bool = False
) -> tuple[int, int, bool]:
    """block_n and block_k shrunk for small shapes (tiny models), and whether the programs'
    rows cover `rows` exactly (no row masks). Batched tiles keep tl.dot's minimum (2 * block_n
    and block_k at least 16), masking what the shape does not fill."""
    block_n = _pow2_at_most(rows, config.block_n)
    block_k = _pow2_at_most(k, config.block_k)
    if batched:
        block_n = max(block_n, MIN_DOT // 2)
        block_k = max(block_k, MIN_DOT)
    return block_n, block_k, rows % (block_n * rows_per_program) == 0


def _launch_kwargs(num_warps: int, num_stages: int | None = None) -> dict[str, int]:
    """Warps (and stages) for a compiled launch; the interpreter takes neither."""
    if INTERPRETED:
        return {}
    tuning = {"num_warps": num_warps}
    if num_stages is not None:
        tuning["num_stages"] = num_stages
    return tuning


def _batch(x: torch.Tensor) -> int:
    """Sequences in an activation: x [K] is one, x [B, K] is B (contiguous rows)."""
    if x.dim() == 1:
        return 1
    if x.dim() != 2 or not x.is_contiguous():
        raise ValueError(f"activations must be [K] or contiguous [batch, K], got {tuple(x.shape)}")
    if x.shape[0] > MAX_BATCH:
        raise ValueError(f"the decode kernels run up to {MAX_BATCH} sequences, not {x.shape[0]}")
    return x.shape[0]


def _dot_precision(weight: torch.Tensor) -> str | None:
    """FP32 weights multiply in full FP32 (no TF32 rounding); 16-bit ones in their own type."""
    return "ieee" if weight.dtype == torch.float32 else None


def _launch_gemv(
    kernels: tuple[Any, Any],
    grid: Callable[[int], tuple[int, ...]],
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    norm_weight: torch.Tensor | None,
    args: tuple[Any, ...],
    *,
    rows: int,
    rows_per_program: int = 1,
    config: GemvConfig,
    **flags: Any,
) -> None:
    """Launch a GEMV kernel pair (batch-1 kernel, batched tile): the first for one sequence, the
    second for more, which also takes the batch, its padded rows and the tl.dot precision.

    Both take x, the weight, the bias and the RMSNorm weight first (an absent one as a tensor
    they never read, with HAS_BIAS / NORM False), then `args`, then the constexprs `flags` by
    name. The tiles are fitted (_fit) to the weight's K and to `rows`, what one grid axis covers
    in rows_per_program blocks of block_n a program (N, the FFN width, half a head);
    grid(block_n) is the launch grid.
    """
    single, tile = kernels
    batch = _batch(x)
    batched = batch > 1
    block_n, block_k, even_n = _fit(config, rows, weight.shape[1], rows_per_program, batched=batched)
    meta = {"BLOCK_N": block_n, "BLOCK_K": block_k, "EVEN_N": even_n}
    if batched:
        meta |= {"BATCH": batch, "ROWS_PAD": rows_pad(batch), "PRECISION": _dot_precision(weight)}
    kernel = tile if batched else single
    kernel[grid(block_n)](
        x,
        weight,
        bias if bias is not None else weight,
        norm_weight if norm_weight is not None else x,
        *args,
        NORM=norm_weight is not None,
        HAS_BIAS=bias is not None,
        **flags,
        **meta,
        **_launch_kwargs(config.num_warps, config.num_stages),
    )


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
    """out = [residual +] weight @ rms_norm(x, norm_weight) [+ bias] for x [K] (one token) or
    x [B, K] (one token of each of B sequences; out and residual then [B, N]).

    `residual` may be `out` itself (an in-place residual add: each element is read and written by
    the same program). `out` may be FP32 (logits) while the weights are 16-bit. One sequence runs
    the batch-1 GEMV (_linear_kernel), more the batched tile (_linear_rows_kernel).
    """
    n, k = weight.shape
    _launch_gemv(
        (_linear_kernel, _linear_rows_kernel),
        lambda block_n: (triton.cdiv(n, 2 * block_n),),
        x,
        weight,
        bias,
        norm_weight,
        (residual if residual is not None else out, out, n, k, eps),
        rows=n,
        rows_per_program=2,
        config=config,
        RESIDUAL=residual is not None,
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
    """out [ffn] = silu(gate @ rms_norm(x)) * (up @ rms_norm(x)), weight = gate [ffn, K] over up;
    x [B, K] and out [B, ffn] for B sequences."""
    two_ffn, k = weight.shape
    ffn = two_ffn // 2
    _launch_gemv(
        (_swiglu_kernel, _swiglu_rows_kernel),
        lambda block_n: (triton.cdiv(ffn, block_n),),
        x,
        weight,
        bias,
        norm_weight,
        (out, ffn, k, eps),
        rows=ffn,
        config=config,
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
    """q/k/v of one token per sequence; rotary on q and k at `pos`; k and v stored in cache
    slot `pos`.

    x [K] or [B, K]; q_out [B * heads * head_dim] in any shape; k_cache / v_cache [B, kv_heads,
    cache_len, head_dim] (contiguous; [kv_heads, cache_len, head_dim] for one sequence); cos /
    sin [cache_len, head_dim] FP32 (transformers' Llama layout: the angle table repeats per half).
    """
    if head_dim % 2:
        raise ValueError("rotary positions need an even head size")
    half = head_dim // 2
    k = weight.shape[1]
    batch = _batch(x)
    if k_cache.numel() % batch or not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("the caches must be contiguous [batch, kv_heads, cache_len, head_dim]")
    _launch_gemv(
        (_qkv_rope_kernel, _qkv_rope_rows_kernel),
        lambda block_n: (heads + 2 * kv_heads, triton.cdiv(half, block_n)),
        x,
        weight,
        bias,
        norm_weight,
        (q_out, k_cache, v_cache, cos, sin, pos, k, eps, heads, kv_heads, k_cache.shape[-2]),
        rows=half,
        config=config,
        HEAD_DIM=head_dim,
    )


# Flash-decoding: a cache longer than this many slots (one block of the loop) is cut into splits
# whose programs run side by side, then merged; one block is walked by one program a head (no
# merge kernel). On an H200 a 7B model's 32 heads at batch 1 took 8.2 us a walk over a 192-slot
# cache and 4.8 us in three splits with the merge, 5.1 / 4.5 us at 128 slots, 33.9 / 8.3 us at 576
# (benchmarks/decode_kernels.py --attention-sweep; decode-attention-splits-h200-2026-12-04.json).
ATTENTION_SPLIT_MIN_SLOTS = 64
# Splits are sized so that a step launches at least this many programs per SM (heads x sequences x
# splits), and are never more than MAX_ATTENTION_SPLITS (the merge holds them all in registers).
# On the H200 (32 heads, batch 1) 4 a SM beat 2 from 1,088 slots up (14.4 -> 11.0 us, 24.3 -> 18.1
# at 2,112, 41.8 -> 31.2 at 4,160); 8 was no better overall (GQA at 4,160 slots: 28.7 against 24.3).
ATTENTION_PROGRAMS_PER_SM = 4
MAX_ATTENTION_SPLITS = 64


def attention_splits(
    cache_len: int,
    programs: int,
    sm_count: int,
    block_l: int,
    *,
    min_slots: int | None = None,
    programs_per_sm: int | None = None,
) -> tuple[int, int]:
    """(splits, slots per split) of a cache of `cache_len` slots for `programs` (head, sequence)
    pairs on `sm_count` SMs: (1, cache_len) at or below `min_slots` (ATTENTION_SPLIT_MIN_SLOTS),
    else enough splits for `programs_per_sm` (ATTENTION_PROGRAMS_PER_SM) programs per SM, each a
    whole number of blocks."""
    if cache_len <= (ATTENTION_SPLIT_MIN_SLOTS if min_slots is None else min_slots):
        return 1, cache_len
    per_sm = ATTENTION_PROGRAMS_PER_SM if programs_per_sm is None else programs_per_sm
    want = min(MAX_ATTENTION_SPLITS, max(1, math.ceil(per_sm * sm_count / programs)))
    split_len = block_l * math.ceil(cache_len / (block_l * want))
    return math.ceil(cache_len / split_len), split_len


def _sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of the device (the CPU interpreter: a small GPU's 8)."""
    if device.type != "cuda":
        return 8
    return torch.cuda.get_device_properties(device).multi_processor_count


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
    splits: int | None = None,
) -> torch.Tensor:
    """Attention of one token's query heads over cache slots 0..pos (inclusive), per sequence.

    q and out [B * heads * head_dim] in any shape; caches [B, kv_heads, cache_len, head_dim]
    (or [kv_heads, cache_len, head_dim] for one sequence), contiguous. Query head h reads kv
    head h // (heads / kv_heads), as grouped-query attention does. One program per (head,
    sequence) walks a short cache; a long one is cut into splits run side by side and merged
    (flash-decoding: at batch 1 a 7B model has 32 heads for an H200's 132 SMs, and one program's
    walk over 500 slots is a chain of dependent loads). `splits` forces a count (1: one walk);
    None chooses by attention_splits. The splits' partial sums are allocated per call (inside a
    captured graph, once, from its pool).
    """
    head_dim = k_cache.shape[-1]
    if head_dim & (head_dim - 1):
        raise ValueError(f"the decode attention kernel needs a power-of-two head size, got {head_dim}")
    batch = q.numel() // (heads * head_dim)
    if (
        q.numel() != batch * heads * head_dim
        or k_cache.numel() != batch * kv_heads * k_cache.shape[-2] * head_dim
    ):
        raise ValueError("q, out and the caches must hold the same number of sequences")
    cache_len = k_cache.shape[-2]
    if splits is None:
        splits, split_len = attention_splits(cache_len, heads * batch, _sm_count(q.device), block_l)
    else:
        splits = max(1, min(int(splits), math.ceil(cache_len / block_l)))
        split_len = block_l * math.ceil(cache_len / (block_l * splits))
        splits = math.ceil(cache_len / split_len)
    scale = 1.0 / math.sqrt(head_dim)
    # One split: the kernel writes `out` and never touches the partial sums (out stands in).
    part_acc = out if splits == 1 else q.new_empty(batch * heads * splits * head_dim, dtype=torch.float32)
    part_stats = out if splits == 1 else q.new_empty(batch * heads * splits * 2, dtype=torch.float32)
    _decode_attention_kernel[(heads, batch, splits)](
        q,
        k_cache,
        v_cache,
        out,
        part_acc,
        part_stats,
        pos,
        heads,
        kv_heads,
        heads // kv_heads,
        scale,
        CACHE_LEN=cache_len,
        HEAD_DIM=head_dim,
        BLOCK_L=block_l,
        SPLIT_LEN=split_len,
        SPLITS=splits,
        **_launch_kwargs(num_warps),
    )
    if splits == 1:
        return out
    _decode_attention_combine_kernel[(heads, batch)](
        part_acc,
        part_stats,
        out,
        heads,
        HEAD_DIM=head_dim,
        SPLITS=splits,
        SPLITS_PAD=triton.next_power_of_2(splits),
        **_launch_kwargs(num_warps),
    )
    return out
