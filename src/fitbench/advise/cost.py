"""What a job costs on a card: per million tokens, per epoch, tokens per dollar.

Why two bases and no blend: a rented card has a price per hour, so time converts to money
directly; a bought card has a purchase price, and turning that into a price per hour needs a
lifetime, a utilisation and an electricity price fitbench cannot know. So:

    rent       (the catalog's rent_usd_per_hour, an example on-demand rate with its source and
               date): cost per hour = rate x GPUs; per million tokens = cost per hour /
               (tokens per second x 3600) x 10^6; per epoch = epoch seconds / 3600 x cost per hour;
               tokens per dollar = tokens per second x 3600 / cost per hour.
    purchase   (the launch price): the price and the price per GiB of memory only; no
               amortised hourly cost is made up.

Tokens are the estimate's tokens_per_second: generated tokens for generation (decode throughput of
the whole batch, prefill not counted), processed tokens for decoder training. A job that does
not fit (verdict oom) has no cost.

Pure arithmetic over an Estimate; nothing imported from a framework, nothing printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fitbench.core.gpu import GpuSpec
from fitbench.estimate.api import Estimate
from fitbench.estimate.verdict import OOM

__all__ = ["COST_FIELDS", "Cost", "cost_cell", "job_cost"]

SECONDS_PER_HOUR = 3600.0

# The JSON names (README, "Cost"), in the order they are printed.
COST_FIELDS = (
    "cost_basis",
    "price_usd",
    "rent_usd_per_hour",
    "price_date",
    "price_source",
    "cost_per_hour_usd",
    "cost_per_million_tokens_usd",
    "tokens_per_dollar",
    "cost_per_epoch_usd",
    "price_per_gib_usd",
)


@dataclass(frozen=True, kw_only=True)
class Cost:
    """The money side of one estimate; every field None where it does not apply.

    basis                        'rent', 'purchase' or None (the card has neither figure)
    price_date / price_source    of the figure used (rental rate or launch price)
    cost_per_hour_usd            rent x GPUs of the job
    cost_per_million_tokens_usd  rented hours per 10^6 tokens of the estimate's tokens_per_second
    tokens_per_dollar            its inverse, in tokens
    cost_per_epoch_usd           rented hours of one epoch (training with a dataset size)
    price_per_gib_usd            purchase price / the card's memory in GiB
    """

    basis: str | None = None
    price_usd: float | None = None
    rent_usd_per_hour: float | None = None
    price_date: str | None = None
    price_source: str | None = None
    cost_per_hour_usd: float | None = None
    cost_per_million_tokens_usd: float | None = None
    tokens_per_dollar: float | None = None
    cost_per_epoch_usd: float | None = None
    price_per_gib_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cost_basis": self.basis,
            "price_usd": self.price_usd,
            "rent_usd_per_hour": self.rent_usd_per_hour,
            "price_date": self.price_date,
            "price_source": self.price_source,
            "cost_per_hour_usd": self.cost_per_hour_usd,
            "cost_per_million_tokens_usd": self.cost_per_million_tokens_usd,
            "tokens_per_dollar": self.tokens_per_dollar,
            "cost_per_epoch_usd": self.cost_per_epoch_usd,
            "price_per_gib_usd": self.price_per_gib_usd,
        }


def _memory_gib(gpu: GpuSpec) -> float:
    return gpu.nominal_memory_gib or gpu.memory_bytes / 2**30


def job_cost(est: Estimate) -> Cost:
    """The cost of `est` on its card: by the hour where the card has a rental rate, else its
    purchase price per GiB; see the module docstring for the formulas."""
    gpu = est.gpu
    if gpu.rent_usd_per_hour is not None:
        per_hour = gpu.rent_usd_per_hour * est.workload.gpus
        runs = est.verdict != OOM
        tps = est.tokens_per_second if runs and est.tokens_per_second else None
        epoch = est.epoch_seconds if runs and est.epoch_seconds else None
        return Cost(
            basis="rent",
            price_usd=gpu.price_usd,
            rent_usd_per_hour=gpu.rent_usd_per_hour,
            price_date=gpu.rent_date,
            price_source=gpu.rent_source,
            cost_per_hour_usd=per_hour,
            cost_per_million_tokens_usd=per_hour / (tps * SECONDS_PER_HOUR) * 1e6 if tps else None,
            tokens_per_dollar=tps * SECONDS_PER_HOUR / per_hour if tps else None,
            cost_per_epoch_usd=epoch / SECONDS_PER_HOUR * per_hour if epoch else None,
            price_per_gib_usd=gpu.price_usd / _memory_gib(gpu) if gpu.price_usd is not None else None,
        )
    if gpu.price_usd is not None:
        return Cost(
            basis="purchase",
            price_usd=gpu.price_usd,
            price_date=gpu.price_date,
            price_source=gpu.price_source,
            price_per_gib_usd=gpu.price_usd / _memory_gib(gpu),
        )
    return Cost()


def _usd(value: float) -> str:
    """Dollars with the digits a reader needs: $0.042, $1.93, $27, $1,999."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.2g}" if value >= 0.01 else f"{value:.1e}"


def cost_cell(cost: Cost, lang: str = "en") -> str:
    """The table cell: per epoch (training), else per million tokens, else per hour for a rented card; the
    price and price per GiB for a bought one; '-' without either."""
    from fitbench.advise.i18n import t

    if cost.basis == "rent":
        if cost.cost_per_epoch_usd is not None:
            return t("cost.per_epoch", lang, value=_usd(cost.cost_per_epoch_usd))
        if cost.cost_per_million_tokens_usd is not None:
            return t("cost.per_mtok", lang, value=_usd(cost.cost_per_million_tokens_usd))
        return t("cost.per_hour", lang, value=_usd(cost.cost_per_hour_usd or 0.0))
    if cost.basis == "purchase" and cost.price_usd is not None and cost.price_per_gib_usd is not None:
        return t("cost.purchase", lang, price=_usd(cost.price_usd), value=_usd(cost.price_per_gib_usd))
    return "-"
