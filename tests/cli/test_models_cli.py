"""`fitbench models`, a model name where a preset goes, local model folders, and hostile inputs
through the CLI: one line, non-zero exit."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from fitbench.cli.main import main


def test_models_lists_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 30
    mixtral = next(r for r in rows if r["name"] == "mixtral-8x7b-instruct")
    assert mixtral["active_params"] < mixtral["params"]


def test_models_filter_and_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "qwen3"]) == 0
    assert "qwen3-30b-a3b" in capsys.readouterr().out
    assert main(["models", "qwen9"]) != 0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "did you mean" in err


def test_families_lists_every_model_type_read_by_kind(capsys: pytest.CaptureFixture[str]) -> None:
    from fitbench.workloads.hf_config import SUPPORTED_MODEL_TYPES

    assert main(["models", "--families", "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)
    listed = [t for types in groups.values() for t in types]
    assert set(listed) == set(SUPPORTED_MODEL_TYPES)
    assert {"dots1", "granitemoe", "kimi_k2"} <= set(groups["moe"]) and "phi" in groups["decoder"]
    assert main(["--lang", "zh", "models", "--families"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("编码器:") and "混合专家:" in out and "dots1" in out


def test_estimate_a_bundled_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "qwen2.5-7b-instruct", "--gpu", "rtx-4090", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)["estimates"][0]
    assert est["workload"] == "qwen2.5-7b-instruct" and est["prompt_tokens"] and est["new_tokens"]
    assert est["params"] == est["active_params"] == 7_615_616_512
    assert main(["estimate", "qwen2.5-7b-instruct", "--gpu", "h200", "--mode", "train", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["estimates"][0]["mode"] == "train"


def test_unknown_model_names_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "mixtrl-8x7b-instruct", "--gpu", "h200"]) != 0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "mixtral-8x7b-instruct" in err


def _folder(tmp_path: Path, safetensors: bytes | None) -> Path:
    config = {
        "model_type": "qwen2",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 96,
        "vocab_size": 100,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    if safetensors is not None:
        (tmp_path / "model.safetensors").write_bytes(safetensors)
    return tmp_path


def test_folder_checkpoint_bytes_are_the_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header = json.dumps(
        {
            "w": {"dtype": "BF16", "shape": [1000], "data_offsets": [0, 2000]},
            "q": {"dtype": "I32", "shape": [10], "data_offsets": [2000, 2040]},
        }
    ).encode()
    folder = _folder(tmp_path, struct.pack("<Q", len(header)) + header + b"\0" * 2040)
    assert main(["estimate", "--config", str(folder), "--gpu", "h200", "--precision", "fp16", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)["estimates"][0]
    assert est["breakdown"]["weights"] == 2040
    assert any("safetensors headers" in a for a in est["assumptions"])


@pytest.mark.parametrize(
    "content",
    [
        b"\1\2",
        struct.pack("<Q", 999) + b"{}",
        struct.pack("<Q", 2) + b"{}" + b"",
        struct.pack("<Q", 9) + b'{"a": 1}x',
    ],
)
def test_damaged_checkpoints_are_one_line(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path, content)
    rc = main(["estimate", "--config", str(folder), "--gpu", "h200"])
    err = capsys.readouterr().err
    if content == struct.pack("<Q", 2) + b"{}":
        assert rc == 0  # an empty but valid header: no tensors, the count decides
        return
    assert rc != 0 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "config",
    [
        {
            "model_type": "mixtral",
            "hidden_size": 64,
            "num_hidden_layers": 10**6,
            "num_attention_heads": 4,
            "intermediate_size": 96,
            "vocab_size": 100,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        },
        {
            "model_type": "deepseek_v3",
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 96,
            "vocab_size": 100,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": -3,
            "kv_lora_rank": 16,
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 8,
            "v_head_dim": 8,
        },
        {
            "model_type": "gemma2",
            "hidden_size": "64",
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 96,
            "vocab_size": 100,
        },
        {"model_type": "vit", "hidden_size": 768},  # the other sizes missing
        {
            "model_type": "vit",
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 96,
            "image_size": 8,
            "patch_size": 16,
        },
    ],
)
def test_hostile_configs_are_one_line(
    tmp_path: Path, config: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["estimate", "--config", str(tmp_path), "--gpu", "h200"]) != 0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_every_family_with_a_reader_is_listed() -> None:
    """A family hf_config reads is one `fitbench models --families` names (reader keys spell
    model types with dashes)."""
    from fitbench.workloads.hf_config import _READERS, SUPPORTED_MODEL_TYPES

    listed = {t.replace("_", "-") for t in SUPPORTED_MODEL_TYPES}
    assert {"granitemoehybrid", "bamba"} <= listed
    assert set(_READERS) <= listed
