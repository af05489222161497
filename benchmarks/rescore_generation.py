"""Measured against today's estimate for stored eager `generate` measurements, and the fit of
`generate_host_seconds_per_op` on the calibration points.

Reads result files as they were written, recomputes every estimate from the stored workload with
the estimator of this checkout, and prints measured vs estimated decode time per step:

* benchmarks/accuracy.py / models_gpu.py JSON ("points" with a workload and a measurement):
  the generation points, decode seconds per step = decode_seconds / new_tokens;
* benchmarks/generate_host.py JSON ("rows"): each case at both depths, step seconds as measured.

    python benchmarks/rescore_generation.py FILE [FILE ...]
    python benchmarks/rescore_generation.py --fit benchmarks/results/accuracy-h200-2026-12-02.json
    python benchmarks/rescore_generation.py --set generate_host_seconds_per_op=12.1e-6 FILE

`--fit` runs `fitbench calibrate`'s rule (estimate/calibrate.py: fit_profile) on the file's
generation points of the `--fit-workload` preset only, repeated until the value settles (one
step scales by the median measured/estimated ratio of the overhead-bound points), and prints
the value; it writes nothing. `--set KEY=VALUE` scores with a profile constant replaced.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.estimate.calibrate import fit_profile, points_from_result_file
from fitbench.estimate.profile import Profile, get_profile
from fitbench.workloads.hf_config import workload_from_config
from fitbench.workloads.workload import Workload


def _profile(overrides: dict[str, float]) -> Profile:
    return dataclasses.replace(get_profile("torch", "default", use_user=False), **overrides)


def _decode_step(workload: Workload, gpu_id: str, profile: Profile) -> float:
    est = estimate(workload, get_gpu(gpu_id), profile=profile)
    return workload.batch_size / est.tokens_per_second if est.tokens_per_second else 0.0


def rows_from_points(data: dict[str, Any], profile: Profile) -> list[tuple[str, float, float]]:
    rows = []
    for p in data["points"]:
        w = Workload.from_dict(p["workload"])
        m = p["measurement"]
        if not w.is_generation or m.get("status") != "ok" or not m.get("decode_seconds"):
            continue
        measured = m["decode_seconds"] / (w.new_tokens or 1)
        label = p.get("label") or w.name
        rows.append(
            (f"{label} b{w.batch_size} p{w.prompt_tokens}", measured, _decode_step(w, data["gpu"], profile))
        )
    return rows


def rows_from_generate_host(data: dict[str, Any], profile: Profile) -> list[tuple[str, float, float]]:
    rows = []
    for row in data["rows"]:
        for layers in data["layers"]:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "config.json"
                path.write_text(json.dumps({**row["fields"], "num_hidden_layers": layers}))
                w = workload_from_config(
                    path,
                    mode="infer",
                    batch_size=row["batch"],
                    prompt_tokens=row["prompt"],
                    new_tokens=data["new_tokens"],
                    precision="bf16",
                )
            rows.append(
                (
                    f"{row['case']} L{layers}",
                    row[str(layers)]["step_seconds"],
                    _decode_step(w, data["gpu"], profile),
                )
            )
    return rows


def fit(path: Path, workload_name: str, profile: Profile) -> tuple[float, list[float]]:
    gpu_id, points = points_from_result_file(path)
    points = [(w, m) for w, m in points if w.is_generation and w.name == workload_name]
    value, ratios = profile.generate_host_seconds_per_op, []
    for _ in range(10):
        result = fit_profile(points, get_gpu(gpu_id), profile)
        new = result.values.get("generate_host_seconds_per_op", value)
        ratios = result.evidence.get("generate_host_seconds_per_op", [])
        profile = dataclasses.replace(profile, generate_host_seconds_per_op=new)
        if abs(new - value) <= 1e-3 * value:
            break
        value = new
    return new, ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--fit", type=Path, help="fit generate_host_seconds_per_op on this file")
    parser.add_argument("--fit-workload", default="llm-6b")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    overrides = {k: float(v) for k, v in (s.split("=", 1) for s in args.set)}
    profile = _profile(overrides)
    report: dict[str, Any] = {"profile_overrides": overrides, "files": {}}
    if args.fit:
        value, ratios = fit(args.fit, args.fit_workload, profile)
        print(
            f"generate_host_seconds_per_op = {value:.4g}  (last step's measured/estimated ratios: "
            + ", ".join(f"{r:.3f}" for r in ratios)
            + ")"
        )
        report["fit"] = {"generate_host_seconds_per_op": value, "ratios": ratios}
    errors = []
    for path in args.files:
        data = json.loads(path.read_text())
        rows = rows_from_generate_host(data, profile) if "rows" in data else rows_from_points(data, profile)
        print(f"\n{path}")
        print(f"{'point':40} {'meas ms':>8} {'est ms':>8} {'speed err':>9}")
        for label, measured, est in rows:
            err = measured / est - 1 if est else float("nan")  # estimated over measured speed, - 1
            errors.append(abs(err))
            print(f"{label:40} {measured * 1e3:8.2f} {est * 1e3:8.2f} {err:+9.0%}")
        report["files"][str(path)] = [
            {"point": r[0], "measured_step_seconds": r[1], "estimated_step_seconds": r[2]} for r in rows
        ]
    if errors:
        print(f"\nmedian |speed error| {statistics.median(errors):.0%} over {len(errors)} rows")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
