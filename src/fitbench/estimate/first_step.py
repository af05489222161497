"""The first two training steps' reserve: their allocations replayed through the allocator.

A training step's NVML peak is the caching allocator's reserved peak (plus the CUDA context),
and the reserve is set by the first two steps, which no later step outgrows. The first step
runs in three phases (measured phase by phase with benchmarks/allocator_phases.py):

1. The forward cuts a block for each saved activation; the blocks are as large as the
   activations (a hidden-width tensor, an MLP-width one). With activation checkpointing a
   block keeps its input alone: its other tensors are cut and freed, and the backward
   recomputes them into the cache before it frees them again. The LM loss allocates the
   16-bit logits, their FP32 copy and log_softmax's output, and drops the first two.
2. The backward allocates the loss's two FP32 gradients (three FP32 blocks at once: the
   allocated peak of a large vocabulary), frees each block's activations as it walks back and
   allocates the parameters' gradients. A gradient larger than every freed block takes a new
   segment.
3. The first `optimizer.step()` creates Adam's moments (`zeros_like` each parameter) and, with
   foreach, the square-root list (one tensor per parameter) while the whole forward's blocks
   sit freed in the cache. A parameter tensor larger than the blocks left (an MLP matrix of a
   wide model at a small batch, a stacked expert tensor, a large vocabulary's embedding) gets a
   new segment for each of its moments and its square root (Gemma-2-2B at batch 2 took 20 GB of
   new segments for its moments and square roots, Phi-3 17 GB, OLMoE 22 GB).

The second step (zero_grad frees the gradients) then runs the same forward and backward in
what the first left: where the moments were carved out of the forward's blocks, the blocks they
took (the loss's FP32 blocks first: the largest) come back as new segments, and the pieces the
moments left stay cached beside them. On the meta-device trace (benchmarks/training_replay.py,
which matches measured reserves within a few per cent) Llama-3.2-3B's second step took three
new 1 GB logits blocks at batch 2.

So the replay (_StepReplay) runs both steps through estimate/allocator.py's SegmentedPool:
the blocks are the estimator's own activations, cut into tensors of the widths that produce
them (activation_blocks); the parameter tensors are the matrices transformers builds
(weight_matrices); a tied head's weight, made and freed at load, is a cached block from the
start. Its peak reserve, less the allocated peak, is what the breakdown's fragmentation holds
(single_device). What it leaves out: each block's transient tensors, the activation gradients,
autocast's 16-bit weight gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from fitbench.estimate import expert_cost, transformer_cost
from fitbench.estimate.allocator import SegmentedPool
from fitbench.estimate.dtypes import ActivationDtypes, activation_dtypes, keeps_dropout_masks
from fitbench.estimate.optimizer import OPTIMIZER_STATES, optimizer_element_bytes
from fitbench.estimate.segments import Segment
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload


@dataclass(frozen=True)
class FirstStep:
    """The replay's account: the forward's blocks, the new segments the first step's backward
    (gradients) and optimizer step take beyond them, the second step's beyond those, and the
    most the two steps reserve (the weights not included)."""

    activation_block_bytes: float
    gradient_segment_bytes: float
    optimizer_segment_bytes: float
    second_step_segment_bytes: float = 0.0
    peak_reserved_bytes: float = 0.0


class Matrix(NamedTuple):
    """A parameter matrix: its elements, whether it is a routed expert's stacked tensor (which
    autocast leaves uncast where the experts run in their weights' dtype), and whether the
    family builds it in FP32 whatever the model's dtype (GLM-4-MoE's router)."""

    elements: int
    expert: bool = False
    fp32: bool = False


# Families whose router weight transformers creates in FP32 (read from the meta-device build).
FP32_ROUTER_WEIGHT_TYPES = ("glm4_moe", "solar_open", "exaone_moe", "dots1")


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

    # a linear-attention block's projections (its depthwise convolution is (channels, 1, width))
    linear = [fin * fout for _, fin, fout in arch.linear_attention_linears()]
    if arch.linear_layers and arch.rules_type == "qwen3_next":  # in_proj_qkvz and in_proj_ba fused
        h, heads, values = arch.hidden_size, arch.linear_value_heads, arch.linear_value_dim
        linear = [h * (arch.linear_conv_dim + values), h * 2 * heads, values * h]
    blocks = []
    for i in range(arch.num_layers):
        mats = [Matrix(n) for n in (linear if arch.is_linear_attention_layer(i) else attention)]
        if arch.is_mlp_free_layer(i):
            pass  # a mixer without an MLP (Nemotron-H)
        elif arch.is_moe_layer(i):
            e, fe = arch.num_experts, arch.expert_intermediate_size
            mats.append(Matrix(e * h, fp32=arch.rules_type in FP32_ROUTER_WEIGHT_TYPES))  # the router
            up = 2 if arch.mlp == "swiglu" else 1  # stacked gate_up, or up alone (Nemotron-H)
            experts = [e * up * fe * h, e * fe * h]  # and down
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
    arch: TransformerArch, dt: ActivationDtypes, tokens: int, saved: float, moe: bool, scores: float = 0.0
) -> list[float]:
    """One block's saved activations as tensors: eager attention's score matrices (`scores`
    elements each: transformer_cost.eager_saved_score_bytes), the MLP's (or the experts') at
    their width, the rest at the hidden width of the residual stream."""
    h = arch.hidden_size
    if moe:
        k, fe = expert_cost.routed_copies(arch), arch.expert_intermediate_size
        e = 4 if expert_cost.experts_in_weight_dtype(arch, dt) else dt.act
        wide = [tokens * k * fe * e] * (4 if arch.mlp == "swiglu" else 2) + [tokens * k * h * e] * 2
    else:
        f = arch.intermediate_size
        wide = [tokens * f * dt.act] * (4 if arch.mlp == "swiglu" else 2)
    if scores:
        wide += [scores * b for b in transformer_cost.eager_saved_score_bytes(arch, dt)]
    narrow = tokens * h * max(dt.res, dt.act)
    rest = max(0.0, saved - sum(wide))
    return wide + [narrow] * round(rest / narrow)


def activation_blocks(
    workload: Workload,
    segments: list[Segment],
    matrices: list[list[Matrix]],
    *,
    compiled: bool = False,
    merged: list[list[float]] | None = None,
) -> list[list[float]]:
    """Each segment's tensors that its backward frees: its saved activations, as the tensors the
    forward cut for them, and under autocast the 16-bit copies of its matrices that the matmuls
    saved (not the embeddings, which are looked up; not routed experts that run in their
    weights' dtype; the LM head's even when it is tied to the embedding). `merged`: per segment,
    LoRA's merged expert stacks (peft.merged_expert_bytes), part of its saved bytes, last in its
    list at their own sizes."""
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    dt = activation_dtypes(workload, dropout=keeps_dropout_masks(arch))
    seq = workload.seq_len or workload.tokens_per_sequence
    tokens = workload.batch_size * seq
    cast = workload.precision_info.cast_cache_bytes if dt.amp else 0
    experts_uncast = expert_cost.experts_in_weight_dtype(arch, dt)
    # eager attention's score matrices, [batch, heads, seq, seq] (decoders and encoders alike)
    scores = tokens * arch.num_heads * seq if workload.attention == "eager" else 0.0
    out: list[list[float]] = []
    for i, (seg, mats) in enumerate(zip(segments, matrices, strict=True)):
        copies = [m.elements * cast for m in mats if cast and not (m.expert and experts_uncast)]
        if seg.name.startswith("layer"):
            layer = int(seg.name[len("layer") :])
            stacks = merged[i] if merged else []
            saved = seg.saved_bytes - sum(stacks)
            blocks = (
                _layer_blocks(arch, dt, tokens, saved, arch.is_moe_layer(layer), scores) + copies + stacks
            )
        elif seg.name == "head" and arch.kind == "decoder" and not compiled:
            # the LM head's 16-bit weight copy; the loss's tensors are _StepReplay's sequence
            blocks = [arch.vocab_size * arch.hidden_size * cast] if cast else []
        elif seg.name == "head":
            blocks = [seg.saved_bytes, *copies]
        else:
            blocks = [seg.saved_bytes]
        out.append([b for b in blocks if b])
    return out


def _applies(workload: Workload, framework: str) -> bool:
    """Full or LoRA training of a transformer on one GPU through PyTorch's allocator (DDP's
    buckets and the sharded strategies' flat buffers allocate otherwise), every step alike: not
    QLoRA (bitsandbytes dequantizes each weight into a transient block the replay does not
    lay out), not accumulation (other liveness), not Paddle (another allocator), not a vision
    transformer (patch embeddings outside weight_matrices)."""
    arch = workload.arch
    return (
        framework == "torch"
        and workload.gpus == 1
        and isinstance(arch, TransformerArch)
        and workload.peft in (None, "lora")
        and workload.grad_accum == 1
        and not arch.patch_size
    )


class _StepReplay:
    """Two training steps' large allocations through the allocator's segments (SegmentedPool):
    the forward's blocks, the LM loss's sequence, the backward's gradients, the first optimizer
    step's states and scratch, zero_grad, then the same step again. Each phase's new segments
    are recorded."""

    def __init__(
        self,
        workload: Workload,
        framework: str,
        segments: list[Segment],
        compiled: bool,
        adapters: list[list[Matrix]] | None = None,
        adapter_bytes: int = 4,
        merged: list[list[float]] | None = None,
        sixteen_bit: bool = False,
    ) -> None:
        arch = workload.arch
        assert isinstance(arch, TransformerArch)
        self.workload, self.segments = workload, segments
        self.matrices = weight_matrices(arch)
        self.blocks = activation_blocks(workload, segments, self.matrices, compiled=compiled, merged=merged)
        self.stacks = [len(m) for m in merged] if merged else [0] * len(segments)
        # what has gradients and moments: every matrix, or under LoRA the adapters' A and B (in
        # their own dtype; the base frozen)
        self.trainable = self.matrices
        self.grad_bytes = workload.precision_info.grad_bytes
        self.state_bytes = optimizer_element_bytes(workload, framework)
        if adapters is not None:
            self.trainable = adapters
            self.grad_bytes = self.state_bytes = adapter_bytes
        self.pool = SegmentedPool()
        # a step keeping its Linear weights in 16 bit (execution.sixteen_bit_weights): every
        # matrix past the embeddings is a Linear's, its gradient 16-bit, its moments made with the
        # optimizer (backends/torch/master_weights.py), before any step, not at the first
        self.sixteen_bit = sixteen_bit
        if sixteen_bit:
            for i, mats in enumerate(self.trainable[1:], start=1):
                for k, m in enumerate(mats):
                    for st in range(OPTIMIZER_STATES[workload.optimizer]):
                        self.pool.malloc(("state", i, k, st), m.elements * self.state_bytes)
        tokens = workload.batch_size * (workload.seq_len or workload.tokens_per_sequence)
        # the eager LM loss's sequence (a compiled step's head is one segment's saved tensors)
        self.logits = tokens * arch.vocab_size if arch.kind == "decoder" and not compiled else 0
        self.logits_16 = transformer_cost.loss_logits_cached_bytes(workload, compiled=compiled)
        self.softcap = bool(self.logits_16) and transformer_cost.softcapped(arch)
        if arch.kind == "decoder" and arch.tie_embeddings:
            # loading makes a tied LM head's own weight, then frees it: a cached block
            head = arch.vocab_size * arch.hidden_size * workload.precision_info.weight_bytes
            self.pool.malloc("tied_head", head)
            self.pool.free("tied_head")

    def _recomputed(self, seg: Segment) -> bool:
        return self.workload.checkpointing and seg.name.startswith("layer")

    @property
    def loss_block_bytes(self) -> float:
        """The loss's forward and backward blocks: three FP32 [tokens, vocab] ones, the 16-bit
        logits, and Gemma-2's kept tanh output."""
        return self.logits * 4 * 3 + self.logits_16 * (2 if self.softcap else 1)

    def forward(self) -> None:
        pool = self.pool
        for i, seg in enumerate(self.segments):
            if seg.name == "head" and self.logits:
                for j, block in enumerate(self.blocks[i]):
                    pool.malloc(("act", i, j), block)
                # the loss: the 16-bit logits and their FP32 copy (one tensor for FP32 logits),
                # log_softmax's output kept; the copy and the logits dropped when it returns
                if self.softcap:  # Gemma-2: cap * tanh(logits / cap), tanh's output kept
                    pool.malloc("lm_head_out", self.logits_16)
                    pool.malloc("capped_in", self.logits_16)
                    pool.free("lm_head_out")
                    pool.malloc("tanh", self.logits_16)
                    pool.free("capped_in")
                if self.logits_16:
                    pool.malloc("logits16", self.logits_16)
                pool.malloc("logits32", self.logits * 4)
                pool.malloc("log_softmax", self.logits * 4)
                pool.free("logits32")
                pool.free("logits16")
                continue
            for j, block in enumerate(self.blocks[i]):
                pool.malloc(("act", i, j), block)
            if self._recomputed(seg):  # checkpointed: the block's input kept, the rest cut
                pool.malloc(("input", i), seg.input_bytes)
                for j in range(len(self.blocks[i])):
                    pool.free(("act", i, j))

    def backward(self) -> None:
        pool = self.pool
        for i in range(len(self.segments) - 1, -1, -1):
            seg = self.segments[i]
            if seg.name == "head" and self.logits:
                # nll_loss's gradient, log_softmax's gradient (the three FP32 blocks at once),
                # the 16-bit gradient the head's matmul reads
                pool.malloc("nll_grad", self.logits * 4)
                pool.malloc("log_softmax_grad", self.logits * 4)
                pool.free("nll_grad")
                pool.free("log_softmax")
                if self.logits_16:
                    pool.malloc("logits16_grad", self.logits_16)
                    pool.free("log_softmax_grad")
                    last = "logits16_grad"
                    if self.softcap:  # back through the cap's product, tanh and quotient
                        for grad in ("mul_grad", "tanh_grad", "div_grad"):
                            pool.malloc(grad, self.logits_16)
                            pool.free(last)
                            if grad == "tanh_grad":
                                pool.free("tanh")
                            last = grad
                    self._gradients(i)
                    pool.free(last)
                else:
                    self._gradients(i)
                    pool.free("log_softmax_grad")
                for j in range(len(self.blocks[i])):
                    pool.free(("act", i, j))
                continue
            if self._recomputed(seg):
                for j, block in enumerate(self.blocks[i]):
                    pool.malloc(("act", i, j), block)
                pool.free(("input", i))
            # LoRA's merged expert stacks, last first: each one's gradient is written while its
            # saved copy lives, and both go before the next stack's
            n, stacks = len(self.blocks[i]), self.stacks[i]
            for j in range(n - 1, n - stacks - 1, -1):
                pool.malloc(("merged_grad", i, j), self.blocks[i][j])
                pool.free(("act", i, j))
                pool.free(("merged_grad", i, j))
            for j in range(n - stacks):
                pool.free(("act", i, j))
            self._gradients(i)

    def _gradients(self, i: int) -> None:
        grad_bytes = 2 if self.sixteen_bit and i > 0 else self.grad_bytes
        for k in range(len(self.trainable[i]) - 1, -1, -1):
            self.pool.malloc(("grad", i, k), self.trainable[i][k].elements * grad_bytes)

    def optimizer_step(self, first: bool) -> None:
        """torch.optim's order: each parameter's state at the first step (`_init_group`:
        zeros_like per moment), then the step's temporaries (optimizer.optimizer_step_scratch:
        foreach's square-root list, all alive at once; the for-loop's square root and quotient
        of one tensor, freed before the next)."""
        pool, workload = self.pool, self.workload
        states = OPTIMIZER_STATES[workload.optimizer]
        params = [(i, k, m.elements) for i, mats in enumerate(self.trainable) for k, m in enumerate(mats)]
        if self.sixteen_bit:  # the 16-bit weights' moments exist already
            params = [(i, k, n) for i, k, n in params if i == 0]
        if first:
            for i, k, n in params:
                for st in range(states):
                    pool.malloc(("state", i, k, st), n * self.state_bytes)
        if states < 2 or workload.optimizer_impl == "fused":
            return
        for i, k, n in params:
            pool.malloc(("root", i, k), n * self.state_bytes)
            if workload.optimizer_impl == "for-loop":
                pool.malloc(("quotient", i, k), n * self.state_bytes)
                pool.free(("quotient", i, k))
                pool.free(("root", i, k))
        for i, k, _ in params:
            pool.free(("root", i, k))

    def zero_grad(self) -> None:
        for i, mats in enumerate(self.trainable):
            for k in range(len(mats)):
                self.pool.free(("grad", i, k))


