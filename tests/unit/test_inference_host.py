"""A classification forward pass in inference mode costs the host `inference_host_share` of a
training operation per operation (estimate/speed.py inference_step); training steps and
generation keep their own host costs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.estimate.profile import get_profile
from fitbench.workloads.presets import get_workload

ROOT = Path(__file__).parents[2]
H200 = get_gpu("h200")
BASE = get_profile("torch", "default", use_user=False)


def _host_seconds(workload_name: str, share: float, **overrides: object) -> float:
    profile = dataclasses.replace(BASE, inference_host_share=share)
    w = get_workload(workload_name, **overrides)
    return estimate(w, H200, exec_mode="default", profile=profile).host_seconds


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("resnet50-imagenet", {"mode": "infer", "batch_size": 1, "precision": "fp32"}),
        ("bert-base-imdb", {"mode": "infer", "batch_size": 1, "seq_len": 128, "precision": "amp-fp16"}),
    ],
)
def test_an_inference_step_s_host_time_is_the_share_of_its_training_cost(name, overrides) -> None:
    full = _host_seconds(name, 1.0, **overrides)
    assert full > 0
    assert _host_seconds(name, 0.25, **overrides) == pytest.approx(0.25 * full)


def test_training_and_generation_do_not_take_the_inference_share() -> None:
    for name, overrides in (("resnet50-imagenet", {"batch_size": 8}), ("llm-6b", {})):
        assert _host_seconds(name, 0.25, **overrides) == _host_seconds(name, 1.0, **overrides)


def test_the_builtin_share_makes_a_small_inference_step_cheaper_than_a_training_forward() -> None:
    assert 0.0 < BASE.inference_host_share < 1.0
    tuned = get_profile("torch", "tuned", use_user=False)
    assert tuned.host_seconds_per_op == 0.0  # CUDA graphs: the tuned step has no host cost to share
    w = get_workload("resnet50-imagenet", mode="infer", batch_size=1, precision="fp32")
    est = estimate(w, H200, exec_mode="default", profile=BASE)
    assert est.bottleneck == "overhead"
    assert est.host_seconds == pytest.approx(
        _host_seconds("resnet50-imagenet", 1.0, mode="infer", batch_size=1, precision="fp32")
        * BASE.inference_host_share
    )


def test_the_fit_script_recovers_the_built_in_share_from_the_stored_runs(tmp_path: Path) -> None:
    out = tmp_path / "fit.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "inference_host.py"), "--json", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""},
    )
    assert done.returncode == 0, done.stderr
    fit = json.loads(out.read_text())
    assert fit["fitted_inference_host_share"] == pytest.approx(BASE.inference_host_share, abs=0.005)
    assert len(fit["fit_shares"]) >= 2
    assert all(fit["fit_point"] != row["point"] for row in fit["rows"])  # the others are held out
    held_out = sorted(abs(row["error_fitted_own_host"]) for row in fit["rows"])
    assert held_out[len(held_out) // 2] < 0.25
