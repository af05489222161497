"""The HTML report: one self-contained file with inline CSS and inline SVG charts.

Why hand-written SVG: the report must open offline, be mailed as one file and install nothing,
so there is no CDN, no web font, no script and no plotting library. The charts are simple
(stacked bars against a capacity mark, bars, diverging error bars, lines over time) and a few
hundred lines of Python draw them exactly.

The renderer only reads the report model (`fitbench.results.report_model.ReportModel`, built by
fitbench.cli.report; a dict is read into one first) and lays it out, by attribute: every number
it shows was computed by the estimator, the runner or the advice functions. Each chart has an
accessible <title> and <desc>, and every bar its own <title> with the exact value.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from importlib import resources
from typing import Any

from fitbench.advise.i18n import part_label, preset_description, status_label, t, verdict_label
from fitbench.advise.text import measured_speed_text, spread_sentences, spread_text
from fitbench.core.units import GiB, format_bytes, format_rate, format_seconds
from fitbench.records.measurement import Measurement
from fitbench.records.run import EstimateSummary
from fitbench.results.cells import (
    COMPARISON_COLUMNS,
    ESTIMATE_COLUMNS_MFU,
    GUIDE_COLUMNS,
    RUN_COLUMNS,
    environment_items,
    estimate_columns,
    estimate_mfu,
    estimate_speed,
    estimated_cell,
    measured_cell,
    report_cards,
    run_speed,
    short_gpu,
)
from fitbench.results.report_model import (
    AdviceEntry,
    ComparisonRow,
    HistoryPoint,
    ReportModel,
    ReportScenario,
)

__all__ = ["PART_COLOURS", "render_html"]

# One colour per memory part (Tableau 10, distinguishable with the common colour-vision deficiencies
# when paired with the legend's order); the capacity mark is drawn in the ink colour.
PART_COLOURS: dict[str, str] = {
    "weights": "#4c78a8",
    "quantization_scales": "#9ecae9",
    "master_weights": "#72b7b2",
    "amp_weight_copies": "#54a24b",
    "gradients": "#f58518",
    "optimizer_state": "#e45756",
    "activations": "#b279a2",
    "kv_cache": "#eeca3b",
    "temporaries": "#ff9da6",
    "workspace": "#9d755d",
    "fragmentation": "#bab0ac",
    "cuda_context": "#79706e",
}
SERIES_COLOURS = ("#0969da", "#e36209", "#1a7f37", "#8250df", "#cf222e", "#0a7ea4", "#bf8700", "#57606a")
VERDICT_FILL = {
    "fits": ("#dafbe1", "#1a7f37"),
    "tight": ("#fff4c2", "#8a5a00"),
    "oom": ("#ffebe9", "#cf222e"),
}

CHART_W = 900
FONT_LABEL = 13


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _css() -> str:
    return resources.files("fitbench.results").joinpath("report.css").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- svg helpers


class _Svg:
    """An SVG document under construction, with an accessible title and description."""

    def __init__(self, ident: str, width: int, height: int, title: str, desc: str) -> None:
        self.ident = ident
        self.parts = [
            f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-labelledby="{ident}-t {ident}-d" preserveAspectRatio="xMinYMin meet">',
            f'<title id="{ident}-t">{_e(title)}</title>',
            f'<desc id="{ident}-d">{_e(desc)}</desc>',
        ]

    def add(self, text: str) -> None:
        self.parts.append(text)

    def text(
        self,
        x: float,
        y: float,
        text: str,
        *,
        cls: str = "label",
        anchor: str = "start",
        weight: str | None = None,
        fill: str | None = None,
    ) -> None:
        extra = (f' font-weight="{weight}"' if weight else "") + (f' style="fill:{fill}"' if fill else "")
        self.add(
            f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}" text-anchor="{anchor}"{extra}>{_e(text)}</text>'
        )

    def rect(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        *,
        fill: str,
        cls: str = "",
        title: str = "",
        rx: float = 0,
        extra: str = "",
    ) -> None:
        tip = f"<title>{_e(title)}</title>" if title else ""
        self.add(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}" rx="{rx}" '
            f'fill="{fill}" class="{cls}"{extra}>{tip}</rect>'
        )

    def line(self, x1: float, y1: float, x2: float, y2: float, *, cls: str, title: str = "") -> None:
        tip = f"<title>{_e(title)}</title>" if title else ""
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="{cls}">{tip}</line>')

    def chip(self, x: float, y: float, verdict: str, label: str, *, align: str = "start") -> None:
        """A verdict pill whose left (or, with align="end", right) edge is at x, centred on y."""
        bg, ink = VERDICT_FILL.get(verdict, ("#eef1f4", "#57606a"))
        width = 16 + 7.2 * _text_units(label)
        if align == "end":
            x -= width
        self.rect(x, y - 10, width, 20, fill=bg, rx=10)
        self.text(x + width / 2, y + 4.5, label, cls="value", anchor="middle", weight="600", fill=ink)

    def done(self) -> str:
        return "\n".join([*self.parts, "</svg>"])


def _text_units(text: str) -> float:
    """Approximate width in 'narrow character' units: CJK characters count double."""
    return sum(2.0 if ord(ch) > 0x2E80 else 1.0 for ch in text)


def _nice_step(span: float, target: int = 5) -> float:
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def _linear_ticks(top: float, target: int = 5) -> list[float]:
    step = _nice_step(top, target)
    n = math.floor(top / step + 1e-9)
    return [i * step for i in range(n + 1)]


def _log_ticks(lo: float, hi: float) -> list[float]:
    ticks = []
    for exp in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10**exp
            if lo <= v <= hi:
                ticks.append(v)
    return ticks


def _gib_label(v: float) -> str:
    return f"{v:g} GiB"


def _tick_number(v: float) -> str:
    """Axis numbers without noise: 0, 50, 2k, 1.5M."""
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e4 or (v >= 1e3 and v % 1000 == 0):
        return f"{v / 1e3:g}k"
    return f"{v:g}"


# ----------------------------------------------------------------------------- charts


def memory_chart(ident: str, scenario: ReportScenario, lang: str) -> tuple[str, list[str]]:
    """Stacked bars of the peak memory's parts per card, with each card's usable memory marked.

    Returns the SVG and the parts it shows (for the legend)."""
    ests = [e for e in scenario.estimates if e.breakdown]
    parts = [p for p in PART_COLOURS if any((e.breakdown.get(p) or 0) > 0 for e in ests)]
    parts += [p for e in ests for p in e.breakdown if p not in parts and (e.breakdown[p] or 0) > 0]
    left, right, top, row_h, bar_h = 150, 290, 34, 40, 20
    height = top + row_h * len(ests) + 16
    title = t("report.memory", lang) + " — " + str(scenario.title)
    svg = _Svg(ident, CHART_W, height, title, t("report.memory_desc", lang, scenario=scenario.title))
    peaks = [e.peak_memory_bytes or 0 for e in ests] + [1]
    usables = [e.usable_memory_bytes or 1 for e in ests] or [1]
    # The axis ends past the largest peak and the smallest card's capacity, so that a small job's
    # parts stay readable; capacities beyond the axis are marked at its end with a dashed line.
    biggest = min(max(max(peaks) * 1.3, min(usables) * 1.08), max(max(usables), max(peaks)) * 1.02)
    ticks = _linear_ticks(biggest / GiB)
    top_value = max(ticks[-1], biggest / GiB) if ticks else biggest / GiB
    span = CHART_W - left - right

    def x(v_bytes: float) -> float:
        return left + span * min(v_bytes / GiB / top_value, 1.0)

    base = top + row_h * len(ests)
    for tv in ticks:
        xx = left + span * tv / top_value
        svg.line(xx, top - 8, xx, base, cls="grid")
        svg.text(xx, top - 14, _gib_label(tv), cls="tick", anchor="middle")
    for i, e in enumerate(ests):
        y = top + i * row_h + (row_h - bar_h) / 2
        svg.text(left - 12, y + bar_h / 2 + 4.5, short_gpu(e.gpu_name), anchor="end")
        cursor = 0.0
        for p in parts:
            value = e.breakdown.get(p) or 0
            if value <= 0:
                continue
            svg.rect(
                x(cursor),
                y,
                x(cursor + value) - x(cursor),
                bar_h,
                fill=PART_COLOURS.get(p, "#888"),
                cls=f"part part-{p}",
                title=f"{part_label(p, lang)} ({p}): {format_bytes(value)}",
            )
            cursor += value
        usable = e.usable_memory_bytes or 0
        beyond = usable / GiB > top_value
        svg.line(
            x(usable),
            y - 6,
            x(usable),
            y + bar_h + 6,
            cls="usable beyond" if beyond else "usable",
            title=t("report.usable", lang, memory=format_bytes(usable)),
        )
        if beyond:
            svg.add(f'<path d="M{x(usable) + 3:.1f},{y + bar_h / 2 - 5:.1f} l6,5 l-6,5 z" class="arrow" />')
        total = e.peak_memory_bytes or 0
        # A fixed column on the right: peak / usable, then the verdict.
        label_x = CHART_W - right + 24
        svg.text(label_x, y + bar_h / 2 + 4.5, f"{format_bytes(total)} / {format_bytes(usable)}", cls="value")
        verdict = e.verdict or ""
        svg.chip(CHART_W - 4, y + bar_h / 2, verdict, verdict_label(verdict, lang), align="end")
    svg.line(left, base, CHART_W - right, base, cls="axis")
    return svg.done(), parts


def _speed_value(e: EstimateSummary) -> tuple[float | None, str]:
    """The estimate's throughput and unit: tokens/s for generation, samples/s otherwise."""
    if e.prompt_tokens is not None:
        return e.tokens_per_second, "tok/s"
    if e.family == "decoder" and e.tokens_per_second:
        return e.tokens_per_second, "tok/s"
    return e.samples_per_second, "img/s" if e.family == "resnet" else "seq/s"


