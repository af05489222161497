"""benchmarks/compiled_step.py on the CPU: both variants of a tiny workload through the real
runner, the JSON it writes, and the in-process profile. On a CPU --compile cannot run, so the
compiled variant must say so and fall back: what a GPU run relies on is the wiring."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import compiled_step  # noqa: E402
from fitbench.backends.torch.tuned import COMPILE_UNAVAILABLE  # noqa: E402


@pytest.mark.slow
def test_compiled_step_measures_both_variants_and_writes_one_json(tmp_path: Path, capsys) -> None:
    argv = ["--cpu", "--tiny", "--gpu", "h200", "--only", "bert-base-imdb", "--min-seconds", "0.2"]
    assert compiled_step.main([*argv, "--profile", "--profile-steps", "2", "--out", str(tmp_path)]) == 0
    (written,) = tmp_path.glob("compiled-step-cpu-*.json")
    record = json.loads(written.read_text())
    assert record["benchmark"] == "compiled_step" and record["settings"]["variants"] == [
        "uncompiled",
        "compiled",
    ]
    (scenario,) = record["scenarios"]
    plain, compiled = scenario["runs"]["uncompiled"], scenario["runs"]["compiled"]
    for run in (plain, compiled):
        assert run["status"] == "ok", run["error"]
        assert run["step_seconds"] > 0 and run["peak_memory_bytes"] > 0 and run["tokens_per_second"] > 0
        assert run["estimate_step_seconds"] > 0 and run["mfu"] > 0  # against the h200's estimate
        assert run["compiled_step"] is False  # no inductor on a CPU
    assert plain["compile_requested"] is False and COMPILE_UNAVAILABLE not in plain["warnings"]
    assert compiled["compile_requested"] is True and COMPILE_UNAVAILABLE in compiled["warnings"]
    assert compiled["speedup"] == pytest.approx(plain["step_seconds"] / compiled["step_seconds"])
    profile = scenario["profile"]
    assert set(profile) == {"uncompiled", "compiled"}
    assert all(p["kernel_seconds"] > 0 and p["by_class"] for p in profile.values())
    out = capsys.readouterr().out
    assert "compiled (fell back)" in out and "kernel time / launches a step" in out


@pytest.mark.slow
def test_profile_only_profiles_both_variants_without_measuring(tmp_path: Path) -> None:
    argv = ["--cpu", "--tiny", "--only", "resnet50-cifar10", "--profile-only", "--profile-steps", "2"]
    assert compiled_step.main([*argv, "--out", str(tmp_path)]) == 0
    (written,) = tmp_path.glob("compiled-step-cpu-*.json")
    record = json.loads(written.read_text())
    assert record["settings"]["measured"] is False
    (scenario,) = record["scenarios"]
    assert scenario["runs"] == {}
    assert {name: p["compiled_step"] for name, p in scenario["profile"].items()} == {
        "uncompiled": False,
        "compiled": False,  # on a CPU --compile falls back
    }
    assert all(p["launches"] > 0 and p["step_seconds"] > 0 for p in scenario["profile"].values())


@pytest.mark.slow
def test_compiled_only_measures_the_compiled_variant_alone(tmp_path: Path) -> None:
    argv = ["--cpu", "--tiny", "--gpu", "h200", "--only", "bert-base-imdb", "--min-seconds", "0.2"]
    assert compiled_step.main([*argv, "--compiled-only", "--out", str(tmp_path)]) == 0
    (written,) = tmp_path.glob("compiled-step-cpu-*.json")
    record = json.loads(written.read_text())
    assert record["settings"]["variants"] == ["compiled"]
    (scenario,) = record["scenarios"]
    assert list(scenario["runs"]) == ["compiled"]
    run = scenario["runs"]["compiled"]
    assert run["status"] == "ok" and run["peak_memory_bytes"] > 0 and run["speedup"] is None
