"""The MLP activations transformers writes in Python save what the estimate counts.

transformer_cost counts per MLP-width element what autograd keeps for NewGELUActivation (GPT-2,
GPT-J, Phi: python_gelu_saved_bytes) and for Apertus's xIELU (xielu_saved_bytes), the output
included as the down projection's input. Here transformers' own modules run forward on the CPU
under saved_tensors_hooks: every storage autograd keeps is counted once, the module's parameters
and buffers left out.
"""

from __future__ import annotations

import pytest

from fitbench.estimate.dtypes import ActivationDtypes
from fitbench.estimate.transformer_cost import python_gelu_saved_bytes, xielu_saved_bytes

torch = pytest.importorskip("torch")
activations = pytest.importorskip("transformers.activations")

ELEMENTS = 4 * 1024


def _saved_per_element(
    name: str, module_dtype: torch.dtype, input_dtype: torch.dtype, *, frozen: bool = False
) -> float:
    """Saved bytes per element of the activation and of the 16-bit (or FP32) input the next
    Linear keeps of its output (a cast copy where autocast would cast an FP32 output)."""
    act = activations.ACT2FN[name]
    act = act.to(module_dtype) if isinstance(act, torch.nn.Module) else act
    if frozen:
        act.requires_grad_(False)
    x = torch.randn(4, 1024, dtype=input_dtype, requires_grad=True)
    fc1_out = x * 1  # the up projection's output: a tensor autograd tracks
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen.setdefault(storage.data_ptr(), storage.nbytes())
        return t

    weight = torch.ones(1024, 8, dtype=input_dtype, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = act(fc1_out)
        down_in = out.to(input_dtype)  # autocast's cast for the down projection (none in 16 bit)
        down_in.matmul(weight)
    own = {p.untyped_storage().data_ptr() for p in getattr(act, "parameters", list)()}
    own |= {b.untyped_storage().data_ptr() for b in getattr(act, "buffers", list)()}
    own |= {x.untyped_storage().data_ptr(), weight.untyped_storage().data_ptr()}
    return sum(n for ptr, n in seen.items() if ptr not in own) / ELEMENTS


@pytest.mark.parametrize(
    ("module_dtype", "input_dtype", "dt"),
    [
        (torch.bfloat16, torch.bfloat16, ActivationDtypes(act=2, res=2, mask=0, amp=False)),
        (torch.float32, torch.bfloat16, ActivationDtypes(act=2, res=4, mask=0, amp=True)),
        (torch.float32, torch.float32, ActivationDtypes(act=4, res=4, mask=0, amp=False)),
    ],
    ids=["bf16", "amp", "fp32"],
)
def test_python_xielu_saves_what_the_estimate_counts(module_dtype, input_dtype, dt) -> None:
    measured = _saved_per_element("xielu", module_dtype, input_dtype)
    assert measured == pytest.approx(xielu_saved_bytes(dt), abs=0.01)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_new_gelu_saves_five_tensors_without_autocast(dtype) -> None:
    size = torch.finfo(dtype).bits // 8
    measured = _saved_per_element("gelu_new", dtype, dtype)
    assert measured == pytest.approx(
        python_gelu_saved_bytes(ActivationDtypes(act=size, res=size, mask=0, amp=False)), abs=0.01
    )


def test_a_frozen_xielu_keeps_one_tensor_less(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under LoRA a_n is frozen: (expm1 - x) * a_n keeps no left operand (peft.py counts it)."""
    from fitbench.estimate import peft, transformer_cost
    from fitbench.workloads.hf_config import arch_from_hf_config

    dt = ActivationDtypes(act=2, res=2, mask=0, amp=False)
    measured = _saved_per_element("xielu", torch.bfloat16, torch.bfloat16, frozen=True)
    assert measured == pytest.approx(xielu_saved_bytes(dt) - dt.act, abs=0.01)
    config = {"vocab_size": 64, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2}
    apertus = arch_from_hf_config({**config, "model_type": "apertus", "intermediate_size": 16})
    with_xielu = peft.frozen_savings_per_token(apertus, dt)
    monkeypatch.setattr(transformer_cost, "XIELU_TYPES", ())
    assert with_xielu - peft.frozen_savings_per_token(apertus, dt) == 16 * dt.act
