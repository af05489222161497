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

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fitbench.errors import FitbenchError, close_match_hint
from fitbench.workloads.arch import RESNET_LAYERS, ResNetArch, TransformerArch
from fitbench.workloads.workload import DECODER_TRAIN_SEQ_LEN, Workload

CONFIG_NAME = "config.json"

# Sizes past these are typos, not models (the largest real vocabularies are ~1M tokens and the
# widest layers ~64k); they also keep later arithmetic on sane numbers.
MAX_SIZE = 1 << 24
MAX_POSITIONS = 1 << 30
MAX_STAGE_BLOCKS = 1 << 12  # ResNet blocks in one stage (ResNet-152 has 36)

ENCODER_TYPES = ("bert", "roberta", "xlm-roberta", "electra", "distilbert")
DECODER_TYPES = ("llama", "mistral", "qwen2", "gemma", "phi3", "gpt2", "chatglm")
SUPPORTED_MODEL_TYPES = (*ENCODER_TYPES, *DECODER_TYPES, "resnet")

_MISSING = object()


# -- reading keys with one-line errors ----------------------------------------------------------
def _show(value: Any) -> str:
    """A short JSON-ish rendering of a bad value for an error message (never thousands of digits)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 128 else f"a {value.bit_length()}-bit number"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {text!r}"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _Reader:
    """Typed access to one config dict; every problem becomes a FitbenchError naming the file."""

    def __init__(self, data: dict[str, Any], source: str, model_type: str) -> None:
        self.data = data
        self.source = source
        self.model_type = model_type

    def error(self, message: str, hint: str | None = None) -> FitbenchError:
        return FitbenchError(f"{self.source}: {message}", hint)

    def lookup(self, keys: tuple[str, ...]) -> tuple[str, Any]:
        """The first of `keys` present with a non-null value (aliases of one size), else _MISSING."""
        for key in keys:
            value = self.data.get(key)
            if value is not None:
                return key, value
        return keys[0], _MISSING

    def require(self, *specs: str | tuple[str, ...]) -> None:
        """Name every missing required key at once, so one edit fixes the file."""
        missing = []
        for spec in specs:
            keys = (spec,) if isinstance(spec, str) else spec
            if self.lookup(keys)[1] is _MISSING:
                missing.append(" or ".join(f"'{k}'" for k in keys))
        if missing:
            raise self.error(f"'{self.model_type}' configs need {', '.join(missing)}",
                             "add the missing keys, or use the model's original config.json")

    def int(self, *keys: str, default: Any = _MISSING, minimum: int = 1, maximum: int = MAX_SIZE) -> int:
        key, value = self.lookup(keys)
        if value is _MISSING:
            if default is _MISSING:
                raise self.error(f"'{self.model_type}' configs need '{key}'", "add it to the file")
            return default
        return self.check_int(key, value, minimum=minimum, maximum=maximum)

    def check_int(self, key: str, value: Any, *, minimum: int = 1, maximum: int = MAX_SIZE) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"'{key}' must be a whole number, got {_show(value)}",
                             "write sizes as JSON numbers, without quotes")
        if isinstance(value, float):
            if not math.isfinite(value) or not value.is_integer():
                raise self.error(f"'{key}' must be a whole number, got {_show(value)}")
            value = int(value)
        if value < minimum:
            raise self.error(f"'{key}' must be at least {minimum}, got {_show(value)}")
        if value > maximum:
            raise self.error(f"'{key}' is {_show(value)}, beyond any real model", f"use at most {maximum}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(f"'{key}' must be true or false, got {_show(value)}")
        return value

    def text(self, key: str, default: str) -> str:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.error(f"'{key}' must be a string, got {_show(value)}")
        return value

    def num_labels(self) -> int:
        """`num_labels`, else the size of `id2label`, else transformers' default of 2."""
        if self.data.get("num_labels") is not None:
            return self.int("num_labels")
        id2label = self.data.get("id2label")
        if id2label is None:
            return 2
        if not isinstance(id2label, dict):
            raise self.error(f"'id2label' must be an object mapping ids to labels, got {_show(id2label)}")
        if not id2label:
            raise self.error("'id2label' is empty", "a classifier needs at least one label")
        return len(id2label)


