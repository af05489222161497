"""Triton kernels for a post-norm encoder's residual site: LayerNorm(x + dropout(y)), forward and backward.

Why fitbench has kernels of its own here: in the tuned BERT-base step (seq 512, b16, H200) the
24 residual sites of the encoder layers cost about 1.9 ms a step compiled by inductor, against
~0.6 ms for the bytes they must move. Inductor splits a LayerNorm backward into a row kernel
(the input gradient) and separate column reductions (the weight and bias gradients read the
gradient and the normalised input a second time), and its dropout either draws each number with
a Philox call of its own inside the fused kernel or (fallback_random) runs aten's dropout kernel
and reads its mask back. Here a site is one forward and one backward kernel:

  forward   per row: the keep mask from a counter-based hash, s = x + keep * y / (1 - p) at
            x's width, its mean and 1/std, out = (s - mean) / std * w + b written at x's width
            (the residual stream: fp32 under autocast, bf16 in the tuned encoder's 16-bit
            stream) and in y's 16-bit type (the next matmul's input), s kept for the backward
  backward  per row: g = dout (x's type) + dout (16-bit), the input gradient of s (to x as is, to
            y through the same mask, regenerated, not stored); each program also sums its rows'
            g * x_hat and g into per-program partials of the weight and bias gradients (stored
            column-major), which two short sums finish

On an H200 one BERT-base site (8192 tokens x 768) takes 27 us forward and 31 us in the backward
kernel (+ 3 us of sums), against 95 us of inductor's kernels for the same site
(benchmarks/norm_kernels_profile.py; norm-kernels-profile-h200-2026-12-04.json); the forward
moves its 16 bytes an element at 3.7 TB/s.

The dropout mask is a hash of (seed, site, element index): lowbias32 (a 32-bit multiply-xorshift
finaliser) of the index mixed with a per-step, per-site key. It costs a few integer operations an
element, where a Philox-4x32-10 call costs ten rounds of multiplies; it needs no stored mask (the
backward recomputes it) and no generator state on the host, so a CUDA graph replays it with the
seed read from a device tensor that the step increments. `dropout_keep_reference` computes the
same bits with PyTorch integer operations: that is what the CPU path runs and what the tests
compare these kernels with.

On a machine without CUDA the kernels are defined under Triton's interpreter (NumPy on CPU
tensors), which is how the tests check them.
"""

from __future__ import annotations

import os
import sys

import torch

if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton
import triton.language as tl

from fitbench.backends.torch.dropout_layer_norm import keep_threshold, sum_dtype

#: launch settings, read at each call; chosen on the H200 by benchmarks/dropout_norm.py
#: --fused-configs (dropout-norm-h200-2026-12-04-configs*.json: one row an iteration in the
#: backward, pipelined, ran its forward + backward in 112-122 us against 154-187 us for tiles of
#: 2-16 rows). Rows a forward program normalises side by side (a [rows, hidden] tile) and its warps
FORWARD_ROWS = 4
FORWARD_WARPS = 8
#: rows a backward program handles per iteration, the programs per streaming multiprocessor (which
#: sets how many iterations a program makes), its warps, and the loop's software-pipeline stages
BACKWARD_ROWS = 1
BACKWARD_PROGRAMS_PER_SM = 4
BACKWARD_WARPS = 4
BACKWARD_STAGES = 3


@triton.jit
def _lowbias32(h):
    """Wellons' lowbias32 finaliser on uint32 values (dropout_layer_norm.HASH_MUL_1, _2)."""
    h = h ^ (h >> 16)
    h = h * 0x7FEB352D
    h = h ^ (h >> 15)
    h = h * 0x846CA68B
    h = h ^ (h >> 16)
    return h


