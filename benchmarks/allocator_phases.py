"""Where a training step's reserved memory grows: the caching allocator phase by phase.

The NVML peak of a training step is the caching allocator's reserved peak plus the CUDA context,
and the reserved peak can sit gigabytes above the allocated peak. This script says in which phase
of the step (forward, backward, optimizer) the allocator took new segments, how large they were,
and what the cache held when the optimizer began (the free blocks the optimizer's temporaries
could have reused). It builds the session exactly as `fitbench run` does and runs a few steps:

    python benchmarks/allocator_phases.py --holdout gemma-2-2b --holdout phi-3-mini --out r.json
    python benchmarks/allocator_phases.py llama-1b-train --steps 3
    python benchmarks/allocator_phases.py bert-base-imdb --tiny --device cpu   # smoke: no allocator
    python benchmarks/allocator_phases.py --compare benchmarks/results/allocator-phases-h100-2026-12-05.json

Each point runs in this process one after another, with the cache emptied between them.
--compare prints a stored file's measured phases beside the estimator's first-step model
(fitbench.estimate.first_step): the gradients' and the first optimizer step's new segments.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

from fitbench.backends import get_backend
from fitbench.backends.base import RunOptions
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

GB = 1e9


def _point(text: str) -> Workload:
    """The workload of the first point of accuracy.py's sets whose label contains text."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import accuracy

    for name, overrides in (point for points in accuracy.SETS.values() for point in points):
        if text in accuracy.label(name, overrides) and overrides.get("mode", "train") == "train":
            return accuracy.build_workload(name, overrides)[0]
    raise SystemExit(f"no training point of accuracy.py's sets has {text!r} in its label")


def _segments(torch: Any) -> dict[int, dict[str, Any]]:
    """The allocator's segments by address: size and its free (inactive) blocks."""
    out: dict[int, dict[str, Any]] = {}
    for seg in torch.cuda.memory._snapshot()["segments"]:
        free = [b["size"] for b in seg["blocks"] if b["state"] == "inactive"]
        out[seg["address"]] = {"size": seg["total_size"], "pool": seg["segment_type"], "free": free}
    return out


