"""One GPU of several: the one-device breakdown, sharded as the strategy shards it.

Why a module of its own: sharding is a transformation of a breakdown the memory model's entry
(memory.py) has already made for one device, full-parameter or PEFT alike; it reads the
strategies' facts (distributed.py), the optimizer's figures and the single-device walk, and
never asks back up which model applies. DeepSpeed's ZeRO is the exception: its model states
are DeepSpeed's own count (distributed.deepspeed_model_states) of the 16-bit model it trains,
so only the activation walk is taken from one device.
"""

from __future__ import annotations

from fitbench.core.names import Strategy
from fitbench.estimate import transformer_cost
from fitbench.estimate.breakdown import PART_NAMES, MemoryBreakdown
from fitbench.estimate.distributed import (
    DEEPSPEED_REDUCE_BUCKET_ELEMENTS,
    DEEPSPEED_STAGES,
    DISTRIBUTED_PART_NAMES,
    FSDP_LIVE_BLOCKS,
    NCCL_BUFFER_BYTES,
    SHARDED_GRADIENTS,
    SHARDED_WEIGHTS,
    check_tp,
    deepspeed_largest_layer_params,
    deepspeed_model_states,
    deepspeed_precision,
    fsdp_blocks,
    global_batch_size,
    strategy_shares,
    tp_activation_factor,
    tp_kv_split,
    tp_weight_bytes,
)
from fitbench.estimate.optimizer import OPTIMIZER_STATES, optimizer_bytes
from fitbench.estimate.profile import Profile
from fitbench.estimate.single_device import activation_peak, single_device_breakdown
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload


def _gathered_in_backward(strategy: str, params: int, root: int | float, block: int | float) -> float:
    """Parameters held unsharded during a training step's backward pass: all of them under
    fsdp-shard-grad-op (gathered in forward, freed after backward), the root and the live blocks
    under the strategies that shard weights, none otherwise."""
    if strategy == Strategy.FSDP_SHARD_GRAD_OP:
        return params
    if strategy in SHARDED_WEIGHTS:
        return root + FSDP_LIVE_BLOCKS * block
    return 0.0


def counts_own_model_states(workload: Workload) -> bool:
    """Whether one GPU's breakdown is DeepSpeed's own count (full-parameter ZeRO training) rather
    than a transformation of the one-device breakdown, which it then never reads."""
    return (
        workload.gpus > 1
        and not workload.peft
        and workload.is_training
        and workload.strategy in DEEPSPEED_STAGES
    )


def per_gpu_breakdown(workload: Workload, one: MemoryBreakdown, profile: Profile) -> MemoryBreakdown:
    """Peak memory of ONE of the workload.gpus GPUs, as named parts that add up, from `one`: the
    breakdown of the same job on one device (memory.one_device_breakdown of it with gpus=1).

    Adapters: `one` replicated, with DDP's buckets and NCCL's buffers (_peft_breakdown).
    DeepSpeed's ZeRO: its own count of the model states (deepspeed_breakdown). Otherwise `one`
    supplies weights, quantization scales and (inference) the forward's parts; this function
    shards what the strategy shards and adds what it costs: gathered (unsharded) weights, DDP's
    gradient buckets and NCCL's buffers. As on one GPU, the peak is the larger of two real
    moments: the backward pass (activations alive) and the optimizer step (all gradients and the
    optimizer's scratch).
    """
    n = workload.gpus
    w1 = workload.replace(gpus=1)
    if n == 1:
        return one
    if workload.peft:
        return _peft_breakdown(workload, one)
    if counts_own_model_states(workload):
        return deepspeed_breakdown(workload, profile)
    shares = strategy_shares(workload)
    base = one
    p = workload.precision_info
    strategy = workload.strategy
    params = workload.param_count()
    parts: dict[str, float] = dict.fromkeys((*PART_NAMES, *DISTRIBUTED_PART_NAMES), 0.0)
    parts["workspace"] = profile.workspace_bytes
    parts["cuda_context"] = profile.context_bytes
    if strategy == Strategy.TP:
        arch = check_tp(workload)
        parts["weights"], parts["quantization_scales"] = tp_weight_bytes(workload, arch, n)
        act = tp_activation_factor(workload, n)
    else:
        parts["weights"] = base.parts["weights"] * shares.weights
        parts["quantization_scales"] = base.parts["quantization_scales"] * shares.weights
        act = 1.0
    collectives = workload.is_training or strategy in (Strategy.TP, *SHARDED_WEIGHTS)
    parts["communication_buffers"] = NCCL_BUFFER_BYTES if collectives else 0
    root, block = fsdp_blocks(workload)
    bytes_per_param = base.parts["weights"] / params if params else 0.0
    details: dict[str, int] = {"gpus": n, "global_batch_size": global_batch_size(workload)}

    if workload.is_training:
        state, master, scratch = optimizer_bytes(w1, profile.framework)
        parts["optimizer_state"] = state * shares.optimizer
        parts["master_weights"] = master * shares.optimizer
        grads_total = params * p.grad_bytes
        if strategy == Strategy.DDP:
            parts["gradient_buckets"] = grads_total  # DDP's flat bucket copy of every gradient
        # The backward moment: the activation walk of one GPU (optimizer-independent; with plain
        # SGD the walk never prefers the optimizer moment, so this is the backward peak).
        bw = single_device_breakdown(w1.replace(optimizer="sgd"), profile).parts
        bw_grads = bw["gradients"] * shares.gradients
        if strategy in SHARDED_GRADIENTS:
            bw_grads += block * p.grad_bytes  # a block's unsharded grads before reduce-scatter
        gathered = _gathered_in_backward(strategy, params, root, block) * bytes_per_param
        backward = {
            "activations": bw["activations"] * act,
            "amp_weight_copies": bw["amp_weight_copies"]
            * (shares.weights if strategy == Strategy.TP else 1.0),
            "gradients": bw_grads,
            "temporaries": bw["temporaries"] * act,
            "gathered_weights": gathered,
        }
        optimizer = {
            "activations": 0.0,
            "amp_weight_copies": 0.0,
            "gathered_weights": 0.0,
            "gradients": grads_total * shares.gradients,
            "temporaries": scratch * shares.optimizer,
        }
        phase, dynamic = (
            ("backward", backward)
            if sum(backward.values()) >= sum(optimizer.values())
            else ("optimizer", optimizer)
        )
        parts.update(dynamic)
        details["gradients_total"] = int(grads_total * shares.gradients)
    else:
        phase = base.phase
        parts["amp_weight_copies"] = base.parts["amp_weight_copies"] * shares.weights
        parts["temporaries"] = base.parts["temporaries"] * act
        if strategy in SHARDED_WEIGHTS:
            live = min(params, root + FSDP_LIVE_BLOCKS * block)
            parts["gathered_weights"] = live * bytes_per_param
            parts["amp_weight_copies"] = base.parts["amp_weight_copies"] * live / params
        elif strategy == Strategy.FSDP_SHARD_GRAD_OP:
            parts["gathered_weights"] = params * bytes_per_param  # unsharded from forward on
        if workload.is_generation:
            arch = workload.arch
            assert isinstance(arch, TransformerArch)
            kv_share = 1 / tp_kv_split(arch, n) if strategy == Strategy.TP else 1.0
            parts["kv_cache"] = base.parts["kv_cache"] * kv_share
            parts["temporaries"] = max(
                transformer_cost.inference_transient_bytes(w1, profile.transformers_version) * act,
                parts["kv_cache"] / arch.num_layers,
            )
    dynamic_total = (
        parts["activations"]
        + parts["temporaries"]
        + parts["kv_cache"]
        + parts["gradients"]
        + parts["gathered_weights"]
    )
    parts["fragmentation"] = profile.fragmentation * dynamic_total
    details["params_per_gpu"] = round(params * shares.weights)
    return MemoryBreakdown(parts={k: round(v) for k, v in parts.items()}, phase=phase, details=details)


