"""diagnose(): achieved rates, fractions of the card's peaks, the bottleneck and one suggestion.

Hand-made measurements and estimates on a hand-made card with round numbers, so every expected
figure can be checked with mental arithmetic: 100 TFLOP/s at 16 bit, 20 TFLOP/s at FP32,
50 TFLOP/s TF32, 1 TB/s.
"""

from __future__ import annotations

import pytest

from fitbench.advise.diagnosis import (
    KEYS,
    OVERHEAD_FACTOR,
    SUGGESTION_KEYS,
    SUGGESTIONS,
    compute_class,
    diagnose,
    format_diagnosis,
)
from fitbench.advise.i18n import t
from fitbench.core.gpu import GpuSpec
from fitbench.records.measurement import Measurement
from fitbench.records.run import EstimateSummary
from fitbench.records.sections import Diagnosis

CARD = GpuSpec(
    id="round-card",
    name="Round Card",
    vendor="nvidia",
    architecture="hopper",
    memory_bytes=80 << 30,
    usable_bytes=79 << 30,
    bandwidth_bytes_s=1e12,
    peak_flops={"fp32": 20e12, "tf32": 50e12, "fp16": 100e12, "bf16": 100e12},
    bf16=True,
)


def measurement(**fields):
    base = {
        "status": "ok",
        "device": "cuda",
        "exec_mode": "default",
        "precision_requested": "fp32",
        "precision_in_effect": None,
    }
    return Measurement.from_dict({**base, **fields})


def estimate(**fields):
    base = {
        "family": "encoder",
        "mode": "train",
        "precision": "fp32",
        "new_tokens": None,
        "host_seconds": 0.001,
        "gpu_seconds": 0.010,
        "bottleneck": "compute",
    }
    return EstimateSummary.from_dict({**base, **fields})


def test_overhead_when_the_gpu_waits_for_the_host():
    # 1 TFLOP at 100 TFLOP/s = 10 ms; 1 GB at 1 TB/s = 1 ms; measured 50 ms = 5x the roofline;
    # the estimate puts 40 ms on the host and 10 ms on the GPU.
    d = diagnose(
        measurement(step_seconds=0.050, precision_in_effect="amp-bf16"),
        estimate(
            flops_per_step=1e12,
            bytes_per_step=1e9,
            host_seconds=0.040,
            gpu_seconds=0.010,
            precision="amp-bf16",
            bottleneck="overhead",
        ),
        CARD,
    )
    assert d.available and d.bottleneck == "overhead"
    assert d.achieved_flops_per_second == pytest.approx(20e12)
    assert d.compute_fraction == pytest.approx(0.2)
    assert d.bandwidth_fraction == pytest.approx(0.02)
    assert d.roofline_seconds == pytest.approx(0.010) and d.times_roofline == pytest.approx(5.0)
    assert d.suggestion_kind == "tuned" and "--exec tuned" in d.suggestion
    assert d.basis == "training step"


def test_overhead_already_tuned_suggests_a_larger_batch():
    d = diagnose(
        measurement(step_seconds=0.050, exec_mode="tuned", precision_in_effect="amp-bf16"),
        estimate(
            flops_per_step=1e12,
            bytes_per_step=1e9,
            host_seconds=0.0,
            gpu_seconds=0.010,
            bottleneck="overhead",
        ),  # per-kernel launch floors, not the host
        CARD,
    )
    assert d.bottleneck == "overhead" and d.suggestion_kind == "batch"


def test_slow_but_not_host_bound_is_judged_by_the_roofline():
    # 5x the roofline, but the estimate expects the GPU to be the long pole: not 'overhead'.
    d = diagnose(
        measurement(step_seconds=0.050),
        estimate(flops_per_step=1e12, bytes_per_step=1e9, host_seconds=0.001, gpu_seconds=0.04),
        CARD,
    )
    assert d.bottleneck == "compute"


def test_close_to_the_roofline_is_never_overhead():
    d = diagnose(
        measurement(step_seconds=OVERHEAD_FACTOR * 0.010 * 0.99, precision_in_effect="amp-bf16"),
        estimate(
            flops_per_step=1e12, bytes_per_step=1e9, host_seconds=1.0, gpu_seconds=0.01, precision="amp-bf16"
        ),
        CARD,
    )
    assert d.bottleneck == "compute"


