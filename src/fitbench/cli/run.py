"""`fitbench run`: measure a workload for real, beside the estimate, and keep it in the history.

The parent process imports no framework: each measurement runs in a fresh child process
(fitbench.measure.runner), the device default is decided through NVML, and the estimate is
plain arithmetic. This module only orchestrates and formats.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

from fitbench.advise.i18n import measurement_text, resolve_lang, status_label, t
from fitbench.backends import framework_of
from fitbench.cli.common import (
    HistoryStore,
    add_backend_arg,
    add_command,
    add_exec_arg,
    add_gpu_spec_arg,
    add_history_args,
    add_progress_arg,
    add_workload_args,
    non_negative_int,
    positive_int,
    positive_seconds,
    precision_list,
    print_json,
    seconds,
    workload_from_args,
)
from fitbench.core.gpu import GpuSpec
from fitbench.core.units import format_bytes, format_rate, format_seconds
from fitbench.errors import FitbenchError
from fitbench.workloads.workload import Workload

EPILOG = """examples:
  fitbench run resnet50-cifar10 --tiny                  a tiny ResNet end to end, in seconds on a CPU
  fitbench run bert-base-imdb --device cuda --precision fp32,amp-fp16
                                                        AMP's memory saving and speed-up, measured
  fitbench run llm-6b --device cuda --batch 8           load, prefill and tokens/s of a 6.7B model
  fitbench run resnet50-cifar10 --device cuda --max-batch
                                                        the largest batch that really fits
  fitbench run bert-base-imdb --data ./aclImdb --json   real IMDb reviews, JSON result
  fitbench run llm-6b --backend paddle --gpu rtx-4090   compare against another card's estimate

