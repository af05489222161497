"""One rank of a distributed measurement: `python -m fitbench.measure.dist_child REQUEST.json`.

fitbench.measure.distributed starts this module once per GPU through the framework's launcher
(torch.distributed.run or paddle.distributed.launch). Each rank runs the single-process
measurement of fitbench.measure.child unchanged (same phases, memory readings and statuses) on
a session built by the backend as usual and then wrapped for the strategy:

    torch   ddp    DistributedDataParallel (bucket_cap_mb 25, gradient_as_bucket_view False)
            fsdp-shard-grad-op  FSDP2 fully_shard(reshard_after_forward=False): SHARD_GRAD_OP
            fsdp-full-shard     FSDP2 fully_shard on every block and the root: FULL_SHARD
                   (FullyShardedDataParallel with the same wrap where fully_shard is missing)
            (zero1-3 name DeepSpeed's ZeRO, which is not launched: measure.distributed refuses)
    paddle  ddp    fleet.distributed_model / distributed_optimizer (DataParallel)
            zero1, zero2, zero3, fsdp-full-shard  paddle.distributed.sharding.group_sharded_parallel
                   at level os, os_g, p_g_os (GPUs only: Paddle's own restriction)

Inference and generation run one independent replica per rank (ddp, zero1, zero2). Each rank
writes its own result file (result.rank{R}.json beside the request); the parent merges them.

Two rules keep ranks from waiting on each other forever:
  * every rank runs the same fixed number of steps (the request's min_seconds is ignored and
    the time budget lifted): a collective needs every rank, so the stop rule cannot depend on
    a rank's own clock;
  * a rank whose measurement did not end "ok" exits with a non-zero code, so the launcher
    stops the others instead of leaving them blocked in a collective; a rank whose launcher
    disappears exits too.

The process group uses NCCL on CUDA and gloo on the CPU; the launcher's environment gives rank,
world size and rendezvous.
"""

# ruff: noqa: E402  (the launcher's pid is read before the other imports)
from __future__ import annotations

import os

# The launcher's pid, read before anything else this process does: a launcher killed while the
# rank starts up (imports, later torch) leaves it to init or a subreaper, and a pid read after
# that names the wrong process, which the watch below would then wait on for ever.
LAUNCHER_PID = os.getppid()

import datetime
import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fitbench.backends.base import Backend, RunOptions, Session
from fitbench.core.names import Framework, Strategy
from fitbench.errors import FitbenchError
from fitbench.measure.child import Measurement, write_json_atomic
from fitbench.measure.distributed import unsupported
from fitbench.workloads.workload import Workload

# A rank never stops on its own clock (see the module docstring); the parent's timeout rules.
NO_TIME_BUDGET_S = 1e9
PARENT_POLL_S = 0.5
FAILED_EXIT_CODE = 3

# Blocks wrapped as their own FSDP unit (transformers lists them in _no_split_modules;
# embeddings stay with the root, as the estimator assumes).
RESNET_BLOCKS = ("Bottleneck", "BasicBlock")
TORCH_SHARDED = ("fsdp-shard-grad-op", "fsdp-full-shard")
PADDLE_SHARDING_LEVELS = {"zero1": "os", "zero2": "os_g", "zero3": "p_g_os", "fsdp-full-shard": "p_g_os"}


@dataclass(frozen=True, kw_only=True)
class RankEnv:
    """Where this process sits in the job, from the launcher's environment variables."""

    rank: int
    world_size: int
    local_rank: int

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> RankEnv:
        env = os.environ if environ is None else environ
        if "RANK" in env and "WORLD_SIZE" in env:  # torch.distributed.run
            return cls(
                rank=int(env["RANK"]),
                world_size=int(env["WORLD_SIZE"]),
                local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
            )
        if "PADDLE_TRAINER_ID" in env:  # paddle.distributed.launch
            return cls(
                rank=int(env["PADDLE_TRAINER_ID"]),
                world_size=int(env.get("PADDLE_TRAINERS_NUM", "1")),
                local_rank=int(env.get("PADDLE_LOCAL_RANK", env.get("PADDLE_RANK_IN_NODE", "0"))),
            )
        raise FitbenchError(
            "not started by a distributed launcher (no RANK / PADDLE_TRAINER_ID)",
            "run it through fitbench.measure.distributed.measure_distributed",
            message_zh="不是由分布式启动器启动的(没有 RANK / PADDLE_TRAINER_ID)",
            hint_zh="请通过 fitbench.measure.distributed.measure_distributed 运行",
        )


def rank_device(device: str, local_rank: int) -> str:
    """'cpu' for every rank; 'cuda' / 'cuda:K' -> the (K + local_rank)-th GPU."""
    if not device.startswith("cuda"):
        return device
    _, _, index = device.partition(":")
    return f"cuda:{(int(index) if index else 0) + local_rank}"


# ---------------------------------------------------------------------------------------------
# torch


def _torch_init(device: str, timeout_s: float) -> str:
    import torch
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    if dist.is_initialized():
        return dist.get_backend()
    if device.startswith("cuda"):
        dev = torch.device(device)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", timeout=timeout, device_id=dev)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    return str(dist.get_backend())


