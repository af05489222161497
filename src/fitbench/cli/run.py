"""`fitbench run`: measure a workload for real, beside the estimate, and keep it in the history.

The parent process imports no framework: each measurement runs in a fresh child process
(fitbench.measure.runner), the device default is decided through NVML, and the estimate is
plain arithmetic. This module only orchestrates and formats.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from fitbench.records.measurement import Measurement
from fitbench.records.run import RunRecord
from fitbench.records.sections import MaxBatchCheck, MaxBatchSearch
from fitbench.results.agreement import (
    HostEstimate,
    error_vs_estimate,
    estimate_for_host,
    max_batch_not_comparable,
    measured_speed,
    not_comparable,
)
from fitbench.results.assemble import assemble_run_record
from fitbench.workloads.workload import Workload

if TYPE_CHECKING:
    from fitbench.measure.search import SearchResult
    from fitbench.measure.search_bounds import SearchBounds

# `fitbench check` takes the error computation from here.
__all__ = ["error_vs_estimate", "register", "run_command"]

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
        "--compile",
        dest="compile_step",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --exec tuned (PyTorch): torch.compile the training or inference step's forward "
        "and loss (inductor) before the CUDA graph is captured, fusing its small kernels; tens of "
        "seconds once per run; falls back to the uncompiled step with a warning (default: on with "
        "--exec tuned on a CUDA GPU with Triton, the step the estimate models; --no-compile measures "
        "the uncompiled CUDA-graph step; generation compiles its decode step either way)",
    )
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
    from fitbench.backends import backend_installed, entry, installed_backends

    if name is not None:
        if not backend_installed(name):
            extra = entry(name).extra
            raise FitbenchError(
                f"the {name} backend is not installed",
                f"pip install 'fitbench[{extra}]'",
                message_zh=f"{name} 后端没有安装",
                hint_zh=f"pip install 'fitbench[{extra}]'",
            )
        return name
    installed = installed_backends()
    if not installed:
        raise FitbenchError(
            t("install.no_framework", lang),
            t("install.no_framework_hint", lang),
            message_zh=t("install.no_framework", "zh"),
            hint_zh=t("install.no_framework_hint", "zh"),
        )
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
        raise FitbenchError(
            f"unknown device '{device}'",
            "use cpu, cuda or cuda:N",
            message_zh=f"未知的设备 '{device}'",
            hint_zh="请使用 cpu、cuda 或 cuda:N",
        )
    if device.startswith("cuda"):
        present = _cuda_present()
        if present is False:
            raise FitbenchError(
                "no CUDA GPU found (the NVIDIA driver reports none)",
                "use --device cpu",
                message_zh="没有找到 CUDA GPU(NVIDIA 驱动报告没有 GPU)",
                hint_zh="请使用 --device cpu",
            )
        count = nvml.device_count()
        index = nvml.cuda_index(device) or 0
        if count is not None and index >= count:
            raise FitbenchError(
                f"no CUDA device {index}: {count} found",
                f"use --device cuda:0 … cuda:{count - 1}",
                message_zh=f"没有 CUDA 设备 {index}:只找到 {count} 块",
                hint_zh=f"请使用 --device cuda:0 … cuda:{count - 1}",
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
        message, hint = exc.text("zh")
        reason_zh = f"{message}({hint})" if hint else message
        return None, {"key": "run.note.no_estimate", "reason": str(exc), "reason_zh": reason_zh}


# -- derived numbers ------------------------------------------------------------------------------
def name_rates(m: Measurement, workload: Workload) -> Measurement:
    """Generation measures two token rates: decode (what the estimate's tokens/s is) and end to end
    (the whole generate call, prefill included; `tokens_per_second`). Both get explicit names."""
    if workload.is_generation and "end_to_end_tokens_per_second" not in m.present:
        return m.with_values(end_to_end_tokens_per_second=m.tokens_per_second)
    return m


def _speed_key(m: Measurement, workload: Workload) -> float | None:
    """A 'higher is faster' figure for speed-ups."""
    if workload.is_generation:
        return m.decode_rate(workload.batch_size) or m.tokens_per_second
    return 1.0 / m.step_seconds if m.step_seconds else None


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Memory saving and speed-up of one precision against the first (None where either did not run)."""

    baseline: str
    memory_saving: float | None = None
    memory_saved_bytes: int | None = None
    speedup: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def comparison(base: Measurement, other: Measurement, workload: Workload, base_precision: str) -> Comparison:
    """Memory saving and speed-up of `other` against `base`."""
    if not (base.completed and other.completed):
        return Comparison(baseline=base_precision)
    pb, po = base.peak_memory_bytes, other.peak_memory_bytes
    saving = (1 - po / pb, pb - po) if pb and po is not None else (None, None)
    sb, so = _speed_key(base, workload), _speed_key(other, workload)
    return Comparison(
        baseline=base_precision,
        memory_saving=saving[0],
        memory_saved_bytes=saving[1],
        speedup=so / sb if sb and so else None,
    )


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """One precision's answer: the stored record, and what only the terminal and --json show."""

    record: RunRecord
    workload: Workload
    max_batch: MaxBatchCheck | None = None
    notes: tuple[str, ...] = ()
    comparable: bool | None = None
    not_comparable: tuple[str, ...] = ()
    comparison: Comparison | None = None

    @property
    def measurement(self) -> Measurement:
        assert self.record.measurement is not None
        return self.record.measurement

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `fitbench run --json` (its field names are documented in the README)."""
        r = self.record
        out: dict[str, Any] = {
            "precision": self.workload.precision,
            "workload": dict(r.workload),
            "estimate": r.estimate.to_dict() if r.estimate is not None else None,
            "measurement": self.measurement.to_dict(),
            "error_vs_estimate": dict(r.error_vs_estimate),
            "diagnosis": r.diagnosis.to_dict() if r.diagnosis is not None else None,
            "host_speed_ratio": r.host_speed_ratio,
            "estimate_reference_host": (
                dict(r.estimate_reference_host) if r.estimate_reference_host is not None else None
            ),
            "run_id": r.run_id,
        }
        if self.max_batch is not None:
            out["max_batch"] = self.max_batch.to_dict()
        if self.notes:
            out["notes"] = list(self.notes)
        out["comparable"] = self.comparable
        out["not_comparable"] = list(self.not_comparable)
        if self.comparison is not None:
            out["comparison"] = self.comparison.to_dict()
        return out


# -- the command ----------------------------------------------------------------------------------
def refuse_unmeasurable_storage(workload: Workload) -> None:
    """The backends build weights in the precision's dtype (bitsandbytes for int8/int4) and a KV
    cache in the compute dtype: a weight format or a KV cache dtype they cannot build is refused
    here, before minutes are spent, instead of measuring something else."""
    fmt = workload.weights
    if fmt is not None:
        raise FitbenchError(
            f"fitbench run cannot build {fmt.describe()} weights (the estimate covers them)",
            "use --precision int8 or int4 (bitsandbytes) to measure quantized weights, or "
            "--weights none for the unquantized model; benchmarks/quant_gpu.py measures fp8 "
            "block-scaled weights",
            message_zh=f"fitbench run 无法构建 {fmt.describe()} 权重(估算可以覆盖它们)",
            hint_zh=(
                "实测量化权重请使用 --precision int8 或 int4(bitsandbytes)"
                ",实测未量化模型请用 --weights none;benchmarks/quant_gpu.py "
                "可实测 fp8 分块缩放权重"
            ),
        )
    if workload.kv_cache is not None and workload.kv_cache != _compute_kv_dtype(workload):
        raise FitbenchError(
            f"fitbench run keeps the KV cache in the compute dtype, not {workload.kv_cache}",
            "drop --kv-cache to measure; `fitbench estimate --kv-cache` gives its memory",
            message_zh=f"fitbench run 按计算精度保存 KV 缓存,不支持 {workload.kv_cache}",
            hint_zh="去掉 --kv-cache 即可实测;`fitbench estimate --kv-cache` 给出其显存占用",
        )


def refuse_compile_without_tuned_torch(exec_mode: str, backend: str) -> None:
    """--compile compiles the tuned PyTorch step; elsewhere it would silently do nothing."""
    if exec_mode != "tuned":
        raise FitbenchError(
            "--compile compiles the tuned step",
            "add --exec tuned (which compiles by default on a CUDA GPU), or drop --compile",
            message_zh="--compile 编译的是 tuned 步骤",
            hint_zh="请加上 --exec tuned(在 CUDA GPU 上默认即编译),或去掉 --compile",
        )
    if framework_of(backend) == "paddle":
        raise FitbenchError(
            "--compile compiles PyTorch's tuned step; the paddle backend has none",
            "drop --compile, or use --backend torch",
            message_zh="--compile 编译的是 PyTorch 的 tuned 步骤;paddle 后端没有这一步",
            hint_zh="请去掉 --compile,或使用 --backend torch",
        )


def _compute_kv_dtype(workload: Workload) -> str:
    p = workload.precision_info
    return p.compute if p.activation_bytes == 2 else "fp32"


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """What `fitbench run` measures, where, and which card's estimate it compares with."""

    workloads: list[Workload]
    backend: str
    device: str
    gpu: GpuSpec | None
    gpu_note: dict[str, str] | None  # a message key and its values (note_text)
    options: Any  # RunOptions (imported late: the backends' base module)


def run_command(args: argparse.Namespace) -> int:
    lang = resolve_lang(getattr(args, "lang", None))
    plan = _plan(args, lang)
    from fitbench.measure.progress import should_show

    show = should_show(args.progress)
    store = HistoryStore(args.db, enabled=not args.no_history)
    try:
        outcomes = [_run_one(w, plan, args, store, show, lang) for w in plan.workloads]
    finally:
        store.close()
    outcomes = _compare_precisions(outcomes)
    if args.json:
        results = [o.to_dict() for o in outcomes]
        print_json(results[0] if len(results) == 1 else results)
    else:
        print(format_results(outcomes, plan.gpu, lang))
    return 0 if all(o.measurement.is_verdict for o in outcomes) else 1


def _plan(args: argparse.Namespace, lang: str) -> RunPlan:
    """Every check that can fail before minutes are spent, in the order a user fixes them."""
    from fitbench.backends.base import RunOptions

    workloads = [workload_from_args(args, precision=p) for p in precision_list(args.precision)]
    for w in workloads:
        refuse_unmeasurable_storage(w)
    backend = pick_backend(args.backend, lang)
    if args.emulate is not None and _cuda_present() is False:
        # Said before the device is chosen: "use --device cuda" then "no GPU, use --device cpu"
        # would send the user round in a circle.
        raise FitbenchError(
            f"--emulate {args.emulate} needs a CUDA GPU to cap, and this machine has none",
            f"`fitbench estimate WORKLOAD --gpu {args.emulate}` says without a GPU whether it fits that card",
            message_zh=f"--emulate {args.emulate} 需要一块 CUDA GPU 来限制显存,而这台机器没有",
            hint_zh=(
                f"`fitbench estimate WORKLOAD --gpu {args.emulate}` 无需 GPU 即可判断能否在该显卡上运行"
            ),
        )
    if args.compile_step:
        refuse_compile_without_tuned_torch(args.exec_mode, backend)
    device = pick_device(args.device)
    if args.data is not None and not os.path.exists(args.data):
        raise FitbenchError(
            f"dataset path {args.data} does not exist",
            "pass the CIFAR-10 or aclImdb path",
            message_zh=f"数据集路径 {args.data} 不存在",
            hint_zh="请传入 CIFAR-10 或 aclImdb 的路径",
        )
    if args.max_batch and any(w.gpus > 1 for w in workloads):
        raise FitbenchError(
            "--max-batch searches one GPU",
            "drop --gpus or --max-batch",
            message_zh="--max-batch 只在一块 GPU 上搜索",
            hint_zh="去掉 --gpus 或 --max-batch",
        )
    limit = _emulation_limit(args, device)
    gpu, gpu_note = _compare_card(args, device)
    options = RunOptions(
        device=device,
        exec_mode=args.exec_mode,
        data=str(Path(args.data).resolve()) if args.data else None,
        memory_limit_bytes=limit,
        compile_step=args.compile_step,
    )
    return RunPlan(
        workloads=workloads, backend=backend, device=device, gpu=gpu, gpu_note=gpu_note, options=options
    )


def _emulation_limit(args: argparse.Namespace, device: str) -> int | None:
    """The memory cap of --emulate (None without it); the emulated card becomes the one compared
    with unless --gpu or --gpu-spec names another."""
    if args.emulate is None:
        return None
    from fitbench.catalog import lookup_gpu
    from fitbench.catalog.spec import is_spec

    if not device.startswith("cuda"):
        raise FitbenchError(
            "--emulate caps GPU memory and needs a CUDA device",
            "use --device cuda",
            message_zh="--emulate 用于限制 GPU 显存,需要 CUDA 设备",
            hint_zh="请使用 --device cuda",
        )
    emulated = lookup_gpu(args.emulate)
    if args.gpu is None and args.gpu_spec is None:
        args.gpu_spec = args.emulate if is_spec(args.emulate) else None
        args.gpu = None if args.gpu_spec else emulated.id
    return emulated.usable_bytes


def _compare_card(args: argparse.Namespace, device: str) -> tuple[GpuSpec | None, dict[str, str] | None]:
    """The card whose estimate the measurement is held against, or a note saying why there is none."""
    if args.gpu is not None and args.gpu_spec is not None:
        raise FitbenchError(
            "--gpu and --gpu-spec both name the card to compare with",
            "give one of them",
            message_zh="--gpu 和 --gpu-spec 都指定了用于比较的显卡",
            hint_zh="两者只能给一个",
        )
    if args.gpu_spec is not None:
        from fitbench.catalog import lookup_gpu

        return lookup_gpu(args.gpu_spec, spec=True), None
    return pick_gpu(args.gpu, device)


def _run_one(
    workload: Workload, plan: RunPlan, args: argparse.Namespace, store: HistoryStore, show: bool, lang: str
) -> RunOutcome:
    """Estimate, measure (and search the largest batch), store, and say how the two compare."""
    from fitbench.measure.progress import Progress

    # The estimate describes the workload as the exec mode runs it (estimate.execution).
    est, est_note = estimate_for(workload, plan.gpu, plan.backend, args.exec_mode)
    name = t("cell.tiny_name", lang, name=workload.name) if workload.tiny else workload.name
    with Progress(enabled=show, label=f"{name} {workload.precision}", lang=lang) as progress:
        m = Measurement.from_dict(_measure(workload, plan.backend, plan.options, args, progress))
        if m.error_type == "FitbenchError" and len(plan.workloads) == 1:
            raise FitbenchError(
                m.error or "the measurement failed",
                m.hint,
                message_zh=m.extra.get("error_zh")
                or measurement_text(m.error or "the measurement failed", "zh"),
                hint_zh=m.extra.get("hint_zh"),
            )
        searched = None
        if args.max_batch and m.is_verdict:
            searched = _max_batch(workload, plan.backend, plan.options, est, args, progress)
            result, bounds = searched
            m = m.with_values(max_batch_search={**result.to_dict(), **bounds.to_dict()})
    m = name_rates(m, workload)
    host = _host_estimate(workload, plan, args.exec_mode, est, m)
    record = assemble_run_record(
        command="run",
        workload=workload,
        estimate=host.estimate if host is not None else None,
        measurement=m,
        gpu=plan.gpu,
        reference_estimate=host.reference if host is not None else None,
        host_speed_ratio=host.host_speed_ratio if host is not None else None,
    )
    record = dataclasses.replace(record, run_id=store.add(record))
    reasons = not_comparable(est, m, workload)
    return RunOutcome(
        record=record,
        workload=workload,
        max_batch=_max_batch_check(est, m, searched),
        notes=tuple(note_text(n, lang) for n in (plan.gpu_note, est_note) if n),
        comparable=None if est is None else not reasons,
        not_comparable=tuple(reasons),
    )


def _host_estimate(
    workload: Workload, plan: RunPlan, exec_mode: str, est: Any, m: Measurement
) -> HostEstimate | None:
    """The estimate for the host that measured `m` (the one made before the run, for the reference
    host, where the run has no probe); None without an estimate."""
    if est is None or plan.gpu is None:
        return None
    return estimate_for_host(
        workload, plan.gpu, m, framework=framework_of(plan.backend), exec_mode=exec_mode, reference=est
    )


def _max_batch_check(
    est: Any, m: Measurement, searched: tuple[SearchResult, SearchBounds] | None
) -> MaxBatchCheck | None:
    """The search's result beside the estimate's largest batch, and whether the two compare
    (`comparable` None without an estimate; `not_comparable` the reasons when they do not)."""
    if searched is None:
        return None
    result, bounds = searched
    reasons = max_batch_not_comparable(m) if est is not None else []
    return MaxBatchCheck(
        estimated=est.max_batch_size if est is not None else None,
        search=MaxBatchSearch.from_dict(result.to_dict()),
        capped=bounds.capped,
        uncapped_start=bounds.uncapped_start,
        memory_bytes=bounds.memory_bytes,
        budget_bytes=bounds.budget_bytes,
        comparable=None if est is None else not reasons,
        not_comparable=tuple(reasons),
    )


def _compare_precisions(outcomes: list[RunOutcome]) -> list[RunOutcome]:
    """With a precision list, each run against the first (the first against itself)."""
    if len(outcomes) < 2:
        return outcomes
    base = outcomes[0]
    return [
        dataclasses.replace(
            o, comparison=comparison(base.measurement, o.measurement, o.workload, base.workload.precision)
        )
        for o in outcomes
    ]


def _measure(workload: Workload, backend: str, options: Any, args: argparse.Namespace, progress: Any) -> dict:
    """One measurement: a fresh child process, or one per GPU through the distributed launcher."""
    common = {
        "timeout_s": args.timeout,
        "min_steps": args.min_steps,
        "warmup": args.warmup,
        "progress": progress,
    }
    if workload.gpus > 1:
        from fitbench.measure.distributed import measure_distributed

        return measure_distributed(workload, backend, options, **common)
    from fitbench.measure.runner import measure

    return measure(workload, backend, options, min_seconds=args.min_seconds, **common)


def _max_batch(
    workload: Workload, backend: str, options: Any, est: Any, args: argparse.Namespace, progress: Any
) -> tuple[SearchResult, SearchBounds]:
    """Search the largest batch from bounds sized for this device's memory (measure.search_bounds)."""
    from fitbench.measure.search import find_max_batch
    from fitbench.measure.search_bounds import local_memory, search_bounds

    bounds = search_bounds(
        workload,
        estimated=est.max_batch_size if est is not None else None,
        card=est.gpu if est is not None else None,
        batch_limit=args.batch_limit,
        memory=local_memory(options.device, options.memory_limit_bytes),
        framework=framework_of(backend),
        exec_mode=args.exec_mode,
    )
    start, limit = bounds.start, bounds.limit
    progress(
        {
            "phase": "max-batch search",
            "detail": f"from {start}, at most {limit}",
            "detail_key": "progress.search_range",
            "start": start,
            "limit": limit,
        }
    )
    result = find_max_batch(
        workload,
        backend,
        options,
        start=start,
        limit=limit,
        timeout_s=args.timeout,
        progress=progress,
    )
    return result, bounds


# -- human output ---------------------------------------------------------------------------------
def note_text(note: dict[str, str], lang: str) -> str:
    """A note kept as its message key and values, in the reader's language; a value `x` may have its
    Chinese beside it as `x_zh` (an error's text, which is not in the catalogue)."""
    values = {k: v for k, v in note.items() if k != "key" and not k.endswith("_zh")}
    if lang == "zh":
        values.update({k[:-3]: v for k, v in note.items() if k.endswith("_zh")})
    return t(note["key"], lang, **values)


def _status_line(m: Measurement, lang: str) -> str:
    """How a measurement ended: its status, and its message in the reader's language where fitbench
    worded it (an exception's own text is shown as the framework wrote it)."""
    return t(
        "run.status",
        lang,
        status=m.status if lang == "en" else status_label(m.status, lang),
        error=measurement_text(str(m.error), lang),
    )


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:+.0f}%"


