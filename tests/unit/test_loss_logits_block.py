"""The language-model loss's memory: three FP32 [tokens, vocab] blocks allocated at its backward,
and the freed 16-bit logits cached beside them (transformer_cost.loss_logits_cached_bytes).

benchmarks/training_replay.py traces the step on the meta device (tests/backends/
test_training_replay.py: three FP32 logits blocks at the peak, no 16-bit one). Here: the estimate
counts the same, on a model whose logits are nearly all of its step."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.estimate.transformer_cost import loss_logits_cached_bytes
from fitbench.workloads import library

BATCH, SEQ, VOCAB = 2, 4096, 262_144


def _logits_heavy(precision: str, **changes: object):
    """Qwen3-0.6B cut to one narrow block under a Gemma-3-sized vocabulary: the loss's blocks are
    gigabytes, everything else megabytes."""
    w = library.workload_for_model("qwen3-0.6b", weights="none")
    arch = dataclasses.replace(w.arch, num_layers=1, hidden_size=64, intermediate_size=128, vocab_size=VOCAB)
    return w.replace(arch=arch, mode="train", batch_size=BATCH, seq_len=SEQ, precision=precision, **changes)


@pytest.mark.parametrize("peft", [None, "lora"])
def test_the_backward_allocates_three_fp32_logits_blocks(peft: str | None) -> None:
    w = _logits_heavy("bf16", peft=peft)
    est = estimate(w, get_gpu("h100-sxm"))
    logits = BATCH * SEQ * VOCAB
    parts = est.breakdown
    fixed = sum(parts[k] for k in ("weights", "optimizer_state", "workspace", "cuda_context") if k in parts)
    allocated = est.required_memory_bytes - fixed
    assert allocated == pytest.approx(3 * 4 * logits, rel=0.03)


@pytest.mark.parametrize("precision", ["bf16", "amp-bf16", "fp16"])
def test_the_freed_16_bit_logits_stay_cached_beside_them(precision: str) -> None:
    """Counted in the fragmentation part (what nvidia-smi shows), not in what must fit, where the
    step is not replayed through the allocator (accumulation here; full and LoRA training replay
    it: test_full_training_replays_the_loss_s_blocks)."""
    w = _logits_heavy(precision, peft="lora", grad_accum=2)
    est = estimate(w, get_gpu("h100-sxm"))
    block = BATCH * SEQ * VOCAB * 2
    assert loss_logits_cached_bytes(w) == block
    assert est.memory.details["loss_logits_block"] == block
    assert est.peak_memory_bytes - est.required_memory_bytes >= block
    assert est.to_dict()["loss_logits_cached_bytes"] == block


def test_fp32_logits_need_no_copy_and_leave_no_block() -> None:
    w = _logits_heavy("fp32")
    assert loss_logits_cached_bytes(w) == 0
    assert estimate(w, get_gpu("h100-sxm")).to_dict()["loss_logits_cached_bytes"] is None


def test_no_block_outside_a_decoder_s_eager_training_step() -> None:
    w = _logits_heavy("bf16")
    assert loss_logits_cached_bytes(w, compiled=True) == 0  # the compiled head keeps 16-bit logits
    assert loss_logits_cached_bytes(w.replace(mode="infer")) == 0
    encoder = library.workload_for_model("bert-base-uncased", weights="none").replace(
        mode="train", precision="bf16"
    )
    assert loss_logits_cached_bytes(encoder) == 0


def test_full_training_replays_the_loss_s_blocks() -> None:
    """Full training lays the loss's blocks out in the first two steps' replay (first_step.py):
    the reserve holds the three FP32 blocks and the 16-bit one, the JSON names no separate block."""
    w = _logits_heavy("bf16")
    est = estimate(w, get_gpu("h100-sxm"))
    logits = BATCH * SEQ * VOCAB
    assert est.to_dict()["loss_logits_cached_bytes"] is None
    fixed = sum(est.breakdown[k] for k in ("weights", "workspace", "cuda_context"))
    assert est.peak_memory_bytes - fixed >= (3 * 4 + 2) * logits
