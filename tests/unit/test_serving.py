"""The serving estimate: vLLM's memory plan, paged KV blocks, concurrency and throughput."""

from __future__ import annotations

import itertools

import pytest

from fitbench.catalog import resolve_gpus
from fitbench.core.units import GiB
from fitbench.errors import FitbenchError
from fitbench.estimate import kv_cache, serving
from fitbench.estimate.serving import ServeConfig, memory_plan, serving_estimate
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

LLAMA3_8B = TransformerArch(
    kind="decoder",
    vocab_size=128256,
    hidden_size=4096,
    num_layers=32,
    num_heads=32,
    num_kv_heads=8,
    intermediate_size=14336,
    mlp="swiglu",
    norm="rmsnorm",
    position="rotary",
    qkv_bias=False,
    out_bias=False,
    mlp_bias=False,
    pooler=False,
    num_labels=0,
    max_positions=131072,
)


def _gpu(gid: str):
    return resolve_gpus([gid])[0]


def _llama(**kw) -> Workload:
    base = {
        "name": "llama3-8b",
        "arch": LLAMA3_8B,
        "mode": "infer",
        "precision": "bf16",
        "prompt_tokens": 512,
        "new_tokens": 256,
    }
    return Workload(**{**base, **kw})


def test_kv_bytes_per_token_is_two_kv_heads_head_dim_and_dtype_per_layer() -> None:
    # 2 (K, V) x 32 layers x 8 heads x 128 x 2 bytes = 128 KiB, the published Llama-3-8B figure.
    assert kv_cache.kv_cache_bytes_per_token(_llama()) == 131072
    # Tensor parallelism splits the 8 KV heads, and replicates them beyond 8 GPUs.
    assert kv_cache.kv_cache_bytes_per_token(_llama(), tp=2) == 65536
    assert kv_cache.kv_cache_bytes_per_token(_llama(), tp=16) == 16384


def test_the_plan_spends_the_requested_memory_in_vllms_order() -> None:
    plan = memory_plan(_llama(), _gpu("h100-sxm"), ServeConfig())
    parts = plan.weights_bytes + plan.activation_bytes + plan.non_torch_bytes + plan.cudagraph_bytes
    assert parts + plan.kv_cache_bytes == plan.requested_bytes
    assert plan.requested_bytes == int(0.9 * _gpu("h100-sxm").usable_bytes)
    page = plan.kv_bytes_per_token * plan.block_size
    assert plan.num_blocks * page <= plan.kv_cache_bytes < (plan.num_blocks + 1) * page
    assert plan.kv_tokens == plan.num_blocks * 16


def test_vllms_batch_defaults_depend_on_the_card() -> None:
    h100 = memory_plan(_llama(), _gpu("h100-sxm"), ServeConfig())
    a100 = memory_plan(_llama(), _gpu("a100-80gb"), ServeConfig())  # vLLM keeps the A100 on the small ones
    rtx = memory_plan(_llama(), _gpu("rtx-4090"), ServeConfig())
    assert (h100.profile_tokens, h100.max_num_seqs) == (8192, 1024)
    assert (a100.profile_tokens, a100.max_num_seqs) == (2048, 256)
    assert (rtx.profile_tokens, rtx.max_num_seqs) == (2048, 256)
    # The sampler's 1024 rows of a 128k vocabulary dominate the profile run on the H100.
    assert h100.activation_bytes == 1024 * 128256 * serving.SAMPLER_BYTES_PER_LOGIT


def test_more_utilization_more_blocks_and_graphs_count_only_in_the_current_engine() -> None:
    gpu = _gpu("rtx-4090")
    low = memory_plan(_llama(), gpu, ServeConfig(gpu_memory_utilization=0.8))
    high = memory_plan(_llama(), gpu, ServeConfig(gpu_memory_utilization=0.95))
    assert high.num_blocks > low.num_blocks
    legacy = memory_plan(_llama(), gpu, ServeConfig(engine="v1-legacy"))
    current = memory_plan(_llama(), gpu, ServeConfig())
    assert legacy.cudagraph_bytes == 0 and current.cudagraph_bytes == serving.CUDAGRAPH_BYTES
    assert legacy.kv_cache_bytes - current.kv_cache_bytes == serving.CUDAGRAPH_BYTES


def test_v0_profiles_a_whole_max_model_len_prompt() -> None:
    plan = memory_plan(_llama(), _gpu("rtx-3090"), ServeConfig(context=20000, engine="v0"))
    assert plan.profile_tokens == 20000
    # Gate/up, the activated product and three hidden-size buffers a token, in 16 bit.
    assert plan.activation_bytes == 20000 * (3 * 14336 + 3 * 4096) * 2


