"""Memory segments and kernels of ResNets, from the real per-layer shapes.

Saved tensors per conv-BN(-ReLU) unit in PyTorch (torchvision layout, ReLU in place):
the convolution output (batch-norm input) and the batch-norm output that the in-place ReLU
overwrites and saves (and the next convolution saves as its input) — 2 tensors a unit. A
framework whose ReLU is not in place (Paddle's vision models) keeps a third. The stem adds the
image, the max-pool output and its int64 indices.
"""

from __future__ import annotations

import dataclasses

from fitbench.core.names import ExecMode, Framework
from fitbench.estimate.dtypes import activation_dtypes
from fitbench.estimate.profile import Profile, get_profile
from fitbench.estimate.segments import Kernel, Segment
from fitbench.workloads.arch import ConvLayer, ResNetArch
from fitbench.workloads.workload import Workload

SAVED_PER_CONV = {"torch": 2.0, "paddle": 3.0}
# Passes of one batch norm over its tensor (each reads or writes every element once), the same
# in every implementation PyTorch runs: forward, the statistics (read) and the normalisation
# (read, write); backward, the reduction of dy and (x - mean) * dy (read both) and the input
# gradient (read both again, write it). PyTorch's native kernels make them as separate launches
# (batch_norm_collect_statistics / transform_input; batch_norm_backward_kernel, or the
# channels-last backward_reduce + backward_elemt), cuDNN inside its own. Inference normalises
# with the running statistics only.
BN_TRAIN_FORWARD_PASSES = 3.0
BN_BACKWARD_PASSES = 5.0
BN_INFERENCE_PASSES = 2.0
# cuDNN's NCHW <-> NHWC conversions run at one element rate whatever the dtype (_layout_kernel).
LAYOUT_ELEMENT_BYTES = 4.0
# Shares of the card's streaming bandwidth (GpuSpec.stream_bandwidth_bytes_s: 4.2 TB/s on an H200)
# that these kernels reach, from the kernel time by class of ResNet-50 steps on an H200
# (benchmarks/results/conv-layout-h200-2026-12-03.json) over the bytes counted here: cuDNN's batch
# norm on NCHW tensors 2.06-2.14 TB/s (FP32 rows), on channels-last 3.42-3.67 TB/s, PyTorch's
# native channels-last kernels 1.86-1.90 TB/s (AMP-bf16 rows, beside the profile's
# kernel_fixed_seconds for each of their 212 launches a step: _batch_norm_launches; 1.67-1.78
# TB/s with the launches inside), the layout conversions 1.32-2.04 TB/s (median 1.8). Plain
# elementwise kernels (ReLU, adds, the optimizer) stream at the profile's memory_efficiency.
# Counted as the same share of streaming on every card.
CUDNN_BN_NCHW_SHARE = 0.50
CUDNN_BN_NHWC_SHARE = 0.83
NATIVE_BN_CHANNELS_LAST_SHARE = 0.45
LAYOUT_SHARE = 0.43


def _arch(workload: Workload) -> ResNetArch:
    assert isinstance(workload.arch, ResNetArch)
    return workload.arch