def speed_chart(ident: str, scenario: ReportScenario, lang: str) -> str:
    """Bars of the estimated throughput per card; a log axis when the values spread widely."""
    ests = list(scenario.estimates)
    values = [(e, *_speed_value(e)) for e in ests]
    unit = next((u for _, _, u in values), "")
    running = [v for e, v, _ in values if v and e.verdict != "oom"]
    log = bool(running) and max(running) / min(running) > 20
    left, right, top, row_h, bar_h = 150, 110, 34, 34, 18
    height = top + row_h * len(ests) + 12
    scale_note = t("report.log_scale", lang) if log else ""
    svg = _Svg(
        ident,
        CHART_W,
        height,
        t("report.speed", lang) + " — " + str(scenario.title),
        t("report.speed_desc", lang, scenario=scenario.title, unit=unit, scale=scale_note),
    )
    span = CHART_W - left - right
    base = top + row_h * len(ests)
    if running:
        if log:
            lo = 10 ** math.floor(math.log10(min(running)))
            hi = 10 ** math.ceil(math.log10(max(running)))
            ticks = _log_ticks(lo, hi)

            def pos(v: float) -> float:
                return left + span * (math.log10(v) - math.log10(lo)) / max(
                    math.log10(hi) - math.log10(lo), 1e-9
                )
        else:
            ticks = _linear_ticks(max(running) * 1.02)
            hi = max(ticks[-1], max(running) * 1.04)

            def pos(v: float) -> float:
                return left + span * v / hi

        for tv in ticks:
            svg.line(pos(tv), top - 8, pos(tv), base, cls="grid")
            svg.text(pos(tv), top - 14, _tick_number(tv), cls="tick", anchor="middle")
        svg.text(left - 12, top - 14, unit, cls="tick", anchor="end")
    for i, (e, v, u) in enumerate(values):
        y = top + i * row_h + (row_h - bar_h) / 2
        svg.text(left - 12, y + bar_h / 2 + 4.5, short_gpu(e.gpu_name), anchor="end")
        if e.verdict == "oom" or not v or not running:
            svg.text(left + 6, y + bar_h / 2 + 4.5, t("report.does_not_fit", lang), cls="muted")
            continue
        start = left if not log else pos(lo)
        fill = "#0969da" if e.verdict == "fits" else "#bf8700"
        svg.rect(
            start,
            y,
            pos(v) - start,
            bar_h,
            fill=fill,
            cls="bar",
            rx=3,
            title=f"{short_gpu(e.gpu_name)}: {format_rate(v, u)}",
        )
        svg.text(
            pos(v) + 8,
            y + bar_h / 2 + 4.5,
            format_rate(v, u),
            cls="value",
        )
    svg.line(left, base, CHART_W - right, base, cls="axis")
    return svg.done()


