"""LFM2's gated short convolutions: the estimator against transformers' module.

The formulas in estimate/short_conv.py were read off `Lfm2ShortConv` at a hidden size of 64-256
and width 3; here the module is counted again (benchmarks/linear_attention_counts.py --mixer
short-conv) at other sizes, widths, batches, lengths and precisions, and the model's parameters,
cache and decode calls are weighed against the estimator's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fitbench.errors import FitbenchError
from fitbench.estimate import generate_ops, kv_cache, short_conv
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.hf_config import arch_from_hf_config
from fitbench.workloads.workload import Workload

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "Lfm2Config"):
    pytest.skip("this transformers has no LFM2", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import linear_attention_counts as counts  # noqa: E402
from generate_ops_families import forward_calls  # noqa: E402

pytestmark = pytest.mark.torch

# LFM2-1.2B's config as published (the library's file holds it too).
LFM2_1_2B = {
    "model_type": "lfm2",
    "vocab_size": 65536,
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "block_ff_dim": 12288,
    "block_auto_adjust_ff_dim": True,
    "block_ffn_dim_multiplier": 1.0,
    "block_multiple_of": 256,
    "conv_L_cache": 3,
    "conv_bias": False,
    "full_attn_idxs": [2, 5, 8, 10, 12, 14],
    "max_position_embeddings": 128000,
    "tie_embedding": True,
}


def _workload(arch: TransformerArch, **fields: object) -> Workload:
    base: dict[str, object] = dict(name="lfm2", arch=arch, precision="bf16", batch_size=2)
    base.update(fields)
    return Workload(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("hidden", "width", "batch", "seq", "dtype", "autocast"),
    [
        (80, 3, 1, 50, torch.bfloat16, False),
        (48, 4, 3, 33, torch.bfloat16, False),
        (112, 2, 2, 300, torch.float32, False),
        (64, 3, 2, 40, torch.bfloat16, True),
    ],
)
def test_training_counts_hold_at_other_sizes(
    hidden: int, width: int, batch: int, seq: int, dtype: torch.dtype, autocast: bool
) -> None:
    config = counts.lfm2_config(hidden, width)
    arch = counts.arch_of(config)
    act = 2 if dtype == torch.bfloat16 else 4
    counted = counts.count_short_conv_training(config, batch, seq, dtype, autocast=autocast)
    estimated = counts.estimated_short_conv(arch, batch, seq, act, autocast=autocast)
    if autocast:  # the weights' 16-bit copies are the block's autocast casts (the input is 16-bit)
        projections = sum(fin * fout for _, fin, fout in arch.linear_attention_linears())
        counted["saved"] -= 2 * (projections + hidden * width)
        counted["kernels"] -= 2  # in_proj's and out_proj's casts: read FP32, write 16 bits
        counted["bytes"] -= 6 * projections
    for key in ("calls", "saved"):
        assert estimated[key] == counted[key], key
    assert estimated["kernels"] == pytest.approx(counted["kernels"], abs=1)
    assert estimated["backward_kernels"] == pytest.approx(counted["backward_kernels"], abs=1)
    assert estimated["bytes"] == pytest.approx(counted["bytes"], rel=0.04)
    assert estimated["backward_bytes"] == pytest.approx(counted["backward_bytes"], rel=0.04)


@pytest.mark.parametrize(("hidden", "width", "batch"), [(96, 3, 1), (64, 4, 3)])
def test_a_decode_step_and_a_prompt_count_as_estimated(hidden: int, width: int, batch: int) -> None:
    config = counts.lfm2_config(hidden, width)
    arch = counts.arch_of(config)
    decode = counts.count_short_conv_generation(config, batch, torch.bfloat16, prompt=20, prefill=False)
    assert decode["bytes"] == batch * hidden * short_conv.decode_bytes_per_channel(arch, 2, batch)
    assert decode["kernels"] == short_conv.DECODE_LAUNCHES
    assert decode["calls"] == short_conv.DECODE_CALLS
    prefill = counts.count_short_conv_generation(config, batch, torch.bfloat16, prompt=20, prefill=True)
    assert prefill["calls"] == short_conv.PREFILL_CALLS + short_conv.PROJECTION_CALLS
    assert short_conv.prefill_extra_calls(arch) == arch.linear_layers * (prefill["calls"] - decode["calls"])


def test_working_sets_hold_the_counted_live_bytes() -> None:
    """The largest live bytes of a prompt (no_grad) and of a backward, counted as the caching
    allocator would see them (LiveBytes), against the estimator's per-token figures."""
    from transformers.models.lfm2.modeling_lfm2 import Lfm2ShortConv

    config = counts.lfm2_config(96, 3)
    arch = counts.arch_of(config)
    mixer = Lfm2ShortConv(config, 1).to(torch.bfloat16)
    tokens = 2 * 200
    x = torch.randn(2, 200, 96, dtype=torch.bfloat16)
    live = counts.LiveBytes()
    with torch.no_grad(), live:
        mixer(x)
    assert tokens * short_conv.prefill_transient_bytes_per_token(arch, 2) == pytest.approx(live.peak, rel=0.1)
    x.requires_grad_(True)
    y = mixer(x)
    live = counts.LiveBytes()
    with live:
        y.backward(torch.ones_like(y))
    assert tokens * short_conv.backward_transient_bytes_per_token(arch, 2) == pytest.approx(
        live.peak, rel=0.2
    )


