"""Every catalog card for one workload, ranked; and the cheapest card that runs it comfortably.

Why a ranking and not just "the fastest card": a buyer wants the cards that *fit* first, then
the fastest of those, then what each costs per unit of speed. Prices are catalog data with a
source and a date (launch prices of GeForce and workstation cards); data-centre cards have no
public list price, so "the cheapest card" can only be chosen among priced cards and the
smallest-memory card that fits is named beside it as a price-free answer. Rented cards carry an
example hourly rate instead: each row's `cost` says what the job costs there by the hour.

Pure functions over the estimator: no framework import, nothing printed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fitbench.advise.cost import Cost, job_cost
from fitbench.catalog import load_catalog
from fitbench.core.gpu import GpuSpec
from fitbench.estimate.api import Estimate, estimate
from fitbench.estimate.verdict import FITS, VERDICT_ORDER
from fitbench.workloads.workload import Workload

__all__ = ["Comfortable", "RankRow", "cheapest_comfortable", "rank_catalog", "throughput"]

_UNITS = {"images": "img/s", "tokens": "tok/s", "samples": "seq/s"}


def throughput(est: Estimate) -> tuple[float | None, str]:
    """The estimate's 'higher is faster' figure and its unit.

    Generation and decoder training are judged in tokens per second (what LLM users compare);
    image and sequence classification in samples per second.
    """
    w = est.workload
    if w.is_generation or (w.family == "decoder" and est.tokens_per_second):
        return est.tokens_per_second, "tok/s"
    return est.samples_per_second, _UNITS.get(w.sample_unit, "seq/s")


@dataclass(frozen=True, kw_only=True)
class RankRow:
    """One card's line in the ranking.

    speed                  throughput in `speed_unit` (higher is faster)
    price_per_speed        USD of launch price per unit of throughput (None without a price)
    cost                   the job's cost on the card: by the hour where it is rented, its price
                           per GiB where it is bought (fitbench.advise.cost)
    """

    gpu: GpuSpec
    estimate: Estimate
    verdict: str
    peak_bytes: int
    headroom_bytes: int
    speed: float | None
    speed_unit: str
    price_usd: float | None
    price_per_speed: float | None
    cost: Cost

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.id,
            "gpu_name": self.gpu.name,
            "verdict": self.verdict,
            "peak_memory_bytes": self.peak_bytes,
            "usable_memory_bytes": self.gpu.usable_bytes,
            "headroom_bytes": self.headroom_bytes,
            "speed": self.speed,
            "speed_unit": self.speed_unit,
            "price_usd": self.price_usd,
            "price_source": self.gpu.price_source or None,
            "price_date": self.gpu.price_date or None,
            "price_per_speed": self.price_per_speed,
            "cost": self.cost.to_dict(),
        }


def _row(est: Estimate) -> RankRow:
    speed, unit = throughput(est)
    price = est.gpu.price_usd
    per = price / speed if price is not None and speed else None
    return RankRow(
        gpu=est.gpu,
        estimate=est,
        verdict=est.verdict,
        peak_bytes=est.peak_memory_bytes,
        headroom_bytes=est.headroom_bytes,
        speed=speed,
        speed_unit=unit,
        price_usd=price,
        price_per_speed=per,
        cost=job_cost(est),
    )


def _sort_key(row: RankRow) -> tuple[int, float, float]:
    speed = row.speed if row.speed is not None else 0.0
    price = row.price_usd if row.price_usd is not None else math.inf
    return VERDICT_ORDER[row.verdict], -speed, price


def rank_catalog(
    workload: Workload,
    *,
    framework: str = "torch",
    exec_mode: str = "default",
    gpus: Iterable[GpuSpec] | None = None,
) -> list[RankRow]:
    """Every catalog card (or `gpus`) for `workload`: fits before tight before oom, fastest first
    within a verdict, cheaper first among equally fast cards."""
    cards = list(gpus) if gpus is not None else list(load_catalog().values())
    rows = [_row(estimate(workload, gpu, framework=framework, exec_mode=exec_mode)) for gpu in cards]
    return sorted(rows, key=_sort_key)


@dataclass(frozen=True, kw_only=True)
class Comfortable:
    """Which card to buy for a workload.

    cheapest            the cheapest priced card whose verdict is 'fits' (None: no priced card fits)
    smallest            the card with the least usable memory that fits, priced or not: the
                        price-free answer, and the only one when only data-centre cards fit
    unpriced_fitting    ids of cards that fit but have no public price
    """

    cheapest: RankRow | None
    smallest: RankRow | None
    unpriced_fitting: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cheapest": self.cheapest.to_dict() if self.cheapest else None,
            "smallest": self.smallest.to_dict() if self.smallest else None,
            "unpriced_fitting": list(self.unpriced_fitting),
        }


def cheapest_comfortable(
    workload: Workload,
    *,
    framework: str = "torch",
    exec_mode: str = "default",
    rows: Sequence[RankRow] | None = None,
) -> Comfortable:
    """The cheapest priced card that runs `workload` with room to spare, and the smallest one."""
    ranked = (
        list(rows) if rows is not None else rank_catalog(workload, framework=framework, exec_mode=exec_mode)
    )
    fitting = [r for r in ranked if r.verdict == FITS]
    priced = [r for r in fitting if r.price_usd is not None]
    cheapest = min(priced, key=lambda r: (r.price_usd, -(r.speed or 0.0)), default=None)
    smallest = min(fitting, key=lambda r: (r.gpu.usable_bytes, -(r.speed or 0.0)), default=None)
    unpriced = tuple(r.gpu.id for r in fitting if r.price_usd is None)
    return Comfortable(cheapest=cheapest, smallest=smallest, unpriced_fitting=unpriced)
