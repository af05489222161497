"""Model FLOPs per training step and MFU (model FLOPs utilization).

MFU is the share of the card's dense peak that a step's *useful* work fills: the model FLOPs of
one step over the measured (or estimated) step time, over the datasheet peak of the precision in
effect (PaLM, Chowdhery et al. 2022, appendix B). `flops_per_step` (speed.py) is what the kernels
execute; the model FLOPs leave out what an implementation computes twice or needlessly, so two
ways of running the same step are held against one number:

* activation checkpointing's second forward (speed.training_kernels adds it to the kernels);
* fused attention's recomputation of the scores in backward (speed.backward_kernels counts 2.5x the
  forward; the model's backward is 2x, as for every matrix product);
* the masked half of the score square that eager attention, or SDPA given a sliding window's
  mask, multiplies anyway (transformer_cost.dense_score_factor): causal attention counts the
  causal half.

Full training: forward + backward = 3x the forward's matrix products (input and weight gradient),
about 6 x parameters x tokens plus attention. LoRA/QLoRA: what the step must compute with frozen
weights: the base forward, the input gradient of every frozen matrix product (1x its forward; an
encoder's trained classifier 2x), attention's backward (2x), and each adapter's forward and
backward (3x its two rank-r products). QLoRA's dequantization and every elementwise pass are
memory traffic, not FLOPs. The optimizer update has no FLOPs here (it is elementwise).

Why a module of its own: both the estimate (estimate/api.py) and the measured side (the run
diagnosis, benchmarks/speed.py) divide by these FLOPs, and neither should re-derive them.
Pure Python: no framework import.
"""

from __future__ import annotations

import dataclasses

from fitbench.core.gpu import GpuSpec
from fitbench.core.names import Strategy
from fitbench.core.precision import get_precision
from fitbench.errors import FitbenchError
from fitbench.estimate import resnet_cost, transformer_cost
from fitbench.estimate.peft_speed import lora_kernels
from fitbench.estimate.profile import Profile
from fitbench.estimate.segments import Kernel
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# Backward FLOPs per forward FLOP of a trained matrix product (input and weight gradient) ...
TRAINED_BACKWARD = 2.0
# ... and of a frozen one (input gradient only), as LoRA's base runs it.
FROZEN_BACKWARD = 1.0


def peak_class(precision: str, family: str) -> str:
    """The datasheet peak a precision runs at: its compute dtype, TF32 for FP32 convolutions
    (cuDNN's default in PyTorch). An unknown precision counts as FP32."""
    try:
        compute = get_precision(precision).compute
    except FitbenchError:
        compute = "fp32"
    if compute == "fp32" and family == "resnet":
        return "tf32"
    return compute


def _useful_forward(workload: Workload, profile: Profile) -> list[Kernel]:
    """The forward's kernels with attention at the model's count (the causal half, the window's
    band) rather than what the kernel multiplies (the dense square where it cannot skip)."""
    if workload.is_resnet:
        return resnet_cost.forward_kernels(workload, profile)
    seq = workload.seq_len or 1
    fwd = transformer_cost.forward_kernels(workload, workload.batch_size, seq)
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    if arch.is_mla:
        return fwd
    factor = transformer_cost.dense_score_factor(workload, seq)
    return [dataclasses.replace(k, flops=k.flops / factor) if k.kind == "attention" else k for k in fwd]


def _one_device_model_flops(workload: Workload, profile: Profile) -> float:
    fwd = _useful_forward(workload, profile)
    if not workload.peft:
        return sum(k.flops * k.count for k in fwd) * (1.0 + TRAINED_BACKWARD)
    total = 0.0
    for k in fwd:
        # frozen products: the input gradient; attention and a trained classifier: both
        frozen = k.kind == "matmul" and k.name != "classifier"
        backward = FROZEN_BACKWARD if frozen else TRAINED_BACKWARD
        total += k.flops * k.count * (1.0 + backward)
    adapters, _ = lora_kernels(workload)
    total += sum(k.flops * k.count for k in adapters) * (1.0 + TRAINED_BACKWARD)
    return total


def model_flops_per_step(workload: Workload, profile: Profile) -> float | None:
    """The model FLOPs of one training step of one GPU (None outside training).

    A step is one micro-batch, as everywhere in the estimator. Data-parallel strategies give each
    GPU its own batch (the one-device count); tensor parallelism splits every product N ways.
    """
    if not workload.is_training:
        return None
    one = _one_device_model_flops(workload.replace(gpus=1) if workload.gpus > 1 else workload, profile)
    if workload.gpus > 1 and workload.strategy == Strategy.TP:
        one /= workload.gpus
    return one


def mfu(
    model_flops: float | None, seconds: float | None, gpu: GpuSpec, precision: str, family: str
) -> float | None:
    """Model FLOPs utilization: `model_flops` done in `seconds`, over `gpu`'s dense peak at the
    precision's compute class (peak_class). None when either is missing or not positive."""
    if not model_flops or not seconds or model_flops <= 0 or seconds <= 0:
        return None
    peak = gpu.peak(peak_class(precision, family))
    return model_flops / seconds / peak if peak > 0 else None
