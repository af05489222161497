"""Serving: how many users a card holds and how fast, as vLLM (V1 engine) and SGLang allocate.

A serving engine does not grow a cache per request: at start it takes a fixed share of the card
and splits whatever the model does not need into a pool of fixed-size KV blocks. vLLM's worker
(vllm/v1/worker/gpu_worker.py, determine_available_memory) does it in this order, and so does
this module:

1. requested = gpu_memory_utilization x the total memory CUDA reports (not the free memory);
2. minus the weights ("Model loading took X GiB");
3. minus the peak of the profile run: a dummy forward of max_num_batched_tokens tokens, then a
   dummy sampler pass over max_num_seqs rows of logits (the larger of the two; the torch peak
   increase vLLM logs as "peak activation");
4. minus the non-torch memory that appeared meanwhile (cuBLAS/NCCL workspaces; more with
   tensor parallelism, whose NCCL buffers land here);
5. minus the CUDA-graph pool, which vLLM profiles and subtracts since v0.21 (before, the graphs
   were captured after the cache was sized and came out of the 1 - utilization margin);
6. the rest is the KV cache: blocks of block_size tokens, each holding K and V of every layer
   (vllm/v1/core/kv_cache_utils.py: num_blocks = available // page bytes of all layers;
   "GPU KV cache size" = num_blocks x block_size; "Maximum concurrency for L tokens per request"
   = num_blocks / ceil(L / block_size)); a model with window layers shares the pool between
   groups of layers, each window group holding only what its window can read (kv_groups.py).

SGLang (mem_fraction_static) splits the same pool the same way with a different share; the
arithmetic is the same once the share is given as --gpu-memory-utilization.

Speed reuses the estimator's generation model (fitbench.estimate.speed) with the tuned profile:
an engine decodes with CUDA graphs and fused kernels, which is what `--exec tuned` describes.
A decode step reads the weights once for the whole batch and each sequence's own KV cache, so
aggregate throughput climbs almost linearly with concurrency while the weights dominate the bytes
moved, then flattens where the step turns compute-bound or the KV reads take over (the knee).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from fitbench.core.gpu import GpuSpec
from fitbench.core.names import Strategy
from fitbench.core.units import GiB
from fitbench.errors import FitbenchError
from fitbench.estimate import kv_cache, speed, timing
from fitbench.estimate.distributed import tp_weight_bytes
from fitbench.estimate.kv_groups import KvGroups, kv_groups
from fitbench.estimate.profile import get_profile
from fitbench.estimate.weights import weight_bytes
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

BLOCK_SIZE = 16
DEFAULT_CONTEXT = 4096
DEFAULT_UTILIZATION = 0.9
# vLLM's defaults for `vllm serve` (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults):
# cards with 70 GiB or more, except the A100, get the larger budget.
LARGE_CARD_BYTES = 70 * GiB
SERVE_DEFAULTS = {"large": (8192, 1024), "small": (2048, 256)}  # (max_num_batched_tokens, max_num_seqs)
# Bytes the dummy sampler pass holds per logit (vllm/v1/sample/sampler.py with top-p/top-k on,
# as the dummy run sets them): the FP32 logits (4), the sorted copy with its int64 indices (12),
# softmax and cumulative sum of the sorted values (8), the scattered-back probabilities and the
# final softmax (8), log-probabilities (4), the 16-bit logits and the top-p mask (4): 40 bytes.
# Measured "peak activation" of serving runs on an H100 (llm-d config_explorer, vLLM 0.11):
# 4.76 GiB for Llama-3.1-8B and 5.56-5.64 GiB for Qwen3, i.e. 39 bytes per logit at 1024 rows.
SAMPLER_BYTES_PER_LOGIT = 40
# Non-torch memory that appears during profiling (cuBLAS/cuBLASLt workspaces, allocator slack):
# 0.07-0.14 GiB on one GPU in published logs; NCCL's buffers add ~0.4 GiB with tensor
# parallelism (0.54-0.55 GiB at TP=2 on an H100).
NON_TORCH_BYTES = int(0.13 * GiB)
NCCL_BYTES = int(0.4 * GiB)
# vLLM's CUDA-graph estimate ("Estimated CUDA graph memory"): 0.36-0.73 GiB in published logs
# for dense models with the default capture sizes (up to 512).
CUDAGRAPH_BYTES = int(0.6 * GiB)
# Concurrency levels of the throughput curve (then the memory limit itself).
CONCURRENCY_LEVELS = (1, 8, 32, 128, 512, 2048)
# The knee: the first level whose doubling would add less than this share of throughput.
KNEE_GAIN = 1.2


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """The engine's knobs, as `vllm serve` spells them (None: vLLM's default for the card).

    engine  'v1' (vLLM >= 0.21: CUDA graphs counted in the budget, the profile run takes
            max_num_batched_tokens tokens), 'v1-legacy' (V1 before 0.21: graphs not counted) or
            'v0' (the old engine: the profile run takes a whole max_model_len prompt)
    """

    context: int = DEFAULT_CONTEXT
    gpu_memory_utilization: float = DEFAULT_UTILIZATION
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int = BLOCK_SIZE
    engine: str = "v1"

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise FitbenchError(
                "--gpu-memory-utilization must be more than 0 and at most 1, got "
                f"{self.gpu_memory_utilization}",
                "vLLM's default is 0.9",
                message_zh=(
                    f"--gpu-memory-utilization 必须大于 0 且不超过 1,实际为 {self.gpu_memory_utilization}"
                ),
                hint_zh="vLLM 的默认值是 0.9",
            )
        for name in ("context", "block_size"):
            if getattr(self, name) < 1:
                raise FitbenchError(
                    f"--{name.replace('_', '-')} must be a positive integer",
                    message_zh=f"--{name.replace('_', '-')} 必须是正整数",
                )
        if self.engine not in ("v1", "v1-legacy", "v0"):
            raise FitbenchError(
                f"unknown engine '{self.engine}'",
                "use v1, v1-legacy or v0",
                message_zh=f"未知的引擎 '{self.engine}'",
                hint_zh="请使用 v1、v1-legacy 或 v0",
            )

    def batch_defaults(self, total_bytes: int, gpu: GpuSpec) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) as vLLM picks them for this card."""
        large = total_bytes >= LARGE_CARD_BYTES and "a100" not in gpu.id
        tokens, seqs = SERVE_DEFAULTS["large" if large else "small"]
        if self.engine == "v0":  # V0 without chunked prefill: one whole prompt per step
            tokens = max(self.context, 2048)
        return self.max_num_batched_tokens or tokens, self.max_num_seqs or seqs


