"""PyTorch's caching allocator, as far as the estimate needs it: which requests reuse a cached
block and which take a new segment from the driver.

The rules are c10/cuda/CUDACachingAllocator.cpp's (PyTorch 2.x, default settings):

* a request of at most 1 MiB (kSmallSize) is served from the small pool's 2 MiB segments; larger
  requests come from the large pool;
* a large request takes the smallest cached free block at least its size (best fit) and splits
  off the rest when more than 1 MiB remains (should_split), which stays cached as a free block;
* a request that finds no such block gets a new segment (cudaMalloc) of its size rounded up to
  2 MiB (kRoundLarge), or 20 MiB (kLargeBuffer) for requests under 10 MiB (kMinLargeAlloc);
* a freed block merges only with free neighbours of its own segment; segments are never merged,
  and the cache keeps them until empty_cache or an out-of-memory retry.

So memory freed by tensors of one size serves later tensors only up to that size: the reserved
peak of a training step depends on the order and the sizes of what it allocates, not only on
how much is alive at once (estimate/first_step.py).
"""

from __future__ import annotations

import bisect

MiB = 1 << 20
SMALL_REQUEST = MiB  # kSmallSize: up to this, the small pool
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
ROUND_LARGE = 2 * MiB  # kRoundLarge
LARGE_BUFFER = 20 * MiB  # kLargeBuffer: the segment of a large request under MIN_LARGE_ALLOC


def segment_bytes(request: float) -> int:
    """The size of the segment a large-pool request that found no cached block allocates."""
    if request < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return int(-(-request // ROUND_LARGE) * ROUND_LARGE)


class SegmentedPool:
    """The large pool with its segments' layout: blocks split from a segment merge back with
    their free neighbours when freed (segments never merge with one another), and the peaks of
    what is reserved and what is allocated. Requests up to 1 MiB are counted as allocated, their
    small-pool segments not. For sequences where merging decides the reserve (two training steps,
    estimate/first_step.py; a generation's prefill and decode steps, estimate/generation_reserve.py).
    The free blocks are kept sorted by (size, segment, offset), so a best-fit lookup is a
    bisection, as the allocator's ordered set makes it."""

    def __init__(self) -> None:
        self._segments: list[list[list[int]]] = []  # [offset, size, free], by offset
        self._free: list[tuple[int, int, int]] = []  # (size, segment, offset) of free blocks
        self._where: dict[object, tuple[int, int] | int] = {}
        self.reserved = self.allocated = self.peak_reserved = self.peak_allocated = 0

    def malloc(self, key: object, nbytes: float) -> None:
        size = max(512, -(-int(nbytes) // 512) * 512)
        if size <= SMALL_REQUEST:
            self._where[key] = size
            self._count(size)
            return
        i = bisect.bisect_left(self._free, (size, -1, -1))
        if i < len(self._free):
            _, s, offset = self._free.pop(i)
            blocks = self._segments[s]
            b = self._index(blocks, offset)
        else:
            segment = segment_bytes(size)
            self._segments.append([[0, segment, 1]])
            self.reserved += segment
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            s, b = len(self._segments) - 1, 0
            blocks = self._segments[s]
        block = blocks[b]
        if block[1] - size > SMALL_REQUEST:
            rest = [block[0] + size, block[1] - size, 1]
            blocks.insert(b + 1, rest)
            bisect.insort(self._free, (rest[1], s, rest[0]))
            block[1] = size
        block[2] = 0
        self._where[key] = (s, block[0])
        self._count(block[1])

    @staticmethod
    def _index(blocks: list[list[int]], offset: int) -> int:
        lo, hi = 0, len(blocks)
        while lo < hi:
            mid = (lo + hi) // 2
            if blocks[mid][0] < offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _unlist(self, s: int, block: list[int]) -> None:
        i = bisect.bisect_left(self._free, (block[1], s, block[0]))
        del self._free[i]

    def _count(self, size: int) -> None:
        self.allocated += size
        self.peak_allocated = max(self.peak_allocated, self.allocated)

    def reset_peak_allocated(self) -> None:
        """Start the allocated peak afresh (torch.cuda.reset_peak_memory_stats after loading);
        the reserve is never given back, so its peak stays."""
        self.peak_allocated = self.allocated

    def free(self, key: object) -> None:
        where = self._where.pop(key, None)
        if where is None:
            return
        if isinstance(where, int):
            self.allocated -= where
            return
        s, offset = where
        blocks = self._segments[s]
        b = self._index(blocks, offset)
        blocks[b][2] = 1
        self.allocated -= blocks[b][1]
        if b + 1 < len(blocks) and blocks[b + 1][2]:
            self._unlist(s, blocks[b + 1])
            blocks[b][1] += blocks.pop(b + 1)[1]
        if b > 0 and blocks[b - 1][2]:
            self._unlist(s, blocks[b - 1])
            blocks[b - 1][1] += blocks.pop(b)[1]
            b -= 1
        bisect.insort(self._free, (blocks[b][1], s, blocks[b][0]))
