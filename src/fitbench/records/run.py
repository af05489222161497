"""What the history stores for one run, as a typed record: `RunRecord` and its `EstimateSummary`.

A run record is the workload, the estimate beside the measurement, the measurement
(`fitbench.records.measurement.Measurement`), the errors between them, the bottleneck diagnosis
(`fitbench.records.sections.Diagnosis`) and, once stored, its id and time. It is written as JSON
into the history's ``payload`` with ``schema_version``; `RunRecord.from_dict` reads every version
fitbench has written:

    0  rows from before records had a version (no ``schema_version`` key): the workload may be
       a bare name, sections may be missing, and a generation measurement may lack
       ``end_to_end_tokens_per_second`` (it was only ``tokens_per_second`` then);
    1  this module's shape.

`migrate_payload` brings an older dict to the current version; a version newer than this
fitbench knows is refused (`FitbenchError`), as the history refuses a newer schema, because
guessing at a newer shape could show wrong numbers.

Unknown keys are **kept** (in ``extra``, written back unchanged) in both classes: a record is
a user's measurement, and `fitbench check` adds its own sections; dropping them would lose data
and refusing them would make a history unreadable for an older reader. Key order is kept too, so
a record read and written back is the same JSON.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fitbench.errors import FitbenchError
from fitbench.records.measurement import Measurement, ordered, plain
from fitbench.records.sections import Diagnosis

__all__ = [
    "RUN_RECORD_SCHEMA",
    "EstimateSummary",
    "RunRecord",
    "WorkloadView",
    "migrate_payload",
    "payload_version",
]

RUN_RECORD_SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class EstimateSummary:
    """The estimate a run is held against: `Estimate.to_dict()` as stored, with the figures that
    readers use as attributes. Every other key of the estimate's JSON is kept in ``extra``."""

    gpu: str | None = None
    gpu_name: str | None = None
    workload: str | None = None
    family: str | None = None
    mode: str | None = None
    precision: str | None = None
    framework: str | None = None
    exec_mode: str | None = None
    prompt_tokens: int | None = None
    new_tokens: int | None = None
    params: int | None = None
    verdict: str | None = None
    peak_memory_bytes: int | None = None
    usable_memory_bytes: int | None = None
    breakdown: Mapping[str, int] = field(default_factory=dict)
    max_batch_size: int | None = None
    step_seconds: float | None = None
    epoch_seconds: float | None = None
    samples_per_second: float | None = None
    tokens_per_second: float | None = None
    tokens_per_second_if_it_fit: float | None = None
    prefill_seconds: float | None = None
    bottleneck: str | None = None
    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    gpu_seconds: float | None = None
    host_seconds: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_estimate(cls, estimate: Any) -> EstimateSummary:
        """From an `fitbench.estimate.api.Estimate` (or anything with its `to_dict`)."""
        return cls.from_dict(estimate.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EstimateSummary:
        if isinstance(data, EstimateSummary):
            return data
        known, extra = _split(data, _ESTIMATE_FIELDS)
        # An estimate's JSON names every figure even when it is null: all of them were present.
        known["breakdown"] = dict(known.get("breakdown") or {})
        return cls(**known, extra=extra, order=tuple(data))

    @property
    def model_flops_per_step(self) -> float | None:
        """Training: the step's useful FLOPs (fitbench.estimate.model_flops), from the estimate's
        JSON; None in records written before estimates had them. Read, not a field, so an older
        record is written back without the key."""
        value = self.extra.get("model_flops_per_step")
        return float(value) if value is not None else None

    @property
    def mfu(self) -> float | None:
        """Training: the estimate's model FLOPs utilization (None where the record lacks it)."""
        value = self.extra.get("mfu")
        return float(value) if value is not None else None

    def to_dict(self) -> dict[str, Any]:
        out = {name: plain(getattr(self, name)) for name in _ESTIMATE_FIELDS}
        out.update(self.extra)
        return ordered(out, self.order)


_ESTIMATE_FIELDS = tuple(
    f.name for f in dataclasses.fields(EstimateSummary) if f.name not in ("extra", "order")
)


# RunRecord's keys: always written, and written only when the record has them.
@dataclass(frozen=True, kw_only=True)
class WorkloadView:
    """The fields of a stored workload that reports and the CLI read, by attribute.

    The record keeps its workload as the mapping it was stored with (written back unchanged); this
    view reads the few keys the readers need from it, each None where an older row lacks it, the
    value as it was stored otherwise.
    """

    name: str | None = None
    precision: str | None = None
    batch_size: int | None = None
    new_tokens: int | None = None
    family: str | None = None
    mode: str | None = None
    arch: Any = None
    params: int | None = None
    description: str | None = None
    tiny: bool = False

    @classmethod
    def from_mapping(cls, workload: Mapping[str, Any] | WorkloadView) -> WorkloadView:
        if isinstance(workload, WorkloadView):
            return workload
        names = [f.name for f in dataclasses.fields(cls) if f.name != "tiny"]
        return cls(**{k: workload.get(k) for k in names}, tiny=bool(workload.get("tiny")))

    @property
    def is_generation(self) -> bool:
        """A decoder's generation (`run --mode infer`): its step is one decoded token."""
        return self.family == "decoder" and self.mode == "infer"


_RECORD_KEYS = ("command", "workload", "estimate", "measurement", "environment", "error_vs_estimate")
_RECORD_OPTIONAL = (
    "diagnosis",
    "host_speed_ratio",
    "estimate_reference_host",
    "scenario",
    "catalog_estimates",
    "advice",
    "run_id",
    "created_at",
)


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One stored run. ``run_id`` and ``created_at`` come from the history, which assigns them."""

    SCHEMA_VERSION: ClassVar[int] = RUN_RECORD_SCHEMA

    schema_version: int = RUN_RECORD_SCHEMA
    command: str | None = None
    workload: Mapping[str, Any] = field(default_factory=dict)
    estimate: EstimateSummary | None = None
    measurement: Measurement | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)
    error_vs_estimate: Mapping[str, float | None] = field(default_factory=dict)
    diagnosis: Diagnosis | None = None
    # The estimate is for the run's own host where it probed it: its probe round over the
    # reference host's, and the reference host's speed figures with their errors.
    host_speed_ratio: float | None = None
    estimate_reference_host: Mapping[str, Any] | None = None
    # `fitbench check`: the scenario, the catalog's estimates of it, the advice given.
    scenario: str | None = None
    catalog_estimates: Mapping[str, Any] | None = None
    advice: Sequence[Any] | None = None
    run_id: str | None = None
    created_at: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    # ------------------------------------------------------------------ reading

    @property
    def workload_view(self) -> WorkloadView:
        """The stored workload's fields by attribute (None where an older row lacks one)."""
        return WorkloadView.from_mapping(self.workload)

    @property
    def workload_name(self) -> str | None:
        name = self.workload_view.name
        return None if name is None else str(name)

    @property
    def is_generation(self) -> bool:
        return self.workload_view.is_generation

    @property
    def tiny(self) -> bool:
        return self.workload_view.tiny

    @property
    def status(self) -> str | None:
        return self.measurement.status if self.measurement is not None else self.extra.get("status")

    # ------------------------------------------------------------------ JSON

    def to_dict(self, *, ids: bool = True) -> dict[str, Any]:
        """The record as JSON. ``ids=False`` leaves out run_id and created_at: the payload the
        history stores (it keeps them in columns)."""
        out: dict[str, Any] = {
            "schema_version": self.schema_version,
            "command": self.command,
            "workload": dict(self.workload),
            "estimate": self.estimate.to_dict() if self.estimate is not None else None,
            "measurement": self.measurement.to_dict() if self.measurement is not None else None,
            "environment": dict(self.environment),
            "error_vs_estimate": dict(self.error_vs_estimate),
        }
        for key in _RECORD_OPTIONAL:
            if not ids and key in ("run_id", "created_at"):
                continue
            value = getattr(self, key)
            if value is not None or key in self.present:
                out[key] = plain(value)
        out.update(self.extra)
        return ordered(out, self.order)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, version: int | None = None) -> RunRecord:
        """A record of any version this fitbench has written (see the module docstring).

        `version` is the schema version when it is known apart from the dict (the history's
        column); otherwise the dict's ``schema_version`` key, and 0 without one.
        """
        if isinstance(data, RunRecord):
            return data
        if not isinstance(data, Mapping):
            raise TypeError(f"a run record is a mapping, got {type(data).__name__}")
        current = migrate_payload(data, payload_version(data) if version is None else version)
        known, extra = _split(current, ("schema_version", *_RECORD_KEYS, *_RECORD_OPTIONAL))
        estimate, measurement = known.get("estimate"), known.get("measurement")
        if isinstance(known.get("diagnosis"), Mapping):
            known["diagnosis"] = Diagnosis.from_dict(known["diagnosis"])
        known.update(
            workload=_mapping(known.get("workload")),
            estimate=EstimateSummary.from_dict(estimate) if isinstance(estimate, Mapping) else None,
            measurement=Measurement.from_dict(measurement) if isinstance(measurement, Mapping) else None,
            environment=_mapping(known.get("environment")),
            error_vs_estimate=_mapping(known.get("error_vs_estimate")),
        )
        present = frozenset(k for k in current if k in _RECORD_OPTIONAL)
        return cls(**known, extra=extra, present=present, order=tuple(current))


