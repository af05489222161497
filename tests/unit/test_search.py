"""The max-batch search: the algorithm with a pure probe, then real probes on tiny torch models."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fitbench.measure.search import Probe, SearchResult, find_max_batch, search


def threshold_probe(largest_fitting: int, calls: list[int] | None = None):
    """A card on which every batch up to `largest_fitting` fits and anything larger does not."""

    def probe(batch: int) -> Probe:
        if calls is not None:
            calls.append(batch)
        if batch <= largest_fitting:
            return Probe(batch_size=batch, status="ok", peak_memory_bytes=batch * 1000)
        return Probe(batch_size=batch, status="oom", error=f"out of memory at batch {batch}")

    return probe


def test_grows_from_a_low_start_then_bisects():
    calls: list[int] = []
    result = search(threshold_probe(100, calls), start=16, limit=1024)
    assert result.max_batch == 100
    assert calls[:4] == [16, 32, 64, 128]  # doubling until the first out of memory
    assert result.first_oom == 101  # the bracket closes on 100 | 101
    assert not result.reached_limit and result.stopped is None


def test_shrinks_from_a_high_start():
    calls: list[int] = []
    result = search(threshold_probe(5, calls), start=64, limit=1024)
    assert result.max_batch == 5
    assert calls[:5] == [64, 32, 16, 8, 4]


def test_exact_estimate_needs_two_probes():
    calls: list[int] = []
    result = search(threshold_probe(48, calls), start=48, limit=49)
    assert result.max_batch == 48
    assert calls == [48, 49]


def test_nothing_fits():
    result = search(threshold_probe(0), start=8, limit=100)
    assert result.max_batch is None
    assert [p.batch_size for p in result.probes] == [8, 4, 2, 1]


def test_everything_up_to_the_limit_fits():
    result = search(threshold_probe(10_000), start=3, limit=20)
    assert result.max_batch == 20
    assert result.reached_limit
    assert max(p.batch_size for p in result.probes) == 20


def test_an_error_probe_stops_the_search_with_the_best_so_far():
    def probe(batch: int) -> Probe:
        if batch >= 32:
            return Probe(batch_size=batch, status="error", error="segfault in a kernel")
        return Probe(batch_size=batch, status="ok")

    result = search(probe, start=8, limit=1000)
    assert result.max_batch == 16
    assert result.stopped is not None and "batch 32" in result.stopped and "segfault" in result.stopped


def test_error_on_the_first_probe_gives_no_answer():
    result = search(lambda b: Probe(batch_size=b, status="timeout", error="no result"), start=4, limit=8)
    assert result.max_batch is None and "timeout" in (result.stopped or "")


def test_start_is_clamped_into_range_and_arguments_checked():
    calls: list[int] = []
    search(threshold_probe(3, calls), start=500, limit=10)
    assert calls[0] == 10
    calls.clear()
    search(threshold_probe(3, calls), start=0, limit=10)
    assert calls[0] == 1
    with pytest.raises(ValueError):
        search(threshold_probe(3), start=1, limit=0)


def test_to_dict_lists_every_probe():
    result = search(threshold_probe(7), start=4, limit=64)
    data = result.to_dict()
    assert data["max_batch"] == 7
    assert [p["batch_size"] for p in data["probes"]] == [p.batch_size for p in result.probes]
    assert {p["status"] for p in data["probes"]} == {"ok", "oom"}


@given(
    largest=st.integers(min_value=0, max_value=5000),
    start=st.integers(min_value=1, max_value=6000),
    limit=st.integers(min_value=1, max_value=6000),
)
def test_finds_the_true_maximum_without_repeats(largest, start, limit):
    calls: list[int] = []
    result = search(threshold_probe(largest, calls), start=start, limit=limit)
    expected = min(largest, limit) if largest >= 1 else None
    assert result.max_batch == expected
    assert result.reached_limit == (largest >= limit)
    assert len(calls) == len(set(calls))  # never probes a batch twice
    assert all(1 <= c <= limit for c in calls)
    # geometric phase plus bisection: logarithmic in the range
    assert len(calls) <= 2 * math.ceil(math.log2(max(limit, start, 2))) + 3


def test_find_max_batch_uses_an_injected_probe():
    from fitbench.backends.base import RunOptions
    from fitbench.workloads.presets import get_workload

    workload = get_workload("resnet50-cifar10", tiny=True)
    result = find_max_batch(workload, "torch", RunOptions(), start=2, limit=16, probe=threshold_probe(9))
    assert isinstance(result, SearchResult)
    assert result.max_batch == 9


@pytest.mark.slow
def test_real_probes_in_child_processes():
    """Fresh child processes on a CPU; nothing runs out of memory there, so the fake backend
    refuses batches above 3 with an out-of-memory error, inside each probe's child."""
    from fitbench.backends.base import RunOptions
    from fitbench.workloads.presets import get_workload

    workload = get_workload("resnet50-cifar10", tiny=True)
    result = find_max_batch(
        workload, "fake:oom-above:3", RunOptions(device="cpu"), start=2, limit=8, timeout_s=120
    )
    assert result.max_batch == 3
    statuses = {p.batch_size: p.status for p in result.probes}
    assert statuses == {2: "ok", 4: "oom", 3: "ok"}
    ok = [p for p in result.probes if p.status == "ok"]
    assert all(p.peak_memory_bytes and p.peak_memory_bytes > 0 for p in ok)  # real peak RSS of the child


