"""Parameter counts of the vision towers and projectors that multimodal checkpoints load.

Why: a Gemma-3, Llama-4, Qwen-VL, InternVL, GLM-4.xV, Kimi K2.5, ERNIE-4.5-VL, Mistral-Small-3.1
or LLaVA checkpoint is loaded whole by transformers (`...ForConditionalGeneration`): the vision
encoder and the projector that maps its patches into the language model sit in GPU memory next to
the language model even when every prompt is text. They are 0.3-0.9B parameters (InternViT-6B:
5.9B; ERNIE-4.5-VL's tower, resampler and vision experts: 7.6B), 1-26 % of the weights, so a
memory estimate that skipped them would call a tight card roomy. Their compute is not modelled (a
text prompt never runs them); the estimate's assumptions say so (transformer_cost).

Each counter follows the module tree transformers 5 builds for the family, with the defaults of
its config class filling keys a checkpoint leaves out (sub-configs are saved as differences
from those defaults); `tests/unit/test_multimodal.py` checks every one against the real
classes built on the meta device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fitbench.workloads.config_reader import ConfigReader

# Defaults of the vision config classes (transformers 5: SiglipVisionConfig, CLIPVisionConfig,
# PixtralVisionConfig, Llama4VisionConfig, InternVLVisionConfig, Kimi_K25VisionConfig, the GLM-4.1V
# and GLM-4.5V ones and the Qwen2-VL, Qwen2.5-VL and Qwen3-VL ones).
VISION_DEFAULTS: dict[str, dict[str, Any]] = {
    "siglip_vision_model": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "image_size": 224,
        "patch_size": 16,
        "num_channels": 3,
        "vision_use_head": True,
    },
    "siglip2_vision_model": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_patches": 256,
        "patch_size": 16,
        "num_channels": 3,
    },
    "clip_vision_model": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "image_size": 224,
        "patch_size": 32,
        "num_channels": 3,
    },
    "pixtral": {
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "head_dim": 64,
        "patch_size": 16,
        "num_channels": 3,
    },
    "llama4_vision_model": {
        "hidden_size": 768,
        "intermediate_size": 5632,
        "num_hidden_layers": 34,
        "image_size": 448,
        "patch_size": 14,
        "num_channels": 3,
        "projector_input_dim": 4096,
        "projector_output_dim": 4096,
    },
    "internvl_vision": {
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "attention_bias": False,
        "use_qk_norm": False,
        "intermediate_size": 4096,
        "norm_type": "layer_norm",
        "image_size": [448, 448],
        "patch_size": [14, 14],
        "num_channels": 3,
        "use_mask_token": False,
        "use_absolute_position_embeddings": True,
        "use_mean_pooling": True,
    },
    "glm4v_vision": {
        "depth": 24,
        "hidden_size": 1536,
        "attention_bias": False,
        "num_heads": 12,
        "in_channels": 3,
        "image_size": 336,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 4096,
        "intermediate_size": 13696,
    },
    "kimi_k25_vision": {
        "patch_size": 14,
        "pos_emb_height": 64,
        "pos_emb_width": 64,
        "num_attention_heads": 16,
        "num_hidden_layers": 27,
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "merge_kernel_size": [2, 2],
    },
    "qwen2_vl": {
        "depth": 32,
        "embed_dim": 1280,
        "hidden_size": 3584,
        "mlp_ratio": 4,
        "in_channels": 3,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
    "qwen2_5_vl": {
        "depth": 32,
        "hidden_size": 3584,
        "intermediate_size": 3420,
        "out_hidden_size": 3584,
        "in_channels": 3,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
    "qwen3_vl": {
        "depth": 27,
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "out_hidden_size": 3584,
        "in_channels": 3,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "num_position_embeddings": 2304,
        "deepstack_visual_indexes": [8, 16, 24],
    },
}


# Qwen3.5's tower is Qwen3-VL's without the deepstack mergers (Qwen3_5VisionConfig's defaults).
VISION_DEFAULTS["qwen3_5_vision"] = {
    k: v for k, v in VISION_DEFAULTS["qwen3_vl"].items() if k != "deepstack_visual_indexes"
}
VISION_DEFAULTS["qwen3_5_moe_vision"] = VISION_DEFAULTS["qwen3_5_vision"]
# Glm4vMoeVisionConfig keeps Glm4vVisionConfig's defaults (the test checks both classes).
VISION_DEFAULTS["glm4v_moe_vision"] = VISION_DEFAULTS["glm4v_vision"]
VISION_DEFAULTS["ernie4_5_vl_moe_vision"] = {
    "depth": 32,
    "hidden_size": 1280,
    "intermediate_size": 5120,
    "in_channels": 3,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_merge_size": 2,
}


def _encoder_layer(h: int, f: int) -> int:
    """A SigLIP/CLIP encoder layer: two LayerNorms, q/k/v/out with biases, a two-matrix MLP."""
    return 2 * 2 * h + (4 * h * h + 4 * h) + (2 * h * f + f + h)


def siglip_params(v: ConfigReader) -> int:
    """SiglipVisionModel: a biased patch convolution, one learned position per patch, the
    layers, a final LayerNorm and (with `vision_use_head`) the attention-pooling head."""
    h, f = v.int("hidden_size"), v.int("intermediate_size")
    patch, image, channels = v.int("patch_size"), v.int("image_size"), v.int("num_channels")
    embeddings = channels * patch * patch * h + h + (image // patch) ** 2 * h
    total = embeddings + v.int("num_hidden_layers") * _encoder_layer(h, f) + 2 * h
    if v.flag("vision_use_head", True):
        # probe, nn.MultiheadAttention (in_proj 3h x h with bias, out_proj), LayerNorm, MLP
        total += h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (2 * h * f + f + h)
    return total


def siglip2_params(v: ConfigReader) -> int:
    """Siglip2VisionModel (NaFlex): a biased Linear over each flattened patch, `num_patches`
    learned positions (resized to the image's grid when run), SigLIP's layers and final LayerNorm,
    and the attention-pooling head unless `vision_use_head` is false."""
    h, f = v.int("hidden_size"), v.int("intermediate_size")
    patch, channels = v.int("patch_size"), v.int("num_channels")
    embeddings = channels * patch * patch * h + h + v.int("num_patches") * h
    total = embeddings + v.int("num_hidden_layers") * _encoder_layer(h, f) + 2 * h
    if v.flag("vision_use_head", True):
        total += h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (2 * h * f + f + h)
    return total


def clip_params(v: ConfigReader) -> int:
    """CLIPVisionModel: a class token, an unbiased patch convolution, positions for every patch
    and the class token, pre- and post-LayerNorms around the layers (all of them are loaded,
    even where LLaVA reads the second-to-last layer's output)."""
    h, f = v.int("hidden_size"), v.int("intermediate_size")
    patch, image, channels = v.int("patch_size"), v.int("image_size"), v.int("num_channels")
    embeddings = h + channels * patch * patch * h + ((image // patch) ** 2 + 1) * h
    return embeddings + 2 * h + v.int("num_hidden_layers") * _encoder_layer(h, f) + 2 * h


def pixtral_params(v: ConfigReader) -> int:
    """PixtralVisionModel: an unbiased patch convolution, an RMSNorm, then Llama-like layers
    (two RMSNorms, unbiased q/k/v/o of heads x head_dim, SwiGLU); rotary positions."""
    h, f = v.int("hidden_size"), v.int("intermediate_size")
    q = v.int("num_attention_heads") * v.int("head_dim")
    patch, channels = v.int("patch_size"), v.int("num_channels")
    layer = 2 * h + (4 * h * q) + 3 * h * f
    return channels * patch * patch * h + h + v.int("num_hidden_layers") * layer


def llama4_vision_params(v: ConfigReader) -> int:
    """Llama4VisionModel: an unbiased linear over unfolded patches, a class token, positions for
    every patch and the class token, LayerNorms before and after CLIP-like layers, and the pixel
    shuffle adapter's two unbiased Linears."""
    h, f = v.int("hidden_size"), v.int("intermediate_size")
    patch, image, channels = v.int("patch_size"), v.int("image_size"), v.int("num_channels")
    embeddings = channels * patch * patch * h + h + ((image // patch) ** 2 + 1) * h
    adapter = f * v.int("projector_input_dim") + v.int("projector_output_dim") ** 2
    return embeddings + 2 * 2 * h + v.int("num_hidden_layers") * _encoder_layer(h, f) + adapter


def _qwen_patch_embed(v: ConfigReader, width: int) -> int:
    """Qwen-VL's Conv3d over temporal_patch_size frames of patch_size squares, no bias."""
    patch = v.int("patch_size")
    return v.int("in_channels", "in_chans") * v.int("temporal_patch_size") * patch * patch * width


def qwen2_vl_params(v: ConfigReader) -> int:
    """Qwen2-VL's vision transformer: LayerNorms, fused qkv and proj with biases, a GELU MLP of
    mlp_ratio x embed_dim, and the PatchMerger (LayerNorm, two Linears over 2x2 patches)."""
    e, out = v.int("embed_dim"), v.int("hidden_size")
    f = e * v.int("mlp_ratio")
    layer = 2 * 2 * e + (3 * e * e + 3 * e) + (e * e + e) + (2 * e * f + f + e)
    merged = e * v.int("spatial_merge_size") ** 2
    merger = 2 * e + (merged * merged + merged) + (merged * out + out)
    return _qwen_patch_embed(v, e) + v.int("depth") * layer + merger


def qwen2_5_vl_params(v: ConfigReader) -> int:
    """Qwen2.5-VL's vision transformer: RMSNorms, fused qkv and proj with biases, a biased SwiGLU,
    and the merger (RMSNorm, two Linears over 2x2 patches to the language model's width)."""
    e, f, out = v.int("hidden_size"), v.int("intermediate_size"), v.int("out_hidden_size")
    layer = 2 * e + (3 * e * e + 3 * e) + (e * e + e) + (3 * e * f + 2 * f + e)
    merged = e * v.int("spatial_merge_size") ** 2
    merger = e + (merged * merged + merged) + (merged * out + out)
    return _qwen_patch_embed(v, e) + v.int("depth") * layer + merger


def qwen3_vl_params(v: ConfigReader) -> int:
    """Qwen3-VL's vision transformer: a biased Conv3d patch embedding, a learned position grid,
    LayerNorm blocks with biased qkv/proj and a biased GELU MLP, the merger (LayerNorm, two
    Linears over 2x2 patches to the language model's width) and one more merger per deepstack
    layer, each normalising the merged patches."""
    e, f, out = v.int("hidden_size"), v.int("intermediate_size"), v.int("out_hidden_size")
    layer = 2 * 2 * e + (3 * e * e + 3 * e) + (e * e + e) + (2 * e * f + f + e)
    merged = e * v.int("spatial_merge_size") ** 2
    linears = (merged * merged + merged) + (merged * out + out)
    deepstack = v.data.get("deepstack_visual_indexes")
    extra = len(deepstack) if isinstance(deepstack, list | tuple) else 0
    embed = _qwen_patch_embed(v, e) + e + v.int("num_position_embeddings") * e
    return embed + v.int("depth") * layer + (2 * e + linears) + extra * (2 * merged + linears)


def _pair(v: ConfigReader, key: str) -> tuple[int, int]:
    """A size a vision config writes as one number or as [height, width] (InternVL's, GLM-4V's)."""
    value = v.data.get(key)
    if isinstance(value, list | tuple) and len(value) == 2:
        return v.check_int(key, value[0]), v.check_int(key, value[1])
    size = v.int(key)
    return size, size


def internvl_vision_params(v: ConfigReader) -> int:
    """InternVLVisionModel (InternViT): a biased patch convolution, a class token (and a mask
    token with `use_mask_token`), learned positions for every patch and the class token (with
    `use_absolute_position_embeddings`), then layers of q/k/v (biased by `attention_bias`) and a
    biased output projection, RMSNorm query and key norms of the full width (`use_qk_norm`), a
    biased GELU MLP, two norms (`norm_type`: LayerNorm with bias, or RMSNorm) and two layer-scale
    vectors; a final LayerNorm unless `use_mean_pooling`."""
    h, f = v.int("hidden_size"), v.int("intermediate_size")
    (img_h, img_w), (p_h, p_w) = _pair(v, "image_size"), _pair(v, "patch_size")
    channels = v.int("num_channels")
    patches = (img_h // p_h) * (img_w // p_w)
    embeddings = channels * p_h * p_w * h + h + h  # convolution with bias, class token
    embeddings += h if v.flag("use_mask_token", False) else 0
    embeddings += (patches + 1) * h if v.flag("use_absolute_position_embeddings", True) else 0
    norm = 2 * h if v.data.get("norm_type", "layer_norm") == "layer_norm" else h
    attention = 3 * h * h + (3 * h if v.flag("attention_bias", False) else 0) + (h * h + h)
    attention += 2 * h if v.flag("use_qk_norm", False) else 0
    layer = attention + (2 * h * f + f + h) + 2 * norm + 2 * h
    final = 0 if v.flag("use_mean_pooling", True) else 2 * h
    return embeddings + v.int("num_hidden_layers") * layer + final


def glm4v_vision_params(v: ConfigReader) -> int:
    """Glm4vVisionModel (GLM-4.1V, GLM-4.5V): learned positions for every patch, a biased Conv3d
    patch embedding, an RMSNorm after it, blocks of two RMSNorms, a fused qkv (biased by
    `attention_bias`) and an unbiased proj, an unbiased SwiGLU of `out_hidden_size`; a final
    RMSNorm, a biased Conv2d merging spatial_merge_size^2 patches to `out_hidden_size`, and the
    merger: an unbiased proj, a LayerNorm, an unbiased SwiGLU of `intermediate_size`."""
    h, o, f = v.int("hidden_size"), v.int("out_hidden_size"), v.int("intermediate_size")
    (img_h, img_w), (p_h, p_w) = _pair(v, "image_size"), _pair(v, "patch_size")
    positions = (img_h // p_h) * (img_w // p_w) * h
    patch = v.int("in_channels") * v.int("temporal_patch_size") * p_h * p_w * h + h
    attention = 3 * h * h + (3 * h if v.flag("attention_bias", False) else 0) + h * h
    block = 2 * h + attention + 3 * h * o
    merge = v.int("spatial_merge_size")
    downsample = h * o * merge * merge + o
    merger = o * o + 2 * o + 3 * o * f
    return positions + patch + h + v.int("depth") * block + h + downsample + merger


def kimi_k25_vision_params(v: ConfigReader) -> int:
    """Kimi_K25VisionModel (MoonViT): a biased patch convolution over three channels, a learned
    pos_emb_height x pos_emb_width position grid, LayerNorm blocks with biased q/k/v/proj and a
    biased two-matrix MLP, a final LayerNorm (rotary and temporal positions have no weights)."""
    h, f = v.int("hidden_size"), v.int("intermediate_size")
    p_h, p_w = _pair(v, "patch_size")
    embed = 3 * p_h * p_w * h + h + v.int("pos_emb_height") * v.int("pos_emb_width") * h
    layer = 2 * 2 * h + 4 * (h * h + h) + (2 * h * f + f + h)
    return embed + v.int("num_hidden_layers") * layer + 2 * h


def ernie_vl_vision_params(v: ConfigReader) -> int:
    """Ernie4_5_VLMoeVisionTransformerPretrainedModel (ERNIE-4.5-VL): an unbiased Linear patch
    embedding over in_channels x patch^2 pixels, blocks of two LayerNorms, a biased fused qkv and
    proj, a biased two-matrix MLP of `intermediate_size`; a final LayerNorm (rotary positions have
    no weights)."""
    h, f = v.int("hidden_size"), v.int("intermediate_size")
    p_h, p_w = _pair(v, "patch_size")
    block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (2 * h * f + f + h)
    return v.int("in_channels") * p_h * p_w * h + v.int("depth") * block + 2 * h


TOWERS: dict[str, Callable[[ConfigReader], int]] = {
    "siglip_vision_model": siglip_params,
    "siglip2_vision_model": siglip2_params,
    "clip_vision_model": clip_params,
    "pixtral": pixtral_params,
    "llama4_vision_model": llama4_vision_params,
    "qwen2_vl": qwen2_vl_params,
    "qwen2_5_vl": qwen2_5_vl_params,
    "qwen3_vl": qwen3_vl_params,
    "qwen3_5_vision": qwen3_vl_params,
    "qwen3_5_moe_vision": qwen3_vl_params,
    "internvl_vision": internvl_vision_params,
    "glm4v_vision": glm4v_vision_params,
    "glm4v_moe_vision": glm4v_vision_params,
    "kimi_k25_vision": kimi_k25_vision_params,
    "ernie4_5_vl_moe_vision": ernie_vl_vision_params,
}
