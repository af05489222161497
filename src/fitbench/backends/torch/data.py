"""Batches for a torch session: fitbench.datasets' numpy batches, prepared once.

The rule of fitbench.backends.input_pipeline, as a DataLoader with workers and pin_memory=True
would feed a training loop: every distinct batch is normalised and converted to the run's input
dtype before anything is timed and kept in host memory, page-locked when the device is a GPU.
Each step then takes the next prepared batch with `.to(device, non_blocking=True)`: the copy is
part of the step's device time, as it is for users, but the host queues it and moves on. On a
CPU the prepared tensors are the inputs. Generation prompts are random token ids (speed does not
depend on which tokens a prompt holds), made once on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fitbench.backends.base import RunOptions
from fitbench.backends.input_pipeline import batches_to_prepare, pipeline_note
from fitbench.workloads.arch import ResNetArch
from fitbench.workloads.workload import Workload

FIRST_ORDINARY_TOKEN = 3  # Llama reserves 0-2 (unk, bos, eos)


@dataclass(frozen=True, kw_only=True)
class BatchSource:
    next_batch: Callable[[], dict[str, torch.Tensor]]
    dataset_size: int | None  # the real dataset's size when --data gave one, else None
    description: str
    pipeline: str  # how next_batch feeds the device (backend_notes "input_pipeline")
    prepared_batches: int  # distinct batches held in host memory, cycled in order
    batch_bytes: int  # host bytes of one prepared batch


def host_tensors(batch: dict[str, Any], float_dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """A numpy batch as the CPU tensors the model takes: floats in `float_dtype`, the rest int64.

    Datasets name images "images"; models take "pixel_values".
    """
    out: dict[str, torch.Tensor] = {}
    for name, array in batch.items():
        key = "pixel_values" if name == "images" else name
        tensor = torch.as_tensor(array)
        out[key] = tensor.to(float_dtype if tensor.is_floating_point() else torch.long)
    return out


def prepare(cycler: Any, float_dtype: torch.dtype, *, pin: bool) -> list[dict[str, torch.Tensor]]:
    """The distinct batches a run cycles through, converted once (see input_pipeline).

    Each field of all batches lives in one contiguous host buffer (pinned when `pin`): one
    allocation per field rather than per batch, since the pinned allocator rounds each one up to a
    power of two. `cycler` is a fitbench.datasets.BatchCycler (size, batch_size, next).
    """
    first = host_tensors(next(cycler), float_dtype)
    batch_bytes = sum(t.numel() * t.element_size() for t in first.values())
    count = batches_to_prepare(cycler.size, cycler.batch_size, batch_bytes)
    stacks = {
        name: torch.empty((count, *t.shape), dtype=t.dtype, pin_memory=pin) for name, t in first.items()
    }
    for i in range(count):
        batch = first if i == 0 else host_tensors(next(cycler), float_dtype)
        for name, tensor in batch.items():
            stacks[name][i].copy_(tensor)
    return [{name: stack[i] for name, stack in stacks.items()} for i in range(count)]


def batch_source(
    workload: Workload, options: RunOptions, device: torch.device, float_dtype: torch.dtype
) -> BatchSource:
    """Endless training/inference batches of the workload's shape (not for generation)."""
    from fitbench import datasets

    arch = workload.arch
    if isinstance(arch, ResNetArch):
        assert workload.image_size is not None
        cycler, size, description = datasets.image_batches(
            options.data, workload.batch_size, workload.image_size, arch.num_classes, options.seed
        )
    else:
        assert workload.seq_len is not None
        num_labels = max(arch.num_labels, 2)
        tokenizer = options.extra.get("tokenizer") if options.extra else None
        cycler, size, description = datasets.text_batches(
            options.data,
            workload.batch_size,
            workload.seq_len,
            arch.vocab_size,
            num_labels,
            options.seed,
            tokenizer_path=tokenizer,
        )
    on_gpu = device.type == "cuda"
    prepared = prepare(cycler, float_dtype, pin=on_gpu)
    del cycler  # the stored dataset is no longer needed: the prepared batches are what steps read
    position = 0

    def next_batch() -> dict[str, torch.Tensor]:
        nonlocal position
        batch = prepared[position]
        position = (position + 1) % len(prepared)
        if not on_gpu:
            return batch
        return {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}

    return BatchSource(
        next_batch=next_batch,
        dataset_size=size if options.data else None,
        description=description,
        pipeline=pipeline_note(on_gpu),
        prepared_batches=len(prepared),
        batch_bytes=sum(t.numel() * t.element_size() for t in prepared[0].values()),
    )


def prompt_ids(workload: Workload, device: torch.device, seed: int) -> torch.Tensor:
    """batch x prompt_tokens random token ids (generated on the CPU so every device sees the same)."""
    assert workload.prompt_tokens is not None
    vocab = workload.arch.vocab_size  # type: ignore[union-attr]
    low = FIRST_ORDINARY_TOKEN if vocab > FIRST_ORDINARY_TOKEN + 1 else 0
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(low, vocab, (workload.batch_size, workload.prompt_tokens), generator=generator)
    return ids.to(device)
