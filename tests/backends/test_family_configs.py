"""The torch backend builds each decoder family through its own transformers class.

Qwen3 (query/key norms), Gemma-2/3 (post norms, local layers), OLMo (parameter-free norms),
OLMo-2, GLM-4, GPT-NeoX / GPT-J / Falcon / Command-R (parallel blocks), StarCoder2, Qwen2-MoE /
Qwen3-MoE / OLMoE / ERNIE-4.5-MoE / GLM-4.5 / gpt-oss / Llama-4 / Phi-3.5-MoE (experts) and
DeepSeek-V2/V3 (latent attention, shared experts): at real size on
the meta device their parameters are the estimator's to the last one, and tiny variants of the
same configs generate and train on the CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from fitbench.backends import get_backend  # noqa: E402
from fitbench.backends.base import RunOptions  # noqa: E402
from fitbench.backends.torch.family_configs import FAMILIES, family_key, layer_types  # noqa: E402
from fitbench.backends.torch.models import attention_impl, build_model, count_parameters  # noqa: E402
from fitbench.errors import FitbenchError  # noqa: E402
from fitbench.estimate.execution import attention_as_run, workload_as_run  # noqa: E402
from fitbench.workloads import library  # noqa: E402
from fitbench.workloads.hf_config import workload_from_data  # noqa: E402
from tiny_families import tiny_config, tiny_workload  # noqa: E402

pytestmark = pytest.mark.torch

FAMILY_MODELS = sorted(
    name
    for name, model in library.models().items()
    if family_key(library.workload_for_model(name, weights="none").arch) is not None
)


def test_every_family_has_a_library_model() -> None:
    covered = {family_key(library.workload_for_model(n, weights="none").arch) for n in FAMILY_MODELS}
    # Families without a bundled config (no published one could be checked): tiny ones of
    # their layouts are built below instead (TINY_FAMILIES).
    unbundled = {c["model_type"] for c in TINY_FAMILIES} - covered
    assert unbundled <= {
        "hunyuan_v1_dense",
        "hunyuan_v1_moe",
        "arcee",
        "nemotron",
        "jais2",
        "apertus",
        "ministral",
        "ministral3",
        "solar_open",
        "exaone_moe",
        "afmoe",
        "flex_olmo",
        "phi",
        "minicpm3",
        "youtu",
        "granitemoeshared",
        "kimi_k2",
        "qwen3_next",
        "qwen3_5_text",
        "qwen3_5_moe_text",
        "granitemoehybrid",
        "bamba",
        "nemotron_h",
    }
    assert covered >= set(FAMILIES) - {"gemma3", "glm4"} - unbundled


@pytest.mark.parametrize("name", FAMILY_MODELS)
def test_real_size_counts_match_on_meta(name: str) -> None:
    workload = library.workload_for_model(name, weights="none")
    model, notes = build_model(workload, device="meta")
    assert count_parameters(model) == workload.param_count()
    assert type(model.config).model_type == FAMILIES[family_key(workload.arch)][0]
    assert notes["model_source"].startswith("transformers ")


# A short generation and a training step: what each family's tiny variant must run on a CPU.
GENERATE_AND_TRAIN = (
    {"mode": "infer", "batch_size": 2, "prompt_tokens": 20, "new_tokens": 4},
    {"mode": "train", "batch_size": 2, "seq_len": 16},
)


def _step_on_the_cpu(workload) -> None:
    """One step of `workload` through the torch backend, with the estimator's parameter count."""
    session = get_backend("torch").open(workload, RunOptions(device="cpu"))
    try:
        assert session.notes["params"] == workload.param_count()
        session.step()
        session.sync()
    finally:
        session.close()


@pytest.mark.parametrize("name", FAMILY_MODELS)
def test_tiny_variants_generate_and_train_on_the_cpu(name: str) -> None:
    for overrides in GENERATE_AND_TRAIN:
        _step_on_the_cpu(tiny_workload(name, **overrides))


