"""estimate/generation_reserve.py lays out a decoder's load, prefill and decode-step allocations
in transformers' order (Llama-shaped, Gemma, grouped_mm experts, latent attention, fused
projections, GPT-NeoX's parallel blocks); here the real model's own, traced on the meta device
and replayed through the same allocator rules (benchmarks/allocator_replay.py), must give the
same reserve above the allocated peak, for each laid-out family and for eager attention."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import allocator_replay
from fitbench.estimate import generation_reserve
from fitbench.workloads import library

pytestmark = pytest.mark.torch

POINTS = [
    ("llama-3.2-1b-instruct", 16, 1024),  # tied embeddings
    ("qwen2.5-1.5b-instruct", 8, 1024),  # tied, q/k/v biases
    ("mistral-7b-instruct-v0.3", 4, 2048),  # untied
    ("llama-3.2-3b-instruct", 2, 512),
    ("qwen3-8b", 8, 2048),  # query and key norms
    ("gemma-2-2b-it", 4, 2048),  # eager attention (soft-capped scores), post norms, two masks
    ("gemma-3-4b-it", 8, 2048),  # Gemma norms on queries and keys, a windowed boolean mask
    ("gemma-3-1b-it", 8, 4096),  # the prompt well past the window
    ("phi-3-mini-4k-instruct", 4, 2048),  # fused q/k/v and gate/up projections
    ("olmoe-1b-7b", 4, 1024),  # grouped_mm experts, query/key norms
    ("mixtral-8x7b-instruct", 2, 512),  # FP32 routing weights
    ("qwen2-57b-a14b-instruct", 2, 1024),  # gated shared experts first
    ("deepseek-v2-lite-chat", 2, 1024),  # latent attention, FP32 router, shared experts after
    ("glm-4.5-air", 2, 2048),  # half-rotary heads, an FP32 router weight
    ("ernie-4.5-21b-a3b", 4, 2048),  # FP32 interleaved rotary, shared experts first
    ("olmo-2-7b", 4, 2048),  # norms after attention and MLP only, FP32 rotary; the first decode
    # step's longer caches find no freed block: the reserve doubles
    ("gpt-neox-20b", 2, 2000),  # LayerNorm, fused q/k/v, a rotated quarter, parallel GELU MLP
    ("olmo-3-7b", 4, 2048),  # OLMo-2's blocks (its twin's layout), three of four layers windowed
    ("olmo-3-7b", 2, 8192),  # the prompt past the window
    ("exaone-4.0-32b", 2, 2048),  # post-norms with Llama's RMSNorm, head-wise query/key norms,
    ("exaone-4.0-32b", 8, 1024),  # their FP32 statistics a megabyte and more, global layers NoPE
    ("seed-oss-36b-instruct", 2, 1024),  # q/k/v biases, head_dim 128 beside 80 heads
    ("internlm3-8b-instruct", 4, 2048),  # Llama's blocks under their own model_type
]
EAGER_POINTS = [
    ("llama-3.2-1b-instruct", 4, 2048),
    ("qwen3-0.6b", 8, 1024),
]


def _check(name, batch, prompt, attention):
    """The prefill and one decode step (two new tokens: the trace's one step)."""
    w = library.workload_for_model(name).replace(
        mode="infer",
        batch_size=batch,
        prompt_tokens=prompt,
        new_tokens=2,
        precision="bf16",
        attention=attention,
    )
    assert generation_reserve.applies(w)
    traced = allocator_replay.replay_point(name, batch, prompt, 1, attention=attention)
    laid_out = generation_reserve.replayed_gap(
        w, 1, decode=True, transformers=allocator_replay.transformers.__version__
    )
    assert laid_out == pytest.approx(traced["gap_bytes"], rel=0.02, abs=32 << 20)


@pytest.mark.parametrize(("name", "batch", "prompt"), POINTS)
def test_the_laid_out_prefill_reserves_what_the_traced_one_does(name, batch, prompt):
    _check(name, batch, prompt, "fused")


@pytest.mark.parametrize(("name", "batch", "prompt"), EAGER_POINTS)
def test_eager_attention_is_laid_out_as_traced(name, batch, prompt):
    _check(name, batch, prompt, "eager")


@pytest.mark.slow
def test_the_decode_steps_regrow_the_caches_as_traced():
    """100 decode steps of a wide batch after a short prompt (Mistral-7B's blocks, 16 of them):
    each step's longer copies of the keys and values take new blocks and leave the old ones
    cached; the laid-out regrowth leaves what the traced steps do."""
    base = library.workload_for_model("mistral-7b-instruct-v0.3")
    w = base.replace(
        mode="infer",
        batch_size=64,
        prompt_tokens=50,
        new_tokens=100,
        precision="bf16",
        arch=dataclasses.replace(base.arch, num_layers=16),
    )
    traced = allocator_replay.replay_workload(w)
    laid_out = generation_reserve.replayed_gap(w, 1, decode=True)
    assert laid_out > 1.2 * generation_reserve.replayed_gap(w, 1, decode=False)
    assert laid_out == pytest.approx(traced["gap_bytes"], rel=0.05)


def test_a_family_not_laid_out_keeps_its_tied_heads_freed_block():
    """Command-R7B (parallel blocks, LayerNorm: not laid out) ties a 256k-vocabulary head: the
    head transformers builds and frees at load stays cached, and a short generation is carved
    from it, so the reserve above the weights is that block (2.1 GB), as the meta-device trace
    replays it; the share for outgrown caches alone left 0.15 GB."""
    from fitbench.catalog import get_gpu
    from fitbench.estimate.api import estimate

    w = library.workload_for_model("c4ai-command-r7b-12-2024").replace(
        mode="infer", batch_size=1, prompt_tokens=512, new_tokens=8, precision="bf16"
    )
    assert not generation_reserve.applies(w)
    traced = allocator_replay.replay_workload(w)
    parts = estimate(w, get_gpu("h200")).memory.parts
    above = parts["kv_cache"] + parts["temporaries"] + parts["fragmentation"]
    assert above == pytest.approx(traced["reserved_above_weights_bytes"], rel=0.08)
    assert above >= w.arch.vocab_size * w.arch.hidden_size * 2
