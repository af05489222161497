"""Parent side of a distributed measurement: N ranks through the framework's launcher, one result.

    torch    python -m torch.distributed.run --standalone --nproc-per-node N --max-restarts 0
                 -m fitbench.measure.dist_child REQUEST.json
    paddle   python -m paddle.distributed.launch --nproc_per_node N --max_restart 0 --log_dir DIR
                 [--devices 0,..,N-1] PYTHON -m fitbench.measure.dist_child REQUEST.json

As with the single-process runner (fitbench.measure.runner, whose request, environment,
progress and process helpers are reused here), this process imports no framework: it writes
the request, starts the launcher in its own process group, relays rank 0's progress, enforces
the timeout, and turns every way the job can end into one measurement dict with a status
ok | oom | error | timeout. Each rank writes its own result file; `merge_rank_results` folds
them into one measurement:

    per_rank            each rank's status, memory (every figure the child reads) and median step
    peak_memory_bytes   the largest rank's (what must fit on every card); likewise the allocator,
                        NVML and RSS figures
    step_seconds        median over steps of the slowest rank's time of each step (ranks step
                        in lockstep: a step ends when its last rank does)
    samples_per_second  global: data-parallel degree * per-GPU batch / step
                        (samples_per_second_per_gpu beside it)
    status              oom if any rank ran out of memory (a verdict), else error if any rank
                        failed or ended without a result, timeout if the job was stopped

Ranks run a fixed number of steps (min_steps; see fitbench.measure.dist_child for why a time
budget cannot be used). The GPU host settings in GPU_HOST_ENV are set for every rank.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fitbench.backends.base import RunOptions
from fitbench.core.names import ExecMode, Framework, Strategy
from fitbench.errors import FitbenchError
from fitbench.estimate.distributed import data_parallel_degree, global_batch_size
from fitbench.measure.runner import (
    DEFAULT_TIMEOUT_S,
    ProgressFn,
    ProgressReader,
    build_request,
    child_env,
    default_min_steps,
    default_warmup,
    empty_measurement,
    exit_text,
    kill_group,
    run_child,
    tail_text,
)
from fitbench.measure.timing import summarize
from fitbench.workloads.workload import Workload

# Always in the ranks' environment on GPU hosts: no NVLink SHARP / multicast buffers (they
# need fabric-manager support that shared machines may lack, and change NCCL's memory).
GPU_HOST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
LAUNCHERS = {Framework.TORCH: "torch.distributed.run", Framework.PADDLE: "paddle.distributed.launch"}
# After a timeout the launcher gets SIGTERM (it stops its ranks), then SIGKILL after this long.
LAUNCHER_GRACE_S = 15.0
STATUS_ORDER = ("oom", "error", "timeout")
PER_RANK_KEYS = (
    "status",
    "error",
    "device",
    "device_name",
    "peak_memory_bytes",
    "peak_memory_source",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "nvml_process_peak_bytes",
    "peak_rss_bytes",
    "memory_after_load_bytes",
    "cuda_context_bytes",
    "load_seconds",
    "steps",
    "step_seconds",
    "prefill_seconds",
)
MAX_KEYS = (
    "peak_memory_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "nvml_process_peak_bytes",
    "nvml_device_used_bytes",
    "peak_rss_bytes",
    "memory_after_load_bytes",
    "cuda_context_bytes",
    "load_seconds",
    "warmup_peak_allocated_bytes",
    "warmup_peak_reserved_bytes",
)


def unsupported(
    workload: Workload, backend_name: str, device: str, exec_mode: str = "default"
) -> FitbenchError | None:
    """Why this job cannot be measured with several processes, or None. Checked here before
    launching and again by every rank."""
    strategy = workload.strategy
    if backend_name not in LAUNCHERS:
        return FitbenchError(
            f"no distributed launcher for backend '{backend_name}'",
            "use torch or paddle",
            message_zh=f"后端 '{backend_name}' 没有分布式启动器",
            hint_zh="请使用 torch 或 paddle",
        )
    if exec_mode != ExecMode.DEFAULT and workload.is_training:
        # A whole step captured as one graph leaves no module call for DDP or FSDP to hook.
        return FitbenchError(
            f"multi-GPU training runs measure --exec default, not --exec {exec_mode}",
            "drop --exec, or measure one GPU",
            message_zh=f"多 GPU 训练只实测 --exec default,不支持 --exec {exec_mode}",
            hint_zh="去掉 --exec,或只实测一块 GPU",
        )
    if strategy == Strategy.TP:
        return FitbenchError(
            "tensor-parallel runs are not measured",
            "estimate them with `fitbench estimate --gpus N --strategy tp`, "
            "or measure --strategy ddp or fsdp-full-shard",
            message_zh="不实测张量并行运行",
            hint_zh=(
                "请用 `fitbench estimate --gpus N --strategy tp` 估算,或实测 "
                "--strategy ddp 或 fsdp-full-shard"
            ),
        )
    if backend_name == Framework.TORCH and strategy in (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3):
        return FitbenchError(
            f"--strategy {strategy} is DeepSpeed's ZeRO: fitbench run does not launch it",
            "measure PyTorch's own sharding with --strategy fsdp-shard-grad-op or "
            "fsdp-full-shard, or `fitbench estimate` the DeepSpeed job",
            message_zh=f"--strategy {strategy} 是 DeepSpeed 的 ZeRO:fitbench run 不启动它",
            hint_zh=(
                "可用 --strategy fsdp-shard-grad-op 或 fsdp-full-shard "
                "实测 PyTorch 自带的分片,或用 `fitbench estimate` 估算 "
                "DeepSpeed 任务"
            ),
        )
    if backend_name == "paddle" and strategy == Strategy.FSDP_SHARD_GRAD_OP:
        return FitbenchError(
            "Paddle has no SHARD_GRAD_OP sharding",
            "use --strategy zero2 (Paddle's group sharding of optimizer state, gradients)",
            message_zh="Paddle 没有 SHARD_GRAD_OP 分片",
            hint_zh="请使用 --strategy zero2(Paddle 对优化器状态和梯度的分组分片)",
        )
    if not workload.is_training and strategy not in (Strategy.DDP, Strategy.ZERO1, Strategy.ZERO2):
        return FitbenchError(
            f"sharded inference (--strategy {strategy}) is not measured",
            "use --strategy ddp for one replica per GPU, or `fitbench estimate`",
            message_zh=f"不实测分片推理(--strategy {strategy})",
            hint_zh="每块 GPU 一个副本请使用 --strategy ddp,或用 `fitbench estimate` 估算",
        )
    if workload.peft:
        return FitbenchError(
            "multi-GPU runs of LoRA/QLoRA fine-tuning are not measured",
            "measure one GPU (--gpus 1)",
            message_zh="不实测 LoRA/QLoRA 微调的多 GPU 运行",
            hint_zh="请只实测一块 GPU(--gpus 1)",
        )
    on_gpu = device.startswith("cuda")
    if backend_name == "paddle" and workload.is_training and strategy != Strategy.DDP and not on_gpu:
        return FitbenchError(
            f"Paddle's sharding (--strategy {strategy}) runs on GPUs only",
            "use --device cuda, or --strategy ddp on the CPU",
            message_zh=f"Paddle 的分片(--strategy {strategy})只在 GPU 上运行",
            hint_zh="请使用 --device cuda,或在 CPU 上使用 --strategy ddp",
        )
    return None


def _first_gpu(device: str) -> int:
    _, _, index = device.partition(":")
    return int(index) if index else 0


def launcher_command(
    backend_name: str, nproc: int, request_path: Path, *, device: str, log_dir: Path
) -> list[str]:
    """The launcher's command line: N ranks of fitbench.measure.dist_child, no restarts."""
    child = ["-m", "fitbench.measure.dist_child", str(request_path)]
    if backend_name == Framework.TORCH:
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(nproc),
            "--max-restarts",
            "0",
            *child,
        ]
    cmd = [
        sys.executable,
        "-m",
        "paddle.distributed.launch",
        "--nproc_per_node",
        str(nproc),
        "--max_restart",
        "0",
        "--log_dir",
        str(log_dir),
    ]
    if device.startswith("cuda"):
        first = _first_gpu(device)
        cmd += ["--devices", ",".join(str(first + i) for i in range(nproc))]
    # A launch "script" that is not a .py file is run as given: the interpreter, then -m.
    return [*cmd, sys.executable, *child]