def _speed_unit(workload: Workload) -> str:
    return {"images": "img/s", "tokens": "tok/s"}.get(workload.sample_unit, "seq/s")


def format_one(o: RunOutcome, gpu: GpuSpec | None, lang: str = "en") -> str:
    """One precision's result for the terminal: a title, the measured-vs-estimated table, then
    the diagnosis, warnings and notes."""
    m, est = o.measurement, o.record.estimate
    rows = _memory_rows(o, lang)
    rows += _generation_rows(o, lang) if o.workload.is_generation else _step_rows(o, lang)
    rows += _count_rows(o, lang)
    if not m.completed:
        rows = [x for x in rows if x[1] != "-"]
    lines = _title_lines(o, lang)
    if rows:
        est_head = (
            t("run.col.estimate_on", lang, gpu=gpu.id)
            if (est is not None and gpu is not None)
            else t("run.col.estimate", lang)
        )
        lines.append(_table(rows, est_head if est is not None else None, lang))
    return "\n".join(lines + _footer_lines(o, lang))


Row = list[str]


def _row(name: str, measured: str, estimated: str = "", err: float | None = None) -> Row:
    return [name, measured, estimated, _pct(err)]


def _title_lines(o: RunOutcome, lang: str) -> list[str]:
    from fitbench.advise.text import precision_shown

    m, w = o.measurement, o.workload
    tiny = f" ({t('check.variant_tiny', lang)}: {t('run.smoke', lang)})" if w.tiny else ""
    precision = precision_shown(m.precision_requested, m.precision_in_effect, lang)
    lines = [
        t(
            "run.title",
            lang,
            name=w.name,
            tiny=tiny,
            backend=m.backend,
            version=m.framework_version or "",
            device=m.device_name or m.device,
            precision=precision,
            batch=w.batch_size,
            exec_mode=m.exec_mode,
        )
    ]
    if w.tiny:
        lines.append("  " + t("run.smoke_test", lang, name=w.name))
    dist = m.distributed
    if dist:
        lines.append(
            "  "
            + t(
                "run.distributed",
                lang,
                nproc=dist.nproc,
                launcher=dist.launcher,
                group=dist.process_group,
                strategy=dist.strategy,
                per_gpu=dist.per_gpu_batch_size,
                total=dist.global_batch_size,
            )
        )
    if not m.completed:
        lines.append("  " + _status_line(m, lang))
        if m.hint:
            lines.append("  " + t("run.hint", lang, hint=m.hint))
    return lines


