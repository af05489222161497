"""The run history: every estimate and measurement fitbench makes, kept in one SQLite file.

Why SQLite, and why these settings. A benchmark tool is killed halfway (Ctrl-C, SIGKILL from a
job scheduler, the OOM killer), run several times at once from scripts, and read by
``fitbench history`` while another run is writing. The history must never lose a recorded run
or end up unreadable, so:

* **WAL journal mode.** A write appends frames to ``history.sqlite-wal``; only a transaction
  whose commit frame is in the WAL counts. A process killed mid-write leaves frames without a
  commit frame, which the next opener ignores, so the main file is never half-updated. Readers
  keep reading the last committed state while a writer works, so ``fitbench history`` works
  next to a running benchmark.
* **synchronous=NORMAL.** In WAL mode this syncs the WAL at checkpoints, not at every commit.
  A committed transaction is in the operating system's page cache as soon as COMMIT returns, so
  it survives the *process* being killed; only a power cut or kernel crash can drop the last few
  commits, and even then the file stays consistent (never corrupt). FULL would add an fsync per
  run for a case the history does not need to survive.
* **One short ``BEGIN IMMEDIATE`` transaction per run.** The write lock is taken up front, so
  two writers queue on ``busy_timeout`` instead of failing with "database is locked" halfway
  through a transaction.
* **Versioned schema.** ``PRAGMA user_version`` holds the schema number; ``MIGRATIONS`` is the
  ordered list of steps, each applied in its own transaction, so an old file is upgraded in
  place and a file from a newer fitbench is refused instead of damaged.
* **A marker.** The ``meta`` table holds ``application = fitbench``. A file that is not SQLite,
  or is another program's database, is refused *before* anything is written to it.

The full result is stored as JSON in ``payload`` (a `RunRecord`'s dict, its schema version in
``record_version``; NULL for rows written before payloads had one); a handful of fields are
copied into columns so that the history can be listed and filtered without parsing every
payload. ``get_record`` reads any row back as a `RunRecord`, migrated from its version.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from fitbench.errors import FitbenchError, unknown_name
from fitbench.records.run import RunRecord, payload_version

APPLICATION = "fitbench"
FILE_NAME = "history.sqlite"
STATUSES = ("ok", "oom", "error", "timeout", "killed")
DEFAULT_TIMEOUT_S = 30.0
_SQLITE_MAGIC = b"SQLite format 3\x00"
_LIST_HINT = "`fitbench history` lists runs"
_LIST_HINT_ZH = "`fitbench history` 可列出运行记录"

# MIGRATIONS[i] turns schema version i into version i + 1; SCHEMA_VERSION is where they end.
# Never edit a step that has been released: files in the wild were written by it. Add a step.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1: the marker, the runs table and its indexes.
    (
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"INSERT OR REPLACE INTO meta (key, value) VALUES ('application', '{APPLICATION}')",
        """CREATE TABLE IF NOT EXISTS runs (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            command TEXT,
            workload TEXT,
            backend TEXT,
            framework_version TEXT,
            device TEXT,
            gpu_name TEXT,
            precision TEXT,
            batch_size INTEGER,
            mode TEXT,
            status TEXT,
            peak_memory_bytes INTEGER,
            step_seconds REAL,
            tokens_per_second REAL,
            throughput REAL,
            hostname TEXT,
            fitbench_version TEXT,
            payload TEXT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS runs_created_at ON runs (created_at)",
        "CREATE INDEX IF NOT EXISTS runs_workload ON runs (workload)",
    ),
    # 1 -> 2: runs remember whether they used the code most users write or the tuned path.
    ("ALTER TABLE runs ADD COLUMN exec_mode TEXT",),
    # 2 -> 3: the schema version of each payload (fitbench.records.run); NULL for the rows
    # written before payloads had one, which RunRecord.from_dict reads as version 0.
    ("ALTER TABLE runs ADD COLUMN record_version INTEGER",),
)
SCHEMA_VERSION = len(MIGRATIONS)


