"""benchmarks/decode_context.py on a CPU: a real tiny-layer model's generate, timed at two
contexts from one prompt, and one decode step's kernels and host operators by difference."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import decode_context

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def test_two_contexts_and_a_profiled_step(tmp_path: Path) -> None:
    out = tmp_path / "dc.json"
    argv = ["qwen3-0.6b:2:16,48", "--device", "cpu", "--layers", "1", "--new-tokens", "3"]
    assert decode_context.main([*argv, "--repeats", "1", "--gpu", "h100-sxm", "--json", str(out)]) == 0
    (case,) = json.loads(out.read_text())["cases"]
    assert [r["context"] for r in case["rows"]] == [16, 48]
    assert case["workload"]["arch"]["num_layers"] == 1 and case["workload"]["batch_size"] == 2
    for row in case["rows"]:
        assert row["one_token_seconds"] > 0
        assert row["estimate"]["seconds"] >= row["estimate"]["gpu_seconds"] > 0
    # on a CPU there are no device kernels; the host operators of one step are the difference of
    # two generate calls, and the layer's matrix products are among them
    profile = case["profile"]
    assert profile["context"] == 48 and profile["kernel_us_total"] == 0
    assert any(name in profile["host_us_per_step"] for name in ("aten::mm", "aten::linear", "aten::addmm"))


def test_a_malformed_case_is_one_clear_line() -> None:
    with pytest.raises(SystemExit, match="MODEL:BATCH:CTX"):
        decode_context.parse_case("qwen3-0.6b:2")
