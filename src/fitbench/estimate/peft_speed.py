"""Step time of a LoRA / QLoRA training step.

The frozen matmuls need only the input gradient in backward (2x the forward FLOPs per step
instead of 3x); the adapters add small GEMMs and elementwise passes; QLoRA dequantizes each
weight to 16 bit in forward and again in backward. Why a module of its own: it is the time
model of the adapted job (peft.py holds what the adapters are and store), reading the kernels
of transformer_cost and the roofline of speed.py, and nothing above it.
"""

from __future__ import annotations

import dataclasses

from fitbench.core.gpu import GpuSpec
from fitbench.estimate import expert_cost, transformer_cost
from fitbench.estimate.dtypes import ActivationDtypes, activation_dtypes, keeps_dropout_masks
from fitbench.estimate.matrices import expert_gemms, layer_gemms
from fitbench.estimate.peft import (
    ADAPTER_BYTES,
    DOUBLE_QUANT,
    LORA_ELEMENTWISE_OPS,
    MASK_BYTES,
    NF4_BITS,
    NF4_CONSTANT_BITS,
    adapted_arch,
    expert_adapters,
    lora_dropout,
    lora_linears,
    peft_bytes,
    trainable_bytes,
    trainable_param_count,
    trainable_tensor_count,
)
from fitbench.estimate.profile import Profile
from fitbench.estimate.segments import Kernel
from fitbench.estimate.speed import (
    BACKWARD_HOST_SHARE,
    FOREACH_OPTIMIZER_OPS,
    FUSED_OPTIMIZER_OPS,
    FUSED_OPTIMIZER_PASSES,
    OPTIMIZER_PASSES,
    STEP_FIXED_OPS,
    Timing,
    as_compiled,
    backward_kernels,
    grad_scaler_waits,
    gradient_accumulation_kernels,
    in_sequence,
    overlapped_seconds,
    recomputation,
    time_kernels,
    unscale_kernel,
)
from fitbench.workloads.arch import expected_distinct_experts
from fitbench.workloads.workload import Workload

# Backward host work, as the autograd nodes backward executes per block (benchmarks/lora_ops.py,
# real Qwen2 and Llama blocks through the torch backend's session): a trained block 84 (Qwen2:
# q/k/v biases) or 81 (Llama), 82.5 between them, for the 48 forward operations the estimator
# counts (transformer_cost); its BACKWARD_HOST_SHARE of those, 24, is 0.29 of an operation per
# node. A frozen block executes 65 nodes (no AccumulateGrad, no transposed weight's TBackward:
# a frozen Linear computes only its input gradient); each adapted Linear adds 15 (the casts,
# dropout, A, B, scaling and add with their views, and A's and B's AccumulateGrad) for its 6
# forward operations. At 0.29 of an operation per node:
TRAINED_BLOCK_NODES = 82.5
FROZEN_BLOCK_NODES = 65.0
BLOCK_FORWARD_OPS = 48.0
LORA_LINEAR_NODES = 15.0
# 0.394 of a forward operation for the frozen base's backward (full training: 0.5) ...
FROZEN_BACKWARD_SHARE = BACKWARD_HOST_SHARE * FROZEN_BLOCK_NODES / TRAINED_BLOCK_NODES
# ... and 0.727 for the adapters' (2.5 nodes per forward operation against a block's 1.72).
LORA_BACKWARD_SHARE = (
    BACKWARD_HOST_SHARE
    * (LORA_LINEAR_NODES / (2 + LORA_ELEMENTWISE_OPS))
    / (TRAINED_BLOCK_NODES / BLOCK_FORWARD_OPS)
)