def training_segments(workload: Workload, framework: str = "torch") -> list[Segment]:
    arch = _arch(workload)
    dt = activation_dtypes(workload, dropout=False)
    b, size = workload.batch_size, workload.image_size or 224
    per_conv = SAVED_PER_CONV.get(framework, 2.0)
    convs = arch.convs(size)
    segs: list[Segment] = []
    stem = convs[0]
    pool_hw = (stem.out_hw + 2 - 3) // 2 + 1
    # The stem convolution saves its input in the activation dtype: the image itself in FP32 and
    # in PyTorch's pure half (the batch matches the weights), a 16-bit cast of it under AMP and
    # Paddle's O2.
    image = arch.in_channels * size * size * dt.act
    pool = stem.out_channels * pool_hw**2 * (dt.act + 8)  # output and int64 indices
    segs.append(Segment(name="input+pool", saved_bytes=b * (image + pool), input_bytes=b * image, params=0))
    for conv in convs:
        out = conv.out_channels * conv.out_hw**2
        saved = (1.0 if "downsample" in conv.name else per_conv) * out * dt.act
        segs.append(
            Segment(
                name=conv.name,
                saved_bytes=b * saved,
                input_bytes=b * out * dt.act,
                params=conv.params,
                cast_params=conv.params if dt.amp else 0,
                transient_bytes=b * 2 * (out + conv.in_channels * conv.in_hw**2) * dt.act,
            )
        )
    fc_params = arch.feature_dim * arch.num_classes + arch.num_classes
    segs.append(
        Segment(
            name="fc",
            saved_bytes=b * arch.feature_dim * dt.act * 2,
            input_bytes=0.0,
            params=fc_params,
            cast_params=fc_params if dt.amp else 0,
            transient_bytes=b * arch.num_classes * 8.0,
        )
    )
    return segs


def inference_transient_bytes(workload: Workload) -> float:
    """Largest input + output pair of one layer in a forward pass without autograd."""
    arch = _arch(workload)
    dt = activation_dtypes(workload, dropout=False)
    size = workload.image_size or 224
    biggest = max((c.in_channels * c.in_hw**2 + 2 * c.out_channels * c.out_hw**2) for c in arch.convs(size))
    return workload.batch_size * biggest * dt.act


def batch_norm_backend(workload: Workload, framework: str = "torch") -> str:
    """Which batch-norm kernels PyTorch runs: 'cudnn' or 'native' (its own CUDA kernels).

    aten/src/ATen/native/Normalization.cpp `_select_batch_norm_backend` takes cuDNN only when
    neither the input nor the weight is BF16 and a half input comes with an FP32 weight. Under
    autocast the batch norm receives the 16-bit convolution output and keeps its FP32 weight:
    AMP-fp16 stays on cuDNN, AMP-bf16 (and pure fp16 / bf16 weights) run the native kernels.
    Paddle's rule is not modelled: its batch norm is counted as cuDNN's."""
    p = workload.precision_info
    weight_fp32 = p.amp or p.weight_bytes == 4
    if framework == Framework.TORCH and (
        p.compute == "bf16" or (p.activation_bytes == 2 and not weight_fp32)
    ):
        return "native"
    return "cudnn"


