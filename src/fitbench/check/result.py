"""One scenario of `fitbench check`: its estimates, its measurement (if any) and its advice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fitbench.records.measurement import Measurement
from fitbench.workloads.workload import Workload

# A measurement that ended in one of these answered the question (an OOM is a verdict).
ANSWERED = ("ok", "oom")


@dataclass(kw_only=True)
class ScenarioResult:
    key: str
    workload: Workload  # at the brief's settings: what is estimated
    estimates: dict[str, Any]  # gpu id -> Estimate (the comparison cards and the local card)
    measured_workload: Workload | None = None
    measurement: Measurement | None = None
    skipped: str | None = None
    run_id: str | None = None
    record: dict[str, Any] | None = None
    advice: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)  # the catalog ranked for this scenario (RankRow)

    @property
    def to_measure(self) -> bool:
        """Marked for measuring, not skipped, and not measured yet."""
        return self.measured_workload is not None and self.skipped is None and self.measurement is None

    @property
    def failed(self) -> bool:
        """Measured, and the run ended without an answer (error, timeout, killed)."""
        m = self.measurement
        if m is None:
            return False
        return m.status not in ANSWERED
