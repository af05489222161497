"""The measurement as a typed record: what the child process (through the runner) says happened.

The child writes plain JSON (it must, across a process boundary and across fitbench versions);
readers turn it into a `Measurement` once, with `Measurement.from_dict`, and read attributes from
then on. `to_dict` gives the same JSON back, key for key: `fitbench run --json` and the history
keep the field names the README documents.

Which keys a measurement has:

* ``MEASUREMENT_KEYS``, every measurement, whatever happened (the runner starts from a skeleton
  with all of them, unknown figures None);
* ``OPTIONAL_KEYS``, typed fields a run has only sometimes (an error's hint, a GPU's context
  size, the distributed layout, the max-batch search). `to_dict` writes one when the source had
  it or it is set, so an explicit null stays a null and an absent key stays absent; the
  distributed layout and the search are typed sections (`fitbench.records.sections`);
* anything else (per-backend figures, the step statistics beyond median and p90, a newer
  fitbench's additions) is **kept** in ``extra`` and written back unchanged. Kept rather than
  refused because a measurement is data a user paid minutes of GPU time for: the history must
  hold all of it, and a newer child's keys must not make an older parent fail.

Pure Python: no framework import.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fitbench.records.sections import DistributedLayout, MaxBatchSearch

__all__ = [
    "MEASUREMENT_KEYS",
    "MEASUREMENT_SCHEMA",
    "OPTIONAL_KEYS",
    "STATUSES",
    "Measurement",
    "ordered",
    "plain",
]

MEASUREMENT_SCHEMA = 1
STATUSES = ("ok", "oom", "error", "timeout")

# Every measurement has these keys, whatever happened, in this order.
MEASUREMENT_KEYS = (
    "status",
    "error",
    "backend",
    "framework_version",
    "device",
    "device_name",
    "exec_mode",
    "precision_requested",
    "precision_in_effect",
    "warnings",
    "params",
    "batch_size",
    "peak_memory_bytes",
    "peak_memory_source",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "nvml_process_peak_bytes",
    "nvml_device_used_bytes",
    "cuda_context_bytes",
    "peak_rss_bytes",
    "memory_after_load_bytes",
    "load_seconds",
    "warmup_steps",
    "steps",
    "step_seconds",
    "step_seconds_p90",
    "step_samples_seconds",
    "sample_unit",
    "samples_per_second",
    "tokens_per_second",
    "epoch_seconds",
    "dataset_size",
    "prefill_seconds",
    "decode_seconds",
    "decode_tokens_per_second",
    "environment",
)

# Typed, but present only in some measurements.
OPTIONAL_KEYS = (
    "error_type",
    "hint",
    "traceback",
    "oom_detail",
    "stderr_tail",
    "child_exit_code",
    "wall_seconds",
    "backend_notes",
    "distributed",
    "max_batch_search",
    "end_to_end_tokens_per_second",
    "decode_step_seconds",
    # The host's speed (fitbench.measure.host_speed): every measurement fitbench makes now has
    # them, null where not measured; a stored record from before them keeps its keys.
    "host_probe_seconds",
    "host_probe_parts",
    "host_probe_drift",
    # Each timed figure's spread over its repeated windows (fitbench.measure.timing): figure name
    # -> {spread, stable, windows, windows_run}, and the spread a figure had to stay below.
    "spreads",
    "spread_target",
)


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """What one measurement found. Figures are None where the run did not get that far."""

    SCHEMA_VERSION: ClassVar[int] = MEASUREMENT_SCHEMA

    status: str | None = None
    error: str | None = None
    backend: str | None = None
    framework_version: str | None = None
    device: str | None = None
    device_name: str | None = None
    exec_mode: str | None = None
    precision_requested: str | None = None
    precision_in_effect: str | None = None
    warnings: tuple[str, ...] = ()
    params: int | None = None
    batch_size: int | None = None
    # Peak memory by source: the one shown (`peak_memory_bytes`, from `peak_memory_source`) and
    # each reading it was chosen from.
    peak_memory_bytes: int | None = None
    peak_memory_source: str | None = None
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    nvml_process_peak_bytes: int | None = None
    nvml_device_used_bytes: int | None = None
    cuda_context_bytes: int | None = None
    peak_rss_bytes: int | None = None
    memory_after_load_bytes: int | None = None
    load_seconds: float | None = None
    warmup_steps: int | None = None
    steps: int | None = None
    step_seconds: float | None = None
    step_seconds_p90: float | None = None
    step_samples_seconds: tuple[float, ...] = ()
    sample_unit: str | None = None
    samples_per_second: float | None = None
    tokens_per_second: float | None = None
    epoch_seconds: float | None = None
    dataset_size: int | None = None
    prefill_seconds: float | None = None
    decode_seconds: float | None = None
    decode_tokens_per_second: float | None = None
    # This host's speed, timed in the measuring process (fitbench.measure.host_speed): one probe
    # round in seconds, its calls' seconds per call, and the after / before ratio of two rounds.
    environment: Mapping[str, Any] = field(default_factory=dict)
    # OPTIONAL_KEYS
    error_type: str | None = None
    hint: str | None = None
    traceback: str | None = None
    oom_detail: str | None = None
    stderr_tail: str | None = None
    child_exit_code: int | None = None
    wall_seconds: float | None = None
    backend_notes: Mapping[str, Any] | None = None
    distributed: DistributedLayout | None = None
    max_batch_search: MaxBatchSearch | None = None
    end_to_end_tokens_per_second: float | None = None
    # A generation's median decode step (n-token less one-token generation over n - 1), where recorded.
    decode_step_seconds: float | None = None
    # This host's speed, timed in the measuring process (fitbench.measure.host_speed): one probe
    # round in seconds, its calls' seconds per call, and the after / before ratio of two rounds.
    host_probe_seconds: float | None = None
    host_probe_parts: Mapping[str, float] | None = None
    host_probe_drift: float | None = None
    # Each timed figure's spread: figure name (step_seconds, prefill_seconds, decode_step_seconds)
    # -> {"spread": (max - min) / median of its windows, "stable": below spread_target, "windows",
    # "windows_run"}; None in records from before spreads were taken.
    spreads: Mapping[str, Mapping[str, Any]] | None = None
    spread_target: float | None = None
    # Keys this class does not name, kept as they came.
    extra: Mapping[str, Any] = field(default_factory=dict)
    # The optional keys the source had (written back even where None).
    present: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    # The source's key order, kept so that a measurement read and written back is the same JSON.
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    # ------------------------------------------------------------------ reading

    @property
    def completed(self) -> bool:
        return self.status == "ok"

    @property
    def on_gpu(self) -> bool:
        """Whether it ran on a CUDA device (the only place a GPU estimate can be held against it)."""
        return str(self.device or "").startswith("cuda")

    @property
    def is_verdict(self) -> bool:
        """ok or oom: the run answered the question (out of memory is an answer, not a failure)."""
        return self.status in ("ok", "oom")

    def decode_step(self, new_tokens: int | None) -> float | None:
        """Seconds of one decode step of a generation (one token per sequence).

        The child's `decode_step_seconds` where it recorded one: the difference of an n-token and
        a one-token generation over n - 1, medians both, so it holds the decode steps alone and
        not the generate call's once-per-call work, and host noise in one sample does not move it.
        Older records have only `decode_seconds` (a generation less a separately timed prefill),
        which is spread over the `new_tokens` instead.
        """
        if self.decode_step_seconds:
            return self.decode_step_seconds
        decode, new = self.decode_seconds, new_tokens or 0
        return decode / new if decode and new else None

    def spread_of(self, figure: str) -> Mapping[str, Any] | None:
        """The recorded spread of one timed figure ({spread, stable, windows, windows_run}), None
        where the run did not take one (an older record, a distributed run, a figure not timed)."""
        entry = (self.spreads or {}).get(figure)
        return entry if isinstance(entry, Mapping) else None

    def decode_rate(self, batch_size: int | None) -> float | None:
        """Decode tokens/s of one decode step: batch / decode_step_seconds where the child recorded
        the differenced step, else its decode_tokens_per_second (which spreads the generate call's
        once-per-call work over the tokens)."""
        if self.decode_step_seconds and batch_size:
            return batch_size / self.decode_step_seconds
        return self.decode_tokens_per_second

    # ------------------------------------------------------------------ changing

    def with_values(self, **values: Any) -> Measurement:
        """A copy with fields set; an optional key set here is written by to_dict even as None."""
        optional = {k for k in values if k in OPTIONAL_KEYS}
        return dataclasses.replace(self, **_typed_sections(values), present=self.present | optional)

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in MEASUREMENT_KEYS:
            out[key] = plain(getattr(self, key))
        for key in OPTIONAL_KEYS:
            value = getattr(self, key)
            if value is not None or key in self.present:
                out[key] = plain(value)
        out.update(self.extra)
        return ordered(out, self.order)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        """The measurement a child, the runner or a stored record wrote. Missing figures are None;
        unknown keys go to `extra` (see the module docstring); types are taken as written."""
        if isinstance(data, Measurement):
            return data
        if not isinstance(data, Mapping):
            raise TypeError(f"a measurement is a mapping, got {type(data).__name__}")
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key in _FIELDS:
                known[key] = value
            else:
                extra[key] = value
        known["warnings"] = tuple(known.get("warnings") or ())
        known["step_samples_seconds"] = tuple(known.get("step_samples_seconds") or ())
        known["environment"] = dict(known.get("environment") or {})
        known = _typed_sections(known)
        present = frozenset(k for k in data if k in OPTIONAL_KEYS)
        return cls(**known, extra=extra, present=present, order=tuple(data))


_FIELDS = frozenset((*MEASUREMENT_KEYS, *OPTIONAL_KEYS))
_SECTIONS = {"distributed": DistributedLayout, "max_batch_search": MaxBatchSearch}


def _typed_sections(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with the distributed layout and the max-batch search as their records (a stored
    mapping is read with `from_dict`; a record or None is kept)."""
    out = dict(values)
    for key, cls in _SECTIONS.items():
        if isinstance(out.get(key), Mapping):
            out[key] = cls.from_dict(out[key])
    return out


def plain(value: Any) -> Any:
    """Tuples back to JSON lists, mappings to plain dicts, typed sections to their JSON."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def ordered(out: dict[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """`out` with the keys named in `order` first, in that order (the source's key order)."""
    if not order:
        return out
    first = {k: out[k] for k in order if k in out}
    return {**first, **{k: v for k, v in out.items() if k not in first}}
