"""Model FLOPs per training step and MFU (fitbench.estimate.model_flops), estimated and measured.

The model FLOPs leave out recomputation: activation checkpointing's second forward changes
`flops_per_step` (what the kernels execute) and not `model_flops_per_step`; the count of a dense
decoder is checked against 6 x parameters x tokens plus attention written out by hand.
"""

from __future__ import annotations

import pytest

from fitbench.advise.diagnosis import diagnose
from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.estimate.model_flops import mfu, model_flops_per_step, peak_class
from fitbench.estimate.profile import get_profile
from fitbench.records.measurement import Measurement
from fitbench.records.run import EstimateSummary
from fitbench.workloads import library
from fitbench.workloads.presets import get_workload

H200 = get_gpu("h200")


def llama_1b(**overrides):
    base = {"mode": "train", "seq_len": 2048, "batch_size": 4, "precision": "amp-bf16"}
    return library.workload_for_model("llama-3.2-1b-instruct", **{**base, **overrides})


TRAINING = [
    ("resnet50-cifar10", {}),
    ("bert-base-imdb", {"precision": "amp-bf16"}),
    ("bert-base-imdb", {"peft": "lora", "lora_rank": 8, "lora_targets": "attention-mlp"}),
]


@pytest.mark.parametrize(("name", "overrides"), TRAINING[1:])
@pytest.mark.parametrize("exec_mode", ["default", "tuned"])
def test_checkpointing_changes_the_kernels_flops_not_the_models(name, overrides, exec_mode):
    w = get_workload(name, **overrides)
    off = estimate(w.replace(checkpointing=False), H200, exec_mode=exec_mode)
    on = estimate(w.replace(checkpointing=True), H200, exec_mode=exec_mode)
    assert on.flops_per_step > off.flops_per_step  # the recomputed forward is executed
    assert on.model_flops_per_step == pytest.approx(off.model_flops_per_step, rel=1e-12)
    assert on.mfu < off.mfu  # same useful work in a longer step


def test_checkpointing_a_decoder_and_its_lora():
    for peft in (None, "lora"):
        off = estimate(llama_1b(peft=peft, checkpointing=False), H200, exec_mode="tuned")
        on = estimate(llama_1b(peft=peft, checkpointing=True), H200, exec_mode="tuned")
        assert on.flops_per_step > off.flops_per_step
        assert on.model_flops_per_step == pytest.approx(off.model_flops_per_step, rel=1e-12)


def test_a_dense_decoder_is_6_n_tokens_plus_attention():
    w = llama_1b()
    arch = w.arch
    tokens = 4 * 2048
    h, v, q, kv, f = arch.hidden_size, arch.vocab_size, arch.q_dim, arch.kv_dim, arch.intermediate_size
    block_matmul_params = h * q + 2 * h * kv + q * h + 3 * h * f  # q, k, v, o; gate, up, down
    matmul_params = arch.num_layers * block_matmul_params + h * v  # the (tied) LM head multiplies too
    causal_attention = 4 * tokens * 2048 * q * 0.5 * arch.num_layers  # QK^T and PV, causal half
    expected = 6 * matmul_params * tokens + 3 * causal_attention
    assert model_flops_per_step(w, get_profile("torch", "tuned")) == pytest.approx(expected, rel=1e-9)


def test_eager_attention_computes_the_square_but_the_model_counts_the_causal_half():
    fused, eager = llama_1b(attention="fused"), llama_1b(attention="eager")
    e_fused, e_eager = estimate(fused, H200), estimate(eager, H200)
    assert e_eager.flops_per_step > e_fused.flops_per_step
    assert e_eager.model_flops_per_step == pytest.approx(e_fused.model_flops_per_step, rel=1e-12)


def test_lora_counts_input_gradients_of_frozen_weights_and_the_adapters():
    profile = get_profile("torch", "default")
    full = model_flops_per_step(llama_1b(), profile)
    lora = model_flops_per_step(llama_1b(peft="lora", lora_rank=16), profile)
    qlora = model_flops_per_step(llama_1b(peft="qlora", lora_rank=16), profile)
    assert 2 / 3 * full < lora < full  # no weight gradients of the base, small adapters added
    assert qlora == pytest.approx(lora)  # dequantization is traffic, not FLOPs
    bigger = model_flops_per_step(llama_1b(peft="lora", lora_rank=64), profile)
    assert bigger > lora


@pytest.mark.parametrize("gpu", ["h200", "a100-80gb", "rtx-4090", "t4"])
@pytest.mark.parametrize(
    ("name", "overrides"),
    [*TRAINING, ("bert-base-imdb", {"checkpointing": True})],
)
@pytest.mark.parametrize("exec_mode", ["default", "tuned"])
def test_estimated_mfu_is_a_share_of_the_peak(gpu, name, overrides, exec_mode):
    e = estimate(get_workload(name, **overrides), get_gpu(gpu), exec_mode=exec_mode)
    assert 0.0 < e.mfu <= 1.0
    peak = get_gpu(gpu).peak(peak_class(e.workload.precision, e.workload.family))
    assert e.mfu == pytest.approx(e.model_flops_per_step / e.step_seconds / peak)
    assert e.to_dict()["mfu"] == e.mfu and e.to_dict()["model_flops_per_step"] == e.model_flops_per_step


def test_no_mfu_outside_training():
    for w in (get_workload("llm-6b"), get_workload("bert-base-imdb", mode="infer")):
        e = estimate(w, H200)
        assert e.model_flops_per_step is None and e.mfu is None
    assert mfu(None, 1.0, H200, "fp32", "decoder") is None
    assert mfu(1e12, 0.0, H200, "fp32", "decoder") is None


def test_tensor_parallel_splits_the_model_flops():
    profile = get_profile("torch", "default")
    one = model_flops_per_step(llama_1b(), profile)
    assert model_flops_per_step(llama_1b(gpus=4, strategy="tp"), profile) == pytest.approx(one / 4)
    assert model_flops_per_step(llama_1b(gpus=4, strategy="ddp"), profile) == pytest.approx(one)


def test_measured_mfu_divides_the_estimates_model_flops_by_the_measured_step():
    e = estimate(llama_1b(), H200, exec_mode="tuned")
    summary = EstimateSummary.from_dict(e.to_dict())
    assert summary.model_flops_per_step == e.model_flops_per_step
    m = Measurement.from_dict(
        {
            "status": "ok",
            "device": "cuda",
            "exec_mode": "tuned",
            "precision_requested": "amp-bf16",
            "precision_in_effect": "amp-bf16",
            "step_seconds": 0.2,
        }
    )
    d = diagnose(m, summary, H200)
    assert d.mfu == pytest.approx(e.model_flops_per_step / 0.2 / H200.peak("bf16"))
    assert d.model_flops_per_step == e.model_flops_per_step
    # the executed FLOPs' share is larger or equal: it counts recomputation too
    assert d.compute_fraction >= d.mfu
    on_cpu = diagnose(Measurement.from_dict({**m.to_dict(), "device": "cpu"}), summary, H200)
    assert on_cpu.mfu is None


def test_an_older_record_without_model_flops_has_no_measured_mfu():
    e = estimate(llama_1b(), H200).to_dict()
    del e["model_flops_per_step"], e["mfu"]
    summary = EstimateSummary.from_dict(e)
    assert summary.model_flops_per_step is None and summary.to_dict() == e
    m = Measurement.from_dict(
        {"status": "ok", "device": "cuda", "precision_requested": "amp-bf16", "step_seconds": 0.2}
    )
    d = diagnose(m, summary, H200)
    assert d.available and d.mfu is None
