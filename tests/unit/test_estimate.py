"""The estimator against exact parameter counts, its own invariants, and the brief's verdicts."""

from __future__ import annotations

import pytest

from fitbench.catalog import get_gpu, load_catalog
from fitbench.estimate.api import estimate
from fitbench.estimate.memory import memory_breakdown, needed_bytes, peak_bytes
from fitbench.estimate.profile import get_profile
from fitbench.estimate.verdict import FITS, OOM, TIGHT, max_fitting, verdict
from fitbench.estimate.weights import quantizable_params, weight_bytes
from fitbench.workloads.arch import ResNetArch
from fitbench.workloads.presets import PRESETS, get_workload

PROFILE = get_profile("torch", "default", use_user=False)


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        ("resnet50-cifar10", 23_528_522),  # torchvision resnet50(num_classes=10)
        ("bert-base-imdb", 109_483_778),  # BertForSequenceClassification, 2 labels
        ("llm-6b", 6_738_415_616),  # Llama-7B
    ],
)
def test_golden_parameter_counts(workload: str, expected: int) -> None:
    assert get_workload(workload).param_count() == expected


def test_resnet_imagenet_counts_match_torchvision() -> None:
    assert ResNetArch(depth=50, num_classes=1000).param_count() == 25_557_032
    assert ResNetArch(depth=18, num_classes=1000).param_count() == 11_689_512
    assert ResNetArch(depth=152, num_classes=1000).param_count() == 60_192_808


CASES = [
    ("resnet50-cifar10", {}),
    ("resnet50-cifar10", {"precision": "amp-fp16"}),
    ("resnet50-cifar10", {"mode": "infer"}),
    ("resnet50-cifar10", {"checkpointing": True}),
    ("bert-base-imdb", {}),
    ("bert-base-imdb", {"precision": "amp-bf16"}),
    ("bert-base-imdb", {"precision": "bf16"}),
    ("bert-base-imdb", {"attention": "eager"}),
    ("bert-base-imdb", {"mode": "infer"}),
    ("bert-base-imdb", {"optimizer": "sgd"}),
    ("bert-base-imdb", {"checkpointing": True}),
    ("llm-6b", {}),
    ("llm-6b", {"precision": "int8"}),
    ("llm-6b", {"precision": "int4"}),
    ("llm-6b", {"batch_size": 16}),
    ("llm-6b", {"mode": "train", "seq_len": 512, "precision": "amp-bf16"}),
    ("llm-70b", {}),
    ("resnet50-imagenet", {}),
]


@pytest.mark.parametrize(("name", "overrides"), CASES)
@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_breakdown_adds_up_and_is_non_negative(name: str, overrides: dict, framework: str) -> None:
    est = estimate(get_workload(name, **overrides), get_gpu("a100-80gb"), framework=framework)
    parts = est.breakdown
    assert sum(parts.values()) == est.peak_memory_bytes
    assert all(v >= 0 for v in parts.values())
    assert parts["weights"] > 0 and parts["cuda_context"] > 0
    d = est.to_dict()
    for key in (
        "gpu",
        "workload",
        "precision",
        "batch_size",
        "verdict",
        "peak_memory_bytes",
        "breakdown",
        "max_batch_size",
        "step_seconds",
        "epoch_seconds",
        "tokens_per_second",
        "bottleneck",
    ):
        assert key in d
    assert d["bottleneck"] in ("compute", "memory", "overhead")
    assert d["step_seconds"] > 0


@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb", "llm-6b"])
def test_memory_grows_with_batch(name: str) -> None:
    """What must fit grows with the batch, and so does the peak apart from the first training
    step's new segments (estimate/first_step.py): those shrink as the activations' blocks grow
    large enough to hold the optimizer's tensors, so nvidia-smi's peak may dip by that much."""
    batches = (1, 2, 8, 32, 128, 1024, 4096)
    needed = [needed_bytes(get_workload(name, batch_size=b), PROFILE) for b in batches]
    assert needed == sorted(needed) and needed[-1] > needed[0]
    peaks = []
    for b in batches:
        memory = memory_breakdown(get_workload(name, batch_size=b), PROFILE)
        peaks.append(memory.total - memory.details.get("first_step_segments", 0))
    assert peaks == sorted(peaks) and peaks[-1] > peaks[0]


