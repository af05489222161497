"""The torch backend's inputs: prepared once, the dataset's own batches, one epoch covered.

Real tiny workloads, real numpy datasets (synthetic and a CIFAR-10 folder written here), on the
CPU, where the prepared tensors are the inputs themselves (pinning needs a CUDA device).
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fitbench import datasets  # noqa: E402
from fitbench.backends.base import RunOptions  # noqa: E402
from fitbench.backends.input_pipeline import HOST_NO_COPY  # noqa: E402
from fitbench.backends.torch.data import batch_source  # noqa: E402
from fitbench.backends.torch.session import open_default  # noqa: E402
from fitbench.workloads.presets import get_workload  # noqa: E402

pytestmark = pytest.mark.torch

CPU_DEVICE = torch.device("cpu")
CPU = RunOptions(device="cpu")


def tiny(name: str, **overrides: object):
    return get_workload(name, tiny=True, **overrides)


def write_cifar(folder, per_file: int = 4) -> np.ndarray:
    """Five training batch files of `per_file` images each; returns all images, uint8 N x 3072."""
    rng = np.random.default_rng(1)
    folder.mkdir()
    images = []
    for i in range(1, 6):
        data = rng.integers(0, 256, size=(per_file, 3072), dtype=np.uint8)
        images.append(data)
        batch = {b"data": data, b"labels": [int(v) for v in rng.integers(0, 10, size=per_file)]}
        (folder / f"data_batch_{i}").write_bytes(pickle.dumps(batch, protocol=2))
    return np.concatenate(images)


def test_image_batches_are_the_datasets_own_prepared_once_and_cycled():
    w = tiny("resnet50-cifar10")  # batch 8, 32 px: a synthetic pool of 32 images, 4 batches
    source = batch_source(w, CPU, CPU_DEVICE, torch.float32)
    reference, _, _ = datasets.image_batches(None, w.batch_size, w.image_size, w.arch.num_classes, 0)
    assert source.prepared_batches == 4
    assert source.pipeline == HOST_NO_COPY
    first = [source.next_batch() for _ in range(source.prepared_batches)]
    for batch in first:
        expected = next(reference)
        assert batch["pixel_values"].dtype == torch.float32 and batch["labels"].dtype == torch.long
        np.testing.assert_array_equal(batch["pixel_values"].numpy(), expected["images"])
        np.testing.assert_array_equal(batch["labels"].numpy(), expected["labels"])
    again = source.next_batch()  # the fifth step starts over: the same host tensors, no copy
    assert again["pixel_values"].data_ptr() == first[0]["pixel_values"].data_ptr()
    assert source.batch_bytes == 8 * 3 * 32 * 32 * 4 + 8 * 8


def test_images_are_converted_once_to_the_input_dtype():
    source = batch_source(tiny("resnet50-cifar10"), CPU, CPU_DEVICE, torch.bfloat16)
    batch = source.next_batch()
    assert batch["pixel_values"].dtype == torch.bfloat16
    assert batch["labels"].dtype == torch.long


def test_text_batches_keep_every_field_as_int64():
    w = tiny("bert-base-imdb")
    source = batch_source(w, CPU, CPU_DEVICE, torch.float32)
    reference, _, _ = datasets.text_batches(
        None, w.batch_size, w.seq_len, w.arch.vocab_size, max(w.arch.num_labels, 2), 0
    )
    batch, expected = source.next_batch(), next(reference)
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    for name, tensor in batch.items():
        assert tensor.dtype == torch.long
        np.testing.assert_array_equal(tensor.numpy(), expected[name])


def test_a_local_dataset_is_prepared_for_a_whole_epoch(tmp_path):
    images = write_cifar(tmp_path / "cifar-10-batches-py")  # 20 images, batch 8: 3 batches an epoch
    w = tiny("resnet50-cifar10")
    source = batch_source(w, RunOptions(device="cpu", data=str(tmp_path)), CPU_DEVICE, torch.float32)
    assert source.dataset_size == 20
    assert source.prepared_batches == math.ceil(20 / w.batch_size) == 3
    seen = np.concatenate([source.next_batch()["pixel_values"].numpy() for _ in range(3)])
    normalised = datasets.normalise_images(images.reshape(-1, 3, 32, 32))
    rows = {row.tobytes() for row in seen.reshape(len(seen), -1)}
    assert all(image.tobytes() in rows for image in normalised.reshape(20, -1))  # every sample, once at least


@pytest.mark.slow
def test_sessions_say_how_inputs_reach_the_device(tmp_path):
    write_cifar(tmp_path / "cifar-10-batches-py")
    session = open_default(tiny("resnet50-cifar10"), RunOptions(device="cpu", data=str(tmp_path)))
    session.step()
    assert session.notes["input_pipeline"] == HOST_NO_COPY
    assert session.notes["input_batches_prepared"] == 3
    assert session.notes["dataset_size"] == 20
    infer = open_default(tiny("bert-base-imdb", mode="infer"), CPU)
    infer.step()
    assert infer.notes["input_pipeline"] == HOST_NO_COPY
    assert infer.notes["input_batches_prepared"] == 4