@dataclass(frozen=True, kw_only=True)
class MemoryPlan:
    """Per-GPU bytes of the engine's budget, in vLLM's order (see the module docstring)."""

    total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_cache_bytes: int
    kv_bytes_per_token: float
    block_size: int
    num_blocks: int
    profile_tokens: int
    max_num_seqs: int
    groups: KvGroups | None = None  # vLLM's hybrid KV groups of a model with window layers
    # A linear-attention model's fixed state per sequence (transformer_cost.
    # linear_state_bytes_per_sequence), on this GPU: vLLM's hybrid allocator gives each running
    # request its state slots from the same pool as the attention layers' blocks.
    state_bytes_per_seq: float = 0.0

    @property
    def kv_tokens(self) -> int:
        """vLLM's "GPU KV cache size": the blocks, split evenly over the KV groups, in tokens."""
        groups = self.groups.groups if self.groups else 1
        return self.num_blocks // groups * self.block_size

    def max_concurrency(self, tokens: int) -> float:
        """Sequences of `tokens` tokens the pool holds at once (vLLM's 'Maximum concurrency')."""
        if not tokens:
            return 0.0
        block_bytes = self.kv_bytes_per_token * self.block_size
        state = self.state_bytes_per_seq / block_bytes if block_bytes else 0.0
        if self.groups is None:
            return self.num_blocks / (math.ceil(tokens / self.block_size) + state)
        blocks = self.groups.blocks_per_request(tokens, self.block_size, self.profile_tokens)
        return self.num_blocks / (blocks + state)