def forward_kernels(
    workload: Workload, profile: Profile | None = None, *, channels_last: bool | None = None
) -> list[Kernel]:
    """Convolutions as implicit GEMMs, and the memory-bound work around them, as PyTorch runs it.

    `profile` names the framework and execution mode (None: PyTorch's eager default) and gives
    the bandwidth shares of the kernels that run below its memory_efficiency; `channels_last`
    overrides the memory format the mode runs (None: channels_last in torch's tuned mode,
    fitbench.backends.torch.tuned, NCHW otherwise). Each kernel carries its own backward traffic
    (`Kernel.backward_bytes`). Paddle keeps the plain accounting of batch norm and ReLU
    (`_paddle_memory_kernels`): its kernels were never measured on a GPU here.
    """
    profile = profile or get_profile("torch", "default", use_user=False)
    framework = profile.framework
    if channels_last is None:
        channels_last = framework == Framework.TORCH and profile.exec_mode == ExecMode.TUNED
    arch = _arch(workload)
    dt = activation_dtypes(workload, dropout=False)
    p = workload.precision_info
    b, size = workload.batch_size, workload.image_size or 224
    w_bytes = 2 if p.amp else p.weight_bytes
    a = dt.act
    training = workload.is_training
    convs = arch.convs(size)
    last_conv = ".conv3" if arch.block == "bottleneck" else ".conv2"
    bn_eff = _batch_norm_efficiency(workload, profile, channels_last)
    bn_launches = _batch_norm_launches(workload, profile, channels_last)
    ks: list[Kernel] = []
    for i, conv in enumerate(convs):
        out = b * conv.out_channels * conv.out_hw**2
        inp = b * conv.in_channels * conv.in_hw**2
        # Autocast casts each convolution's weight (batch norm keeps the 16-bit activations, so
        # only the stem's FP32 image is cast as an input).
        casts = (2.0 if i == 0 else 1.0) if p.amp else 0.0
        weights = conv.in_channels * conv.out_channels * conv.kernel**2
        ks.append(
            Kernel(
                name=conv.name,
                kind="conv",
                flops=2.0 * b * conv.macs_per_sample(),
                bytes=(inp + out) * a + weights * w_bytes,
                cast_ops=casts,
                # backward: the data and the weight gradient, each its own kernel; the stem's
                # image takes no gradient
                backward_launches=1.0 if i == 0 else 2.0,
            )
        )
        if p.amp and framework == Framework.TORCH:
            image = b * arch.in_channels * size * size if i == 0 else 0
            ks.append(_cast_kernel(conv.name, weights, profile, image=image))
        if framework != Framework.TORCH:
            ks += _paddle_memory_kernels(conv, out, a, conv.name.endswith(last_conv))
            continue
        if not channels_last and conv.kernel > 1:
            ks.append(_layout_kernel(conv, inp, out, stem=i == 0))
        relu = "downsample" not in conv.name
        ends_block = conv.name.endswith(last_conv)
        ks.append(
            Kernel(
                name=conv.name + ".bn",
                kind="memory",
                flops=0.0,
                bytes=(BN_TRAIN_FORWARD_PASSES if training else BN_INFERENCE_PASSES) * out * a,
                backward_bytes=BN_BACKWARD_PASSES * out * a,
                memory_efficiency=bn_eff,
                launches=bn_launches[0] if training else 1.0,
                backward_launches=bn_launches[1],
                fused=_fused_batch_norm(conv.name, out * a, training=training, relu=relu, add=ends_block),
            )
        )
        if ends_block:
            # The residual add (two reads, one write); in backward the two gradients of the
            # block's input (shortcut and first convolution) are summed once.
            block_input = _block_input_elements(convs, conv, b)
            ks.append(
                Kernel(
                    name=conv.name + ".add",
                    kind="memory",
                    flops=0.0,
                    bytes=3.0 * out * a,
                    backward_bytes=3.0 * block_input * a,
                    fused=_folded(conv.name + ".add"),
                )
            )
        if relu:
            # ReLU in place (read, write); its backward (threshold_backward) reads the gradient
            # and the saved output and writes the input gradient. The shortcut's batch norm
            # feeds the add with no ReLU of its own.
            ks.append(
                Kernel(
                    name=conv.name + ".relu",
                    kind="memory",
                    flops=0.0,
                    bytes=2.0 * out * a,
                    backward_bytes=3.0 * out * a,
                    fused=_folded(conv.name + ".relu"),
                )
            )
    ks.append(
        Kernel(
            name="fc",
            kind="matmul",
            flops=2.0 * b * arch.feature_dim * arch.num_classes,
            bytes=arch.feature_dim * arch.num_classes * w_bytes,
            ops=4.0,
            cast_ops=2.0 if p.amp else 0.0,  # weight and bias
        )
    )
    if p.amp and framework == Framework.TORCH:
        fc_params = arch.feature_dim * arch.num_classes + arch.num_classes
        ks.append(_cast_kernel("fc", fc_params, profile, tensors=2))  # weight and bias
    return ks


def _folded(name: str) -> Kernel:
    """Pointwise work a compiler folds into a neighbouring kernel: no bytes, no launch of its own."""
    return Kernel(
        name=name,
        kind="memory",
        flops=0.0,
        bytes=0.0,
        backward_bytes=0.0,
        ops=0.0,
        launches=0.0,
        backward_launches=0.0,
    )


