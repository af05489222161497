"""Shared shapes of the estimator: model segments (for memory) and kernels (for time).

A family module (resnet_cost, transformer_cost) describes one training or inference step as
  * `Segment`s in forward order: the bytes each saves for backward and the parameters it owns,
    so liveness.py can walk the backward pass and find the true peak (activations are freed
    layer by layer while gradients appear), and
  * `Kernel`s: FLOPs, bytes moved and a kernel class, so speed.py can apply a roofline per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Segment:
    """One layer (or group of layers) in forward order.

    saved_bytes      activations kept for its backward pass (whole batch)
    input_bytes      the part of saved_bytes that is the segment's input (what a checkpointed
                     segment keeps; the rest is recomputed in backward)
    params           trainable parameters whose gradients appear during its backward
    cast_params      parameters autocast copies to 16 bit (alive from forward to this backward)
    transient_bytes  scratch its backward needs on top (gradients of its activations, workspaces)
    """

    name: str
    saved_bytes: float
    input_bytes: float
    params: int
    cast_params: int = 0
    transient_bytes: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Kernel:
    """GPU work of one kind, repeated `count` times per step.

    kind   'matmul' | 'conv' | 'attention' | 'memory' (elementwise, norms, optimizer, decode reads)
    flops  floating-point operations of one instance
    bytes  bytes read plus written by one instance
    ops    framework operations (host dispatches) that issue one instance
    tensor_ops  of `ops`, the tensor-level calls a Hugging Face decoder block writes out on its
           activations (each RMSNorm's upcast, pow, mean, add, rsqrt and products, the rotary
           embedding's slices and products, the gated activation's product): one dispatch and
           one launch each, inside a module that is already running, where the reference
           operation behind host_seconds_per_op (fitted on BERT-base and ResNet-50 steps) is a
           module call with its library setup; each costs the host the profile's
           tensor_op_host_share of an operation
    cast_ops  casts that autocast issues from C++ inside those operations (16-bit copies of
           weights and inputs): each costs the host only the dispatcher, an allocation and a
           launch, the profile's cast_host_share of an operation
    compute   a tensor-core type the matmul uses where the card has it ('fp8', 'int8' for
           quantized weights with quantized activations), or 'fp32' for the FP32 arithmetic of a
           memory-bound kernel on the CUDA cores (GELU's erf); '' for the precision's own
    dequant_bytes  traffic of expanding quantized weights to 16 bit before a 16-bit GEMM (write
           the copy, read it back), paid where `compute` is not available on the card
    backward_bytes  bytes its backward moves where the family module counts them (batch norm,
           ReLU, residual adds, layout conversions); None: twice `bytes`
    memory_efficiency  the share of the card's streaming bandwidth this kernel reaches where it
           is not the profile's memory_efficiency (batch norm, cuDNN's layout conversions)
    stream_share  the share of the card's streaming bandwidth this kernel reaches on every card,
           where memory_efficiency's shares follow the card's SMs (speed.own_share)
    sm_rate  with stream_share: a rate per SM (bytes/s) in series with the memory's, so that
           1 / share = 1 / stream_share + (stream per SM) / sm_rate (torch's AdamW kernels:
           speed.optimizer_series); None: stream_share alone
    backward_sm_rate  the same for its backward where it differs from the forward's (the Mamba-2
           scan's broadcast products: mamba_mixer.BROADCAST_PRODUCT_SM_RATE); None: sm_rate
    launches  GPU kernels one instance launches, each paying the profile's kernel_fixed_seconds
           where the instance is memory-bound (a convolution: conv_fixed_seconds); None: its
           framework operations (at least one)
    fixed_seconds  the fixed GPU time of each of its launches where it is not the step's (a kernel
           of the mode's own in a step whose other kernels carry theirs inside their share:
           torch.tuned's fused decode attention); None: the step's
    backward_launches  GPU kernels its backward launches where they differ from the forward's
           (a convolution's data and weight gradients, batch norm's reduction and input gradient);
           None: as many as the forward
    backward_flops  floating-point operations its backward does where the family module counts
           them (GELU's derivative); None: the kind's multiple of `flops` (estimate/speed.py backward_kernels)
    mixed_dtypes  its eager passes mix 16-bit and FP32 tensors (autocast's casts and the FP32
           residual stream and norms beside 16-bit branch outputs): PyTorch runs them through
           TensorIterator's unvectorized loops that convert each element, at the profile's
           mixed_dtype_memory_efficiency of the streaming rate
    fallback_launches, fallback_backward_launches, fallback_cast_ops  the launches (forward,
           backward) and C++ dispatches of a grouped product on a card without torch's grouped
           GEMM kernel (speed.grouped_mm_fast_path: its `_grouped_mm` loops over the groups with
           one mm each there); None: the same on every card
    grouped  a grouped product over the experts of an MoE block (transformers' grouped_mm path,
           its per-expert fallback, peft's merged-stack gradient): a few hundred rows an expert
           put it near the card's ridge point, where its weight reads and its arithmetic overlap
           only in part (speed.grouped_seconds)
    misaligned  the alignment in elements (1, 2 or 4) of a 16-bit GEMM with a dimension that is not
           a multiple of 8 elements (GPT-2's 50,257-word LM head: 1); 0 where it is aligned.
           cuBLAS cannot use its tensor-core kernels' 16-byte loads and runs narrower ones, at the
           profile's misaligned_matmul_efficiency of the peak per element of alignment
    attended_keys  the keys each query of a causal fused attention kernel streams over in a prefill
           or training step (the sequence): the kernel's fixed work per block of queries (loading
           them, the diagonal block, the epilogue, the backward's query-gradient pass) weighs
           against a row's keys, so its share of the peak grows with the sequence
           (speed.causal_attention_share); 0 for any other kernel
    fused  what this work becomes in a step a compiler fuses (torch.compile's inductor in torch's
           tuned mode: Profile.fuses_pointwise): a chain of pointwise passes becomes one kernel
           that reads the chain's inputs and writes its outputs once; None: unchanged (GEMMs,
           convolutions, attention, the optimizer stay the libraries' own kernels)
    """

    name: str
    kind: str
    flops: float
    bytes: float
    count: int = 1
    ops: float = 1.0
    tensor_ops: float = 0.0
    cast_ops: float = 0.0
    compute: str = ""
    dequant_bytes: float = 0.0
    backward_bytes: float | None = None
    memory_efficiency: float | None = None
    launches: float | None = None
    backward_launches: float | None = None
    backward_flops: float | None = None
    fused: Kernel | None = None
    fixed_seconds: float | None = None
    mixed_dtypes: bool = False
    stream_share: float | None = None
    sm_rate: float | None = None
    backward_sm_rate: float | None = None
    misaligned: int = 0
    grouped: bool = False
    attended_keys: int = 0
    fallback_launches: float | None = None
    fallback_backward_launches: float | None = None
    fallback_cast_ops: float | None = None

    @property
    def kernel_launches(self) -> float:
        """GPU kernels one instance launches (`launches`, else one per framework operation)."""
        return self.launches if self.launches is not None else max(1.0, self.ops)
