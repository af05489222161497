"""The run history: real SQLite files in tmp_path, real concurrent processes."""

from __future__ import annotations

import dataclasses
import itertools
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

from fitbench.errors import FitbenchError
from fitbench.results import history as history_module
from fitbench.results.history import (
    MIGRATIONS,
    SCHEMA_VERSION,
    History,
    RunSummary,
    default_db_path,
)

SRC_DIR = Path(history_module.__file__).resolve().parents[2]


def record(name: str = "resnet50-cifar10", *, status: str = "ok", batch: int = 128, **extra) -> dict:
    """A result shaped like the ones `fitbench run` produces."""
    rec = {
        "command": "run",
        "workload": {"name": name, "precision": "amp-fp16", "batch_size": batch, "mode": "train"},
        "estimate": {"gpu": {"name": "RTX 4090"}, "total_bytes": 5_000_000_000, "verdict": "fits"},
        "measurement": {
            "status": status,
            "peak_memory_bytes": 4_321_000_000,
            "step_seconds": 0.125,
            "tokens_per_second": None,
            "samples_per_second": 1024.0,
            "backend": "torch",
            "framework_version": "2.13.0",
            "device": "cuda:0",
            "device_name": "NVIDIA GeForce RTX 4090",
            "exec_mode": "default",
        },
        "environment": {"hostname": "box1", "fitbench_version": "0.1.0"},
    }
    rec.update(extra)
    return rec


@pytest.fixture
def hist(tmp_path: Path):
    with History.open(tmp_path / "history.sqlite") as h:
        yield h


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_DIR), env.get("PYTHONPATH", "")) if p)
    return env


# ---------------------------------------------------------------------- round trip and lookup


def test_round_trip_keeps_payload_and_fills_columns(hist: History) -> None:
    rec = record()
    run_id = hist.add_run(rec)

    assert re.fullmatch(r"[0-9a-f]{8}", run_id)
    got = hist.get_run(run_id)
    assert got.pop("run_id") == run_id
    created_at = got.pop("created_at")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", created_at)
    assert got == rec

    (summary,) = hist.list_runs()
    assert summary == RunSummary(
        run_id=run_id,
        created_at=created_at,
        command="run",
        workload="resnet50-cifar10",
        backend="torch",
        framework_version="2.13.0",
        device="cuda:0",
        gpu_name="NVIDIA GeForce RTX 4090",
        precision="amp-fp16",
        batch_size=128,
        mode="train",
        exec_mode="default",
        status="ok",
        peak_memory_bytes=4_321_000_000,
        step_seconds=0.125,
        tokens_per_second=None,
        throughput=1024.0,
        hostname="box1",
        fitbench_version="0.1.0",
    )
    assert summary.to_dict()["peak_memory_bytes"] == 4_321_000_000
    assert json.loads(json.dumps(summary.to_dict()))["run_id"] == run_id


def test_add_run_does_not_change_the_callers_dict(hist: History) -> None:
    rec = record()
    before = json.dumps(rec, sort_keys=True)
    hist.add_run(rec)
    assert json.dumps(rec, sort_keys=True) == before
    assert "run_id" not in rec


def test_missing_and_odd_keys_are_stored_as_null(hist: History) -> None:
    empty_id = hist.add_run({})
    odd_id = hist.add_run(
        {"workload": "bert-base-imdb", "measurement": {"peak_memory_bytes": "lots", "step_seconds": True}}
    )
    by_id = {s.run_id: s for s in hist.list_runs()}
    empty = by_id[empty_id]
    assert (empty.command, empty.workload, empty.status, empty.batch_size, empty.peak_memory_bytes) == (
        None,
        None,
        None,
        None,
        None,
    )
    assert empty.fitbench_version  # the fitbench that recorded it, when the record does not say
    odd = by_id[odd_id]
    assert odd.workload == "bert-base-imdb"
    assert odd.peak_memory_bytes is None and odd.step_seconds is None
    assert hist.get_run(odd_id)["measurement"]["peak_memory_bytes"] == "lots"


