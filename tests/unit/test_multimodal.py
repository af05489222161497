"""Multimodal checkpoints: the language model is read, and the vision tower transformers loads
beside it is counted exactly (weights), but never trained or run by text.

The counts are checked against the real `...ForConditionalGeneration` classes built on the meta
device from full-size configs in the shapes the Hub files have (tests/unit/data/multimodal), and
the no-gradient rule against a tiny real Gemma-3 trained on text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fitbench.catalog import get_gpu
from fitbench.errors import FitbenchError
from fitbench.estimate.api import estimate
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.hf_config import arch_from_hf_config, workload_from_data
from fitbench.workloads.multimodal import TEXT_DEFAULTS, WRAPPERS
from fitbench.workloads.vision_tower import VISION_DEFAULTS
from fitbench.workloads.workload import Workload

DATA = Path(__file__).parent / "data" / "multimodal"
FILES = sorted(p.name for p in DATA.glob("*.json"))


def _config(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _arch(data: dict[str, Any]) -> TransformerArch:
    arch = arch_from_hf_config(data, source="config.json")
    assert isinstance(arch, TransformerArch)
    return arch


def test_every_wrapper_has_a_file() -> None:
    types = {_config(name)["model_type"] for name in FILES}
    assert types == set(WRAPPERS)


@pytest.mark.parametrize("name", FILES)
def test_count_equals_the_model_transformers_builds(name: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = _config(name)
    config = transformers.AutoConfig.for_model(**data)
    with torch.device("meta"):
        model = getattr(transformers, data["architectures"][0])._from_config(config)
    params = dict(model.named_parameters())
    # ERNIE-4.5-VL's vision experts sit in the language model's layers (mlp.vision_moe) but only
    # image tokens reach them: for a text prompt they are weights beside the model, as the tower is
    language = sum(
        p.numel()
        for n, p in params.items()
        if ("language_model" in n or n.startswith("lm_head")) and ".vision_moe." not in n
    )
    arch = _arch(data)
    assert arch.param_count() == sum(p.numel() for p in params.values())
    assert arch.language_param_count() == language
    assert arch.vision_params == arch.param_count() - language > 0


@pytest.mark.parametrize("model_type", sorted(VISION_DEFAULTS))
def test_vision_defaults_are_the_config_classes(model_type: str) -> None:
    transformers = pytest.importorskip("transformers")
    names = {
        "siglip_vision_model": "SiglipVisionConfig",
        "siglip2_vision_model": "Siglip2VisionConfig",
        "clip_vision_model": "CLIPVisionConfig",
        "pixtral": "PixtralVisionConfig",
        "llama4_vision_model": "Llama4VisionConfig",
        "qwen2_vl": "Qwen2VLVisionConfig",
        "qwen2_5_vl": "Qwen2_5_VLVisionConfig",
        "qwen3_vl": "Qwen3VLVisionConfig",
        "qwen3_5_vision": "Qwen3_5VisionConfig",
        "qwen3_5_moe_vision": "Qwen3_5MoeVisionConfig",
        "internvl_vision": "InternVLVisionConfig",
        "glm4v_vision": "Glm4vVisionConfig",
        "glm4v_moe_vision": "Glm4vMoeVisionConfig",
        "kimi_k25_vision": "Kimi_K25VisionConfig",
        "ernie4_5_vl_moe_vision": "Ernie4_5_VLMoeVisionConfig",
    }
    config = getattr(transformers, names[model_type])()
    # Keys that a release's config class leaves out read as its modeling code reads them
    # (5.17's SiglipVisionConfig has no vision_use_head; its SiglipVisionTransformer takes
    # the head then)
    absent = {"vision_use_head": True}
    for key, value in VISION_DEFAULTS[model_type].items():
        actual = getattr(config, key) if hasattr(config, key) or key not in absent else absent[key]
        assert (list(actual) if isinstance(actual, tuple) else actual) == value, key


@pytest.mark.parametrize("model_type", sorted(TEXT_DEFAULTS))
def test_text_defaults_are_the_config_classes(model_type: str) -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.CONFIG_MAPPING[model_type]()
    for key, value in TEXT_DEFAULTS[model_type].items():
        # Qwen2VLTextConfig leaves tying to the outer config (multimodal.text_config reads it there)
        assert getattr(config, key, False) == value, key


def test_a_gemma3_text_config_without_vocab_size_takes_the_class_default() -> None:
    arch = _arch(_config("gemma-3-4b-it.json"))
    assert arch.vocab_size == 262208 and arch.tie_embeddings
    assert arch.qk_norm == "head" and arch.norms_per_layer == 4
    assert arch.sliding_layers == 34 - 34 // 6 and arch.sliding_window == 1024


def test_flat_qwen_vl_reads_the_top_level_text_keys() -> None:
    data = _config("qwen2.5-vl-7b-instruct.json")
    arch = _arch(data)
    assert (arch.hidden_size, arch.num_layers, arch.kv_heads) == (3584, 28, 4)
    assert arch.qkv_bias and not arch.out_bias and arch.model_type == "qwen2"
    assert arch.sliding_layers == 0  # use_sliding_window false


def _gemma3_4b_with_and_without_tower() -> tuple[Workload, Workload]:
    """Gemma-3-4B as its multimodal file describes it, and its text_config alone (the class's
    vocab_size written in)."""
    data = _config("gemma-3-4b-it.json")
    with_tower = workload_from_data(data, name="gemma-3-4b", source="config.json")
    text = {**data["text_config"], "vocab_size": 262208, "model_type": "gemma3_text"}
    return with_tower, workload_from_data(text, name="gemma-3-4b-text", source="config.json")


def test_tower_weights_are_memory_but_not_speed() -> None:
    """The same language model with and without its tower: weights grow by the tower's bytes,
    the decode speed and the active parameters do not move."""
    with_tower, text_only = _gemma3_4b_with_and_without_tower()
    arch = with_tower.arch
    assert isinstance(arch, TransformerArch)
    assert text_only.param_count() == arch.language_param_count()
    assert with_tower.active_param_count() == text_only.active_param_count()
    a, b = estimate(with_tower, get_gpu("h100-sxm")), estimate(text_only, get_gpu("h100-sxm"))
    assert a.breakdown["weights"] - b.breakdown["weights"] == pytest.approx(2 * arch.vision_params, rel=1e-6)
    assert a.tokens_per_second == pytest.approx(b.tokens_per_second, rel=1e-9)
    assert any("vision tower" in line for line in a.assumptions)


def test_fine_tuning_keeps_no_gradients_or_state_for_the_tower() -> None:
    data = _config("gemma-3-4b-it.json")
    train = workload_from_data(
        data, name="gemma-3-4b", source="config.json", mode="train", precision="amp-bf16"
    )
    arch = train.arch
    assert isinstance(arch, TransformerArch)
    e = estimate(train, get_gpu("h100-sxm"))
    assert e.breakdown["optimizer_state"] == 2 * 4 * arch.language_param_count()


def test_text_batches_leave_the_real_tower_without_gradients() -> None:
    """The mechanism behind trained_param_count, on a tiny real Gemma-3: a text-only step gives
    no parameter of the tower a gradient, and AdamW then keeps state only for the rest."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = {
        "model_type": "gemma3",
        "architectures": ["Gemma3ForConditionalGeneration"],
        "text_config": {
            "model_type": "gemma3_text",
            "vocab_size": 300,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "sliding_window": 8,
        },
        "vision_config": {
            "model_type": "siglip_vision_model",
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 28,
            "patch_size": 14,
            "vision_use_head": False,
        },
        "mm_tokens_per_image": 4,
        "image_token_index": 299,
        "boi_token_index": 297,
        "eoi_token_index": 298,
    }
    torch.manual_seed(0)
    model = transformers.Gemma3ForConditionalGeneration(transformers.AutoConfig.for_model(**data))
    arch = _arch(data)
    assert sum(p.numel() for p in model.parameters()) == arch.param_count()
    ids = torch.randint(0, 290, (2, 12))
    model(input_ids=ids, labels=ids).loss.backward()
    optim = torch.optim.AdamW(model.parameters())
    optim.step()
    with_grad = sum(p.numel() for p in model.parameters() if p.grad is not None)
    with_state = sum(p.numel() for p in model.parameters() if optim.state.get(p))
    assert with_grad == with_state == arch.language_param_count()


