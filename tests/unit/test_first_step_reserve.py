"""The caching allocator's rules and the first training step's reserve built on them.

estimate/allocator.py states PyTorch's rules (best fit, splitting, 2 MiB rounding, 20 MiB
segments for mid-sized requests); estimate/first_step.py runs a training step's gradients and
first optimizer step through them. What the reserve must do: appear where the parameter tensors
outgrow the activation blocks (a wide model at a small batch), vanish where they fit (a large
batch), and never move what must fit (the verdict and the largest batch read required_bytes).
benchmarks/allocator_phases.py measured the phases on a GPU; its file is compared in the README.
"""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate.allocator import LARGE_BUFFER, MiB, SegmentedPool, segment_bytes
from fitbench.estimate.api import estimate
from fitbench.estimate.breakdown import required_bytes
from fitbench.estimate.first_step import first_step, weight_matrices
from fitbench.estimate.memory import memory_breakdown
from fitbench.estimate.profile import get_profile
from fitbench.estimate.single_device import training_segments
from fitbench.workloads.presets import get_workload


def test_a_new_segment_is_rounded_as_the_allocator_rounds():
    assert segment_bytes(3 * MiB) == LARGE_BUFFER  # mid-sized: a 20 MiB segment
    assert segment_bytes(10 * MiB) == 10 * MiB
    assert segment_bytes(10 * MiB + 1) == 12 * MiB  # 2 MiB multiples from 10 MiB on


def _cached(*sizes_mib: int) -> SegmentedPool:
    """A pool holding one freed segment of each size."""
    pool = SegmentedPool()
    for i, size in enumerate(sizes_mib):
        pool.malloc(("cached", i), size * MiB)
    for i in range(len(sizes_mib)):
        pool.free(("cached", i))
    return pool


def test_best_fit_takes_the_smallest_block_and_keeps_the_rest():
    pool = _cached(100, 40, 60)
    pool.malloc("a", 50 * MiB)  # from the 60 MiB block, leaving 10 MiB
    pool.malloc("b", 35 * MiB)  # from the 40 MiB block
    pool.malloc("c", 90 * MiB)  # from the 100 MiB block
    assert pool.reserved == 200 * MiB  # no new segment
    pool.malloc("d", 10 * MiB)  # the 60 MiB block's rest
    assert pool.reserved == 200 * MiB


def test_a_request_larger_than_every_block_takes_a_segment_however_much_is_free():
    pool = _cached(*[64] * 10)  # 640 MiB free
    pool.malloc("x", 65 * MiB)
    assert pool.reserved == (640 + 66) * MiB  # rounded to 2 MiB


def test_small_requests_never_touch_the_large_pool():
    pool = SegmentedPool()
    pool.malloc("x", MiB)
    assert pool.reserved == 0 and pool.allocated == MiB


def test_freed_neighbours_merge_within_a_segment_but_segments_never_merge():
    pool = SegmentedPool()
    pool.malloc("x", 30 * MiB)  # a 30 MiB segment
    pool.malloc("y", 30 * MiB)  # no free block: a second segment
    assert pool.reserved == 60 * MiB
    pool.free("x")
    pool.free("y")
    pool.malloc("z", 50 * MiB)  # two free 30 MiB segments do not make one 50 MiB block
    assert pool.reserved == 110 * MiB
    pool.malloc("w1", 10 * MiB)  # split from a free 30 MiB segment ...
    pool.malloc("w2", 10 * MiB)  # ... and the rest of it
    pool.free("w1")
    pool.free("w2")  # merged back with its free neighbours: one 30 MiB block again
    pool.malloc("v", 30 * MiB)
    assert pool.reserved == 110 * MiB
    assert pool.peak_allocated == 80 * MiB  # z and v


def test_mid_sized_tensors_share_a_20_mib_segment():
    pool = SegmentedPool()
    for i, size in enumerate((3, 3, 8)):  # 14 MiB of mid-sized tensors: one 20 MiB segment
        pool.malloc(i, size * MiB)
    assert pool.reserved == LARGE_BUFFER
    pool.malloc("own", 12 * MiB)  # at least 10 MiB: a segment of its own
    assert pool.reserved == LARGE_BUFFER + 12 * MiB


def test_the_matrices_are_the_model_s_parameter_count_less_its_vectors():
    """Every parameter is in a matrix or a vector of at most a few hidden widths."""
    for name in ("llm-6b", "llm-70b", "bert-base-imdb"):
        arch = get_workload(name).arch
        matrices = sum(m.elements for seg in weight_matrices(arch) for m in seg)
        vectors = arch.param_count() - matrices
        assert 0 <= vectors < 200 * arch.hidden_size * arch.num_layers, name


def wide_training(batch: int):
    """A 6.7B-shaped block (4096 wide) at sequence 512 in AMP: a matrix of 4096 x 11008 FP32
    moments is 180 MB, an MLP activation of batch x 512 x 11008 at 16 bits 11 MB a sequence."""
    w = get_workload("llm-6b", mode="train", precision="amp-bf16", seq_len=512, batch_size=batch)
    return w.replace(arch=dataclasses.replace(w.arch, num_layers=4))


