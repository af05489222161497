"""`fitbench check` (and plain `fitbench`): is this machine enough for the brief's three scenarios?

What it does, in order:
  1. finds the local GPUs through NVML (no framework import); without one it says so and uses the CPU;
  2. estimates each scenario at the brief's settings (ResNet-50/CIFAR-10 FP32, BERT-base/IMDb FP32
     and with AMP, a 6.7B decoder generating in FP16) for this machine's card, the brief's three
     cards and an H100;
  3. measures each scenario through the first installed framework in a fresh child process,
     briefly (a few seconds of timed steps) — on a GPU at the brief's settings unless the estimate
     says it cannot fit, on the CPU as the tiny variants; `--estimate-only` skips this;
  4. stores each measurement in the history, prints one verdict table and a few lines of advice,
     and writes a self-contained HTML report.

What to run and what it means is decided in fitbench.check (the plan, each scenario's estimates and
advice); this module parses the options, calls it, runs the measurements and formats.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from fitbench.advise.i18n import resolve_lang, status_label, t
from fitbench.check.advice import no_gpu_advice
from fitbench.check.machine import Machine, find_machine
from fitbench.check.plan import DEFAULT_TIMEOUT_S, GPU_MIN_SECONDS, CheckPlan, plan_check, run_scenario
from fitbench.check.result import ScenarioResult
from fitbench.check.scenarios import scenario_workloads
from fitbench.cli.common import (
    HistoryStore,
    add_backend_arg,
    add_command,
    add_exec_arg,
    add_gpu_spec_arg,
    add_history_args,
    add_lang_arg,
    add_progress_arg,
    positive_seconds,
    print_json,
    seconds,
)
from fitbench.core.gpu import GpuSpec
from fitbench.core.names import ExecMode
from fitbench.core.units import format_bytes, format_seconds
from fitbench.records.measurement import Measurement

EPILOG = """examples:
  fitbench                                  the same as `fitbench check`
  fitbench check --estimate-only            no measurement: estimates and advice in a second
  fitbench check --exec tuned               what the card can do: CUDA graphs, compiled steps, bf16
  fitbench check --backend paddle --lang zh measure with PaddlePaddle, answer in Chinese
  fitbench check --json --no-report         one JSON object on stdout

JSON: {"machine": {...}, "scenarios": [{"key", "workload", "precision", "estimates": {gpu: estimate},
       "measurement": measurement | null, "skipped": reason | null, "run_id", "advice": [{kind, text,
       data}]}], "size_guide": [...], "report": path | null}