JSON (one precision): {"workload", "estimate" | null, "measurement", "error_vs_estimate", "diagnosis",
"run_id"};
with a precision list, a list of those, each with "comparison" against the first.
error_vs_estimate = (estimate - measured) / measured: +0.10 means the estimate is 10% high.
Out of memory is a verdict (status "oom", exit code 0), not a failure.
"""

DEVICE_RE = re.compile(r"^(cpu|cuda(:\d+)?)$")


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text, EPILOG)
    add_workload_args(parser, multi_precision=True)
    run = parser.add_argument_group("measurement")
    add_backend_arg(run)
    run.add_argument(
        "--device", metavar="DEV", help="cpu, cuda or cuda:N (default: cuda when a GPU is found)"
    )
    add_exec_arg(run)
    run.add_argument(
        "--gpu", metavar="ID", help="catalog GPU whose estimate to compare with (default: this machine's GPU)"
    )
    run.add_argument(
        "--emulate",
        metavar="ID",
        help="cap device memory at a catalog card's usable memory (or a --gpu-spec form's): does it fit "
             "there? (implies --gpu ID)",
    )
    add_gpu_spec_arg(run, repeat=False)
    run.add_argument(
        "--data",
        metavar="PATH",
        help="local dataset: CIFAR-10 python batches or tar.gz, IMDb aclImdb/ (default synthetic)",
    )
    run.add_argument(
        "--max-batch",
        action="store_true",
        help="also search the largest batch that fits (fresh process per probe)",
    )
    run.add_argument(
        "--batch-limit",
        type=positive_int,
        metavar="N",
        help="largest batch --max-batch tries (default: 8x the start, at least 64)",
    )
    run.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="S",
        help="stop a measurement after S seconds (default 900)",
    )
    run.add_argument(
        "--min-steps",
        type=positive_int,
        metavar="N",
        help="timed steps at least (default 10; 3 generate calls)",
    )
    run.add_argument(
        "--min-seconds",
        type=seconds,
        metavar="S",
        help="timed seconds at least (default 3; 0.5 for tiny CPU runs)",
    )
    run.add_argument(
        "--warmup",
        type=non_negative_int,
        metavar="N",
        help="untimed steps first (default 3; 1 for generation)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the result as JSON")
    add_history_args(out)
    add_progress_arg(out)
    parser.set_defaults(func=run_command)


# -- choices the parent makes without importing a framework -------------------------------------
def pick_backend(name: str | None, lang: str = "en") -> str:
    from fitbench.advise.i18n import t
    from fitbench.backends import backend_installed, entry, installed_backends

    if name is not None:
        if not backend_installed(name):
            extra = entry(name).extra
            raise FitbenchError(f"the {name} backend is not installed", f"pip install 'fitbench[{extra}]'")
        return name
    installed = installed_backends()
    if not installed:
        raise FitbenchError(t("install.no_framework", lang), t("install.no_framework_hint", lang))
    return installed[0]


def _cuda_present() -> bool | None:
    """True/False from NVML; None when NVML cannot tell (no pynvml) but a driver seems loaded."""
    from fitbench.measure import nvml

    count = nvml.device_count()
    if count is not None:
        return count > 0
    gpus = Path("/proc/driver/nvidia/gpus")
    return None if gpus.is_dir() and any(gpus.iterdir()) else False


def pick_device(device: str | None) -> str:
    from fitbench.measure import nvml

    if device is None:
        # Unknown (a driver but no NVML library): try the GPU; the child says clearly if it cannot.
        return "cpu" if _cuda_present() is False else "cuda"
    device = device.strip().lower()
    if not DEVICE_RE.match(device):
        raise FitbenchError(f"unknown device '{device}'", "use cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        present = _cuda_present()
        if present is False:
            raise FitbenchError("no CUDA GPU found (the NVIDIA driver reports none)", "use --device cpu")
        count = nvml.device_count()
        index = nvml.cuda_index(device) or 0
        if count is not None and index >= count:
            raise FitbenchError(
                f"no CUDA device {index}: {count} found", f"use --device cuda:0 … cuda:{count - 1}"
            )
    return device


def pick_gpu(gpu_id: str | None, device: str) -> tuple[GpuSpec | None, dict[str, str] | None]:
    """(catalog card to estimate for, a note when there is none: its message key and values)."""
    if gpu_id is not None:
        from fitbench.catalog import get_gpu

        return get_gpu(gpu_id), None
    if not device.startswith("cuda"):
        return None, {"key": "run.note.cpu"}
    from fitbench.measure import nvml

    index = nvml.cuda_index(device) or 0
    name, total = nvml.device_name(index), nvml.device_total(index)
    if name is None or total is None:
        return None, {"key": "run.note.no_nvml"}
    from fitbench.catalog import get_gpu
    from fitbench.catalog.detect import match_catalog

    catalog_id = match_catalog(name, total)
    if catalog_id is None:
        return None, {"key": "run.note.not_in_catalog", "name": name}
    return get_gpu(catalog_id), None


def estimate_for(
    workload: Workload, gpu: GpuSpec | None, backend: str, exec_mode: str
) -> tuple[Any, dict[str, str] | None]:
    if gpu is None:
        return None, None
    from fitbench.estimate.api import estimate

    try:
        return estimate(workload, gpu, framework=framework_of(backend), exec_mode=exec_mode), None
    except FitbenchError as exc:
        return None, {"key": "run.note.no_estimate", "reason": str(exc)}


# -- derived numbers ------------------------------------------------------------------------------
def relative_error(estimated: float | None, measured: float | None) -> float | None:
    """(estimate - measured) / measured; None when either is missing or the measurement is zero."""
    if estimated is None or measured is None or measured == 0:
        return None
    return (estimated - measured) / measured


def measured_speed(m: dict[str, Any], workload: Workload) -> tuple[float | None, float | None]:
    """(step seconds, tokens/s) comparable with the estimator's: for generation one decode step
    (one token per sequence) and decode throughput, otherwise the training/inference step."""
    if workload.is_generation:
        decode, new = m.get("decode_seconds"), workload.new_tokens or 0
        step = decode / new if decode is not None and new else None
        return step, m.get("decode_tokens_per_second")
    return m.get("step_seconds"), m.get("tokens_per_second")


def name_rates(m: dict[str, Any], workload: Workload) -> dict[str, Any]:
    """Generation measures two token rates: decode (what the estimate's tokens/s is) and end to end
    (the whole generate call, prefill included; `tokens_per_second`). Both get explicit names."""
    if workload.is_generation:
        m.setdefault("end_to_end_tokens_per_second", m.get("tokens_per_second"))
        m.setdefault("decode_tokens_per_second", None)
    return m


def not_comparable(est: Any, m: dict[str, Any], workload: Workload) -> list[str]:
    """Why a measurement cannot be held against the estimate beside it (empty: it can).

    cpu        measured on the CPU, the estimate is for a GPU
    tiny       the tiny variant ran: a smoke test of the pipeline, not the real job
    first_run  no untimed warm-up steps: start-up (first kernels, the allocator, autotuning) is timed
    """
    if est is None or m.get("status") != "ok":
        return []
    reasons = []
    if not str(m.get("device", "")).startswith("cuda"):
        reasons.append("cpu")
    if workload.tiny:
        reasons.append("tiny")
    if m.get("warmup_steps") == 0:
        reasons.append("first_run")
    return reasons


def error_vs_estimate(est: Any, m: dict[str, Any], workload: Workload) -> dict[str, float | None]:
    keys = ("peak_memory", "step_seconds", "tokens_per_second")
    out: dict[str, float | None] = dict.fromkeys(keys)
    if est is None or m.get("status") != "ok" or not str(m.get("device", "")).startswith("cuda"):
        return out
    step, tokens = measured_speed(m, workload)
    out["peak_memory"] = relative_error(est.peak_memory_bytes, m.get("peak_memory_bytes"))
    out["step_seconds"] = relative_error(est.step_seconds, step)
    out["tokens_per_second"] = relative_error(est.tokens_per_second, tokens)
    if workload.is_generation:
        out["prefill_seconds"] = relative_error(
            getattr(est, "prefill_seconds", None), m.get("prefill_seconds")
        )
    return out


def _speed_key(m: dict[str, Any], workload: Workload) -> float | None:
    """A 'higher is faster' figure for speed-ups."""
    if workload.is_generation:
        return m.get("decode_tokens_per_second") or m.get("tokens_per_second")
    step = m.get("step_seconds")
    return 1.0 / step if step else None


def comparison(
    base: dict[str, Any], other: dict[str, Any], workload: Workload, base_precision: str
) -> dict[str, Any]:
    """Memory saving and speed-up of `other` against `base` (None where either did not run)."""
    out: dict[str, Any] = {
        "baseline": base_precision,
        "memory_saving": None,
        "memory_saved_bytes": None,
        "speedup": None,
    }
    if base.get("status") != "ok" or other.get("status") != "ok":
        return out
    pb, po = base.get("peak_memory_bytes"), other.get("peak_memory_bytes")
    if pb and po is not None:
        out["memory_saving"] = 1 - po / pb
        out["memory_saved_bytes"] = pb - po
    sb, so = _speed_key(base, workload), _speed_key(other, workload)
    if sb and so:
        out["speedup"] = so / sb
    return out


# -- the command ----------------------------------------------------------------------------------
def refuse_unmeasurable_storage(workload: Workload) -> None:
    """The backends build weights in the precision's dtype (bitsandbytes for int8/int4) and a KV
    cache in the compute dtype: a weight format or a KV cache dtype they cannot build is refused
    here, before minutes are spent, instead of measuring something else."""
    fmt = workload.weights
    if fmt is not None:
        raise FitbenchError(f"fitbench run cannot build {fmt.describe()} weights (the estimate covers them)",
                            "use --precision int8 or int4 (bitsandbytes) to measure quantized weights, or "
                            "--weights none for the unquantized model; benchmarks/quant_gpu.py measures fp8 "
                            "block-scaled weights")
    if workload.kv_cache is not None and workload.kv_cache != _compute_kv_dtype(workload):
        raise FitbenchError(f"fitbench run keeps the KV cache in the compute dtype, not {workload.kv_cache}",
                            "drop --kv-cache to measure; `fitbench estimate --kv-cache` gives its memory")


def _compute_kv_dtype(workload: Workload) -> str:
    p = workload.precision_info
    return p.compute if p.activation_bytes == 2 else "fp32"


def run_command(args: argparse.Namespace) -> int:
    from fitbench.backends.base import RunOptions
    from fitbench.measure.diagnosis import diagnose
    from fitbench.measure.progress import Progress, should_show

    lang = resolve_lang(getattr(args, "lang", None))
    precisions = precision_list(args.precision)
    workloads = [workload_from_args(args, precision=p) for p in precisions]
    for w in workloads:
        refuse_unmeasurable_storage(w)
    backend = pick_backend(args.backend, lang)
    if args.emulate is not None and _cuda_present() is False:
        # Said before the device is chosen: "use --device cuda" then "no GPU, use --device cpu"
        # would send the user round in a circle.
        raise FitbenchError(
            f"--emulate {args.emulate} needs a CUDA GPU to cap, and this machine has none",
            f"`fitbench estimate WORKLOAD --gpu {args.emulate}` says without a GPU whether it fits that card",
        )
    device = pick_device(args.device)
    if args.data is not None and not os.path.exists(args.data):
        raise FitbenchError(f"dataset path {args.data} does not exist", "pass the CIFAR-10 or aclImdb path")
    if args.max_batch and any(w.gpus > 1 for w in workloads):
        raise FitbenchError("--max-batch searches one GPU", "drop --gpus or --max-batch")
    limit = None
    from fitbench.catalog import lookup_gpu
    from fitbench.catalog.spec import is_spec

    if args.emulate is not None:
        if not device.startswith("cuda"):
            raise FitbenchError("--emulate caps GPU memory and needs a CUDA device", "use --device cuda")
        emulated = lookup_gpu(args.emulate)
        limit = emulated.usable_bytes
        if args.gpu is None and args.gpu_spec is None:
            args.gpu_spec = args.emulate if is_spec(args.emulate) else None
            args.gpu = None if args.gpu_spec else emulated.id
    if args.gpu is not None and args.gpu_spec is not None:
        raise FitbenchError("--gpu and --gpu-spec both name the card to compare with", "give one of them")
    if args.gpu_spec is not None:
        gpu, gpu_note = lookup_gpu(args.gpu_spec, spec=True), None
    else:
        gpu, gpu_note = pick_gpu(args.gpu, device)
    options = RunOptions(
        device=device, exec_mode=args.exec_mode, data=str(Path(args.data).resolve()) if args.data else None,
        memory_limit_bytes=limit,
    )
    show = should_show(args.progress)
    store = HistoryStore(args.db, enabled=not args.no_history)
    results: list[dict[str, Any]] = []
    try:
        for workload in workloads:
            # The estimate describes the workload as the exec mode runs it (estimate.execution).
            est, est_note = estimate_for(workload, gpu, backend, args.exec_mode)
            name = t("cell.tiny_name", lang, name=workload.name) if workload.tiny else workload.name
            with Progress(enabled=show, label=f"{name} {workload.precision}", lang=lang) as progress:
                m = _measure(workload, backend, options, args, progress)
                if m.get("error_type") == "FitbenchError" and len(workloads) == 1:
                    raise FitbenchError(m.get("error") or "the measurement failed", m.get("hint"))
                search = None
                if args.max_batch and m.get("status") in ("ok", "oom"):
                    search = _max_batch(workload, backend, options, est, args, progress)
                    m["max_batch_search"] = search
            name_rates(m, workload)
            notes = [note_text(n, lang) for n in (gpu_note, est_note) if n]
            est_dict = est.to_dict() if est is not None else None
            errors = error_vs_estimate(est, m, workload)
            if search is not None and est is not None:
                errors["max_batch"] = relative_error(est.max_batch_size, search.get("max_batch"))
            diagnosis = diagnose(m, est_dict, gpu)
            record = {
                "command": "run",
                "workload": workload.to_dict(),
                "estimate": est_dict,
                "measurement": m,
                "environment": m.get("environment") or {},
                "error_vs_estimate": errors,
                "diagnosis": diagnosis,
            }
            run_id = store.add(record)
            result: dict[str, Any] = {
                "precision": workload.precision,
                "workload": workload.to_dict(),
                "estimate": est_dict,
                "measurement": m,
                "error_vs_estimate": errors,
                "diagnosis": diagnosis,
                "run_id": run_id,
            }
            if search is not None:
                result["max_batch"] = {"estimated": est.max_batch_size if est is not None else None, **search}
            if notes:
                result["notes"] = notes
            reasons = not_comparable(est, m, workload)
            result["comparable"] = None if est is None else not reasons
            result["not_comparable"] = reasons
            results.append(result)
    finally:
        store.close()

    if len(results) > 1:
        base = results[0]
        for r, w in zip(results, workloads, strict=True):
            r["comparison"] = comparison(base["measurement"], r["measurement"], w, base["precision"])

    if args.json:
        print_json(results[0] if len(results) == 1 else results)
    else:
        print(format_results(results, workloads, gpu, lang))
    return 0 if all(r["measurement"].get("status") in ("ok", "oom") for r in results) else 1


def _measure(workload: Workload, backend: str, options: Any, args: argparse.Namespace, progress: Any) -> dict:
    """One measurement: a fresh child process, or one per GPU through the distributed launcher."""
    common = {"timeout_s": args.timeout, "min_steps": args.min_steps, "warmup": args.warmup,
              "progress": progress}
    if workload.gpus > 1:
        from fitbench.measure.distributed import measure_distributed

        return measure_distributed(workload, backend, options, **common)
    from fitbench.measure.runner import measure

    return measure(workload, backend, options, min_seconds=args.min_seconds, **common)


def _max_batch(
    workload: Workload, backend: str, options: Any, est: Any, args: argparse.Namespace, progress: Any
) -> dict[str, Any]:
    from fitbench.measure.search import find_max_batch

    start = (
        est.max_batch_size
        if est is not None and est.max_batch_size and est.max_batch_size > 0
        else workload.batch_size
    )
    limit = args.batch_limit or max(64, 8 * start)
    progress({"phase": "max-batch search", "detail": f"from {start}, at most {limit}",
              "detail_key": "progress.search_range", "start": start, "limit": limit})
    result = find_max_batch(
        workload,
        backend,
        options,
        start=min(start, limit),
        limit=limit,
        timeout_s=args.timeout,
        progress=progress,
    )
    return result.to_dict()


# -- human output ---------------------------------------------------------------------------------
def note_text(note: dict[str, str], lang: str) -> str:
    """A note kept as its message key and values, in the reader's language."""
    return t(note["key"], lang, **{k: v for k, v in note.items() if k != "key"})


def _status_line(m: dict[str, Any], lang: str) -> str:
    """How a measurement ended: its status, and its message in the reader's language where fitbench
    worded it (an exception's own text is shown as the framework wrote it)."""
    status = m.get("status")
    return t("run.status", lang, status=status if lang == "en" else status_label(status, lang),
             error=measurement_text(str(m.get("error")), lang))


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:+.0f}%"