def _serving_workload(workload: Workload, gpu: GpuSpec) -> Workload:
    """The model as an engine loads it: 16-bit weights (bf16 where the card has it) unless the
    weights are quantized; an engine never runs FP32 or autocast."""
    info = workload.precision_info
    if info.quant_bits is not None or info.weight_bytes == 2:
        return workload
    return workload.replace(precision="bf16" if gpu.bf16 else "fp16")


def _weights_per_gpu(workload: Workload, tp: int) -> int:
    """The weights on one GPU as the engine loads them (bitsandbytes MoE experts quantized too)."""
    if tp == 1:
        weights, scales = weight_bytes(workload, engine=True)
        return weights + scales
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    weights, scales = tp_weight_bytes(workload, arch, tp, engine=True)
    return int(weights + scales)


def profile_peak_bytes(workload: Workload, tokens: int, seqs: int, tp: int = 1) -> int:
    """The torch peak of vLLM's profile run on one GPU: the larger of the dummy forward over
    `tokens` tokens and the dummy sampler over `seqs` rows of logits (SAMPLER_BYTES_PER_LOGIT
    each; the sampler sees the full vocabulary on every GPU).

    The forward's widest moment is a block's MLP: its fused gate/up output (2 x intermediate),
    the activated product (1 x intermediate) and three hidden-size buffers (the residual stream,
    the norm's output, the down projection's output) per token. V0 logs, whose profile run is one
    whole prompt, show 110.7-111.1 kB a token for Llama-3.1-8B at 20k and 29k tokens; this
    count gives 110.6 kB."""
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    a = workload.precision_info.activation_bytes
    mlp = (3 if arch.mlp == "swiglu" else 2) * arch.intermediate_size / tp
    forward = tokens * (mlp + 3 * arch.hidden_size) * a
    sampler = seqs * arch.vocab_size * SAMPLER_BYTES_PER_LOGIT
    return int(max(forward, sampler))


