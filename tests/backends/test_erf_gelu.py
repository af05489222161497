"""erf_gelu, the tuned encoder's exact GELU with A&S 7.1.26's erf: its values and slope against
float64 GELU, its negative tail against F.gelu's, and its dtypes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from fitbench.backends.torch.erf_gelu import AS_MAX_ERROR, erf_gelu, normal_cdf_and_gauss  # noqa: E402

pytestmark = pytest.mark.torch


def test_the_cdf_is_within_the_formula_s_error_of_float64() -> None:
    x = torch.linspace(-12, 12, 400_001)
    cdf, gauss = normal_cdf_and_gauss(x)
    exact = 0.5 * torch.special.erfc(-x.double() / 2**0.5)
    # half the formula's erf error, plus the FP32 rounding of its terms (values up to 1)
    assert (cdf.double() - exact).abs().max().item() < AS_MAX_ERROR / 2 + 2 * 2**-23
    # exp of an FP32 -x^2/2: the argument's rounding (up to 72 * 2^-24) becomes relative error
    torch.testing.assert_close(gauss.double(), torch.exp(-0.5 * x.double() ** 2), rtol=1e-5, atol=1e-30)


def test_values_and_slope_match_float64_gelu() -> None:
    x = torch.linspace(-10, 10, 200_001).requires_grad_()
    erf_gelu(x).sum().backward()
    x64 = x.detach().double().requires_grad_()
    exact = F.gelu(x64)
    exact.sum().backward()
    assert (erf_gelu(x.detach()).double() - exact.detach()).abs().max().item() < 10 * AS_MAX_ERROR
    assert (x.grad.double() - x64.grad).abs().max().item() < 4 * AS_MAX_ERROR


def test_the_negative_tail_keeps_relative_precision_where_fp32_one_plus_erf_loses_it() -> None:
    x = torch.linspace(-5, -3, 2001)
    exact = F.gelu(x.double())
    ours = ((erf_gelu(x).double() - exact).abs() / exact.abs()).max().item()
    theirs = ((F.gelu(x).double() - exact).abs() / exact.abs()).max().item()
    assert ours < 2e-3 < theirs


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_it_returns_the_input_dtype_and_its_gradient_too(dtype: torch.dtype) -> None:
    x = torch.randn(64, dtype=dtype, requires_grad=True)
    y = erf_gelu(x)
    y.backward(torch.ones_like(y))
    assert y.dtype == dtype and x.grad.dtype == dtype
    torch.testing.assert_close(y, F.gelu(x.detach().float()).to(dtype), rtol=2**-7, atol=1e-6)