def payload_version(data: Mapping[str, Any]) -> int:
    """The schema version a stored dict says it has; 0 for the unversioned rows of old files."""
    version = data.get("schema_version")
    return version if isinstance(version, int) and not isinstance(version, bool) else 0


def migrate_payload(data: Mapping[str, Any], version: int) -> dict[str, Any]:
    """`data`, written at schema `version`, in the current shape (a new dict; `data` is kept)."""
    if version > RUN_RECORD_SCHEMA:
        raise FitbenchError(
            f"a stored run has record schema {version}, newer than this fitbench reads ({RUN_RECORD_SCHEMA})",
            "upgrade fitbench to read this history",
            message_zh=(
                f"一条已保存的运行记录使用记录模式 {version},比当前 fitbench "
                f"能读取的({RUN_RECORD_SCHEMA})更新"
            ),
            hint_zh="请升级 fitbench 以读取这份历史记录",
        )
    out = dict(data)
    if version < 1:
        out = _from_unversioned(out)
    out["schema_version"] = RUN_RECORD_SCHEMA
    return out


def _from_unversioned(data: dict[str, Any]) -> dict[str, Any]:
    """Version 0 -> 1: every section in place and of its type, both token rates named."""
    workload = data.get("workload")
    if isinstance(workload, str):
        data["workload"] = {"name": workload}
    elif not isinstance(workload, Mapping):
        data["workload"] = {}
    for key in ("estimate", "measurement"):
        if not isinstance(data.get(key), Mapping):
            data[key] = None
    measurement = data["measurement"]
    if not isinstance(data.get("environment"), Mapping):
        found = measurement.get("environment") if measurement is not None else None
        data["environment"] = dict(found) if isinstance(found, Mapping) else {}
    if not isinstance(data.get("error_vs_estimate"), Mapping):
        data["error_vs_estimate"] = {}
    w = data["workload"]
    generation = w.get("family") == "decoder" and w.get("mode") == "infer"
    if generation and measurement is not None and "end_to_end_tokens_per_second" not in measurement:
        data["measurement"] = {
            **measurement,
            "end_to_end_tokens_per_second": measurement.get("tokens_per_second"),
        }
    return data


# ---------------------------------------------------------------------- helpers


def _mapping(value: Any) -> dict[str, Any]:
    """A section as a dict; anything else (a current-version record is never so) as an empty one."""
    return dict(value) if isinstance(value, Mapping) else {}


def _split(data: Mapping[str, Any], names: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the keys `names` holds, every other key)."""
    wanted = set(names)
    known = {k: v for k, v in data.items() if k in wanted}
    extra = {k: v for k, v in data.items() if k not in wanted}
    return known, extra
