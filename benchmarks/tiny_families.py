"""Tiny variants of the bundled models' configs, for the scripts and tests that build them on a CPU.

Each size key a config has is replaced by a small value (keys it does not have are not added), so
a tiny model keeps its family's layout (norms, experts, latent attention, windows) at a size that
builds and steps in milliseconds.
"""

from __future__ import annotations

from typing import Any

from fitbench.workloads import library
from fitbench.workloads.hf_config import workload_from_data
from fitbench.workloads.workload import Workload

# Small sizes under each family's own key names; keys a config does not have are not added.
TINY_SIZES = {
    "hidden_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_kv_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 512,
    "head_dim": 16,
    "max_position_embeddings": 512,
    "sliding_window": 24,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "num_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_k": 2,
    "first_k_dense_replace": 1,
    "moe_layer_start_index": 1,
    "kv_lora_rank": 32,
    "q_lora_rank": 48,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "n_embd": 64,
    "n_layer": 3,
    "n_head": 4,
    "n_inner": 128,
    "rotary_dim": 8,
}


def tiny_config(name: str) -> dict[str, Any]:
    config = dict(library.get_model(name).config)
    config.pop("quantization_config", None)
    return {key: TINY_SIZES.get(key, value) for key, value in config.items()}


def tiny_workload(name: str, **overrides: Any) -> Workload:
    config = tiny_config(name)
    overrides = {"precision": "fp32", **overrides}
    return workload_from_data(config, name=f"tiny-{name}", source="test", **overrides)