HUNYUAN = {
    "vocab_size": 512,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 96,
}


BIGCODE = {
    "model_type": "gpt_bigcode",
    "vocab_size": 512,
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 64,
}
LINEAR = {
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "layer_types": ["linear_attention", "full_attention"],
}
QWEN_EXPERTS = {
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
}
MAMBA = {
    "mamba_n_heads": 8,
    "mamba_d_head": 16,
    "mamba_d_state": 16,
    "mamba_chunk_size": 8,
    "shared_intermediate_size": 48,
    "layer_types": ["mamba", "attention"],
}
NEMOTRON_H = {
    "model_type": "nemotron_h",
    "mamba_num_heads": 8,
    "mamba_head_dim": 16,
    "ssm_state_size": 16,
    "n_groups": 2,
    "chunk_size": 8,
}
MLA = {"q_lora_rank": 48, "kv_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16}
TINY_FAMILIES = [
    {**HUNYUAN, "model_type": "hunyuan_v1_dense"},
    {**HUNYUAN, "model_type": "hunyuan_v1_moe", "num_experts": 4, "moe_topk": [2, 2]},
    {**HUNYUAN, "model_type": "arcee", "attention_bias": True, "mlp_bias": True},
    {**HUNYUAN, "model_type": "nemotron"},
    {**HUNYUAN, "model_type": "jais2"},
    {**HUNYUAN, "model_type": "apertus", "head_dim": None},
    {
        **HUNYUAN,
        "model_type": "ministral",
        "sliding_window": 8,
        "layer_types": ["sliding_attention", "full_attention"],
    },
    {**HUNYUAN, "model_type": "ministral3"},
    {**HUNYUAN, "model_type": "flex_olmo", "head_dim": None, "num_experts": 4, "num_experts_per_tok": 2},
    {
        **HUNYUAN,
        "model_type": "afmoe",
        "moe_intermediate_size": 32,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "num_shared_experts": 1,
        "num_dense_layers": 1,
        "sliding_window": 8,
        "num_hidden_layers": 4,
    },
    {
        **HUNYUAN,
        "model_type": "exaone_moe",
        "moe_intermediate_size": 32,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "sliding_window": 8,
        "sliding_window_pattern": 2,
    },
    {
        **{k: v for k, v in HUNYUAN.items() if k != "intermediate_size"},
        "model_type": "solar_open",
        "attention_bias": True,
        "moe_intermediate_size": 32,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
    },
    {
        **HUNYUAN,
        "model_type": "stablelm",
        "head_dim": None,
        "use_qkv_bias": True,
        "use_parallel_residual": True,
    },
    {**HUNYUAN, "model_type": "phi", "head_dim": None, "num_key_value_heads": 4},
    {**HUNYUAN, "model_type": "minicpm3", "num_key_value_heads": 4, **MLA},
    {**HUNYUAN, "model_type": "youtu", "num_key_value_heads": 4, **MLA},
    {
        **HUNYUAN,
        "model_type": "kimi_k2",
        "num_key_value_heads": 4,
        **MLA,
        "moe_intermediate_size": 32,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
    },
    BIGCODE,
    {**HUNYUAN, "model_type": "granitemoe", "num_local_experts": 4, "num_experts_per_tok": 2},
    {
        **HUNYUAN,
        "model_type": "granitemoeshared",
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "shared_intermediate_size": 48,
    },
    {
        **HUNYUAN,
        "model_type": "dots1",
        "moe_intermediate_size": 32,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "sliding_window": 8,
        "max_window_layers": 1,
    },
    {**HUNYUAN, "model_type": "qwen3_5_text", **LINEAR},
    {**HUNYUAN, "model_type": "qwen3_5_moe_text", **LINEAR, **QWEN_EXPERTS},
    {**HUNYUAN, "model_type": "qwen3_next", **LINEAR, **QWEN_EXPERTS},
    {**HUNYUAN, "model_type": "granitemoehybrid", **MAMBA, "num_local_experts": 0},
    {**HUNYUAN, "model_type": "granitemoehybrid", **MAMBA, "num_local_experts": 4, "num_experts_per_tok": 2},
    {
        **HUNYUAN,
        "model_type": "granitemoehybrid",
        "num_local_experts": 0,
        "position_embedding_type": "rope",
        "layer_types": ["attention", "attention"],
    },
    {
        **HUNYUAN,
        "model_type": "bamba",
        **{k: v for k, v in MAMBA.items() if k not in ("layer_types", "shared_intermediate_size")},
        "attn_layer_indices": [1],
        "mlp_bias": True,
    },
    {
        **{k: v for k, v in HUNYUAN.items() if k != "head_dim"},
        "model_type": "lfm2",
        "block_ff_dim": 144,
        "conv_bias": True,
        "layer_types": ["conv", "full_attention"],
    },
    # Nemotron-H: Mamba-2, attention and MLP blocks, one mixer without an MLP after it; experts
    {**HUNYUAN, **NEMOTRON_H, "hybrid_override_pattern": "M-*-M"},
    {
        **HUNYUAN,
        **NEMOTRON_H,
        "layers_block_type": ["linear_attention", "moe", "full_attention", "moe", "full_attention"],
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "moe_shared_expert_intermediate_size": 48,
    },
]


@pytest.mark.parametrize("config", TINY_FAMILIES, ids=lambda c: c["model_type"])
def test_families_without_a_library_model_build_count_and_step_on_the_cpu(config: dict) -> None:
    """Families without a bundled config (`fitbench models`): a tiny one of each published layout
    (Hunyuan-A13B: per-layer top-k lists; dots.llm1: windowed last layers) builds through its
    own transformers class with the estimator's count, and trains and generates."""
    config = {k: v for k, v in config.items() if v is not None}
    for overrides in GENERATE_AND_TRAIN:
        workload = workload_from_data(
            config, name=f"tiny-{config['model_type']}", source="test", precision="fp32", **overrides
        )
        model, _ = build_model(workload, device="meta")
        built = FAMILIES[config["model_type"]][0]  # Kimi K2: DeepSeek-V3's class
        assert type(model.config).model_type == built
        _step_on_the_cpu(workload)


def test_sliding_layers_keep_the_counted_number_in_the_family_pattern() -> None:
    arch = library.workload_for_model("gemma-3-1b-it").arch
    types = layer_types(arch, 6)
    assert types is not None and types.count("sliding_attention") == arch.sliding_layers
    assert types[5] == "full_attention" and types[0] == "sliding_attention"
    model, _ = build_model(library.workload_for_model("gemma-2-2b-it"), device="meta")
    gemma2 = library.workload_for_model("gemma-2-2b-it").arch
    assert model.config.layer_types.count("sliding_attention") == gemma2.sliding_layers


def test_gemma2_runs_eager_attention_and_the_estimate_says_so() -> None:
    workload = library.workload_for_model("gemma-2-2b-it")
    assert workload.attention == "fused"
    assert attention_as_run(workload) == "eager" and attention_impl(workload) == "eager"
    assert workload_as_run(workload, "default", None).attention == "eager"
    assert attention_as_run(workload, "paddle") == "fused"
    from fitbench.catalog import get_gpu
    from fitbench.estimate.api import estimate

    lines = estimate(workload, get_gpu("h200")).assumptions
    assert any(line.startswith("attention: eager where fused was asked") for line in lines)
    qwen3 = library.workload_for_model("qwen3-0.6b")
    assert attention_impl(qwen3) == "sdpa" and workload_as_run(qwen3, "default", None) is qwen3


def test_gpt_j_asks_for_sdpa_only_where_the_installed_transformers_builds_it() -> None:
    """transformers builds GPT-J with SDPA from 5.24 on (5.17-5.23 raise when asked): the torch
    backend asks for what the installed release builds, and the model builds with it."""
    from fitbench.estimate.execution import transformers_lacks_sdpa

    workload = tiny_workload("gpt-j-6b", mode="infer", batch_size=1, prompt_tokens=8, new_tokens=2)
    arch = workload.arch
    assert transformers_lacks_sdpa(arch, "5.17.0") and transformers_lacks_sdpa(arch, "5.23.1")
    assert not transformers_lacks_sdpa(arch, "5.24.0") and not transformers_lacks_sdpa(arch, None)
    installed = transformers_lacks_sdpa(arch, transformers.__version__)
    assert attention_impl(workload) == ("eager" if installed else "sdpa")
    _, notes = build_model(workload, device="cpu", dtype=torch.float32)
    assert notes["attn_implementation"] == attention_impl(workload)


@pytest.mark.parametrize(
    "name",
    [
        "qwen3-0.6b",
        "gemma-2-2b-it",
        "gemma-3-1b-it",
        "olmo-7b",
        "olmo-2-7b",
        "olmo-3-7b",
        "exaone-4.0-32b",
        "seed-oss-36b-instruct",
        "phi-3-mini-4k-instruct",
        "gpt-neox-20b",
        "falcon-7b",
        "gpt-j-6b",
        "starcoder2-15b",
        "c4ai-command-r7b-12-2024",
    ],
)
@pytest.mark.parametrize("targets", ["attention", "attention-mlp"])
def test_lora_adapters_on_the_dense_families_match_the_estimate(name: str, targets: str) -> None:
    pytest.importorskip("peft")
    from fitbench.backends.torch.peft_support import apply_lora
    from fitbench.estimate import peft

    workload = tiny_workload(
        name, mode="train", batch_size=2, seq_len=16, peft="lora", lora_rank=4, lora_targets=targets
    )
    model, _ = build_model(workload, device="cpu", dtype=torch.float32)
    model = apply_lora(model, workload)
    assert model.get_nb_trainable_parameters()[0] == peft.trainable_param_count(workload)


LORA_TYPES = (
    "arcee",
    "nemotron",
    "jais2",
    "apertus",
    "ministral",
    "ministral3",
    "stablelm",
    "phi",
    "minicpm3",
    "youtu",
    "granitemoe",
    "granitemoeshared",
)
LORA_FAMILIES = [c for c in TINY_FAMILIES if c["model_type"] in LORA_TYPES]
LORA_FAMILIES += [BIGCODE, {**BIGCODE, "multi_query": False}]


@pytest.mark.parametrize(
    "config", LORA_FAMILIES, ids=lambda c: f"{c['model_type']}-{c.get('multi_query', 1)}"
)
@pytest.mark.parametrize("targets", ["attention", "attention-mlp"])
def test_lora_on_new_families_matches_the_estimate(config: dict, targets: str) -> None:
    """peft finds each new family's Linears by peft_support's names (Phi's attention `dense`, the
    two-matrix MLPs' up/down, GPT-BigCode's fused c_attn), adapts as many as the estimate counts,
    and a LoRA step trains on the CPU."""
    pytest.importorskip("peft")
    from fitbench.backends.torch.peft_support import apply_lora
    from fitbench.estimate import peft

    config = {k: v for k, v in config.items() if v is not None}
    workload = workload_from_data(
        config,
        name="tiny",
        source="test",
        precision="fp32",
        mode="train",
        batch_size=2,
        seq_len=16,
        peft="lora",
        lora_rank=4,
        lora_targets=targets,
    )
    model, _ = build_model(workload, device="cpu", dtype=torch.float32)
    model = apply_lora(model, workload)
    assert model.get_nb_trainable_parameters()[0] == peft.trainable_param_count(workload)
    _step_on_the_cpu(workload)


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("qwen3-0.6b", "query/key norms"),
        ("olmoe-1b-7b", "experts"),
        ("deepseek-v2-lite-chat", "latent attention"),
    ],
)
def test_tuned_generation_refuses_blocks_it_does_not_implement(name: str, what: str) -> None:
    workload = tiny_workload(name, mode="infer", batch_size=1, prompt_tokens=8, new_tokens=2)
    with pytest.raises(FitbenchError, match=what) as err:
        get_backend("torch").open(workload, RunOptions(device="cpu", exec_mode="tuned"))
    assert "--exec default" in err.value.hint


