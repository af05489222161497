"""vLLM V1's hybrid KV groups for models with window layers (estimate/kv_groups.py), and the
serving plan's figures that follow from them, worked by hand from vllm/v1/core/kv_cache_utils.py's
rules for three layouts: equal counts (gpt-oss), 5:1 with padding (Gemma-3 27B), all windowed
(Mistral-7B v0.1), and Llama-4's chunks."""

from __future__ import annotations

import math

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate.kv_groups import kv_groups
from fitbench.estimate.serving import ServeConfig, memory_plan, serving_estimate
from fitbench.workloads import library


def _arch(name: str):
    return library.workload_for_model(name).arch


def test_equal_counts_make_one_group_of_each() -> None:
    g = kv_groups(_arch("gpt-oss-20b"), "v1")  # 12 window layers (128 tokens), 12 full
    assert g is not None and (g.layers_per_group, g.full_groups, g.window_groups) == (12, 1, 1)
    # a 131,072-token request: every block in the full group, the window's and one batch's in the other
    assert g.blocks_per_request(131072, 16, 8192) == 8192 + math.ceil((127 + 8192) / 16) + 1


def test_five_to_one_pads_the_window_layers_into_groups_of_the_full_count() -> None:
    g = kv_groups(_arch("gemma-3-27b-it"), "v1")  # 52 window layers, 10 full
    assert g is not None and (g.layers_per_group, g.full_groups, g.window_groups) == (10, 1, 6)
    assert g.groups * g.layers_per_group == 70  # 62 layers and 8 padding ones


def test_a_model_of_window_layers_only_is_one_group_and_v0_never_groups() -> None:
    mistral = _arch("mistral-7b-v0.1")
    g = kv_groups(mistral, "v1")
    assert g is not None and (g.layers_per_group, g.full_groups, g.window_groups) == (32, 0, 1)
    assert kv_groups(mistral, "v0") is None
    assert kv_groups(_arch("llama-3.1-8b-instruct"), "v1") is None


def test_llama4_chunks_hold_one_chunk_and_one_batch() -> None:
    g = kv_groups(_arch("llama-4-scout-17b-16e-instruct"), "v1")  # 36 chunked, 12 full
    assert g is not None and g.chunked and (g.layers_per_group, g.full_groups, g.window_groups) == (12, 1, 3)
    assert g.window_blocks(100_000, 16, 8192) == math.ceil((8192 + 8192) / 16)
    assert g.window_blocks(1000, 16, 8192) == math.ceil(1000 / 16)


def test_the_plan_shares_the_pool_as_vllm_does() -> None:
    """num_blocks = KV bytes // (a layer's block x layers per group); the logged size divides the
    blocks over the groups; concurrency divides them by a request's blocks in every group."""
    w = library.workload_for_model("gemma-3-27b-it")
    h100 = get_gpu("h100-sxm")
    config = ServeConfig(context=32768)
    plan = memory_plan(w, h100, config)
    assert plan.groups is not None
    per_layer_block = plan.kv_bytes_per_token / w.arch.num_layers * 16
    assert plan.num_blocks == int(plan.kv_cache_bytes // (per_layer_block * 10))
    assert plan.kv_tokens == plan.num_blocks // 7 * 16
    per_request = math.ceil(32768 / 16) + 6 * (math.ceil((1023 + plan.profile_tokens) / 16) + 1)
    assert plan.max_concurrency(32768) == pytest.approx(plan.num_blocks / per_request)
    # against one group of all 62 layers: fewer tokens logged (the padding), but a long request
    # holds far fewer blocks
    uniform = plan.kv_cache_bytes // (plan.kv_bytes_per_token * 16)
    assert plan.kv_tokens < uniform * 16
    assert plan.max_concurrency(32768) > 2 * uniform / (32768 / 16)


def test_serving_estimate_reports_the_grouped_capacity() -> None:
    w = library.workload_for_model("gpt-oss-20b")
    long = serving_estimate(w, get_gpu("h100-sxm"), ServeConfig(context=131072))
    v0 = serving_estimate(w, get_gpu("h100-sxm"), ServeConfig(context=131072, engine="v0"))
    assert long.max_concurrent_sequences > 1.8 * v0.max_concurrent_sequences * (
        v0.plan.kv_cache_bytes / long.plan.kv_cache_bytes
    )
