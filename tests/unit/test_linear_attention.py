"""Qwen3-Next's and Qwen3.5's Gated DeltaNet layers: the estimator against transformers' module.

The formulas in estimate/linear_attention.py were read off the real module at a few shapes; here
the module is counted again (benchmarks/linear_attention_counts.py) at shapes they were not read
at, and the cache transformers keeps is weighed against the estimator's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fitbench.errors import FitbenchError
from fitbench.estimate import generate_ops, kv_cache, linear_attention, speed, transformer_cost
from fitbench.estimate.profile import get_profile
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.hf_config import arch_from_hf_config
from fitbench.workloads.workload import Workload

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "Qwen3_5TextConfig"):
    pytest.skip("this transformers has no Qwen3.5", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import linear_attention_counts as counts  # noqa: E402
from generate_ops_families import forward_calls  # noqa: E402

pytestmark = pytest.mark.torch

FULL, LINEAR = "full_attention", "linear_attention"


def _workload(arch: TransformerArch, **fields: object) -> Workload:
    base: dict[str, object] = dict(name="hybrid", arch=arch, precision="bf16", batch_size=2)
    base.update(fields)
    return Workload(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("batch", "key_heads", "value_heads", "key_dim", "value_dim", "seq"),
    [(2, 3, 6, 32, 24, 192), (1, 4, 4, 48, 40, 100)],
)
def test_training_counts_hold_at_other_shapes(
    batch: int, key_heads: int, value_heads: int, key_dim: int, value_dim: int, seq: int
) -> None:
    config = counts.text_config(key_heads, value_heads, key_dim, value_dim)
    counted = counts.count_training(config, batch, seq, torch.bfloat16)
    estimated = counts.estimated_training(counts.arch_of(config), batch, seq, act=2)
    assert estimated["calls"] == counted["calls"]
    for key, tolerance in (
        ("kernels", 0.08),
        ("backward_kernels", 0.05),
        ("bytes", 0.05),
        ("saved", 0.06),
        ("backward_bytes", 0.05),
    ):
        assert estimated[key] == pytest.approx(counted[key], rel=tolerance), key


def test_decode_step_reads_and_writes_the_state_fourteen_times() -> None:
    """The bytes a decode step adds per FP32 state element, between two key sizes (the queries'
    and keys' own passes grow with it too, by about 4), and its kernels."""
    small = counts.count_decode(counts.text_config(2, 4, 32, 32), 2, torch.bfloat16)
    large = counts.count_decode(counts.text_config(2, 4, 64, 32), 2, torch.bfloat16)
    added_state = 2 * 4 * (64 - 32) * 32
    per_element = (large["bytes"] - small["bytes"]) / added_state
    assert per_element == pytest.approx(linear_attention.DECODE_STATE_BYTES, rel=0.1)
    assert small["kernels"] == linear_attention.DECODE_LAUNCHES[True] - 1  # less the convolution


def test_the_cache_holds_the_attention_layers_keys_and_the_linear_layers_state() -> None:
    """Prefill a tiny model and weigh every tensor transformers' cache keeps."""
    from transformers import DynamicCache

    config = counts.text_config(2, 4, 16, 24, layers=4)
    config.layer_types = [LINEAR, FULL, LINEAR, LINEAR]
    model = transformers.Qwen3_5ForCausalLM(config).eval().to(torch.bfloat16)
    batch, prompt = 3, 20
    cache = DynamicCache(config=model.config)
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
    arch = counts.arch_of(config)
    assert arch.linear_layers == 3
    w = _workload(arch, mode="infer", batch_size=batch, prompt_tokens=prompt, new_tokens=1)
    assert kv_cache.kv_cache_bytes(w, tokens=prompt) == held


def test_decode_calls_of_each_layer_kind_equal_transformers() -> None:
    """A linear-attention layer and an attention layer each add the calls generate_ops says."""

    def model(types: list[str]) -> object:
        config = counts.text_config(2, 4, 16, 16, layers=len(types))
        config.layer_types = types
        torch.manual_seed(0)
        return transformers.Qwen3_5ForCausalLM(config).eval()

    def estimated(types: list[str]) -> int:
        config = counts.text_config(2, 4, 16, 16, layers=len(types))
        config.layer_types = types
        return generate_ops.layers_calls(counts.arch_of(config), 16, transformers.__version__)

    one = forward_calls(model([FULL]))
    assert forward_calls(model([FULL, LINEAR])) - one == estimated([FULL, LINEAR]) - estimated([FULL])
    assert forward_calls(model([FULL, FULL])) - one == estimated([FULL, FULL]) - estimated([FULL])


def test_a_long_training_step_pays_the_chunk_loop_on_the_host() -> None:
    """Twice the sequence: the mixers' host operations grow by CHUNK_CALLS per added chunk and
    layer, and the backward's whole-tensor gradients make its bytes grow faster than the tokens."""
    arch = counts.arch_of(counts.text_config(16, 32, 128, 128, layers=8))
    profile = get_profile("torch", "default", use_user=False)

    def mixer(seq: int) -> object:
        ks = speed.training_kernels(_workload(arch, mode="train", seq_len=seq, batch_size=1), profile)
        return next(k for k in ks if k.name == "linear_attention")

    short, long = mixer(1024), mixer(2048)
    assert long.ops - short.ops == linear_attention.CHUNK_CALLS * (32 - 16)
    assert (long.backward_bytes or 0) > 2.5 * (short.backward_bytes or 0)
    assert long.bytes == pytest.approx(2 * short.bytes, rel=0.01)


def test_layer_types_that_name_other_kinds_are_refused_in_one_line() -> None:
    config = counts.text_config(2, 4, 16, 16, layers=2).to_dict()
    config["layer_types"] = [FULL, "sliding_attention"]
    with pytest.raises(FitbenchError, match="'layer_types' must list 'linear_attention' or 'full_attention'"):
        arch_from_hf_config(config)


def test_only_the_attention_layers_keep_keys_and_values() -> None:
    arch = counts.arch_of(counts.text_config(2, 4, 16, 16, layers=8))
    assert (arch.attention_layers, arch.linear_layers) == (2, 6)
    w = _workload(arch, mode="infer", prompt_tokens=100, new_tokens=28)
    per_token = kv_cache.kv_bytes_per_token_layer(w)
    state = kv_cache.linear_state_bytes_per_sequence(w)
    assert kv_cache.kv_cache_bytes(w) == 2 * (2 * 128 * per_token + state)
    assert kv_cache.kv_cache_bytes_per_token(w) == 2 * per_token


def test_a_decode_step_attends_and_appends_in_the_attention_layers_only() -> None:
    arch = counts.arch_of(counts.text_config(2, 4, 16, 16, layers=8))
    w = _workload(arch, mode="infer", prompt_tokens=100, new_tokens=28)
    by_name = {k.name: k for k in transformer_cost.forward_kernels(w, 2, 1, kv_len=120)}
    assert by_name["attention"].count == arch.attention_layers == 2
    assert by_name["linear_attention"].count == arch.linear_layers == 6
    assert by_name["in_proj_qkv"].count == 6 and by_name["q_proj"].count == 2
    recurrent, _ = arch.linear_state_elements()
    assert by_name["linear_attention"].bytes >= 2 * linear_attention.DECODE_STATE_BYTES * recurrent
    append = transformer_cost.cache_append_kernel(w, 2, 120)
    assert append.count == arch.attention_layers


@pytest.mark.parametrize(("key_heads", "prompt"), [(2, 100), (4, 200)])
def test_a_prompt_issues_the_chunk_loops_calls_beyond_a_decode_steps(key_heads: int, prompt: int) -> None:
    """generate's prefill runs the chunked rule where a decode step runs the recurrent one: the
    calls the estimate adds to the decode step's count for the prefill are those counted."""
    config = counts.text_config(key_heads, 4, 16, 16)
    prefill = counts.count_prefill(config, 2, torch.bfloat16, prompt=prompt)["calls"]
    decode = counts.count_decode(counts.text_config(key_heads, 4, 16, 16), 2, torch.bfloat16)["calls"]
    arch = counts.arch_of(counts.text_config(key_heads, 4, 16, 16, layers=4))
    assert arch.linear_layers == 3
    assert linear_attention.prefill_extra_calls(arch, prompt) == 3 * (prefill - decode)


@pytest.mark.parametrize(("layers", "linear"), [(4, 3), (7, 4), (48, 36), (9, 9), (5, 1), (40, 30)])
def test_the_layer_placement_keeps_the_counted_kinds(layers: int, linear: int) -> None:
    """Any count of linear-attention layers is placed so that exactly that many blocks are theirs,
    the attention ones spread evenly and the last block attending (as Qwen's interval puts it)."""
    arch = counts.arch_of(counts.text_config(2, 4, 16, 16, layers=layers))
    arch = arch.__class__(**{**arch.__dict__, "linear_layers": linear})
    kinds = [arch.is_linear_attention_layer(i) for i in range(layers)]
    assert sum(kinds) == linear
    assert kinds[-1] == (linear == layers)
