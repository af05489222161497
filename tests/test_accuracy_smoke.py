"""benchmarks/accuracy.py's holdout set runs through the real runner: one point, shrunk, on a CPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

import accuracy

pytestmark = [pytest.mark.slow, pytest.mark.torch]


def test_smoke_point_runs_through_the_runner_on_a_cpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    rc = accuracy.main(
        [
            "--set",
            "holdout",
            "--smoke",
            "--device",
            "cpu",
            "--out",
            str(tmp_path),
            "--only",
            "resnet-50 mode=train precision=fp32 optimizer=momentum "
            "optimizer_impl=foreach batch=128 image=128",
        ]
    )
    assert rc == 0
    (result,) = tmp_path.glob("accuracy-holdout-cpu-smoke-*.json")
    (point,) = json.loads(result.read_text())["points"]
    assert point["measurement"]["status"] == "ok"
    assert point["measurement"]["step_seconds"] > 0
    assert point["workload"]["optimizer"] == "momentum" and point["workload"]["image_size"] == 32
