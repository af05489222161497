"""Several GPUs for one job: what each strategy splits, and how one GPU's share is counted.

Strategies (Workload.strategy) and what one GPU holds, N = workload.gpus:

    ddp     a full replica: weights, gradients, optimizer state, activations, plus the gradient
            buckets of torch.nn.parallel.DistributedDataParallel (below)
    zero1   DeepSpeed ZeRO stage 1: 16-bit weights and gradients whole, FP32 master weights and
            Adam moments / N
    zero2   DeepSpeed ZeRO stage 2: + 16-bit gradients / N
    zero3   DeepSpeed ZeRO stage 3: + 16-bit weights / N, the largest layer gathered
            (zero1-3: model states exactly as DeepSpeed's own estimator counts them,
            deepspeed_model_states; activations from the 16-bit model DeepSpeed trains)
    fsdp-shard-grad-op  torch.distributed.fsdp's SHARD_GRAD_OP at the workload's precision:
            weights, gradients and optimizer state rest sharded (1/N); weights are all-gathered
            once in forward and stay unsharded until their backward has run
    fsdp-full-shard     FSDP's FULL_SHARD ('fsdp' for short): the same sharding, the weights
            gathered one block at a time (one unit per block, the next one prefetched)
    tp      tensor parallelism (Megatron-LM): the attention and MLP matrices of every block are
            split over the N GPUs (heads for attention, columns/rows for the MLP), embeddings and
            the LM head are vocab-parallel, norms and the classifier replicated; their gradients,
            optimizer state and the KV cache follow the weights

Batch: for ddp, zero1-3 and fsdp, `batch_size` is the batch of EACH GPU (what one process's
data loader yields; the global batch is batch_size * N), so activations per GPU do not change
with N. For tp the GPUs share one batch (every rank sees the same samples), and activations are
split in part: Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models", eq. 2) give s*b*h*(10 + 24/t + 5*a*s/(h*t)) bytes a layer without sequence
parallelism: 10 of the 34 (+5as/h) units stay whole on every GPU. Sequence parallelism is not
assumed.

DistributedDataParallel's gradient buckets: DDP reduces gradients in buckets of bucket_cap_mb
(25 MiB) and, with the default gradient_as_bucket_view=False, the buckets are flat tensors
beside the parameters' .grad tensors, allocated once for every parameter. PyTorch's own
documentation of gradient_as_bucket_view says turning it on saves "the total gradients size":
the buckets are one more copy of all gradients, held for the whole run.

DeepSpeed's strategies take their model states from `deepspeed_model_states`, whose sum is
DeepSpeed's own estimator to the byte (a test compares it with DeepSpeed's formulas); the FSDP
strategies model what PyTorch allocates for the workload's own precision (FP32 Adam state in
FP32 training, autocast copies under AMP), starting from the single-GPU breakdown.

Time: each GPU computes its share (speed.py on the per-GPU work) and communicates over the
card's interconnect with ring collectives (NCCL): an all-reduce of X bytes moves 2(N-1)/N * X
bytes in and out of every GPU, a reduce-scatter or an all-gather (N-1)/N * X. NCCL's measured
"bus bandwidth" (nccl-tests, doc/PERFORMANCE.md) is defined so that time = that volume / busbw;
busbw reaches about 75-80 % of the NVLink per-direction peak and less over PCIe, which is what
BUS_EFFICIENCY holds.

Here: the strategies' facts (what each splits, DeepSpeed's model states, tensor parallelism's
shards, the link). sharding.py turns the one-device breakdown into one GPU's, communication.py
adds the collectives to the one-device time, limits.min_gpus finds the fewest GPUs: each reads
this module and none of them calls another back.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitbench.core.gpu import GpuSpec
from fitbench.core.names import Strategy
from fitbench.core.units import MiB
from fitbench.errors import FitbenchError
from fitbench.estimate.weights import quantizable_params, quantized_matrices, weight_bytes
from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.workload import Workload

# Parts a multi-GPU breakdown adds to breakdown.PART_NAMES.
DISTRIBUTED_PART_NAMES = ("gathered_weights", "gradient_buckets", "communication_buffers")

DATA_PARALLEL = ("ddp", "zero1", "zero2", "zero3", "fsdp-shard-grad-op", "fsdp-full-shard")
SHARDED_GRADIENTS = ("zero2", "zero3", "fsdp-shard-grad-op", "fsdp-full-shard")
# Weights gathered one FSDP unit at a time (the next one prefetched) while they compute.
SHARDED_WEIGHTS = (Strategy.ZERO3, Strategy.FSDP_FULL_SHARD)
MAX_GPUS = 64

# DeepSpeed ZeRO stages by strategy name.
DEEPSPEED_STAGES = {"zero1": 1, "zero2": 2, "zero3": 3}
FSDP_STRATEGIES = ("fsdp-shard-grad-op", "fsdp-full-shard")
# DeepSpeed's reduce bucket (deepspeed/runtime/zero/config.py: reduce_bucket_size default 5e8
# elements): with contiguous_gradients (default True) stage 1/2 allocate it as one flat buffer
# in the gradients' dtype (stage_1_and_2.py setup_buckets; a second one only with overlap_comm,
# off by default below stage 3), stage 3 one as well (stage3.py, `bucket.buffer = torch.empty(
# self.reduce_bucket_size, ...)`).
DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 500_000_000

# NCCL's own device memory per process once a communicator exists: every ring/tree connection
# of every channel keeps receive buffers for NCCL's protocols (Simple: NCCL_BUFFSIZE, 4 MiB by
# default; LL128 and LL smaller), and a rank holds a few (PCIe pairs) to tens (8-GPU NVLink
# boards) of such connections. A round figure in that range, not a measurement; NVLink SHARP
# buffers are excluded (NCCL_NVLS_ENABLE=0 on the measured runs).
NCCL_BUFFER_BYTES = 256 * MiB

# Fraction of the link's per-direction datasheet bandwidth that NCCL's ring collectives reach
# (nccl-tests busbw for large messages): NVLink about 0.75-0.8 of peak; PCIe lower, and much
# lower again on GeForce cards, which have no peer-to-peer path and bounce through host memory.
BUS_EFFICIENCY = {"nvlink": 0.78, "pcie": 0.6}
# Time of one collective that moves almost no data (nccl-tests' small-message all-reduce time):
# what decoding one token with tensor parallelism pays twice per layer.
COLLECTIVE_LATENCY_S = {"nvlink": 12e-6, "pcie": 25e-6}
# Used when a GPU row gives no interconnect: PCIe 4.0 x8 / 3.0 x16.
FALLBACK_INTERCONNECT_BYTES_S = 16e9

# DDP all-reduces each 25 MiB bucket as soon as its gradients are ready, during the rest of the
# backward pass: only the last bucket is necessarily exposed. Communication cannot hide behind
# all of the compute, though: NCCL kernels take SMs and memory bandwidth from the backward
# kernels, and the first bucket is ready only after the head's backward. OVERLAP_FRACTION is
# the share of the overlappable compute that can hide communication. The same holds for FSDP's
# prefetched all-gathers (forward and backward) and reduce-scatters (backward).
DDP_BUCKET_BYTES = 25 * MiB
OVERLAP_FRACTION = 0.8
# speed.py's backward does two products per forward product: backward is ~2/3 of fwd+bwd.
BACKWARD_SHARE = 2.0 / 3.0
# FSDP keeps the block that computes and the next one (prefetched) unsharded at a time.
FSDP_LIVE_BLOCKS = 2
# Tensor parallelism: all-reduces of the block output per layer (after attention and after
# the MLP), in forward; backward has the same number on the input gradients.
TP_ALLREDUCES_PER_LAYER = 2
# Korthikanti et al. 2022, eq. 2: of s*b*h*(34 + 5as/h) activation bytes a layer, 10*s*b*h
# (layer-norm inputs, dropout masks, the inputs of the first Linear of attention and MLP) stay
# whole on every tensor-parallel GPU.
TP_REPLICATED_ACTIVATION_UNITS = 10.0
TP_SPLIT_ACTIVATION_UNITS = 24.0


# ---------------------------------------------------------------------------------------------
# ZeRO as DeepSpeed counts it

# Bytes a parameter per GPU in DeepSpeed's estimators (DeepSpeed 0.19.6, no offload), as
# (kept whole on every GPU, partitioned over N) for 16-bit training:
#   stage 2: deepspeed/runtime/zero/stage_1_and_2.py, estimate_zero2_model_states_mem_needs:
#            ``gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)`` with "2 =
#            params_16bit, 18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit +
#            8_optimizer_states_32bit(momentum and variance)" (its comment).
#   stage 3: deepspeed/runtime/zero/stage3.py, estimate_zero3_model_states_mem_needs:
#            ``gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)`` with
#            ``largest_layer_memory = (4 * largest_layer_params)`` (16-bit weights gathered and
#            16-bit gradients computed for the largest layer).
#   stage 1: DeepSpeed has no estimator; stage 1 is stage 2 with the 16-bit gradients whole
#            (stage_1_and_2.py, partition_gradients=False): 4P + int(16P/N), the figure
#            DeepSpeed's "Memory Requirements" page (docs/code-docs/source/memory.rst) still
#            gives as "4 * params + 16 * params / (total number of gpus)".
# CPU offload (not modelled: Workload has no offload option): stage 2 with offload_optimizer
# keeps ``2 * total_params`` on the GPU; stage 3 ``largest_layer_memory + int(2 * total_params
# / total_gpus)`` with offload_optimizer and ``largest_layer_memory`` alone with offload_param.
# An FP32 run (no fp16/bf16 section) has no 16-bit copies: 4-byte weights and gradients, and
# DeepSpeed still makes an FP32 partition copy for the optimizer (single_partition_of_fp32_groups).
_DEEPSPEED_UNITS = {  # (weight bytes, stage) -> (whole, partitioned, gathered-layer bytes a parameter)
    (2, 1): (4, 16, 0),
    (2, 2): (2, 18, 0),
    (2, 3): (0, 18, 4),
    (4, 1): (8, 12, 0),
    (4, 2): (4, 16, 0),
    (4, 3): (0, 20, 8),
}


def deepspeed_model_states(
    params: int, gpus: int, stage: int, largest_layer_params: int, weight_bytes: int = 2, moments: int = 2
) -> dict[str, int]:
    """Model states one GPU holds under DeepSpeed ZeRO `stage` over `gpus` GPUs, as breakdown
    parts; for 16-bit weights and Adam (`moments` 2) their sum is DeepSpeed's own estimate to
    the byte. Another optimizer keeps 4 bytes per moment instead of Adam's 8 (momentum SGD 1,
    SGD none).

    weights           16-bit parameters (whole, or 1/N at stage 3)
    master_weights    FP32 parameter partition, 4P/N
    optimizer_state   Adam momentum and variance partitions, 8P/N (4 bytes a moment)
    gradients         the rest of DeepSpeed's figure: 16-bit gradients (whole at stage 1, 1/N
                      from stage 2) and the FP32 gradient partition of the step
    gathered_weights  stage 3: DeepSpeed's largest_layer_memory
    """
    if stage not in (1, 2, 3):
        raise ValueError(f"ZeRO stage must be 1, 2 or 3, got {stage}")
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    w = 2 if weight_bytes <= 2 else 4
    whole, sharded, gathered = _DEEPSPEED_UNITS[(w, stage)]
    sharded -= 4 * (2 - moments)
    total = whole * params + int(sharded * params / gpus)
    weights = w * params if stage < 3 else int(w * params / gpus)
    master = int(4 * params / gpus)
    state = int(4 * moments * params / gpus)
    return {
        "weights": weights,
        "master_weights": master,
        "optimizer_state": state,
        "gradients": total - weights - master - state,
        "gathered_weights": gathered * largest_layer_params,
    }


def deepspeed_largest_layer_params(arch: ResNetArch | TransformerArch) -> int:
    """DeepSpeed's largest_layer_params (stage3.py model_to_params): the most parameters one
    module holds itself (``m.parameters(recurse=False)``): a Linear's weight and bias, an
    embedding, a convolution, the classifier; a transformer block holds none itself."""
    if isinstance(arch, ResNetArch):
        classifier = arch.feature_dim * arch.num_classes + arch.num_classes
        return max([c.in_channels * c.out_channels * c.kernel**2 for c in arch.convs(224)] + [classifier])
    h, f, q, kv = arch.hidden_size, arch.intermediate_size, arch.q_dim, arch.kv_dim
    linears = [
        h * q + (q if arch.qkv_bias else 0),
        h * kv + (kv if arch.qkv_bias else 0),
        q * h + (h if arch.out_bias else 0),
        h * f + (f if arch.mlp_bias else 0),
        f * h + (h if arch.mlp_bias else 0),
    ]
    tables = [arch.vocab_size * h, arch.max_positions * h if arch.position == "learned" else 0]
    return max(linears + tables)


# ---------------------------------------------------------------------------------------------
# Who holds what


def data_parallel_degree(workload: Workload) -> int:
    """How many different batches are processed per step: N for data-parallel strategies, 1 for tp."""
    return workload.gpus if workload.strategy in DATA_PARALLEL else 1


def global_batch_size(workload: Workload) -> int:
    """Samples per step over all GPUs: --batch is per GPU except under tensor parallelism."""
    return workload.batch_size * data_parallel_degree(workload)


def tp_arch(workload: Workload) -> TransformerArch:
    if not isinstance(workload.arch, TransformerArch):
        raise FitbenchError(
            "tensor parallelism splits the layers of a transformer",
            "use --strategy ddp, zero3 or fsdp for a ResNet",
            message_zh="张量并行切分的是 transformer 的层",
            hint_zh="ResNet 请使用 --strategy ddp、zero3 或 fsdp",
        )
    return workload.arch


def tp_supported(arch: TransformerArch, n: int) -> bool:
    """Megatron-style tensor parallelism needs whole attention heads on every GPU; key/value
    heads are split too, or replicated when there are fewer of them than GPUs (grouped-query
    attention: N a multiple of the KV heads)."""
    if arch.num_heads % n or arch.intermediate_size % n:
        return False
    kv = arch.kv_heads
    return kv % n == 0 or n % kv == 0


def check_tp(workload: Workload) -> TransformerArch:
    arch = tp_arch(workload)
    n = workload.gpus
    if not tp_supported(arch, n):
        ok = [str(k) for k in range(2, MAX_GPUS + 1) if tp_supported(arch, k)][:6]
        raise FitbenchError(
            f"tensor parallelism over {n} GPUs needs the {arch.num_heads} attention heads "
            f"({arch.kv_heads} key/value heads) and the MLP width {arch.intermediate_size} to split evenly",
            f"use --gpus {', '.join(ok)}" if ok else "use --strategy fsdp-full-shard",
            message_zh=(
                f"在 {n} 块 GPU 上做张量并行,需要 {arch.num_heads} 个注意力头("
                f"{arch.kv_heads} 个键/值头)和 MLP 宽度 {arch.intermediate_size} "
                "都能均匀切分"
            ),
            hint_zh=(f"请使用 --gpus {', '.join(ok)}" if ok else "请使用 --strategy fsdp-full-shard"),
        )
    return arch


def tp_kv_split(arch: TransformerArch, n: int) -> int:
    """How many ways the key/value heads are split (replicated beyond the number of KV heads)."""
    return min(n, arch.kv_heads)


def _tp_generic(arch: TransformerArch) -> bool:
    """Experts, latent attention or other layouts the Megatron split below does not spell out:
    their block matrices (every expert) are taken as split n ways, everything else replicated."""
    return (
        arch.is_moe
        or arch.is_mla
        or arch.qk_norm != "none"
        or arch.norms_per_layer != 2
        or bool(arch.mlp_free_layers)
        or bool(arch.patch_size)
        or bool(arch.extra_params)
        or bool(arch.vision_params)
    )


def _tp_layer_matrix_params(arch: TransformerArch, n: int) -> float:
    if _tp_generic(arch):
        return arch.linear_params() / arch.num_layers / n
    h, f, q, kv = arch.hidden_size, arch.intermediate_size, arch.q_dim, arch.kv_dim
    kv_split = tp_kv_split(arch, n)
    attention = h * q / n + 2 * h * kv / kv_split + q * h / n  # column Q, K, V; row O
    mlp = (3 if arch.mlp == "swiglu" else 2) * h * f / n  # column up/gate; row down
    return attention + mlp


def tp_params_per_gpu(arch: TransformerArch, n: int) -> float:
    """Parameters one of n tensor-parallel GPUs holds (equals arch.param_count() for n = 1).

    Column-parallel biases split with their matrix, row-parallel biases and norms replicate;
    word embeddings and an untied LM head are vocab-parallel; position and token-type
    embeddings, BERT's embedding norm, pooler and classifier replicate.
    """
    if _tp_generic(arch):
        tables = 1 if arch.tie_embeddings or arch.kind == "encoder" else 2
        word = arch.vocab_size * arch.hidden_size * tables
        rest = arch.param_count() - arch.linear_params() - word
        return arch.linear_params() / n + word / n + rest
    h, f, q, kv = arch.hidden_size, arch.intermediate_size, arch.q_dim, arch.kv_dim
    kv_split = tp_kv_split(arch, n)
    biases = 0.0
    if arch.qkv_bias:
        biases += q / n + 2 * kv / kv_split
    if arch.out_bias:
        biases += h
    if arch.mlp_bias:
        biases += (2 if arch.mlp == "swiglu" else 1) * f / n + h
    layer = _tp_layer_matrix_params(arch, n) + biases + 2 * arch.norm_params()
    word = arch.vocab_size * h
    embeddings = word / n + (arch.embedding_params() - word)
    if arch.kind == "encoder":
        head = float(arch.head_params())
    else:
        head = arch.norm_params() + (0 if arch.tie_embeddings else word / n)
    return embeddings + arch.num_layers * layer + head


def tp_weight_bytes(
    workload: Workload, arch: TransformerArch, n: int, *, engine: bool = False
) -> tuple[float, float]:
    """(weights, quantization scales) per tensor-parallel GPU (`engine`: as a serving engine
    loads them, weights.quantized_matrices)."""
    p = workload.precision_info
    per_gpu = tp_params_per_gpu(arch, n)
    fmt = workload.weight_format
    if fmt is None:
        return per_gpu * p.weight_bytes, 0.0
    # The converted matrices (weights.quantized_matrices: block matrices, every expert's) split
    # like the block matrices, n ways, at the bytes per weight the whole model's take;
    # everything else stays 16-bit (weights.weight_bytes).
    share = arch.num_layers * _tp_layer_matrix_params(arch, n) / quantizable_params(workload)
    converted = sum(m.copies * m.fin * m.fout for m in quantized_matrices(workload, engine=engine))
    stored, scales = weight_bytes(workload, engine=engine)
    packed = stored - (workload.param_count() - converted) * 2
    return packed * share + (per_gpu - converted * share) * 2, scales * share


def tp_activation_factor(workload: Workload, n: int) -> float:
    """Share of a layer's activations one of n tensor-parallel GPUs keeps (Korthikanti eq. 2)."""
    arch = tp_arch(workload)
    split = TP_SPLIT_ACTIVATION_UNITS
    if workload.attention == "eager":
        s = workload.seq_len or workload.tokens_per_sequence
        split += 5.0 * arch.num_heads * s / arch.hidden_size
    rep = TP_REPLICATED_ACTIVATION_UNITS
    return (rep + split / n) / (rep + split)


