"""Every architecture family's count equals the parameters of the model transformers builds
from the same (tiny) config on the meta device.

Families transformers ships as remote code only (ChatGLM, Baichuan2, InternLM2) are checked
against published counts in test_model_library.py instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.hf_config import arch_from_hf_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

BASE = {
    "vocab_size": 1000,
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "max_position_embeddings": 256,
}

TINY: dict[str, dict[str, Any]] = {
    "llama": {**BASE, "model_type": "llama"},
    "llama-bias": {
        **BASE,
        "model_type": "llama",
        "attention_bias": True,
        "mlp_bias": True,
        "tie_word_embeddings": True,
    },
    "mistral": {**BASE, "model_type": "mistral", "sliding_window": 32},
    "qwen2": {**BASE, "model_type": "qwen2", "tie_word_embeddings": True},
    "qwen3": {**BASE, "model_type": "qwen3", "head_dim": 32},
    "gemma": {**BASE, "model_type": "gemma", "head_dim": 16},
    "gemma2": {**BASE, "model_type": "gemma2", "head_dim": 16, "sliding_window": 32},
    "gemma3_text": {
        **BASE,
        "model_type": "gemma3_text",
        "head_dim": 16,
        "sliding_window": 32,
        "num_hidden_layers": 7,
    },
    "phi3": {**BASE, "model_type": "phi3", "pad_token_id": 0},
    "olmo": {**BASE, "model_type": "olmo"},
    "olmo2": {**BASE, "model_type": "olmo2"},
    "olmo3": {**BASE, "model_type": "olmo3", "sliding_window": 32},
    "exaone4": {**BASE, "model_type": "exaone4", "head_dim": 32, "sliding_window": 32},
    "exaone4-global": {
        **BASE,
        "model_type": "exaone4",
        "sliding_window": None,
        "layer_types": ["full_attention"] * 4,
    },
    "seed_oss": {**BASE, "model_type": "seed_oss", "head_dim": 32},
    "seed_oss-out-bias": {**BASE, "model_type": "seed_oss", "attention_out_bias": True, "mlp_bias": True},
    "internlm3": {**BASE, "model_type": "internlm3", "head_dim": 16, "qkv_bias": True, "bias": True},
    "helium": {**BASE, "model_type": "helium", "head_dim": 16, "attention_bias": True, "mlp_bias": True},
    "ernie4_5": {**BASE, "model_type": "ernie4_5", "use_bias": True},
    "glm": {**BASE, "model_type": "glm", "pad_token_id": 0, "head_dim": 16},
    "glm4": {**BASE, "model_type": "glm4", "pad_token_id": 0, "head_dim": 16},
    "gpt2": {
        "model_type": "gpt2",
        "vocab_size": 1000,
        "n_embd": 64,
        "n_layer": 3,
        "n_head": 4,
        "n_positions": 128,
    },
    "gptj": {
        "model_type": "gptj",
        "vocab_size": 1000,
        "n_embd": 64,
        "n_layer": 3,
        "n_head": 4,
        "n_positions": 128,
        "rotary_dim": 8,
    },
    "gpt_neox": {"model_type": "gpt_neox", **{k: BASE[k] for k in BASE if k != "num_key_value_heads"}},
    "falcon": {
        "model_type": "falcon",
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "multi_query": True,
        "parallel_attn": True,
        "bias": False,
    },
    "falcon-new": {
        "model_type": "falcon",
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_kv_heads": 2,
        "new_decoder_architecture": True,
        "bias": False,
    },
    "mixtral": {**BASE, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe": {
        **BASE,
        "model_type": "qwen2_moe",
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 80,
        "decoder_sparse_step": 2,
    },
    "qwen3_moe": {
        **BASE,
        "model_type": "qwen3_moe",
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "head_dim": 16,
    },
    "olmoe": {**BASE, "model_type": "olmoe", "num_experts": 6, "num_experts_per_tok": 2},
    "qwen3_next": {
        **BASE,
        "model_type": "qwen3_next",
        "head_dim": 16,
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48,
        "decoder_sparse_step": 2,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 24,
    },
    "qwen3_5_moe_text": {
        **BASE,
        "model_type": "qwen3_5_moe_text",
        "head_dim": 16,
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48,
        "linear_num_key_heads": 4,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "layer_types": ["linear_attention", "full_attention", "linear_attention", "linear_attention"],
    },
    "qwen3_5_text": {
        **BASE,
        "model_type": "qwen3_5_text",
        "head_dim": 32,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 6,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 3,
        "full_attention_interval": 2,
    },
    "granitemoehybrid": {
        **BASE,
        "model_type": "granitemoehybrid",
        "num_local_experts": 0,
        "shared_intermediate_size": 80,
        "mamba_n_heads": 8,
        "mamba_n_groups": 2,
        "mamba_d_state": 16,
        "mamba_d_conv": 3,
        "mamba_proj_bias": True,
        "attention_bias": True,
        "layer_types": ["mamba", "attention", "mamba", "mamba"],
    },
    "granitemoehybrid-moe": {
        **BASE,
        "model_type": "granitemoehybrid",
        "num_local_experts": 6,
        "num_experts_per_tok": 2,
        "intermediate_size": 32,
        "shared_intermediate_size": 48,
        "mamba_n_heads": 4,
        "mamba_d_state": 8,
        "mamba_conv_bias": False,
        "tie_word_embeddings": True,
    },
    "granitemoehybrid-attention": {
        **BASE,
        "model_type": "granitemoehybrid",
        "num_local_experts": 0,
        "position_embedding_type": "rope",
        "layer_types": ["attention"] * 4,
    },
    "bamba": {
        **BASE,
        "model_type": "bamba",
        "attn_layer_indices": [0, 3],
        "mamba_n_heads": 8,
        "mamba_d_state": 16,
        "attention_bias": True,
        "mlp_bias": True,
    },
    "lfm2": {**BASE, "model_type": "lfm2", "block_ff_dim": 192, "full_attn_idxs": [1]},
    "lfm2-bias": {
        **BASE,
        "model_type": "lfm2",
        "block_ff_dim": 200,
        "block_ffn_dim_multiplier": 1.5,
        "block_multiple_of": 32,
        "conv_bias": True,
        "conv_L_cache": 4,
        "layer_types": ["conv", "full_attention", "conv", "conv"],
    },
    "lfm2_moe": {
        **BASE,
        "model_type": "lfm2_moe",
        "moe_intermediate_size": 32,
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "num_dense_layers": 1,
        "layer_types": ["conv", "full_attention", "conv", "conv"],
    },
    "ernie4_5_moe": {
        **BASE,
        "model_type": "ernie4_5_moe",
        "moe_num_experts": 6,
        "moe_k": 2,
        "moe_intermediate_size": 32,
        "moe_num_shared_experts": 2,
        "moe_layer_start_index": 1,
    },
    "deepseek_v2": {
        **BASE,
        "model_type": "deepseek_v2",
        "n_routed_experts": 6,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "n_shared_experts": 2,
        "first_k_dense_replace": 1,
        "kv_lora_rank": 16,
        "q_lora_rank": None,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "num_key_value_heads": 4,
    },
    "deepseek_v3": {
        **BASE,
        "model_type": "deepseek_v3",
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
        "kv_lora_rank": 16,
        "q_lora_rank": 24,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "num_key_value_heads": 4,
        "n_group": 2,
        "topk_group": 1,
    },
    "hunyuan_v1_dense": {**BASE, "model_type": "hunyuan_v1_dense", "head_dim": 32, "attention_bias": True},
    "arcee": {**BASE, "model_type": "arcee", "head_dim": 32},
    "arcee-bias": {**BASE, "model_type": "arcee", "attention_bias": True, "mlp_bias": True},
    "apertus": {**BASE, "model_type": "apertus"},
    "nemotron": {**BASE, "model_type": "nemotron", "head_dim": 32, "attention_bias": True},
    "ministral": {**BASE, "model_type": "ministral", "sliding_window": 32, "head_dim": 32},
    "ministral-pattern": {
        **BASE,
        "model_type": "ministral",
        "head_dim": 16,
        "sliding_window": 32,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
    },
    "ministral3": {**BASE, "model_type": "ministral3", "head_dim": 32},
    "ministral3-window": {**BASE, "model_type": "ministral3", "head_dim": 16, "sliding_window": 32},
    "youtu": {
        **BASE,
        "model_type": "youtu",
        "num_key_value_heads": 4,
        "q_lora_rank": 48,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
    },
    "youtu-no-q-lora-bias": {
        **BASE,
        "model_type": "youtu",
        "num_key_value_heads": 4,
        "q_lora_rank": None,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "attention_bias": True,
        "tie_word_embeddings": False,
    },
    "jais2": {**BASE, "model_type": "jais2"},
    "jais2-no-bias": {**BASE, "model_type": "jais2", "attention_bias": False, "mlp_bias": False},
    "stablelm": {**BASE, "model_type": "stablelm"},
    "stablelm-parallel": {
        **BASE,
        "model_type": "stablelm",
        "use_qkv_bias": True,
        "use_parallel_residual": True,
    },
    "phi": {**BASE, "model_type": "phi", "num_key_value_heads": 4},
    "minicpm3": {
        **BASE,
        "model_type": "minicpm3",
        "num_key_value_heads": 4,
        "q_lora_rank": 48,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
    },
    "gpt_bigcode": {
        "model_type": "gpt_bigcode",
        "vocab_size": 1000,
        "n_embd": 64,
        "n_layer": 3,
        "n_head": 4,
        "n_positions": 128,
    },
    "gpt_bigcode-mha": {
        "model_type": "gpt_bigcode",
        "vocab_size": 1000,
        "n_embd": 64,
        "n_layer": 3,
        "n_head": 4,
        "n_positions": 128,
        "multi_query": False,
    },
    "granitemoe": {**BASE, "model_type": "granitemoe", "num_local_experts": 4, "num_experts_per_tok": 2},
    "granitemoeshared": {
        **BASE,
        "model_type": "granitemoeshared",
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "shared_intermediate_size": 80,
    },
    "dots1": {
        **BASE,
        "model_type": "dots1",
        "head_dim": 32,
        "moe_intermediate_size": 32,
        "n_routed_experts": 8,
        "n_shared_experts": 2,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
    },
    "hunyuan_v1_moe": {
        **BASE,
        "model_type": "hunyuan_v1_moe",
        "head_dim": 16,
        "num_experts": 4,
        "moe_topk": [2, 2, 2, 2],
        "moe_intermediate_size": [96, 96, 96, 96],
    },
    "glm4_moe_lite": {
        **BASE,
        "model_type": "glm4_moe_lite",
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "n_shared_experts": 1,
        "mlp_layer_types": ["dense", "dense", "sparse", "sparse"],
        "kv_lora_rank": 16,
        "q_lora_rank": 24,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 32,
        "num_key_value_heads": 4,
    },
    "qwen3_moe-local-experts": {
        **BASE,
        "model_type": "qwen3_moe",
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
    },
    "glm4_moe": {
        **BASE,
        "model_type": "glm4_moe",
        "head_dim": 16,
        "attention_bias": True,
        "use_qk_norm": True,
        "moe_intermediate_size": 32,
        "n_routed_experts": 8,
        "n_shared_experts": 2,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
    },
    "exaone_moe": {
        **BASE,
        "model_type": "exaone_moe",
        "head_dim": 16,
        "moe_intermediate_size": 32,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_shared_experts": 2,
        "first_k_dense_replace": 1,
        "sliding_window": 32,
        "sliding_window_pattern": 3,
    },
    "exaone_moe-listed": {
        **BASE,
        "model_type": "exaone_moe",
        "moe_intermediate_size": 32,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "mlp_layer_types": ["dense", "dense", "sparse", "sparse"],
        "sliding_window": 32,  # the class takes no null window: global layers are listed
        "layer_types": ["full_attention"] * 4,
    },
    "afmoe": {
        **BASE,
        "model_type": "afmoe",
        "head_dim": 16,
        "moe_intermediate_size": 32,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_shared_experts": 1,
        "num_dense_layers": 1,
        "sliding_window": 32,
        "global_attn_every_n_layers": 2,
    },
    "afmoe-defaults": {**BASE, "model_type": "afmoe"},
    "flex_olmo": {
        **BASE,
        "model_type": "flex_olmo",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "pad_token_id": 0,
    },
    "flex_olmo-defaults": {**BASE, "model_type": "flex_olmo", "pad_token_id": 0},
    # SolarOpenConfig has no intermediate_size (every layer holds experts)
    "solar_open": {
        **{k: v for k, v in BASE.items() if k != "intermediate_size"},
        "model_type": "solar_open",
        "head_dim": 16,
        "attention_bias": True,
        "moe_intermediate_size": 32,
        "n_routed_experts": 8,
        "n_shared_experts": 2,
        "num_experts_per_tok": 2,
    },
    "solar_open-defaults": {
        **{k: v for k, v in BASE.items() if k != "intermediate_size"},
        "model_type": "solar_open",
        "head_dim": 16,
    },
    "gpt_oss": {
        **BASE,
        "model_type": "gpt_oss",
        "head_dim": 16,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "sliding_window": 32,
    },
    "mistral4": {
        **BASE,
        "model_type": "mistral4",
        "num_key_value_heads": 4,
        "moe_intermediate_size": 32,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "q_lora_rank": 48,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
    },
    "minimax_m2": {
        **BASE,
        "model_type": "minimax_m2",
        "head_dim": 16,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    },
    "granite": {**BASE, "model_type": "granite", "attention_bias": True, "mlp_bias": True},
    "smollm3": {**BASE, "model_type": "smollm3", "pad_token_id": 0},
    "starcoder2": {**BASE, "model_type": "starcoder2", "sliding_window": 32},
    "starcoder2-nobias": {**BASE, "model_type": "starcoder2", "use_bias": False},
    "cohere": {**BASE, "model_type": "cohere", "use_qk_norm": True},
    "cohere2": {**BASE, "model_type": "cohere2", "head_dim": 16, "sliding_window": 32},
    "phimoe": {
        **BASE,
        "model_type": "phimoe",
        "attention_bias": True,
        "lm_head_bias": True,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "llama4_text": {
        **BASE,
        "model_type": "llama4_text",
        "head_dim": 16,
        "intermediate_size_mlp": 128,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 2,
        "attention_chunk_size": 32,
    },
    "bert": {
        "model_type": "bert",
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 96,
        "max_position_embeddings": 128,
    },
    "roberta": {
        "model_type": "roberta",
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 96,
        "max_position_embeddings": 130,
        "type_vocab_size": 1,
    },
    "camembert": {
        "model_type": "camembert",
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 96,
        "max_position_embeddings": 130,
        "type_vocab_size": 1,
    },
    "deberta-v2": {
        "model_type": "deberta-v2",
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 96,
        "max_position_embeddings": 128,
        "relative_attention": True,
        "position_buckets": 32,
        "norm_rel_ebd": "layer_norm",
        "share_att_key": True,
        "pos_att_type": "p2c|c2p",
        "position_biased_input": False,
        "type_vocab_size": 0,
    },
    "deberta-v2-unshared": {
        "model_type": "deberta-v2",
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 96,
        "max_position_embeddings": 128,
        "relative_attention": True,
        "pos_att_type": ["c2p", "p2c"],
        "type_vocab_size": 0,
    },
    "vit": {
        "model_type": "vit",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 96,
        "image_size": 32,
        "patch_size": 8,
        "num_labels": 10,
    },
    "vit-nobias": {
        "model_type": "vit",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 96,
        "image_size": 30,
        "patch_size": 8,
        "num_channels": 1,
        "qkv_bias": False,
    },
}


def _hf_count(config: dict[str, Any], arch: TransformerArch) -> int:
    data = {k: v for k, v in config.items() if k != "model_type"}
    hf_config = transformers.AutoConfig.for_model(config["model_type"], **data)
    with torch.device("meta"):
        if arch.patch_size:
            model = transformers.AutoModelForImageClassification.from_config(hf_config)
        elif arch.kind == "encoder":
            model = transformers.AutoModelForSequenceClassification.from_config(hf_config)
        elif type(hf_config) in transformers.MODEL_FOR_CAUSAL_LM_MAPPING:
            model = transformers.AutoModelForCausalLM.from_config(hf_config)
        else:  # a text family the auto class does not list (Mistral 4: inside Mistral3's wrapper)
            name = type(hf_config).__name__.removesuffix("Config") + "ForCausalLM"
            model = getattr(transformers, name)(hf_config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TINY))
def test_count_equals_transformers_model(name: str) -> None:
    arch = arch_from_hf_config(TINY[name])
    assert isinstance(arch, TransformerArch)
    assert arch.param_count() == _hf_count(TINY[name], arch)


@pytest.mark.parametrize("model_type", ["deepseek_v2", "deepseek_v3", "mistral4", "glm4_moe_lite"])
def test_latent_attention_keys_left_out_take_the_class_defaults(model_type: str) -> None:
    """transformers saves a config as its differences from the class defaults: a file without
    q_lora_rank, n_shared_experts or first_k_dense_replace means the class's values (DeepSeek-V3:
    1536, 1 and 3), not none of them."""
    config = {
        "model_type": model_type,
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "intermediate_size": 96,
        "moe_intermediate_size": 32,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
    }
    arch = arch_from_hf_config(config)
    assert isinstance(arch, TransformerArch)
    assert arch.q_lora_rank > 0
    assert arch.param_count() == _hf_count(config, arch)


def test_kimi_k2_reads_as_the_deepseek_v3_blocks_it_names_its_own() -> None:
    """Kimi K2's config.json says `kimi_k2` for DeepSeek-V3's blocks (transformers maps the name
    to DeepseekV3Config): the published layout counts 1.03T parameters, 32.9B active (its card:
    1T, 32B), the DeepSeek-V3 count of the same numbers, and takes DeepSeek-V3's rules."""
    import dataclasses

    config = {
        "model_type": "kimi_k2",
        "vocab_size": 163840,
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_hidden_layers": 61,
        "num_attention_heads": 64,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "n_routed_experts": 384,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048,
        "first_k_dense_replace": 1,
    }
    kimi = arch_from_hf_config(config)
    deepseek = arch_from_hf_config({**config, "model_type": "deepseek_v3"})
    assert isinstance(kimi, TransformerArch) and kimi.rules_type == "deepseek_v3"
    assert dataclasses.replace(kimi, model_type=deepseek.model_type) == deepseek
    assert round(kimi.param_count() / 1e9) == 1026 and round(kimi.active_param_count() / 1e9) == 33
    tiny = {**TINY["deepseek_v3"], "model_type": "deepseek_v3"}
    assert arch_from_hf_config({**tiny, "model_type": "kimi_k2"}).param_count() == _hf_count(
        tiny, arch_from_hf_config(tiny)
    )


def test_tiny_configs_cover_every_family_in_transformers() -> None:
    from fitbench.workloads.hf_config import MOE_TYPES

    covered = {c["model_type"] for c in TINY.values()}
    assert set(MOE_TYPES) - {"kimi_k2"} <= covered  # kimi_k2: the test above
