"""The decode estimate follows the transformers release it models (profiles.toml
transformers_version, estimate/generate_ops.py CallCounts): before 5.23 a GQA layer attending
through a reached sliding window's mask copies keys and values to every query head (repeat_kv);
from 5.23 on it folds the query (pack_gqa). `fitbench run` holds a measurement against the release
it ran with (results/agreement.with_release)."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import generate_ops, transformer_cost
from fitbench.estimate.api import estimate
from fitbench.estimate.profile import get_profile
from fitbench.records.measurement import Measurement
from fitbench.results.agreement import with_release
from fitbench.workloads.hf_config import workload_from_data

MISTRAL = {
    "model_type": "mistral",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 32000,
    "sliding_window": 4096,
    "max_position_embeddings": 32768,
}
H200 = get_gpu("h200")


def generation(config: dict, prompt: int, batch: int = 4):
    return workload_from_data(
        config,
        name="m",
        source="test",
        mode="infer",
        precision="bf16",
        batch_size=batch,
        prompt_tokens=prompt,
        new_tokens=32,
    )


def decode_seconds(workload, release: str | None) -> float:
    profile = dataclasses.replace(
        get_profile("torch", "default", use_user=False), transformers_version=release
    )
    est = estimate(workload, H200, profile=profile)
    return workload.batch_size / est.tokens_per_second


@pytest.mark.parametrize(
    ("text", "expected"),
    [("5.17.0", (5, 17)), ("5.23.0.dev0", (5, 23)), ("4.57.6", (4, 57)), ("5.23rc1", (5, 23)), ("", None)],
)
def test_release_reads_major_and_minor(text, expected) -> None:
    assert generate_ops.release(text) == expected


def test_unreadable_or_missing_release_counts_as_the_newest() -> None:
    assert generate_ops.call_counts(None) is generate_ops.FROM_PACK_GQA
    assert generate_ops.call_counts("nightly") is generate_ops.FROM_PACK_GQA
    assert generate_ops.call_counts("5.22.2") is generate_ops.BEFORE_PACK_GQA
    assert generate_ops.call_counts("5.23.0") is generate_ops.FROM_PACK_GQA


def test_the_builtin_profile_models_the_reference_stack_release() -> None:
    assert get_profile("torch", "default", use_user=False).transformers_version == "5.17"
    # fitbench's own static decoder (tuned) and Paddle's generate are not transformers' loop
    assert get_profile("torch", "tuned", use_user=False).transformers_version is None


def test_repeat_kv_only_for_grouped_heads_past_the_window_before_5_23() -> None:
    arch = generation(MISTRAL, 6144).arch
    assert generate_ops.repeats_kv(arch, 6160, "5.17.0")
    assert not generate_ops.repeats_kv(arch, 6160, "5.24.0")
    assert not generate_ops.repeats_kv(arch, 2048, "5.17.0")  # window not reached: no mask
    mha = generation({**MISTRAL, "num_key_value_heads": 32}, 6144).arch
    assert not generate_ops.repeats_kv(mha, 6160, "5.17.0")  # nothing to repeat
    full = generation({**MISTRAL, "sliding_window": None}, 6144).arch
    assert not generate_ops.repeats_kv(full, 6160, "5.17.0")


def test_repeated_kv_bytes_are_the_window_for_every_query_head_twice() -> None:
    w = generation(MISTRAL, 6144)
    k = transformer_cost.repeated_kv_kernel(w, 4, 6160)
    # K and V of 32 query heads x 128 dims, 4096 window tokens, 4 sequences, bf16: written once
    # by the copy and read once more by the attention (beside the cache read it replaces)
    expanded = 2 * 32 * 128 * 2
    assert k.bytes == 2 * 4 * 4096 * expanded
    assert k.count == 32 and k.launches == 2 and k.ops == 0


def test_a_reached_window_decodes_slower_before_5_23() -> None:
    past = generation(MISTRAL, 6144)
    assert decode_seconds(past, "5.17") > 1.05 * decode_seconds(past, "5.24")
    # short of the window both releases run the same kernels; 5.17 issues one call a layer fewer
    # (no output reshape) and twelve more in its loop and rotary embedding
    short = generation(MISTRAL, 1024)
    assert decode_seconds(short, "5.17") == pytest.approx(decode_seconds(short, "5.24"), rel=0.03)


def test_a_run_is_held_against_the_release_it_ran_with() -> None:
    profile = get_profile("torch", "default", use_user=False)
    ran = Measurement.from_dict({"status": "ok", "environment": {"transformers": "5.24.0"}})
    assert with_release(profile, ran).transformers_version == "5.24.0"
    unknown = Measurement.from_dict({"status": "ok", "environment": {}})
    assert with_release(profile, unknown).transformers_version == "5.17"
    tuned = get_profile("torch", "tuned", use_user=False)
    assert with_release(tuned, ran).transformers_version is None
