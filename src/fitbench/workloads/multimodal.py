"""Multimodal checkpoints: the language model inside, and the vision tower loaded beside it.

Why: Gemma-3 (4B and up), Llama-4, Qwen2-VL/Qwen2.5-VL/Qwen3-VL, InternVL (its -hf checkpoints),
GLM-4.1V/4.5V, Kimi K2.5, ERNIE-4.5-VL, Mistral-Small-3.1 and LLaVA ship one config.json for a
`...ForConditionalGeneration` model: a language model under `text_config` (Qwen-VL: at the top
level in older files) and a vision encoder under `vision_config`.
transformers loads both, so the weights in memory are the language model's plus the vision
tower's and projector's (vision_tower.py counts those). Text generation and fine-tuning run
the language model only, which is what the estimate times; the tower is memory.

Sub-configs are saved as differences from their config class's defaults (a Gemma-3
`text_config` has no vocab_size; a LLaVA one often no hidden_size), so each wrapper fills in
the defaults of the transformers class it names before the family reader sees the keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fitbench.workloads.config_reader import ConfigReader
from fitbench.workloads.config_values import show
from fitbench.workloads.vision_tower import TOWERS, VISION_DEFAULTS

# Defaults of the text config classes a wrapper's text_config is read against (transformers 5:
# LlamaConfig, MistralConfig, Qwen2Config, the Qwen-VL, Llama-4 and Gemma-3 text configs). Only
# the keys the readers use; tests/unit/test_multimodal.py checks them against the classes.
TEXT_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    },
    "mistral": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
    },
    "ministral3": {
        "vocab_size": 131072,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 34,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 262144,
        "sliding_window": None,
        "tie_word_embeddings": False,
    },
    "qwen2": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "max_position_embeddings": 32768,
        "max_window_layers": 28,
        "tie_word_embeddings": False,
    },
    "qwen2_vl_text": {
        "vocab_size": 152064,
        "hidden_size": 8192,
        "intermediate_size": 29568,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "max_window_layers": 80,
        "tie_word_embeddings": False,
    },
    "llama4_text": {
        "vocab_size": 202048,
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "attention_chunk_size": 8192,
        "tie_word_embeddings": False,
    },
    "qwen3_vl_text": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 128,
        "max_position_embeddings": 128000,
        "tie_word_embeddings": False,
    },
    "qwen3_vl_moe_text": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "max_position_embeddings": 128000,
        "moe_intermediate_size": 1408,
        "num_experts_per_tok": 4,
        "num_experts": 60,
        "decoder_sparse_step": 1,
        "tie_word_embeddings": True,
    },
    "mistral4": {
        "vocab_size": 131072,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "n_shared_experts": 1,
        "n_routed_experts": 128,
        "kv_lora_rank": 256,
        "q_lora_rank": 1024,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "qk_nope_head_dim": 64,
        "num_experts_per_tok": 4,
        "first_k_dense_replace": 0,
        "max_position_embeddings": 1048576,
        "tie_word_embeddings": False,
    },
    "gemma3_text": {
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "tie_word_embeddings": True,
    },
}
TEXT_DEFAULTS["lfm2"] = {
    "vocab_size": 65536,
    "hidden_size": 2560,
    "intermediate_size": 12288,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 128000,
    "tie_word_embeddings": True,
}
TEXT_DEFAULTS["glm4v_text"] = {
    "vocab_size": 151552,
    "hidden_size": 4096,
    "intermediate_size": 13696,
    "num_hidden_layers": 40,
    "num_attention_heads": 32,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
}
TEXT_DEFAULTS["glm4v_moe_text"] = {
    "vocab_size": 151424,
    "hidden_size": 4096,
    "intermediate_size": 10944,
    "num_hidden_layers": 46,
    "num_attention_heads": 96,
    "num_key_value_heads": 8,
    "max_position_embeddings": 65536,
    "tie_word_embeddings": False,
    "attention_bias": True,
    "moe_intermediate_size": 1408,
    "num_experts_per_tok": 8,
    "n_shared_experts": 1,
    "n_routed_experts": 128,
    "first_k_dense_replace": 1,
}
TEXT_DEFAULTS["ernie4_5_vl_moe_text"] = {
    "vocab_size": 103424,
    "hidden_size": 2560,
    "intermediate_size": 12288,
    "num_hidden_layers": 28,
    "num_attention_heads": 20,
    "num_key_value_heads": 4,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
    "use_bias": False,
    "moe_intermediate_size": [1536, 512],
    "moe_k": 6,
    "moe_num_experts": 64,
    "moe_num_shared_experts": 2,
}
# Qwen2_5_VLTextConfig keeps Qwen2VLTextConfig's defaults (the test checks both classes).
TEXT_DEFAULTS["qwen2_5_vl_text"] = TEXT_DEFAULTS["qwen2_vl_text"]
# Text model types the Qwen-VL families write, read as the Qwen2/Qwen3 families with their own
# defaults.
TEXT_ALIASES = {
    "qwen2_vl_text": "qwen2",
    "qwen2_5_vl_text": "qwen2",
    "qwen3_vl_text": "qwen3",
    "qwen3_vl_moe_text": "qwen3_moe",
    # GLM-4.1V's text model is GLM-4-0414's (four norms a block, q/k/v biases), GLM-4.5V's GLM-4.5's
    "glm4v_text": "glm4",
    "glm4v_moe_text": "glm4_moe",
    # ERNIE-4.5-VL's text experts and shared experts are ERNIE-4.5 MoE's (ernie_vl_text_keys)
    "ernie4_5_vl_moe_text": "ernie4_5_moe",
}


def _gemma3_projector(vision: ConfigReader, text_hidden: int, outer: ConfigReader) -> int:
    """Gemma3MultiModalProjector: a (vision, text) projection matrix and an RMSNorm of the
    vision width."""
    h = vision.int("hidden_size")
    return h * text_hidden + h


def _lfm2_vl_projector(vision: ConfigReader, text_hidden: int, outer: ConfigReader) -> int:
    """Lfm2VlMultiModalProjector: the tower's outputs unshuffled `downsample_factor`^2 patches
    to one, an optional LayerNorm over them (`projector_use_layernorm`), then two Linears through
    `projector_hidden_size` (biased by `projector_bias`): LFM2-VL's class defaults otherwise."""
    width = vision.int("hidden_size") * outer.int("downsample_factor", default=2) ** 2
    hidden = outer.int("projector_hidden_size", default=2560)
    bias = outer.flag("projector_bias", True)
    norm = 2 * width if outer.flag("projector_use_layernorm", True) else 0
    return norm + width * hidden + hidden * text_hidden + ((hidden + text_hidden) if bias else 0)


