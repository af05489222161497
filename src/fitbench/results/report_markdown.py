"""The Markdown report: the HTML report's tables, without charts, for READMEs, issues and chat.

Reads the same report model as report_html (see fitbench.cli.report), as a typed
fitbench.results.report_model.ReportModel, and computes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fitbench.advise.i18n import (
    bottleneck_label,
    format_params,
    has,
    part_label,
    preset_description,
    status_label,
    t,
    verdict_label,
)
from fitbench.advise.text import measured_speed_text
from fitbench.core.units import format_bytes
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
from fitbench.results.report_model import AdviceEntry, GuideLine, ReportModel, ReportScenario

__all__ = ["render_markdown"]


def _cell(value: Any) -> str:
    """A table cell: pipes escaped, newlines flattened."""
    return ("-" if value is None or value == "" else str(value)).replace("|", "\\|").replace("\n", " ")


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    align = ["---:" if i in numeric else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _verdict(e: EstimateSummary | None, lang: str) -> str:
    if e is None:
        return "-"
    v = e.verdict
    return verdict_label(v, lang) if v == "oom" else f"{verdict_label(v, lang)}, {estimate_speed(e, lang)}"


def _measured(s: ReportScenario, lang: str) -> str:
    m = s.measurement
    if s.skipped:
        return t("status.skipped", lang)
    if m is None:
        return "-"
    if not m.completed:
        return status_label(m.status, lang)
    w = s.measured_view
    text = f"{status_label('ok', lang)}, {measured_speed_text(m, w, lang)}"
    return t("cell.tiny", lang, text=text) if w.tiny else text


def render_markdown(model: ReportModel | Mapping[str, Any]) -> str:
    """The report as Markdown text."""
    model = ReportModel.from_dict(model)
    lang = model.lang
    out = [
        f"# {t('report.title', lang)}",
        "",
        t("report.subtitle", lang),
        "",
        t("report.generated", lang, time=model.generated_at or "", version=model.fitbench_version),
        "",
    ]
    if model.scenarios:
        out += _summary(model, lang)
    for s in model.scenarios:
        out += _scenario_section(s, lang)
    out += _comparison_section(model, lang)
    out += _history_section(model, lang)
    out += _guide_section(model, lang)
    out += [
        f"## {t('report.environment', lang)}",
        "",
        _table(
            [t("col.item", lang), t("col.value", lang)],
            [[k, v] for k, v in environment_items(model.environment)],
        ),
        "",
    ]
    return "\n".join(out)


def _summary(model: ReportModel, lang: str) -> list[str]:
    """One row per scenario: its verdict on each card (and what was measured)."""
    scenarios = model.scenarios
    cards = report_cards(scenarios)
    measured = any(s.measurement is not None or s.skipped for s in scenarios)
    headers = [t("report.scenario", lang)] + ([t("report.measured", lang)] if measured else [])
    headers += [short_gpu(name) for _, name in cards]
    rows = []
    for s in scenarios:
        by_gpu = {e.gpu: e for e in s.estimates}
        rows.append(
            [
                s.title,
                *([_measured(s, lang)] if measured else []),
                *(_verdict(by_gpu.get(g), lang) for g, _ in cards),
            ]
        )
    out = [f"## {t('report.summary', lang)}", ""]
    if model.advice:
        out += [model.advice[0], ""]
    out += [_table(headers, rows), "", t("check.legend", lang), ""]
    return out


def _scenario_section(s: ReportScenario, lang: str) -> list[str]:
    """A scenario's estimates on every card, its memory at the peak and its advice."""
    out = [f"## {s.title}", ""]
    meta = []
    if s.params:
        meta.append(f"{t('col.params', lang)}: {format_params(s.params, lang)}")
    if s.description:
        meta.append(preset_description(str(s.description), lang))
    if meta:
        out += [" · ".join(meta), ""]
    if s.estimated_now:
        out += [t("report.estimated_now", lang), ""]
    if s.estimates:
        out += [_estimate_table(s.estimates, lang), ""]
        out += _memory_table(s.estimates[0], lang)
    if s.advice:
        out += [f"### {t('report.advice', lang)}", ""]
        for entry in s.advice:
            if isinstance(entry, AdviceEntry):
                out.append(f"- {entry.text}")
                out.extend(f"  - {item}" for item in entry.items)
            else:
                out.append(f"- {entry}")
        out.append("")
    return out