@triton.jit
def _round_to_bf16(v):
    """fp32 values rounded to the nearest bf16 (ties to even), still fp32. Integer operations, so
    that Triton's interpreter, whose float downcast truncates, rounds as the GPU does."""
    bits = v.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _keep(seed_ptr, site, offsets, threshold):
    """True where the element at `offsets` (row * n_cols + col) survives dropout:
    lowbias32(index ^ key(seed, site)) >= threshold, the index taken modulo 2^32."""
    seed = tl.load(seed_ptr).to(tl.uint32)
    key = _lowbias32(seed * 0x9E3779B9 + site.to(tl.uint32))  # dropout_layer_norm.KEY_MUL
    return _lowbias32(offsets.to(tl.uint32) ^ key) >= threshold.to(tl.uint32)


@triton.jit(do_not_specialize=["site", "threshold"])
def _forward_kernel(
    x_ptr,
    y_ptr,
    w_ptr,
    b_ptr,
    s_ptr,
    out_ptr,
    out_low_ptr,
    mean_ptr,
    rstd_ptr,
    seed_ptr,
    n_rows,
    n_cols,
    site,
    threshold,
    scale,
    eps,
    DROPOUT: tl.constexpr,
    STORE_SUM: tl.constexpr,
    ROUND_SUM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    col_ok = cols < n_cols
    ok = row_ok[:, None] & col_ok[None, :]
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=ok, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=ok, other=0.0).to(tl.float32)
    if DROPOUT:
        y = tl.where(_keep(seed_ptr, site, offsets, threshold), y * scale, 0.0)
    s = x + y
    if ROUND_SUM:  # a bf16 stream normalises the rounded sum it keeps: the backward's x_hat is ours
        s = _round_to_bf16(s)
    mean = tl.sum(s, axis=1) / n_cols
    centred = tl.where(ok, s - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    out = centred * rstd[:, None] * w[None, :] + b[None, :]
    if STORE_SUM:
        tl.store(s_ptr + offsets, s.to(s_ptr.dtype.element_ty), mask=ok)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=ok)
    tl.store(out_low_ptr + offsets, out.to(out_low_ptr.dtype.element_ty), mask=ok)
    tl.store(mean_ptr + rows, mean, mask=row_ok)
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)