def _fused_batch_norm(name: str, tensor_bytes: float, *, training: bool, relu: bool, add: bool) -> Kernel:
    """A batch norm compiled by inductor with the ReLU after it and the residual add at a block's
    end folded in (torch's tuned mode; the compiled H200 ResNet-50 step ran no elementwise kernel
    beside its `triton_*_fused_*native_batch_norm*` kernels: benchmarks/results/compiled-step-
    profile-h200-2026-12-04.json).

    Training forward: a reduction reads the convolution output for the statistics, then one
    pointwise kernel reads it again (and the shortcut, at a block's end) and writes the
    activation: 3 passes (+1). Backward: a reduction reads the gradient and the input (and the
    saved activation for the ReLU's mask), then one kernel reads them again and writes the input
    gradient (at a block's end also the shortcut's gradient sum, one more read): 7 passes with a
    ReLU, 5 without (+1). Inference normalises with running statistics in one kernel: read and
    write (+1 for the shortcut). Each is an inductor kernel streaming at the profile's share."""
    extra = 1.0 if add else 0.0
    if not training:
        return Kernel(
            name=name + ".bn",
            kind="memory",
            flops=0.0,
            bytes=(2.0 + extra) * tensor_bytes,
            ops=0.0,
            launches=1.0,
        )
    backward = (7.0 if relu else 5.0) + extra
    return Kernel(
        name=name + ".bn",
        kind="memory",
        flops=0.0,
        bytes=(3.0 + extra) * tensor_bytes,
        backward_bytes=backward * tensor_bytes,
        ops=0.0,
        launches=2.0,
        backward_launches=2.0,
    )


def _cast_kernel(name: str, params: int, profile: Profile, *, image: int = 0, tensors: int = 1) -> Kernel:
    """Autocast's 16-bit copy of one layer's FP32 weights, made every forward (the cast cache
    lives for one autocast region, and the tuned mode runs without it), and in backward the copy
    of its gradient back to FP32 (ToCopyBackward): each reads 4 and writes 2 bytes an element, or
    the reverse, in a kernel of its own per tensor (`tensors`: the weight, and a bias where the
    layer has one). The stem also casts the FP32 image (one more launch, no gradient). The eager
    AMP ResNet-50 steps of conv-layout-h200-2026-12-03.json spent 0.32-0.36 ms a step in these
    copies at every batch and image size. Their host cost is the layer's (Kernel.cast_ops), so
    they carry no operations of their own.

    Compiled with combo kernels (Profile.combo_kernel_group), the casts of different layers depend
    on nothing but their weights (and, in backward, their gradients), so inductor launches them
    side by side, up to that many in one kernel: the fused form keeps the bytes and takes that
    share of the launches."""
    launches = float(tensors) + (1.0 if image else 0.0)
    kernel = Kernel(
        name=name + ".cast",
        kind="memory",
        flops=0.0,
        bytes=(params + image) * (4.0 + 2.0),
        backward_bytes=params * (2.0 + 4.0),
        ops=0.0,
        launches=launches,
        backward_launches=float(tensors),
    )
    group = profile.combo_kernel_group
    if group > 1:
        kernel = dataclasses.replace(
            kernel,
            fused=dataclasses.replace(kernel, launches=launches / group, backward_launches=tensors / group),
        )
    return kernel


