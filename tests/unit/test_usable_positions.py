"""The longest sequence a learned-position encoder takes: RoBERTa's family numbers positions from
pad_token_id + 1, so roberta-base's 514 position embeddings hold 512 tokens, BERT's 512 hold 512.

The truth is transformers' own: tiny configs written by transformers are built into real models
and fed the longest accepted sequence and one token more; fitbench's limit must be the same.
The bundled roberta-base goes through the real CLI, in English and Chinese.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fitbench
from fitbench.errors import FitbenchError
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.hf_config import arch_from_hf_config, workload_from_config

SRC_DIR = Path(fitbench.__file__).resolve().parents[1]
TINY = {
    "vocab_size": 101,
    "hidden_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "intermediate_size": 48,
    "max_position_embeddings": 42,
}
# model_type -> tokens its 42 rows hold (pad_token_id 1 in the RoBERTa family's config classes)
USABLE = {"bert": 42, "electra": 42, "roberta": 40, "xlm-roberta": 40, "camembert": 40}


def _fitbench(*argv: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR), "FITBENCH_HOME": str(home), "LANG": "C.UTF-8"}
    return subprocess.run(
        [sys.executable, "-m", "fitbench", *argv], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize("model_type", sorted(USABLE))
def test_the_limit_is_the_sequence_transformers_accepts(tmp_path: Path, model_type: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(model_type, **TINY)
    config.save_pretrained(tmp_path)  # the file as transformers writes it, pad_token_id included
    model = transformers.AutoModel.from_config(config).eval()
    usable = USABLE[model_type]

    def accepted(tokens: int) -> bool:
        ids = torch.full((1, tokens), 5)  # no padding token: every position is used
        try:
            with torch.no_grad():
                model(input_ids=ids)
        except (IndexError, RuntimeError):  # no position row for the last token
            return False
        return True

    assert accepted(usable) and not accepted(usable + 1)
    w = workload_from_config(tmp_path, seq_len=usable)
    assert isinstance(w.arch, TransformerArch)
    assert (w.arch.max_positions, w.arch.usable_positions) == (42, usable)
    assert workload_from_config(tmp_path).seq_len == usable  # the default never exceeds it
    with pytest.raises(FitbenchError) as exc:
        workload_from_config(tmp_path, seq_len=usable + 1)
    assert f"longer than the model's {usable} positions" in exc.value.message
    assert f"--seq-len {usable} or less" in (exc.value.hint or "")
    assert f"超过了模型的 {usable} 个位置" in (exc.value.message_zh or "")
    assert f"不超过 {usable} 的 --seq-len" in (exc.value.hint_zh or "")


def test_the_offset_follows_pad_token_id_and_keeps_every_row_counted() -> None:
    base = {**TINY, "model_type": "roberta"}
    default = arch_from_hf_config(base)  # the bundled file leaves pad_token_id out: RobertaConfig's 1
    zero = arch_from_hf_config({**base, "pad_token_id": 0})
    assert isinstance(default, TransformerArch) and isinstance(zero, TransformerArch)
    assert (default.position_offset, default.usable_positions) == (2, 40)
    assert (zero.position_offset, zero.usable_positions) == (1, 41)
    assert default.param_count() == zero.param_count()  # the table keeps its 42 rows
    bert = arch_from_hf_config({**base, "model_type": "bert", "pad_token_id": 1})
    assert isinstance(bert, TransformerArch) and bert.usable_positions == 42
    with pytest.raises(FitbenchError, match="leaves none of the 42 positions"):
        arch_from_hf_config({**base, "pad_token_id": 41})


def test_roberta_base_through_the_cli(tmp_path: Path) -> None:
    ok = _fitbench("estimate", "roberta-base", "--seq-len", "512", "--gpu", "h100", "--json", home=tmp_path)
    assert ok.returncode == 0, ok.stderr
    (estimate,) = json.loads(ok.stdout)["estimates"]
    assert (estimate["seq_len"], estimate["max_context_tokens"]) == (512, 512)

    for lang, names in (
        ("en", ("longer than the model's 512 positions", "use --seq-len 512 or less")),
        ("zh", ("超过了模型的 512 个位置", "请使用不超过 512 的 --seq-len")),
    ):
        bad = _fitbench("estimate", "roberta-base", "--seq-len", "513", "--lang", lang, home=tmp_path)
        assert bad.returncode == 2 and bad.stdout == ""
        (line,) = bad.stderr.strip().splitlines()
        assert "513" in line and all(n in line for n in names), line
        assert "514" in line  # the config's number, explained beside the usable one


def test_bert_base_keeps_its_512() -> None:
    from fitbench.workloads import library

    w = library.workload_for_model("bert-base-uncased")
    assert isinstance(w.arch, TransformerArch)
    assert (w.arch.max_positions, w.arch.position_offset, w.seq_len) == (512, 0, 512)
    with pytest.raises(FitbenchError) as exc:
        w.replace(seq_len=513)
    assert exc.value.message.endswith("longer than the model's 512 positions")
    assert exc.value.message_zh == "513 个 token 的序列超过了模型的 512 个位置"
