"""The linters CI holds: ruff's rules (complexity at most 12 included, from pyproject.toml) and
ruff's formatting, over the source, the tests and the benchmarks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ["src", "tests", "benchmarks"]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("ruff") is None:
        try:
            import ruff  # noqa: F401
        except ImportError:
            pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *TREES], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_ruff_rules_hold() -> None:
    result = _ruff("check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_holds() -> None:
    result = _ruff("format", "--check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
