"""Advice: ranking, the card to buy, fixes re-estimated, the derived size guide, bottleneck suggestions.

Every expectation is checked against the estimator itself (re-estimating the changed workload),
so these tests fail if an option claims an effect the estimator does not produce.
"""

from __future__ import annotations

import math

import pytest

from fitbench.advise.fixes import bottleneck_advice, largest_batch, what_would_make_it_fit
from fitbench.advise.guide import MEMORY_CLASSES_GB, guide_bands, memory_class, size_guide
from fitbench.advise.ranking import cheapest_comfortable, rank_catalog, throughput
from fitbench.advise.text import (
    bottleneck_line,
    cheapest_line,
    fix_lines,
    guide_lines,
    measured_speed_text,
    speed_text,
)
from fitbench.catalog import get_gpu, load_catalog
from fitbench.estimate.api import estimate
from fitbench.estimate.verdict import FITS, OOM, VERDICT_ORDER
from fitbench.records.measurement import Measurement
from fitbench.records.run import EstimateSummary, WorkloadView
from fitbench.workloads import library
from fitbench.workloads.presets import get_workload

# ----------------------------------------------------------------------------- ranking


@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb", "llm-6b"])
def test_ranking_puts_fitting_cards_first_then_the_fastest(name):
    rows = rank_catalog(get_workload(name))
    assert len(rows) == len(load_catalog())
    keys = [(VERDICT_ORDER[r.verdict], -(r.speed or 0)) for r in rows]
    assert keys == sorted(keys)
    for r in rows:
        assert r.verdict == estimate(r.estimate.workload, r.gpu).verdict
        assert r.headroom_bytes == r.estimate.headroom_bytes and r.peak_bytes == r.estimate.peak_memory_bytes
        if r.price_usd is not None and r.speed:
            assert r.price_per_speed == pytest.approx(r.price_usd / r.speed)
        else:
            assert r.price_per_speed is None


def test_ranking_of_the_6b_model_puts_the_12gb_cards_last():
    rows = rank_catalog(get_workload("llm-6b"))
    oom = [r.gpu.id for r in rows if r.verdict == OOM]
    assert "rtx-3060-12gb" in oom  # the brief: a 6B model in FP16 does not load on 12 GB
    assert rows[-len(oom) :] == [r for r in rows if r.verdict == OOM]
    assert rows[0].speed_unit == "tok/s"


def test_cheapest_comfortable_card_is_the_cheapest_priced_card_that_fits():
    w = get_workload("llm-6b")
    choice = cheapest_comfortable(w)
    assert choice.cheapest is not None and choice.cheapest.verdict == FITS
    for gpu in load_catalog().values():
        if gpu.price_usd is not None and gpu.price_usd < choice.cheapest.price_usd:
            assert estimate(w, gpu).verdict != FITS, f"{gpu.id} is cheaper and fits"
    # The price-free alternative: no fitting card has less usable memory.
    assert choice.smallest is not None
    fitting = [g for g in load_catalog().values() if estimate(w, g).verdict == FITS]
    assert choice.smallest.gpu.usable_bytes == min(g.usable_bytes for g in fitting)
    assert set(choice.unpriced_fitting) == {g.id for g in fitting if g.price_usd is None}
    line = cheapest_line(choice, "en", scenario="llm-6b")
    assert choice.cheapest.gpu.name in line and choice.cheapest.gpu.price_date in line


def test_when_only_data_centre_cards_fit_the_smallest_one_is_named_without_a_price():
    # BERT-large, FP32, batch 64: more memory than any priced (GeForce or workstation) card has.
    w = get_workload("bert-large-imdb", precision="fp32", batch_size=64)
    choice = cheapest_comfortable(w)
    assert choice.cheapest is None
    assert choice.smallest is not None and choice.smallest.price_usd is None
    assert choice.smallest.verdict == FITS
    assert choice.smallest.gpu.id in choice.unpriced_fitting
    line = cheapest_line(choice, "en", scenario=w.name)
    assert "public list price" in line and choice.smallest.gpu.name in line


# ----------------------------------------------------------------------------- fixes


def _by_kind(fixes):
    return {f.kind: f for f in fixes}


