"""Endless, reshuffled batches from in-memory arrays: what a timed loop draws from.

Batches are plain dicts of numpy arrays, named the way models take them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from fitbench.datasets.files import check_positive, numpy_module

if TYPE_CHECKING:
    import numpy as np

# Synthetic pools stop growing here; the cycler repeats them, which speed does not notice.
SYNTHETIC_POOL_BYTES = 256 << 20


def pool_size(batch_size: int, bytes_per_sample: int) -> int:
    """Four batches of distinct samples, fewer when that would take more than 256 MB."""
    return max(batch_size, min(4 * batch_size, SYNTHETIC_POOL_BYTES // max(1, bytes_per_sample)))


class BatchCycler:
    """Endless batches of `batch_size` samples drawn from in-memory arrays, reshuffled every epoch.

    A benchmark loop wants every step to look the same: every batch is full (an epoch's tail
    continues into the next epoch's permutation) and a dataset smaller than a batch repeats
    within it. `transform` runs on each batch (e.g. uint8 -> normalised float32), so the
    stored data stays compact. Deterministic for a given seed.
    """

    def __init__(
        self,
        arrays: Mapping[str, np.ndarray],
        batch_size: int,
        seed: int,
        *,
        transform: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None,
    ) -> None:
        check_positive(batch_size=batch_size)
        if not arrays:
            raise ValueError("BatchCycler needs at least one array")
        np = numpy_module()
        self._arrays = {name: np.asarray(array) for name, array in arrays.items()}
        sizes = {name: (array.shape[0] if array.ndim else 0) for name, array in self._arrays.items()}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"arrays differ in length: {sizes}")
        self.size = next(iter(sizes.values()))
        if self.size == 0:
            raise ValueError("BatchCycler needs at least one sample")
        self.batch_size = batch_size
        self.samples_drawn = 0
        self._transform = transform
        self._rng = np.random.default_rng(seed)
        self._order = np.zeros(0, dtype=np.int64)
        self._pos = 0

    @property
    def epochs(self) -> float:
        """Passes over the dataset so far (fractional)."""
        return self.samples_drawn / self.size

    def __iter__(self) -> BatchCycler:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        np = numpy_module()
        parts = []
        need = self.batch_size
        while need:
            if self._pos == len(self._order):
                self._order = self._rng.permutation(self.size)
                self._pos = 0
            chunk = self._order[self._pos : self._pos + need]
            self._pos += len(chunk)
            need -= len(chunk)
            parts.append(chunk)
        index = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.samples_drawn += self.batch_size
        batch = {name: array[index] for name, array in self._arrays.items()}
        return self._transform(batch) if self._transform is not None else batch
