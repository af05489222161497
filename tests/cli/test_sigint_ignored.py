"""The tests that send Ctrl-C pass even when the test run itself was started with SIGINT ignored.

A shell starts a background job (`python -m pytest &`, nohup, some CI runners) with SIGINT set to
ignored, and every process it starts inherits that. Python then installs no KeyboardInterrupt
handler, so a CLI started from such a run never sees Ctrl-C: the POSIX convention, and the
product's behaviour. The tests that send SIGINT therefore start the CLI with SIGINT reset to its
default; this runs one of them in a pytest process whose SIGINT is ignored, as such a job's is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import fitbench

REPO = Path(__file__).resolve().parents[2]
SRC_DIR = Path(fitbench.__file__).resolve().parents[1]
CTRL_C_TEST = "tests/cli/test_run_cli.py::test_ctrl_c_stops_the_child_and_exits_130"


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FITBENCH_TEST_FAIL", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_DIR), env.get("PYTHONPATH")) if p)
    return env


def test_a_process_started_with_sigint_ignored_inherits_it() -> None:
    """The premise: what the background job's children see (else the test below proves nothing)."""
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        preexec_fn=_ignore_sigint,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "True", out.stderr


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the Ctrl-C test needs /proc")
def test_ctrl_c_test_passes_in_a_run_started_with_sigint_ignored() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", CTRL_C_TEST],
        cwd=REPO,
        env=_env(),
        preexec_fn=_ignore_sigint,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout
