"""fits / tight / oom, and the largest batch that fits.

A job is `tight` when it fits but leaves less than TIGHT_MARGIN of the card's usable memory
free: allocator fragmentation, a longer input or another process on the card can then push it
over. The margin is stated in every estimate's assumptions.

`offload` sits between `tight` and `oom`: the job does not fit on the GPU, but runs with part of
its weights in CPU memory (fitbench.estimate.offload). An estimate's own verdict describes the
GPU alone and is never `offload`; the offload level is the effective verdict of a job that is
`oom` on the GPU and runs offloaded, which `--fail-if` and the advice compare on this one ladder.
"""

from __future__ import annotations

from collections.abc import Callable

from fitbench.workloads.workload import LIMITS

TIGHT_MARGIN = 0.10
# The search never probes a batch that Workload would refuse as "beyond any real job".
MAX_BATCH_LIMIT = LIMITS["batch_size"]

FITS, TIGHT, OFFLOAD, OOM = "fits", "tight", "offload", "oom"
VERDICT_ORDER = {FITS: 0, TIGHT: 1, OFFLOAD: 2, OOM: 3}


def verdict(peak_bytes: int, usable_bytes: int) -> str:
    if peak_bytes > usable_bytes:
        return OOM
    if peak_bytes > usable_bytes * (1.0 - TIGHT_MARGIN):
        return TIGHT
    return FITS


def max_fitting(peak_at: Callable[[int], int], usable_bytes: int, *, limit: int = MAX_BATCH_LIMIT) -> int:
    """Largest n with peak_at(n) <= usable_bytes (0 if even n = 1 does not fit).

    Memory is non-decreasing in the batch size, so an exponential probe then bisection finds
    it in O(log n) evaluations.
    """
    if peak_at(1) > usable_bytes:
        return 0
    lo, hi = 1, 2
    while hi <= limit and peak_at(hi) <= usable_bytes:
        lo, hi = hi, hi * 2
    if hi > limit:
        return limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if peak_at(mid) <= usable_bytes:
            lo = mid
        else:
            hi = mid
    return lo
