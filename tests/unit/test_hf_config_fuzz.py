"""Whatever JSON a config file holds, reading it gives a valid architecture or one FitbenchError line.

Arbitrary JSON objects and real configs with keys deleted or values replaced by strings,
negatives, huge integers, floats, nulls and lists go through `arch_from_hf_config`; random
bytes go through `load_hf_config`.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fitbench.errors import FitbenchError
from fitbench.workloads import library
from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.hf_config import (
    SUPPORTED_MODEL_TYPES,
    arch_from_hf_config,
    load_hf_config,
    workload_from_config,
)
from fitbench.workloads.workload import Workload

# The sizing keys of published configs, one per family reader.
BASES: list[dict[str, Any]] = [
    {
        "model_type": "bert",
        "vocab_size": 30522,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
    },
    {
        "model_type": "electra",
        "vocab_size": 30522,
        "embedding_size": 768,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "id2label": {"0": "a", "1": "b", "2": "c"},
    },
    {
        "model_type": "distilbert",
        "vocab_size": 30522,
        "dim": 768,
        "n_layers": 6,
        "n_heads": 12,
        "hidden_dim": 3072,
        "max_position_embeddings": 512,
    },
    {
        "model_type": "llama",
        "vocab_size": 128256,
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "max_position_embeddings": 8192,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
    },
    {
        "model_type": "qwen2",
        "vocab_size": 151936,
        "hidden_size": 896,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "intermediate_size": 4864,
        "tie_word_embeddings": True,
    },
    {
        "model_type": "gemma",
        "vocab_size": 256000,
        "hidden_size": 2048,
        "num_hidden_layers": 18,
        "num_attention_heads": 8,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "intermediate_size": 16384,
    },
    {
        "model_type": "gpt2",
        "vocab_size": 50257,
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "n_positions": 1024,
        "n_inner": None,
    },
    {
        "model_type": "chatglm",
        "padded_vocab_size": 65024,
        "hidden_size": 4096,
        "num_layers": 28,
        "num_attention_heads": 32,
        "multi_query_attention": True,
        "multi_query_group_num": 2,
        "kv_channels": 128,
        "ffn_hidden_size": 13696,
        "add_qkv_bias": True,
        "add_bias_linear": False,
        "rmsnorm": True,
        "seq_length": 32768,
    },
    {
        "model_type": "resnet",
        "depths": [3, 4, 6, 3],
        "hidden_sizes": [256, 512, 1024, 2048],
        "embedding_size": 64,
        "layer_type": "bottleneck",
        "num_channels": 3,
        "num_labels": 1000,
    },
]
# Every bundled model's config (all families: MoE, latent attention, sliding windows) is a base too.
BASES += [dict(m.config) for m in library.models().values()]
KNOWN_KEYS = sorted(
    {k for base in BASES for k in base}
    | {"num_labels", "id2label", "n_inner", "head_dim", "layer_types", "mlp_only_layers", "text_config"}
)

# Values a hand-edited or corrupted config may hold.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["768", "", "bottleneck", "basic", "llama", "NaN", "true"])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5),
    max_leaves=12,
)
weird_values = (
    st.sampled_from(
        [
            -1,
            0,
            1,
            2,
            3,
            4,
            7,
            10**9,
            10**100,
            0.5,
            768.0,
            math.nan,
            math.inf,
            "",
            "768",
            None,
            True,
            False,
            [],
            [1, 2, 3, 4],
            {},
        ]
    )
    | json_values
)


def check(data: Any) -> None:
    """The property: a valid architecture, or a one-line FitbenchError that names the problem."""
    try:
        arch = arch_from_hf_config(data, source="fuzz.json")
    except FitbenchError as exc:
        text = str(exc)
        assert text.startswith("fuzz.json: ")
        assert "\n" not in text and len(text) < 1000
        return
    assert isinstance(arch, TransformerArch | ResNetArch)
    params = arch.param_count()
    assert isinstance(params, int) and params > 0
    assert arch.largest_layer_params() <= params
    if isinstance(arch, TransformerArch):
        assert arch.kind in ("encoder", "decoder") and arch.num_heads % arch.kv_heads == 0
        assert all(
            isinstance(getattr(arch, f), int) and not isinstance(getattr(arch, f), bool)
            for f in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size")
        )


# Mostly the keys and small sizes real configs use, so that many draws get past "missing key"
# and reach the consistency checks (heads dividing the width, GQA groups, ResNet stages).
config_values = st.integers(1, 64) | st.lists(st.integers(1, 64), max_size=5) | weird_values


@settings(max_examples=300, deadline=None)
@given(
    data=st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=10), config_values, max_size=20),
    model_type=st.sampled_from([*SUPPORTED_MODEL_TYPES, "XLM_RoBERTa", "mamba", ""]) | json_scalars,
)
@pytest.mark.slow
def test_arbitrary_json_objects(data: dict[str, Any], model_type: Any) -> None:
    check({**data, "model_type": model_type})


@settings(max_examples=100, deadline=None)
@given(data=json_values)
def test_arbitrary_json_documents(data: Any) -> None:
    check(data)


@st.composite
def mutated_configs(draw: st.DrawFn) -> dict[str, Any]:
    """A real config with a few keys deleted, replaced by odd values, or added."""
    config = dict(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        action = draw(st.sampled_from(["delete", "replace", "replace", "add"]))
        # model_type is mutated rarely: most draws should exercise a family's own reader.
        keys = sorted(k for k in config if k != "model_type" or draw(st.integers(0, 9)) == 0)
        if action == "delete" and keys:
            del config[draw(st.sampled_from(keys))]
        elif action == "replace" and keys:
            config[draw(st.sampled_from(keys))] = draw(weird_values)
        else:
            config[draw(st.sampled_from(KNOWN_KEYS))] = draw(weird_values)
    return config


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(config=mutated_configs())
def test_mutated_real_configs(config: dict[str, Any]) -> None:
    check(config)


@st.composite
def resized_configs(draw: st.DrawFn) -> dict[str, Any]:
    """A real config with every size redrawn small: all keys present, the sizes rarely consistent."""
    config = dict(draw(st.sampled_from(BASES)))
    for key, value in config.items():
        if isinstance(value, int) and not isinstance(value, bool):
            config[key] = draw(st.integers(min_value=0, max_value=64))
        elif isinstance(value, list):
            config[key] = draw(st.lists(st.integers(min_value=0, max_value=64), min_size=3, max_size=5))
        elif isinstance(value, bool):
            config[key] = draw(st.booleans())
    return config


@settings(max_examples=300, deadline=None)
@given(config=resized_configs())
def test_resized_real_configs(config: dict[str, Any]) -> None:
    check(config)


def test_unmutated_bases_are_valid() -> None:
    """The mutation bases themselves parse, so the fuzz starts from configs that work."""
    for base in BASES:
        assert arch_from_hf_config(base).param_count() > 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_arbitrary_file_contents(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.json"
        path.write_bytes(content)
        try:
            arch = load_hf_config(folder)
        except FitbenchError as exc:
            assert "\n" not in str(exc)
        else:
            assert arch.param_count() > 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=mutated_configs() | resized_configs())
def test_workloads_from_odd_config_files(config: dict[str, Any]) -> None:
    """The per-family defaults give a valid Workload for any config that gives a valid arch."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_text(json.dumps(config))
        try:
            workload = workload_from_config(folder)
        except FitbenchError as exc:
            assert "\n" not in str(exc)
            return
    assert isinstance(workload, Workload)
    assert workload.name == Path(folder).name
    assert workload.param_count() > 0
    assert Workload.from_dict(json.loads(json.dumps(workload.to_dict()))) == workload