def _llama4_projector(vision: ConfigReader, text_hidden: int, outer: ConfigReader) -> int:
    """Llama4MultiModalProjector: one unbiased Linear from vision_output_dim to the text width."""
    return vision.int("vision_output_dim", default=7680) * text_hidden


def _feature_layers(outer: ConfigReader) -> int:
    """Vision layers whose outputs are concatenated into the projector (a list of layers)."""
    layers = outer.data.get("vision_feature_layer")
    return len(layers) if isinstance(layers, list) and layers else 1


def _llava_projector(vision: ConfigReader, text_hidden: int, outer: ConfigReader) -> int:
    """LlavaMultiModalProjector: vision width (times feature layers) to text, then text to text,
    biased by `multimodal_projector_bias` (default true)."""
    bias = outer.flag("multimodal_projector_bias", True)
    into = vision.int("hidden_size") * _feature_layers(outer)
    return into * text_hidden + text_hidden * text_hidden + (2 * text_hidden if bias else 0)


def _llava_next_projector(vision: ConfigReader, text_hidden: int, outer: ConfigReader) -> int:
    """LLaVA's projector plus LLaVA-NeXT's learned `image_newline` of the text width."""
    return _llava_projector(vision, text_hidden, outer) + text_hidden


def _mistral3_projector(vision: ConfigReader, text_hidden: int, outer: ConfigReader) -> int:
    """Mistral3MultiModalProjector: an RMSNorm, the patch merger's unbiased Linear over
    spatial_merge_size^2 patches, then vision to text and text to text (biased by
    `multimodal_projector_bias`, default false)."""
    h = vision.int("hidden_size")
    merge = outer.int("spatial_merge_size", default=2)
    bias = outer.flag("multimodal_projector_bias", False)
    into = h * _feature_layers(outer)
    return (
        h
        + h * merge * merge * h
        + into * text_hidden
        + text_hidden * text_hidden
        + (2 * text_hidden if bias else 0)
    )


