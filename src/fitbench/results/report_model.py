"""The report model as typed records: what report_markdown and report_html lay out.

`fitbench report` and `fitbench check` gather a report into a plain dict (fitbench.cli.report,
`build_model`, documents its sections); a renderer turns it into a `ReportModel` once, with
`ReportModel.from_dict`, and reads attributes from then on.

Unknown keys: the model's own sections are a closed list that both renderers lay out, so an
unknown **top-level** key is refused (a TypeError: a section no renderer would show is a bug of
the code that built the model). Inside a row, unknown keys are **kept** in ``extra``: rows are
derived from stored runs of any fitbench version and `fitbench check` adds fields of its own,
and a renderer leaves alone what it does not show.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from fitbench.records.measurement import Measurement, plain
from fitbench.records.run import EstimateSummary, WorkloadView

__all__ = [
    "REPORT_SCHEMA",
    "AdviceEntry",
    "ComparisonRow",
    "GuideLine",
    "HistoryPoint",
    "ReportModel",
    "ReportScenario",
    "RunRow",
]

REPORT_SCHEMA = 1

Row = TypeVar("Row")


def _row(cls: type[Row], data: Mapping[str, Any], **typed: Any) -> Row:
    """`cls` from a row's dict: its fields (with `typed` values replacing raw ones), the rest in extra."""
    if isinstance(data, cls):
        return data
    names = {f.name for f in dataclasses.fields(cls)} - {"extra"}  # type: ignore[arg-type]
    known = {k: v for k, v in data.items() if k in names}
    extra = {k: v for k, v in data.items() if k not in names}
    return cls(**{**known, **typed}, extra=extra)


def _row_dict(row: Any) -> dict[str, Any]:
    out = {f.name: plain(getattr(row, f.name)) for f in dataclasses.fields(row) if f.name != "extra"}
    return {**out, **row.extra}


@dataclass(frozen=True, kw_only=True)
class AdviceEntry:
    """A header and its options (a scenario's advice is these and plain sentences)."""

    text: str
    items: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "items": list(self.items)}


