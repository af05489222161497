"""The workload as an execution mode runs it, and the memory of tuned AMP without autocast's cache."""

from __future__ import annotations

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.estimate.execution import (
    STEP_FEATURES,
    precision_as_run,
    sixteen_bit_residual,
    sixteen_bit_weights,
    without_step_features,
    workload_as_run,
)
from fitbench.estimate.profile import get_profile
from fitbench.estimate.speed import training_kernels
from fitbench.workloads.presets import get_workload

H200, T4 = get_gpu("h200"), get_gpu("t4")  # T4 (Turing) has no BF16 tensor cores


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16", "int8"])
def test_default_runs_what_was_asked(precision):
    w = get_workload("llm-6b", precision=precision)
    assert precision_as_run(w, "default", H200) == precision
    assert workload_as_run(w, "default", H200) is w


@pytest.mark.parametrize(
    ("name", "overrides", "exec_mode", "gpu", "kept"),
    [
        ("bert-base-imdb", {"precision": "amp-bf16"}, "tuned", H200, True),
        ("bert-base-imdb", {"mode": "infer"}, "tuned", H200, True),  # inference too: the same encoder
        ("bert-base-imdb", {"precision": "amp-bf16", "optimizer": "sgd"}, "tuned", H200, True),
        ("bert-base-imdb", {"precision": "amp-bf16"}, "default", H200, False),  # transformers' BERT
        ("bert-base-imdb", {"precision": "amp-bf16"}, "tuned", T4, False),  # amp-fp16 there
        ("bert-base-imdb", {"precision": "amp-bf16", "peft": "lora"}, "tuned", H200, False),
        ("llm-6b", {"mode": "train", "seq_len": 512, "batch_size": 1}, "tuned", H200, False),  # pre-norm
        ("resnet50-cifar10", {}, "tuned", H200, False),
    ],
)
def test_which_tuned_steps_keep_a_sixteen_bit_residual_stream(name, overrides, exec_mode, gpu, kept):
    w = workload_as_run(get_workload(name, **overrides), exec_mode, gpu)
    assert sixteen_bit_residual(w, w.precision, exec_mode) is kept
    assert sixteen_bit_residual(w, w.precision, exec_mode, "paddle") is False
    # the estimate says so among its assumptions where it counts the step that way
    lines = estimate(w, gpu, exec_mode=exec_mode).assumptions
    assert any("residual stream in bf16" in line for line in lines) is kept


@pytest.mark.parametrize(
    ("name", "mode", "asked", "h200", "t4"),
    [
        ("resnet50-cifar10", "train", "fp32", "amp-bf16", "amp-fp16"),
        ("bert-base-imdb", "train", "amp-fp16", "amp-bf16", "amp-fp16"),
        ("bert-base-imdb", "infer", "tf32", "amp-bf16", "amp-fp16"),
        ("bert-base-imdb", "train", "bf16", "bf16", "bf16"),  # pure half stays as asked
        ("llm-6b", "infer", "amp-fp16", "fp16", "fp16"),  # the static decoder has no autocast
        ("llm-6b", "infer", "fp16", "fp16", "fp16"),
        ("llm-6b", "infer", "fp32", "fp32", "fp32"),
        ("llm-6b", "infer", "int4", "int4", "int4"),  # refused by tuned at run time, not changed
        ("llm-6b", "infer", "amp-bf16", "bf16", "fp16"),  # no BF16 on a T4: fp16 weights
        ("llm-6b", "infer", "bf16", "bf16", "fp16"),
        ("llm-6b", "infer", "tf32", "fp32", "fp32"),  # generation has no TF32 matmuls to switch on
    ],
)
def test_tuned_runs_what_the_tuned_backend_chooses(name, mode, asked, h200, t4):
    w = get_workload(name, mode=mode, precision=asked)
    assert precision_as_run(w, "tuned", H200) == h200
    assert precision_as_run(w, "tuned", T4) == t4
    assert workload_as_run(w, "tuned", H200).precision == h200