def test_every_fix_is_the_estimate_of_the_changed_workload():
    w, gpu = get_workload("bert-base-imdb", batch_size=64), get_gpu("rtx-3060-12gb")
    fixes = what_would_make_it_fit(w, gpu)
    assert fixes
    for fix in fixes:
        if fix.kind == "bigger-card":
            again = estimate(w, fix.gpu)
        else:
            again = estimate(w.replace(**fix.changes), fix.gpu)
        assert fix.peak_bytes == again.peak_memory_bytes
        assert fix.verdict == again.verdict
        ratio = throughput(again)[0] / throughput(estimate(w, gpu))[0]
        if fix.estimate.workload.gpus > 1 and fix.estimate.workload.strategy != "tp":
            ratio *= fix.estimate.workload.gpus
        assert fix.speed_ratio == pytest.approx(ratio)


def test_smaller_batch_with_accumulation_keeps_the_effective_batch_and_fits():
    w, gpu = get_workload("bert-base-imdb", batch_size=64), get_gpu("rtx-3060-12gb")
    assert estimate(w, gpu).verdict == OOM
    fix = _by_kind(what_would_make_it_fit(w, gpu))["accumulate"]
    largest = largest_batch(w, gpu)
    assert 0 < largest < 64
    # The largest comfortable batch really is the largest.
    assert estimate(w.replace(batch_size=largest), gpu).verdict == FITS
    assert estimate(w.replace(batch_size=largest + 1), gpu).verdict != FITS
    steps = math.ceil(64 / largest)
    assert fix.accumulation_steps == steps
    micro = fix.changes["batch_size"]
    assert micro <= largest and micro * steps >= 64 and (micro - 1) * steps < 64
    assert fix.verdict == FITS and fix.makes_it_fit


def test_amp_uses_bf16_where_the_card_has_it_and_fp16_elsewhere():
    w = get_workload("bert-base-imdb", batch_size=32)
    on_ampere = _by_kind(what_would_make_it_fit(w, get_gpu("rtx-3060-12gb")))["amp"]
    on_turing = _by_kind(what_would_make_it_fit(w, get_gpu("t4")))["amp"]
    assert on_ampere.changes == {"precision": "amp-bf16"}
    assert on_turing.changes == {"precision": "amp-fp16"}
    # The brief: AMP cuts BERT's peak memory and raises its speed.
    assert on_ampere.peak_bytes < on_ampere.baseline.peak_memory_bytes
    assert on_ampere.speed_ratio > 1


def test_activation_checkpointing_trades_speed_for_memory():
    w, gpu = get_workload("bert-base-imdb", batch_size=48), get_gpu("rtx-3060-12gb")
    fix = _by_kind(what_would_make_it_fit(w, gpu))["checkpointing"]
    assert fix.changes == {"checkpointing": True}
    assert fix.peak_bytes < fix.baseline.peak_memory_bytes
    assert fix.speed_ratio < 1  # the forward pass runs twice
    assert fix.makes_it_fit


def test_int8_and_int4_weights_let_the_6b_model_fit_a_12gb_card():
    # Where the brief is naive: 8-bit and 4-bit weights put a 6B model on 12 GB.
    w, gpu = get_workload("llm-6b"), get_gpu("rtx-3060-12gb")
    assert estimate(w, gpu).verdict == OOM
    fixes = _by_kind(what_would_make_it_fit(w, gpu))
    assert {"int8", "int4"} <= set(fixes)
    assert fixes["int8"].verdict == FITS and fixes["int4"].verdict == FITS
    assert fixes["int4"].peak_bytes < fixes["int8"].peak_bytes < fixes["int8"].baseline.peak_memory_bytes
    assert "amp" not in fixes and "accumulate" not in fixes  # training options do not apply


def test_a_bigger_card_is_the_cheapest_comfortable_one():
    w, gpu = get_workload("llm-6b"), get_gpu("rtx-3060-12gb")
    fix = _by_kind(what_would_make_it_fit(w, gpu))["bigger-card"]
    assert fix.gpu.id == cheapest_comfortable(w).cheapest.gpu.id
    assert fix.verdict == FITS and fix.gpu.usable_bytes > gpu.usable_bytes


