"""`fitbench report`: one HTML (or Markdown) file from the runs in the history.

This module gathers what a report shows into one plain dict, the *report model*: the scenarios
with their estimates for catalog cards, the estimate-vs-measurement comparisons, the history
points and the environment. `fitbench check` builds the same model from its own results. The
reporters (fitbench.results.report_html / report_markdown) only lay the model out.

Report model (every value JSON-ready):
    lang, generated_at, fitbench_version
    machine        what `fitbench check` found (None for `fitbench report`)
    scenarios      [{key, workload, title, precision, params, description, estimates: [estimate
                   dict per card], estimated_now, measurement | None, measured_workload | None,
                   advice: [sentence]}]
    comparisons    [{run_id, created_at, workload, precision, gpu, device_name, metric, unit,
                   estimated, measured, error, not_comparable}]: metric peak_memory, step_seconds,
                   tokens_per_second, mfu (a GPU training run: the estimate's and the
                   diagnosis's, unit ratio), prefill_seconds or max_batch; error null and not_comparable the
                   reasons where the figure cannot be held against the estimate (a largest batch
                   found on the CPU); not_comparable empty otherwise; a speed row whose
                   estimate is for the run's own host adds host_speed_ratio and
                   estimated_reference_host
    history        [{run_id, created_at, workload, precision, device, tiny, status, peak_memory_bytes,
                   step_seconds, tokens_per_second, samples_per_second, series}]
    runs           [{run_id, created_at, command, workload, precision, device, status, ...}]
    environment    {name: value}
    guide          [sentence] (the size guide, when the caller computed it)
    guide_rows     [GuideRow.to_dict()] (the models behind it)
    advice         [sentence] shown at the top (what the advice is about)
    Scenario advice entries are sentences or {text, items: [sentence]} (a header and its options).
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fitbench import __version__
from fitbench.advise.i18n import t
from fitbench.cli.common import add_command, add_db_arg, add_lang_arg, positive_int
from fitbench.core.names import FRAMEWORKS
from fitbench.errors import FitbenchError
from fitbench.records.measurement import Measurement
from fitbench.records.run import RunRecord, WorkloadView
from fitbench.results.agreement import max_batch_not_comparable, measured_speed, relative_error

DEFAULT_HTML = "fitbench-report.html"
DEFAULT_LAST = 10


def default_report_path(history_path: str | Path | None = None) -> Path:
    """The report beside the history it is made from (the user's fitbench data folder unless
    --db says otherwise), not in whatever folder the command happened to run in."""
    if history_path is None:
        from fitbench.results.history import default_db_path

        history_path = default_db_path()
    return Path(history_path).expanduser().resolve().parent / DEFAULT_HTML


EPILOG = """examples:
  fitbench report                               the 10 newest runs -> the data folder's fitbench-report.html
  fitbench report --out ./runs.html             choose where it goes (.md writes Markdown)
  fitbench report --last 30 --html runs.html
  fitbench report 3fa2c1d0 9b1e --markdown runs.md   chosen runs (any unique id prefix)
  fitbench report --lang zh                     in Simplified Chinese