@pytest.mark.torch
@pytest.mark.slow
def test_real_probe_reaches_a_small_limit():
    pytest.importorskip("torch")
    from fitbench.backends.base import RunOptions
    from fitbench.workloads.presets import get_workload

    workload = get_workload("llm-6b", tiny=True).replace(new_tokens=2, prompt_tokens=4)
    result = find_max_batch(workload, "torch", RunOptions(device="cpu"), start=1, limit=2, timeout_s=120)
    assert result.max_batch == 2 and result.reached_limit
    assert [p.status for p in result.probes] == ["ok", "ok"]


# -- bounds from the memory of the device the search runs on ----------------------------------------
def test_a_gpu_with_other_memory_than_the_named_card_starts_at_its_own_largest_batch():
    from fitbench.catalog import get_gpu
    from fitbench.estimate.api import estimate
    from fitbench.measure.search_bounds import DEVICE_MEMORY, largest_batch, search_bounds
    from fitbench.workloads.presets import get_workload

    workload, h200 = get_workload("bert-base-imdb"), get_gpu("h200")
    estimated = estimate(workload, h200).max_batch_size
    # The H200 itself: the estimate's start and the default limit stand.
    same = search_bounds(
        workload, estimated=estimated, card=h200, batch_limit=None, memory=(DEVICE_MEMORY, h200.memory_bytes)
    )
    assert (same.start, same.limit, same.capped) == (estimated, 8 * estimated, None)
    # A 24 GiB card measured against the H200's estimate starts at what fits in 24 GiB, scaled by
    # the named card's usable share; out of memory on a GPU is a clean answer, so it may grow.
    have = 24 << 30
    small = search_bounds(
        workload, estimated=estimated, card=h200, batch_limit=None, memory=(DEVICE_MEMORY, have)
    )
    budget = int(have * h200.usable_bytes / h200.memory_bytes)
    assert small.capped == DEVICE_MEMORY and small.budget_bytes == budget
    assert small.start == largest_batch(workload, budget, "torch", "default") < estimated / 4
    assert small.limit == max(64, 8 * small.start) and small.uncapped_start == estimated


def test_host_ram_caps_the_start_and_the_limit_and_a_search_always_probes_batch_one():
    from fitbench.catalog import get_gpu
    from fitbench.measure.search_bounds import HOST_RAM, search_bounds
    from fitbench.workloads.presets import get_workload

    workload = get_workload("llm-6b")
    tight = search_bounds(
        workload, estimated=40, card=get_gpu("h200"), batch_limit=None, memory=(HOST_RAM, 8 << 30)
    )
    # Training a 6B model does not fit in 2 GiB at any batch: the search still probes batch 1.
    assert (tight.start, tight.limit, tight.capped, tight.budget_bytes) == (1, 1, HOST_RAM, 2 << 30)
    # Without a number for the RAM nothing is capped.
    free = search_bounds(workload, estimated=40, card=None, batch_limit=100, memory=None)
    assert (free.start, free.limit, free.capped) == (40, 100, None)
