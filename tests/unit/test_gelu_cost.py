"""An exact GELU is a kernel of its own whose FP32 arithmetic (erf) can take longer than its bytes:
transformer_cost.gelu_kernel, timed by speed.time_kernels at the card's FP32 rate."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import speed, transformer_cost
from fitbench.estimate.dtypes import activation_dtypes
from fitbench.estimate.profile import get_profile
from fitbench.workloads.library import workload_for_model
from fitbench.workloads.presets import get_workload

DEFAULT = get_profile("torch", "default", use_user=False)
TUNED = get_profile("torch", "tuned", use_user=False)


def _kernels(name: str, **overrides: object) -> dict[str, transformer_cost.Kernel]:
    w = get_workload(name, **overrides)
    return {k.name: k for k in transformer_cost.forward_kernels(w, w.batch_size, w.seq_len or 1)}


def test_bert_s_gelu_is_its_own_kernel_with_the_erf_arithmetic() -> None:
    w = get_workload("bert-base-imdb", precision="amp-bf16")
    ks = _kernels("bert-base-imdb", precision="amp-bf16")
    gelu = ks["gelu"]
    elements = w.batch_size * w.seq_len * w.arch.intermediate_size
    assert gelu.flops == pytest.approx(elements * transformer_cost.GELU_FLOPS_PER_ELEMENT)
    assert gelu.backward_flops == pytest.approx(elements * transformer_cost.GELU_BACKWARD_FLOPS_PER_ELEMENT)
    assert gelu.bytes == pytest.approx(2 * elements * 2)  # read and write BF16
    assert gelu.compute == "fp32" and gelu.count == w.arch.num_layers
    assert gelu.fused is not None and gelu.fused.flops == gelu.flops


def test_splitting_the_gelu_out_keeps_the_block_s_bytes_operations_and_launches() -> None:
    w = get_workload("bert-base-imdb", precision="amp-bf16")
    arch, tokens = w.arch, w.batch_size * w.seq_len
    dt = activation_dtypes(w, dropout=True)
    ks = _kernels("bert-base-imdb", precision="amp-bf16")
    ew_bytes, ew_ops = transformer_cost._elementwise_bytes_per_token(arch, dt)
    pointwise = [ks["gelu"], ks["elementwise"], ks["layer_norm"]]
    assert sum(k.bytes for k in pointwise) == pytest.approx(tokens * ew_bytes)
    assert sum(k.ops for k in pointwise) == pytest.approx(ew_ops)
    launches = 2 + transformer_cost._elementwise_launches(arch, dt, ew_ops - 2)  # LayerNorms: 2
    assert sum(k.kernel_launches for k in pointwise) == pytest.approx(launches)


@pytest.mark.parametrize(("model", "why"), [("llama-3.2-1b-instruct", "swiglu"), ("gpt2", "python gelu")])
def test_models_without_an_erf_gelu_have_no_gelu_kernel(model: str, why: str) -> None:
    w = workload_for_model(model, mode="train", batch_size=2, seq_len=128)
    assert not transformer_cost.erf_gelu(w.arch), why
    assert "gelu" not in {k.name for k in transformer_cost.forward_kernels(w, 2, 128)}


def test_decoders_with_an_erf_gelu_have_one() -> None:
    w = workload_for_model("falcon-7b", mode="train", batch_size=1, seq_len=128)
    assert "gelu" in {k.name for k in transformer_cost.forward_kernels(w, 1, 128)}


def _gelu_time(gpu_id: str) -> tuple[float, float, float]:
    """(time, its compute floor, its bytes' time) of BERT-base's forward GELU on `gpu_id`."""
    w = get_workload("bert-base-imdb", precision="amp-bf16")
    gelu = _kernels("bert-base-imdb", precision="amp-bf16")["gelu"]
    gpu = get_gpu(gpu_id)
    t = speed.time_kernels([dataclasses.replace(gelu, count=1)], w, gpu, DEFAULT, host_seconds_per_op=0.0)
    compute = gelu.flops / gpu.peak("fp32")
    memory = gelu.bytes / (gpu.stream_bandwidth_bytes_s * DEFAULT.memory_efficiency)
    return t.gpu_seconds, compute, memory + DEFAULT.kernel_fixed_seconds


def test_the_gelu_is_bound_by_its_arithmetic_where_fp32_is_slow_against_bandwidth() -> None:
    seconds, compute, memory = _gelu_time("a100-80gb")  # 19.5 TFLOP/s FP32 for ~2 TB/s
    assert compute > memory
    assert seconds == pytest.approx(compute)
    seconds, compute, memory = _gelu_time("rtx-4090")  # 82.6 TFLOP/s for 1 TB/s
    assert memory > compute
    assert seconds == pytest.approx(memory)


def test_the_gelu_s_backward_keeps_its_fp32_arithmetic() -> None:
    w = get_workload("bert-base-imdb", precision="amp-bf16")
    kernels = speed.training_kernels(w, DEFAULT)
    backward = next(k for k in kernels if k.name == "gelu.backward")
    forward = next(k for k in kernels if k.name == "gelu")
    assert backward.compute == "fp32"
    assert backward.flops == pytest.approx(forward.flops * 122.0 / 95.0)


def test_the_compiled_step_times_the_same_gelu() -> None:
    w = get_workload("bert-base-imdb", precision="amp-bf16")
    compiled = {k.name: k for k in speed.training_kernels(w, TUNED)}
    assert compiled["gelu"].flops == _kernels("bert-base-imdb", precision="amp-bf16")["gelu"].flops
    assert compiled["gelu.backward"].compute == "fp32"


def test_the_fused_decode_step_carries_the_gelu_inside_its_gemvs_as_before() -> None:
    tuned = get_profile("torch", "tuned", use_user=False)
    w = workload_for_model("falcon-7b", mode="infer", batch_size=1)
    kernels = transformer_cost.forward_kernels(w, 1, 1, kv_len=64)
    assert "gelu" in {k.name for k in kernels}
    assert not {"gelu", "elementwise", "layer_norm"} & {
        k.name for k in speed.decode_as_run(kernels, 1, tuned)
    }
