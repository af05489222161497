"""A multimodal checkpoint through the torch backend on a CPU: a tiny ERNIE-4.5-VL config builds
ERNIE-4.5 MoE's language model through its own transformers class, with the vision experts,
tower and resampler as one frozen stand-in, and its parameter count is the estimate's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fitbench.backends.torch.models import build_decoder  # noqa: E402
from fitbench.workloads.hf_config import arch_from_hf_config  # noqa: E402

pytestmark = pytest.mark.torch
DATA = Path(__file__).parents[1] / "unit" / "data" / "multimodal" / "ernie-4.5-vl-28b-a3b-shape.json"


def _tiny_ernie_vl() -> dict:
    data = json.loads(DATA.read_text())
    data["text_config"].update(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        moe_intermediate_size=[32, 16],
        moe_num_experts=8,
        moe_k=2,
        moe_num_shared_experts=1,
        mlp_layer_types=["dense", "sparse", "sparse"],
    )
    data["vision_config"].update(depth=1, hidden_size=32, intermediate_size=64, num_heads=2)
    return data


def test_the_language_model_trains_beside_a_frozen_vision_stand_in() -> None:
    arch = arch_from_hf_config(_tiny_ernie_vl(), source="config.json")
    torch.manual_seed(0)
    model, notes = build_decoder(arch, attention="sdpa", device=torch.device("cpu"), dtype=torch.float32)
    assert type(model).__name__ == "Ernie4_5_MoeForCausalLM"
    assert sum(p.numel() for p in model.parameters()) == arch.param_count()
    stand_in = model.vision_tower_stand_in
    assert stand_in.numel() == arch.vision_params and not stand_in.requires_grad
    assert "ernie4_5_vl_moe_vision" in notes["vision_tower"]
    ids = torch.randint(0, 500, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    trained = sum(p.numel() for p in model.parameters() if p.grad is not None)
    # every language-model parameter but the routers' frozen score-correction biases
    frozen = (arch.num_layers - arch.dense_layers) * arch.num_experts
    assert trained == arch.language_param_count() - frozen
