"""What limited a measured run: compute, memory bandwidth, or overhead, and one thing to change.

A measurement says how long a step took; the estimate says how much work the step is (FLOPs
and bytes) and where the estimator expected the time to go (host or GPU). Dividing the work by
the measured time gives what the card really achieved, as a fraction of its datasheet peak and
bandwidth; comparing the measured time with the roofline time (the work at peak speed) says
whether the GPU was busy at all:

    compute_seconds  = FLOPs / dense peak of the precision in effect
    memory_seconds   = bytes / bandwidth
    roofline_seconds = max(compute_seconds, memory_seconds)

    overhead  measured > 2.5 x roofline, and the estimate puts the time on the host (its
              host_seconds exceed its GPU seconds) or on per-kernel launch floors (its own
              bottleneck is 'overhead'): the GPU mostly waits;
    compute   otherwise, when compute_seconds >= memory_seconds;
    memory    otherwise.

Generation is judged per decode step (one new token for every sequence), the unit the
estimator's FLOPs and bytes describe. Pure Python: no framework import. The sentences live in
the catalogue (i18n.py) with the rest of the advice, in English and Chinese.
"""

from __future__ import annotations

from typing import Protocol

from fitbench.advise.fixes import FULL_PRECISIONS
from fitbench.advise.i18n import bottleneck_label, has, t
from fitbench.core.gpu import GpuSpec
from fitbench.core.names import ExecMode
from fitbench.core.precision import get_precision
from fitbench.errors import FitbenchError
from fitbench.estimate.model_flops import peak_class
from fitbench.records.measurement import Measurement
from fitbench.records.sections import DIAGNOSIS_KEYS, Diagnosis

OVERHEAD_FACTOR = 2.5  # measured / roofline above which a step is not limited by the GPU's work

# Every key of a diagnosis's JSON, in order (the README documents them).
KEYS = DIAGNOSIS_KEYS

# Each suggestion diagnose() can make, by kind, as its sentence in the catalogue
# (diagnosis.<bottleneck>.<suggestion_kind>): the JSON keeps the English, the terminal speaks --lang.
SUGGESTION_KEYS = {
    "tuned": "diagnosis.overhead.tuned",
    "batch": "diagnosis.overhead.batch",
    "quantize": "diagnosis.memory.quantize",
    "batch-decode": "diagnosis.memory.batch",
    "amp-memory": "diagnosis.memory.amp",
    "card-memory": "diagnosis.memory.card",
    "amp": "diagnosis.compute.amp",
    "card-compute": "diagnosis.compute.card",
}
SUGGESTIONS = {kind: t(key, "en") for kind, key in SUGGESTION_KEYS.items()}


class EstimatedWork(Protocol):
    """What the diagnosis reads of an estimate: its work per step and where it put the time
    (`fitbench.records.run.EstimateSummary` has these)."""

    @property
    def family(self) -> str | None: ...
    @property
    def mode(self) -> str | None: ...
    @property
    def precision(self) -> str | None: ...
    @property
    def new_tokens(self) -> int | None: ...
    @property
    def flops_per_step(self) -> float | None: ...
    @property
    def model_flops_per_step(self) -> float | None: ...
    @property
    def bytes_per_step(self) -> float | None: ...
    @property
    def host_seconds(self) -> float | None: ...
    @property
    def gpu_seconds(self) -> float | None: ...
    @property
    def bottleneck(self) -> str | None: ...


def _unavailable(reason: str, *, gpu: str | None = None, basis: str | None = None) -> Diagnosis:
    return Diagnosis(available=False, reason=reason, gpu=gpu, basis=basis)


def compute_class(precision: str, family: str) -> str:
    """The datasheet peak a precision runs at; FP32 convolutions use TF32 (cuDNN's default in PyTorch)."""
    return peak_class(precision, family)


def _measured_step(m: Measurement, est: EstimatedWork) -> tuple[float | None, str]:
    """Seconds of the unit the estimate's FLOPs and bytes describe, and that unit's name."""
    if est.new_tokens:  # generation: one decode step
        decode = m.decode_seconds
        return (decode / est.new_tokens if decode else None), "decode step (one token per sequence)"
    mode = "training step" if est.mode == "train" else "forward pass"
    return m.step_seconds, mode


def _suggest(bottleneck: str, *, exec_mode: str, generation: bool, compute: str, quantized: bool) -> str:
    if bottleneck == "overhead":
        return "batch" if exec_mode == ExecMode.TUNED else "tuned"
    if bottleneck == "memory":
        if generation:
            return "batch-decode" if quantized else "quantize"
        return "amp-memory" if compute in FULL_PRECISIONS else "card-memory"
    return "amp" if compute in FULL_PRECISIONS else "card-compute"


