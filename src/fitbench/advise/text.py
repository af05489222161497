"""Advice as sentences: fixes, bottleneck suggestions, the card to buy and the size guide.

Only formatting: every number comes from an Estimate, a Fix or a GuideRow computed elsewhere.
Each function returns plain strings in the requested language (see fitbench.advise.i18n), and
`advice_item` wraps one with its data for JSON output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fitbench.advise.fixes import BottleneckAdvice, Fix
from fitbench.advise.guide import BANDS, REGIMES, GuideRow, memory_class
from fitbench.advise.i18n import bottleneck_label, format_params, t, verdict_label
from fitbench.advise.ranking import Comfortable, RankRow, throughput
from fitbench.core.gpu import GpuSpec
from fitbench.core.units import format_bytes, format_rate, format_seconds
from fitbench.estimate.api import Estimate
from fitbench.records.measurement import Measurement
from fitbench.records.run import EstimateSummary, WorkloadView
from fitbench.workloads.workload import Workload

__all__ = [
    "advice_item",
    "bottleneck_line",
    "cheapest_line",
    "fix_lines",
    "guide_lines",
    "measured_speed_text",
    "offload_line",
    "precision_shown",
    "smallest_line",
    "speed_figure",
    "speed_text",
    "spread_sentences",
    "spread_text",
]

# The timed figures a measurement records a spread for (fitbench.measure.timing), in the order
# their sentences are shown.
SPREAD_FIGURES = ("step_seconds", "prefill_seconds", "decode_step_seconds")


def _ratio(x: float | None) -> str:
    return "-" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.0f}")


def speed_text(est: Mapping[str, Any] | Estimate | EstimateSummary, lang: str = "en") -> str:
    """Tokens per second for generation, time per epoch for training with a dataset, else per step."""
    e = _summary(est)
    if e.prompt_tokens is not None or (e.family == "decoder" and e.mode == "infer"):
        tps = e.tokens_per_second
        if tps is None:  # an oom estimate's JSON has no speed; the would-be one is kept apart
            tps = e.tokens_per_second_if_it_fit
        return t("rate.decode", lang, rate=format_rate(tps, "tok/s"))
    if e.epoch_seconds is not None:
        return t("unit.per_epoch", lang, time=format_seconds(e.epoch_seconds))
    return t("unit.per_step", lang, time=format_seconds(e.step_seconds))


def _summary(est: Mapping[str, Any] | Estimate | EstimateSummary) -> EstimateSummary:
    """The estimate's figures by attribute, from an Estimate, its JSON (a stored or catalog estimate)
    or a summary already read."""
    if isinstance(est, Estimate):
        return EstimateSummary.from_estimate(est)
    return EstimateSummary.from_dict(est)


def measured_speed_text(m: Measurement, workload: WorkloadView | Workload, lang: str = "en") -> str:
    """The measurement's speed in the same unit as speed_text, with its spread where the run took
    one ("±1.8 %"); tiny runs show the step time, since an epoch of a tiny model says nothing about
    the real one. `workload` is the workload that ran: a stored one's view
    (`RunRecord.workload_view`) or the Workload itself."""
    if workload.is_generation:
        rate = m.decode_rate(workload.batch_size)  # the rate the estimate is held against
        if rate is not None:
            text = t("rate.decode", lang, rate=format_rate(rate, "tok/s"))
        else:
            text = t("rate.end_to_end", lang, rate=format_rate(m.tokens_per_second, "tok/s"))
    elif m.epoch_seconds is not None and not workload.tiny:
        text = t("unit.per_epoch", lang, time=format_seconds(m.epoch_seconds))
    else:
        text = t("unit.per_step", lang, time=format_seconds(m.step_seconds))
    spread = spread_text(m, speed_figure(m, workload), lang)
    return f"{text} {spread}" if spread else text


def speed_figure(m: Measurement, workload: WorkloadView | Workload) -> str:
    """The timed figure a measurement's speed comes from, whose spread it carries: a generation's
    decode step where the run recorded the differenced one (else the generate call), a training
    or inference step otherwise (throughput and epoch time are the step time's inverse and
    multiple)."""
    if workload.is_generation and m.decode_step_seconds and m.decode_rate(workload.batch_size):
        return "decode_step_seconds"
    return "step_seconds"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.1f} %"


def spread_text(m: Measurement, figure: str, lang: str = "en") -> str:
    """A timed figure's spread as shown beside it: "±1.8 %", or "±9.9 %, unstable" where its
    windows did not agree within the target; "" where the run recorded none (an older record,
    a distributed run, one window). Throughputs and epoch times carry their step's spread."""
    entry = m.spread_of(figure)
    if entry is None or entry.get("spread") is None:
        return ""
    key = "spread.stable" if entry.get("stable") else "spread.unstable"
    return t(key, lang, pct=_percent(float(entry["spread"])))


