"""Test-session setup shared by every test module."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator

import pytest

# Without a GPU, fitbench's Triton kernels are tested under Triton's interpreter. Triton reads
# this variable once, when it is first imported, so it is set before any test imports it.
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")

# marker -> the third-party modules a test so marked needs
FRAMEWORK_MARKERS = {"torch": ("torch", "transformers"), "paddle": ("paddle",)}


@pytest.fixture(autouse=True)
def isolated_user_data(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Every test sees an empty fitbench data folder of its own, never the user's.

    A user's calibrated profiles.toml would otherwise change the estimator's numbers, and their
    history would collect test runs. FITBENCH_HOME (which the history and the profile both
    read first) points at a fresh folder, XDG_DATA_HOME too. Child processes inherit the
    environment, so they are isolated alike.
    """
    home = tmp_path_factory.mktemp("fitbench-home")
    monkeypatch.setenv("FITBENCH_HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg"))
    yield


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `torch` or `paddle` skips when that framework is not installed: the one
    reason a test may skip for a missing import is a missing third-party package."""
    for marker, modules in FRAMEWORK_MARKERS.items():
        if item.get_closest_marker(marker) is None:
            continue
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            pytest.skip(f"needs {', '.join(missing)} (not installed)")
