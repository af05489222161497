"""How far an estimate was from the measurement beside it, and whether the two can be compared.

error = (estimate - measured) / measured: +0.10 means the estimate is 10 % high. Only a completed
run on a CUDA device is held against a GPU estimate; for generation the step is one decode step
(one token per sequence) and the token rate the decode rate, the units the estimator predicts.

The estimate held against a run is for the run's own host where the run probed it
(`estimate_for_host`): the host is part of the machine like the GPU, and an eager step that is
host-bound takes operations x this host's time per operation, not the reference host's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fitbench.core.gpu import GpuSpec
from fitbench.estimate.api import Estimate, estimate
from fitbench.estimate.profile import (
    Profile,
    following_release,
    get_profile,
    host_scaled_profile,
    host_speed_ratio,
    host_time_key,
)
from fitbench.records.measurement import Measurement
from fitbench.records.run import WorkloadView
from fitbench.workloads.workload import Workload

__all__ = [
    "EstimatedFigures",
    "HostEstimate",
    "error_vs_estimate",
    "estimate_for_host",
    "max_batch_not_comparable",
    "measured_speed",
    "not_comparable",
    "reference_host_figures",
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
    m: Measurement | Mapping[str, Any], workload: Workload | WorkloadView
) -> tuple[float | None, float | None]:
    """(step seconds, tokens/s) comparable with the estimator's: for generation one decode step
    (one token per sequence, Measurement.decode_step) and the decode rate of that step
    (Measurement.decode_rate), otherwise the training/inference step."""
    m = Measurement.from_dict(m)
    if workload.is_generation:
        return m.decode_step(workload.new_tokens), m.decode_rate(workload.batch_size)
    return m.step_seconds, m.tokens_per_second


@dataclass(frozen=True, kw_only=True)
class HostEstimate:
    """The estimate a measurement is held against, for the host it ran on.

    estimate          for this run's host: the profile's host times scaled by host_speed_ratio
                      (the reference host's estimate where the run has no usable probe)
    reference         the estimate at the reference host (the machines the constants were
                      fitted on), where it differs: None when host_speed_ratio is None
    host_speed_ratio  this host's probe round over the reference's (1.2: 20 % slower an operation)
    """

    estimate: Estimate
    reference: Estimate | None = None
    host_speed_ratio: float | None = None


def estimate_for_host(
    workload: Workload,
    gpu: GpuSpec,
    m: Measurement | Mapping[str, Any],
    *,
    framework: str = "torch",
    exec_mode: str = "default",
    reference: Estimate | None = None,
) -> HostEstimate:
    """`workload` on `gpu` estimated for the host that measured `m` (fitbench.estimate.profile.
    host_scaled_profile); `reference` is the reference host's estimate when the caller has it."""
    m = Measurement.from_dict(m)
    profile = get_profile(framework, exec_mode)
    at_reference = (
        estimate(workload, gpu, framework=framework, exec_mode=exec_mode, profile=profile)
        if reference is None
        else reference
    )
    ratio = host_speed_ratio(profile, m.host_probe_seconds, m.device, host_time_key(workload.is_generation))
    if ratio is None:
        return HostEstimate(estimate=at_reference)
    here = estimate(
        workload,
        gpu,
        framework=framework,
        exec_mode=exec_mode,
        profile=host_scaled_profile(with_release(profile, m), m.host_probe_seconds, m.device),
    )
    return HostEstimate(estimate=here, reference=at_reference, host_speed_ratio=ratio)


def with_release(profile: Profile, m: Measurement) -> Profile:
    """`profile` following the transformers release the measurement ran with, where the profile
    counts a release at all (profiles.toml transformers_version: the decode step's calls and its
    copies of keys and values changed between releases)."""
    return following_release(profile, (m.environment or {}).get("transformers"))


def reference_host_figures(
    reference: EstimatedFigures | None, m: Measurement | Mapping[str, Any], workload: Workload
) -> dict[str, Any] | None:
    """The reference host's speed figures and their errors against `m` (JSON
    `estimate_reference_host`); None without a reference estimate."""
    if reference is None:
        return None
    errors = error_vs_estimate(reference, m, workload)
    return {
        "step_seconds": reference.step_seconds,
        "tokens_per_second": reference.tokens_per_second,
        "error_vs_estimate": {k: errors[k] for k in ("step_seconds", "tokens_per_second")},
    }


def not_comparable(est: EstimatedFigures | None, m: Measurement, workload: Workload) -> list[str]:
    """Why a measurement cannot be held against the estimate beside it (empty: it can).

    cpu        measured on the CPU, the estimate is for a GPU
    tiny       the tiny variant ran: a smoke test of the pipeline, not the real job
    first_run  no untimed warm-up steps: start-up (first kernels, the allocator, autotuning) is timed
    uncompiled the tuned PyTorch training / classification step ran on a GPU uncompiled
               (--no-compile, no Triton, or compiling failed: backend_notes compiled_step false):
               the estimate counts the compiled step's fused kernels, so the error would measure
               the missing fusion too. Not said on a CPU, where `cpu` already says why and nothing
               compiles; not for generation, whose decode step is compiled (or fused) either way;
               not for records without the note (other backends and modes, older records).
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
    if m.on_gpu and not workload.is_generation and (m.backend_notes or {}).get("compiled_step") is False:
        reasons.append("uncompiled")
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
        found = m.max_batch_search.max_batch
        out["max_batch"] = None if max_batch_not_comparable(m) else relative_error(est.max_batch_size, found)
    return out
