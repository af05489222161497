"""Step time from a per-kernel roofline plus host overhead.

Each kernel takes the longest of: its FLOPs at the precision's dense peak times an efficiency,
its bytes at the card's streaming bandwidth (the datasheet figure times what its memory type
reaches, GpuSpec.stream_efficiency) times the kernel's share of it, and a floor for launch and
tail. A memory-bound kernel (elementwise, norms, the optimizer) takes its bytes at that rate
plus a fixed cost per launch (ramp-up and tail, the same on every card): small tensors are
dominated by it, large ones stream. The GPU time is their sum. In eager mode the host must also
issue every framework operation (`host_seconds_per_op` each; the casts autocast issues from
C++ inside them cost `cast_host_share` of that); the GPU runs asynchronously, so a step takes
the larger of the two. A small-image CNN on a big card thus comes out overhead-bound, as it is in reality.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from fitbench.catalog import get_gpu
from fitbench.core.gpu import GpuSpec
from fitbench.core.names import Framework
from fitbench.estimate import expert_cost, generate_ops, linear_attention, resnet_cost, transformer_cost
from fitbench.estimate.execution import sdpa_math_only, sixteen_bit_weights
from fitbench.estimate.optimizer import optimizer_element_bytes, param_sizes_in_order
from fitbench.estimate.profile import Profile
from fitbench.estimate.segments import Kernel
from fitbench.estimate.weights import BNB_METHODS
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# Host operations outside the model per training step: zero_grad, loss, backward start,
# optimizer bookkeeping (grouping tensors by device and dtype), GradScaler.
STEP_FIXED_OPS = 30.0
# Host cost of a backward node relative to its forward operation: autograd runs backward nodes
# from C++ without the Python module calls, hooks and argument parsing of the forward pass.
BACKWARD_HOST_SHARE = 0.5
# bitsandbytes dequantises weights on the fly: its matmuls reach a fraction of the bandwidth
# that a plain FP16 GEMV does (LLM.int8 is notably slower than FP16 at batch 1): the share per
# weight format is core.quant.BANDWIDTH_SHARE.
# Memory passes of one optimizer update over the parameters (see optimizer_kernels).
OPTIMIZER_PASSES = {"adam": 18, "adamw": 20, "momentum": 5, "sgd": 3}
FUSED_OPTIMIZER_PASSES = {"adam": 7, "adamw": 7, "momentum": 5, "sgd": 3}
# The share of the streaming bandwidth torch's AdamW kernels reach on the reference card, by
# implementation and state element size (`python benchmarks/optimizer_rate.py`,
# optimizer-rate-h200-2026-12-05.json: an LLM's matrices and an MoE's stacked experts, within
# 0.02 of each other). multi_tensor_apply's foreach kernels load a few elements a thread, so
# 16-bit state keeps half the bytes in flight of FP32 (0.71 against 0.85); the fused kernel does
# the whole update's arithmetic per element (FP32 math on 16-bit state included) and streams
# below both. The for-loop runs aten's elementwise kernels, which stream like a copy; SGD's kernels
# were not measured and keep the copy's rate.
OPTIMIZER_STREAM_SHARE = {("foreach", 4): 0.85, ("foreach", 2): 0.71, ("fused", 4): 0.80, ("fused", 2): 0.62}
# The same script on an H100 (optimizer-rate-h100-2026-12-06.json; its SMs have 0.72x the H200's
# bandwidth each): FP32 state streams at nearly the same share (0.875, 0.835), 16-bit state
# higher (0.78, 0.71). Neither a fixed share nor a fixed rate per SM fits both cards; a fixed time
# per byte on each SM in series with the memory's does (optimizer_series): FP32's per-SM
# part is small, 16-bit's is not. Two cards, two constants a kind: fitted, not checked on a third.
OPTIMIZER_STREAM_SHARE_H100 = {
    ("foreach", 4): 0.875,
    ("foreach", 2): 0.78,
    ("fused", 4): 0.835,
    ("fused", 2): 0.71,
}
OPTIMIZER_SECOND_CARD = "h100-sxm"


@functools.cache
def optimizer_series(key: tuple[str, int]) -> tuple[float, float]:
    """(asymptotic share of the stream, per-SM rate in bytes/s) of torch's AdamW kernels of `key`
    (implementation, state bytes): 1 / share = 1 / asymptote + (stream per SM) / rate, solved
    from the H200's and the H100's measured shares (Kernel.sm_rate)."""
    ref, other = get_gpu(OWN_SHARE_REFERENCE_GPU), get_gpu(OPTIMIZER_SECOND_CARD)
    x_ref = ref.stream_bandwidth_bytes_s / ref.sm_count
    x_other = other.stream_bandwidth_bytes_s / other.sm_count
    inv_ref, inv_other = 1.0 / OPTIMIZER_STREAM_SHARE[key], 1.0 / OPTIMIZER_STREAM_SHARE_H100[key]
    rate = (x_ref - x_other) / (inv_ref - inv_other)
    return 1.0 / (inv_ref - x_ref / rate), rate


# Host operations of one update: foreach issues about a dozen for all parameters, fused two
# (the step counters and the kernel), the for-loop this many per parameter tensor.
FOREACH_OPTIMIZER_OPS = 12.0
FUSED_OPTIMIZER_OPS = 2.0
OPTIMIZER_LOOP_OPS = {"adam": 8.0, "adamw": 9.0, "momentum": 3.0, "sgd": 1.0}


@dataclass(frozen=True, kw_only=True)
class Timing:
    """GPU, host and step seconds with the bottleneck and the work behind them."""

    seconds: float
    gpu_seconds: float
    host_seconds: float
    compute_seconds: float
    memory_seconds: float
    floor_seconds: float
    flops: float
    bytes: float

    @property
    def bottleneck(self) -> str:
        if self.host_seconds >= self.gpu_seconds:
            return "overhead"
        shares = {
            "compute": self.compute_seconds,
            "memory": self.memory_seconds,
            "overhead": self.floor_seconds,
        }
        return max(shares, key=lambda k: shares[k])


def _compute_precision(kind: str, workload: Workload) -> str:
    """Which datasheet peak a kernel runs at. PyTorch's defaults keep FP32 matmuls in full FP32
    (`allow_tf32=False`) but let cuDNN convolutions use TF32 (`cudnn.allow_tf32=True`)."""
    compute = workload.precision_info.compute
    if compute == "fp32" and kind == "conv":
        return "tf32"
    return compute


def overlapped_seconds(gpu_seconds: float, host_seconds: float, overlap_loss: float) -> float:
    """A step whose GPU work runs asynchronously beside the host that issues it: the longer of
    the two, plus the share `overlap_loss` of the shorter that does not overlap."""
    return max(gpu_seconds, host_seconds) + overlap_loss * min(gpu_seconds, host_seconds)


# The card the kernels' own bandwidth shares (Kernel.memory_efficiency) were measured on.
OWN_SHARE_REFERENCE_GPU = "h200"


# Grouped expert products (Kernel.grouped) against a dense GEMM of their FLOPs. torch's grouped
# kernel (bf16, H100, `python benchmarks/grouped_mm_rate.py --training`,
# grouped-mm-training-h100-2026-12-06.json: the gate/up and down products of Mixtral, Qwen3-MoE,
# OLMoE and DeepSeek-V2-Lite at 64 to 2,048 rows an expert, forward and backward) runs below the
# dense rate at every size and near the ridge point (rows an expert ~ the card's FLOPs per byte)
# takes about the root of the sum of squares of its compute and weight-read times, not the
# larger: each expert's tile loop starts by loading that expert's weights. With the arithmetic at
# GROUPED_GEMM_SHARE of the dense share and that norm (power GROUPED_ROOFLINE_POWER) the 96
# timings fall within -18..+13 % (median 0 %), where the plain roofline at the dense share read
# -5..-30 % between 128 and 1,024 rows. Fitted on that microbenchmark alone.
GROUPED_GEMM_SHARE = 0.85
GROUPED_ROOFLINE_POWER = 2.0


def grouped_seconds(t_compute: float, t_memory: float) -> float:
    """A grouped expert product's time from its compute and memory times (GROUPED_GEMM_SHARE)."""
    p = GROUPED_ROOFLINE_POWER
    return float((t_compute**p + t_memory**p) ** (1.0 / p))