class PhaseRecorder:
    """Marks the step's phases (forward, backward, optimizer) through torch's own hooks and reads
    the allocator's counters at each mark."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.marks: list[dict[str, Any]] = []
        self.step = 0
        self.segments_before_optimizer: dict[int, dict[str, Any]] = {}
        self.optimizer_segments: list[dict[str, Any]] = []

    def mark(self, name: str) -> None:
        cuda = self.torch.cuda
        cuda.synchronize()
        stats = cuda.memory_stats()
        self.marks.append(
            {
                "step": self.step,
                "mark": name,
                "allocated": stats.get("allocated_bytes.all.current", 0),
                "reserved": stats.get("reserved_bytes.all.current", 0),
                "peak_allocated_since_last_mark": stats.get("allocated_bytes.all.peak", 0),
                "segments": stats.get("segment.all.current", 0),
                "alloc_retries": stats.get("num_alloc_retries", 0),
            }
        )
        cuda.reset_peak_memory_stats()

    def install(self) -> None:
        torch = self.torch
        original_backward = torch.Tensor.backward

        def backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            self.mark("forward_end")
            result = original_backward(tensor, *args, **kwargs)
            self.mark("backward_end")
            return result

        torch.Tensor.backward = backward

        def pre(optimizer: Any, args: Any, kwargs: Any) -> None:
            self.mark("optimizer_start")
            self.segments_before_optimizer = _segments(torch)

        def post(optimizer: Any, args: Any, kwargs: Any) -> None:
            self.mark("optimizer_end")
            after = _segments(torch)
            new = [s["size"] for a, s in after.items() if a not in self.segments_before_optimizer]
            free = sorted(
                (b for s in self.segments_before_optimizer.values() for b in s["free"]), reverse=True
            )
            params = sorted(
                (
                    p.numel() * p.element_size()
                    for group in optimizer.param_groups
                    for p in group["params"]
                    if p.grad is not None
                ),
                reverse=True,
            )
            self.optimizer_segments.append(
                {
                    "step": self.step,
                    "new_segments": sorted(new, reverse=True),
                    "new_segment_bytes": sum(new),
                    "cached_free_bytes_before": sum(free),
                    "largest_free_blocks_before": free[:12],
                    "free_blocks_before": len(free),
                    "segment_sizes_before": _histogram(
                        [s["size"] for s in self.segments_before_optimizer.values()]
                    ),
                    "param_bytes_largest": params[:12],
                    "param_bytes_total": sum(params),
                    "params": len(params),
                }
            )

        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        register_optimizer_step_pre_hook(pre)
        register_optimizer_step_post_hook(post)

    def reset(self) -> None:
        self.marks = []
        self.optimizer_segments = []


def _histogram(sizes: list[int]) -> dict[str, list[float]]:
    """Segments by size class: count and gigabytes."""
    edges = [(2 << 20, "<=2MB"), (20 << 20, "<=20MB"), (200 << 20, "<=200MB"), (2 << 30, "<=2GB")]
    out: dict[str, list[float]] = {}
    for size in sizes:
        name = next((n for e, n in edges if size <= e), ">2GB")
        count, gb = out.get(name, [0, 0.0])
        out[name] = [count + 1, round(gb + size / GB, 3)]
    return out


def measure(workload: Workload, steps: int, device: str, recorder: PhaseRecorder) -> dict[str, Any]:
    import torch

    backend = get_backend("torch")
    backend.device_info(device)
    session = backend.open(workload, RunOptions(device=device))
    recorder.reset()
    t0 = time.perf_counter()
    for step in range(steps):
        recorder.step = step
        recorder.mark("step_start")
        session.step()
        recorder.mark("step_end")
    stats = torch.cuda.memory_stats()
    result = {
        "workload": workload.name,
        "spec": workload.to_dict(),
        "batch_size": workload.batch_size,
        "seq_len": workload.seq_len,
        "precision": workload.precision,
        "optimizer_impl": workload.optimizer_impl,
        "seconds": round(time.perf_counter() - t0, 2),
        "peak_allocated": stats.get("allocated_bytes.all.peak", 0),
        "peak_reserved": max(m["reserved"] for m in recorder.marks),
        "marks": recorder.marks,
        "optimizer": recorder.optimizer_segments,
    }
    session.close()
    del session
    gc.collect()
    torch.cuda.empty_cache()
    return result


def summary(result: dict[str, Any]) -> str:
    """Reserved growth by phase, step by step, in gigabytes."""
    lines = [f"{result['workload']} b{result['batch_size']} s{result['seq_len']} {result['precision']}"]
    marks = result["marks"]
    for prev, cur in itertools.pairwise(marks):
        if cur["step"] != prev["step"]:
            continue
        lines.append(
            f"  step {cur['step']} {prev['mark']:>15} -> {cur['mark']:<15} "
            f"reserved {prev['reserved'] / GB:7.2f} -> {cur['reserved'] / GB:7.2f}  "
            f"allocated {cur['allocated'] / GB:7.2f} (peak {cur['peak_allocated_since_last_mark'] / GB:7.2f})"
        )
    for opt in result["optimizer"]:
        free_mb = [round(b / 1e6) for b in opt["largest_free_blocks_before"][:6]]
        param_mb = [round(b / 1e6) for b in opt["param_bytes_largest"][:4]]
        lines.append(
            f"  step {opt['step']} optimizer: {len(opt['new_segments'])} new segments "
            f"{opt['new_segment_bytes'] / GB:.2f} GB; cached free before "
            f"{opt['cached_free_bytes_before'] / GB:.2f} GB in {opt['free_blocks_before']} blocks "
            f"(largest {free_mb} MB); largest params {param_mb} MB"
        )
    return "\n".join(lines)


def _stored_workload(result: dict[str, Any]) -> Workload | None:
    """The point's workload: stored with it, or (older files) the training point of accuracy.py's
    sets with its name, batch, sequence and precision."""
    if "spec" in result:
        return Workload.from_dict(result["spec"])
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import accuracy

    for name, overrides in (point for points in accuracy.SETS.values() for point in points):
        if overrides.get("mode") != "train" or overrides.get("peft"):
            continue
        workload = accuracy.build_workload(name, overrides)[0]
        key = (workload.name, workload.batch_size, workload.seq_len, workload.precision)
        if key == (result["workload"], result["batch_size"], result["seq_len"], result["precision"]):
            return workload
    return None


def compare(path: Path) -> int:
    """Measured new segments of the first step's backward and optimizer step, and of the steps
    after it, against the estimator's two-step replay (fitbench.estimate.first_step), in
    gigabytes; and the reserve the steps reached above what loading left, against the replay's
    peak. A negative "later steps" is a run whose cache was emptied after its first step."""
    from fitbench.catalog import get_gpu
    from fitbench.estimate.execution import workload_as_run
    from fitbench.estimate.first_step import first_step
    from fitbench.estimate.single_device import graded_segments

    heads = ("backward growth", "optimizer new segments", "later steps", "reserve")
    print(f"{'point':<34}" + "".join(f" {head:>22}" for head in heads))
    print(f"{'':<34}" + f" {'measured':>10} {'estimate':>11}" * len(heads))
    for result in json.loads(path.read_text())["points"]:
        workload = _stored_workload(result)
        if workload is None:
            continue
        workload = workload_as_run(workload, "default", get_gpu("h100-sxm"), "torch")
        segments = [seg for seg, _ in graded_segments(workload, "torch")]
        first = first_step(workload, "torch", segments)
        marks = result["marks"]
        reserved = {(m["step"], m["mark"]): m["reserved"] for m in marks}
        growth = reserved[(0, "backward_end")] - reserved[(0, "forward_end")]
        new = result["optimizer"][0]["new_segment_bytes"]
        later = marks[-1]["reserved"] - reserved[(0, "step_end")]
        reserve = result["peak_reserved"] - reserved[(0, "step_start")]
        label = f"{workload.name} b{workload.batch_size} {workload.precision}"
        nan = float("nan")
        est = (
            (
                first.gradient_segment_bytes,
                first.optimizer_segment_bytes,
                first.second_step_segment_bytes,
                first.peak_reserved_bytes,
            )
            if first
            else (nan, nan, nan, nan)
        )
        row = "".join(
            f" {m / GB:>10.2f} {e / GB:>11.2f}"
            for m, e in zip((growth, new, later, reserve), est, strict=True)
        )
        print(f"{label:<34}{row}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workloads", nargs="*", help="presets")
    parser.add_argument("--holdout", action="append", default=[], metavar="TEXT")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", type=Path, metavar="FILE", help="a stored result against the estimate")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(args.compare)
    workloads = [get_workload(n, tiny=args.tiny) for n in args.workloads]
    workloads += [_point(t) for t in args.holdout]
    if not workloads:
        parser.error("give a preset or --holdout TEXT")
    if not args.device.startswith("cuda"):
        print("the caching allocator exists on CUDA only: nothing to record on", args.device)
        return 0
    import torch

    recorder = PhaseRecorder(torch)
    recorder.install()  # once: torch's optimizer hooks are global
    results = []
    for workload in workloads:
        try:
            result = measure(workload, args.steps, args.device, recorder)
        except torch.OutOfMemoryError as exc:  # the next point still runs
            print(f"{workload.name}: out of memory ({str(exc).splitlines()[0][:120]})", flush=True)
            gc.collect()
            torch.cuda.empty_cache()
            continue
        print(summary(result), flush=True)
        results.append(result)
        if args.out:
            args.out.write_text(json.dumps({"benchmark": "allocator_phases", "points": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
