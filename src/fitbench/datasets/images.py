"""Image data: CIFAR-10's "python version" (folder, batch files or tar.gz) and synthetic images of
the same dtypes, resized and normalised per batch.

Batches: ``{"images": float32 N x 3 x H x W (normalised), "labels": int64 N}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fitbench.datasets.cycling import BatchCycler, pool_size
from fitbench.datasets.files import (
    PathLike,
    check_positive,
    existing_path,
    numpy_module,
    read_file,
    short_error,
    tar_files,
)
from fitbench.datasets.safe_pickle import Refused, safe_unpickle
from fitbench.errors import FitbenchError, did_you_mean

if TYPE_CHECKING:
    import numpy as np

CIFAR_HINT = (
    "expected the 'python version' from the CIFAR-10 site: cifar-10-python.tar.gz "
    "or its cifar-10-batches-py/ folder"
)
CIFAR_HINT_ZH = (
    "需要 CIFAR-10 网站上的 'python version':cifar-10-python.tar.gz 或解压出的 cifar-10-batches-py/ 文件夹"
)
CIFAR_DIR = "cifar-10-batches-py"
CIFAR_TAR = "cifar-10-python.tar.gz"
CIFAR_SPLITS = {"train": tuple(f"data_batch_{i}" for i in range(1, 6)), "test": ("test_batch",)}
CIFAR_CLASSES = 10
CIFAR_IMAGE_SIZE = 32
#: per-channel mean and standard deviation of the CIFAR-10 training pixels, in [0, 1] units
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)

# A CIFAR batch is 30.7 MB; a file far larger is not one (or is a decompression bomb), and is
# refused before it is read into memory.
_MAX_BATCH_BYTES = 128 << 20


@dataclass(frozen=True, kw_only=True, eq=False)
class ImageData:
    """Images as stored (uint8 N x 3 x H x W, channels R, G, B) and their int64 labels."""

    images: np.ndarray
    labels: np.ndarray
    source: str
    split: str = "train"

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _cifar_error(where: str, problem: str, problem_zh: str) -> FitbenchError:
    return FitbenchError(
        f"CIFAR-10 file {where} is {problem}",
        CIFAR_HINT,
        message_zh=f"CIFAR-10 文件 {where} {problem_zh or problem}",
        hint_zh=CIFAR_HINT_ZH,
    )


def read_cifar10(path: PathLike, split: str = "train") -> ImageData:
    """Read CIFAR-10's "python version": images uint8 N x 3 x 32 x 32, labels int64 N.

    `path` may be the ``cifar-10-batches-py/`` folder, a folder holding it (or holding
    ``cifar-10-python.tar.gz``), one of its batch files, or the tar.gz itself, which is read
    member by member without extracting. Train is data_batch_1..5 (50,000 images), test is
    test_batch (10,000). Batches are unpickled with a restricted unpickler (see _SafeUnpickler).
    """
    if split not in CIFAR_SPLITS:
        raise FitbenchError(
            f"unknown CIFAR-10 split '{split}'",
            did_you_mean(split, CIFAR_SPLITS),
            message_zh=f"未知的 CIFAR-10 数据划分 '{split}'",
            hint_zh=did_you_mean(split, CIFAR_SPLITS, lang="zh"),
        )
    names = CIFAR_SPLITS[split]
    p = existing_path(path, "CIFAR-10", CIFAR_HINT, hint_zh=CIFAR_HINT_ZH)
    if p.is_file() and p.name in {n for group in CIFAR_SPLITS.values() for n in group}:
        p = p.parent
    if p.is_dir():
        folder = _cifar_folder(p)
        if folder is None:
            archive = p / CIFAR_TAR
            if not archive.is_file():
                raise FitbenchError(
                    f"no CIFAR-10 batches in {p}: neither {CIFAR_DIR}/ nor {CIFAR_TAR} "
                    f"nor {names[0]} is there",
                    CIFAR_HINT,
                    message_zh=(
                        f"{p} 中没有 CIFAR-10 批次文件:{CIFAR_DIR}/、{CIFAR_TAR} 和 {names[0]} 都不存在"
                    ),
                    hint_zh=CIFAR_HINT_ZH,
                )
            p = archive
        else:
            blobs = {}
            for name in names:
                file = folder / name
                if not file.is_file():
                    raise _cifar_error(str(file), "missing", "不存在")
                blobs[name] = (
                    str(file),
                    read_file(
                        file,
                        what="CIFAR-10",
                        hint=CIFAR_HINT,
                        max_bytes=_MAX_BATCH_BYTES,
                        hint_zh=CIFAR_HINT_ZH,
                    ),
                )
            return _cifar_from_blobs(blobs, names, source=str(folder), split=split)
    return _cifar_from_tar(p, names, split)


def _cifar_folder(p: Path) -> Path | None:
    for candidate in (p, p / CIFAR_DIR):
        if any((candidate / name).is_file() for group in CIFAR_SPLITS.values() for name in group):
            return candidate
    return None


def _cifar_from_tar(archive: Path, names: tuple[str, ...], split: str) -> ImageData:
    wanted = set(names)
    blobs: dict[str, tuple[str, bytes]] = {}

    def is_wanted(member: str) -> bool:
        base = member.rsplit("/", 1)[-1]
        return base in wanted and base not in blobs

    for member, data in tar_files(
        archive,
        is_wanted,
        what="CIFAR-10",
        hint=CIFAR_HINT,
        hint_zh=CIFAR_HINT_ZH,
        max_bytes=_MAX_BATCH_BYTES,
        stop=lambda: len(blobs) == len(wanted),
    ):
        blobs[member.rsplit("/", 1)[-1]] = (f"{archive}:{member}", data)
    for name in names:
        if name not in blobs:
            raise _cifar_error(f"{archive}:{CIFAR_DIR}/{name}", "missing from the archive", "不在压缩包中")
    return _cifar_from_blobs(blobs, names, source=str(archive), split=split)


def _cifar_from_blobs(
    blobs: Mapping[str, tuple[str, bytes]], names: Sequence[str], *, source: str, split: str
) -> ImageData:
    np = numpy_module()
    parts = [parse_cifar_batch(*blobs[name]) for name in names]
    images = np.concatenate([data for data, _ in parts]).reshape(-1, 3, CIFAR_IMAGE_SIZE, CIFAR_IMAGE_SIZE)
    labels = np.concatenate([labels for _, labels in parts])
    if images.shape[0] == 0:
        raise _cifar_error(blobs[names[0]][0], "empty: the batches hold no images", "是空的:批次中没有图像")
    return ImageData(images=images, labels=labels, source=source, split=split)


def _field(batch: dict[Any, Any], key: str) -> Any:
    """Python 2 originals have bytes keys; a batch re-pickled under Python 3 may have str keys."""
    if key.encode() in batch:
        return batch[key.encode()]
    return batch.get(key)


def parse_cifar_batch(where: str, blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch -> (data uint8 N x 3072, labels int64 N), or a FitbenchError naming `where`."""
    np = numpy_module()
    try:
        batch = safe_unpickle(blob)
    except Refused as exc:
        raise _cifar_error(
            where,
            f"refused: loading it would call {exc.qualified_name}, which a "
            "CIFAR-10 batch never does (it was not unpickled)",
            f"被拒绝:加载它会调用 {exc.qualified_name},而 CIFAR-10 批次文件从不这样做(未执行反序列化)",
        ) from None
    except Exception as exc:  # corrupt bytes raise almost any exception type from the unpickler
        raise _cifar_error(
            where,
            f"not a readable pickle ({type(exc).__name__}: {short_error(exc)})",
            f"不是可读的 pickle({type(exc).__name__}:{short_error(exc)})",
        ) from None
    if not isinstance(batch, dict):
        raise _cifar_error(
            where,
            f"not a CIFAR-10 batch: it holds a {type(batch).__name__}, not a dict",
            f"不是 CIFAR-10 批次文件:其中是 {type(batch).__name__},不是 dict",
        )
    data, labels = _field(batch, "data"), _field(batch, "labels")
    for key, value in (("data", data), ("labels", labels)):
        if value is None:
            raise _cifar_error(where, f"missing the key '{key}'", f"缺少键 '{key}'")
    if not (
        isinstance(data, np.ndarray)
        and data.dtype == np.uint8
        and data.ndim == 2
        and data.shape[1] == 3 * CIFAR_IMAGE_SIZE * CIFAR_IMAGE_SIZE
    ):
        got = (
            f"{data.dtype} array of shape {data.shape}"
            if isinstance(data, np.ndarray)
            else type(data).__name__
        )
        raise _cifar_error(
            where,
            f"malformed: 'data' is a {got}, expected a uint8 array of N x 3072",
            f"格式错误:'data' 是 {got},应为 N x 3072 的 uint8 数组",
        )
    array_labels = isinstance(labels, np.ndarray) and labels.ndim == 1 and labels.dtype.kind in "iu"
    list_labels = isinstance(labels, list | tuple) and all(type(v) is int for v in labels)
    if not (array_labels or list_labels):
        raise _cifar_error(
            where, "malformed: 'labels' is not a list of integers", "格式错误:'labels' 不是整数列表"
        )
    if len(labels) != data.shape[0]:
        raise _cifar_error(
            where,
            f"malformed: {data.shape[0]} images but {len(labels)} labels",
            f"格式错误:有 {data.shape[0]} 张图像,却有 {len(labels)} 个标签",
        )
    if len(labels):
        low, high = (int(labels.min()), int(labels.max())) if array_labels else (min(labels), max(labels))
        if low < 0 or high >= CIFAR_CLASSES:
            raise _cifar_error(
                where,
                f"malformed: label {low if low < 0 else high} is outside 0..{CIFAR_CLASSES - 1}",
                f"格式错误:标签 {low if low < 0 else high} 超出 0..{CIFAR_CLASSES - 1}",
            )
    array = np.asarray(labels, dtype=np.int64)
    return data, array


