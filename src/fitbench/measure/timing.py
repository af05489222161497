"""Statistics of raw timing samples: the one place a median or a p90 is computed.

The child process keeps every step time it measured; everything shown to the user (median step
time, p90, throughput) is derived from those samples here, so two reports of the same run can
never disagree about what "the step time" was.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class SampleStats:
    """Summary of a list of durations in seconds.

    The median is the headline figure: a step time distribution has a long right tail (a
    garbage-collection pause, an allocator resize, another process), which the mean absorbs
    and the median ignores. p90 shows how long that tail is.
    """

    count: int
    median: float
    p90: float
    mean: float
    min: float
    max: float
    total: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between order statistics.

    The same definition as numpy's default ('linear'), so figures match what users compute
    from the raw samples stored with every result.
    """
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    fraction = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * fraction


def summarize(samples: Sequence[float]) -> SampleStats:
    """Median, p90, mean, min, max, count and total of a non-empty list of durations."""
    values = [float(s) for s in samples]
    if not values:
        raise ValueError("no timing samples to summarise")
    if any(math.isnan(v) or v < 0 for v in values):
        raise ValueError("timing samples must be non-negative numbers")
    total = math.fsum(values)
    return SampleStats(
        count=len(values),
        median=percentile(values, 50),
        p90=percentile(values, 90),
        mean=total / len(values),
        min=min(values),
        max=max(values),
        total=total,
    )
