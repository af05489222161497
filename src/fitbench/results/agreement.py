"""How far an estimate was from the measurement beside it, and whether the two can be compared.

error = (estimate - measured) / measured: +0.10 means the estimate is 10 % high. Only a completed
run on a CUDA device is held against a GPU estimate; for generation the step is one decode step
(one token per sequence) and the token rate the decode rate, the units the estimator predicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from fitbench.records.measurement import Measurement
from fitbench.workloads.workload import Workload

__all__ = [
    "EstimatedFigures",
    "error_vs_estimate",
    "max_batch_not_comparable",
    "measured_speed",
    "not_comparable",
    "relative_error",
]

ERROR_KEYS = ("peak_memory", "step_seconds", "tokens_per_second")


class EstimatedFigures(Protocol):
    """The figures an error is taken of: an `Estimate` or a stored `EstimateSummary`."""

    @property
    def peak_memory_bytes(self) -> int | None: ...
    @property
    def step_seconds(self) -> float | None: ...
    @property
    def tokens_per_second(self) -> float | None: ...
    @property
    def prefill_seconds(self) -> float | None: ...
    @property
    def max_batch_size(self) -> int | None: ...


def relative_error(estimated: float | None, measured: float | None) -> float | None:
    """(estimate - measured) / measured; None when either is missing or the measurement is zero."""
    if estimated is None or measured is None or measured == 0:
        return None
    return (estimated - measured) / measured


def measured_speed(
    m: Measurement | Mapping[str, Any], workload: Workload
) -> tuple[float | None, float | None]:
    """(step seconds, tokens/s) comparable with the estimator's: for generation one decode step
    (one token per sequence) and decode throughput, otherwise the training/inference step."""
    m = Measurement.from_dict(m)
    if workload.is_generation:
        new = workload.new_tokens or 0
        step = m.decode_seconds / new if m.decode_seconds is not None and new else None
        return step, m.decode_tokens_per_second
    return m.step_seconds, m.tokens_per_second


def not_comparable(est: EstimatedFigures | None, m: Measurement, workload: Workload) -> list[str]:
    """Why a measurement cannot be held against the estimate beside it (empty: it can).

    cpu        measured on the CPU, the estimate is for a GPU
    tiny       the tiny variant ran: a smoke test of the pipeline, not the real job
    first_run  no untimed warm-up steps: start-up (first kernels, the allocator, autotuning) is timed
    """
    if est is None or not m.completed:
        return []
    reasons = []
    if not m.on_gpu:
        reasons.append("cpu")
    if workload.tiny:
        reasons.append("tiny")
    if m.warmup_steps == 0:
        reasons.append("first_run")
    return reasons


def max_batch_not_comparable(m: Measurement | Mapping[str, Any]) -> list[str]:
    """Why a searched largest batch cannot be held against the estimate's (empty: it can).

    cpu  found on the CPU: host RAM bounded it (and the search was capped to a share of it), the
         estimate's largest batch is for a GPU card's memory
    """
    m = Measurement.from_dict(m)
    if m.max_batch_search is None or m.on_gpu:
        return []
    return ["cpu"]


def error_vs_estimate(
    est: EstimatedFigures | None, m: Measurement | Mapping[str, Any], workload: Workload
) -> dict[str, float | None]:
    """The relative error of each figure the run measured: peak_memory, step_seconds and
    tokens_per_second always (None where there is nothing to compare), prefill_seconds for
    generation, max_batch when the run searched the largest batch (None where the batch was found
    off the GPU: max_batch_not_comparable)."""
    m = Measurement.from_dict(m)
    out: dict[str, float | None] = dict.fromkeys(ERROR_KEYS)
    if est is not None and m.completed and m.on_gpu:
        step, tokens = measured_speed(m, workload)
        out["peak_memory"] = relative_error(est.peak_memory_bytes, m.peak_memory_bytes)
        out["step_seconds"] = relative_error(est.step_seconds, step)
        out["tokens_per_second"] = relative_error(est.tokens_per_second, tokens)
        if workload.is_generation:
            out["prefill_seconds"] = relative_error(est.prefill_seconds, m.prefill_seconds)
    if est is not None and m.max_batch_search is not None:
        found = m.max_batch_search.get("max_batch")
        out["max_batch"] = None if max_batch_not_comparable(m) else relative_error(est.max_batch_size, found)
    return out