def test_compute_bound_fp32_suggests_amp():
    # 2 TFLOP at 20 TFLOP/s FP32 = 100 ms; measured 125 ms.
    d = diagnose(measurement(step_seconds=0.125), estimate(flops_per_step=2e12, bytes_per_step=5e9), CARD)
    assert d.bottleneck == "compute" and d.compute_precision == "fp32"
    assert d.compute_fraction == pytest.approx(0.8)
    assert d.suggestion_kind == "amp" and d.suggestion == "use AMP (bf16/fp16 tensor cores)"


def test_compute_bound_in_16_bit_suggests_a_faster_card():
    d = diagnose(
        measurement(step_seconds=0.025, precision_in_effect="amp-fp16"),
        estimate(flops_per_step=2e12, bytes_per_step=5e9, precision="amp-fp16"),
        CARD,
    )
    assert d.compute_precision == "fp16" and d.compute_fraction == pytest.approx(0.8)
    assert d.bottleneck == "compute" and d.suggestion_kind == "card"
    assert "tensor throughput" in d.suggestion


def test_tuned_precision_in_effect_sets_the_peak():
    # Requested fp32, tuned ran amp-bf16: the bf16 peak applies, not FP32's.
    d = diagnose(
        measurement(step_seconds=0.025, exec_mode="tuned", precision_in_effect="amp-bf16"),
        estimate(flops_per_step=2e12, bytes_per_step=5e9, precision="fp32", host_seconds=0.0),
        CARD,
    )
    assert d.compute_precision == "bf16" and d.peak_flops_per_second == 100e12


def test_fp32_convolutions_use_the_tf32_peak():
    assert compute_class("fp32", "resnet") == "tf32"
    assert compute_class("fp32", "encoder") == "fp32"
    assert compute_class("int4", "decoder") == "fp16"
    assert compute_class("not-a-precision", "encoder") == "fp32"


def test_memory_bound_decode_is_judged_per_token():
    # 100 new tokens in 0.5 s = 5 ms per decode step; 4 GB per step at 1 TB/s = 4 ms: 80 % of bandwidth.
    d = diagnose(
        measurement(decode_seconds=0.5, step_seconds=0.52, precision_in_effect="fp16", exec_mode="tuned"),
        estimate(
            family="decoder",
            mode="infer",
            precision="fp16",
            new_tokens=100,
            flops_per_step=8e9,
            bytes_per_step=4e9,
            host_seconds=0.0,
            gpu_seconds=0.0045,
            bottleneck="memory",
        ),
        CARD,
    )
    assert d.basis.startswith("decode step")
    assert d.measured_seconds == pytest.approx(0.005)
    assert d.bandwidth_fraction == pytest.approx(0.8)
    assert d.achieved_bytes_per_second == pytest.approx(0.8e12)
    assert d.bottleneck == "memory" and d.suggestion_kind == "quantize"
    assert d.suggestion.startswith("decode is bandwidth-bound")


def test_host_bound_decode_is_overhead():
    d = diagnose(
        measurement(decode_seconds=6.0, precision_in_effect="fp16"),
        estimate(
            family="decoder",
            mode="infer",
            precision="fp16",
            new_tokens=100,
            flops_per_step=8e9,
            bytes_per_step=4e9,
            host_seconds=0.06,
            gpu_seconds=0.0045,
            bottleneck="overhead",
        ),
        CARD,
    )
    assert d.bottleneck == "overhead" and d.times_roofline == pytest.approx(15.0)


def test_quantized_bandwidth_bound_decode_suggests_batching():
    d = diagnose(
        measurement(decode_seconds=0.2, precision_in_effect="int4"),
        estimate(
            family="decoder",
            mode="infer",
            precision="int4",
            new_tokens=100,
            flops_per_step=8e9,
            bytes_per_step=1.5e9,
            host_seconds=0.0,
            gpu_seconds=0.0018,
        ),
        CARD,
    )
    assert d.bottleneck == "memory" and d.suggestion_kind == "batch"


def test_memory_bound_fp32_training_suggests_amp():
    d = diagnose(measurement(step_seconds=0.012), estimate(flops_per_step=1e10, bytes_per_step=1e10), CARD)
    assert d.bottleneck == "memory" and d.suggestion_kind == "amp"


WORK = {"flops_per_step": 1e12, "bytes_per_step": 1e9}


