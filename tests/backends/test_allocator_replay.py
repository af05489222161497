"""benchmarks/allocator_replay.py: a generation's allocations traced on the meta device and
replayed through a model of the CUDA caching allocator.

The trace must be the GPU's: its allocated peak above the weights equals the H200's measured one
for Llama-3.2-1B (the same operators allocate the same storages). The replay's reserve must come
near the measured reserve without any fitted number, and the allocator model must merge freed
neighbours and never merge segments, as PyTorch's does.
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
MiB = allocator_replay.MiB


def test_freed_neighbours_merge_within_a_segment_but_segments_never_merge():
    a = allocator_replay.CachingAllocator()
    a.malloc("x", 30 * MiB)  # a 30 MiB segment
    a.malloc("y", 30 * MiB)  # no free block: a second segment
    assert a.reserved == 60 * MiB
    a.free("x")
    a.free("y")
    a.malloc("z", 50 * MiB)  # two free 30 MiB segments do not make one 50 MiB block
    assert a.reserved == 110 * MiB
    a.malloc("w1", 10 * MiB)  # split from a free 30 MiB segment ...
    a.malloc("w2", 10 * MiB)  # ... and the rest of it
    a.free("w1")
    a.free("w2")  # merged back with its free neighbours: one 30 MiB block again
    a.malloc("v", 30 * MiB)
    assert a.reserved == 110 * MiB


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