def error_chart(ident: str, rows: Sequence[ComparisonRow], lang: str) -> str:
    """Diverging bars of the estimate's relative error per run and metric; zero in the middle."""
    left, right, top, row_h, bar_h = 300, 60, 34, 30, 16
    height = top + row_h * len(rows) + 30
    svg = _Svg(ident, CHART_W, height, t("report.est_vs_meas", lang), t("report.est_vs_meas_desc", lang))
    worst = max([abs(r.error) for r in rows] + [0.1])
    bound = min(
        max(_nice_step(worst * 100, 2) * math.ceil(worst * 100 / _nice_step(worst * 100, 2)), 10), 500
    )
    span = CHART_W - left - right
    mid = left + span / 2

    def pos(err: float) -> float:
        pct = max(-bound, min(bound, err * 100))
        return mid + span / 2 * pct / bound

    base = top + row_h * len(rows)
    for tv in (-bound, -bound / 2, 0, bound / 2, bound):
        svg.line(pos(tv / 100), top - 8, pos(tv / 100), base, cls="axis" if tv == 0 else "grid")
        svg.text(pos(tv / 100), top - 14, f"{tv:+.0f}%" if tv else "0", cls="tick", anchor="middle")
    for i, r in enumerate(rows):
        y = top + i * row_h + (row_h - bar_h) / 2
        label = f"{r.workload} · {r.precision} · {t('metric.' + str(r.metric), lang)}"
        svg.text(left - 12, y + bar_h / 2 + 4.5, label, anchor="end")
        x0, x1 = sorted((mid, pos(r.error)))
        fill = "#1a7f37" if abs(r.error) <= 0.15 else ("#bf8700" if abs(r.error) <= 0.35 else "#cf222e")
        svg.rect(
            x0,
            y,
            max(x1 - x0, 1.5),
            bar_h,
            fill=fill,
            cls="bar",
            rx=2,
            title=f"{label}: {r.error * 100:+.1f}%",
        )
        tx = x1 + 6 if r.error >= 0 else x0 - 6
        svg.text(
            tx,
            y + bar_h / 2 + 4.5,
            f"{r.error * 100:+.0f}%",
            cls="value",
            anchor="start" if r.error >= 0 else "end",
        )
    return svg.done()


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _series(
    points: Sequence[HistoryPoint], metric: str
) -> dict[str, list[tuple[datetime, float, HistoryPoint]]]:
    """The successful runs with a positive `metric`, by series, as (time, value, run)."""
    series: dict[str, list[tuple[datetime, float, HistoryPoint]]] = {}
    for p in points:
        when, value = _parse_time(p.created_at), getattr(p, metric)
        if when is None or not isinstance(value, int | float) or value <= 0 or p.status != "ok":
            continue
        series.setdefault(str(p.series), []).append((when, float(value), p))
    return series


