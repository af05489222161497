"""The Markdown report: the HTML report's tables, without charts, for READMEs, issues and chat.

Reads the same report model as report_html (see fitbench.cli.report) and computes nothing.
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
from fitbench.results.cells import (
    COMPARISON_COLUMNS,
    ESTIMATE_COLUMNS,
    GUIDE_COLUMNS,
    RUN_COLUMNS,
    environment_items,
    estimate_speed,
    format_metric,
    report_cards,
    run_speed,
    short_gpu,
)

__all__ = ["render_markdown"]


def _cell(value: Any) -> str:
    """A table cell: pipes escaped, newlines flattened."""
    return ("-" if value is None or value == "" else str(value)).replace("|", "\\|").replace("\n", " ")


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    align = ["---:" if i in numeric else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _verdict(e: Mapping[str, Any] | None, lang: str) -> str:
    if not e:
        return "-"
    v = e.get("verdict")
    return verdict_label(v, lang) if v == "oom" else f"{verdict_label(v, lang)}, {estimate_speed(e, lang)}"


def _measured(s: Mapping[str, Any], lang: str) -> str:
    m = s.get("measurement")
    if s.get("skipped"):
        return t("status.skipped", lang)
    if not m:
        return "-"
    if m.get("status") != "ok":
        return status_label(m.get("status"), lang)
    w = s.get("measured_workload") or {}
    text = f"{status_label('ok', lang)}, {measured_speed_text(m, w, lang)}"
    return t("cell.tiny", lang, text=text) if w.get("tiny") else text


def render_markdown(model: Mapping[str, Any]) -> str:
    """The report as Markdown text."""
    lang = str(model.get("lang") or "en")
    out = [
        f"# {t('report.title', lang)}",
        "",
        t("report.subtitle", lang),
        "",
        t(
            "report.generated",
            lang,
            time=model.get("generated_at") or "",
            version=model.get("fitbench_version"),
        ),
        "",
    ]
    scenarios = model.get("scenarios") or []
    if scenarios:
        out += _summary(model, scenarios, lang)
    for s in scenarios:
        out += _scenario_section(s, lang)
    out += _comparison_section(model, lang)
    out += _history_section(model, lang)
    out += _guide_section(model, lang)
    env = model.get("environment") or {}
    out += [
        f"## {t('report.environment', lang)}",
        "",
        _table(
            [t("col.item", lang), t("col.value", lang)],
            [[k, v] for k, v in environment_items(env)],
        ),
        "",
    ]
    return "\n".join(out)


def _summary(model: Mapping[str, Any], scenarios: list[Any], lang: str) -> list[str]:
    """One row per scenario: its verdict on each card (and what was measured)."""
    out: list[str] = []
    cards = report_cards(scenarios)
    measured = any(s.get("measurement") or s.get("skipped") for s in scenarios)
    headers = [t("report.scenario", lang)] + ([t("report.measured", lang)] if measured else [])
    headers += [short_gpu(name) for _, name in cards]
    rows = []
    for s in scenarios:
        by_gpu = {e.get("gpu"): e for e in s.get("estimates") or []}
        rows.append(
            [
                s.get("title"),
                *([_measured(s, lang)] if measured else []),
                *(_verdict(by_gpu.get(g), lang) for g, _ in cards),
            ]
        )
    out += [f"## {t('report.summary', lang)}", ""]
    if model.get("advice"):
        out += [str(model["advice"][0]), ""]
    out += [_table(headers, rows), "", t("check.legend", lang), ""]
    return out


def _scenario_section(s: Mapping[str, Any], lang: str) -> list[str]:
    """A scenario's estimates on every card, its memory at the peak and its advice."""
    out: list[str] = []
    out += [f"## {s.get('title')}", ""]
    meta = []
    if s.get("params"):
        meta.append(f"{t('col.params', lang)}: {format_params(s['params'], lang)}")
    if s.get("description"):
        meta.append(preset_description(str(s["description"]), lang))
    if meta:
        out += [" · ".join(meta), ""]
    if s.get("estimated_now"):
        out += [t("report.estimated_now", lang), ""]
    ests = s.get("estimates") or []
    if ests:
        out += [
            _table(
                ESTIMATE_COLUMNS.headers(lang),
                [
                    [
                        short_gpu(e.get("gpu_name")),
                        verdict_label(e.get("verdict"), lang),
                        format_bytes(e.get("peak_memory_bytes")),
                        format_bytes(e.get("usable_memory_bytes")),
                        e.get("max_batch_size"),
                        estimate_speed(e, lang),
                        bottleneck_label(e.get("bottleneck"), lang),
                    ]
                    for e in ests
                ],
                numeric=ESTIMATE_COLUMNS.numeric,
            ),
            "",
        ]
        first = ests[0].get("breakdown") or {}
        parts = [(p, v) for p, v in first.items() if v]
        if parts:
            out += [
                f"### {t('report.memory', lang)}",
                "",
                _table(
                    [t("col.item", lang), t("col.value", lang)],
                    [[f"{part_label(p, lang)} (`{p}`)", format_bytes(v)] for p, v in parts],
                    numeric=(1,),
                ),
                "",
            ]
    if s.get("advice"):
        out += [f"### {t('report.advice', lang)}", ""]
        for entry in s["advice"]:
            if isinstance(entry, Mapping):
                out.append(f"- {entry.get('text')}")
                out.extend(f"  - {item}" for item in entry.get("items") or [])
            else:
                out.append(f"- {entry}")
        out.append("")
    return out