def _estimated(o: RunOutcome, text: str) -> str:
    """An estimate's cell: empty when there is no estimate."""
    return text if o.record.estimate is not None else ""


def _memory_rows(o: RunOutcome, lang: str) -> list[Row]:
    m, e, errors = o.measurement, o.record.estimate, o.record.error_vs_estimate
    peak = "-"
    if m.peak_memory_bytes:
        peak = f"{format_bytes(m.peak_memory_bytes)} ({m.peak_memory_source or ''})"
    rows = [
        _row(
            t("run.row.peak_memory", lang),
            peak,
            _estimated(o, format_bytes(e.peak_memory_bytes if e else None)),
            errors.get("peak_memory"),
        )
    ]
    if m.peak_allocated_bytes is not None:
        rows.append(
            _row(
                t("run.row.allocator_peak", lang),
                t(
                    "run.cell.allocated",
                    lang,
                    allocated=format_bytes(m.peak_allocated_bytes),
                    reserved=format_bytes(m.peak_reserved_bytes),
                ),
            )
        )
    if m.cuda_context_bytes is not None:
        rows.append(_row(t("run.row.cuda_context", lang), format_bytes(m.cuda_context_bytes)))
    rows.append(_row(t("run.row.load", lang), format_seconds(m.load_seconds)))
    return rows


