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
import json
import sys
import weakref
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fitbench.estimate import linear_attention, mamba_mixer, short_conv
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
FULL, LINEAR = "full_attention", "linear_attention"


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


class LiveBytes(TorchDispatchMode):
    """The bytes of the tensors operations create that are still referenced, and their peak: a
    CPU stand-in for the caching allocator's allocated bytes (each storage once, freed when its
    last tensor goes)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, list | tuple) else [out]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if not size or key in self._seen:
                continue
            self._seen.add(key)
            self.live += size
            self.peak = max(self.peak, self.live)
            weakref.finalize(t, self._free, key, size)
        return out

    def _free(self, key: int, size: int) -> None:
        self.live -= size
        self._seen.discard(key)


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
    return _count_training(Qwen3_5GatedDeltaNet(config, 0).to(dtype), HIDDEN, batch, seq, dtype)


def _kept_bytes(saved: list[torch.Tensor], mixer: Any, x: torch.Tensor) -> int:
    """Bytes of the tensors autograd saved, each storage once, less the weights and the input."""
    own = {p.untyped_storage().data_ptr() for p in mixer.parameters()} | {x.untyped_storage().data_ptr()}
    kept = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
        for t in saved
        if t.untyped_storage().data_ptr() not in own
    }
    return sum(kept.values())


def _count_training(mixer: Any, hidden: int, batch: int, seq: int, dtype: torch.dtype) -> dict[str, int]:
    x = torch.randn(batch, seq, hidden, dtype=dtype, requires_grad=True)
    saved: list[torch.Tensor] = []

    def keep(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    forward, calls = KernelCounter(), CallCounter()
    with calls, forward, torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        y = mixer(x)
    kept = _kept_bytes(saved, mixer, x)
    backward = KernelCounter()
    with backward:
        y.float().sum().backward()
    return {
        "kernels": forward.kernels,
        "bytes": forward.bytes,
        "calls": calls.calls,
        "saved": kept,
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

    config.layer_types = ["full_attention", "linear_attention"]
    torch.manual_seed(0)
    model = transformers.Qwen3_5ForCausalLM(config).eval().to(dtype)
    return _count_model_generation(
        model, model.model.layers[1].linear_attn, batch, prompt=prompt, prefill=prefill
    )


def _count_model_generation(
    model: Any, mixer: Any, batch: int, *, prompt: int, prefill: bool, counter: type = KernelCounter
) -> dict[str, int]:
    from transformers import DynamicCache

    ids = torch.randint(3, 500, (batch, prompt))
    cache = DynamicCache(config=model.config)
    kernels, calls = counter(), CallCounter()

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


def mamba_config(
    heads: int, head_dim: int, state: int, groups: int, chunk: int, *, layer_types: list[str] | None = None
) -> Any:
    """A tiny Granite 4.0-H config whose Mamba-2 layers have these sizes (the hidden size is half
    of heads x head size: mamba_expand 2)."""
    import transformers

    types = layer_types or ["mamba"]
    return transformers.GraniteMoeHybridConfig(
        vocab_size=512,
        hidden_size=heads * head_dim // 2,
        shared_intermediate_size=128,
        num_hidden_layers=len(types),
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=0,
        mamba_n_heads=heads,
        mamba_d_head=head_dim,
        mamba_d_state=state,
        mamba_n_groups=groups,
        mamba_chunk_size=chunk,
        layer_types=types,
    )


def count_mamba_training(config: Any, batch: int, seq: int, dtype: torch.dtype) -> dict[str, int]:
    """One Mamba-2 mixer's training forward and backward at `batch` x `seq` tokens."""
    from transformers.models.granitemoehybrid.modeling_granitemoehybrid import GraniteMoeHybridMambaLayer

    torch.manual_seed(0)
    return _count_training(
        GraniteMoeHybridMambaLayer(config, 0).to(dtype), config.hidden_size, batch, seq, dtype
    )


