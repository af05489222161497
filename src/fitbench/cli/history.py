"""`fitbench history`: the runs stored by `fitbench run` (and other commands), newest first."""

from __future__ import annotations

import argparse
from typing import Any

from fitbench.cli.common import add_command, add_db_arg, positive_int, print_json
from fitbench.core.units import format_bytes, format_rate, format_seconds

EPILOG = """examples:
  fitbench history                          the 20 newest runs
  fitbench history --workload llm-6b        runs of one workload
  fitbench history --status oom --limit 5   the last five out-of-memory verdicts
  fitbench history --json --db ./runs.sqlite

JSON: a list of runs, newest first: {run_id, created_at, workload, backend, device, gpu_name,
precision, batch_size, mode, exec_mode, status, peak_memory_bytes, step_seconds,
tokens_per_second, throughput, ...}. `fitbench compare RUN_A RUN_B` shows two side by side.
"""


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text, EPILOG)
    parser.add_argument(
        "--limit", type=positive_int, default=20, metavar="N", help="newest N runs (default 20)"
    )
    parser.add_argument("--workload", metavar="W", help="only runs of this workload")
    parser.add_argument("--status", metavar="S", help="only runs with this status: ok, oom, error, timeout")
    add_db_arg(parser)
    parser.add_argument("--json", action="store_true", help="print the runs as a JSON list")
    parser.set_defaults(func=history_command)


def open_history(path: str | None) -> Any:
    """The history file for the commands that read it (history, compare, report).

    A --db that names no file is a typo, not a request for a new history: reading commands say
    so instead of creating an empty one there.
    """
    from pathlib import Path

    from fitbench.errors import FitbenchError
    from fitbench.results.history import History

    if path is not None and not Path(path).expanduser().exists():
        raise FitbenchError(f"no history file at {path}",
                            "check the --db path; `fitbench run` and `fitbench check` create one")
    return History.open(path)


def history_command(args: argparse.Namespace) -> int:
    with open_history(args.db) as history:
        runs = history.list_runs(limit=args.limit, workload=args.workload, status=args.status)
        path = history.path
    if args.json:
        print_json([r.to_dict() for r in runs])
        return 0
    if not runs:
        print(
            f"no runs in {path}"
            + (" matching the filter" if args.workload or args.status else "")
            + "; `fitbench run WORKLOAD` measures one"
        )
        return 0
    from fitbench.results.table import render_table

    rows = []
    for r in runs:
        speed = (
            format_rate(r.tokens_per_second, "tok/s")
            if r.mode == "infer" and r.tokens_per_second
            else format_rate(r.throughput, "samples/s")
            if r.throughput
            else "-"
        )
        rows.append(
            [
                r.run_id,
                (r.created_at or "")[:19].replace("T", " "),
                r.workload or "-",
                f"{r.backend or '-'} {r.exec_mode or ''}".strip(),
                r.gpu_name or r.device or "-",
                r.precision or "-",
                str(r.batch_size or "-"),
                r.status or "-",
                format_bytes(r.peak_memory_bytes),
                format_seconds(r.step_seconds),
                speed,
            ]
        )
    print(
        render_table(
            [
                "run",
                "created (UTC)",
                "workload",
                "backend",
                "device",
                "precision",
                "batch",
                "status",
                "peak",
                "step",
                "speed",
            ],
            rows,
            align="llllllrlrrr",
        )
    )
    print(f"\n{len(runs)} run(s) from {path}")
    return 0