def first_step(
    workload: Workload,
    framework: str,
    segments: list[Segment],
    *,
    compiled: bool = False,
    adapters: list[list[Matrix]] | None = None,
    merged: list[list[float]] | None = None,
    sixteen_bit: bool = False,
) -> FirstStep | None:
    """The first step's new segments beyond the forward's blocks, and the second step's beyond
    the first's (module docstring); None where it does not apply (_applies)."""
    if not _applies(workload, framework):
        return None
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    if len(weight_matrices(arch)) != len(segments):  # a layout the two sides do not share
        return None
    if workload.peft and adapters is None:
        return None  # LoRA's trainable tensors are the adapters: peft.py lists them
    replay = _StepReplay(
        workload, framework, segments, compiled, adapters, merged=merged, sixteen_bit=sixteen_bit
    )
    pool = replay.pool
    replay.forward()
    forward = pool.reserved
    replay.backward()
    after_backward = pool.reserved
    replay.optimizer_step(first=True)
    after_optimizer = pool.reserved
    replay.zero_grad()
    replay.forward()
    replay.backward()
    replay.optimizer_step(first=False)
    return FirstStep(
        activation_block_bytes=sum(b for seg in replay.blocks for b in seg) + replay.loss_block_bytes,
        gradient_segment_bytes=after_backward - forward,
        optimizer_segment_bytes=after_optimizer - after_backward,
        second_step_segment_bytes=pool.reserved - after_optimizer,
        peak_reserved_bytes=pool.peak_reserved,
    )


