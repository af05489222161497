"""Generation whose KV cache grows by concatenation (transformers' DynamicCache, fitbench's Paddle
decoder) copies the whole cache every decode step: the real cache does so, and the estimator's
decode step reads and writes it once more for the modes that run it, and not for the others."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import kv_cache, speed, transformer_cost
from fitbench.estimate.profile import get_profile
from fitbench.workloads.presets import get_workload

H200 = get_gpu("h200")


@pytest.mark.torch
def test_transformers_dynamic_cache_replaces_each_layer_s_keys_and_values_by_a_longer_copy() -> None:
    torch = pytest.importorskip("torch")
    cache_utils = pytest.importorskip("transformers.cache_utils")
    cache = cache_utils.DynamicCache()
    k = torch.randn(2, 4, 5, 8)
    cache.update(k, k.clone(), layer_idx=0)
    before = cache.layers[0].keys
    step = torch.randn(2, 4, 1, 8)
    keys, values = cache.update(step, step.clone(), layer_idx=0)
    assert keys.shape[-2] == 6 and values.shape[-2] == 6
    # a new tensor, not the old storage grown in place: the old cache was read and copied
    assert keys.data_ptr() != before.data_ptr()
    assert torch.equal(keys[..., :5, :], k) and torch.equal(keys[..., 5:, :], step)


def _gpu_bound_generation():
    """A 6.7B model generating for 32 sequences at a 4k context: its 16-bit cache (~70 GB) is
    several times its weights, so the decode step is bound by the GPU."""
    return get_workload("llm-6b").replace(batch_size=32, prompt_tokens=4096, new_tokens=64)


def test_the_default_mode_s_decode_step_copies_the_cache_beside_reading_it() -> None:
    w = _gpu_bound_generation()
    default = get_profile("torch", "default", use_user=False)
    assert default.kv_cache_concat
    with_copy = speed.generation(w, H200, default)
    without = speed.generation(w, H200, dataclasses.replace(default, kv_cache_concat=False))
    mean_context = w.prompt_tokens + w.new_tokens // 2
    append = transformer_cost.cache_append_kernel(w, w.batch_size, mean_context)
    cache = kv_cache.kv_bytes_per_token_layer(w) * w.batch_size * mean_context
    assert append.bytes == pytest.approx(2 * cache) and append.count == w.arch.num_layers
    assert with_copy.decode.bytes - without.decode.bytes == pytest.approx(append.bytes * append.count)
    # GPU-bound: the copy's bytes at the decode step's share of the card's streaming rate, plus
    # its two launches a layer
    extra = with_copy.decode.gpu_seconds - without.decode.gpu_seconds
    rate = H200.stream_bandwidth_bytes_s * default.decode_step_efficiency(w.batch_size)
    streamed = append.bytes * append.count / rate
    assert streamed <= extra <= streamed * 1.01
    assert with_copy.decode.gpu_seconds > with_copy.decode.host_seconds
    # the roofline is what any implementation must read: the copy is not in it
    assert with_copy.roofline_tokens_per_second == pytest.approx(without.roofline_tokens_per_second)


def test_static_and_paged_caches_write_the_token_in_place() -> None:
    w = _gpu_bound_generation()
    default = get_profile("torch", "default", use_user=False)
    assert not get_profile("torch", "tuned", use_user=False).kv_cache_concat  # its static cache
    engine = default.as_engine()  # vLLM and its peers: paged caches
    assert not engine.kv_cache_concat
    append = transformer_cost.cache_append_kernel(w, w.batch_size, w.prompt_tokens + w.new_tokens // 2)
    gap = speed.generation(w, H200, default).decode.bytes - speed.generation(w, H200, engine).decode.bytes
    assert gap == pytest.approx(append.bytes * append.count)


def test_paddle_s_decoder_concatenates_too() -> None:
    assert get_profile("paddle", "default", use_user=False).kv_cache_concat


def test_a_quantized_cache_is_not_counted_as_a_16_bit_copy() -> None:
    w = _gpu_bound_generation().replace(kv_cache="int8")
    default = get_profile("torch", "default", use_user=False)
    off = dataclasses.replace(default, kv_cache_concat=False)
    assert speed.generation(w, H200, default).decode.bytes == speed.generation(w, H200, off).decode.bytes


def test_the_estimate_says_so_where_it_counts_the_copy() -> None:
    from fitbench.estimate.assumptions import estimate_assumptions

    w = _gpu_bound_generation()
    default = get_profile("torch", "default", use_user=False)
    tuned = get_profile("torch", "tuned", use_user=False)
    said = [line for line in estimate_assumptions(w, w.precision, H200, default) if "concatenation" in line]
    assert len(said) == 1 and "read and written once more" in said[0]
    assert not [
        line for line in estimate_assumptions(w, w.precision, H200, tuned) if "grows every layer" in line
    ]


def test_naming_the_compute_dtype_as_the_cache_dtype_still_counts_the_copy() -> None:
    w = _gpu_bound_generation()
    named = w.replace(kv_cache=w.kv_cache_dtype)
    default = get_profile("torch", "default", use_user=False)
    assert speed.copies_cache_each_step(named, default) and speed.copies_cache_each_step(w, default)
    assert (
        speed.generation(named, H200, default).decode.bytes == speed.generation(w, H200, default).decode.bytes
    )