def _generation_rows(o: RunOutcome, lang: str) -> list[Row]:
    from fitbench.advise.text import speed_figure

    m, e, errors = o.measurement, o.record.estimate, o.record.error_vs_estimate
    return [
        _row(t("run.row.memory_after_load", lang), format_bytes(m.memory_after_load_bytes)),
        _row(
            t("run.row.prefill", lang),
            _with_spread(format_seconds(m.prefill_seconds), m, "prefill_seconds", lang),
            _estimated(o, format_seconds(e.prefill_seconds if e else None)),
            errors.get("prefill_seconds"),
        ),
        _row(
            t("run.row.decode", lang),
            _with_spread(
                format_rate(measured_speed(m, o.workload)[1], "tok/s"), m, speed_figure(m, o.workload), lang
            ),
            _estimated(o, format_rate(e.tokens_per_second if e else None, "tok/s")),
            errors.get("tokens_per_second"),
        ),
        _row(
            t("run.row.end_to_end", lang),
            t(
                "run.cell.per_generate",
                lang,
                rate=format_rate(m.tokens_per_second, "tok/s"),
                time=_with_spread(format_seconds(m.step_seconds), m, "step_seconds", lang),
            ),
        ),
    ]


def _with_spread(text: str, m: Measurement, figure: str, lang: str) -> str:
    """A measured figure with its spread beside it ("12.3 ms ±1.8 %"), where the run took one."""
    from fitbench.advise.text import spread_text

    spread = spread_text(m, figure, lang)
    return f"{text} {spread}" if spread and text != "-" else text