def _internvl_projector(vision: ConfigReader, text_hidden: int, outer: ConfigReader) -> int:
    """InternVLMultiModalProjector: a LayerNorm over the pixel-shuffled patches (the vision width
    times (1 / downsample_ratio)^2), a biased Linear to the text width, GELU, a biased Linear."""
    ratio = outer.data.get("downsample_ratio", 0.5)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1:
        raise outer.error(
            f"'downsample_ratio' must be a number in (0, 1], got {show(ratio)}",
            message_zh=f"'downsample_ratio' 必须是 (0, 1] 之间的数,实际为 {show(ratio, 'zh')}",
        )
    into = vision.int("hidden_size") * int(1 / ratio) ** 2
    return 2 * into + (into * text_hidden + text_hidden) + (text_hidden * text_hidden + text_hidden)


def _kimi_k25_projector(vision: ConfigReader, text_hidden: int, outer: ConfigReader) -> int:
    """Kimi_K25MultimodalProjection: a LayerNorm of `projection_hidden_size`, then a biased Linear
    over merge_kernel_size patches (vision width times their count) and a biased one to the text
    width."""
    kernel = vision.data.get("merge_kernel_size", [2, 2])
    if not (isinstance(kernel, list | tuple) and len(kernel) == 2):
        raise outer.error(
            f"'vision_config.merge_kernel_size' must be [height, width], got {show(kernel)}",
            message_zh=f"'vision_config.merge_kernel_size' 必须是 [高, 宽],实际为 {show(kernel, 'zh')}",
        )
    merged = (
        vision.int("hidden_size")
        * vision.check_int("merge_kernel_size", kernel[0])
        * vision.check_int("merge_kernel_size", kernel[1])
    )
    norm = 2 * outer.int("projection_hidden_size", default=1152)
    return norm + (merged * merged + merged) + (merged * text_hidden + text_hidden)


def _ernie_vl_widths(text: ConfigReader) -> tuple[int, int]:
    """ERNIE-4.5-VL's expert widths: `moe_intermediate_size` [text, vision]."""
    widths = text.data.get("moe_intermediate_size")
    if not (isinstance(widths, list | tuple) and len(widths) == 2):
        raise text.error(
            f"'text_config.moe_intermediate_size' must be [text, vision] widths, got {show(widths)}",
            message_zh=(
                "'text_config.moe_intermediate_size' 必须是 [文本, 视觉] 两个宽度,"
                f"实际为 {show(widths, 'zh')}"
            ),
        )
    return (
        text.check_int("moe_intermediate_size", widths[0]),
        text.check_int("moe_intermediate_size", widths[1]),
    )