def grouped_mm_fast_path(gpu: GpuSpec) -> bool:
    """Whether torch's `_grouped_mm` runs its one CUTLASS grouped kernel on `gpu`: bf16 on compute
    capability 9.0 or 10.0 only (aten/native/cuda/GroupedBlas.cpp: `_scaled_mm_allowed_device(
    sm90_only, sm100_only)`), so Hopper and the data-centre Blackwell. Elsewhere (Ampere, Ada,
    GeForce Blackwell's 12.0, ROCm) it falls back to one mm per group after copying the offsets
    to the host. A card of unknown architecture keeps the fast path."""
    if gpu.architecture in ("ampere", "ada", "turing", "volta", "cdna3"):
        return False
    return not (gpu.architecture == "blackwell" and "geforce" in gpu.name.lower())


def own_share(share: float, gpu: GpuSpec) -> float:
    """A kernel's own share of the streaming bandwidth, measured on the reference card, on `gpu`.

    The kernels that carry one (cuDNN's layout conversions and batch norm, PyTorch's batch norm)
    stream far below a copy on the H200 because each SM keeps too few bytes in flight for its
    memory latency (Little's law: bandwidth = bytes in flight / latency), so their rate is one
    per SM: the H200's share x its streaming bandwidth / its SMs, times this card's SMs, and
    never above this card's streaming bandwidth. A card with more SMs per byte of bandwidth
    (A100 2x the H200's, the GeForce cards, V100 and T4 3-5x) streams them closer to a copy.
    Without an SM count the measured share stands."""
    ref = get_gpu(OWN_SHARE_REFERENCE_GPU)
    if not gpu.sm_count or not ref.sm_count:
        return share
    per_sm = share * ref.stream_bandwidth_bytes_s / ref.sm_count
    return min(1.0, per_sm * gpu.sm_count / gpu.stream_bandwidth_bytes_s)


def gemm_rate_factor(gpu: GpuSpec, rate: str) -> float:
    """How much faster (or slower) than the reference card, relative to its datasheet peak, `gpu`
    runs a cuBLAS GEMM at `rate`: its published sustained GEMM share (GpuSpec.gemm_share) over the
    reference card's, where the card has one; 1 otherwise.

    The profile's matmul and attention efficiencies are shares of the peak measured on the
    reference card (an H200, whose large torch.mm reaches 0.77-0.80 of its peak at every
    precision). Another card's share differs for reasons a datasheet does not show: a 72 W L4
    holds a GEMM far below its boost clock (0.36 of its FP32 peak, 0.48 of BF16), GeForce Ampere,
    Ada and Blackwell issue FP32 FMAs on lanes shared with INT32 (0.58-0.70 of FP32 peak) but run
    their tensor cores near or past the datasheet clock (0.91-1.13), an A100's FP32 runs at 0.98. The card's
    GEMMs therefore run at the profile's share times this ratio. A rate the reference has no
    measurement for compares with the mean of its measured shares. cuDNN's convolutions keep
    their own model (conv_efficiency): these measurements are of cuBLAS."""
    card = gpu.gemm_share(rate)
    if card is None:
        return 1.0
    ref = get_gpu(OWN_SHARE_REFERENCE_GPU)
    base = ref.gemm_share(rate)
    if base is None:
        shares = [s for k in ref.gemm_flops if (s := ref.gemm_share(k)) is not None]
        if not shares:
            return 1.0
        base = sum(shares) / len(shares)
    return card / base


