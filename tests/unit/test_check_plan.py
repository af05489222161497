"""fitbench.check: what `fitbench check` decides before and while it runs, without the command line.

Machines are written out (a LocalGpu as NVML would report it, or none), so every branch the command
takes on a real GPU is exercised here on any machine; the estimates are the real estimator's.
"""

from __future__ import annotations

import pytest

from fitbench.catalog import BRIEF_GPUS, get_gpu
from fitbench.catalog.detect import LocalGpu
from fitbench.check.machine import Machine
from fitbench.check.plan import GPU_MIN_SECONDS, GPU_SPREAD_BUDGET_S, plan_check, run_scenario
from fitbench.check.result import ScenarioResult
from fitbench.check.scenarios import CPU_AMP, SCENARIOS, scenario_workloads
from fitbench.errors import FitbenchError
from fitbench.estimate.verdict import OOM
from fitbench.records.measurement import Measurement
from fitbench.workloads.presets import get_workload


def local_gpu(name: str, catalog_id: str | None, gib: int) -> LocalGpu:
    return LocalGpu(
        index=0,
        name=name,
        uuid="GPU-0",
        memory_total_bytes=gib << 30,
        memory_used_bytes=0,
        memory_reserved_bytes=None,
        driver_version="550.0",
        cuda_capability=(8, 6),
        catalog_id=catalog_id,
    )


def gpu_machine(card: str = "rtx-3060-12gb", backend: str | None = "fake") -> Machine:
    spec = get_gpu(card)
    return Machine(
        gpus=(local_gpu(spec.name, spec.id, 12),),
        spec=spec,
        backend=backend,
        installed=("fake",) if backend else (),
    )


CPU_MACHINE = Machine(gpus=(), spec=None, backend="fake", installed=("fake",))
CARDS = [get_gpu("a100-40gb")]


def test_a_cpu_machine_measures_the_tiny_variants_and_advises_for_the_brief_entry_card():
    plan = plan_check(CPU_MACHINE, CARDS, exec_mode="default", estimate_only=False, tiny=False)
    assert plan.measuring and plan.tiny and plan.machine.device == "cpu"
    assert plan.target.id == BRIEF_GPUS[0] and plan.target_kind == "brief"
    assert plan.framework == "torch"  # the fake backend stands for torch
    assert [c.id for c in plan.estimated_cards] == ["a100-40gb"]


def test_a_known_gpu_is_the_target_and_estimated_first():
    plan = plan_check(gpu_machine(), CARDS, exec_mode="tuned", estimate_only=False, tiny=False)
    assert plan.target.id == "rtx-3060-12gb" and plan.target_kind == "local"
    assert [c.id for c in plan.estimated_cards] == ["rtx-3060-12gb", "a100-40gb"]
    assert plan.measuring and not plan.tiny and plan.exec_mode == "tuned"


def test_an_unknown_gpu_advises_for_the_brief_entry_card():
    machine = Machine(gpus=(local_gpu("Mystery Card", None, 16),), spec=None, backend=None, installed=())
    plan = plan_check(machine, CARDS, exec_mode="default", estimate_only=False, tiny=False)
    assert plan.target_kind == "unknown" and plan.target.id == BRIEF_GPUS[0]
    assert not plan.measuring  # no backend installed: estimates only
    assert [c.id for c in plan.estimated_cards] == ["a100-40gb"]


@pytest.mark.parametrize(
    ("estimate_only", "backend", "measuring"),
    [(True, "fake", False), (False, None, False), (False, "fake", True)],
)
def test_measuring_needs_a_backend_and_no_estimate_only(estimate_only, backend, measuring):
    plan = plan_check(
        gpu_machine(backend=backend), CARDS, exec_mode="default", estimate_only=estimate_only, tiny=False
    )
    assert plan.measuring is measuring


def test_no_card_to_compare_with_is_a_one_line_error():
    with pytest.raises(FitbenchError, match="no GPU selected"):
        plan_check(CPU_MACHINE, [], exec_mode="default", estimate_only=False, tiny=False)


def test_timed_seconds_default_to_a_few_at_full_size_and_to_the_runners_for_tiny_runs():
    plan = plan_check(gpu_machine(), CARDS, exec_mode="default", estimate_only=False, tiny=False)
    full, tiny = get_workload("bert-base-imdb"), get_workload("bert-base-imdb", tiny=True)
    assert plan.min_seconds(None, full) == GPU_MIN_SECONDS
    assert plan.min_seconds(None, tiny) is None
    assert plan.min_seconds(0.5, full) == 0.5


@pytest.mark.parametrize(("device", "amp"), [("cpu", CPU_AMP), ("cuda", "amp-fp16")])
def test_tiny_scenarios_keep_the_brief_settings_in_the_estimate(device, amp):
    rows = scenario_workloads(tiny=True, device=device)
    assert [full.name for _, full, _ in rows] == [name for name, _ in SCENARIOS]
    assert all(measured.tiny and not full.tiny for _, full, measured in rows)
    (_, full, measured) = rows[2]  # BERT with AMP
    assert full.precision == "amp-fp16" and measured.precision == amp
    assert [key for key, _, _ in rows][2] == "bert-base-imdb · amp-fp16"
    assert all(full is measured for _, full, measured in scenario_workloads(tiny=False, device="cuda"))


