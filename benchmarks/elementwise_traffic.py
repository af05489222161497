"""A block's elementwise traffic, counted on the CPU, beside the estimator's count.

The estimator times a training step's elementwise work (norms, activations, residual adds,
rotary positions, autocast's casts) as bytes per token and block at the card's streaming rate
(transformer_cost._elementwise_bytes_per_token; the backward moves twice the forward's). This
script counts those bytes in the real model: a dispatch mode sees every ATen operator of a
forward and backward pass and adds up the bytes of its tensor inputs and outputs, leaving out
matrix products, attention, the embedding, the loss and views (no traffic). The model is built
from the library's config with its real widths and a tiny vocabulary; one block is the difference
between a two-block and a one-block model, and the traffic per token the difference between two
sequence lengths, so the weights' casts and gradients (per step, not per token) drop out. An
MoE block's count adds its routed copies' passes (expert_cost.expert_routing_bytes_per_token).

On the CPU autocast casts as on CUDA and every operator runs the same Python code, so the bytes
are the GPU's; the time they take there is the profile's question (benchmarks/profile_step.py).

    python benchmarks/elementwise_traffic.py llama-3.2-1b-instruct qwen3-0.6b gemma-3-1b-it
    python benchmarks/elementwise_traffic.py qwen3-0.6b --precision bf16 --json
    python benchmarks/elementwise_traffic.py olmoe-1b-7b mixtral-8x7b-instruct --routed
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from fitbench.backends.torch.models import build_model
from fitbench.estimate import expert_cost, transformer_cost
from fitbench.estimate.dtypes import activation_dtypes
from fitbench.workloads import library
from fitbench.workloads.hf_config import workload_from_data
from fitbench.workloads.workload import Workload

# Operators that are not elementwise traffic: GEMMs, attention, the embedding and the loss (the
# estimator times them as their own kernels), and views, which move nothing.
NOT_ELEMENTWISE = (
    "mm",
    "bmm",
    "addmm",
    "_grouped_mm",
    "linear",
    "embedding",
    "embedding_dense_backward",
    "nll_loss_forward",
    "nll_loss_backward",
    "_log_softmax",
    "_log_softmax_backward_data",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "detach",
    "view",
    "_unsafe_view",
    "t",
    "transpose",
    "expand",
    "permute",
    "slice",
    "select",
    "split",
    "split_with_sizes",
    "unsqueeze",
    "squeeze",
    "as_strided",
    "alias",
    "unbind",
)
VOCAB = 256
LENGTHS = (64, 128)


class ElementwiseTraffic(TorchDispatchMode):
    """Bytes read and written by the elementwise operators dispatched inside the mode."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.ops = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.__name__.split(".")[0] in NOT_ELEMENTWISE:
            return out
        tensors = [
            t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor) and t.numel() > 1
        ]
        results = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.numel() > 1]
        if results:
            self.bytes += sum(t.numel() * t.element_size() for t in tensors + results)
            self.ops += 1
        return out


# Operators that make a tensor without reading their tensor argument (its shape and dtype only).
FACTORIES = ("new_zeros", "new_empty", "zeros_like", "empty_like", "new_full", "full_like")


class RoutedTraffic(TorchDispatchMode):
    """Bytes of the operators that touch an MoE block's routed copies (the k copies of each of
    `tokens` tokens, a row each), matrix products and views left out."""

    def __init__(self, tokens: int, k: int) -> None:
        super().__init__()
        self.tokens, self.k = tokens, k
        self.bytes = 0

    def _routed(self, t: torch.Tensor) -> bool:
        """A tensor of the routed copies: a row per copy, or the [tokens, k, ...] view of them."""
        if t.dim() >= 1 and t.shape[0] == self.tokens * self.k and t.numel() > self.tokens * self.k:
            return True
        return t.dim() >= 3 and tuple(t.shape[:2]) == (self.tokens, self.k)
        self.bytes = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func.__name__.split(".")[0]
        if name in NOT_ELEMENTWISE:
            return out
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor) and t.numel() > 1]
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.numel() > 1]
        if any(self._routed(t) for t in ins + outs):
            # an input is read once however it is broadcast (an expanded view: its storage)
            read = [] if name in FACTORIES else ins
            self.bytes += sum(min(t.numel() * t.element_size(), t.untyped_storage().nbytes()) for t in read)
            self.bytes += sum(t.numel() * t.element_size() for t in outs)
        return out


