"""LayerNorm(x + dropout(y)) as one operator: a post-norm encoder's residual site.

The tuned BERT-style encoder (compact_encoder) calls `dropout_add_layer_norm` at each of its
layers' two residual sites. On CUDA with Triton it runs fitbench's two Triton kernels
(norm_kernels: one forward, one backward, the dropout mask a counter-based hash regenerated in
the backward); elsewhere the same arithmetic in PyTorch operators (`reference`), with the same
mask bit for bit, so a CPU run and the tests see what the GPU computes.

It is a torch.library custom operator with its own autograd formula, so torch.compile keeps it
whole (inductor would otherwise split the LayerNorm backward into a row kernel and column
reductions) and a CUDA graph replays it: the mask's seed is a device tensor, never read on the
host. It returns two copies of the normalised output, one in x's type for the residual stream
(fp32 under autocast; bf16 where the tuned encoder keeps a 16-bit stream, as Megatron-LM's bf16
training does) and one in y's 16-bit type for the next matmul (which autocast would otherwise cast
in a kernel of its own); their gradients meet inside the backward kernel. The sum x + dropout(y)
is rounded to x's type before it is normalised and kept, so a 16-bit stream's backward sees the
forward's numbers (sum_dtype).
"""

from __future__ import annotations

import functools
from types import ModuleType

import torch

_MASK32 = 0xFFFFFFFF
#: lowbias32's multipliers (Wellons' hash-prospector); norm_kernels' _lowbias32 spells them too
HASH_MUL_1 = 0x7FEB352D
HASH_MUL_2 = 0x846CA68B
#: the golden-ratio odd constant that spreads step counters over 32 bits before the site is added
KEY_MUL = 0x9E3779B9


def keep_threshold(p: float) -> int:
    """The uint32 value at or above which a hash keeps its element: P(drop) = threshold / 2^32."""
    return min(round(p * 2**32), 2**32 - 1)


def sum_dtype(x_dtype: torch.dtype) -> torch.dtype:
    """The dtype of the sum x + dropout(y) a site keeps for its backward: bf16 for a bf16 residual
    stream (rounded before it is normalised), else fp32 (an fp16 stream's sum is not rounded)."""
    return torch.bfloat16 if x_dtype == torch.bfloat16 else torch.float32


def _mul32(h: torch.Tensor, constant: int) -> torch.Tensor:
    """(h * constant) mod 2^32 for int64 tensors holding uint32 values, without int64 overflow:
    the constant is split into 16-bit halves so no partial product passes 2^48."""
    low, high = constant & 0xFFFF, constant >> 16
    return (h * low + (((h * high) & 0xFFFF) << 16)) & _MASK32