# The breakdown's parts the replay does not lay out: loaded before the steps, or outside the
# caching allocator's pool.
FIXED_PARTS = (
    "weights",
    "quantization_scales",
    "master_weights",
    "adapter_weights",
    "workspace",
    "cuda_context",
)


def replace_with_replayed_reserve(
    parts: dict[str, float],
    details: dict[str, int],
    reserved: float,
    replay: FirstStep,
    *,
    kept: float = 0.0,
) -> None:
    """Where the first two steps are replayed through the allocator (first_step.py), what it
    holds beyond the allocated peak is the replay's reserve less that peak: it replaces the
    family's fragmentation share and the loss's cached block, which the replay lays out itself
    (a later step may carve that block up). Cached memory: the allocator frees it under pressure
    (required_bytes leaves fragmentation out), but nvidia-smi shows it. A compiled step's capture
    warm-up comes later and reserves on its own stream: the larger of the two stays, above the
    share `kept` where one is kept."""
    fixed = sum(parts.get(name, 0.0) for name in FIXED_PARTS)
    allocated = sum(parts.values()) - parts["fragmentation"]
    beyond = max(0.0, reserved + fixed - allocated - kept)
    parts["fragmentation"] = kept + max(beyond, float(details.get("capture_warmup_reserve", 0)))
    details.pop("loss_logits_block", None)
    if beyond > 0:
        details["first_step_segments"] = int(beyond)
        details["first_step_gradient_segments"] = int(replay.gradient_segment_bytes)
        details["first_step_optimizer_segments"] = int(replay.optimizer_segment_bytes)
        details["second_step_segments"] = int(replay.second_step_segment_bytes)