def test_memory_grows_with_sequence_length_and_image_size() -> None:
    bert = [peak_bytes(get_workload("bert-base-imdb", seq_len=s), PROFILE) for s in (64, 128, 256, 512)]
    assert bert == sorted(bert) and bert[-1] > bert[0]
    resnet = [peak_bytes(get_workload("resnet50-cifar10", image_size=s), PROFILE) for s in (32, 64, 128, 224)]
    assert resnet == sorted(resnet) and resnet[-1] > resnet[0]


def test_amp_lowers_bert_peak_and_eager_attention_raises_it() -> None:
    gpu = get_gpu("rtx-3060-12gb")
    fp32 = estimate(get_workload("bert-base-imdb"), gpu)
    amp = estimate(get_workload("bert-base-imdb", precision="amp-fp16"), gpu)
    eager = estimate(get_workload("bert-base-imdb", attention="eager"), gpu)
    assert amp.peak_memory_bytes < 0.85 * fp32.peak_memory_bytes
    assert amp.breakdown["activations"] < 0.7 * fp32.breakdown["activations"]
    assert eager.peak_memory_bytes > fp32.peak_memory_bytes
    assert amp.step_seconds < fp32.step_seconds


def test_checkpointing_trades_activations_for_time() -> None:
    gpu = get_gpu("a100-40gb")
    plain = estimate(get_workload("bert-base-imdb"), gpu)
    ckpt = estimate(get_workload("bert-base-imdb", checkpointing=True), gpu)
    assert ckpt.breakdown["activations"] < plain.breakdown["activations"] / 3
    assert ckpt.step_seconds > plain.step_seconds


def test_int8_and_int4_weights_are_a_half_and_a_quarter_of_fp16_plus_scales() -> None:
    fp16 = get_workload("llm-6b")
    int8 = get_workload("llm-6b", precision="int8")
    int4 = get_workload("llm-6b", precision="int4")
    w16, s16 = weight_bytes(fp16)
    w8, s8 = weight_bytes(int8)
    w4, s4 = weight_bytes(int4)
    q = quantizable_params(fp16)
    rest16 = w16 - 2 * q
    assert s16 == 0 and s8 > 0 and s4 > 0
    assert w8 - rest16 == 2 * q // 2
    assert w4 - rest16 == 2 * q // 4
    # scales are small: < 1 % (int8 per row) and ~3 % (int4 per 64-block) of the packed weights
    assert s8 < 0.01 * (w8 - rest16) and s4 < 0.15 * (w4 - rest16)


def test_optimizer_state_follows_the_optimizer() -> None:
    states = {
        opt: estimate(get_workload("bert-base-imdb", optimizer=opt), get_gpu("h100-sxm")).breakdown[
            "optimizer_state"
        ]
        for opt in ("adam", "momentum", "sgd")
    }
    params = get_workload("bert-base-imdb").param_count()
    assert states == {"adam": 8 * params, "momentum": 4 * params, "sgd": 0}


def test_paddle_pure_half_keeps_fp32_master_weights() -> None:
    w = get_workload("bert-base-imdb", precision="bf16")
    torch_est = estimate(w, get_gpu("a100-40gb"), framework="torch")
    paddle_est = estimate(w, get_gpu("a100-40gb"), framework="paddle")
    assert torch_est.breakdown["master_weights"] == 0
    assert paddle_est.breakdown["master_weights"] == 4 * w.param_count()


# -- the brief's conclusions -------------------------------------------------------------------


def test_6b_fp16_does_not_fit_12gb_loads_on_24gb_fits_40gb_and_batches() -> None:
    w = get_workload("llm-6b")
    assert estimate(w, get_gpu("rtx-3060-12gb")).verdict == OOM
    assert estimate(w, get_gpu("rtx-4090")).verdict in (FITS, TIGHT)
    a100 = estimate(w, get_gpu("a100-40gb"))
    assert a100.verdict == FITS and a100.max_batch_size >= 8


def test_quantized_6b_fits_12gb() -> None:
    assert estimate(get_workload("llm-6b", precision="int8"), get_gpu("rtx-3060-12gb")).verdict != OOM
    assert estimate(get_workload("llm-6b", precision="int4"), get_gpu("rtx-3060-12gb")).verdict == FITS


def test_bert_base_seq512_batch16_fits_12gb_with_amp() -> None:
    est = estimate(get_workload("bert-base-imdb", precision="amp-fp16"), get_gpu("rtx-3060-12gb"))
    assert est.verdict == FITS


@pytest.mark.parametrize("gpu_id", sorted(load_catalog()))
def test_resnet50_cifar_fits_every_card(gpu_id: str) -> None:
    assert estimate(get_workload("resnet50-cifar10"), get_gpu(gpu_id)).verdict == FITS