"""

HISTORY_IN_REPORT = 50


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text, EPILOG)
    add_backend_arg(parser)
    add_exec_arg(parser)
    parser.add_argument("--estimate-only", action="store_true", help="estimate only; measure nothing")
    parser.add_argument(
        "--tiny", action="store_true", help="measure the tiny variants even on a GPU (always on a CPU)"
    )
    parser.add_argument(
        "--gpu",
        action="append",
        metavar="ID",
        help="catalog cards to compare with (default: the three reference scenarios' cards and an H100)",
    )
    add_gpu_spec_arg(parser)
    parser.add_argument(
        "--min-seconds",
        type=seconds,
        metavar="S",
        help=f"timed seconds per scenario (default {GPU_MIN_SECONDS:g} on a GPU, 0.5 for tiny runs)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="S",
        help=f"stop one measurement after S seconds (default {DEFAULT_TIMEOUT_S:g})",
    )
    add_history_args(parser)
    parser.add_argument(
        "--html",
        "--out",
        dest="html",
        metavar="PATH",
        help="where to write the report (default: fitbench-report.html in the history's folder, "
        "the user's fitbench data folder)",
    )
    parser.add_argument("--no-report", action="store_true", help="write no HTML report")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    add_lang_arg(parser)
    add_progress_arg(parser)
    parser.set_defaults(func=check_command)


# ----------------------------------------------------------------------------- measuring


def _say(text: str) -> None:
    print(f"fitbench: {text}", file=sys.stderr, flush=True)


def _launch(result: ScenarioResult, plan: CheckPlan, args: argparse.Namespace, *, held: bool) -> Any:
    """Start the child that measures `result`'s workload (fitbench.measure.runner.Launch); `held`:
    it imports and then waits for its turn."""
    from fitbench.backends.base import RunOptions
    from fitbench.measure.runner import Launch

    w = result.measured_workload
    assert w is not None and plan.machine.backend is not None
    min_seconds = plan.min_seconds(args.min_seconds, w)
    return Launch(
        w,
        plan.machine.backend,
        RunOptions(device=plan.machine.device, exec_mode=plan.exec_mode),
        held=held,
        timeout_s=args.timeout or DEFAULT_TIMEOUT_S,
        min_seconds=min_seconds,
        spread_budget_s=plan.spread_budget(min_seconds, w),
    )


def _measure(
    result: ScenarioResult, plan: CheckPlan, args: argparse.Namespace, lang: str, launch: Any
) -> None:
    from fitbench.measure.progress import Progress, should_show

    machine = plan.machine
    w = result.measured_workload
    assert w is not None and machine.backend is not None
    variant = t("check.variant_tiny" if w.tiny else "check.variant_full", lang)
    _say(
        t(
            "check.measuring",
            lang,
            scenario=result.key,
            variant=variant,
            device=machine.device,
            backend=machine.backend,
        )
    )
    started = time.monotonic()
    with Progress(enabled=should_show(args.progress), label=result.key, lang=lang) as progress:
        m = launch.result(progress)
    result.measurement = Measurement.from_dict(m)
    _say(
        t(
            "check.measured",
            lang,
            scenario=result.key,
            status=status_label(result.measurement.status, lang),
            seconds=format_seconds(time.monotonic() - started),
        )
    )


def _record(result: ScenarioResult, machine: Machine, framework: str, exec_mode: str) -> dict[str, Any]:
    """The history record: the same shape as `fitbench run`'s, plus the catalog estimates of the
    scenario at the brief's settings (so that `fitbench report` can draw them later)."""
    from fitbench.results.agreement import estimate_for_host
    from fitbench.results.assemble import assemble_run_record

    w = result.measured_workload
    assert w is not None and result.measurement is not None
    local = result.estimates.get(machine.spec.id) if (machine.spec and not w.tiny) else None
    # Held against this machine's host where the run probed it (results.agreement).
    host = (
        estimate_for_host(
            result.workload,
            machine.spec,
            result.measurement,
            framework=framework,
            exec_mode=exec_mode,
            reference=local,
        )
        if local is not None and machine.spec is not None
        else None
    )
    catalog = {
        "workload": result.workload.to_dict(),
        "framework": framework,
        "exec_mode": exec_mode,
        "estimates": {gid: e.to_dict() for gid, e in result.estimates.items()},
    }
    record = assemble_run_record(
        command="check",
        workload=w,
        estimate=host.estimate if host is not None else None,
        measurement=result.measurement,
        gpu=machine.spec,
        with_diagnosis=False,
        reference_estimate=host.reference if host is not None else None,
        host_speed_ratio=host.host_speed_ratio if host is not None else None,
        scenario=result.key,
        catalog_estimates=catalog,
        advice=result.advice,
    )
    return record.to_dict(ids=False)


# ----------------------------------------------------------------------------- output


def _cell(est: Any, lang: str, colour: bool) -> str:
    from fitbench.advise.i18n import verdict_label
    from fitbench.advise.text import speed_text
    from fitbench.results.table import colour_verdict

    label = colour_verdict(est.verdict, enabled=colour, label=verdict_label(est.verdict, lang))
    if est.verdict == "oom":
        return label
    return f"{label} · {speed_text(est, lang)}"


def _machine_cell(result: ScenarioResult, machine: Machine, lang: str, colour: bool) -> str:
    from fitbench.advise.i18n import status_label, t
    from fitbench.advise.text import measured_speed_text

    local = result.estimates.get(machine.spec.id) if machine.spec else None
    record = result.record or {}
    if record.get("host_speed_ratio") is not None and record.get("estimate"):
        # The measured run's estimate is for this machine's host (cli/check.py _record).
        from fitbench.records.run import EstimateSummary

        local = EstimateSummary.from_dict(record["estimate"])
    est = _cell(local, lang, colour) if local is not None else "-"
    m = result.measurement
    if result.skipped:
        meas = t("status.skipped", lang)
    elif m is None:
        meas = "-"
    elif m.completed and result.measured_workload is not None:
        w = result.measured_workload
        meas = f"{status_label('ok', lang)} · {measured_speed_text(m, w, lang)}"
        ran = m.precision_in_effect
        if ran and ran != result.workload.precision:
            # The row is named after the scenario's precision; say what this machine really ran.
            meas += " · " + t("cell.ran", lang, precision=ran)
        if w.tiny:
            meas = t("cell.tiny", lang, text=meas)
    else:
        meas = status_label(m.status, lang)
    return f"{est} | {meas}"


def _spread_lines(results: list[ScenarioResult], lang: str) -> list[str]:
    """One line for each measured figure that did not settle within its time budget."""
    from fitbench.advise.text import spread_sentences

    lines = []
    for r in results:
        m, w = r.measurement, r.measured_workload
        if m is None or w is None or not m.completed:
            continue
        lines.extend(f"  {r.key}: {sentence}" for sentence in spread_sentences(m, w, lang))
    return lines