def memory_plan(
    workload: Workload,
    gpu: GpuSpec,
    config: ServeConfig,
    *,
    tp: int = 1,
    total_bytes: int | None = None,
    weights_bytes: int | None = None,
    activation_bytes: int | None = None,
) -> MemoryPlan:
    """The engine's budget on one GPU. `total_bytes` defaults to the total CUDA reports for the
    card (the catalog's usable memory); `weights_bytes` to fitbench's count of the weights and
    `activation_bytes` to its profile-run peak (a check against a log passes the logged figures
    to test the parts separately)."""
    total = int(total_bytes if total_bytes is not None else gpu.usable_bytes)
    tokens, seqs = config.batch_defaults(total, gpu)
    weights = int(weights_bytes if weights_bytes is not None else _weights_per_gpu(workload, tp))
    activation = (
        int(activation_bytes)
        if activation_bytes is not None
        else profile_peak_bytes(workload, tokens, seqs, tp)
    )
    non_torch = NON_TORCH_BYTES + (NCCL_BYTES if tp > 1 else 0)
    cudagraph = CUDAGRAPH_BYTES if config.engine == "v1" else 0
    requested = int(config.gpu_memory_utilization * total)
    kv = requested - weights - activation - non_torch - cudagraph
    per_token = kv_cache.kv_cache_bytes_per_token(workload, tp=tp)
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    groups = kv_groups(arch, config.engine)
    # one block holds block_size tokens of every layer, or of one group's layers (kv_groups.py)
    block_layers = groups.layers_per_group / arch.num_layers if groups else 1.0
    blocks = max(0, int(kv // (per_token * block_layers * config.block_size)))
    return MemoryPlan(
        total_bytes=total,
        requested_bytes=requested,
        weights_bytes=weights,
        activation_bytes=activation,
        non_torch_bytes=non_torch,
        cudagraph_bytes=cudagraph,
        kv_cache_bytes=kv,
        kv_bytes_per_token=per_token,
        block_size=config.block_size,
        num_blocks=blocks,
        profile_tokens=tokens,
        max_num_seqs=seqs,
        groups=groups,
        state_bytes_per_seq=kv_cache.linear_state_bytes_per_sequence(workload) / tp,
    )


@dataclass(frozen=True, kw_only=True)
class ConcurrencyPoint:
    """Aggregate decode throughput with `concurrency` sequences decoding together."""

    concurrency: int
    tokens_per_second: float
    per_sequence_tokens_per_second: float
    step_seconds: float
    bottleneck: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "tokens_per_second": self.tokens_per_second,
            "per_sequence_tokens_per_second": self.per_sequence_tokens_per_second,
            "step_seconds": self.step_seconds,
            "bottleneck": self.bottleneck,
        }


@dataclass(frozen=True, kw_only=True)
class ServingEstimate:
    """What a serving engine gives on one card (per GPU figures; throughput for the whole model)."""

    workload: Workload
    gpu: GpuSpec
    config: ServeConfig
    tp: int
    plan: MemoryPlan
    fits: bool
    reason: str
    max_concurrent_sequences: float
    max_concurrent_requests: int
    request_tokens: int
    ttft_seconds: float | None
    curve: tuple[ConcurrencyPoint, ...]
    knee_concurrency: int | None
    knee_reason: str | None
    profile_name: str
    assumptions: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {
            "gpu": self.gpu.id,
            "gpu_name": self.gpu.name,
            "workload": self.workload.name,
            "precision": self.workload.precision,
            "tensor_parallel": self.tp,
            "context": self.config.context,
            "gpu_memory_utilization": self.config.gpu_memory_utilization,
            "block_size": p.block_size,
            "max_num_seqs": p.max_num_seqs,
            "max_num_batched_tokens": p.profile_tokens,
            "engine": self.config.engine,
            "fits": self.fits,
            "reason": self.reason,
            "memory": {
                "total_bytes": p.total_bytes,
                "requested_bytes": p.requested_bytes,
                "weights_bytes": p.weights_bytes,
                "activation_bytes": p.activation_bytes,
                "non_torch_bytes": p.non_torch_bytes,
                "cudagraph_bytes": p.cudagraph_bytes,
                "kv_cache_bytes": max(p.kv_cache_bytes, 0),
            },
            "kv_bytes_per_token": p.kv_bytes_per_token,
            "kv_cache_blocks": p.num_blocks,
            "kv_cache_tokens": p.kv_tokens,
            "max_concurrent_sequences": self.max_concurrent_sequences,
            "request_tokens": self.request_tokens,
            "max_concurrent_requests": self.max_concurrent_requests,
            "prompt_tokens": self.workload.prompt_tokens,
            "ttft_seconds": self.ttft_seconds,
            "throughput": [pt.to_dict() for pt in self.curve],
            "knee_concurrency": self.knee_concurrency,
            "knee_reason": self.knee_reason,
            "speed_profile": self.profile_name,
            "assumptions": list(self.assumptions),
        }


def _tp_of(workload: Workload) -> int:
    if workload.gpus == 1:
        return 1
    if workload.strategy != Strategy.TP:
        raise FitbenchError(
            f"--serve shards a model with tensor parallelism, not {workload.strategy}",
            "use --strategy tp with --gpus N (or one GPU)",
            message_zh=f"--serve 用张量并行切分模型,不支持 {workload.strategy}",
            hint_zh="请使用 --strategy tp 并配合 --gpus N(或只用一块 GPU)",
        )
    return workload.gpus


def _generation(workload: Workload, gpu: GpuSpec, framework: str) -> speed.GenerationTiming:
    """Prefill and decode with the tuned profile (tensor-parallel when the workload is)."""
    return timing.generation(workload, gpu, get_profile(framework, "tuned").as_engine())


def decode_point(workload: Workload, gpu: GpuSpec, c: int, kv_len: int, framework: str) -> ConcurrencyPoint:
    """One decode step of `c` sequences whose caches hold `kv_len` tokens on average."""
    step_workload = workload.replace(batch_size=c, prompt_tokens=max(kv_len, 1), new_tokens=1)
    gen = _generation(step_workload, gpu, framework)
    step = gen.decode.seconds
    tps = c / step if step > 0 else 0.0
    return ConcurrencyPoint(
        concurrency=c,
        tokens_per_second=tps,
        per_sequence_tokens_per_second=tps / c,
        step_seconds=step,
        bottleneck=gen.decode.bottleneck,
    )


def _knee(curve: list[ConcurrencyPoint]) -> tuple[int | None, str | None]:
    """Where more concurrency stops paying: the first compute-bound point, or else the first
    point after which throughput per added sequence falls below KNEE_GAIN per doubling."""
    for pt in curve:
        if pt.bottleneck == "compute":
            return pt.concurrency, "compute"
    for a, b in itertools.pairwise(curve):
        doublings = math.log2(b.concurrency / a.concurrency)
        if doublings > 0 and (b.tokens_per_second / a.tokens_per_second) ** (1 / doublings) < KNEE_GAIN:
            return a.concurrency, "kv-bandwidth"
    return None, None


def serving_estimate(
    workload: Workload, gpu: GpuSpec, config: ServeConfig | None = None, *, framework: str = "torch"
) -> ServingEstimate:
    """KV capacity, concurrency, time to first token and throughput against concurrency."""
    config = config or ServeConfig()
    if not workload.is_generation:
        raise FitbenchError(
            "--serve describes text generation by a decoder",
            "use a decoder preset (e.g. llm-6b) with --mode infer",
            message_zh="--serve 描述的是解码器的文本生成",
            hint_zh="请使用解码器预设(例如 llm-6b)并配合 --mode infer",
        )
    tp = _tp_of(workload)
    w = _serving_workload(workload, gpu)
    plan = memory_plan(w, gpu, config, tp=tp)
    request = (w.prompt_tokens or 1) + (w.new_tokens or 1)
    max_seqs = plan.max_concurrency(config.context)
    fits, reason = True, ""
    if plan.weights_bytes > plan.requested_bytes:
        fits, reason = False, "weights"
    elif plan.num_blocks == 0:
        fits, reason = False, "no-kv-memory"
    elif max_seqs < 1:
        fits, reason = False, "context"
    by_request = int(plan.max_concurrency(min(request, config.context)))
    max_requests = min(by_request, plan.max_num_seqs)
    curve: list[ConcurrencyPoint] = []
    ttft = None
    if fits and max_requests >= 1:
        mean_kv = (w.prompt_tokens or 1) + math.ceil((w.new_tokens or 1) / 2)
        levels = sorted({c for c in CONCURRENCY_LEVELS if c <= max_requests} | {max_requests})
        curve = [decode_point(w, gpu, c, mean_kv, framework) for c in levels]
        gen = _generation(w.replace(batch_size=1), gpu, framework)
        ttft = gen.prefill.seconds + gen.decode.seconds
    knee, knee_reason = _knee(curve)
    assumptions = (
        f"vLLM {config.engine} memory plan: {config.gpu_memory_utilization:.2f} x "
        f"{plan.total_bytes / GiB:.2f} GiB; profile run of {plan.profile_tokens} tokens and "
        f"{plan.max_num_seqs} sampler rows; KV blocks of {config.block_size} tokens",
        f"speed: the {framework} 'tuned' profile, because a serving engine decodes with CUDA graphs and "
        f"fused kernels as that profile was measured; each sequence {w.prompt_tokens} + {w.new_tokens} "
        "tokens, decoding at its mean cache length",
        "time to first token: the prompt's prefill and one decode step, with the engine otherwise idle",
    )
    g = plan.groups
    if g is not None:
        kind = "local-chunk" if g.chunked else "sliding-window"
        assumptions += (
            f"hybrid KV cache (vLLM V1's default since 0.10): {g.full_groups} full and {g.window_groups} "
            f"{kind} groups of {g.layers_per_group} layers share the blocks; a {kind} group keeps "
            f"{g.window} tokens plus one batch of a request (vLLM's --disable-hybrid-kv-cache-manager, or "
            "its V0 engine, holds every layer for the whole request)",
        )
    return ServingEstimate(
        workload=w,
        gpu=gpu,
        config=config,
        tp=tp,
        plan=plan,
        fits=fits,
        reason=reason,
        max_concurrent_sequences=max_seqs,
        max_concurrent_requests=max(max_requests, 0),
        request_tokens=request,
        ttft_seconds=ttft,
        curve=tuple(curve),
        knee_concurrency=knee,
        knee_reason=knee_reason,
        profile_name=f"{framework}.tuned",
        assumptions=assumptions,
    )
