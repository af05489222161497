"""The conventions of a training step the user states: optimizer implementation and gradient
accumulation, in the estimate, its JSON and its assumptions."""

from __future__ import annotations

import pytest

from fitbench.catalog import get_gpu
from fitbench.errors import FitbenchError
from fitbench.estimate import memory, optimizer, speed
from fitbench.estimate.api import estimate
from fitbench.estimate.execution import workload_as_run
from fitbench.estimate.profile import get_profile
from fitbench.workloads.presets import get_workload

PROFILE = get_profile("torch", "default", use_user=False)
H100 = get_gpu("h100-sxm")


def llama_fp32(**overrides: object):
    return get_workload("llm-6b", mode="train", seq_len=256, precision="fp32", **overrides)


def test_the_optimizer_step_is_the_peak_and_its_scratch_follows_the_implementation() -> None:
    w = llama_fp32(batch_size=1)
    p = w.param_count()
    foreach = memory.memory_breakdown(w, PROFILE)
    fused = memory.memory_breakdown(w.replace(optimizer_impl="fused"), PROFILE)
    assert foreach.phase == "optimizer" and foreach.parts["temporaries"] == 4 * p
    # fused has no temporaries: the peak is whichever moment is larger, never above foreach's
    assert fused.parts["temporaries"] < foreach.parts["temporaries"]
    assert fused.total < foreach.total
    assert foreach.total - fused.total >= 0.9 * 4 * p  # about one copy of the FP32 parameters


def test_gradient_accumulation_keeps_every_gradient_at_the_backward_peak() -> None:
    w = get_workload("bert-base-imdb", batch_size=32)
    one = memory.memory_breakdown(w, PROFILE)
    accum = memory.memory_breakdown(w.replace(grad_accum=4), PROFILE)
    assert one.phase == accum.phase == "backward"
    all_grads = w.param_count() * 4
    assert one.parts["gradients"] < all_grads  # only the blocks already through backward
    assert accum.parts["gradients"] == all_grads  # the earlier micro-batches' sums
    assert accum.parts["activations"] == one.parts["activations"]
    assert accum.total > one.total


def test_gradient_accumulation_spreads_the_update_over_the_micro_batches() -> None:
    w = get_workload("bert-base-imdb")
    k1 = speed.optimizer_kernels(w)[0]
    k4 = speed.optimizer_kernels(w.replace(grad_accum=4))[0]
    assert k4.bytes == pytest.approx(k1.bytes / 4) and k4.ops == pytest.approx(k1.ops / 4)
    assert estimate(w.replace(grad_accum=4), H100).step_seconds < estimate(w, H100).step_seconds


def test_fused_moves_fewer_bytes_and_the_for_loop_issues_more_operations() -> None:
    w = get_workload("bert-base-imdb", optimizer="adam")
    foreach, fused, loop = (
        speed.optimizer_kernels(w.replace(optimizer_impl=i))[0] for i in ("foreach", "fused", "for-loop")
    )
    assert fused.bytes == pytest.approx(foreach.bytes * 7 / 18)
    assert loop.bytes == foreach.bytes
    tensors = len(optimizer.param_sizes_in_order(w))
    assert loop.ops == speed.OPTIMIZER_LOOP_OPS["adam"] * tensors > 10 * foreach.ops