def test_moments_larger_than_every_activation_take_new_segments():
    w = wide_training(1)
    first = first_step(w, "torch", training_segments(w, "torch"))
    assert first is not None
    state_and_roots = 3 * 4 * w.param_count()  # two moments and the square root, FP32
    # nearly all of it: only the few tensors the logits blocks hold reuse the cache
    assert first.optimizer_segment_bytes > 0.8 * state_and_roots


def test_at_a_large_batch_the_activation_blocks_hold_the_optimizer_s_tensors():
    w = wide_training(64)
    first = first_step(w, "torch", training_segments(w, "torch"))
    assert first is not None
    assert first.optimizer_segment_bytes == 0


def test_fused_adam_has_no_square_roots_to_place():
    w = wide_training(1)
    foreach = first_step(w, "torch", training_segments(w, "torch"))
    fused = first_step(w.replace(optimizer_impl="fused"), "torch", training_segments(w, "torch"))
    assert foreach is not None and fused is not None
    roots = 4 * w.param_count()
    assert foreach.optimizer_segment_bytes - fused.optimizer_segment_bytes == pytest.approx(roots, rel=0.05)


def test_the_reserve_shows_in_the_peak_but_not_in_what_must_fit():
    h200 = get_gpu("h200")
    small = estimate(wide_training(1), h200)
    assert small.memory.details.get("first_step_segments", 0) > 0
    assert small.breakdown["fragmentation"] >= small.memory.details["first_step_segments"]
    assert small.peak_memory_bytes - small.required_memory_bytes == small.breakdown["fragmentation"]
    # at a large batch the optimizer's tensors fit the activation blocks; what the first step
    # leaves beyond the peak then is only the next step's blocks, which the states took
    large = estimate(wide_training(64), h200)
    assert large.memory.details.get("first_step_optimizer_segments", 0) == 0


def test_the_tuned_mode_keeps_the_first_steps_segments_in_its_peak():
    """backends/torch/tuned.py compiles by running one real step, the first optimizer step
    included, and releases the cached blocks only after it: nvidia-smi's process peak has seen
    the first step's segments (tuned-oos-h200-2026-12-04*.json: the NVML peak is the warm-up's
    reserved peak plus the context, 64.6 vs 63.8 + 0.9 GB for Qwen2.5-1.5B)."""
    # momentum SGD: the tuned step keeps autocast's FP32 weights, whose momentum buffers the first
    # step makes (AdamW keeps 16-bit weights, whose moments exist before it: see below)
    job = wide_training(1).replace(optimizer="momentum")
    default = estimate(job, get_gpu("h200"))
    assert default.memory.details.get("first_step_segments", 0) > 0
    profile = get_profile("torch", "tuned", use_user=False)
    without_warmup = memory_breakdown(job, dataclasses.replace(profile, capture_warmup_share=0.0))
    assert without_warmup.details.get("first_step_segments", 0) > 0
    # the later moment, the capture's side-stream warm-up (Profile.capture_warmup_share), may
    # reserve more: the peak is the larger of the two, never their sum
    tuned = memory_breakdown(job, profile)
    warmup = tuned.details["capture_warmup_reserve"]
    assert tuned.total == pytest.approx(
        max(
            without_warmup.total,
            without_warmup.total - without_warmup.details["first_step_segments"] + warmup,
        ),
        abs=2,  # the parts are rounded to whole bytes one by one
    )
    assert required_bytes(tuned) < tuned.total


@pytest.mark.parametrize(
    "overrides",
    [
        {"peft": "qlora"},
        {"grad_accum": 4},
    ],
)
def test_it_applies_to_full_and_lora_training_step_by_step(overrides):
    """Not to QLoRA (bitsandbytes' transient dequantized weights are not laid out), nor to
    accumulation (other liveness), nor to Paddle (another allocator)."""
    w = wide_training(1).replace(**overrides)
    assert first_step(w, "torch", training_segments(w, "torch")) is None
    assert first_step(wide_training(1), "paddle", training_segments(w, "paddle")) is None