def test_tuned_generation_refuses_sequences_longer_than_the_window() -> None:
    config = {**tiny_config("mistral-7b-v0.1")}
    workload = workload_from_data(
        config, name="tiny", source="test", precision="fp32", batch_size=1, prompt_tokens=20, new_tokens=8
    )
    with pytest.raises(FitbenchError, match="sliding-window"):
        get_backend("torch").open(workload, RunOptions(device="cpu", exec_mode="tuned"))
    short = workload.replace(prompt_tokens=10, new_tokens=4)
    session = get_backend("torch").open(short, RunOptions(device="cpu", exec_mode="tuned"))
    session.close()


def test_a_tuned_generation_estimate_says_the_run_refuses_the_model() -> None:
    from fitbench.catalog import get_gpu
    from fitbench.estimate.api import estimate

    gpu = get_gpu("h200")
    moe = library.workload_for_model("olmoe-1b-7b").replace(mode="infer", batch_size=1)
    lines = estimate(moe, gpu, exec_mode="tuned").assumptions
    assert any("refuses this one (experts, query/key norms)" in line for line in lines)
    gpt = library.workload_for_model("starcoder").replace(mode="infer", batch_size=1)
    lines = estimate(gpt, gpu, exec_mode="tuned").assumptions
    assert any("a two-matrix MLP, layernorm norms, learned positions" in line for line in lines)
    dense = library.workload_for_model("qwen2.5-0.5b-instruct").replace(mode="infer", batch_size=1)
    assert not any("refuses" in line for line in estimate(dense, gpu, exec_mode="tuned").assumptions)


