"""benchmarks/optimizer_rate.py's smoke mode: every layout, dtype and implementation steps a real
torch.optim.AdamW on the CPU, and each row's bytes are the estimator's passes over its elements."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import optimizer_rate
from fitbench.estimate.speed import FUSED_OPTIMIZER_PASSES, OPTIMIZER_PASSES

pytestmark = pytest.mark.torch


def test_smoke_rows_cover_every_case_and_count_the_estimators_passes(tmp_path):
    out = tmp_path / "rate.json"
    assert (
        optimizer_rate.main(["--device", "cpu", "--tiny", "--gpu", "h200", "--steps", "2", "--out", str(out)])
        == 0
    )
    rows = json.loads(out.read_text())["rows"]
    assert {(r["layout"], r["dtype"], r["impl"]) for r in rows} == {
        (layout, dtype, impl)
        for layout in optimizer_rate.TINY
        for dtype in ("fp32", "bf16")
        for impl in ("foreach", "fused")
    }
    for r in rows:
        passes = (FUSED_OPTIMIZER_PASSES if r["impl"] == "fused" else OPTIMIZER_PASSES)["adamw"]
        size = 4 if r["dtype"] == "fp32" else 2
        assert r["passes"] == passes
        assert r["bytes_per_second"] * r["seconds"] == pytest.approx(passes * r["elements"] * size)
        assert r["seconds"] > 0