def fsdp_blocks(workload: Workload) -> tuple[int, int]:
    """(parameters outside the repeated blocks, parameters of the largest block): the units an
    FSDP wrap of every transformer block / ResNet residual block creates (the root keeps the rest)."""
    arch = workload.arch
    if isinstance(arch, TransformerArch):
        return arch.param_count() - arch.layers_params(), arch.layer_params()
    assert isinstance(arch, ResNetArch)
    per_block: dict[str, int] = {}
    for conv in arch.convs(224):
        if conv.name.startswith("layer"):
            key = conv.name.rsplit(".", 1)[0]
            per_block[key] = per_block.get(key, 0) + conv.params
    largest = max(per_block.values())
    return arch.param_count() - sum(per_block.values()), largest


def fsdp_units(workload: Workload) -> int:
    """FSDP units of a wrap per block: every block plus the root."""
    arch = workload.arch
    return (arch.num_layers if isinstance(arch, TransformerArch) else arch.num_blocks) + 1


def interconnect(gpu: GpuSpec) -> tuple[str, float]:
    kind = "nvlink" if gpu.interconnect == "nvlink" else "pcie"
    bandwidth = gpu.interconnect_bytes_s or FALLBACK_INTERCONNECT_BYTES_S
    return kind, bandwidth * BUS_EFFICIENCY[kind]


