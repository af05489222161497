"""cuDNN convolutions' share of the peak on each card: the H200's measured rate per SM, up to a
GEMM's share where a card's tensor units (or CUDA cores) do less per SM. Pure estimator code."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import speed
from fitbench.estimate.profile import Profile, get_profile
from fitbench.workloads.presets import get_workload

DEFAULT = get_profile("torch", "default", use_user=False)
TUNED = get_profile("torch", "tuned", use_user=False)


@pytest.mark.parametrize("profile", [DEFAULT, TUNED])
def test_reference_class_cards_keep_the_measured_share(profile: Profile) -> None:
    for card in ("h200", "h100-sxm"):
        for rate in ("bf16", "fp16", "tf32"):
            share = speed.conv_efficiency(profile, get_gpu(card), rate)
            assert share == pytest.approx(profile.conv_efficiency)


def test_slower_units_per_sm_run_like_a_gemm() -> None:
    """GeForce Ampere/Ada (FP32 accumulation), V100 and T4 tensor cores, and FP32 on CUDA cores do
    far less per SM than the H200: the feed the H200 measured keeps them at a GEMM's share."""
    for card, rate in (("rtx-3090", "fp16"), ("rtx-4090", "fp16"), ("v100-16gb", "fp16"), ("t4", "fp32")):
        assert speed.conv_efficiency(DEFAULT, get_gpu(card), rate) == pytest.approx(DEFAULT.matmul_efficiency)


def test_faster_units_per_sm_and_other_vendors_keep_the_measured_share() -> None:
    """Nothing was measured where an SM does more than the H200's (B200), nor for MIOpen."""
    b200 = get_gpu("b200")
    assert b200.peak("bf16") / b200.sm_count > get_gpu("h200").peak("bf16") / get_gpu("h200").sm_count
    assert speed.conv_efficiency(DEFAULT, b200, "bf16") == pytest.approx(DEFAULT.conv_efficiency)
    assert speed.conv_efficiency(DEFAULT, get_gpu("mi300x"), "fp16") == pytest.approx(DEFAULT.conv_efficiency)


def test_resnet_step_on_a_geforce_card_is_faster_than_the_h200_share_gives() -> None:
    """The share reaches the step: on an RTX 3090 the ResNet-50 step's convolutions take the
    FLOPs at a GEMM's share, and a transformer step (no convolutions) does not move."""
    w = get_workload("resnet50-imagenet", precision="amp-fp16", batch_size=64)
    gpu = get_gpu("rtx-3090")
    step = speed.training_step(w, gpu, DEFAULT)
    h200_share = dataclasses.replace(DEFAULT, matmul_efficiency=DEFAULT.conv_efficiency)
    pinned = speed.training_step(w, gpu, h200_share)
    assert step.gpu_seconds < pinned.gpu_seconds