def default_db_path(
    *,
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    home: Path | None = None,
) -> Path:
    """Where the history lives unless ``--db`` says otherwise: the user's data directory.

    ``$FITBENCH_HOME`` wins (one variable to move everything, e.g. onto a shared disk). Otherwise
    the platform's convention: ``$XDG_DATA_HOME/fitbench`` or ``~/.local/share/fitbench`` on
    Linux and other Unix, ``~/Library/Application Support/fitbench`` on macOS,
    ``%LOCALAPPDATA%\\fitbench`` on Windows. The keyword arguments exist for tests; callers pass
    none of them.
    """
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform
    home_dir = Path.home() if home is None else home
    if env.get("FITBENCH_HOME"):
        return Path(env["FITBENCH_HOME"]).expanduser() / FILE_NAME
    if plat.startswith("win"):
        base = Path(env["LOCALAPPDATA"]) if env.get("LOCALAPPDATA") else home_dir / "AppData" / "Local"
    elif plat == "darwin":
        base = home_dir / "Library" / "Application Support"
    else:
        xdg = env.get("XDG_DATA_HOME", "")
        # The XDG spec says a relative path is invalid and must be ignored.
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else home_dir / ".local" / "share"
    return base / APPLICATION / FILE_NAME


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """One row of ``fitbench history``: the indexed columns of a run, without its payload."""

    run_id: str
    created_at: str
    command: str | None = None
    workload: str | None = None
    backend: str | None = None
    framework_version: str | None = None
    device: str | None = None
    gpu_name: str | None = None
    precision: str | None = None
    batch_size: int | None = None
    mode: str | None = None
    exec_mode: str | None = None
    status: str | None = None
    peak_memory_bytes: int | None = None
    step_seconds: float | None = None
    tokens_per_second: float | None = None
    throughput: float | None = None
    hostname: str | None = None
    fitbench_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_SUMMARY_COLUMNS = tuple(f.name for f in dataclasses.fields(RunSummary))
_INSERT_COLUMNS = (*_SUMMARY_COLUMNS, "record_version", "payload")