# -- kernels ------------------------------------------------------------------------------------
def _frozen_backward(forward: list[Kernel], norm_weight_gradient_bytes: float = 0.0) -> list[Kernel]:
    """Backward of the base forward with frozen weights: full training's backward
    (speed.backward_kernels: the family modules' backward bytes and FLOPs where they counted them, else
    the kinds' multiples) less what a frozen weight does not compute.

    Matmuls of frozen weights compute only the input gradient: as many FLOPs and bytes as their
    forward (full training: 2x, the weight gradient being the other product). An encoder's
    classifier (trained) keeps 2x. The frozen embeddings have no backward at all, and of a frozen
    Linear's autocast casts only the input's is cast back in backward. The blocks' elementwise
    backward leaves out `norm_weight_gradient_bytes` (the step's, over every block: the frozen
    norms' weight gradients, transformer_cost.norm_weight_gradient_bytes_per_token). The host
    issues FROZEN_BACKWARD_SHARE of a forward operation per operation (fewer autograd nodes than
    full training's BACKWARD_HOST_SHARE); the trained classifier keeps the latter.
    """
    out = []
    for k, trained in zip(forward, backward_kernels(forward), strict=True):
        if k.name == "embedding":
            continue
        if k.kind == "matmul" and k.name != "classifier":
            # the input gradient alone: the forward's product, launches and fallback again
            input_casts = float(transformer_cost.input_casts(k.name))
            casts = input_casts if k.cast_ops else 0.0
            fallback = input_casts if k.fallback_cast_ops else k.fallback_cast_ops
            out.append(
                dataclasses.replace(
                    k,
                    name=trained.name,
                    ops=k.ops * FROZEN_BACKWARD_SHARE,
                    cast_ops=casts,
                    fallback_cast_ops=fallback,
                )
            )
            continue
        nbytes = trained.bytes
        if k.name == "elementwise" and k.count:
            nbytes = max(0.0, nbytes - norm_weight_gradient_bytes / k.count)
        share = BACKWARD_HOST_SHARE if k.name == "classifier" else FROZEN_BACKWARD_SHARE
        out.append(
            dataclasses.replace(trained, bytes=nbytes, ops=k.ops * share, tensor_ops=k.tensor_ops * share)
        )
    return out