def _lowbias32(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = _mul32(h, HASH_MUL_1)
    h = h ^ (h >> 15)
    h = _mul32(h, HASH_MUL_2)
    return h ^ (h >> 16)


def dropout_keep_reference(seed: torch.Tensor, site: int, shape: tuple[int, int], p: float) -> torch.Tensor:
    """The keep mask the kernels draw for a [rows, cols] site, as a bool tensor on seed's device."""
    seed32 = seed.to(torch.int64) & _MASK32
    key = _lowbias32((_mul32(seed32, KEY_MUL) + site) & _MASK32)
    index = torch.arange(shape[0] * shape[1], device=seed.device, dtype=torch.int64).view(shape) & _MASK32
    return _lowbias32(index ^ key) >= keep_threshold(p)


def reference(
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
    """The forward in PyTorch operators: (out, out in y's dtype, s, mean, 1/std), fp32 arithmetic
    on s in sum_dtype (a bf16 stream keeps and normalises the rounded sum); s empty unless
    `keep_sum`."""
    y32 = y.float()
    if p > 0:
        keep = dropout_keep_reference(seed, site, tuple(x.shape), p)
        y32 = torch.where(keep, y32 * (1.0 / (1.0 - p)), 0.0)
    s = (x.float() + y32).to(sum_dtype(x.dtype)).float()
    mean = s.mean(-1)
    rstd = torch.rsqrt(s.var(-1, unbiased=False) + eps)
    out = (s - mean[:, None]) * rstd[:, None] * weight.float() + bias.float()
    kept = s.to(sum_dtype(x.dtype)) if keep_sum else x.new_empty(0, dtype=sum_dtype(x.dtype))
    return out.to(x.dtype), out.to(y.dtype, copy=True), kept, mean, rstd  # two tensors, never aliases


def reference_backward(
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
    """The backward in PyTorch operators: (dx, dy, dweight, dbias)."""
    s = s.float()
    g = torch.zeros_like(s)
    if dout is not None:
        g = g + dout.float()
    if dout_low is not None:
        g = g + dout_low.float()
    x_hat = (s - mean[:, None]) * rstd[:, None]
    gw = g * weight.float()
    ds = (gw - x_hat * (gw * x_hat).mean(-1, keepdim=True) - gw.mean(-1, keepdim=True)) * rstd[:, None]
    dy = ds
    if p > 0:
        dy = torch.where(dropout_keep_reference(seed, site, tuple(s.shape), p), ds * (1.0 / (1.0 - p)), 0.0)
    dweight = (g * x_hat).sum(0).to(weight.dtype)
    return ds.to(x_dtype), dy.to(y_dtype, copy=True), dweight, g.sum(0).to(weight.dtype)


@functools.cache
def _kernels() -> ModuleType | None:
    """norm_kernels where Triton imports (CUDA machines without it run the reference: the same
    numbers, in PyTorch's operators)."""
    try:
        from fitbench.backends.torch import norm_kernels
    except ImportError:
        return None
    return norm_kernels


@torch.library.custom_op("fitbench::dropout_add_layer_norm", mutates_args=())
def _forward_op(
    x: torch.Tensor,
    y: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    seed: torch.Tensor,
    site: int,
    p: float,
    eps: float,
    keep_sum: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    kernels = _kernels() if x.is_cuda else None
    if kernels is not None:
        return kernels.forward(x, y, weight, bias, seed, site, p, eps, keep_sum)
    return reference(x, y, weight, bias, seed, site, p, eps, keep_sum)


@_forward_op.register_fake
def _(x, y, weight, bias, seed, site, p, eps, keep_sum):  # type: ignore[no-untyped-def]
    rows = x.shape[0]
    stats = x.new_empty(rows, dtype=torch.float32)
    return (
        torch.empty_like(x),
        torch.empty_like(y),
        x.new_empty(x.shape if keep_sum else (0,), dtype=sum_dtype(x.dtype)),
        stats,
        torch.empty_like(stats),
    )


@torch.library.custom_op("fitbench::dropout_add_layer_norm_backward", mutates_args=())
def _backward_op(
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
    kernels = _kernels() if s.is_cuda else None
    if kernels is not None:
        return kernels.backward(dout, dout_low, s, weight, mean, rstd, seed, site, p, x_dtype, y_dtype)
    return reference_backward(dout, dout_low, s, weight, mean, rstd, seed, site, p, x_dtype, y_dtype)


@_backward_op.register_fake
def _(dout, dout_low, s, weight, mean, rstd, seed, site, p, x_dtype, y_dtype):  # type: ignore[no-untyped-def]
    return (
        torch.empty_like(s, dtype=x_dtype),
        torch.empty_like(s, dtype=y_dtype),
        torch.empty_like(weight),
        torch.empty_like(weight),
    )


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    x, y, weight, _bias, seed, site, p, _eps, _keep_sum = inputs
    _out, _out_low, s, mean, rstd = output
    ctx.save_for_backward(s, weight, mean, rstd, seed)
    # s, mean and rstd are outputs only to be saved: no zero gradients made for them (nor for an
    # unused output: the backward kernel skips a missing gradient)
    ctx.set_materialize_grads(False)
    ctx.site, ctx.p, ctx.x_dtype, ctx.y_dtype = site, p, x.dtype, y.dtype


def _backward(ctx, dout, dout_low, _ds, _dmean, _drstd):  # type: ignore[no-untyped-def]
    s, weight, mean, rstd, seed = ctx.saved_tensors
    # the kernels read rows densely: a broadcast gradient (of a sum, say) is made whole first
    dout = None if dout is None else dout.contiguous()
    dout_low = None if dout_low is None else dout_low.contiguous()
    dx, dy, dweight, dbias = _backward_op(
        dout, dout_low, s, weight, mean, rstd, seed, ctx.site, ctx.p, ctx.x_dtype, ctx.y_dtype
    )
    return dx, dy, dweight, dbias, None, None, None, None, None


_forward_op.register_autograd(_backward, setup_context=_setup_context)


def dropout_add_layer_norm(
    x: torch.Tensor,
    y: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    *,
    seed: torch.Tensor,
    site: int,
    p: float,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(LayerNorm(x + dropout(y)) in x's dtype, the same in y's dtype) over the last dimension.

    `seed` is a one-element int64 device tensor (the step counter) and `site` an integer told
    apart per call site: together they choose the mask, so a site's mask changes every step and
    two sites of one step never share one. p = 0 is no dropout (evaluation). Without autograd
    (inference) the sum kept for the backward is not written.
    """
    shape = x.shape
    hidden = shape[-1]
    keep_sum = torch.is_grad_enabled() and any(t.requires_grad for t in (x, y, weight, bias))
    out, out_low, *_ = _forward_op(
        x.reshape(-1, hidden).contiguous(),
        y.reshape(-1, hidden).contiguous(),
        weight,
        bias,
        seed,
        site,
        float(p),
        float(eps),
        keep_sum,
    )
    return out.view(shape), out_low.view(shape)
