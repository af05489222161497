"""The closed sets of names fitbench speaks in: execution modes, frameworks, multi-GPU strategies.

Each set is a StrEnum, written once here: the CLI's choices, the Workload's and RunOptions'
validation, the estimator and the backends all read it. A member is its string ('tuned' ==
ExecMode.TUNED), so JSON, the history and comparisons with stored names keep plain text.
Precision names live with their meaning in fitbench.core.precision (PRECISION_NAMES).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from fitbench.errors import FitbenchError, did_you_mean


class ExecMode(StrEnum):
    """Which code runs (and is estimated)."""

    DEFAULT = "default"  # the code most users write: eager, framework defaults
    TUNED = "tuned"  # what the card can do: CUDA graphs, compiled steps, bf16, fused optimizers


class Framework(StrEnum):
    """A framework fitbench measures with and models the memory behaviour of."""

    TORCH = "torch"
    PADDLE = "paddle"


class Strategy(StrEnum):
    """How a job is spread over several GPUs.

    zero1/2/3 are DeepSpeed's ZeRO stages (16-bit weights and gradients, FP32 master weights and
    Adam moments partitioned); the two FSDP strategies are torch.distributed.fsdp's sharding
    strategies of those names ('fsdp' is another name for fsdp-full-shard: STRATEGY_ALIASES).
    """

    DDP = "ddp"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    ZERO3 = "zero3"
    FSDP_SHARD_GRAD_OP = "fsdp-shard-grad-op"
    FSDP_FULL_SHARD = "fsdp-full-shard"
    TP = "tp"


EXEC_MODES: tuple[str, ...] = tuple(m.value for m in ExecMode)
FRAMEWORKS: tuple[str, ...] = tuple(f.value for f in Framework)
STRATEGIES: tuple[str, ...] = tuple(s.value for s in Strategy)
STRATEGY_ALIASES: dict[str, str] = {"fsdp": Strategy.FSDP_FULL_SHARD.value}

_E = TypeVar("_E", bound=StrEnum)


def exec_mode(name: object) -> ExecMode:
    """`name` as an ExecMode, or one clear line naming the choices."""
    return _member(ExecMode, name, "exec mode", "--exec", "执行模式")


def framework(name: object) -> Framework:
    """`name` as a Framework, or one clear line naming the choices."""
    return _member(Framework, name, "framework", "--framework / --backend", "框架")


def strategy(name: object) -> Strategy:
    """`name` as a Strategy, or one clear line naming the choices."""
    return _member(Strategy, name, "strategy", "--strategy", "并行策略")


def _member(kind: type[_E], name: object, what: str, flag: str, what_zh: str) -> _E:
    choices = [m.value for m in kind]
    if not isinstance(name, str):
        raise FitbenchError(
            f"{what} must be a name, got {name!r}",
            f"pass {flag} as one of {', '.join(choices)}",
            message_zh=f"{what_zh}必须是名称,实际为 {name!r}",
            hint_zh=f"{flag} 请使用以下之一:{', '.join(choices)}",
        )
    try:
        return kind(name)
    except ValueError:
        raise FitbenchError(
            f"unknown {what} '{name}'",
            did_you_mean(name, choices),
            message_zh=f"未知的{what_zh} '{name}'",
            hint_zh=did_you_mean(name, choices, lang="zh"),
        ) from None