def _comparison_section(model: Mapping[str, Any], lang: str) -> list[str]:
    """Estimate against measurement, one row per compared number."""
    out: list[str] = []
    comparisons = model.get("comparisons") or []
    out += [f"## {t('report.est_vs_meas', lang)}", "", t("report.est_vs_meas_desc", lang), ""]
    if comparisons:
        out += [
            _table(
                COMPARISON_COLUMNS.headers(lang),
                [
                    [
                        r.get("run_id"),
                        r.get("workload"),
                        r.get("precision"),
                        short_gpu(r.get("device_name") or r.get("gpu")),
                        t("metric." + str(r["metric"]), lang),
                        format_metric(r["unit"], r.get("estimated")),
                        format_metric(r["unit"], r.get("measured")),
                        f"{r['error'] * 100:+.1f}%",
                    ]
                    for r in comparisons
                ],
                numeric=COMPARISON_COLUMNS.numeric,
            ),
            "",
        ]
    else:
        out += [t("report.no_comparison", lang), ""]
    return out


def _history_section(model: Mapping[str, Any], lang: str) -> list[str]:
    """The runs of the history."""
    out: list[str] = []
    runs = model.get("runs") or []
    out += [f"## {t('report.history', lang)}", ""]
    if runs:
        out += [
            _table(
                RUN_COLUMNS.headers(lang),
                [
                    [
                        r.get("run_id"),
                        (r.get("created_at") or "")[:19].replace("T", " "),
                        r.get("command"),
                        t("cell.tiny_name", lang, name=r.get("workload")) if r.get("tiny")
                        else str(r.get("workload")),
                        r.get("precision"),
                        r.get("device"),
                        status_label(r.get("status"), lang),
                        format_bytes(r.get("peak_memory_bytes")),
                        run_speed(r),
                    ]
                    for r in runs
                ],
                numeric=RUN_COLUMNS.numeric,
            ),
            "",
        ]
    else:
        out += [t("report.no_history", lang), ""]
    return out


def _guide_section(model: Mapping[str, Any], lang: str) -> list[str]:
    """The size guide, when the model has one."""
    out: list[str] = []
    guide = model.get("guide") or []
    if guide:
        head, *lines = guide
        out += [f"## {head.rstrip(':：')}", "", *(f"- {line.strip()}" for line in lines), ""]
        rows = [
            [
                t(f"band.{r.get('band')}", lang) if has(f"band.{r.get('band')}") else r.get("band"),
                t(f"guide.regime.{r.get('regime')}", lang).rstrip(":：")
                if has(f"guide.regime.{r.get('regime')}")
                else r.get("regime"),
                r.get("model"),
                format_params(r.get("params"), lang),
                format_bytes(r.get("peak_memory_bytes")),
                t("unit.gb_class", lang, gb=r["fits_class_gb"])
                if r.get("fits_class_gb")
                else t("guide.no_card", lang),
                r.get("card_name") or r.get("card"),
            ]
            for r in model.get("guide_rows") or []
        ]
        if rows:
            out += [_table(GUIDE_COLUMNS.headers(lang), rows, numeric=GUIDE_COLUMNS.numeric), ""]
    return out