def test_estimate_only_record_takes_the_estimated_card(hist: History) -> None:
    run_id = hist.add_run(
        {
            "command": "estimate",
            "workload": {"name": "llm-6b", "mode": "infer"},
            "estimate": {"gpu": {"name": "A100 40GB"}},
        }
    )
    (s,) = hist.list_runs()
    assert (s.run_id, s.command, s.gpu_name, s.mode, s.status) == (
        run_id,
        "estimate",
        "A100 40GB",
        "infer",
        None,
    )


def test_payload_with_dataclasses_and_paths_is_stored_as_json(hist: History, tmp_path: Path) -> None:
    @dataclasses.dataclass(frozen=True)
    class Part:
        name: str
        bytes: int

    run_id = hist.add_run({"parts": [Part(name="weights", bytes=10)], "data": tmp_path, "tags": {"b", "a"}})
    got = hist.get_run(run_id)
    assert got["parts"] == [{"name": "weights", "bytes": 10}]
    assert got["data"] == str(tmp_path)
    assert got["tags"] == ["a", "b"]


def test_get_run_by_unique_prefix(hist: History) -> None:
    ids = [hist.add_run(record(batch=b)) for b in (1, 2, 3)]
    for run_id in ids:
        prefix = next(run_id[:n] for n in range(1, 9) if sum(i.startswith(run_id[:n]) for i in ids) == 1)
        assert hist.get_run(prefix) == hist.get_run(run_id)
        assert hist.get_run(f"  {run_id.upper()} ")["run_id"] == run_id


