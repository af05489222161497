"""Text data: IMDb reviews (``aclImdb/`` folder or its tar.gz) tokenised up front, and synthetic
full-length sequences of the same dtypes.

Batches: ``{"input_ids", "attention_mask", "token_type_ids": int64 N x L, "labels": int64 N}``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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
from fitbench.datasets.tokenizers import load_tokenizer
from fitbench.errors import FitbenchError, did_you_mean

if TYPE_CHECKING:
    import numpy as np

IMDB_HINT = (
    "expected the Large Movie Review Dataset: aclImdb_v1.tar.gz or its aclImdb/ folder "
    "(train/ and test/, each with pos/ and neg/ folders of .txt reviews)"
)
IMDB_HINT_ZH = (
    "需要《Large Movie Review Dataset》数据集:aclImdb_v1.tar.gz 或解压出的 aclImdb/ 文件夹"
    "(含 train/ 和 test/,各自带有存放 .txt 影评的 pos/ 与 neg/ 文件夹)"
)
IMDB_DIR = "aclImdb"
IMDB_TAR = "aclImdb_v1.tar.gz"
IMDB_SPLITS = ("train", "test")
IMDB_LABELS = {"neg": 0, "pos": 1}

# An IMDb review is a few KB; a file far larger is not one, and is refused before it is read.
_MAX_REVIEW_BYTES = 1 << 20


@dataclass(frozen=True, kw_only=True, eq=False)
class TextData:
    """Reviews as text with their labels (1 = positive, 0 = negative)."""

    texts: list[str]
    labels: list[int]
    source: str
    split: str = "train"

    def __len__(self) -> int:
        return len(self.labels)


_REVIEW_NAME = re.compile(r"(\d+)_(\d+)\.txt")


def _review_order(name: str) -> tuple[int, int, str]:
    """Files are <id>_<rating>.txt: order by id, so that a limit picks the same reviews everywhere."""
    match = _REVIEW_NAME.fullmatch(name)
    return (int(match.group(1)), 0, name) if match else (1 << 62, 1, name)


def _select_reviews(by_label: Mapping[str, Sequence[str]], limit: int | None) -> list[tuple[str, str]]:
    """(label name, file name) alternating neg/pos, so that any limit keeps both labels."""
    ordered = {label: sorted(names, key=_review_order) for label, names in by_label.items()}
    chosen: list[tuple[str, str]] = []
    for i in range(max(len(names) for names in ordered.values())):
        for label in ("neg", "pos"):
            if i < len(ordered[label]):
                chosen.append((label, ordered[label][i]))
    return chosen if limit is None else chosen[:limit]


def read_imdb(path: PathLike, split: str = "train", limit: int | None = None) -> TextData:
    """Read IMDb reviews (Maas et al. 2011): texts and labels, positive = 1, negative = 0.

    `path` may be the ``aclImdb/`` folder, a folder holding it (or ``aclImdb_v1.tar.gz``), or
    the tar.gz itself. Only ``<split>/pos`` and ``<split>/neg`` are read (``train/unsup`` is
    unlabelled). `limit` keeps the first reviews by id, alternating labels. Text is decoded as
    UTF-8, with undecodable bytes replaced, so one odd byte never stops a benchmark.
    """
    if split not in IMDB_SPLITS:
        raise FitbenchError(
            f"unknown IMDb split '{split}'",
            did_you_mean(split, IMDB_SPLITS),
            message_zh=f"未知的 IMDb 数据划分 '{split}'",
            hint_zh=did_you_mean(split, IMDB_SPLITS, lang="zh"),
        )
    if limit is not None and (type(limit) is not int or limit < 1):
        raise FitbenchError(
            f"limit must be a positive integer, got {limit!r}",
            message_zh=f"limit 必须是正整数,实际为 {limit!r}",
        )
    p = existing_path(path, "IMDb", IMDB_HINT, hint_zh=IMDB_HINT_ZH)
    if p.is_dir():
        root = next((c for c in (p, p / IMDB_DIR) if (c / "train").is_dir() or (c / "test").is_dir()), None)
        if root is None:
            if not (p / IMDB_TAR).is_file():
                raise FitbenchError(
                    f"no IMDb reviews in {p}: neither {IMDB_DIR}/ (with train/ and test/) "
                    f"nor {IMDB_TAR} is there",
                    IMDB_HINT,
                    message_zh=(
                        f"{p} 中没有 IMDb 影评:{IMDB_DIR}/(含 train/ 与 test/)和 {IMDB_TAR} 都不存在"
                    ),
                    hint_zh=IMDB_HINT_ZH,
                )
            p = p / IMDB_TAR
        else:
            return _imdb_from_folder(root, split, limit)
    return _imdb_from_tar(p, split, limit)


def _imdb_from_folder(root: Path, split: str, limit: int | None) -> TextData:
    by_label: dict[str, list[str]] = {}
    for label in IMDB_LABELS:
        folder = root / split / label
        if not folder.is_dir():
            raise FitbenchError(
                f"IMDb folder {root} has no {split}/{label}/ folder",
                IMDB_HINT,
                message_zh=f"IMDb 文件夹 {root} 中没有 {split}/{label}/ 文件夹",
                hint_zh=IMDB_HINT_ZH,
            )
        try:
            with os.scandir(folder) as entries:
                names = [e.name for e in entries if e.name.endswith(".txt") and e.is_file()]
        except OSError as exc:
            raise FitbenchError(
                f"IMDb folder {folder} is unreadable ({exc.strerror or short_error(exc)})",
                IMDB_HINT,
                message_zh=f"IMDb 文件夹 {folder} 无法读取({exc.strerror or short_error(exc)})",
                hint_zh=IMDB_HINT_ZH,
            ) from exc
        if not names:
            raise FitbenchError(
                f"IMDb folder {folder} is empty: it holds no .txt reviews",
                IMDB_HINT,
                message_zh=f"IMDb 文件夹 {folder} 是空的:里面没有 .txt 影评",
                hint_zh=IMDB_HINT_ZH,
            )
        by_label[label] = names
    texts: list[str] = []
    labels: list[int] = []
    for label, name in _select_reviews(by_label, limit):
        raw = read_file(
            root / split / label / name,
            what="IMDb",
            hint=IMDB_HINT,
            max_bytes=_MAX_REVIEW_BYTES,
            hint_zh=IMDB_HINT_ZH,
        )
        texts.append(raw.decode("utf-8", errors="replace"))
        labels.append(IMDB_LABELS[label])
    return TextData(texts=texts, labels=labels, source=str(root), split=split)


def _imdb_from_tar(archive: Path, split: str, limit: int | None) -> TextData:
    blobs: dict[str, dict[str, bytes]] = {label: {} for label in IMDB_LABELS}

    def is_wanted(member: str) -> bool:
        parts = member.split("/")
        return (
            len(parts) >= 4
            and parts[-4] == IMDB_DIR
            and parts[-3] == split
            and parts[-2] in IMDB_LABELS
            and parts[-1].endswith(".txt")
        )

    for member, data in tar_files(
        archive, is_wanted, what="IMDb", hint=IMDB_HINT, max_bytes=_MAX_REVIEW_BYTES, hint_zh=IMDB_HINT_ZH
    ):
        parts = member.split("/")
        blobs[parts[-2]][parts[-1]] = data
    for label, files in blobs.items():
        if not files:
            raise FitbenchError(
                f"IMDb file {archive} is missing {IMDB_DIR}/{split}/{label}/*.txt reviews",
                IMDB_HINT,
                message_zh=f"IMDb 文件 {archive} 缺少 {IMDB_DIR}/{split}/{label}/*.txt 影评",
                hint_zh=IMDB_HINT_ZH,
            )
    chosen = _select_reviews({label: list(files) for label, files in blobs.items()}, limit)
    return TextData(
        texts=[blobs[label][name].decode("utf-8", errors="replace") for label, name in chosen],
        labels=[IMDB_LABELS[label] for label, _ in chosen],
        source=str(archive),
        split=split,
    )


def synthetic_tokens(
    n: int, seq_len: int, vocab_size: int, seed: int, num_labels: int
) -> dict[str, np.ndarray]:
    """Random full-length sequences: the arrays encode() returns, plus int64 labels.

    Every position is a real token (no padding): the worst case, and what a 512-token run
    on IMDb mostly is. [CLS]/[SEP] are BERT's 101/102 when the vocabulary holds them.
    """
    check_positive(n=n, seq_len=seq_len, vocab_size=vocab_size, num_labels=num_labels)
    np = numpy_module()
    rng = np.random.default_rng(seed)
    low = 1 if vocab_size > 1 else 0
    input_ids = rng.integers(low, vocab_size, size=(n, seq_len), dtype=np.int64)
    if vocab_size > 103 and seq_len >= 2:
        input_ids[:, 0], input_ids[:, -1] = 101, 102
    return {
        "input_ids": input_ids,
        "attention_mask": np.ones((n, seq_len), dtype=np.int64),
        "token_type_ids": np.zeros((n, seq_len), dtype=np.int64),
        "labels": rng.integers(0, num_labels, size=n, dtype=np.int64),
    }


def _widen(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    np = numpy_module()
    return {name: array.astype(np.int64, copy=False) for name, array in batch.items()}


def text_batches(
    path_or_none: PathLike | None,
    batch_size: int,
    seq_len: int,
    vocab_size: int,
    num_labels: int,
    seed: int,
    tokenizer_path: PathLike | None = None,
    *,
    limit: int | None = None,
    synthetic_size: int | None = None,
) -> tuple[BatchCycler, int, str]:
    """(cycler, dataset size, description) for a text classification run.

    With a path: IMDb's training reviews, tokenised once up front (as a training script's
    dataset.map would, so the timed loop only slices arrays) by load_tokenizer(vocab_size,
    tokenizer_path), then truncated/padded to seq_len. Without: random full-length sequences
    (tokenizer_path is then unused). Batches: input_ids, attention_mask, token_type_ids and
    labels, all int64.
    """
    check_positive(batch_size=batch_size, seq_len=seq_len, vocab_size=vocab_size, num_labels=num_labels)
    if path_or_none is None:
        n = synthetic_size or pool_size(batch_size, 3 * 8 * seq_len)
        arrays = synthetic_tokens(n, seq_len, vocab_size, seed, num_labels)
        description = (
            f"synthetic: {n:,} random sequences of {seq_len} tokens (vocab {vocab_size:,}), "
            f"{num_labels} labels"
        )
        return BatchCycler(arrays, batch_size, seed), n, description
    if num_labels < len(IMDB_LABELS):
        raise FitbenchError(
            f"IMDb has 2 labels (negative, positive) but the model predicts {num_labels}",
            "use a classification head with at least 2 labels",
            message_zh=f"IMDb 有 2 个标签(negative、positive),但模型预测 {num_labels} 个",
            hint_zh="请使用至少有 2 个标签的分类头",
        )
    np = numpy_module()
    data = read_imdb(path_or_none, "train", limit)
    tokenizer = load_tokenizer(vocab_size, tokenizer_path)
    n = len(data)
    # Stored compactly (ids int32, masks uint8) and widened to int64 per batch: 6 bytes a token.
    stored = {
        "input_ids": np.empty((n, seq_len), dtype=np.int32),
        "attention_mask": np.empty((n, seq_len), dtype=np.uint8),
        "token_type_ids": np.empty((n, seq_len), dtype=np.uint8),
    }
    for start in range(0, n, 1024):
        encoded = tokenizer.encode(data.texts[start : start + 1024], seq_len)
        for name, array in stored.items():
            array[start : start + 1024] = encoded[name]
    lengths = stored["attention_mask"].sum(axis=1, dtype=np.int64)
    arrays = {**stored, "labels": np.asarray(data.labels, dtype=np.int64)}
    description = (
        f"IMDb train: {n:,} reviews from {data.source}, {tokenizer.description}, "
        f"mean {lengths.mean():.0f} of {seq_len} tokens, "
        f"{100 * (lengths == seq_len).mean():.0f}% truncated"
    )
    return BatchCycler(arrays, batch_size, seed, transform=_widen), n, description
