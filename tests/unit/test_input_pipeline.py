"""How many batches a run prepares before timing (fitbench.backends.input_pipeline)."""

from __future__ import annotations

import pytest

from fitbench.backends.input_pipeline import (
    HOST_NO_COPY,
    PINNED_NON_BLOCKING,
    PREPARED_BYTES,
    batches_to_prepare,
    pipeline_note,
)


def test_one_epoch_is_prepared_when_it_fits():
    # 50,000 CIFAR-10 images at batch 128: 391 batches, the last one running into the next epoch
    assert batches_to_prepare(50_000, 128, 128 * 3 * 32 * 32 * 4 + 128 * 8) == 391
    assert batches_to_prepare(512, 128, 1000) == 4  # the synthetic pool: four batches
    assert batches_to_prepare(5, 128, 1000) == 1  # a dataset smaller than a batch repeats within it


def test_the_byte_budget_caps_the_count_but_never_below_one():
    batch = 128 * 3 * 224 * 224 * 4  # 77 MB of fp32 images
    assert batches_to_prepare(50_000, 128, batch) == PREPARED_BYTES // batch == 13
    assert batches_to_prepare(50_000, 128, batch, budget=batch - 1) == 1
    assert batches_to_prepare(50_000, 128, 10, budget=35) == 3


def test_whole_published_datasets_fit_the_default_budget():
    cifar_fp32 = 50_000 * 3 * 32 * 32 * 4
    imdb_512 = 25_000 * 512 * 8 * 3
    assert cifar_fp32 <= PREPARED_BYTES and imdb_512 <= PREPARED_BYTES


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError):
        batches_to_prepare(0, 8, 100)
    with pytest.raises(ValueError):
        batches_to_prepare(10, 0, 100)


def test_the_note_says_what_each_device_does():
    assert pipeline_note(True) == PINNED_NON_BLOCKING and "non_blocking" in PINNED_NON_BLOCKING
    assert pipeline_note(False) == HOST_NO_COPY