def deepspeed_breakdown(workload: Workload, profile: Profile) -> MemoryBreakdown:
    """One GPU under DeepSpeed ZeRO: the model states of deepspeed_model_states (DeepSpeed's own
    count), the activations and temporaries of the backward walk of the 16-bit model on one GPU,
    the reduce bucket and NCCL's buffers. DeepSpeed's estimator holds every model state for the
    whole step, so the peak is the backward moment with all of them; its default optimizer for
    Adam/AdamW (engine.py _configure_basic_optimizer: FusedAdam) updates the partitions in place,
    with no step temporaries."""
    w1 = workload.replace(gpus=1)
    n = workload.gpus
    stage = DEEPSPEED_STAGES[workload.strategy]
    w16 = w1.replace(precision=deepspeed_precision(w1))
    weight_bytes = int(w16.precision_info.weight_bytes)
    params = workload.param_count()
    states = deepspeed_model_states(
        params,
        n,
        stage,
        deepspeed_largest_layer_params(workload.arch),
        weight_bytes,
        OPTIMIZER_STATES[workload.optimizer],
    )
    bw = activation_peak(w16, profile.framework, profile.transformers_version)
    parts: dict[str, float] = dict.fromkeys((*PART_NAMES, *DISTRIBUTED_PART_NAMES), 0.0)
    parts.update(states)
    parts["activations"] = bw["activations"]
    parts["temporaries"] = bw["temporaries"]
    parts["communication_buffers"] = NCCL_BUFFER_BYTES + DEEPSPEED_REDUCE_BUCKET_ELEMENTS * weight_bytes
    parts["workspace"] = profile.workspace_bytes
    parts["cuda_context"] = profile.context_bytes
    dynamic = parts["activations"] + parts["temporaries"] + parts["gathered_weights"]
    parts["fragmentation"] = profile.fragmentation * dynamic
    details = {
        "gpus": n,
        "global_batch_size": global_batch_size(workload),
        "params_per_gpu": round(params / n) if stage == 3 else params,
        "model_states": sum(states.values()),
        "gradients_total": states["gradients"],
    }
    return MemoryBreakdown(parts={k: round(v) for k, v in parts.items()}, phase="backward", details=details)


def _peft_breakdown(workload: Workload, base: MemoryBreakdown) -> MemoryBreakdown:
    """Adapters on several GPUs: every strategy keeps a replica of the frozen base model (sharding
    a few million adapter parameters saves nothing worth modelling), so one GPU holds `base`, the
    one-device PEFT breakdown; DDP adds bucket copies of the trainable gradients and NCCL its
    buffers."""
    parts = {**dict.fromkeys(DISTRIBUTED_PART_NAMES, 0), **base.parts}
    trainable_grads = base.details.get("gradients_total", 0)
    parts["gradient_buckets"] = trainable_grads
    parts["communication_buffers"] = NCCL_BUFFER_BYTES
    details = {**base.details, "gpus": workload.gpus, "global_batch_size": global_batch_size(workload)}
    return MemoryBreakdown(parts=parts, phase=base.phase, details=details)