def _step_rows(o: RunOutcome, lang: str) -> list[Row]:
    m, e, errors, w = o.measurement, o.record.estimate, o.record.error_vs_estimate, o.workload
    step = _with_spread(format_seconds(m.step_seconds), m, "step_seconds", lang)
    if m.steps:
        step = t("run.cell.steps", lang, time=step, p90=format_seconds(m.step_seconds_p90), steps=m.steps)
    unit = _speed_unit(w)
    rows = [
        _row(
            t("run.row.step", lang),
            step,
            _estimated(o, format_seconds(e.step_seconds if e else None)),
            errors.get("step_seconds"),
        ),
        _row(
            t("run.row.throughput", lang),
            format_rate(m.samples_per_second, unit),
            _estimated(o, format_rate(e.samples_per_second if e else None, unit)),
        ),
    ]
    if m.tokens_per_second is not None:
        est_tokens = e.tokens_per_second if e else None
        rows.append(
            _row(
                t("run.row.tokens", lang),
                format_rate(m.tokens_per_second, "tok/s"),
                format_rate(est_tokens, "tok/s") if est_tokens else "",
                errors.get("tokens_per_second"),
            )
        )
    if w.is_training:
        rows.append(_mfu_row(o, lang))
    if m.epoch_seconds is not None:
        rows.append(
            _row(
                t("run.row.epoch_smoke" if w.tiny else "run.row.epoch", lang),
                format_seconds(m.epoch_seconds),
                _estimated(o, format_seconds(e.epoch_seconds if e else None)),
            )
        )
    return rows


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def _mfu_row(o: RunOutcome, lang: str) -> Row:
    """Model FLOPs utilization of a training step: the estimate's model FLOPs over the measured
    step time and the card's dense peak (the diagnosis's `mfu`: a GPU run against its estimate),
    beside the estimated one."""
    d, e = o.record.diagnosis, o.record.estimate
    measured = d.mfu if d is not None and d.available else None
    return _row(t("run.row.mfu", lang), _share(measured), _estimated(o, _share(e.mfu if e else None)))