def conv_efficiency(profile: Profile, gpu: GpuSpec, rate: str) -> float:
    """The share of `gpu`'s dense peak at `rate` that cuDNN's implicit-GEMM convolutions reach.

    profile.conv_efficiency is measured on the reference card (an H200: cuDNN's sm90 kernels,
    TF32 and BF16 alike, 0.28-0.39 of the peak in benchmarks/results/conv-layout-h200-2026-12-03.json),
    where a convolution gathers its operands (the im2col of the input) faster than a plain GEMM
    reads its tiles and the tensor cores wait on that feed: the limit is the rate one SM sustains,
    not the peak. A card whose tensor units (or, without them, CUDA cores) do less per SM at the
    same rate keeps up with the same feed, so its convolutions run like a GEMM: the measured rate
    per SM on the reference card (share x its peak / its SMs), over this card's peak per SM, up to
    matmul_efficiency (GeForce Ampere and Ada with FP32 accumulation: 0.6-1.3 TFLOP/s an SM against
    the H200's 7.5; A100, V100, T4 and FP32 without tensor cores lie below the reference too). A card
    that does more per SM than the reference keeps the measured share (nothing was measured there);
    so does a card without an SM count, and AMD's MIOpen convolutions (a different library)."""
    ref = get_gpu(OWN_SHARE_REFERENCE_GPU)
    share = profile.conv_efficiency
    if gpu.vendor != "nvidia" or not gpu.sm_count or not ref.sm_count:
        return share
    ref_per_sm = ref.peak(rate) / ref.sm_count
    card_per_sm = gpu.peak(rate) / gpu.sm_count
    fed = share * ref_per_sm / card_per_sm
    return max(share, min(max(share, profile.matmul_efficiency), fed))


# The head dimension fused attention's measured share refers to (attention_share).
ATTENTION_REFERENCE_HEAD_DIM = 128


def head_dim_factor(workload: Workload, exponent: float) -> float:
    """(head_dim / 128) ** exponent, capped at 1: the share fused attention keeps at the workload's
    head dimension (a non-transformer workload: 1)."""
    arch = workload.arch
    if not exponent or not isinstance(arch, TransformerArch):
        return 1.0
    head_dim = arch.head_dim or arch.hidden_size // arch.num_heads
    return min(1.0, head_dim / ATTENTION_REFERENCE_HEAD_DIM) ** exponent


def attention_share(profile: Profile, workload: Workload) -> float:
    """Fused attention's share of the peak for `workload`'s head dimension.

    Per pair of query and key a fused attention kernel does 4 x head_dim FLOPs of matrix products
    (QK^T, PV) and one exponential, and the exponentials run on the SMs' special-function units
    at a small fraction of the tensor-core rate (FlashAttention-3: 3.9 of 989 TFLOP/s on an H100):
    at head_dim 64 they, the softmax bookkeeping and the smaller tiles weigh twice what they do at
    128. `profile.attention_efficiency` is the share at head_dim 128 and above; below it the share
    falls as (head_dim / 128) ** attention_head_dim_exponent (0: the same share at every head
    dimension). FP32 attention (PyTorch's memory-efficient kernel on the CUDA cores) does its
    products at the FP32 rate, beside which the exponentials are no bottleneck: one share."""
    share = profile.attention_efficiency
    if workload.precision_info.compute == "fp32":
        return share
    return share * head_dim_factor(workload, profile.attention_head_dim_exponent)


def causal_attention_share(profile: Profile, workload: Workload, keys: int) -> float:
    """Causal fused attention's share of the peak over a sequence of `keys` tokens.

    Each block of queries pays fixed work beside its keys: loading the queries, the diagonal
    block computed whole and masked, the epilogue, and in backward the query-gradient pass. A
    causal row of s keys costs s/2 keys' products plus that fixed part, so the share climbs as
    s / (s + s0) towards its limit. SDPA's default kernel (cuDNN's) on an H100, forward and
    backward at 16k tokens a call (benchmarks/sdpa_backends.py --seq-sweep): 141-431 TFLOP/s
    at head_dim 64 and 171-539 at 128 from seq 512 to 16,384, both within 5 % of s0 = 1,190 keys
    and a limit of 462 and 579 TFLOP/s, whose ratio 0.80 is the head-dimension factor at every
    sequence. attention_efficiency stays the share at the profile's reference sequence and head
    dimension 128, so that calibration still moves it."""
    s0 = profile.causal_attention_overhead_keys
    ref = profile.causal_attention_reference_keys
    by_head = head_dim_factor(workload, profile.causal_attention_head_dim_exponent)
    by_length = (keys / (keys + s0)) * ((ref + s0) / ref)
    # a calibrated attention_efficiency times the long-row gain stays within the peak
    return min(1.0, profile.attention_efficiency * by_head * by_length)


def _compute_share(
    k: Kernel, gpu: GpuSpec, profile: Profile, rate: str, eff: dict[str, float], workload: Workload
) -> float:
    """The share of `gpu`'s peak at `rate` kernel `k`'s arithmetic reaches: cuDNN's convolutions
    by their own model, a memory kernel's own arithmetic (GELU's erf) at the datasheet rate (its
    per-element cost was measured against the H200's: transformer_cost), a GEMM with a dimension
    that defeats the tensor cores' aligned loads (Kernel.misaligned) at the profile's share for
    it, other GEMMs and attention at their efficiency times the card's sustained GEMM rate."""
    if k.kind == "conv":
        return conv_efficiency(profile, gpu, rate)
    if k.kind == "memory":
        return 1.0
    if k.misaligned and profile.misaligned_matmul_efficiency is not None:
        # the loads narrow with the alignment: the align-1 share per element of it, never more
        # than an aligned GEMM's
        aligned = eff.get(k.kind, 1.0) * gemm_rate_factor(gpu, rate)
        return min(aligned, profile.misaligned_matmul_efficiency * k.misaligned)
    if k.kind == "attention" and k.compute == "fp32":
        # FP32 products of a 16-bit step (SDPA's math path): one share at every head dimension,
        # as attention_share gives an FP32 step's
        return profile.attention_efficiency * gemm_rate_factor(gpu, rate)
    if (
        k.kind == "attention"
        and k.attended_keys
        and profile.causal_attention_overhead_keys
        and workload.precision_info.compute != "fp32"  # FP32: the CUDA cores' products, one share
    ):
        return causal_attention_share(profile, workload, k.attended_keys) * gemm_rate_factor(gpu, rate)
    return eff.get(k.kind, 1.0) * gemm_rate_factor(gpu, rate)