def _transformer(r: _Reader, **fields: Any) -> TransformerArch:
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
        raise r.error(exc.message, exc.hint) from None


# -- encoders -----------------------------------------------------------------------------------
def _bert_like(r: _Reader) -> TransformerArch:
    """BERT, RoBERTa, XLM-RoBERTa and ELECTRA share BertModel's layout and key names.

    RoBERTa's classification head (dense + out_proj) and ELECTRA's have exactly the parameters of
    BERT's pooler + classifier, so `pooler=True` counts all of them right. ELECTRA's factorised
    embeddings (`embedding_size` smaller than `hidden_size`, plus a projection) are counted at
    `hidden_size`: TransformerArch has no separate embedding width.
    """
    r.require("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
              "max_position_embeddings")
    if r.model_type == "electra":
        r.int("embedding_size", default=None)  # validated; see the docstring for how it is counted
    return _transformer(
        r, kind="encoder", vocab_size=r.int("vocab_size"), hidden_size=r.int("hidden_size"),
        num_layers=r.int("num_hidden_layers"), num_heads=r.int("num_attention_heads"),
        intermediate_size=r.int("intermediate_size"),
        max_positions=r.int("max_position_embeddings", maximum=MAX_POSITIONS),
        type_vocab_size=r.int("type_vocab_size", default=2, minimum=0), num_labels=r.num_labels(),
    )


def _distilbert(r: _Reader) -> TransformerArch:
    """DistilBERT: BERT without token types, under its own names; its pre_classifier is a pooler."""
    keys = (("vocab_size",), ("dim", "hidden_size"), ("n_layers", "num_hidden_layers"),
            ("n_heads", "num_attention_heads"), ("hidden_dim",), ("max_position_embeddings",))
    r.require(*keys)
    return _transformer(
        r, kind="encoder", vocab_size=r.int("vocab_size"), hidden_size=r.int("dim", "hidden_size"),
        num_layers=r.int("n_layers", "num_hidden_layers"), num_heads=r.int("n_heads", "num_attention_heads"),
        intermediate_size=r.int("hidden_dim"),
        max_positions=r.int("max_position_embeddings", maximum=MAX_POSITIONS),
        type_vocab_size=0, num_labels=r.num_labels(),
    )


# -- decoders -----------------------------------------------------------------------------------
# Per model type: the transformers config class defaults that are not always written to the file,
# and the biases each modeling file hard-codes (None = read `attention_bias` / `mlp_bias`).
_LLAMA_LIKE: dict[str, dict[str, Any]] = {
    "llama": {"tie": False, "max_positions": 2048, "qkv_bias": None, "out_bias": None, "mlp_bias": None},
    "mistral": {"tie": False, "max_positions": 131072, "qkv_bias": False, "out_bias": False,
                "mlp_bias": False},
    # Qwen2Attention: q/k/v projections with bias, o_proj without.
    "qwen2": {"tie": False, "max_positions": 32768, "qkv_bias": True, "out_bias": False, "mlp_bias": False},
    # Gemma: gated GELU MLP (three matrices like SwiGLU), head_dim 256 by default, tied embeddings.
    "gemma": {"tie": True, "max_positions": 8192, "qkv_bias": None, "out_bias": None, "mlp_bias": False,
              "head_dim": 256},
    # Phi-3 fuses qkv_proj and gate_up_proj, which changes no count.
    "phi3": {"tie": False, "max_positions": 4096, "qkv_bias": False, "out_bias": False, "mlp_bias": False},
}


