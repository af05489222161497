"""benchmarks/allocator_replay.py: a generation's allocations traced on the meta device and
replayed through a model of the CUDA caching allocator.

The trace must be the GPU's: its allocated peak above the weights equals the H200's measured one
for Llama-3.2-1B (the same operators allocate the same storages). The replay's reserve must come
near the measured reserve without any fitted number.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import allocator_replay  # noqa: E402

pytestmark = pytest.mark.torch


def test_the_traced_peak_is_the_gpus_and_the_reserve_comes_near_it():
    row = allocator_replay.replay_point("llama-3.2-1b-instruct", 16, 1024, 32)
    measured = json.loads((BENCHMARKS / "results" / "accuracy-holdout-h200-2026-12-03.json").read_text())
    point = next(p for p in measured["points"] if p["label"].startswith("llama-3.2-1b mode=infer"))
    m = point["measurement"]
    loaded = m["memory_after_load_allocated_bytes"]
    assert row["weights_bytes"] == pytest.approx(loaded, rel=0.03)  # the run adds buffers and inputs
    assert row["allocated_above_weights_bytes"] == pytest.approx(m["peak_allocated_bytes"] - loaded, rel=0.03)
    reserve = m["peak_reserved_bytes"] - loaded
    assert 0.85 * reserve < row["reserved_above_weights_bytes"] <= reserve
    assert row["gap_bytes"] > 0.5 * (m["peak_reserved_bytes"] - m["peak_allocated_bytes"])
