"""The matrices the first-step reserve places are the ones the torch backend builds.

estimate/first_step.py's weight_matrices lists every parameter of two or more dimensions (fused
projections, stacked experts, their biases) without importing a framework; here each family of
the model library is built at tiny sizes on the meta device and its real parameters compared,
size by size.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import generate_ops_families
import tiny_families
from fitbench.backends.torch.models import build_model
from fitbench.estimate.first_step import weight_matrices

pytestmark = pytest.mark.torch

# chatglm: the torch backend does not build it (a custom head size with Qwen2-style biases).
FAMILIES = {k: v for k, v in generate_ops_families.families().items() if k != "chatglm"}


def test_the_families_include_fused_and_expert_layouts():
    assert {"phi3", "gpt-neox", "falcon", "olmoe", "gpt-oss", "deepseek-v2", "qwen2-moe"} <= set(FAMILIES)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_matrix_of_the_built_model_is_listed(family):
    w = tiny_families.tiny_workload(FAMILIES[family], mode="train")
    model, _ = build_model(w, device="meta")
    real = Counter(p.numel() for p in model.parameters() if p.dim() >= 2 and min(p.shape) > 1)
    listed = Counter(m.elements for seg in weight_matrices(w.arch) for m in seg)
    assert real == listed
