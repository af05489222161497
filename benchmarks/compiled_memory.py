"""The stored compiled tuned steps' allocated peaks against the estimate, before and after the
compiled saved-activation count (transformer_cost.compiled_layer_saved_bytes_per_token).

Read-only, no framework import, no GPU. For every training step in the stored H200 results that
ran compiled (backend_notes.compiled_step), it prints the estimate's allocated bytes (its total
less the CUDA context and the allocator's fragmentation share) with the eager count ("before":
the tuned profile with fuses_pointwise off, which is how the memory was counted until then) and
with the compiled count ("after"), against the measured warm-up peak of allocated bytes
(`warmup_peak_allocated_bytes`: from the session's start, through the compile, warm-up and
capture; after capture a CUDA graph's replays allocate nothing, so the timed phase's
`peak_allocated_bytes` shows only what stays resident). The estimate's total, the NVML process
peak and the warm-up's reserved peak are printed alongside.

    PYTHONPATH=src python benchmarks/compiled_memory.py
    PYTHONPATH=src python benchmarks/compiled_memory.py --results DIR   # e.g. a fresh compiled_step.py run
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.estimate.execution import features_not_run, without_step_features, workload_as_run
from fitbench.estimate.memory import memory_breakdown
from fitbench.estimate.profile import Profile, get_profile
from fitbench.workloads.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
GB = 1e9


def _estimates(w: Workload, profile: Profile) -> tuple[float, float]:
    b = memory_breakdown(w, profile)
    return b.total - b.parts["cuda_context"] - b.parts["fragmentation"], b.total


def _runs(folder: Path) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(label, stored workload, measurement) of every tuned run in the stored result files."""
    out = []
    for path in sorted(folder.glob("compiled-step-h200-*.json")):
        for s in json.loads(path.read_text())["scenarios"]:
            run = s["runs"].get("compiled") or {}
            out.append((f"{path.stem[:13]} {s['scenario']}", s["workload"], run.get("measurement") or {}))
    for path in sorted(folder.glob("speed-h200-*.json")):
        for s in json.loads(path.read_text())["scenarios"]:
            run = s["runs"].get("tuned") or {}
            out.append((f"{path.stem} {s['scenario']}", s["workload"], run.get("measurement") or {}))
    for path in sorted(folder.glob("tuned-oos-h200-*.json")):
        for run in json.loads(path.read_text())["runs"].values():
            w = run["workload"]
            out.append((f"{path.stem} {w['name']} b{w['batch_size']}", w, run["measurement"]))
    return out


def rows(folder: Path = RESULTS) -> list[dict[str, Any]]:
    gpu = get_gpu("h200")
    tuned = get_profile("torch", "tuned", use_user=False)
    eager = dataclasses.replace(tuned, fuses_pointwise=False)
    out = []
    for label, stored, m in _runs(folder):
        compiled = (m.get("backend_notes") or {}).get("compiled_step")
        if not compiled or not m.get("warmup_peak_allocated_bytes"):
            continue
        w = workload_as_run(Workload.from_dict(stored), "tuned", gpu)
        if w.is_generation:
            continue
        # the estimate of the step the run measured (its notes name the features it had)
        with without_step_features(*features_not_run(w, m.get("backend_notes") or {})):
            (before, before_total), (after, after_total) = _estimates(w, eager), _estimates(w, tuned)
        measured = float(m["warmup_peak_allocated_bytes"])
        out.append(
            {
                "run": label,
                "allocated_before": before,
                "allocated_after": after,
                "allocated_measured": measured,
                "error_before": (before - measured) / measured,
                "error_after": (after - measured) / measured,
                "total_before": before_total,
                "total_after": after_total,
                "nvml_process_peak": m.get("nvml_process_peak_bytes"),
                "warmup_reserved": m.get("warmup_peak_reserved_bytes"),
            }
        )
    return out


def table(data: list[dict[str, Any]]) -> str:
    head = (
        f"{'run':<48} {'alloc est before':>16} {'after':>7} {'measured':>8} {'err before':>10} {'after':>7}"
        f" | {'total est before':>16} {'after':>7} {'nvml':>7} {'reserved':>8}"
    )
    lines = [head]
    for r in data:
        lines.append(
            f"{r['run']:<48} {r['allocated_before'] / GB:>16.2f} {r['allocated_after'] / GB:>7.2f}"
            f" {r['allocated_measured'] / GB:>8.2f} {r['error_before']:>+10.1%} {r['error_after']:>+7.1%}"
            f" | {r['total_before'] / GB:>16.2f} {r['total_after'] / GB:>7.2f}"
            f" {(r['nvml_process_peak'] or 0) / GB:>7.2f} {(r['warmup_reserved'] or 0) / GB:>8.2f}"
        )
    return "\n".join(lines) + "\n(GB; allocated = estimate total less CUDA context and fragmentation)\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the stored result files")
    args = parser.parse_args(argv)
    print(table(rows(args.results)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