class History:
    """An open history file. Use ``History.open(path)``, preferably as a context manager.

    One instance is one SQLite connection: use it from the thread that opened it. Any number of
    processes may open the same file at once.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        """Internal: ``History.open`` checks and migrates the file first."""
        self._conn = conn
        self.path = path

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str | Path | None = None, *, timeout: float = DEFAULT_TIMEOUT_S) -> History:
        """Open (creating it and its folder if needed) the history at `path`, default_db_path() if None.

        `timeout` is how long to wait for another process's write lock before giving up.
        Raises FitbenchError for a file that is not a fitbench history, one written by a newer
        fitbench, or a location that cannot be written.
        """
        db = Path(path).expanduser() if path is not None else default_db_path()
        _check_location(db)
        try:
            conn = sqlite3.connect(db, timeout=timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise _cannot_open(db, exc) from exc
        try:
            # Autocommit mode (isolation_level=None): transactions are only the ones we BEGIN.
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            _check_ours(conn, db)  # read-only: a foreign file is refused before anything is written
            _enable_wal(conn, timeout)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            _migrate(conn, db)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.DatabaseError):
                raise _open_error(db, exc) from exc
            raise
        return cls(conn, db)

    def close(self) -> None:
        """Close the connection (idempotent). The last connection to close checkpoints the WAL."""
        self._conn.close()

    def __enter__(self) -> History:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"History({str(self.path)!r})"

    @property
    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    # ------------------------------------------------------------------ writing

    def add_run(self, record: RunRecord | Mapping[str, Any]) -> str:
        """Store one result and return its new run id (8 hex characters).

        `record` is a `RunRecord` (stored as its to_dict, with its schema version), or a mapping:
        "command", "workload" (name, precision, batch_size, mode), "measurement" (status,
        peak_memory_bytes, step_seconds, tokens_per_second, samples_per_second, backend,
        framework_version, device, device_name, exec_mode), "estimate", "environment" (hostname,
        fitbench_version). Any of them may be missing; its columns are then NULL. A mapping is
        stored as given, its version taken from its "schema_version" key (NULL without one).
        """
        if isinstance(record, RunRecord):
            record, version = record.to_dict(ids=False), record.schema_version
        elif isinstance(record, Mapping):
            version = payload_version(record) or None
        else:
            raise TypeError(f"a run record is a mapping, got {type(record).__name__}")
        payload = json.dumps(record, default=_jsonable, ensure_ascii=False)
        columns = {**_columns_from(record), "record_version": version}
        try:
            with _transaction(self._conn):
                created_at = _utc_now()
                for _attempt in range(100):
                    run_id = _new_run_id()
                    row = {**columns, "run_id": run_id, "created_at": created_at, "payload": payload}
                    try:
                        self._conn.execute(
                            f"INSERT INTO runs ({', '.join(_INSERT_COLUMNS)}) "
                            f"VALUES ({', '.join(':' + c for c in _INSERT_COLUMNS)})",
                            row,
                        )
                    except sqlite3.IntegrityError as exc:
                        if "run_id" not in str(exc):
                            raise
                        continue  # the id is taken: draw another one (the failed INSERT is undone alone)
                    return run_id
                raise RuntimeError("could not draw an unused run id in 100 attempts")
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
            raise  # a bug, not the user's file
        except sqlite3.DatabaseError as exc:
            if "malformed" in str(exc).lower():
                raise _open_error(self.path, exc) from exc
            if _is_locked(exc):
                raise FitbenchError(
                    f"could not save the run: history file {self.path} stayed locked by another process",
                    "try again when the other fitbench run has finished",
                    message_zh=f"无法保存运行:历史记录文件 {self.path} 一直被另一个进程锁定",
                    hint_zh="请等另一个 fitbench 运行结束后再试",
                ) from exc
            raise FitbenchError(
                f"could not save the run in history file {self.path}: {exc}",
                "check free disk space and permissions, or pass --db with another file",
                message_zh=f"无法把运行保存到历史记录文件 {self.path}:{exc}",
                hint_zh="请检查剩余磁盘空间和权限,或用 --db 指定其他文件",
            ) from exc

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a query; a damaged file becomes a FitbenchError rather than a traceback."""
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.ProgrammingError:
            raise  # a closed History or bad SQL: a bug
        except sqlite3.DatabaseError as exc:
            raise _open_error(self.path, exc) from exc

    # ------------------------------------------------------------------ reading

    def count(self) -> int:
        return int(self._rows("SELECT COUNT(*) FROM runs")[0][0])

    def list_runs(
        self, limit: int | None = 50, workload: str | None = None, status: str | None = None
    ) -> list[RunSummary]:
        """The newest runs first, at most `limit` (None: all), optionally of one workload/status."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise FitbenchError(
                f"limit must be a positive integer, got {limit!r}",
                message_zh=f"limit 必须是正整数,实际为 {limit!r}",
            )
        if status is not None and status not in STATUSES:
            stored = {r[0] for r in self._rows("SELECT DISTINCT status FROM runs") if r[0]}
            if status not in stored:
                raise unknown_name("status", status, [*STATUSES, *stored], kind_zh="状态")
        where, params = [], []
        if workload is not None:
            where.append("workload = ?")
            params.append(workload)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        sql = f"SELECT {', '.join(_SUMMARY_COLUMNS)} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        rows = self._rows(sql, params)
        return [RunSummary(**dict(zip(_SUMMARY_COLUMNS, row, strict=True))) for row in rows]

    def get_run(self, run_id_or_prefix: str) -> dict[str, Any]:
        """The full stored result of one run (plus "run_id" and "created_at").

        Any unique prefix of the run id works, as with git commits.
        """
        key = str(run_id_or_prefix).strip().lower()
        if not key:
            raise FitbenchError(
                "no run id given", _LIST_HINT, message_zh="没有给出运行 ID", hint_zh=_LIST_HINT_ZH
            )
        rows = self._rows("SELECT run_id, created_at, payload FROM runs WHERE run_id = ?", (key,))
        if not rows:
            rows = self._rows(
                "SELECT run_id, created_at, payload FROM runs WHERE substr(run_id, 1, ?) = ? "
                "ORDER BY created_at DESC, id DESC LIMIT 6",
                (len(key), key),
            )
        if not rows:
            raise FitbenchError(
                f"no run '{key}' in history file {self.path}",
                _LIST_HINT,
                message_zh=f"历史记录文件 {self.path} 中没有运行 '{key}'",
                hint_zh=_LIST_HINT_ZH,
            )
        if len(rows) > 1:
            shown = ", ".join(r[0] for r in rows[:5]) + (", …" if len(rows) > 5 else "")
            raise FitbenchError(
                f"run id prefix '{key}' matches several runs ({shown})",
                f"type more characters of the run id; {_LIST_HINT}",
                message_zh=f"运行 ID 前缀 '{key}' 匹配到多条运行({shown})",
                hint_zh=f"请多输入几个运行 ID 字符;{_LIST_HINT_ZH}",
            )
        return _full(*rows[0])

    def get_record(self, run_id_or_prefix: str) -> RunRecord:
        """One run as a typed record, migrated from whichever version wrote it."""
        run = self.get_run(run_id_or_prefix)
        return _record(run, self._version_of(run["run_id"]))

    def last_records(self, n: int) -> list[RunRecord]:
        """The `n` newest runs as typed records, newest first."""
        return [_record(run, self._version_of(run["run_id"])) for run in self.last_runs(n)]

    def _version_of(self, run_id: str) -> int | None:
        return self._rows("SELECT record_version FROM runs WHERE run_id = ?", (run_id,))[0][0]

    def last_runs(self, n: int) -> list[dict[str, Any]]:
        """The full stored results of the `n` newest runs, newest first."""
        if n < 1:
            return []
        rows = self._rows(
            "SELECT run_id, created_at, payload FROM runs ORDER BY created_at DESC, id DESC LIMIT ?", (n,)
        )
        return [_full(*row) for row in rows]


# ---------------------------------------------------------------------- opening helpers


def _check_location(db: Path) -> None:
    """Refuse a folder or a non-SQLite file without touching it; create the parent folder."""
    if db.is_dir():
        raise FitbenchError(
            f"history file {db} is a folder",
            "pass --db with a file path",
            message_zh=f"历史记录文件 {db} 是一个文件夹",
            hint_zh="请用 --db 指定一个文件路径",
        )
    if db.is_file():
        try:
            with db.open("rb") as f:
                head = f.read(len(_SQLITE_MAGIC))
        except OSError as exc:
            raise FitbenchError(
                f"cannot read history file {db}: {exc.strerror or exc}",
                "fix its permissions or pass --db with another file",
                message_zh=f"无法读取历史记录文件 {db}:{exc.strerror or exc}",
                hint_zh="请修正它的权限,或用 --db 指定其他文件",
            ) from exc
        # An empty file is a valid empty database (e.g. created by `touch`): it becomes a history.
        if head and head != _SQLITE_MAGIC:
            raise _not_a_history(db, "not an SQLite database", "不是 SQLite 数据库")
    else:
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FitbenchError(
                f"cannot create the folder for history file {db}: {exc.strerror or exc}",
                "set FITBENCH_HOME or pass --db with a writable path",
                message_zh=f"无法为历史记录文件 {db} 创建文件夹:{exc.strerror or exc}",
                hint_zh="请设置 FITBENCH_HOME,或用 --db 指定一个可写的路径",
            ) from exc


def _check_ours(conn: sqlite3.Connection, db: Path) -> None:
    """Refuse another program's database, or one from a newer fitbench. Reads only."""
    kind, version = _inspect(conn)
    if kind == "foreign":
        raise _not_a_history(db, "an SQLite database of another program", "是其他程序的 SQLite 数据库")
    if version > SCHEMA_VERSION:
        raise _newer(db, version)


