"""Nemotron-H (`nemotron_h`): blocks of one norm and one mixer, MLP or experts each.

fitbench pairs each MLP (or experts) block with a mixer block as one layer and counts the mixers
left over as layers without an MLP (TransformerArch.mlp_free_layers). These tests hold that
layout to transformers' NemotronH classes: the reader's counts and refusals, the parameters of
published layouts on the meta device, what a block without an MLP saves for the backward, and
the Python calls it issues in a decode step.
The layouts are benchmarks/configs' (tiny_families shrinks them); building them needs torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fitbench.errors import FitbenchError
from fitbench.estimate import generate_ops
from fitbench.estimate.execution import workload_as_run
from fitbench.workloads.hf_config import arch_from_hf_config, workload_from_data

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import family_saved  # noqa: E402
import generate_ops_families as counting  # noqa: E402
from fitbench.backends.torch.models import build_model, count_parameters  # noqa: E402
from tiny_families import tiny_config  # noqa: E402

DENSE = "nemotron-h-8b-shape.json"
EXPERTS = "nemotron-3-nano-30b-a3b-shape.json"


def _config(pattern: str, **fields: object) -> dict[str, object]:
    return {**tiny_config(DENSE), "hybrid_override_pattern": pattern, **fields}


def test_the_blocks_pair_into_layers_and_leave_mixers_without_an_mlp() -> None:
    arch = arch_from_hf_config(_config("M-M-*M-M"))
    assert (arch.num_layers, arch.linear_layers, arch.attention_layers) == (5, 4, 1)
    assert (arch.mlp_free_layers, arch.mlp_layers, arch.dense_mlp_layers, arch.moe_layers) == (2, 3, 3, 0)
    assert arch.block_norms == 2 * 5 - 2
    assert [arch.is_mlp_free_layer(i) for i in range(5)] == [False, False, False, True, True]
    assert arch.position == "none" and arch.mlp == "gelu" and arch.rules_type == "nemotron_h"


def test_the_block_list_and_the_older_pattern_read_the_same() -> None:
    listed = {k: v for k, v in _config("").items() if k != "hybrid_override_pattern"}
    listed["layers_block_type"] = ["linear_attention", "mlp", "full_attention", "mlp", "linear_attention"]
    assert arch_from_hf_config(listed) == arch_from_hf_config(_config("M-*-M"))
    listed["layers_block_type"] = ["mamba", "mlp", "attention", "mlp", "mamba"]  # the older names
    assert arch_from_hf_config(listed) == arch_from_hf_config(_config("M-*-M"))


def test_the_older_key_names_read_as_the_class_s() -> None:
    """The keys NemotronHConfig's __post_init__ still takes under their older names
    (mamba_n_groups, mamba_d_conv, mamba_conv_bias, mamba_chunk_size), and `attention_head_dim`
    for the head size, read as the class's own."""
    names = {
        "n_groups": "mamba_n_groups",
        "conv_kernel": "mamba_d_conv",
        "use_conv_bias": "mamba_conv_bias",
        "chunk_size": "mamba_chunk_size",
        "head_dim": "attention_head_dim",
    }
    config = _config("M-*-M", head_dim=32, conv_kernel=3, use_conv_bias=False)
    older = {names.get(k, k): v for k, v in config.items()}
    assert "head_dim" not in older and older["attention_head_dim"] == 32
    assert arch_from_hf_config(older) == arch_from_hf_config(config)


def test_experts_blocks_follow_their_mixers() -> None:
    arch = arch_from_hf_config({**tiny_config(EXPERTS), "hybrid_override_pattern": "ME*EM"})
    assert arch.is_moe and (arch.moe_layers, arch.dense_mlp_layers, arch.mlp_free_layers) == (2, 0, 1)
    assert [arch.is_moe_layer(i) for i in range(3)] == [True, True, False]
    assert not arch.expert_score_bias  # the router's score correction is a buffer, not a parameter


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"hybrid_override_pattern": "M--"}, "MLP blocks for 1 token-mixer"),
        ({"hybrid_override_pattern": "M-X"}, "layers_block_type"),
        ({"hybrid_override_pattern": "ME", "moe_latent_size": 16}, "latent projection"),
    ],
)
def test_layouts_it_cannot_pair_are_refused_with_a_reason(fields: dict, match: str) -> None:
    with pytest.raises(FitbenchError, match=match):
        arch_from_hf_config({**tiny_config(EXPERTS), **fields})


# -- against transformers' NemotronH classes -------------------------------------------------------


@pytest.mark.torch
@pytest.mark.parametrize("layout", [DENSE, EXPERTS])
def test_published_layouts_count_every_parameter(layout: str) -> None:
    """At real size on the meta device: the 8B's 52 blocks (24 Mamba-2, 4 attention, 24 MLP) and
    Nemotron 3 Nano's (23 Mamba-2, 6 attention, 23 of 128 experts and a shared MLP)."""
    import json

    config = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "configs" / layout).read_text())
    workload = workload_from_data(config, name=layout, source="test", weights="none")
    model, notes = build_model(workload, device="meta")
    assert count_parameters(model) == workload.param_count()
    assert notes["model_source"] == "transformers NemotronHForCausalLM (random init)"


def _training(pattern: str, precision: str):
    w = workload_from_data(
        _config(pattern), name="t", source="test", mode="train", batch_size=2, seq_len=64, precision=precision
    )
    return workload_as_run(w, "default", None)


@pytest.mark.torch
@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
def test_a_block_without_an_mlp_saves_what_the_estimate_leaves_out(precision: str) -> None:
    """The same model with and without the last MLP block: autograd's saved bytes differ by the
    estimate's difference within 1 % (the MLP's input and activations, its norm's tensors)."""
    with_mlp, without = _training("M-*-M-", precision), _training("M-*-M", precision)
    measured = family_saved.saved_bytes(with_mlp, dropout=False) - family_saved.saved_bytes(
        without, dropout=False
    )
    estimated = family_saved.estimated_bytes(with_mlp, dropout=False) - family_saved.estimated_bytes(
        without, dropout=False
    )
    assert measured > 0 and estimated == pytest.approx(measured, rel=0.01)


def _decode_calls(pattern: str) -> int:
    cfg = transformers.AutoConfig.for_model(
        "nemotron_h", **{k: v for k, v in _config(pattern).items() if k != "model_type"}
    )
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return counting.forward_calls(transformers.AutoModelForCausalLM.from_config(cfg).eval())


@pytest.mark.torch
def test_decode_calls_of_each_block_kind_equal_transformers() -> None:
    """One decode step's calls, less the estimate's for its layers, is the same for every layout:
    each kind of layer (attention or Mamba-2, with or without its MLP) costs what transformers
    issues for it, at the installed release."""
    release = transformers.__version__
    rest = set()
    for pattern in ("*-", "*-*-", "*-M-", "*-M", "*-M-MM"):
        arch = arch_from_hf_config(_config(pattern))
        rest.add(_decode_calls(pattern) - generate_ops.layers_calls(arch, counting.PROMPT, release))
    assert len(rest) == 1, rest