def format_check(
    results: list[ScenarioResult],
    machine: Machine,
    cards: list[GpuSpec],
    header: list[str],
    advice_head: str,
    guide: list[str],
    lang: str,
    no_gpu: list[str] | None = None,
) -> str:
    from fitbench.advise.i18n import t
    from fitbench.results.cells import short_gpu
    from fitbench.results.table import render_table, use_colour

    colour = use_colour()
    headers = [t("check.col_scenario", lang), t("check.col_machine", lang)]
    headers += [short_gpu(c.name) for c in cards]
    rows = []
    for r in results:
        rows.append(
            [
                r.key,
                _machine_cell(r, machine, lang, colour),
                *(_cell(r.estimates[c.id], lang, colour) for c in cards),
            ]
        )
    out = [
        t("check.title", lang),
        *header,
        "",
        render_table(headers, rows, align="l" * len(headers)),
        "",
        t("check.legend", lang),
        "",
        t("advice.header", lang) + " — " + advice_head,
    ]
    for r in results:
        out.extend("  " + line for line in r.lines)
    out.extend(_spread_lines(results, lang))
    if no_gpu:
        out += ["", *no_gpu]
    out.append("")
    out.extend(guide)
    return "\n".join(out)


# ----------------------------------------------------------------------------- the command


def check_command(args: argparse.Namespace) -> int:
    from fitbench.advise.guide import size_guide
    from fitbench.advise.text import guide_lines
    from fitbench.catalog import resolve_gpus
    from fitbench.cli.estimate import DEFAULT_GPUS

    lang = resolve_lang(args.lang)
    machine = find_machine(args.backend)
    cards = resolve_gpus(args.gpu or ([] if args.gpu_spec else list(DEFAULT_GPUS)), args.gpu_spec or ())
    plan = plan_check(
        machine, cards, exec_mode=args.exec_mode, estimate_only=args.estimate_only, tiny=args.tiny
    )
    advice_head = t(f"advice.target_{plan.target_kind}", lang, gpu=plan.target.name)
    guide_rows: Future[Any] | None = None
    if plan.start_ahead:
        # The size guide is seconds of estimates that need no measurement: computed while the
        # scenarios measure on the GPU (on a CPU it would compete with the measurement).
        guide_rows = ThreadPoolExecutor(max_workers=1).submit(size_guide, plan.framework)
    results, history_records, history_path = _run_scenarios(plan, args, lang)
    no_gpu_lines, no_gpu = (
        no_gpu_advice(results, lang, machine.backend is not None) if not machine.gpus else ([], None)
    )
    rows = guide_rows.result() if guide_rows is not None else size_guide(plan.framework)
    guide = guide_lines(rows, lang)
    machine_dict = machine.to_dict(measured=plan.measuring, tiny=plan.tiny and plan.measuring)
    report_path = None
    if not args.no_report:
        report_path = _write_report(
            results,
            machine_dict,
            history_records,
            guide,
            [row.to_dict() for row in rows],
            advice_head,
            lang,
            args.html,
            history_path or (args.db if args.db else None),
        )

    if args.json:
        print_json(
            {
                "machine": machine_dict,
                "scenarios": [_scenario_json(r) for r in results],
                "size_guide": [row.to_dict() for row in rows],
                "no_gpu": no_gpu,
                "history": str(history_path) if history_path else None,
                "report": str(report_path) if report_path else None,
            }
        )
    else:
        header = _header(plan, lang)
        print(format_check(results, machine, cards, header, advice_head, guide, lang, no_gpu_lines))
        _print_footer(results, history_path, report_path, lang)
    return 1 if any(r.failed for r in results) else 0


def _run_scenarios(
    plan: CheckPlan, args: argparse.Namespace, lang: str
) -> tuple[list[ScenarioResult], list[dict[str, Any]], Any]:
    """Every scenario estimated and advised; measured and stored where the plan says so. Returns the
    results, the history's latest records (for the report) and the history's path."""
    store = HistoryStore(args.db, enabled=plan.measuring and not args.no_history)
    results = [
        run_scenario(plan, key, full, measured, lang)
        for key, full, measured in scenario_workloads(plan.tiny, plan.machine.device)
    ]
    ahead: dict[int, Any] = {}  # id(result) -> its child, started ahead and waiting for its turn
    try:
        if plan.start_ahead:
            # Every child starts now and imports at once, while the first one also starts up: by
            # the time the first one times its steps, the others wait, idle (CheckPlan.start_ahead).
            queue = [r for r in results if r.to_measure]
            for i, result in enumerate(queue):
                ahead[id(result)] = _launch(result, plan, args, held=i > 0)
        for result in results:
            if result.skipped == "estimated-oom":
                _say_skipped(result, plan, lang)
            elif result.to_measure:
                launch = ahead.pop(id(result), None) or _launch(result, plan, args, held=False)
                with launch:
                    _measure(result, plan, args, lang, launch)
                result.record = _record(result, plan.machine, plan.framework, plan.exec_mode)
                result.run_id = store.add(result.record)
        return results, store.last(HISTORY_IN_REPORT), store.path
    finally:
        for waiting in ahead.values():
            waiting.close()
        store.close()