def _inspect(conn: sqlite3.Connection) -> tuple[str, int]:
    """('empty' | 'ours' | 'foreign', user_version) of an open database."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    if not names:
        return ("empty" if version == 0 else "foreign"), version
    if "meta" not in names:
        return "foreign", version
    meta_columns = {r[1] for r in conn.execute("PRAGMA table_info(meta)")}
    if not {"key", "value"} <= meta_columns:
        return "foreign", version
    row = conn.execute("SELECT value FROM meta WHERE key = 'application'").fetchone()
    return ("ours" if row is not None and row[0] == APPLICATION else "foreign"), version


def _enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch to WAL (persistent in the file; a no-op once done).

    Switching a brand-new file needs a moment of exclusive access; when two processes create the
    history at the same instant one may see SQLITE_BUSY without the busy handler, so retry.
    On a filesystem without shared memory (some network mounts) WAL is refused; the history
    then keeps the rollback journal with synchronous=FULL, slower but just as safe.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
            break
        except sqlite3.OperationalError as exc:
            if not _is_locked(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    if mode != "wal":
        conn.execute("PRAGMA synchronous = FULL")


def _migrate(conn: sqlite3.Connection, db: Path) -> None:
    """Bring the file to SCHEMA_VERSION, one transaction per step.

    An up-to-date file is only read, so opening a history never waits on a writer. Each step
    re-reads the version under the write lock: two processes upgrading at once apply it once.
    """
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION:
        return
    for target in range(1, SCHEMA_VERSION + 1):
        with _transaction(conn):
            kind, version = _inspect(conn)
            if kind == "foreign":
                raise _not_a_history(
                    db, "an SQLite database of another program", "是其他程序的 SQLite 数据库"
                )
            if version > SCHEMA_VERSION:
                raise _newer(db, version)
            if version < target:
                for statement in MIGRATIONS[target - 1]:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {target}")


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction: the write lock is taken up front (waiting up to busy_timeout) and
    everything is undone if anything fails, the COMMIT included."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _is_locked(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _not_a_history(db: Path, what: str, what_zh: str) -> FitbenchError:
    return FitbenchError(
        f"{db} is not a fitbench history ({what})",
        "pass --db with another file, or move this one away and fitbench starts a new history there",
        message_zh=f"{db} 不是 fitbench 历史记录({what_zh})",
        hint_zh="请用 --db 指定其他文件,或把这个文件移走,fitbench 会在原处新建历史记录",
    )


def _newer(db: Path, version: int) -> FitbenchError:
    return FitbenchError(
        f"history file {db} was written by a newer fitbench (schema {version})",
        "upgrade fitbench or pass --db with another file",
        message_zh=f"历史记录文件 {db} 由更新版本的 fitbench 写入(模式 {version})",
        hint_zh="请升级 fitbench,或用 --db 指定其他文件",
    )


def _open_error(db: Path, exc: sqlite3.DatabaseError) -> FitbenchError:
    text = str(exc).lower()
    if "malformed" in text:
        return FitbenchError(
            f"history file {db} is damaged ({exc})",
            "move it away and fitbench starts a new history; the sqlite3 "
            "shell's .recover command can salvage its runs",
            message_zh=f"历史记录文件 {db} 已损坏({exc})",
            hint_zh=(
                "把它移走后 fitbench 会新建历史记录;sqlite3 命令行的 .recover 命令可以找回其中的运行记录"
            ),
        )
    if "not a database" in text:
        return _not_a_history(db, "not an SQLite database", "不是 SQLite 数据库")
    return _cannot_open(db, exc)


def _cannot_open(db: Path, exc: sqlite3.Error) -> FitbenchError:
    if _is_locked(exc):
        return FitbenchError(
            f"history file {db} stayed locked by another process",
            "try again when the other fitbench run has finished",
            message_zh=f"历史记录文件 {db} 一直被另一个进程锁定",
            hint_zh="请等另一个 fitbench 运行结束后再试",
        )
    return FitbenchError(
        f"cannot open history file {db}: {exc}",
        "check its permissions and free disk space, or pass --db with another file",
        message_zh=f"无法打开历史记录文件 {db}:{exc}",
        hint_zh="请检查它的权限和剩余磁盘空间,或用 --db 指定其他文件",
    )


# ---------------------------------------------------------------------- records


def _new_run_id() -> str:
    """Short enough to type, random enough that collisions are rare (and retried when they happen)."""
    return uuid.uuid4().hex[:8]


def _utc_now() -> str:
    """ISO-8601 UTC with a fixed width, so that text order is time order."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@functools.cache