def _check_gpus(device: str, nproc: int) -> None:
    if not device.startswith("cuda"):
        return
    from fitbench.measure import nvml

    count = nvml.device_count()
    need = _first_gpu(device) + nproc
    if count is not None and need > count:
        raise FitbenchError(
            f"{nproc} ranks from {device} need {need} GPUs; this machine has {count}",
            f"use --gpus {max(1, count - _first_gpu(device))} or fewer",
            message_zh=f"从 {device} 起的 {nproc} 个进程需要 {need} 块 GPU;这台机器只有 {count} 块",
            hint_zh=f"请使用 --gpus {max(1, count - _first_gpu(device))} 或更少",
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the launcher (it stops its ranks), then SIGKILL to whatever lingers: its group
    and the ranks torchrun starts in sessions of their own (kill_group finds them while the
    launcher is still unreaped)."""
    kill_group(proc, grace_s=LAUNCHER_GRACE_S)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def measure_distributed(
    workload: Workload,
    backend_name: str,
    options: RunOptions,
    *,
    nproc: int | None = None,
    timeout_s: float | None = None,
    min_steps: int | None = None,
    warmup: int | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Measure `workload` on `nproc` processes (default workload.gpus), one per GPU (or all on
    the CPU with gloo), through `backend_name`'s launcher. Returns one measurement dict with
    the single-process keys plus `per_rank` and `distributed` (see the module docstring).

    Raises FitbenchError before launching when the strategy cannot be measured or the machine
    has too few GPUs; after launching, every outcome is a status in the dict.
    """
    n = workload.gpus if nproc is None else int(nproc)
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
    steps = default_min_steps(workload) if min_steps is None else int(min_steps)
    warm = default_warmup(workload) if warmup is None else int(warmup)
    if n < 1 or steps < 1 or warm < 0 or timeout <= 0:
        raise ValueError("nproc and min_steps must be >= 1, warmup >= 0, timeout > 0")
    problem = unsupported(workload, backend_name, options.device, options.exec_mode)
    if problem is not None:
        raise problem
    _check_gpus(options.device, n)

    with tempfile.TemporaryDirectory(prefix="fitbench-dist-") as tmp:
        workdir = Path(tmp)
        request = build_request(
            workload,
            backend_name,
            options,
            min_steps=steps,
            min_seconds=0.0,
            warmup=warm,
            max_seconds=timeout,
            workdir=workdir,
        )
        request.update(
            rank_result_pattern=str(workdir / "result.rank{rank}.json"), nproc=n, collective_timeout_s=timeout
        )
        request_path = workdir / "request.json"
        request_path.write_text(json.dumps(request))
        log_dir = workdir / "logs"
        stderr_path = workdir / "stderr.txt"
        reader = ProgressReader(Path(request["progress_path"]), progress)
        env = {**child_env(), **GPU_HOST_ENV}
        if progress is not None:
            progress({"phase": "starting ranks", "ranks": n})
        # The launcher dies with this process; its ranks follow it.
        returncode, timed_out, wall = run_child(
            launcher_command(backend_name, n, request_path, device=options.device, log_dir=log_dir),
            workdir=workdir,
            env=env,
            timeout=timeout,
            reader=reader,
            stop=_stop,
        )
        per_rank = [_read_json(workdir / f"result.rank{r}.json") for r in range(n)]
        result = merge_rank_results(
            workload,
            backend_name,
            options,
            per_rank,
            timed_out=timed_out,
            timeout_s=timeout,
            phase=reader.last.get("phase"),
        )
        if result["status"] != "ok":
            tails = [tail_text(stderr_path)]
            tails += [f"[{p.name}]\n{tail_text(p, 1500)}" for p in sorted(log_dir.glob("workerlog.*"))]
            tail = "\n".join(t for t in tails if t)
            if tail:
                result["stderr_tail"] = tail[-8000:]
            if not timed_out and returncode and all(r is None for r in per_rank):
                result["error"] = f"the launcher ended without results ({exit_text(returncode)})"
        result["child_exit_code"] = returncode
        result["wall_seconds"] = round(wall, 3)
        return result


def _worst_status(per_rank: list[dict[str, Any] | None], timed_out: bool) -> tuple[str, int | None]:
    """(job status, the rank that decides it)."""
    for status in STATUS_ORDER:
        for r, res in enumerate(per_rank):
            if res is not None and res.get("status") == status:
                return status, r
    if timed_out:
        return "timeout", None
    missing = [r for r, res in enumerate(per_rank) if res is None]
    if missing:
        return "error", missing[0]
    return "ok", None


def merge_rank_results(
    workload: Workload,
    backend_name: str,
    options: RunOptions,
    per_rank: list[dict[str, Any] | None],
    *,
    timed_out: bool = False,
    timeout_s: float | None = None,
    phase: str | None = None,
) -> dict[str, Any]:
    """One measurement from the ranks' results (None for a rank that wrote none)."""
    out = empty_measurement(workload, backend_name, options)
    present = [r for r in per_rank if r is not None]
    lead = per_rank[0] if per_rank and per_rank[0] is not None else (present[0] if present else None)
    if lead is not None:
        out.update({k: v for k, v in lead.items() if k not in ("rank", "local_rank", "world_size")})
    out["per_rank"] = [
        {"rank": r, **({k: res.get(k) for k in PER_RANK_KEYS} if res is not None else {"status": "missing"})}
        for r, res in enumerate(per_rank)
    ]
    dp = data_parallel_degree(workload)
    notes = (lead or {}).get("backend_notes") or {}
    out["distributed"] = {
        "strategy": workload.strategy,
        "nproc": len(per_rank),
        "launcher": LAUNCHERS.get(backend_name),
        "process_group": (notes.get("distributed") or {}).get("process_group"),
        "per_gpu_batch_size": workload.batch_size,
        "global_batch_size": global_batch_size(workload),
        "data_parallel_degree": dp,
        "steps_fixed": True,
    }
    for key in MAX_KEYS:
        values = [r[key] for r in present if isinstance(r.get(key), int | float)]
        out[key] = max(values) if values else None
    warnings: list[str] = []
    for r in present:
        warnings += [w for w in r.get("warnings") or [] if w not in warnings]
    out["warnings"] = warnings

    status, deciding = _worst_status(per_rank, timed_out)
    out["status"] = status
    for key in ("oom_detail", "traceback", "error_type", "hint"):
        out.pop(key, None)
    if status == "ok":
        out["error"] = None
        _merge_timing(out, workload, present, dp)
    elif status == "timeout":
        within = f" within {timeout_s:g} s" if timeout_s is not None else ""
        out["error"] = f"no result{within} (phase: {phase or 'starting'}); the ranks were stopped"
    elif deciding is not None and per_rank[deciding] is not None:
        res = per_rank[deciding]
        assert res is not None
        out["error"] = f"rank {deciding}: {res.get('error')}"
        for key in ("oom_detail", "traceback", "error_type", "hint"):
            if res.get(key) is not None:
                out[key] = res[key]
    else:
        out["error"] = f"rank {deciding} ended without a result"
    return out


def _merge_timing(out: dict[str, Any], workload: Workload, ranks: list[dict[str, Any]], dp: int) -> None:
    """Step time of the job (the slowest rank of each step) and global throughput."""
    lists = [r.get("step_samples_seconds") or [] for r in ranks]
    count = min((len(s) for s in lists), default=0)
    if count == 0:
        return
    job = [max(s[i] for s in lists) for i in range(count)]
    stats = summarize(job)
    out.update(
        steps=count,
        step_seconds=stats.median,
        step_seconds_p90=stats.p90,
        step_seconds_mean=stats.mean,
        step_seconds_min=stats.min,
        step_samples_seconds=job,
    )
    out["step_seconds_per_rank"] = [r.get("step_seconds") for r in ranks]
    step = stats.median
    b = workload.batch_size
    if workload.is_generation:
        new = int(workload.new_tokens or 0)
        prefills = [r["prefill_seconds"] for r in ranks if isinstance(r.get("prefill_seconds"), int | float)]
        prefill = max(prefills) if prefills else None
        out["prefill_seconds"] = prefill
        out["tokens_per_second"] = dp * b * new / step
        out["samples_per_second"] = out["tokens_per_second"]
        out["tokens_per_second_per_gpu"] = b * new / step
        out["decode_seconds"] = out["decode_tokens_per_second"] = None
        if prefill is not None and step > prefill:
            decode = step - prefill
            out["decode_seconds"] = decode
            out["decode_tokens_per_second"] = dp * b * new / decode
            out["decode_tokens_per_second_per_sequence"] = new / decode
        return
    out["samples_per_second"] = dp * b / step
    out["samples_per_second_per_gpu"] = b / step
    if not workload.is_resnet and workload.seq_len:
        out["tokens_per_second"] = dp * b * workload.seq_len / step
    dataset = out.get("dataset_size") or workload.dataset_size
    if dataset:
        out["dataset_size"] = dataset
        out["epoch_seconds"] = step * math.ceil(dataset / (dp * b))