def synthetic_images(n: int, image_size: int, num_classes: int, seed: int) -> ImageData:
    """Random uint8 images N x 3 x S x S with int64 labels in [0, num_classes): CIFAR's dtypes."""
    check_positive(n=n, image_size=image_size, num_classes=num_classes)
    np = numpy_module()
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 3, image_size, image_size), dtype=np.uint8)
    labels = rng.integers(0, num_classes, size=n, dtype=np.int64)
    source = f"synthetic: {n:,} random images 3x{image_size}x{image_size}, {num_classes} classes"
    return ImageData(images=images, labels=labels, split="train", source=source)


def resize_nearest(images: np.ndarray, size: int) -> np.ndarray:
    """N x C x H x W (square) -> N x C x size x size by nearest-neighbour sampling.

    Output pixel i takes input pixel floor(i * H / size): an integer upscale repeats every
    pixel (32 -> 224 is each pixel 7 x 7), a downscale keeps evenly spaced rows and columns.
    Speed and memory depend only on the tensor's shape, so no smoother filter is worth its
    cost here; it is also what a user feeding CIFAR to an ImageNet-sized model does.
    """
    check_positive(size=size)
    np = numpy_module()
    source = images.shape[-1]
    if images.shape[-2] != source:
        raise ValueError(f"images must be square, got {images.shape[-2]}x{source}")
    if size == source:
        return images
    index = (np.arange(size) * source) // size
    return images.take(index, axis=-2).take(index, axis=-1)


