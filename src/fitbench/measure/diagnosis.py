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
estimator's FLOPs and bytes describe. Pure Python: no framework import.
"""

from __future__ import annotations

from typing import Any

from fitbench.core.gpu import GpuSpec
from fitbench.core.precision import get_precision
from fitbench.errors import FitbenchError

OVERHEAD_FACTOR = 2.5  # measured / roofline above which a step is not limited by the GPU's work

KEYS = (
    "available",
    "reason",
    "gpu",
    "basis",
    "measured_seconds",
    "compute_precision",
    "flops_per_step",
    "bytes_per_step",
    "peak_flops_per_second",
    "bandwidth_bytes_per_second",
    "achieved_flops_per_second",
    "achieved_bytes_per_second",
    "compute_fraction",
    "bandwidth_fraction",
    "compute_seconds",
    "memory_seconds",
    "roofline_seconds",
    "times_roofline",
    "estimate_host_seconds",
    "estimate_gpu_seconds",
    "bottleneck",
    "suggestion_kind",
    "suggestion",
)

SUGGESTIONS = {
    "tuned": "the GPU waits for the host: raise the batch, or use --exec tuned (CUDA graphs)",
    "batch": "the GPU runs many small kernels: raise the batch so that each kernel has more work",
    "quantize": "decode is bandwidth-bound: int8/int4 weights, more requests per batch, or a card with "
    "more bandwidth",
    "batch-decode": "decode is bandwidth-bound: batch more requests per step, or a card with more bandwidth",
    "amp-memory": "memory-bound: AMP (bf16/fp16) halves the bytes every step moves",
    "card-memory": "memory-bound: a card with more memory bandwidth",
    "amp": "use AMP (bf16/fp16 tensor cores)",
    "card-compute": "a card with more tensor throughput",
}


def _unavailable(reason: str, **known: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(KEYS)
    out.update(known, available=False, reason=reason)
    return out


def compute_class(precision: str, family: str) -> str:
    """The datasheet peak a precision runs at; FP32 convolutions use TF32 (cuDNN's default in PyTorch)."""
    try:
        compute = get_precision(precision).compute
    except FitbenchError:
        compute = "fp32"
    if compute == "fp32" and family == "resnet":
        return "tf32"
    return compute


def _measured_step(m: dict[str, Any], est: dict[str, Any]) -> tuple[float | None, str]:
    """Seconds of the unit the estimate's FLOPs and bytes describe, and that unit's name."""
    if est.get("new_tokens"):  # generation: one decode step
        decode = m.get("decode_seconds")
        return (decode / est["new_tokens"] if decode else None), "decode step (one token per sequence)"
    mode = "training step" if est.get("mode") == "train" else "forward pass"
    return m.get("step_seconds"), mode


def _suggest(bottleneck: str, *, exec_mode: str, generation: bool, compute: str, quantized: bool) -> str:
    if bottleneck == "overhead":
        return "batch" if exec_mode == "tuned" else "tuned"
    if bottleneck == "memory":
        if generation:
            return "batch-decode" if quantized else "quantize"
        return "amp-memory" if compute in ("fp32", "tf32") else "card-memory"
    return "amp" if compute in ("fp32", "tf32") else "card-compute"


def diagnose(
    measurement: dict[str, Any], estimate: dict[str, Any] | None, gpu: GpuSpec | None
) -> dict[str, Any]:
    """Achieved FLOP/s and bytes/s, fractions of the card's peaks, the bottleneck and one suggestion.

    `estimate` is Estimate.to_dict() for the same workload on `gpu` (the card measured on).
    Always returns every key of KEYS; "available" is False (with a "reason") when the run did
    not complete, ran on a CPU, or has no estimate or GPU to compare with.
    """
    if hasattr(estimate, "to_dict"):
        estimate = estimate.to_dict()  # type: ignore[union-attr]
    if measurement.get("status") != "ok":
        return _unavailable(f"the run did not complete (status {measurement.get('status')})")
    if not str(measurement.get("device") or "").startswith("cuda"):
        return _unavailable("measured on the CPU: GPU peaks do not apply")
    if estimate is None or gpu is None:
        return _unavailable("no estimate for this GPU to take the work per step from")
    flops = float(estimate.get("flops_per_step") or 0.0)
    nbytes = float(estimate.get("bytes_per_step") or 0.0)
    seconds, basis = _measured_step(measurement, estimate)
    if not seconds or seconds <= 0:
        return _unavailable(f"no measured time for one {basis}", gpu=gpu.id, basis=basis)
    if flops <= 0 and nbytes <= 0:
        return _unavailable("the estimate has no work per step", gpu=gpu.id, basis=basis)

    family = str(estimate.get("family") or "")
    precision = str(
        measurement.get("precision_in_effect")
        or estimate.get("precision")
        or measurement.get("precision_requested")
        or "fp32"
    )
    compute = compute_class(precision, family)
    peak = gpu.peak(compute)
    bandwidth = gpu.bandwidth_bytes_s
    compute_s = flops / peak
    memory_s = nbytes / bandwidth
    roofline = max(compute_s, memory_s)
    host = estimate.get("host_seconds")
    gpu_s = estimate.get("gpu_seconds")
    host_bound = host is not None and gpu_s is not None and host >= gpu_s
    waits = host_bound or estimate.get("bottleneck") == "overhead"
    if roofline > 0 and seconds > OVERHEAD_FACTOR * roofline and waits:
        bottleneck = "overhead"
    else:
        bottleneck = "compute" if compute_s >= memory_s else "memory"
    generation = bool(estimate.get("new_tokens"))
    try:
        quantized = get_precision(precision).quant_bits is not None
    except FitbenchError:
        quantized = False
    kind = _suggest(
        bottleneck,
        exec_mode=str(measurement.get("exec_mode") or "default"),
        generation=generation,
        compute=compute,
        quantized=quantized,
    )
    return {
        "available": True,
        "reason": None,
        "gpu": gpu.id,
        "basis": basis,
        "measured_seconds": seconds,
        "compute_precision": compute,
        "flops_per_step": flops,
        "bytes_per_step": nbytes,
        "peak_flops_per_second": peak,
        "bandwidth_bytes_per_second": bandwidth,
        "achieved_flops_per_second": flops / seconds,
        "achieved_bytes_per_second": nbytes / seconds,
        "compute_fraction": compute_s / seconds,
        "bandwidth_fraction": memory_s / seconds,
        "compute_seconds": compute_s,
        "memory_seconds": memory_s,
        "roofline_seconds": roofline,
        "times_roofline": seconds / roofline if roofline > 0 else None,
        "estimate_host_seconds": host,
        "estimate_gpu_seconds": gpu_s,
        "bottleneck": bottleneck,
        "suggestion_kind": kind.split("-")[0],
        "suggestion": SUGGESTIONS[kind],
    }


def format_diagnosis(d: dict[str, Any], lang: str = "en") -> str | None:
    """One line for the terminal, or None when there is nothing to say."""
    from fitbench.advise.i18n import bottleneck_label, has, t

    if not d.get("available"):
        return None
    times = d.get("times_roofline")
    roof = t("run.diagnosis.roof", lang, times=f"{times:.1f}") if times else ""
    kind = next((k for k, text in SUGGESTIONS.items() if text == d.get("suggestion")), None)
    suggestion = t(f"diagnosis.{kind}", lang) if kind and has(f"diagnosis.{kind}") else d.get("suggestion")
    return t("run.diagnosis", lang, bottleneck=bottleneck_label(d["bottleneck"], lang),
             compute=f"{d['compute_fraction']:.0%}", precision=d["compute_precision"],
             bandwidth=f"{d['bandwidth_fraction']:.0%}", roof=roof, suggestion=suggestion)
