"""Falcon-7B's decode attention as PyTorch's math SDPA path runs it: the one cached key/value
head copied to every query head in FP32 at every step (estimate/transformer_cost.math_sdpa_kv_kernels)."""

from __future__ import annotations

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import speed, transformer_cost
from fitbench.estimate.execution import sdpa_math_only, workload_as_run
from fitbench.estimate.profile import get_profile
from fitbench.workloads import library
from fitbench.workloads.hf_config import arch_from_hf_config

H200 = get_gpu("h200")
DEFAULT = get_profile("torch", "default", use_user=False)


def _decode(name: str, batch: int = 4, prompt: int = 2048):
    w = library.workload_for_model(name, batch_size=batch, mode="infer", prompt_tokens=prompt, new_tokens=64)
    w = workload_as_run(w, "default", H200)
    return w, speed.generation(w, H200, DEFAULT).decode


def test_the_math_path_copies_keys_and_values_to_every_query_head_in_fp32() -> None:
    w, _ = _decode("falcon-7b")
    arch = w.arch
    assert sdpa_math_only(arch) and arch.kv_heads == 1 and arch.num_heads == 71
    copies, reads = transformer_cost.math_sdpa_kv_kernels(w, 4, 2080)
    # keys and values, 71 heads of 64, written by the copies and read by the products once each
    # in FP32, every layer
    assert copies.bytes == reads.bytes == 4 * 4 * 2080 * (2 * 64 * 71)
    assert copies.count == reads.count == arch.num_layers == 32
    # the copies at their own (measured) rate, the products' reads at the step's
    assert (
        copies.memory_efficiency == transformer_cost.MATH_SDPA_COPY_SHARE and reads.memory_efficiency is None
    )
    slow = speed.time_kernels([copies], w, H200, DEFAULT, host_seconds_per_op=0.0).gpu_seconds
    fast = speed.time_kernels([reads], w, H200, DEFAULT, host_seconds_per_op=0.0).gpu_seconds
    assert slow - copies.kernel_launches * copies.count * DEFAULT.kernel_fixed_seconds == (
        pytest.approx(fast / transformer_cost.MATH_SDPA_COPY_SHARE, rel=1e-6)
    )


def test_only_the_math_path_pays_for_the_copies_and_they_grow_with_the_context() -> None:
    _, short = _decode("falcon-7b", prompt=512)
    _, long = _decode("falcon-7b", prompt=2048)
    per_slot = 2 * 4 * 4 * (2 * 64 * 71) * 32  # batch 4, every layer
    assert long.bytes - short.bytes > per_slot * (2048 - 512)
    # Falcon-40B's layout expands keys and values to every head before SDPA: no math path
    falcon_40b = arch_from_hf_config(
        {
            "model_type": "falcon",
            "hidden_size": 8192,
            "num_attention_heads": 128,
            "num_kv_heads": 8,
            "num_hidden_layers": 60,
            "new_decoder_architecture": True,
            "parallel_attn": True,
            "vocab_size": 65024,
        }
    )
    assert not sdpa_math_only(falcon_40b)
    assert not sdpa_math_only(library.workload_for_model("qwen2.5-0.5b-instruct").arch)


def test_a_serving_engine_attends_without_the_math_path() -> None:
    """An engine (vLLM) runs its own attention kernels: the copies are transformers' code only."""
    w, own = _decode("falcon-7b")
    served = speed.generation(w, H200, get_profile("torch", "tuned", use_user=False).as_engine()).decode
    kernels = transformer_cost.math_sdpa_kv_kernels(w, 4, 2048 + 32)
    assert own.bytes - served.bytes >= sum(k.bytes * k.count for k in kernels)


def test_training_through_the_math_path_keeps_and_computes_the_scores_in_fp32() -> None:
    """Falcon-7B's training step in 16-bit weights: the math path's score products run in FP32 on
    the CUDA cores and it keeps FP32 probabilities and FP32 query/key/value copies, where a
    multi-head 16-bit eager attention keeps 16-bit ones (measured on an H100: LoRA b2 s1024 52.6 GB
    allocated, 425 ms a step; the 16-bit count read -21 % and -32 %)."""
    w = library.workload_for_model(
        "falcon-7b", mode="train", precision="bf16", peft="lora", batch_size=2, seq_len=1024
    )
    run = workload_as_run(w, "default", H200)
    assert run.attention == "eager"
    ks = transformer_cost.forward_kernels(run, 2, 1024)
    (attention,) = [k for k in ks if k.name == "attention"]
    assert attention.compute == "fp32"
    arch, dt = run.arch, transformer_cost.activation_dtypes(run, dropout=False)
    math = transformer_cost.math_sdpa_saved_bytes_per_token(arch, dt, 1024)
    assert math == 3 * arch.q_dim * 4 + arch.q_dim * 2 + arch.num_heads * 1024 * 4
    # beside the fused q/k/v output's view, which eager and math attention both keep
    view = (arch.q_dim + arch.kv_dim) * dt.act
    assert transformer_cost._attention_saved_bytes_per_token(arch, dt, 1024, "eager") == view + math
    fp32_peak = H200.peak("fp32")
    gpu = speed.time_kernels([attention], run, H200, DEFAULT, host_seconds_per_op=0.0)
    assert gpu.compute_seconds >= attention.flops / fp32_peak
