"""The assumptions an estimate states: what the arithmetic took each modelling choice to be.

Why a module of its own: the lines come from every stage (the execution plan, the weights, the
optimizer, the architecture, PEFT, the strategy, the card), so gathering them is a job of its
own beside the API, and each stage's module keeps only the lines about itself.
"""

from __future__ import annotations

from fitbench.core.gpu import GpuSpec
from fitbench.core.names import Framework
from fitbench.core.units import GiB
from fitbench.estimate import distributed, peft
from fitbench.estimate.breakdown import MemoryBreakdown
from fitbench.estimate.execution import sixteen_bit_residual, sixteen_bit_weights, tuned_generation_gaps
from fitbench.estimate.expert_cost import decode_expert_gathers
from fitbench.estimate.matrices import expert_gemms
from fitbench.estimate.optimizer import optimizer_step_scratch
from fitbench.estimate.profile import Profile, host_reference_seconds, host_time_key
from fitbench.estimate.speed import OWN_SHARE_REFERENCE_GPU, Timing, copies_cache_each_step, gemm_rate_factor
from fitbench.estimate.transformer_cost import arch_assumptions
from fitbench.estimate.verdict import TIGHT_MARGIN
from fitbench.estimate.weights import experts_stay_16_bit
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload


def training_assumptions(workload: Workload, framework: str) -> list[str]:
    """What the optimizer step and gradient accumulation are taken to be."""
    scratch = optimizer_step_scratch(workload, framework) / GiB
    if framework == Framework.TORCH:
        lines = [
            f"optimizer: {workload.optimizer} ({workload.optimizer_impl} implementation); "
            f"its step allocates {scratch:.2f} GiB of temporaries beyond its state"
        ]
    else:
        lines = [
            f"optimizer: {workload.optimizer}, updated in place by {framework}'s kernels "
            "(no step temporaries)"
        ]
    if workload.grad_accum > 1:
        lines.append(
            f"gradient accumulation over {workload.grad_accum} micro-batches: every gradient "
            "stays alive through forward and backward; a step is one micro-batch, the "
            f"optimizer runs every {workload.grad_accum}"
        )
    else:
        lines.append(
            "gradients are freed between steps (zero_grad(set_to_none=True)): they exist "
            "only from their backward to the optimizer step"
        )
    return lines


def first_step_assumptions(memory: MemoryBreakdown) -> list[str]:
    """Where the first training step's new segments set the peak nvidia-smi shows (the
    breakdown's details say how much and where from: estimate/first_step.py)."""
    details = memory.details
    beyond = details.get("first_step_segments", 0)
    if not beyond:
        return []
    return [
        "first step: gradients and optimizer tensors larger than the freed activation blocks take new "
        f"allocator segments ({details['first_step_gradient_segments'] / GiB:.2f} GiB in backward, "
        f"{details['first_step_optimizer_segments'] / GiB:.2f} GiB in the first optimizer step), "
        f"{beyond / GiB:.2f} GiB above the later steps' peak: nvidia-smi shows it (the fragmentation "
        "part); the allocator frees it under memory pressure, so the verdict leaves it out"
    ]


def host_bound_assumptions(timing: Timing, profile: Profile, *, generation: bool = False) -> list[str]:
    """A host-bound step's speed is the CPU's: say whose host the estimate's host times describe
    (a generation's decode calls: the typical host, profile.host_reference_seconds)."""
    reference = host_reference_seconds(profile, host_time_key(generation))
    if not timing.host_seconds or timing.host_seconds < timing.gpu_seconds:
        return []  # the GPU's work (or its launch floor) sets the pace
    line = (
        f"host-bound: {timing.host_seconds * 1e3:.2f} ms of Python, dispatch and launch work a step "
        f"against {timing.gpu_seconds * 1e3:.2f} ms of GPU work, so the speed follows the CPU's "
        "single-thread speed"
    )
    if reference:
        line += (
            f"; the host times are those of a host whose probe round (four eager calls) takes "
            f"{reference * 1e6:.0f} us, and a host k times slower runs this step about k times slower "
            "(the hosts of fitbench's stored GPU runs ranged 35-97 us, median 56); `fitbench run` "
            "probes its host and shows the estimate for it"
        )
    return [line]