def test_a_scenario_that_cannot_fit_on_this_card_is_skipped_not_measured():
    plan = plan_check(
        gpu_machine("rtx-3060-12gb"), CARDS, exec_mode="default", estimate_only=False, tiny=False
    )
    key, full, measured = scenario_workloads(plan.tiny, plan.machine.device)[3]  # the 6.7B decoder, fp16
    result = run_scenario(plan, key, full, measured, "en")
    assert result.estimates["rtx-3060-12gb"].verdict == OOM
    assert result.skipped == "estimated-oom" and not result.to_measure
    assert set(result.estimates) == {"rtx-3060-12gb", "a100-40gb"}
    kinds = [a["kind"] for a in result.advice]
    assert "cheapest" in kinds and all(set(a["texts"]) == {"en", "zh"} for a in result.advice)


def test_a_scenario_that_fits_is_marked_to_measure():
    plan = plan_check(
        gpu_machine("rtx-3060-12gb"), CARDS, exec_mode="default", estimate_only=False, tiny=False
    )
    key, full, measured = scenario_workloads(plan.tiny, plan.machine.device)[0]  # ResNet-50
    result = run_scenario(plan, key, full, measured, "zh")
    assert result.to_measure and result.skipped is None and result.measured_workload is measured
    assert result.lines and result.rows  # the terminal lines (in Chinese) and the ranked catalog
    assert any("\u4e00" <= ch <= "\u9fff" for ch in result.lines[0])
    result.measurement = Measurement(status="ok")
    assert not result.to_measure


def test_estimates_only_marks_nothing_to_measure():
    plan = plan_check(
        gpu_machine("rtx-3060-12gb"), CARDS, exec_mode="default", estimate_only=True, tiny=False
    )
    key, full, measured = scenario_workloads(plan.tiny, plan.machine.device)[0]
    result = run_scenario(plan, key, full, measured, "en")
    assert not result.to_measure and result.measured_workload is None and result.skipped is None


@pytest.mark.parametrize(
    ("status", "failed"), [("ok", False), ("oom", False), ("error", True), ("timeout", True), (None, False)]
)
def test_only_a_run_that_ended_without_an_answer_fails_the_check(status, failed):
    result = ScenarioResult(
        key="k",
        workload=get_workload("bert-base-imdb"),
        estimates={},
        measurement=None if status is None else Measurement(status=status),
    )
    assert result.failed is failed


def test_children_start_ahead_on_a_gpu_only_and_figures_get_the_check_budget():
    gpu = plan_check(gpu_machine(), CARDS, exec_mode="default", estimate_only=False, tiny=False)
    cpu = plan_check(CPU_MACHINE, CARDS, exec_mode="default", estimate_only=False, tiny=False)
    only = plan_check(gpu_machine(), CARDS, exec_mode="default", estimate_only=True, tiny=False)
    assert gpu.start_ahead and not cpu.start_ahead and not only.start_ahead
    full, tiny = get_workload("bert-base-imdb"), get_workload("bert-base-imdb", tiny=True)
    assert gpu.spread_budget(GPU_MIN_SECONDS, full) == GPU_SPREAD_BUDGET_S
    assert gpu.spread_budget(10.0, full) == 10.0  # never less than the timed seconds asked for
    assert gpu.spread_budget(None, tiny) is None  # the runner's own: twice the timed seconds
    # the check's timing fits its promise: three windows a figure, a budget that repeats them
    assert GPU_MIN_SECONDS < GPU_SPREAD_BUDGET_S <= 2 * GPU_MIN_SECONDS


@pytest.mark.slow
def test_check_measures_every_scenario_through_children_started_ahead(tmp_path):
    """The GPU path of `fitbench check` (every child started at once, the later ones held, then
    released in turn), on the CPU through the fake backend: every scenario measured, in order,
    each with its figures' spreads."""
    import argparse
    import dataclasses

    from fitbench.cli.check import _run_scenarios

    plan = dataclasses.replace(
        plan_check(CPU_MACHINE, CARDS, exec_mode="default", estimate_only=False, tiny=False),
        start_ahead=True,
    )
    args = argparse.Namespace(
        db=str(tmp_path / "h.sqlite"), no_history=True, timeout=120.0, min_seconds=0.05, progress=False
    )
    results, _, _ = _run_scenarios(plan, args, "en")
    assert [r.key for r in results] == [key for key, _, _ in scenario_workloads(True, "cpu")]
    for r in results:
        assert r.measurement is not None and r.measurement.status == "ok", r.measurement
        assert r.measurement.spread_of("step_seconds") is not None
