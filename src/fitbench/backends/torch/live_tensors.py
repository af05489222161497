"""Bytes of the tensors operators create, alive at once: the CUDA allocator's peak on any device.

On a CPU torch keeps no allocator statistics, yet the question "what does this step allocate
beyond its inputs, at its largest moment" has an exact answer: a dispatch mode sees every
tensor an operator returns and, through a finalizer, when its last Python reference goes.
In-place results and views of an existing storage are not new memory. benchmarks/
optimizer_step.py uses it for CPU runs and the tests compare the estimator's optimizer-step
temporaries with it, to the byte.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveTensors(TorchDispatchMode):
    """`peak`: the most bytes of operator-created storages alive at once inside the mode."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {
            t.untyped_storage().data_ptr()
            for t in tree_flatten((args, kwargs))[0]
            if isinstance(t, torch.Tensor)
        }
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            ptr = t.untyped_storage().data_ptr()
            if ptr in inputs or ptr in self._seen:
                continue
            n = t.untyped_storage().nbytes()
            self._seen.add(ptr)
            self.live += n
            self.peak = max(self.peak, self.live)
            weakref.finalize(t, self._free, ptr, n)
        return out

    def _free(self, ptr: int, n: int) -> None:
        self.live -= n
        self._seen.discard(ptr)