def _value_axis(vals: list[float], top: float, plot_h: float) -> tuple[list[float], Callable[[float], float]]:
    """The y ticks and the y position of a value: logarithmic when the values span more than 20x."""
    if max(vals) / min(vals) > 20:
        lo, hi = 10 ** math.floor(math.log10(min(vals))), 10 ** math.ceil(math.log10(max(vals)))

        def log_ypos(v: float) -> float:
            return top + plot_h * (1 - (math.log10(v) - math.log10(lo)) / max(math.log10(hi / lo), 1e-9))

        return _log_ticks(lo, hi), log_ypos
    yticks = _linear_ticks(max(vals) * 1.05)
    top_value = max(yticks[-1], max(vals) * 1.08)

    def ypos(v: float) -> float:
        return top + plot_h * (1 - v / top_value)

    return yticks, ypos


def history_chart(
    ident: str, points: Sequence[HistoryPoint], metric: str, lang: str, fmt: Callable[[float], str]
) -> tuple[str, list[tuple[str, str]]]:
    """Points (and lines) of one metric over time, one colour per series; returns the SVG and legend."""
    series = _series(points, metric)
    left, right, top, bottom = 90, 60, 24, 44
    height = 300
    name = t(f"metric.{metric}", lang)
    svg = _Svg(
        ident,
        CHART_W,
        height,
        t("report.history", lang) + " — " + name,
        t("report.history_desc", lang, metric=name),
    )
    all_pts = [pt for s in series.values() for pt in s]
    if not all_pts:
        return svg.done(), []
    t0 = min(p[0] for p in all_pts).timestamp()
    t1 = max(p[0] for p in all_pts).timestamp()
    if t1 - t0 < 60:
        t0, t1 = t0 - 60, t1 + 60
    plot_w, plot_h = CHART_W - left - right, height - top - bottom
    yticks, ypos = _value_axis([p[1] for p in all_pts], top, plot_h)

    def xpos(when: datetime) -> float:
        return left + plot_w * (when.timestamp() - t0) / (t1 - t0)

    for tv in yticks:
        svg.line(left, ypos(tv), CHART_W - right, ypos(tv), cls="grid")
        svg.text(left - 8, ypos(tv) + 4, fmt(tv) if tv else "0", cls="tick", anchor="end")
    # Tick labels as precise as the span needs: seconds within minutes, dates across weeks.
    span_s = t1 - t0
    fmt_time = "%H:%M:%S" if span_s < 600 else ("%m-%d %H:%M" if span_s < 30 * 86400 else "%Y-%m-%d")
    for k in range(5):
        ts = t0 + (t1 - t0) * k / 4
        when = datetime.fromtimestamp(ts, tz=all_pts[0][0].tzinfo)
        svg.text(
            left + plot_w * k / 4,
            height - bottom + 20,
            when.strftime(fmt_time),
            cls="tick",
            anchor="start" if k == 0 else ("end" if k == 4 else "middle"),
        )
    svg.line(left, top + plot_h, CHART_W - right, top + plot_h, cls="axis")
    legend = []
    for n, (label, pts) in enumerate(sorted(series.items())):
        colour = SERIES_COLOURS[n % len(SERIES_COLOURS)]
        legend.append((label, colour))
        pts.sort(key=lambda p: p[0])
        if len(pts) > 1:
            coords = " ".join(f"{xpos(w):.1f},{ypos(v):.1f}" for w, v, _ in pts)
            svg.add(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2" />')
        for when, v, p in pts:
            svg.add(
                f'<circle cx="{xpos(when):.1f}" cy="{ypos(v):.1f}" r="4.5" fill="{colour}" stroke="#fff" '
                f'stroke-width="1.5"><title>{_e(label)} · {_e(p.run_id or "")} · '
                f"{_e(when.strftime('%Y-%m-%d %H:%M'))}: {_e(fmt(v))}</title></circle>"
            )
    return svg.done(), legend


# ----------------------------------------------------------------------------- html pieces


def _chip(kind: str | None, label: str) -> str:
    return f'<span class="chip {_e(kind or "none")}">{_e(label)}</span>'


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """A table; cells are HTML already (callers escape)."""
    head = "".join(
        f'<th class="num">{h}</th>' if i in numeric else f"<th>{h}</th>" for i, h in enumerate(headers)
    )
    body = []
    for row in rows:
        body.append(
            "<tr>"
            + "".join(
                f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row)
            )
            + "</tr>"
        )
    return (
        f'<div class="table-scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
        f"</tbody></table></div>"
    )


