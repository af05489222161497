"""What the optimizer holds and allocates: its state, master weights and the step's temporaries.

Why a module of its own: the single-device breakdown, PEFT's, the per-GPU shards and the
optimizer's time (speed.optimizer_kernels) all read these figures; stating them once, below
the memory and time models, keeps the update's traffic and the bytes the breakdown holds equal.
"""

from __future__ import annotations

from itertools import pairwise

from fitbench.core.names import Framework
from fitbench.workloads.arch import ResNetArch
from fitbench.workloads.workload import Workload

# Adam keeps two moments per parameter, momentum SGD one buffer, plain SGD nothing.
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "momentum": 1, "sgd": 0}


def master_weights_kept(workload: Workload, framework: str) -> bool:
    """Whether the optimizer updates FP32 master copies of 16-bit weights: Paddle's O2 (pure
    fp16/bf16) uses multi_precision; PyTorch's pure half updates the 16-bit weights in place."""
    p = workload.precision_info
    return framework == Framework.PADDLE and not p.amp and p.weight_bytes == 2


def optimizer_element_bytes(workload: Workload, framework: str) -> int:
    """Bytes per element of the optimizer's state and of the weights its update reads and
    writes: the parameter dtype (FP32 under AMP, 16-bit in PyTorch's pure half), or FP32 where
    master weights are kept. Memory (optimizer_bytes) and time (speed.optimizer_kernels) both
    use it, so the update's traffic moves the bytes the breakdown holds."""
    return 4 if master_weights_kept(workload, framework) else int(workload.precision_info.weight_bytes)


def param_sizes_in_order(workload: Workload) -> list[int]:
    """Elements of every parameter tensor, in the order `model.parameters()` yields them for
    the model the torch backend builds (torchvision's ResNet layout; transformers' BERT, Llama,
    Qwen2 and GPT-2; a tied LM head is the embedding, yielded once). A for-loop optimizer
    visits them in this order, and what it holds at once depends on neighbours."""
    arch = workload.arch
    if isinstance(arch, ResNetArch):
        out: list[int] = []
        for conv in arch.convs(224):
            weight = conv.in_channels * conv.out_channels * conv.kernel**2
            out += [weight, conv.out_channels, conv.out_channels]  # with its BatchNorm
        return [*out, arch.feature_dim * arch.num_classes, arch.num_classes]
    h, f, q, kv, v = arch.hidden_size, arch.intermediate_size, arch.q_dim, arch.kv_dim, arch.vocab_size
    norm = [h, h] if arch.norm == "layernorm" else [h]

    def linear(fin: int, fout: int, bias: bool) -> list[int]:
        return [fin * fout, fout] if bias else [fin * fout]

    attention = linear(h, q, arch.qkv_bias) + 2 * linear(h, kv, arch.qkv_bias) + linear(q, h, arch.out_bias)

    if arch.kind == "encoder":  # BertForSequenceClassification
        out = [v * h, arch.max_positions * h, max(arch.type_vocab_size, 1) * h, *norm]
        layer = attention + norm + linear(h, f, arch.mlp_bias) + linear(f, h, arch.mlp_bias) + norm
        out += layer * arch.num_layers
        out += linear(h, h, True) if arch.pooler else []
        return out + linear(h, arch.num_labels, True)
    if arch.position == "learned":  # GPT-2: fused c_attn, layer norms before each half
        out = [v * h, arch.max_positions * h]
        layer = norm + linear(h, 3 * h, True) + linear(h, h, True) + norm
        layer += linear(h, f, True) + linear(f, h, True)
    else:  # Llama / Qwen2: attention, MLP, then the two RMSNorms
        out = [v * h]
        layer = attention + 2 * linear(h, f, arch.mlp_bias) + linear(f, h, arch.mlp_bias) + norm + norm
    out += layer * arch.num_layers
    out += norm
    return out if arch.tie_embeddings else [*out, v * h]


def largest_param_tensor(workload: Workload) -> int:
    """Elements of the largest single parameter tensor (a word embedding or LM head, a wide
    Linear, a convolution or the classifier)."""
    return max(param_sizes_in_order(workload))


def optimizer_step_scratch(workload: Workload, framework: str) -> int:
    """Bytes the optimizer step allocates beyond its state, at its largest moment.

    Read from torch/optim/adam.py (AdamW runs the same functions) and sgd.py:

    * foreach (`_multi_tensor_adam`): `exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)`
      allocates one tensor per parameter, kept until the final `_foreach_addcdiv_`: 1.00x the
      parameter bytes of the (device, dtype) group. Coupled weight decay's `_foreach_add(grads,
      params)` copy is deleted (`del device_grads`) before the square root, so it never adds.
    * fused (`_fused_adam`): one `torch._fused_adam_` kernel updates in place: nothing.
    * for-loop (`_single_tensor_adam`): `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)`
      holds the square root and the quotient of one parameter at once, while `denom` still
      refers to the previous parameter's: the most, over the parameters in order, of twice a
      tensor plus the one before it (about twice the largest tensor).
    * SGD and momentum SGD (every implementation): `buf.mul_(momentum).add_(grad)` and
      `param.add_(grad, alpha=-lr)` run in place: nothing (no Nesterov, no weight decay).

    Counting every tensor an op creates in a real step (tests/unit/test_optimizer_scratch.py)
    gives exactly these figures; an H200 measurement at LLM scale gave foreach 1.00x and fused 0.
    Paddle 3.3.1 (paddle/optimizer/adam.py:387 `_C_ops.adam_`, :801 `_C_ops.merged_adam_` with
    use_multi_tensor; adamw.py:538 `_C_ops.adamw_`; momentum.py:314 `_C_ops.momentum_`) updates each
    parameter, its moments and, under multi_precision, its FP32 master weight in one in-place
    kernel: nothing either (master weights and FP32 moments are state, master_weights_kept).
    """
    if not workload.is_training or OPTIMIZER_STATES[workload.optimizer] < 2 or framework == Framework.PADDLE:
        return 0
    state_bytes = optimizer_element_bytes(workload, framework)
    if workload.optimizer_impl == "fused":
        return 0
    if workload.optimizer_impl == "for-loop":
        sizes = [0, *param_sizes_in_order(workload)]
        return max(prev + 2 * cur for prev, cur in pairwise(sizes)) * state_bytes
    return workload.trained_param_count() * state_bytes


def optimizer_bytes(workload: Workload, framework: str) -> tuple[int, int, int]:
    """(optimizer state, master weights, optimizer-step scratch) in bytes.

    PyTorch keeps state in the parameter dtype (FP32 under AMP, 16-bit in pure half). Paddle's
    O2 (pure fp16/bf16) uses multi_precision: FP32 master weights and FP32 moments. The scratch
    depends on the implementation (optimizer_step_scratch).
    """
    if not workload.is_training:
        return 0, 0, 0
    params = workload.trained_param_count()
    states = OPTIMIZER_STATES[workload.optimizer]
    state_bytes = optimizer_element_bytes(workload, framework)
    master = 4 * params if master_weights_kept(workload, framework) else 0
    return params * states * state_bytes, master, optimizer_step_scratch(workload, framework)