def _speed_unit(workload: Workload) -> str:
    return {"images": "img/s", "tokens": "tok/s"}.get(workload.sample_unit, "seq/s")


def format_one(r: dict[str, Any], workload: Workload, gpu: GpuSpec | None, lang: str = "en") -> str:
    from fitbench.results.table import render_table

    m, est = r["measurement"], r["estimate"]
    errors = r["error_vs_estimate"]
    status = m.get("status")
    device = m.get("device_name") or m.get("device")
    tiny = f" ({t('check.variant_tiny', lang)}: {t('run.smoke', lang)})" if workload.tiny else ""
    from fitbench.advise.text import precision_shown

    precision = precision_shown(m.get("precision_requested"), m.get("precision_in_effect"), lang)
    title = t("run.title", lang, name=workload.name, tiny=tiny, backend=m.get("backend"),
              version=m.get("framework_version") or "", device=device, precision=precision,
              batch=workload.batch_size, exec_mode=m.get("exec_mode"))
    lines = [title]
    if workload.tiny:
        lines.append("  " + t("run.smoke_test", lang, name=workload.name))
    dist = m.get("distributed")
    if dist:
        lines.append("  " + t("run.distributed", lang, nproc=dist["nproc"], launcher=dist["launcher"],
                                group=dist["process_group"], strategy=dist["strategy"],
                                per_gpu=dist["per_gpu_batch_size"], total=dist["global_batch_size"]))
    if status != "ok":
        lines.append("  " + _status_line(m, lang))
        if m.get("hint"):
            lines.append("  " + t("run.hint", lang, hint=m["hint"]))
    est_head = (
        t("run.col.estimate_on", lang, gpu=gpu.id)
        if (est is not None and gpu is not None)
        else t("run.col.estimate", lang)
    )
    rows: list[list[str]] = []

    def row(name: str, measured: str, estimated: str = "", err: float | None = None) -> None:
        rows.append([name, measured, estimated, _pct(err)])

    e = est or {}
    peak_src = m.get("peak_memory_source") or ""
    row(
        t("run.row.peak_memory", lang),
        f"{format_bytes(m.get('peak_memory_bytes'))} ({peak_src})" if m.get("peak_memory_bytes") else "-",
        format_bytes(e.get("peak_memory_bytes")) if est else "",
        errors.get("peak_memory"),
    )
    if m.get("peak_allocated_bytes") is not None:
        row(
            t("run.row.allocator_peak", lang),
            t("run.cell.allocated", lang, allocated=format_bytes(m["peak_allocated_bytes"]),
              reserved=format_bytes(m.get("peak_reserved_bytes"))),
        )
    if m.get("cuda_context_bytes") is not None:
        row(t("run.row.cuda_context", lang), format_bytes(m["cuda_context_bytes"]))
    row(t("run.row.load", lang), format_seconds(m.get("load_seconds")))
    if workload.is_generation:
        row(t("run.row.memory_after_load", lang), format_bytes(m.get("memory_after_load_bytes")))
        row(
            t("run.row.prefill", lang),
            format_seconds(m.get("prefill_seconds")),
            format_seconds(e.get("prefill_seconds")) if est else "",
            errors.get("prefill_seconds"),
        )
        row(
            t("run.row.decode", lang),
            format_rate(m.get("decode_tokens_per_second"), "tok/s"),
            format_rate(e.get("tokens_per_second"), "tok/s") if est else "",
            errors.get("tokens_per_second"),
        )
        row(
            t("run.row.end_to_end", lang),
            t("run.cell.per_generate", lang, rate=format_rate(m.get("tokens_per_second"), "tok/s"),
              time=format_seconds(m.get("step_seconds"))),
        )
    else:
        steps = m.get("steps")
        step = format_seconds(m.get("step_seconds"))
        if steps:
            step = t("run.cell.steps", lang, time=step, p90=format_seconds(m.get("step_seconds_p90")),
                     steps=steps)
        row(
            t("run.row.step", lang),
            step,
            format_seconds(e.get("step_seconds")) if est else "",
            errors.get("step_seconds"),
        )
        row(
            t("run.row.throughput", lang),
            format_rate(m.get("samples_per_second"), _speed_unit(workload)),
            format_rate(e.get("samples_per_second"), _speed_unit(workload)) if est else "",
        )
        if m.get("tokens_per_second") is not None:
            row(
                t("run.row.tokens", lang),
                format_rate(m.get("tokens_per_second"), "tok/s"),
                format_rate(e.get("tokens_per_second"), "tok/s")
                if est and e.get("tokens_per_second")
                else "",
                errors.get("tokens_per_second"),
            )
        if m.get("epoch_seconds") is not None:
            row(
                t("run.row.epoch_smoke" if workload.tiny else "run.row.epoch", lang),
                format_seconds(m.get("epoch_seconds")),
                format_seconds(e.get("epoch_seconds")) if est else "",
            )
    if m.get("params"):
        row(t("run.row.params", lang), f"{m['params']:,}",
            f"{e['params']:,}" if est and e.get("params") else "")
    if r.get("max_batch"):
        mb = r["max_batch"]
        found = mb.get("max_batch")
        text = (
            t("run.cell.none_fits", lang)
            if found is None
            else (t("run.cell.limit", lang, n=found) if mb.get("reached_limit") else str(found))
        )
        row(t("run.row.max_batch", lang), text, str(mb["estimated"]) if mb.get("estimated") else "",
            errors.get("max_batch"))
    if status != "ok":
        rows = [x for x in rows if x[1] != "-"]
    if rows and est is not None:
        head = ["", t("col.measured", lang), est_head, t("col.error", lang)]
        lines.append(render_table(head, rows, align="lrrr", indent="  "))
    elif rows:
        head = ["", t("col.measured", lang)]
        lines.append(render_table(head, [x[:2] for x in rows], align="ll", indent="  "))
    from fitbench.measure.diagnosis import format_diagnosis

    diagnosis_line = format_diagnosis(r.get("diagnosis") or {}, lang)
    if diagnosis_line:
        lines.append(f"  {diagnosis_line}")
    for warning in m.get("warnings") or []:
        lines.append("  " + t("run.warning", lang, warning=measurement_text(warning, lang)))
    if r.get("not_comparable"):
        sep = t("run.reason.sep", lang)
        reasons = sep.join(t(f"run.reason.{k}", lang) for k in r["not_comparable"])
        lines.append("  " + t("run.not_comparable", lang, reasons=reasons))
    for note in r.get("notes") or []:
        lines.append("  " + t("run.note", lang, note=note))
    if r.get("max_batch") and r["max_batch"].get("stopped"):
        why = measurement_text(str(r["max_batch"]["stopped"]), lang)
        lines.append("  " + t("run.search_stopped", lang, why=why))
    if r.get("run_id"):
        lines.append("  " + t("run.run_id", lang, run_id=r["run_id"]))
    return "\n".join(lines)


def format_results(results: list[dict[str, Any]], workloads: list[Workload], gpu: GpuSpec | None,
                   lang: str = "en") -> str:
    parts = [format_one(r, w, gpu, lang) for r, w in zip(results, workloads, strict=True)]
    if len(results) > 1:
        lines = []
        for r in results[1:]:
            c = r["comparison"]
            if c["memory_saving"] is None and c["speedup"] is None:
                lines.append(t("run.compare.incomplete", lang, precision=r["precision"],
                               baseline=c["baseline"]))
                continue
            saving = c["memory_saving"]
            mem = (
                t("run.compare.less" if saving >= 0 else "run.compare.more", lang, pct=_pct(-saving),
                  bytes=format_bytes(abs(c["memory_saved_bytes"])))
                if saving is not None
                else "-"
            )
            speed = f"{c['speedup']:.2f}x" if c["speedup"] is not None else "-"
            lines.append(t("run.compare", lang, precision=r["precision"], baseline=c["baseline"], memory=mem,
                           speedup=speed))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