def _verdict_cell(e: EstimateSummary | None, lang: str) -> str:
    if e is None:
        return "-"
    v = e.verdict
    shown = estimate_speed(e, lang)
    speed = "" if v == "oom" else f'<span class="speed">{_e(shown)}</span>'
    return _chip(v, verdict_label(v, lang)) + speed


def _measured_cell(s: ReportScenario, lang: str) -> str:
    m = s.measurement
    if s.skipped:
        return _chip("skipped", t("status.skipped", lang))
    if m is None:
        return "-"
    status = m.status
    out = _chip(status, status_label(status, lang))
    w = s.measured_view
    if m.completed:
        text = measured_speed_text(m, w, lang)
        if w.tiny:
            text = t("cell.tiny", lang, text=text)
        device = m.device_name or m.device or ""
        out += f'<span class="speed">{_e(text)}</span><span class="speed">{_e(device)}</span>'
    return out


def _summary(model: ReportModel, lang: str) -> str:
    scenarios = model.scenarios
    if not scenarios:
        return ""
    cards = report_cards(scenarios)
    measured = any(s.measurement is not None or s.skipped for s in scenarios)
    headers = [t("report.scenario", lang)] + ([t("report.measured", lang)] if measured else [])
    headers += [_e(short_gpu(name)) for _, name in cards]
    rows = []
    for s in scenarios:
        by_gpu = {e.gpu: e for e in s.estimates}
        row = [f'<a href="#{_e(_anchor(s))}"><strong>{_e(s.title)}</strong></a>']
        if measured:
            row.append(_measured_cell(s, lang))
        row += [_verdict_cell(by_gpu.get(gid), lang) for gid, _ in cards]
        rows.append(row)
    advice = model.advice
    lead = f'<p class="lead">{_e(advice[0])}</p>' if advice else ""
    return (
        f'<section class="panel" id="summary"><h2>{_e(t("report.summary", lang))}</h2>{lead}'
        f'{_table(headers, rows)}<p class="note">{_e(t("check.legend", lang))}</p></section>'
    )


