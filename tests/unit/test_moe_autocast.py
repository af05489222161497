"""Routed experts under autocast, as transformers runs them: grouped_mm is not autocast-enabled
and transformers casts the gathered input to the experts' weights' dtype, so with FP32 master
weights (AMP) the expert GEMMs are FP32 GEMMs on FP32 activations, and autocast keeps no 16-bit
copy of the expert weights. Pure 16-bit and quantized weights are unaffected."""

from __future__ import annotations

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import expert_cost, transformer_cost
from fitbench.estimate.api import estimate
from fitbench.workloads import library

H200 = get_gpu("h200")


def _olmoe(precision: str, **overrides: object):
    w = library.workload_for_model("olmoe-1b-7b")
    return w.replace(mode="train", precision=precision, batch_size=4, seq_len=2048, **overrides)


def _experts(workload) -> transformer_cost.Kernel:
    kernels = transformer_cost.forward_kernels(workload, workload.batch_size, workload.seq_len)
    return next(k for k in kernels if k.name == "experts")


def test_amp_experts_are_fp32_gemms_on_fp32_weights_and_activations() -> None:
    amp, half = _experts(_olmoe("amp-bf16")), _experts(_olmoe("bf16"))
    assert amp.compute == "fp32" and half.compute == ""
    assert amp.flops == half.flops
    arch = _olmoe("bf16").arch
    tokens, k, h, fe = 4 * 2048, arch.experts_per_token, arch.hidden_size, arch.expert_intermediate_size
    weights = arch.num_experts * 3 * h * fe  # a 8k-token step reaches every expert
    assert amp.bytes == pytest.approx(tokens * k * 3 * (h + fe) * 4 + weights * 4, rel=1e-3)
    assert half.bytes == pytest.approx(tokens * k * 3 * (h + fe) * 2 + weights * 2, rel=1e-3)
    # FP32 takes grouped_mm's fallback: an mm per expert with tokens for each grouped product
    assert amp.kernel_launches == pytest.approx(13 + 2 * arch.num_experts, rel=1e-3)
    assert half.kernel_launches == 15


def test_fp32_experts_backward_is_fp32_too() -> None:
    """The gradients of FP32 experts are FP32 products (grad input and grad weight of each
    expert's mm in grouped_mm's fallback): twice the forward's FLOPs at the FP32 rate, and two
    mm launches per expert and product where the forward has one."""
    from fitbench.estimate.profile import get_profile
    from fitbench.estimate.speed import time_kernels, training_kernels

    w, profile = _olmoe("amp-bf16"), get_profile("torch", "default")
    kernels = {k.name: k for k in training_kernels(w, profile)}
    fwd, bwd = kernels["experts"], kernels["experts.backward"]
    assert bwd.compute == "fp32" and bwd.flops == 2 * fwd.flops
    assert bwd.kernel_launches - fwd.kernel_launches == pytest.approx(2 * w.arch.num_experts, rel=1e-3)

    def seconds(k):
        return time_kernels([k], w, H200, profile, host_seconds_per_op=0.0).compute_seconds

    assert seconds(bwd) == pytest.approx(2 * seconds(fwd), rel=0.05)


def test_autocast_copies_leave_the_routed_experts_out() -> None:
    arch = _olmoe("amp-bf16").arch
    attn = sum(fin * fout for _, fin, fout in arch.attention_linears())
    assert transformer_cost.autocast_params_at(arch, 0) == attn + arch.hidden_size * arch.num_experts
    dense = library.workload_for_model("qwen3-0.6b").arch
    assert transformer_cost.autocast_params_at(dense, 0) == dense.linear_params_per_layer()


def test_an_amp_moe_step_is_slower_than_a_bf16_one_on_fp32_experts() -> None:
    amp = estimate(_olmoe("amp-bf16"), H200)
    half = estimate(_olmoe("bf16"), H200)
    assert amp.step_seconds > 2 * half.step_seconds
    assert amp.bottleneck == "compute"
    assert any("not autocast-enabled" in line for line in amp.assumptions)
    assert not any("not autocast-enabled" in line for line in half.assumptions)


def test_fp32_experts_need_autocast() -> None:
    """FP32 training reads FP32 weights anyway (no switch to make; its own precision's rate), but
    torch's grouped kernel takes bf16 only: its grouped products loop over the experts, one mm
    and one dispatch each (all 64 of OLMoE's are hit); pure 16-bit runs 16-bit."""
    fp32 = _experts(_olmoe("fp32"))
    assert fp32.compute == "" and fp32.cast_ops == 2 * 64
    assert fp32.launches == fp32.ops - 2 + fp32.cast_ops
    amp = _olmoe("amp-fp16")
    assert expert_cost.experts_in_weight_dtype(
        amp.arch, transformer_cost.activation_dtypes(amp, dropout=False)
    )


def test_autocast_casts_no_routed_expert_weights_in_a_step() -> None:
    """The step's weight casts (the `weight_casts` kernel: an FP32 read and a 16-bit write per
    parameter) leave the routed experts out under autocast, as the memory side's copies do
    (autocast_params_at); an H100 profile of OLMoE AMP training (kernel-classes-moe-h100-2026-12-06
    .json) ran 1.6 ms of bf16 copies a step, where the experts' casts alone would take 3 ms."""
    w = _olmoe("amp-bf16")
    kernels = transformer_cost.forward_kernels(w, w.batch_size, w.seq_len)
    casts = next(k for k in kernels if k.name == "weight_casts")
    arch = w.arch
    routed = arch.moe_layers * 3 * arch.hidden_size * arch.num_experts * arch.expert_intermediate_size
    untied = 0 if arch.tie_embeddings else arch.vocab_size * arch.hidden_size
    assert casts.bytes == pytest.approx(6.0 * (w.trained_param_count() - untied - routed))
    assert casts.bytes < 0.3 * 6.0 * w.trained_param_count()  # OLMoE is mostly experts