def series_share(asymptote: float, sm_rate: float, gpu: GpuSpec) -> float:
    """The share of `gpu`'s stream a kernel reaches whose time per byte on each SM (`sm_rate`,
    bytes/s per SM) runs in series with the memory's (`asymptote`): optimizer_series' model. A
    card without an SM count takes the reference card's; never past a copy."""
    card = gpu if gpu.sm_count else get_gpu(OWN_SHARE_REFERENCE_GPU)
    return min(1.0, 1.0 / (1.0 / asymptote + card.stream_bandwidth_bytes_s / (sm_rate * card.sm_count)))


def _stream_share(k: Kernel, gpu: GpuSpec, profile: Profile, base: float) -> float:
    """The share of `gpu`'s streaming bandwidth kernel `k` reaches: its own share measured per SM
    (memory_efficiency, carried to `gpu` by own_share) or on every card (stream_share, with a
    per-SM rate in series where it has one: sm_rate), else
    `base` (the profile's or the mode's); kernels whose eager passes mix 16-bit and FP32 tensors at
    the profile's mixed_dtype_memory_efficiency of it."""
    if k.stream_share is not None:
        share = k.stream_share
        if k.sm_rate is not None:
            share = series_share(share, k.sm_rate, gpu)
    elif k.memory_efficiency is not None:
        share = own_share(k.memory_efficiency, gpu)
    else:
        share = base
    return share * profile.mixed_dtype_memory_efficiency if k.mixed_dtypes else share


def time_kernels(
    kernels: list[Kernel],
    workload: Workload,
    gpu: GpuSpec,
    profile: Profile,
    *,
    host_seconds_per_op: float,
    fixed_ops: float = 0.0,
    overlap_loss: float | None = None,
    memory_efficiency: float | None = None,
    kernel_fixed_seconds: float | None = None,
) -> Timing:
    """The step of `kernels`: GPU time by roofline per kernel, host time, and their overlap.
    `memory_efficiency` and `kernel_fixed_seconds` replace the profile's for memory-bound kernels
    that run code of the mode's own (a generation's decode step)."""
    fixed = profile.kernel_fixed_seconds if kernel_fixed_seconds is None else kernel_fixed_seconds
    eff = {
        "matmul": profile.matmul_efficiency,
        "conv": profile.conv_efficiency,
        "attention": attention_share(profile, workload),
    }
    fmt = workload.weight_format
    base_mem_eff = profile.memory_efficiency if memory_efficiency is None else memory_efficiency
    format_share = fmt.bandwidth_share if fmt is not None else 1.0
    stream = gpu.stream_bandwidth_bytes_s
    compute = memory = floor = 0.0
    flops = nbytes = ops = casts = 0.0
    fast_grouped = grouped_mm_fast_path(gpu)
    for k in kernels:
        if k.fallback_launches is not None and not fast_grouped:
            k = dataclasses.replace(
                k,
                launches=k.fallback_launches,
                cast_ops=k.fallback_cast_ops or k.cast_ops,
                fallback_launches=None,
            )
        if not (k.flops or k.bytes or k.dequant_bytes or k.kernel_launches):
            continue  # a pass that launches nothing (a bias gradient's forward) takes no time
        t_compute = 0.0
        # fp8 / int8 weights with quantized activations use those tensor cores where the card
        # has them (GpuSpec.has_rate); elsewhere they are expanded to 16 bit first.
        native = bool(k.compute) and gpu.has_rate(k.compute)
        kernel_bytes = k.bytes + (0.0 if native else k.dequant_bytes)
        if k.flops:
            rate = k.compute if native else _compute_precision(k.kind, workload)
            peak = gpu.peak(rate) * _compute_share(k, gpu, profile, rate, eff, workload)
            if k.grouped:
                peak *= GROUPED_GEMM_SHARE
            t_compute = k.flops / peak
            if k.kind == "conv":
                # Each convolution pass also pays a fixed time per launch (pipeline fill, epilogue,
                # the last wave's tail), which dominates the small convolutions of small images.
                t_compute += k.kernel_launches * profile.conv_fixed_seconds
            elif k.kind == "matmul":
                t_compute += k.kernel_launches * profile.matmul_fixed_seconds
        share = _stream_share(k, gpu, profile, base_mem_eff) * format_share
        t_memory = kernel_bytes / (stream * share)
        if k.kind == "memory":
            # A memory-bound kernel: its bytes at the streaming rate plus a fixed cost per launch.
            t_memory += k.kernel_launches * (fixed if k.fixed_seconds is None else k.fixed_seconds)
        t = max(
            grouped_seconds(t_compute, t_memory) if k.grouped else max(t_compute, t_memory),
            profile.kernel_floor_seconds,
        )
        if t == profile.kernel_floor_seconds and t > max(t_compute, t_memory):
            floor += t * k.count
        elif t_compute >= t_memory:
            compute += t * k.count
        else:
            memory += t * k.count
        flops += k.flops * k.count
        nbytes += kernel_bytes * k.count
        ops += (k.ops + k.tensor_ops * (profile.tensor_op_host_share - 1.0)) * k.count
        casts += k.cast_ops * k.count
    gpu_s = compute + memory + floor
    host_s = (ops + fixed_ops + casts * profile.cast_host_share) * host_seconds_per_op
    loss = profile.overlap_loss if overlap_loss is None else overlap_loss
    return Timing(
        seconds=overlapped_seconds(gpu_s, host_s, loss),
        gpu_seconds=gpu_s,
        host_seconds=host_s,
        compute_seconds=compute,
        memory_seconds=memory,
        floor_seconds=floor,
        flops=flops,
        bytes=nbytes,
    )


