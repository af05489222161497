"""The estimator's host operations of a `generate` decode step equal what transformers issues.

Tiny models of each family are built from transformers' config classes; a TorchFunctionMode
counts the Python-level torch calls (less attribute reads: estimate/generate_ops.py says why)
of one decode forward at one and two layers (the difference is a layer) and of `generate` for
N and N + k new tokens (the difference over k is a whole decode step with the loop's own
work). The estimator's count for the same config.json, at the installed transformers release
(generate_ops.CallCounts), must equal both exactly (Qwen2-MoE's layer: within one call, see
TOLERANCE). The other release's set was counted the same way:
benchmarks/results/generate-ops-transformers-5.17.txt.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from fitbench.estimate import generate_ops  # noqa: E402
from fitbench.workloads.hf_config import arch_from_hf_config  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
# The counting itself (a TorchFunctionMode over one decode forward, and over generate) is the
# family script's: benchmarks/generate_ops_families.py.
from generate_ops_families import forward_calls, generate_calls  # noqa: E402

pytestmark = pytest.mark.torch

BASE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
    "eos_token_id": 2,
}
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"model_type": "llama"},
    "llama-mha": {"model_type": "llama", "num_key_value_heads": 4},
    "qwen2 (qkv bias)": {"model_type": "qwen2"},
    "qwen3 (qk norm)": {"model_type": "qwen3", "head_dim": 16},
    "mistral window 8": {"model_type": "mistral", "sliding_window": 8},
    "mistral window 64": {"model_type": "mistral", "sliding_window": 64},
    "mixtral": {"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2-moe (shared expert)": {
        "model_type": "qwen2_moe",
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 64,
        # as the published checkpoints: renormalised top-k, no window
        "norm_topk_prob": True,
        "sliding_window": None,
    },
}
BATCH, PROMPT = 2, 16
# Calls a layer the estimate may differ by: Qwen2-MoE's router renormalises its top-k with one
# call fewer than Mixtral's (no float cast of the sum), which the estimate does not distinguish.
TOLERANCE = {"qwen2-moe (shared expert)": 1}


def build(fields: dict[str, Any], layers: int) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(**{**BASE, **fields, "num_hidden_layers": layers})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg).eval()


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_decode_step_calls_match_transformers(family):
    fields = FAMILIES[family]
    one, two = build(fields, 1), build(fields, 2)
    per_layer = forward_calls(two) - forward_calls(one)
    k = 4
    step = (generate_calls(one, 5 + k) - generate_calls(one, 5)) / k
    fixed = step - per_layer
    arch = arch_from_hf_config({**BASE, **fields, "num_hidden_layers": 1})
    sliding = bool(arch.sliding_layers)
    moe = arch.is_moe_layer(0)
    full = generate_ops.window_reached(arch, PROMPT)
    tol = TOLERANCE.get(family, 0)
    release = transformers.__version__  # the count set of the installed release
    layer = generate_ops.layer_calls(arch, moe=moe, sliding=sliding, window_full=full, transformers=release)
    assert abs(layer - per_layer) <= tol
    # the counted steps run at contexts PROMPT + 5 .. PROMPT + 8, on the same side of each window
    assert generate_ops.fixed_calls(arch, PROMPT + 5, release) == fixed
    assert abs(generate_ops.decode_step_calls(arch, PROMPT + 5, release) - step) <= tol


@pytest.mark.slow
@pytest.mark.parametrize("family", ["mixtral", "qwen2-moe (shared expert)"])
def test_batched_experts_decode_layer_calls_match_transformers(family):
    """generate's decode loop on a GPU runs grouped experts through batched_mm (generation/
    utils.py _optimize_model_for_decode); on the CPU the count sets that implementation itself."""
    fields = FAMILIES[family]
    one, two = build(fields, 1), build(fields, 2)
    for model in (one, two):
        model.set_experts_implementation("batched_mm")
    per_layer = forward_calls(two) - forward_calls(one)
    arch = arch_from_hf_config({**BASE, **fields, "num_hidden_layers": 1})
    release = transformers.__version__
    kinds = {"moe": True, "sliding": False, "transformers": release}
    layer = generate_ops.layer_calls(arch, **kinds, batched_experts=True)
    assert abs(layer - per_layer) <= TOLERANCE.get(family, 0)
    grouped = generate_ops.layer_calls(arch, **kinds)
    assert layer < grouped
