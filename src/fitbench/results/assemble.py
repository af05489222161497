"""The one place a run record is put together: a measurement beside its estimate, the errors
between them and the bottleneck diagnosis, as `fitbench run` and `fitbench check` store it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fitbench.advise.diagnosis import diagnose
from fitbench.core.gpu import GpuSpec
from fitbench.records.measurement import Measurement
from fitbench.records.run import EstimateSummary, RunRecord
from fitbench.results.agreement import EstimatedFigures, error_vs_estimate, reference_host_figures
from fitbench.workloads.workload import Workload

__all__ = ["assemble_run_record"]


def assemble_run_record(
    *,
    command: str,
    workload: Workload,
    estimate: EstimatedFigures | None,
    measurement: Measurement,
    gpu: GpuSpec | None,
    with_diagnosis: bool = True,
    reference_estimate: EstimatedFigures | None = None,
    host_speed_ratio: float | None = None,
    scenario: str | None = None,
    catalog_estimates: Mapping[str, Any] | None = None,
    advice: Sequence[Any] | None = None,
) -> RunRecord:
    """The record of one measurement of `workload`.

    `estimate` is the `Estimate` of the workload on `gpu` (None without one): the errors are
    taken of its own figures (an out-of-memory estimate's JSON hides its would-be speed, the
    error does not), the stored summary and the diagnosis read its JSON. `scenario`,
    `catalog_estimates` and `advice` are what `fitbench check` adds for its report. Where
    `estimate` is for the run's own host (results.agreement.estimate_for_host),
    `reference_estimate` is the reference host's and `host_speed_ratio` the two hosts' ratio.
    """
    summary = EstimateSummary.from_estimate(estimate) if estimate is not None else None
    return RunRecord(
        command=command,
        workload=workload.to_dict(),
        estimate=summary,
        measurement=measurement,
        environment=dict(measurement.environment),
        error_vs_estimate=error_vs_estimate(estimate, measurement, workload),
        diagnosis=diagnose(measurement, summary, gpu) if with_diagnosis else None,
        host_speed_ratio=host_speed_ratio,
        estimate_reference_host=reference_host_figures(reference_estimate, measurement, workload),
        scenario=scenario,
        catalog_estimates=catalog_estimates,
        advice=list(advice) if advice is not None else None,
    )
