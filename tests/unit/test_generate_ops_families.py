"""Every family of the model library: the estimator's decode-step calls equal transformers'.

benchmarks/generate_ops_families.py builds a tiny model of each decoder family in the library
(its bundled config at tiny sizes) and counts, with a TorchFunctionMode, the Python-level torch
calls of its layers and of a whole `generate` step; generate_ops must give the same numbers at
the installed transformers release, its parts plus the family's own calls
(CallCounts.family_layer / family_moe_layer / family_fixed). A release that changes a family's
modelling code fails here until the table is counted again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import generate_ops_families as counting  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

# Families transformers builds only from remote code (not counted), and Qwen2-MoE, whose router
# issues three calls fewer without norm_topk_prob (generate_ops.CallCounts says why it is left).
NOT_COUNTED = {"baichuan", "chatglm", "internlm2", "qwen2-moe"}
FAMILIES = {kind: name for kind, name in counting.families().items() if kind not in NOT_COUNTED}


def test_the_library_has_families_beyond_llama_to_count():
    assert {"falcon", "gemma2", "deepseek-v2", "gpt-oss", "gpt-neox"} <= set(FAMILIES)


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_a_family_s_decode_step_calls_match_transformers(model_type):
    row = counting.count(FAMILIES[model_type])
    real = sum(layer["real"] for layer in row["layers"])
    parts = sum(layer["parts"] for layer in row["layers"])
    # Gemma-2 and gpt-oss alternate window and full layers; the estimate lays its windows out
    # first, so one layer of the two counted may sit on the other side: their sum is exact.
    assert real == parts, row
    assert abs(row["fixed_real"] - row["fixed_estimate"]) <= 0.5, row