def _ernie_vl_sparse_layers(text: ConfigReader) -> tuple[int, int]:
    """(layers, first sparse layer) of `mlp_layer_types`: dense layers first, then sparse ones
    to the last, the layout ERNIE-4.5 MoE's moe_layer_start_index states (None: dense, then all
    sparse, the class default)."""
    layers = text.int("num_hidden_layers")
    kinds = text.data.get("mlp_layer_types")
    if kinds is None:
        return layers, 1
    if not (isinstance(kinds, list) and len(kinds) == layers and set(kinds) <= {"dense", "sparse"}):
        raise text.error(
            f"'text_config.mlp_layer_types' must list 'dense' or 'sparse' for each of {layers} layers",
            message_zh=f"'text_config.mlp_layer_types' 必须为 {layers} 层逐层写出 'dense' 或 'sparse'",
        )
    start = kinds.index("sparse") if "sparse" in kinds else layers
    if any(kind != "sparse" for kind in kinds[start:]):
        raise text.error(
            "'text_config.mlp_layer_types' with dense layers after sparse ones is not supported",
            "keep the dense layers first (the published ERNIE-4.5-VL layouts do)",
            message_zh="不支持 'text_config.mlp_layer_types' 中稀疏层之后再出现稠密层",
            hint_zh="请把稠密层放在最前(已发布的 ERNIE-4.5-VL 布局如此)",
        )
    return layers, start


def ernie_vl_text_keys(text: dict[str, Any], source: str) -> dict[str, Any]:
    """ERNIE-4.5-VL's language model as ERNIE-4.5 MoE's keys, for a text prompt: its text experts
    (the first of `moe_intermediate_size`), shared experts and dense first layers. A text token
    never reaches the vision experts (`mlp.vision_moe`): their weights are counted with the tower
    (_ernie_vl_projector)."""
    reader = ConfigReader(text, source, "ernie4_5_vl_moe_text")
    width, _ = _ernie_vl_widths(reader)
    _, start = _ernie_vl_sparse_layers(reader)
    out = {k: v for k, v in text.items() if k not in ("moe_intermediate_size", "mlp_layer_types")}
    return {**out, "moe_intermediate_size": width, "moe_layer_start_index": start, "moe_layer_interval": 1}


def _ernie_vl_projector(vision: ConfigReader, text_hidden: int, outer: ConfigReader) -> int:
    """What ERNIE-4.5-VL loads for images beside the tower: the variable-resolution resampler
    (a spatial and a temporal biased two-matrix MLP with a LayerNorm each, over
    spatial_merge_size^2 patches and temporal_merge_size of those, a biased Linear to the text
    width, an RMSNorm), and in every sparse layer of the language model the vision experts (a
    fused gate/up and a down stack of the second `moe_intermediate_size`), their FP32 router and
    its score-correction bias."""
    h = vision.int("hidden_size")
    spatial = h * vision.int("spatial_merge_size") ** 2
    temporal = spatial * vision.int("temporal_merge_size")
    mlp = 2 * (spatial * spatial + spatial) + 2 * spatial
    resampler = mlp + (temporal * spatial + spatial) + (spatial * spatial + spatial) + 2 * spatial
    resampler += spatial * text_hidden + text_hidden + text_hidden
    text_data = with_class_defaults(outer.data, outer.source, outer.model_type)["text_config"]
    text = ConfigReader(text_data, outer.source, "ernie4_5_vl_moe_text")
    _, vision_width = _ernie_vl_widths(text)
    layers, start = _ernie_vl_sparse_layers(text)
    experts = text.int("moe_num_experts")
    per_layer = experts * 3 * text_hidden * vision_width + experts * text_hidden + experts
    return resampler + (layers - start) * per_layer


@dataclass(frozen=True)
class Wrapper:
    """One multimodal family: where its text keys live, its default text and vision types, and
    the projector transformers builds between them (None: the tower's merger is the projector)."""

    text_type: str
    vision_type: str
    projector: Callable[[ConfigReader, int, ConfigReader], int] | None
    flat_text: bool = False  # older files keep the text keys at the top level (Qwen-VL)
    vision_type_fixed: bool = False  # the tower is the family's own, whatever vision model_type says
    tie_default: bool = False  # the outer config class's tie_word_embeddings default
    forwards_text_tie: bool = False  # the outer class takes a true tie_word_embeddings from text_config
    # the text keys as the aliased family reads them, where they differ (ERNIE-4.5-VL's lists)
    text_keys: Callable[[dict[str, Any], str], dict[str, Any]] | None = None


