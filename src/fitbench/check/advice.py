"""The advice `fitbench check` gives: per scenario, what would make it fit on the target card, TF32,
CPU offload, the bottleneck where the job runs and the card to buy; for a machine without a GPU,
the cheapest cards that run each scenario and what this CPU can hold.

Every sentence is kept in every language (the history may be reported in another one later); the
terminal lines are in the language asked for.
"""

from __future__ import annotations

import os
from typing import Any

from fitbench.advise.fixes import bottleneck_advice, offload_option, what_would_make_it_fit
from fitbench.advise.i18n import LANGS, t
from fitbench.advise.ranking import cheapest_comfortable, rank_catalog
from fitbench.advise.text import (
    advice_item,
    bottleneck_line,
    cheapest_line,
    fix_lines,
    offload_line,
    smallest_line,
    speed_text,
)
from fitbench.advise.tf32 import tf32_advice, tf32_dict, tf32_texts
from fitbench.check.result import ScenarioResult
from fitbench.core.gpu import GpuSpec
from fitbench.core.units import format_bytes
from fitbench.estimate.api import estimate
from fitbench.estimate.verdict import FITS, OOM


def scenario_advice(
    result: ScenarioResult, target: GpuSpec, framework: str, exec_mode: str, lang: str
) -> None:
    """Fixes on the target card, the bottleneck where the job runs, the card to buy.

    Each sentence is kept in every language (the history may be reported in another one later);
    the terminal shows `lang`.
    """

    def add(kind: str, texts: dict[str, str], data: Any) -> None:
        head, *options = texts[lang].split("\n")
        result.lines.append(head)
        result.lines.extend("  - " + line for line in options)
        result.advice.append(advice_item(kind, texts[lang], data, texts=texts))

    w, key = result.workload, result.key
    rows = rank_catalog(w, framework=framework, exec_mode=exec_mode)
    result.rows = list(rows)
    base = result.estimates.get(target.id) or estimate(w, target, framework=framework, exec_mode=exec_mode)
    if base.verdict != FITS:
        fixes = what_would_make_it_fit(w, target, framework=framework, exec_mode=exec_mode, rows=rows)
        helpful = [f for f in fixes if f.makes_it_fit]
        if helpful:
            texts = {lg: "\n".join(fix_lines(base, helpful, lg, scenario=key)) for lg in LANGS}
            data = {
                "gpu": target.id,
                "baseline_verdict": base.verdict,
                "options": [f.to_dict() for f in fixes],
            }
            add("fixes", texts, data)
    if base.verdict != OOM:
        # fp32 on a card with TF32 tensor cores that PyTorch leaves off for matmuls by default.
        for fp32, alt in tf32_advice([base]):
            add("tf32", tf32_texts(fp32, alt, scenario=key), tf32_dict(fp32, alt))
    if base.verdict == OOM:
        # A generation job that does not fit may still run with layers in CPU memory.
        off = offload_option(base)
        if off is not None:
            add("offload", {lg: offload_line(off, lg, scenario=key) for lg in LANGS}, off.to_dict())
    choice = cheapest_comfortable(w, framework=framework, exec_mode=exec_mode, rows=rows)
    # The bottleneck matters where the job runs: the target card, else the card to buy.
    buy = choice.cheapest or choice.smallest
    runs_on = base if base.verdict != OOM else (buy.estimate if buy is not None else None)
    if runs_on is not None:
        bn = bottleneck_advice(runs_on, rows=rows)
        # Where it does not run on the target, say which card the bottleneck and speed-up are for.
        names = {
            lg: key if runs_on is base else t("bn.on_card", lg, scenario=key, gpu=runs_on.gpu.name)
            for lg in LANGS
        }
        add("bottleneck", {lg: bottleneck_line(bn, lg, scenario=names[lg]) for lg in LANGS}, bn)
    add("cheapest", {lg: cheapest_line(choice, lg, scenario=key) for lg in LANGS}, choice)
    if choice.smallest is not None and choice.smallest.price_usd is None:
        texts = {lg: smallest_line(choice, lg, scenario=key) for lg in LANGS}
        if all(texts.values()):
            add("smallest", {lg: str(x) for lg, x in texts.items()}, choice.smallest)


CHEAPEST_SHOWN = 3


def _ram_bytes() -> int | None:
    """This machine's physical memory (what a job run on the CPU has), None where unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def no_gpu_advice(
    results: list[ScenarioResult], lang: str, can_measure: bool = True
) -> tuple[list[str], dict[str, Any]]:
    """For a machine without a GPU: the cheapest catalog cards (by list price) on which each
    scenario's verdict is fits, and what this CPU can run (the tiny variants; at full size, the
    scenarios whose memory, less the CUDA context, fits in its RAM)."""
    lines = [t("nogpu.header", lang)]
    cheapest: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        fitting = sorted(
            (row for row in r.rows if row.verdict == FITS and row.price_usd is not None),
            key=lambda row: (row.price_usd, row.gpu.id),
        )[:CHEAPEST_SHOWN]
        cheapest[r.key] = [
            {
                "gpu": row.gpu.id,
                "gpu_name": row.gpu.name,
                "price_usd": row.price_usd,
                "verdict": row.verdict,
                "speed": row.speed,
                "speed_unit": row.speed_unit,
            }
            for row in fitting
        ]
        cards = ", ".join(
            t(
                "nogpu.card_item",
                lang,
                card=row.gpu.name,
                price=f"{row.price_usd:,.0f}",
                speed=speed_text(row.estimate, lang),
            )
            for row in fitting
        )
        lines.append("  " + t("nogpu.card", lang, scenario=r.key, cards=cards or t("nogpu.none", lang)))
    ram = _ram_bytes()
    in_ram = []
    for r in results:
        est = next(iter(r.estimates.values()), None)
        if est is not None and ram is not None:
            need = est.required_memory_bytes - est.breakdown.get("cuda_context", 0)
            if need <= ram:
                in_ram.append(r.key)
    cpu = t(
        "nogpu.cpu",
        lang,
        fits_ram=", ".join(in_ram) or t("nogpu.none_in_ram", lang),
        ram=format_bytes(ram) if ram else "?",
    )
    if not can_measure:
        cpu += t("nogpu.cpu_needs_framework", lang)
    lines.append("  " + cpu)
    return lines, {
        "cheapest_cards": cheapest,
        "ram_bytes": ram,
        "fits_in_ram": in_ram,
        "tiny_runs_on_cpu": True,
    }