def backward_kernels(kernels: list[Kernel]) -> list[Kernel]:
    """Backward of each forward kernel: matmuls and convolutions do two products (input and
    weight gradients); fused attention about 2.5x its forward (it recomputes the scores);
    elementwise work reads and writes about twice as much, unless the family module counted its
    backward traffic (Kernel.backward_bytes, Kernel.backward_flops). Each node costs the host
    BACKWARD_HOST_SHARE of its forward operation; each autocast cast has a cast back of its
    gradient (ToCopyBackward), as many casts as the forward."""
    out = []
    for k in kernels:
        factor = 2.5 if k.kind == "attention" else 2.0
        out.append(
            Kernel(
                name=k.name + ".backward",
                kind=k.kind,
                flops=k.flops * factor if k.backward_flops is None else k.backward_flops,
                # A memory kernel's arithmetic stays on the cores its forward used, and so do
                # FP32 matmuls (FP32 experts: their gradients are FP32 products too); a quantized
                # matmul's gradients are 16-bit products of the dequantized weights.
                compute=k.compute if k.kind == "memory" or k.compute == "fp32" else "",
                bytes=k.bytes * 2.0 if k.backward_bytes is None else k.backward_bytes,
                count=k.count,
                ops=k.ops * BACKWARD_HOST_SHARE,
                tensor_ops=k.tensor_ops * BACKWARD_HOST_SHARE,
                cast_ops=k.cast_ops,
                memory_efficiency=k.memory_efficiency,
                launches=k.kernel_launches if k.backward_launches is None else k.backward_launches,
                mixed_dtypes=k.mixed_dtypes,
                stream_share=k.stream_share,
                sm_rate=k.sm_rate if k.backward_sm_rate is None else k.backward_sm_rate,
                misaligned=k.misaligned,
                grouped=k.grouped,
                attended_keys=k.attended_keys,
                fallback_launches=k.fallback_backward_launches,
                fallback_cast_ops=k.fallback_cast_ops,
            )
        )
    return out


def optimizer_kernels(workload: Workload, framework: str = "torch") -> list[Kernel]:
    """The optimizer update as memory traffic and host operations, per implementation.

    foreach and for-loop (torch/optim/adam.py `_multi_tensor_adam`, `_single_tensor_adam`) run
    the same elementwise passes: about 18 over the parameters for Adam (lerp, mul, addcmul,
    sqrt, div, add, addcdiv), 20 for AdamW with its decay, 5 for momentum SGD, 3 for plain SGD;
    foreach issues about a dozen operations in all, the for-loop that many per parameter tensor
    (OPTIMIZER_LOOP_OPS). fused (`torch._fused_adam_`, `_fused_sgd_`) reads parameters, gradients
    and state once and writes parameters and state once: 7 passes for Adam/AdamW, 5 for momentum
    SGD, 3 for SGD, in a couple of operations. Each pass moves one element of the state's dtype
    (optimizer.optimizer_element_bytes). With gradient accumulation the update runs once every
    `grad_accum` micro-batches: a step here is one micro-batch, so its share is 1/N.
    """
    params = workload.param_count()
    state_bytes = optimizer_element_bytes(workload, framework)
    impl = workload.optimizer_impl if framework == Framework.TORCH else "foreach"
    passes = (FUSED_OPTIMIZER_PASSES if impl == "fused" else OPTIMIZER_PASSES)[workload.optimizer]
    if impl == "fused":
        ops = FUSED_OPTIMIZER_OPS
    elif impl == "for-loop":
        ops = OPTIMIZER_LOOP_OPS[workload.optimizer] * len(param_sizes_in_order(workload))
    else:
        ops = FOREACH_OPTIMIZER_OPS
    share = 1.0 / workload.grad_accum
    measured = framework == Framework.TORCH and workload.optimizer in ("adam", "adamw")
    series = (
        optimizer_series((impl, state_bytes))
        if measured and (impl, state_bytes) in OPTIMIZER_STREAM_SHARE
        else None
    )
    return [
        Kernel(
            name="optimizer",
            kind="memory",
            flops=0.0,
            bytes=passes * params * state_bytes * share,
            count=1,
            ops=ops * share,
            stream_share=series[0] if series else None,
            sm_rate=series[1] if series else None,
        )
    ]


def gradient_accumulation_kernels(
    workload: Workload, *, gradient_bytes: float | None = None, tensors: float | None = None
) -> list[Kernel]:
    """With gradient accumulation over N > 1 micro-batches, the adds that sum each micro-batch's
    gradients: the first backward after zero_grad(set_to_none=True) hands its gradients to the
    parameters as they are, every later one's AccumulateGrad adds the new gradient into the kept
    one in place (`grad += new`: both read, one written), one add kernel per parameter tensor,
    dispatched from C++ by the backward engine (a cast's host cost each, Profile.cast_host_share).
    A step here is one micro-batch: (N - 1) / N of that. `gradient_bytes` and `tensors`: the
    trained parameters' gradient bytes and tensors (None: the whole model's, in the precision's
    gradient dtype). None without accumulation."""
    n = workload.grad_accum
    if n <= 1:
        return []
    share = (n - 1) / n
    if gradient_bytes is None:
        gradient_bytes = workload.precision_info.grad_bytes * workload.trained_param_count()
    if tensors is None:
        tensors = len(param_sizes_in_order(workload))
    return [
        Kernel(
            name="gradient_accumulation",
            kind="memory",
            flops=0.0,
            bytes=3.0 * gradient_bytes * share,
            count=1,
            ops=0.0,
            cast_ops=tensors * share,
            launches=tensors * share,
        )
    ]