# ---------------------------------------------------------------------------------------------
# What share one GPU keeps


@dataclass(frozen=True, kw_only=True)
class Shares:
    """What fraction of the single-GPU amount one GPU keeps, per tensor class."""

    weights: float
    gradients: float
    optimizer: float


def strategy_shares(workload: Workload) -> Shares:
    n, strategy = workload.gpus, workload.strategy
    if strategy == Strategy.TP:
        arch = check_tp(workload)
        r = tp_params_per_gpu(arch, n) / arch.param_count()
        return Shares(weights=r, gradients=r, optimizer=r)
    if strategy == Strategy.DDP:
        return Shares(weights=1.0, gradients=1.0, optimizer=1.0)
    training = workload.is_training
    # FSDP's SHARD_GRAD_OP: parameters rest sharded (1/N) and are gathered whole from forward to
    # the end of backward (counted as gathered_weights, not twice).
    return Shares(
        weights=1 / n if strategy in (*SHARDED_WEIGHTS, Strategy.FSDP_SHARD_GRAD_OP) else 1.0,
        gradients=1 / n if strategy in SHARDED_GRADIENTS and training else 1.0,
        optimizer=1 / n if training else 1.0,
    )


def deepspeed_precision(workload: Workload) -> str:
    """The precision DeepSpeed trains at: its bf16/fp16 sections convert the model to 16 bit
    (no autocast), so an AMP request becomes pure bf16 / fp16 with FP32 master weights in the
    ZeRO optimizer; FP32 (and TF32) train in FP32."""
    info = workload.precision_info
    if info.amp:
        return info.compute
    return workload.precision if info.weight_bytes == 2 else "fp32"


def assumptions(workload: Workload, gpu: GpuSpec) -> list[str]:
    """Lines for Estimate.assumptions that say what a multi-GPU figure means."""
    n, strategy = workload.gpus, workload.strategy
    kind, busbw = interconnect(gpu)
    lines = [f"{n} x {gpu.name}, strategy {strategy}: memory is per GPU"]
    if strategy == Strategy.TP:
        lines.append(f"tensor parallelism: the batch of {workload.batch_size} is shared by the {n} GPUs")
    else:
        lines.append(f"--batch is per GPU: global batch {global_batch_size(workload)}")
    lines.append(
        f"collectives over {gpu.interconnect or 'an unknown link'} at {busbw / 1e9:.0f} GB/s "
        f"bus bandwidth ({BUS_EFFICIENCY[kind]:.0%} of the link's per-direction peak)"
    )
    return lines
