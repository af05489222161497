"""How a measurement feeds its inputs to the device: the rule every backend follows.

A training script that keeps its GPU busy feeds it through a data loader with worker processes
and pinned memory (``DataLoader(num_workers=N, pin_memory=True)``, then
``batch.to(device, non_blocking=True)``): decoding, normalising and converting happen off the
critical path, and each step the host only queues an asynchronous copy. Doing that work inline
instead (a numpy normalise and a synchronous copy from pageable memory every step) added 13-51 ms
to an H200 ResNet-50 step that takes 23-55 ms on its own: the measurement timed fitbench's input
code, not the job.

So a backend prepares the batches once, before anything is timed: every distinct batch decoded,
normalised and converted to the dtype the model takes, held in host memory (page-locked when the
device is a GPU). Each step then issues one non-blocking copy of the next prepared batch. That
copy is still paid, on the compute stream and at the pinned PCIe rate (about 1.5 ms for 77 MB of
fp32 images on an H200), as a real job pays it; only the host no longer waits for it. Batches are
not kept resident on the device, which would hide that copy and hold device memory a real job
does not hold. On a CPU there is no copy: the prepared tensors are the inputs.

How many: enough batches for one epoch (every sample of the dataset at least once), as long as
they fit in PREPARED_BYTES of host memory; beyond that, as many as fit, cycled. Speed does not
depend on which samples a batch holds, and the epoch time is computed from the dataset's size,
not from how many batches were prepared, so `dataset_size` and `epoch_seconds` are unchanged.

Framework-free: the torch and paddle backends both import it.
"""

from __future__ import annotations

import math

#: Host memory the prepared batches may take: a whole epoch of CIFAR-10 at 32 px in fp32
#: (614 MB) or of IMDb at 512 tokens (307 MB) fits, so a --data run at the datasets' own sizes
#: cycles through every sample; upscaled images (CIFAR at 224 px is 30 GB in fp32) are capped.
PREPARED_BYTES = 1 << 30

#: `backend_notes["input_pipeline"]` values: what each step does with its inputs.
PINNED_NON_BLOCKING = "prepared once, pinned host memory, copied with non_blocking=True each step"
HOST_NO_COPY = "prepared once, host tensors used in place (cpu: no copy)"


def batches_to_prepare(
    dataset_size: int, batch_size: int, batch_bytes: int, budget: int = PREPARED_BYTES
) -> int:
    """Distinct batches to prepare: one epoch's worth, fewer when they would exceed `budget`.

    One epoch is ceil(dataset_size / batch_size) batches (the last one runs into the next
    epoch's order, so every batch is full); at least one batch is always prepared.
    """
    if dataset_size < 1 or batch_size < 1:
        raise ValueError(f"dataset_size and batch_size must be positive, got {dataset_size}, {batch_size}")
    epoch = math.ceil(dataset_size / batch_size)
    fit = budget // batch_bytes if batch_bytes > 0 else epoch
    return max(1, min(epoch, fit))


def pipeline_note(on_gpu: bool) -> str:
    """The `input_pipeline` note for a run on a GPU (pinned, non-blocking copies) or a CPU."""
    return PINNED_NON_BLOCKING if on_gpu else HOST_NO_COPY