def test_adamw_streams_at_its_measured_share_by_implementation_and_state_dtype() -> None:
    """torch's AdamW kernels stream below a copy (benchmarks/optimizer_rate.py on the H200 and the
    H100): the optimizer's time is its bytes at that card's share, 16-bit state slower than FP32
    per byte, fused slower than foreach per byte; SGD and Paddle keep the copy's rate; another
    card's share follows from a per-SM rate in series with the memory (speed.optimizer_series)."""
    h200 = get_gpu("h200")
    w = get_workload("llm-6b", mode="train", seq_len=256, batch_size=1, optimizer="adamw")

    def seconds(workload, gpu=h200, framework="torch"):
        (k,) = speed.optimizer_kernels(workload, framework)
        t = speed.time_kernels([k], workload, gpu, PROFILE, host_seconds_per_op=0.0)
        return k, t.gpu_seconds

    for impl, precision, state in (("foreach", "fp32", 4), ("fused", "fp32", 4), ("foreach", "bf16", 2)):
        key = (impl, state)
        k, t = seconds(w.replace(optimizer_impl=impl, precision=precision))
        assert k.memory_efficiency is None and k.sm_rate is not None
        launches = k.kernel_launches * PROFILE.kernel_fixed_seconds
        # the two cards it was measured on take their measured shares
        share = speed.OPTIMIZER_STREAM_SHARE[key]
        assert t == pytest.approx(k.bytes / (h200.stream_bandwidth_bytes_s * share) + launches)
        _, on_h100 = seconds(w.replace(optimizer_impl=impl, precision=precision), H100)
        share = speed.OPTIMIZER_STREAM_SHARE_H100[key]
        assert on_h100 == pytest.approx(k.bytes / (H100.stream_bandwidth_bytes_s * share) + launches)
    shares = speed.OPTIMIZER_STREAM_SHARE
    assert shares[("foreach", 2)] < shares[("foreach", 4)] and shares[("fused", 4)] < shares[("foreach", 4)]
    assert speed.optimizer_kernels(w.replace(optimizer="momentum"))[0].stream_share is None
    assert speed.optimizer_kernels(w, "paddle")[0].stream_share is None
    # 16-bit state is bound by its SMs more than FP32's: a card with more SMs per byte of
    # bandwidth (an A100) streams it closer to a copy, and never past one
    a100 = get_gpu("a100-80gb-sxm")
    bf16 = speed.optimizer_kernels(w.replace(precision="bf16"))[0]
    fp32 = speed.optimizer_kernels(w)[0]
    on_a100 = {
        name: k.bytes
        / (
            speed.time_kernels([k], w, a100, PROFILE, host_seconds_per_op=0.0).gpu_seconds
            - k.kernel_launches * PROFILE.kernel_fixed_seconds
        )
        / a100.stream_bandwidth_bytes_s
        for name, k in (("bf16", bf16), ("fp32", fp32))
    }
    assert on_a100["bf16"] - speed.OPTIMIZER_STREAM_SHARE[("foreach", 2)] > 0.1
    assert abs(on_a100["fp32"] - speed.OPTIMIZER_STREAM_SHARE[("foreach", 4)]) < 0.06
    assert max(on_a100.values()) <= 1.0


def test_the_tuned_mode_runs_the_fused_optimizer() -> None:
    w = get_workload("resnet50-cifar10")
    assert workload_as_run(w, "tuned", H100).optimizer_impl == "fused"
    assert workload_as_run(w, "default", H100).optimizer_impl == "foreach"
    assert workload_as_run(w, "tuned", H100, "paddle").optimizer_impl == "foreach"


def test_json_and_assumptions_state_both() -> None:
    e = estimate(get_workload("bert-base-imdb", optimizer_impl="for-loop", grad_accum=2), H100)
    d = e.to_dict()
    assert d["optimizer_impl"] == "for-loop" and d["grad_accum"] == 2
    text = " ".join(d["assumptions"])
    assert "for-loop implementation" in text and "accumulation over 2 micro-batches" in text
    infer = estimate(get_workload("bert-base-imdb", mode="infer"), H100).to_dict()
    assert infer["optimizer_impl"] is None and infer["grad_accum"] is None
    plain = " ".join(estimate(get_workload("bert-base-imdb"), H100).assumptions)
    assert "zero_grad(set_to_none=True)" in plain


def test_bad_values_are_one_clear_error() -> None:
    with pytest.raises(FitbenchError, match="optimizer implementation"):
        get_workload("bert-base-imdb", optimizer_impl="forach")
    with pytest.raises(FitbenchError, match="grad-accum"):
        get_workload("bert-base-imdb", grad_accum=0)