The HTML file is self-contained (inline CSS and SVG charts): it opens offline and can be mailed.
"""


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text, EPILOG)
    parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="runs to report (default: the newest)")
    parser.add_argument(
        "--last", type=positive_int, metavar="N", help=f"the N newest runs (default {DEFAULT_LAST})"
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help=f"write the HTML report here (default: {DEFAULT_HTML} in the history's folder)",
    )
    parser.add_argument(
        "--out", metavar="FILE", help="where the report goes: FILE.md writes Markdown, any other name HTML"
    )
    parser.add_argument("--markdown", metavar="FILE", help="write a Markdown report (tables, no charts)")
    add_db_arg(parser)
    add_lang_arg(parser)
    parser.set_defaults(func=report_command)


# ----------------------------------------------------------------------------- the model


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _typed(record: RunRecord | Mapping[str, Any]) -> RunRecord:
    """A stored run as a RunRecord, whichever version wrote it."""
    return RunRecord.from_dict(record)


def scenario_key(workload: WorkloadView | Mapping[str, Any]) -> str:
    """'bert-base-imdb · amp-fp16': a workload at one precision is one scenario of a report."""
    w = WorkloadView.from_mapping(workload)
    return f"{w.name} · {w.precision}"


def _estimates_for(
    record: RunRecord, cards: Sequence[str]
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], bool]:
    """(the workload the estimates describe, estimate dicts per card, computed now?)."""
    catalog = record.catalog_estimates
    if isinstance(catalog, Mapping) and isinstance(catalog.get("estimates"), Mapping):
        return dict(catalog.get("workload") or {}), list(catalog["estimates"].values()), False
    workload, view = dict(record.workload), record.workload_view
    if not view.arch:
        return None, [], False
    from fitbench.catalog import resolve_gpus
    from fitbench.estimate.api import estimate
    from fitbench.workloads.presets import get_workload
    from fitbench.workloads.workload import Workload

    try:
        # A tiny run stands for its preset: estimate the real job at the brief's settings, at the
        # precision the run chose when it was not the tiny variant's own (`run --tiny --precision`).
        if view.tiny:
            name, precision = str(view.name), view.precision
            chosen = precision if precision != get_workload(name, tiny=True).precision else None
            w = get_workload(name, precision=chosen)
        else:
            w = Workload.from_dict(workload)
        m = record.measurement
        fw = (m.backend if m is not None else None) or "torch"
        exec_mode = str((m.exec_mode if m is not None else None) or "default")
        ests = [
            estimate(w, g, framework=fw if fw in FRAMEWORKS else "torch", exec_mode=exec_mode).to_dict()
            for g in resolve_gpus(cards)
        ]
    except (FitbenchError, TypeError, ValueError, KeyError):
        return None, [], False
    return w.to_dict(), ests, True


# The comparison rows whose estimate follows the host's speed (the rest are memory and counts).
HOST_SCALED = ("step_seconds", "tokens_per_second", "mfu")


def _reference_mfu(mfu: float | None, step: float | None, reference_step: float | None) -> float | None:
    """The estimated MFU at the reference host: the same model FLOPs and peak over its step."""
    if mfu is None or not step or not reference_step:
        return None
    return mfu * step / reference_step


# The compared metrics that carry a timed figure's spread: the speed ones take the spread of the
# figure the measured speed comes from (fitbench.advise.text.speed_figure), prefill its own.
SPREAD_METRICS = ("step_seconds", "tokens_per_second", "prefill_seconds")
SPREAD_OF_METRIC = {"prefill_seconds": "prefill_seconds"}


def _metric_spread(m: Measurement, w: WorkloadView, metric: str) -> dict[str, Any]:
    """A compared metric's spread over the run's timed windows ({spread, spread_stable}), {} where
    the metric is not a timed figure or the run took no spread."""
    from fitbench.advise.text import speed_figure

    if metric not in SPREAD_METRICS:
        return {}
    entry = m.spread_of(SPREAD_OF_METRIC.get(metric) or speed_figure(m, w))
    if entry is None or entry.get("spread") is None:
        return {}
    return {"spread": entry["spread"], "spread_stable": bool(entry.get("stable"))}


def measured_mfu(record: RunRecord) -> float | None:
    """The run's model FLOPs utilization: its diagnosis's `mfu` (the estimate's model FLOPs over
    the measured step and the card's dense peak), which only a GPU training run has."""
    d = record.diagnosis
    return d.mfu if d is not None and d.available else None


def comparison_rows(record: RunRecord | Mapping[str, Any]) -> list[dict[str, Any]]:
    """Estimate beside measurement for each metric whose error the run recorded, and the model
    FLOPs utilization after the speeds where the run measured one and the estimate has one."""
    r = _typed(record)
    est, m = r.estimate, r.measurement
    if est is None or m is None:
        return []
    w = r.workload_view
    search = m.max_batch_search
    measured_step, measured_tokens = measured_speed(m, w)
    mfu = measured_mfu(r)
    measured = {
        "peak_memory": (est.peak_memory_bytes, m.peak_memory_bytes, "bytes"),
        "step_seconds": (est.step_seconds, measured_step, "seconds"),
        "tokens_per_second": (est.tokens_per_second, measured_tokens, "tok/s"),
        "mfu": (est.mfu, mfu, "ratio"),
        "prefill_seconds": (est.prefill_seconds, m.prefill_seconds, "seconds"),
        "max_batch": (est.max_batch_size, search.max_batch if search is not None else None, "count"),
    }
    errors = dict(r.error_vs_estimate)
    if mfu is not None and est.mfu is not None:
        errors["mfu"] = relative_error(est.mfu, mfu)
    # Decided from the measurement, not the stored error: older records kept a number for a
    # largest batch found on the CPU.
    max_batch_reasons = max_batch_not_comparable(m)
    if max_batch_reasons:
        errors["max_batch"] = None
    rows = []
    for metric in (k for k in measured if k in errors):  # memory, the speeds and MFU, prefill, batch
        error = errors[metric]
        reasons = max_batch_reasons if metric == "max_batch" else []
        if error is None and not reasons:
            continue
        estimated, value, unit = measured[metric]
        # A speed estimated for the run's own host: the ratio and the reference host's figure.
        host = {}
        if metric in HOST_SCALED and r.host_speed_ratio is not None and r.estimate_reference_host:
            reference = r.estimate_reference_host
            host = {
                "host_speed_ratio": r.host_speed_ratio,
                "estimated_reference_host": (
                    _reference_mfu(est.mfu, est.step_seconds, reference.get("step_seconds"))
                    if metric == "mfu"
                    else reference.get(metric)
                ),
            }
        spread = _metric_spread(m, w, metric)
        rows.append(
            {
                "run_id": r.run_id,
                "created_at": r.created_at,
                "workload": w.name,
                "precision": w.precision,
                "gpu": est.gpu_name or est.gpu,
                "device_name": m.device_name,
                "metric": metric,
                "unit": unit,
                "estimated": estimated,
                "measured": value,
                "error": error,
                "not_comparable": reasons,
                **host,
                **spread,
            }
        )
    return rows


def _precision_ran(w: WorkloadView, m: Measurement | None, lang: str = "en") -> str | None:
    """What a stored run really ran (the CPU's amp-bf16 for amp-fp16, Paddle CPU's fp32), the
    request beside it where they differ."""
    from fitbench.advise.text import precision_shown

    ran = m.precision_in_effect if m is not None else None
    return precision_shown(w.precision, ran, lang) if (ran or w.precision) else None


def history_point(record: RunRecord | Mapping[str, Any], lang: str = "en") -> dict[str, Any] | None:
    """One run as a point of the history chart (None for a run without a measurement)."""
    r = _typed(record)
    m, w = r.measurement, r.workload_view
    if m is None:
        return None
    device = m.device_name or m.device or "?"
    precision = _precision_ran(w, m, lang)
    tiny = f" · {t('cell.tiny_word', lang)}" if r.tiny else ""
    series = f"{w.name} · {precision} · {device}{tiny}"
    return {
        "run_id": r.run_id,
        "created_at": r.created_at,
        "workload": w.name,
        "precision": precision,
        "precision_requested": w.precision,
        "device": device,
        "tiny": r.tiny,
        "status": m.status,
        "generation": r.is_generation,
        "peak_memory_bytes": m.peak_memory_bytes,
        "step_seconds": m.step_seconds,
        "tokens_per_second": m.decode_tokens_per_second or m.tokens_per_second,
        "samples_per_second": m.samples_per_second,
        "series": series,
    }


def run_row(record: RunRecord | Mapping[str, Any], lang: str = "en") -> dict[str, Any]:
    """The runs table of the report: one line per stored run."""
    r = _typed(record)
    m, w, est = r.measurement, r.workload_view, r.estimate
    generation = r.is_generation
    return {
        "run_id": r.run_id,
        "created_at": r.created_at,
        "command": r.command,
        "workload": r.workload_name,
        "precision": _precision_ran(w, m, lang),
        "precision_requested": w.precision,
        "batch_size": w.batch_size,
        "tiny": r.tiny,
        "generation": generation,
        "backend": m.backend if m else None,
        "framework_version": m.framework_version if m else None,
        "device": (m.device_name or m.device) if m else None,
        "status": (m.status if m else None) or r.extra.get("status"),
        "peak_memory_bytes": m.peak_memory_bytes if m else None,
        "step_seconds": m.step_seconds if m else None,
        "tokens_per_second": (m.decode_tokens_per_second or m.tokens_per_second) if m else None,
        "decode_tokens_per_second": m.decode_tokens_per_second if m else None,
        "end_to_end_tokens_per_second": m.tokens_per_second if m and generation else None,
        "samples_per_second": m.samples_per_second if m else None,
        "estimate_gpu": est.gpu_name if est else None,
        "estimate_verdict": est.verdict if est else None,
    }


def base_environment() -> dict[str, Any]:
    """What the reporting process itself can tell: fitbench, Python, platform."""
    return {
        "fitbench_version": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def environment_of(records: Iterable[RunRecord | Mapping[str, Any]]) -> dict[str, Any]:
    """The newest measured run's environment over the reporting process's own."""
    env = base_environment()
    for record in records:
        r = _typed(record)
        m = r.measurement
        found = (m.environment if m is not None else None) or r.environment
        if found:
            env.update({k: v for k, v in found.items() if v not in (None, "", [], {})})
            if m is not None:
                for key in ("device", "device_name", "backend", "framework_version"):
                    if getattr(m, key):
                        env.setdefault(key, getattr(m, key))
            break
    return env


def scenarios_from_records(
    records: Sequence[RunRecord | Mapping[str, Any]], cards: Sequence[str], lang: str = "en"
) -> list[dict[str, Any]]:
    """One scenario per workload and precision, from its newest run (records are newest first),
    listed in the order the scenarios were first run."""
    seen: dict[str, dict[str, Any]] = {}
    for record in records:
        r = _typed(record)
        view = r.workload_view
        if not view.name:
            continue
        key = str(r.scenario or scenario_key(view))
        if key in seen:
            continue
        est_workload, ests, now = _estimates_for(r, cards)
        m = r.measurement
        # The scenario is shown as the workload its estimates describe, the run's own where none do.
        shown = WorkloadView.from_mapping(est_workload) if est_workload else view
        seen[key] = {
            "key": key,
            "workload": shown.name,
            "title": scenario_key(shown),
            "precision": shown.precision,
            "params": shown.params,
            "description": shown.description,
            "estimates": ests,
            "estimated_now": now,
            "measurement": m.to_dict() if m is not None else None,
            "measured_workload": dict(r.workload) if m is not None else None,
            "advice": advice_entries(r.advice or [], lang),
        }
    return list(reversed(seen.values()))


def advice_entries(items: Iterable[Any], lang: str = "en") -> list[Any]:
    """Advice for a report: a sentence, or {"text": header, "items": [sentence]} for a list of options.

    Accepts the advice items `fitbench check` stores ({"kind", "text", "texts": {lang: text}, "data"};
    a multi-line text is a header followed by its options) and plain sentences.
    """
    out: list[Any] = []
    for item in items:
        if isinstance(item, Mapping):
            texts = item.get("texts") if isinstance(item.get("texts"), Mapping) else {}
            text = texts.get(lang) or item.get("text")
        else:
            text = item
        if not isinstance(text, str) or not text.strip():
            continue
        head, *rest = [line.strip() for line in text.splitlines() if line.strip()]
        out.append({"text": head, "items": rest} if rest else head)
    return out


def build_model(
    *,
    lang: str,
    scenarios: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    machine: Mapping[str, Any] | None = None,
    environment: Mapping[str, Any] | None = None,
    guide: Sequence[str] = (),
    guide_rows: Sequence[Mapping[str, Any]] = (),
    advice: Sequence[str] = (),
) -> dict[str, Any]:
    """The report model (see the module docstring) from scenarios and stored run records."""
    comparisons = [row for r in records for row in comparison_rows(r)]
    points = [p for p in (history_point(r, lang) for r in records) if p is not None]
    return {
        "lang": lang,
        "generated_at": _now(),
        "fitbench_version": __version__,
        "machine": dict(machine) if machine else None,
        "scenarios": [dict(s) for s in scenarios],
        "comparisons": comparisons,
        "history": sorted(points, key=lambda p: str(p.get("created_at") or "")),
        "runs": [run_row(r, lang) for r in records],
        "environment": dict(environment) if environment else environment_of(records),
        "guide": list(guide),
        "guide_rows": [dict(r) for r in guide_rows],
        "advice": list(advice),
    }


def write_reports(
    model: Mapping[str, Any], *, html: str | Path | None, markdown: str | Path | None
) -> list[Path]:
    """Write the requested files; returns their paths. A path that cannot be written is a FitbenchError."""
    written = []
    if html is not None:
        from fitbench.results.report_html import render_html

        written.append(_write(Path(html), render_html(model)))
    if markdown is not None:
        from fitbench.results.report_markdown import render_markdown

        written.append(_write(Path(markdown), render_markdown(model)))
    return written


def _write(path: Path, text: str) -> Path:
    path = path.expanduser()
    try:
        if path.parent and not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise FitbenchError(
            f"cannot write the report {path}: {exc.strerror or exc}",
            "pass another path, or check the folder's permissions",
            message_zh=f"无法写入报告 {path}:{exc.strerror or exc}",
            hint_zh="请换一个路径,或检查该文件夹的权限",
        ) from None
    return path.resolve()


# ----------------------------------------------------------------------------- the command


def report_command(args: argparse.Namespace) -> int:
    from fitbench.advise.guide import size_guide
    from fitbench.advise.i18n import resolve_lang, t
    from fitbench.advise.text import guide_lines
    from fitbench.cli.estimate import DEFAULT_GPUS
    from fitbench.cli.history import open_history

    lang = resolve_lang(args.lang)
    if args.run_ids and args.last:
        raise FitbenchError(
            "give either RUN_IDs or --last, not both", message_zh="RUN_ID 与 --last 只能给一个"
        )
    with open_history(args.db) as history:
        if args.run_ids:
            records = [history.get_run(r) for r in args.run_ids]
        else:
            records = history.last_runs(args.last or DEFAULT_LAST)
        path = history.path
    if not records:
        raise FitbenchError(
            f"no runs in history file {path}",
            "`fitbench check` or `fitbench run WORKLOAD` records some first",
            message_zh=f"历史记录文件 {path} 中没有运行记录",
            hint_zh="请先用 `fitbench check` 或 `fitbench run WORKLOAD` 记录一些",
        )
    rows = size_guide()
    model = build_model(
        lang=lang,
        scenarios=scenarios_from_records(records, DEFAULT_GPUS, lang),
        records=records,
        guide=guide_lines(rows, lang),
        guide_rows=[r.to_dict() for r in rows],
    )
    # Without --markdown the HTML report is written to its default name.
    html, markdown = args.html, args.markdown
    if args.out:
        if str(args.out).lower().endswith((".md", ".markdown")):
            markdown = markdown or args.out
        else:
            html = html or args.out
    if html is None and markdown is None:
        html = default_report_path(path)
    written = write_reports(model, html=html, markdown=markdown)
    for p in written:
        print(t("check.report", lang, path=p))
    return 0
