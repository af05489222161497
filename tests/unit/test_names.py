"""Exec modes, frameworks and strategies are closed sets written once (fitbench.core.names), and
every door checks against them: the CLI's choices, the estimator, RunOptions, the Workload."""

from __future__ import annotations

import json

import pytest

from fitbench.backends.base import RunOptions
from fitbench.catalog import get_gpu
from fitbench.cli.main import build_parser
from fitbench.core.names import EXEC_MODES, FRAMEWORKS, STRATEGIES, ExecMode, Framework, exec_mode, framework
from fitbench.errors import FitbenchError
from fitbench.estimate.api import estimate
from fitbench.workloads.presets import get_workload


def test_members_are_their_names() -> None:
    assert ExecMode.TUNED == "tuned" and json.dumps([Framework.PADDLE]) == '["paddle"]'
    assert EXEC_MODES == ("default", "tuned") and FRAMEWORKS == ("torch", "paddle")
    assert STRATEGIES == ("ddp", "zero1", "zero2", "zero3", "fsdp-shard-grad-op", "fsdp-full-shard", "tp")
    assert exec_mode("tuned") is ExecMode.TUNED and framework("paddle") is Framework.PADDLE


def _choices(command: str, dest: str) -> tuple[str, ...]:
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    return tuple(next(a for a in sub._actions if a.dest == dest).choices)


def test_the_cli_offers_exactly_the_named_choices() -> None:
    assert _choices("estimate", "exec_mode") == EXEC_MODES
    assert _choices("estimate", "framework") == FRAMEWORKS
    assert _choices("run", "backend") == FRAMEWORKS


def test_every_door_refuses_an_unknown_name_in_one_line() -> None:
    w, gpu = get_workload("bert-base-imdb"), get_gpu("rtx-4090")
    with pytest.raises(FitbenchError, match="unknown exec mode 'tunned'") as info:
        RunOptions(exec_mode="tunned")
    assert "'tuned'" in (info.value.hint or "")
    with pytest.raises(FitbenchError, match="unknown framework 'jax'"):
        estimate(w, gpu, framework="jax")
    with pytest.raises(FitbenchError, match="unknown exec mode 'fast'"):
        estimate(w, gpu, exec_mode="fast")
    with pytest.raises(FitbenchError, match="unknown strategy 'zero4'"):
        w.replace(gpus=2, strategy="zero4")
    assert estimate(w, gpu, framework=Framework.PADDLE, exec_mode=ExecMode.TUNED).framework == "paddle"
