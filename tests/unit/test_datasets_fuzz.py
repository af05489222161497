"""Whatever bytes a dataset file holds, the readers answer with data or a FitbenchError, never a crash."""

from __future__ import annotations

import io
import pickle
import tarfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fitbench.datasets import (
    HashingTokenizer,
    WordPieceTokenizer,
    read_cifar10,
    read_imdb,
)
from fitbench.errors import FitbenchError

FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _valid_batch(protocol: int) -> bytes:
    rng = np.random.default_rng(0)
    batch = {
        b"batch_label": b"testing batch 1 of 1",
        b"labels": [1, 9, 0],
        b"data": rng.integers(0, 256, (3, 3072), dtype=np.uint8),
        b"filenames": [b"a.png", b"b.png", b"c.png"],
    }
    return pickle.dumps(batch, protocol=protocol)


def _tar_gz(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


VALID_PICKLES = [_valid_batch(p) for p in (2, 4, 5)]
VALID_CIFAR_TAR = _tar_gz({"cifar-10-batches-py/test_batch": VALID_PICKLES[0]})
VALID_IMDB_TAR = _tar_gz(
    {
        f"aclImdb/train/{label}/{i}_{7 if label == 'pos' else 2}.txt": b"review %d" % i
        for label in ("pos", "neg")
        for i in range(3)
    }
)


@st.composite
def mutated(draw, sources: list[bytes]) -> bytes:
    """A valid file with a few bytes flipped, inserted or deleted, or cut short."""
    data = bytearray(draw(st.sampled_from(sources)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        else:
            del data[at:]
    return bytes(data)


def _check_cifar(path) -> None:
    try:
        data = read_cifar10(path, "test")
    except FitbenchError as exc:
        assert exc.message.startswith("CIFAR-10 ") and exc.hint
        return
    # a mutation that leaves a valid batch (a flipped pixel, say) must still read as one
    assert data.images.dtype == np.uint8 and data.images.shape[1:] == (3, 32, 32)
    assert data.labels.dtype == np.int64 and data.labels.shape == (data.images.shape[0],)
    assert data.labels.min() >= 0 and data.labels.max() <= 9


@pytest.fixture(scope="module")
def cifar_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz") / "cifar-10-batches-py"
    folder.mkdir()
    return folder


@FUZZ
@given(blob=st.binary(max_size=2048) | mutated(VALID_PICKLES))
def test_any_bytes_as_a_cifar_batch(cifar_dir, blob):
    (cifar_dir / "test_batch").write_bytes(blob)
    _check_cifar(cifar_dir)


@FUZZ
@given(blob=st.binary(max_size=2048) | mutated([VALID_CIFAR_TAR]))
def test_any_bytes_as_a_cifar_tar_gz(cifar_dir, blob):
    archive = cifar_dir.parent / "cifar-10-python.tar.gz"
    archive.write_bytes(blob)
    _check_cifar(archive)


@pytest.fixture(scope="module")
def imdb_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("imdb") / "aclImdb"
    for label in ("pos", "neg"):
        (root / "train" / label).mkdir(parents=True)
        (root / "train" / label / f"0_{7 if label == 'pos' else 2}.txt").write_text("fine")
    return root


@FUZZ
@given(blob=st.binary(max_size=4096))
def test_any_bytes_as_an_imdb_review(imdb_dir, blob):
    (imdb_dir / "train" / "pos" / "1_9.txt").write_bytes(blob)
    data = read_imdb(imdb_dir)
    assert data.labels == [0, 1, 1]
    assert data.texts[0] == "fine" and isinstance(data.texts[2], str)
    assert data.texts[2] == blob.decode("utf-8", errors="replace")


@FUZZ
@given(blob=st.binary(max_size=2048) | mutated([VALID_IMDB_TAR]))
def test_any_bytes_as_an_imdb_tar_gz(imdb_dir, blob):
    archive = imdb_dir.parent / "aclImdb_v1.tar.gz"
    archive.write_bytes(blob)
    try:
        data = read_imdb(archive)
    except FitbenchError as exc:
        assert exc.message.startswith("IMDb ") and exc.hint
        return
    assert len(data.texts) == len(data.labels) > 0 and set(data.labels) == {0, 1}


_HASHING = HashingTokenizer(1000)
_WORDPIECE = WordPieceTokenizer({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "##b": 5, "!": 6})


@FUZZ
@given(texts=st.lists(st.text(max_size=300), min_size=1, max_size=4), seq_len=st.integers(2, 40))
def test_any_text_encodes_to_fixed_shapes_within_the_vocabulary(texts, seq_len):
    for tok in (_HASHING, _WORDPIECE):
        out = tok.encode(texts, seq_len)
        ids, mask = out["input_ids"], out["attention_mask"]
        assert ids.shape == mask.shape == (len(texts), seq_len) and ids.dtype == np.int64
        assert ids.min() >= 0 and ids.max() < tok.vocab_size
        assert (ids[:, 0] == tok.cls_id).all()
        lengths = mask.sum(axis=1)
        assert (lengths >= 2).all()
        assert (mask == (np.arange(seq_len) < lengths[:, None])).all()  # ones, then zeros
        for row, length in zip(ids, lengths, strict=True):
            assert row[length - 1] == tok.sep_id and (row[length:] == tok.pad_id).all()
