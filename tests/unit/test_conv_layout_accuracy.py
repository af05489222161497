"""ResNet batch norm and layout as PyTorch runs them, scored on the stored H200 kernel split.

Pure estimator code (no framework import). benchmarks/results/conv-layout-h200-2026-12-03.json
holds twelve eager ResNet-50 SGD steps (NCHW and channels_last, FP32 and AMP-bf16, three sizes)
with on-GPU data; profiles.toml's bn_native_nchw_efficiency was fitted on one of them
(conv_layout.FIT_ROW), the other eleven are out of sample.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import resnet_cost, speed
from fitbench.estimate.profile import get_profile
from fitbench.workloads.presets import get_workload

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import conv_layout  # noqa: E402  (its scoring half imports no framework)

RESULT = BENCHMARKS / "results" / "conv-layout-h200-2026-12-03.json"
# Bounds on relative step-time error, (estimate - measured) / measured. Measured when the model
# was written: NCHW rows (PyTorch's default eager path) worst 7.4 % (the fitted row), median
# 1.8 %; all twelve median 5.6 %, worst 32.4 % (channels_last FP32 at b128 128 px: cuDNN's
# semi-persistent NHWC batch norm and the elementwise kernels run faster than memory_efficiency).
NCHW_MAX_ABS = 0.10
ALL_MEDIAN_ABS = 0.08
ALL_MAX_ABS = 0.35
H200 = get_gpu("h200")
DEFAULT = get_profile("torch", "default", use_user=False)


def _resnet(precision: str, batch: int = 128, image: int = 224):
    return get_workload(
        "resnet50-imagenet", batch_size=batch, image_size=image, precision=precision, optimizer="momentum"
    )


def _bn_kernels(workload, **kw):
    return [k for k in resnet_cost.forward_kernels(workload, DEFAULT, **kw) if k.name.endswith(".bn")]


def test_backend_follows_pytorchs_rule() -> None:
    """cuDNN unless the input or weight is BF16, or a half input comes with a half weight."""
    assert resnet_cost.batch_norm_backend(_resnet("fp32")) == "cudnn"
    assert resnet_cost.batch_norm_backend(_resnet("amp-fp16")) == "cudnn"  # FP32 weight
    assert resnet_cost.batch_norm_backend(_resnet("amp-bf16")) == "native"
    assert resnet_cost.batch_norm_backend(_resnet("bf16")) == "native"
    assert resnet_cost.batch_norm_backend(_resnet("fp16")) == "native"  # half weight
    assert resnet_cost.batch_norm_backend(_resnet("amp-bf16"), "paddle") == "cudnn"


def test_amp_fp16_keeps_the_cudnn_batch_norm() -> None:
    fp16 = _bn_kernels(_resnet("amp-fp16"))
    assert fp16 and all(k.memory_efficiency == resnet_cost.CUDNN_BN_NCHW_SHARE for k in fp16)
    bf16 = _bn_kernels(_resnet("amp-bf16"))
    assert all(k.memory_efficiency == DEFAULT.bn_native_nchw_efficiency for k in bf16)
    assert DEFAULT.bn_native_nchw_efficiency < resnet_cost.CUDNN_BN_NCHW_SHARE < DEFAULT.memory_efficiency
    # Same tensors, same passes: only the implementation differs.
    assert [k.bytes for k in fp16] == [k.bytes for k in bf16]
    # Channels-last: PyTorch's native kernels spread over the batch, cuDNN's NHWC kernels stream faster.
    assert all(
        k.memory_efficiency == resnet_cost.NATIVE_BN_CHANNELS_LAST_SHARE
        for k in _bn_kernels(_resnet("amp-bf16"), channels_last=True)
    )
    assert all(
        k.memory_efficiency == resnet_cost.CUDNN_BN_NHWC_SHARE
        for k in _bn_kernels(_resnet("amp-fp16"), channels_last=True)
    )


def test_amp_bf16_nchw_step_is_slower_per_byte_than_fp32() -> None:
    """The mechanism: AMP-bf16 halves the activation bytes, but its NCHW batch norm runs
    PyTorch's one-block-per-channel kernels, so the step moves fewer bytes a second than FP32's."""
    fp32 = speed.training_step(_resnet("fp32"), H200, DEFAULT)
    bf16 = speed.training_step(_resnet("amp-bf16"), H200, DEFAULT)
    fp16 = speed.training_step(_resnet("amp-fp16"), H200, DEFAULT)
    per_byte = {
        name: t.memory_seconds / t.bytes for name, t in (("fp32", fp32), ("bf16", bf16), ("fp16", fp16))
    }
    assert bf16.bytes < fp32.bytes
    assert per_byte["bf16"] > 1.5 * per_byte["fp32"]
    # cuDNN: no batch-norm penalty (the fixed launch costs weigh a little more on half the bytes)
    assert per_byte["fp16"] < 1.15 * per_byte["fp32"]
    assert bf16.gpu_seconds > fp16.gpu_seconds
    # Channels-last removes the penalty (native NHWC kernels) and the layout conversions.
    last = speed.training_step(_resnet("amp-bf16"), H200, DEFAULT, channels_last=True)
    assert last.gpu_seconds < 0.7 * bf16.gpu_seconds


def test_layout_conversions_only_around_nchw_convolutions_with_a_window() -> None:
    """cuDNN converts NCHW tensors for its NHWC kernels; 1x1 convolutions run as GEMMs on NCHW;
    the conversions move elements at one rate, so FP32 and AMP-bf16 count the same bytes."""
    fp32, bf16 = (resnet_cost.forward_kernels(_resnet(p), DEFAULT) for p in ("fp32", "amp-bf16"))
    layout = [k for k in fp32 if k.name.endswith(".layout")]
    windowed = [c for c in _resnet("fp32").arch.convs(224) if c.kernel > 1]
    assert [k.name for k in layout] == [c.name + ".layout" for c in windowed]
    assert [k.bytes for k in layout] == [k.bytes for k in bf16 if k.name.endswith(".layout")]
    assert all(k.ops == 0 for k in layout)  # issued inside the convolution
    assert not [
        k
        for k in resnet_cost.forward_kernels(_resnet("fp32"), DEFAULT, channels_last=True)
        if k.name.endswith(".layout")
    ]
    tuned = get_profile("torch", "tuned", use_user=False)  # tuned models are channels-last
    assert not [
        k for k in resnet_cost.forward_kernels(_resnet("amp-bf16"), tuned) if k.name.endswith(".layout")
    ]


def test_paddle_keeps_its_plain_accounting() -> None:
    paddle = get_profile("paddle", "default", use_user=False)
    names = {k.name.rsplit(".", 1)[-1] for k in resnet_cost.forward_kernels(_resnet("amp-bf16"), paddle)}
    assert "bn_relu" in names and not names & {"bn", "relu", "layout"}


@pytest.fixture(scope="module")
def scored() -> list[dict]:
    return conv_layout.score(json.loads(RESULT.read_text()))


def test_conv_layout_rows_within_reported_bounds(scored: list[dict]) -> None:
    assert len(scored) == 12
    assert sum(r["fitted"] for r in scored) == 1
    nchw = [abs(r["error"]) for r in scored if not r["channels_last"]]
    every = [abs(r["error"]) for r in scored]
    assert max(nchw) <= NCHW_MAX_ABS, [(r["label"], round(r["error"], 3)) for r in scored]
    assert statistics.median(every) <= ALL_MEDIAN_ABS
    assert max(every) <= ALL_MAX_ABS, [(r["label"], round(r["error"], 3)) for r in scored]