WRAPPERS: dict[str, Wrapper] = {
    "gemma3": Wrapper("gemma3_text", "siglip_vision_model", _gemma3_projector, tie_default=True),
    "llama4": Wrapper("llama4_text", "llama4_vision_model", _llama4_projector, vision_type_fixed=True),
    "glm4v": Wrapper("glm4v_text", "glm4v_vision", None, vision_type_fixed=True, forwards_text_tie=True),
    "glm4v_moe": Wrapper(
        "glm4v_moe_text", "glm4v_moe_vision", None, vision_type_fixed=True, forwards_text_tie=True
    ),
    "kimi_k25": Wrapper(
        "deepseek_v3", "kimi_k25_vision", _kimi_k25_projector, vision_type_fixed=True, tie_default=True
    ),
    "ernie4_5_vl_moe": Wrapper(
        "ernie4_5_vl_moe_text",
        "ernie4_5_vl_moe_vision",
        _ernie_vl_projector,
        vision_type_fixed=True,
        tie_default=True,
        text_keys=ernie_vl_text_keys,
    ),
    "internvl": Wrapper(
        "qwen2", "internvl_vision", _internvl_projector, vision_type_fixed=True, tie_default=True
    ),
    "lfm2_vl": Wrapper("lfm2", "siglip2_vision_model", _lfm2_vl_projector, tie_default=True),
    "llava": Wrapper("llama", "clip_vision_model", _llava_projector, forwards_text_tie=True),
    "llava_next": Wrapper("llama", "clip_vision_model", _llava_next_projector),
    "mistral3": Wrapper("mistral", "pixtral", _mistral3_projector, tie_default=True),
    "qwen2_vl": Wrapper(
        "qwen2_vl_text", "qwen2_vl", None, flat_text=True, vision_type_fixed=True, forwards_text_tie=True
    ),
    "qwen2_5_vl": Wrapper(
        "qwen2_vl_text", "qwen2_5_vl", None, flat_text=True, vision_type_fixed=True, forwards_text_tie=True
    ),
    "qwen3_vl": Wrapper("qwen3_vl_text", "qwen3_vl", None, vision_type_fixed=True),
    "qwen3_vl_moe": Wrapper("qwen3_vl_moe_text", "qwen3_vl", None, vision_type_fixed=True),
    "qwen3_5": Wrapper("qwen3_5_text", "qwen3_5_vision", None, vision_type_fixed=True),
    "qwen3_5_moe": Wrapper("qwen3_5_moe_text", "qwen3_5_moe_vision", None, vision_type_fixed=True),
}
# The config keys that are not the language model's (a flat Qwen-VL file's top level).
_OUTER_ONLY = ("model_type", "text_config", "vision_config", "architectures", "quantization_config")


def _sub_config(outer: ConfigReader, key: str) -> dict[str, Any]:
    value = outer.data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise outer.error(
            f"'{key}' must be an object, got {show(value)}",
            message_zh=f"'{key}' 必须是对象,实际为 {show(value, 'zh')}",
        )
    return value


def _text_type(outer: ConfigReader, wrapper: Wrapper, nested: dict[str, Any]) -> str:
    """The language model's type: text_config's model_type, else the wrapper's, as transformers
    spells it."""
    inner_type = nested.get("model_type") or wrapper.text_type
    if not isinstance(inner_type, str):
        raise outer.error(
            f"'text_config.model_type' must be a string, got {show(inner_type)}",
            message_zh=f"'text_config.model_type' 必须是字符串,实际为 {show(inner_type, 'zh')}",
        )
    return inner_type.strip().lower().replace("-", "_")