def _batch_norm_efficiency(workload: Workload, profile: Profile, channels_last: bool) -> float | None:
    """The batch-norm kernels' share of the streaming bandwidth; None: the profile's memory_efficiency.

    PyTorch's native NCHW kernels (aten/src/ATen/native/cuda/Normalization.cuh) launch one
    thread block per channel for the statistics and for the backward reduction
    (`dim3 blocks(input.size(1))`): a layer of 64-256 channels occupies a fraction of the SMs
    however large the batch, so they move far fewer bytes per second than an elementwise kernel
    (profiles.toml: bn_native_nchw_efficiency; in inference only their normalisation runs, which
    is counted at the same share). The native channels-last kernels spread the batch and the
    image over the grid, and cuDNN's kernels run at their own measured shares
    (NATIVE_BN_CHANNELS_LAST_SHARE, CUDNN_BN_NCHW_SHARE, CUDNN_BN_NHWC_SHARE). Paddle's batch
    norm keeps the profile's share (never measured on a GPU here)."""
    if profile.framework != Framework.TORCH:
        return None
    if batch_norm_backend(workload) == "native":
        return NATIVE_BN_CHANNELS_LAST_SHARE if channels_last else profile.bn_native_nchw_efficiency
    return CUDNN_BN_NHWC_SHARE if channels_last else CUDNN_BN_NCHW_SHARE


def _batch_norm_launches(workload: Workload, profile: Profile, channels_last: bool) -> tuple[float, float]:
    """Kernels one training batch norm launches forward and backward, by the implementation that
    runs (the kernel names of the H200 profiles in conv-layout-h200-2026-12-03.json): PyTorch's
    native kernels collect the statistics and normalise in two (batch_norm_collect_statistics* and
    batch_norm_transform_input*), and in backward reduce and write the input gradient in two on
    channels-last tensors (backward_reduce / backward_elemt_channels_last) and in one on NCHW
    (batch_norm_backward_kernel); cuDNN's do each pass in one (bn_fw_tr_*, bn_bw_*)."""
    if profile.framework == Framework.TORCH and batch_norm_backend(workload) == "native":
        return 2.0, 2.0 if channels_last else 1.0
    return 1.0, 1.0


def _layout_kernel(conv: ConvLayer, inp: float, out: float, *, stem: bool) -> Kernel:
    """cuDNN's layout conversions around one NCHW convolution (nchwToNhwc / nhwcToNchw kernels).

    cuDNN's implicit-GEMM convolution kernels are NHWC: for an NCHW tensor it converts the input
    and the output of the forward convolution, the output gradient and input gradient of dgrad
    and the input and output gradient of wgrad (the stem's image gets no gradient). 1x1
    convolutions run as GEMMs on the NCHW tensors directly and convert nothing (the H200
    profile of a ResNet-50 step shows cutlass/cuBLAS GEMM kernels for them). Each conversion
    reads and writes every element; the kernels move elements at one rate whatever their width
    (4.42 ms of nchwToNhwc for FP32 and BF16 alike, ResNet-50 b128 224 px), so an element counts
    4 bytes in every precision."""
    forward = inp + out
    backward = 2.0 * out + (1.0 if stem else 2.0) * inp
    return Kernel(
        name=conv.name + ".layout",
        kind="memory",
        flops=0.0,
        bytes=2.0 * LAYOUT_ELEMENT_BYTES * forward,
        backward_bytes=2.0 * LAYOUT_ELEMENT_BYTES * backward,
        ops=0.0,
        launches=2.0,  # the input's and the output's conversion (backward: counted alike)
        memory_efficiency=LAYOUT_SHARE,
    )


def _block_input_elements(convs: list[ConvLayer], last: ConvLayer, batch: int) -> float:
    """Elements of the input of the residual block that `last` ends (its first convolution's input)."""
    prefix = last.name.rsplit(".", 1)[0] + ".conv1"
    first = next(c for c in convs if c.name == prefix)
    return float(batch * first.in_channels * first.in_hw**2)


def _paddle_memory_kernels(conv: ConvLayer, out: float, a: int, ends_block: bool) -> list[Kernel]:
    """Paddle's batch norm and ReLU as plain traffic: read and write the output twice forward,
    twice as much backward; a block's last convolution adds the residual add."""
    ks = [Kernel(name=conv.name + ".bn_relu", kind="memory", flops=0.0, bytes=4.0 * out * a, ops=2.0)]
    if ends_block:
        ks.append(Kernel(name=conv.name + ".add", kind="memory", flops=0.0, bytes=3.0 * out * a, ops=1.0))
    return ks
