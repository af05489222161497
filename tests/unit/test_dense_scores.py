"""transformer_cost.dense_score_factor: eager attention and SDPA given a materialised mask compute
the whole seq x seq score square; causal flash computes the counted half (and a window's band)."""

from __future__ import annotations

import pytest

from fitbench.estimate.transformer_cost import dense_score_factor, forward_kernels
from fitbench.workloads.hf_config import workload_from_data

MISTRAL = {
    "model_type": "mistral",
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 2816,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
}
BERT = {
    "model_type": "bert",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 1024,
    "vocab_size": 30522,
    "max_position_embeddings": 512,
}


def prefill(config: dict, prompt: int, attention: str = "fused"):
    return workload_from_data(
        config,
        name="m",
        source="test",
        mode="infer",
        precision="bf16",
        batch_size=2,
        prompt_tokens=prompt,
        new_tokens=8,
        attention=attention,
    )


def test_causal_flash_computes_what_is_counted() -> None:
    assert dense_score_factor(prefill(MISTRAL, 4096), 4096) == 1.0
    # a window the prompt does not outgrow: no mask is built
    assert dense_score_factor(prefill({**MISTRAL, "sliding_window": 4096}, 2048), 2048) == 1.0


def test_eager_decoder_computes_the_whole_square() -> None:
    assert dense_score_factor(prefill(MISTRAL, 1024, "eager"), 1024) == pytest.approx(2.0)


def test_an_outgrown_window_is_a_masked_dense_square() -> None:
    w = prefill({**MISTRAL, "sliding_window": 1024}, 4096)
    # counted: half of the 1024-token band; computed: all 4096 keys for every query
    assert dense_score_factor(w, 4096) == pytest.approx(4096 / (0.5 * 1024))
    flash = forward_kernels(prefill(MISTRAL, 4096), 2, 4096)
    masked = forward_kernels(w, 2, 4096)
    attn = {k.name: k.flops for k in flash}["attention"], {k.name: k.flops for k in masked}["attention"]
    assert attn[1] == pytest.approx(2 * attn[0])  # the full square against causal flash's half


def test_an_encoder_counts_its_full_square_already() -> None:
    w = workload_from_data(
        BERT,
        name="b",
        source="test",
        mode="infer",
        precision="fp32",
        batch_size=2,
        seq_len=128,
        attention="eager",
    )
    assert dense_score_factor(w, 128) == 1.0