def test_a_layout_the_family_cannot_express_is_one_clear_error_in_both_languages() -> None:
    import dataclasses

    arch = library.workload_for_model("qwen3-0.6b").arch
    workload = library.workload_for_model("qwen3-0.6b").replace(arch=dataclasses.replace(arch, mlp_bias=True))
    with pytest.raises(FitbenchError) as err:
        build_model(workload, device="meta")
    assert "cannot build this qwen3 decoder (biases Qwen3 does not have)" in err.value.message
    assert "Qwen3 没有的偏置" in err.value.message_zh


@pytest.mark.parametrize(
    ("name", "attention"),
    [
        ("gemma-2-2b-it", "eager (transformers has no SDPA for this model)"),
        ("falcon-7b", "sdpa with transformers' mask (its attention calls SDPA itself"),
        ("qwen3-0.6b", "causal sdpa without a mask"),
    ],
)
def test_tuned_training_builds_each_family_with_the_attention_it_has(name: str, attention: str) -> None:
    workload = tiny_workload(name, mode="train", batch_size=2, seq_len=16, precision="amp-bf16")
    session = get_backend("torch").open(workload, RunOptions(device="cpu", exec_mode="tuned"))
    try:
        assert session.notes["attention"].startswith(attention)
        session.step()
        session.sync()
    finally:
        session.close()


@pytest.mark.parametrize(
    "name", ["gpt-neox-20b", "falcon-7b", "gpt-j-6b", "starcoder2-15b", "c4ai-command-r7b-12-2024"]
)
def test_lora_trains_the_families_with_their_own_module_names(name: str) -> None:
    """peft finds their Linears by the names peft_support lists (fused query_key_value for
    GPT-NeoX and Falcon), and a LoRA step runs on the CPU."""
    pytest.importorskip("peft")
    workload = tiny_workload(name, mode="train", batch_size=2, seq_len=16, peft="lora", lora_rank=4)
    session = get_backend("torch").open(workload, RunOptions(device="cpu"))
    try:
        session.step()
        session.sync()
    finally:
        session.close()
