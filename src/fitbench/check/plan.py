"""What `fitbench check` does on this machine, decided before anything runs, and what each
scenario came to.

plan_check     which framework estimates, whether anything is measured (a backend is installed and
               --estimate-only is off), whether the tiny variants are measured (always on a CPU),
               and which card the advice speaks of (this machine's, else the brief's entry card)
run_scenario   one scenario estimated on every card, advised, and marked for measuring, or skipped
               where the estimate says it cannot fit on this machine's card
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fitbench.backends import framework_of
from fitbench.catalog import BRIEF_GPUS, get_gpu
from fitbench.check.advice import scenario_advice
from fitbench.check.machine import Machine
from fitbench.check.result import ScenarioResult
from fitbench.core.gpu import GpuSpec
from fitbench.errors import FitbenchError
from fitbench.estimate.api import estimate
from fitbench.estimate.verdict import OOM
from fitbench.workloads.workload import Workload

# Timed seconds of a full-size figure on a GPU: three windows of 0.5 s (fitbench.measure.timing).
GPU_MIN_SECONDS = 1.5
# Seconds one timed figure may take while its windows repeat to settle below the 5 % spread: the
# three scenarios' four runs time at most five figures (three steps, a prefill and a generation),
# so that the timing stays within about 15 s of the 45 s `fitbench check` is meant to take on a GPU.
GPU_SPREAD_BUDGET_S = 2.5
DEFAULT_TIMEOUT_S = 600.0

TargetKind = Literal["local", "unknown", "brief"]


@dataclass(frozen=True, kw_only=True)
class CheckPlan:
    """What `fitbench check` runs on `machine`.

    cards        the catalog cards every scenario is compared on (besides this machine's own)
    target       the card the advice is for; target_kind says why: this machine's card ('local'),
                 the brief's entry card for a GPU the catalog does not know ('unknown') or for a
                 machine without one ('brief')
    measuring    a backend is installed and --estimate-only is off
    tiny         the tiny variants are measured (always on a CPU)
    start_ahead  every measurement's child is started at once: each imports its framework and
                 model libraries together with the first one's start-up, then waits for its turn
                 before it touches the device (fitbench.measure.runner.Launch); the size guide is
                 computed meanwhile too. On a GPU, where those imports are seconds of a few-second
                 measurement and the host has cores to spare; not on a CPU, where they would
                 compete with the measurement.
    """

    machine: Machine
    framework: str
    exec_mode: str
    cards: tuple[GpuSpec, ...]
    target: GpuSpec
    target_kind: TargetKind
    estimate_only: bool
    measuring: bool
    tiny: bool
    start_ahead: bool = False

    @property
    def estimated_cards(self) -> tuple[GpuSpec, ...]:
        """This machine's card first (where the catalog knows it), then the comparison cards."""
        return ((self.machine.spec,) if self.machine.spec else ()) + self.cards

    def min_seconds(self, requested: float | None, workload: Workload) -> float | None:
        """Timed seconds for one measurement: as asked, else a few seconds at full size and the
        runner's own default for a tiny run."""
        if requested is None and not workload.tiny:
            return GPU_MIN_SECONDS
        return requested

    def spread_budget(self, min_seconds: float | None, workload: Workload) -> float | None:
        """Seconds one timed figure may take repeating its windows: GPU_SPREAD_BUDGET_S at full
        size (never less than the timed seconds asked for), the runner's default (twice the timed
        seconds) for a tiny run."""
        if workload.tiny:
            return None
        return max(GPU_SPREAD_BUDGET_S, min_seconds or 0.0)


def plan_check(
    machine: Machine, cards: list[GpuSpec], *, exec_mode: str, estimate_only: bool, tiny: bool
) -> CheckPlan:
    if not cards:
        raise FitbenchError(
            "no GPU selected",
            "pass --gpu ID or --gpu all",
            message_zh="没有选择 GPU",
            hint_zh="请传入 --gpu ID 或 --gpu all",
        )
    if machine.spec is not None:
        target, kind = machine.spec, "local"
    else:
        target, kind = get_gpu(BRIEF_GPUS[0]), ("unknown" if machine.gpus else "brief")
    measuring = not estimate_only and machine.backend is not None
    return CheckPlan(
        machine=machine,
        framework=framework_of(machine.backend) if machine.backend else "torch",
        exec_mode=exec_mode,
        cards=tuple(cards),
        target=target,
        target_kind=kind,
        estimate_only=estimate_only,
        measuring=measuring,
        tiny=machine.device == "cpu" or tiny,
        start_ahead=measuring and machine.device != "cpu",
    )


def run_scenario(plan: CheckPlan, key: str, full: Workload, measured: Workload, lang: str) -> ScenarioResult:
    """`full` estimated on every card and advised (terminal lines in `lang`); when measuring, marked
    to measure `measured`, or skipped as 'estimated-oom' where this machine's card cannot hold it."""
    estimates = {
        c.id: estimate(full, c, framework=plan.framework, exec_mode=plan.exec_mode)
        for c in plan.estimated_cards
    }
    result = ScenarioResult(key=key, workload=full, estimates=estimates)
    scenario_advice(result, plan.target, plan.framework, plan.exec_mode, lang)
    if plan.measuring:
        result.measured_workload = measured
        local = estimates.get(plan.machine.spec.id) if plan.machine.spec else None
        if not plan.tiny and local is not None and local.verdict == OOM:
            result.skipped = "estimated-oom"
    return result
