"""The shared fixture keeps a user's calibrated profile (and history) away from every test."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import fitbench
from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.estimate.profile import get_profile, user_profile_path
from fitbench.results.history import default_db_path
from fitbench.workloads.presets import get_workload

# A calibration no shipped profile would ever hold: ten times slower host, a tenth of the FLOP/s.
CALIBRATED = """[torch.default]
host_seconds_per_op = 0.001
matmul_efficiency = 0.05
provenance = "a user's calibration"
"""


def _user_home_with_a_profile(root: Path) -> Path:
    """A fake user home whose data folder holds a calibrated profiles.toml."""
    folder = root / "home" / ".local" / "share" / "fitbench"
    folder.mkdir(parents=True)
    (folder / "profiles.toml").write_text(CALIBRATED, encoding="utf-8")
    return root / "home"


def test_a_users_calibrated_profile_does_not_reach_the_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _user_home_with_a_profile(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    shipped = get_profile("torch", "default", use_user=False)
    seen = get_profile("torch", "default")
    assert seen == shipped
    assert user_profile_path().parent == Path(os.environ["FITBENCH_HOME"])
    assert not user_profile_path().exists()
    workload, gpu = get_workload("bert-base-imdb"), get_gpu("rtx-4090")
    assert estimate(workload, gpu).step_seconds == estimate(workload, gpu, profile=shipped).step_seconds


def test_the_same_profile_would_change_the_numbers_without_the_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the isolation protects against is real: with the user's folder in force, the
    calibrated file changes the estimate."""
    home = _user_home_with_a_profile(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("FITBENCH_HOME")
    monkeypatch.delenv("XDG_DATA_HOME")
    assert user_profile_path() == home / ".local" / "share" / "fitbench" / "profiles.toml"
    profile = get_profile("torch", "default")
    assert profile.provenance == "a user's calibration" and profile.host_seconds_per_op == 0.001
    workload, gpu = get_workload("bert-base-imdb"), get_gpu("rtx-4090")
    shipped = get_profile("torch", "default", use_user=False)
    assert estimate(workload, gpu).step_seconds > estimate(workload, gpu, profile=shipped).step_seconds


def test_the_history_is_in_the_tests_own_folder() -> None:
    assert default_db_path().parent == Path(os.environ["FITBENCH_HOME"])


# The fitbench variables production code may read: the data folder and the debug switch a user
# sets. Isolation comes from FITBENCH_HOME alone; a variable only tests set would be a test hook.
USER_VARIABLES = {"FITBENCH_HOME", "FITBENCH_DEBUG"}


def test_production_code_reads_no_test_only_variable() -> None:
    src = Path(fitbench.__file__).parent
    named = {
        name
        for path in src.rglob("*.py")
        for name in re.findall(r"FITBENCH_[A-Z_]+", path.read_text(encoding="utf-8"))
    }
    assert named <= USER_VARIABLES, sorted(named - USER_VARIABLES)