def storage_assumptions(workload: Workload, gpu: GpuSpec) -> list[str]:
    """Where the precision, the weight format and the KV cache dtype came from, and how the
    quantized matmuls are computed on this card."""
    out = list(workload.origin)
    fmt = workload.weight_format
    if fmt is not None:
        out.append(
            f"weights: {fmt.describe()} from {fmt.source}; embeddings, norms"
            + ("" if fmt.quantize_head else " and the LM head")
            + " stay 16-bit"
            + (f"; kept 16-bit: {', '.join(fmt.skip[:6])}" if fmt.skip else "")
        )
        if fmt.compute in ("fp8", "int8"):
            if gpu.has_rate(fmt.compute):
                out.append(f"{fmt.compute} matmuls run on {gpu.name}'s {fmt.compute} tensor cores")
            else:
                out.append(
                    f"{gpu.name} has no {fmt.compute} tensor cores: prefill expands the weights "
                    f"to {workload.precision} and runs at its rate"
                )
        else:
            out.append(
                "prefill expands the quantized weights to 16 bit before each GEMM; decoding reads "
                "the packed weights and their scales"
            )
    arch = workload.arch
    if fmt is not None and isinstance(arch, TransformerArch) and experts_stay_16_bit(fmt, arch):
        expert_params = (
            arch.num_experts
            * arch.moe_layers
            * sum(fin * fout for _, fin, fout in expert_gemms(arch)["experts"])
        )
        out.append(
            f"weights: bitsandbytes converts nn.Linear modules only and transformers stores the "
            f"{arch.num_experts} routed experts of each MoE layer as stacked 3-D parameters, so they "
            f"stay 16-bit ({expert_params * 2 / GiB:.1f} GiB, bitsandbytes issue #1849); a serving "
            "engine (--serve) quantizes them"
        )
    if workload.kv_cache is not None and not any(o.startswith("KV cache") for o in out):
        out.append(f"KV cache in {workload.kv_cache} (--kv-cache)")
    return out


