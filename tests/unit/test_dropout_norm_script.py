"""benchmarks/dropout_norm.py: the keep threshold of its 16-bit draws, its byte counts, and a tiny
run on the CPU (nothing is compiled there: what is checked is the wiring and the rows a GPU run
writes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import dropout_norm  # noqa: E402


def test_the_int16_threshold_drops_p_of_the_draws() -> None:
    # Every int16 value once: exactly the values below KEEP_FROM are dropped.
    every = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32)
    dropped = (every < dropout_norm.KEEP_FROM).sum().item() / every.numel()
    assert dropped == pytest.approx(dropout_norm.P, abs=1 / dropout_norm.INT16_SPAN)


def test_a_site_moves_more_bytes_with_its_backward() -> None:
    fwd = dropout_norm.site_bytes(8192, 768, backward=False)
    both = dropout_norm.site_bytes(8192, 768, backward=True)
    # forward: fp32 + bf16 read, fp32 + bf16 written, one mask byte: 13 bytes an element
    assert fwd == 8192 * 768 * 13
    assert both > 2 * fwd


@pytest.mark.slow
def test_a_tiny_cpu_run_writes_every_variant(tmp_path: Path) -> None:
    out = tmp_path / "dn.json"
    assert (
        dropout_norm.main(["--device", "cpu", "--tiny", "--calls", "2", "--replays", "2", "--out", str(out)])
        == 0
    )
    record = json.loads(out.read_text())
    names = [row["variant"] for row in record["rows"]]
    for variant in ("nodrop", "inductor", "bits", "bits+draw"):
        assert f"{variant} forward" in names and f"{variant} forward+backward" in names
    assert "gelu forward+backward" in names and any(n.startswith("draw int16") for n in names)
    assert all(row["seconds"] > 0 and row["bytes"] > 0 for row in record["rows"])
    assert record["shape"]["keep_from"] == dropout_norm.KEEP_FROM


def test_fitbench_s_operator_counts_its_own_bytes() -> None:
    # 16 bytes an element each way (no mask; the FP32 sum for the backward)
    assert dropout_norm.fused_site_bytes(8192, 768, backward=False) == 8192 * 768 * 16
    assert dropout_norm.fused_site_bytes(8192, 768, backward=True) == 8192 * 768 * 32


@pytest.mark.slow
def test_only_fused_times_each_launch_setting_and_puts_the_defaults_back(tmp_path: Path) -> None:
    from fitbench.backends.torch import norm_kernels

    before = (norm_kernels.FORWARD_ROWS, norm_kernels.BACKWARD_ROWS, norm_kernels.BACKWARD_STAGES)
    out = tmp_path / "fused.json"
    argv = ["--device", "cpu", "--tiny", "--calls", "1", "--replays", "1", "--only-fused"]
    assert dropout_norm.main([*argv, "--fused-configs", "2:4:2:8:4:1", "--out", str(out)]) == 0
    names = [row["variant"] for row in json.loads(out.read_text())["rows"]]
    assert "fitbench forward+backward" in names and "fitbench[2:4:2:8:4:1] forward+backward" in names
    assert not any(n.startswith(("inductor", "gelu", "draw")) for n in names)
    assert before == (norm_kernels.FORWARD_ROWS, norm_kernels.BACKWARD_ROWS, norm_kernels.BACKWARD_STAGES)