def as_compiled(kernels: list[Kernel], profile: Profile) -> list[Kernel]:
    """The forward kernels as the profile's mode runs them: each in its fused form where the mode
    compiles the step (Profile.fuses_pointwise; Kernel.fused), else unchanged. Backward and
    recomputation follow the forward's forms, as AOT autograd compiles the backward with it."""
    if not profile.fuses_pointwise:
        return kernels
    return [k if k.fused is None else k.fused for k in kernels]


def training_kernels(
    workload: Workload, profile: Profile, *, channels_last: bool | None = None
) -> list[Kernel]:
    """The kernels of one training step: forward, backward, optimizer (and recomputation)."""
    if workload.is_resnet:
        fwd = resnet_cost.forward_kernels(workload, profile, channels_last=channels_last)
    else:
        fwd = transformer_cost.forward_kernels(
            workload,
            workload.batch_size,
            workload.seq_len or 1,
            all_experts=profile.runs_all_experts,
            release=profile.transformers_version,
        )
    fwd = as_compiled(fwd, profile)
    if sixteen_bit_weights(workload, workload.precision, profile.exec_mode, profile.framework):
        fwd = transformer_cost.casts_of_sixteen_bit_step(fwd, workload)
    kernels = fwd + backward_kernels(fwd) + optimizer_kernels(workload, profile.framework)
    kernels += gradient_accumulation_kernels(workload)
    if workload.checkpointing:  # the backward's recomputation of the forward
        kernels += fwd if workload.is_resnet else recomputation(fwd, workload, profile)
    return kernels


def recomputation(forward: list[Kernel], workload: Workload, profile: Profile) -> list[Kernel]:
    """What a checkpointed transformer step's backward runs again of `forward`
    (transformer_cost.recomputed_kernels) as the profile's framework checkpoints: torch's
    non-reentrant checkpoint stops early, Paddle's reentrant recompute reruns whole blocks."""
    early = profile.framework == Framework.TORCH
    return transformer_cost.recomputed_kernels(forward, workload, early_stop=early)


def kernel_launches(kernels: list[Kernel]) -> float:
    """GPU kernels launched by `kernels` (each instance's launches times its count)."""
    return sum(k.kernel_launches * k.count for k in kernels)


def grad_scaler_waits(workload: Workload, profile: Profile) -> bool:
    """Whether the step's GradScaler (AMP-fp16 training) makes the host wait for the backward
    before it issues the optimizer (Profile.grad_scaler_syncs)."""
    return profile.grad_scaler_syncs and workload.is_training and workload.precision == "amp-fp16"


def unscale_kernel(workload: Workload, params: float) -> Kernel:
    """GradScaler's unscale of `params` FP32 gradients in place, with the inf check (one foreach
    pass: each gradient read and written once, at the foreach kernels' stream share)."""
    grad = workload.precision_info.grad_bytes
    return Kernel(
        name="grad_unscale",
        kind="memory",
        flops=0.0,
        bytes=2.0 * grad * params / workload.grad_accum,
        count=1,
        ops=4.0 / workload.grad_accum,  # unscale_, the per-device found_inf, the .item() read
        stream_share=OPTIMIZER_STREAM_SHARE[("foreach", 4)],
    )


def in_sequence(first: Timing, then: Timing) -> Timing:
    """Two parts of a step that do not overlap (the host waits between them): every time adds."""
    return Timing(
        seconds=first.seconds + then.seconds,
        gpu_seconds=first.gpu_seconds + then.gpu_seconds,
        host_seconds=first.host_seconds + then.host_seconds,
        compute_seconds=first.compute_seconds + then.compute_seconds,
        memory_seconds=first.memory_seconds + then.memory_seconds,
        floor_seconds=first.floor_seconds + then.floor_seconds,
        flops=first.flops + then.flops,
        bytes=first.bytes + then.bytes,
    )


def training_step(
    workload: Workload, gpu: GpuSpec, profile: Profile, *, channels_last: bool | None = None
) -> Timing:
    """One training step; `channels_last` overrides a ResNet's memory format (None: the mode's).
    With a GradScaler that waits (grad_scaler_waits), the forward, backward and unscale overlap
    with their host work, and the optimizer step follows them."""
    kernels = training_kernels(workload, profile, channels_last=channels_last)
    host = profile.host_seconds_per_op
    if not grad_scaler_waits(workload, profile):
        return time_kernels(
            kernels, workload, gpu, profile, host_seconds_per_op=host, fixed_ops=STEP_FIXED_OPS
        )
    optimizer = [k for k in kernels if k.name == "optimizer"]
    rest = [k for k in kernels if k.name != "optimizer"] + [
        unscale_kernel(workload, workload.trained_param_count())
    ]
    return in_sequence(
        time_kernels(rest, workload, gpu, profile, host_seconds_per_op=host, fixed_ops=STEP_FIXED_OPS),
        time_kernels(optimizer, workload, gpu, profile, host_seconds_per_op=host),
    )


def inference_step(workload: Workload, gpu: GpuSpec, profile: Profile) -> Timing:
    if workload.is_resnet:
        fwd = resnet_cost.forward_kernels(workload, profile)
    else:
        fwd = transformer_cost.forward_kernels(
            workload,
            workload.batch_size,
            workload.seq_len or 1,
            all_experts=profile.runs_all_experts,
            release=profile.transformers_version,
        )
    fwd = as_compiled(fwd, profile)
    # Inference mode records no autograd node: an operation costs the host a share of a training one.
    host_per_op = profile.host_seconds_per_op * profile.inference_host_share
    return time_kernels(fwd, workload, gpu, profile, host_seconds_per_op=host_per_op, fixed_ops=5.0)


