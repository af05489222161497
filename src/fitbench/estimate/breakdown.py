"""The memory model's result: named parts in bytes that add up to the peak.

Why a module of its own: every memory model (one device, PEFT, one GPU of several) returns this
shape and the verdict, the largest batch and the reports read it; keeping it below all of them
lets each model name its parts without importing another model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PART_NAMES = (
    "weights",
    "quantization_scales",
    "master_weights",
    "amp_weight_copies",
    "gradients",
    "optimizer_state",
    "activations",
    "kv_cache",
    "temporaries",
    "workspace",
    "fragmentation",
    "cuda_context",
)


def with_part(names: tuple[str, ...], new: str, *, after: str) -> tuple[str, ...]:
    """`names` with `new` placed right after the part called `after` (a model adding a part of
    its own keeps the shared parts in their reading order)."""
    at = names.index(after) + 1
    return (*names[:at], new, *names[at:])


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    """Named parts in bytes, summing to `total`; `phase` says which moment is the peak."""

    parts: dict[str, int]
    phase: str
    details: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def to_dict(self) -> dict[str, int]:
        return dict(self.parts)


def required_bytes(memory: MemoryBreakdown) -> int:
    """The peak without the fragmentation part.

    On a card with room to spare the caching allocator keeps freed blocks (the peak counts them:
    it is what nvidia-smi shows). Under memory pressure it releases cached segments and retries
    before failing, so what must fit is less: measured on an H200 capped to a 12 GB or 24 GB
    card's memory, the largest batch that ran matched the peak without this part.
    """
    return memory.total - memory.parts.get("fragmentation", 0)


def within_card(memory: MemoryBreakdown, usable: int) -> MemoryBreakdown:
    """The breakdown as the card can show it. The caching allocator's reserve cannot grow past the
    card: a request that finds no room makes it free its cached blocks and retry. So where what
    must fit does fit but the fragmentation part would carry the peak past the usable memory (a
    long generation whose regrown caches leave block after block, estimate/generation_reserve.py),
    that part shrinks to the room left; details['fragmentation_released'] keeps what went. A job
    that does not fit keeps the peak it would have on a card with room."""
    fragmentation = memory.parts.get("fragmentation", 0)
    over = memory.total - usable
    if over <= 0 or not fragmentation or required_bytes(memory) > usable:
        return memory  # room to spare, or a job that does not fit: its would-be peak stays
    released = min(over, fragmentation)
    parts = {**memory.parts, "fragmentation": fragmentation - released}
    return MemoryBreakdown(
        parts=parts, phase=memory.phase, details={**memory.details, "fragmentation_released": released}
    )
