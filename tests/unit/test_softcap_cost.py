"""Gemma-2 soft-caps its attention scores and its logits, cap * tanh(x / cap): three pointwise
passes over each tensor, which the estimate counts where transformers runs them (its eager
attention, the only one it has for Gemma-2, and the LM head's logits)."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.estimate import transformer_cost
from fitbench.estimate.dtypes import activation_dtypes
from fitbench.workloads import library


def _kernels(workload):
    return {
        k.name: k for k in transformer_cost.forward_kernels(workload, workload.batch_size, workload.seq_len)
    }


def test_softcapping_adds_three_passes_over_the_scores_and_the_logits() -> None:
    gemma = library.workload_for_model("gemma-2-2b-it").replace(
        mode="train", precision="bf16", batch_size=2, seq_len=512, attention="eager"
    )
    plain = gemma.replace(arch=dataclasses.replace(gemma.arch, model_type="gemma"))
    capped, uncapped = _kernels(gemma), _kernels(plain)
    a = activation_dtypes(gemma, dropout=False).act
    scores = 2 * gemma.arch.num_heads * 512 * 512
    extra = capped["attention"].bytes - uncapped["attention"].bytes
    assert extra == pytest.approx(scores * transformer_cost.SOFTCAP_PASSES * a)
    assert capped["attention"].ops == uncapped["attention"].ops + 3
    logits = 2 * 512 * gemma.arch.vocab_size
    assert capped["lm_head"].bytes - uncapped["lm_head"].bytes == pytest.approx(logits * 6 * a)


def test_fused_attention_has_no_score_passes_to_cap() -> None:
    gemma = library.workload_for_model("gemma-2-2b-it").replace(mode="infer", batch_size=1, seq_len=256)
    fused = gemma.replace(attention="fused")
    plain = fused.replace(arch=dataclasses.replace(fused.arch, model_type="gemma"))
    assert _kernels(fused)["attention"].bytes == _kernels(plain)["attention"].bytes
