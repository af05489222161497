"""benchmarks/lora_gemm.py on a CPU: one tiny shape per dtype, written as JSON, with the estimate's
bytes those of peft_speed.adapter_gemms (forward, and twice that backward)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import lora_gemm
from fitbench.estimate.peft_speed import adapter_gemms

pytestmark = pytest.mark.torch


def test_the_script_times_each_dtype_and_states_the_estimates_bytes(tmp_path: Path) -> None:
    out = tmp_path / "lora-gemm.json"
    assert lora_gemm.main(["--device", "cpu", "--tiny", "--reps", "2", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["dtype"] for r in rows] == ["fp32", "bf16"]
    tiny = lora_gemm.TINY
    (rank,), ((fin, fout),), tokens = tiny["ranks"], tiny["shapes"], tiny["tokens"]
    for row, act in zip(rows, (4.0, 2.0), strict=True):
        assert row["measured_seconds"] > 0 and row["estimated_seconds"] > 0
        forward = sum(k.bytes for k in adapter_gemms("x", fin, fout, rank, tokens, act))
        assert row["estimated_bytes"] == pytest.approx(3 * forward)