def _count_rows(o: RunOutcome, lang: str) -> list[Row]:
    """Parameters, and the largest batch when the run searched it."""
    m, e = o.measurement, o.record.estimate
    rows = []
    if m.params:
        estimated = f"{e.params:,}" if e and e.params else ""
        rows.append(_row(t("run.row.params", lang), f"{m.params:,}", estimated))
    mb = o.max_batch
    if mb is not None:
        found = mb.search.max_batch
        if found is None:
            text = t("run.cell.none_fits", lang)
        else:
            text = t("run.cell.limit", lang, n=found) if mb.search.reached_limit else str(found)
        estimated = str(mb.estimated) if mb.estimated else ""
        error = o.record.error_vs_estimate.get("max_batch")
        row = _row(t("run.row.max_batch", lang), text, estimated, error)
        if mb.not_comparable:
            row[3] = t("run.cell.not_comparable", lang)
        rows.append(row)
    return rows


def _table(rows: list[Row], est_head: str | None, lang: str) -> str:
    """Measured beside estimated (and the error), or measured alone without an estimate."""
    from fitbench.results.table import render_table

    if est_head is not None:
        head = ["", t("col.measured", lang), est_head, t("col.error", lang)]
        return render_table(head, rows, align="lrrr", indent="  ")
    return render_table(["", t("col.measured", lang)], [x[:2] for x in rows], align="ll", indent="  ")


