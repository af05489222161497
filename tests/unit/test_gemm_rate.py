"""A card's GEMMs at its published sustained GEMM rate relative to the reference card's: the
datasheet peak of a power-limited L4 or of GeForce FP32 overstates what cuBLAS sustains. Pure
estimator code."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import resnet_cost, speed
from fitbench.estimate.profile import get_profile
from fitbench.workloads.presets import get_workload

DEFAULT = get_profile("torch", "default", use_user=False)


def test_the_reference_card_and_cards_without_a_measurement_keep_the_profile_share() -> None:
    for rate in ("fp32", "tf32", "fp16", "bf16", "fp8"):
        assert speed.gemm_rate_factor(get_gpu("h200"), rate) == 1.0
        assert speed.gemm_rate_factor(get_gpu("b200"), rate) == 1.0  # no gemm_tflops
    assert speed.gemm_rate_factor(get_gpu("l4"), "fp8") == 1.0  # none published for fp8


def test_the_factor_is_the_ratio_of_the_published_shares() -> None:
    l4, h200 = get_gpu("l4"), get_gpu("h200")
    assert speed.gemm_rate_factor(l4, "fp32") == pytest.approx(
        l4.gemm_share("fp32") / h200.gemm_share("fp32")
    )
    # TF32 has no reference measurement: the mean of the reference's shares stands in
    mean = sum(h200.gemm_share(k) for k in h200.gemm_flops) / len(h200.gemm_flops)
    assert speed.gemm_rate_factor(l4, "tf32") == pytest.approx(l4.gemm_share("tf32") / mean)
    assert speed.gemm_rate_factor(l4, "fp32") < 0.5
    assert speed.gemm_rate_factor(get_gpu("rtx-4090"), "fp16") > 1.15  # boosts past its datasheet clock


def test_fp32_transformer_steps_slow_down_on_the_l4_and_not_on_the_h200() -> None:
    """BERT-base fp32 training: the matmuls carry most of the step, so a card whose sustained FP32
    GEMM share is half the reference's takes about twice as long; the H200 is unchanged."""
    w = get_workload("bert-base-imdb", precision="fp32", batch_size=32)
    l4 = get_gpu("l4")
    datasheet = dataclasses.replace(l4, gemm_flops={})
    slow = speed.training_step(w, l4, DEFAULT).seconds
    fast = speed.training_step(w, datasheet, DEFAULT).seconds
    assert 1.5 < slow / fast < 1 / speed.gemm_rate_factor(l4, "fp32") + 0.01
    h200 = get_gpu("h200")
    same = speed.training_step(w, dataclasses.replace(h200, gemm_flops={}), DEFAULT).seconds
    assert speed.training_step(w, h200, DEFAULT).seconds == pytest.approx(same)


def test_convolutions_keep_their_own_model() -> None:
    """cuDNN convolutions are not the measured cuBLAS GEMMs: a ResNet's conv time does not move."""
    w = get_workload("resnet50-cifar10", precision="amp-fp16", image_size=224, batch_size=64)
    l4 = get_gpu("l4")
    kernels = [k for k in resnet_cost.forward_kernels(w, DEFAULT) if k.kind == "conv"]
    with_rate = speed.time_kernels(kernels, w, l4, DEFAULT, host_seconds_per_op=0.0).gpu_seconds
    without = speed.time_kernels(
        kernels, w, dataclasses.replace(l4, gemm_flops={}), DEFAULT, host_seconds_per_op=0.0
    ).gpu_seconds
    assert with_rate == pytest.approx(without)


def test_the_benchmark_summary_is_the_catalog_statistic() -> None:
    """benchmarks/gemm_rate.py reports the mean of the 8192 and 10240 runs per precision, and its
    share of the peak: what gemm_tflops holds and gemm_share computes."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    import gemm_rate

    rows = [
        {"precision": "fp32", "n": 8192, "tflops": 10.66},
        {"precision": "fp32", "n": 10240, "tflops": 11.11},
        {"precision": "bf16", "n": 8192, "tflops": 59.40},
        {"precision": "bf16", "n": 10240, "tflops": 56.90},
    ]
    l4 = get_gpu("l4")
    peaks = {p: l4.peak(p) / 1e12 for p in gemm_rate.PRECISIONS}
    summary = gemm_rate.summarise(rows, peaks)
    assert set(summary) == {"fp32", "bf16"}
    assert summary["fp32"]["tflops"] == pytest.approx(l4.gemm_flops["fp32"] / 1e12, abs=0.01)
    assert summary["fp32"]["share_of_peak"] == pytest.approx(l4.gemm_share("fp32"), abs=0.001)
    assert gemm_rate.summarise(rows, None)["bf16"]["share_of_peak"] is None


def test_the_estimate_states_the_rate_it_took() -> None:
    """A card with a published GEMM rate says so in the estimate's assumptions; the reference card
    and a card without one say nothing about it."""
    from fitbench.estimate.api import estimate

    w = get_workload("bert-base-imdb", precision="fp32")
    lines = estimate(w, get_gpu("l4")).assumptions
    said = [a for a in lines if "sustained GEMM rate" in a]
    assert said == [
        "FP32 matmuls at L4's published sustained GEMM rate: 0.36 of its datasheet peak, "
        "0.47x the share on the H200 the efficiencies were measured on"
    ]
    for card in ("h200", "b200"):
        assert not [a for a in estimate(w, get_gpu(card)).assumptions if "sustained GEMM" in a]