def _anchor(s: ReportScenario) -> str:
    key = str(s.key or s.title or "scenario")
    return "s-" + "".join(ch if ch.isalnum() else "-" for ch in key).strip("-").lower()


def _scenario_section(n: int, s: ReportScenario, lang: str) -> str:
    from fitbench.advise.i18n import bottleneck_label, format_params

    ests = s.estimates
    meta = []
    if s.params:
        meta.append(f"{t('col.params', lang)}: {format_params(s.params, lang)}")
    if s.description:
        meta.append(preset_description(str(s.description), lang))
    out = [
        f'<section class="panel scenario" id="{_e(_anchor(s))}"><h2>{_e(s.title)}</h2>',
        f'<p class="lead">{_e(" · ".join(meta))}</p>',
    ]
    if s.estimated_now:
        out.append(f'<p class="note">{_e(t("report.estimated_now", lang))}</p>')
    if ests:
        chart, parts = memory_chart(f"mem{n}", s, lang)
        legend = "".join(
            f'<li><span class="sw" style="background:{PART_COLOURS.get(p, "#888")}"></span>'
            f"{_e(part_label(p, lang))}</li>"
            for p in parts
        )
        legend += f'<li><span class="mark"></span>{_e(t("col.usable", lang))}</li>'
        out.append(
            f'<figure>{chart}<figcaption><ul class="legend" aria-label="{_e(t("report.legend", lang))}">'
            f"{legend}</ul></figcaption></figure>"
        )
        out.append(f"<figure>{speed_chart(f'spd{n}', s, lang)}</figure>")
        columns = estimate_columns(ests)
        with_mfu = columns is ESTIMATE_COLUMNS_MFU
        rows = []
        for e in ests:
            rows.append(
                [
                    _e(short_gpu(e.gpu_name)),
                    _chip(e.verdict, verdict_label(e.verdict, lang)),
                    _e(format_bytes(e.peak_memory_bytes)),
                    _e(format_bytes(e.usable_memory_bytes)),
                    _e(e.max_batch_size),
                    _e(estimate_speed(e, lang)),
                    *([_e(estimate_mfu(e))] if with_mfu else []),
                    _e(bottleneck_label(e.bottleneck, lang)),
                ]
            )
        out.append(_table(columns.headers(lang), rows, numeric=columns.numeric))
    m = s.measurement
    if m is not None:
        w = s.measured_view
        title = t("report.measured", lang) + (" · " + t("check.variant_tiny", lang) if w.tiny else "")
        rows = [
            [
                _chip(m.status, status_label(m.status, lang)),
                _e(f"{m.backend or ''} {m.framework_version or ''}".strip()),
                _e(m.device_name or m.device),
                _e(format_bytes(m.peak_memory_bytes)),
                _e(_step_with_spread(m, lang)),
                _e(measured_speed_text(m, w, lang) if m.completed else "-"),
            ]
        ]
        out.append(f"<h3>{_e(title)}</h3>")
        out.append(
            _table(
                [
                    t("col.status", lang),
                    t("col.framework", lang),
                    t("col.device", lang),
                    t("col.peak", lang),
                    t("col.step", lang),
                    t("col.speed", lang),
                ],
                rows,
                numeric=(3, 4),
            )
        )
        if m.completed:
            # A measured figure whose windows did not settle, in words (fitbench.measure.timing).
            out.extend(f'<p class="note">{_e(x)}</p>' for x in spread_sentences(m, w, lang))
    if s.advice:
        items = "".join(_advice_item(a) for a in s.advice)
        out.append(f'<h3>{_e(t("report.advice", lang))}</h3><ul class="advice">{items}</ul>')
    out.append("</section>")
    return "\n".join(out)


def _step_with_spread(m: Measurement, lang: str) -> str:
    """The measured step time with its spread beside it, where the run took one."""
    text = format_seconds(m.step_seconds)
    spread = spread_text(m, "step_seconds", lang)
    return f"{text} {spread}" if spread and m.step_seconds is not None else text


def _advice_item(entry: str | AdviceEntry) -> str:
    if isinstance(entry, AdviceEntry):
        sub = "".join(f"<li>{_e(x)}</li>" for x in entry.items)
        return f"<li>{_e(entry.text)}" + (f"<ul>{sub}</ul>" if sub else "") + "</li>"
    return f"<li>{_e(entry)}</li>"


