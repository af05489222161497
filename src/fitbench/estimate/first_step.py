"""The first training step's reserve: where gradients and optimizer state find no cached block.

A training step's NVML peak is the caching allocator's reserved peak (plus the CUDA context),
and the reserve is set by the first step, which no later step outgrows by much. The first step
runs in three phases (measured phase by phase with benchmarks/allocator_phases.py):

1. The forward cuts a block for each saved activation; the blocks are as large as the
   activations (a hidden-width tensor, an MLP-width one, the FP32 logits). With activation
   checkpointing a block keeps its input alone: its other tensors are cut and freed, and the
   backward recomputes them into the cache before it frees them again.
2. The backward frees each block's activations as it walks back and allocates the parameters'
   gradients. A gradient larger than every freed block takes a new segment.
3. The first `optimizer.step()` creates Adam's moments (`zeros_like` each parameter) and, with
   foreach, the square-root list (one tensor per parameter) while the whole forward's blocks
   sit freed in the cache. A parameter tensor larger than the blocks left (an MLP matrix of a
   wide model at a small batch, a stacked expert tensor, a large vocabulary's embedding) gets a
   new segment for each of its moments and its square root, and the activation blocks stay
   reserved for the next forward beside them.

The reserve after the first step is then the forward's blocks plus those new segments, gigabytes
above the allocated peak where the parameters are large against the activations (Gemma-2-2B at
batch 2 took 20 GB of new segments for its moments and square roots, Phi-3 17 GB, OLMoE 22 GB). Where the
optimizer's tensors do fit the freed blocks, the next forward takes new blocks instead and the
reserve tracks the allocated peak (estimate.single_device takes the larger of the two).

The blocks are the estimator's own activations, cut into tensors of the widths that produce them
(activation_blocks); the parameter tensors are the matrices transformers builds
(weight_matrices); estimate/allocator.py applies the allocator's rules to both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from fitbench.estimate import transformer_cost
from fitbench.estimate.allocator import LargePool, freed_blocks
from fitbench.estimate.dtypes import ActivationDtypes, activation_dtypes
from fitbench.estimate.optimizer import OPTIMIZER_STATES, optimizer_element_bytes
from fitbench.estimate.segments import Segment
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# The LM loss's FP32 tensors of [tokens, vocab] that are freed blocks when the optimizer runs:
# the upcast logits, their log-softmax and the log-softmax's gradient (measured: three blocks
# of exactly tokens x vocab x 4 bytes for Qwen3, Gemma-3, Llama-3.2 and GPT-2).
LOSS_LOGITS_BLOCKS = 3


@dataclass(frozen=True)
class FirstStep:
    """Bytes of new segments the first step's backward (gradients) and optimizer step take
    beyond the forward's blocks, and the forward's blocks themselves."""

    activation_block_bytes: float
    gradient_segment_bytes: float
    optimizer_segment_bytes: float

    @property
    def reserve_beyond_activations(self) -> float:
        return self.gradient_segment_bytes + self.optimizer_segment_bytes


class Matrix(NamedTuple):
    """A parameter matrix: its elements, whether it is a routed expert's stacked tensor (which
    autocast leaves uncast where the experts run in their weights' dtype), and whether the
    family builds it in FP32 whatever the model's dtype (GLM-4-MoE's router)."""

    elements: int
    expert: bool = False
    fp32: bool = False


# Families whose router weight transformers creates in FP32 (read from the meta-device build).
FP32_ROUTER_WEIGHT_TYPES = ("glm4_moe", "dots1")


def weight_matrices(arch: TransformerArch) -> list[list[Matrix]]:
    """Element counts of the matrices (parameters of two or more dimensions, none of them 1)
    transformers builds, grouped by segment in forward order: the embeddings, each block, the
    head. Vectors (norms, biases, Qwen2-MoE's one-row expert gate) fit the small pool or any
    block and are left out."""
    h, v = arch.hidden_size, arch.vocab_size
    embeddings = [v * h] + ([arch.max_positions * h] if arch.position == "learned" else [])
    if arch.kind == "encoder":
        embeddings.append(max(arch.type_vocab_size, 1) * h)
    fused_qkv, fused_gate_up = transformer_cost.fused_projections(arch)
    attention = [fin * fout for _, fin, fout in arch.attention_linears()]
    if fused_qkv and not arch.is_mla:
        attention = [h * (arch.q_dim + 2 * arch.kv_dim), arch.q_dim * h]

    def ffn(f: int) -> list[int]:
        if arch.mlp != "swiglu":
            return [h * f, f * h]
        return [2 * h * f, f * h] if fused_gate_up else [h * f, h * f, f * h]

    blocks = []
    for i in range(arch.num_layers):
        mats = [Matrix(n) for n in attention]
        if arch.is_moe_layer(i):
            e, fe = arch.num_experts, arch.expert_intermediate_size
            mats.append(Matrix(e * h, fp32=arch.rules_type in FP32_ROUTER_WEIGHT_TYPES))  # the router
            experts = [e * 2 * fe * h, e * fe * h]  # stacked gate_up and down
            if arch.mlp_bias:  # gpt-oss: the stacked experts' biases are matrices too
                experts += [e * 2 * fe, e * h]
            mats += [Matrix(n, expert=True) for n in experts]
            if arch.shared_intermediate_size:
                mats += [Matrix(n) for n in ffn(arch.shared_intermediate_size)]
        else:
            mats += [Matrix(n) for n in ffn(arch.intermediate_size)]
        blocks.append(mats)
    if arch.kind == "encoder":  # pooler and classifier
        head = ([h * h] if arch.pooler else []) + [h * arch.num_labels]
    else:
        head = [] if arch.tie_embeddings else [v * h]
    return [[Matrix(n) for n in embeddings], *blocks, [Matrix(n) for n in head]]


def _layer_blocks(
    arch: TransformerArch, dt: ActivationDtypes, tokens: int, saved: float, moe: bool
) -> list[float]:
    """One block's saved activations as tensors: the MLP's (or the experts') at their width, the
    rest at the hidden width of the residual stream."""
    h = arch.hidden_size
    if moe:
        k, fe = transformer_cost.routed_copies(arch), arch.expert_intermediate_size
        e = 4 if transformer_cost.experts_in_weight_dtype(arch, dt) else dt.act
        wide = [tokens * k * fe * e] * (4 if arch.mlp == "swiglu" else 2) + [tokens * k * h * e] * 2
    else:
        f = arch.intermediate_size
        wide = [tokens * f * dt.act] * (4 if arch.mlp == "swiglu" else 2)
    narrow = tokens * h * max(dt.res, dt.act)
    rest = max(0.0, saved - sum(wide))
    return wide + [narrow] * round(rest / narrow)


def activation_blocks(
    workload: Workload, segments: list[Segment], matrices: list[list[Matrix]]
) -> list[list[float]]:
    """Each segment's tensors that its backward frees: its saved activations, as the tensors the
    forward cut for them, and under autocast the 16-bit copies of its matrices that the matmuls
    saved (not the embeddings, which are looked up; not routed experts that run in their
    weights' dtype; the LM head's even when it is tied to the embedding)."""
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    dt = activation_dtypes(workload, dropout=arch.kind == "encoder")
    tokens = workload.batch_size * (workload.seq_len or workload.tokens_per_sequence)
    cast = workload.precision_info.cast_cache_bytes if dt.amp else 0
    experts_uncast = transformer_cost.experts_in_weight_dtype(arch, dt)
    out: list[list[float]] = []
    for seg, mats in zip(segments, matrices, strict=True):
        copies = [m.elements * cast for m in mats if cast and not (m.expert and experts_uncast)]
        if seg.name.startswith("layer"):
            layer = int(seg.name[len("layer") :])
            blocks = _layer_blocks(arch, dt, tokens, seg.saved_bytes, arch.is_moe_layer(layer)) + copies
        elif seg.name == "head" and arch.kind == "decoder":
            blocks = [tokens * arch.vocab_size * 4.0] * LOSS_LOGITS_BLOCKS
            # and the 16-bit logits' block the forward freed (loss_logits_cached_bytes)
            blocks.append(transformer_cost.loss_logits_cached_bytes(workload))
            blocks += [arch.vocab_size * arch.hidden_size * cast] if cast else []
        elif seg.name == "head":
            blocks = [seg.saved_bytes, *copies]
        else:
            blocks = [seg.saved_bytes]
        out.append([b for b in blocks if b])
    return out


def _applies(workload: Workload, framework: str) -> bool:
    """Full training of a transformer on one GPU through PyTorch's allocator (DDP's buckets and
    the sharded strategies' flat buffers allocate otherwise), every step alike: not LoRA
    (frozen weights, few states), not accumulation (other liveness), not Paddle (another
    allocator), not a vision transformer (patch embeddings outside weight_matrices)."""
    arch = workload.arch
    return (
        framework == "torch"
        and workload.gpus == 1
        and isinstance(arch, TransformerArch)
        and not workload.peft
        and workload.grad_accum == 1
        and not arch.patch_size
    )


def _optimizer_requests(workload: Workload, framework: str, pool: LargePool, sizes: list[int]) -> None:
    """The first optimizer.step()'s allocations, in torch.optim's order: each parameter's state
    (`_init_group`: zeros_like per moment), then the step's temporaries
    (optimizer.optimizer_step_scratch: foreach's square-root list, all alive at once; the
    for-loop's square root and quotient of one tensor, freed before the next)."""
    state_bytes = optimizer_element_bytes(workload, framework)
    states = OPTIMIZER_STATES[workload.optimizer]
    for n in sizes:
        for _ in range(states):
            pool.allocate(n * state_bytes)
    if states < 2 or workload.optimizer_impl == "fused":
        return
    for n in sizes:
        pool.allocate(n * state_bytes)
        if workload.optimizer_impl == "for-loop":
            pool.allocate(n * state_bytes)
            pool.free(n * state_bytes)
            pool.free(n * state_bytes)


def _checkpointed_backward_pool(segments: list[Segment], blocks: list[list[float]]) -> LargePool:
    """The cache a checkpointed step's backward starts from: its forward ran each block without
    keeping its tensors (transformers' gradient checkpointing saves a block's input alone), so
    every block cut and freed the same tensors, and one block's worth of them sits cached; the
    saved inputs and the other segments' tensors are alive. The backward then recomputes each
    block into that cache before it frees it (first_step)."""
    layers = [b for seg, b in zip(segments, blocks, strict=True) if seg.name.startswith("layer")]
    return LargePool(freed_blocks(layers[-1])) if layers else LargePool()


def first_step(workload: Workload, framework: str, segments: list[Segment]) -> FirstStep | None:
    """The first step's new segments beyond the forward's blocks (module docstring); None where
    it does not apply (_applies)."""
    if not _applies(workload, framework):
        return None
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    matrices = weight_matrices(arch)
    if len(matrices) != len(segments):  # a layout the two sides do not share
        return None
    blocks = activation_blocks(workload, segments, matrices)
    grad_bytes = workload.precision_info.grad_bytes
    pool = _checkpointed_backward_pool(segments, blocks) if workload.checkpointing else LargePool()
    # The backward: each segment frees its blocks, then its parameters' gradients appear.
    for seg, seg_blocks, seg_matrices in zip(
        reversed(segments), reversed(blocks), reversed(matrices), strict=True
    ):
        recomputed = workload.checkpointing and seg.name.startswith("layer")
        if recomputed:  # the block's forward runs again, cutting its tensors from the cache
            for block in seg_blocks:
                pool.allocate(block)
        for block in freed_blocks([*seg_blocks, seg.input_bytes] if recomputed else seg_blocks):
            pool.free(block)
        for matrix in reversed(seg_matrices):
            pool.allocate(matrix.elements * grad_bytes)
    gradient_segments = pool.new_segment_bytes
    _optimizer_requests(workload, framework, pool, [m.elements for seg in matrices for m in seg])
    return FirstStep(
        activation_block_bytes=sum(b for seg in blocks for b in seg),
        gradient_segment_bytes=gradient_segments,
        optimizer_segment_bytes=pool.new_segment_bytes - gradient_segments,
    )
