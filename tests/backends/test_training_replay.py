"""benchmarks/training_replay.py traces a decoder's training step on the meta device with CUDA's
kernel choices: what it must hold at the step's peak, on tiny library models.

The script's agreement with measured GPU peaks is a benchmark (its --measured table), not a test;
these check the mechanisms it substitutes for the meta device's own: the LM loss's FP32 blocks,
SDPA's math path for FP32 queries over grouped key/value heads and for a 16-bit multi-query call
without enable_gqa, CUDA's fused dropout, autocast's casts."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import training_replay
from fitbench.estimate.execution import attention_as_run
from tiny_families import tiny_workload

pytestmark = [pytest.mark.torch, pytest.mark.slow]

BATCH, SEQ = 2, 96


def _blocks(workload) -> dict[int, int]:
    return {size: n for size, n in training_replay.trace_step(workload)["blocks_at_peak"]}


def test_a_16bit_step_peaks_with_the_loss_s_three_fp32_logits_blocks() -> None:
    """The upcast logits' log-softmax (saved), its gradient and the gradient of the upcast
    logits: three FP32 blocks of tokens x vocabulary at the head's backward, and no 16-bit
    logits beside them (the model's output is gone before backward)."""
    w = tiny_workload("qwen3-0.6b", mode="train", precision="bf16", batch_size=BATCH, seq_len=SEQ)
    logits = BATCH * SEQ * w.arch.vocab_size
    blocks = _blocks(w)
    assert blocks.get(logits * 4) == 3
    assert logits * 2 not in blocks


def test_fp32_queries_over_grouped_heads_keep_their_score_matrices() -> None:
    """No CUDA fused kernel takes them: SDPA's math path keeps each layer's FP32 scores (batch x
    heads x seq x seq), as the estimate's eager layout does; with a key/value head for every
    query head the fused kernel runs and keeps none."""
    grouped = tiny_workload("llama-3.2-1b-instruct", mode="train", batch_size=BATCH, seq_len=SEQ)
    arch = grouped.arch
    assert arch.kv_heads < arch.num_heads and attention_as_run(grouped) == "eager"
    equal = grouped.replace(arch=dataclasses.replace(arch, num_kv_heads=None))
    assert attention_as_run(equal) == "fused"
    scores = BATCH * arch.num_heads * SEQ * SEQ * 4
    assert _blocks(grouped).get(scores, 0) - _blocks(equal).get(scores, 0) >= arch.num_layers


def test_a_multi_query_call_without_enable_gqa_keeps_fp32_scores_in_16_bit_weights() -> None:
    """Falcon-7B hands SDPA its one key/value head without enable_gqa: no CUDA fused kernel takes
    it, and the math path computes the bf16 inputs in FP32, keeping each layer's FP32 scores."""
    w = tiny_workload("falcon-7b", mode="train", precision="bf16", batch_size=BATCH, seq_len=SEQ)
    arch = w.arch
    assert arch.kv_heads == 1 < arch.num_heads
    scores = BATCH * arch.num_heads * SEQ * SEQ
    blocks = _blocks(w)
    assert blocks.get(scores * 4, 0) >= arch.num_layers
    assert blocks.get(scores * 2, 0) == 0  # no 16-bit score matrix: not eager attention


def test_dropout_saves_a_bool_mask_as_cuda_does() -> None:
    """CUDA's fused dropout saves a one-byte mask an element; the CPU's and the meta device's
    decomposition a float mask of four."""
    import torch

    from allocator_replay import StorageEvents

    def allocations(dropout) -> list[int]:
        x = torch.empty(1000, device="meta", requires_grad=True)
        trace = StorageEvents()
        with trace:
            y = dropout(x, 0.05, True)
        del y
        return sorted(e[2] for e in trace.events if e[0] == "alloc")

    assert allocations(training_replay._fused_dropout) == [1000, 4000]
    assert 1000 not in allocations(torch.nn.functional.dropout)


def test_lora_adapters_keep_a_bool_mask_for_each_adapted_input() -> None:
    w = tiny_workload(
        "qwen3-0.6b", mode="train", precision="bf16", batch_size=BATCH, seq_len=SEQ, peft="lora", lora_rank=4
    )
    assert _blocks(w).get(BATCH * SEQ * w.arch.hidden_size, 0) >= w.arch.num_layers


def test_an_amp_step_peaks_between_the_16_bit_and_the_fp32_step() -> None:
    """Under autocast (meta_autocast.MetaAutocast) the FP32 weights' matmuls save 16-bit
    activations and weight copies: the traced peak lies between the bf16 step's and the FP32
    step's (an FP32 run, which the meta device would make of it without the casts, is the top),
    and the loss still peaks with its three FP32 logits blocks."""
    w = tiny_workload("qwen3-0.6b", mode="train", precision="amp-bf16", batch_size=BATCH, seq_len=SEQ)
    peak = training_replay.trace_step(w)
    low, high = (training_replay.trace_step(w.replace(precision=p)) for p in ("bf16", "fp32"))
    assert low["allocated_peak_bytes"] < peak["allocated_peak_bytes"] < high["allocated_peak_bytes"]
    blocks = {size: n for size, n in peak["blocks_at_peak"]}
    assert blocks.get(BATCH * SEQ * w.arch.vocab_size * 4) == 3


def test_a_checkpointed_amp_step_is_traced() -> None:
    """The recompute inside backward runs under the same casts as the forward (checkpoint
    refuses a recompute whose dtypes differ)."""
    w = tiny_workload(
        "qwen3-0.6b", mode="train", precision="amp-bf16", batch_size=BATCH, seq_len=SEQ, checkpointing=True
    )
    assert training_replay.trace_step(w)["allocated_peak_bytes"] > 0


def test_qlora_is_refused_in_one_line() -> None:
    w = tiny_workload(
        "qwen3-0.6b", mode="train", precision="bf16", batch_size=BATCH, seq_len=SEQ, peft="qlora", lora_rank=4
    )
    with pytest.raises(ValueError, match="without QLoRA"):
        training_replay.trace_step(w)


def test_the_table_names_each_point(capsys: pytest.CaptureFixture[str]) -> None:
    assert training_replay.main(["qwen3-0.6b:1:128:bf16"]) == 0
    out = capsys.readouterr().out
    assert "qwen3-0.6b:1:128:bf16" in out and "reserved" in out


def test_the_sweep_cuts_every_library_decoder_to_its_first_blocks() -> None:
    points = list(training_replay.sweep_points("1:128:bf16", 3, None))
    assert len(points) >= 40
    for label, _, workload, measured in points:
        arch = workload.arch
        assert arch.kind == "decoder" and arch.num_layers <= 3 and measured is None
        assert workload.is_training and workload.precision == "bf16" and "(" in label
        assert arch.sliding_layers < max(arch.num_layers, 2)
        assert arch.linear_layers < max(arch.num_layers, 2)


@pytest.mark.parametrize(
    ("name", "lora"),
    [("phi-3-mini-4k-instruct", True), ("gpt2", False)],
    ids=["phi3-fused-projections-lora", "gpt2-dropout-and-python-gelu"],
)
def test_one_amp_block_adds_what_the_estimate_counts(name: str, lora: bool) -> None:
    """One more block's bytes per token under autocast, traced and estimated (layer_slope: the
    head and the rounding cancel). Phi-3's fused q/k/v and gate/up projections keep one 16-bit
    copy of their input each, which a frozen LoRA block does not keep; GPT-2 keeps its two
    residual dropouts' masks and its Python GELU's FP32 tensors."""
    extra = {"peft": "lora", "lora_rank": 4} if lora else {}
    w = tiny_workload(name, mode="train", precision="amp-bf16", batch_size=BATCH, seq_len=SEQ, **extra)
    traced, estimated = training_replay.layer_slope(w, 4, "h100-sxm")
    assert estimated == pytest.approx(traced, rel=0.02)


def _saved_by_first_block(workload) -> float:
    """Bytes autograd keeps in the first block's forward, each storage once, parameters out
    (CUDA's kernel choices: training_replay.cuda_kernels)."""
    import torch

    from fitbench.backends.torch.models import build_model

    model, _ = build_model(workload, device="meta", dtype=torch.bfloat16)
    model.train()
    block = next(m for name, m in model.named_modules() if name.endswith("layers.0"))
    params = {p.untyped_storage()._cdata for p in model.parameters()}
    seen: dict[int, int] = {}
    inside = [False]

    def pack(t):
        if inside[0]:
            seen.setdefault(t.untyped_storage()._cdata, t.untyped_storage().nbytes())
        return t

    block.register_forward_pre_hook(lambda *_: inside.__setitem__(0, True))
    block.register_forward_hook(lambda *_: inside.__setitem__(0, False))
    ids = torch.zeros((workload.batch_size, workload.seq_len), dtype=torch.long, device="meta")
    with training_replay.cuda_kernels(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids, use_cache=False)
    return sum(n for sid, n in seen.items() if sid not in params)


def test_a_gpt_oss_block_saves_what_the_estimate_counts() -> None:
    """gpt-oss: eager attention with sinks keeps one 16-bit tensor of probabilities (its softmax is
    taken in the scores' dtype), its RMSNorm keeps FP32 to the end, its clamped experts seven
    expert widths a routed copy. Before, the estimate counted the probabilities three times over
    (FP32 and a 16-bit copy) and four expert widths: +42 % at 2 x 1,024 tokens, -5 % here."""
    from fitbench.catalog import get_gpu
    from fitbench.estimate import transformer_cost
    from fitbench.estimate.dtypes import activation_dtypes
    from fitbench.estimate.execution import workload_as_run
    from fitbench.workloads import library

    w = library.workload_for_model("gpt-oss-20b", weights="none")
    w = w.replace(
        arch=dataclasses.replace(w.arch, num_layers=2, sliding_layers=1),
        mode="train",
        precision="bf16",
        batch_size=1,
        seq_len=256,
    )
    run = workload_as_run(w, "default", get_gpu("h100-sxm"), "torch")
    dt = activation_dtypes(run, dropout=False)
    per_token = transformer_cost.layer_saved_bytes_per_token(run.arch, dt, 256, run.attention, moe=True)
    assert per_token * 256 == pytest.approx(_saved_by_first_block(w), rel=0.01)
