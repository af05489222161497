"""What a checkpointed step recomputes in backward: the blocks' forward, not the head's, and not
a block's last product where nothing after it saves a tensor.

transformer_cost.recomputed_kernels leaves the embedding, the LM head, the loss and the head's
autocast cast out of the recomputation, because transformers' gradient checkpointing wraps each
decoder layer (GradientCheckpointingLayer) and nothing else; and torch's non-reentrant checkpoint
stops recomputing once every tensor the block saved is back, which in a Llama block is before its
down projection (recompute_stops_early). Here a dispatch mode counts the matrix products real tiny
models run on the CPU in backward, with checkpointing on (as `fitbench run` enables it) and off,
and the estimator's kernel list is held to the same count.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from fitbench.backends.torch.models import build_model  # noqa: E402
from fitbench.backends.torch.session import enable_checkpointing  # noqa: E402
from fitbench.estimate import speed, transformer_cost  # noqa: E402
from fitbench.estimate.matrices import block_gemms  # noqa: E402
from fitbench.estimate.profile import get_profile  # noqa: E402
from fitbench.workloads.presets import get_workload  # noqa: E402
from fitbench.workloads.workload import Workload  # noqa: E402
from tiny_families import tiny_workload  # noqa: E402

pytestmark = pytest.mark.torch
PRODUCTS = {"mm", "addmm", "bmm"}
DEFAULT = get_profile("torch", "default", use_user=False)


class _Products(TorchDispatchMode):
    """The output widths of the matrix products dispatched inside the mode."""

    def __init__(self) -> None:
        super().__init__()
        self.widths: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.__name__.split(".")[0] in PRODUCTS:
            self.widths.append(out.shape[-1])
        return out


def _tiny_llama() -> Workload:
    return get_workload("llm-6b", mode="train", precision="fp32", tiny=True, batch_size=2, seq_len=16)


def _products(w: Workload, checkpointing: bool) -> tuple[list[int], list[int]]:
    """The output widths of the products one step runs: (forward, backward)."""
    torch.manual_seed(0)
    model, _ = build_model(
        dataclasses.replace(w, checkpointing=checkpointing), device="cpu", dtype=torch.float32
    )
    model.train()
    if checkpointing:
        enable_checkpointing(model)
    ids = torch.randint(0, w.arch.vocab_size, (w.batch_size, w.seq_len))
    forward, backward = _Products(), _Products()
    with forward:
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    with backward:
        loss.backward()
    return forward.widths, backward.widths


def _recomputed_products(w: Workload) -> tuple[list[int], list[int]]:
    """(the widths of the products the checkpointed backward runs beyond the plain one, those
    of the plain forward's products but the head's)."""
    forward, plain = _products(w, False)
    _, checkpointed = _products(w, True)
    extra = list(checkpointed)
    for width in plain:
        extra.remove(width)
    forward.remove(w.arch.vocab_size)  # the LM head's
    return sorted(extra), sorted(forward)


def _estimated_products(w: Workload) -> list[int]:
    """The widths of the block products the estimate recomputes, one entry per layer."""
    forward = transformer_cost.forward_kernels(w, w.batch_size, w.seq_len)
    again = {k.name: k.count for k in transformer_cost.recomputed_kernels(forward, w)}
    return sorted(out for name, _, out in block_gemms(w.arch) for _ in range(again.get(name, 0)))


def test_a_llama_block_recomputes_all_but_its_down_projection() -> None:
    w = _tiny_llama()
    assert transformer_cost.recompute_stops_early(w.arch)
    recomputed, forward = _recomputed_products(w)
    for _ in range(w.arch.num_layers):  # each block's down projection, whose output is h wide
        forward.remove(w.arch.hidden_size)
    assert recomputed == forward  # the head's product and the down projections are not run again
    assert _estimated_products(w) == recomputed


@pytest.mark.parametrize("name", ["gpt2", "olmo-2-7b", "gemma-2-2b-it"])
def test_blocks_that_save_their_mlp_output_recompute_all_of_it(name: str) -> None:
    """GPT-2's residual dropout keeps a mask of the MLP output, OLMo-2's and Gemma-2's post-norms
    keep their input: every block product runs again (eager attention's included), the head's
    does not."""
    w = tiny_workload(name, mode="train", batch_size=2, seq_len=16)
    assert not transformer_cost.recompute_stops_early(w.arch)
    recomputed, forward = _recomputed_products(w)
    assert recomputed == forward
    names = [k.name for k in speed.training_kernels(dataclasses.replace(w, checkpointing=True), DEFAULT)]
    last = block_gemms(w.arch)[-1][0]
    assert names.count(last) == 2  # the forward's and the recomputation's


def test_the_step_counts_the_head_once_and_the_blocks_casts_again() -> None:
    w = dataclasses.replace(_tiny_llama().replace(precision="amp-bf16"), checkpointing=True)
    names = [k.name for k in speed.training_kernels(w, DEFAULT)]
    for once in ("lm_head", "lm_loss", "embedding", "down_proj"):
        assert names.count(once) == 1, once
    assert names.count("q_proj") == 2  # the forward's and the recomputation's
    forward = transformer_cost.forward_kernels(w, w.batch_size, w.seq_len)
    casts = next(k for k in forward if k.name == "weight_casts")
    again = next(k for k in transformer_cost.recomputed_kernels(forward, w) if k.name == "weight_casts")
    head = w.arch.vocab_size * w.arch.hidden_size
    down = w.arch.hidden_size * w.arch.intermediate_size * w.arch.num_layers
    assert again.bytes == pytest.approx(casts.bytes - 6.0 * (head + down))
