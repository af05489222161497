"""An MoE block's routed copies move the bytes the estimator counts for them.

benchmarks/elementwise_traffic.py --routed counts, with a dispatch mode on the CPU, the bytes of
every operator that touches the k routed copies of the tokens in one training step of the real
model (transformers' grouped_mm experts path: gathers, the activation on the gate/up halves, the
routing-weight product, the gathers back and the sum, and all of their gradients) at the model's
real widths; expert_cost.expert_routing_bytes_per_token must stay near it, with the sentinel
masks of the installed release. Families cover both routing-weight dtypes (16-bit; FP32 for
Mixtral and DeepSeek, whose product and gradients then run in FP32) and autocast's FP32 experts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import elementwise_traffic

pytestmark = [pytest.mark.torch, pytest.mark.slow]


@pytest.mark.parametrize(
    ("name", "precision"),
    [
        ("olmoe-1b-7b", "bf16"),
        ("deepseek-v2-lite-chat", "bf16"),
        ("granite-3.0-3b-a800m-instruct", "amp-bf16"),
    ],
)
def test_the_estimate_counts_the_routed_copies_bytes(name: str, precision: str) -> None:
    row = elementwise_traffic.routed_per_token(name, precision)
    assert row["estimate_forward_bytes_per_token"] == pytest.approx(row["forward_bytes_per_token"], rel=0.08)
    assert row["estimate_backward_bytes_per_token"] == pytest.approx(
        row["backward_bytes_per_token"], rel=0.08
    )
