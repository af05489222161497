"""The text of report cells that the HTML and Markdown reports (and `fitbench check`) share.

One place decides how a card is named, how a metric of a given unit is written and which speed a
run or an estimate shows, so the two report formats cannot drift apart. Only formatting: every
number comes from the report model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fitbench.advise.i18n import t
from fitbench.advise.text import speed_text
from fitbench.core.units import format_bytes, format_rate, format_seconds
from fitbench.records.run import EstimateSummary
from fitbench.results.report_model import ComparisonRow, HistoryPoint, ReportScenario, RunRow

__all__ = [
    "COMPARISON_COLUMNS",
    "ESTIMATE_COLUMNS",
    "ESTIMATE_COLUMNS_MFU",
    "GUIDE_COLUMNS",
    "RUN_COLUMNS",
    "Columns",
    "environment_items",
    "estimate_columns",
    "estimate_mfu",
    "estimate_speed",
    "format_metric",
    "format_share",
    "report_cards",
    "run_speed",
    "short_gpu",
]

_BRAND_WORDS = ("GeForce ", "Tesla ", "NVIDIA ")


@dataclass(frozen=True, kw_only=True)
class Columns:
    """A report table's columns: their `col.*` text keys, and which of them hold numbers (those are
    right-aligned). Both report formats lay out the same tables, so they take them from here."""

    keys: tuple[str, ...]
    numeric: tuple[int, ...] = ()

    def headers(self, lang: str) -> list[str]:
        return [t(f"col.{key}", lang) for key in self.keys]


# A scenario's estimate on each card; with the estimated MFU beside the speed where an estimate
# has one (training), and without a column of dashes where none does (inference, generation).
ESTIMATE_COLUMNS = Columns(
    keys=("card", "verdict", "peak", "usable", "max_batch", "speed", "bottleneck"),
    numeric=(2, 3, 4, 5),
)
ESTIMATE_COLUMNS_MFU = Columns(
    keys=("card", "verdict", "peak", "usable", "max_batch", "speed", "mfu", "bottleneck"),
    numeric=(2, 3, 4, 5, 6),
)
# Each measured metric of a run against its estimate.
COMPARISON_COLUMNS = Columns(
    keys=("run", "workload", "precision", "card", "metric", "estimated", "measured", "error"),
    numeric=(5, 6, 7),
)
# The runs stored in the history.
RUN_COLUMNS = Columns(
    keys=("run", "time", "command", "workload", "precision", "device", "status", "peak", "speed"),
    numeric=(7, 8),
)
# The size guide: the smallest card class, and card, each model needs.
GUIDE_COLUMNS = Columns(
    keys=("band", "regime", "model", "params", "peak", "class", "smallest_card"),
    numeric=(3, 4),
)


def short_gpu(name: str | None) -> str:
    """'GeForce RTX 4090' -> 'RTX 4090': table columns stay narrow, the model stays unambiguous."""
    name = name or "?"
    for word in _BRAND_WORDS:
        name = name.replace(word, "")
    return name


def format_metric(unit: str, value: Any) -> str:
    """An estimate-vs-measurement value in its unit ('bytes', 'seconds', 'tok/s', 'ratio' shown as
    a percentage, or a count)."""
    if not isinstance(value, int | float):
        return "-"
    if unit == "ratio":
        return format_share(value)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "seconds":
        return format_seconds(value)
    if unit == "tok/s":
        return format_rate(value, "tok/s")
    return f"{value:g}"


def estimated_cell(row: ComparisonRow, lang: str) -> str:
    """A comparison row's estimate; for a speed estimated for the run's own host, the host ratio
    and the reference host's figure beside it."""
    text = format_metric(row.unit, row.estimated)
    if row.host_speed_ratio is None:
        return text
    return t(
        "report.host_estimate",
        lang,
        estimate=text,
        ratio=f"{row.host_speed_ratio:.2f}",
        reference=format_metric(row.unit, row.estimated_reference_host),
    )


def measured_cell(row: ComparisonRow, lang: str) -> str:
    """A comparison row's measured figure, with its spread over the run's timed windows beside it
    where the run took one ("12.3 ms ±1.8 %", "±9.9 %, unstable")."""
    text = format_metric(row.unit, row.measured)
    if row.spread is None or row.measured is None:
        return text
    key = "spread.stable" if row.spread_stable else "spread.unstable"
    return f"{text} {t(key, lang, pct=f'{row.spread * 100:.1f} %')}"


def format_share(value: float | None) -> str:
    """A fraction as a percentage ('41.2 %'), as `fitbench run` writes MFU."""
    return "-" if value is None else f"{value * 100:.1f} %"


def estimate_columns(estimates: Iterable[EstimateSummary]) -> Columns:
    """The estimate table's columns: an MFU column only where some estimate has an MFU."""
    return ESTIMATE_COLUMNS_MFU if any(e.mfu is not None for e in estimates) else ESTIMATE_COLUMNS


def estimate_mfu(e: EstimateSummary) -> str:
    """An estimate's model FLOPs utilization; none for a job that does not fit, as its speed."""
    return "-" if e.verdict == "oom" else format_share(e.mfu)


def estimate_speed(e: EstimateSummary, lang: str) -> str:
    """An estimate's speed; none for a job that does not fit (a speed there would mislead)."""
    return "-" if e.verdict == "oom" else speed_text(e, lang)


def run_speed(r: RunRow | HistoryPoint) -> str:
    """A stored run's speed: tokens per second for generation, else its step time."""
    if r.generation and r.tokens_per_second:
        return format_rate(r.tokens_per_second, "tok/s")
    return format_seconds(r.step_seconds)


def report_cards(scenarios: Iterable[ReportScenario]) -> list[tuple[str | None, str | None]]:
    """(id, name) of every card the scenarios were estimated for, in first-seen order."""
    cards: dict[str | None, str | None] = {}
    for s in scenarios:
        for e in s.estimates:
            cards.setdefault(e.gpu, e.gpu_name)
    return list(cards.items())


def environment_items(env: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The environment's plain values (nested ones and empty ones left out)."""
    return [(k, v) for k, v in env.items() if v not in (None, "", [], {}) and not isinstance(v, dict | list)]
