"""The host cost of an inference-mode operation, fitted on one point and scored on the others.

A classification forward pass in eval mode under torch.inference_mode records no autograd node
and saves no tensor for a backward, so each operation costs the host less than the training
operation that `host_seconds_per_op` was fitted on; at small batches that host time is the step.
The profile's `inference_host_share` is that cost as a share of a training operation.

This script reads stored runs of `benchmarks/accuracy.py --set inference` (each point one or more
fresh processes, each with its own host probe round) and, offline, without a framework:

1. fits the share on FIT_POINT alone: for every run of it, the share at which the estimate on that
   run's own host (profile.host_scaled_profile with the run's probe) equals the run's step; the
   median over the runs stands;
2. scores every other point (held out: no run of them informed the share) at the fitted share and
   at the profile's, on the run's own host and on the reference host, beside the error with no
   share (1.0: an inference operation costed as a training one).

Errors are estimate / measured - 1 of throughput (+: the estimate is faster), the protocol's sign.

    PYTHONPATH=src python benchmarks/inference_host.py
    PYTHONPATH=src python benchmarks/inference_host.py FILE [FILE ...] --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.estimate.profile import Profile, get_profile, host_scaled_profile
from fitbench.workloads.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
FIT_POINT = "resnet50-imagenet mode=infer precision=fp32 batch=1"


def runs_of(point: dict[str, Any]) -> list[dict[str, Any]]:
    """(step_seconds, host_probe_seconds) of each run of a point (a single run: its measurement)."""
    runs = point.get("repeats") or [point["measurement"]]
    return [r for r in runs if r.get("step_seconds")]


def estimated_step(workload: Workload, profile: Profile, share: float, probe: float | None) -> float:
    """The estimated step on the H200 at `share`, on the host whose probe round is `probe`
    (None: the reference host)."""
    p = dataclasses.replace(profile, inference_host_share=share)
    if probe is not None:
        p = host_scaled_profile(p, probe, "cuda")
    return estimate(workload, get_gpu("h200"), exec_mode="default", profile=p).step_seconds


def share_for(workload: Workload, profile: Profile, step: float, probe: float | None) -> float:
    """The share at which the estimate equals `step` (bisection: the estimate grows with it)."""
    low, high = 0.01, 2.0
    for _ in range(50):
        mid = (low + high) / 2
        if estimated_step(workload, profile, mid, probe) > step:
            high = mid
        else:
            low = mid
    return (low + high) / 2


def rate_error(estimated: float, measured: float) -> float:
    """Throughput error: estimate / measured - 1 of 1 / step."""
    return measured / estimated - 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "files", nargs="*", type=Path, help="accuracy-inference results (default: stored H200 ones)"
    )
    parser.add_argument("--json", type=Path, help="write the fit and every row here")
    args = parser.parse_args(argv)
    files = args.files or sorted(RESULTS.glob("accuracy-inference-h200-*.json"))
    points = [
        p for f in files for p in json.loads(f.read_text())["points"] if p["measurement"]["status"] == "ok"
    ]
    profile = get_profile("torch", "default", use_user=False)
    fit_runs = [
        (Workload.from_dict(p["workload"]), r) for p in points if p["label"] == FIT_POINT for r in runs_of(p)
    ]
    if not fit_runs:
        raise SystemExit(f"no run of the fit point ({FIT_POINT}) in {', '.join(map(str, files))}")
    shares = [share_for(w, profile, r["step_seconds"], r.get("host_probe_seconds")) for w, r in fit_runs]
    fitted = statistics.median(shares)
    print(f"fit on {FIT_POINT}: {len(shares)} runs, shares " + ", ".join(f"{s:.3f}" for s in shares))
    print(f"fitted inference_host_share {fitted:.3f} (the profile has {profile.inference_host_share:.3f})\n")
    rows = []
    columns = ("fit, own", "fit, ref", "prof, own", "1.0, own")
    header = f"{'point':<62} {'runs':>4} {'measured':>9} " + " ".join(f"{c:>9}" for c in columns)
    print(header)
    print("-" * len(header))
    for p in points:
        if p["label"] == FIT_POINT:
            continue
        w = Workload.from_dict(p["workload"])
        # The point's measurement is its median-speed run already (accuracy.py combine_repeats).
        m = p["measurement"]
        step, probe = m["step_seconds"], m.get("host_probe_seconds")
        row = {
            "point": p["label"],
            "runs": len(runs_of(p)),
            "measured_step_seconds": step,
            "host_probe_seconds": probe,
            "error_fitted_own_host": rate_error(estimated_step(w, profile, fitted, probe), step),
            "error_fitted_reference_host": rate_error(estimated_step(w, profile, fitted, None), step),
            "error_profile_own_host": rate_error(
                estimated_step(w, profile, profile.inference_host_share, probe), step
            ),
            "error_no_share_own_host": rate_error(estimated_step(w, profile, 1.0, probe), step),
        }
        rows.append(row)
        print(
            f"{row['point']:<62} {row['runs']:>4} {step * 1e3:>6.2f} ms "
            + " ".join(
                f"{row[k]:>+9.0%}"
                for k in (
                    "error_fitted_own_host",
                    "error_fitted_reference_host",
                    "error_profile_own_host",
                    "error_no_share_own_host",
                )
            )
        )
    for key in ("error_fitted_own_host", "error_fitted_reference_host", "error_no_share_own_host"):
        values = [abs(r[key]) for r in rows]
        print(f"median |{key}| {statistics.median(values):.0%}, worst {max(values):.0%}")
    print("\nerror: estimate / measured - 1 of throughput (+: the estimate is faster); own: the run's host")
    if args.json:
        result = {
            "benchmark": "inference_host",
            "files": [str(f) for f in files],
            "fit_point": FIT_POINT,
            "fit_shares": shares,
            "fitted_inference_host_share": fitted,
            "rows": rows,
        }
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