def routed_per_token(name: str, precision: str, seq: int = LENGTHS[1]) -> dict[str, Any]:
    """One MoE block's routed-copy traffic per token (forward, backward), counted on the CPU with
    the installed transformers, beside expert_cost.expert_routing_bytes_per_token for it."""
    import transformers

    config = dict(library.get_model(name).config)
    config.pop("quantization_config", None)
    workload = _workload(config, 1, seq, precision)
    arch, amp = workload.arch, workload.precision_info.amp
    torch.manual_seed(0)
    model, _ = build_model(workload, device="cpu", dtype=torch.float32 if amp else torch.bfloat16)
    model.train()
    ids = torch.randint(0, VOCAB, (1, seq))
    forward = RoutedTraffic(seq, arch.experts_per_token)
    backward = RoutedTraffic(seq, arch.experts_per_token)
    with forward, torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    with backward:
        loss.backward()
    dt = activation_dtypes(workload, dropout=False)
    e = 4.0 if expert_cost.experts_in_weight_dtype(arch, dt) else dt.act
    w = expert_cost.routing_weight_bytes(arch, e)
    masks = expert_cost.routing_masks(transformers.__version__)
    index_fwd, index_bwd, stream_fwd, stream_bwd = expert_cost.expert_routing_bytes_per_token(
        arch, e, w, masks
    )
    return {
        "model": name,
        "precision": precision,
        "transformers": transformers.__version__,
        "forward_bytes_per_token": forward.bytes / seq,
        "backward_bytes_per_token": backward.bytes / seq,
        "estimate_forward_bytes_per_token": index_fwd + stream_fwd,
        "estimate_backward_bytes_per_token": index_bwd + stream_bwd,
    }


def _workload(config: dict[str, Any], layers: int, seq: int, precision: str) -> Workload:
    fields = {**config, "num_hidden_layers": layers, "vocab_size": VOCAB}
    fields.pop("first_k_dense_replace", None)
    return workload_from_data(
        fields,
        name="traffic",
        source="benchmark",
        mode="train",
        batch_size=1,
        seq_len=seq,
        precision=precision,
    )


def step_traffic(
    config: dict[str, Any], layers: int, seq: int, precision: str, *, frozen_norms: bool = False
) -> tuple[int, int, int, int]:
    """(forward bytes, forward ops, backward bytes, backward ops) of one training step on the CPU;
    `frozen_norms`: the norms' weights need no gradient (as under LoRA)."""
    workload = _workload(config, layers, seq, precision)
    amp = workload.precision_info.amp
    torch.manual_seed(0)
    model, _ = build_model(workload, device="cpu", dtype=torch.float32 if amp else torch.bfloat16)
    if frozen_norms:
        for name, param in model.named_parameters():
            if "norm" in name.rsplit(".", 2)[-2]:
                param.requires_grad_(False)
    model.train()
    ids = torch.randint(0, VOCAB, (1, seq))
    forward, backward = ElementwiseTraffic(), ElementwiseTraffic()
    with forward, torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    with backward:
        loss.backward()
    return forward.bytes, forward.ops, backward.bytes, backward.ops


