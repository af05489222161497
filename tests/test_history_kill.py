"""Kill safety of the run history: SIGKILL writers at random moments, then check nothing was lost.

Two writer processes run at once against one file, each looping add_run with payloads large
enough (hundreds of KiB) that a good share of the time is spent inside the write transaction
and in WAL checkpoints. A seeded random schedule kills one of them at a time and starts a
replacement, 20 kills in all. Each writer prints a run id only after add_run has returned, so
every id the parent read was committed and must survive; the file must open, pass SQLite's
integrity check, and hold only whole, parseable payloads.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fitbench.results import history as history_module
from fitbench.results.history import History

SRC_DIR = Path(history_module.__file__).resolve().parents[2]
KILLS = 20
SEED = 20240501

WRITER = r"""
import hashlib, os, random, sys
from fitbench.results.history import History

db, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
with History.open(db) as h:
    i = 0
    while True:
        blob = os.urandom(rng.randrange(8_000, 40_000)).hex()
        record = {"command": "run", "workload": {"name": f"writer-{seed}", "batch_size": i + 1},
                  "measurement": {"status": "ok", "step_seconds": 0.5}, "blob": blob,
                  "sha256": hashlib.sha256(blob.encode()).hexdigest()}
        sys.stdout.write("begin\n")
        sys.stdout.flush()
        run_id = h.add_run(record)
        sys.stdout.write(run_id + "\n")
        sys.stdout.flush()
        i += 1
"""


def spawn(db: Path, seed: int) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_DIR), env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(seed)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_and_collect(proc: subprocess.Popen) -> tuple[list[str], bool]:
    """SIGKILL the writer; return the run ids it reported and whether it died inside add_run."""
    proc.kill()  # SIGKILL on POSIX, TerminateProcess on Windows: no cleanup runs either way
    out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    # A writer that failed on its own (rather than being killed) is a bug, not a kill.
    assert "Traceback" not in err, err
    lines = [line for line in out.splitlines(keepends=True) if line.endswith("\n")]
    ids = [line.strip() for line in lines if re.fullmatch(r"[0-9a-f]{8}\n", line)]
    inside = bool(lines) and lines[-1] == "begin\n"
    return ids, inside


@pytest.mark.slow
def test_sigkill_during_writes_loses_no_committed_run(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    rng = random.Random(SEED)
    started = time.monotonic()
    reported: list[str] = []
    killed_inside = 0
    next_seed = 0

    def start() -> subprocess.Popen:
        nonlocal next_seed
        next_seed += 1
        return spawn(db, next_seed)

    alive = [start(), start()]
    for k in range(KILLS):
        # Delays from "still starting up / creating the file" to "many runs in".
        time.sleep(rng.uniform(0.02, 0.25))
        victim = alive.pop(rng.randrange(len(alive)))
        ids, inside = kill_and_collect(victim)
        reported += ids
        killed_inside += inside
        if k < KILLS - 2:  # the last two kills empty the pool
            alive.append(start())
    assert not alive

    assert len(reported) == len(set(reported))
    assert len(reported) >= KILLS, "the writers barely wrote anything: the test proves little"
    # Most kills must land inside add_run, or the test would not exercise the dangerous window.
    assert killed_inside >= KILLS // 4, killed_inside

    with History.open(db) as h:
        assert h._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {row[0]: row[1] for row in h._conn.execute("SELECT run_id, payload FROM runs")}
        missing = [run_id for run_id in reported if run_id not in stored]
        assert not missing, f"{len(missing)} committed runs lost"
        # Every stored payload is whole: it parses and its blob matches the checksum taken before writing.
        for payload in stored.values():
            data = json.loads(payload)
            assert hashlib.sha256(data["blob"].encode()).hexdigest() == data["sha256"]
        for run_id in reported[:: max(1, len(reported) // 10)]:
            assert h.get_run(run_id)["run_id"] == run_id
        # Still a working history after all that.
        new_id = h.add_run({"command": "run", "workload": {"name": "after"}})
        assert h.list_runs(limit=1)[0].run_id == new_id
        assert h.count() == len(stored) + 1

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    assert time.monotonic() - started < 20
