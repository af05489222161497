"""Several GPUs' time: the one-device step divided as the strategy divides it, plus collectives.

Each GPU computes its share (the one-device step of the per-GPU work) and communicates over the
card's interconnect with ring collectives (NCCL); how much of that hides behind the backward
pass depends on the strategy (distributed.py's constants say why). Why a module of its own: it
transforms a one-device time that the time model's entry (timing.py) has already chosen, full
or PEFT, and never asks back up which applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fitbench.core.gpu import GpuSpec
from fitbench.core.names import Strategy
from fitbench.estimate import speed
from fitbench.estimate.distributed import (
    BACKWARD_SHARE,
    COLLECTIVE_LATENCY_S,
    DDP_BUCKET_BYTES,
    DEEPSPEED_STAGES,
    OVERLAP_FRACTION,
    SHARDED_WEIGHTS,
    TP_ALLREDUCES_PER_LAYER,
    deepspeed_precision,
    fsdp_blocks,
    fsdp_units,
    interconnect,
    strategy_shares,
    tp_arch,
)
from fitbench.estimate.peft import trainable_bytes
from fitbench.estimate.profile import Profile
from fitbench.estimate.weights import weight_bytes
from fitbench.workloads.workload import Workload


@dataclass(frozen=True, kw_only=True)
class DistributedTiming(speed.Timing):
    """speed.Timing with communication.

    communication_seconds        collective time NOT hidden behind computation (part of
                                 gpu_seconds: the GPU waits for it)
    communication_total_seconds  all collective time of the step, hidden or not
    communication_bytes          bytes each GPU sends (= receives) per step
    """

    communication_seconds: float = 0.0
    communication_total_seconds: float = 0.0
    communication_bytes: float = 0.0
    gpus: int = 1
    strategy: str = "ddp"

    @property
    def bottleneck(self) -> str:
        if self.host_seconds >= self.gpu_seconds:
            return "overhead"
        shares = {
            "compute": self.compute_seconds,
            "memory": self.memory_seconds,
            "overhead": self.floor_seconds,
            "communication": self.communication_seconds,
        }
        return max(shares, key=lambda k: shares[k])


@dataclass(frozen=True, kw_only=True)
class _Comm:
    total: float  # seconds of all collectives
    exposed: float  # seconds not hidden behind computation
    bytes: float  # per GPU


def _collective_seconds(volume: float, count: float, gpu: GpuSpec) -> float:
    kind, busbw = interconnect(gpu)
    return volume / busbw + count * COLLECTIVE_LATENCY_S[kind]


def _hidden(total: float, overlappable: float, floor: float) -> float:
    """Exposed communication when `overlappable` seconds of compute can run beside it."""
    return min(total, max(total - OVERLAP_FRACTION * overlappable, floor))


def _training_comm(
    workload: Workload, gpu: GpuSpec, compute_s: float, backward_s: float, grads: float
) -> _Comm:
    n, strategy = workload.gpus, workload.strategy
    if workload.peft:
        strategy = "ddp"  # adapters: every strategy all-reduces the trainable gradients (see memory)
    p = workload.precision_info
    params = workload.param_count()
    ring = (n - 1) / n
    weights, _ = weight_bytes(workload)
    root, block = fsdp_blocks(workload)
    buckets = max(1, math.ceil(grads / DDP_BUCKET_BYTES))
    last_bucket = _collective_seconds(2 * ring * min(grads, DDP_BUCKET_BYTES), 1, gpu)
    if strategy == Strategy.DDP:
        volume = 2 * ring * grads  # ring all-reduce of every gradient
        total = _collective_seconds(volume, buckets, gpu)
        return _Comm(total=total, exposed=_hidden(total, backward_s, last_bucket), bytes=volume)
    if strategy in (Strategy.ZERO1, Strategy.ZERO2, Strategy.FSDP_SHARD_GRAD_OP):
        # Gradients reduce-scattered during backward (bucketed like DDP), then the updated
        # parameter shards all-gathered (DeepSpeed after the optimizer step; SHARD_GRAD_OP at the
        # next forward), with nothing left to overlap: the ZeRO paper's volume.
        rs = _collective_seconds(ring * grads, buckets, gpu)
        ag = _collective_seconds(ring * weights, buckets, gpu)
        last_rs = _collective_seconds(ring * min(grads, DDP_BUCKET_BYTES), 1, gpu)
        rs_exposed = _hidden(rs, backward_s, last_rs)
        return _Comm(total=rs + ag, exposed=rs_exposed + ag, bytes=ring * (grads + weights))
    if strategy in SHARDED_WEIGHTS:
        # All-gather of the weights in forward and again in backward, reduce-scatter of the
        # gradients: 3 (N-1)/N * parameter bytes for equal dtypes. Prefetching overlaps them
        # with compute, except the first gather and the last reduce-scatter.
        volume = ring * (2 * weights + grads)
        total = _collective_seconds(volume, 3 * fsdp_units(workload), gpu)
        per_param = weights / params
        floor = _collective_seconds(ring * (root + block) * per_param + ring * block * p.grad_bytes, 2, gpu)
        return _Comm(total=total, exposed=_hidden(total, compute_s, floor), bytes=volume)
    # Tensor parallelism: the output of every attention and MLP block is all-reduced in forward,
    # the input gradients in backward, on the critical path.
    arch = tp_arch(workload)
    tokens = workload.batch_size * (workload.seq_len or 1)
    message = tokens * arch.hidden_size * p.activation_bytes
    count = 2 * TP_ALLREDUCES_PER_LAYER * arch.num_layers
    volume = count * 2 * ring * message
    total = _collective_seconds(volume, count, gpu)
    return _Comm(total=total, exposed=total, bytes=volume)


def _forward_comm(workload: Workload, gpu: GpuSpec, compute_s: float, tokens: int) -> _Comm:
    """One forward pass (inference, prefill or one decode step) over `tokens` new tokens."""
    n, strategy = workload.gpus, workload.strategy
    ring = (n - 1) / n
    if strategy == Strategy.TP:
        arch = tp_arch(workload)
        message = tokens * arch.hidden_size * workload.precision_info.activation_bytes
        count = TP_ALLREDUCES_PER_LAYER * arch.num_layers
        volume = count * 2 * ring * message
        total = _collective_seconds(volume, count, gpu)
        return _Comm(total=total, exposed=total, bytes=volume)
    if strategy in SHARDED_WEIGHTS:
        weights, scales = weight_bytes(workload)
        root, block = fsdp_blocks(workload)
        params = workload.param_count()
        volume = ring * (weights + scales)
        total = _collective_seconds(volume, fsdp_units(workload), gpu)
        floor = _collective_seconds(ring * (root + block) * (weights + scales) / params, 1, gpu)
        return _Comm(total=total, exposed=_hidden(total, compute_s, floor), bytes=volume)
    return _Comm(total=0.0, exposed=0.0, bytes=0.0)  # independent replicas


def _with_comm(
    single: speed.Timing,
    workload: Workload,
    comm: _Comm,
    profile: Profile,
    *,
    compute_divisor: float = 1.0,
    optimizer_saving_s: float = 0.0,
) -> DistributedTiming:
    """The per-GPU step: speed.py's single-GPU parts, divided as the strategy divides them, plus
    the exposed communication; GPU and host overlap as in speed.time_kernels."""
    compute = single.compute_seconds / compute_divisor
    mem = max(0.0, single.memory_seconds / compute_divisor - optimizer_saving_s)
    floor = single.floor_seconds
    gpu_s = compute + mem + floor + comm.exposed
    host_s = single.host_seconds
    loss = speed.step_overlap_loss(workload, profile)
    return DistributedTiming(
        seconds=speed.overlapped_seconds(gpu_s, host_s, loss),
        gpu_seconds=gpu_s,
        host_seconds=host_s,
        compute_seconds=compute,
        memory_seconds=mem,
        floor_seconds=floor,
        flops=single.flops / compute_divisor,
        bytes=single.bytes / compute_divisor,
        communication_seconds=comm.exposed,
        communication_total_seconds=comm.total,
        communication_bytes=comm.bytes,
        gpus=workload.gpus,
        strategy=workload.strategy,
    )


def step_timing(
    workload: Workload, single: speed.Timing, gpu: GpuSpec, profile: Profile
) -> DistributedTiming:
    """One training step (or inference forward) of one GPU, communication included, from
    `single`: the same job's step on one device (timing.one_device_step of it with gpus=1).

    Compute: the single-GPU step of the per-GPU work (the per-GPU batch; for tp the matmul and
    memory time divided by N, host work unchanged: every rank issues every operation), minus
    the part of the optimizer update a sharded optimizer does not run.
    """
    strategy_shares(workload)  # validates tp
    w1 = workload.replace(gpus=1)
    divisor = float(workload.gpus) if workload.strategy == Strategy.TP else 1.0
    if not workload.is_training:
        comm = _forward_comm(
            workload, gpu, single.gpu_seconds / divisor, workload.batch_size * (workload.seq_len or 1)
        )
        return _with_comm(single, workload, comm, profile, compute_divisor=divisor)
    saving = 0.0
    if workload.strategy not in (Strategy.DDP, Strategy.TP) and not workload.peft:
        opt = speed.time_kernels(
            speed.optimizer_kernels(w1, profile.framework),
            w1,
            gpu,
            profile,
            host_seconds_per_op=profile.host_seconds_per_op,
        )
        saving = opt.gpu_seconds * (1 - 1 / workload.gpus)
    compute_s = single.gpu_seconds / divisor - saving
    backward_s = BACKWARD_SHARE * compute_s
    comm_workload = workload
    if workload.strategy in DEEPSPEED_STAGES and not workload.peft:
        # DeepSpeed reduces 16-bit gradients and gathers 16-bit weights.
        comm_workload = workload.replace(precision=deepspeed_precision(workload))
    grads = workload.param_count() * comm_workload.precision_info.grad_bytes
    if workload.peft:  # only the adapters have gradients
        grads = trainable_bytes(w1)
    comm = _training_comm(comm_workload, gpu, compute_s, backward_s, grads)
    return _with_comm(single, workload, comm, profile, compute_divisor=divisor, optimizer_saving_s=saving)


def generation(workload: Workload, gpu: GpuSpec, profile: Profile) -> speed.GenerationTiming:
    """Prefill and one decode step per GPU. Data-parallel strategies are independent replicas
    (tokens per second is per replica: multiply by N for the machine); tp splits every weight
    read N ways and pays two all-reduces a layer per token; zero3/fsdp all-gather every
    weight for every token, which is why nobody decodes that way."""
    w1 = workload.replace(gpus=1)
    strategy_shares(workload)  # validates tp
    single = speed.generation(w1, gpu, profile)
    n = workload.gpus
    divisor = float(n) if workload.strategy == Strategy.TP else 1.0
    b = workload.batch_size
    prefill_comm = _forward_comm(
        workload, gpu, single.prefill.gpu_seconds / divisor, b * (workload.prompt_tokens or 1)
    )
    decode_comm = _forward_comm(workload, gpu, single.decode.gpu_seconds / divisor, b)
    prefill = _with_comm(single.prefill, workload, prefill_comm, profile, compute_divisor=divisor)
    decode = _with_comm(single.decode, workload, decode_comm, profile, compute_divisor=divisor)
    roof = single.roofline_tokens_per_second * (n if workload.strategy == Strategy.TP else 1)
    return speed.GenerationTiming(prefill=prefill, decode=decode, roofline_tokens_per_second=roof, _batch=b)
