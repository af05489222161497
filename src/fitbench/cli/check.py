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

Everything printed is built from the estimator, the runner and the advice functions; this module
only orchestrates and formats.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from fitbench.backends import framework_of
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
from fitbench.core.units import format_bytes, format_seconds
from fitbench.errors import FitbenchError
from fitbench.workloads.workload import Workload

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

# The brief's scenarios: (preset, precision override). BERT runs with and without AMP, as in the brief
# (Paddle's AMP with a loss scaler, hence fp16).
SCENARIOS: tuple[tuple[str, str | None], ...] = (
    ("resnet50-cifar10", None),
    ("bert-base-imdb", None),
    ("bert-base-imdb", "amp-fp16"),
    ("llm-6b", None),
)
# CPU autocast computes in bfloat16; the tiny AMP row uses it there.
CPU_AMP = "amp-bf16"
GPU_MIN_SECONDS = 3.0
DEFAULT_TIMEOUT_S = 600.0
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
        "--html", "--out", dest="html", metavar="PATH",
        help="where to write the report (default: fitbench-report.html in the history's folder, "
        "the user's fitbench data folder)",
    )
    parser.add_argument("--no-report", action="store_true", help="write no HTML report")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    add_lang_arg(parser)
    add_progress_arg(parser)
    parser.set_defaults(func=check_command)


# ----------------------------------------------------------------------------- the machine


@dataclass(frozen=True, kw_only=True)
class Machine:
    """What this machine offers: its GPU (as NVML and the catalog know it) and its frameworks."""

    gpus: tuple[Any, ...]  # LocalGpu records, nvidia-smi order
    spec: GpuSpec | None  # the catalog card of the first GPU
    backend: str | None  # the framework that measures, None when none is installed
    installed: tuple[str, ...]

    @property
    def device(self) -> str:
        return "cuda" if self.gpus else "cpu"

    def to_dict(self, *, measured: bool, tiny: bool) -> dict[str, Any]:
        return {
            "device": self.device,
            "gpus": [dataclasses.asdict(g) for g in self.gpus],
            "catalog_gpu": self.spec.id if self.spec else None,
            "catalog_gpu_name": self.spec.name if self.spec else None,
            "backend": self.backend,
            "backends_installed": list(self.installed),
            "measured": measured,
            "tiny": tiny,
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        }


def find_machine(backend: str | None) -> Machine:
    from fitbench.backends import backend_installed, entry, installed_backends
    from fitbench.catalog.detect import detect_local_gpus, spec_for_local

    gpus = tuple(detect_local_gpus())
    spec = spec_for_local(gpus[0]) if gpus else None
    installed = tuple(installed_backends())
    if backend is not None and not backend_installed(backend):
        raise FitbenchError(
            f"the {backend} backend is not installed", f"pip install 'fitbench[{entry(backend).extra}]'"
        )
    chosen = backend or (installed[0] if installed else None)
    return Machine(gpus=gpus, spec=spec, backend=chosen, installed=installed)


# ----------------------------------------------------------------------------- one scenario


@dataclass(kw_only=True)
class ScenarioResult:
    key: str
    workload: Workload  # at the brief's settings: what is estimated
    estimates: dict[str, Any]  # gpu id -> Estimate (the comparison cards and the local card)
    measured_workload: Workload | None = None
    measurement: dict[str, Any] | None = None
    skipped: str | None = None
    run_id: str | None = None
    record: dict[str, Any] | None = None
    advice: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)  # the catalog ranked for this scenario (RankRow)


def scenario_workloads(tiny: bool, device: str) -> list[tuple[str, Workload, Workload]]:
    """(key, the workload at the brief's settings, the workload to measure) per scenario."""
    from fitbench.workloads.presets import get_workload

    out = []
    for name, precision in SCENARIOS:
        full = get_workload(name, precision=precision)
        if tiny:
            tiny_precision = None if precision is None else (CPU_AMP if device == "cpu" else precision)
            measured = get_workload(name, tiny=True, precision=tiny_precision)
        else:
            measured = full
        out.append((f"{name} · {full.precision}", full, measured))
    return out


def _say(text: str) -> None:
    print(f"fitbench: {text}", file=sys.stderr, flush=True)


