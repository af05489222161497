"""benchmarks/speed.py on the CPU with a catalog card's estimate beside each run: the path a GPU
run takes (estimate, roofline and the diagnosis of each measurement) on tiny models."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import speed  # noqa: E402


@pytest.mark.slow
def test_speed_runs_default_and_tuned_with_an_estimate_and_a_diagnosis(tmp_path: Path) -> None:
    argv = ["--cpu", "--tiny", "--gpu", "h200", "--only", "resnet50-cifar10", "--min-seconds", "0.2"]
    assert speed.main([*argv, "--out", str(tmp_path)]) == 0
    (written,) = tmp_path.glob("speed-*.json")
    (scenario,) = json.loads(written.read_text())["scenarios"]
    for mode in ("default", "tuned"):
        run = scenario["runs"][mode]
        assert run["status"] == "ok", run["error"]
        assert run["estimate"]["gpu"] == "h200"
        assert run["estimate_headline"] > 0 and run["roofline"] > 0
        # a CPU run against a GPU's estimate: the diagnosis says why it has no verdict
        assert run["diagnosis"]["available"] is False and run["diagnosis"]["reason"]