def _llama_like(r: _Reader) -> TransformerArch:
    """Llama and its relatives: RMSNorm, SwiGLU-style MLP, rotary positions, optional GQA."""
    spec = _LLAMA_LIKE[r.model_type]
    r.require("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    num_heads = r.int("num_attention_heads")
    attention_bias = r.flag("attention_bias", False)
    return _transformer(
        r, kind="decoder", vocab_size=r.int("vocab_size"), hidden_size=r.int("hidden_size"),
        num_layers=r.int("num_hidden_layers"), num_heads=num_heads,
        num_kv_heads=r.int("num_key_value_heads", default=num_heads),
        head_dim=r.int("head_dim", default=spec.get("head_dim")),
        intermediate_size=r.int("intermediate_size"),
        max_positions=r.int("max_position_embeddings", default=spec["max_positions"], maximum=MAX_POSITIONS),
        mlp="swiglu", norm="rmsnorm", position="rotary",
        qkv_bias=attention_bias if spec["qkv_bias"] is None else spec["qkv_bias"],
        out_bias=attention_bias if spec["out_bias"] is None else spec["out_bias"],
        mlp_bias=r.flag("mlp_bias", False) if spec["mlp_bias"] is None else spec["mlp_bias"],
        tie_embeddings=r.flag("tie_word_embeddings", spec["tie"]), pooler=False, num_labels=0,
    )


def _gpt2(r: _Reader) -> TransformerArch:
    """GPT-2: learned positions, LayerNorm, GELU MLP, biases everywhere, tied LM head.

    Its Conv1D layers are transposed Linears with the same parameter counts.
    """
    keys = (("vocab_size",), ("n_embd", "hidden_size"), ("n_layer", "num_hidden_layers"),
            ("n_head", "num_attention_heads"), ("n_positions", "max_position_embeddings"))
    r.require(*keys)
    hidden = r.int("n_embd", "hidden_size")
    return _transformer(
        r, kind="decoder", vocab_size=r.int("vocab_size"), hidden_size=hidden,
        num_layers=r.int("n_layer", "num_hidden_layers"), num_heads=r.int("n_head", "num_attention_heads"),
        intermediate_size=r.int("n_inner", default=4 * hidden),
        max_positions=r.int("n_positions", "max_position_embeddings", maximum=MAX_POSITIONS),
        mlp="gelu", norm="layernorm", position="learned", qkv_bias=True, out_bias=True, mlp_bias=True,
        tie_embeddings=r.flag("tie_word_embeddings", True), pooler=False, num_labels=0,
    )


def _chatglm(r: _Reader) -> TransformerArch:
    """ChatGLM2/ChatGLM3/GLM-4 (`model_type: chatglm`, custom code).

    One fused query_key_value projection (bias with `add_qkv_bias`) of multi-query groups,
    `dense_h_to_4h` producing 2 x ffn_hidden_size for SwiGLU (so: swiglu with intermediate
    `ffn_hidden_size`), RMSNorm, rotary positions and an untied `output_layer`. The first
    ChatGLM-6B used other keys (`inner_hidden_size`, `position_encoding_2d`) and another layout.
    """
    try:
        r.require("padded_vocab_size", "hidden_size", ("num_layers", "num_hidden_layers"),
                  "num_attention_heads", "ffn_hidden_size")
    except FitbenchError as exc:
        raise FitbenchError(exc.message, "fitbench reads ChatGLM2/ChatGLM3/GLM-4 configs; the first "
                                         "ChatGLM-6B layout is not supported") from None
    hidden = r.int("hidden_size")
    num_heads = r.int("num_attention_heads")
    multi_query = r.flag("multi_query_attention", False)
    kv_heads = r.int("multi_query_group_num", default=1) if multi_query else num_heads
    add_bias_linear = r.flag("add_bias_linear", False)
    return _transformer(
        r, kind="decoder", vocab_size=r.int("padded_vocab_size"), hidden_size=hidden,
        num_layers=r.int("num_layers", "num_hidden_layers"), num_heads=num_heads, num_kv_heads=kv_heads,
        head_dim=r.int("kv_channels", default=None), intermediate_size=r.int("ffn_hidden_size"),
        max_positions=r.int("seq_length", default=2048, maximum=MAX_POSITIONS),
        mlp="swiglu", norm="rmsnorm" if r.flag("rmsnorm", True) else "layernorm", position="rotary",
        qkv_bias=r.flag("add_qkv_bias", False), out_bias=add_bias_linear, mlp_bias=add_bias_linear,
        tie_embeddings=False, pooler=False, num_labels=0,
    )


# -- ResNet -------------------------------------------------------------------------------------
def _resnet(r: _Reader) -> ResNetArch:
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
        raise r.error(f"'layer_type' must be 'bottleneck' or 'basic', got {_show(layer_type)}")
    expansion = 4 if layer_type == "bottleneck" else 1
    depths = _int_list(r, "depths", maximum=MAX_STAGE_BLOCKS)
    widths = _int_list(r, "hidden_sizes")
    if widths[0] % expansion:
        raise r.error(f"'hidden_sizes' starts at {widths[0]}, not a multiple of {expansion} "
                      "as bottleneck blocks need")
    base = widths[0] // expansion
    expected = [base * expansion * 2**i for i in range(4)]
    if widths != expected:
        raise r.error(f"'hidden_sizes' {widths} do not double from stage to stage",
                      f"fitbench models the standard layout, here {expected}")
    stem = r.int("embedding_size", default=base)
    if stem != base:
        raise r.error(f"'embedding_size' {stem} differs from the first stage's width {base}",
                      "fitbench models the standard ResNet stem")
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
        return ResNetArch(depth=depth, layers=layers, base_width=base, num_classes=r.num_labels(),
                          in_channels=r.int("num_channels", default=3))
    except FitbenchError as exc:
        raise r.error(exc.message, exc.hint) from None


def _int_list(r: _Reader, key: str, *, maximum: int = MAX_SIZE) -> list[int]:
    value = r.data[key]
    if not isinstance(value, list) or len(value) != 4:
        raise r.error(f"'{key}' must be a list of 4 numbers (one per stage), got {_show(value)}"
                      + (f" of {len(value)}" if isinstance(value, list) else ""))
    return [r.check_int(f"{key}[{i}]", v, maximum=maximum) for i, v in enumerate(value)]


_READERS: dict[str, Callable[[_Reader], TransformerArch | ResNetArch]] = {
    **{t: _bert_like for t in ("bert", "roberta", "xlm-roberta", "electra")},
    "distilbert": _distilbert,
    **{t: _llama_like for t in _LLAMA_LIKE},
    "gpt2": _gpt2,
    "chatglm": _chatglm,
    "resnet": _resnet,
}


# -- public API ---------------------------------------------------------------------------------
def arch_from_hf_config(data: dict[str, Any], *, source: str = "config") -> TransformerArch | ResNetArch:
    """The architecture a parsed Hugging Face config describes.

    `source` names the config in error messages (the loaders pass the file path).
    """
    if not isinstance(data, dict):
        raise FitbenchError(f"{source}: a config must be a JSON object, got {_show(data)}",
                            "pass a Hugging Face config.json")
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    raw = data.get("model_type")
    if raw is None:
        raise FitbenchError(f"{source}: the config has no 'model_type'", f"fitbench reads {supported}")
    if not isinstance(raw, str):
        raise FitbenchError(f"{source}: 'model_type' must be a string, got {_show(raw)}")
    model_type = raw.strip().lower().replace("_", "-")
    if model_type not in _READERS:
        # A stricter cutoff than the default: 'gpt-neox' or 'opt' are other families, not typos of 'gpt2'.
        close = close_match_hint(model_type, SUPPORTED_MODEL_TYPES, n=1, cutoff=0.6)
        guess = f"{close} " if close else ""
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        raise FitbenchError(f"{source}: model_type {shown!r} is not supported",
                            f"{guess}fitbench reads {supported}")
    return _READERS[model_type](_Reader(data, source, model_type))


def _config_file(path: str | Path) -> Path:
    """`path` itself, or the config.json inside it when it is a folder."""
    p = Path(path).expanduser()
    hint = "pass the path to a config.json or the folder holding it"
    try:
        if p.is_dir():
            inner = p / CONFIG_NAME
            if not inner.is_file():
                raise FitbenchError(f"no {CONFIG_NAME} in folder {p}", hint)
            return inner
        exists = p.exists()
    except OSError as exc:  # a name too long, a folder we may not enter
        raise FitbenchError(f"cannot open {p}: {exc.strerror or exc}", hint) from None
    if not exists:
        raise FitbenchError(f"config file {p} not found", hint)
    return p


def _read_json(config_file: Path) -> dict[str, Any]:
    try:
        text = config_file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise FitbenchError(f"{config_file} is not UTF-8 text", "pass a Hugging Face config.json") from None
    except OSError as exc:
        raise FitbenchError(f"cannot read {config_file}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise FitbenchError(f"{config_file} is not valid JSON: {exc.msg} at {where}",
                            "fix the file, or download the model's config.json again") from None
    except (ValueError, RecursionError) as exc:  # integers too long to convert, absurd nesting
        raise FitbenchError(f"{config_file} is not a usable JSON file: {str(exc)[:80]}") from None
    if not isinstance(data, dict):
        raise FitbenchError(f"{config_file} holds a JSON {type(data).__name__}, not an object",
                            "a config.json is one JSON object of settings")
    return data


def load_hf_config(path: str | Path) -> TransformerArch | ResNetArch:
    """The architecture in a config.json file, or in the config.json of a model folder."""
    config_file = _config_file(path)
    return arch_from_hf_config(_read_json(config_file), source=str(config_file))


def _workload_name(config_file: Path, data: dict[str, Any], arch: TransformerArch | ResNetArch) -> str:
    """The model folder's name, else the file's own stem when renamed, else `_name_or_path`."""
    if config_file.name != CONFIG_NAME:
        return config_file.stem
    folder = config_file.resolve().parent.name
    if folder:
        return folder
    name_or_path = data.get("_name_or_path")
    if isinstance(name_or_path, str) and name_or_path.strip("/ "):
        return name_or_path.strip("/ ").rsplit("/", 1)[-1]
    return arch.model_type if isinstance(arch, TransformerArch) else "resnet"


def _defaults(arch: TransformerArch | ResNetArch, mode: str) -> dict[str, Any]:
    """What a user most likely means by 'this model on this GPU' for each family."""
    if isinstance(arch, ResNetArch):
        return {"mode": "train", "batch_size": 64, "image_size": 224, "precision": "fp32",
                "optimizer": "momentum"}
    if arch.kind == "encoder":
        return {"mode": "train", "batch_size": 16, "seq_len": min(512, arch.max_positions),
                "precision": "fp32", "optimizer": "adamw"}
    if mode == "train":  # fine-tuning a decoder: mixed precision, a moderate context
        return {"mode": "train", "batch_size": 1, "seq_len": min(DECODER_TRAIN_SEQ_LEN, arch.max_positions),
                "precision": "amp-bf16", "optimizer": "adamw"}
    # Generation: a short prompt and answer, shortened to fit models with tiny contexts.
    prompt = min(50, max(1, arch.max_positions // 3))
    return {"mode": "infer", "batch_size": 1, "precision": "fp16", "optimizer": "adamw",
            "prompt_tokens": prompt, "new_tokens": min(100, max(1, arch.max_positions - prompt))}


def workload_from_config(path: str | Path, **overrides: Any) -> Workload:
    """A Workload for the model in a config.json, with per-family defaults and the user's overrides.

    Encoders fine-tune (train, batch 16, seq min(512, positions), fp32, AdamW); decoders generate
    (infer, batch 1, fp16, 50-token prompt, 100 new tokens; with mode=train: seq 512, amp-bf16);
    ResNets train at 224x224, batch 64, fp32, SGD with momentum. Overrides that are not None
    replace the defaults through `Workload.with_overrides`, which validates them (and keeps a
    fine-tuned decoder in bf16 under PEFT, as for presets).
    """
    config_file = _config_file(path)
    data = _read_json(config_file)
    arch = arch_from_hf_config(data, source=str(config_file))
    given = {k: v for k, v in overrides.items() if v is not None}
    family = "resnet" if isinstance(arch, ResNetArch) else arch.kind
    workload = Workload(name=_workload_name(config_file, data, arch), arch=arch,
                        description=f"{family} ({arch_label(arch)}) read from {config_file}",
                        **_defaults(arch, str(given.get("mode", "")).strip().lower()))
    return workload.with_overrides(**given)


def arch_label(arch: TransformerArch | ResNetArch) -> str:
    """A short human name for the architecture, e.g. 'llama' or 'ResNet-50'."""
    if isinstance(arch, ResNetArch):
        if arch.layers is None:
            return f"ResNet-{arch.depth}"
        return f"ResNet ({arch.block} blocks {'-'.join(map(str, arch.layers))})"
    return arch.model_type or arch.kind