def test_combined_options_when_no_single_one_fits():
    # A 0.4B Llama-style decoder trained in FP32 on 4096-token sequences, on a 12 GB card: AMP
    # alone, checkpointing alone and accumulation alone all fall short; together they fit.
    import dataclasses

    from fitbench.workloads.presets import LLAMA_7B

    # Llama-7B's layout at 0.4B: the same fields, smaller dimensions.
    arch = dataclasses.replace(
        LLAMA_7B, hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=2816
    )
    w = get_workload("llm-6b", mode="train", seq_len=4096, batch_size=4, precision="fp32").replace(arch=arch)
    gpu = get_gpu("rtx-3060-12gb")
    fixes = _by_kind(what_would_make_it_fit(w, gpu))
    single = [fixes[k] for k in ("amp", "accumulate", "checkpointing") if k in fixes]
    assert single and not any(f.verdict == FITS for f in single)
    combined = fixes["combined"]
    assert len(combined.parts) >= 2 and "checkpointing" in combined.parts
    assert combined.verdict == FITS and combined.makes_it_fit
    assert combined.peak_bytes == estimate(w.replace(**combined.changes), gpu).peak_memory_bytes
    if "accumulate" in combined.parts:
        assert combined.changes["batch_size"] * combined.accumulation_steps >= w.batch_size
    assert "all together" in fix_lines(combined.baseline, [combined], "en")[1]


def test_lora_and_qlora_fit_where_full_fine_tuning_does_not():
    w = get_workload("llm-6b", mode="train", seq_len=512, precision="amp-bf16")
    gpu = get_gpu("rtx-4090")
    assert estimate(w, gpu).verdict == OOM
    fixes = _by_kind(what_would_make_it_fit(w, gpu))
    assert {"lora", "qlora"} <= set(fixes)
    assert fixes["qlora"].peak_bytes < fixes["lora"].peak_bytes < fixes["lora"].baseline.peak_memory_bytes
    assert fixes["qlora"].verdict != OOM
    assert fixes["lora"].estimate.workload.peft == "lora"


def test_more_gpus_is_the_fewest_that_run_it():
    from fitbench.estimate.limits import min_gpus
    from fitbench.estimate.profile import get_profile

    w, gpu = get_workload("llm-70b"), get_gpu("a100-40gb")
    fix = _by_kind(what_would_make_it_fit(w, gpu))["gpus"]
    assert fix.changes["gpus"] == min_gpus(w, gpu, get_profile("torch"), "tp") > 1
    assert fix.verdict != OOM


def test_fix_lines_name_the_problem_and_each_option():
    w, gpu = get_workload("llm-6b"), get_gpu("rtx-3060-12gb")
    base = estimate(w, gpu)
    fixes = [f for f in what_would_make_it_fit(w, gpu) if f.makes_it_fit]
    lines = fix_lines(base, fixes, "en")
    assert "out of memory" in lines[0] and gpu.name in lines[0]
    assert len(lines) == len(fixes) + 1
    assert any(line.startswith("int4 weights") for line in lines)
    zh = fix_lines(base, fixes, "zh")
    assert "显存不足" in zh[0] and any("int4 权重" in line for line in zh)


# ----------------------------------------------------------------------------- size guide


def test_memory_classes_of_catalog_cards():
    assert memory_class(get_gpu("rtx-3060-12gb")) == 12
    assert memory_class(get_gpu("l4")) == 24  # sold as 24 GB, 22.5 GiB with ECC on
    assert memory_class(get_gpu("h100-sxm")) == 80
    assert all(memory_class(g) in MEMORY_CLASSES_GB for g in load_catalog().values())


@pytest.mark.slow
def test_the_guide_is_derived_from_the_estimator():
    rows = size_guide()
    assert {r.regime for r in rows} == {"cnn-train", "encoder-finetune", "decoder-generate"}
    cards = load_catalog().values()
    for r in rows:
        verdicts = {g.id: estimate(r.workload, g).verdict for g in cards}
        assert r.params == r.workload.param_count()
        expected = min((memory_class(g) for g in cards if verdicts[g.id] == FITS), default=None)
        assert r.fits_class_gb == expected
        running = min((memory_class(g) for g in cards if verdicts[g.id] != OOM), default=None)
        assert r.runs_class_gb == running
        if r.card is not None:
            assert memory_class(get_gpu(r.card)) == r.fits_class_gb


