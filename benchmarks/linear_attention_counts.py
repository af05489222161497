"""Count a Gated DeltaNet layer's work on the CPU and print it beside estimate/linear_attention.py.

The estimator's figures for Qwen3-Next's and Qwen3.5's linear-attention layers (kernels, bytes,
saved bytes, Python-level calls; forward, backward and a decode step) were counted on
transformers' own module with the modes below. This script counts them again at any shapes, so
the constants can be checked against the installed transformers (tests/unit/
test_linear_attention.py does, at shapes other than those they were read at):

  kernels  every aten operation that is not a view (a TorchDispatchMode), less the five
           projections' and the convolution's products (the block's GEMMs elsewhere)
  bytes    each of those operations' inputs and output
  saved    the tensors autograd keeps for backward (saved_tensors_hooks), less the weights and
           the layer's input, each storage once
  calls    Python-level torch calls less attribute reads (generate_ops' unit)

    python benchmarks/linear_attention_counts.py
    python benchmarks/linear_attention_counts.py --dtype fp32 --seq 64 256 1024
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fitbench.estimate import linear_attention
from fitbench.estimate.dtypes import ActivationDtypes
from fitbench.workloads.arch import TransformerArch
from generate_ops_families import CallCounter  # calls less attribute reads: generate_ops' unit

VIEWS = frozenset(
    {
        "aten.view",
        "aten._unsafe_view",
        "aten.transpose",
        "aten.t",
        "aten.unsqueeze",
        "aten.expand",
        "aten.slice",
        "aten.select",
        "aten.permute",
        "aten.split_with_sizes",
        "aten.split",
        "aten.squeeze",
        "aten.alias",
        "aten.detach",
        "aten.reshape",
        "aten.unbind",
        "aten.as_strided",
        "aten.diagonal",
        "aten.chunk",
    }
)
PRODUCTS = frozenset({"aten.mm", "aten.addmm", "aten.convolution", "aten.convolution_backward"})
HIDDEN = 64


def _nbytes(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, list | tuple):
        return sum(_nbytes(y) for y in x)
    return 0


class KernelCounter(TorchDispatchMode):
    """Non-view aten operations other than the projections' products, and their bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels = 0
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket)
        if name not in VIEWS and name not in PRODUCTS:
            self.kernels += 1
            self.bytes += _nbytes(list(args)) + _nbytes(out)
        return out


def text_config(key_heads: int, value_heads: int, key_dim: int, value_dim: int, layers: int = 2) -> Any:
    import transformers

    return transformers.Qwen3_5TextConfig(
        vocab_size=512,
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=key_heads,
        linear_num_value_heads=value_heads,
        linear_key_head_dim=key_dim,
        linear_value_head_dim=value_dim,
        linear_conv_kernel_dim=4,
    )


def arch_of(config: Any) -> TransformerArch:
    from fitbench.workloads.hf_config import arch_from_hf_config

    arch = arch_from_hf_config(config.to_dict())
    assert isinstance(arch, TransformerArch)
    return arch