@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_what_stays_reserved_beyond_the_later_peak_is_at_most_the_activation_blocks(impl):
    """Every gradient and moment is alive at the later steps' peak too: what the first step adds
    beyond it are the activations' blocks it kept cached beside them (and the square roots'
    segments, which the later peak also holds). Counting a gradient twice would break this."""
    w = wide_training(1).replace(optimizer_impl=impl)
    first = first_step(w, "torch", training_segments(w, "torch"))
    assert first is not None
    est = estimate(w, get_gpu("h200"))
    assert 0 < est.memory.details["first_step_segments"] <= 1.1 * first.activation_block_bytes


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_estimate_says_how_much_of_the_fragmentation_is_the_first_step(lang, capsys):
    """The reserve is printed under the breakdown in the reader's language and is the JSON's
    first_step_reserve_bytes; at a large batch, whose blocks hold the optimizer's tensors, it is
    a smaller share of the peak."""
    import json

    from fitbench.cli.main import main
    from fitbench.core.units import format_bytes

    args = ["estimate", "llm-6b", "--mode", "train", "--seq-len", "512", "--precision", "amp-bf16"]
    args += ["--gpu", "h200", "--lang", lang]
    main([*args, "--batch", "1", "--json"])
    reserve = json.loads(capsys.readouterr().out)["estimates"][0]["first_step_reserve_bytes"]
    assert reserve and reserve > 0
    main([*args, "--batch", "1"])
    text = capsys.readouterr().out
    assert format_bytes(reserve) in text
    assert ("first step" in text) if lang == "en" else ("首步" in text)
    main([*args, "--batch", "1", "--json"])
    small = json.loads(capsys.readouterr().out)["estimates"][0]
    main([*args, "--batch", "64", "--json"])
    large = json.loads(capsys.readouterr().out)["estimates"][0]
    assert (large["first_step_reserve_bytes"] or 0) / large["peak_memory_bytes"] < (
        small["first_step_reserve_bytes"] / small["peak_memory_bytes"]
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tuned_estimate_says_what_the_capture_warmup_reserves(lang, capsys):
    """A compiled tuned training step's side-stream warm-up reserve is the JSON's
    capture_warmup_reserve_bytes (Profile.capture_warmup_share of the step's dynamic memory) and is
    printed in the reader's language; the default mode has none."""
    import json

    from fitbench.cli.main import main
    from fitbench.core.units import format_bytes

    args = ["estimate", "bert-base-imdb", "--gpu", "h100-sxm", "--lang", lang]
    main([*args, "--exec", "tuned", "--json"])
    est = json.loads(capsys.readouterr().out)["estimates"][0]
    reserve = est["capture_warmup_reserve_bytes"]
    assert reserve and 0 < reserve < est["breakdown"]["fragmentation"]
    dynamic = sum(est["breakdown"][k] for k in ("activations", "temporaries", "gradients"))
    share = get_profile("torch", "tuned", use_user=False).capture_warmup_share
    assert reserve == pytest.approx(share * dynamic, rel=1e-6, abs=2)
    assert est["peak_memory_bytes"] - est["required_memory_bytes"] >= reserve
    main([*args, "--exec", "tuned"])
    text = capsys.readouterr().out
    assert format_bytes(reserve) in text
    assert ("side stream" in text) if lang == "en" else ("副流" in text)
    main([*args, "--json"])
    assert json.loads(capsys.readouterr().out)["estimates"][0]["capture_warmup_reserve_bytes"] is None


def test_a_checkpointed_backward_recomputes_each_block_into_the_cache():
    """With checkpointing the forward keeps each block's input alone, and one block's tensors,
    cut and freed by every block in turn, sit cached: the backward recomputes a block into them,
    frees them with its input, and its gradients are carved from what is cached. The gradients
    then find less cached than after a plain forward (whose every block stays cut), so they take
    at least the plain step's new segments."""
    plain = wide_training(1)
    checkpointed = plain.replace(checkpointing=True)
    a = first_step(plain, "torch", training_segments(plain, "torch"))
    b = first_step(checkpointed, "torch", training_segments(checkpointed, "torch"))
    assert a is not None and b is not None
    assert (
        b.gradient_segment_bytes + b.optimizer_segment_bytes
        >= a.gradient_segment_bytes + a.optimizer_segment_bytes
    )
    assert b.activation_block_bytes == a.activation_block_bytes  # the same tensors, recomputed


def test_lora_replays_its_adapters_beside_the_frozen_model_s_blocks():
    """LoRA's frozen base has no gradients or moments: the replay lays out the activation and
    loss blocks, and the adapters' FP32 gradients and moments, which a rank-256 adapter of a
    4096 x 11008 matrix makes large-pool requests of (11 MB); peft.py lists them."""
    from fitbench.estimate.peft import _replayed

    w = wide_training(1).replace(peft="lora", precision="bf16")
    assert first_step(w, "torch", training_segments(w, "torch")) is None  # no adapter list
    small, large = _replayed(w, "torch", False), _replayed(w.replace(lora_rank=256), "torch", False)
    assert small is not None and large is not None
    assert small.optimizer_segment_bytes < large.optimizer_segment_bytes + 1
    assert large.peak_reserved_bytes > small.peak_reserved_bytes


def test_sixteen_bit_weights_make_their_moments_before_the_first_step():
    """The tuned AdamW step keeps the Linear weights in bf16 with FP32 masters and moments made
    with the optimizer (backends/torch/master_weights.py): the replay lays those moments out before
    the forward, so the first optimizer step takes segments only for the embeddings' moments, and
    the matrices' gradients are bf16 (fused, as the tuned mode runs it: no square-root list)."""
    w = wide_training(1).replace(optimizer_impl="fused")
    segments = training_segments(w, "torch")
    fp32 = first_step(w, "torch", segments)
    sixteen = first_step(w, "torch", segments, sixteen_bit=True)
    assert fp32 is not None and sixteen is not None
    embedding_moments = 2 * 4 * w.arch.vocab_size * w.arch.hidden_size
    assert sixteen.optimizer_segment_bytes <= embedding_moments < fp32.optimizer_segment_bytes
    assert sixteen.gradient_segment_bytes <= fp32.gradient_segment_bytes
