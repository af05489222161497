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

    python benchmarks/tuned_reserve.py llama-1b-train --batch 8 --out r.json
    python benchmarks/tuned_reserve.py bert-base-imdb --out r.json
    python benchmarks/tuned_reserve.py llama-1b-train --tiny --device cpu --out r.json   # smoke

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


def _phase(frames: list[dict[str, Any]]) -> str:
    names = [f.get("name", "") for f in frames]
    files = [f.get("filename", "") for f in frames]
    top = next((label for fn, label in PHASES if fn in names), "other")
    if any("torch/optim" in f for f in files):
        part = "optimizer"
    elif any(key in f for f in files for key in ("triton_heuristics", "autotune", "benchmark")):
        part = "compiler: autotune/benchmark"
    elif any(key in f for f in files for key in ("_inductor", "_dynamo", "_functorch")) and not any(
        "compile_fx" in f or "runtime_wrappers" in f for f in files
    ):
        part = "compiler"
    elif any(n in ("backward", "_engine_run_backward", "run_backward") for n in names):
        part = "backward"
    else:
        part = "forward"
    return f"{top} / {part}"


def analyse(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Replay the recorded trace: the reserve's peak, the segments taken by phase, the cache then."""
    events = [e for trace in snapshot["device_traces"] for e in trace]
    reserved = allocated = 0
    peak = {"reserved": 0, "allocated": 0, "index": -1}
    peak_allocated = 0
    by_phase: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    live_blocks: dict[int, int] = {}
    for i, e in enumerate(events):
        action, size = e["action"], e.get("size", 0)
        if action in ("segment_alloc", "segment_map"):
            reserved += size
            row = by_phase[_phase(e.get("frames", []))]
            row[0] += 1
            row[1] += size / GB
        elif action in ("segment_free", "segment_unmap"):
            reserved -= size
        elif action == "alloc":
            allocated += size
            live_blocks[e["addr"]] = size
        elif action == "free_completed":
            allocated -= live_blocks.pop(e["addr"], size)
        peak_allocated = max(peak_allocated, allocated)
        if reserved > peak["reserved"]:
            peak = {"reserved": reserved, "allocated": allocated, "index": i}
    at_peak = events[peak["index"]] if peak["index"] >= 0 else {}
    return {
        "events": len(events),
        "peak_reserved_gb": round(peak["reserved"] / GB, 3),
        "allocated_at_peak_reserved_gb": round(peak["allocated"] / GB, 3),
        "peak_allocated_gb": round(peak_allocated / GB, 3),
        "phase_at_peak_reserved": _phase(at_peak.get("frames", [])),
        "new_segments_by_phase": {k: [v[0], round(v[1], 3)] for k, v in sorted(by_phase.items())},
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
        "presets", nargs="+", help="speed.py scenarios or presets (llama-1b-train, bert-base-imdb)"
    )
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    results = []
    for name in args.presets:
        r = run(name, args.batch, args.seq, args.device, args.tiny)
        results.append(r)
        print(json.dumps({k: r[k] for k in r if k not in ("workload",)}, indent=1), flush=True)
    args.out.write_text(json.dumps({"benchmark": "tuned_reserve", "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
