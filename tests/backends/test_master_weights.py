"""The tuned step's 16-bit weights with FP32 masters (backends/torch/master_weights.py): the
update is AdamW's, the weights are its masters' bf16 rounding, and a tuned step trains the model
as autocast over FP32 weights does."""

from __future__ import annotations

import inspect
from unittest import mock

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch import nn  # noqa: E402

from fitbench.backends import get_backend  # noqa: E402
from fitbench.backends.base import RunOptions  # noqa: E402
from fitbench.backends.torch import tuned  # noqa: E402
from fitbench.backends.torch.master_weights import (  # noqa: E402
    ADAMW_WEIGHT_DECAY,
    MasterWeightAdam,
    sixteen_bit_candidates,
)
from fitbench.estimate.execution import workload_as_run  # noqa: E402
from fitbench.estimate.single_device import sixteen_bit_total  # noqa: E402
from fitbench.workloads.presets import get_workload  # noqa: E402

TUNED_CPU = RunOptions(device="cpu", exec_mode="tuned")
SHAPES = [(64, 32), (32,), (7, 5)]


def test_the_weight_decay_is_adamw_s_default():
    assert inspect.signature(torch.optim.AdamW).parameters["weight_decay"].default == ADAMW_WEIGHT_DECAY


@pytest.mark.parametrize("weight_decay", [0.0, ADAMW_WEIGHT_DECAY])
def test_the_update_is_adamw_s_over_the_masters_and_the_weights_are_their_rounding(weight_decay):
    """Five steps from the same bf16 gradients: torch's fused AdamW over FP32 copies and the
    masters agree to FP32 rounding (the two order a few operations differently), and every
    16-bit weight is its master rounded to bf16, exactly."""
    torch.manual_seed(0)
    reference = [nn.Parameter(torch.randn(shape) * 0.1) for shape in SHAPES]
    weights = [nn.Parameter(p.detach().clone()) for p in reference]
    fused = torch.optim.AdamW(reference, lr=1e-2, weight_decay=weight_decay, fused=True)
    ours = MasterWeightAdam(weights, lr=1e-2, weight_decay=weight_decay)
    assert all(w.dtype == torch.bfloat16 for w in weights)
    for _ in range(5):
        grads = [torch.randn(shape).to(torch.bfloat16) for shape in SHAPES]
        for p, g in zip(reference, grads, strict=True):
            p.grad = g.float()
        for w, g in zip(weights, grads, strict=True):
            w.grad = g
        fused.step()
        ours.step()
        for ref, master, weight in zip(reference, ours.masters, weights, strict=True):
            torch.testing.assert_close(master, ref.detach(), rtol=2e-6, atol=1e-8)
            assert torch.equal(weight.detach(), master.to(torch.bfloat16))
    assert ours.step_count.item() == 5


def test_only_weights_that_linears_alone_use_turn_sixteen_bit():
    """A head tied to the embedding stays FP32 (the lookup would turn 16-bit), as do embeddings,
    norms and frozen parameters."""

    class Tiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(10, 8)
            self.proj = nn.Linear(8, 8)
            self.norm = nn.LayerNorm(8)
            self.frozen = nn.Linear(8, 8)
            self.frozen.requires_grad_(False)
            self.head = nn.Linear(8, 10, bias=False)
            self.head.weight = self.embed.weight

    model = Tiny()
    assert sixteen_bit_candidates(model) == [model.proj.weight, model.proj.bias]
    model._keep_in_fp32_modules = ["proj"]  # transformers' list of module names kept in FP32
    assert sixteen_bit_candidates(model) == []


def test_transformers_conv1d_projections_turn_sixteen_bit_too():
    """GPT-2's projections are transformers' Conv1D (addmm over its weight, which autocast casts
    as it casts a Linear's): the estimator counts them among the 16-bit weights, so the step keeps
    them so."""
    from transformers.pytorch_utils import Conv1D

    block = nn.Sequential(Conv1D(24, 8), nn.LayerNorm(24))
    assert sixteen_bit_candidates(block) == [block[0].weight, block[0].bias]


def _loss_off_dropout(session) -> None:
    for module in session.model.modules():
        if isinstance(getattr(module, "dropout", None), float):
            module.dropout = 0.0
        if isinstance(module, nn.modules.dropout._DropoutNd):
            module.p = 0.0


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("bert-base-imdb", {}),
        ("llm-6b", {"mode": "train", "seq_len": 32, "batch_size": 2, "precision": "amp-bf16"}),
    ],
)
def test_a_tuned_step_trains_as_autocast_over_fp32_weights_does(name, overrides):
    """The same model, batch and seed, dropout off: one tuned step with 16-bit weights and FP32
    masters, one with autocast's FP32 weights. The losses are equal (the forward multiplies the
    same bf16 values) and after the update every master equals the FP32 weight it stands for
    within FP32 rounding, the other parameters too."""
    workload = get_workload(name, tiny=True, **overrides)
    sixteen = get_backend("torch").open(workload, TUNED_CPU)
    with mock.patch.object(tuned, "SIXTEEN_BIT_WEIGHTS", False):
        autocast = get_backend("torch").open(workload, TUNED_CPU)
    kept = sixteen.sixteen_bit
    assert kept is not None and autocast.sixteen_bit is None
    assert sixteen.notes["sixteen_bit_weights"]["params"] == kept.numel
    linears = [m for m in sixteen.model.modules() if isinstance(m, nn.Linear)]
    bf16 = [p for m in linears for p in m.parameters(recurse=False) if p.dtype == torch.bfloat16]
    assert kept.numel == sum(p.numel() for p in bf16) > 0
    # the estimator's count: the same Linear matrices (and the head's biases; the blocks' biases
    # it leaves in the FP32 count)
    as_run = workload_as_run(workload, "tuned", None)
    assert 0 < sixteen_bit_total(as_run, "torch") <= kept.numel
    for session in (sixteen, autocast):
        _loss_off_dropout(session)
    with torch.no_grad():
        losses = [session._forward() for session in (sixteen, autocast)]
    assert torch.equal(losses[0], losses[1]) and torch.isfinite(losses[0])
    for session in (sixteen, autocast):
        session.step()
    masters = {id(p): m for p, m in zip(kept.params, kept.masters, strict=True)}
    compared = 0
    for mine, theirs in zip(sixteen.model.parameters(), autocast.model.parameters(), strict=True):
        value = masters.get(id(mine), mine).detach()
        assert value.dtype == theirs.dtype == torch.float32
        torch.testing.assert_close(value, theirs.detach(), rtol=1e-5, atol=1e-6)
        compared += id(mine) in masters
    assert compared == len(kept.params)
