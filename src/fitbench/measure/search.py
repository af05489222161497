"""The largest batch that really fits: probe, grow geometrically until out of memory, then bisect.

Each probe is a fresh child process that builds the workload at one batch size and runs a
couple of steps (warm-up included, so optimizer state and kernel workspaces exist): "ok" or
"oom" is then the real answer for that batch. The search starts at the estimator's predicted
maximum, so when the estimate is good it needs only a few probes around it.

The probe function is a parameter: the algorithm is tested with a pure function that says
"ok" below a threshold, and runs against real backends through `child_probe`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from fitbench.backends.base import RunOptions
from fitbench.workloads.workload import Workload

PROBE_MIN_STEPS = 2
PROBE_WARMUP = 1


@dataclass(frozen=True, kw_only=True)
class Probe:
    batch_size: int
    status: str  # ok | oom | error | timeout
    peak_memory_bytes: int | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


ProbeFn = Callable[[int], Probe]


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """max_batch: the largest batch that ran (None when even batch 1 did not);
    reached_limit: every batch up to `limit` ran, the real maximum may be higher;
    stopped: why the search ended early (a probe failed for another reason than memory)."""

    max_batch: int | None
    start: int
    limit: int
    reached_limit: bool
    probes: tuple[Probe, ...]
    stopped: str | None = None

    @property
    def first_oom(self) -> int | None:
        ooms = [p.batch_size for p in self.probes if p.status == "oom"]
        return min(ooms) if ooms else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_batch": self.max_batch,
            "start": self.start,
            "limit": self.limit,
            "reached_limit": self.reached_limit,
            "first_oom": self.first_oom,
            "stopped": self.stopped,
            "probes": [p.to_dict() for p in self.probes],
        }


def search(
    probe: ProbeFn, *, start: int, limit: int, growth: float = 2.0, rel_tol: float = 0.0
) -> SearchResult:
    """Largest b in [1, limit] with probe(b) ok, assuming ok-ness is monotone in b.

    From `start`: grow by `growth` while ok (capped at `limit`), or shrink by it while out of
    memory, until an ok batch and an oom batch bracket the answer; then bisect the bracket
    until it is narrower than `rel_tol` of the ok batch (0: exact). A start near the answer
    (the estimator's prediction) and a growth of 1.25 find it in a few probes. A probe ending
    in "error" or "timeout" is not evidence about memory: the search stops and says so.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if growth <= 1:
        raise ValueError("growth must be larger than 1")
    state = _Search(probe, start=min(max(1, int(start)), limit), limit=limit)
    first = state.run(state.start)
    if first.status not in ("ok", "oom"):
        return state.done(None, stopped=_failed(first))
    # The answer lies in [low, high): low ran, high ran out of memory; None until a probe shows it.
    low, high = (state.start, None) if first.status == "ok" else (None, state.start)
    while True:
        batch = _next_batch(low, high, limit=limit, growth=growth, rel_tol=rel_tol)
        if batch is None:  # nothing left to probe: the bracket is closed or a bound is reached
            return state.done(low, reached=high is None and low is not None)
        p = state.run(batch)
        if p.status == "ok":
            low = batch
        elif p.status == "oom":
            high = batch
        else:
            return state.done(low, stopped=_failed(p))


def _next_batch(
    low: int | None, high: int | None, *, limit: int, growth: float, rel_tol: float
) -> int | None:
    """The batch to probe next, or None when the search is over (see `search`)."""
    if high is None:  # everything probed so far ran: grow
        assert low is not None
        return None if low >= limit else min(limit, max(low + 1, int(low * growth + 0.5)))
    if low is None:  # nothing probed so far ran: shrink
        return None if high == 1 else max(1, min(high - 1, int(high / growth)))
    if high - low > max(1, int(rel_tol * low)):  # bracketed: bisect
        return (low + high) // 2
    return None


def _failed(p: Probe) -> str:
    return f"{p.status} at batch {p.batch_size}: {p.error or 'no detail'}"


class _Search:
    """The probes of one search, each batch probed once."""

    def __init__(self, probe: ProbeFn, *, start: int, limit: int) -> None:
        self.probe, self.start, self.limit = probe, start, limit
        self.probes: list[Probe] = []
        self.seen: dict[int, Probe] = {}

    def run(self, batch: int) -> Probe:
        if batch not in self.seen:
            result = self.probe(batch)
            self.seen[batch] = result
            self.probes.append(result)
        return self.seen[batch]

    def done(self, best: int | None, *, stopped: str | None = None, reached: bool = False) -> SearchResult:
        return SearchResult(
            max_batch=best,
            start=self.start,
            limit=self.limit,
            reached_limit=reached,
            probes=tuple(self.probes),
            stopped=stopped,
        )


def _relay(
    progress: Callable[[dict[str, Any]], None] | None, batch: int
) -> Callable[[dict[str, Any]], None] | None:
    """Each event of a probe's child, with the batch it probes as its detail."""
    if progress is None:
        return None
    target = progress

    def relay(event: dict[str, Any]) -> None:
        target(
            {**event, "detail": f"probing batch {batch}", "detail_key": "progress.probing", "batch": batch}
        )

    return relay


def child_probe(
    workload: Workload,
    backend_name: str,
    options: RunOptions,
    *,
    timeout_s: float | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> ProbeFn:
    """A probe that runs `workload` at a given batch in a fresh child process (a few steps)."""
    from fitbench.measure.runner import measure

    def probe(batch: int) -> Probe:
        relay = _relay(progress, batch)
        m = measure(
            workload.replace(batch_size=batch),
            backend_name,
            options,
            timeout_s=timeout_s,
            min_steps=PROBE_MIN_STEPS,
            min_seconds=0.0,
            warmup=PROBE_WARMUP,
            progress=relay,
        )
        return Probe(
            batch_size=batch,
            status=str(m.get("status")),
            peak_memory_bytes=m.get("peak_memory_bytes"),
            error=m.get("error"),
        )

    return probe


def find_max_batch(
    workload: Workload,
    backend_name: str,
    options: RunOptions,
    *,
    start: int,
    limit: int,
    probe: ProbeFn | None = None,
    timeout_s: float | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    growth: float = 2.0,
    rel_tol: float = 0.0,
) -> SearchResult:
    """The largest batch of `workload` that runs on `options.device`, by real probes.

    `probe` defaults to `child_probe` (a fresh process per batch); pass another to test the
    search itself.
    """
    if probe is None:
        probe = child_probe(workload, backend_name, options, timeout_s=timeout_s, progress=progress)
    return search(probe, start=start, limit=limit, growth=growth, rel_tol=rel_tol)