def _measure(result: ScenarioResult, machine: Machine, args: argparse.Namespace, lang: str) -> None:
    from fitbench.advise.i18n import status_label, t
    from fitbench.backends.base import RunOptions
    from fitbench.measure.progress import Progress, should_show
    from fitbench.measure.runner import measure

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
    min_seconds = args.min_seconds
    if min_seconds is None and not w.tiny:
        min_seconds = GPU_MIN_SECONDS
    started = time.monotonic()
    with Progress(enabled=should_show(args.progress), label=result.key, lang=lang) as progress:
        m = measure(
            w,
            machine.backend,
            RunOptions(device=machine.device, exec_mode=args.exec_mode),
            timeout_s=args.timeout or DEFAULT_TIMEOUT_S,
            min_seconds=min_seconds,
            progress=progress,
        )
    result.measurement = m
    _say(
        t(
            "check.measured",
            lang,
            scenario=result.key,
            status=status_label(m.get("status"), lang),
            seconds=format_seconds(time.monotonic() - started),
        )
    )


def _record(result: ScenarioResult, machine: Machine, framework: str, exec_mode: str) -> dict[str, Any]:
    """The history record: the same shape as `fitbench run`'s, plus the catalog estimates of the
    scenario at the brief's settings (so that `fitbench report` can draw them later)."""
    from fitbench.cli.run import error_vs_estimate

    w = result.measured_workload
    assert w is not None and result.measurement is not None
    local = result.estimates.get(machine.spec.id) if (machine.spec and not w.tiny) else None
    m = result.measurement
    return {
        "command": "check",
        "scenario": result.key,
        "workload": w.to_dict(),
        "estimate": local.to_dict() if local is not None else None,
        "measurement": m,
        "environment": m.get("environment") or {},
        "error_vs_estimate": error_vs_estimate(local, m, w),
        "catalog_estimates": {
            "workload": result.workload.to_dict(),
            "framework": framework,
            "exec_mode": exec_mode,
            "estimates": {gid: e.to_dict() for gid, e in result.estimates.items()},
        },
        "advice": result.advice,
    }


# ----------------------------------------------------------------------------- advice


def _advise(result: ScenarioResult, target: GpuSpec, framework: str, exec_mode: str, lang: str) -> None:
    """Fixes on the target card, the bottleneck where the job runs, the card to buy.

    Each sentence is kept in every language (the history may be reported in another one later);
    the terminal shows `lang`.
    """
    from fitbench.advise.fixes import bottleneck_advice, offload_option, what_would_make_it_fit
    from fitbench.advise.i18n import LANGS, t
    from fitbench.advise.ranking import cheapest_comfortable, rank_catalog
    from fitbench.advise.text import (
        advice_item,
        bottleneck_line,
        cheapest_line,
        fix_lines,
        offload_line,
        smallest_line,
    )
    from fitbench.estimate.api import estimate
    from fitbench.estimate.verdict import FITS, OOM

    def add(kind: str, texts: dict[str, str], data: Any) -> None:
        head, *options = texts[lang].split("\n")
        result.lines.append(head)
        result.lines.extend("  - " + line for line in options)
        result.advice.append(advice_item(kind, texts[lang], data, texts=texts))

    w, key = result.workload, result.key
    rows = rank_catalog(w, framework=framework, exec_mode=exec_mode)
    result.rows = list(rows)
    base = result.estimates.get(target.id) or estimate(w, target, framework=framework, exec_mode=exec_mode)
    if base.verdict != FITS:
        fixes = what_would_make_it_fit(w, target, framework=framework, exec_mode=exec_mode, rows=rows)
        helpful = [f for f in fixes if f.makes_it_fit]
        if helpful:
            texts = {lg: "\n".join(fix_lines(base, helpful, lg, scenario=key)) for lg in LANGS}
            data = {
                "gpu": target.id,
                "baseline_verdict": base.verdict,
                "options": [f.to_dict() for f in fixes],
            }
            add("fixes", texts, data)
    if base.verdict != OOM:
        from fitbench.cli.estimate import tf32_advice, tf32_dict, tf32_texts

        # fp32 on a card with TF32 tensor cores that PyTorch leaves off for matmuls by default.
        for fp32, alt in tf32_advice([base]):
            add("tf32", tf32_texts(fp32, alt, scenario=key), tf32_dict(fp32, alt))
    if base.verdict == OOM:
        # A generation job that does not fit may still run with layers in CPU memory.
        off = offload_option(base)
        if off is not None:
            add("offload", {lg: offload_line(off, lg, scenario=key) for lg in LANGS}, off.to_dict())
    choice = cheapest_comfortable(w, framework=framework, exec_mode=exec_mode, rows=rows)
    # The bottleneck matters where the job runs: the target card, else the card to buy.
    buy = choice.cheapest or choice.smallest
    runs_on = base if base.verdict != OOM else (buy.estimate if buy is not None else None)
    if runs_on is not None:
        bn = bottleneck_advice(runs_on, rows=rows)
        # Where it does not run on the target, say which card the bottleneck and speed-up are for.
        names = {
            lg: key if runs_on is base else t("bn.on_card", lg, scenario=key, gpu=runs_on.gpu.name)
            for lg in LANGS
        }
        add("bottleneck", {lg: bottleneck_line(bn, lg, scenario=names[lg]) for lg in LANGS}, bn)
    add("cheapest", {lg: cheapest_line(choice, lg, scenario=key) for lg in LANGS}, choice)
    if choice.smallest is not None and choice.smallest.price_usd is None:
        texts = {lg: smallest_line(choice, lg, scenario=key) for lg in LANGS}
        if all(texts.values()):
            add("smallest", {lg: str(x) for lg, x in texts.items()}, choice.smallest)


