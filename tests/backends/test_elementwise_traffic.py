"""The estimator's elementwise bytes per token and block are the real model's.

benchmarks/elementwise_traffic.py counts, with a dispatch mode on the CPU, the bytes every
elementwise operator of a training step reads and writes in the library's model at its real
widths; the estimate's count (transformer_cost._elementwise_bytes_per_token, twice it for the
backward) must stay near it. Near, not equal: the estimate counts seven FP32 passes per RMSNorm
where transformers' mixes 16- and 32-bit ones, and leaves out the scalar-sized row statistics.
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


@pytest.mark.parametrize("name", ["llama-3.2-1b-instruct", "qwen3-0.6b"])
def test_the_estimate_counts_the_bytes_the_model_moves(name):
    row = elementwise_traffic.block_per_token(name, "amp-bf16")
    assert row["estimate_forward_bytes_per_token"] == pytest.approx(row["forward_bytes_per_token"], rel=0.2)
    assert row["estimate_backward_bytes_per_token"] == pytest.approx(row["backward_bytes_per_token"], rel=0.2)
    assert abs(row["estimate_forward_ops"] - row["forward_ops"]) <= 0.1 * row["forward_ops"]


@pytest.mark.parametrize("name", ["llama-3.2-1b-instruct", "qwen3-0.6b", "gemma-3-1b-it"])
@pytest.mark.parametrize("precision", ["amp-bf16", "bf16"])
def test_frozen_norms_save_their_weight_gradients_bytes(name, precision):
    """What a LoRA step's frozen base leaves out of full training's elementwise backward: the norms'
    weight gradients (transformer_cost.norm_weight_gradient_bytes_per_token), to the byte: FP32
    products under autocast, 16-bit ones in bf16 (Llama, Qwen3), FP32 in both for Gemma's norms,
    and Qwen3's query and key norms over a 16-bit normalised tensor under autocast."""
    row = elementwise_traffic.norm_weight_gradient_per_token(name, precision)
    assert row["backward_bytes_per_token"] > 0
    assert row["estimate_bytes_per_token"] == pytest.approx(row["backward_bytes_per_token"], rel=1e-6)