def _say_skipped(result: ScenarioResult, plan: CheckPlan, lang: str) -> None:
    assert plan.machine.spec is not None
    local = result.estimates[plan.machine.spec.id]
    _say(
        t(
            "check.skip_oom",
            lang,
            scenario=result.key,
            gpu=plan.machine.spec.name,
            peak=format_bytes(local.required_memory_bytes),
            usable=format_bytes(local.gpu.usable_bytes),
        )
    )


def _header(plan: CheckPlan, lang: str) -> list[str]:
    """The lines above the table: this machine's GPU, the execution mode, what measures."""
    machine = plan.machine
    header: list[str] = []
    if machine.gpus:
        g = machine.gpus[0]
        if machine.spec is not None:
            header.append(
                t(
                    "check.gpu",
                    lang,
                    name=g.name,
                    memory=format_bytes(g.memory_total_bytes),
                    driver=g.driver_version or "?",
                    catalog=machine.spec.id,
                )
            )
        else:
            header.append(
                t("check.gpu_unknown", lang, name=g.name, memory=format_bytes(g.memory_total_bytes))
            )
        if len(machine.gpus) > 1:
            header.append(t("check.gpu_count", lang, count=len(machine.gpus)))
    else:
        # "measurements on the CPU" only where something will be measured there.
        header.append(t("check.no_gpu" if plan.measuring else "check.no_gpu_estimates", lang))
    if plan.exec_mode == ExecMode.TUNED:
        header.append(t("check.exec_tuned", lang))
    if plan.estimate_only:
        header.append(t("check.estimate_only", lang))
    elif machine.backend is None:
        header.append(t("check.no_backend", lang))
    else:
        header.append(t("check.backend", lang, backend=machine.backend, device=machine.device))
        if plan.tiny:
            header.append(t("check.tiny_note", lang))
    return header


def _print_footer(results: list[ScenarioResult], history_path: Any, report_path: Any, lang: str) -> None:
    stored = sum(1 for r in results if r.run_id)
    if stored:
        print("\n" + t("check.stored", lang, count=stored, path=history_path))
    if report_path:
        print(("" if stored else "\n") + t("check.report", lang, path=report_path))


def _scenario_json(r: ScenarioResult) -> dict[str, Any]:
    return {
        "key": r.key,
        "workload": r.workload.name,
        "precision": r.workload.precision,
        "params": r.workload.param_count(),
        "estimates": {gid: e.to_dict() for gid, e in r.estimates.items()},
        "measured_workload": r.measured_workload.to_dict() if r.measured_workload is not None else None,
        "measurement": r.measurement.to_dict() if r.measurement is not None else None,
        "skipped": r.skipped,
        "run_id": r.run_id,
        "advice": r.advice,
    }


def _write_report(
    results: list[ScenarioResult],
    machine: dict[str, Any],
    history: list[dict[str, Any]],
    guide: list[str],
    guide_rows: list[dict[str, Any]],
    advice_head: str,
    lang: str,
    html: str | None,
    history_path: Any = None,
) -> Any:
    from fitbench.cli.report import (
        advice_entries,
        base_environment,
        build_model,
        default_report_path,
        environment_of,
        write_reports,
    )

    scenarios = []
    for r in results:
        scenarios.append(
            {
                "key": r.key,
                "workload": r.workload.name,
                "title": r.key,
                "precision": r.workload.precision,
                "params": r.workload.param_count(),
                "description": r.workload.description,
                "estimates": [e.to_dict() for e in r.estimates.values()],
                "estimated_now": False,
                "measurement": r.measurement.to_dict() if r.measurement is not None else None,
                "measured_workload": r.measured_workload.to_dict()
                if r.measurement is not None and r.measured_workload
                else None,
                "skipped": r.skipped,
                "advice": advice_entries(r.advice, lang),
            }
        )
    # Without a history (--no-history) the report still shows this check's own measurements.
    records = history or [dict(r.record, run_id=None, created_at=None) for r in results if r.record]
    env = {
        **base_environment(),
        "cpu": machine.get("cpu"),
        "device": machine.get("device"),
        "backend": machine.get("backend"),
    }
    env.update(environment_of(records))
    if machine.get("gpus"):
        gpu = machine["gpus"][0]
        env.update({"gpu": gpu.get("name"), "gpu_driver": gpu.get("driver_version")})
    model = build_model(
        lang=lang,
        scenarios=scenarios,
        records=records,
        machine=machine,
        environment=env,
        guide=guide,
        guide_rows=guide_rows,
        advice=[advice_head],
    )
    return write_reports(model, html=html or default_report_path(history_path), markdown=None)[0]