@dataclass(frozen=True, kw_only=True)
class ReportScenario:
    """One workload at one precision: its estimate on each card, what was measured, the advice."""

    key: str | None = None
    workload: str | None = None
    title: str | None = None
    precision: str | None = None
    params: int | None = None
    description: str | None = None
    estimates: tuple[EstimateSummary, ...] = ()
    estimated_now: bool = False
    measurement: Measurement | None = None
    measured_workload: Mapping[str, Any] | None = None
    skipped: str | None = None
    advice: tuple[str | AdviceEntry, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def measured_view(self) -> WorkloadView:
        """The measured workload's fields by attribute (all None where nothing was measured)."""
        return WorkloadView.from_mapping(self.measured_workload or {})

    @property
    def measured_generation(self) -> bool:
        return self.measured_view.is_generation

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReportScenario:
        m = data.get("measurement")
        return _row(
            cls,
            data,
            estimates=tuple(EstimateSummary.from_dict(e) for e in data.get("estimates") or ()),
            measurement=Measurement.from_dict(m) if isinstance(m, Mapping) and m else None,
            advice=tuple(_advice(a) for a in data.get("advice") or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        out = _row_dict(self)
        out["estimates"] = [e.to_dict() for e in self.estimates]
        out["measurement"] = self.measurement.to_dict() if self.measurement is not None else None
        out["advice"] = [a.to_dict() if isinstance(a, AdviceEntry) else a for a in self.advice]
        return out


def _advice(entry: Any) -> str | AdviceEntry:
    if isinstance(entry, AdviceEntry):
        return entry
    if isinstance(entry, Mapping):
        return AdviceEntry(text=str(entry.get("text")), items=tuple(entry.get("items") or ()))
    return str(entry)


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    """One measured figure beside its estimate (fitbench.cli.report.comparison_rows)."""

    run_id: str | None = None
    created_at: str | None = None
    workload: str | None = None
    precision: str | None = None
    gpu: str | None = None
    device_name: str | None = None
    metric: str = ""
    unit: str = ""
    estimated: float | None = None
    measured: float | None = None
    error: float | None = 0.0  # None where the figure is not comparable
    not_comparable: tuple[str, ...] = ()  # why (fitbench.results.agreement.max_batch_not_comparable)
    # A speed estimated for the run's own host: its time per operation over the reference host's,
    # and the estimate at the reference host (None: the estimate is the reference host's).
    host_speed_ratio: float | None = None
    estimated_reference_host: float | None = None
    # The measured figure's spread over its timed windows and whether it settled (None: the run
    # took none, as before spreads were recorded).
    spread: float | None = None
    spread_stable: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ComparisonRow:
        return _row(cls, data, not_comparable=tuple(data.get("not_comparable") or ()))

    def to_dict(self) -> dict[str, Any]:
        """The row's JSON; the host keys only on a row that has them (comparison_rows)."""
        out = _row_dict(self)
        if self.host_speed_ratio is None:
            out.pop("host_speed_ratio")
            out.pop("estimated_reference_host")
        if self.spread is None:
            out.pop("spread")
            out.pop("spread_stable")
        return out


@dataclass(frozen=True, kw_only=True)
class HistoryPoint:
    """One run as a point of the history chart (fitbench.cli.report.history_point)."""

    run_id: str | None = None
    created_at: str | None = None
    workload: str | None = None
    precision: str | None = None
    precision_requested: str | None = None
    device: str | None = None
    tiny: bool = False
    status: str | None = None
    generation: bool = False
    peak_memory_bytes: int | None = None
    step_seconds: float | None = None
    tokens_per_second: float | None = None
    samples_per_second: float | None = None
    series: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HistoryPoint:
        return _row(cls, data)

    def to_dict(self) -> dict[str, Any]:
        return _row_dict(self)


@dataclass(frozen=True, kw_only=True)
class RunRow:
    """One stored run in the runs table (fitbench.cli.report.run_row)."""

    run_id: str | None = None
    created_at: str | None = None
    command: str | None = None
    workload: str | None = None
    precision: str | None = None
    precision_requested: str | None = None
    batch_size: int | None = None
    tiny: bool = False
    generation: bool = False
    backend: str | None = None
    framework_version: str | None = None
    device: str | None = None
    status: str | None = None
    peak_memory_bytes: int | None = None
    step_seconds: float | None = None
    tokens_per_second: float | None = None
    decode_tokens_per_second: float | None = None
    end_to_end_tokens_per_second: float | None = None
    samples_per_second: float | None = None
    estimate_gpu: str | None = None
    estimate_verdict: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRow:
        return _row(cls, data)

    def to_dict(self) -> dict[str, Any]:
        return _row_dict(self)


@dataclass(frozen=True, kw_only=True)
class GuideLine:
    """One model of the size guide (fitbench.advise.guide.GuideRow.to_dict)."""

    regime: str | None = None
    model: str | None = None
    params: int | None = None
    band: str | None = None
    peak_memory_bytes: int | None = None
    fits_class_gb: int | None = None
    runs_class_gb: int | None = None
    card: str | None = None
    card_name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GuideLine:
        return _row(cls, data)

    def to_dict(self) -> dict[str, Any]:
        return _row_dict(self)


@dataclass(frozen=True, kw_only=True)
class ReportModel:
    """Everything a report shows; the renderers compute nothing."""

    SCHEMA_VERSION: ClassVar[int] = REPORT_SCHEMA

    schema_version: int = REPORT_SCHEMA
    lang: str = "en"
    generated_at: str | None = None
    fitbench_version: str | None = None
    machine: Mapping[str, Any] | None = None
    scenarios: tuple[ReportScenario, ...] = ()
    comparisons: tuple[ComparisonRow, ...] = ()
    history: tuple[HistoryPoint, ...] = ()
    runs: tuple[RunRow, ...] = ()
    environment: Mapping[str, Any] = field(default_factory=dict)
    guide: tuple[str, ...] = ()
    guide_rows: tuple[GuideLine, ...] = ()
    advice: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReportModel:
        """The model `build_model` gathers; an unknown section is refused (see the module docstring)."""
        if isinstance(data, ReportModel):
            return data
        unknown = set(data) - _MODEL_FIELDS
        if unknown:
            raise TypeError(f"unknown report model sections: {', '.join(sorted(unknown))}")
        return cls(
            schema_version=int(data.get("schema_version") or REPORT_SCHEMA),
            lang=str(data.get("lang") or "en"),
            generated_at=data.get("generated_at"),
            fitbench_version=data.get("fitbench_version"),
            machine=data.get("machine"),
            scenarios=tuple(ReportScenario.from_dict(s) for s in data.get("scenarios") or ()),
            comparisons=tuple(ComparisonRow.from_dict(r) for r in data.get("comparisons") or ()),
            history=tuple(HistoryPoint.from_dict(p) for p in data.get("history") or ()),
            runs=tuple(RunRow.from_dict(r) for r in data.get("runs") or ()),
            environment=dict(data.get("environment") or {}),
            guide=tuple(data.get("guide") or ()),
            guide_rows=tuple(GuideLine.from_dict(r) for r in data.get("guide_rows") or ()),
            advice=tuple(str(a) for a in data.get("advice") or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "lang": self.lang,
            "generated_at": self.generated_at,
            "fitbench_version": self.fitbench_version,
            "machine": dict(self.machine) if self.machine is not None else None,
            "scenarios": [s.to_dict() for s in self.scenarios],
            "comparisons": [r.to_dict() for r in self.comparisons],
            "history": [p.to_dict() for p in self.history],
            "runs": [r.to_dict() for r in self.runs],
            "environment": dict(self.environment),
            "guide": list(self.guide),
            "guide_rows": [r.to_dict() for r in self.guide_rows],
            "advice": list(self.advice),
        }


_MODEL_FIELDS = frozenset(f.name for f in dataclasses.fields(ReportModel))
