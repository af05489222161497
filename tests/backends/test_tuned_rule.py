"""The tuned-precision rule exists once (fitbench.estimate.execution.tuned_precision) and the
PyTorch backend asks it: what tuned code runs is what the estimator describes.

(The Paddle side is pinned in test_paddle_backend.py, on the plans for a Hopper and a Turing card.)
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fitbench.backends.torch.tuned import choose_precision, generation_precision  # noqa: E402
from fitbench.catalog import get_gpu  # noqa: E402
from fitbench.estimate.execution import precision_as_run, tuned_changes, tuned_precision  # noqa: E402
from fitbench.workloads.presets import get_workload  # noqa: E402

pytestmark = pytest.mark.torch

CPU = torch.device("cpu")
PRECISIONS = ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16", "bf16"]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("resnet50-cifar10", "train"),
        ("bert-base-imdb", "train"),
        ("bert-base-imdb", "infer"),
        ("llm-6b", "train"),
    ],
)
def test_tuned_training_and_inference_run_the_rules_precision(name: str, mode: str, precision: str) -> None:
    seq_len = 16 if name == "llm-6b" else None  # a decoder switched to training needs one
    workload = get_workload(name, tiny=True, precision=precision, mode=mode, seq_len=seq_len)
    target = tuned_precision(workload, "torch", bf16=True)  # a CPU autocasts to bf16
    plan = choose_precision(workload, CPU).plan
    assert plan.requested == target  # the backend planned the precision the rule names
    # The CPU may not have a dtype's kernels; then the plan says what it ran instead.
    assert plan.in_effect == target or plan.warnings, (plan.in_effect, target)
    assert target == precision_as_run(workload, "tuned", get_gpu("h200"), "torch")


@pytest.mark.parametrize("precision", PRECISIONS)
def test_tuned_generation_runs_the_rules_weights(precision: str) -> None:
    workload = get_workload("llm-6b", tiny=True, precision=precision)
    name, _, warnings = generation_precision(workload, CPU)
    target = tuned_precision(workload, "torch", bf16=True)
    assert name == target or warnings, (name, target)
    assert any("instead of" in w for w in warnings) == (precision.startswith("amp-"))


def test_the_rule_says_where_tuned_changes_a_request() -> None:
    train = get_workload("bert-base-imdb", tiny=True)
    assert tuned_changes(train, "torch") and tuned_changes(train, "paddle")
    assert not tuned_changes(train.replace(precision="fp16"), "torch")
    assert tuned_precision(train, "torch", bf16=False) == "amp-fp16"
    assert tuned_precision(train, "paddle", bf16=False) == "fp16"
