"""benchmarks/tuned_reserve.py's replay of an allocator history: the reserve's peak, what was
allocated then, and which phase of the tuned session took each segment, from the recorded frames.

The history here is written by hand in the format torch.cuda.memory._snapshot() returns (no GPU
in CI); the GPU run of the script reads the real one."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import tuned_reserve  # noqa: E402

GB = 10**9


def _frames(*names: str, file: str = "fitbench/backends/torch/tuned.py") -> list[dict[str, str]]:
    return [{"name": n, "filename": file, "line": 1} for n in names]


def test_the_replay_finds_the_reserve_peak_and_the_phase_of_each_segment() -> None:
    compile_fwd = _frames("forward", "_compile", "capture")
    optimizer = [
        {"name": "step", "filename": "torch/optim/adamw.py", "line": 1},
        *_frames("_body", "_compile"),
    ]
    capture = _frames("forward", "_try_capture", "capture")
    events = [
        {"action": "segment_alloc", "size": 4 * GB, "addr": 0, "frames": compile_fwd},
        {"action": "alloc", "size": 3 * GB, "addr": 0, "frames": compile_fwd},
        {"action": "free_completed", "size": 3 * GB, "addr": 0, "frames": compile_fwd},
        # the optimizer's first step finds no block of its size in the 4 GB cache: a new segment
        {"action": "segment_alloc", "size": 2 * GB, "addr": 10 * GB, "frames": optimizer},
        {"action": "alloc", "size": 2 * GB, "addr": 10 * GB, "frames": optimizer},
        {"action": "segment_free", "size": 4 * GB, "addr": 0, "frames": _frames("_release_compile_memory")},
        {"action": "segment_alloc", "size": 3 * GB, "addr": 20 * GB, "frames": capture},
        {"action": "alloc", "size": 3 * GB, "addr": 20 * GB, "frames": capture},
        # the backward's own thread records no session frame: the phase in progress takes it
        {"action": "segment_alloc", "size": 1 * GB, "addr": 30 * GB, "frames": []},
    ]
    out = tuned_reserve.analyse({"device_traces": [events], "segments": []})
    assert out["peak_reserved_gb"] == 6.0  # 4 + 2, before the release; 2 + 3 after it is lower
    assert out["allocated_at_peak_reserved_gb"] == 0.0  # the optimizer's block not yet handed out
    assert out["peak_allocated_gb"] == 5.0
    by_phase = out["new_segments_by_phase"]
    assert by_phase["compile step / forward"] == [1, 4.0]
    assert by_phase["compile step / optimizer"] == [1, 2.0]
    assert by_phase["warm-up and capture / forward"] == [1, 3.0]
    assert by_phase["warm-up and capture / backward"] == [1, 1.0]
    assert out["phase_at_peak_reserved"] == "compile step"
    # every segment taken or returned, in order, with the allocated and reserved bytes after it
    assert [row[2] for row in out["segment_timeline"]] == [4.0, 2.0, -4.0, 3.0, 1.0]
    assert out["segment_timeline"][-1][-1] == 6.0