@pytest.mark.parametrize(
    ("m", "est", "gpu", "reason"),
    [
        (measurement(status="oom", step_seconds=None), estimate(**WORK), CARD, "did not complete"),
        (measurement(device="cpu", step_seconds=0.1), estimate(**WORK), CARD, "CPU"),
        (measurement(step_seconds=0.1), None, CARD, "no estimate"),
        (measurement(step_seconds=0.1), estimate(**WORK), None, "no estimate"),
        (measurement(step_seconds=None), estimate(**WORK), CARD, "no measured time"),
        (
            measurement(decode_seconds=None),
            estimate(family="decoder", mode="infer", new_tokens=10, **WORK),
            CARD,
            "no measured time",
        ),
        (measurement(step_seconds=0.1), estimate(flops_per_step=0, bytes_per_step=0), CARD, "no work"),
    ],
)
def test_unavailable_diagnoses_keep_every_key_and_say_why(m, est, gpu, reason):
    d = diagnose(m, est, gpu)
    assert tuple(d.to_dict()) == KEYS
    assert d.available is False and reason in d.reason
    assert d.bottleneck is None and format_diagnosis(d) is None


def test_every_key_is_present_and_the_line_reads_well():
    d = diagnose(measurement(step_seconds=0.125), estimate(flops_per_step=2e12, bytes_per_step=5e9), CARD)
    assert tuple(d.to_dict()) == KEYS
    line = format_diagnosis(d)
    assert line == (
        "bottleneck: compute (80% of fp32 peak, 4% of bandwidth, 1.2x the roofline time) — "
        "use AMP (bf16/fp16 tensor cores)"
    )


def test_the_line_speaks_chinese_and_the_json_stays_english():
    d = diagnose(measurement(step_seconds=0.125), estimate(flops_per_step=2e12, bytes_per_step=5e9), CARD)
    assert format_diagnosis(d, "zh") == (
        "瓶颈:算力(达到 fp32 峰值算力的 80%、带宽的 4%,为屋顶线时间的 1.2 倍)"
        "— 使用混合精度(bf16/fp16,Tensor Core)"
    )
    assert d.suggestion == "use AMP (bf16/fp16 tensor cores)"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_suggestion_has_its_sentence_in_both_languages(lang):
    # Each kind _suggest can return is reached by one (bottleneck, short kind) pair, whose catalogue
    # sentence is the one the JSON carries in English.
    reached = set()
    for kind, key in SUGGESTION_KEYS.items():
        _, bottleneck, short = key.split(".")
        assert kind.split("-")[0] == short and bottleneck in ("overhead", "memory", "compute")
        assert t(key, "en") == SUGGESTIONS[kind]
        reached.add((bottleneck, short))
        line = format_diagnosis(
            Diagnosis(
                available=True,
                bottleneck=bottleneck,
                suggestion_kind=short,
                suggestion="?",
                compute_fraction=0.5,
                bandwidth_fraction=0.25,
                compute_precision="bf16",
                times_roofline=None,
            ),
            lang,
        )
        assert line is not None and line.endswith(t(key, lang)) and "50%" in line
    assert len(reached) == len(SUGGESTION_KEYS)


def test_a_memory_bound_line_names_the_bottleneck_as_the_advice_does():
    d = diagnose(measurement(step_seconds=0.012), estimate(flops_per_step=1e10, bytes_per_step=1e10), CARD)
    assert format_diagnosis(d).startswith("bottleneck: memory bandwidth (")
    assert format_diagnosis(d, "zh").startswith("瓶颈:显存带宽(")


def test_a_real_estimate_as_its_summary_is_accepted():
    from fitbench.catalog import get_gpu
    from fitbench.estimate.api import estimate as real_estimate
    from fitbench.workloads.presets import get_workload

    card = get_gpu("h200")  # HF generate's host time outlasts the weight stream on this card
    est = EstimateSummary.from_estimate(real_estimate(get_workload("llm-6b"), card))
    d = diagnose(measurement(decode_seconds=100 / 15, precision_in_effect="fp16"), est, card)
    assert d.available and d.bottleneck == "overhead" and d.suggestion_kind == "tuned"


def test_a_diagnosis_is_a_frozen_record_whose_json_reads_back_equal():
    d = diagnose(measurement(step_seconds=0.125), estimate(flops_per_step=2e12, bytes_per_step=5e9), CARD)
    with pytest.raises(AttributeError):
        d.bottleneck = "memory"  # type: ignore[misc]
    data = d.to_dict()
    assert data["bottleneck"] == "compute" and data["available"] is True
    assert Diagnosis.from_dict(data) == d and Diagnosis.from_dict(data).to_dict() == data