def test_tensor_parallel_plan_holds_half_the_weights_and_twice_the_tokens_per_byte() -> None:
    one = memory_plan(_llama(), _gpu("h100-sxm"), ServeConfig(), tp=1)
    two = memory_plan(_llama(gpus=2, strategy="tp"), _gpu("h100-sxm"), ServeConfig(), tp=2)
    assert two.weights_bytes == pytest.approx(one.weights_bytes / 2, rel=0.01)
    assert two.non_torch_bytes == one.non_torch_bytes + serving.NCCL_BYTES
    assert two.kv_tokens > 2 * one.kv_tokens


def test_serving_estimate_reports_capacity_ttft_and_a_rising_then_flattening_curve() -> None:
    est = serving_estimate(_llama(), _gpu("h100-sxm"), ServeConfig(context=8192))
    assert est.fits and est.reason == ""
    assert est.max_concurrent_sequences == pytest.approx(est.plan.num_blocks / (8192 / 16))
    assert est.ttft_seconds is not None and 0 < est.ttft_seconds < 1
    tps = [p.tokens_per_second for p in est.curve]
    per_user = [p.per_sequence_tokens_per_second for p in est.curve]
    # Rising (flat past the knee, to rounding) in total, falling per user.
    assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(tps))
    assert all(b <= a * (1 + 1e-9) for a, b in itertools.pairwise(per_user))
    assert tps[-1] > 10 * tps[0]
    assert est.curve[0].concurrency == 1 and est.curve[-1].concurrency == est.max_concurrent_requests
    assert est.max_concurrent_requests <= est.plan.max_num_seqs
    assert est.knee_concurrency in [p.concurrency for p in est.curve]
    # Bandwidth-bound at one user: the step reads every weight for a single token.
    assert est.curve[0].bottleneck == "memory"
    d = est.to_dict()
    assert d["kv_cache_tokens"] == est.plan.kv_tokens and d["throughput"][0]["concurrency"] == 1
    assert d["speed_profile"] == "torch.tuned"


def test_what_does_not_fit_says_why() -> None:
    weights = serving_estimate(get_workload("llm-6b"), _gpu("rtx-3060-12gb"))
    assert not weights.fits and weights.reason == "weights" and weights.curve == ()
    context = serving_estimate(_llama(), _gpu("rtx-4090"), ServeConfig(context=500_000))
    assert not context.fits and context.reason == "context"


def test_an_engine_serves_16_bit_weights_even_when_fp32_was_asked() -> None:
    est = serving_estimate(_llama(precision="fp32"), _gpu("h100-sxm"))
    assert est.workload.precision == "bf16"
    assert serving_estimate(_llama(precision="fp32"), _gpu("t4")).workload.precision == "fp16"


def test_bad_serving_inputs_are_one_line_errors() -> None:
    with pytest.raises(FitbenchError):
        ServeConfig(gpu_memory_utilization=1.5)
    with pytest.raises(FitbenchError, match="generation"):
        serving_estimate(get_workload("bert-base-imdb"), _gpu("h100-sxm"))
    with pytest.raises(FitbenchError, match="tensor parallelism"):
        serving_estimate(_llama(gpus=2, strategy="ddp"), _gpu("h100-sxm"))


def test_weights_given_by_a_log_replace_fitbenchs_count() -> None:
    plan = memory_plan(_llama(), _gpu("h100-sxm"), ServeConfig(), weights_bytes=int(20 * GiB))
    assert plan.weights_bytes == int(20 * GiB)


def test_an_engine_decodes_the_real_context_not_a_padded_static_cache() -> None:
    """vLLM's paged cache holds each request's real context: serving times its decode steps with
    the tuned profile as an engine (Profile.as_engine), not with the padded static cache that
    fitbench's own compiled decode step attends over (above the 32 sequences its fused kernels
    take)."""
    from fitbench.estimate import speed as timing
    from fitbench.estimate.profile import get_profile

    tuned = get_profile("torch", "tuned", use_user=False)
    engine = tuned.as_engine()
    assert tuned.decode_cache_align > 0 and engine.decode_cache_align == 0
    assert engine.decode_compiled_memory_efficiency == tuned.decode_compiled_memory_efficiency
    w = get_workload("llm-6b", batch_size=48, prompt_tokens=128, new_tokens=2048)
    assert tuned.runs_other_decode_step(48)
    h200 = resolve_gpus(["h200"])[0]
    own = timing.generation(w, h200, tuned).decode
    served = timing.generation(w, h200, engine).decode
    assert served.bytes < own.bytes and served.seconds < own.seconds