def mamba_working_set(config: Any, batch: int, seq: int, dtype: torch.dtype) -> dict[str, int]:
    """One Mamba-2 mixer's largest live bytes (LiveBytes) in a training forward beyond what it
    saves, in its backward, and in a prompt's forward under no_grad."""
    from transformers.models.granitemoehybrid.modeling_granitemoehybrid import GraniteMoeHybridMambaLayer

    torch.manual_seed(0)
    mixer = GraniteMoeHybridMambaLayer(config, 0).to(dtype)
    x = torch.randn(batch, seq, config.hidden_size, dtype=dtype, requires_grad=True)
    forward, backward, prompt = LiveBytes(), LiveBytes(), LiveBytes()
    with forward:
        y = mixer(x)
    with backward:
        y.backward(torch.ones_like(y))
    with torch.no_grad(), prompt:
        mixer(x)
    return {"forward_peak": forward.peak, "backward_peak": backward.peak, "prompt_peak": prompt.peak}


def count_mamba_decode(config: Any, batch: int, dtype: torch.dtype, *, prompt: int = 16) -> dict[str, int]:
    """One Mamba-2 mixer's decode step in a model whose second layer is the Mamba-2 one."""
    import transformers

    torch.manual_seed(0)
    model = transformers.GraniteMoeHybridForCausalLM(config).eval().to(dtype)
    return _count_model_generation(model, model.model.layers[1].mamba, batch, prompt=prompt, prefill=False)


def count_mamba_prefill(config: Any, batch: int, dtype: torch.dtype, *, prompt: int) -> dict[str, int]:
    """One Mamba-2 mixer's work over a `prompt`-token prompt with the cache."""
    import transformers

    torch.manual_seed(0)
    model = transformers.GraniteMoeHybridForCausalLM(config).eval().to(dtype)
    return _count_model_generation(model, model.model.layers[1].mamba, batch, prompt=prompt, prefill=True)


def estimated_mamba_training(
    arch: TransformerArch, batch: int, seq: int, act: int, release: str | None = None
) -> dict[str, float]:
    """The estimator's figures for one Mamba-2 layer of `arch` (mamba_mixer.mixer_kernel) as
    transformers `release` runs it."""
    dt = ActivationDtypes(act=act, res=act, mask=0, amp=False)
    k = mamba_mixer.mixer_kernel(arch, dt, batch, seq, decode=False, training=True, release=release)
    return {
        "kernels": k.kernel_launches - 1,  # the counter leaves the convolution's product out
        "bytes": k.bytes,
        "calls": k.ops + mamba_mixer.PROJECTION_CALLS,
        "saved": batch * seq * mamba_mixer.saved_bytes_per_token(arch, seq, release),
        "backward_kernels": (k.backward_launches or 0.0) - 1,
        "backward_bytes": k.backward_bytes or 0.0,
    }


MAMBA_SHAPES = [(1, 8, 16, 16, 1, 32), (2, 16, 8, 32, 2, 64), (1, 6, 32, 24, 3, 16), (1, 4, 16, 64, 1, 64)]