def _footer_lines(o: RunOutcome, lang: str) -> list[str]:
    from fitbench.advise.diagnosis import format_diagnosis
    from fitbench.advise.text import spread_sentences

    lines = []
    diagnosis_line = format_diagnosis(o.record.diagnosis, lang)
    if diagnosis_line:
        lines.append(f"  {diagnosis_line}")
    lines += [
        "  " + t("run.warning", lang, warning=measurement_text(warning, lang))
        for warning in o.measurement.warnings
    ]
    lines += ["  " + sentence for sentence in spread_sentences(o.measurement, o.workload, lang)]
    host_line = _host_line(o, lang)
    if host_line:
        lines.append("  " + host_line)
    if o.not_comparable:
        reasons = t("run.reason.sep", lang).join(t(f"run.reason.{k}", lang) for k in o.not_comparable)
        lines.append("  " + t("run.not_comparable", lang, reasons=reasons))
    lines += ["  " + t("run.note", lang, note=note) for note in o.notes]
    lines += _max_batch_lines(o.max_batch, lang)
    if o.max_batch is not None and o.max_batch.search.stopped:
        why = measurement_text(o.max_batch.search.stopped, lang)
        lines.append("  " + t("run.search_stopped", lang, why=why))
    if o.record.run_id:
        lines.append("  " + t("run.run_id", lang, run_id=o.record.run_id))
    return lines


