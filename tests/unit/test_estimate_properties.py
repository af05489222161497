"""Properties of the estimator over random valid workloads and every catalog GPU.

The golden tests (test_estimate.py) pin a few known points; these check what must hold
everywhere: nothing escapes but a FitbenchError, the breakdown is made of non-negative whole
bytes that add up to the peak, memory (the peak, and what must fit) never falls when the batch,
the sequence or the image grows, the verdict and the largest batch say the same thing as the
numbers, and every time is a finite positive number of seconds.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fitbench.catalog import load_catalog
from fitbench.core.names import STRATEGY_ALIASES
from fitbench.core.precision import PRECISIONS
from fitbench.errors import FitbenchError
from fitbench.estimate.api import estimate
from fitbench.estimate.memory import memory_breakdown, needed_bytes, peak_bytes
from fitbench.estimate.profile import get_profile
from fitbench.estimate.verdict import FITS, OOM, TIGHT, TIGHT_MARGIN
from fitbench.workloads.arch import RESNET_LAYERS, ResNetArch, TransformerArch
from fitbench.workloads.presets import PRESETS, TINY_PRESETS, get_workload
from fitbench.workloads.workload import ATTENTION_IMPLS, OPTIMIZERS, Workload

pytestmark = pytest.mark.slow  # a few thousand estimates: ~10-20 s in all

CATALOG = list(load_catalog().values())
PROFILES = [get_profile("torch", "default", use_user=False), get_profile("paddle", "default", use_user=False)]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# One example of the catalog-wide property is an estimate on each of the ~30 cards (about 0.3 s):
# 50 random jobs there, 1,500 estimates; every preset on every card is checked explicitly in
# test_estimate.py (test_every_preset_estimates_on_every_card_quickly) and pinned by the goldens.
CATALOG_SETTINGS = settings(SETTINGS, max_examples=50)

TRAIN_PRECISIONS = sorted(name for name, p in PRECISIONS.items() if p.training)
ALL_PRECISIONS = sorted(PRECISIONS)


# -- random valid workloads -------------------------------------------------------------------------
@st.composite
def resnet_workloads(draw: st.DrawFn) -> Workload:
    mode = draw(st.sampled_from(["train", "infer"]))
    return Workload(
        name="prop-resnet",
        arch=ResNetArch(
            depth=draw(st.sampled_from(sorted(RESNET_LAYERS))), num_classes=draw(st.integers(2, 1000))
        ),
        mode=mode,
        batch_size=draw(st.integers(1, 4096)),
        image_size=draw(st.integers(8, 512)),
        precision=draw(st.sampled_from(TRAIN_PRECISIONS if mode == "train" else ALL_PRECISIONS)),
        optimizer=draw(st.sampled_from(OPTIMIZERS)),
        checkpointing=draw(st.booleans()),
        dataset_size=draw(st.none() | st.integers(1, 2_000_000)),
    )


@st.composite
def transformer_archs(draw: st.DrawFn, kind: str) -> TransformerArch:
    heads = draw(st.sampled_from([1, 2, 4, 8, 12, 16, 32, 64]))
    head_dim = draw(st.sampled_from([16, 32, 64, 128]))
    hidden = heads * head_dim
    common = {
        "kind": kind,
        "vocab_size": draw(st.integers(100, 160_000)),
        "hidden_size": hidden,
        "num_layers": draw(st.integers(1, 80)),
        "num_heads": heads,
        "intermediate_size": draw(st.integers(hidden, 4 * hidden)),
        "max_positions": draw(st.sampled_from([128, 512, 2048, 4096])),
    }
    if kind == "encoder":
        return TransformerArch(**common, type_vocab_size=2, num_labels=draw(st.integers(1, 100)))
    kv_heads = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    return TransformerArch(
        **common,
        num_kv_heads=kv_heads,
        mlp="swiglu",
        norm="rmsnorm",
        position="rotary",
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
        pooler=False,
        num_labels=0,
    )


@st.composite
def transformer_workloads(draw: st.DrawFn) -> Workload:
    kind = draw(st.sampled_from(["encoder", "decoder"]))
    arch = draw(transformer_archs(kind))
    mode = draw(st.sampled_from(["train", "infer"]))
    longest = min(4096, arch.max_positions)
    fields: dict = {}
    if kind == "decoder" and mode == "infer":
        prompt = draw(st.integers(1, longest - 1))
        fields = {"prompt_tokens": prompt, "new_tokens": draw(st.integers(1, longest - prompt))}
    else:
        fields = {"seq_len": draw(st.integers(1, longest))}
    return Workload(
        name=f"prop-{kind}",
        arch=arch,
        mode=mode,
        batch_size=draw(st.integers(1, 4096)),
        precision=draw(st.sampled_from(TRAIN_PRECISIONS if mode == "train" else ALL_PRECISIONS)),
        optimizer=draw(st.sampled_from(OPTIMIZERS)),
        checkpointing=draw(st.booleans()),
        attention=draw(st.sampled_from(ATTENTION_IMPLS)),
        dataset_size=draw(st.none() | st.integers(1, 2_000_000)),
        **fields,
    )


workloads = st.one_of(resnet_workloads(), transformer_workloads())


# -- the properties -----------------------------------------------------------------------------------
def _check_estimate(w: Workload, framework: str) -> None:
    for gpu in CATALOG:
        est = estimate(w, gpu, framework=framework)
        parts = est.breakdown
        assert all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in parts.values()), parts
        assert sum(parts.values()) == est.peak_memory_bytes
        # The verdict is on what must fit: the peak less the allocator's reclaimable cache.
        need, usable = est.required_memory_bytes, gpu.usable_bytes
        assert 0 < need <= est.peak_memory_bytes
        expected = OOM if need > usable else TIGHT if need > usable * (1 - TIGHT_MARGIN) else FITS
        assert est.verdict == expected, (gpu.id, need, usable, est.verdict)
        assert est.to_dict()["required_memory_bytes"] == need
        # The largest batch that fits says the same as the verdict: out of memory exactly when
        # the asked batch is above it.
        assert (est.verdict == OOM) == (est.max_batch_size < w.batch_size), (gpu.id, est.max_batch_size)
        assert est.max_batch_size >= 0
        assert est.step_seconds is not None and math.isfinite(est.step_seconds) and est.step_seconds > 0
        for value in (est.samples_per_second, est.tokens_per_second, est.epoch_seconds, est.prefill_seconds):
            assert value is None or (math.isfinite(value) and value > 0)
        if w.is_generation:
            assert est.tokens_per_second is not None and est.tokens_per_second > 0


@CATALOG_SETTINGS
@given(w=workloads, framework=st.sampled_from(["torch", "paddle"]))
def test_estimates_are_consistent_on_every_catalog_gpu(w: Workload, framework: str) -> None:
    _check_estimate(w, framework)


def _bigger_input(w: Workload, grow: int) -> Workload:
    """The same job with a longer sequence or a larger image (never past the model's limits)."""
    if w.is_resnet:
        return w.replace(image_size=min(w.image_size + grow, 512))
    longest = min(4096, w.arch.max_positions)
    if w.is_generation:
        # Grow the prompt first, then the answer, within the positions.
        prompt = min(w.prompt_tokens + grow, longest - w.new_tokens)
        new = min(w.new_tokens + (grow - (prompt - w.prompt_tokens)), longest - prompt)
        return w.replace(prompt_tokens=prompt, new_tokens=new)
    return w.replace(seq_len=min(w.seq_len + grow, longest))


@SETTINGS
@given(
    w=workloads,
    grow_batch=st.integers(1, 4096),
    grow_input=st.integers(1, 512),
    profile=st.sampled_from(PROFILES),
)
def test_memory_never_falls_as_the_job_grows(w: Workload, grow_batch: int, grow_input: int, profile) -> None:
    """What must fit never falls as the batch or the input grows. The peak may fall by no more
    than the base's allocator cache (`fragmentation`): where the estimate replays the allocator's
    rules (estimate/generation_reserve.py), which blocks a larger job leaves cached depends on
    its sizes, as on the card, and is not monotone."""
    bigger_batch = w.replace(batch_size=w.batch_size + grow_batch)
    bigger_input = _bigger_input(w, grow_input)
    base = needed_bytes(w, profile)
    assert needed_bytes(bigger_batch, profile) >= base
    assert needed_bytes(bigger_input, profile) >= base
    peak = peak_bytes(w, profile)
    cache = memory_breakdown(w, profile).parts["fragmentation"]
    assert peak_bytes(bigger_batch, profile) >= peak - cache
    assert peak_bytes(bigger_input, profile) >= peak - cache


# -- overrides as the command line passes them ---------------------------------------------------------
INT_FIELDS = (
    "batch_size",
    "seq_len",
    "image_size",
    "prompt_tokens",
    "new_tokens",
    "dataset_size",
    "lora_rank",
    "gpus",
)
NAME_FIELDS = {
    "precision": [*ALL_PRECISIONS, "fp33", "amp", "nf4"],
    "optimizer": [*OPTIMIZERS, "adamm", "lion"],
    "mode": ["train", "infer", "trian", "eval"],
    "attention": [*ATTENTION_IMPLS, "flash"],
    "peft": ["lora", "qlora", "lroa"],
    "lora_targets": ["attention", "attention-mlp", "all-linear", "mlp"],
    "strategy": ["ddp", "zero1", "zero2", "zero3", "fsdp", "tp", "zero4"],
}
ints = (
    st.none()
    | st.integers(-5, 10)
    | st.integers(-(10**12), 10**12)
    | st.sampled_from([1 << 20, 1 << 21, 16384])
)
names = {k: st.none() | st.sampled_from(v) | st.text(max_size=12) for k, v in NAME_FIELDS.items()}
overrides = st.fixed_dictionaries(
    {},
    optional={**dict.fromkeys(INT_FIELDS, ints), **names, "checkpointing": st.none() | st.just(True)},
)


@SETTINGS
@given(name=st.sampled_from(sorted(PRESETS)), tiny=st.booleans(), changes=overrides)
@example(name="bert-base-imdb", tiny=False, changes={"strategy": "fsdp"})  # an alias, stored as its name
def test_cli_like_overrides_raise_only_fitbench_errors(name: str, tiny: bool, changes: dict) -> None:
    if tiny and name not in TINY_PRESETS:
        with pytest.raises(FitbenchError):
            get_workload(name, tiny=True, **changes)
        return
    try:
        w = get_workload(name, tiny=tiny, **changes)
    except FitbenchError as exc:
        assert exc.message and "\n" not in str(exc)
        return
    # What was accepted is a valid job: it estimates without surprises on one card.
    for field_name, value in changes.items():
        if value is not None and field_name not in ("precision",):
            # A strategy's other name is stored under its one spelling ('fsdp' is fsdp-full-shard).
            expected = STRATEGY_ALIASES.get(value, value) if field_name == "strategy" else value
            assert getattr(w, field_name) == expected
    try:
        est = estimate(w, CATALOG[0])
    except FitbenchError:
        return
    assert est.peak_memory_bytes > 0 and math.isfinite(est.step_seconds) and est.step_seconds > 0
