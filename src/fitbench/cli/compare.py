"""`fitbench compare RUN_A RUN_B`: two stored runs side by side, with B/A ratios."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from fitbench.advise.i18n import resolve_lang, status_label, t
from fitbench.cli.common import add_command, add_db_arg, print_json
from fitbench.cli.history import open_history
from fitbench.core.units import format_bytes, format_rate, format_seconds
from fitbench.records.measurement import Measurement
from fitbench.records.run import RunRecord

EPILOG = """examples:
  fitbench compare 3f2a91c0 7be01d44        two runs by id (any unique prefix works)
  fitbench compare 3f2a 7be0 --json

JSON: {"a": run, "b": run, "metrics": [{"name", "a", "b", "ratio"}]}, ratio = b / a.
Find run ids with `fitbench history`.
"""

# (label, measurement key, formatter). Ratios are b / a: below 1 is less memory or less time.
# The label is the JSON's (English, stable); the table shows i18n's "compare.<key>" in the language.
METRICS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("peak memory", "peak_memory_bytes", format_bytes),
    ("allocator peak", "peak_allocated_bytes", format_bytes),
    ("memory after load", "memory_after_load_bytes", format_bytes),
    ("load", "load_seconds", format_seconds),
    ("step time", "step_seconds", format_seconds),
    ("step time p90", "step_seconds_p90", format_seconds),
    ("throughput", "samples_per_second", lambda x: format_rate(x, "samples/s")),
    ("end-to-end tok/s", "tokens_per_second", lambda x: format_rate(x, "tok/s")),
    ("prefill", "prefill_seconds", format_seconds),
    ("decode tok/s", "decode_tokens_per_second", lambda x: format_rate(x, "tok/s")),
    ("epoch", "epoch_seconds", format_seconds),
)
CONTEXT = ("name", "precision", "batch_size", "mode")
DETAILS = ("backend", "framework_version", "device_name", "exec_mode", "precision_in_effect", "status")


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text, EPILOG)
    parser.add_argument("run_a", metavar="RUN_A", help="run id (or unique prefix) from `fitbench history`")
    parser.add_argument("run_b", metavar="RUN_B", help="the run to compare with RUN_A")
    add_db_arg(parser)
    parser.add_argument("--json", action="store_true", help="print {a, b, metrics} as JSON")
    parser.set_defaults(func=compare_command)


def _value(m: Measurement | None, key: str) -> Any:
    """A measured figure by its field name (None for a run without a measurement)."""
    return getattr(m, key) if m is not None else None


def _shown(value: Any) -> str:
    """A workload field as the table shows it: '-' where the run's stored workload lacks it."""
    return "-" if value is None else str(value)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def metrics(a: RunRecord, b: RunRecord) -> list[dict[str, Any]]:
    out = []
    for label, key, _ in METRICS:
        va, vb = _value(a.measurement, key), _value(b.measurement, key)
        if va is None and vb is None:
            continue
        na, nb = _number(va), _number(vb)
        ratio = nb / na if na and nb is not None else None
        out.append({"name": key, "label": label, "a": va, "b": vb, "ratio": ratio})
    return out


def compare_command(args: argparse.Namespace) -> int:
    with open_history(args.db) as history:
        a = history.get_record(args.run_a)
        b = history.get_record(args.run_b)
    rows = metrics(a, b)
    lang = resolve_lang(getattr(args, "lang", None))
    if args.json:
        print_json({"a": a.to_dict(), "b": b.to_dict(), "metrics": rows})
        return 0
    from fitbench.results.table import render_table

    table: list[list[str]] = []
    for key in CONTEXT:
        wa, wb = _shown(getattr(a.workload_view, key)), _shown(getattr(b.workload_view, key))
        table.append([t(f"compare.{key}", lang), wa, wb, ""])
    for key in DETAILS:
        va, vb = _value(a.measurement, key) or "-", _value(b.measurement, key) or "-"
        if key == "status":
            va, vb = status_label(va, lang), status_label(vb, lang)
        table.append([t(f"compare.{key}", lang), str(va), str(vb), ""])
    formats = {key: fmt for _, key, fmt in METRICS}
    for row in rows:
        fmt = formats[row["name"]]
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else ""
        table.append([t(f"compare.{row['name']}", lang), fmt(row["a"]), fmt(row["b"]), ratio])
    print(render_table(["", f"A {a.run_id}", f"B {b.run_id}", "B/A"], table, align="lrrr"))
    return 0
