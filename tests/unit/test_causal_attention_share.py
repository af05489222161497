"""Causal fused attention's share of the peak by sequence length, held to its measurement.

Pure estimator code (no framework import). benchmarks/results/sdpa-seq-sweep-h100-2026-12-06.json
holds SDPA's default kernel (forward and backward, causal, 32 query heads over 8 key/value heads)
on an H100 from seq 512 to 16,384 at head dimensions 64 and 128 (benchmarks/sdpa_backends.py
--seq-sweep); the profile's three causal_attention_* constants are read from it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import speed, transformer_cost
from fitbench.estimate.profile import get_profile
from fitbench.workloads import library

SWEEP = Path(__file__).parents[2] / "benchmarks" / "results" / "sdpa-seq-sweep-h100-2026-12-06.json"
H100 = get_gpu("h100-sxm")
DEFAULT = get_profile("torch", "default", use_user=False)
TUNED = get_profile("torch", "tuned", use_user=False)
LLAMA_1B = library.workload_for_model(
    "llama-3.2-1b-instruct", mode="train", precision="amp-bf16", batch_size=1
)
QWEN3_8B = library.workload_for_model("qwen3-8b", mode="train", precision="bf16", batch_size=1)


def _by_head_dim(head_dim: int):
    return LLAMA_1B if head_dim == 64 else QWEN3_8B


def _attention(workload, seq: int, **kwargs) -> transformer_cost.Kernel:
    kernels = transformer_cost.forward_kernels(workload, workload.batch_size, seq, **kwargs)
    return next(k for k in kernels if k.kind == "attention")


@pytest.mark.parametrize("row", json.loads(SWEEP.read_text())["rows"], ids=lambda r: r["shape"])
def test_the_share_meets_the_measured_sweep(row: dict) -> None:
    """Each measured rate within 6 % of the profile's curve on the H100 it was measured on."""
    workload = _by_head_dim(row["head_dim"])
    head_dim = workload.arch.head_dim or workload.arch.hidden_size // workload.arch.num_heads
    assert head_dim == row["head_dim"]
    share = speed.causal_attention_share(DEFAULT, workload, row["seq"]) * speed.gemm_rate_factor(H100, "bf16")
    modeled = share * H100.peak("bf16") / 1e12
    assert modeled == pytest.approx(row["backends"]["default"]["tflops"], rel=0.06)


def test_the_reference_sequence_keeps_the_calibrated_share() -> None:
    """attention_efficiency keeps its meaning (the share at the reference sequence and head_dim
    128), so calibration still moves causal attention; longer rows reach more, shorter less."""
    ref = int(DEFAULT.causal_attention_reference_keys)
    assert speed.causal_attention_share(DEFAULT, QWEN3_8B, ref) == pytest.approx(DEFAULT.attention_efficiency)
    shares = [speed.causal_attention_share(DEFAULT, QWEN3_8B, s) for s in (512, 2048, 8192, 32768)]
    assert shares == sorted(shares) and shares[0] < DEFAULT.attention_efficiency < shares[-1]
    calibrated = dataclasses.replace(DEFAULT, attention_efficiency=1.5 * DEFAULT.attention_efficiency)
    assert speed.causal_attention_share(calibrated, QWEN3_8B, 8192) == pytest.approx(1.5 * shares[2])
    # a share calibrated that high never passes the peak on the longest rows
    unreal = dataclasses.replace(DEFAULT, attention_efficiency=0.9)
    assert speed.causal_attention_share(unreal, QWEN3_8B, 65536) == 1.0
    assert TUNED.causal_attention_overhead_keys == DEFAULT.causal_attention_overhead_keys


def test_only_causal_fused_kernels_over_a_sequence_carry_it() -> None:
    """The prefill's and training step's SDPA kernels carry their sequence; a decode step's,
    eager attention's, an encoder's and a window-masked one's do not."""
    assert _attention(LLAMA_1B, 4096).attended_keys == 4096
    assert _attention(LLAMA_1B, 1, kv_len=4096).attended_keys == 0
    assert _attention(LLAMA_1B.replace(attention="eager"), 4096).attended_keys == 0
    bert = library.workload_for_model("bert-base-uncased", mode="train", batch_size=1)
    assert _attention(bert, 512).attended_keys == 0
    gemma = library.workload_for_model("gemma-3-4b-it", mode="infer", batch_size=1)
    window = gemma.arch.sliding_window
    assert _attention(gemma, window // 2).attended_keys == window // 2
    assert _attention(gemma, 4 * window).attended_keys == 0  # the window's mask is materialised


def test_long_sequences_train_faster_than_the_flat_share_said() -> None:
    """Llama-3.2-1B at 8k tokens: the step with the sequence's share is shorter than with the
    flat one (measured 255 ms on an H100 where the flat share said 304), and FP32 steps, whose
    attention runs on the CUDA cores, keep the flat share."""
    at_8k = LLAMA_1B.replace(seq_len=8192)
    flat = dataclasses.replace(DEFAULT, causal_attention_overhead_keys=0.0)

    def step(workload, profile) -> float:
        return speed.training_step(workload, H100, profile).seconds

    assert step(at_8k, DEFAULT) < 0.96 * step(at_8k, flat)
    fp32 = at_8k.replace(precision="fp32")
    assert step(fp32, DEFAULT) == step(fp32, flat)