def test_an_unknown_vision_tower_is_one_clear_error() -> None:
    data = _config("llava-1.5-7b-hf.json")
    data["vision_config"] = {**data["vision_config"], "model_type": "intern_vit_6b"}
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config(data, source="config.json")
    assert "intern_vit_6b" in exc.value.message and "model_type" in (exc.value.hint or "")
    assert exc.value.message_zh and "intern_vit_6b" in exc.value.message_zh


def test_a_wrapper_with_a_bad_sub_config_names_it() -> None:
    data = {**_config("gemma-3-4b-it.json"), "vision_config": [1, 2]}
    with pytest.raises(FitbenchError, match="'vision_config' must be an object"):
        arch_from_hf_config(data, source="config.json")


def test_offload_places_the_tower_with_the_embeddings() -> None:
    """device_map="auto" walks the modules in order, and a multimodal model's vision tower and
    projector come first: their bytes join the embeddings', not the decoder layers'."""
    from fitbench.estimate.offload import module_bytes

    with_tower, text_only = _gemma3_4b_with_and_without_tower()
    arch = with_tower.arch
    assert isinstance(arch, TransformerArch)
    (embed, layer, head), (embed0, layer0, head0) = module_bytes(with_tower), module_bytes(text_only)
    assert embed - embed0 == pytest.approx(2 * arch.vision_params)
    assert layer == pytest.approx(layer0) and head == pytest.approx(head0)


