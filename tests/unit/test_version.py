"""One version source: fitbench.__version__, which the packaging metadata and the CLI both read."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import fitbench

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_takes_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"], "a second, static version in pyproject.toml"
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fitbench.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)?", fitbench.__version__)


def test_fitbench_version_prints_the_package_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fitbench", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"fitbench {fitbench.__version__}"
