"""Terminal output of `fitbench estimate --serve`: one row per card, then for a single card its
memory plan and the throughput against concurrency. Only formatting: the numbers come from
fitbench.estimate.serving; every sentence is in fitbench.advise.i18n (English and Chinese)."""

from __future__ import annotations

from fitbench.advise.i18n import bottleneck_label, t
from fitbench.core.units import format_bytes, format_rate, format_seconds
from fitbench.estimate.serving import ServingEstimate
from fitbench.results.table import render_table


def _count(n: float) -> str:
    return f"{n:,.0f}" if n >= 10 else f"{n:.2f}"


def _peak(e: ServingEstimate) -> tuple[str, int]:
    best = max(e.curve, key=lambda p: p.tokens_per_second)
    return format_rate(best.tokens_per_second, "tok/s"), best.concurrency


def summary_lines(e: ServingEstimate, lang: str) -> list[str]:
    """The serving estimate of one card as sentences."""
    p = e.plan
    if not e.fits:
        return [
            t(
                f"serve.no_fit.{e.reason}",
                lang,
                gpu=e.gpu.name,
                weights=format_bytes(p.weights_bytes),
                requested=format_bytes(p.requested_bytes),
                tokens=f"{p.kv_tokens:,}",
                context=f"{e.config.context:,}",
            )
        ]
    lines = []
    if e.curve:
        peak, peak_c = _peak(e)
        lines.append(
            t(
                "serve.summary",
                lang,
                gpu=e.gpu.name,
                tokens=f"{p.kv_tokens:,}",
                blocks=f"{p.num_blocks:,}",
                seqs=_count(e.max_concurrent_sequences),
                context=f"{e.config.context:,}",
                ttft=format_seconds(e.ttft_seconds),
                peak=peak,
                peak_c=peak_c,
            )
        )
    if e.knee_concurrency is not None and e.knee_reason:
        lines.append(
            t(
                "serve.knee",
                lang,
                gpu=e.gpu.name,
                c=e.knee_concurrency,
                reason=t(f"serve.knee.{e.knee_reason}", lang),
            )
        )
    return lines


def format_serving(results: list[ServingEstimate], lang: str = "en") -> str:
    first = results[0]
    c = first.config
    lines = [
        t(
            "serve.title",
            lang,
            workload=first.workload.name,
            context=f"{c.context:,}",
            util=f"{c.gpu_memory_utilization:g}",
            block=c.block_size,
        ),
        "",
    ]
    rows = []
    for e in results:
        p = e.plan
        tps1 = format_rate(e.curve[0].tokens_per_second, "tok/s") if e.curve else "-"
        peak = f"{_peak(e)[0]} @{_peak(e)[1]}" if e.curve else "-"
        rows.append(
            [
                e.gpu.id,
                f"{p.kv_tokens:,} tok / {p.num_blocks:,}" if e.fits else "-",
                _count(e.max_concurrent_sequences) if e.fits else "0",
                format_seconds(e.ttft_seconds),
                tps1,
                peak,
                str(e.knee_concurrency) if e.knee_concurrency else "-",
            ]
        )
    lines.append(
        render_table(
            [
                "GPU",
                t("serve.col.kv", lang),
                t("serve.col.seqs", lang),
                t("serve.col.ttft", lang),
                t("serve.col.tps1", lang),
                t("serve.col.peak", lang),
                t("serve.col.knee", lang),
            ],
            rows,
            align="lrrrrrr",
        )
    )
    if len(results) == 1 and first.fits:
        p = first.plan
        parts = [
            ("requested", p.requested_bytes),
            ("weights", p.weights_bytes),
            ("activation", p.activation_bytes),
            ("non_torch", p.non_torch_bytes),
            ("cudagraph", p.cudagraph_bytes),
            ("kv_cache", p.kv_cache_bytes),
        ]
        lines += [
            "",
            render_table(
                [t("col.item", lang), t("col.value", lang)],
                [[t(f"serve.part.{k}", lang), format_bytes(v)] for k, v in parts],
                indent="  ",
            ),
        ]
        curve = [
            [
                f"{pt.concurrency}{' *' if pt.concurrency == first.knee_concurrency else ''}",
                format_rate(pt.tokens_per_second, "tok/s"),
                format_rate(pt.per_sequence_tokens_per_second, "tok/s"),
                bottleneck_label(pt.bottleneck, lang),
            ]
            for pt in first.curve
        ]
        lines += [
            "",
            render_table(
                [
                    t("serve.col.concurrency", lang),
                    "tok/s",
                    t("serve.col.per_user", lang),
                    t("serve.col.bound", lang),
                ],
                curve,
                align="rrrl",
                indent="  ",
            ),
        ]
    lines.append("")
    for e in results:
        lines += summary_lines(e, lang)
    lines += ["", t("serve.footer", lang)]
    return "\n".join(lines)