def test_a_mistral3_file_with_a_sparse_mistral4_text_config_counts_as_transformers_builds_it() -> None:
    """Mistral 4 inside Mistral3's wrapper, its text_config saved as differences from
    Mistral4Config: every size it leaves out takes the class default, as transformers does."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = {
        "model_type": "mistral3",
        "architectures": ["Mistral3ForConditionalGeneration"],
        "text_config": {"model_type": "mistral4", "num_hidden_layers": 2},
        "vision_config": {"model_type": "pixtral", "num_hidden_layers": 1},
    }
    config = transformers.AutoConfig.for_model(**data)
    with torch.device("meta"):
        model = transformers.Mistral3ForConditionalGeneration(config)
    arch = _arch(data)
    assert arch.param_count() == sum(p.numel() for p in model.parameters())
    assert (arch.q_lora_rank, arch.kv_lora_rank, arch.num_experts) == (1024, 256, 128)


def test_ernie_vl_reads_its_text_experts_and_counts_the_vision_ones_as_weights() -> None:
    """ERNIE-4.5-VL-28B-A3B: the language model is ERNIE-4.5-21B-A3B's blocks (the text experts,
    two shared ones, one dense first layer); the vision experts of its 27 sparse layers are
    weights beside it, never active for a text token."""
    data = _config("ernie-4.5-vl-28b-a3b-shape.json")
    arch = _arch(data)
    assert (arch.model_type, arch.num_experts, arch.experts_per_token) == ("ernie4-5-moe", 64, 6)
    assert (arch.expert_intermediate_size, arch.shared_intermediate_size, arch.dense_layers) == (
        1536,
        3072,
        1,
    )
    vision_experts = 27 * 64 * 3 * 2560 * 512
    assert arch.vision_params > vision_experts
    text = workload_from_data(data, name="ernie-vl", source="config.json")
    assert text.active_param_count() < arch.language_param_count() < arch.param_count()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"moe_intermediate_size": 1536}, "moe_intermediate_size"),
        ({"mlp_layer_types": ["dense"] * 27 + ["sparse"]}, None),
        ({"mlp_layer_types": ["sparse", "dense"] + ["sparse"] * 26}, "mlp_layer_types"),
        ({"mlp_layer_types": ["sparse"] * 3}, "mlp_layer_types"),
    ],
)
def test_ernie_vl_layouts_it_cannot_read_are_one_clear_error(change: dict, named: str | None) -> None:
    data = _config("ernie-4.5-vl-28b-a3b-shape.json")
    data["text_config"] = {**data["text_config"], **change}
    if named is None:  # dense layers first, then sparse ones: read
        assert _arch(data).dense_layers == 27
        return
    with pytest.raises(FitbenchError, match=named):
        _arch(data)