def _fitbench_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fitbench")
    except PackageNotFoundError:
        return None


def _section(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _columns_from(record: Mapping[str, Any]) -> dict[str, Any]:
    """The indexed columns of a record; anything missing or of the wrong type is NULL."""
    measurement = _section(record, "measurement")
    estimate = _section(record, "estimate")
    environment = _section(record, "environment")
    raw_workload = record.get("workload")
    workload = raw_workload if isinstance(raw_workload, Mapping) else _section(estimate, "workload")
    workload_name = raw_workload if isinstance(raw_workload, str) else workload.get("name")
    gpu = estimate.get("gpu")
    estimate_gpu = gpu.get("name") if isinstance(gpu, Mapping) else gpu
    return {
        "command": _text(record.get("command")),
        "workload": _text(workload_name),
        "backend": _text(measurement.get("backend")),
        "framework_version": _text(measurement.get("framework_version")),
        "device": _text(measurement.get("device")),
        # The card that ran it; for an estimate alone, the card it was estimated for.
        "gpu_name": _text(_first(measurement.get("device_name"), estimate_gpu)),
        "precision": _text(workload.get("precision")),
        "batch_size": _int(workload.get("batch_size")),
        "mode": _text(workload.get("mode")),
        "exec_mode": _text(_first(measurement.get("exec_mode"), record.get("exec_mode"))),
        "status": _text(_first(measurement.get("status"), record.get("status"))),
        "peak_memory_bytes": _int(measurement.get("peak_memory_bytes")),
        "step_seconds": _float(measurement.get("step_seconds")),
        "tokens_per_second": _float(measurement.get("tokens_per_second")),
        "throughput": _float(measurement.get("samples_per_second")),
        "hostname": _text(environment.get("hostname")),
        # The fitbench that recorded the run, when the record does not say.
        "fitbench_version": _text(_first(environment.get("fitbench_version"), _fitbench_version())),
    }


def _jsonable(value: Any) -> Any:
    """json.dumps fallback: dataclasses, paths, sets and tuples become plain JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return str(value)


def _record(run: Mapping[str, Any], version: int | None) -> RunRecord:
    """A stored run as a RunRecord: the column's version, else the payload's own, else 0."""
    return RunRecord.from_dict(run, version=version if version is not None else payload_version(run))


def _full(run_id: str, created_at: str, payload: str) -> dict[str, Any]:
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise FitbenchError(
            f"run {run_id} in the history has an unreadable payload",
            "delete the run or pass --db with another file",
            message_zh=f"历史记录中的运行 {run_id} 数据无法读取",
            hint_zh="请删除这条运行,或用 --db 指定其他文件",
        ) from exc
    if not isinstance(data, dict):
        data = {"payload": data}
    return {**data, "run_id": run_id, "created_at": created_at}


__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "STATUSES",
    "History",
    "RunSummary",
    "default_db_path",
]