@dataclass(frozen=True, kw_only=True)
class GenerationTiming:
    prefill: Timing
    decode: Timing  # one decode step (one new token for each sequence)
    roofline_tokens_per_second: float

    @property
    def tokens_per_second(self) -> float:
        """Decode throughput over the whole batch."""
        return 0.0 if self.decode.seconds <= 0 else self._batch / self.decode.seconds

    _batch: int = 1


def _quantized_extra_calls(workload: Workload, profile: Profile) -> float:
    """Host calls a quantized forward adds: each fp8 Linear launches its own kernel from Python (a
    Triton launch in transformers' FP8Linear), and each bitsandbytes Linear runs its forward's
    Python (casts, views, a custom op's Python kernel, a ctypes launch), which costs the host more
    than the one call generate_ops' layer count gives a Linear."""
    fp8 = generate_ops.fp8_linear_calls(workload) * (profile.fp8_linear_host_calls - 1.0)
    fmt = workload.weight_format
    if fmt is None or fmt.method not in BNB_METHODS:
        return fp8
    int8 = fmt.method == "bnb-int8"
    per = profile.bnb_int8_linear_host_calls if int8 else profile.bnb_4bit_linear_host_calls
    return fp8 + generate_ops.bnb_linear_calls(workload) * (per - 1.0)


def step_overlap_loss(workload: Workload, profile: Profile) -> float:
    """The overlap loss of one of `workload`'s steps: a generation's (_generation_overlap_loss)
    or the profile's."""
    loss = _generation_overlap_loss(workload, profile) if workload.is_generation else None
    return profile.overlap_loss if loss is None else loss


def _generation_overlap_loss(workload: Workload, profile: Profile) -> float | None:
    """The overlap loss of a generation's prefill and decode steps: LLM.int8's outlier check
    (`if outliers.any()` in bitsandbytes' int8_vectorwise_quant) waits for the GPU every Linear,
    so the host issues nothing while the GPU works and their times add. Otherwise the profile's
    generate_overlap_loss where it has one (generate's per-token stopping check), else None:
    the profile's overlap_loss."""
    fmt = workload.weight_format
    if profile.bnb_int8_syncs and fmt is not None and fmt.method == "bnb-int8":
        return 1.0
    return profile.generate_overlap_loss


# The pointwise kernels of a block (estimate/transformer_cost.py forward_kernels).
_POINTWISE = ("elementwise", "layer_norm", "gelu")


def decode_as_run(
    kernels: list[Kernel], batch: int, profile: Profile, *, groups: int = 1, query_bytes: float = 0.0
) -> list[Kernel]:
    """A decode step's kernels as the mode runs them at this batch.

    Up to the profile's decode_fused_max_batch the mode runs its own fused kernels (torch.tuned:
    backends/torch/fused_decode.py): the block's pointwise work (norms, rotary, the cache stores,
    residual adds, the activation) rides inside the weight GEMVs, which read their inputs and write
    their outputs once (the GEMMs' own activation bytes), so it moves no bytes and launches nothing
    of its own. Weights stay read once per step, as counted. Its attention is its own kernel where
    the profile describes it (decode_fused_attention_efficiency, fused_attention): every query head
    reads its kv head's K and V (`groups` query heads a kv head; `query_bytes`, the queries and
    the output, once), in two launches. Above that batch
    a compiled step (Profile.fuses_pointwise) runs each pointwise chain as one kernel
    (Kernel.fused, as_compiled), and an eager one runs them as counted.
    """
    if batch > profile.decode_fused_max_batch:
        return as_compiled(kernels, profile)
    return [fused_attention(k, profile, groups, query_bytes) for k in kernels if k.name not in _POINTWISE]


def fused_attention(kernel: Kernel, profile: Profile, groups: int, query_bytes: float = 0.0) -> Kernel:
    """An attention kernel of the decode step as the mode's own fused kernel runs it
    (backends/torch/decode_kernels.py decode_attention), where the profile describes one: each of
    the `groups` query heads of a kv head reads that head's K and V itself (the group shares them
    only through L2), while each query and output moves once (`query_bytes` of the kernel's
    bytes), at the kernel's own share of the streaming bandwidth, in two launches (the splits of
    the cache side by side, then their merge: flash-decoding) at the profile's
    kernel_fixed_seconds each. Other kernels, and profiles without one, pass unchanged."""
    share = profile.decode_fused_attention_efficiency
    if kernel.kind != "attention" or share is None:
        return kernel
    return dataclasses.replace(
        kernel,
        kind="memory",
        bytes=(kernel.bytes - query_bytes) * groups + query_bytes,
        memory_efficiency=share,
        launches=2.0,
        fixed_seconds=profile.kernel_fixed_seconds,
    )


# Decode steps a static-cache generator runs before its graph is captured, into slots of its cache
# (backends/torch/static_decoder.py GRAPH_WARMUP_STEPS): the cache is that much longer.
STATIC_CACHE_WARMUP_SLOTS = 3


def copies_cache_each_step(workload: Workload, profile: Profile) -> bool:
    """Whether a decode step reads and writes the whole KV cache again: the mode grows it by
    concatenation (Profile.kv_cache_concat) and it holds plain tensors of the compute dtype
    (--kv-cache naming that dtype changes nothing; an 8-bit cache is another runtime's)."""
    return profile.kv_cache_concat and workload.kv_cache_dtype in ("fp16", "bf16", "fp32")


