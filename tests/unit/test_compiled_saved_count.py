"""The compiled step's saved-activation count (transformer_cost / peft), term by term, and the
profiles it applies to: torch's tuned profile (fuses_pointwise) only, eager profiles unchanged."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.estimate import peft, transformer_cost
from fitbench.estimate.breakdown import required_bytes
from fitbench.estimate.dtypes import activation_dtypes
from fitbench.estimate.memory import memory_breakdown
from fitbench.estimate.profile import get_profile
from fitbench.workloads.presets import get_workload


def _w(name: str, **kw):
    return get_workload(name, mode="train", precision="amp-bf16", **kw)


def test_llama_block_counts_each_saved_tensor():
    w = _w("llm-6b", batch_size=1, seq_len=512)
    a = w.arch
    dt = activation_dtypes(w, dropout=False)
    h, f, q, kv = a.hidden_size, a.intermediate_size, a.q_dim, a.kv_dim
    expected = (
        2 * (4 * h + 4)  # two RMSNorm inputs (FP32 residual) + rstd
        + 2 * 2 * h  # one bf16 copy for q/k/v, one for gate/up
        + 3 * 2 * f  # gate, up, product (SiLU recomputed)
        + (q + 2 * kv) * 2  # Q, K, V
        + 2 * q * 2  # SDPA output and its contiguous copy
        + a.num_heads * 4  # log-sum-exp
    )
    got = transformer_cost.compiled_layer_saved_bytes_per_token(a, dt, 512, "fused")
    assert got == expected
    assert got < transformer_cost.layer_saved_bytes_per_token(a, dt, 512, "fused")


def test_bert_block_keeps_bool_masks_and_one_qkv_copy():
    w = _w("bert-base-imdb")
    a = w.arch
    dt = activation_dtypes(w, dropout=True)
    eager = transformer_cost.layer_saved_bytes_per_token(a, dt, 512, "fused")
    compiled = transformer_cost.compiled_layer_saved_bytes_per_token(a, dt, 512, "fused")
    # two of three bf16 copies of the q/k/v input fewer; two rstd more
    assert eager - compiled == 2 * 2 * a.hidden_size - 2 * 4


def test_compiled_lm_head_keeps_16_bit_logits():
    w = _w("llm-6b", batch_size=1, seq_len=512)
    dt = activation_dtypes(w, dropout=False)
    saved, transient = transformer_cost.compiled_head_bytes_per_token(w.arch, dt, frozen=False)
    h, v = w.arch.hidden_size, w.arch.vocab_size
    assert saved == 4 * h + 4 + 2 * h + 2 * v + 8
    assert transient == 2 * v
    frozen, _ = transformer_cost.compiled_head_bytes_per_token(w.arch, dt, frozen=True)
    assert saved - frozen == 2 * h


def test_lora_compiled_block_drops_silu_output():
    w = _w("llm-6b", batch_size=1, seq_len=512, peft="lora")
    eager = peft.layer_saved_bytes_per_token(w)
    compiled = peft.layer_saved_bytes_per_token(w, compiled=True)
    # SiLU(gate) (f bf16) recomputed; two rstd kept
    assert eager - compiled == 2 * w.arch.intermediate_size - 2 * 4


@pytest.mark.parametrize("name,kw", [("bert-base-imdb", {}), ("llm-6b", {"batch_size": 8, "seq_len": 2048})])
def test_only_the_compiling_profile_moves(name, kw):
    w = _w(name, **kw)
    tuned, default = get_profile("torch", "tuned", use_user=False), get_profile("torch", use_user=False)
    assert tuned.fuses_pointwise and not default.fuses_pointwise
    # what the step needs (the allocator's cached reserve left out: the compiled step's capture
    # warm-up reserves more of it, Profile.capture_warmup_share)
    compiled_peak = required_bytes(memory_breakdown(w, tuned))
    eager_as_tuned = required_bytes(memory_breakdown(w, dataclasses.replace(tuned, fuses_pointwise=False)))
    assert compiled_peak < eager_as_tuned
    assert not transformer_cost.compiled_step(w, default)
    assert not transformer_cost.compiled_step(w.replace(mode="infer"), tuned)
    assert not transformer_cost.compiled_step(get_workload("resnet50-cifar10", precision="amp-bf16"), tuned)
