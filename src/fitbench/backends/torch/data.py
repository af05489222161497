"""Batches for a torch session: fitbench.datasets' numpy batches, moved to the device.

Every step takes a fresh batch and copies it host -> device, as a training script's data loader
does; the copy is part of the step time, as it is for users. Generation prompts are random
token ids (speed does not depend on which tokens a prompt holds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from fitbench.backends.base import RunOptions
from fitbench.workloads.arch import ResNetArch
from fitbench.workloads.workload import Workload

FIRST_ORDINARY_TOKEN = 3  # Llama reserves 0-2 (unk, bos, eos)


@dataclass(frozen=True, kw_only=True)
class BatchSource:
    next_batch: Callable[[], dict[str, torch.Tensor]]
    dataset_size: int | None  # the real dataset's size when --data gave one, else None
    description: str


def _to_device(
    batch: dict[str, Any], device: torch.device, float_dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, array in batch.items():
        tensor = torch.as_tensor(array)
        if tensor.is_floating_point():
            out[name] = tensor.to(device=device, dtype=float_dtype)
        else:
            out[name] = tensor.to(device=device, dtype=torch.long)
    return out


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
    iterator: Iterator[dict[str, Any]] = iter(cycler)

    def next_batch() -> dict[str, torch.Tensor]:
        batch = dict(next(iterator))
        if "images" in batch and "pixel_values" not in batch:
            batch["pixel_values"] = batch.pop("images")
        return _to_device(batch, device, float_dtype)

    return BatchSource(
        next_batch=next_batch, dataset_size=size if options.data else None, description=description
    )


def prompt_ids(workload: Workload, device: torch.device, seed: int) -> torch.Tensor:
    """batch x prompt_tokens random token ids (generated on the CPU so every device sees the same)."""
    assert workload.prompt_tokens is not None
    vocab = workload.arch.vocab_size  # type: ignore[union-attr]
    low = FIRST_ORDINARY_TOKEN if vocab > FIRST_ORDINARY_TOKEN + 1 else 0
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(low, vocab, (workload.batch_size, workload.prompt_tokens), generator=generator)
    return ids.to(device)
