"""benchmarks/host_issue.py on the CPU: a tiny LoRA step issued and timed, its estimate beside it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import host_issue  # noqa: E402


@pytest.mark.slow
def test_host_issue_times_a_tiny_lora_step_and_writes_its_estimate(tmp_path: Path) -> None:
    out = tmp_path / "host-issue.json"
    assert (
        host_issue.main(
            ["--tiny", "--device", "cpu", "--workloads", "qwen-lora-r8", "--steps", "2", "--out", str(out)]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert data["complete"] is True
    (row,) = data["rows"]
    assert row["label"] == "qwen-lora-r8" and row["peft"] == "lora"
    assert len(row["issue_ms_all"]) == 2
    # On a CPU the step runs as it is issued: the wall is the issue time plus a sync that waits for nothing.
    assert 0 < row["issue_ms"] <= row["wall_ms"]
    assert row["sync_warnings"] is None
    assert row["est_host_ms"] > 0 and row["est_gpu_ms"] > 0
    assert row["probe_round_s"] > 0


def test_the_profiles_adapter_share_is_the_stored_calibration_fit(capsys) -> None:
    """profiles.toml's adapter_host_share is what --adapter-share reads off the committed H200 file,
    from the calibration workloads only (the held-out Qwen2.5 LoRA points are printed, not fitted)."""
    from fitbench.estimate.profile import get_profile

    stored = ROOT / "benchmarks" / "results" / "host-issue-h200-2026-12-03-calibration.json"
    assert host_issue.main(["--adapter-share", str(stored)]) == 0
    out = capsys.readouterr().out
    fitted = float(out.split("adapter_host_share: median ")[1].split()[0])
    assert fitted == pytest.approx(
        get_profile("torch", "default", use_user=False).adapter_host_share, abs=0.005
    )
    assert "over 4 calibration steps" in out
    assert out.count("(held out: not fitted)") == 3
