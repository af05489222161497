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
        raise FitbenchError(
            f"no history file at {path}",
            "check the --db path; `fitbench run` and `fitbench check` create one",
            message_zh=f"{path} 处没有历史记录文件",
            hint_zh="请检查 --db 路径;`fitbench run` 和 `fitbench check` 会创建它",
        )
    return History.open(path)


def _details(history: Any, run_id: str) -> dict[str, Any]:
    """What the list's columns leave out, from the stored record: the precision that really ran
    and both token rates of a generation run."""
    try:
        record = history.get_record(run_id)
    except Exception:  # a record the list shows but cannot be read back: the list still stands
        return {}
    m = record.measurement
    generation = record.is_generation and m is not None
    return {
        "precision_requested": record.workload_view.precision,
        "precision_in_effect": m.precision_in_effect if m is not None else None,
        "decode_tokens_per_second": m.decode_tokens_per_second if generation and m else None,
        "end_to_end_tokens_per_second": m.tokens_per_second if generation and m else None,
    }


def history_command(args: argparse.Namespace) -> int:
    from fitbench.advise.i18n import resolve_lang, status_label, t
    from fitbench.advise.text import precision_shown

    lang = resolve_lang(args.lang)
    with open_history(args.db) as history:
        runs = history.list_runs(limit=args.limit, workload=args.workload, status=args.status)
        path = history.path
        details = {r.run_id: _details(history, r.run_id) for r in runs}
    if args.json:
        print_json([{**r.to_dict(), **details[r.run_id]} for r in runs])
        return 0
    if not runs:
        print(t("history.none_matching" if args.workload or args.status else "history.none", lang, path=path))
        return 0
    from fitbench.results.table import render_table

    rows = []
    for r in runs:
        d = details[r.run_id]
        if d.get("end_to_end_tokens_per_second") is not None or d.get("decode_tokens_per_second") is not None:
            rates = [
                t("rate.decode", lang, rate=format_rate(d["decode_tokens_per_second"], "tok/s"))
                if d.get("decode_tokens_per_second") is not None
                else None,
                t("rate.end_to_end", lang, rate=format_rate(d["end_to_end_tokens_per_second"], "tok/s"))
                if d.get("end_to_end_tokens_per_second") is not None
                else None,
            ]
            speed = ", ".join(x for x in rates if x)
        elif r.mode == "infer" and r.tokens_per_second:
            speed = t("rate.end_to_end", lang, rate=format_rate(r.tokens_per_second, "tok/s"))
        else:
            speed = format_rate(r.throughput, "samples/s") if r.throughput else "-"
        rows.append(
            [
                r.run_id,
                (r.created_at or "")[:19].replace("T", " "),
                r.workload or "-",
                f"{r.backend or '-'} {r.exec_mode or ''}".strip(),
                r.gpu_name or r.device or "-",
                precision_shown(r.precision, d.get("precision_in_effect"), lang),
                str(r.batch_size or "-"),
                status_label(r.status, lang),
                format_bytes(r.peak_memory_bytes),
                format_seconds(r.step_seconds),
                speed,
            ]
        )
    headers = [
        t(k, lang)
        for k in (
            "col.run",
            "col.time",
            "col.workload",
            "col.framework",
            "col.device",
            "col.precision",
            "col.batch",
            "col.status",
            "col.peak",
            "col.step",
            "col.speed",
        )
    ]
    print(render_table(headers, rows, align="llllllrlrrr"))
    print("\n" + t("history.count", lang, count=len(runs), path=path))
    return 0
