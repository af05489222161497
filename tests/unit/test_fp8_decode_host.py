"""The host cost of fp8 Linear layers in an eager decode step (generate_ops.fp8_linear_calls and the
profile's fp8_linear_host_calls): counted per launch, priced by the profile, absent elsewhere."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.core.quant import parse_weights
from fitbench.estimate import generate_ops
from fitbench.estimate.api import estimate
from fitbench.estimate.profile import get_profile
from fitbench.workloads.hf_config import workload_from_data

LLAMA = {
    "model_type": "llama",
    "hidden_size": 1024,
    "num_hidden_layers": 6,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 2816,
    "vocab_size": 32000,
}
MIXTRAL = dict(LLAMA, model_type="mixtral", num_local_experts=8, num_experts_per_tok=2)
GEN = {"precision": "bf16", "batch_size": 1, "prompt_tokens": 64, "new_tokens": 32}


def workload(config: dict, weights: str | None):
    w = workload_from_data(config, name="m", source="test", **GEN)
    return dataclasses.replace(w, weights=parse_weights(weights) if weights else None)


def test_dense_fp8_counts_seven_linears_a_llama_layer() -> None:
    assert generate_ops.fp8_linear_calls(workload(LLAMA, "fp8")) == 7 * 6


def test_moe_fp8_counts_attention_router_and_two_grouped_launches() -> None:
    # q, k, v, o and the two grouped expert launches a layer (fp8 leaves the router in 16 bit)
    assert generate_ops.fp8_linear_calls(workload(MIXTRAL, "fp8")) == 6 * 6


@pytest.mark.parametrize("weights", [None, "int8", "int4", "q4_k_m"])
def test_other_formats_launch_no_fp8_linear(weights: str | None) -> None:
    assert generate_ops.fp8_linear_calls(workload(LLAMA, weights)) == 0


def test_eager_decode_pays_the_profiles_host_time_per_fp8_linear() -> None:
    w, gpu = workload(LLAMA, "fp8"), get_gpu("h200")
    base = get_profile("torch", "default", use_user=False)
    assert base.fp8_linear_host_calls > 1.0
    plain = dataclasses.replace(base, fp8_linear_host_calls=1.0)
    slow = estimate(w, gpu, profile=base)
    fast = estimate(w, gpu, profile=plain)
    assert slow.tokens_per_second < fast.tokens_per_second
    # a host-bound step: the difference is the extra host time of the 42 launches
    extra = 42 * (base.fp8_linear_host_calls - 1.0) * base.generate_host_seconds_per_op
    assert 1 / slow.tokens_per_second - 1 / fast.tokens_per_second == pytest.approx(extra, rel=0.35)


def test_bf16_and_tuned_decode_unchanged_by_the_fp8_launch_cost() -> None:
    gpu = get_gpu("h200")
    for w, profile in (
        (workload(LLAMA, None), get_profile("torch", "default", use_user=False)),
        (workload(LLAMA, "fp8"), get_profile("torch", "tuned", use_user=False)),
    ):
        plain = dataclasses.replace(profile, fp8_linear_host_calls=1.0)
        assert estimate(w, gpu, profile=profile).tokens_per_second == pytest.approx(
            estimate(w, gpu, profile=plain).tokens_per_second
        )
