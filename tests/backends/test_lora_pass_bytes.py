"""The bytes of peft's LoRA passes around A and B, counted in a real peft layer on the CPU.

peft_speed._adapter_passes states what lora.Linear.forward moves per token beside its two
products: with a 16-bit base, the input cast to the FP32 adapters, dropout, an FP32 scaling, an
add that promotes to FP32 and the cast back; under autocast (FP32 base), no cast of a norm-fed
FP32 input, autocast's cast of the dropped input to 16 bit, and 16-bit scaling and add with
nothing to cast back; and what autograd's nodes for those passes move backward (about as much as
the forward, where it had been counted at twice). Here a dispatch mode
(benchmarks/elementwise_traffic.ElementwiseTraffic) adds up every elementwise operator's reads and
writes of a real peft Linear, less the same Linear with its adapter disabled, per token (the
difference of two lengths: the per-step weight casts and gradients drop out), forward and
backward. CPU autocast casts as CUDA's does. Dropout is left out (p = 0: peft's Identity):
the CPU runs it as four passes (empty_like, bernoulli_, div_, mul) where CUDA's fused kernel reads
the input and writes the output and a one-byte mask, which is what the estimate counts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from elementwise_traffic import ElementwiseTraffic  # noqa: E402
from fitbench.estimate.dtypes import activation_dtypes  # noqa: E402
from fitbench.estimate.peft_speed import _adapter_passes  # noqa: E402
from fitbench.workloads.presets import get_workload  # noqa: E402

pytestmark = pytest.mark.torch
FIN, FOUT = 64, 96


class _One(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(FIN, FOUT, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


def _counted(model: torch.nn.Module, x: torch.Tensor, amp: bool, adapters: bool) -> tuple[int, int]:
    """(forward bytes, backward bytes) of one call, the adapters on or off."""
    forward, backward = ElementwiseTraffic(), ElementwiseTraffic()
    model.zero_grad(set_to_none=True)  # a fresh step: no accumulation into earlier gradients
    # a block's input: it needs its gradient, and it is no leaf (autocast caches the casts of
    # leaves that require a gradient, the weights', which would share the base's and A's cast)
    leaf = x.detach().requires_grad_(True)
    x = leaf.clone()
    with forward, torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        if adapters:
            y = model(x)
        else:
            with model.disable_adapter():
                y = model(x)
    grad = torch.ones_like(y)
    with backward:
        y.backward(grad)
    return forward.bytes, backward.bytes


def _per_token(base_dtype: torch.dtype, input_dtype: torch.dtype, amp: bool) -> tuple[float, float]:
    """(forward, backward) bytes per token the adapter adds."""
    torch.manual_seed(0)
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["proj"])
    model = peft.get_peft_model(_One().to(base_dtype), config)
    model.train()
    assert model.base_model.model.proj.lora_A["default"].weight.dtype == torch.float32
    counts = []
    for tokens in (32, 96):
        x = torch.randn(tokens, FIN, dtype=input_dtype)
        on, off = _counted(model, x, amp, True), _counted(model, x, amp, False)
        counts.append((on[0] - off[0], on[1] - off[1]))
    return (counts[1][0] - counts[0][0]) / 64, (counts[1][1] - counts[0][1]) / 64


CASES = [
    ("bf16 base", "bf16", torch.bfloat16, torch.bfloat16, "q"),
    ("autocast, norm-fed FP32 input", "amp-bf16", torch.float32, torch.float32, "q"),
    ("autocast, 16-bit input", "amp-bf16", torch.float32, torch.bfloat16, "o"),
]


@pytest.mark.parametrize(("label", "precision", "base", "x", "name"), CASES)
def test_adapter_passes_move_what_peft_moves(label, precision, base, x, name) -> None:
    w = get_workload("llm-6b", mode="train", precision=precision, seq_len=16)
    dt = activation_dtypes(w, dropout=False)
    passes = _adapter_passes(name, FIN, FOUT, dt, 4.0, 0.0, fused=False)
    forward, backward = _per_token(base, x, precision.startswith("amp"))
    assert forward == pytest.approx(passes.forward_total), label
    assert backward == pytest.approx(passes.backward_total), label


def test_adapter_backward_moves_about_what_its_forward_moves() -> None:
    """The backward's passes are each forward pass's gradient, not twice the forward's bytes (the
    count before): between 0.7x and 1.3x the forward in every case above."""
    for _, precision, base, x, _ in CASES:
        forward, backward = _per_token(base, x, precision.startswith("amp"))
        assert 0.7 * forward < backward < 1.3 * forward, precision
