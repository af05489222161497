"""Parent side of a measurement: one fresh child process per run, a plain dict back.

Why a child process: a framework's allocator never gives memory back to the driver, so a second
run in the same process would inherit the first one's peak; an out-of-memory error can leave a
CUDA context unusable; a segfault in a kernel must not take the CLI down; and torch and paddle
must never share a process. The parent imports no framework: it writes a request file, starts
`python -m fitbench.measure.child REQUEST`, relays the child's progress events, enforces the
timeout, and turns every way a child can end (result, crash, signal, hang) into a measurement
dict with a status: ok | oom | error | timeout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fitbench.backends.base import RunOptions
from fitbench.measure.host_speed import HOST_PROBE_KEYS
from fitbench.measure.timing import MIN_WINDOWS, TARGET_SPREAD
from fitbench.records.measurement import MEASUREMENT_KEYS
from fitbench.workloads.workload import Workload

ProgressFn = Callable[[dict[str, Any]], None]

DEFAULT_TIMEOUT_S = 900.0
DEFAULT_MAX_SECONDS = 120.0  # wall budget of the timed loop inside the child
STDERR_TAIL_CHARS = 4000
POLL_S = 0.05
# Stopping a child: how long to wait for it and all it started to end after SIGKILL, how
# often to look, and how many scans of the process table freezing its tree may take.
KILL_WAIT_S = 10.0
KILL_POLL_S = 0.01
FREEZE_ROUNDS = 20
DEAD_STATES = ("Z", "X")  # zombie, dead: in /proc/PID/stat, a process that no longer runs
KILLED_RETURNCODE = -9  # what Popen reports for SIGKILL


def default_min_steps(workload: Workload) -> int:
    """Timed steps at least: 10 steps give a stable median; a generation call is long, 3 do."""
    return 3 if workload.is_generation else 10


def default_min_seconds(workload: Workload, device: str) -> float:
    """Timed seconds at least: 3 s lets GPU clocks and allocator settle; tiny CPU runs need less."""
    if device == "cpu" and workload.tiny:
        return 0.5
    return 3.0


def default_warmup(workload: Workload) -> int:
    """Untimed steps first: kernel selection, allocator growth, lazy initialisation."""
    return 1 if workload.is_generation else 3


def default_spread_budget(min_seconds: float) -> float:
    """Seconds a timed figure may take while its windows repeat to settle: twice its min_seconds.

    A stable figure stops after its first windows, which together take min_seconds (no slower
    than one timed loop of min_seconds); an unstable one repeats for at most as long again.
    """
    return 2 * min_seconds


def empty_measurement(workload: Workload, backend_name: str, options: RunOptions) -> dict[str, Any]:
    """The measurement skeleton: every key present, unknown figures None."""
    out: dict[str, Any] = dict.fromkeys(MEASUREMENT_KEYS)
    out.update(
        status="error",
        backend=backend_name,
        device=options.device,
        exec_mode=options.exec_mode,
        precision_requested=workload.precision,
        warnings=[],
        step_samples_seconds=[],
        batch_size=workload.batch_size,
        sample_unit=workload.sample_unit,
        environment={},
    )
    out.update(dict.fromkeys(HOST_PROBE_KEYS))  # null until the child's probe says otherwise
    return out


def build_request(
    workload: Workload,
    backend_name: str,
    options: RunOptions,
    *,
    min_steps: int,
    min_seconds: float,
    warmup: int,
    max_seconds: float,
    workdir: Path,
    target_spread: float = TARGET_SPREAD,
    spread_budget_seconds: float | None = None,
    go_path: Path | None = None,
) -> dict[str, Any]:
    budget = default_spread_budget(min_seconds) if spread_budget_seconds is None else spread_budget_seconds
    return {
        "workload": workload.to_dict(),
        "backend": backend_name,
        "options": dataclasses.asdict(options),
        "min_steps": min_steps,
        "min_seconds": min_seconds,
        "warmup": warmup,
        "max_seconds": max_seconds,
        "target_spread": target_spread,
        "min_windows": MIN_WINDOWS,
        "spread_budget_seconds": budget,
        "result_path": str(workdir / "result.json"),
        "progress_path": str(workdir / "progress.jsonl"),
        # Set: the child imports, then waits for this file before it touches the device (Launch).
        "go_path": str(go_path) if go_path is not None else None,
    }


def child_env() -> dict[str, str]:
    """The parent's environment, plus: find this fitbench, never touch the network, and number
    GPUs in PCI order as NVML does (CUDA's default puts the fastest first), so that the child's
    device index and fitbench.measure.nvml name the same card."""
    env = dict(os.environ)
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class ProgressReader:
    """Reads the child's JSON-lines progress file incrementally."""

    def __init__(self, path: Path, progress: ProgressFn | None) -> None:
        self.path = path
        self.progress = progress
        self.offset = 0
        self.last: dict[str, Any] = {}

    def poll(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            return
        self.offset += end + 1
        for line in chunk[: end + 1].splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.last = event
                if self.progress is not None:
                    self.progress(event)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _process_table() -> dict[int, tuple[str, int, int]] | None:
    """pid -> (state, parent pid, process group) of every process, from /proc; None without it."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    table: dict[int, tuple[str, int, int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses itself.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3:
            table[int(name)] = (fields[0].decode("ascii", "replace"), int(fields[1]), int(fields[2]))
    return table


def _descendants(root: int, table: dict[int, tuple[str, int, int]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def _freeze_tree(pgid: int, root: int) -> set[int]:
    """SIGSTOP the group and every descendant of `root`, scanning again until no new one shows
    up; return the descendants found. A stopped process cannot fork, so the set the final
    SIGKILL must reach stops growing. The parent links are read while `root` still runs: once
    it dies its children belong to init, and those that left the group (a launcher's ranks
    run in sessions of their own) could not be found any more. Linux only (/proc); elsewhere
    the group alone is stopped."""
    _signal_group(pgid, signal.SIGSTOP)
    stopped: set[int] = set()
    for _ in range(FREEZE_ROUNDS):
        table = _process_table()
        if table is None:
            break
        new = {pid for pid in _descendants(root, table) if table[pid][0] not in DEAD_STATES} - stopped
        if not new:
            break
        for pid in new:
            _signal_pid(pid, signal.SIGSTOP)
        stopped |= new
    return stopped


def _child_ended(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child has ended, without reaping it (Popen.poll would).

    While the child is an unreaped zombie its pid, and so its process group id, cannot go to
    another process: a signal to the group can only reach what the measurement started.
    """
    if proc.returncode is not None:
        return True
    if hasattr(os, "waitid"):
        try:
            return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # reaped by someone else: Popen.poll below records it
            pass
    return proc.poll() is not None


def _wait_child_end(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    while not _child_ended(proc):
        if time.monotonic() >= deadline:
            return False
        time.sleep(KILL_POLL_S)
    return True


def _still_running(pgid: int, tree: set[int]) -> bool:
    """Whether a process of the group, or of the tree, still runs. A zombie does not count: it
    holds no memory, and an init that never reaps (some containers) would keep it forever."""
    if not tree:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False  # the usual case, answered without reading /proc
        except PermissionError:
            pass
    table = _process_table()
    if table is None:
        return True  # the group exists; without /proc a zombie cannot be told from a process
    return any(
        state not in DEAD_STATES and (group == pgid or pid in tree)
        for pid, (state, _, group) in table.items()
    )


def kill_group(proc: subprocess.Popen[bytes], *, grace_s: float = 0.0, wait_s: float = KILL_WAIT_S) -> None:
    """Stop the child and everything it started; return once none of it runs.

    "Everything" is the child's process group (it leads one: start_new_session) and, on Linux,
    its descendants that left the group, such as a launcher's ranks in sessions of their own.
    With `grace_s` > 0 the group gets SIGTERM first and the child that long to end (a launcher
    stops its ranks on SIGTERM); then the tree is frozen (SIGSTOP) and killed (SIGKILL). The
    group is signalled only while the child is alive or an unreaped zombie, so its group id
    cannot belong to anyone else. The child is reaped, then the wait goes on until no process
    of the group or tree runs, for `wait_s` seconds at most: a process stuck in the kernel (a
    GPU driver call) cannot be waited for without end. Processes already gone or not ours are
    passed over, never an error. Called for a child that ended on its own, it removes what the
    child left behind.
    """
    if not hasattr(os, "killpg"):  # pragma: no cover - Windows
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
        return
    pgid = proc.pid
    tree: set[int] = set()
    if proc.returncode is None:
        if grace_s > 0 and not _child_ended(proc):
            _signal_group(pgid, signal.SIGTERM)
            _wait_child_end(proc, time.monotonic() + grace_s)
        deadline = time.monotonic() + wait_s
        if not _child_ended(proc):
            tree = _freeze_tree(pgid, proc.pid)
        _signal_group(pgid, signal.SIGKILL)
        for pid in tree:
            _signal_pid(pid, signal.SIGKILL)
        if _wait_child_end(proc, deadline):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    else:
        # Already reaped by the caller: the group may still hold what the child started, and
        # while it does, its id is still that group's.
        deadline = time.monotonic() + wait_s
        _signal_group(pgid, signal.SIGKILL)
    while _still_running(pgid, tree) and time.monotonic() < deadline:
        time.sleep(KILL_POLL_S)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def dies_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGKILL when this process dies (Linux), else None.

    The child runs in its own session so that Ctrl-C reaches only the parent, which then kills
    it; but a parent killed by SIGKILL or SIGTERM (a job scheduler, the OOM killer, `kill`) runs
    no cleanup, and the child would go on measuring, holding the GPU, for minutes. The kernel's
    parent-death signal covers those deaths. libc is resolved here, before the fork, so the
    forked child only makes one system call.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return set_death_signal


def tail_text(path: Path, chars: int = STDERR_TAIL_CHARS) -> str:
    try:
        text = path.read_bytes()[-chars * 4 :].decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text[-chars:].strip()


def exit_text(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (the system may have run out of memory)" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}"
    return f"exit code {returncode}"


def spawn_child(command: list[str], *, workdir: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start `command` in its own session and process group (Ctrl-C reaches only this process,
    which then stops it all), dying with this process; its output goes to workdir/stdout.txt
    and stderr.txt."""
    with (workdir / "stdout.txt").open("wb") as out, (workdir / "stderr.txt").open("wb") as err:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            start_new_session=True,
            preexec_fn=dies_with_parent(),  # the child dies with us, even on SIGKILL
        )


def await_child(
    proc: subprocess.Popen[bytes],
    *,
    timeout: float,
    reader: ProgressReader,
    stop: Callable[[subprocess.Popen[bytes]], None] = kill_group,
) -> tuple[int, bool, float]:
    """Wait for a started child to end, for `timeout` seconds from now at most: (exit code, timed
    out, wall seconds of the wait). `reader` relays its progress meanwhile. On a timeout, or any
    exception here (Ctrl-C included, which then propagates), `stop` ends it; when it ends on its
    own, kill_group removes whatever it left running in its group."""
    started = time.monotonic()
    timed_out = False
    try:
        while not _child_ended(proc):
            reader.poll()
            if time.monotonic() - started > timeout:
                timed_out = True
                stop(proc)
                break
            time.sleep(POLL_S)
        if not timed_out:
            kill_group(proc)  # it ended on its own: what it started (a compile worker) goes too
    except BaseException:
        stop(proc)
        raise
    reader.poll()
    # None only for a child stuck in the kernel past every wait, with SIGKILL pending.
    returncode = KILLED_RETURNCODE if proc.returncode is None else proc.returncode
    return returncode, timed_out, time.monotonic() - started


def run_child(
    command: list[str],
    *,
    workdir: Path,
    env: dict[str, str],
    timeout: float,
    reader: ProgressReader,
    stop: Callable[[subprocess.Popen[bytes]], None] = kill_group,
) -> tuple[int, bool, float]:
    """Run `command` to its end or for `timeout` seconds: (exit code, timed out, wall seconds).

    spawn_child, then await_child: its own process group, dying with this process, output in
    workdir, progress through `reader`, stopped by `stop` on a timeout or an exception here.
    """
    proc = spawn_child(command, workdir=workdir, env=env)
    return await_child(proc, timeout=timeout, reader=reader, stop=stop)


class Launch:
    """One measurement's child process, started, and its result once it ends.

    Started `held`, the child imports its framework and the model libraries (seconds of Python
    that need no device) and then waits, touching no GPU, until `result()` releases it: a caller
    measuring several workloads in a row (`fitbench check`) starts their children together, and
    the imports are done by the time each one's turn comes. The measuring itself starts only at
    the release, after the previous child has ended, so each still has the device (and its memory
    readings) to itself. Use as a context manager: leaving it stops a child that
    was never released or has not ended.
    """

    def __init__(
        self,
        workload: Workload,
        backend_name: str,
        options: RunOptions,
        *,
        held: bool = False,
        timeout_s: float | None = None,
        min_steps: int | None = None,
        min_seconds: float | None = None,
        warmup: int | None = None,
        max_seconds: float | None = None,
        target_spread: float = TARGET_SPREAD,
        spread_budget_s: float | None = None,
    ) -> None:
        self.timeout = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
        steps = default_min_steps(workload) if min_steps is None else int(min_steps)
        seconds = default_min_seconds(workload, options.device) if min_seconds is None else float(min_seconds)
        warm = default_warmup(workload) if warmup is None else int(warmup)
        budget = max(DEFAULT_MAX_SECONDS, 2 * seconds) if max_seconds is None else float(max_seconds)
        if steps < 1 or seconds < 0 or warm < 0 or self.timeout <= 0 or target_spread <= 0:
            raise ValueError(
                "min_steps must be >= 1, min_seconds and warmup >= 0, timeout and target_spread > 0"
            )
        self.base = empty_measurement(workload, backend_name, options)
        self._tmp = tempfile.TemporaryDirectory(prefix="fitbench-run-")
        self.workdir = Path(self._tmp.name)
        self.go_path = self.workdir / "go" if held else None
        self.request = build_request(
            workload,
            backend_name,
            options,
            min_steps=steps,
            min_seconds=seconds,
            warmup=warm,
            max_seconds=budget,
            workdir=self.workdir,
            target_spread=target_spread,
            spread_budget_seconds=spread_budget_s,
            go_path=self.go_path,
        )
        request_path = self.workdir / "request.json"
        request_path.write_text(json.dumps(self.request))
        self.proc: subprocess.Popen[bytes] | None = spawn_child(
            [sys.executable, "-m", "fitbench.measure.child", str(request_path)],
            workdir=self.workdir,
            env=child_env(),
        )

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the child if it still runs (never released, or interrupted) and remove its files."""
        if self.proc is not None and not _child_ended(self.proc):
            kill_group(self.proc)
        self.proc = None
        self._tmp.cleanup()

    def result(self, progress: ProgressFn | None = None) -> dict[str, Any]:
        """Release the child (when held), wait for it, and return its measurement dict."""
        proc = self.proc
        if proc is None:
            raise RuntimeError("this measurement's child was closed")
        if self.go_path is not None:
            self.go_path.write_text("go")
        reader = ProgressReader(Path(self.request["progress_path"]), progress)
        returncode, timed_out, wall = await_child(proc, timeout=self.timeout, reader=reader)
        self.proc = None
        return self._collect(returncode, timed_out, wall, reader)

    def _collect(
        self, returncode: int, timed_out: bool, wall: float, reader: ProgressReader
    ) -> dict[str, Any]:
        result_path = Path(self.request["result_path"])
        result: dict[str, Any] | None = None
        if result_path.is_file():
            with contextlib.suppress(ValueError, OSError):
                loaded = json.loads(result_path.read_text())
                result = loaded if isinstance(loaded, dict) else None

        out_dict = dict(self.base)
        if result is not None:
            out_dict.update(result)
        elif timed_out:
            phase = reader.last.get("phase", "starting")
            out_dict.update(
                status="timeout",
                error=f"no result within {self.timeout:g} s (phase: {phase}); the child was stopped",
            )
        else:
            out_dict.update(
                status="error",
                error=f"the measuring process ended without a result ({exit_text(returncode)})",
            )
        if out_dict.get("status") != "ok":
            tail = tail_text(self.workdir / "stderr.txt")
            if tail:
                out_dict["stderr_tail"] = tail
        out_dict["child_exit_code"] = returncode
        out_dict["wall_seconds"] = round(wall, 3)
        return out_dict


def measure(
    workload: Workload,
    backend_name: str,
    options: RunOptions,
    *,
    timeout_s: float | None = None,
    min_steps: int | None = None,
    min_seconds: float | None = None,
    warmup: int | None = None,
    max_seconds: float | None = None,
    progress: ProgressFn | None = None,
    target_spread: float = TARGET_SPREAD,
    spread_budget_s: float | None = None,
) -> dict[str, Any]:
    """Measure `workload` through backend `backend_name` in a fresh child process.

    Every timed figure is taken over short windows repeated until they agree within
    `target_spread` or `spread_budget_s` seconds (default: twice `min_seconds`) run out
    (fitbench.measure.timing.repeat_until_stable); its `spreads` entry says which.

    Returns the measurement dict (see MEASUREMENT_KEYS) whatever happens: status "ok", "oom"
    (a verdict, not a failure), "error" (message in "error", traceback tail in "traceback"),
    or "timeout". KeyboardInterrupt kills the child and propagates.
    """
    if progress is not None:
        progress({"phase": "starting child"})
    with Launch(
        workload,
        backend_name,
        options,
        timeout_s=timeout_s,
        min_steps=min_steps,
        min_seconds=min_seconds,
        warmup=warmup,
        max_seconds=max_seconds,
        target_spread=target_spread,
        spread_budget_s=spread_budget_s,
    ) as launch:
        return launch.result(progress)
