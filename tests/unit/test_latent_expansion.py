"""Latent attention as transformers decodes it: the cache holds the compressed latent, and every
decode step passes the whole cached latent through kv_b_proj again (expand_kv). The estimator
counts that work for the mode that runs transformers' code and not for MLA-aware engines."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import speed, transformer_cost
from fitbench.estimate.assumptions import estimate_assumptions
from fitbench.estimate.profile import get_profile
from fitbench.workloads import library
from fitbench.workloads.hf_config import workload_from_data
from fitbench.workloads.presets import get_workload

H200 = get_gpu("h200")
TINY_DEEPSEEK = {
    "model_type": "deepseek_v2",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "kv_lora_rank": 32,
    "q_lora_rank": None,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "vocab_size": 256,
    "max_position_embeddings": 256,
}


def _long_generation():
    return library.workload_for_model("deepseek-v2-lite-chat").replace(
        batch_size=8, prompt_tokens=4096, new_tokens=256
    )


def test_the_expansion_kernels_count_the_whole_context_every_layer() -> None:
    w = _long_generation()
    arch = w.arch
    gemm, keys = transformer_cost.latent_expansion_kernels(w, 8, 1000)
    heads, r = arch.num_heads, arch.kv_lora_rank
    kv_out = heads * (arch.qk_nope_head_dim + arch.v_head_dim)
    assert gemm.kind == "matmul" and gemm.count == keys.count == arch.num_layers
    assert gemm.flops == pytest.approx(2 * 8 * 1000 * r * kv_out)
    assert gemm.bytes == pytest.approx(8 * 1000 * (r + kv_out) * 2 + r * kv_out * 2)
    key_width = heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim)
    extra_read = key_width + heads * arch.v_head_dim - (r + arch.qk_rope_head_dim)
    assert keys.bytes == pytest.approx(8 * 1000 * (2 * key_width + extra_read) * 2)
    # linear in the context: the whole cache, every step
    twice = transformer_cost.latent_expansion_kernels(w, 8, 2000)
    assert twice[0].flops == pytest.approx(2 * gemm.flops) and twice[1].bytes == pytest.approx(2 * keys.bytes)


def test_transformers_decode_steps_pay_for_it_and_engines_do_not() -> None:
    w = _long_generation()
    default = get_profile("torch", "default", use_user=False)
    assert default.expands_latent_cache and not default.as_engine().expands_latent_cache
    expanding = speed.generation(w, H200, default)
    latent_only = speed.generation(w, H200, dataclasses.replace(default, expands_latent_cache=False))
    mean_context = w.prompt_tokens + w.new_tokens // 2
    kernels = transformer_cost.latent_expansion_kernels(w, w.batch_size, mean_context)
    assert expanding.decode.flops - latent_only.decode.flops == pytest.approx(
        sum(k.flops * k.count for k in kernels)
    )
    assert expanding.decode.gpu_seconds > latent_only.decode.gpu_seconds
    # what any implementation must read is unchanged: the roofline holds the latent cache only
    assert expanding.roofline_tokens_per_second == pytest.approx(latent_only.roofline_tokens_per_second)
    lines = estimate_assumptions(w, w.precision, H200, default)
    assert any("re-expands" in line for line in lines)
    assert not any(
        "re-expands" in line for line in estimate_assumptions(w, w.precision, H200, default.as_engine())
    )


def test_models_without_latent_attention_are_unchanged() -> None:
    w = get_workload("llm-6b").replace(batch_size=8, prompt_tokens=2048, new_tokens=64)
    default = get_profile("torch", "default", use_user=False)
    a = speed.generation(w, H200, default)
    b = speed.generation(w, H200, dataclasses.replace(default, expands_latent_cache=False))
    assert a.decode.gpu_seconds == b.decode.gpu_seconds


@pytest.mark.torch
def test_transformers_passes_the_whole_cached_latent_through_kv_b_proj_each_step() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from fitbench.backends.torch.models import build_model

    w = workload_from_data(
        TINY_DEEPSEEK,
        name="tiny-mla",
        source="test",
        precision="fp32",
        batch_size=2,
        prompt_tokens=10,
        new_tokens=3,
    )
    model, _ = build_model(w, device="cpu", dtype=torch.float32)
    rows: list[int] = []
    for layer in model.model.layers:
        layer.self_attn.kv_b_proj.register_forward_hook(lambda _m, args, _out: rows.append(args[0].shape[-2]))
    ids = torch.randint(0, 256, (2, 10))
    model.generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, min_new_tokens=3, do_sample=False
    )
    layers = w.arch.num_layers
    # the prefill expands the prompt; each decode step expands the whole cache, one token longer
    assert rows == [10] * layers + [11] * layers + [12] * layers