def test_tuned_amp_inference_keeps_no_cached_weight_copies():
    w = get_workload("bert-base-imdb", mode="infer", precision="amp-bf16")
    default = estimate(w, H200)
    tuned = estimate(w, H200, exec_mode="tuned")
    assert default.breakdown["amp_weight_copies"] > 100e6  # ~86M cast weights x 2 bytes
    assert tuned.breakdown["amp_weight_copies"] == 0
    # Default training saves autocast's casts for backward; tuned training has none to save: its
    # Linear weights are bf16 already, their FP32 masters in the optimizer.
    t = get_workload("bert-base-imdb", precision="amp-bf16")
    eager, kept = estimate(t, H200).breakdown, estimate(t, H200, exec_mode="tuned").breakdown
    assert eager["amp_weight_copies"] > 100e6 and kept["amp_weight_copies"] == 0
    sixteen = estimate(t, H200, exec_mode="tuned").memory.details["sixteen_bit_weights"]
    # BERT-base's Linear matrices, 12 x (768 x 2304 + 768 x 768 + 2 x 768 x 3072), and its head:
    # the pooler's 768 x 768 + 768 and the classifier's 768 x 2 + 2 (the segments count the
    # blocks' matrices, the head whole: the blocks' biases, 83k, stay in the FP32 count)
    assert sixteen == 12 * (768 * 2304 + 768 * 768 + 2 * 768 * 3072) + 768 * 769 + 769 * 2
    assert kept["weights"] == pytest.approx(eager["weights"] - 2 * sixteen, abs=8)
    assert kept["master_weights"] == pytest.approx(eager["master_weights"] + 4 * sixteen, abs=8)


@pytest.mark.parametrize(
    ("name", "overrides", "exec_mode", "kept"),
    [
        ("bert-base-imdb", {"precision": "amp-bf16"}, "tuned", True),
        ("bert-base-imdb", {"precision": "fp32"}, "tuned", True),  # runs amp-bf16 on an H200
        ("bert-base-imdb", {"precision": "amp-bf16"}, "default", False),  # autocast's FP32 weights
        ("bert-base-imdb", {"precision": "amp-bf16", "optimizer": "sgd"}, "tuned", False),
        ("bert-base-imdb", {"precision": "amp-bf16", "peft": "lora"}, "tuned", False),
        ("resnet50-cifar10", {}, "tuned", False),
        ("bert-base-imdb", {"mode": "infer"}, "tuned", False),
    ],
)
def test_which_tuned_steps_keep_sixteen_bit_weights(name, overrides, exec_mode, kept):
    w = workload_as_run(get_workload(name, **overrides), exec_mode, H200)
    assert sixteen_bit_weights(w, w.precision, exec_mode) is kept
    if w.is_training and not w.is_resnet and w.precision_info.amp:
        # the step's time pays for autocast's weight casts only where it does not keep them
        profile = get_profile("torch", exec_mode)
        cast_bytes = sum(k.bytes for k in training_kernels(w, profile) if k.name == "weight_casts")
        assert (cast_bytes == 0) is kept


@pytest.mark.parametrize(
    ("name", "mode", "asked", "h200", "t4"),
    [
        # AMP O2: pure 16-bit weights with FP32 master weights, bf16 where the card has it
        ("resnet50-cifar10", "train", "fp32", "bf16", "fp16"),
        ("bert-base-imdb", "train", "amp-fp16", "bf16", "fp16"),
        ("bert-base-imdb", "train", "amp-bf16", "bf16", "fp16"),
        ("bert-base-imdb", "infer", "tf32", "bf16", "fp16"),
        ("bert-base-imdb", "train", "bf16", "bf16", "bf16"),  # pure half stays as asked
        ("bert-base-imdb", "train", "fp16", "fp16", "fp16"),
        ("llm-6b", "infer", "amp-bf16", "bf16", "fp16"),  # AMP generation: 16-bit weights
        ("llm-6b", "infer", "amp-fp16", "fp16", "fp16"),
        ("llm-6b", "infer", "fp32", "fp32", "fp32"),
        ("llm-6b", "infer", "int4", "int4", "int4"),  # refused by the backend at run time, not changed
    ],
)
def test_paddle_tuned_runs_what_its_backend_plans(name, mode, asked, h200, t4):
    w = get_workload(name, mode=mode, precision=asked)
    assert precision_as_run(w, "tuned", H200, "paddle") == h200
    assert precision_as_run(w, "tuned", T4, "paddle") == t4
    assert precision_as_run(w, "tuned", None, "paddle") == h200  # None: a card with BF16
    assert precision_as_run(w, "default", H200, "paddle") == asked