def test_small_images_on_big_cards_are_overhead_bound() -> None:
    w = get_workload("resnet50-cifar10")
    big = estimate(w, get_gpu("h100-sxm"))
    assert big.bottleneck == "overhead"
    # a big card gains little: within 1.5x of the consumer flagship
    assert estimate(w, get_gpu("rtx-4090")).step_seconds < 1.5 * big.step_seconds


def test_generation_is_far_below_the_bandwidth_roofline_in_eager_code() -> None:
    est = estimate(get_workload("llm-6b"), get_gpu("h200"))
    roof = est.roofline_tokens_per_second
    # bytes: 13.5 GB of weights per token at 4.8 TB/s -> ~355 tokens/s
    assert 300 < roof < 400
    assert est.tokens_per_second < roof / 3
    tuned = estimate(get_workload("llm-6b"), get_gpu("h200"), exec_mode="tuned")
    # tuned: bandwidth-bound, below the roofline by the GEMVs' and small kernels' efficiency
    assert 0.5 * roof < tuned.tokens_per_second < 0.9 * roof and tuned.bottleneck == "memory"


def test_max_batch_is_the_largest_that_fits() -> None:
    gpu = get_gpu("rtx-4090")
    for name in ("bert-base-imdb", "llm-6b", "resnet50-cifar10"):
        est = estimate(get_workload(name), gpu)
        b = est.max_batch_size
        assert b >= 1
        assert needed_bytes(get_workload(name, batch_size=b), PROFILE) <= gpu.usable_bytes
        assert needed_bytes(get_workload(name, batch_size=b + 1), PROFILE) > gpu.usable_bytes


def test_verdict_uses_required_memory_without_reclaimable_cache() -> None:
    est = estimate(get_workload("resnet50-cifar10", batch_size=4096), get_gpu("rtx-3060-12gb"))
    assert est.required_memory_bytes == est.peak_memory_bytes - est.breakdown["fragmentation"]
    assert est.breakdown["fragmentation"] > 0
    assert est.headroom_bytes == est.gpu.usable_bytes - est.required_memory_bytes


def test_verdict_thresholds() -> None:
    assert verdict(50, 100) == FITS
    assert verdict(95, 100) == TIGHT
    assert verdict(100, 100) == TIGHT
    assert verdict(101, 100) == OOM
    assert max_fitting(lambda n: n * 10, 95) == 9
    assert max_fitting(lambda n: n * 10, 5) == 0


@pytest.mark.slow
def test_every_preset_estimates_on_every_card_quickly() -> None:
    gpus = list(load_catalog().values())
    for factory in PRESETS.values():
        w = factory()
        for gpu in gpus:
            est = estimate(w, gpu)
            assert est.verdict in (FITS, TIGHT, OOM)
            assert (est.verdict == OOM) == (est.max_batch_size < w.batch_size)


