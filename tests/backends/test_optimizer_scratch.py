"""The optimizer step's temporaries the estimator counts are the ones torch.optim really makes.

optimizer.optimizer_step_scratch reads them from torch/optim/adam.py and sgd.py (foreach: the
square-root list, 1.00x the parameters; fused: nothing; for-loop: square root and quotient of
one tensor beside the previous one's). Here a real step of the backend's own optimizer
(session.make_optimizer) over the backend's real tiny models runs under a dispatch mode that
sees every tensor an operator creates and when its last reference goes
(fitbench.backends.torch.live_tensors): the largest sum of those alive at once is what the step
allocated beyond its inputs. On the CPU torch runs the same Python functions (foreach falls
back to a per-tensor loop inside each `_foreach_*` op, which still returns whole lists), so the
count is exact, to the byte.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from fitbench.backends.torch.live_tensors import LiveTensors  # noqa: E402
from fitbench.backends.torch.models import build_model  # noqa: E402
from fitbench.backends.torch.session import make_optimizer  # noqa: E402
from fitbench.estimate.optimizer import (  # noqa: E402
    largest_param_tensor,
    optimizer_step_scratch,
    param_sizes_in_order,
)
from fitbench.workloads.presets import get_workload  # noqa: E402

pytestmark = pytest.mark.torch


def step_scratch(workload: Any) -> int:
    """Peak bytes one optimizer step (its second: state exists) allocates on the CPU."""
    torch.manual_seed(0)
    model, _ = build_model(workload, device="cpu")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(workload.optimizer, params, workload.optimizer_impl)
    for _ in range(2):
        for p in params:
            p.grad = torch.randn_like(p)
        counter = LiveTensors()
        with counter:
            optimizer.step()
    return counter.peak


CASES = [
    (name, optimizer, impl)
    for name in ("resnet50-cifar10", "bert-base-imdb", "llm-6b")
    for optimizer in ("adam", "adamw", "momentum")
    for impl in ("foreach", "fused", "for-loop")
]


@pytest.mark.parametrize(("name", "optimizer", "impl"), CASES)
def test_step_temporaries_are_counted_to_the_byte(name: str, optimizer: str, impl: str) -> None:
    shape = {"seq_len": 16} if name == "llm-6b" else {}
    w = get_workload(
        name, tiny=True, mode="train", precision="fp32", optimizer=optimizer, optimizer_impl=impl, **shape
    )
    assert step_scratch(w) == optimizer_step_scratch(w, "torch")


def test_largest_tensor_is_the_real_models() -> None:
    for name in ("resnet50-cifar10", "bert-base-imdb", "llm-6b"):
        w = get_workload(name, tiny=True)
        model, _ = build_model(w, device="meta")
        assert largest_param_tensor(w) == max(p.numel() for p in model.parameters()), name


def test_what_each_implementation_costs() -> None:
    """foreach 1.00x the parameters, fused nothing, for-loop about twice the largest tensor; SGD
    nothing."""
    w = get_workload("llm-6b", mode="train", seq_len=512, precision="amp-bf16")
    p = w.param_count()
    assert optimizer_step_scratch(w, "torch") == 4 * p
    assert optimizer_step_scratch(w.replace(optimizer_impl="fused"), "torch") == 0
    # the untied LM head twice, and the final RMSNorm's weight yielded just before it
    loop = optimizer_step_scratch(w.replace(optimizer_impl="for-loop"), "torch")
    assert loop == 4 * (2 * 32000 * 4096 + 4096)
    assert optimizer_step_scratch(w.replace(optimizer="momentum"), "torch") == 0
    assert optimizer_step_scratch(w.replace(precision="bf16"), "torch") == 2 * p  # pure 16-bit state
    assert optimizer_step_scratch(w, "paddle") == 0  # in-place kernels


ORDER_CASES = [
    (name, tiny) for name in ("resnet50-cifar10", "bert-base-imdb", "llm-6b") for tiny in (True, False)
]


@pytest.mark.parametrize(("name", "tiny"), [*ORDER_CASES, ("resnet18-cifar10", False)])
def test_parameter_order_is_the_built_models(name: str, tiny: bool) -> None:
    w = get_workload(name, tiny=tiny)
    model, _ = build_model(w, device="meta")
    assert param_sizes_in_order(w) == [p.numel() for p in model.parameters()]


@pytest.mark.parametrize(
    "config",
    [
        {
            "model_type": "gpt2",
            "vocab_size": 1000,
            "n_embd": 64,
            "n_layer": 2,
            "n_head": 4,
            "n_positions": 128,
        },
        {
            "model_type": "qwen2",
            "vocab_size": 1000,
            "hidden_size": 64,
            "intermediate_size": 160,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "tie_word_embeddings": True,
        },
    ],
)
def test_parameter_order_of_gpt2_and_qwen2(config: dict, tmp_path: Any) -> None:
    import json

    from fitbench.workloads.hf_config import workload_from_config

    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    w = workload_from_config(str(path), mode="train", seq_len=16)
    model, _ = build_model(w, device="meta")
    assert param_sizes_in_order(w) == [p.numel() for p in model.parameters()]
