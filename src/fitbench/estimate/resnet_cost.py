"""Memory segments and kernels of ResNets, from the real per-layer shapes.

Saved tensors per conv-BN(-ReLU) unit in PyTorch (torchvision layout, ReLU in place):
the convolution output (batch-norm input) and the batch-norm output that the in-place ReLU
overwrites and saves (and the next convolution saves as its input) — 2 tensors a unit. A
framework whose ReLU is not in place (Paddle's vision models) keeps a third. The stem adds the
image, the max-pool output and its int64 indices.
"""

from __future__ import annotations

from fitbench.estimate.dtypes import activation_dtypes
from fitbench.estimate.segments import Kernel, Segment
from fitbench.workloads.arch import ResNetArch
from fitbench.workloads.workload import Workload

SAVED_PER_CONV = {"torch": 2.0, "paddle": 3.0}


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


def forward_kernels(workload: Workload) -> list[Kernel]:
    """Convolutions as implicit GEMMs, and the memory-bound BN, ReLU and residual adds."""
    arch = _arch(workload)
    dt = activation_dtypes(workload, dropout=False)
    p = workload.precision_info
    b, size = workload.batch_size, workload.image_size or 224
    w_bytes = 2 if p.amp else p.weight_bytes
    a = dt.act
    last_conv = ".conv3" if arch.block == "bottleneck" else ".conv2"
    ks: list[Kernel] = []
    for i, conv in enumerate(arch.convs(size)):
        out = b * conv.out_channels * conv.out_hw**2
        inp = b * conv.in_channels * conv.in_hw**2
        # Autocast casts each convolution's weight (batch norm keeps the 16-bit activations, so
        # only the stem's FP32 image is cast as an input).
        casts = (2.0 if i == 0 else 1.0) if p.amp else 0.0
        ks.append(
            Kernel(
                name=conv.name,
                kind="conv",
                flops=2.0 * b * conv.macs_per_sample(),
                bytes=(inp + out) * a + conv.in_channels * conv.out_channels * conv.kernel**2 * w_bytes,
                cast_ops=casts,
            )
        )
        # Batch norm reads and writes the output, the in-place ReLU again; a block's last conv
        # is followed by the residual add (two reads, one write) before its ReLU.
        ks.append(Kernel(name=conv.name + ".bn_relu", kind="memory", flops=0.0, bytes=4.0 * out * a, ops=2.0))
        if conv.name.endswith(last_conv):
            ks.append(Kernel(name=conv.name + ".add", kind="memory", flops=0.0, bytes=3.0 * out * a, ops=1.0))
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
    return ks