def test_the_published_layout_reads_to_the_parameter() -> None:
    """LFM2-1.2B: ten conv layers, six attention ones, an MLP of two thirds of block_ff_dim; the
    parameter count equals the model transformers builds (on the meta device)."""
    arch = arch_from_hf_config(LFM2_1_2B)
    assert isinstance(arch, TransformerArch)
    assert (arch.linear_layers, arch.attention_layers, arch.intermediate_size) == (10, 6, 8192)
    fields = {k: v for k, v in LFM2_1_2B.items() if k != "model_type"}
    with torch.device("meta"):
        model = transformers.Lfm2ForCausalLM(transformers.Lfm2Config(**fields))
    assert arch.param_count() == sum(p.numel() for p in model.parameters())


def test_the_cache_keeps_the_attention_keys_and_the_convolutions_inputs() -> None:
    """What generate's cache holds after a prompt, to the byte: keys and values of the attention
    layers, `conv_L_cache` inputs a channel of the conv layers."""
    config = counts.lfm2_config(64, 3, layers=4)
    arch = counts.arch_of(config)
    model = transformers.Lfm2ForCausalLM(config).eval().to(torch.bfloat16)
    cache = transformers.DynamicCache(config=model.config)
    prompt, batch = 24, 3
    with torch.no_grad():
        model(torch.randint(3, 500, (batch, prompt)), past_key_values=cache, use_cache=True)
    held = 0
    for layer in cache.layers:
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            held += t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0
        for name in ("conv_states", "recurrent_states"):
            for t in (getattr(layer, name, None) or {}).values():
                held += t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0
    assert held > 3 * batch * 64 * 3 * 2  # the conv layers' states are in it
    w = _workload(arch, mode="infer", prompt_tokens=prompt, new_tokens=1, batch_size=batch)
    assert kv_cache.kv_cache_bytes(w, tokens=prompt) == held


def test_decode_calls_of_each_layer_kind_equal_transformers() -> None:
    """A decode step's calls per layer, attention and conv, and outside the layers, for the
    installed transformers (generate_ops' family tables)."""
    release = transformers.__version__

    def model(layers: int, conv: bool) -> object:
        config = counts.lfm2_config(64, 3, layers=layers)
        if not conv:
            config.layer_types = ["full_attention"] * layers
        torch.manual_seed(0)
        built = transformers.Lfm2ForCausalLM(config).eval()
        built.config._attn_implementation = "sdpa"
        return built

    arch = counts.arch_of(counts.lfm2_config(64, 3, layers=3))
    attention = forward_calls(model(2, False)) - forward_calls(model(1, False))
    conv = forward_calls(model(3, True)) - forward_calls(model(2, True))
    parts = generate_ops.layer_calls(arch, moe=False, sliding=False, window_full=False, transformers=release)
    assert attention == parts
    assert conv == parts + generate_ops.linear_layer_extra_calls(arch, release)


def test_lora_on_short_convolutions_is_refused_in_one_line() -> None:
    arch = arch_from_hf_config(LFM2_1_2B)
    with pytest.raises(FitbenchError, match="short-convolution"):
        _workload(arch, mode="train", seq_len=512, peft="lora")


@pytest.mark.parametrize(
    ("field", "value"),
    [("full_attn_idxs", [0, 99]), ("layer_types", ["conv"] * 3), ("block_ffn_dim_multiplier", "big")],
)
def test_bad_layouts_are_refused_in_one_line(field: str, value: object) -> None:
    with pytest.raises(FitbenchError) as err:
        arch_from_hf_config({**LFM2_1_2B, field: value})
    assert "\n" not in err.value.message
