"""A generation's allocator reserve above its allocated peak (estimate/generation_reserve.py):
transformers' load and prefill of a Llama-shaped decoder replayed through the allocator's rules.
tests/backends/test_generation_reserve_trace.py holds the layout to the real model's trace; here, what
the estimate does with it."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import generation_reserve
from fitbench.estimate.api import estimate
from fitbench.workloads import library


def llama_1b(**overrides):
    shape = {"mode": "infer", "batch_size": 16, "prompt_tokens": 1024, "new_tokens": 32, "precision": "bf16"}
    return library.workload_for_model("llama-3.2-1b-instruct").replace(**{**shape, **overrides})


def test_it_lays_out_llama_shaped_generation_only():
    assert generation_reserve.applies(llama_1b())
    assert not generation_reserve.applies(llama_1b(mode="train", seq_len=1024))
    assert not generation_reserve.applies(llama_1b(kv_cache="int8"))  # a quantized cache runs otherwise
    assert generation_reserve.applies(library.workload_for_model("olmoe-1b-7b").replace(mode="infer"))
    assert generation_reserve.applies(library.workload_for_model("glm-4.5-air").replace(mode="infer"))
    assert not generation_reserve.applies(library.workload_for_model("gpt-oss-20b").replace(mode="infer"))
    gemma = library.workload_for_model("gemma-2-2b-it").replace(mode="infer", prompt_tokens=64, new_tokens=8)
    assert generation_reserve.applies(gemma)  # Gemma's blocks are laid out too
    assert not generation_reserve.applies(gemma.replace(gpus=2, strategy="tp"))
    for other in ("gpt-j-6b", "starcoder2-15b", "falcon-7b"):  # LayerNorm/GELU, parallel blocks
        assert not generation_reserve.applies(library.workload_for_model(other).replace(mode="infer"))
        assert (
            generation_reserve.reserve_excess(library.workload_for_model(other).replace(mode="infer")) == 0.0
        )
    neox = library.workload_for_model("gpt-neox-20b").replace(mode="infer")
    assert generation_reserve.applies(neox)  # GPT-NeoX's parallel blocks, under SDPA
    assert not generation_reserve.applies(neox.replace(attention="eager"))


def test_eager_attention_reserves_what_its_score_blocks_leave():
    """Eager attention allocates and frees batch x heads x prompt^2 score matrices a block; the
    blocks they leave are reserved above the allocated peak where SDPA's are not."""
    fused, eager = (
        llama_1b(batch_size=4, prompt_tokens=2048),
        llama_1b(batch_size=4, prompt_tokens=2048, attention="eager"),
    )
    assert generation_reserve.reserve_excess(eager) > 2 * generation_reserve.reserve_excess(fused)
    events = generation_reserve.prefill_events(eager)
    scores = 4 * eager.arch.num_heads * 2048 * 2048 * 2
    assert max(e[2] for e in events) == scores * 2  # the FP32 softmax
    assert max(e[2] for e in generation_reserve.prefill_events(fused)) <= scores / 8  # the MLP


def test_a_tied_head_leaves_its_discarded_weight_in_the_cache_at_a_small_prompt():
    """Loading ties the LM head to the embedding and frees the head's own weight; a prompt too
    short to reuse that block leaves it reserved above everything allocated."""
    tied = llama_1b(batch_size=1, prompt_tokens=16)
    untied = tied.replace(arch=dataclasses.replace(tied.arch, tie_embeddings=False))
    head = tied.arch.vocab_size * tied.arch.hidden_size * 2
    extra = generation_reserve.reserve_excess(tied) - generation_reserve.reserve_excess(untied)
    assert extra == pytest.approx(head, rel=0.02)


def test_the_reserve_is_part_of_the_peak_not_of_what_must_fit():
    h200 = get_gpu("h200")
    est = estimate(llama_1b(), h200)
    excess = est.memory.details["generation_reserve"]
    assert excess == pytest.approx(generation_reserve.reserve_excess(llama_1b()))
    assert est.breakdown["fragmentation"] >= excess
    assert est.peak_memory_bytes - est.required_memory_bytes == est.breakdown["fragmentation"]