def _comparison_section(model: ReportModel, lang: str) -> str:
    rows = model.comparisons
    head = (
        f'<section class="panel" id="comparison"><h2>{_e(t("report.est_vs_meas", lang))}</h2>'
        f'<p class="lead">{_e(t("report.est_vs_meas_desc", lang))}</p>'
    )
    if not rows:
        return head + f'<p class="empty">{_e(t("report.no_comparison", lang))}</p></section>'
    table = _table(
        COMPARISON_COLUMNS.headers(lang),
        [
            [
                f'<span class="mono">{_e(r.run_id or "-")}</span>',
                _e(r.workload),
                _e(r.precision),
                _e(short_gpu(r.device_name or r.gpu)),
                _e(t("metric." + str(r.metric), lang)),
                _e(estimated_cell(r, lang)),
                _e(measured_cell(r, lang)),
                _error_cell(r, lang),
            ]
            for r in rows
        ],
        numeric=COMPARISON_COLUMNS.numeric,
    )
    # Only figures with an error have a bar.
    charted = [r for r in rows if r.error is not None]
    figure = f"<figure>{error_chart('err', charted, lang)}</figure>" if charted else ""
    return head + figure + table + "</section>"


def _error_cell(row: ComparisonRow, lang: str) -> str:
    """The error, or "not comparable" and why (the same words as `fitbench run`)."""
    if row.error is not None:
        return _e(f"{row.error * 100:+.1f}%")
    reasons = row.not_comparable
    why = t("run.reason.sep", lang).join(t(f"run.max_batch_reason.{k}", lang) for k in reasons)
    return _e(t("report.not_comparable", lang, reasons=why))


def _history_section(model: ReportModel, lang: str) -> str:
    points, runs = model.history, model.runs
    out = [f'<section class="panel" id="history"><h2>{_e(t("report.history", lang))}</h2>']
    charts = [
        ("step_seconds", [p for p in points if not p.generation], format_seconds),
        ("tokens_per_second", [p for p in points if p.generation], lambda v: format_rate(v, "tok/s")),
    ]
    drawn = 0
    for metric, pts, fmt in charts:
        svg, legend = history_chart(f"hist-{metric}", pts, metric, lang, fmt)
        if not legend:
            continue
        drawn += 1
        name = t(f"metric.{metric}", lang)
        out.append(f"<h3>{_e(name[:1].upper() + name[1:])}</h3>")
        items = "".join(
            f'<li><span class="sw" style="background:{c}"></span>{_e(label)}</li>' for label, c in legend
        )
        out.append(f'<figure>{svg}<figcaption><ul class="legend">{items}</ul></figcaption></figure>')
    if not drawn:
        out.append(f'<p class="empty">{_e(t("report.no_history", lang))}</p>')
    if runs:
        out.append(f"<h3>{_e(t('report.runs', lang))}</h3>")
        rows = []
        for r in runs:
            when = (r.created_at or "")[:19].replace("T", " ")
            speed = run_speed(r)
            name = str(r.workload or "-")
            name = t("cell.tiny_name", lang, name=name) if r.tiny else name
            rows.append(
                [
                    f'<span class="mono">{_e(r.run_id or "-")}</span>',
                    f'<span class="nowrap">{_e(when or "-")}</span>',
                    _e(r.command or "-"),
                    _e(name),
                    f'<span class="nowrap">{_e(r.precision)}</span>',
                    _e(r.device),
                    _chip(r.status, status_label(r.status, lang)),
                    _e(format_bytes(r.peak_memory_bytes)),
                    _e(speed),
                ]
            )
        out.append(_table(RUN_COLUMNS.headers(lang), rows, numeric=RUN_COLUMNS.numeric))
    out.append("</section>")
    return "\n".join(out)


