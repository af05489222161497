"""Two `fitbench run` processes writing to one history at once both succeed and both are kept.

Scripts start several benchmarks at once; the history must queue their writes (WAL, one short
write transaction per run) rather than fail with "database is locked" or lose one. Both runs
start on a history file that does not exist yet, so they also race to create it and switch it
to WAL. Meanwhile `fitbench history` is read again and again next to them: a reader must never
fail or see a half-written run while the writers work.

The history is the parent's, whatever measured: the runs use the fake backend (a real measuring
child without a framework), each timed for the same second so that both write at about
the same moment, the history file existing all along.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fitbench

pytestmark = pytest.mark.slow

SRC_DIR = Path(fitbench.__file__).resolve().parents[1]
WORKLOADS = ("llm-6b", "bert-base-imdb")


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FITBENCH_DEBUG"}
    env["FITBENCH_HOME"] = str(tmp / "home")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_DIR), env.get("PYTHONPATH")) if p)
    return env


def _fitbench(*argv: str) -> list[str]:
    return [sys.executable, "-m", "fitbench", *argv]


def test_two_runs_at_once_are_both_stored(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    env = _env(tmp_path)
    timed = ("--min-steps", "2", "--min-seconds", "1", "--warmup", "0")
    # Output to files, not pipes: a second of fake steps prints a long list of step samples,
    # more than a pipe holds before its writer blocks.
    outputs = [(tmp_path / f"{name}.out", tmp_path / f"{name}.err") for name in WORKLOADS]
    procs = []
    for name, (out_path, err_path) in zip(WORKLOADS, outputs, strict=True):
        with open(out_path, "w") as out, open(err_path, "w") as err:
            procs.append(
                subprocess.Popen(
                    _fitbench(
                        "run",
                        name,
                        "--tiny",
                        "--backend",
                        "fake",
                        "--device",
                        "cpu",
                        "--db",
                        str(db),
                        "--json",
                        *timed,
                    ),
                    env=env,
                    stdout=out,
                    stderr=err,
                )
            )
    reads = 0
    try:
        deadline = time.monotonic() + 180
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            if db.exists():
                read = subprocess.run(
                    _fitbench("history", "--json", "--db", str(db)),
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert read.returncode == 0, read.stderr
                assert all(r["status"] == "ok" for r in json.loads(read.stdout))
                reads += 1
            time.sleep(0.05)
        for p in procs:
            p.wait(timeout=120)
        results = [(o.read_text(), e.read_text()) for o, e in outputs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    run_ids = []
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err[-2000:]
        assert "locked" not in err and "Traceback" not in err, err[-2000:]
        data = json.loads(out)
        assert data["measurement"]["status"] == "ok"
        run_ids.append(data["run_id"])
    assert len(set(run_ids)) == 2 and all(run_ids)
    assert reads >= 1, "the history was never read while the runs were going"

    listed = subprocess.run(
        _fitbench("history", "--json", "--db", str(db)), env=env, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    runs = {r["run_id"]: r for r in json.loads(listed.stdout)}
    assert set(runs) == set(run_ids)
    assert {runs[i]["workload"] for i in run_ids} == set(WORKLOADS)

    # Both payloads are whole, and each run can be opened by id.
    compare = subprocess.run(
        _fitbench("compare", run_ids[0], run_ids[1], "--db", str(db), "--json"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert compare.returncode == 0, compare.stderr
    pair = json.loads(compare.stdout)
    assert {pair["a"]["run_id"], pair["b"]["run_id"]} == set(run_ids)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