def _estimate_table(estimates: Sequence[EstimateSummary], lang: str) -> str:
    columns = estimate_columns(estimates)
    with_mfu = columns is ESTIMATE_COLUMNS_MFU
    return _table(
        columns.headers(lang),
        [
            [
                short_gpu(e.gpu_name),
                verdict_label(e.verdict, lang),
                format_bytes(e.peak_memory_bytes),
                format_bytes(e.usable_memory_bytes),
                e.max_batch_size,
                estimate_speed(e, lang),
                *([estimate_mfu(e)] if with_mfu else []),
                bottleneck_label(e.bottleneck, lang),
            ]
            for e in estimates
        ],
        numeric=columns.numeric,
    )


def _memory_table(e: EstimateSummary, lang: str) -> list[str]:
    """The first card's memory at the peak, part by part."""
    parts = [(p, v) for p, v in e.breakdown.items() if v]
    if not parts:
        return []
    return [
        f"### {t('report.memory', lang)}",
        "",
        _table(
            [t("col.item", lang), t("col.value", lang)],
            [[f"{part_label(p, lang)} (`{p}`)", format_bytes(v)] for p, v in parts],
            numeric=(1,),
        ),
        "",
    ]


def _comparison_section(model: ReportModel, lang: str) -> list[str]:
    """Estimate against measurement, one row per compared number."""
    out = [f"## {t('report.est_vs_meas', lang)}", "", t("report.est_vs_meas_desc", lang), ""]
    if not model.comparisons:
        return [*out, t("report.no_comparison", lang), ""]
    rows = [
        [
            r.run_id,
            r.workload,
            r.precision,
            short_gpu(r.device_name or r.gpu),
            t("metric." + r.metric, lang),
            estimated_cell(r, lang),
            measured_cell(r, lang),
            _error_cell(r.error, r.not_comparable, lang),
        ]
        for r in model.comparisons
    ]
    return [*out, _table(COMPARISON_COLUMNS.headers(lang), rows, numeric=COMPARISON_COLUMNS.numeric), ""]


def _error_cell(error: float | None, reasons: Sequence[str], lang: str) -> str:
    """The error, or "not comparable" and why (the same words as `fitbench run`)."""
    if error is not None:
        return f"{error * 100:+.1f}%"
    why = t("run.reason.sep", lang).join(t(f"run.max_batch_reason.{k}", lang) for k in reasons)
    return t("report.not_comparable", lang, reasons=why)


def _history_section(model: ReportModel, lang: str) -> list[str]:
    """The runs of the history."""
    out = [f"## {t('report.history', lang)}", ""]
    if not model.runs:
        return [*out, t("report.no_history", lang), ""]
    rows = [
        [
            r.run_id,
            (r.created_at or "")[:19].replace("T", " "),
            r.command,
            t("cell.tiny_name", lang, name=r.workload) if r.tiny else str(r.workload),
            r.precision,
            r.device,
            status_label(r.status, lang),
            format_bytes(r.peak_memory_bytes),
            run_speed(r),
        ]
        for r in model.runs
    ]
    return [*out, _table(RUN_COLUMNS.headers(lang), rows, numeric=RUN_COLUMNS.numeric), ""]


def _guide_section(model: ReportModel, lang: str) -> list[str]:
    """The size guide, when the model has one."""
    if not model.guide:
        return []
    head, *lines = model.guide
    out = [f"## {head.rstrip(':：')}", "", *(f"- {line.strip()}" for line in lines), ""]
    rows = [_guide_row(r, lang) for r in model.guide_rows]
    if rows:
        out += [_table(GUIDE_COLUMNS.headers(lang), rows, numeric=GUIDE_COLUMNS.numeric), ""]
    return out


def _guide_row(r: GuideLine, lang: str) -> list[Any]:
    band, regime = f"band.{r.band}", f"guide.regime.{r.regime}"
    return [
        t(band, lang) if has(band) else r.band,
        t(regime, lang).rstrip(":：") if has(regime) else r.regime,
        r.model,
        format_params(r.params, lang),
        format_bytes(r.peak_memory_bytes),
        t("unit.gb_class", lang, gb=r.fits_class_gb) if r.fits_class_gb else t("guide.no_card", lang),
        r.card_name or r.card,
    ]