def _torch_blocks(model: Any) -> list[Any]:
    names = {n for n in (getattr(model, "_no_split_modules", None) or ()) if not n.endswith("Embeddings")}
    names.update(RESNET_BLOCKS)
    return [m for m in model.modules() if type(m).__name__ in names]


def _torch_loss_module(model: Any, loss_fn: Any) -> Any:
    """An nn.Module whose forward is the session's loss: DDP and FSDP hook module calls, and a
    ResNet's forward is a function of the model's parts (resnet_forward), not model(...)."""
    from torch import nn

    class LossModule(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, batch: dict[str, Any]) -> Any:
            return loss_fn(batch)

    return LossModule()


def _torch_fully_shard(module: Any, strategy: str, device: str) -> tuple[Any, str]:
    """FSDP2 on every block, then the root; FSDP1 with the same wrap where FSDP2 is missing."""
    import torch

    reshard = strategy != Strategy.FSDP_SHARD_GRAD_OP  # SHARD_GRAD_OP: keep gathered weights through backward
    fully_shard = None
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        try:
            from torch.distributed._composable.fsdp import fully_shard
        except ImportError:
            fully_shard = None
    if fully_shard is not None:
        for block in _torch_blocks(module.model):
            fully_shard(block, reshard_after_forward=reshard)
        fully_shard(module, reshard_after_forward=reshard)
        return module, "torch.distributed.fsdp.fully_shard (FSDP2)"
    from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    classes = {type(b) for b in _torch_blocks(module.model)}
    wrapped = FullyShardedDataParallel(
        module,
        auto_wrap_policy=ModuleWrapPolicy(classes) if classes else None,
        sharding_strategy=ShardingStrategy.FULL_SHARD if reshard else ShardingStrategy.SHARD_GRAD_OP,
        device_id=torch.device(device) if device.startswith("cuda") else None,
        use_orig_params=True,
    )
    return wrapped, "FullyShardedDataParallel (FSDP1)"


def _torch_wrap(session: Any, strategy: str) -> dict[str, Any]:
    """Wrap a torch TrainSession in place; return what was done (for the notes).

    The session keeps its own step (zero_grad, autocast, GradScaler, optimizer step): its loss
    function is routed through the wrapped module and its optimizer rebuilt over the wrapped
    parameters (FSDP replaces them by shards; the old optimizer must not keep the full ones).
    """
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from fitbench.backends.torch.session import make_optimizer

    device = str(session.device)
    module = _torch_loss_module(session.model, session._loss)
    info: dict[str, Any] = {}
    w = session.workload
    if strategy == Strategy.DDP:
        ids = [session.device.index] if session.device.type == "cuda" else None
        wrapped = DistributedDataParallel(module, device_ids=ids)
        info["wrapper"] = "torch.nn.parallel.DistributedDataParallel"
        info["bucket_cap_mb"] = 25
        info["gradient_as_bucket_view"] = False
        session.optimizer = make_optimizer(w.optimizer, list(wrapped.parameters()), w.optimizer_impl)
    else:
        info["fsdp_units"] = len(_torch_blocks(session.model)) + 1  # counted before wrapping renames them
        wrapped, how = _torch_fully_shard(module, strategy, device)
        info["wrapper"] = how
        info["reshard_after_forward"] = strategy != Strategy.FSDP_SHARD_GRAD_OP
        session.optimizer = make_optimizer(w.optimizer, list(wrapped.parameters()), w.optimizer_impl)
        if session.scaler is not None and "FSDP1" in how:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            session.scaler = ShardedGradScaler(session.device.type)
    # TrainSession.step calls self._loss(batch): an instance attribute takes the method's place.
    session._loss = wrapped
    info["local_parameters"] = sum(
        int(p.to_local().numel()) if hasattr(p, "to_local") else int(p.numel()) for p in wrapped.parameters()
    )
    info["torch"] = str(torch.__version__)
    return info


def _torch_finish() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# paddle


def _paddle_init() -> str:
    from paddle.distributed import fleet

    fleet.init(is_collective=True)  # reads the PADDLE_* variables the launcher set
    return os.environ.get("PADDLE_DISTRI_BACKEND", "nccl")


def _paddle_wrap(session: Any, strategy: str) -> dict[str, Any]:
    """Wrap a PaddleSession in place: its step calls self.model(...), self.optimizer and
    self.scaler, so replacing them is enough."""
    from paddle.distributed import fleet

    if strategy == Strategy.DDP:
        session.model = fleet.distributed_model(session.model)
        session.optimizer = fleet.distributed_optimizer(session.optimizer)
        if session.scaler is not None:
            session.scaler = fleet.distributed_scaler(session.scaler)
        return {"wrapper": "paddle.distributed.fleet.distributed_model (DataParallel)"}
    from paddle.distributed.sharding import group_sharded_parallel

    level = PADDLE_SHARDING_LEVELS[strategy]
    session.model, session.optimizer, session.scaler = group_sharded_parallel(
        session.model, session.optimizer, level, scaler=session.scaler
    )
    return {"wrapper": f"paddle.distributed.sharding.group_sharded_parallel(level='{level}')"}