def estimate_assumptions(workload: Workload, requested: str, gpu: GpuSpec, profile: Profile) -> list[str]:
    """Every line of an estimate's assumptions, in the order a reader meets the stages: the
    execution plan (`requested` is the precision asked for, `workload` the job as run), storage,
    training, the architecture, PEFT, the strategy, then the card."""
    framework, exec_mode = profile.framework, profile.exec_mode
    assumptions = [
        f"{framework} {exec_mode} execution; efficiencies from {profile.provenance or 'profiles.toml'}",
        f"'tight' means less than {TIGHT_MARGIN:.0%} of the {gpu.usable_bytes / GiB:.1f} GiB usable "
        "memory is left",
        f"attention: {workload.attention} "
        f"({'no' if workload.attention == 'fused' else 'a'} score matrix stored)",
    ]
    if workload.precision != requested:
        assumptions.append(f"{exec_mode} runs {workload.precision} where {requested} was asked")
    assumptions.extend(storage_assumptions(workload, gpu))
    if workload.is_training:
        assumptions.extend(training_assumptions(workload, framework))
    if sixteen_bit_weights(workload, workload.precision, exec_mode, framework):
        assumptions.append(
            "tuned training keeps the Linear weights in bf16 with FP32 masters and Adam moments in the "
            "optimizer (Megatron-LM's and DeepSpeed's bf16 recipe): autocast casts none of them, their "
            "gradients are bf16, and the update writes each master's bf16 rounding back; a head tied to "
            "the embedding stays FP32"
        )
    if sixteen_bit_residual(workload, workload.precision, exec_mode, framework):
        assumptions.append(
            "the tuned encoder keeps its residual stream in bf16 between the layers (Megatron-LM's bf16 "
            "recipe; autocast keeps it in FP32): each residual site rounds x + dropout(y) to bf16 and "
            "normalises it in FP32, moving 10 bytes an element each way instead of 16"
        )
    if not workload.is_resnet:
        assumptions.extend(arch_assumptions(workload))
    if workload.is_generation and copies_cache_each_step(workload, profile):
        assumptions.append(
            "generation: each decode step grows every layer's K and V by concatenation (transformers' "
            "DynamicCache, or Paddle's concat), so the whole cache is read and written once more beside "
            "the attention's read"
        )
    arch = workload.arch
    gaps = tuned_generation_gaps(arch) if framework == Framework.TORCH and exec_mode == "tuned" else ""
    if workload.is_generation and gaps:
        assumptions.append(
            f"torch tuned generation runs dense Llama-style decoders and refuses this one ({gaps}): "
            "this is the tuned kernels' arithmetic for a model `fitbench run --exec tuned` will not measure"
        )
    if workload.is_generation and getattr(arch, "is_mla", False) and profile.expands_latent_cache:
        assumptions.append(
            "generation: each decode step re-expands every layer's whole cached latent through "
            "kv_b_proj into per-head keys and values and attends over those (transformers' expand_kv); "
            "MLA-aware engines read the latent only"
        )
    gathers = decode_expert_gathers(workload) if workload.is_generation else (0.0, 0.0)
    if profile.decode_experts_batched and gathers[0]:
        pairs = workload.batch_size * getattr(arch, "experts_per_token", 0)
        assumptions.append(
            "generation: transformers' generate runs each decode step's experts through batched_mm on a "
            f"GPU: each of the {pairs} token-expert pairs copies its expert's weights "
            f"({sum(gathers) / GiB:.2f} GiB a layer, held during the layer) and a batched matmul reads "
            "the copy (each copy written and read, each expert reached read once a launch of the "
            "gather); the prefill runs grouped_mm, and engines' fused MoE kernels read each expert "
            "reached once"
        )
    if workload.peft:
        assumptions.extend(peft.assumptions(workload))
    if workload.gpus > 1:
        assumptions.extend(distributed.assumptions(workload, gpu))
    return assumptions + card_assumptions(workload, gpu, framework)


def card_assumptions(workload: Workload, gpu: GpuSpec, framework: str) -> list[str]:
    """What the card does not do as the job might expect: TF32 left off, no measurement, no BF16."""
    lines = []
    if (
        framework == Framework.TORCH
        and workload.precision_info.compute == "fp32"
        and "tf32" in gpu.peak_flops
    ):
        lines.append(
            f"fp32: matmuls at {gpu.name}'s FP32 peak, not its TF32 tensor cores: PyTorch leaves TF32 off "
            "for matmuls by default (cuDNN convolutions use it); `--precision tf32` estimates it on"
        )
    compute = workload.precision_info.compute
    share = gpu.gemm_share(compute)
    if share is not None and gpu.id != OWN_SHARE_REFERENCE_GPU:
        key = compute if compute in gpu.peak_flops else "fp32"
        lines.append(
            f"{key.upper()} matmuls at {gpu.name}'s published sustained GEMM rate: {share:.2f} of its "
            f"datasheet peak, {gemm_rate_factor(gpu, compute):.2f}x the share on the H200 the "
            "efficiencies were measured on"
        )
    if not gpu.measured:
        lines.append(
            f"{gpu.name}: its framework path has never been measured by fitbench; the "
            "efficiencies are those measured on NVIDIA cards, so this is arithmetic only"
        )
    if not gpu.bf16 and workload.precision_info.compute == "bf16":
        lines.append(f"{gpu.name} has no BF16 tensor cores: bf16 runs at FP32 rates; prefer fp16")
    return lines