@triton.jit(do_not_specialize=["site", "threshold"])
def _backward_kernel(
    dout_ptr,
    dout_low_ptr,
    s_ptr,
    w_ptr,
    mean_ptr,
    rstd_ptr,
    seed_ptr,
    dx_ptr,
    dy_ptr,
    part_ptr,
    n_rows,
    n_cols,
    site,
    threshold,
    scale,
    HAS_DOUT: tl.constexpr,
    HAS_DOUT_LOW: tl.constexpr,
    DROPOUT: tl.constexpr,
    ROWS_PER_PROGRAM: tl.constexpr,
    STAGES: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    program = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_N], dtype=tl.float32)
    first = program * ROWS_PER_PROGRAM
    for start in tl.range(0, ROWS_PER_PROGRAM, BLOCK_M, num_stages=STAGES):
        rows = first + start + tl.arange(0, BLOCK_M)
        row_ok = rows < n_rows
        ok = row_ok[:, None] & col_ok[None, :]
        offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
        g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if HAS_DOUT:
            g += tl.load(dout_ptr + offsets, mask=ok, other=0.0).to(tl.float32)
        if HAS_DOUT_LOW:
            g += tl.load(dout_low_ptr + offsets, mask=ok, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
        s = tl.load(s_ptr + offsets, mask=ok, other=0.0).to(tl.float32)
        x_hat = tl.where(ok, (s - mean[:, None]) * rstd[:, None], 0.0)
        dw += tl.sum(g * x_hat, axis=0)
        db += tl.sum(g, axis=0)
        gw = g * w[None, :]
        c1 = tl.sum(gw * x_hat, axis=1) / n_cols
        c2 = tl.sum(gw, axis=1) / n_cols
        ds = (gw - x_hat * c1[:, None] - c2[:, None]) * rstd[:, None]
        tl.store(dx_ptr + offsets, ds.to(dx_ptr.dtype.element_ty), mask=ok)
        if DROPOUT:
            ds = tl.where(_keep(seed_ptr, site, offsets, threshold), ds * scale, 0.0)
        tl.store(dy_ptr + offsets, ds.to(dy_ptr.dtype.element_ty), mask=ok)
    # column-major partials ([2, n_cols, programs]): the finishing sum runs along contiguous rows
    programs = tl.num_programs(0)
    tl.store(part_ptr + cols * programs + program, dw, mask=col_ok)
    tl.store(part_ptr + (n_cols + cols) * programs + program, db, mask=col_ok)


def _block_n(n_cols: int) -> int:
    return triton.next_power_of_2(n_cols)


def _programs(device: torch.device, n_rows: int) -> int:
    # the interpreter (CPU): a few programs, each looping over several row blocks
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    return max(1, min(n_rows, sms * BACKWARD_PROGRAMS_PER_SM))


def forward(
    x: torch.Tensor,
    y: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    seed: torch.Tensor,
    site: int,
    p: float,
    eps: float,
    keep_sum: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out, out in y's dtype, s = x + dropout(y), mean, 1/std) for 2-D contiguous x and y; s (in
    sum_dtype(x.dtype)) is empty unless `keep_sum` (a backward will need it)."""
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    out_low = torch.empty_like(y)
    s = torch.empty(x.shape if keep_sum else (0,), device=x.device, dtype=sum_dtype(x.dtype))
    mean = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    rstd = torch.empty_like(mean)
    block_n = _block_n(n_cols)
    _forward_kernel[(triton.cdiv(n_rows, FORWARD_ROWS),)](
        x, y, weight, bias, s, out, out_low, mean, rstd, seed,
        n_rows, n_cols, site, keep_threshold(p), 1.0 / (1.0 - p) if p > 0 else 1.0, eps,
        DROPOUT=p > 0, STORE_SUM=keep_sum, ROUND_SUM=s.dtype == torch.bfloat16,
        BLOCK_M=FORWARD_ROWS, BLOCK_N=block_n,
        num_warps=FORWARD_WARPS,
    )  # fmt: skip
    return out, out_low, s, mean, rstd


def backward(
    dout: torch.Tensor | None,
    dout_low: torch.Tensor | None,
    s: torch.Tensor,
    weight: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    seed: torch.Tensor,
    site: int,
    p: float,
    x_dtype: torch.dtype,
    y_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dy, dweight, dbias) from the gradients of the two outputs (either may be None)."""
    n_rows, n_cols = s.shape
    dx = torch.empty(s.shape, device=s.device, dtype=x_dtype)
    dy = torch.empty(s.shape, device=s.device, dtype=y_dtype)
    # a power of two (a compile-time loop bound: one compiled variant per few shapes)
    rows_per_program = max(
        BACKWARD_ROWS, triton.next_power_of_2(triton.cdiv(n_rows, _programs(s.device, n_rows)))
    )
    programs = triton.cdiv(n_rows, rows_per_program)
    parts = torch.empty(2, n_cols, programs, device=s.device, dtype=torch.float32)
    block_n = _block_n(n_cols)
    _backward_kernel[(programs,)](
        dout if dout is not None else s, dout_low if dout_low is not None else s,
        s, weight, mean, rstd, seed, dx, dy, parts,
        n_rows, n_cols, site, keep_threshold(p), 1.0 / (1.0 - p) if p > 0 else 1.0,
        HAS_DOUT=dout is not None, HAS_DOUT_LOW=dout_low is not None, DROPOUT=p > 0,
        ROWS_PER_PROGRAM=rows_per_program, STAGES=BACKWARD_STAGES, BLOCK_M=BACKWARD_ROWS, BLOCK_N=block_n,
        num_warps=BACKWARD_WARPS,
    )  # fmt: skip
    return dx, dy, parts[0].sum(-1).to(weight.dtype), parts[1].sum(-1).to(weight.dtype)