def mamba_table(dtype: torch.dtype, act: int, seqs: list[int], out: Path | None = None) -> None:
    """Counted against estimated for Mamba-2 layers at a few shapes (`out`: every count as JSON,
    with each mixer's working set: what tests/unit/test_mamba_mixer.py holds a release that is not
    installed to)."""
    import transformers

    shapes = MAMBA_SHAPES
    rows: list[dict[str, Any]] = []
    head = "shape (batch, heads, head size, state, groups, chunk)"
    print(f"{head:52} {'seq':>5} {'figure':>16} {'counted':>12} {'estimate':>12} {'ratio':>6}")
    for batch, heads, head_dim, state, groups, chunk in shapes:
        config = mamba_config(heads, head_dim, state, groups, chunk)
        arch = arch_of(config)
        shape = str((batch, heads, head_dim, state, groups, chunk))
        for seq in seqs:
            counted = count_mamba_training(config, batch, seq, dtype)
            estimated = estimated_mamba_training(arch, batch, seq, act, transformers.__version__)
            for key, value in counted.items():
                est = estimated[key]
                print(f"{shape:52} {seq:5d} {key:>16} {value:12,d} {est:12,.0f} {est / value:6.2f}")
            if out is not None:
                names = ("batch", "heads", "head_dim", "state", "groups", "chunk")
                shape_fields = dict(zip(names, (batch, heads, head_dim, state, groups, chunk), strict=True))
                working = mamba_working_set(config, batch, seq, dtype)
                rows.append({**shape_fields, "seq": seq, **counted, **working})
    if out is not None:
        release = transformers.__version__
        out.write_text(
            json.dumps({"transformers": release, "dtype": str(dtype), "rows": rows}, indent=1) + "\n"
        )


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
    mamba = dict(
        vocab_size=512,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        mamba_n_heads=8,
        mamba_d_head=16,
        mamba_d_state=16,
        shared_intermediate_size=128,
    )
    granite_moe = dict(num_local_experts=8, num_experts_per_tok=2, intermediate_size=32)
    bamba = {k: v for k, v in mamba.items() if k != "shared_intermediate_size"} | {"intermediate_size": 128}
    families = {
        "qwen3_5_text": (transformers.Qwen3_5TextConfig, transformers.Qwen3_5ForCausalLM, sizes, {}),
        "qwen3_5_moe_text": (
            transformers.Qwen3_5MoeTextConfig,
            transformers.Qwen3_5MoeForCausalLM,
            sizes,
            experts,
        ),
        "qwen3_next": (transformers.Qwen3NextConfig, transformers.Qwen3NextForCausalLM, sizes, experts),
        "granitemoehybrid": (
            transformers.GraniteMoeHybridConfig,
            transformers.GraniteMoeHybridForCausalLM,
            mamba,
            dict(num_local_experts=0),
        ),
        "granitemoehybrid (MoE)": (
            transformers.GraniteMoeHybridConfig,
            transformers.GraniteMoeHybridForCausalLM,
            mamba,
            granite_moe,
        ),
        "bamba": (transformers.BambaConfig, transformers.BambaForCausalLM, bamba, {}),
    }
    print(f"transformers {transformers.__version__}")
    for name, (config_class, model_class, family_sizes, extra) in families.items():
        full, linear = ("attention", "mamba") if "mamba_n_heads" in family_sizes else (FULL, LINEAR)
        counted, estimated = {}, {}
        for types in ([full], [full, linear], [full, full]):
            kinds: dict[str, Any] = {"layer_types": list(types)}
            if config_class is transformers.BambaConfig:  # attention where its indices say
                kinds = {"attn_layer_indices": [i for i, t in enumerate(types) if t == full]}
            config = config_class(**family_sizes, **extra, num_hidden_layers=len(types), **kinds)
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


# What a short-convolution count leaves out: the projections' products (the block's GEMMs), and
# in a training count the loss that starts the backward (y.float().sum()).
SHORT_CONV_PRODUCTS = frozenset({"aten.mm", "aten.addmm"})
LOSS_OPS = ("aten._to_copy", "aten.sum", "aten.ones_like")


class ConvKernelCounter(KernelCounter):
    """KernelCounter with the depthwise convolution counted (a short convolution's is memory-bound
    work of the mixer's own), and the operations in order (name, bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket)
        if name not in VIEWS and name not in SHORT_CONV_PRODUCTS:
            nbytes = _nbytes(list(args)) + _nbytes(out)
            self.kernels += 1
            self.bytes += nbytes
            self.ops.append((name, nbytes))
        return out


def lfm2_config(hidden: int, width: int = 3, *, bias: bool = False, layers: int = 2) -> Any:
    """A tiny LFM2 config whose layers after the first are short convolutions of `width`."""
    import transformers

    return transformers.Lfm2Config(
        vocab_size=512,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        block_auto_adjust_ff_dim=False,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        conv_L_cache=width,
        conv_bias=bias,
        layer_types=(["full_attention"] + ["conv"] * layers)[:layers],
    )


def count_short_conv_training(
    config: Any, batch: int, seq: int, dtype: torch.dtype, *, autocast: bool = False
) -> dict[str, int]:
    """One LFM2 short convolution's training forward and backward at `batch` x `seq` tokens (with
    `autocast`: FP32 weights under CPU autocast to `dtype`); the backward less the loss's ops."""
    from transformers.models.lfm2.modeling_lfm2 import Lfm2ShortConv

    torch.manual_seed(0)
    mixer = Lfm2ShortConv(config, 1).to(torch.float32 if autocast else dtype)
    x = torch.randn(batch, seq, config.hidden_size, dtype=dtype, requires_grad=True)
    saved: list[torch.Tensor] = []

    def keep(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    forward, calls = ConvKernelCounter(), CallCounter()
    with (
        torch.autocast("cpu", dtype=dtype, enabled=autocast),
        calls,
        forward,
        torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t),
    ):
        y = mixer(x)
    kept = _kept_bytes(saved, mixer, x)
    backward = ConvKernelCounter()
    with backward:
        y.float().sum().backward()
    first = 0
    while first < len(backward.ops) and backward.ops[first][0] in LOSS_OPS:
        first += 1
    mixer_ops = backward.ops[first:]
    if autocast:  # the projections' weight gradients cast back to FP32 (the block's casts)
        projections = {6 * mixer.in_proj.weight.numel(), 6 * mixer.out_proj.weight.numel()}
        mixer_ops = [op for op in mixer_ops if not (op[0] == "aten._to_copy" and op[1] in projections)]
    return {
        "kernels": forward.kernels,
        "bytes": forward.bytes,
        "calls": calls.calls,
        "saved": kept,
        "backward_kernels": len(mixer_ops),
        "backward_bytes": sum(b for _, b in mixer_ops),
    }