def diagnose(measurement: Measurement, estimate: EstimatedWork | None, gpu: GpuSpec | None) -> Diagnosis:
    """Achieved FLOP/s and bytes/s, fractions of the card's peaks, the bottleneck and one suggestion.

    `estimate` is the estimate of the same workload on `gpu` (the card measured on), as an
    `EstimateSummary`. Its `to_dict` always has every key of KEYS; `available` is False (with a
    `reason`) when the run did not complete, ran on a CPU, or has no estimate or GPU to compare with.
    """
    if not measurement.completed:
        return _unavailable(f"the run did not complete (status {measurement.status})")
    if not measurement.on_gpu:
        return _unavailable("measured on the CPU: GPU peaks do not apply")
    if estimate is None or gpu is None:
        return _unavailable("no estimate for this GPU to take the work per step from")
    flops = float(estimate.flops_per_step or 0.0)
    nbytes = float(estimate.bytes_per_step or 0.0)
    seconds, basis = _measured_step(measurement, estimate)
    if not seconds or seconds <= 0:
        return _unavailable(f"no measured time for one {basis}", gpu=gpu.id, basis=basis)
    if flops <= 0 and nbytes <= 0:
        return _unavailable("the estimate has no work per step", gpu=gpu.id, basis=basis)
    precision = str(
        measurement.precision_in_effect or estimate.precision or measurement.precision_requested or "fp32"
    )
    compute = compute_class(precision, str(estimate.family or ""))
    return _diagnosis(
        measurement,
        estimate,
        gpu,
        seconds=seconds,
        basis=basis,
        flops=flops,
        nbytes=nbytes,
        precision=precision,
        compute=compute,
    )


def _diagnosis(
    m: Measurement,
    estimate: EstimatedWork,
    gpu: GpuSpec,
    *,
    seconds: float,
    basis: str,
    flops: float,
    nbytes: float,
    precision: str,
    compute: str,
) -> Diagnosis:
    """The diagnosis of a completed GPU run with a measured time and work to divide by it."""
    peak = gpu.peak(compute)
    bandwidth = gpu.bandwidth_bytes_s
    # Training only: the step's useful FLOPs (no recomputation; estimate/model_flops.py).
    model_flops = float(estimate.model_flops_per_step or 0.0)
    compute_s = flops / peak
    memory_s = nbytes / bandwidth
    roofline = max(compute_s, memory_s)
    host, gpu_s = estimate.host_seconds, estimate.gpu_seconds
    host_bound = host is not None and gpu_s is not None and host >= gpu_s
    waits = host_bound or estimate.bottleneck == "overhead"
    if roofline > 0 and seconds > OVERHEAD_FACTOR * roofline and waits:
        bottleneck = "overhead"
    else:
        bottleneck = "compute" if compute_s >= memory_s else "memory"
    try:
        quantized = get_precision(precision).quant_bits is not None
    except FitbenchError:
        quantized = False
    kind = _suggest(
        bottleneck,
        exec_mode=str(m.exec_mode or "default"),
        generation=bool(estimate.new_tokens),
        compute=compute,
        quantized=quantized,
    )
    return Diagnosis(
        available=True,
        reason=None,
        gpu=gpu.id,
        basis=basis,
        measured_seconds=seconds,
        compute_precision=compute,
        flops_per_step=flops,
        bytes_per_step=nbytes,
        peak_flops_per_second=peak,
        bandwidth_bytes_per_second=bandwidth,
        achieved_flops_per_second=flops / seconds,
        achieved_bytes_per_second=nbytes / seconds,
        compute_fraction=compute_s / seconds,
        bandwidth_fraction=memory_s / seconds,
        compute_seconds=compute_s,
        memory_seconds=memory_s,
        roofline_seconds=roofline,
        times_roofline=seconds / roofline if roofline > 0 else None,
        model_flops_per_step=model_flops,
        mfu=model_flops / seconds / peak if model_flops else None,
        estimate_host_seconds=host,
        estimate_gpu_seconds=gpu_s,
        bottleneck=bottleneck,
        suggestion_kind=kind.split("-")[0],
        suggestion=SUGGESTIONS[kind],
    )


def format_diagnosis(d: Diagnosis | None, lang: str = "en") -> str | None:
    """One line for the terminal in `lang`, or None when there is nothing to say."""
    if d is None or not d.available or d.bottleneck is None:
        return None
    times = d.times_roofline
    roof = t("diagnosis.roofline", lang, times=f"{times:.1f}") if times else ""
    key = f"diagnosis.{d.bottleneck}.{d.suggestion_kind}"
    return t(
        "diagnosis.line",
        lang,
        bottleneck=bottleneck_label(d.bottleneck, lang),
        compute=f"{d.compute_fraction or 0.0:.0%}",
        precision=d.compute_precision,
        bandwidth=f"{d.bandwidth_fraction or 0.0:.0%}",
        roofline=roof,
        suggestion=t(key, lang) if has(key) else d.suggestion,
    )
