"""Gradient accumulation's adds: what autograd really launches, and what the estimate times."""

from __future__ import annotations

import pytest

from fitbench.estimate import speed
from fitbench.estimate.optimizer import param_sizes_in_order
from fitbench.estimate.profile import get_profile
from fitbench.workloads.library import workload_for_model


def _added_gradients(model, batches: int) -> list[int]:
    """Elements of every in-place add into a parameter's kept gradient during the backward of
    micro-batch `batches` (the earlier ones ran before it, without zero_grad between them)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    kept: set[int] = set()
    seen: list[int] = []

    class Adds(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            target = args[0] if args else None
            if func._schema.name == "aten::add_" and isinstance(target, torch.Tensor) and id(target) in kept:
                seen.append(target.numel())
            return out

    x = torch.randn(4, 8)
    for i in range(batches):
        loss = model(x).square().sum()
        if i < batches - 1:
            loss.backward()
            continue
        kept = {id(p.grad) for p in model.parameters() if p.grad is not None}
        with Adds():
            loss.backward()
    return seen


@pytest.mark.torch
def test_autograd_adds_each_later_micro_batchs_gradient_in_place() -> None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 3))
    model.zero_grad(set_to_none=True)
    # the first backward hands its gradients over: nothing added
    assert _added_gradients(model, 1) == []
    model.zero_grad(set_to_none=True)
    # the second adds one tensor per parameter, of the parameter's size
    adds = _added_gradients(model, 2)
    assert sorted(adds) == sorted(p.numel() for p in model.parameters())


def test_the_estimate_times_those_adds_per_micro_batch() -> None:
    w1 = workload_for_model(
        "llama-3.2-1b-instruct", mode="train", precision="bf16", batch_size=2, seq_len=512
    )
    w4 = workload_for_model(
        "llama-3.2-1b-instruct", mode="train", precision="bf16", batch_size=2, seq_len=512, grad_accum=4
    )
    assert speed.gradient_accumulation_kernels(w1) == []
    (k,) = speed.gradient_accumulation_kernels(w4)
    tensors = len(param_sizes_in_order(w4))
    # three of four micro-batches add; each add reads two bf16 gradients and writes one
    assert k.launches == pytest.approx(0.75 * tensors)
    assert k.bytes == pytest.approx(0.75 * 3 * 2 * w4.trained_param_count())
    assert k.ops == 0 and k.cast_ops == pytest.approx(0.75 * tensors)  # from C++, no Python
    profile = get_profile("torch", "default", use_user=False)
    names = [x.name for x in speed.training_kernels(w4, profile)]
    assert names.count("gradient_accumulation") == 1
    assert "gradient_accumulation" not in [x.name for x in speed.training_kernels(w1, profile)]


def test_a_lora_step_adds_its_adapters_gradients_only() -> None:
    from fitbench.estimate import peft, peft_speed

    w = workload_for_model(
        "llama-3.2-1b-instruct",
        mode="train",
        precision="bf16",
        peft="lora",
        batch_size=2,
        seq_len=512,
        grad_accum=2,
    )
    update, adds = peft_speed.optimizer_kernels(w)
    # q, k, v, o, gate, up and down carry lora_A and lora_B in each of the 16 blocks
    assert peft.trainable_tensor_count(w) == 16 * 7 * 2
    assert adds.launches == pytest.approx(0.5 * 16 * 7 * 2)
    # FP32 adapters: two read and one written, half the micro-batches
    assert adds.bytes == pytest.approx(0.5 * 3 * peft.trainable_bytes(w))
    assert update.name == "optimizer" and len(peft_speed.optimizer_kernels(w.replace(grad_accum=1))) == 1