def spread_sentences(m: Measurement, workload: WorkloadView | Workload, lang: str = "en") -> list[str]:
    """One sentence for each timed figure that did not settle (its windows' spread stayed at or
    above the target until its time budget ran out) or was timed in one window only."""
    out = []
    target = _percent(m.spread_target) if m.spread_target is not None else "?"
    for figure in SPREAD_FIGURES:
        entry = m.spread_of(figure)
        if entry is None or entry.get("stable"):
            continue
        name_key = "generate_seconds" if figure == "step_seconds" and workload.is_generation else figure
        name = t(f"spread.figure.{name_key}", lang)
        if entry.get("spread") is None:
            if entry.get("windows") == 1:
                out.append(t("spread.one_window", lang, figure=name))
            continue
        out.append(
            t(
                "spread.not_settled",
                lang,
                figure=name,
                run=entry.get("windows_run") or entry.get("windows"),
                windows=entry.get("windows"),
                pct=_percent(float(entry["spread"])),
                target=target,
            )
        )
    return out


def precision_shown(asked: str | None, ran: str | None, lang: str = "en") -> str:
    """The precision that really ran (a CPU runs amp-fp16 as amp-bf16, Paddle's CPU build as fp32);
    the one asked for beside it only where the two differ."""
    if ran and asked and ran != asked:
        return t("run.ran_precision", lang, ran=ran, asked=asked)
    return ran or asked or "-"


def _speed_of(est: Estimate, lang: str) -> str:
    speed, unit = throughput(est)
    if est.workload.is_generation:
        return format_rate(speed, unit)
    return speed_text(est, lang)


def _memory_class(gpu: GpuSpec, lang: str) -> str:
    return t("unit.gb_class", lang, gb=memory_class(gpu))


def _effect(fix: Fix, lang: str) -> str:
    return t(
        "fix.effect",
        lang,
        peak=format_bytes(fix.peak_bytes),
        verdict=verdict_label(fix.verdict, lang),
        ratio=_ratio(fix.speed_ratio),
    )


def _fix_line(fix: Fix, lang: str) -> str:
    effect = _effect(fix, lang)
    w = fix.baseline.workload
    if fix.kind in ("amp", "half"):
        return t(f"fix.{fix.kind}", lang, precision=fix.changes["precision"], effect=effect)
    if fix.kind == "accumulate":
        micro = fix.changes["batch_size"]
        steps = fix.accumulation_steps or 1
        return t("fix.accumulate", lang, micro=micro, steps=steps, effective=micro * steps, effect=effect)
    if fix.kind in ("checkpointing", "int8", "int4"):
        return t(f"fix.{fix.kind}", lang, effect=effect)
    if fix.kind == "lora":
        return t(
            "fix.lora",
            lang,
            precision=fix.changes.get("precision", "16-bit"),
            rank=w.lora_rank,
            effect=effect,
        )
    if fix.kind == "qlora":
        return t("fix.qlora", lang, rank=w.lora_rank, effect=effect)
    if fix.kind == "gpus":
        return t(
            "fix.gpus",
            lang,
            gpus=fix.changes["gpus"],
            gpu=fix.gpu.name,
            strategy=fix.changes["strategy"],
            effect=effect,
        )
    if fix.kind == "bigger-card":
        price = f" (${fix.gpu.price_usd:,.0f})" if fix.gpu.price_usd is not None else ""
        return t("fix.bigger_card", lang, card=fix.gpu.name + price, effect=effect)
    if fix.kind == "combined":
        names = []
        for part in fix.parts:
            if part == "accumulate":
                names.append(
                    t(
                        "fix.part.accumulate",
                        lang,
                        micro=fix.changes["batch_size"],
                        steps=fix.accumulation_steps or 1,
                    )
                )
            else:
                names.append(t(f"fix.part.{part}", lang))
        return t("fix.combined", lang, parts=" + ".join(names), effect=effect)
    return f"{fix.kind}: {effect}"


def fix_lines(
    baseline: Estimate,
    fixes: Sequence[Fix],
    lang: str = "en",
    *,
    scenario: str | None = None,
    only_fitting: bool = False,
) -> list[str]:
    """A header naming the problem, then one line per option (those that make it fit first)."""
    if not fixes:
        return []
    chosen = [f for f in fixes if f.makes_it_fit] if only_fitting else list(fixes)
    chosen.sort(key=lambda f: (not f.makes_it_fit, f.kind == "bigger-card"))
    head = t(
        "fix.header",
        lang,
        scenario=scenario or baseline.workload.name,
        gpu=baseline.gpu.name,
        verdict=verdict_label(baseline.verdict, lang),
        peak=format_bytes(baseline.required_memory_bytes),
        usable=format_bytes(baseline.gpu.usable_bytes),
    )
    return [head, *(_fix_line(f, lang) for f in chosen)]


def _offload_rate(tps: float | None) -> str:
    """Offloaded decoding is often well under 1 tok/s, where one decimal would round 0.06 up to 0.1:
    two significant figures there."""
    if tps is not None and 0 < tps < 1:
        return f"{tps:.2g} tok/s"
    return format_rate(tps, "tok/s")