def test_unknown_and_ambiguous_ids(hist: History, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = iter(["abc11111", "abc22222"])
    monkeypatch.setattr(history_module, "_new_run_id", lambda: next(drawn))
    hist.add_run(record(batch=1))
    hist.add_run(record(batch=2))

    with pytest.raises(FitbenchError) as ambiguous:
        hist.get_run("abc")
    assert "abc11111" in ambiguous.value.message and "abc22222" in ambiguous.value.message
    assert "more characters" in ambiguous.value.hint
    assert hist.get_run("abc2")["workload"]["batch_size"] == 2

    with pytest.raises(FitbenchError) as unknown:
        hist.get_run("ffff")
    assert "no run 'ffff'" in unknown.value.message
    assert "`fitbench history`" in unknown.value.hint
    with pytest.raises(FitbenchError):
        hist.get_run("   ")


def test_run_id_collision_draws_a_new_id(hist: History, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = iter(["deadbeef", "deadbeef", "deadbeef", "cafef00d"])
    monkeypatch.setattr(history_module, "_new_run_id", lambda: next(drawn))
    assert hist.add_run(record(batch=1)) == "deadbeef"
    assert hist.add_run(record(batch=2)) == "cafef00d"
    assert hist.count() == 2
    assert hist.get_run("deadbeef")["workload"]["batch_size"] == 1
    assert hist.get_run("cafef00d")["workload"]["batch_size"] == 2


# ---------------------------------------------------------------------- listing


def test_newest_first_and_last_runs(hist: History) -> None:
    ids = [hist.add_run(record(batch=b)) for b in range(1, 6)]
    assert [s.run_id for s in hist.list_runs()] == ids[::-1]
    assert [r["run_id"] for r in hist.last_runs(2)] == [ids[4], ids[3]]
    assert [r["workload"]["batch_size"] for r in hist.last_runs(2)] == [5, 4]
    assert hist.last_runs(0) == []
    assert len(hist.last_runs(100)) == 5
    assert hist.count() == 5


def test_filters_and_limit(hist: History) -> None:
    for i in range(4):
        hist.add_run(record("resnet50-cifar10", batch=i + 1))
    oom = hist.add_run(record("bert-base-imdb", status="oom"))
    ok_bert = hist.add_run(record("bert-base-imdb", status="ok"))

    assert [s.run_id for s in hist.list_runs(workload="bert-base-imdb")] == [ok_bert, oom]
    assert [s.run_id for s in hist.list_runs(status="oom")] == [oom]
    assert [s.run_id for s in hist.list_runs(workload="bert-base-imdb", status="ok")] == [ok_bert]
    assert hist.list_runs(workload="llm-6b") == []
    assert hist.list_runs(status="timeout") == []  # a known status that simply has no runs
    assert [s.batch_size for s in hist.list_runs(limit=2, workload="resnet50-cifar10")] == [4, 3]
    assert len(hist.list_runs(limit=None)) == 6
    assert len(hist.list_runs(limit=3)) == 3

    with pytest.raises(FitbenchError) as bad_status:
        hist.list_runs(status="okk")
    assert "'ok'" in bad_status.value.hint
    with pytest.raises(FitbenchError):
        hist.list_runs(limit=0)


# ---------------------------------------------------------------------- the file itself


def test_new_file_is_wal_with_current_schema_and_marker(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "history.sqlite"
    assert not path.parent.exists()
    with History.open(path) as h:
        assert h.schema_version == SCHEMA_VERSION == len(MIGRATIONS) == 3
        assert h.path == path
        h.add_run(record())
    assert path.is_file()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT value FROM meta WHERE key = 'application'").fetchone()[0] == "fitbench"
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"runs_created_at", "runs_workload"} <= indexes
        columns = [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
        assert "exec_mode" in columns and "payload" in columns and "run_id" in columns
    finally:
        conn.close()


def test_connection_settings(hist: History) -> None:
    conn = hist._conn
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000


def test_reopening_keeps_runs(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as h:
        run_id = h.add_run(record())
    with History.open(str(path)) as h:
        assert h.count() == 1
        assert h.get_run(run_id)["measurement"]["status"] == "ok"


def test_empty_existing_file_becomes_a_history(tmp_path: Path) -> None:
    path = tmp_path / "touched.sqlite"
    path.touch()
    with History.open(path) as h:
        h.add_run(record())
        assert h.count() == 1


def test_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FitbenchError, match="is a folder"):
        History.open(tmp_path)


def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as h:
        h.add_run(record())
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    before = path.read_bytes()

    with pytest.raises(FitbenchError) as err:
        History.open(path)
    assert err.value.message == f"history file {path} was written by a newer fitbench (schema 7)"
    assert err.value.hint == "upgrade fitbench or pass --db with another file"
    assert path.read_bytes() == before


def test_random_bytes_are_not_a_history(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(random.Random(1).randbytes(8192))
    before = path.read_bytes()
    with pytest.raises(FitbenchError) as err:
        History.open(path)
    assert "is not a fitbench history" in err.value.message
    assert "--db" in err.value.hint
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.sqlite"]


def test_truncated_sqlite_header_is_not_a_history(tmp_path: Path) -> None:
    path = tmp_path / "short.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20)
    with pytest.raises(FitbenchError, match="not a fitbench history"):
        History.open(path)


@pytest.mark.parametrize(
    "schema",
    [
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ada');",
        # A table called meta is common; without our marker it is still someone else's.
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('application', 'x');",
        "CREATE TABLE meta (version INTEGER);",
        "PRAGMA user_version = 5;",  # no tables, but the version says another program owns it
    ],
)
def test_another_programs_database_is_refused_untouched(tmp_path: Path, schema: str) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.executescript(schema)
    conn.close()
    before = path.read_bytes()

    with pytest.raises(FitbenchError) as err:
        History.open(path)
    assert err.value.message == f"{path} is not a fitbench history (an SQLite database of another program)"
    assert "--db" in err.value.hint
    assert path.read_bytes() == before  # not even switched to WAL
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


# A history as fitbench schema 1 wrote it, spelled out by hand: that format is frozen in files
# users already have, whatever MIGRATIONS[0] becomes.
V1_FILE_SQL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta (key, value) VALUES ('application', 'fitbench');
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    command TEXT, workload TEXT, backend TEXT, framework_version TEXT, device TEXT, gpu_name TEXT,
    precision TEXT, batch_size INTEGER, mode TEXT, status TEXT, peak_memory_bytes INTEGER,
    step_seconds REAL, tokens_per_second REAL, throughput REAL, hostname TEXT, fitbench_version TEXT,
    payload TEXT NOT NULL
);
CREATE INDEX runs_created_at ON runs (created_at);
CREATE INDEX runs_workload ON runs (workload);
INSERT INTO runs (run_id, created_at, command, workload, backend, batch_size, status, peak_memory_bytes,
                  fitbench_version, payload)
VALUES ('0123abcd', '2024-05-01T10:00:00.000000Z', 'run', 'resnet50-cifar10', 'paddle', 128, 'ok',
        3000000000, '0.0.9', '{"command": "run", "workload": {"name": "resnet50-cifar10"}, "note": "old"}');
PRAGMA user_version = 1;
"""


def test_migrates_a_v1_file_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(V1_FILE_SQL)
    conn.close()

    with History.open(path) as h:
        assert h.schema_version == SCHEMA_VERSION
        assert h.count() == 1
        old = h.get_run("0123")
        assert old == {
            "command": "run",
            "workload": {"name": "resnet50-cifar10"},
            "note": "old",
            "run_id": "0123abcd",
            "created_at": "2024-05-01T10:00:00.000000Z",
        }
        (summary,) = h.list_runs()
        assert (summary.backend, summary.batch_size, summary.peak_memory_bytes, summary.exec_mode) == (
            "paddle",
            128,
            3_000_000_000,
            None,
        )
        new_id = h.add_run(record())
        assert [s.run_id for s in h.list_runs()] == [new_id, "0123abcd"]
        assert h.list_runs()[0].exec_mode == "default"

    # The migrated file has the same columns as a file created new.
    with History.open(tmp_path / "fresh.sqlite"):
        pass
    columns = {}
    for name in ("old.sqlite", "fresh.sqlite"):
        c = sqlite3.connect(tmp_path / name)
        columns[name] = sorted(r[1] for r in c.execute("PRAGMA table_info(runs)"))
        c.close()
    assert columns["old.sqlite"] == columns["fresh.sqlite"]


def test_damaged_history_is_reported_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as h:
        for batch in range(1, 200):
            h.add_run(record(batch=batch))
    conn = sqlite3.connect(path)  # History.close checkpointed the WAL: everything is in the main file
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    conn.close()
    with path.open("r+b") as f:  # overwrite the runs table's root page with garbage
        f.seek((root - 1) * page_size)
        f.write(random.Random(2).randbytes(page_size))

    with pytest.raises(FitbenchError) as err, History.open(path) as h:
        h.list_runs()
    assert "is damaged" in err.value.message
    assert ".recover" in err.value.hint


def test_unwritable_folder_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    with pytest.raises(FitbenchError) as err:
        History.open(blocker / "sub" / "history.sqlite")
    assert "cannot create the folder" in err.value.message


# ---------------------------------------------------------------------- default location


def test_default_path_fitbench_home_wins(tmp_path: Path) -> None:
    env = {"FITBENCH_HOME": str(tmp_path / "fb"), "XDG_DATA_HOME": "/x", "LOCALAPPDATA": "C:\\L"}
    for platform in ("linux", "darwin", "win32"):
        path = default_db_path(environ=env, platform=platform, home=tmp_path)
        assert path == tmp_path / "fb" / "history.sqlite"


def test_default_path_per_platform(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert default_db_path(environ={}, platform="linux", home=home) == (
        home / ".local" / "share" / "fitbench" / "history.sqlite"
    )
    assert default_db_path(environ={"XDG_DATA_HOME": str(tmp_path / "xdg")}, platform="linux", home=home) == (
        tmp_path / "xdg" / "fitbench" / "history.sqlite"
    )
    # A relative XDG_DATA_HOME is invalid per the spec and ignored.
    assert default_db_path(environ={"XDG_DATA_HOME": "rel"}, platform="linux", home=home) == (
        home / ".local" / "share" / "fitbench" / "history.sqlite"
    )
    assert default_db_path(environ={"FITBENCH_HOME": ""}, platform="darwin", home=home) == (
        home / "Library" / "Application Support" / "fitbench" / "history.sqlite"
    )
    local = tmp_path / "AppData" / "Local"
    assert default_db_path(environ={"LOCALAPPDATA": str(local)}, platform="win32", home=home) == (
        local / "fitbench" / "history.sqlite"
    )
    assert default_db_path(environ={}, platform="win32", home=home) == (
        home / "AppData" / "Local" / "fitbench" / "history.sqlite"
    )


def test_open_without_path_uses_fitbench_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FITBENCH_HOME", str(tmp_path / "fbhome"))
    with History.open() as h:
        assert h.path == tmp_path / "fbhome" / "history.sqlite"
        h.add_run(record())
    assert (tmp_path / "fbhome" / "history.sqlite").is_file()


# ---------------------------------------------------------------------- locking and concurrency


def test_reader_is_not_blocked_by_an_open_write_transaction(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as h:
        committed = h.add_run(record())
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO runs (run_id, created_at, payload) VALUES ('99999999', 'z', '{}')")
        started = time.monotonic()
        with History.open(path, timeout=5) as reader:
            assert [s.run_id for s in reader.list_runs()] == [committed]  # the uncommitted row is invisible
            assert reader.get_run(committed)["command"] == "run"
        assert time.monotonic() - started < 2
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_writer_gives_up_with_a_clear_error_when_locked_too_long(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    History.open(path).close()
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with History.open(path, timeout=0.2) as h:
            with pytest.raises(FitbenchError) as err:
                h.add_run(record())
            assert "locked" in err.value.message
            assert not h._conn.in_transaction
        blocker.execute("COMMIT")
        with History.open(path) as h:  # nothing half-written was left behind
            assert h.count() == 0
            h.add_run(record())
            assert h.count() == 1
    finally:
        blocker.close()


WRITER = r"""
import sys, time, pathlib
from fitbench.results.history import History
db, ready, go, tag, n = sys.argv[1:6]
pathlib.Path(ready).touch()
deadline = time.monotonic() + 30
while not pathlib.Path(go).exists():
    if time.monotonic() > deadline:
        sys.exit("no go signal")
    time.sleep(0.001)
with History.open(db) as h:  # both processes create the same new file at the same moment
    for i in range(int(n)):
        h.add_run({"command": "run", "workload": {"name": tag, "batch_size": i + 1},
                   "measurement": {"status": "ok"}, "blob": tag * 20000})
        time.sleep(0.003)  # like scripts that record runs one after another: the other writer gets turns
"""


def start_writers(tmp_path: Path, db: Path, tags: list[str], n: int) -> list[subprocess.Popen]:
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(tmp_path / f"ready-{t}"), str(go), t, str(n)],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for t in tags
    ]
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"ready-{t}").exists() for t in tags):
        assert time.monotonic() < deadline, "writer processes did not start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.005)
    go.touch()
    return procs


def finish(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        _out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err


def test_two_processes_write_at_once_and_nothing_is_lost(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    finish(start_writers(tmp_path, db, ["a", "b"], 50))

    with History.open(db) as h:
        assert h.count() == 100
        runs = h.list_runs(limit=None)
        assert len({s.run_id for s in runs}) == 100
        for tag in ("a", "b"):
            mine = h.list_runs(limit=None, workload=tag)
            assert sorted(s.batch_size for s in mine) == list(range(1, 51))
            # Each process's own runs are listed newest first.
            assert [s.batch_size for s in mine] == list(range(50, 0, -1))
        assert all(r["blob"] == r["workload"]["name"] * 20000 for r in h.last_runs(100))
        # The writes really overlapped in time: the commit order switches between the processes.
        order = [r[0] for r in h._conn.execute("SELECT workload FROM runs ORDER BY id")]
        assert sum(a != b for a, b in itertools.pairwise(order)) >= 2
        assert h._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_reading_while_another_process_writes(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    with History.open(db):
        pass  # exists before the reader starts
    procs = start_writers(tmp_path, db, ["w"], 100)
    seen = []
    with History.open(db, timeout=5) as reader:
        while procs[0].poll() is None:
            n = reader.count()
            runs = reader.list_runs(limit=5)
            assert min(5, n) <= len(runs) <= 5  # a commit may land between the two reads
            assert all(s.workload == "w" and s.status == "ok" for s in runs)
            seen.append(n)
        finish(procs)
        assert reader.count() == 100
    assert seen == sorted(seen)
