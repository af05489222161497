"""Tiny variants of the bundled models' configs, for the scripts and tests that build them on a CPU.

Each size key a config has is replaced by a small value (keys it does not have are not added), so
a tiny model keeps its family's layout (norms, experts, latent attention, windows) at a size that
builds and steps in milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fitbench.workloads import library
from fitbench.workloads.hf_config import workload_from_data
from fitbench.workloads.multimodal import WRAPPERS, with_class_defaults
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
    # Mamba-2 layers (Granite 4.0-H): heads x head size = mamba_expand (2) x hidden_size
    "mamba_n_heads": 8,
    "mamba_d_head": 16,
    "mamba_d_state": 16,
    "mamba_chunk_size": 32,
    # and in Nemotron-H's spelling (heads x head size is its Mamba width)
    "mamba_num_heads": 8,
    "mamba_head_dim": 16,
    "ssm_state_size": 16,
    "n_groups": 2,
    "chunk_size": 32,
    "moe_shared_expert_intermediate_size": 32,
    # LFM2's MLP width before its two-thirds adjustment
    "block_ff_dim": 192,
    # vision towers (a multimodal config's vision_config)
    "depth": 2,
    "embed_dim": 64,
    "out_hidden_size": 64,
}


def _shrunk(config: dict[str, Any]) -> dict[str, Any]:
    """Every size key replaced (a null one stays null: DeepSeek-V2-Lite's q_lora_rank means no
    query compression), in nested sub-configs too (a multimodal file's text_config and
    vision_config); a per-layer `layer_types` (or Nemotron-H's `layers_block_type`) list is
    dropped, so the family's own rule lays out the windows of the fewer layers."""
    shrunk = {
        key: _shrunk(value)
        if isinstance(value, dict)
        else value
        if value is None
        else TINY_SIZES.get(key, value)
        for key, value in config.items()
        if key not in ("layer_types", "layers_block_type")
    }
    return {**shrunk, **_mamba_layer_types(config, shrunk)}


def _mamba_layer_types(config: dict[str, Any], shrunk: dict[str, Any]) -> dict[str, Any]:
    """A Granite 4.0 file's layer kinds at the tiny layer count (its class makes every layer a
    Mamba-2 one without the list): the first layer attends, the others keep the file's kind (Mamba-2
    wherever the file has one, else attention); Bamba's and LFM2's attention indices, and
    LFM2-MoE's kinds, likewise; Nemotron-H's blocks as five: Mamba-2, MLP (or experts),
    attention, MLP, Mamba-2 (a layer without an MLP)."""
    types = config.get("layer_types")
    if config.get("model_type") == "nemotron_h":  # a mixer of each kind, MLP blocks between, one left over
        mlp = "E" if nemotron_h_has_experts(config) else "-"
        return {"hybrid_override_pattern": f"M{mlp}*{mlp}M", "num_hidden_layers": 5}
    if "mamba_n_heads" in config and "attn_layer_indices" in config:  # Bamba: the first layer attends
        return {"attn_layer_indices": [0]}
    if "full_attn_idxs" in config:  # LFM2: the first layer attends, the others convolve
        return {"full_attn_idxs": [0]}
    if config.get("model_type") == "lfm2_moe" and isinstance(types, list):  # its class needs the list
        layers = int(shrunk.get("num_hidden_layers", len(types)))
        return {"layer_types": ["full_attention"] + ["conv"] * (layers - 1)}
    if "mamba_n_heads" not in config or not isinstance(types, list):
        return {}
    rest = "mamba" if "mamba" in types or "linear_attention" in types else "attention"
    layers = int(shrunk.get("num_hidden_layers", len(types)))
    return {"layer_types": ["attention"] + [rest] * (layers - 1)}


def nemotron_h_has_experts(config: dict[str, Any]) -> bool:
    """Whether a Nemotron-H file has experts blocks, in its block list or its older pattern."""
    blocks = config.get("layers_block_type") or []
    return "moe" in blocks or "E" in str(config.get("hybrid_override_pattern", ""))


CONFIGS = Path(__file__).resolve().parent / "configs"


def tiny_config(name: str) -> dict[str, Any]:
    """A bundled model's config at tiny sizes, or a layout of benchmarks/configs/ (a name ending
    in .json: the families no bundled model has)."""
    if name.endswith(".json"):
        layout = json.loads((CONFIGS / name).read_text())
        return _shrunk({k: v for k, v in layout.items() if not k.startswith("_")})
    config = dict(library.get_model(name).config)
    config.pop("quantization_config", None)
    model_type = str(config.get("model_type", ""))
    if model_type in WRAPPERS:  # the sizes a saved sub-config leaves out are shrunk too
        config = with_class_defaults(config, name, model_type)
    return _shrunk(config)


def tiny_workload(name: str, **overrides: Any) -> Workload:
    config = tiny_config(name)
    overrides = {"precision": "fp32", **overrides}
    return workload_from_data(config, name=f"tiny-{name}", source="test", **overrides)
