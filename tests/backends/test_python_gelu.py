"""GPT-2's GELU as transformers runs it (`gelu_new`, NewGELUActivation): Python, not one kernel.

The estimator counts its kernels and the bytes they read and write (`python_gelu_bytes`), and
what autograd keeps of it (`python_gelu_saved_bytes`); here they are taken from the real module
on the CPU in FP32. (Under CUDA autocast `pow` runs in FP32, which CPU autocast does not do: the
AMP figures follow torch.amp's float32 op list and are not checked here.)
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from transformers.activations import ACT2FN  # noqa: E402

from fitbench.estimate.dtypes import ActivationDtypes  # noqa: E402
from fitbench.estimate.transformer_cost import python_gelu_bytes, python_gelu_saved_bytes  # noqa: E402

pytestmark = pytest.mark.torch
FP32 = ActivationDtypes(act=4, res=4, mask=0, amp=False)


class Traffic(TorchDispatchMode):
    """Kernels dispatched and the bytes of their tensor inputs and outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        tensors = [a for a in (*args, out) if isinstance(a, torch.Tensor)]
        self.ops += 1
        self.bytes += sum(t.numel() * t.element_size() for t in tensors)
        return out


def test_gelu_new_kernels_and_traffic_match_the_estimate() -> None:
    act = ACT2FN["gelu_new"]
    x = torch.randn(4, 256)
    with Traffic() as t:
        act(x)
    assert t.ops == 8
    assert t.bytes == python_gelu_bytes(FP32) * x.numel()


def test_gelu_new_saves_five_tensors_of_its_width() -> None:
    act = ACT2FN["gelu_new"]
    x = torch.randn(4, 256, requires_grad=True)
    proj = torch.nn.Linear(256, 8, bias=False)  # c_proj: it saves the product as its input
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() != proj.weight.untyped_storage().data_ptr():
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = x * 1.0  # fc1's output (a non-leaf, as in the model)
        out = proj(act(y))
    out.sum().backward()
    assert sum(seen.values()) == python_gelu_saved_bytes(FP32) * x.numel()
