"""Every stored tuned measurement against today's tuned estimate, with the estimate's breakdown.

Read-only: it reads the stored H200 (and H100) results and rewrites nothing. For each measurement of
`--exec tuned` (and of the compiled static-cache paths that the tuned profile stands for) it
prints the measured and estimated headline, the error and where the estimated step goes:
compute-bound, memory-bound and floor-bound kernel time, host time. No framework import, no GPU.

    python benchmarks/tuned_accuracy.py                 # the table
    python benchmarks/tuned_accuracy.py --json FILE     # the same rows as JSON

Sources (benchmarks/results):
  speed-h200-*.json            benchmarks/speed.py's tuned runs (ResNet-50 CIFAR, BERT-base, 6.7B decode);
                               training steps only where they ran compiled (the tuned estimate's step)
  speed-h100-*.json            the same on an H100, scored against the H100's estimate (labels end "h100")
  compiled-step-h200-*.json    benchmarks/compiled_step.py's compiled tuned steps (ResNet-50, BERT-base,
                               Llama-3.2-1B)
  decode-kernels-h200-*.json   the 6.7B token with the torch.compile'd step of cuBLAS GEMVs at batch 1
                               (the path tuned takes above batch 1; at batch 1 it runs fused kernels)
  serving-h200-*.json          transformers' generate with a static cache (compiled forward, but
                               generate's own Python loop around it): not fitbench's tuned mode,
                               scored against the tuned profile as the README does
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.estimate import speed
from fitbench.estimate.execution import features_not_run, without_step_features, workload_as_run
from fitbench.estimate.profile import get_profile
from fitbench.estimate.timing import generation, step_timing
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
GPU = "h200"


@dataclass(frozen=True, kw_only=True)
class Point:
    """One stored tuned measurement: the workload as it ran and its headline."""

    label: str
    source: str
    workload: Workload
    measured: float
    unit: str  # img/s | s/step | tok/s | s/prefill
    fitbench_tuned: bool = True  # False: a compiled path outside fitbench's tuned mode
    #: today's step features this measurement's step ran without (execution.STEP_FEATURES)
    features_off: tuple[str, ...] = ()
    gpu: str = GPU  # the catalog GPU it ran on, which its estimate is for


def _workload_from(stored: dict[str, Any], precision: str | None) -> Workload:
    """The stored workload (a preset's or a bundled model's, as the record wrote it) at the
    precision it ran."""
    w = Workload.from_dict(stored)
    return w.replace(precision=precision) if precision else w


def speed_points(path: Path, gpu: str = GPU) -> list[Point]:
    """The tuned runs of one benchmarks/speed.py result file, at the precision they ran, on `gpu`."""
    data = json.loads(path.read_text())
    card = "" if gpu == GPU else f" {gpu}"
    out = []
    for s in data["scenarios"]:
        run = s["runs"].get("tuned") or {}
        m = run.get("measurement") or {}
        if m.get("status") != "ok" or run.get("headline") is None:
            continue
        w = _workload_from(s["workload"], m.get("precision_in_effect"))
        notes = m.get("backend_notes") or {}
        if not w.is_generation and notes.get("compiled_step") is not True:
            continue  # an uncompiled tuned step: the tuned estimate counts the compiled one
        out.append(
            Point(
                label=f"{s['scenario']} b{w.batch_size}{card}",
                source=path.name,
                workload=w,
                measured=float(run["headline"]),
                unit=run["headline_unit"],
                features_off=features_not_run(w, notes),
                gpu=gpu,
            )
        )
        # The tuned estimate times the prefill replayed from its CUDA graph; runs from before
        # that graph prefilled eagerly, one host call at a time (17.7-23.6 ms for 6.6 ms of kernels).
        graphed = (m.get("backend_notes") or {}).get("prefill_cuda_graph") is True
        if w.is_generation and m.get("prefill_seconds") and graphed:
            out.append(
                Point(
                    label=f"{s['scenario']} b{w.batch_size} prefill {w.prompt_tokens}{card}",
                    source=path.name,
                    workload=w,
                    measured=float(m["prefill_seconds"]),
                    unit="s/prefill",
                    gpu=gpu,
                )
            )
    return out


def compiled_step_points(path: Path) -> list[Point]:
    """The compiled variants of one benchmarks/compiled_step.py result file (step seconds)."""
    data = json.loads(path.read_text())
    out = []
    for s in data["scenarios"]:
        run = s.get("runs", {}).get("compiled") or {}
        if run.get("status") != "ok" or not run.get("compiled_step") or not run.get("step_seconds"):
            continue
        w = Workload.from_dict(s["workload"]).replace(precision=run["precision_in_effect"])
        notes = (run.get("measurement") or {}).get("backend_notes") or {}
        if w.family == "decoder" and "causal" not in str(notes.get("attention", "")):
            # measured before the tuned decoder called SDPA causal without a mask
            # (backends/torch/causal_sdpa.py): its attention computed the whole score square
            continue
        out.append(
            Point(
                label=f"{s['scenario']} b{w.batch_size} compiled",
                source=path.name,
                workload=w,
                measured=float(run["step_seconds"]),
                unit="s/step",
                features_off=features_not_run(w, notes),
            )
        )
    return out


def decode_kernel_points(path: Path) -> list[Point]:
    """The compiled (cuBLAS GEMV) whole-token run of decode_kernels.py: the 6.7B preset at batch 1."""
    data = json.loads(path.read_text())
    compiled = (data.get("token") or {}).get("compiled") or {}
    if not compiled.get("tokens_per_s"):
        return []
    w = get_workload("llm-6b", batch_size=1)
    return [
        Point(
            label="llm-6b b1 compiled step",
            source=path.name,
            workload=w,
            measured=float(compiled["tokens_per_s"]),
            unit="tok/s",
        )
    ]


def serving_points(path: Path) -> list[Point]:
    """transformers' static-cache generate (compiled forward) of serving_gpu.py's 1.1B model."""
    from serving_gpu import fitbench_workload  # benchmarks/ is the script's folder

    data = json.loads(path.read_text())
    out = []
    for row in data["rows"]:
        value = row.get("measured_generate_tokens_per_second")
        if not value:
            continue
        w = fitbench_workload(data["model"], row["concurrency"], data["prompt_tokens"], data["new_tokens"])
        out.append(
            Point(
                label=f"1.1B generate static b{row['concurrency']}",
                source=path.name,
                workload=w,
                measured=float(value),
                unit="tok/s",
                fitbench_tuned=False,
            )
        )
    return out


def stored_points(folder: Path = RESULTS) -> list[Point]:
    points: list[Point] = []
    for path in sorted(folder.glob("speed-h200-*.json")):
        points += speed_points(path)
    for path in sorted(folder.glob("speed-h100-*.json")):
        points += speed_points(path, "h100")
    for path in sorted(folder.glob("compiled-step-h200-*.json")):
        points += compiled_step_points(path)
    for path in sorted(folder.glob("decode-kernels-h200-*.json")):
        points += decode_kernel_points(path)
    for path in sorted(folder.glob("serving-h200-*.json")):
        points += serving_points(path)
    return points


def score(point: Point) -> dict[str, Any]:
    """Today's tuned estimate of one point on its GPU: headline, error and the step's breakdown."""
    gpu = get_gpu(point.gpu)
    profile = get_profile("torch", "tuned", use_user=False)
    w = workload_as_run(point.workload, "tuned", gpu)
    with without_step_features(*point.features_off):
        if w.is_generation:
            timing = generation(w, gpu, profile)
            t = timing.prefill if point.unit == "s/prefill" else timing.decode
            estimated = t.seconds if point.unit == "s/prefill" else w.batch_size / t.seconds
        else:
            t = step_timing(w, gpu, profile)
            estimated = w.batch_size / t.seconds if point.unit == "img/s" else t.seconds
        launches = _launches(w, profile) if w.is_training else None
    # Error in the headline's direction: + is an estimate faster than measured.
    seconds = point.unit in ("s/step", "s/prefill")
    faster = point.measured / estimated - 1.0 if seconds else estimated / point.measured - 1.0
    return {
        "label": point.label,
        "source": point.source,
        "gpu": point.gpu,
        "fitbench_tuned": point.fitbench_tuned,
        "precision": w.precision,
        "unit": point.unit,
        "measured": point.measured,
        "estimated": estimated,
        "error": faster,
        "step_seconds": t.seconds,
        "compute_seconds": t.compute_seconds,
        "memory_seconds": t.memory_seconds,
        "floor_seconds": t.floor_seconds,
        "host_seconds": t.host_seconds,
        "launches": launches,
        "features_off": list(point.features_off),
    }


def _launches(w: Workload, profile: Any) -> float | None:
    """GPU kernels the estimate counts in one training step (None with an estimator that does
    not list them, to score older revisions too)."""
    if not hasattr(speed, "training_kernels"):
        return None
    return speed.kernel_launches(speed.training_kernels(w, profile))


def _num(value: float, unit: str) -> str:
    if unit in ("s/step", "s/prefill"):
        return f"{value * 1e3:.2f} ms"
    return f"{value:,.0f} {unit}"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "point",
        "measured",
        "estimated",
        "error",
        "step ms",
        "compute",
        "memory",
        "floor",
        "host",
        "launches",
    )
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        mark = "" if r["fitbench_tuned"] else " (*)"
        launches = "-" if r.get("launches") is None else f"{r['launches']:.0f}"
        lines.append(
            " | ".join(
                (
                    r["label"] + mark,
                    _num(r["measured"], r["unit"]),
                    _num(r["estimated"], r["unit"]),
                    f"{r['error']:+.0%}",
                    f"{r['step_seconds'] * 1e3:.3f}",
                    *(
                        f"{r[k] * 1e3:.3f}"
                        for k in ("compute_seconds", "memory_seconds", "floor_seconds", "host_seconds")
                    ),
                    launches,
                )
            )
        )
    lines.append(
        "error: + means the estimate is faster than measured; compute/memory/floor/host in ms of "
        "the estimated step; (*) not fitbench's tuned mode (transformers' generate loop)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of stored results")
    parser.add_argument("--json", type=Path, help="write the rows here as JSON")
    args = parser.parse_args(argv)
    rows = [score(p) for p in stored_points(args.results)]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1) + "\n")  # each row names its gpu
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
