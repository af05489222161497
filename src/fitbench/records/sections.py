"""The typed sections of a measurement and a run record: the distributed layout, the max-batch
search and the bottleneck diagnosis.

Each is a frozen dataclass with `from_dict`/`to_dict` that keeps the JSON field names the README
documents. They read every shape the history holds: a stored section may lack keys an older
fitbench did not write yet (a missing figure is None) or carry keys a newer one added (kept in
``extra`` and written back). A section read from JSON writes back the keys it was read with, in
their order, so a stored record read and written again is the same JSON; a section built in code
writes every field.

Pure Python: no framework import.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = [
    "DIAGNOSIS_KEYS",
    "Diagnosis",
    "DistributedLayout",
    "MaxBatchCheck",
    "MaxBatchSearch",
    "SearchProbe",
]

_S = TypeVar("_S")

# Bookkeeping fields every section has; they are not JSON keys.
_BOOKKEEPING = ("extra", "present", "order")


def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.name not in _BOOKKEEPING)


def _json(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


def _to_dict(section: Any, names: Sequence[str]) -> dict[str, Any]:
    """The section's JSON: every field when built in code, the keys it was read with (and any
    set since) when read from JSON; unknown keys as they came; the source's key order first."""
    present = section.present
    out = {
        name: _json(getattr(section, name))
        for name in names
        if present is None or name in present or getattr(section, name) is not None
    }
    out.update(section.extra)
    first = {k: out[k] for k in section.order if k in out}
    return {**first, **{k: v for k, v in out.items() if k not in first}}


def _from_dict(cls: type[_S], data: Mapping[str, Any], names: Sequence[str], **converted: Any) -> _S:
    """`cls` from a stored mapping; `converted` replaces the values of fields that need a type."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise TypeError(f"a {cls.__name__} is read from a mapping, got {type(data).__name__}")
    wanted = set(names)
    known = {k: v for k, v in data.items() if k in wanted}
    known.update({k: v for k, v in converted.items() if k in data})
    extra = {k: v for k, v in data.items() if k not in wanted}
    return cls(**known, extra=extra, present=frozenset(known), order=tuple(data))


@dataclass(frozen=True, kw_only=True)
class DistributedLayout:
    """How a measurement on several GPUs was launched (`measurement.distributed`)."""

    strategy: str | None = None
    nproc: int | None = None
    launcher: str | None = None
    process_group: str | None = None
    per_gpu_batch_size: int | None = None
    global_batch_size: int | None = None
    data_parallel_degree: int | None = None
    steps_fixed: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = field(default=None, compare=False, repr=False)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DistributedLayout:
        return _from_dict(cls, data, _DISTRIBUTED_FIELDS)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self, _DISTRIBUTED_FIELDS)


@dataclass(frozen=True, kw_only=True)
class SearchProbe:
    """One probe of the max-batch search: a batch size and how its run ended."""

    batch_size: int | None = None
    status: str | None = None
    peak_memory_bytes: int | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = field(default=None, compare=False, repr=False)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchProbe:
        return _from_dict(cls, data, _PROBE_FIELDS)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self, _PROBE_FIELDS)


@dataclass(frozen=True, kw_only=True)
class MaxBatchSearch:
    """What the search for the largest batch found (`measurement.max_batch_search`).

    max_batch: the largest batch that ran (None when even batch 1 did not); reached_limit: every
    batch up to `limit` ran; stopped: why the search ended early, in English (None when it did not).
    """

    max_batch: int | None = None
    start: int | None = None
    limit: int | None = None
    reached_limit: bool | None = None
    first_oom: int | None = None
    stopped: str | None = None
    probes: tuple[SearchProbe, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = field(default=None, compare=False, repr=False)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MaxBatchSearch:
        probes = data.get("probes") if isinstance(data, Mapping) else None
        typed = None if probes is None else tuple(SearchProbe.from_dict(p) for p in probes)
        return _from_dict(cls, data, _SEARCH_FIELDS, probes=typed)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self, _SEARCH_FIELDS)


@dataclass(frozen=True, kw_only=True)
class MaxBatchCheck:
    """The max-batch search beside the estimate's largest batch (`fitbench run --json`'s `max_batch`).

    Built once by the run command, read by its terminal report and written as JSON: `search` what
    the search found; `capped` the memory that set its bounds (`host_ram`, `device_memory`, None
    when the estimate's `uncapped_start` stood), `memory_bytes` what that memory holds and
    `budget_bytes` the share of it the memory model was asked to fit; `comparable` None without an
    estimate, else whether the two compare (`not_comparable` the reasons when they do not).
    """

    estimated: int | None
    search: MaxBatchSearch
    capped: str | None = None
    uncapped_start: int | None = None
    memory_bytes: int | None = None
    budget_bytes: int | None = None
    comparable: bool | None = None
    not_comparable: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The search's keys between the estimate's largest batch and the bounds, as the README
        documents them."""
        return {
            "estimated": self.estimated,
            **self.search.to_dict(),
            "capped": self.capped,
            "uncapped_start": self.uncapped_start,
            "memory_bytes": self.memory_bytes,
            "budget_bytes": self.budget_bytes,
            "comparable": self.comparable,
            "not_comparable": list(self.not_comparable),
        }


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """What limited a measured run (`fitbench.advise.diagnosis.diagnose` computes it).

    ``available`` is False, with a ``reason``, when there was nothing to divide (the run did not
    complete, ran on a CPU, or has no estimate or GPU to compare with); the figures are then None.
    ``suggestion`` is the English sentence (the JSON's); the terminal words it by ``suggestion_kind``.
    """

    available: bool = False
    reason: str | None = None
    gpu: str | None = None
    basis: str | None = None
    measured_seconds: float | None = None
    compute_precision: str | None = None
    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    peak_flops_per_second: float | None = None
    bandwidth_bytes_per_second: float | None = None
    achieved_flops_per_second: float | None = None
    achieved_bytes_per_second: float | None = None
    compute_fraction: float | None = None
    bandwidth_fraction: float | None = None
    compute_seconds: float | None = None
    memory_seconds: float | None = None
    roofline_seconds: float | None = None
    times_roofline: float | None = None
    model_flops_per_step: float | None = None
    mfu: float | None = None
    estimate_host_seconds: float | None = None
    estimate_gpu_seconds: float | None = None
    bottleneck: str | None = None
    suggestion_kind: str | None = None
    suggestion: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    present: frozenset[str] | None = field(default=None, compare=False, repr=False)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        return _from_dict(cls, data, DIAGNOSIS_KEYS)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self, DIAGNOSIS_KEYS)


_DISTRIBUTED_FIELDS = _field_names(DistributedLayout)
_PROBE_FIELDS = _field_names(SearchProbe)
_SEARCH_FIELDS = _field_names(MaxBatchSearch)
# The diagnosis's JSON keys, in order (documented in the README).
DIAGNOSIS_KEYS = _field_names(Diagnosis)