def count_short_conv_generation(
    config: Any, batch: int, dtype: torch.dtype, *, prompt: int, prefill: bool
) -> dict[str, int]:
    """One LFM2 short convolution's prompt or decode step in a model whose second layer is one."""
    import transformers

    torch.manual_seed(0)
    model = transformers.Lfm2ForCausalLM(config).eval().to(dtype)
    mixer = model.model.layers[1].conv
    return _count_model_generation(
        model, mixer, batch, prompt=prompt, prefill=prefill, counter=ConvKernelCounter
    )


def estimated_short_conv(
    arch: TransformerArch, batch: int, seq: int, act: int, *, autocast: bool = False
) -> dict[str, float]:
    """The estimator's figures for one short convolution of `arch` (short_conv.mixer_kernel)."""
    dt = ActivationDtypes(act=act, res=act, mask=0, amp=autocast)
    k = short_conv.mixer_kernel(arch, dt, batch, seq, decode=False, training=True)
    return {
        "kernels": k.kernel_launches,
        "bytes": k.bytes,
        "calls": k.ops + short_conv.PROJECTION_CALLS,
        "saved": batch * seq * short_conv.saved_bytes_per_token(arch, act, seq),
        "backward_kernels": k.backward_launches or 0.0,
        "backward_bytes": k.backward_bytes or 0.0,
    }


def short_conv_table(dtype: torch.dtype, act: int, seqs: list[int]) -> None:
    """LFM2's short convolution counted at a few sizes beside the estimate."""
    print(
        f"{'hidden, width, batch':22} {'seq':>5} {'figure':>16} {'counted':>12} {'estimate':>12} {'ratio':>6}"
    )
    for hidden, width, batch in ((64, 3, 1), (96, 3, 2), (128, 5, 3)):
        config = lfm2_config(hidden, width)
        arch = arch_of(config)
        for seq in seqs:
            counted = count_short_conv_training(config, batch, seq, dtype)
            estimated = estimated_short_conv(arch, batch, seq, act)
            for key, value in counted.items():
                est = estimated[key]
                shape = f"{(hidden, width, batch)!s:22} {seq:5d}"
                print(f"{shape} {key:>16} {value:12,d} {est:12,.0f} {est / value:6.2f}")
        decode = count_short_conv_generation(config, batch, dtype, prompt=16, prefill=False)
        est = batch * hidden * short_conv.decode_bytes_per_channel(arch, act, batch)
        counted = decode["bytes"]
        print(f"{'':22} {'dec':>5} {'bytes':>16} {counted:12,d} {est:12,.0f} {est / counted:6.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--seq", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--decode-calls", action="store_true", help="the decode step's calls per layer kind")
    parser.add_argument(
        "--mixer",
        choices=("gated-deltanet", "mamba2", "short-conv"),
        default="gated-deltanet",
        help="which layer to count",
    )
    parser.add_argument("--json", type=Path, help="with --mixer mamba2: every count as JSON")
    args = parser.parse_args(argv)
    if args.decode_calls:
        decode_calls()
        return 0
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    act = 2 if args.dtype == "bf16" else 4
    if args.mixer == "mamba2":
        mamba_table(dtype, act, args.seq, args.json)
        return 0
    if args.mixer == "short-conv":
        short_conv_table(dtype, act, args.seq)
        return 0
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