def count_training(config: Any, batch: int, seq: int, dtype: torch.dtype) -> dict[str, int]:
    """One mixer's training forward and backward at `batch` x `seq` tokens."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    torch.manual_seed(0)
    mixer = Qwen3_5GatedDeltaNet(config, 0).to(dtype)
    x = torch.randn(batch, seq, HIDDEN, dtype=dtype, requires_grad=True)
    saved: list[torch.Tensor] = []

    def keep(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    forward, calls = KernelCounter(), CallCounter()
    with calls, forward, torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        y = mixer(x)
    own = {p.untyped_storage().data_ptr() for p in mixer.parameters()} | {x.untyped_storage().data_ptr()}
    kept = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
        for t in saved
        if t.untyped_storage().data_ptr() not in own
    }
    backward = KernelCounter()
    with backward:
        y.float().sum().backward()
    return {
        "kernels": forward.kernels,
        "bytes": forward.bytes,
        "calls": calls.calls,
        "saved": sum(kept.values()),
        "backward_kernels": backward.kernels,
        "backward_bytes": backward.bytes,
    }


def count_decode(config: Any, batch: int, dtype: torch.dtype, *, prompt: int = 16) -> dict[str, int]:
    """One mixer's decode step (one token a sequence, after a `prompt`-token prompt) in a model
    whose second layer is the linear-attention one."""
    return _count_generation(config, batch, dtype, prompt=prompt, prefill=False)


def count_prefill(config: Any, batch: int, dtype: torch.dtype, *, prompt: int) -> dict[str, int]:
    """One mixer's work over a `prompt`-token prompt with the cache, as generate's prefill runs it."""
    return _count_generation(config, batch, dtype, prompt=prompt, prefill=True)


def _count_generation(
    config: Any, batch: int, dtype: torch.dtype, *, prompt: int, prefill: bool
) -> dict[str, int]:
    import transformers
    from transformers import DynamicCache

    config.layer_types = ["full_attention", "linear_attention"]
    torch.manual_seed(0)
    model = transformers.Qwen3_5ForCausalLM(config).eval().to(dtype)
    mixer = model.model.layers[1].linear_attn
    ids = torch.randint(3, 500, (batch, prompt))
    cache = DynamicCache(config=model.config)
    kernels, calls = KernelCounter(), CallCounter()

    def start(*_: Any) -> None:
        calls.__enter__()
        kernels.__enter__()

    def stop(*_: Any) -> None:
        kernels.__exit__(None, None, None)
        calls.__exit__(None, None, None)

    with torch.no_grad():
        if prefill:
            hooks = [mixer.register_forward_pre_hook(start), mixer.register_forward_hook(stop)]
            model(ids, past_key_values=cache, use_cache=True)
        else:
            model(ids, past_key_values=cache, use_cache=True)
            hooks = [mixer.register_forward_pre_hook(start), mixer.register_forward_hook(stop)]
            model(ids[:, -1:], past_key_values=cache, use_cache=True)
    for h in hooks:
        h.remove()
    return {"kernels": kernels.kernels, "bytes": kernels.bytes, "calls": calls.calls}


def estimated_training(arch: TransformerArch, batch: int, seq: int, act: int) -> dict[str, float]:
    """The estimator's figures for one layer of `arch` (linear_attention.mixer_kernel), and its
    saved bytes (the layer's input and the projections' outputs through the gated norm)."""
    dt = ActivationDtypes(act=act, res=act, mask=0, amp=False)
    k = linear_attention.mixer_kernel(arch, dt, batch, seq, decode=False, training=True)
    return {
        "kernels": k.kernel_launches,
        "bytes": k.bytes,
        "calls": k.ops + 5,  # the five projections' F.linear calls are the block's GEMMs
        "saved": batch * seq * linear_attention.saved_bytes_per_token(arch, seq),
        "backward_kernels": k.backward_launches or 0.0,
        "backward_bytes": k.backward_bytes or 0.0,
    }


def decode_calls() -> None:
    """Per family, the decode step's calls of one attention layer, of one linear-attention layer,
    and outside the layers, counted (generate_ops_families.forward_calls) and estimated at the
    installed transformers release: what generate_ops' family tables must hold."""
    import transformers

    from fitbench.estimate import generate_ops
    from generate_ops_families import forward_calls

    sizes = dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
    )
    experts = dict(
        num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48
    )
    families = {
        "qwen3_5_text": (transformers.Qwen3_5TextConfig, transformers.Qwen3_5ForCausalLM, {}),
        "qwen3_5_moe_text": (transformers.Qwen3_5MoeTextConfig, transformers.Qwen3_5MoeForCausalLM, experts),
        "qwen3_next": (transformers.Qwen3NextConfig, transformers.Qwen3NextForCausalLM, experts),
    }
    full, linear = "full_attention", "linear_attention"
    print(f"transformers {transformers.__version__}")
    for name, (config_class, model_class, extra) in families.items():
        counted, estimated = {}, {}
        for types in ([full], [full, linear], [full, full]):
            config = config_class(**sizes, **extra, num_hidden_layers=len(types), layer_types=types)
            torch.manual_seed(0)
            counted[len(types), types[-1]] = forward_calls(model_class(config).eval())
            arch = arch_of(config)
            estimated[len(types), types[-1]] = generate_ops.layers_calls(arch, 16, transformers.__version__)
        one = counted[1, full]
        print(
            f"{name:18} attention layer {counted[2, full] - one:4d} (estimate "
            f"{estimated[2, full] - estimated[1, full]}), linear layer {counted[2, linear] - one:4d} "
            f"(estimate {estimated[2, linear] - estimated[1, full]}), outside {2 * one - counted[2, full]:4d}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--seq", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--decode-calls", action="store_true", help="the decode step's calls per layer kind")
    args = parser.parse_args(argv)
    if args.decode_calls:
        decode_calls()
        return 0
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    act = 2 if args.dtype == "bf16" else 4
    shapes = [(1, 2, 4, 16, 16), (2, 3, 6, 32, 24), (1, 4, 4, 48, 32)]
    head = "shape (batch, key heads, value heads, key, value)"
    print(f"{head:52} {'seq':>5} {'figure':>16} {'counted':>12} {'estimate':>12} {'ratio':>6}")
    for batch, hk, hv, dk, dv in shapes:
        config = text_config(hk, hv, dk, dv)
        arch = arch_of(config)
        shape = str((batch, hk, hv, dk, dv))
        for seq in args.seq:
            counted = count_training(config, batch, seq, dtype)
            estimated = estimated_training(arch, batch, seq, act)
            for key, value in counted.items():
                est = estimated[key]
                print(f"{shape:52} {seq:5d} {key:>16} {value:12,d} {est:12,.0f} {est / value:6.2f}")
        decode = count_decode(text_config(hk, hv, dk, dv), batch, dtype)
        recurrent, _ = arch.linear_state_elements()
        per_element = decode["bytes"] / (batch * recurrent)
        print(
            f"{shape:52} {'dec':>5} {'bytes/state':>16} {per_element:12.1f} "
            f"{linear_attention.DECODE_STATE_BYTES:12.1f}"
        )
        launches = linear_attention.DECODE_LAUNCHES[act < 4] - 1  # less the convolution
        print(f"{'':52} {'dec':>5} {'kernels':>16} {decode['kernels']:12d} {launches:12.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