def offload_line(off: Any, lang: str = "en", *, scenario: str | None = None) -> str:
    """What CPU offload gives (fitbench.estimate.offload.OffloadEstimate), or why it does not help."""
    common = {
        "scenario": scenario or off.workload.name,
        "gpu": off.gpu.name,
        "ram": format_bytes(off.cpu_weight_bytes),
    }
    if off.verdict == "offload":
        return t(
            "offload.runs",
            lang,
            **common,
            speed=_offload_rate(off.tokens_per_second),
            gpu_layers=off.gpu_layers,
            layers=off.total_layers,
            link=off.link,
            cpp_layers=off.llama_cpp_gpu_layers,
            cpp_speed=_offload_rate(off.llama_cpp_tokens_per_second),
        )
    if off.reason == "host-ram":
        return t("offload.no_ram", lang, **common, available=format_bytes(off.host_ram_available_bytes))
    return t("offload.no_room", lang, **common)


def bottleneck_line(advice: BottleneckAdvice, lang: str = "en", *, scenario: str | None = None) -> str:
    base = advice.baseline
    name = scenario or base.workload.name
    label = bottleneck_label(advice.bottleneck, lang)
    alt = advice.alternative
    if advice.suggestion == "none" or alt is None:
        return t("bn.none", lang, scenario=name, bottleneck=label)
    common = {
        "scenario": name,
        "bottleneck": label,
        "speedup": _ratio(advice.speedup),
        "speed": _speed_of(alt, lang),
    }
    if advice.suggestion == "tuned":
        return t("bn.tuned", lang, **common)
    if advice.suggestion == "batch":
        return t("bn.batch", lang, batch=alt.workload.batch_size, **common)
    if advice.suggestion == "amp":
        return t("bn.amp", lang, precision=alt.workload.precision, **common)
    if advice.suggestion == "quantize":
        return t("bn.quantize", lang, **common)
    return t("bn.card", lang, card=alt.gpu.name, **common)


def cheapest_line(choice: Comfortable, lang: str = "en", *, scenario: str) -> str:
    row: RankRow | None
    if choice.cheapest is not None:
        row = choice.cheapest
        g = row.gpu
        return t(
            "cheapest.priced",
            lang,
            scenario=scenario,
            card=g.name,
            price=f"{g.price_usd:,.0f}",
            source=g.price_source,
            date=g.price_date,
            speed=_speed_of(row.estimate, lang),
        )
    row = choice.smallest
    if row is None:
        return t("cheapest.none", lang, scenario=scenario)
    return t(
        "cheapest.unpriced",
        lang,
        scenario=scenario,
        card=row.gpu.name,
        memory=_memory_class(row.gpu, lang),
        speed=_speed_of(row.estimate, lang),
    )


def smallest_line(choice: Comfortable, lang: str = "en", *, scenario: str) -> str | None:
    """The price-free alternative beside a priced answer, when it is another card."""
    if choice.smallest is None or choice.cheapest is None or choice.smallest.gpu.id == choice.cheapest.gpu.id:
        return None
    row = choice.smallest
    return t(
        "cheapest.smallest",
        lang,
        scenario=scenario,
        card=row.gpu.name,
        memory=_memory_class(row.gpu, lang),
        speed=_speed_of(row.estimate, lang),
    )


def guide_lines(rows: Sequence[GuideRow], lang: str = "en", *, with_brief: bool = True) -> list[str]:
    """One line per size band: each regime's classes from its smallest to its largest model."""
    lines = [t("guide.header", lang)]
    for band, _, _ in BANDS:
        items = []
        for regime in REGIMES:
            members = [r for r in rows if r.band == band and r.regime == regime]
            if not members:
                continue
            groups: list[tuple[str, list[GuideRow]]] = []
            for r in members:
                cls = (
                    t("unit.gb_class", lang, gb=r.fits_class_gb)
                    if r.fits_class_gb
                    else t("guide.no_card", lang)
                )
                if groups and groups[-1][0] == cls:
                    groups[-1][1].append(r)
                else:
                    groups.append((cls, [r]))
            steps = []
            for cls, group in groups:
                params = format_params(group[0].params, lang)
                if len(group) > 1:
                    params += "–" + format_params(group[-1].params, lang)
                steps.append(t("guide.step", lang, cls=cls, params=params))
            items.append(
                t("guide.regime", lang, regime=t(f"guide.regime.{regime}", lang), steps=" → ".join(steps))
            )
        if items:
            lines.append(
                "  "
                + t("guide.line", lang, band=t(f"band.{band}", lang), items=t("guide.sep", lang).join(items))
            )
    if with_brief:
        lines.append("  " + t("guide.brief", lang))
    return lines


def advice_item(
    kind: str, text: str, data: Any = None, *, texts: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """One advice entry for JSON and the history: what it is about, the sentence, the same sentence in
    every language (`texts`, so that a later report can use another one), and the numbers behind it."""
    out: dict[str, Any] = {"kind": kind, "text": text}
    if texts:
        out["texts"] = dict(texts)
    if data is not None:
        out["data"] = data.to_dict() if hasattr(data, "to_dict") else data
    return out
