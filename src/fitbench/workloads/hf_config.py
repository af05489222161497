"""Read a local Hugging Face ``config.json`` into a fitbench architecture and Workload.

Why: users rarely know a model's layer count or hidden size by heart, but they always have its
``config.json``. Each model family spells the same sizes differently (``n_embd`` in GPT-2,
``dim`` in DistilBERT, ``padded_vocab_size`` in ChatGLM) and hard-codes different biases, so
every supported ``model_type`` has its own small reader that pulls the right keys and fills in
the defaults of the matching transformers config class. The resulting parameter counts are
exact for every supported family (golden-tested against published counts and, when
transformers is installed, against the real models), with two documented approximations:
ELECTRA's factorised embeddings (``embedding_size`` != ``hidden_size``) and ChatGLM without a
final norm (``post_layer_norm: false``) are counted as if they had the common layout.

Everything a user can get wrong in the file (missing keys, strings for numbers, sizes that do not
divide, an unknown model type) raises ``FitbenchError`` naming the file and the key, never a raw
``KeyError`` or ``TypeError``. No network and no framework import: the file is read as JSON.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fitbench.errors import FitbenchError, close_match_hint
from fitbench.workloads.arch import RESNET_LAYERS, ResNetArch, TransformerArch
from fitbench.workloads.config_reader import MAX_POSITIONS, MAX_SIZE, ConfigReader
from fitbench.workloads.config_values import show
from fitbench.workloads.multimodal import WRAPPERS, text_config
from fitbench.workloads.quant_config import config_storage
from fitbench.workloads.workload import DECODER_TRAIN_SEQ_LEN, Workload

CONFIG_NAME = "config.json"

MAX_STAGE_BLOCKS = 1 << 12  # ResNet blocks in one stage (ResNet-152 has 36)

ENCODER_TYPES = (
    "bert",
    "roberta",
    "xlm-roberta",
    "camembert",
    "electra",
    "distilbert",
    "deberta-v2",
    "vit",
)
# Encoders whose embeddings number positions from pad_token_id + 1 (transformers'
# create_position_ids_from_input_ids): their first pad_token_id + 1 rows are never a token's.
PADDING_OFFSET_TYPES = ("roberta", "xlm-roberta", "camembert")
DECODER_TYPES = (
    "llama",
    "yi",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "phi3",
    "olmo",
    "olmo2",
    "olmo3",
    "exaone4",
    "seed_oss",
    "internlm3",
    "helium",
    "hunyuan_v1_dense",
    "ernie4_5",
    "internlm2",
    "baichuan",
    "granite",
    "smollm3",
    "starcoder2",
    "cohere",
    "cohere2",
    "glm",
    "glm4",
    "arcee",
    "jais2",
    "apertus",
    "nemotron",
    "ministral",
    "ministral3",
    "stablelm",
    "phi",
    "minicpm3",
    "youtu",
    "qwen3_5_text",
    "granitemoehybrid",
    "bamba",
    "nemotron_h",
    "lfm2",
    "gpt2",
    "gpt_bigcode",
    "gptj",
    "gpt_neox",
    "falcon",
    "chatglm",
)
MOE_TYPES = (
    "mixtral",
    "phimoe",
    "qwen2_moe",
    "qwen3_moe",
    "qwen3_next",
    "qwen3_5_moe_text",
    "olmoe",
    "minimax_m2",
    "ernie4_5_moe",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "mistral4",
    "glm4_moe_lite",
    "glm4_moe",
    "solar_open",
    "exaone_moe",
    "afmoe",
    "flex_olmo",
    "gpt_oss",
    "llama4_text",
    "hunyuan_v1_moe",
    "granitemoe",
    "granitemoeshared",
    "dots1",
    "lfm2_moe",
)
# Multimodal files whose language model is read, with their vision tower counted (multimodal.py).
MULTIMODAL_TYPES = (
    "ernie4_5_vl_moe",
    "gemma3",
    "glm4v",
    "glm4v_moe",
    "internvl",
    "kimi_k25",
    "lfm2_vl",
    "llama4",
    "llava",
    "llava_next",
    "mistral3",
    "qwen2_vl",
    "qwen2_5_vl",
    "qwen3_vl",
    "qwen3_vl_moe",
    "qwen3_5",
    "qwen3_5_moe",
)
SUPPORTED_MODEL_TYPES = tuple(
    dict.fromkeys((*ENCODER_TYPES, *DECODER_TYPES, *MOE_TYPES, *MULTIMODAL_TYPES, "resnet"))
)
# Families fitbench knows but cannot estimate yet, with the reason a user reads.
# Families whose names sit close to a supported one but whose blocks are another kind: reading
# them as the near name would count the wrong model, so they get their reason, not a "did you
# mean" (the key is model_type with dashes, as arch_from_hf_config compares it).
_LINEAR = "mixes linear-attention layers (a fixed recurrent state, no KV cache) with attention layers"
_LINEAR_ZH = "混合了线性注意力层(固定的循环状态,没有 KV 缓存)与注意力层"
_SPARSE = "adds a sparse-attention indexer to latent attention"
_SPARSE_ZH = "在潜在注意力上加入了稀疏注意力索引器"
_PER_LAYER = "has per-layer input embeddings and layers that share another layer's KV cache"
_PER_LAYER_ZH = "带有逐层输入嵌入,且部分层共享其他层的 KV 缓存"
# State-space and recurrent families keep a fixed state per sequence instead of a KV cache (or
# beside it), and encoder-decoders attend across to an encoder's output: neither is a decoder
# or an encoder as fitbench lays them out, whatever their names resemble ('mamba' is not 'llama').
_STATE = "has state-space or recurrent layers (a fixed state per sequence, not a KV cache)"
_STATE_ZH = "含状态空间或循环层(每个序列一个固定状态,而非 KV 缓存)"
_ENC_DEC = "is an encoder-decoder (its decoder attends to the encoder's output)"
_ENC_DEC_ZH = "是编码器-解码器模型(解码器对编码器的输出做交叉注意力)"
STATE_SPACE_TYPES = {
    "mamba": "Mamba",
    "mamba2": "Mamba-2",
    "falcon-mamba": "Falcon-Mamba",
    "jamba": "Jamba",
    "falcon-h1": "Falcon-H1",
    "zamba": "Zamba",
    "zamba2": "Zamba2",
    "rwkv": "RWKV",
    "recurrent-gemma": "RecurrentGemma",
    "xlstm": "xLSTM",
}
ENCODER_DECODER_TYPES = {
    "t5": "T5",
    "mt5": "mT5",
    "umt5": "UMT5",
    "longt5": "LongT5",
    "switch-transformers": "Switch Transformers",
    "bart": "BART",
    "mbart": "mBART",
    "pegasus": "Pegasus",
    "marian": "Marian",
    "m2m-100": "M2M-100 / NLLB",
    "nllb-moe": "NLLB-MoE",
    "whisper": "Whisper",
    "blenderbot": "Blenderbot",
    "led": "LED",
}
NOT_YET = {
    **{t: f"{name} {_STATE}; fitbench does not model those yet" for t, name in STATE_SPACE_TYPES.items()},
    **{
        t: f"{name} {_ENC_DEC}; fitbench does not model those yet"
        for t, name in ENCODER_DECODER_TYPES.items()
    },
    "minimax": f"MiniMax-Text-01 {_LINEAR}; fitbench does not model those yet",
    "chatglm-6b": "the first ChatGLM-6B layout is not supported",
    "kimi-linear": f"Kimi-Linear {_LINEAR}; fitbench does not model those yet",
    "deepseek-v32": f"DeepSeek-V3.2 {_SPARSE}; fitbench does not model it yet",
    "mistral-large4": f"Mistral Large 4 {_SPARSE}; fitbench does not model it yet",
    "mistral-large4-text": f"Mistral Large 4 {_SPARSE}; fitbench does not model it yet",
    "glm-moe-dsa": f"GLM-5 (glm_moe_dsa) {_SPARSE}; fitbench does not model it yet",
    "gemma3n": f"Gemma-3n {_PER_LAYER}; fitbench does not model those yet",
    "gemma4": f"Gemma 4 {_PER_LAYER}; fitbench does not model those yet",
}
NOT_YET_ZH = {
    **{t: f"{name} {_STATE_ZH};fitbench 尚未对其建模" for t, name in STATE_SPACE_TYPES.items()},
    **{t: f"{name} {_ENC_DEC_ZH};fitbench 尚未对其建模" for t, name in ENCODER_DECODER_TYPES.items()},
    "minimax": f"MiniMax-Text-01 {_LINEAR_ZH};fitbench 尚未对其建模",
    "chatglm-6b": "不支持最早的 ChatGLM-6B 结构",
    "kimi-linear": f"Kimi-Linear {_LINEAR_ZH};fitbench 尚未对其建模",
    "deepseek-v32": f"DeepSeek-V3.2 {_SPARSE_ZH};fitbench 尚未对其建模",
    "mistral-large4": f"Mistral Large 4 {_SPARSE_ZH};fitbench 尚未对其建模",
    "mistral-large4-text": f"Mistral Large 4 {_SPARSE_ZH};fitbench 尚未对其建模",
    "glm-moe-dsa": f"GLM-5(glm_moe_dsa){_SPARSE_ZH};fitbench 尚未对其建模",
    "gemma3n": f"Gemma-3n {_PER_LAYER_ZH};fitbench 尚未对其建模",
    "gemma4": f"Gemma 4 {_PER_LAYER_ZH};fitbench 尚未对其建模",
}


def _transformer(r: ConfigReader, **fields: Any) -> TransformerArch:
    """Build the arch, re-raising its own validation errors with the file name in front.

    A key-value head count equal to the head count, or a head size equal to hidden / heads,
    is the default and is left out, so that the same model read from any config (or a preset)
    is one equal TransformerArch.
    """
    if fields.get("num_kv_heads") == fields["num_heads"]:
        fields["num_kv_heads"] = None
    head_dim = fields.get("head_dim")
    if head_dim is not None and head_dim * fields["num_heads"] == fields["hidden_size"]:
        fields["head_dim"] = None
    try:
        return TransformerArch(model_type=r.model_type, **fields)
    except FitbenchError as exc:
        raise r.error(exc.message, exc.hint, message_zh=exc.message_zh, hint_zh=exc.hint_zh) from None


# -- encoders -----------------------------------------------------------------------------------
def _bert_like(r: ConfigReader) -> TransformerArch:
    """BERT, RoBERTa, XLM-RoBERTa, CamemBERT and ELECTRA share BertModel's layout and key names.

    RoBERTa's classification head (dense + out_proj) and ELECTRA's have exactly the parameters of
    BERT's pooler + classifier, so `pooler=True` counts all of them right. ELECTRA's factorised
    embeddings (`embedding_size` smaller than `hidden_size`, plus a projection) are counted at
    `hidden_size`: TransformerArch has no separate embedding width. The RoBERTa family numbers
    positions from pad_token_id + 1 (1 in RobertaConfig when the file leaves it out), so
    roberta-base's 514 rows hold 512 tokens: the offset becomes `position_offset`.
    """
    r.require(
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
    )
    if r.model_type == "electra":
        r.int("embedding_size", default=None)  # validated; see the docstring for how it is counted
    return _transformer(
        r,
        kind="encoder",
        vocab_size=r.int("vocab_size"),
        hidden_size=r.int("hidden_size"),
        num_layers=r.int("num_hidden_layers"),
        num_heads=r.int("num_attention_heads"),
        intermediate_size=r.int("intermediate_size"),
        max_positions=r.int("max_position_embeddings", maximum=MAX_POSITIONS),
        position_offset=(
            r.int("pad_token_id", default=1, minimum=0, maximum=MAX_POSITIONS) + 1
            if r.model_type in PADDING_OFFSET_TYPES
            else 0
        ),
        type_vocab_size=r.int("type_vocab_size", default=2, minimum=0),
        num_labels=r.num_labels(),
    )


def _distilbert(r: ConfigReader) -> TransformerArch:
    """DistilBERT: BERT without token types, under its own names; its pre_classifier is a pooler."""
    keys = (
        ("vocab_size",),
        ("dim", "hidden_size"),
        ("n_layers", "num_hidden_layers"),
        ("n_heads", "num_attention_heads"),
        ("hidden_dim",),
        ("max_position_embeddings",),
    )
    r.require(*keys)
    return _transformer(
        r,
        kind="encoder",
        vocab_size=r.int("vocab_size"),
        hidden_size=r.int("dim", "hidden_size"),
        num_layers=r.int("n_layers", "num_hidden_layers"),
        num_heads=r.int("n_heads", "num_attention_heads"),
        intermediate_size=r.int("hidden_dim"),
        max_positions=r.int("max_position_embeddings", maximum=MAX_POSITIONS),
        type_vocab_size=0,
        num_labels=r.num_labels(),
    )


def _deberta_v2(r: ConfigReader) -> TransformerArch:
    """DeBERTa-v2/v3: BERT's blocks with disentangled attention. Absolute positions only with
    `position_biased_input`; a relative-position table (2 x buckets or 2 x max_relative_positions
    rows, with a LayerNorm under `norm_rel_ebd: layer_norm`) and, without `share_att_key`, the
    c2p / p2c projections of every layer are counted as extra parameters; the ContextPooler and
    classifier are BERT's pooler and classifier."""
    r.require("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    if r.int("conv_kernel_size", default=0, minimum=0):
        raise r.error(
            "DeBERTa's convolution layer ('conv_kernel_size') is not supported",
            "set conv_kernel_size to 0 or use another model",
            message_zh="不支持 DeBERTa 的卷积层('conv_kernel_size')",
            hint_zh="请把 conv_kernel_size 设为 0,或换用其他模型",
        )
    if r.int("embedding_size", default=None) not in (None, r.int("hidden_size")):
        raise r.error(
            "an 'embedding_size' different from 'hidden_size' is not supported",
            message_zh="不支持与 'hidden_size' 不同的 'embedding_size'",
        )
    hidden = r.int("hidden_size")
    layers = r.int("num_hidden_layers", maximum=MAX_LAYERS)
    positions = r.int("max_position_embeddings", default=512, maximum=MAX_POSITIONS)
    extra = 0
    if r.flag("relative_attention", False):
        buckets = r.int("position_buckets", default=-1, minimum=-1)
        max_rel = r.int("max_relative_positions", default=-1, minimum=-1)
        span = buckets if buckets > 0 else (max_rel if max_rel >= 1 else positions)
        extra += 2 * span * hidden
        if "layer_norm" in r.text("norm_rel_ebd", "none"):
            extra += 2 * hidden
        if not r.flag("share_att_key", False):
            kinds = r.data.get("pos_att_type") or []
            kinds = kinds.split("|") if isinstance(kinds, str) else kinds
            if not isinstance(kinds, list):
                raise r.error(
                    f'\'pos_att_type\' must be a list such as ["p2c", "c2p"], got {show(kinds)}',
                    message_zh=(
                        f'\'pos_att_type\' 必须是列表,例如 ["p2c", "c2p"],实际为 {show(kinds, "zh")}'
                    ),
                )
            extra += layers * sum(hidden * hidden + hidden for k in ("c2p", "p2c") if k in kinds)
    return _transformer(
        r,
        kind="encoder",
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=r.int("num_attention_heads"),
        intermediate_size=r.int("intermediate_size"),
        max_positions=positions,
        position="learned" if r.flag("position_biased_input", True) else "relative",
        type_vocab_size=r.int("type_vocab_size", default=0, minimum=0),
        num_labels=r.num_labels(),
        extra_params=extra,
    )


def _vit(r: ConfigReader) -> TransformerArch:
    """ViT for image classification: an encoder over (image_size / patch_size)^2 patches plus a
    class token, pre-norm blocks (two LayerNorms each, as BERT's), q/k/v bias by `qkv_bias`, a
    final LayerNorm and a classifier without pooler (ViTForImageClassification). Its tokens are
    the sequence: a workload's seq_len is the patch count + 1."""
    r.require("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    image = r.int("image_size", default=224, maximum=1 << 16)
    patch = r.int("patch_size", default=16, maximum=1 << 12)
    if patch > image:
        raise r.error(
            f"'patch_size' {patch} is larger than 'image_size' {image}",
            message_zh=f"'patch_size' {patch} 大于 'image_size' {image}",
        )
    return _transformer(
        r,
        kind="encoder",
        vocab_size=0,
        hidden_size=r.int("hidden_size"),
        num_layers=r.int("num_hidden_layers", maximum=MAX_LAYERS),
        num_heads=r.int("num_attention_heads"),
        intermediate_size=r.int("intermediate_size"),
        max_positions=(image // patch) ** 2 + 1,
        qkv_bias=r.flag("qkv_bias", True),
        type_vocab_size=0,
        num_labels=r.num_labels(),
        pooler=False,
        patch_size=patch,
        num_channels=r.int("num_channels", default=3, maximum=1 << 10),
    )


# -- decoders -----------------------------------------------------------------------------------
# The spellings of one size across families, tried in order.
HIDDEN = ("hidden_size", "n_embd", "d_model", "dim")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
FFN = ("intermediate_size", "ffn_hidden_size", "n_inner", "d_ff")
VOCAB = ("vocab_size", "padded_vocab_size")
POSITIONS = ("max_position_embeddings", "n_positions", "seq_length", "max_sequence_length")
MAX_LAYERS = 1 << 12  # the deepest published decoders have ~120 blocks


def _sliding(r: ConfigReader, num_layers: int, rule: str) -> dict[str, Any]:
    """Sliding-window layers: an explicit `layer_types` list wins, else the family's rule.

    rule: 'all' (Mistral, Mixtral, Phi-3 when `sliding_window` is set), 'alternate' (Gemma-2:
    even layers), 'pattern' (Gemma-3: all but every `sliding_window_pattern`-th, default 6;
    'pattern4': default 4, Cohere2),
    'qwen2' (layers from `max_window_layers` on, only with `use_sliding_window`), 'dots1' (the
    same layers wherever `sliding_window` is set, `max_window_layers` 62 by default), 'none'.
    """
    if rule == "qwen2" and not r.flag("use_sliding_window", False):
        return {}
    window = r.int("sliding_window", default=None, maximum=MAX_POSITIONS)
    if window is None or rule == "none":
        return {}
    types = r.data.get("layer_types")
    if types is not None:
        if (
            not isinstance(types, list)
            or len(types) != num_layers
            or not all(isinstance(t, str) for t in types)
        ):
            raise r.error(
                f"'layer_types' must list one name per layer ({num_layers}), got {show(types)}",
                message_zh=(
                    f"'layer_types' 必须为每一层列出一个名称({num_layers} 个),实际为 {show(types, 'zh')}"
                ),
            )
        count = sum(t == "sliding_attention" for t in types)
    elif rule == "all":
        count = num_layers
    elif rule == "alternate":
        count = (num_layers + 1) // 2
    elif rule in ("pattern", "pattern4"):
        pattern = r.int("sliding_window_pattern", default=6 if rule == "pattern" else 4)
        count = num_layers - num_layers // pattern
    else:  # qwen2, dots1
        default = 62 if rule == "dots1" else 28
        count = max(num_layers - r.int("max_window_layers", default=default, minimum=0), 0)
    return {"sliding_window": window, "sliding_layers": count} if count else {}


def _decoder(
    r: ConfigReader,
    *,
    tie: bool = False,
    max_positions: int = 2048,
    head_dim: int | None = None,
    bias: str | None = "attention_bias",
    qkv_bias: bool | None = None,
    out_bias: bool | None = None,
    mlp_bias: bool | None = None,
    sliding: str = "none",
    ffn_default: int | None = None,
    **fixed: Any,
) -> TransformerArch:
    """The common decoder reader: sizes under any of their family spellings, then the family's
    fixed choices (`fixed`) and biases. `bias` names the config key that switches the biases
    that the family does not hard-code (`qkv_bias` etc. given here win)."""
    required: list[tuple[str, ...]] = [VOCAB, HIDDEN, LAYERS, HEADS]
    if ffn_default is None and "intermediate_size" not in fixed:
        required.append(FFN)
    r.require(*required)
    hidden = r.int(*HIDDEN)
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    num_heads = r.int(*HEADS)
    switch = r.flag(bias, False) if bias else False
    fields: dict[str, Any] = dict(
        kind="decoder",
        vocab_size=r.int(*VOCAB),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=num_heads,
        num_kv_heads=r.int(*KV_HEADS, default=num_heads),
        head_dim=r.int("head_dim", default=head_dim),
        intermediate_size=r.int(*FFN, default=ffn_default) if "intermediate_size" not in fixed else None,
        max_positions=r.int(*POSITIONS, default=max_positions, maximum=MAX_POSITIONS),
        mlp="swiglu",
        norm="rmsnorm",
        position="rotary",
        qkv_bias=switch if qkv_bias is None else qkv_bias,
        out_bias=switch if out_bias is None else out_bias,
        mlp_bias=(r.flag("mlp_bias", False) if bias == "attention_bias" else switch)
        if mlp_bias is None
        else mlp_bias,
        tie_embeddings=r.flag("tie_word_embeddings", tie),
        pooler=False,
        num_labels=0,
    )
    fields.update(fixed)
    fields.update(_sliding(r, layers, sliding))
    return _transformer(r, **fields)


def _llama(r: ConfigReader) -> TransformerArch:
    """Llama 2/3 and Yi (RMSNorm, SwiGLU, rotary, optional GQA; biases by `attention_bias`)."""
    return _decoder(r)


def _mistral(r: ConfigReader) -> TransformerArch:
    """Mistral: Llama without biases; `sliding_window` (v0.1: 4096) on every layer."""
    return _decoder(r, max_positions=131072, bias=None, sliding="all")


def _qwen2(r: ConfigReader) -> TransformerArch:
    """Qwen2/2.5: q/k/v projections with bias, o_proj without; sliding only with use_sliding_window."""
    return _decoder(r, max_positions=32768, bias=None, qkv_bias=True, sliding="qwen2")


def _qwen3(r: ConfigReader) -> TransformerArch:
    """Qwen3: no q/k/v bias (`attention_bias`), an RMSNorm of head_dim on queries and on keys."""
    return _decoder(r, max_positions=32768, head_dim=128, mlp_bias=False, qk_norm="head", sliding="qwen2")


def _gemma(r: ConfigReader) -> TransformerArch:
    """Gemma: gated GELU MLP (three matrices like SwiGLU), head_dim 256 by default, tied embeddings."""
    return _decoder(r, tie=True, max_positions=8192, head_dim=256, mlp_bias=False)


def _gemma2(r: ConfigReader) -> TransformerArch:
    """Gemma-2: Gemma with post-attention and post-MLP norms (four a block), every other layer local."""
    return _decoder(
        r, tie=True, max_positions=8192, head_dim=256, mlp_bias=False, norms_per_layer=4, sliding="alternate"
    )


def _gemma3(r: ConfigReader) -> TransformerArch:
    """Gemma-3 text: Gemma-2 plus query/key norms; five of six layers local. A multimodal config
    (`gemma3` with `text_config`) is read by multimodal.py: this language model plus its tower."""
    return _decoder(
        r,
        tie=True,
        max_positions=131072,
        head_dim=256,
        mlp_bias=False,
        norms_per_layer=4,
        qk_norm="head",
        sliding="pattern",
    )


def _phi3(r: ConfigReader) -> TransformerArch:
    """Phi-3 fuses qkv_proj and gate_up_proj, which changes no count; `sliding_window` on every layer."""
    return _decoder(r, max_positions=4096, bias=None, sliding="all")


def _olmo(r: ConfigReader) -> TransformerArch:
    """OLMo (first version): LayerNorms without weights, no biases (`attention_bias`)."""
    return _decoder(r, norm="nonparametric", mlp_bias=False)


def _olmo2(r: ConfigReader) -> TransformerArch:
    """OLMo-2: post-norms (two a block) and RMSNorms over all query and key heads."""
    return _decoder(r, max_positions=4096, mlp_bias=False, qk_norm="full")


def _olmo3(r: ConfigReader) -> TransformerArch:
    """OLMo-3: OLMo-2's blocks, three of four layers attending to a `sliding_window` (4096)
    window (`layer_types`)."""
    return _decoder(r, max_positions=2048, mlp_bias=False, qk_norm="full", sliding="pattern4")


# Exaone4Config's and ExaoneMoeConfig's window where a saved file leaves the keys out (an explicit
# null keeps none; transformers 5.17 and 5.24 alike)
EXAONE_WINDOW_DEFAULTS = {"sliding_window": 4096, "sliding_window_pattern": 4}


def _exaone4(r: ConfigReader) -> TransformerArch:
    """EXAONE 4.0: post-norms as OLMo-2 (two a block, Llama's RMSNorm), an RMSNorm of head_dim on
    queries and on keys, no biases; with a `sliding_window`, the layers `layer_types` marks (or
    `sliding_window_pattern`: a period such as 4, or a string such as "LLLG" whose L's are local)
    attend to that window (the 32B model); with an explicit null every layer is global (1.2B).
    Keys a saved file leaves out take Exaone4Config's defaults (EXAONE_WINDOW_DEFAULTS), as
    transformers builds the model: a 4096-token window on three layers of four."""
    r = ConfigReader({**EXAONE_WINDOW_DEFAULTS, **r.data}, r.source, r.model_type)
    return _decoder(r, bias=None, mlp_bias=False, qk_norm="head", **_exaone_windows(r))


def _exaone_windows(r: ConfigReader) -> dict[str, Any]:
    """EXAONE's windowed layers: `layer_types`, else `sliding_window_pattern` as a period (every
    such layer global, the rest local) or a string of L (local) and G (global) repeated."""
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    pattern = r.data.get("sliding_window_pattern")
    if not (isinstance(pattern, str) and r.data.get("layer_types") is None and r.data.get("sliding_window")):
        return _sliding(r, layers, "pattern4")
    if not pattern or set(pattern.upper()) - {"L", "G"}:
        raise r.error(
            "'sliding_window_pattern' must be a number or letters L (local) and G (global), "
            f"got {show(pattern)}",
            message_zh=(
                f"'sliding_window_pattern' 必须是数字,或由 L(局部)和 G(全局)组成,实际为 {show(pattern, 'zh')}"
            ),
        )
    local = sum(pattern.upper()[i % len(pattern)] == "L" for i in range(layers))
    window = r.int("sliding_window", maximum=MAX_POSITIONS)
    return {"sliding_window": window, "sliding_layers": local} if local else {}


def _exaone_moe(r: ConfigReader) -> TransformerArch:
    """K-EXAONE (`exaone_moe`): EXAONE 4.0's attention (query/key norms of head_dim, local layers
    by its window pattern) in pre-norm blocks (OLMoE's, not EXAONE 4.0's post-norms), the first
    `first_k_dense_replace` layers (or `mlp_layer_types`' dense ones) a SwiGLU MLP, the rest
    DeepSeek-V3's sigmoid-routed experts (`num_experts` of `moe_intermediate_size`) plus
    `num_shared_experts` shared ones; ExaoneMoeConfig's defaults for the keys a saved file
    leaves out. The multi-token-prediction weights (`mtp.*`) are not loaded and not counted."""
    r = ConfigReader({**EXAONE_WINDOW_DEFAULTS, **r.data}, r.source, r.model_type)
    width = r.int("moe_intermediate_size", default=1024)
    moe = dict(
        num_experts=r.int("num_experts", default=64, maximum=1 << 16),
        experts_per_token=r.int("num_experts_per_tok", default=8, maximum=1 << 16),
        expert_intermediate_size=width,
        shared_intermediate_size=width * r.int("num_shared_experts", default=1, minimum=0),
        dense_layers=_leading_dense_layers(r, 1),
    )
    return _decoder(
        r,
        bias=None,
        mlp_bias=False,
        qk_norm="head",
        ffn_default=16384,
        **_exaone_windows(r),
        **moe,
    )


def _seed_oss(r: ConfigReader) -> TransformerArch:
    """Seed-OSS: Llama's blocks with q/k/v biases (`attention_bias`, on by default) and an output
    projection biased only by `attention_out_bias`; head_dim 128 by default."""
    return _decoder(
        r,
        max_positions=524288,
        head_dim=128,
        bias=None,
        qkv_bias=r.flag("attention_bias", True),
        out_bias=r.flag("attention_out_bias", False),
        mlp_bias=r.flag("mlp_bias", False),
    )


def _internlm3(r: ConfigReader) -> TransformerArch:
    """InternLM3: Llama's blocks (transformers builds it as Llama), head_dim 128 by default; its
    own keys switch the biases: `qkv_bias` the q/k/v projections, `bias` the output projection
    and the MLP (transformers' aliases `attention_bias` and `mlp_bias` are read too)."""
    qkv = r.flag("qkv_bias", r.flag("attention_bias", False))
    rest = r.flag("bias", r.flag("mlp_bias", False))
    return _decoder(
        r, max_positions=32768, head_dim=128, bias=None, qkv_bias=qkv, out_bias=rest, mlp_bias=rest
    )


def _helium(r: ConfigReader) -> TransformerArch:
    """Helium: Llama's blocks, head_dim 128 by default; `attention_bias` reaches q, k and v
    only (the output projection never has one), `mlp_bias` the MLP."""
    return _decoder(
        r,
        max_positions=4096,
        head_dim=128,
        bias=None,
        qkv_bias=r.flag("attention_bias", False),
        out_bias=False,
        mlp_bias=r.flag("mlp_bias", False),
    )


def _ernie45(r: ConfigReader) -> TransformerArch:
    """ERNIE 4.5 (dense): Llama layout, head_dim 128 by default; `use_bias` switches the blocks' biases."""
    return _decoder(r, tie=True, max_positions=131072, bias="use_bias", head_dim=128)


def _granite(r: ConfigReader) -> TransformerArch:
    """Granite 3: Llama's layout (its embedding, residual, attention and logits multipliers are
    scalars, not parameters); biases by `attention_bias` and `mlp_bias`."""
    return _decoder(r)


def _arcee(r: ConfigReader) -> TransformerArch:
    """Arcee (AFM): Llama's attention and a two-matrix MLP (up, ReLU squared, down); biases by
    `attention_bias` and `mlp_bias`."""
    return _decoder(r, max_positions=4096, mlp="gelu")


def _jais2(r: ConfigReader) -> TransformerArch:
    """Jais 2 (`jais2`): Llama's attention with q/k/v/o biases by `attention_bias` (default on),
    a two-matrix MLP (up, ReLU squared, down) biased by `mlp_bias` (default on), LayerNorms with
    weight and bias."""
    return _decoder(
        r,
        max_positions=8192,
        bias=None,
        qkv_bias=r.flag("attention_bias", True),
        out_bias=r.flag("attention_bias", True),
        mlp_bias=r.flag("mlp_bias", True),
        mlp="gelu",
        norm="layernorm",
    )


def _apertus(r: ConfigReader) -> TransformerArch:
    """Apertus: an RMSNorm of head_dim on queries and on keys, a two-matrix MLP (up, xIELU,
    down) whose activation learns two scalars a layer (alpha_p, alpha_n), no MLP bias."""
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    return _decoder(
        r,
        max_positions=65536,
        mlp_bias=False,
        mlp="gelu",
        qk_norm="head",
        extra_params=2 * layers,
    )


def _nemotron(r: ConfigReader) -> TransformerArch:
    """Nemotron / Minitron: LayerNorms with weight and bias (LayerNorm1P), a two-matrix MLP
    (up, ReLU squared, down), biases by `attention_bias` and `mlp_bias`, partial rotary."""
    return _decoder(r, max_positions=4096, mlp="gelu", norm="layernorm")


def _ministral(r: ConfigReader) -> TransformerArch:
    """Ministral: Mistral's blocks without biases; the layers `layer_types` marks (every layer
    when it is absent and `sliding_window` is set) attend to that window."""
    return _decoder(r, max_positions=131072, bias=None, sliding="all")


def _ministral3(r: ConfigReader) -> TransformerArch:
    """Ministral 3 (`ministral3`, the language model of Mistral's Ministral 3 checkpoints): Mistral's
    blocks without biases, head_dim 128 and 262,144 positions by default, `sliding_window` (none in
    the published files) on every layer. Each layer also scales its rotated queries by position
    (Llama 4's attention scale, from `rope_parameters`): weights and saved tensors as Mistral's,
    a few more operations a layer (transformer_cost.POSITION_SCALED_QUERY_TYPES)."""
    return _decoder(r, max_positions=262144, head_dim=128, bias=None, sliding="all")


def _stablelm(r: ConfigReader) -> TransformerArch:
    """StableLM / StableLM 2: LayerNorms with biases, SwiGLU without biases, q/k/v biased by
    `use_qkv_bias`, partial rotary; `use_parallel_residual` runs attention and MLP on one norm
    (StableLM-2-12B). Its per-head query/key LayerNorms (`qk_layernorm`) are not supported."""
    if r.flag("qk_layernorm", False):
        raise r.error(
            "'qk_layernorm' (a LayerNorm for each query and key head) is not supported for stablelm",
            "estimate it with qk_layernorm false: those norms hold under 0.01 % of the weights",
            message_zh="stablelm 不支持 'qk_layernorm'(每个 query 与 key 头各一个 LayerNorm)",
            hint_zh="请按 qk_layernorm 为 false 估算:这些归一化层的参数不到权重的 0.01 %",
        )
    parallel = r.flag("use_parallel_residual", False)
    return _decoder(
        r,
        max_positions=4096,
        bias=None,
        qkv_bias=r.flag("use_qkv_bias", False),
        out_bias=False,
        mlp_bias=False,
        norm="layernorm",
        norms_per_layer=1 if parallel else 2,
        parallel_block=parallel,
    )


def _phi(r: ConfigReader) -> TransformerArch:
    """Phi-1 / Phi-1.5 / Phi-2 (`phi`): attention and a GELU MLP in parallel after one LayerNorm,
    biases on every Linear and on the untied LM head, partial rotary. Query/key LayerNorms
    (`qk_layernorm`, off in the published models) are not supported."""
    if r.flag("qk_layernorm", False):
        raise r.error(
            "'qk_layernorm' is not supported for phi",
            "estimate it with qk_layernorm false (the published Phi-1.5 and Phi-2 set it so)",
            message_zh="phi 不支持 'qk_layernorm'",
            hint_zh="请按 qk_layernorm 为 false 估算(已发布的 Phi-1.5 与 Phi-2 均如此)",
        )
    return _decoder(
        r,
        bias=None,
        qkv_bias=True,
        out_bias=True,
        mlp_bias=True,
        mlp="gelu",
        norm="layernorm",
        norms_per_layer=1,
        parallel_block=True,
        lm_head_bias=True,
    )


def _minicpm3(r: ConfigReader) -> TransformerArch:
    """MiniCPM3: DeepSeek-V2's latent attention (queries through `q_lora_rank`) over a dense
    SwiGLU MLP, tied embeddings; its embedding and residual scales are scalars. Attention
    biases (`attention_bias`, off in the published model) are not supported."""
    r.require("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    if r.flag("attention_bias", False):
        raise r.error(
            "'attention_bias' is not supported for minicpm3",
            "estimate it with attention_bias false (the published MiniCPM3 sets it so)",
            message_zh="minicpm3 不支持 'attention_bias'",
            hint_zh="请按 attention_bias 为 false 估算(已发布的 MiniCPM3 如此)",
        )
    explicit_null = "q_lora_rank" in r.data and r.data["q_lora_rank"] is None
    return _decoder(
        r,
        tie=True,
        max_positions=32768,
        bias=None,
        mlp_bias=r.flag("mlp_bias", False),
        num_kv_heads=None,
        head_dim=None,
        q_lora_rank=0 if explicit_null else r.int("q_lora_rank", default=768, minimum=0),
        kv_lora_rank=r.int("kv_lora_rank"),
        qk_rope_head_dim=r.int("qk_rope_head_dim"),
        qk_nope_head_dim=r.int("qk_nope_head_dim", minimum=0),
        v_head_dim=r.int("v_head_dim"),
    )


def _youtu(r: ConfigReader) -> TransformerArch:
    """Youtu-LLM (`youtu`): DeepSeek-V3's latent attention (queries through `q_lora_rank`, the
    rotary part on interleaved pairs, biases by `attention_bias`) over a dense SwiGLU MLP in every
    layer, tied embeddings. Keys a saved file leaves out take YoutuConfig's defaults (Youtu-LLM-2B's
    attention sizes); an explicit null `q_lora_rank` means no query compression."""
    explicit_null = "q_lora_rank" in r.data and r.data["q_lora_rank"] is None
    return _decoder(
        r,
        tie=True,
        max_positions=131072,
        ffn_default=6144,
        mlp_bias=False,
        num_kv_heads=None,
        head_dim=None,
        q_lora_rank=0 if explicit_null else r.int("q_lora_rank", default=1536, minimum=0),
        kv_lora_rank=r.int("kv_lora_rank", default=512),
        qk_rope_head_dim=r.int("qk_rope_head_dim", default=64),
        qk_nope_head_dim=r.int("qk_nope_head_dim", default=128, minimum=0),
        v_head_dim=r.int("v_head_dim", default=128),
    )


def _smollm3(r: ConfigReader) -> TransformerArch:
    """SmolLM3: Llama's layout with tied embeddings by default (its NoPE layers drop the rotary
    embedding, which has no parameters)."""
    return _decoder(r, tie=True, max_positions=32768)


def _starcoder2(r: ConfigReader) -> TransformerArch:
    """StarCoder2: GQA attention and a two-matrix GELU MLP (c_fc, c_proj), LayerNorms with
    biases, every Linear biased by `use_bias` (default on), tied embeddings; `sliding_window` on
    every layer where set."""
    bias = r.flag("use_bias", True)
    return _decoder(
        r,
        tie=True,
        max_positions=4096,
        bias=None,
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=bias,
        mlp="gelu",
        norm="layernorm",
        sliding="all",
    )


def _cohere(r: ConfigReader) -> TransformerArch:
    """Command-R (`cohere`) and Command-R7B / Command A (`cohere2`): attention and MLP in parallel
    after one LayerNorm without bias (a weight only, counted as an RMSNorm's), biases by
    `attention_bias`, tied embeddings; `use_qk_norm` adds such norms over every query and key
    head (Command-R+); cohere2 attends to a window in three of four layers (`layer_types`)."""
    return _decoder(
        r,
        tie=True,
        max_positions=8192,
        mlp_bias=False,
        norms_per_layer=1,
        parallel_block=True,
        qk_norm="full" if r.flag("use_qk_norm", False) else "none",
        sliding="pattern4" if r.model_type == "cohere2" else "none",
    )


def _internlm2(r: ConfigReader) -> TransformerArch:
    """InternLM2 (custom code): fused GQA `wqkv`, `wo`, w1/w2/w3 SwiGLU; `bias` switches biases."""
    return _decoder(r, max_positions=2048, bias="bias")


def _baichuan(r: ConfigReader) -> TransformerArch:
    """Baichuan/Baichuan2 (custom code): fused W_pack without bias, SwiGLU, RMSNorm, untied NormHead
    (ALiBi positions in the 13B models: no parameters either way)."""
    return _decoder(r, max_positions=4096, bias=None)


def _glm(r: ConfigReader) -> TransformerArch:
    """GLM-4 in transformers (`glm`): fused gate_up, q/k/v with bias (`attention_bias`, default on)."""
    return _decoder(r, max_positions=131072, bias=None, qkv_bias=r.flag("attention_bias", True), head_dim=128)


def _glm4(r: ConfigReader) -> TransformerArch:
    """GLM-4-0414 (`glm4`): `glm` with post-attention and post-MLP norms."""
    return _decoder(
        r,
        max_positions=131072,
        bias=None,
        qkv_bias=r.flag("attention_bias", True),
        head_dim=128,
        norms_per_layer=4,
    )


def _gpt2(r: ConfigReader) -> TransformerArch:
    """GPT-2: learned positions, LayerNorm, GELU MLP, biases everywhere, tied LM head.

    Its Conv1D layers are transposed Linears with the same parameter counts.
    """
    keys = (
        ("vocab_size",),
        ("n_embd", "hidden_size"),
        ("n_layer", "num_hidden_layers"),
        ("n_head", "num_attention_heads"),
        ("n_positions", "max_position_embeddings"),
    )
    r.require(*keys)
    hidden = r.int("n_embd", "hidden_size")
    return _transformer(
        r,
        kind="decoder",
        vocab_size=r.int("vocab_size"),
        hidden_size=hidden,
        num_layers=r.int("n_layer", "num_hidden_layers", maximum=MAX_LAYERS),
        num_heads=r.int("n_head", "num_attention_heads"),
        intermediate_size=r.int("n_inner", default=4 * hidden),
        max_positions=r.int("n_positions", "max_position_embeddings", maximum=MAX_POSITIONS),
        mlp="gelu",
        norm="layernorm",
        position="learned",
        qkv_bias=True,
        out_bias=True,
        mlp_bias=True,
        tie_embeddings=r.flag("tie_word_embeddings", True),
        pooler=False,
        num_labels=0,
        # None for transformers' default, so a config and the preset are one arch
        residual_dropout=_unless_default(r.probability("resid_pdrop"), 0.1),
    )


def _unless_default(value: float | None, default: float) -> float | None:
    return None if value is None or value == default else value


def _gpt_bigcode(r: ConfigReader) -> TransformerArch:
    """GPT-BigCode (StarCoder, SantaCoder): GPT-2's blocks with one key/value head for every
    query head (`multi_query`, on by default), learned positions, tied LM head."""
    arch = _gpt2(r)
    if r.flag("multi_query", True):
        arch = dataclasses.replace(arch, num_kv_heads=1 if arch.num_heads > 1 else None)
    return arch


def _gptj(r: ConfigReader) -> TransformerArch:
    """GPT-J: attention and MLP in parallel after one LayerNorm, rotary, q/k/v/out without bias,
    a GELU MLP with biases (n_inner, default 4 x n_embd), an untied LM head with a bias."""
    r.require(VOCAB, HIDDEN, LAYERS, HEADS)
    hidden = r.int(*HIDDEN)
    return _decoder(
        r,
        bias=None,
        qkv_bias=False,
        out_bias=False,
        mlp_bias=True,
        ffn_default=4 * hidden,
        mlp="gelu",
        norm="layernorm",
        norms_per_layer=1,
        parallel_block=True,
        lm_head_bias=True,
    )


def _gpt_neox(r: ConfigReader) -> TransformerArch:
    """GPT-NeoX/Pythia: two LayerNorms, parallel residual (`use_parallel_residual`), biases
    everywhere (`attention_bias`, default on), rotary, untied `embed_out`."""
    bias = r.flag("attention_bias", True)
    return _decoder(
        r,
        bias=None,
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=True,
        mlp="gelu",
        norm="layernorm",
        parallel_block=r.flag("use_parallel_residual", True),
    )


def _falcon(r: ConfigReader) -> TransformerArch:
    """Falcon: parallel attention and MLP (one LayerNorm; two with `new_decoder_architecture`),
    multi-query (`multi_query`) or `num_kv_heads` groups, GELU MLP of 4 x hidden, `bias` switch,
    tied LM head."""
    r.require(VOCAB, HIDDEN, LAYERS, HEADS)
    hidden = r.int(*HIDDEN)
    heads = r.int(*HEADS)
    new_arch = r.flag("new_decoder_architecture", False)
    kv = r.int("num_kv_heads", default=heads) if new_arch else 1 if r.flag("multi_query", True) else heads
    alibi = r.flag("alibi", False)
    norms = r.int("num_ln_in_parallel_attn", default=2) if new_arch else 1
    return _decoder(
        r,
        tie=True,
        bias="bias",
        ffn_default=4 * hidden,
        num_kv_heads=kv,
        mlp="gelu",
        norm="layernorm",
        norms_per_layer=norms,
        parallel_block=new_arch or r.flag("parallel_attn", True),
        position="relative" if alibi else "rotary",
    )


def _chatglm(r: ConfigReader) -> TransformerArch:
    """ChatGLM2/ChatGLM3/GLM-4 (`model_type: chatglm`, custom code).

    One fused query_key_value projection (bias with `add_qkv_bias`) of multi-query groups,
    `dense_h_to_4h` producing 2 x ffn_hidden_size for SwiGLU (so: swiglu with intermediate
    `ffn_hidden_size`), RMSNorm, rotary positions and an untied `output_layer`. The first
    ChatGLM-6B used other keys (`inner_hidden_size`, `position_encoding_2d`) and another layout.
    """
    try:
        r.require(
            "padded_vocab_size",
            "hidden_size",
            ("num_layers", "num_hidden_layers"),
            "num_attention_heads",
            "ffn_hidden_size",
        )
    except FitbenchError as exc:
        raise FitbenchError(
            exc.message,
            "fitbench reads ChatGLM2/ChatGLM3/GLM-4 configs; the first ChatGLM-6B layout is not supported",
            message_zh=exc.message_zh,
            hint_zh="fitbench 能读取 ChatGLM2/ChatGLM3/GLM-4 的配置;不支持最早的 ChatGLM-6B 结构",
        ) from None
    hidden = r.int("hidden_size")
    num_heads = r.int("num_attention_heads")
    multi_query = r.flag("multi_query_attention", False)
    kv_heads = r.int("multi_query_group_num", default=1) if multi_query else num_heads
    add_bias_linear = r.flag("add_bias_linear", False)
    return _transformer(
        r,
        kind="decoder",
        vocab_size=r.int("padded_vocab_size"),
        hidden_size=hidden,
        num_layers=r.int("num_layers", "num_hidden_layers", maximum=MAX_LAYERS),
        num_heads=num_heads,
        num_kv_heads=kv_heads,
        head_dim=r.int("kv_channels", default=None),
        intermediate_size=r.int("ffn_hidden_size"),
        max_positions=r.int("seq_length", default=2048, maximum=MAX_POSITIONS),
        mlp="swiglu",
        norm="rmsnorm" if r.flag("rmsnorm", True) else "layernorm",
        position="rotary",
        qkv_bias=r.flag("add_qkv_bias", False),
        out_bias=add_bias_linear,
        mlp_bias=add_bias_linear,
        tie_embeddings=False,
        pooler=False,
        num_labels=0,
    )


# -- mixture of experts -------------------------------------------------------------------------
# Expert counts under both the name a family's checkpoints use and the alias its transformers
# config class maps to it (attribute_map): a config saved by transformers 5 writes the alias
# (Qwen3-MoE's `num_local_experts`), the published checkpoints the original name.
EXPERTS = ("num_experts", "num_local_experts")
ROUTED_EXPERTS = ("n_routed_experts", "num_local_experts", "num_experts")


def _experts(
    r: ConfigReader,
    *,
    count: tuple[str, ...],
    top_k: tuple[str, ...],
    width: tuple[str, ...],
    shared: int = 0,
    dense_layers: int = 0,
    every: int = 1,
    **more: Any,
) -> dict[str, Any]:
    """The expert fields every MoE reader fills (each family names them its own way)."""
    r.require(count, top_k, width)
    return dict(
        num_experts=r.int(*count, maximum=1 << 16),
        experts_per_token=r.int(*top_k, maximum=1 << 16),
        expert_intermediate_size=r.int(*width),
        shared_intermediate_size=shared,
        dense_layers=dense_layers,
        moe_every=every,
        **more,
    )


def _phimoe(r: ConfigReader) -> TransformerArch:
    """Phi-3.5-MoE (`phimoe`): Mixtral's experts and router, q/k/v/o biases by `attention_bias`,
    LayerNorms with biases, an LM head biased by `lm_head_bias`."""
    moe = _experts(
        r, count=("num_local_experts",), top_k=("num_experts_per_tok",), width=("intermediate_size",)
    )
    return _decoder(
        r,
        max_positions=131072,
        mlp_bias=False,
        norm="layernorm",
        lm_head_bias=r.flag("lm_head_bias", False),
        sliding="all",
        **moe,
    )


def _mixtral(r: ConfigReader) -> TransformerArch:
    """Mixtral: every MLP is `num_local_experts` SwiGLU experts of `intermediate_size`, top-k routed."""
    moe = _experts(
        r, count=("num_local_experts",), top_k=("num_experts_per_tok",), width=("intermediate_size",)
    )
    return _decoder(r, max_positions=131072, bias=None, sliding="all", **moe)


def _refuse_mlp_only_layers(r: ConfigReader) -> None:
    """Qwen MoE configs may list layers that keep a dense MLP; the estimate lays out every
    `decoder_sparse_step`-th layer as MoE and cannot honour such a list."""
    if r.data.get("mlp_only_layers"):
        raise r.error(
            "'mlp_only_layers' is not supported",
            "remove it or leave it empty",
            message_zh="不支持 'mlp_only_layers'",
            hint_zh="请删除它或留空",
        )


def _gated_shared_experts(r: ConfigReader) -> dict[str, Any]:
    """Qwen2-MoE's experts, which Qwen3-Next and Qwen3.5-MoE keep: routed experts of
    `moe_intermediate_size` plus one shared expert of `shared_expert_intermediate_size` with a
    sigmoid gate, every `decoder_sparse_step`-th layer (no `mlp_only_layers`)."""
    _refuse_mlp_only_layers(r)
    return _experts(
        r,
        count=EXPERTS,
        top_k=("num_experts_per_tok",),
        width=("moe_intermediate_size",),
        shared=r.int("shared_expert_intermediate_size", default=0, minimum=0),
        every=r.int("decoder_sparse_step", default=1),
        shared_expert_gate=True,
    )


def _qwen2_moe(r: ConfigReader) -> TransformerArch:
    """Qwen1.5/Qwen2-MoE: the gated shared expert beside routed ones (_gated_shared_experts)."""
    moe = _gated_shared_experts(r)
    return _decoder(r, max_positions=32768, bias=None, qkv_bias=True, sliding="qwen2", **moe)


def _qwen3_moe(r: ConfigReader) -> TransformerArch:
    """Qwen3-MoE: Qwen3 attention (query/key norms), routed experts only."""
    _refuse_mlp_only_layers(r)
    moe = _experts(
        r,
        count=EXPERTS,
        top_k=("num_experts_per_tok",),
        width=("moe_intermediate_size",),
        every=r.int("decoder_sparse_step", default=1),
    )
    # Unlike Qwen3Config, Qwen3MoeConfig has no head_dim default: a file without one means
    # hidden_size / num_attention_heads (the published checkpoints write 128).
    return _decoder(r, max_positions=32768, mlp_bias=False, qk_norm="head", sliding="qwen2", **moe)


def _linear_attention(r: ConfigReader) -> dict[str, Any]:
    """Qwen3-Next's and Qwen3.5's Gated DeltaNet layers (TransformerArch.linear_layers): those
    `layer_types` names 'linear_attention', else all but every `full_attention_interval`-th
    (default 4, the config classes' rule); the sizes under their config names and defaults.
    Attention layers gate their output (a query projection of twice the width)."""
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    types = r.data.get("layer_types")
    if types is None:
        interval = r.int("full_attention_interval", default=4)
        linear = layers - layers // interval
    else:
        known = ("linear_attention", "full_attention")
        if not isinstance(types, list) or len(types) != layers or not all(t in known for t in types):
            raise r.error(
                f"'layer_types' must list 'linear_attention' or 'full_attention' for each of the "
                f"{layers} layers, got {show(types)}",
                message_zh=(
                    f"'layer_types' 必须为 {layers} 层中的每一层列出 'linear_attention' 或 "
                    f"'full_attention',实际为 {show(types, 'zh')}"
                ),
            )
        linear = types.count("linear_attention")
    return dict(
        linear_layers=linear,
        linear_key_heads=r.int("linear_num_key_heads", default=16),
        linear_value_heads=r.int("linear_num_value_heads", default=32),
        linear_key_head_dim=r.int("linear_key_head_dim", default=128),
        linear_value_head_dim=r.int("linear_value_head_dim", default=128),
        linear_conv_kernel=r.int("linear_conv_kernel_dim", default=4),
        attention_output_gate=True,
    )


def _qwen3_next(r: ConfigReader) -> TransformerArch:
    """Qwen3-Next: Gated DeltaNet layers among gated attention ones (query/key norms, head size
    256), Qwen2-MoE's experts with a gated shared expert every `decoder_sparse_step`-th layer."""
    moe = _gated_shared_experts(r)
    linear = _linear_attention(r)
    return _decoder(r, max_positions=32768, head_dim=256, mlp_bias=False, qk_norm="head", **linear, **moe)


def _qwen3_5_text(r: ConfigReader) -> TransformerArch:
    """Qwen3.5's language model: Qwen3-Next's layers with a dense SwiGLU MLP."""
    return _decoder(
        r, max_positions=32768, head_dim=256, mlp_bias=False, qk_norm="head", **_linear_attention(r)
    )


def _qwen3_5_moe_text(r: ConfigReader) -> TransformerArch:
    """Qwen3.5-MoE's language model: experts and a gated shared expert in every layer (its config
    has no dense width: no layer runs one)."""
    moe = _gated_shared_experts(r)
    linear = _linear_attention(r)
    width = moe["expert_intermediate_size"]
    return _decoder(
        r,
        max_positions=32768,
        head_dim=256,
        mlp_bias=False,
        qk_norm="head",
        ffn_default=width,
        **linear,
        **moe,
    )


MAMBA_LAYER_NAMES = ("mamba", "linear_attention")
ATTENTION_LAYER_NAMES = ("attention", "full_attention")


def _mamba2_layers(r: ConfigReader) -> dict[str, Any]:
    """Granite 4.0-H's Mamba-2 layers (TransformerArch.linear_layers, linear_kind 'mamba2'): those
    `layer_types` names 'mamba' (or 'linear_attention', transformers' newer name), all of them
    without the key (the config class's default); the sizes under their config names, with
    GraniteMoeHybridConfig's defaults. No Mamba-2 layer leaves a plain decoder (Granite 4.0 Micro)."""
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    types = r.data.get("layer_types", r.data.get("layers_block_type"))
    if types is None:
        mamba = layers
    else:
        known = MAMBA_LAYER_NAMES + ATTENTION_LAYER_NAMES
        if not isinstance(types, list) or len(types) != layers or not all(t in known for t in types):
            raise r.error(
                f"'layer_types' must list 'mamba' or 'attention' for each of the {layers} layers, "
                f"got {show(types)}",
                message_zh=(
                    f"'layer_types' 必须为 {layers} 层中的每一层列出 'mamba' 或 'attention',"
                    f"实际为 {show(types, 'zh')}"
                ),
            )
        mamba = sum(t in MAMBA_LAYER_NAMES for t in types)
    return _mamba2_sizes(r, mamba)


def _mamba2_sizes(r: ConfigReader, mamba: int) -> dict[str, Any]:
    """`mamba` Mamba-2 layers with the sizes under their config names (Granite 4.0's and Bamba's
    spelling), with the config classes' defaults."""
    if not mamba:
        return {}
    hidden = r.int(*HIDDEN)
    heads = r.int("mamba_n_heads", default=128)
    inner = r.int("mamba_expand", default=2) * hidden
    head_dim = r.data.get("mamba_d_head", "auto")
    head_dim = inner // heads if head_dim == "auto" else r.int("mamba_d_head")
    if heads * head_dim != inner:
        raise r.error(
            f"mamba_n_heads {heads} x mamba_d_head {head_dim} must equal "
            f"mamba_expand x hidden_size ({inner})",
            "check the Mamba sizes against the model's original config.json",
            message_zh=(
                f"mamba_n_heads {heads} x mamba_d_head {head_dim} 必须等于 "
                f"mamba_expand x hidden_size({inner})"
            ),
            hint_zh="请对照模型原始的 config.json 核对 Mamba 尺寸",
        )
    return dict(
        linear_layers=mamba,
        linear_kind="mamba2",
        linear_key_heads=r.int("mamba_n_groups", default=1),
        linear_key_head_dim=r.int("mamba_d_state", default=256),
        linear_value_heads=heads,
        linear_value_head_dim=head_dim,
        linear_conv_kernel=r.int("mamba_d_conv", default=4),
        linear_chunk=r.int("mamba_chunk_size", default=256),
        linear_conv_bias=r.flag("mamba_conv_bias", True),
        linear_proj_bias=r.flag("mamba_proj_bias", False),
    )


# Nemotron-H's block kinds (NemotronHConfig.layers_block_type) and their letters in the older
# `hybrid_override_pattern` (transformers' _pattern_to_list).
NEMOTRON_H_BLOCKS = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
# The older names of the mixers in a block list (transformers' _LEGACY_LAYER_TYPE_REMAP).
LEGACY_BLOCK_NAMES = {"mamba": "linear_attention", "attention": "full_attention"}


def _nemotron_h_blocks(r: ConfigReader) -> list[str]:
    """Nemotron-H's block kinds in order: `layers_block_type` (its older mixer names read as the
    new), else `hybrid_override_pattern`'s letters (NEMOTRON_H_BLOCKS), else NemotronHConfig's
    default list."""
    kinds = r.data.get("layers_block_type", r.data.get("layer_types"))
    if kinds is None and isinstance(r.data.get("hybrid_override_pattern"), str):
        pattern = r.data["hybrid_override_pattern"]
        kinds = [NEMOTRON_H_BLOCKS.get(c, c) for c in pattern]
    if kinds is None:
        kinds = ["linear_attention", "moe", "full_attention", "mlp"]
    if isinstance(kinds, list):
        kinds = [LEGACY_BLOCK_NAMES.get(k, k) if isinstance(k, str) else k for k in kinds]
    valid = sorted(set(NEMOTRON_H_BLOCKS.values()))
    if not isinstance(kinds, list) or not 0 < len(kinds) <= MAX_LAYERS or not all(k in valid for k in kinds):
        raise r.error(
            f"'layers_block_type' must list one of {', '.join(valid)} for each block, got {show(kinds)}",
            message_zh=(
                f"'layers_block_type' 必须为每个块列出 {'、'.join(valid)} 之一,实际为 {show(kinds, 'zh')}"
            ),
        )
    return kinds


def _nemotron_h(r: ConfigReader) -> TransformerArch:
    """Nemotron-H (`nemotron_h`: Nemotron-H, Nemotron Nano 2, Nemotron 3 Nano): a stack of blocks,
    each one RMSNorm and one of a Mamba-2 mixer ('linear_attention'), an attention without
    positions ('full_attention'), a two-matrix squared-ReLU MLP ('mlp') or experts ('moe': routed
    two-matrix experts behind a sigmoid router, plus one shared MLP). Each MLP or experts block is
    paired with a mixer block as one layer; the mixers left over are TransformerArch's MLP-free
    layers, so a file with more MLP blocks than mixer blocks is refused. Sizes under
    NemotronHConfig's names or the older ones its __post_init__ still reads (`mamba_n_groups`,
    `mamba_d_conv`, `mamba_conv_bias`, `mamba_chunk_size`; `attention_head_dim` for head_dim),
    the Mamba width heads x head size; the attention's projections without biases whatever
    `attention_bias` says; experts behind a latent projection (`moe_latent_size`) refused."""
    kinds = _nemotron_h_blocks(r)
    mamba, attention = kinds.count("linear_attention"), kinds.count("full_attention")
    dense, experts = kinds.count("mlp"), kinds.count("moe")
    mixers = mamba + attention
    if dense + experts > mixers:
        raise r.error(
            f"{dense + experts} MLP blocks for {mixers} token-mixer blocks: fitbench pairs each MLP "
            "block with a mixer block",
            message_zh=(
                f"{mixers} 个 token 混合块配 {dense + experts} 个 MLP 块:"
                "fitbench 将每个 MLP 块与一个混合块配对"
            ),
        )
    if r.data.get("moe_latent_size") is not None and experts:
        raise r.error(
            "experts behind a latent projection (moe_latent_size) are not supported",
            message_zh="不支持带潜在投影(moe_latent_size)的专家",
        )
    moe: dict[str, Any] = {}
    if experts:
        routed = r.int("n_routed_experts", "num_local_experts", default=8)
        moe = dict(
            num_experts=routed,
            experts_per_token=r.int("num_experts_per_tok", default=2, maximum=routed),
            expert_intermediate_size=r.int("moe_intermediate_size", default=7688),
            shared_intermediate_size=r.int("moe_shared_expert_intermediate_size", default=7688, minimum=0),
            dense_layers=dense,
        )
    heads = r.int("mamba_num_heads", default=128)
    mamba_sizes: dict[str, Any] = {}
    if mamba:
        mamba_sizes = dict(
            linear_layers=mamba,
            linear_kind="mamba2",
            linear_key_heads=r.int("n_groups", "mamba_n_groups", default=8),
            linear_key_head_dim=r.int("ssm_state_size", default=128),
            linear_value_heads=heads,
            linear_value_head_dim=r.int("mamba_head_dim", default=64),
            linear_conv_kernel=r.int("conv_kernel", "mamba_d_conv", default=4),
            linear_chunk=r.int("chunk_size", "mamba_chunk_size", default=128),
            linear_conv_bias=r.flag("use_conv_bias", r.flag("mamba_conv_bias", True)),
            linear_proj_bias=r.flag("use_bias", False),
        )
    # The blocks' list sets the depth (NemotronHConfig ignores num_hidden_layers): one layer a mixer.
    layers = ConfigReader({**r.data, "num_hidden_layers": mixers}, r.source, r.model_type)
    return _decoder(
        layers,
        max_positions=4096,
        ffn_default=21504,
        head_dim=r.int("attention_head_dim", default=128),  # older files' name for head_dim
        mlp="gelu",
        position="none",
        qkv_bias=False,
        out_bias=False,
        mlp_bias=r.flag("mlp_bias", False),
        mlp_free_layers=mixers - dense - experts,
        **mamba_sizes,
        **moe,
    )


def _bamba(r: ConfigReader) -> TransformerArch:
    """Bamba: Mamba-2 layers (Granite 4.0-H's) but at `attn_layer_indices`, where layers attend
    with half of each head rotated; every layer a SwiGLU MLP, biases by `attention_bias` and
    `mlp_bias`."""
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    indices = r.data.get("attn_layer_indices") or []
    if not isinstance(indices, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in indices
    ):
        raise r.error(
            f"'attn_layer_indices' must list layer numbers below {layers}, got {show(indices)}",
            message_zh=f"'attn_layer_indices' 必须列出小于 {layers} 的层号,实际为 {show(indices, 'zh')}",
        )
    return _decoder(
        r,
        max_positions=262144,
        mlp_bias=r.flag("mlp_bias", False),
        **_mamba2_sizes(r, layers - len(set(indices))),
    )


def _lfm2_ffn(r: ConfigReader) -> int:
    """LFM2's MLP width as Lfm2MLP derives it: `block_ff_dim` (or `intermediate_size`), with
    `block_auto_adjust_ff_dim` two thirds of it, times `block_ffn_dim_multiplier` rounded up to
    `block_multiple_of` where a multiplier is given."""
    width = r.int("block_ff_dim", "intermediate_size", default=12288)
    if not r.flag("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    multiplier = r.data.get("block_ffn_dim_multiplier", 1.0)
    if multiplier is None:
        return width
    if isinstance(multiplier, bool) or not isinstance(multiplier, int | float) or multiplier <= 0:
        raise r.error(
            f"'block_ffn_dim_multiplier' must be a positive number, got {show(multiplier)}",
            message_zh=f"'block_ffn_dim_multiplier' 必须是正数,实际为 {show(multiplier, 'zh')}",
        )
    multiple = r.int("block_multiple_of", default=256)
    return multiple * -(-int(multiplier * width) // multiple)


def _short_conv_layers(r: ConfigReader) -> dict[str, Any]:
    """LFM2's gated short convolutions (TransformerArch linear_kind 'short_conv'): the layers
    `layer_types` calls 'conv', or that `full_attn_idxs` leaves out (all layers attend where the
    config gives neither); `conv_bias` switches the convolution's and its projections' biases."""
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    types = r.data.get("layer_types")
    if types is None:
        indices = r.data.get("full_attn_idxs")
        if indices is None:
            indices = list(range(layers))
        if not isinstance(indices, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in indices
        ):
            raise r.error(
                f"'full_attn_idxs' must list layer numbers below {layers}, got {show(indices)}",
                message_zh=f"'full_attn_idxs' 必须列出小于 {layers} 的层号,实际为 {show(indices, 'zh')}",
            )
        convs = layers - len(set(indices))
    else:
        if (
            not isinstance(types, list)
            or len(types) != layers
            or not all(t in ("conv", "full_attention") for t in types)
        ):
            raise r.error(
                f"'layer_types' must list 'conv' or 'full_attention' for each of the {layers} layers, "
                f"got {show(types)}",
                message_zh=(
                    f"'layer_types' 必须为 {layers} 层中的每一层列出 'conv' 或 'full_attention',"
                    f"实际为 {show(types, 'zh')}"
                ),
            )
        convs = sum(t == "conv" for t in types)
    bias = r.flag("conv_bias", False)
    conv: dict[str, Any] = {}
    if convs:
        conv = dict(
            linear_layers=convs,
            linear_kind="short_conv",
            linear_value_heads=1,
            linear_value_head_dim=r.int(*HIDDEN),
            linear_conv_kernel=r.int("conv_L_cache", default=3),
            linear_conv_bias=bias,
            linear_proj_bias=bias,
        )
    return conv


def _lfm2_decoder(r: ConfigReader, width: int, **more: Any) -> TransformerArch:
    """LFM2's blocks around an MLP of `width`: gated short convolutions (`_short_conv_layers`), GQA
    attention with per-head query and key norms elsewhere, no biases but the convolution's
    `conv_bias`, tied embeddings (`tie_embedding`); `more`: the experts of LFM2-MoE."""
    return _decoder(
        r,
        tie=r.flag("tie_embedding", True),
        max_positions=128000,
        bias=None,
        mlp_bias=False,
        qk_norm="head",
        intermediate_size=width,
        **_short_conv_layers(r),
        **more,
    )


def _lfm2(r: ConfigReader) -> TransformerArch:
    """LFM2: `_lfm2_decoder` with a SwiGLU MLP in every layer (`_lfm2_ffn`)."""
    return _lfm2_decoder(r, _lfm2_ffn(r))


def _lfm2_moe(r: ConfigReader) -> TransformerArch:
    """LFM2-MoE (LFM2-8B-A1B): `_lfm2_decoder`, the first `num_dense_layers` with a SwiGLU MLP of
    `intermediate_size` (taken as written: no LFM2 width adjustment), the rest `num_experts`
    SwiGLU experts of `moe_intermediate_size` behind a sigmoid top-k router, no shared expert.
    The router's selection bias (`use_expert_bias`) is a buffer, not a parameter."""
    moe = _experts(
        r,
        count=("num_experts",),
        top_k=("num_experts_per_tok",),
        width=("moe_intermediate_size",),
        dense_layers=r.int("num_dense_layers", default=2, minimum=0),
    )
    return _lfm2_decoder(r, r.int("intermediate_size", default=7168), **moe)


def _granitemoehybrid(r: ConfigReader) -> TransformerArch:
    """Granite 4.0 (`granitemoehybrid`): Mamba-2 layers among attention ones (`_mamba2_layers`;
    none in Granite 4.0 Micro), every layer an MLP of `shared_intermediate_size` (input_linear
    makes gate and up at once) plus, with `num_local_experts` > 0, Granite MoE's experts of
    `intermediate_size` behind an unbiased top-k router. Rotary positions only where
    `position_embedding_type` is 'rope' (the hybrids use none); the multipliers are scalars."""
    shared = r.int("shared_intermediate_size", default=1024)
    experts = r.int("num_local_experts", default=8, minimum=0)
    moe: dict[str, Any] = {}
    if experts:
        moe = dict(
            num_experts=experts,
            experts_per_token=r.int("num_experts_per_tok", default=2, maximum=experts),
            expert_intermediate_size=r.int("intermediate_size", default=11008),
            shared_intermediate_size=shared,
        )
    position = "rotary" if r.data.get("position_embedding_type") == "rope" else "none"
    return _decoder(
        r,
        mlp_bias=False,
        ffn_default=shared,
        position=position,
        **({"intermediate_size": shared} if not experts else {}),
        **_mamba2_layers(r),
        **moe,
    )


def _olmoe(r: ConfigReader) -> TransformerArch:
    """OLMoE: experts of `intermediate_size`, RMSNorms over all query and key heads."""
    moe = _experts(r, count=EXPERTS, top_k=("num_experts_per_tok",), width=("intermediate_size",))
    return _decoder(r, max_positions=4096, mlp_bias=False, qk_norm="full", **moe)


def _flex_olmo(r: ConfigReader) -> TransformerArch:
    """FlexOlmo (`flex_olmo`): OLMoE's experts (`num_experts` of `intermediate_size`, a softmax
    router) behind OLMo-2's attention (RMSNorms over all query and key heads) with OLMo-2's
    post-norms; FlexOlmoConfig's 7 experts, 5 a token where a saved file leaves them out."""
    return _decoder(
        r,
        max_positions=4096,
        mlp_bias=False,
        qk_norm="full",
        num_experts=r.int("num_experts", default=7, maximum=1 << 16),
        experts_per_token=r.int("num_experts_per_tok", default=5, maximum=1 << 16),
        expert_intermediate_size=r.int(*FFN),
    )


def _minimax_m2(r: ConfigReader) -> TransformerArch:
    """MiniMax-M2: GQA attention with RMSNorms over all query and all key heads, every layer
    `num_local_experts` experts of `intermediate_size` behind an unbiased router (its score
    correction is a buffer, not a parameter)."""
    moe = _experts(
        r, count=("num_local_experts",), top_k=("num_experts_per_tok",), width=("intermediate_size",)
    )
    return _decoder(r, max_positions=196608, head_dim=128, bias=None, mlp_bias=False, qk_norm="full", **moe)


def _ernie45_moe(r: ConfigReader) -> TransformerArch:
    """ERNIE-4.5 MoE: experts from `moe_layer_start_index`, every `moe_layer_interval`-th layer,
    plus `moe_num_shared_experts` shared ones; a per-expert score-correction parameter."""
    width = r.int("moe_intermediate_size")
    end = r.int("moe_layer_end_index", default=-1, minimum=-1)
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    if end not in (-1, layers - 1):
        raise r.error(
            f"'moe_layer_end_index' {end} before the last layer is not supported",
            "use -1 (MoE to the last layer)",
            message_zh=f"不支持在最后一层之前结束的 'moe_layer_end_index' {end}",
            hint_zh="请使用 -1(MoE 一直到最后一层)",
        )
    moe = _experts(
        r,
        count=("moe_num_experts",),
        top_k=("moe_k",),
        width=("moe_intermediate_size",),
        shared=width * r.int("moe_num_shared_experts", default=0, minimum=0),
        dense_layers=r.int("moe_layer_start_index", default=1, minimum=0),
        every=r.int("moe_layer_interval", default=1),
        expert_score_bias=True,
    )
    return _decoder(
        r, tie=True, max_positions=131072, bias="use_bias", lm_head_bias=r.flag("use_bias", False), **moe
    )


def _granitemoe(r: ConfigReader) -> TransformerArch:
    """Granite MoE (`granitemoe`, and `granitemoeshared` with one shared MLP of
    `shared_intermediate_size`): Llama's attention, every layer `num_local_experts` SwiGLU
    experts of `intermediate_size` behind an unbiased top-k router; the multipliers are scalars."""
    shared = 0
    if r.model_type == "granitemoeshared":
        shared = r.int("shared_intermediate_size", default=0, minimum=0)
    moe = _experts(
        r,
        count=("num_local_experts",),
        top_k=("num_experts_per_tok",),
        width=("intermediate_size",),
        shared=shared,
    )
    return _decoder(r, mlp_bias=False, **moe)


def _dots1(r: ConfigReader) -> TransformerArch:
    """dots.llm1 (`dots1`): Qwen3's attention (RMSNorms of head_dim on queries and keys, biases by
    `attention_bias`), `first_k_dense_replace` dense layers, then DeepSeek-V3's routed experts of
    `moe_intermediate_size` plus `n_shared_experts` shared ones (the score correction is a
    buffer); with a `sliding_window`, the layers from `max_window_layers` on (or those
    `layer_types` marks) attend to it."""
    moe = _routed_and_shared_experts(r, shared=0, dense=0)
    return _decoder(r, mlp_bias=False, qk_norm="head", sliding="dots1", **moe)


def _routed_and_shared_experts(
    r: ConfigReader, *, shared: int, dense: int, width: int | None = None
) -> dict[str, Any]:
    """DeepSeek's expert keys, which GLM-4.5 and Mistral 4 keep: `n_routed_experts` of
    `moe_intermediate_size`, `n_shared_experts` shared ones of the same width, after
    `first_k_dense_replace` dense layers (`shared`, `dense`, `width`: the class's defaults)."""
    expert = (
        r.int("moe_intermediate_size") if width is None else r.int("moe_intermediate_size", default=width)
    )
    return _experts(
        r,
        count=ROUTED_EXPERTS,
        top_k=("num_experts_per_tok",),
        width=("moe_intermediate_size",),
        shared=expert * r.int("n_shared_experts", default=shared, minimum=0),
        dense_layers=_leading_dense_layers(r, dense),
    )


def _leading_dense_layers(r: ConfigReader, default: int) -> int:
    """How many first layers keep a dense MLP: `first_k_dense_replace`, or the leading 'dense'
    entries of `mlp_layer_types` (GLM-4.7-Flash's spelling), which must all come first."""
    types = r.data.get("mlp_layer_types")
    if types is None:
        return r.int("first_k_dense_replace", default=default, minimum=0)
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    dense = (
        next((i for i, t in enumerate(types) if t != "dense"), len(types)) if isinstance(types, list) else 0
    )
    if (
        not isinstance(types, list)
        or len(types) != layers
        or any(t not in ("dense", "sparse") for t in types)
        or "dense" in types[dense:]
    ):
        raise r.error(
            f"'mlp_layer_types' must list 'dense' then 'sparse' for each of the {layers} layers, "
            f"got {show(types)}",
            "dense layers after the first sparse one are not supported",
            message_zh=(
                f"'mlp_layer_types' 必须为 {layers} 层依次列出 'dense' 再列出 'sparse',"
                f"实际为 {show(types, 'zh')}"
            ),
            hint_zh="不支持出现在第一个 sparse 层之后的 dense 层",
        )
    return dense


# The class defaults (DeepseekV2Config, DeepseekV3Config, Mistral4Config) of the latent-attention
# keys a file may leave out, since transformers saves a config as its differences from them:
# (q_lora_rank, n_shared_experts, first_k_dense_replace, max_position_embeddings).
MLA_CLASS_DEFAULTS = {
    "deepseek-v2": (1536, 2, 0, 2048),
    "deepseek-v3": (1536, 1, 3, 4096),
    "kimi-k2": (1536, 1, 3, 4096),  # transformers builds it with DeepseekV3Config
    "mistral4": (1024, 1, 0, 1048576),
    "glm4-moe-lite": (768, 1, 1, 202752),
}


def _deepseek(r: ConfigReader) -> TransformerArch:
    """DeepSeek-V2/V3, Kimi K2 (`kimi_k2`: DeepSeek-V3's blocks under its own name), Mistral 4
    (`mistral4`) and GLM-4.7-Flash (`glm4_moe_lite`), the same blocks: multi-head latent attention
    and routed plus shared experts after `first_k_dense_replace` dense layers (every layer after
    them, as transformers builds it). A key the file leaves out takes its class's default
    (MLA_CLASS_DEFAULTS); an explicit null `q_lora_rank` means no query compression
    (DeepSeek-V2-Lite)."""
    r.require("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    q_default, shared_default, dense_default, positions = MLA_CLASS_DEFAULTS[r.model_type]
    moe = _routed_and_shared_experts(r, shared=shared_default, dense=dense_default)
    explicit_null = "q_lora_rank" in r.data and r.data["q_lora_rank"] is None
    q_lora = 0 if explicit_null else r.int("q_lora_rank", default=q_default, minimum=0)
    return _decoder(
        r,
        max_positions=positions,
        num_kv_heads=None,
        head_dim=None,
        q_lora_rank=q_lora,
        kv_lora_rank=r.int("kv_lora_rank"),
        qk_rope_head_dim=r.int("qk_rope_head_dim"),
        qk_nope_head_dim=r.int("qk_nope_head_dim", minimum=0),
        v_head_dim=r.int("v_head_dim"),
        mlp_bias=False,
        **moe,
    )


def _glm4_moe(r: ConfigReader) -> TransformerArch:
    """GLM-4.5/4.6 (`glm4_moe`): GQA attention (q/k/v biases by `attention_bias`, o without, optional
    `use_qk_norm` of head_dim), `first_k_dense_replace` dense layers, then routed experts of
    `moe_intermediate_size` plus `n_shared_experts` shared ones. The checkpoint's multi-token
    prediction layer (`num_nextn_predict_layers`) is not built by transformers and not counted."""
    moe = _routed_and_shared_experts(r, shared=1, dense=1, width=1408)
    return _decoder(
        r,
        max_positions=131072,
        bias=None,
        qkv_bias=r.flag("attention_bias", False),
        out_bias=False,
        mlp_bias=False,
        qk_norm="head" if r.flag("use_qk_norm", False) else "none",
        **moe,
    )


def _solar_open(r: ConfigReader) -> TransformerArch:
    """Solar Open (`solar_open`): GLM-4.5's experts (`n_routed_experts` of `moe_intermediate_size`
    behind a sigmoid router with a score-correction bias, plus `n_shared_experts` shared ones)
    in every layer, behind Llama's attention: q/k/v biases by `attention_bias`, o without, the
    whole head rotated, no query/key norms; head_dim 128. SolarOpenConfig has no dense layers
    and no `intermediate_size` (the width kept here, GLM-4.5's default where a file has none,
    sizes no layer); expert keys a saved file leaves out take its defaults (128 experts, 8 a
    token, 1,280 wide, one shared)."""
    width = r.int("moe_intermediate_size", default=1280)
    moe = dict(
        num_experts=r.int(*ROUTED_EXPERTS, default=128, maximum=1 << 16),
        experts_per_token=r.int("num_experts_per_tok", default=8, maximum=1 << 16),
        expert_intermediate_size=width,
        shared_intermediate_size=width * r.int("n_shared_experts", default=1, minimum=0),
    )
    return _decoder(
        r,
        max_positions=131072,
        head_dim=128,
        bias=None,
        qkv_bias=r.flag("attention_bias", False),
        out_bias=False,
        mlp_bias=False,
        ffn_default=10944,
        **moe,
    )


def _afmoe(r: ConfigReader) -> TransformerArch:
    """AFMoE (`afmoe`, Arcee's Trinity): attention with query/key norms of head_dim and a sigmoid
    output gate from its own projection (`gate_proj`, the size of q's: the count of Qwen3-Next's
    doubled q_proj), four norms a block, every `global_attn_every_n_layers`-th layer global and
    the rest a `sliding_window` one; the first `num_dense_layers` layers a SwiGLU MLP, the rest
    sigmoid-routed experts with a per-expert bias (a parameter) plus `num_shared_experts` shared
    ones. AfmoeConfig's defaults for the keys a saved file leaves out."""
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    windows = ConfigReader(
        {
            "sliding_window": 1024,
            **r.data,
            "sliding_window_pattern": r.int("global_attn_every_n_layers", default=4),
        },
        r.source,
        r.model_type,
    )
    width = r.int("moe_intermediate_size", default=1408)
    return _decoder(
        r,
        max_positions=16384,
        head_dim=128,
        ffn_default=6144,
        mlp_bias=False,
        qk_norm="head",
        norms_per_layer=4,
        attention_output_gate=True,
        num_experts=r.int("num_experts", default=64, maximum=1 << 16),
        experts_per_token=r.int("num_experts_per_tok", default=6, maximum=1 << 16),
        expert_intermediate_size=width,
        shared_intermediate_size=width * r.int("num_shared_experts", default=2, minimum=0),
        dense_layers=min(r.int("num_dense_layers", default=1, minimum=0), layers),
        expert_score_bias=True,
        **_sliding(windows, layers, "pattern4"),
    )


def _gpt_oss(r: ConfigReader) -> TransformerArch:
    """gpt-oss: GQA attention with biases on q/k/v/o and a learned sink logit per head, every
    other layer a `sliding_window` (128) local one, and in every layer `num_local_experts`
    SwiGLU experts of `intermediate_size` with biases (gate_up_proj_bias, down_proj_bias) behind
    a biased top-k router. Its quantization_config (MXFP4 experts) is read by quant_config."""
    moe = _experts(
        r,
        count=("num_local_experts",),
        top_k=("num_experts_per_tok", "experts_per_token"),
        width=("intermediate_size",),
        router_bias=True,
    )
    return _decoder(
        r,
        max_positions=131072,
        head_dim=64,
        bias="attention_bias",
        qkv_bias=r.flag("attention_bias", True),
        out_bias=r.flag("attention_bias", True),
        mlp_bias=True,
        attention_sinks=True,
        sliding="alternate",
        **moe,
    )


def _per_layer(r: ConfigReader, key: str, layers: int, *, default: int) -> int:
    """A size a config may give per layer (Hunyuan's `moe_topk`, `num_experts`): one number, or
    a list of one per layer that must hold the same number throughout."""
    value = r.data.get(key)
    if not isinstance(value, list):
        return r.int(key, default=default)
    sizes = {r.check_int(f"{key}[{i}]", v) for i, v in enumerate(value)}
    if len(value) != layers or len(sizes) != 1:
        raise r.error(
            f"'{key}' must hold one number for every one of the {layers} layers, got {show(value)}",
            "layers that differ are not supported",
            message_zh=f"'{key}' 必须为全部 {layers} 层给出同一个数,实际为 {show(value, 'zh')}",
            hint_zh="不支持各层不同的设置",
        )
    return sizes.pop()


def _hunyuan_dense(r: ConfigReader) -> TransformerArch:
    """Hunyuan dense (`hunyuan_v1_dense`): Llama's blocks with a head-wise RMSNorm on queries and on
    keys; `attention_bias` switches q/k/v/o biases; head_dim hidden / heads unless given."""
    return _decoder(r, max_positions=2048, mlp_bias=False, qk_norm="head")


def _hunyuan_moe(r: ConfigReader) -> TransformerArch:
    """Hunyuan-A13B (`hunyuan_v1_moe`): the dense family's attention, and in every layer
    `num_experts` SwiGLU experts behind an FP32 router taking `moe_topk`, plus one shared MLP, all
    of `intermediate_size` as transformers builds them (a per-layer `moe_intermediate_size` or
    `moe_topk` list must hold one number)."""
    r.require(VOCAB, HIDDEN, LAYERS, HEADS, FFN, ("num_experts", "num_local_experts"))
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    width = r.int(*FFN)
    listed = r.data.get("moe_intermediate_size")
    if listed is not None and _per_layer(r, "moe_intermediate_size", layers, default=width) != width:
        raise r.error(
            "'moe_intermediate_size' differs from 'intermediate_size', "
            "which transformers builds the experts at",
            "give the experts' width as intermediate_size",
            message_zh="'moe_intermediate_size' 与 transformers 构建专家所用的 'intermediate_size' 不同",
            hint_zh="请把专家的宽度写作 intermediate_size",
        )
    experts = r.data.get("num_experts", r.data.get("num_local_experts"))
    count = "num_experts" if "num_experts" in r.data else "num_local_experts"
    moe = dict(
        num_experts=_per_layer(r, count, layers, default=1) if experts is not None else 1,
        experts_per_token=_per_layer(r, "moe_topk", layers, default=1),
        expert_intermediate_size=width,
        shared_intermediate_size=width,
    )
    return _decoder(r, max_positions=2048, mlp_bias=False, qk_norm="head", **moe)


def _llama4_text(r: ConfigReader) -> TransformerArch:
    """Llama-4 text (`llama4_text`): GQA attention (biases by `attention_bias`; parameter-free L2
    query/key norms), MoE layers every `interleave_moe_layer_step`-th from the step's own index
    (an explicit `moe_layers` list must follow that rule), each `num_local_experts` experts of
    `intermediate_size` plus one shared expert of the same width behind an unbiased router;
    dense layers of `intermediate_size_mlp`. Three of four layers (`no_rope_layers`, or
    `layer_types`' chunked_attention) attend within `attention_chunk_size`-token chunks, held as
    a window of that size."""
    r.require(VOCAB, HIDDEN, LAYERS, HEADS)
    layers = r.int(*LAYERS, maximum=MAX_LAYERS)
    step = r.int("interleave_moe_layer_step", default=1)
    listed = r.data.get("moe_layers")
    if listed is not None and listed != list(range(step - 1, layers, step)):
        raise r.error(
            "a 'moe_layers' list other than every interleave_moe_layer_step-th layer is not supported",
            "leave 'moe_layers' out, or list every step-th layer",
            message_zh="不支持与 interleave_moe_layer_step 间隔不一致的 'moe_layers' 列表",
            hint_zh="请去掉 'moe_layers',或按间隔列出每一层",
        )
    width = r.int("intermediate_size", default=8192)
    moe = _experts(
        r,
        count=("num_local_experts",),
        top_k=("num_experts_per_tok",),
        width=("intermediate_size",),
        shared=width,
        every=step,
    )
    chunk = r.int("attention_chunk_size", default=8192, maximum=MAX_POSITIONS)
    types = r.data.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        chunked = sum(t == "chunked_attention" for t in types)
    else:
        rope = r.data.get("no_rope_layers")
        interval = r.int("no_rope_layer_interval", default=4)
        chunked = sum(rope) if isinstance(rope, list) and rope else layers - layers // interval
    window = {"sliding_window": chunk, "sliding_layers": chunked} if chunk and chunked else {}
    return _decoder(
        r,
        max_positions=131072,
        head_dim=128,
        intermediate_size=r.int("intermediate_size_mlp", default=16384),
        mlp_bias=False,
        **window,
        **moe,
    )


# -- ResNet -------------------------------------------------------------------------------------
def _resnet(r: ConfigReader) -> ResNetArch:
    """HF ResNetConfig -> ResNetArch (torchvision layout, which ResNetForImageClassification shares).

    fitbench's ResNet has four stages whose widths double from `base_width * expansion`, and a
    stem of `base_width` channels; other layouts are refused rather than miscounted. Where a
    config moves a stride (`downsample_in_bottleneck`, `downsample_in_first_stage`) the count is
    that of the standard layout (exact for bottleneck blocks; basic blocks with a strided first
    stage have one more shortcut convolution in transformers).
    """
    r.require("depths", "hidden_sizes")
    layer_type = r.text("layer_type", "bottleneck")
    if layer_type not in ("bottleneck", "basic"):
        raise r.error(
            f"'layer_type' must be 'bottleneck' or 'basic', got {show(layer_type)}",
            message_zh=f"'layer_type' 必须是 'bottleneck' 或 'basic',实际为 {show(layer_type, 'zh')}",
        )
    expansion = 4 if layer_type == "bottleneck" else 1
    depths = _int_list(r, "depths", maximum=MAX_STAGE_BLOCKS)
    widths = _int_list(r, "hidden_sizes")
    if widths[0] % expansion:
        raise r.error(
            f"'hidden_sizes' starts at {widths[0]}, not a multiple of {expansion} as bottleneck blocks need",
            message_zh=f"'hidden_sizes' 起始宽度为 {widths[0]},不是瓶颈块所需的 {expansion} 的倍数",
        )
    base = widths[0] // expansion
    expected = [base * expansion * 2**i for i in range(4)]
    if widths != expected:
        raise r.error(
            f"'hidden_sizes' {widths} do not double from stage to stage",
            f"fitbench models the standard layout, here {expected}",
            message_zh=f"'hidden_sizes' {widths} 没有逐级翻倍",
            hint_zh=f"fitbench 按标准结构建模,这里应为 {expected}",
        )
    stem = r.int("embedding_size", default=base)
    if stem != base:
        raise r.error(
            f"'embedding_size' {stem} differs from the first stage's width {base}",
            "fitbench models the standard ResNet stem",
            message_zh=f"'embedding_size' {stem} 与第一级的宽度 {base} 不同",
            hint_zh="fitbench 按标准 ResNet stem 建模",
        )
    blocks = (depths[0], depths[1], depths[2], depths[3])
    standard = [d for d, (block, counts) in RESNET_LAYERS.items() if block == layer_type and counts == blocks]
    if standard:
        depth, layers = standard[0], None
    else:
        # ResNetArch infers the block type from the depth (>= 50 is bottleneck), so a
        # non-standard stack keeps its real depth only where that inference agrees.
        depth = 2 + sum(blocks) * (3 if expansion == 4 else 2)
        if (depth >= 50) != (expansion == 4):
            depth = 50 if expansion == 4 else 34
        layers = blocks
    try:
        return ResNetArch(
            depth=depth,
            layers=layers,
            base_width=base,
            num_classes=r.num_labels(),
            in_channels=r.int("num_channels", default=3),
        )
    except FitbenchError as exc:
        raise r.error(exc.message, exc.hint, message_zh=exc.message_zh, hint_zh=exc.hint_zh) from None


def _int_list(r: ConfigReader, key: str, *, maximum: int = MAX_SIZE) -> list[int]:
    value = r.data[key]
    if not isinstance(value, list) or len(value) != 4:
        raise r.error(
            f"'{key}' must be a list of 4 numbers (one per stage), got {show(value)}"
            + (f" of {len(value)}" if isinstance(value, list) else ""),
            message_zh=f"'{key}' 必须是 4 个数字组成的列表(每级一个),实际为 {show(value, 'zh')}"
            + (f"(共 {len(value)} 个)" if isinstance(value, list) else ""),
        )
    return [r.check_int(f"{key}[{i}]", v, maximum=maximum) for i, v in enumerate(value)]


_READERS: dict[str, Callable[[ConfigReader], TransformerArch | ResNetArch]] = {
    **{t: _bert_like for t in ("bert", "roberta", "xlm-roberta", "camembert", "electra")},
    "distilbert": _distilbert,
    "deberta-v2": _deberta_v2,
    "vit": _vit,
    "llama": _llama,
    "yi": _llama,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3-text": _gemma3,
    "gemma3": _gemma3,
    "phi3": _phi3,
    "olmo": _olmo,
    "olmo2": _olmo2,
    "olmo3": _olmo3,
    "exaone4": _exaone4,
    "seed-oss": _seed_oss,
    "internlm3": _internlm3,
    "helium": _helium,
    "ernie4-5": _ernie45,
    "internlm2": _internlm2,
    "granite": _granite,
    "smollm3": _smollm3,
    "starcoder2": _starcoder2,
    "cohere": _cohere,
    "cohere2": _cohere,
    "baichuan": _baichuan,
    "glm": _glm,
    "glm4": _glm4,
    "gpt2": _gpt2,
    "gptj": _gptj,
    "gpt-neox": _gpt_neox,
    "falcon": _falcon,
    "chatglm": _chatglm,
    "mixtral": _mixtral,
    "phimoe": _phimoe,
    "qwen2-moe": _qwen2_moe,
    "qwen3-moe": _qwen3_moe,
    "qwen3-next": _qwen3_next,
    "qwen3-5-text": _qwen3_5_text,
    "qwen3-5-moe-text": _qwen3_5_moe_text,
    "olmoe": _olmoe,
    "minimax-m2": _minimax_m2,
    "ernie4-5-moe": _ernie45_moe,
    "deepseek-v2": _deepseek,
    "deepseek-v3": _deepseek,
    "kimi-k2": _deepseek,
    "mistral4": _deepseek,
    "glm4-moe-lite": _deepseek,
    "glm4-moe": _glm4_moe,
    "solar-open": _solar_open,
    "exaone-moe": _exaone_moe,
    "afmoe": _afmoe,
    "flex-olmo": _flex_olmo,
    "gpt-oss": _gpt_oss,
    "llama4-text": _llama4_text,
    "hunyuan-v1-dense": _hunyuan_dense,
    "hunyuan-v1-moe": _hunyuan_moe,
    "granitemoe": _granitemoe,
    "granitemoehybrid": _granitemoehybrid,
    "bamba": _bamba,
    "nemotron-h": _nemotron_h,
    "lfm2": _lfm2,
    "lfm2-moe": _lfm2_moe,
    "granitemoeshared": _granitemoe,
    "dots1": _dots1,
    "arcee": _arcee,
    "jais2": _jais2,
    "apertus": _apertus,
    "nemotron": _nemotron,
    "ministral": _ministral,
    "ministral3": _ministral3,
    "stablelm": _stablelm,
    "phi": _phi,
    "minicpm3": _minicpm3,
    "youtu": _youtu,
    "gpt-bigcode": _gpt_bigcode,
    "resnet": _resnet,
}


# -- public API ---------------------------------------------------------------------------------
def arch_from_hf_config(data: dict[str, Any], *, source: str = "config") -> TransformerArch | ResNetArch:
    """The architecture a parsed Hugging Face config describes.

    `source` names the config in error messages (the loaders pass the file path).
    """
    if not isinstance(data, dict):
        raise FitbenchError(
            f"{source}: a config must be a JSON object, got {show(data)}",
            "pass a Hugging Face config.json",
            message_zh=f"{source}:配置必须是 JSON 对象,实际为 {show(data, 'zh')}",
            hint_zh="请传入 Hugging Face 的 config.json",
        )
    supported = f"{len(SUPPORTED_MODEL_TYPES)} model types, which `fitbench models --families` lists"
    supported_zh = f"{len(SUPPORTED_MODEL_TYPES)} 种 model_type,`fitbench models --families` 列出全部"
    raw = data.get("model_type")
    if raw is None:
        raise FitbenchError(
            f"{source}: the config has no 'model_type'",
            f"fitbench reads {supported}",
            message_zh=f"{source}:配置中没有 'model_type'",
            hint_zh=f"fitbench 能读取 {supported_zh}",
        )
    if not isinstance(raw, str):
        raise FitbenchError(
            f"{source}: 'model_type' must be a string, got {show(raw)}",
            message_zh=f"{source}:'model_type' 必须是字符串,实际为 {show(raw, 'zh')}",
        )
    model_type = raw.strip().lower().replace("_", "-")
    vision: tuple[int, str] | None = None
    if model_type.replace("-", "_") in WRAPPERS and (
        data.get("vision_config") is not None or data.get("text_config") is not None
    ):
        # A multimodal checkpoint: its language model, with the vision tower's weights beside it.
        data, vision_params, vision_type = text_config(data, source, model_type.replace("-", "_"))
        vision = (vision_params, vision_type)
        model_type = data["model_type"].lower().replace("_", "-")
        # a refusal below names the language model's type, which is what is not read
        raw, where, where_zh = data["model_type"], "text_config's ", "text_config 的 "
    else:
        where = where_zh = ""
    if model_type in NOT_YET:
        raise FitbenchError(
            f"{source}: {NOT_YET[model_type]}",
            "estimate a supported family (`fitbench models` lists bundled ones)",
            message_zh=f"{source}:{NOT_YET_ZH[model_type]}",
            hint_zh="请估算受支持的模型家族(`fitbench models` 列出内置模型)",
        )
    if model_type not in _READERS:
        # A stricter cutoff than the default: 'gpt-neox' or 'opt' are other families, not typos of 'gpt2'.
        close = close_match_hint(model_type, SUPPORTED_MODEL_TYPES, n=1, cutoff=0.6)
        guess = f"{close} " if close else ""
        close_zh = close_match_hint(model_type, SUPPORTED_MODEL_TYPES, n=1, cutoff=0.6, lang="zh")
        guess_zh = f"{close_zh} " if close_zh else ""
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        raise FitbenchError(
            f"{source}: {where}model_type {shown!r} is not supported",
            f"{guess}fitbench reads {supported}; for another family, set 'model_type' to "
            "'llama' if its blocks are Llama's (hidden_size, num_hidden_layers, "
            "num_attention_heads, intermediate_size, vocab_size)",
            message_zh=f"{source}:不支持 {where_zh}model_type {shown!r}",
            hint_zh=(
                f"{guess_zh}fitbench 能读取 {supported_zh};其他家族若其模块与 "
                "Llama 相同(hidden_size、num_hidden_layers、num_attention_heads、"
                "intermediate_size、vocab_size),可把 'model_type' 设为 "
                "'llama'"
            ),
        )
    arch = _READERS[model_type](ConfigReader(data, source, model_type))
    if vision is not None and isinstance(arch, TransformerArch):
        arch = dataclasses.replace(arch, vision_params=vision[0], vision_tower=vision[1])
    return arch


def _config_file(path: str | Path) -> Path:
    """`path` itself, or the config.json inside it when it is a folder."""
    p = Path(path).expanduser()
    hint = "pass the path to a config.json or the folder holding it"
    hint_zh = "请传入 config.json 的路径,或包含它的文件夹"
    try:
        if p.is_dir():
            inner = p / CONFIG_NAME
            if not inner.is_file():
                raise FitbenchError(
                    f"no {CONFIG_NAME} in folder {p}",
                    hint,
                    message_zh=f"文件夹 {p} 中没有 {CONFIG_NAME}",
                    hint_zh=hint_zh,
                )
            return inner
        exists = p.exists()
    except OSError as exc:  # a name too long, a folder we may not enter
        raise FitbenchError(
            f"cannot open {p}: {exc.strerror or exc}",
            hint,
            message_zh=f"无法打开 {p}:{exc.strerror or exc}",
            hint_zh=hint_zh,
        ) from None
    if not exists:
        raise FitbenchError(
            f"config file {p} not found", hint, message_zh=f"没有找到配置文件 {p}", hint_zh=hint_zh
        )
    return p


def _read_json(config_file: Path) -> dict[str, Any]:
    try:
        text = config_file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise FitbenchError(
            f"{config_file} is not UTF-8 text",
            "pass a Hugging Face config.json",
            message_zh=f"{config_file} 不是 UTF-8 文本",
            hint_zh="请传入 Hugging Face 的 config.json",
        ) from None
    except OSError as exc:
        raise FitbenchError(
            f"cannot read {config_file}: {exc.strerror or exc}",
            message_zh=f"无法读取 {config_file}:{exc.strerror or exc}",
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise FitbenchError(
            f"{config_file} is not valid JSON: {exc.msg} at {where}",
            "fix the file, or download the model's config.json again",
            message_zh=f"{config_file} 不是有效的 JSON:{exc.msg},位于 {where}",
            hint_zh="请修正该文件,或重新下载模型的 config.json",
        ) from None
    except (ValueError, RecursionError) as exc:  # integers too long to convert, absurd nesting
        raise FitbenchError(
            f"{config_file} is not a usable JSON file: {str(exc)[:80]}",
            message_zh=f"{config_file} 不是可用的 JSON 文件:{str(exc)[:80]}",
        ) from None
    if not isinstance(data, dict):
        raise FitbenchError(
            f"{config_file} holds a JSON {type(data).__name__}, not an object",
            "a config.json is one JSON object of settings",
            message_zh=f"{config_file} 中是 JSON {type(data).__name__},不是对象",
            hint_zh="config.json 是一个由设置组成的 JSON 对象",
        )
    return data


def load_hf_config(path: str | Path) -> TransformerArch | ResNetArch:
    """The architecture in a config.json file, or in the config.json of a model folder."""
    config_file = _config_file(path)
    return arch_from_hf_config(_read_json(config_file), source=str(config_file))


def _workload_name(config_file: Path, data: dict[str, Any], arch: TransformerArch | ResNetArch | None) -> str:
    """The model folder's name, else the file's own stem when renamed, else `_name_or_path`."""
    if config_file.name != CONFIG_NAME:
        return config_file.stem
    folder = config_file.resolve().parent.name
    if folder:
        return folder
    name_or_path = data.get("_name_or_path")
    if isinstance(name_or_path, str) and name_or_path.strip("/ "):
        return name_or_path.strip("/ ").rsplit("/", 1)[-1]
    model_type = data.get("model_type")
    return model_type if isinstance(model_type, str) and model_type else "model"


def _defaults(arch: TransformerArch | ResNetArch, mode: str) -> dict[str, Any]:
    """What a user most likely means by 'this model on this GPU' for each family."""
    if isinstance(arch, ResNetArch):
        return {
            "mode": "train",
            "batch_size": 64,
            "image_size": 224,
            "precision": "fp32",
            "optimizer": "momentum",
        }
    if arch.kind == "encoder" and arch.patch_size:  # ViT: every patch plus the class token
        return {
            "mode": "train",
            "batch_size": 32,
            "seq_len": arch.max_positions,
            "precision": "fp32",
            "optimizer": "adamw",
        }
    if arch.kind == "encoder":
        return {
            "mode": "train",
            "batch_size": 16,
            "seq_len": min(512, arch.usable_positions),
            "precision": "fp32",
            "optimizer": "adamw",
        }
    if mode == "train":  # fine-tuning a decoder: mixed precision, a moderate context
        return {
            "mode": "train",
            "batch_size": 1,
            "seq_len": min(DECODER_TRAIN_SEQ_LEN, arch.max_positions),
            "precision": "amp-bf16",
            "optimizer": "adamw",
        }
    # Generation: a short prompt and answer, shortened to fit models with tiny contexts.
    prompt = min(50, max(1, arch.max_positions // 3))
    return {
        "mode": "infer",
        "batch_size": 1,
        "precision": "fp16",
        "optimizer": "adamw",
        "prompt_tokens": prompt,
        "new_tokens": min(100, max(1, arch.max_positions - prompt)),
    }


def workload_from_config(path: str | Path, **overrides: Any) -> Workload:
    """A Workload for the model in a config.json, with per-family defaults and the user's overrides.

    Encoders fine-tune (train, batch 16, seq min(512, positions), fp32, AdamW); decoders generate
    (infer, batch 1, fp16, 50-token prompt, 100 new tokens; with mode=train: seq 512, amp-bf16);
    ResNets train at 224x224, batch 64, fp32, SGD with momentum. Overrides that are not None
    replace the defaults through `Workload.with_overrides`, which validates them (and keeps a
    fine-tuned decoder in bf16 under PEFT, as for presets). A model folder's safetensors headers,
    when present, give the exact stored weight bytes.
    """
    config_file = _config_file(path)
    data = _read_json(config_file)
    checkpoint = None
    if config_file.name == CONFIG_NAME:
        from fitbench.workloads.safetensors_header import read_checkpoint

        checkpoint = read_checkpoint(config_file.parent)
        if checkpoint is not None and not checkpoint.params:
            checkpoint = None  # headers without tensors: the count decides
    return workload_from_data(
        data,
        name=_workload_name(config_file, data, None),
        source=str(config_file),
        checkpoint_bytes=checkpoint.total_bytes if checkpoint else None,
        checkpoint_params=checkpoint.params if checkpoint else None,
        **overrides,
    )


def workload_from_data(
    data: dict[str, Any],
    *,
    name: str,
    source: str,
    checkpoint_bytes: int | None = None,
    checkpoint_params: int | None = None,
    **overrides: Any,
) -> Workload:
    """A Workload for a parsed config (a file's, or a bundled model's)."""
    arch = arch_from_hf_config(data, source=source)
    given = {k: v for k, v in overrides.items() if v is not None}
    for key in ("mode", "precision"):  # the defaults below depend on them: one spelling first
        if isinstance(given.get(key), str):
            given[key] = given[key].strip().lower()
    family = "resnet" if isinstance(arch, ResNetArch) else arch.kind
    defaults = _defaults(arch, given.get("mode", ""))
    # torch_dtype / dtype and quantization_config (workloads.quant_config) where the user gave none
    defaults.update(config_storage(data, source, defaults, given))
    workload = Workload(
        name=name,
        arch=arch,
        description=f"{family} ({arch_label(arch)}) read from {source}",
        checkpoint_bytes=checkpoint_bytes,
        checkpoint_params=checkpoint_params,
        **defaults,
    )
    return workload.with_overrides(**given)


def arch_label(arch: TransformerArch | ResNetArch) -> str:
    """A short human name for the architecture, e.g. 'llama' or 'ResNet-50'."""
    if isinstance(arch, ResNetArch):
        if arch.layers is None:
            return f"ResNet-{arch.depth}"
        return f"ResNet ({arch.block} blocks {'-'.join(map(str, arch.layers))})"
    label = arch.model_type or arch.kind
    return f"{label}+vision" if arch.vision_params else label
