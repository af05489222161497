"""Stopping a measurement leaves nothing of it running, and a rank outlives no launcher.

Real processes throughout: a measuring child that starts its own children (in its process
group, or in a session of their own as torchrun's ranks are), a child that forks without pause
while it is stopped, and a launcher killed before or after its rank starts watching it. A
process counts as ended when /proc no longer lists it or lists it as a zombie: an init that
never reaps (as in some containers) keeps zombies, which hold nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from fitbench.measure import dist_child
from fitbench.measure.runner import ProgressReader, kill_group, run_child

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; Linux only")

# Starts one grandchild (in the child's group, or in a new session), prints its pid, then
# either sleeps or exits at once, leaving the grandchild behind.
PARENT_OF_ONE = textwrap.dedent("""
    import subprocess, sys, time
    where, then = sys.argv[1], sys.argv[2]
    g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         stdout=subprocess.DEVNULL, start_new_session=(where == "session"))
    print(g.pid, flush=True)
    if then == "sleep":
        time.sleep(120)
""")


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def _marked_running(marker: str) -> list[int]:
    """Running processes whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and _running(int(name)):
            found.append(int(name))
    return found


def _start(script: str, *args: str) -> subprocess.Popen[bytes]:
    """As run_child starts a measurement: its own session and process group."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _first_line_pid(proc: subprocess.Popen[bytes]) -> int:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip(), "the child printed no pid"
    return int(line)


def _cleanup(*pids: int) -> None:
    for pid in pids:  # only what this test started, by pid
        if _running(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("where", ["group", "session"])
def test_a_running_childs_children_are_gone_when_kill_group_returns(where: str) -> None:
    proc = _start(PARENT_OF_ONE, where, "sleep")
    grandchild = _first_line_pid(proc)
    try:
        assert _running(grandchild)
        started = time.monotonic()
        kill_group(proc)
        assert time.monotonic() - started < 5
        assert proc.returncode == -signal.SIGKILL
        # No waiting here: kill_group returns only once nothing of the tree runs.
        assert not _running(grandchild), f"grandchild {grandchild} ({where}) survived kill_group"
    finally:
        _cleanup(grandchild)
        proc.stdout.close()  # type: ignore[union-attr]


def test_what_a_reaped_child_left_in_its_group_is_killed() -> None:
    # A launcher stopped with SIGTERM and reaped by its caller may leave its group behind;
    # kill_group must still end it, not return because the child itself is gone.
    proc = _start(PARENT_OF_ONE, "group", "exit")
    grandchild = _first_line_pid(proc)
    try:
        assert proc.wait(timeout=30) == 0
        assert _running(grandchild)
        kill_group(proc)
        assert not _running(grandchild)
    finally:
        _cleanup(grandchild)
        proc.stdout.close()  # type: ignore[union-attr]


def _run_child(tmp_path: Path, script: str, *args: str, timeout: float) -> tuple[int, bool, int]:
    """run_child on a real command; (exit code, timed out, the grandchild's pid it printed)."""
    reader = ProgressReader(tmp_path / "progress.jsonl", None)
    code, timed_out, _ = run_child(
        [sys.executable, "-c", script, *args],
        workdir=tmp_path,
        env=dict(os.environ),
        timeout=timeout,
        reader=reader,
    )
    return code, timed_out, int((tmp_path / "stdout.txt").read_text().split()[0])


def test_a_child_that_ends_on_its_own_takes_its_group_with_it(tmp_path: Path) -> None:
    code, timed_out, grandchild = _run_child(tmp_path, PARENT_OF_ONE, "group", "exit", timeout=60)
    try:
        assert (code, timed_out) == (0, False)
        assert not _running(grandchild), "a process the measurement started outlived it"
    finally:
        _cleanup(grandchild)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["group", "session"])
def test_a_child_stopped_at_its_timeout_takes_its_tree_with_it(tmp_path: Path, where: str) -> None:
    code, timed_out, grandchild = _run_child(tmp_path, PARENT_OF_ONE, where, "sleep", timeout=1.5)
    try:
        assert timed_out and code == -signal.SIGKILL
        assert not _running(grandchild), f"grandchild {grandchild} ({where}) outlived the timeout"
    finally:
        _cleanup(grandchild)


# Forks without pause; every fork starts a session of its own and forks once more. A kill
# that reads the tree once and then signals it would miss what was born meanwhile.
FORKER = textwrap.dedent("""
    import os, sys, time
    print(os.getpid(), flush=True)
    while True:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(120)
                os._exit(0)
            time.sleep(120)
            os._exit(0)
        time.sleep(0.002)
""")