def static_cache_slots(prompt: int, new: int, batch: int, profile: Profile) -> int | None:
    """The KV slots a decode step attends over where the mode's step reads its whole static cache
    (masked past the position: the compiled static-cache step above the fused batches), else None
    (the real context). The cache holds the prompt, the new tokens and the warm-up steps, rounded
    up to the mode's alignment (backends/torch/static_decoder.py cache_length)."""
    align = profile.decode_cache_align
    if not align or not profile.runs_other_decode_step(batch):
        return None
    return align * math.ceil((prompt + new + STATIC_CACHE_WARMUP_SLOTS) / align)


def generation(workload: Workload, gpu: GpuSpec, profile: Profile) -> GenerationTiming:
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    b, prompt, new = workload.batch_size, workload.prompt_tokens or 1, workload.new_tokens or 1
    prefill_k = transformer_cost.forward_kernels(
        workload,
        b,
        prompt,
        all_experts=profile.runs_all_experts,
        release=profile.transformers_version,
        engine=profile.engine_loading,
    )
    release = profile.transformers_version
    # The prefill is the same forward code and loop iteration as a decode step, over the whole
    # prompt: the host issues the decode step's Python-level calls (generate_ops, at the prompt's
    # context), each at the generation's cost per call, while its kernels are the prompt's. Its
    # memory-bound work, over a few hundred tokens mostly its GEMMs' weight reads, streams at the
    # decode step's share (decode_memory_efficiency: what the mode's weight reads reach, where it
    # has its own); its small kernels keep the mode's fixed time per launch.
    prefill = time_kernels(
        [dataclasses.replace(k, ops=0.0, tensor_ops=0.0) for k in prefill_k],
        workload,
        gpu,
        profile,
        host_seconds_per_op=profile.generate_host_seconds_per_op,
        fixed_ops=float(generate_ops.decode_step_calls(arch, prompt, release))
        + linear_attention.prefill_extra_calls(arch, prompt, release)
        + _quantized_extra_calls(workload, profile),
        memory_efficiency=profile.decode_efficiency,
        overlap_loss=_generation_overlap_loss(workload, profile),
    )
    # A decode step at the mean context length of the generation; its attention reads that many
    # slots, or the whole static cache where the mode's step attends over all of it.
    mean_context = prompt + math.ceil(new / 2)
    # transformers' generate runs a GPU's decode steps through batched_mm experts (gathered
    # weights; Profile.decode_experts_batched), its prefill through grouped_mm.
    batched = profile.decode_experts_batched and expert_cost.experts_unquantized(workload)
    decode_k = transformer_cost.forward_kernels(
        workload,
        b,
        1,
        kv_len=mean_context,
        all_experts=profile.runs_all_experts,
        release=profile.transformers_version,
        batched_experts=profile.decode_experts_batched,
        engine=profile.engine_loading,
    )
    if generate_ops.repeats_kv(arch, mean_context, release):
        decode_k.append(transformer_cost.repeated_kv_kernel(workload, b, mean_context))
    if profile.kv_cache_concat and sdpa_math_only(arch):  # transformers' own Falcon code
        decode_k.extend(transformer_cost.math_sdpa_kv_kernels(workload, b, mean_context))
    read_k = decode_k
    if copies_cache_each_step(workload, profile):
        read_k = [*decode_k, transformer_cost.cache_append_kernel(workload, b, mean_context)]
    if arch.is_mla and profile.expands_latent_cache:
        read_k = [*read_k, *transformer_cost.latent_expansion_kernels(workload, b, mean_context)]
    slots = static_cache_slots(prompt, new, b, profile)
    if slots is not None:
        read_k = transformer_cost.forward_kernels(
            workload,
            b,
            1,
            kv_len=slots,
            all_experts=profile.runs_all_experts,
            release=profile.transformers_version,
            batched_experts=profile.decode_experts_batched,
            engine=profile.engine_loading,
        )
    groups = max(1, arch.num_heads // arch.kv_heads)
    read_k = decode_as_run(
        read_k, b, profile, groups=groups, query_bytes=transformer_cost.attention_query_bytes(workload, b)
    )
    # The host issues the Python-level torch calls of the decode step as transformers issues them
    # (generate_ops: the layers, the model's fixed part and the generate loop), in place of the
    # kernels' per-kernel operation counts; autocast's C++ casts stay with the kernels.
    host_k = [dataclasses.replace(k, ops=0.0, tensor_ops=0.0) for k in read_k]
    # The decode step has its own bandwidth share and fixed time per launch (profiles.toml:
    # decode_memory_efficiency, decode_kernel_fixed_seconds), where the mode runs kernels of its
    # own for it.
    decode = time_kernels(
        host_k,
        workload,
        gpu,
        profile,
        host_seconds_per_op=profile.generate_host_seconds_per_op,
        fixed_ops=float(generate_ops.decode_step_calls(arch, mean_context, release, batched_experts=batched))
        + _quantized_extra_calls(workload, profile),
        memory_efficiency=profile.decode_step_efficiency(b),
        kernel_fixed_seconds=profile.decode_step_fixed_seconds(b),
        overlap_loss=_generation_overlap_loss(workload, profile),
    )
    # The bandwidth roofline: every weight byte and the KV cache (its real context) read once per
    # step at the datasheet bandwidth — no implementation decodes faster than this (each expert
    # reached read once, not gathered per token as batched_mm does).
    least_k = decode_k
    if profile.decode_experts_batched and arch.is_moe:
        least_k = transformer_cost.forward_kernels(
            workload,
            b,
            1,
            kv_len=mean_context,
            all_experts=profile.runs_all_experts,
            release=profile.transformers_version,
            engine=profile.engine_loading,
        )
    min_bytes = sum(k.bytes * k.count for k in least_k if k.kind in ("matmul", "attention"))
    roof = b * gpu.bandwidth_bytes_s / min_bytes if min_bytes else 0.0
    return GenerationTiming(prefill=prefill, decode=decode, roofline_tokens_per_second=roof, _batch=b)