def _rows(regime, low=0.0, high=float("inf")):
    return [r for r in size_guide() if r.regime == regime and low <= r.params < high]


def test_derived_guide_matches_the_brief():
    """The brief's guide, statement by statement, where its own measurements support it."""
    # "< 100M parameters -> 12 GB class": every CNN of the ladder trains on a 12 GB card or less.
    small = [r for r in size_guide() if r.params < 100e6]
    assert small and all(r.fits_class_gb is not None and r.fits_class_gb <= 12 for r in small)
    # "0.1-3B -> 24 GB class with AMP": BERT-base with AMP fits 12 GB (the brief measured it), and
    # AMP fine-tuning fits a 24 GB card (tight allowed) up to the 0.7B model of the ladder.
    bert_base = _rows("encoder-finetune", 100e6, 120e6)[0]
    assert bert_base.fits_class_gb <= 12
    for r in _rows("encoder-finetune", 100e6, 800e6):
        assert r.runs_class_gb is not None and r.runs_class_gb <= 24, r.model
    # In the band, inference never needs more than the brief's 24 GB either.
    assert all(r.fits_class_gb <= 24 for r in _rows("decoder-generate", 100e6, 3.05e9))
    # "> 3B -> 40/80 GB data-centre cards or the cloud": a 6.7B model in FP16 does not load on
    # 12 GB, runs on the brief's 24 GB card, and 13B needs more than any 24 GB card.
    llama7, llama13, llama70 = _rows("decoder-generate", 3.05e9)
    assert llama7.runs_class_gb > 12 and llama7.fits_class_gb <= 24
    assert llama13.fits_class_gb > 24
    # No card below the 180 GB class: the cloud, several GPUs, or one B200 / MI300X.
    assert llama70.fits_class_gb is None or llama70.fits_class_gb >= 180
    bands = guide_bands()
    assert set(bands) == {"<100M", "0.1-3B", ">3B"}
    assert bands["<100M"]["cnn-train"][1] <= 12


def test_derived_guide_corrects_the_brief_where_it_is_naive():
    """Full fine-tuning keeps ~16-18 bytes per parameter: above ~1B the 24 GB class is not enough,
    while generation in FP16 puts 3B on 12 GB and 7B on 16 GB."""
    for r in _rows("encoder-finetune", 1e9, 3.05e9):
        assert r.fits_class_gb is not None and r.fits_class_gb >= 40, r.model
        assert r.peak_bytes >= 16 * r.params
    assert all(r.fits_class_gb <= 12 for r in _rows("decoder-generate", 1e9, 3.05e9))
    assert _rows("decoder-generate", 6e9, 7e9)[0].fits_class_gb <= 16


def test_guide_lines_in_both_languages():
    en = guide_lines(size_guide(), "en")
    zh = guide_lines(size_guide(), "zh")
    assert len(en) == len(zh) == 5  # header, three bands, the brief's own statement
    # 70B in FP16 fits one card only of the 180 GB class (B200) or above.
    assert "12 GB" in en[-1] and ("no single card" in en[3] or "180 GB (69B)" in en[3])
    assert ("单卡放不下" in zh[3] or "180 GB(690 亿)" in zh[3]) and "亿" in zh[2]


# ----------------------------------------------------------------------------- bottleneck


CASES = [
    ("llm-6b", {}, "rtx-4090", "default"),
    ("llm-6b", {}, "rtx-4090", "tuned"),
    ("bert-base-imdb", {}, "rtx-3060-12gb", "default"),
    ("resnet50-cifar10", {}, "rtx-3060-12gb", "default"),
    ("bert-base-imdb", {"precision": "amp-fp16"}, "rtx-3060-12gb", "default"),
    ("bert-base-imdb", {"precision": "amp-fp16"}, "h200", "tuned"),
]


