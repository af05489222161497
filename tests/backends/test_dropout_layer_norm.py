"""fitbench's fused residual site LayerNorm(x + dropout(y)): its Triton kernels against the PyTorch
reference (under Triton's interpreter on a CPU, compiled on a GPU), the hashed mask's statistics,
the custom operator's autograd, and its life inside torch.compile.

Shapes include column counts no power of two divides and row counts no tile divides (the masked
paths); a padded lane or an unwritten element would show as a difference from the reference.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import torch.nn.functional as F  # noqa: E402

from fitbench.backends.torch import dropout_layer_norm as dln  # noqa: E402
from fitbench.backends.torch import norm_kernels as nk  # noqa: E402

pytestmark = pytest.mark.torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
EPS = 1e-12
#: bf16 outputs may differ by one rounding step where FP32 sums differ in their last bit
BF16_ULP = 2.0**-7


def _inputs(rows: int, cols: int, y_dtype: torch.dtype, seed: int = 0, x_dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g).to(DEVICE, x_dtype)
    y = torch.randn(rows, cols, generator=g).to(DEVICE, y_dtype)
    w = (1.0 + 0.1 * torch.randn(cols, generator=g)).to(DEVICE)
    b = (0.1 * torch.randn(cols, generator=g)).to(DEVICE)
    return x, y, w, b


def _close(got: torch.Tensor, want: torch.Tensor, *, rtol: float, atol: float) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.isfinite(got.float()).all()
    torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol)


SHAPES = [(13, 48, 0.1), (8, 100, 0.0), (9, 768, 0.1), (37, 200, 0.5)]


#: (residual stream, branch): autocast's fp32 stream with a bf16 or an fp32 branch, and the tuned
#: encoder's 16-bit stream (compact_encoder.residual_dtype)
DTYPES = [
    (torch.float32, torch.bfloat16),
    (torch.float32, torch.float32),
    (torch.bfloat16, torch.bfloat16),
]


@pytest.mark.parametrize("rows,cols,p", SHAPES)
@pytest.mark.parametrize("x_dtype,y_dtype", DTYPES)
def test_kernels_compute_what_the_reference_computes(
    rows: int, cols: int, p: float, x_dtype: torch.dtype, y_dtype: torch.dtype
) -> None:
    x, y, w, b = _inputs(rows, cols, y_dtype, x_dtype=x_dtype)
    seed = torch.tensor(11, device=DEVICE)
    got = nk.forward(x, y, w, b, seed, 3, p, EPS)
    want = dln.reference(x, y, w, b, seed, 3, p, EPS)
    assert got[0].dtype == x_dtype and got[2].dtype == dln.sum_dtype(x_dtype)

    def tol(dtype: torch.dtype, fp32: float) -> float:
        return BF16_ULP if dtype == torch.bfloat16 else fp32

    tolerances = (tol(x_dtype, 1e-5), tol(y_dtype, 1e-5), tol(x_dtype, 1e-6), 1e-5, 1e-5)
    for g, r, rtol in zip(got, want, tolerances, strict=True):  # out, out_low, s, mean, rstd
        _close(g, r, rtol=rtol, atol=1e-5)
    gen = torch.Generator().manual_seed(1)
    dout = torch.randn(rows, cols, generator=gen).to(DEVICE, x_dtype)
    dout_low = torch.randn(rows, cols, generator=gen).to(DEVICE, y_dtype)
    s, mean, rstd = want[2], want[3], want[4]
    for d32, d16 in ((dout, dout_low), (dout, None), (None, dout_low)):
        got_b = nk.backward(d32, d16, s, w, mean, rstd, seed, 3, p, x_dtype, y_dtype)
        want_b = dln.reference_backward(d32, d16, s, w, mean, rstd, seed, 3, p, x_dtype, y_dtype)
        for g, r in zip(got_b, want_b, strict=True):
            _close(g, r, rtol=tol(g.dtype, 1e-4), atol=1e-4)


def test_a_16_bit_stream_normalises_the_rounded_sum_it_keeps() -> None:
    """With a bf16 stream the kept sum is bf16(x + dropout(y)) and the statistics are that sum's,
    so the backward's x_hat is the forward's: the mean of the output over a row, minus the bias,
    is zero to FP32 rounding of the rounded sum (not of the unrounded one)."""
    rows, cols = 16, 96
    x, y, w, b = _inputs(rows, cols, torch.bfloat16, seed=8, x_dtype=torch.bfloat16)
    w = torch.ones_like(w)
    seed = torch.tensor(3, device=DEVICE)
    _out, _low, s, mean, rstd = nk.forward(x, y, w, b, seed, 2, 0.1, EPS)
    keep = dln.dropout_keep_reference(seed, 2, (rows, cols), 0.1)
    exact = x.float() + torch.where(keep, y.float() * (1.0 / 0.9), 0.0)
    assert s.dtype == torch.bfloat16 and torch.equal(s, exact.to(torch.bfloat16))
    torch.testing.assert_close(mean, s.float().mean(-1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(rstd, torch.rsqrt(s.float().var(-1, unbiased=False) + EPS), rtol=1e-5, atol=0)


def test_the_kernel_draws_the_reference_mask_bit_for_bit() -> None:
    rows, cols, p = 67, 96, 0.25
    x = torch.zeros(rows, cols, device=DEVICE)
    y = torch.ones(rows, cols, device=DEVICE)
    w, b = torch.ones(cols, device=DEVICE), torch.zeros(cols, device=DEVICE)
    seed = torch.tensor(2**40 + 5, device=DEVICE)  # only the low 32 bits count, in both
    s = nk.forward(x, y, w, b, seed, 7, p, EPS)[2]
    keep = dln.dropout_keep_reference(seed, 7, (rows, cols), p)
    assert torch.equal(s != 0, keep)
    assert torch.equal(s[keep], torch.full_like(s[keep], 1.0 / (1.0 - p)))


def test_the_mask_keeps_one_minus_p_independently_of_position_step_and_site() -> None:
    p, shape = 0.1, (512, 768)
    seed = torch.tensor(3)
    keep = dln.dropout_keep_reference(seed, 1, shape, p).float()
    n = keep.numel()
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(keep.mean().item() - (1 - p)) < 5 * sigma
    # no stripes: every row and every column keeps about 1 - p (binomial spread, 6 sigma)
    assert (keep.mean(1) - (1 - p)).abs().max().item() < 6 * math.sqrt(p * (1 - p) / shape[1])
    assert (keep.mean(0) - (1 - p)).abs().max().item() < 6 * math.sqrt(p * (1 - p) / shape[0])
    # neighbours are not correlated
    pairs = (keep[:, 1:] * keep[:, :-1]).mean().item()
    assert abs(pairs - (1 - p) ** 2) < 6 * math.sqrt((1 - p) ** 2 * (1 - (1 - p) ** 2) / n)
    # another step and another site draw other masks: agreement p^2 + (1-p)^2 as if independent
    independent = p * p + (1 - p) * (1 - p)
    for other in (
        dln.dropout_keep_reference(torch.tensor(4), 1, shape, p),
        dln.dropout_keep_reference(seed, 2, shape, p),
    ):
        agree = (other.float() == keep).float().mean().item()
        assert abs(agree - independent) < 6 * math.sqrt(independent * (1 - independent) / n)


def test_keep_threshold_turns_p_into_a_uint32_cut() -> None:
    assert dln.keep_threshold(0.0) == 0
    assert dln.keep_threshold(0.5) == 2**31
    assert dln.keep_threshold(1.0) == 2**32 - 1


def _explicit(x, y, w, b, seed, site, p):
    """The site in autograd-able PyTorch operators with the same mask."""
    keep = dln.dropout_keep_reference(seed, site, tuple(x.shape), p)
    kept = torch.where(keep, y.float() / (1 - p), 0.0)
    return F.layer_norm(x + kept, (x.shape[-1],), w, b, EPS)


@pytest.mark.parametrize("p", [0.0, 0.1])
def test_the_operator_gradients_match_autograd_of_the_explicit_formula(p: float) -> None:
    rows, cols = 10, 40
    x, y, w, b = _inputs(rows, cols, torch.float32, seed=4)
    seed = torch.tensor(9, device=DEVICE)
    r1 = torch.randn(rows, cols, device=DEVICE)
    r2 = torch.randn(rows, cols, device=DEVICE)
    leaves = [t.clone().requires_grad_() for t in (x, y, w, b)]
    out, out_low = dln.dropout_add_layer_norm(*leaves, seed=seed, site=5, p=p, eps=EPS)
    ((out * r1).sum() + (out_low * r2).sum()).backward()
    twins = [t.clone().requires_grad_() for t in (x, y, w, b)]
    ref = _explicit(*twins, seed, 5, p)
    ((ref * r1).sum() + (ref * r2).sum()).backward()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    for ours, theirs in zip(leaves, twins, strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-5)


def test_opcheck_passes_for_the_custom_operators() -> None:
    x, y, w, b = _inputs(6, 32, torch.bfloat16, seed=2)
    args = (x, y, w.requires_grad_(), b.requires_grad_(), torch.tensor(1, device=DEVICE), 2, 0.1, EPS, True)
    torch.library.opcheck(
        dln._forward_op, args, test_utils=("test_schema", "test_autograd_registration", "test_faketensor")
    )


def test_the_operator_compiles_whole_and_gives_the_eager_numbers() -> None:
    x, y, w, b = _inputs(12, 64, torch.float32, seed=6)
    seed = torch.tensor(21, device=DEVICE)

    def site(x, y, w, b):
        out, out_low = dln.dropout_add_layer_norm(x, y, w, b, seed=seed, site=1, p=0.1, eps=EPS)
        return (out * 2).sum() + out_low.sum()

    leaves = [t.clone().requires_grad_() for t in (x, y, w, b)]
    site(*leaves).backward()
    twins = [t.clone().requires_grad_() for t in (x, y, w, b)]
    torch.compile(site, backend="aot_eager", fullgraph=True)(*twins).backward()
    for ours, theirs in zip(leaves, twins, strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad)


def test_inference_writes_no_sum_and_the_same_outputs() -> None:
    x, y, w, b = _inputs(10, 48, torch.bfloat16, seed=3)
    seed = torch.tensor(5, device=DEVICE)
    with_sum = nk.forward(x, y, w, b, seed, 1, 0.0, EPS, True)
    without = nk.forward(x, y, w, b, seed, 1, 0.0, EPS, False)
    assert with_sum[2].shape == x.shape and without[2].numel() == 0
    for a, c in zip(with_sum[:2] + with_sum[3:], without[:2] + without[3:], strict=True):
        assert torch.equal(a, c)
    with torch.no_grad():
        out, out_low = dln.dropout_add_layer_norm(x, y, w, b, seed=seed, site=1, p=0.0, eps=EPS)
    torch.testing.assert_close(out, with_sum[0])
    torch.testing.assert_close(out_low, with_sum[1])


def test_shapes_beyond_two_dimensions_normalise_the_last() -> None:
    x = torch.randn(2, 5, 24, device=DEVICE)
    y = torch.randn(2, 5, 24, device=DEVICE)
    w, b = torch.ones(24, device=DEVICE), torch.zeros(24, device=DEVICE)
    out, out_low = dln.dropout_add_layer_norm(
        x, y, w, b, seed=torch.tensor(0, device=DEVICE), site=1, p=0.0, eps=EPS
    )
    assert out.shape == x.shape and out_low.shape == x.shape
    torch.testing.assert_close(out, F.layer_norm(x + y, (24,), w, b, EPS), rtol=1e-5, atol=1e-5)


#: compiled in a child process: this one's Triton interprets (no GPU), which a compile must not
SM90_COMPILE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import decode_kernels_sm90 as sm90  # sets TRITON_INTERPRET=0 before Triton is imported
from fitbench.backends.torch import norm_kernels as nk

def forward(stream):
    return dict(
        x_ptr=f"*{stream}", y_ptr="*bf16", w_ptr="*fp32", b_ptr="*fp32", s_ptr=f"*{stream}",
        out_ptr=f"*{stream}", out_low_ptr="*bf16", mean_ptr="*fp32", rstd_ptr="*fp32", seed_ptr="*i64",
        n_rows="i32", n_cols="i32", site="i32", threshold="i64", scale="fp32", eps="fp32",
        DROPOUT=True, STORE_SUM=True, ROUND_SUM=stream == "bf16", BLOCK_M=nk.FORWARD_ROWS, BLOCK_N=1024,
    )

def backward(stream):
    return dict(
        dout_ptr=f"*{stream}", dout_low_ptr="*bf16", s_ptr=f"*{stream}", w_ptr="*fp32", mean_ptr="*fp32",
        rstd_ptr="*fp32", seed_ptr="*i64", dx_ptr=f"*{stream}", dy_ptr="*bf16", part_ptr="*fp32",
        n_rows="i32", n_cols="i32", site="i32", threshold="i64", scale="fp32",
        HAS_DOUT=True, HAS_DOUT_LOW=True, DROPOUT=True, ROWS_PER_PROGRAM=16,
        STAGES=nk.BACKWARD_STAGES, BLOCK_M=nk.BACKWARD_ROWS, BLOCK_N=1024,
    )

out = {}
for stream in ("fp32", "bf16"):
    fwd, bwd = nk._forward_kernel, nk._backward_kernel
    out[f"forward {stream}"] = sm90.compile_kernel(fwd, forward(stream), None, num_warps=nk.FORWARD_WARPS)
    out[f"backward {stream}"] = sm90.compile_kernel(bwd, backward(stream), None, num_warps=nk.BACKWARD_WARPS)
print(json.dumps(out))
"""


def test_the_kernels_compile_for_an_h200_with_either_stream():
    """Triton's own ptxas compiles the forward and backward kernels for sm_90 (H100 / H200) at
    BERT-base's width, with autocast's FP32 stream and with the tuned encoder's bf16 one (whose
    rounding is integer arithmetic on the sum's bits), without a GPU and without spilling."""
    nvidia = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    if not (nvidia / "ptxas").exists() or not (nvidia / "cuobjdump").exists():
        pytest.skip("this Triton ships no ptxas / cuobjdump")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "TRITON_INTERPRET": "0"}
    done = subprocess.run(
        [sys.executable, "-c", SM90_COMPILE, str(root / "benchmarks")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kernels = json.loads(done.stdout.splitlines()[-1])
    assert sorted(kernels) == ["backward bf16", "backward fp32", "forward bf16", "forward fp32"]
    for name, usage in kernels.items():
        assert usage["registers"] and usage["stack_bytes"] == 0, (name, usage)