def block_per_token(name: str, precision: str) -> dict[str, Any]:
    """One block's elementwise traffic per token, measured and estimated."""
    config = dict(library.get_model(name).config)
    config.pop("quantization_config", None)
    per_length = []
    for seq in LENGTHS:
        two, one = step_traffic(config, 2, seq, precision), step_traffic(config, 1, seq, precision)
        per_length.append([a - b for a, b in zip(two, one, strict=True)])
    (f0, fo, b0, bo), (f1, _, b1, _) = per_length
    tokens = LENGTHS[1] - LENGTHS[0]
    workload = _workload(config, 2, LENGTHS[0], precision)
    dt = activation_dtypes(workload, dropout=False)
    est_bytes, est_ops = transformer_cost._elementwise_bytes_per_token(workload.arch, dt)
    est_backward = 2 * est_bytes
    if workload.arch.is_moe:  # the routed copies' passes (grouped_mm path), per MoE block
        e = 4.0 if expert_cost.experts_in_weight_dtype(workload.arch, dt) else dt.act
        w = expert_cost.routing_weight_bytes(workload.arch, e)
        import transformers

        masks = expert_cost.routing_masks(transformers.__version__)
        index_fwd, index_bwd, stream_fwd, stream_bwd = expert_cost.expert_routing_bytes_per_token(
            workload.arch, e, w, masks
        )
        est_bytes += index_fwd + stream_fwd
        est_backward += index_bwd + stream_bwd
    return {
        "model": name,
        "precision": precision,
        "forward_bytes_per_token": (f1 - f0) / tokens,
        "backward_bytes_per_token": (b1 - b0) / tokens,
        "forward_ops": fo,
        "backward_ops": bo,
        "estimate_forward_bytes_per_token": est_bytes,
        "estimate_backward_bytes_per_token": est_backward,
        "estimate_forward_ops": est_ops,
    }


def norm_weight_gradient_per_token(name: str, precision: str) -> dict[str, Any]:
    """The backward bytes per token and block that the norms' weight gradients move (a block with
    them trained less the same block with them frozen), beside
    transformer_cost.norm_weight_gradient_bytes_per_token."""
    config = dict(library.get_model(name).config)
    config.pop("quantization_config", None)
    per_length = []
    for seq in LENGTHS:
        block = []
        for frozen in (False, True):
            two = step_traffic(config, 2, seq, precision, frozen_norms=frozen)
            one = step_traffic(config, 1, seq, precision, frozen_norms=frozen)
            block.append(two[2] - one[2])
        per_length.append(block[0] - block[1])
    workload = _workload(config, 2, LENGTHS[0], precision)
    dt = activation_dtypes(workload, dropout=False)
    return {
        "model": name,
        "precision": precision,
        "backward_bytes_per_token": (per_length[1] - per_length[0]) / (LENGTHS[1] - LENGTHS[0]),
        "estimate_bytes_per_token": transformer_cost.norm_weight_gradient_bytes_per_token(workload.arch, dt),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("models", nargs="+", help="names of the model library (fitbench models)")
    parser.add_argument("--precision", default="amp-bf16", choices=("amp-bf16", "bf16"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--routed", action="store_true", help="MoE models: the routed copies' passes alone, per block"
    )
    args = parser.parse_args(argv)
    if args.routed:
        rows = [routed_per_token(name, args.precision) for name in args.models]
        print(json.dumps(rows, indent=1))
        return 0
    rows = [block_per_token(name, args.precision) for name in args.models]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    header = ("model", "fwd counted", "fwd est", "bwd counted", "bwd est", "ops fwd/bwd", "est")
    print("{:<28} {:>11} {:>9} {:>11} {:>9} {:>12} {:>5}   (KB per token and block)".format(*header))
    for r in rows:
        ops = f"{r['forward_ops']}/{r['backward_ops']}"
        cells = (
            r["forward_bytes_per_token"],
            r["estimate_forward_bytes_per_token"],
            r["backward_bytes_per_token"],
            r["estimate_backward_bytes_per_token"],
        )
        kb = [f"{c / 1e3:.1f}" for c in cells]
        est_ops = f"{r['estimate_forward_ops']:.0f}"
        print(f"{r['model']:<28} {kb[0]:>11} {kb[1]:>9} {kb[2]:>11} {kb[3]:>9} {ops:>12} {est_ops:>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
