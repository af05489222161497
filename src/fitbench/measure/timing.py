"""Statistics of raw timing samples: the one place a median or a p90 is computed.

The child process keeps every step time it measured; everything shown to the user (median step
time, p90, throughput) is derived from those samples here, so two reports of the same run can
never disagree about what "the step time" was. How long to time is decided here too: short
windows repeated until a figure's spread is below 5 % or its budget is spent
(repeat_until_stable), the loop the child runs for every timed figure.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
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


# -- spread: repeating short timed windows until they agree ------------------------------------
TARGET_SPREAD = 0.05  # a figure is stable when its windows agree within 5 %
MIN_WINDOWS = 3  # windows a spread is taken over: the latest ones of a series


def spread(values: Sequence[float]) -> float | None:
    """(max - min) / median of `values`: how far apart repeated windows of one figure are.

    The full range over the median, not a standard deviation: with three to a few windows a
    standard deviation or an interquartile range says little, and the range is the figure a user
    checks by eye ("it moved 4 % between repeats"). None for fewer than two values or a median
    that is not positive.
    """
    if len(values) < 2:
        return None
    middle = percentile(values, 50)
    if middle <= 0:
        return None
    return (max(values) - min(values)) / middle


@dataclass(frozen=True, kw_only=True)
class FigureSpread:
    """One timed figure's spread over the windows it is computed from, and whether it settled.

    spread    (max - min) / median of the figure's value in each window used (None: one window)
    stable    spread is below the target
    windows   windows the figure's value was taken from (the latest `MIN_WINDOWS` of its series)
    windows_run  windows the series ran in all (more than `windows` where it repeated to settle)
    """

    spread: float | None
    stable: bool
    windows: int
    windows_run: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class WindowSeries:
    """What `repeat_until_stable` ran: every window's figure values, in order, and the outcome.

    values    one mapping per window run: figure name -> the window's value (None: not measured)
    used      how many of the latest windows the figures (and their spreads) are computed from
    seconds   the series' wall time
    stopped   'stable' (every figure settled), 'budget' (its time ran out) or 'deadline'
    """

    values: tuple[dict[str, float | None], ...]
    used: int
    target: float
    seconds: float
    stopped: str

    def kept(self) -> tuple[dict[str, float | None], ...]:
        """The windows the figures are computed from: the latest `used` ones."""
        return self.values[len(self.values) - self.used :]

    def figure_spread(self, name: str) -> FigureSpread | None:
        """`name`'s spread over the windows used; None where no window measured it."""
        return _figure_spread(self.kept(), name, self.target, len(self.values))

    def spreads(self) -> dict[str, FigureSpread]:
        """Every figure a window measured: name -> its spread."""
        names = dict.fromkeys(n for w in self.values for n in w)
        out = {}
        for name in names:
            fs = self.figure_spread(name)
            if fs is not None:
                out[name] = fs
        return out


def _figure_spread(
    windows: Sequence[dict[str, float | None]], name: str, target: float, run: int = 0
) -> FigureSpread | None:
    values = [w.get(name) for w in windows]
    known = [float(v) for v in values if v is not None]
    if not known:
        return None
    s = spread(known) if len(known) == len(values) else None
    return FigureSpread(
        spread=s, stable=s is not None and s < target, windows=len(known), windows_run=max(run, len(windows))
    )


def repeat_until_stable(
    window: Callable[[], dict[str, float | None]],
    *,
    budget_seconds: float,
    target: float = TARGET_SPREAD,
    min_windows: int = MIN_WINDOWS,
    deadline: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> WindowSeries:
    """Run `window()` (one short timed window; it returns its figures' values) until the latest
    `min_windows` windows agree within `target` for every figure, or `budget_seconds` of this
    series have passed, or `clock()` reaches `deadline` (the measurement's own wall limit).

    At least `min_windows` windows run, whatever the budget (a budget shorter than that many
    windows only says "no repeats"), unless the deadline comes first. A figure a window does not
    measure (None in every window) does not hold the series up. Earlier windows, where a figure
    still moved (clocks ramping, caches filling), are run but not used: the figures and their
    spreads come from the latest `min_windows` windows, so a figure and its spread always
    describe the same samples. `clock` is the time source: tests pass a counter.
    """
    if min_windows < 1:
        raise ValueError("min_windows must be at least 1")
    start = clock()
    values: list[dict[str, float | None]] = []
    stopped = "budget"
    while True:
        values.append(dict(window()))
        now = clock()
        latest = values[-min_windows:]
        if len(values) >= min_windows:
            names = {n for w in latest for n, v in w.items() if v is not None}
            spreads = [_figure_spread(latest, n, target) for n in names]
            if all(fs is not None and fs.stable for fs in spreads):
                stopped = "stable"
                break
            if now - start >= budget_seconds:
                break
        if deadline is not None and now >= deadline:
            stopped = "deadline"
            break
    return WindowSeries(
        values=tuple(values),
        used=min(len(values), min_windows),
        target=target,
        seconds=clock() - start,
        stopped=stopped,
    )