def _host_line(o: RunOutcome, lang: str) -> str | None:
    """That the estimate is for this machine's host, and the reference host's figure beside it."""
    r = o.record
    ratio, ref = r.host_speed_ratio, r.estimate_reference_host
    if ratio is None or ref is None:
        return None
    errors = ref.get("error_vs_estimate") or {}
    if o.workload.is_generation:
        figure, error = format_rate(ref.get("tokens_per_second"), "tok/s"), errors.get("tokens_per_second")
    else:
        figure, error = format_seconds(ref.get("step_seconds")), errors.get("step_seconds")
    return t("run.host_estimate", lang, ratio=f"{ratio:.2f}", reference=figure, error=_pct(error) or "-")


def _max_batch_lines(mb: MaxBatchCheck | None, lang: str) -> list[str]:
    """Why the search was capped, and why its result does not compare with the estimate."""
    from fitbench.core.units import format_bytes
    from fitbench.measure.search_bounds import HOST_RAM_SHARE

    if mb is None:
        return []
    lines = []
    if mb.capped:
        capped = t(
            f"run.search_capped.{mb.capped}",
            lang,
            start=mb.search.start,
            limit=mb.search.limit,
            uncapped=mb.uncapped_start,
            available=format_bytes(mb.memory_bytes),
            share=f"{HOST_RAM_SHARE:.0%}",
        )
        lines.append("  " + capped)
    if mb.not_comparable:
        sep = t("run.reason.sep", lang)
        reasons = sep.join(t(f"run.max_batch_reason.{k}", lang) for k in mb.not_comparable)
        lines.append("  " + t("run.max_batch_not_comparable", lang, reasons=reasons))
    return lines


def format_results(outcomes: list[RunOutcome], gpu: GpuSpec | None, lang: str = "en") -> str:
    parts = [format_one(o, gpu, lang) for o in outcomes]
    if len(outcomes) > 1:
        parts.append("\n".join(_comparison_line(o, lang) for o in outcomes[1:]))
    return "\n\n".join(parts)


def _comparison_line(o: RunOutcome, lang: str) -> str:
    c = o.comparison
    assert c is not None
    precision = o.workload.precision
    if c.memory_saving is None and c.speedup is None:
        return t("run.compare.incomplete", lang, precision=precision, baseline=c.baseline)
    saving = c.memory_saving
    mem = (
        t(
            "run.compare.less" if saving >= 0 else "run.compare.more",
            lang,
            pct=_pct(-saving),
            bytes=format_bytes(abs(c.memory_saved_bytes or 0)),
        )
        if saving is not None
        else "-"
    )
    speed = f"{c.speedup:.2f}x" if c.speedup is not None else "-"
    return t("run.compare", lang, precision=precision, baseline=c.baseline, memory=mem, speedup=speed)