def normalise_images(images: np.ndarray) -> np.ndarray:
    """uint8 N x 3 x H x W -> float32 (x / 255 - mean) / std with CIFAR-10's channel statistics."""
    np = numpy_module()
    std = np.asarray(CIFAR_STD, dtype=np.float32).reshape(1, 3, 1, 1)
    mean = np.asarray(CIFAR_MEAN, dtype=np.float32).reshape(1, 3, 1, 1)
    out = images.astype(np.float32)
    out *= 1.0 / (255.0 * std)
    out -= mean / std
    return out


def _image_transform(image_size: int) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    def transform(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {
            "images": normalise_images(resize_nearest(batch["images"], image_size)),
            "labels": batch["labels"],
        }

    return transform


def image_batches(
    path_or_none: PathLike | None,
    batch_size: int,
    image_size: int,
    num_classes: int,
    seed: int,
    *,
    synthetic_size: int | None = None,
) -> tuple[BatchCycler, int, str]:
    """(cycler, dataset size, description) for an image classification run.

    With a path: CIFAR-10's training split, resized to image_size (see resize_nearest) and
    normalised per batch. Without: `synthetic_size` random images (default: a few batches),
    normalised the same way. Batches: images float32 N x 3 x S x S, labels int64 N.
    """
    check_positive(batch_size=batch_size, image_size=image_size, num_classes=num_classes)
    if path_or_none is None:
        n = synthetic_size or pool_size(batch_size, 3 * image_size * image_size)
        data = synthetic_images(n, image_size, num_classes, seed)
        description = data.source
    else:
        if num_classes < CIFAR_CLASSES:
            raise FitbenchError(
                f"CIFAR-10 has {CIFAR_CLASSES} classes but the model predicts {num_classes}",
                f"use a model with at least {CIFAR_CLASSES} classes",
                message_zh=f"CIFAR-10 有 {CIFAR_CLASSES} 个类别,但模型只预测 {num_classes} 个",
                hint_zh=f"请使用至少有 {CIFAR_CLASSES} 个类别的模型",
            )
        data = read_cifar10(path_or_none, "train")
        description = f"CIFAR-10 train: {len(data):,} images from {data.source}"
        if image_size != CIFAR_IMAGE_SIZE:
            description += f", nearest-neighbour resized {CIFAR_IMAGE_SIZE}->{image_size}"
    cycler = BatchCycler(
        {"images": data.images, "labels": data.labels},
        batch_size,
        seed,
        transform=_image_transform(image_size),
    )
    return cycler, len(data), description + ", normalised with CIFAR-10 mean/std"