def _vision_type(outer: ConfigReader, wrapper: Wrapper, vision_data: dict[str, Any]) -> str:
    """The tower's type (vision_config's model_type where the family takes several), one of TOWERS."""
    vision_type = wrapper.vision_type
    if not wrapper.vision_type_fixed and isinstance(vision_data.get("model_type"), str):
        vision_type = vision_data["model_type"]
    if vision_type not in TOWERS:
        raise outer.error(
            f"the vision tower '{vision_type}' is not supported",
            f"fitbench counts {', '.join(TOWERS)} towers; remove 'vision_config' and set 'model_type' "
            "to the language model's to estimate it alone",
            message_zh=f"不支持视觉塔 '{vision_type}'",
            hint_zh=(
                f"fitbench 能计算 {'、'.join(TOWERS)} 视觉塔;若只估算语言模型,请删除 'vision_config' "
                "并把 'model_type' 设为语言模型的类型"
            ),
        )
    return vision_type


def with_class_defaults(data: dict[str, Any], source: str, model_type: str) -> dict[str, Any]:
    """The file with its sub-configs' class defaults written in (text_config where the file nests
    one, or the family always does; vision_config always): what transformers reads, key by key.
    text_config below and the tiny test variants (benchmarks/tiny_families.py) start from it."""
    wrapper = WRAPPERS[model_type]
    outer = ConfigReader(data, source, model_type)
    nested = _sub_config(outer, "text_config")
    vision_data = _sub_config(outer, "vision_config")
    out = dict(data)
    if nested or not wrapper.flat_text:
        out["text_config"] = {**TEXT_DEFAULTS.get(_text_type(outer, wrapper, nested), {}), **nested}
    out["vision_config"] = {**VISION_DEFAULTS[_vision_type(outer, wrapper, vision_data)], **vision_data}
    return out


def text_config(data: dict[str, Any], source: str, model_type: str) -> tuple[dict[str, Any], int, str]:
    """The language model's config (defaults filled in, model_type set to its family), the vision
    tower's and projector's parameters, and the vision tower's type, for a multimodal file of
    `model_type` (a WRAPPERS key, as transformers spells it)."""
    wrapper = WRAPPERS[model_type]
    outer = ConfigReader(data, source, model_type)
    nested = _sub_config(outer, "text_config")
    inner_type = _text_type(outer, wrapper, nested)
    filled = with_class_defaults(data, source, model_type)
    flat = {k: v for k, v in data.items() if k not in _OUTER_ONLY} if wrapper.flat_text else {}
    text = {**TEXT_DEFAULTS.get(inner_type, {}), **flat, **filled.get("text_config", {})}
    # transformers 5 ties the LM head by the outer config's key, its class default when the file
    # has none (Mistral3Config and Gemma3Config: true), and some classes forward a true one that
    # older files kept inside text_config (LlavaConfig, Qwen2VLConfig)
    tie = outer.flag("tie_word_embeddings", wrapper.tie_default)
    inner_tie = ConfigReader(nested, source, inner_type).flag("tie_word_embeddings", False)
    text["tie_word_embeddings"] = tie or (wrapper.forwards_text_tie and inner_tie)
    text["model_type"] = TEXT_ALIASES.get(inner_type, inner_type)
    if wrapper.text_keys is not None:
        text = wrapper.text_keys(text, source)

    vision_type = _vision_type(outer, wrapper, _sub_config(outer, "vision_config"))
    vision = ConfigReader(filled["vision_config"], source, f"{model_type} vision_config")
    params = TOWERS[vision_type](vision)
    if wrapper.projector is not None:
        text_reader = ConfigReader(text, source, inner_type)
        params += wrapper.projector(vision, text_reader.int("hidden_size", "n_embd", "d_model"), outer)
    return text, params, vision_type