def _guide_section(model: ReportModel, lang: str) -> str:
    guide = model.guide
    if not guide:
        return ""
    from fitbench.advise.i18n import format_params, has

    head, *lines = guide
    body = "".join(f"<li>{_e(line.strip())}</li>" for line in lines)
    out = [
        f'<section class="panel guide" id="guide"><h2>{_e(head.rstrip(":："))}</h2>',
        f'<ul class="advice">{body}</ul>',
    ]
    rows = []
    previous: tuple[str, str] = ("", "")
    for r in model.guide_rows:
        regime_key = f"guide.regime.{r.regime}"
        band_key = f"band.{r.band}"
        band = t(band_key, lang) if has(band_key) else str(r.band)
        regime = (t(regime_key, lang) if has(regime_key) else str(r.regime)).rstrip(":：")
        # Band and job are written once per group, as in a printed table.
        shown = (band if band != previous[0] else "", regime if (band, regime) != previous else "")
        previous = (band, regime)
        cls = r.fits_class_gb
        rows.append(
            [
                f"<strong>{_e(shown[0])}</strong>",
                _e(shown[1]),
                _e(r.model),
                _e(format_params(r.params, lang)),
                _e(format_bytes(r.peak_memory_bytes)),
                _chip(
                    "fits" if cls else "oom",
                    t("unit.gb_class", lang, gb=cls) if cls else t("guide.no_card", lang),
                ),
                _e(r.card_name or r.card or "-"),
            ]
        )
    if rows:
        out.append(_table(GUIDE_COLUMNS.headers(lang), rows, numeric=GUIDE_COLUMNS.numeric))
    out.append("</section>")
    return "".join(out)


def _environment_section(model: ReportModel, lang: str) -> str:
    env = model.environment
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in environment_items(env))
    return (
        f'<section class="panel" id="environment"><h2>{_e(t("report.environment", lang))}</h2>'
        f'<dl class="env">{items}</dl></section>'
    )


def _machine_badges(model: ReportModel) -> str:
    """The machine in a few words: its GPU (or CPU), framework versions, Python."""
    machine = model.machine or {}
    env = model.environment
    badges = []
    gpus = machine.get("gpus") or []
    if gpus:
        badges.append(str(gpus[0].get("name")))
    elif env.get("gpu"):
        badges.append(str(env["gpu"]))
    elif str(env.get("device", "")).startswith("cuda") and env.get("device_name"):
        badges.append(str(env["device_name"]))
    elif machine or env.get("cpu"):
        badges.append("CPU: " + str(env.get("cpu") or machine.get("cpu") or "?"))
    frameworks = [f"{key} {env[key]}" for key in ("torch", "paddle") if env.get(key)]
    badges += frameworks or ([str(env["backend"])] if env.get("backend") else [])
    if env.get("python"):
        badges.append(f"Python {env['python']}")
    if not badges:
        return ""
    return '<div class="machine">' + "".join(f"<span>{_e(b)}</span>" for b in badges) + "</div>"


def render_html(model: ReportModel | Mapping[str, Any]) -> str:
    """The whole report as one HTML document (a str), from a report model (or its dict)."""
    model = ReportModel.from_dict(model)
    lang = model.lang
    scenarios = model.scenarios
    toc = [("summary", t("report.summary", lang))] if scenarios else []
    toc += [(_anchor(s), str(s.title)) for s in scenarios]
    toc += [("comparison", t("report.est_vs_meas", lang)), ("history", t("report.history", lang))]
    if model.guide:
        toc.append(("guide", t("guide.header", lang).split("(")[0].split("(")[0].strip(" :：")))
    toc.append(("environment", t("report.environment", lang)))
    nav = "".join(f'<a href="#{_e(a)}">{_e(label)}</a>' for a, label in toc)
    generated = t("report.generated", lang, time=model.generated_at or "", version=model.fitbench_version)
    body = [
        f'<header class="top"><div class="wrap"><h1>{_e(t("report.title", lang))}</h1>',
        f'<p class="sub">{_e(t("report.subtitle", lang))}</p>',
        _machine_badges(model),
        f'<p class="meta">{_e(generated)}</p>',
        f'<nav class="toc" aria-label="contents">{nav}</nav></div></header>',
        '<main class="wrap">',
        _summary(model, lang),
        *(_scenario_section(n, s, lang) for n, s in enumerate(scenarios)),
        _comparison_section(model, lang),
        _history_section(model, lang),
        _guide_section(model, lang),
        _environment_section(model, lang),
        "</main>",
        f'<footer class="wrap">fitbench {_e(model.fitbench_version)}</footer>',
    ]
    html_lang = "zh-CN" if lang == "zh" else "en"
    return "\n".join(
        [
            "<!DOCTYPE html>",
            f'<html lang="{html_lang}">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="color-scheme" content="light">',
            f"<title>{_e(t('report.title', lang))}</title>",
            f"<style>\n{_css()}\n</style>",
            "</head>",
            "<body>",
            *[b for b in body if b],
            "</body>",
            "</html>",
            "",
        ]
    )
