"""The activations the estimator counts are what autograd really saves, for full training.

The torch backend's own tiny ResNet, BERT and Llama run one forward on the CPU under
`torch.autograd.graph.saved_tensors_hooks`; every tensor autograd keeps for backward is counted
once per storage (views share one), parameters and buffers excluded. That is compared with the
estimator's saved bytes for the same workload: the segments' `saved_bytes` plus, under AMP, the
autocast weight copies (`cast_params`), which autograd saves as the inputs of the 16-bit
matmuls. AMP runs as bf16 autocast on the CPU.

Tolerances: ResNet 2 % (the per-tensor count is exact but for the loss' few scalars); the
transformers 5 %: at these tiny shapes (hidden size 64, 64 tokens) per-row statistics (norm
statistics, SDPA's logsumexp, the rotary tables) and the loss' logits are a few per cent of the
total, and the estimator's per-layer formula (Korthikanti et al.) rounds them.

What the CPU does differently, and what is compared instead:
* Dropout on a CPU keeps a noise tensor in the input's dtype, where CUDA's fused dropout keeps a
  1-byte mask; and SDPA's CPU path with dropout_p > 0 falls back to the math implementation,
  which materialises the attention scores (CUDA's flash / memory-efficient kernels do not).
  So BERT is compared twice: with its dropout layers at p = 0 (SDPA then takes the CPU flash
  kernel, which saves what CUDA's flash saves: output and logsumexp) against the estimator
  without dropout; and with dropout, in FP32, against the estimator's eager-attention count
  with its masks at 4 bytes.
* Llama and ResNet have no dropout: compared as they are.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import family_saved  # noqa: E402
from family_saved import estimated_bytes, family_workload, saved_bytes  # noqa: E402
from fitbench.estimate import transformer_cost  # noqa: E402
from fitbench.workloads.presets import get_workload  # noqa: E402

pytestmark = pytest.mark.torch

SHAPES = {
    "resnet50-cifar10": {"batch_size": 8},
    "bert-base-imdb": {"batch_size": 2, "seq_len": 64},
    "llm-6b": {"batch_size": 2, "seq_len": 64, "mode": "train"},
}
TOLERANCE = {"resnet50-cifar10": 0.02, "bert-base-imdb": 0.05, "llm-6b": 0.05}


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
@pytest.mark.parametrize("name", ["resnet50-cifar10", "llm-6b"])
def test_saved_activations_match_the_estimate(name: str, precision: str) -> None:
    w = get_workload(name, tiny=True, precision=precision, **SHAPES[name])
    assert saved_bytes(w) == pytest.approx(estimated_bytes(w), rel=TOLERANCE[name])


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
def test_encoder_without_dropout_matches_the_fused_estimate(precision: str) -> None:
    w = get_workload("bert-base-imdb", tiny=True, precision=precision, **SHAPES["bert-base-imdb"])
    measured = saved_bytes(w, dropout=False)
    assert measured == pytest.approx(estimated_bytes(w, dropout=False), rel=TOLERANCE["bert-base-imdb"])
    # the estimate with dropout (CUDA's 1-byte masks) is larger by about the masks, not more
    assert estimated_bytes(w) > measured


def test_encoder_with_cpu_dropout_matches_the_eager_estimate() -> None:
    """CPU dropout: SDPA falls back to the math path (scores stored, as eager attention does)
    and each dropout keeps an FP32 noise tensor where CUDA keeps a 1-byte mask."""
    w = get_workload("bert-base-imdb", tiny=True, precision="fp32", **SHAPES["bert-base-imdb"])
    eager = w.replace(attention="eager")
    a, tokens = w.arch, w.batch_size * (w.seq_len or 1)
    masks = a.num_layers * (2 * a.hidden_size * tokens + a.num_heads * (w.seq_len or 1) * tokens)
    masks += a.hidden_size * tokens  # the embeddings' dropout
    expected = estimated_bytes(eager) + (4 - 1) * masks
    measured = saved_bytes(w)
    assert measured == pytest.approx(expected, rel=TOLERANCE["bert-base-imdb"])
    assert measured > 1.3 * estimated_bytes(w)  # the fused count alone would be far off on a CPU


def test_gpt2_python_gelu_saves_five_tensors() -> None:
    """GPT-2 (transformers' `gelu_new`, NewGELUActivation) is Python: its MLP saves fc1's output,
    tanh's output, 0.5*x, 1+tanh and their product, five tensors of the MLP width where a fused
    GELU saves two. Dropout at p = 0 so that SDPA takes the CPU flash kernel, as on CUDA."""
    import dataclasses

    base = get_workload("llm-6b", tiny=True, mode="train", batch_size=2, seq_len=64)
    arch = dataclasses.replace(
        base.arch,
        mlp="gelu",
        norm="layernorm",
        position="learned",
        qkv_bias=True,
        out_bias=True,
        mlp_bias=True,
        num_kv_heads=None,
        tie_embeddings=True,
        model_type="gpt2",
    )
    w = dataclasses.replace(base, arch=arch)
    assert transformer_cost.gpt2_python_gelu(w.arch)
    measured = saved_bytes(w, dropout=False)
    assert measured == pytest.approx(estimated_bytes(w, dropout=False), rel=0.06)
    fused_gelu = 3 * w.arch.intermediate_size * 4 * w.batch_size * w.seq_len * w.arch.num_layers
    assert measured > 1.1 * (estimated_bytes(w, dropout=False) - fused_gelu)  # two tensors: far off


# -- the decoder families transformers builds its own way (backends/torch/family_configs.py) ------
# Tiny variants of the bundled configs. FP32 everywhere: query/key norms (Qwen3, Gemma-3, OLMo-2),
# Gemma's FP32 norms, four norms a block and soft-capping (Gemma-2, eager: transformers has no SDPA
# for it), parallel blocks and fused q/k/v (GPT-NeoX, Falcon-7B, whose multi-query SDPA call takes
# the math path), GPT-J's Python GELU, and experts (Mixtral, OLMoE, Qwen-MoE, ERNIE-4.5). Under
# autocast the families whose casts the CPU's autocast makes as CUDA's does (Python RMSNorms,
# the experts' FP32 grouped GEMMs, fused projections casting their input once, eager attention's
# FP32 softmax beside the 16-bit probabilities its matmul saves); GPT-J's AMP run differs on the
# CPU (autocast leaves pow in 16 bits there), and DeepSeek's latent attention (query/key heads
# wider than the values') takes SDPA's math path on the CPU only, so neither is compared here:
# the rows of benchmarks/family_saved.py but its NOT_A_CHECK ones.
FAMILY_ROWS = [
    (name, precision)
    for name in family_saved.MODELS
    for precision in ("fp32", "amp-bf16")
    if (name, precision) not in family_saved.NOT_A_CHECK
]


@pytest.mark.parametrize(("name", "precision"), FAMILY_ROWS)
def test_decoder_families_save_what_the_estimate_counts(name: str, precision: str) -> None:
    w = family_workload(name, precision)
    assert saved_bytes(w, dropout=False) == pytest.approx(estimated_bytes(w, dropout=False), rel=0.07)


def test_falcon_multi_query_sdpa_keeps_fp32_scores_in_16_bit_weights() -> None:
    """Falcon-7B hands SDPA one key/value head against all its query heads without enable_gqa:
    the math path runs (on the CPU as on CUDA), upcasts the 16-bit inputs and keeps FP32
    probabilities and FP32 copies of the query and of the broadcast keys and values. At 256 tokens
    the scores dominate: the count of 16-bit eager attention would be a third low."""
    w = family_workload("falcon-7b", "bf16").replace(seq_len=256)
    assert transformer_cost.sdpa_math_only(w.arch) and w.attention == "eager"
    measured = saved_bytes(w, dropout=False, dtype=torch.bfloat16)
    assert measured == pytest.approx(estimated_bytes(w, dropout=False), rel=0.05)
    a, tokens = w.arch, w.batch_size * 256
    fp32_extra = a.num_layers * tokens * (a.num_heads * 256 * 2 + 3 * a.q_dim * 2)
    assert measured > 1.3 * (estimated_bytes(w, dropout=False) - fp32_extra)


def test_routed_experts_keep_fp32_activations_under_autocast() -> None:
    """transformers' grouped experts run in the weights' dtype (FP32 master weights), so autocast
    saves about as much for an MoE block as FP32 does, where a dense block saves far less. The
    MoE model takes a key/value head for every query head here: the tiny OLMoE groups them, which
    in FP32 training runs SDPA's math path (execution.fp32_grouped_heads_math) and under autocast
    flash, a difference of attention, not of the experts this compares."""

    def ungrouped(precision: str):
        w = family_workload("olmoe-1b-7b", precision)
        return w.replace(arch=dataclasses.replace(w.arch, num_kv_heads=None), attention="fused")

    moe = [saved_bytes(ungrouped(p), dropout=False) for p in ("fp32", "amp-bf16")]
    dense = [saved_bytes(family_workload("qwen3-0.6b", p), dropout=False) for p in ("fp32", "amp-bf16")]
    assert moe[1] > 0.95 * moe[0] and dense[1] < 0.9 * dense[0]
    est = [estimated_bytes(ungrouped(p), dropout=False) for p in ("fp32", "amp-bf16")]
    assert est[1] / est[0] == pytest.approx(moe[1] / moe[0], abs=0.03)


def test_eager_attention_under_autocast_keeps_fp32_and_16_bit_probabilities() -> None:
    """Without dropout, eager attention's softmax keeps its FP32 output and the matmul with V keeps
    the 16-bit cast of it: six bytes a score under autocast, four in FP32 (one tensor)."""
    for precision in ("amp-bf16", "fp32"):
        w = family_workload("llama-3.2-1b-instruct", precision).replace(attention="eager")
        assert saved_bytes(w, dropout=False) == pytest.approx(estimated_bytes(w, dropout=False), rel=0.07)
