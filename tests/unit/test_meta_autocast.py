"""benchmarks/meta_autocast.py re-applies CUDA autocast's casts where torch.autocast does not run
(the meta device): the dtypes it gives each operator and what autograd then saves, on small CPU
tensors (the mode is a torch-function mode: the device does not matter to it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import meta_autocast  # noqa: E402
from fitbench.estimate.dtypes import ActivationDtypes  # noqa: E402
from fitbench.estimate.transformer_cost import python_gelu_saved_bytes  # noqa: E402
from meta_autocast import MetaAutocast  # noqa: E402

pytestmark = pytest.mark.torch
F = torch.nn.functional


def test_matmuls_run_in_16_bit_and_a_parameter_is_cast_once_a_forward() -> None:
    weight = torch.nn.Parameter(torch.randn(8, 8))
    x = torch.randn(4, 8)
    autocast = MetaAutocast()
    with autocast:
        with autocast.forward():
            first, second = F.linear(x, weight), x @ weight
            cached = autocast.lower(weight)
            assert autocast.lower(weight) is cached  # the forward's cache
        assert autocast.lower(weight) is not cached  # outside it, a fresh cast each call
    assert first.dtype == second.dtype == torch.bfloat16
    assert F.linear(x, weight).dtype == torch.float32  # the mode is off again


def test_fp32_operators_upcast_and_reductions_return_fp32_unless_told() -> None:
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    with MetaAutocast():
        assert x.pow(2).dtype == torch.rsqrt(x).dtype == torch.float32
        assert F.layer_norm(x, (8,)).dtype == torch.float32
        assert F.softmax(x, dim=-1).dtype == x.sum().dtype == torch.float32
        assert F.softmax(x, dim=-1, dtype=torch.bfloat16).dtype == torch.bfloat16
        assert (x * 2).dtype == torch.bfloat16  # not on any list: as without autocast


def test_the_recompute_of_a_checkpointed_block_runs_under_the_mode() -> None:
    """Checkpointing recomputes a block inside backward; Tensor.backward would hand the whole
    backward to the mode and run it with the mode off, so the recompute's dtypes would differ
    from the forward's (which checkpoint refuses). meta_autocast.backward keeps it on."""
    from torch.utils.checkpoint import checkpoint

    weight = torch.nn.Parameter(torch.randn(8, 8))
    x = torch.randn(4, 8, requires_grad=True)
    autocast = MetaAutocast()
    with autocast:
        with autocast.forward():
            y = checkpoint(lambda t: F.linear(t, weight).relu(), x, use_reentrant=False)
        meta_autocast.backward(y.float().sum())
    assert weight.grad is not None and weight.grad.dtype == torch.float32
    assert x.grad is not None and x.grad.shape == x.shape


def test_new_gelu_under_autocast_saves_what_the_estimate_counts() -> None:
    """GPT-2's Python GELU on the up projection's 16-bit output: pow takes it in FP32, so x's FP32
    copy, tanh's output and 1 + tanh are FP32 and 0.5 * x stays 16 bit; the down projection keeps
    its 16-bit cast of the FP32 product (python_gelu_saved_bytes: 16 bytes an element)."""
    from transformers.activations import ACT2FN

    elements = 4 * 1024
    fc1_out = torch.randn(4, 1024, dtype=torch.bfloat16, requires_grad=True) * 1
    weight = torch.nn.Parameter(torch.ones(8, 1024))
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        return t

    autocast = MetaAutocast()
    with autocast, autocast.forward(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        F.linear(ACT2FN["gelu_new"](fc1_out), weight)
        weight_copy = autocast.lower(weight)
    kept = sum(n for ptr, n in seen.items() if ptr != weight_copy.untyped_storage().data_ptr())
    dt = ActivationDtypes(act=2, res=4, mask=0, amp=True)
    assert kept / elements == pytest.approx(python_gelu_saved_bytes(dt), abs=0.01)


def test_an_autocast_off_region_keeps_its_operators_in_their_dtype() -> None:
    """peft folds its expert adapters into the weights under torch.autocast(enabled=False); the
    real autocast refuses the meta device, so the mode stands in for it while it is on."""
    weight = torch.nn.Parameter(torch.randn(8, 8))
    x = torch.randn(4, 8)
    autocast = MetaAutocast()
    real = torch.autocast
    with autocast:
        with torch.autocast(device_type="meta", enabled=False):
            assert F.linear(x, weight).dtype == torch.float32
        assert F.linear(x, weight).dtype == torch.bfloat16
    assert torch.autocast is real