# -- a KV cache grown by concatenation ------------------------------------------------------------
def _simulated_allocator_waste(per_token: int, first: int, last: int, tensors: int) -> tuple[int, int]:
    """Replay a growing cache through a model of PyTorch's caching allocator for large blocks:
    requests above 10 MiB get their own segment rounded up to 2 MiB; a free cached segment
    serves the smallest request it can hold (best fit); nothing is returned to the driver.
    Each step, every tensor is replaced by one a token longer: allocate the new, free the old.
    Returns (reserved - live) at the end and the size of one last-class segment."""
    from fitbench.estimate.kv_cache import ALLOCATOR_OWN_SEGMENT_BYTES, ALLOCATOR_ROUND_BYTES

    def segment(tokens: int) -> int:
        size = per_token * tokens
        if size <= ALLOCATOR_OWN_SEGMENT_BYTES:
            return 0  # served from shared 20 MiB segments: not part of this pattern
        return -(-size // ALLOCATOR_ROUND_BYTES) * ALLOCATOR_ROUND_BYTES

    free: list[int] = []
    reserved = 0

    def allocate(size: int) -> None:
        nonlocal reserved
        fitting = [s for s in free if s >= size]
        if fitting:
            free.remove(min(fitting))
        else:
            reserved += size

    live = [segment(first)] * tensors
    for size in live:
        if size:
            allocate(size)
    for t in range(first + 1, last + 1):
        for i in range(tensors):
            new = segment(t)
            if new:
                allocate(new)
            if live[i]:
                free.append(live[i])
            live[i] = new
    return reserved - sum(live), segment(last)


@pytest.mark.parametrize("batch", [16, 32, 48])
def test_outgrown_kv_segments_follow_the_allocator_model(batch: int) -> None:
    from fitbench.estimate.kv_cache import outgrown_cache_bytes

    w = get_workload("llm-6b", batch_size=batch)
    arch = w.arch
    tensors = 2 * arch.num_layers
    waste, last_segment = _simulated_allocator_waste(
        batch * arch.kv_dim * 2, w.prompt_tokens, w.prompt_tokens + w.new_tokens - 1, tensors
    )
    predicted = outgrown_cache_bytes(w, 1.0)
    assert predicted > 0
    # The estimate counts the size classes continuously; the allocator steps by whole classes,
    # which can differ by at most one segment per tensor (and the floating spare).
    assert abs(predicted - waste) <= (tensors + 1) * last_segment


def test_outgrown_kv_segments_grow_with_the_prompt_the_tokens_and_the_batch() -> None:
    from fitbench.estimate.kv_cache import outgrown_cache_bytes

    w = get_workload("llm-6b", batch_size=32)
    base = outgrown_cache_bytes(w, 1.0)
    for bigger in (w.replace(prompt_tokens=w.prompt_tokens + k) for k in (1, 7, 64)):
        assert outgrown_cache_bytes(bigger, 1.0) > base
    assert outgrown_cache_bytes(w.replace(new_tokens=w.new_tokens + 1), 1.0) > base
    assert outgrown_cache_bytes(w.replace(batch_size=33), 1.0) > base


def test_outgrown_kv_segments_are_reclaimable_and_absent_from_static_caches() -> None:
    import dataclasses

    from fitbench.estimate.kv_cache import outgrown_cache_bytes
    from fitbench.workloads import library

    small = get_workload("llm-6b", batch_size=1)
    assert outgrown_cache_bytes(small, 0.55) == 0  # K/V copies stay below 10 MiB
    assert outgrown_cache_bytes(get_workload("llm-6b", batch_size=32), 0.0) == 0
    # A family the generation replay does not lay out (GPT-J's parallel blocks) takes the formula.
    big = library.workload_for_model("gpt-j-6b").replace(
        mode="infer", batch_size=32, prompt_tokens=50, new_tokens=100, precision="fp16"
    )
    h200 = get_gpu("h200")
    grown_cache = estimate(big, h200, profile=PROFILE)
    static_cache = estimate(big, h200, profile=dataclasses.replace(PROFILE, kv_growth_stale_share=0.0))
    grown = outgrown_cache_bytes(big, PROFILE.kv_growth_stale_share)
    assert grown > 5 * 2**30  # gigabytes at batch 32
    assert grown_cache.peak_memory_bytes - static_cache.peak_memory_bytes == pytest.approx(grown, abs=2)
    # The allocator hands the stale segments back before failing: what must fit is unchanged.
    assert grown_cache.required_memory_bytes == static_cache.required_memory_bytes
    assert grown_cache.max_batch_size == static_cache.max_batch_size
    assert get_profile("torch", "tuned", use_user=False).kv_growth_stale_share == 0.0


def test_a_laid_out_decoder_replays_its_caches_regrowth_instead() -> None:
    """llm-6b is Llama-shaped: its decode steps' regrown caches come from the replay
    (estimate/generation_reserve.py), not from the formula, and stay reclaimable."""
    big = get_workload("llm-6b", batch_size=32)
    h200 = get_gpu("h200")
    est = estimate(big, h200, profile=PROFILE)
    assert "outgrown_kv_cache_blocks" not in est.memory.details
    assert est.memory.details["generation_reserve"] > 5 * 2**30
    assert est.breakdown["fragmentation"] == est.memory.details["generation_reserve"]
    assert est.required_memory_bytes == est.peak_memory_bytes - est.breakdown["fragmentation"]


def test_the_reserve_never_carries_the_peak_past_the_card() -> None:
    """A long, wide generation regrows its caches into more blocks than any card has: the
    allocator frees its cache and retries before that, so the peak stops at the usable memory
    and what must fit is untouched."""
    from fitbench.workloads import library

    w = library.workload_for_model("llama-3.2-1b-instruct").replace(
        mode="infer", batch_size=64, prompt_tokens=256, new_tokens=4096, precision="bf16"
    )
    h200 = get_gpu("h200")
    est = estimate(w, h200, profile=PROFILE)
    assert est.memory.details["generation_reserve"] > h200.usable_bytes
    assert est.peak_memory_bytes == h200.usable_bytes
    assert est.memory.details["fragmentation_released"] > 0
    assert est.required_memory_bytes < h200.usable_bytes
