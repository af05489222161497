"""Where a max-batch search starts and how far it may grow, from the memory of the device it runs on.

The estimate's largest batch is for the card named with --gpu. Probing it on the CPU, or on a GPU
whose memory is not that card's, probes a batch sized for memory the run does not have. On the
CPU that is dangerous, not just slow: a GPU-sized batch grows the child to tens of GB, and there
is no allocator error to answer "out of memory", only the kernel's OOM killer (SIGKILL), which
may take other work on the machine with it. So on the CPU the search starts at, and never grows
past, the memory model's largest batch for a share (HOST_RAM_SHARE) of the RAM available now;
the share is a safety factor because a CPU run's RSS is not the GPU-shaped figure the model
counts (fp32 kernels' workspaces, the framework's own heap, the allocator's caching): the tiny
bert-base-imdb training step grows RSS by 1.06 MB a sample between batch 256 and 1024 on the CPU,
twice the model's 0.53 MB, so a quarter of the RAM by the model is about half of it in RSS.
On a GPU out of memory is a clean answer, so only the start moves: to the memory model's largest
batch for this device's memory (its total, or the --emulate cap), scaled by the named card's
usable share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fitbench.core.gpu import GpuSpec
from fitbench.workloads.workload import Workload

HOST_RAM_SHARE = 0.25
# Device memory this close to the named card's is that card's: the estimate's start stands.
SAME_MEMORY_TOLERANCE = 0.05
HOST_RAM = "host_ram"
DEVICE_MEMORY = "device_memory"


@dataclass(frozen=True, kw_only=True)
class SearchBounds:
    """start and limit of the search; `capped` names the memory that set them (None: the estimate
    and the default limit did), `memory_bytes` what that memory holds, `budget_bytes` the share of
    it the memory model was asked to fit, `uncapped_start` where the search would have started."""

    start: int
    limit: int
    uncapped_start: int
    capped: str | None = None
    memory_bytes: int | None = None
    budget_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "capped": self.capped,
            "uncapped_start": self.uncapped_start,
            "memory_bytes": self.memory_bytes,
            "budget_bytes": self.budget_bytes,
        }


def local_memory(device: str, memory_limit_bytes: int | None = None) -> tuple[str, int] | None:
    """(kind, bytes) of the memory a run on `device` has: the RAM available now on the CPU, the
    --emulate cap or the device's total on a GPU; None where it cannot be read."""
    if not device.startswith("cuda"):
        from fitbench.core.host import memory_bytes

        ram = memory_bytes()
        return (HOST_RAM, ram[1]) if ram else None
    if memory_limit_bytes:
        return DEVICE_MEMORY, int(memory_limit_bytes)
    from fitbench.measure import nvml

    index = nvml.cuda_index(device)
    total = nvml.device_total(index) if index is not None else None
    return (DEVICE_MEMORY, total) if total else None


def largest_batch(workload: Workload, budget_bytes: int, framework: str, exec_mode: str) -> int:
    """The memory model's largest batch of `workload` within `budget_bytes` (at least 1: a search
    always probes something), counted as the estimate counts what must fit."""
    from fitbench.estimate.memory import needed_bytes
    from fitbench.estimate.profile import get_profile
    from fitbench.estimate.verdict import max_fitting

    profile = get_profile(framework, exec_mode)
    return max(1, max_fitting(lambda b: needed_bytes(workload.replace(batch_size=b), profile), budget_bytes))


def search_bounds(
    workload: Workload,
    *,
    estimated: int | None,
    card: GpuSpec | None,
    batch_limit: int | None,
    memory: tuple[str, int] | None,
    framework: str = "torch",
    exec_mode: str = "default",
) -> SearchBounds:
    """The bounds of a max-batch search of `workload` (see the module's docstring).

    estimated    the estimate's largest batch for `card` (None or 0: none; the workload's batch)
    batch_limit  --batch-limit (None: 8 times the start, at least 64)
    memory       local_memory() of the device the search runs on
    """
    start = estimated if estimated and estimated > 0 else workload.batch_size
    limit = batch_limit or max(64, 8 * start)
    plain = SearchBounds(start=min(start, limit), limit=limit, uncapped_start=start)
    if memory is None:
        return plain
    kind, have = memory
    if kind == HOST_RAM:
        budget = int(have * HOST_RAM_SHARE)
        fit = largest_batch(workload, budget, framework, exec_mode)
        if fit >= limit:
            return plain
        capped_limit = min(limit, fit)
        return SearchBounds(
            start=min(start, capped_limit),
            limit=capped_limit,
            uncapped_start=start,
            capped=kind,
            memory_bytes=have,
            budget_bytes=budget,
        )
    if card is None or abs(have - card.memory_bytes) <= SAME_MEMORY_TOLERANCE * card.memory_bytes:
        return plain
    budget = int(have * card.usable_bytes / card.memory_bytes)
    fit = largest_batch(workload, budget, framework, exec_mode)
    if fit == start:
        return plain
    limit = batch_limit or max(64, 8 * fit)
    return SearchBounds(
        start=min(fit, limit),
        limit=limit,
        uncapped_start=start,
        capped=kind,
        memory_bytes=have,
        budget_bytes=budget,
    )