def test_paddle_tuned_trains_a_decoder_in_o2_too():
    w = get_workload("llm-6b", mode="train", seq_len=512, precision="fp32")
    assert precision_as_run(w, "tuned", H200, "paddle") == "bf16"
    assert precision_as_run(w, "tuned", T4, "paddle") == "fp16"


def test_paddle_tuned_estimate_counts_the_master_weights_of_o2():
    """Paddle's O2 keeps FP32 master weights and moments: the tuned estimate holds 16-bit weights
    plus those, not autocast's FP32 weights and cast copies."""
    w = get_workload("bert-base-imdb", precision="amp-fp16")
    tuned = estimate(w, H200, framework="paddle", exec_mode="tuned")
    default = estimate(w, H200, framework="paddle")
    assert tuned.workload.precision == "bf16" and default.workload.precision == "amp-fp16"
    assert "tuned runs bf16 where amp-fp16 was asked" in tuned.assumptions
    params = w.param_count()
    assert tuned.breakdown["master_weights"] == 4 * params
    assert default.breakdown["master_weights"] == 0
    assert tuned.breakdown["amp_weight_copies"] == 0 < default.breakdown["amp_weight_copies"]


@pytest.mark.parametrize(
    ("model", "overrides", "attention"),
    [
        ("llama-3.2-1b-instruct", {"mode": "train", "precision": "fp32"}, "eager"),  # 8 of 32 heads
        ("llama-3.2-1b-instruct", {"mode": "train", "precision": "amp-bf16"}, "fused"),
        ("llama-3.2-1b-instruct", {"mode": "train", "precision": "bf16"}, "fused"),
        ("llama-3.2-1b-instruct", {"mode": "infer", "precision": "fp32"}, "fused"),
        ("llama-2-7b", {"mode": "train", "precision": "fp32"}, "fused"),  # a head of keys for each
        ("deepseek-v2-lite-chat", {"mode": "train", "precision": "fp32"}, "fused"),  # latent heads
    ],
)
def test_fp32_training_over_grouped_heads_runs_sdpa_math_path(model, overrides, attention):
    """No CUDA fused kernel takes FP32 queries over fewer key/value heads (enable_gqa), so the
    estimate lays that step out as eager attention (its score matrices), as PyTorch runs it."""
    from fitbench.estimate.execution import attention_as_run
    from fitbench.workloads import library

    workload = library.workload_for_model(model, weights="none").replace(
        batch_size=2, seq_len=512, prompt_tokens=128, new_tokens=8, **overrides
    )
    assert attention_as_run(workload) == attention
    if not workload.is_training:
        return
    gpu = get_gpu("h100-sxm")
    asked, eager = estimate(workload, gpu), estimate(workload.replace(attention="eager"), gpu)
    same = (asked.peak_memory_bytes, asked.step_seconds) == (eager.peak_memory_bytes, eager.step_seconds)
    assert same == (attention == "eager")


def test_an_older_step_is_estimated_without_the_features_it_lacked():
    """without_step_features: inside, the named rules answer False and the estimate (time and the
    cached memory alike) is that of the step without them; outside, today's step again."""
    w = workload_as_run(get_workload("bert-base-imdb", precision="amp-bf16"), "tuned", H200)
    today = estimate(w, H200, exec_mode="tuned")
    assert sixteen_bit_weights(w, w.precision, "tuned") and sixteen_bit_residual(w, w.precision, "tuned")
    with without_step_features(*STEP_FEATURES):
        assert not sixteen_bit_weights(w, w.precision, "tuned")
        assert not sixteen_bit_residual(w, w.precision, "tuned")
        older = estimate(w, H200, exec_mode="tuned")
    with without_step_features("sixteen_bit_residual"):
        weights_only = estimate(w, H200, exec_mode="tuned")
    # each feature takes bytes off the step: the older the step, the slower its estimate
    assert older.step_seconds > weights_only.step_seconds > today.step_seconds
    # the 16-bit weights' memory parts come and go with the rule (a cached peak would not)
    assert older.breakdown["amp_weight_copies"] > 100e6 and "sixteen_bit_weights" not in older.memory.details
    assert today.breakdown["amp_weight_copies"] == 0 and today.memory.details["sixteen_bit_weights"] > 80e6
    assert estimate(w, H200, exec_mode="tuned").peak_memory_bytes == today.peak_memory_bytes
    assert today.peak_memory_bytes != older.peak_memory_bytes
    with pytest.raises(ValueError, match="unknown step features"), without_step_features("flash_attention_4"):
        pass