# ---------------------------------------------------------------------------------------------
# the rank's backend and measurement


class DistributedBackend:
    """The backend of this rank: the framework's own, whose open() joins the process group and
    wraps the session for the strategy. Everything else is the framework backend's."""

    def __init__(self, inner: Backend, *, rank: RankEnv, strategy: str, timeout_s: float) -> None:
        self.inner = inner
        self.rank = rank
        self.strategy = strategy
        self.timeout_s = timeout_s
        self.group_backend: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def open(self, workload: Workload, options: RunOptions) -> Session:
        problem = unsupported(workload, self.inner.name, options.device, options.exec_mode)
        if problem is not None:
            raise problem
        torch_side = self.inner.name == Framework.TORCH
        self.group_backend = _torch_init(options.device, self.timeout_s) if torch_side else _paddle_init()
        session = self.inner.open(workload, options)
        info: dict[str, Any] = {
            "strategy": self.strategy,
            "rank": self.rank.rank,
            "world_size": self.rank.world_size,
            "process_group": self.group_backend,
        }
        if workload.is_training:
            wrap = _torch_wrap if torch_side else _paddle_wrap
            info.update(wrap(session, self.strategy))
        else:
            info["wrapper"] = "none: one independent replica per rank"
        session.notes["distributed"] = info
        return session

    def finish(self) -> None:
        if self.inner.name == Framework.TORCH and self.group_backend is not None:
            _torch_finish()


class RankMeasurement(Measurement):
    """fitbench.measure.child.Measurement with this rank's backend in place of the framework's.

    Measurement looks its backend up by name and stores it in `self.backend`; that attribute is
    a property here, so the framework backend it stores is wrapped on the way in.
    """

    def __init__(self, request: dict[str, Any], *, rank: RankEnv) -> None:
        self._rank = rank
        self._strategy = str(request["workload"].get("strategy", "ddp"))
        self._collective_timeout_s = float(request.get("collective_timeout_s", 600.0))
        self._wrapped: DistributedBackend | None = None
        super().__init__(request)

    @property  # type: ignore[override]
    def backend(self) -> Any:
        return self._wrapped

    @backend.setter
    def backend(self, value: Any) -> None:
        if value is None or isinstance(value, DistributedBackend):
            self._wrapped = value
        else:
            self._wrapped = DistributedBackend(
                value, rank=self._rank, strategy=self._strategy, timeout_s=self._collective_timeout_s
            )

    def run(self) -> dict[str, Any]:
        result = super().run()
        result.update(
            rank=self._rank.rank,
            local_rank=self._rank.local_rank,
            world_size=self._rank.world_size,
            strategy=self._strategy,
        )
        return result

    def finish(self) -> None:
        if self._wrapped is not None:
            self._wrapped.finish()


def rank_request(request: dict[str, Any], rank: RankEnv) -> dict[str, Any]:
    """This rank's copy of the job's request: its own device, result file and progress (rank 0
    only), and a fixed number of steps."""
    out = dict(request)
    options = dict(request["options"])
    options["device"] = rank_device(str(options.get("device", "cpu")), rank.local_rank)
    out["options"] = options
    out["result_path"] = str(request["rank_result_pattern"]).format(rank=rank.rank)
    out["progress_path"] = request.get("progress_path") if rank.rank == 0 else None
    out["min_seconds"] = 0.0
    out["max_seconds"] = NO_TIME_BUDGET_S
    return out


def launcher_gone(launcher_pid: int = LAUNCHER_PID) -> bool:
    """Whether the process that started this rank has ended. Its children then go to init or a
    subreaper, so the parent pid changes; a launcher is never pid 1 (fitbench starts it), so a
    rank that began life as init's child was orphaned before it could look."""
    return launcher_pid <= 1 or os.getppid() != launcher_pid


def _watch_parent(launcher_pid: int = LAUNCHER_PID, poll_s: float = PARENT_POLL_S) -> None:
    """Exit when the launcher disappears (a killed torchrun cannot stop its workers).

    `launcher_pid` is the parent pid read when this module started (LAUNCHER_PID), not now: by
    the time the watch starts the launcher may already be gone."""

    def watch() -> None:
        while True:
            if launcher_gone(launcher_pid):
                os._exit(FAILED_EXIT_CODE)
            time.sleep(poll_s)

    threading.Thread(target=watch, name="fitbench-parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m fitbench.measure.dist_child REQUEST.json", file=sys.stderr)
        return 2
    _watch_parent()
    request = json.loads(Path(args[0]).read_text())
    rank = RankEnv.from_env()
    mine = rank_request(request, rank)
    measurement = RankMeasurement(mine, rank=rank)
    result = measurement.run()
    write_json_atomic(mine["result_path"], result)
    if result.get("status") != "ok":
        return FAILED_EXIT_CODE
    try:
        measurement.finish()
    except Exception as exc:  # the result is written; a teardown error must not hide it
        print(f"fitbench rank {rank.rank}: process group teardown failed: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as in fitbench.measure.child: skip freeing a large model at exit
