"""Where the tuned training step's reserved memory comes from: the allocator's history, by phase.

The tuned (compiled, CUDA-graph) step's whole-process peak reads 10-20 % above what the estimate
allows for it, and the reserve, not the allocated bytes, is what grows: on the H200 the
Llama-3.2-1B b8 step allocated 49.1 GB at its peak and reserved 61.9 GB
(`python benchmarks/compiled_memory.py`). This script opens the tuned session exactly as
`fitbench run --exec tuned` does (compile step, cache release, warm-up, capture, replays) with
PyTorch's allocator history recording, then replays that history to say:

* when the reserve peaked, and what was allocated then;
* which phase took each new segment: the compiling step's forward, backward, optimizer step or
  compiler work (autotuning, benchmarking), the warm-up, the capture, the replays;
* the free bytes cached at the reserve's peak and the largest free blocks.

    python benchmarks/tuned_reserve.py llama-1b-train --out r.json
    python benchmarks/tuned_reserve.py bert-base-imdb --out r.json
    python benchmarks/tuned_reserve.py llama-1b-train --tiny --device cpu --out r.json   # smoke

One preset a process: a closed session's memory stays with the process that held it.

On a CPU there is no allocator history: the smoke run only proves the session opens and steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from fitbench.backends import get_backend
from fitbench.backends.base import RunOptions
from fitbench.workloads.presets import get_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
GB = 1e9
REPLAYS = 3

# Phase of an allocator event, from the Python frames recorded with it (innermost first): the
# first of these function names found among the frames decides.
PHASES = (
    ("_release_compile_memory", "compile: cache release"),
    ("_try_capture", "warm-up and capture"),
    ("_capture_uncompiled", "warm-up and capture (uncompiled)"),
    ("_compile", "compile step"),
    ("step", "replays"),
)


def _phase(frames: list[dict[str, Any]]) -> str | None:
    """The session phase named by an event's frames, or None (an event of the autograd engine's
    own thread carries no frame of the session: it belongs to the phase in progress)."""
    names = {f.get("name", "") for f in frames}
    return next((label for fn, label in PHASES if fn in names), None)


def _part(frames: list[dict[str, Any]]) -> str:
    files = [f.get("filename", "") for f in frames]
    names = {f.get("name", "") for f in frames}
    if any("torch/optim" in f for f in files):
        return "optimizer"
    if any("triton_heuristics" in f or "autotune" in f or "runtime/benchmarking" in f for f in files):
        return "compiler: autotune/benchmark"
    if not frames or names & {"backward", "_engine_run_backward", "run_backward"}:
        return "backward"
    return "forward"


def analyse(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Replay the recorded trace: the reserve's peak, the segments taken by phase, the cache then.

    Events keep their order; the phase of each is the last one a session frame named (the
    backward runs on the autograd engine's thread, whose events carry no session frame)."""
    events = [e for trace in snapshot["device_traces"] for e in trace]
    reserved = allocated = 0
    peak = {"reserved": 0, "allocated": 0, "index": -1, "phase": "start"}
    peak_allocated = 0
    phase = "start"
    by_phase: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    timeline: list[list[Any]] = []
    live_blocks: dict[int, int] = {}
    for i, e in enumerate(events):
        action, size, frames = e["action"], e.get("size", 0), e.get("frames", [])
        phase = _phase(frames) or phase
        if action in ("segment_alloc", "segment_map"):
            reserved += size
            key = f"{phase} / {_part(frames)}"
            row = by_phase[key]
            row[0] += 1
            row[1] += size / GB
            timeline.append([i, key, round(size / GB, 4), round(allocated / GB, 3), round(reserved / GB, 3)])
        elif action in ("segment_free", "segment_unmap"):
            reserved -= size
            timeline.append(
                [
                    i,
                    f"{phase} / free",
                    round(-size / GB, 4),
                    round(allocated / GB, 3),
                    round(reserved / GB, 3),
                ]
            )
        elif action == "alloc":
            allocated += size
            live_blocks[e["addr"]] = size
        elif action == "free_completed":
            allocated -= live_blocks.pop(e["addr"], size)
        peak_allocated = max(peak_allocated, allocated)
        if reserved > peak["reserved"]:
            peak = {"reserved": reserved, "allocated": allocated, "index": i, "phase": phase}
    return {
        "events": len(events),
        "peak_reserved_gb": round(peak["reserved"] / GB, 3),
        "allocated_at_peak_reserved_gb": round(peak["allocated"] / GB, 3),
        "peak_allocated_gb": round(peak_allocated / GB, 3),
        "phase_at_peak_reserved": peak["phase"],
        "new_segments_by_phase": {k: [v[0], round(v[1], 3)] for k, v in sorted(by_phase.items())},
        "segment_timeline": timeline,
    }


def run(name: str, batch: int | None, seq: int | None, device: str, tiny: bool) -> dict[str, Any]:
    import torch

    import speed

    scenario = next((s for s in speed.SCENARIOS if s.name == name), None)
    workload = scenario.workload(tiny=tiny) if scenario else get_workload(name, tiny=tiny)
    overrides = {k: v for k, v in (("batch_size", batch), ("seq_len", seq)) if v}
    if overrides:
        workload = workload.with_overrides(**overrides)
    backend = get_backend("torch")
    backend.device_info(device)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
    t0 = time.perf_counter()
    session = backend.open(workload, RunOptions(device=device, exec_mode="tuned"))
    for _ in range(REPLAYS):
        session.step()
    session.sync()
    result: dict[str, Any] = {
        "workload": workload.to_dict(),
        "seconds": round(time.perf_counter() - t0, 2),
        "notes": {k: v for k, v in session.notes.items() if isinstance(v, (str, int, float, bool))},
    }
    if cuda:
        stats = torch.cuda.memory_stats()
        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        result["stats"] = {
            "peak_allocated_gb": round(stats["allocated_bytes.all.peak"] / GB, 3),
            "peak_reserved_gb": round(stats["reserved_bytes.all.peak"] / GB, 3),
            "reserved_now_gb": round(stats["reserved_bytes.all.current"] / GB, 3),
        }
        result["history"] = analyse(snapshot)
        free = sorted(
            (b["size"] for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "inactive"),
            reverse=True,
        )
        result["cache_at_end"] = {
            "segments": len(snapshot["segments"]),
            "free_gb": round(sum(free) / GB, 3),
            "largest_free_gb": [round(f / GB, 3) for f in free[:8]],
        }
    session.close()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "preset",
        help="a speed.py scenario or preset (llama-1b-train, bert-base-imdb); one a process, since "
        "a closed session's memory stays with the process",
    )
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    r = run(args.preset, args.batch, args.seq, args.device, args.tiny)
    shown = {k: v for k, v in r.items() if k != "workload"}
    if "history" in r:
        shown["history"] = {k: v for k, v in r["history"].items() if k != "segment_timeline"}
    print(json.dumps(shown, indent=1), flush=True)
    args.out.write_text(json.dumps({"benchmark": "tuned_reserve", "results": [r]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