@pytest.mark.parametrize(("name", "overrides", "gpu", "mode"), CASES)
def test_bottleneck_advice_attacks_the_bottleneck(name, overrides, gpu, mode):
    est = estimate(get_workload(name, **overrides), get_gpu(gpu), exec_mode=mode)
    advice = bottleneck_advice(est)
    assert advice.bottleneck == est.bottleneck
    allowed = {
        "overhead": {"tuned", "batch", "card", "none"},
        "memory": {"amp", "quantize", "card", "none"},
        "compute": {"amp", "card", "none"},
    }[est.bottleneck]
    assert advice.suggestion in allowed
    if advice.suggestion == "none":
        assert advice.alternative is None
        return
    assert advice.speedup >= 1.05
    alt = advice.alternative
    if advice.suggestion == "tuned":
        assert alt.exec_mode == "tuned" and alt.gpu.id == est.gpu.id
    elif advice.suggestion == "amp":
        assert alt.workload.precision.endswith(("bf16", "fp16")) and est.workload.precision == "fp32"
    elif advice.suggestion == "quantize":
        assert alt.workload.precision == "int4" and est.workload.is_generation
    elif advice.suggestion == "card":
        assert alt.gpu.id != est.gpu.id and alt.verdict == FITS
    again = estimate(alt.workload, alt.gpu, exec_mode=alt.exec_mode)
    assert throughput(again)[0] == pytest.approx(throughput(alt)[0])
    assert bottleneck_line(advice, "en").startswith(name)


def test_one_concrete_suggestion_per_bottleneck():
    # HF generate's ~1,600 Python-level operations a token outlast the weight stream on an H200.
    overhead = bottleneck_advice(estimate(get_workload("llm-6b"), get_gpu("h200")))
    assert (overhead.bottleneck, overhead.suggestion) == ("overhead", "tuned")
    assert "--exec tuned" in bottleneck_line(overhead, "en")
    memory = bottleneck_advice(estimate(get_workload("llm-6b"), get_gpu("rtx-4090"), exec_mode="tuned"))
    assert (memory.bottleneck, memory.suggestion) == ("memory", "quantize")
    compute = bottleneck_advice(estimate(get_workload("bert-base-imdb"), get_gpu("rtx-3060-12gb")))
    assert (compute.bottleneck, compute.suggestion) == ("compute", "amp")
    assert "amp-bf16" in bottleneck_line(compute, "en") and "混合精度" in bottleneck_line(compute, "zh")


def test_a_host_bound_lora_step_is_offered_the_tuned_mode_and_qlora_is_not():
    def advice(peft):
        w = library.workload_for_model(
            "llama-3.2-1b-instruct", mode="train", seq_len=256, batch_size=1, precision="amp-bf16", peft=peft
        )
        est = estimate(w, get_gpu("h200"))
        assert est.bottleneck == "overhead"
        return bottleneck_advice(est)

    lora = advice("lora")
    assert lora.suggestion == "tuned" and lora.alternative.exec_mode == "tuned"
    qlora = advice("qlora")  # --exec tuned refuses QLoRA: a larger batch instead
    assert qlora.suggestion != "tuned"
    assert qlora.alternative is None or qlora.alternative.exec_mode == "default"


@pytest.mark.parametrize("name", ["bert-base-imdb", "llm-6b"])
def test_speed_text_reads_the_same_figures_from_an_estimate_its_json_and_its_summary(name):
    e = estimate(get_workload(name), get_gpu("rtx-4090"))
    shown = speed_text(e)
    assert shown == speed_text(e.to_dict()) == speed_text(EstimateSummary.from_estimate(e))
    assert ("tok/s" in shown) == (name == "llm-6b")


def test_measured_speed_text_reads_the_workload_or_its_stored_view_alike():
    m = Measurement(status="ok", step_seconds=0.5, epoch_seconds=900.0, tokens_per_second=12.0)
    for name, tiny in (("bert-base-imdb", False), ("llm-6b", False), ("bert-base-imdb", True)):
        w = get_workload(name, tiny=tiny)
        view = WorkloadView.from_mapping(w.to_dict())
        assert measured_speed_text(m, w) == measured_speed_text(m, view)
    assert "tok/s" in measured_speed_text(m, WorkloadView(family="decoder", mode="infer"))
    # A tiny run's epoch says nothing about the real model: its step time is shown instead.
    assert measured_speed_text(m, WorkloadView(tiny=True)) != measured_speed_text(m, WorkloadView())