# ----------------------------------------------------------------------------- no GPU

CHEAPEST_SHOWN = 3


def _ram_bytes() -> int | None:
    """This machine's physical memory (what a job run on the CPU has), None where unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def no_gpu_advice(results: list[ScenarioResult], lang: str,
                  can_measure: bool = True) -> tuple[list[str], dict[str, Any]]:
    """For a machine without a GPU: the cheapest catalog cards (by list price) on which each
    scenario's verdict is fits, and what this CPU can run (the tiny variants; at full size, the
    scenarios whose memory, less the CUDA context, fits in its RAM)."""
    from fitbench.advise.i18n import t
    from fitbench.advise.text import speed_text
    from fitbench.estimate.verdict import FITS

    lines = [t("nogpu.header", lang)]
    cheapest: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        fitting = sorted((row for row in r.rows if row.verdict == FITS and row.price_usd is not None),
                         key=lambda row: (row.price_usd, row.gpu.id))[:CHEAPEST_SHOWN]
        cheapest[r.key] = [{"gpu": row.gpu.id, "gpu_name": row.gpu.name, "price_usd": row.price_usd,
                            "verdict": row.verdict, "speed": row.speed, "speed_unit": row.speed_unit}
                           for row in fitting]
        cards = ", ".join(t("nogpu.card_item", lang, card=row.gpu.name, price=f"{row.price_usd:,.0f}",
                            speed=speed_text(row.estimate, lang)) for row in fitting)
        lines.append("  " + t("nogpu.card", lang, scenario=r.key, cards=cards or t("nogpu.none", lang)))
    ram = _ram_bytes()
    in_ram = []
    for r in results:
        est = next(iter(r.estimates.values()), None)
        if est is not None and ram is not None:
            need = est.required_memory_bytes - est.breakdown.get("cuda_context", 0)
            if need <= ram:
                in_ram.append(r.key)
    cpu = t("nogpu.cpu", lang, fits_ram=", ".join(in_ram) or t("nogpu.none_in_ram", lang),
            ram=format_bytes(ram) if ram else "?")
    if not can_measure:
        cpu += t("nogpu.cpu_needs_framework", lang)
    lines.append("  " + cpu)
    return lines, {"cheapest_cards": cheapest, "ram_bytes": ram, "fits_in_ram": in_ram,
                   "tiny_runs_on_cpu": True}


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
    est = _cell(local, lang, colour) if local is not None else "-"
    m = result.measurement
    if result.skipped:
        meas = t("status.skipped", lang)
    elif m is None:
        meas = "-"
    elif m.get("status") == "ok" and result.measured_workload is not None:
        w = result.measured_workload
        meas = f"{status_label('ok', lang)} · {measured_speed_text(m, w.to_dict(), lang)}"
        ran = m.get("precision_in_effect")
        if ran and ran != result.workload.precision:
            # The row is named after the scenario's precision; say what this machine really ran.
            meas += " · " + t("cell.ran", lang, precision=ran)
        if w.tiny:
            meas = t("cell.tiny", lang, text=meas)
    else:
        meas = status_label(m.get("status"), lang)
    return f"{est} | {meas}"


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
    if no_gpu:
        out += ["", *no_gpu]
    out.append("")
    out.extend(guide)
    return "\n".join(out)


# ----------------------------------------------------------------------------- the command


def check_command(args: argparse.Namespace) -> int:
    from fitbench.advise.guide import size_guide
    from fitbench.advise.i18n import resolve_lang, t
    from fitbench.advise.text import guide_lines
    from fitbench.catalog import BRIEF_GPUS, get_gpu, resolve_gpus
    from fitbench.cli.estimate import DEFAULT_GPUS
    from fitbench.estimate.api import estimate
    from fitbench.estimate.verdict import OOM

    lang = resolve_lang(args.lang)
    machine = find_machine(args.backend)
    framework = framework_of(machine.backend) if machine.backend else "torch"
    exec_mode = args.exec_mode
    cards = resolve_gpus(args.gpu or ([] if args.gpu_spec else list(DEFAULT_GPUS)), args.gpu_spec or ())
    if not cards:
        raise FitbenchError("no GPU selected", "pass --gpu ID or --gpu all")
    measuring = not args.estimate_only and machine.backend is not None
    tiny = machine.device == "cpu" or args.tiny

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
        header.append(t("check.no_gpu" if measuring else "check.no_gpu_estimates", lang))
    if exec_mode == "tuned":
        header.append(t("check.exec_tuned", lang))
    if args.estimate_only:
        header.append(t("check.estimate_only", lang))
    elif machine.backend is None:
        header.append(t("check.no_backend", lang))
    else:
        header.append(t("check.backend", lang, backend=machine.backend, device=machine.device))
        if tiny:
            header.append(t("check.tiny_note", lang))
    target = machine.spec or get_gpu(BRIEF_GPUS[0])
    head_key = (
        "advice.target_local"
        if machine.spec
        else ("advice.target_unknown" if machine.gpus else "advice.target_brief")
    )
    advice_head = t(head_key, lang, gpu=target.name)

    store = HistoryStore(args.db, enabled=measuring and not args.no_history)
    results: list[ScenarioResult] = []
    try:
        for key, full, measured in scenario_workloads(tiny, machine.device):
            all_cards = ([machine.spec] if machine.spec else []) + cards
            estimates = {c.id: estimate(full, c, framework=framework, exec_mode=exec_mode) for c in all_cards}
            result = ScenarioResult(key=key, workload=full, estimates=estimates)
            _advise(result, target, framework, exec_mode, lang)
            if measuring:
                local = estimates.get(machine.spec.id) if machine.spec else None
                result.measured_workload = measured
                if not tiny and local is not None and local.verdict == OOM:
                    result.skipped = "estimated-oom"
                    _say(
                        t(
                            "check.skip_oom",
                            lang,
                            scenario=key,
                            gpu=machine.spec.name,
                            peak=format_bytes(local.required_memory_bytes),
                            usable=format_bytes(local.gpu.usable_bytes),
                        )
                    )
                else:
                    _measure(result, machine, args, lang)
                    result.record = _record(result, machine, framework, exec_mode)
                    result.run_id = store.add(result.record)
            results.append(result)
        history_records = store.last(HISTORY_IN_REPORT)
        history_path = store.path
    finally:
        store.close()

    no_gpu_lines, no_gpu = (
        no_gpu_advice(results, lang, machine.backend is not None) if not machine.gpus else ([], None)
    )
    rows = size_guide(framework)
    guide = guide_lines(rows, lang)
    machine_dict = machine.to_dict(measured=measuring, tiny=tiny and measuring)
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
        print(format_check(results, machine, cards, header, advice_head, guide, lang, no_gpu_lines))
        stored = sum(1 for r in results if r.run_id)
        if stored:
            print("\n" + t("check.stored", lang, count=stored, path=history_path))
        if report_path:
            print(("" if stored else "\n") + t("check.report", lang, path=report_path))
    failed = [r for r in results if r.measurement and r.measurement.get("status") not in ("ok", "oom")]
    return 1 if failed else 0


def _scenario_json(r: ScenarioResult) -> dict[str, Any]:
    return {
        "key": r.key,
        "workload": r.workload.name,
        "precision": r.workload.precision,
        "params": r.workload.param_count(),
        "estimates": {gid: e.to_dict() for gid, e in r.estimates.items()},
        "measured_workload": r.measured_workload.to_dict() if r.measured_workload is not None else None,
        "measurement": r.measurement,
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
                "measurement": r.measurement,
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