def test_a_child_that_keeps_forking_new_sessions_is_stopped_whole() -> None:
    marker = f"fitbench-test-{uuid.uuid4().hex}"
    proc = _start(FORKER, marker)
    try:
        _first_line_pid(proc)
        deadline = time.monotonic() + 10
        while len(_marked_running(marker)) < 40 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(_marked_running(marker)) >= 40, "the child forked too little to test anything"
        kill_group(proc)
        left = _marked_running(marker)
        assert not left, f"{len(left)} forked processes survived kill_group"
    finally:
        _cleanup(*_marked_running(marker))
        proc.stdout.close()  # type: ignore[union-attr]


# Ignores SIGTERM or exits cleanly on it, as told, once it says it is ready.
ON_SIGTERM = textwrap.dedent("""
    import signal, sys, time
    if sys.argv[1] == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(0, flush=True)
    time.sleep(120)
""")


def test_a_grace_period_lets_a_child_end_on_sigterm() -> None:
    proc = _start(ON_SIGTERM, "exit")
    _first_line_pid(proc)
    started = time.monotonic()
    kill_group(proc, grace_s=20)
    assert proc.returncode == 0  # it ended on SIGTERM; SIGKILL would read -9
    assert time.monotonic() - started < 10
    proc.stdout.close()  # type: ignore[union-attr]


@pytest.mark.slow
def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period() -> None:
    proc = _start(ON_SIGTERM, "ignore")
    _first_line_pid(proc)
    started = time.monotonic()
    kill_group(proc, grace_s=0.5)
    took = time.monotonic() - started
    assert proc.returncode == -signal.SIGKILL
    assert 0.5 <= took < 5
    proc.stdout.close()  # type: ignore[union-attr]


def test_kill_group_on_a_child_long_gone_returns_at_once() -> None:
    proc = _start("print(0)")
    proc.communicate(timeout=30)
    started = time.monotonic()
    kill_group(proc)
    assert time.monotonic() - started < 1 and proc.returncode == 0


# -- a rank and its launcher ------------------------------------------------------------------


def test_launcher_gone_compares_with_the_pid_read_at_start() -> None:
    assert os.getppid() == dist_child.LAUNCHER_PID  # read when this process imported the module
    assert not dist_child.launcher_gone(os.getppid())
    assert dist_child.launcher_gone(os.getpid())  # not this process's parent
    assert dist_child.launcher_gone(1)  # born an orphan: init is never a rank's launcher


# Runs as a subreaper, so that the rank, orphaned when its launcher is killed, becomes its
# child and its exit code can be read. The "launcher" starts the rank and sleeps; the rank
# imports dist_child (the moment the launcher's pid is read), then starts watching either
# before the launcher is killed ("early") or only a second after ("late": a slow start-up,
# importing torch). Prints the rank's exit code and how long it outlived its launcher.
HARNESS = textwrap.dedent("""
    import ctypes, os, subprocess, sys, time
    PR_SET_CHILD_SUBREAPER = 36
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("no-subreaper"); sys.exit(0)
    when = sys.argv[1]
    rank = '''
    import os, sys, time
    import fitbench.measure.dist_child as d
    if sys.argv[1] == "late":
        print(os.getpid(), flush=True)
        time.sleep(1.0)
        d._watch_parent(poll_s=0.05)
    else:
        d._watch_parent(poll_s=0.05)
        print(os.getpid(), flush=True)
    time.sleep(30)
    os._exit(0)
    '''
    launcher = ("import subprocess, sys, time; "
                "subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]]); time.sleep(60)")
    middle = subprocess.Popen([sys.executable, "-c", launcher, rank, when], stdout=subprocess.PIPE)
    pid = int(middle.stdout.readline())
    middle.kill()
    middle.wait()
    killed = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)  # ours now: this process is the subreaper
        if done:
            break
        if time.monotonic() - killed > 10:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print("still-running"); sys.exit(0)
        time.sleep(0.02)
    print(os.waitstatus_to_exitcode(status), round(time.monotonic() - killed, 2))
""")


@pytest.mark.slow
@pytest.mark.parametrize("when", ["early", "late"])
def test_a_rank_exits_when_its_launcher_is_killed(when: str) -> None:
    out = subprocess.run([sys.executable, "-c", HARNESS, when], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    if words == ["no-subreaper"]:
        pytest.skip("this kernel refuses PR_SET_CHILD_SUBREAPER")
    assert words != ["still-running"], f"the rank outlived its launcher ({when})"
    code, seconds = int(words[0]), float(words[1])
    assert code == dist_child.FAILED_EXIT_CODE
    assert seconds < 5