def lora_kernels(workload: Workload, *, fused: bool = False) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of the adapter branches over one step's tokens.

    Forward per adapted Linear: A (2*T*in*r FLOPs), B (2*T*r*out) and the elementwise passes
    around them (_adapter_passes); the passes that mix 16-bit and FP32 tensors are a kernel of
    their own (`lora.<name>.casts`, Kernel.mixed_dtypes: PyTorch's converting loops). Backward:
    A and B each compute an input and a weight gradient (2x), the elementwise passes move what
    autograd's nodes for them move (_adapter_passes: about as much as the forward, not twice);
    the host issues LORA_BACKWARD_SHARE of a forward operation per operation (the nodes autograd
    executes).

    `fused` (a compiled step: Profile.fuses_pointwise): the passes before A become one kernel
    that reads the input and writes the dropped FP32 copy A reads and its mask, and the passes
    after B one that reads B's output and the base output and writes their sum at the
    activation width; their backward moves twice that.
    """
    arch = adapted_arch(workload)
    dt = activation_dtypes(workload, dropout=keeps_dropout_masks(arch))
    b = peft_bytes(workload)
    tokens = workload.batch_size * (workload.seq_len or 1)
    r = workload.lora_rank
    lb = b.lora
    dropped = lora_dropout(workload) > 0
    mask = MASK_BYTES if dropped else 0
    L = arch.num_layers
    fwd: list[Kernel] = []
    for name, fin, fout in lora_linears(workload):
        fwd += adapter_gemms(name, fin, fout, r, tokens, lb, count=L)
        passes = _adapter_passes(name, fin, fout, dt, lb, mask, fused=fused)
        fwd.append(
            Kernel(
                name=f"lora.{name}.elementwise",
                kind="memory",
                flops=0.0,
                bytes=tokens * passes.forward,
                backward_bytes=tokens * passes.backward,
                count=L,
                ops=LORA_ELEMENTWISE_OPS,
                launches=2.0 if fused else None,
            )
        )
        if passes.forward_mixed or passes.backward_mixed:
            # the same operations' converting passes: no host operation or launch of their own
            fwd.append(
                Kernel(
                    name=f"lora.{name}.casts",
                    kind="memory",
                    flops=0.0,
                    bytes=tokens * passes.forward_mixed,
                    backward_bytes=tokens * passes.backward_mixed,
                    count=L,
                    ops=0.0,
                    launches=0.0,
                    mixed_dtypes=True,
                )
            )
    bwd = [
        dataclasses.replace(
            k,
            name=k.name + ".backward",
            flops=k.flops * 2.0,
            bytes=k.bytes * 2.0 if k.backward_bytes is None else k.backward_bytes,
            backward_bytes=None,
            ops=k.ops * LORA_BACKWARD_SHARE,
        )
        for k in fwd
    ]
    return fwd, bwd


def adapter_gemms(
    name: str, fin: int, fout: int, rank: int, tokens: int, act_bytes: float, *, count: int = 1
) -> list[Kernel]:
    """The forward products of one adapted Linear over `tokens` tokens: A (fin -> rank) and B
    (rank -> fout), reading and writing activations of `act_bytes` (FP32 adapters: 4; autocast:
    16 bit) and the FP32 adapter weights."""
    w = ADAPTER_BYTES
    return [
        Kernel(
            name=f"lora.{name}.A",
            kind="matmul",
            flops=2.0 * tokens * fin * rank,
            bytes=tokens * (fin + rank) * act_bytes + fin * rank * w,
            count=count,
        ),
        Kernel(
            name=f"lora.{name}.B",
            kind="matmul",
            flops=2.0 * tokens * rank * fout,
            bytes=tokens * (rank + fout) * act_bytes + rank * fout * w,
            count=count,
        ),
    ]


# The adapted Linears whose input is a norm's output: FP32 under autocast (the residual stream's
# dtype); the others take the attention's or the MLP's 16-bit output.
NORM_FED_ADAPTERS = frozenset({"q", "k", "v", "qkv", "gate", "up", "gate_up", "fc1"})


@dataclasses.dataclass(frozen=True)
class AdapterPasses:
    """Bytes per token of one adapted Linear's elementwise passes around A and B, forward and
    backward, each split into passes over one dtype and passes that mix 16-bit and FP32 tensors
    (casts, a 16-bit tensor added to an FP32 one)."""

    forward: float
    forward_mixed: float
    backward: float
    backward_mixed: float

    @property
    def forward_total(self) -> float:
        return self.forward + self.forward_mixed

    @property
    def backward_total(self) -> float:
        return self.backward + self.backward_mixed


def _adapter_passes(
    name: str, fin: int, fout: int, dt: ActivationDtypes, lb: float, mask: float, *, fused: bool
) -> AdapterPasses:
    """The elementwise passes of one adapted Linear per token, as peft's lora.Linear.forward runs
    them (`x = self._cast_input_dtype(x, lora_A.weight.dtype)`,
    `result + lora_B(lora_A(dropout(x))) * scaling`, `result.to(torch_result_dtype)`) and as
    autograd runs their nodes backward; `mask` is the dropout mask's bytes an element, 0 without
    dropout (fused dropout: read, write, mask; its backward reads the gradient and the mask).

    FP32 adapters beside a 16-bit base (a = the activations' bytes): forward, the input cast to
    FP32, dropout, an FP32 scaling, an add that promotes to FP32 and the cast back; backward, the
    cast back's and the add's gradients cast (the base output's gradient back to 16 bit), the
    scaling's product, dropout's, the input cast's, and the input gradient added to the base
    Linear's (16-bit). Under autocast the base is FP32: a norm-fed input is FP32 already (no cast),
    the others are cast; autocast casts dropout's output to 16 bit for A, and the products, the
    scaling and the add stay 16-bit, with nothing to cast back; backward, the scaling's product,
    the gradient of autocast's cast (16 to 32 bit), dropout's, the input cast's where there is one,
    and the input gradient added to the base's (FP32 for a norm-fed input). An FP32 step casts
    nothing. Held against every operator of real peft layers by tests/backends/test_lora_pass_
    bytes.py, and of whole LoRA blocks on the meta device (CUDA's autocast lists): the backward
    moves 0.8-1.0x the forward's bytes, where it had been counted at 2x.

    Compiled (`fused`): one kernel before A (its input, the dropped copy and the mask), one after
    B (its output and the base's, the sum); the backward twice that."""
    a = dt.act
    if fused:
        forward = fin * (a + 4 + mask) + fout * (lb + 2 * a)
        return AdapterPasses(forward, 0.0, 2.0 * forward, 0.0)
    drop = fin * (4 + 4 + mask) if mask else 0.0
    if dt.amp:
        cast_in = 0.0 if name in NORM_FED_ADAPTERS else fin * (a + 4)
        add_input_gradient = fin * 12 if name in NORM_FED_ADAPTERS else fin * 3 * a
        return AdapterPasses(
            forward=drop + fout * 2 * a + fout * 3 * a,
            forward_mixed=cast_in + fin * (4 + a),
            backward=drop + fout * 2 * a + add_input_gradient,
            backward_mixed=fin * (a + 4) + cast_in,
        )
    if a == 4:  # FP32 base and adapters: no casts
        return AdapterPasses(drop + fout * 8 + fout * 12, 0.0, drop + fout * 8 + fin * 12, 0.0)
    return AdapterPasses(
        forward=drop + fout * 8,
        forward_mixed=fin * (a + 4) + fout * (a + 4 + 4) + fout * (4 + a),
        backward=drop + fout * 8 + fin * 3 * a,
        backward_mixed=fout * (a + 4) + fout * (4 + a) + fin * (4 + a),
    )


# Times peft evaluates a stacked-expert parametrization per forward: ParamWrapper registers it
# (torch.nn.utils.parametrize.register_parametrization, not unsafe: ParametrizationList evaluates
# it once to check its dtype and shape) and the forward reads it once under parametrize.cached()
# (peft 0.21.2 tuners/lora/layer.py ParamWrapper._activate_lora). An H100 profile of Qwen3-30B-A3B
# LoRA (kernel-classes-moe-lora-h100-2026-12-06.json) ran 16 baddbmm a step for 4 layers of two
# stacks.
PARAMETRIZATION_EVALUATIONS = 2


def expert_adapter_kernels(workload: Workload) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of the adapted stacked experts of every MoE block
    (peft.expert_adapters), in the base weights' dtype. Forward: the fold W + B·A into a new
    stack (peft's _LoraFactorsProxy: a baddbmm of rank K over all experts, which first copies W
    into its output and then accumulates the product there: the stack read and written twice),
    PARAMETRIZATION_EVALUATIONS times. Backward: the
    grouped product now computes the merged stack's weight gradient (a full fine-tune's expert
    weight-gradient FLOPs for the routed tokens, writing a gradient the stack's size), which two
    batched GEMMs of rank K read back for A's and B's gradients.

    Under autocast all of it runs in FP32 at the FP32 rate: the base weights are the FP32 master
    weights, peft folds them outside autocast (`torch.autocast(enabled=False)`), and the grouped
    product takes the FP32 merged stack as it is (expert_cost.experts_in_weight_dtype), its
    weight gradient one mm per expert with tokens (grouped_mm's fallback: torch's grouped kernel
    takes bf16 only)."""
    stacks = expert_adapters(workload)
    if not stacks:
        return [], []
    arch = adapted_arch(workload)
    base = peft_bytes(workload).base
    e, n = arch.num_experts, arch.moe_layers
    tokens = workload.batch_size * (workload.seq_len or 1)
    routed = tokens * arch.experts_per_token
    dt = activation_dtypes(workload, dropout=False)
    fp32 = expert_cost.experts_in_weight_dtype(arch, dt) or workload.precision_info.compute == "fp32"
    compute = "fp32" if fp32 else ""
    per_expert = expected_distinct_experts(e, arch.experts_per_token, tokens) if fp32 else None
    fwd, bwd = [], []
    for name, fin, fout, rank in stacks:
        stack = e * fin * fout
        merge = Kernel(
            name=f"lora.{name}.merge",
            kind="matmul",
            flops=2.0 * stack * rank,
            bytes=2.0 * stack * base,
            count=n,
            ops=2.0,
            compute=compute,
        )
        # the copy of W into the output (a device-to-device copy), then the product accumulated
        fold = dataclasses.replace(merge, bytes=4.0 * stack * base, launches=2.0)
        fwd.append(dataclasses.replace(fold, count=n * PARAMETRIZATION_EVALUATIONS))
        bwd.append(
            Kernel(
                name=f"lora.{name}.weight_gradient",
                kind="matmul",
                flops=2.0 * routed * fin * fout,
                bytes=routed * (fin + fout) * base + stack * base,
                count=n,
                ops=1.0,
                grouped=True,  # the grouped product's weight gradient, a few hundred rows an expert
                compute=compute,
                launches=per_expert,
            )
        )
        # A's and B's gradients: two GEMMs of the merge's shape, each reading the stack's gradient
        bwd.append(dataclasses.replace(merge, name=f"lora.{name}.factor_gradients", flops=2.0 * merge.flops))
    return fwd, bwd


def dequant_kernels(workload: Workload) -> list[Kernel]:
    """QLoRA: one pass of dequantization over every block Linear (read NF4 and its constants,
    write the 16-bit weight that the following GEMM reads; that read is in forward_kernels)."""
    if workload.peft != "qlora":
        return []
    arch = adapted_arch(workload)
    b = peft_bytes(workload)
    consts = NF4_CONSTANT_BITS[DOUBLE_QUANT] / 8
    # the block Linears bitsandbytes converts: attention in every block, the MLP in dense blocks,
    # a MoE block's shared experts (its routed experts are stacked parameters, left 16-bit)
    mats = layer_gemms(arch)
    if arch.is_moe:
        mats += [(name, fin, fout, arch.moe_layers) for name, fin, fout in expert_gemms(arch)["shared"]]
    return [
        Kernel(
            name=f"dequant.{name}",
            kind="memory",
            flops=0.0,
            bytes=fin * fout * (NF4_BITS / 8 + consts + b.compute),
            count=count,
            ops=2.0,
        )
        for name, fin, fout, count in mats
        if count
    ]


def optimizer_kernels(workload: Workload) -> list[Kernel]:
    """The optimizer over the trainable parameters only (speed.optimizer_kernels' passes per
    implementation, once every grad_accum micro-batches)."""
    fused = workload.optimizer_impl == "fused"
    passes = (FUSED_OPTIMIZER_PASSES if fused else OPTIMIZER_PASSES)[workload.optimizer]
    ops = FUSED_OPTIMIZER_OPS if fused else FOREACH_OPTIMIZER_OPS
    share = 1.0 / workload.grad_accum
    update = Kernel(
        name="optimizer",
        kind="memory",
        flops=0.0,
        bytes=passes * trainable_bytes(workload) * share,
        count=1,
        ops=ops * share,
    )
    adds = gradient_accumulation_kernels(
        workload, gradient_bytes=trainable_bytes(workload), tensors=trainable_tensor_count(workload)
    )
    return [update, *adds]


def _add(t1: Timing, t2: Timing, profile: Profile) -> Timing:
    """Two parts of one step: GPU and host times add; the step is the longer of the two plus the
    share of the shorter that does not overlap (speed.time_kernels' rule)."""
    gpu = t1.gpu_seconds + t2.gpu_seconds
    host = t1.host_seconds + t2.host_seconds
    return Timing(
        seconds=overlapped_seconds(gpu, host, profile.overlap_loss),
        gpu_seconds=gpu,
        host_seconds=host,
        compute_seconds=t1.compute_seconds + t2.compute_seconds,
        memory_seconds=t1.memory_seconds + t2.memory_seconds,
        floor_seconds=t1.floor_seconds + t2.floor_seconds,
        flops=t1.flops + t2.flops,
        bytes=t1.bytes + t2.bytes,
    )


def step_kernels(workload: Workload, profile: Profile) -> tuple[list[Kernel], list[Kernel]]:
    """(base, adapters): the kernels of one LoRA/QLoRA step.

    Base: forward + input-gradient-only backward (+ the blocks' forward again with checkpointing:
    transformer_cost.recomputed_kernels), at the
    workload's compute precision; QLoRA's dequantization pass per weight in every forward and
    backward; adapted stacked experts' merge and gradients. Adapters: their GEMMs and elementwise
    passes, forward, backward and recomputed, timed as adapter_workload (the optimizer apart);
    FP32 adapter products (no autocast) stream at fp32_adapter_gemm_stream_share."""
    adapted_arch(workload)
    fwd = as_compiled(
        transformer_cost.forward_kernels(
            workload,
            workload.batch_size,
            workload.seq_len or 1,
            all_experts=profile.runs_all_experts,
            release=profile.transformers_version,
        ),
        profile,
    )
    norm_gradients = 0.0
    if not profile.fuses_pointwise:  # a compiled backward: the fused kernels' own bytes
        arch = adapted_arch(workload)
        dt = activation_dtypes(workload, dropout=keeps_dropout_masks(arch))
        tokens = workload.batch_size * (workload.seq_len or 1)
        per_token = transformer_cost.norm_weight_gradient_bytes_per_token(arch, dt)
        norm_gradients = tokens * arch.num_layers * per_token
    base = fwd + _frozen_backward(fwd, norm_gradients)
    passes = 2
    if workload.checkpointing:
        base += recomputation(fwd, workload, profile)
        passes += 1
    base += [dataclasses.replace(k, count=k.count * passes) for k in dequant_kernels(workload)]
    merge, expert_backward = expert_adapter_kernels(workload)
    base += merge * (passes - 1) + expert_backward
    lora_fwd, lora_bwd = lora_kernels(workload, fused=profile.fuses_pointwise)
    if not workload.precision_info.amp:  # peft's FP32 adapters: SIMT products at their share
        share = profile.fp32_adapter_gemm_stream_share
        lora_fwd, lora_bwd = (
            [dataclasses.replace(k, stream_share=share) if k.kind == "matmul" else k for k in ks]
            for ks in (lora_fwd, lora_bwd)
        )
    again = recomputation(lora_fwd, workload, profile) if workload.checkpointing else []
    return base, lora_fwd + lora_bwd + again


def adapter_workload(workload: Workload) -> Workload:
    """The workload the adapters and their optimizer are timed as: peft computes the FP32
    adapters in FP32; autocast runs them in 16 bit."""
    return workload if workload.precision_info.amp else dataclasses.replace(workload, precision="fp32")


def training_step(workload: Workload, gpu: GpuSpec, profile: Profile) -> Timing:
    """One LoRA/QLoRA training step: step_kernels' base at the workload's precision, its adapters
    and the optimizer over the trainable parameters only at adapter_workload's."""
    base, adapters = step_kernels(workload, profile)
    main = time_kernels(
        base,
        workload,
        gpu,
        profile,
        host_seconds_per_op=profile.host_seconds_per_op,
        fixed_ops=STEP_FIXED_OPS,
    )
    fp32 = adapter_workload(workload)
    # The adapters' operations cost the host a share of a reference operation (profiles.toml
    # adapter_host_share); the optimizer's foreach launches are reference operations.
    adapted = time_kernels(
        adapters,
        fp32,
        gpu,
        profile,
        host_seconds_per_op=profile.host_seconds_per_op * profile.adapter_host_share,
    )
    optimizer = time_kernels(
        optimizer_kernels(workload), fp32, gpu, profile, host_seconds_per_op=profile.host_seconds_per_op
    )
    if grad_scaler_waits(workload, profile):
        # GradScaler unscales the adapters' gradients, reads its inf check, then steps.
        unscale = time_kernels(
            [unscale_kernel(workload, trainable_param_count(workload))],
            fp32,
            gpu,
            profile,
            host_seconds_per_op=profile.host_seconds_per_op,
        )
        return in_sequence(_add(_add(main, adapted, profile), unscale, profile), optimizer)
    return _add(main, _add(adapted, optimizer, profile), profile)
