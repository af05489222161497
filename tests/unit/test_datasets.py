"""Local dataset readers, tokenisers and batch cycling, on tiny files in the published formats."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from fitbench.datasets import (
    CIFAR_HINT,
    CIFAR_MEAN,
    CIFAR_STD,
    IMDB_HINT,
    BatchCycler,
    HashingTokenizer,
    WordPieceTokenizer,
    basic_tokens,
    image_batches,
    load_tokenizer,
    normalise_images,
    read_cifar10,
    read_imdb,
    resize_nearest,
    safe_unpickle,
    synthetic_images,
    synthetic_tokens,
    text_batches,
)
from fitbench.errors import FitbenchError

try:
    from numpy._core.multiarray import _reconstruct as _np_reconstruct
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _reconstruct as _np_reconstruct


# ---------------------------------------------------------------------------------------------
# Writers for the published formats
# ---------------------------------------------------------------------------------------------
class Py2Pickler(pickle._Pickler):
    """Writes what Python 2's cPickle wrote for the CIFAR-10 batches: protocol 2, byte strings
    as py2 `str` (SHORT_BINSTRING/BINSTRING) and numpy's reconstructor under numpy.core."""

    dispatch: ClassVar[dict] = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj):
        raw = obj.encode("latin-1") if isinstance(obj, str) else obj
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str
    dispatch[str] = save_py2_str

    def save_global(self, obj, name=None):
        if obj is _np_reconstruct:
            self.write(pickle.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n")
            self.memoize(obj)
            return
        super().save_global(obj, name)


def py2_dumps(obj) -> bytes:
    out = io.BytesIO()
    Py2Pickler(out, protocol=2).dump(obj)
    return out.getvalue()


def cifar_batch(n: int, seed: int, label: str = "training batch") -> dict:
    rng = np.random.default_rng(seed)
    return {
        b"batch_label": label.encode(),
        b"labels": [int(v) for v in rng.integers(0, 10, n)],
        b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
        b"filenames": [f"img_{seed}_{i}.png".encode() for i in range(n)],
    }


def write_cifar(root: Path, n: int = 3) -> dict[str, dict]:
    """A cifar-10-batches-py/ folder under root, as on the CIFAR-10 site but n images a batch."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    batches = {f"data_batch_{i}": cifar_batch(n, i) for i in range(1, 6)}
    batches["test_batch"] = cifar_batch(n + 1, 99, "testing batch 1 of 1")
    for name, batch in batches.items():
        (folder / name).write_bytes(py2_dumps(batch))
    meta = {
        b"num_cases_per_batch": n,
        b"label_names": [
            b"airplane",
            b"automobile",
            b"bird",
            b"cat",
            b"deer",
            b"dog",
            b"frog",
            b"horse",
            b"ship",
            b"truck",
        ],
        b"num_vis": 3072,
    }
    (folder / "batches.meta").write_bytes(py2_dumps(meta))
    (folder / "readme.html").write_text("<html></html>")
    return batches


def tar_folder(archive: Path, folder: Path, arcname: str) -> Path:
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=arcname)
    return archive


def expected_cifar(batches: dict[str, dict], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    data = np.concatenate([batches[n][b"data"] for n in names]).reshape(-1, 3, 32, 32)
    labels = np.concatenate([np.array(batches[n][b"labels"]) for n in names])
    return data, labels


TRAIN = [f"data_batch_{i}" for i in range(1, 6)]

REVIEWS = {
    ("train", "pos"): {
        "0_9.txt": "A wonderful film.",
        "10_8.txt": "Great acting!<br /><br />Loved it.",
        "2_10.txt": "Café scenes, naïve charm — superb.",
    },
    ("train", "neg"): {"1_2.txt": "Terrible plot.", "11_1.txt": "Boring, awful, long."},
    ("test", "pos"): {"5_7.txt": "Pretty good."},
    ("test", "neg"): {"6_3.txt": "Not for me."},
}


def write_imdb(root: Path) -> Path:
    top = root / "aclImdb"
    for (split, label), files in REVIEWS.items():
        folder = top / split / label
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
    (top / "train" / "unsup").mkdir()
    (top / "train" / "unsup" / "3_0.txt").write_text("unlabelled")
    (top / "train" / "urls_pos.txt").write_text("http://www.imdb.com/title/tt0453418/usercomments")
    (top / "imdb.vocab").write_text("the\nand\n")
    (top / "train" / "pos" / "notes.md").write_text("not a review")
    return top


# ---------------------------------------------------------------------------------------------
# CIFAR-10
# ---------------------------------------------------------------------------------------------
def test_python2_pickler_writes_what_the_cifar_site_ships():
    blob = py2_dumps(cifar_batch(2, 0))
    # the opening bytes of the original data_batch files: protocol 2, a dict, py2 str keys
    assert blob.startswith(b"\x80\x02}q\x00(U\x0bbatch_label")
    assert b"cnumpy.core.multiarray\n_reconstruct\n" in blob
    assert b"cnumpy\ndtype\n" in blob and b"U\x02u1" in blob


def test_cifar_folder_parent_tar_and_batch_file_read_the_same(tmp_path):
    batches = write_cifar(tmp_path)
    folder = tmp_path / "cifar-10-batches-py"
    archive = tar_folder(tmp_path / "cifar-10-python.tar.gz", folder, "cifar-10-batches-py")
    tar_only = tmp_path / "elsewhere"
    tar_only.mkdir()
    (tar_only / "cifar-10-python.tar.gz").write_bytes(archive.read_bytes())
    images, labels = expected_cifar(batches, TRAIN)

    for path in (folder, tmp_path, archive, tar_only, folder / "data_batch_2", str(folder)):
        data = read_cifar10(path)
        assert data.images.shape == (15, 3, 32, 32) and data.images.dtype == np.uint8
        assert data.labels.shape == (15,) and data.labels.dtype == np.int64
        np.testing.assert_array_equal(data.images, images)
        np.testing.assert_array_equal(data.labels, labels)
        assert len(data) == 15 and data.split == "train"
    assert read_cifar10(archive).source == str(archive)
    assert read_cifar10(tmp_path).source == str(folder)


def test_cifar_pixel_layout_is_red_green_blue_planes_row_major(tmp_path):
    batches = write_cifar(tmp_path)
    data = read_cifar10(tmp_path, "test")
    raw = batches["test_batch"][b"data"]
    for i, c, y, x in [(0, 0, 0, 0), (1, 1, 5, 31), (3, 2, 31, 7)]:
        assert data.images[i, c, y, x] == raw[i, c * 1024 + y * 32 + x]


def test_cifar_test_split_reads_test_batch_only(tmp_path):
    batches = write_cifar(tmp_path)
    data = read_cifar10(tmp_path, split="test")
    images, labels = expected_cifar(batches, ["test_batch"])
    np.testing.assert_array_equal(data.images, images)
    np.testing.assert_array_equal(data.labels, labels)
    assert data.split == "test"


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_cifar_batches_repickled_by_python3_with_str_keys_are_read(tmp_path, protocol):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    batch = {
        "data": np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072),
        "labels": np.array([3, 7]),
        "batch_label": "testing batch 1 of 1",
        "filenames": ["a.png", "b.png"],
    }
    (folder / "test_batch").write_bytes(pickle.dumps(batch, protocol=protocol))
    data = read_cifar10(folder, "test")
    np.testing.assert_array_equal(data.images.reshape(2, 3072), batch["data"])
    assert data.labels.tolist() == [3, 7]


def test_cifar_unknown_split_suggests_the_right_one(tmp_path):
    with pytest.raises(FitbenchError, match="unknown CIFAR-10 split 'tset'") as info:
        read_cifar10(tmp_path, "tset")
    assert "'test'" in info.value.hint


def _replace(batch: dict, **changes) -> dict:
    out = dict(batch)
    for key, value in changes.items():
        if value is None:
            del out[key.encode()]
        else:
            out[key.encode()] = value
    return out


BAD_BATCHES = {
    "not a pickle": b"this is not a pickle at all",
    "empty file": b"",
    "truncated pickle": py2_dumps(cifar_batch(3, 1))[:500],
    "a list, not a dict": py2_dumps([1, 2, 3]),
    "data of the wrong shape": py2_dumps(_replace(cifar_batch(3, 1), data=np.zeros((3, 100), np.uint8))),
    "data of the wrong dtype": py2_dumps(_replace(cifar_batch(3, 1), data=np.zeros((3, 3072), np.float32))),
    "data as a list": py2_dumps(_replace(cifar_batch(3, 1), data=[0] * 3072)),
    "images as N x 32 x 32 x 3": py2_dumps(
        _replace(cifar_batch(3, 1), data=np.zeros((3, 32, 32, 3), np.uint8))
    ),
    "no data key": py2_dumps(_replace(cifar_batch(3, 1), data=None)),
    "no labels key": py2_dumps(_replace(cifar_batch(3, 1), labels=None)),
    "fewer labels than images": py2_dumps(_replace(cifar_batch(3, 1), labels=[1, 2])),
    "label 10": py2_dumps(_replace(cifar_batch(3, 1), labels=[1, 10, 2])),
    "label -1": py2_dumps(_replace(cifar_batch(3, 1), labels=[-1, 0, 2])),
    "labels as strings": py2_dumps(_replace(cifar_batch(3, 1), labels=[b"cat", b"dog", b"cat"])),
    "float labels": py2_dumps(_replace(cifar_batch(3, 1), labels=[1.0, 2.0, 3.0])),
    "object array": pickle.dumps(
        {b"data": np.array([None] * 3072, dtype=object).reshape(1, 3072), b"labels": [0]}, protocol=2
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_cifar_malformed_batch_is_a_one_line_error_naming_the_file(tmp_path, case):
    write_cifar(tmp_path)
    target = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    target.write_bytes(BAD_BATCHES[case])
    with pytest.raises(FitbenchError) as info:
        read_cifar10(tmp_path)
    assert str(info.value.message).startswith(f"CIFAR-10 file {target} is ")
    assert info.value.hint == CIFAR_HINT
    assert "\n" not in str(info.value)


class _RunsCommand:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


class _Evals:
    def __reduce__(self):
        return (eval, ("__import__('pathlib').Path('EVIL').touch()",))


class _Popen:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (subprocess.Popen, (["touch", str(self.marker)],))


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("payload", ["os.system", "eval", "Popen", "nested in labels"])
def test_cifar_pickle_that_runs_code_is_refused_and_nothing_runs(tmp_path, payload, protocol, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "EVIL"
    evil = {"os.system": _RunsCommand(f"touch {marker}"), "eval": _Evals(), "Popen": _Popen(marker)}
    if payload == "nested in labels":
        batch = {b"data": np.zeros((1, 3072), np.uint8), b"labels": [_RunsCommand(f"touch {marker}")]}
    else:
        batch = {b"data": np.zeros((1, 3072), np.uint8), b"labels": [0], b"extra": evil[payload]}
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "test_batch").write_bytes(pickle.dumps(batch, protocol=protocol))
    with pytest.raises(FitbenchError, match="is refused: loading it would call") as info:
        read_cifar10(folder, "test")
    assert not marker.exists()
    # the name as the file spells it: os.system is posix.system; protocol 2 writes Python 2 names
    # (__builtin__.eval, commands.Popen)
    called = {"os.system": "posix.system", "eval": ".eval", "Popen": ".Popen"}
    assert called.get(payload, "posix.system") in info.value.message


def test_safe_unpickle_refuses_numpy_constructors_beyond_array_rebuilding():
    # numpy.ndarray itself may only be named as the argument of _reconstruct, never called
    crafted = b"\x80\x02cnumpy\nndarray\nK\x05\x85R."
    with pytest.raises(TypeError):
        safe_unpickle(crafted)
    # _reconstruct with a shape other than numpy's (0,) would allocate whatever a file asks
    big = b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nJ\x00\x00\x00\x40\x85U\x01b\x87R."
    with pytest.raises(pickle.UnpicklingError, match="unexpected arguments"):
        safe_unpickle(big)
    with pytest.raises(pickle.UnpicklingError, match=r"numpy\.load"):
        safe_unpickle(b"\x80\x02cnumpy\nload\n.")
    # BUILD (setting state) on an allowed global is refused rather than changing it for later loads
    with pytest.raises(pickle.UnpicklingError, match="takes no state"):
        safe_unpickle(b"\x80\x02c_codecs\nencode\nK\x01b.")
    # a 20-byte file claiming a terabyte bytearray fails before anything is allocated
    with pytest.raises(ValueError, match="expected 1099511627776 bytes"):
        safe_unpickle(b"\x80\x05\x96" + (1 << 40).to_bytes(8, "little") + b"abc.")


def test_cifar_truncated_tar_gz_is_a_clear_error(tmp_path):
    write_cifar(tmp_path, n=40)
    archive = tar_folder(tmp_path / "full.tar.gz", tmp_path / "cifar-10-batches-py", "cifar-10-batches-py")
    broken = tmp_path / "cifar-10-python.tar.gz"
    broken.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(FitbenchError, match=r"is not a readable tar\.gz archive") as info:
        read_cifar10(broken)
    assert info.value.message.startswith(f"CIFAR-10 file {broken} is ")
    assert info.value.hint == CIFAR_HINT


def test_cifar_archive_without_a_batch_names_the_missing_member(tmp_path):
    write_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_4").unlink()
    archive = tar_folder(tmp_path / "c.tar.gz", tmp_path / "cifar-10-batches-py", "cifar-10-batches-py")
    with pytest.raises(FitbenchError, match=r"data_batch_4 is missing from the archive"):
        read_cifar10(archive)
    assert len(read_cifar10(archive, "test")) == 4  # the test split is complete


def test_cifar_missing_paths_and_batches(tmp_path):
    with pytest.raises(FitbenchError, match="does not exist") as info:
        read_cifar10(tmp_path / "nowhere")
    assert info.value.hint == CIFAR_HINT
    with pytest.raises(FitbenchError, match="no CIFAR-10 batches in"):
        read_cifar10(tmp_path)
    write_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(FitbenchError, match=r"data_batch_3 is missing"):
        read_cifar10(tmp_path)
    not_tar = tmp_path / "notes.txt"
    not_tar.write_text("hello")
    with pytest.raises(FitbenchError, match=r"not a readable tar\.gz archive"):
        read_cifar10(not_tar)


# ---------------------------------------------------------------------------------------------
# IMDb
# ---------------------------------------------------------------------------------------------
def test_imdb_folder_parent_and_tar_read_the_same(tmp_path):
    top = write_imdb(tmp_path)
    archive = tar_folder(tmp_path / "aclImdb_v1.tar.gz", top, "aclImdb")
    results = [read_imdb(p) for p in (top, tmp_path, archive)]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "aclImdb_v1.tar.gz").write_bytes(archive.read_bytes())
    results.append(read_imdb(elsewhere))
    for data in results:
        # alternating negative/positive, each label in order of review id (2 before 10)
        assert data.texts == [
            "Terrible plot.",
            "A wonderful film.",
            "Boring, awful, long.",
            "Café scenes, naïve charm — superb.",
            "Great acting!<br /><br />Loved it.",
        ]
        assert data.labels == [0, 1, 0, 1, 1]
        assert data.split == "train"
    assert results[0].source == str(top)


def test_imdb_test_split_and_limit(tmp_path):
    write_imdb(tmp_path)
    test = read_imdb(tmp_path, split="test")
    assert test.texts == ["Not for me.", "Pretty good."] and test.labels == [0, 1]
    limited = read_imdb(tmp_path, limit=2)
    assert limited.labels == [0, 1] and len(limited) == 2
    assert len(read_imdb(tmp_path, limit=100)) == 5


def test_imdb_undecodable_bytes_are_replaced_not_fatal(tmp_path):
    top = write_imdb(tmp_path)
    (top / "train" / "neg" / "1_2.txt").write_bytes(b"bad \xff\xfe bytes")
    data = read_imdb(top)
    assert "bad \ufffd\ufffd bytes" in data.texts


def test_imdb_reads_thousands_of_files_quickly(tmp_path):
    import time

    top = tmp_path / "aclImdb"
    for label in ("pos", "neg"):
        folder = top / "train" / label
        folder.mkdir(parents=True)
        for i in range(1000):
            (folder / f"{i}_{8 if label == 'pos' else 2}.txt").write_text("word " * 200)
    start = time.perf_counter()
    data = read_imdb(top)
    elapsed = time.perf_counter() - start
    assert len(data) == 2000 and sum(data.labels) == 1000
    assert elapsed < 2.0  # ~0.1 s here; 25,000 real reviews take about a second


def test_imdb_refuses_files_too_large_to_be_reviews(tmp_path, monkeypatch):
    import fitbench.datasets.text as datasets_text

    top = write_imdb(tmp_path)
    (top / "train" / "pos" / "10_8.txt").write_text("long " * 1000)
    archive = tar_folder(tmp_path / "aclImdb_v1.tar.gz", top, "aclImdb")
    monkeypatch.setattr(datasets_text, "_MAX_REVIEW_BYTES", 2048)  # the real limit is 1 MiB
    with pytest.raises(FitbenchError, match=r"10_8\.txt is over 2 KiB, too large to be one"):
        read_imdb(top)
    with pytest.raises(FitbenchError, match=r"10_8\.txt is 5 KiB, too large to be one"):
        read_imdb(archive)


def _without(top: Path, rel: str) -> None:
    import shutil

    shutil.rmtree(top / rel)


def test_imdb_errors(tmp_path):
    with pytest.raises(FitbenchError, match=r"IMDb path .* does not exist") as info:
        read_imdb(tmp_path / "nowhere")
    assert info.value.hint == IMDB_HINT
    with pytest.raises(FitbenchError, match="no IMDb reviews in"):
        read_imdb(tmp_path)
    with pytest.raises(FitbenchError, match="unknown IMDb split"):
        read_imdb(tmp_path, split="unsup")
    with pytest.raises(FitbenchError, match="limit must be a positive integer"):
        read_imdb(tmp_path, limit=0)

    top = write_imdb(tmp_path / "a")
    _without(top, "train/neg")
    with pytest.raises(FitbenchError, match=r"has no train/neg/ folder"):
        read_imdb(top)

    top = write_imdb(tmp_path / "b")
    for file in (top / "train" / "pos").iterdir():
        file.unlink()
    with pytest.raises(FitbenchError, match=r"pos is empty: it holds no .txt reviews") as info:
        read_imdb(top)
    assert info.value.hint == IMDB_HINT


def test_imdb_bad_archives(tmp_path):
    top = write_imdb(tmp_path)
    for i in range(200):  # enough incompressible text that half the archive is mid-stream
        (top / "train" / "pos" / f"{100 + i}_9.txt").write_bytes(os.urandom(300).hex().encode())
    archive = tar_folder(tmp_path / "full.tar.gz", top, "aclImdb")
    truncated = tmp_path / "aclImdb_v1.tar.gz"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    expected = re.escape(f"IMDb file {truncated} is not a readable tar.gz archive")
    with pytest.raises(FitbenchError, match=expected) as info:
        read_imdb(truncated)
    assert info.value.hint == IMDB_HINT

    _without(top, "test")
    no_test = tar_folder(tmp_path / "no_test.tar.gz", top, "aclImdb")
    with pytest.raises(FitbenchError, match=r"missing aclImdb/test/neg/\*.txt reviews"):
        read_imdb(no_test, split="test")


# ---------------------------------------------------------------------------------------------
# Tokenisation
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Hello, World!", ["hello", ",", "world", "!"]),
        (
            "Great acting!<br /><br />Loved it.",
            ["great", "acting", "!", "<", "br", "/", ">", "<", "br", "/", ">", "loved", "it", "."],
        ),
        ("Café naïve RÉSUMÉ", ["cafe", "naive", "resume"]),
        ("don't snake_case $5", ["don", "'", "t", "snake", "_", "case", "$", "5"]),
        ("日本語 text", ["日", "本", "語", "text"]),
        ("tab\tnew\nline\x00ctrl\x01x", ["tab", "new", "linectrlx"]),  # BERT drops NUL and controls
        ("“quoted”—dash", ["“", "quoted", "”", "—", "dash"]),
        ("", []),
    ],
)
def test_basic_tokens_split_like_bert(text, tokens):
    assert basic_tokens(text) == tokens


def test_basic_tokens_can_keep_case():
    assert basic_tokens("Hello Café", lowercase=False) == ["Hello", "Café"]


def test_hashing_tokenizer_encodes_cls_text_sep_then_padding():
    tok = HashingTokenizer(30522)
    out = tok.encode(["Hello, world!", "", "one two three four five six seven eight nine ten"], 8)
    assert set(out) == {"input_ids", "attention_mask", "token_type_ids"}
    for array in out.values():
        assert array.shape == (3, 8) and array.dtype == np.int64
    ids, mask = out["input_ids"], out["attention_mask"]
    words = [tok.word_id(w) for w in ["hello", ",", "world", "!"]]
    assert ids[0].tolist() == [101, *words, 102, 0, 0]
    assert mask[0].tolist() == [1, 1, 1, 1, 1, 1, 0, 0]
    assert ids[1].tolist() == [101, 102, 0, 0, 0, 0, 0, 0] and mask[1].sum() == 2
    assert ids[2, 0] == 101 and ids[2, -1] == 102 and mask[2].all()  # truncated to 6 words
    assert ids[2, 1:7].tolist() == [tok.word_id(w) for w in ("one", "two", "three", "four", "five", "six")]
    assert not out["token_type_ids"].any()
    assert ((ids[mask == 1] >= 103) | np.isin(ids[mask == 1], [101, 102])).all()


def test_hashing_ids_are_stable_and_within_the_vocabulary():
    tok = HashingTokenizer(30522)
    # pinned: these must never change, or results recorded earlier stop being comparable
    assert tok.word_id("hello") == 103 + zlib.crc32(b"hello") % (30522 - 103) == 27231
    assert tok.word_id("movie") == 103 + zlib.crc32(b"movie") % (30522 - 103)
    assert tok.word_id("x" * 101) == 100  # over-long words are [UNK], as in BERT
    assert tok.ids("Hello HELLO hello") == [tok.word_id("hello")] * 3
    small = HashingTokenizer(300, cls_id=2, sep_id=3, pad_id=0, unk_id=1)
    ids = small.encode(["the quick brown fox jumps over the lazy dog " * 20], 64)["input_ids"]
    assert ids.max() < 300 and ids.min() >= 0 and (ids[0, 1:-1] >= 4).all()


def test_hashing_ids_are_the_same_in_another_process():
    texts = ["A wonderful film.", "Boring, awful — long!", "Café 日本 <br />"]
    here = HashingTokenizer(30522).encode(texts, 16)["input_ids"].tolist()
    code = (
        "import json, sys; from fitbench.datasets import HashingTokenizer; "
        "ids = HashingTokenizer(30522).encode(json.loads(sys.argv[1]), 16)['input_ids']; "
        "print(json.dumps(ids.tolist()))"
    )
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code, json.dumps(texts)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(done.stdout) == here


def test_tokenizer_arguments_are_checked():
    tok = HashingTokenizer(1000)
    with pytest.raises(FitbenchError, match="seq-len must be at least 2"):
        tok.encode(["x"], 1)
    with pytest.raises(TypeError, match="sequence of texts"):
        tok.encode("just one string", 8)
    with pytest.raises(FitbenchError, match="leaves no room"):
        HashingTokenizer(103)


def test_load_tokenizer_without_a_path_hashes():
    bert = load_tokenizer(30522)
    assert isinstance(bert, HashingTokenizer) and (bert.cls_id, bert.sep_id, bert.pad_id) == (101, 102, 0)
    tiny = load_tokenizer(64)
    ids = tiny.encode(["a tiny model's vocabulary"], 12)["input_ids"]
    assert ids[0, 0] == tiny.cls_id and ids.max() < 64


def write_vocab(folder: Path, words: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tokens = ["[PAD]", *[f"[unused{i}]" for i in range(99)], "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return folder


VOCAB_WORDS = [
    "the",
    "film",
    "was",
    "great",
    "not",
    "bad",
    "!",
    ",",
    ".",
    "<",
    ">",
    "/",
    "br",
    "play",
    "##ing",
    "##ed",
    "##s",
    "un",
    "##aff",
    "##able",
    "cafe",
    "naive",
    "日",
    "本",
    "'",
    "t",
    "don",
    "hello",
]


def test_wordpiece_splits_greedily_and_unknowns_become_unk(tmp_path):
    tok = WordPieceTokenizer.from_vocab_file(write_vocab(tmp_path, VOCAB_WORDS) / "vocab.txt")
    vocab = tok.vocab
    assert tok.ids("Playing unaffable") == [
        vocab["play"],
        vocab["##ing"],
        vocab["un"],
        vocab["##aff"],
        vocab["##able"],
    ]
    assert tok.ids("zebra plays") == [tok.unk_id, vocab["play"], vocab["##s"]]
    out = tok.encode(["The film was great!"], 8)["input_ids"][0].tolist()
    assert out == [101, *(vocab[w] for w in ["the", "film", "was", "great", "!"]), 102, 0]


@pytest.mark.slow
def test_pure_python_wordpiece_matches_transformers(tmp_path):
    pytest.importorskip("transformers")
    folder = write_vocab(tmp_path / "ckpt", VOCAB_WORDS)
    texts = [
        "The film was GREAT, not bad!",
        "Café naïve playing… <br />日本",
        "don't unaffable zebra",
        "x" * 150,
        "emoji 😀 great😀",
        "",
    ]
    fast = load_tokenizer(30522, folder)
    assert "transformers" in fast.description
    slow = WordPieceTokenizer.from_vocab_file(folder / "vocab.txt")
    a, b = fast.encode(texts, 12), slow.encode(texts, 12)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        assert a[key].dtype == np.int64
    cycler, n, description = text_batches(write_imdb(tmp_path), 4, 16, 30522, 2, 0, tokenizer_path=folder)
    assert n == 5 and "WordPiece vocabulary" in description
    assert next(cycler)["input_ids"].max() < fast.vocab_size


def test_load_tokenizer_errors(tmp_path):
    with pytest.raises(FitbenchError, match=r"no vocab\.txt in"):
        load_tokenizer(30522, tmp_path)
    with pytest.raises(FitbenchError, match="does not exist"):
        load_tokenizer(30522, tmp_path / "missing")
    with pytest.raises(FitbenchError, match="lacks \\[CLS\\]"):
        WordPieceTokenizer({"[PAD]": 0, "[SEP]": 1, "[UNK]": 2, "a": 3})


@pytest.mark.slow
def test_load_tokenizer_refuses_a_vocabulary_larger_than_the_model(tmp_path):
    pytest.importorskip("transformers")
    folder = write_vocab(tmp_path, VOCAB_WORDS)
    with pytest.raises(FitbenchError, match="has 132 tokens but the model's vocabulary only 120"):
        load_tokenizer(120, folder / "vocab.txt")


# ---------------------------------------------------------------------------------------------
# Synthetic data and batches
# ---------------------------------------------------------------------------------------------
def test_synthetic_images_have_cifar_dtypes_and_follow_the_seed():
    data = synthetic_images(6, 40, 7, seed=3)
    assert data.images.shape == (6, 3, 40, 40) and data.images.dtype == np.uint8
    assert data.labels.shape == (6,) and data.labels.dtype == np.int64
    assert data.labels.min() >= 0 and data.labels.max() < 7
    np.testing.assert_array_equal(synthetic_images(6, 40, 7, seed=3).images, data.images)
    assert not np.array_equal(synthetic_images(6, 40, 7, seed=4).images, data.images)


def test_synthetic_tokens_have_encode_shapes():
    arrays = synthetic_tokens(5, 12, 30522, seed=0, num_labels=3)
    assert {k: (v.shape, v.dtype) for k, v in arrays.items()} == {
        "input_ids": ((5, 12), np.int64),
        "attention_mask": ((5, 12), np.int64),
        "token_type_ids": ((5, 12), np.int64),
        "labels": ((5,), np.int64),
    }
    ids = arrays["input_ids"]
    assert (ids[:, 0] == 101).all() and (ids[:, -1] == 102).all() and ids.max() < 30522 and ids.min() >= 1
    assert arrays["attention_mask"].all() and arrays["labels"].max() < 3
    small = synthetic_tokens(4, 6, 50, seed=0, num_labels=2)["input_ids"]
    assert small.max() < 50


def test_batch_cycler_visits_every_sample_once_per_epoch_and_keeps_rows_aligned():
    values = np.arange(10)
    cycler = BatchCycler({"x": values * 10, "y": values}, batch_size=5, seed=0)
    first = [next(cycler) for _ in range(2)]
    seen = np.concatenate([b["y"] for b in first])
    assert sorted(seen.tolist()) == list(range(10))
    for batch in first:
        np.testing.assert_array_equal(batch["x"], batch["y"] * 10)
    assert cycler.epochs == 1.0
    again = BatchCycler({"x": values * 10, "y": values}, batch_size=5, seed=0)
    np.testing.assert_array_equal(next(again)["y"], first[0]["y"])
    epochs = [np.concatenate([next(cycler)["y"] for _ in range(2)]) for _ in range(3)]
    assert all(sorted(e.tolist()) == list(range(10)) for e in epochs)
    assert any(not np.array_equal(e, seen) for e in epochs)  # reshuffled


def test_batch_cycler_repeats_a_dataset_smaller_than_a_batch():
    cycler = BatchCycler({"y": np.arange(3)}, batch_size=8, seed=1)
    batch = next(cycler)["y"]
    assert batch.shape == (8,)
    assert np.bincount(batch, minlength=3).min() >= 2
    assert cycler.epochs == pytest.approx(8 / 3)


def test_batch_cycler_applies_its_transform_and_checks_its_arrays():
    cycler = BatchCycler({"y": np.arange(4)}, 2, 0, transform=lambda b: {"z": b["y"] + 100})
    assert set(next(cycler)) == {"z"} and next(cycler)["z"].min() >= 100
    with pytest.raises(ValueError, match="differ in length"):
        BatchCycler({"a": np.zeros(3), "b": np.zeros(4)}, 2, 0)
    with pytest.raises(ValueError, match="at least one sample"):
        BatchCycler({"a": np.zeros(0)}, 2, 0)


def test_resize_nearest_repeats_up_and_subsamples_down():
    images = np.arange(2 * 3 * 32 * 32, dtype=np.uint8).reshape(2, 3, 32, 32)
    np.testing.assert_array_equal(resize_nearest(images, 224), images.repeat(7, axis=2).repeat(7, axis=3))
    np.testing.assert_array_equal(resize_nearest(images, 16), images[:, :, ::2, ::2])
    assert resize_nearest(images, 48).shape == (2, 3, 48, 48)
    assert resize_nearest(images, 32) is images


def test_normalise_uses_cifar_statistics():
    images = np.zeros((1, 3, 2, 2), np.uint8)
    images[0, 1] = 255
    out = normalise_images(images)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0, 0], -CIFAR_MEAN[0] / CIFAR_STD[0], rtol=1e-6)
    np.testing.assert_allclose(out[0, 1], (1 - CIFAR_MEAN[1]) / CIFAR_STD[1], rtol=1e-6)


def test_image_batches_from_cifar_are_resized_and_normalised(tmp_path):
    write_cifar(tmp_path)
    raw = read_cifar10(tmp_path)
    cycler, size, description = image_batches(tmp_path, batch_size=4, image_size=64, num_classes=10, seed=0)
    assert size == 15 and "CIFAR-10 train: 15 images" in description and "32->64" in description
    batch = next(cycler)
    assert batch["images"].shape == (4, 3, 64, 64) and batch["images"].dtype == np.float32
    assert batch["labels"].dtype == np.int64
    # find each batch row's source image through its top-left pixel block and check the mapping
    restored = (
        batch["images"] * np.array(CIFAR_STD, np.float32).reshape(1, 3, 1, 1)
        + np.array(CIFAR_MEAN, np.float32).reshape(1, 3, 1, 1)
    ) * 255
    restored = np.rint(restored).astype(np.uint8)[:, :, ::2, ::2]
    matches = [np.flatnonzero((raw.images == row).all(axis=(1, 2, 3))) for row in restored]
    assert all(len(m) >= 1 for m in matches)
    assert [raw.labels[m[0]] for m in matches] == batch["labels"].tolist()


def test_image_batches_checks_classes_and_defaults_to_synthetic(tmp_path):
    write_cifar(tmp_path)
    with pytest.raises(FitbenchError, match="CIFAR-10 has 10 classes but the model predicts 5"):
        image_batches(tmp_path, 4, 32, 5, 0)
    cycler, size, description = image_batches(None, 8, 24, 5, 0)
    batch = next(cycler)
    assert batch["images"].shape == (8, 3, 24, 24) and batch["images"].dtype == np.float32
    assert batch["labels"].max() < 5 and size == 32 and description.startswith("synthetic")
    assert abs(float(batch["images"].mean())) < 0.5  # roughly centred by the normalisation
    _, size, _ = image_batches(None, 8, 24, 5, 0, synthetic_size=100)
    assert size == 100


def test_text_batches_from_imdb_and_synthetic(tmp_path):
    write_imdb(tmp_path)
    cycler, size, description = text_batches(
        tmp_path, batch_size=3, seq_len=10, vocab_size=30522, num_labels=2, seed=0
    )
    assert size == 5 and description.startswith("IMDb train: 5 reviews") and "hashing" in description
    batch = next(cycler)
    assert {k: (v.shape, v.dtype) for k, v in batch.items()} == {
        "input_ids": ((3, 10), np.int64),
        "attention_mask": ((3, 10), np.int64),
        "token_type_ids": ((3, 10), np.int64),
        "labels": ((3,), np.int64),
    }
    assert (batch["input_ids"][:, 0] == 101).all() and set(batch["labels"].tolist()) <= {0, 1}
    # the encoded rows are those of the reviews, labels aligned
    data = read_imdb(tmp_path)
    encoded = HashingTokenizer(30522).encode(data.texts, 10)["input_ids"]
    for row, label in zip(batch["input_ids"], batch["labels"], strict=True):
        index = next(i for i in range(5) if (encoded[i] == row).all())
        assert data.labels[index] == label
    _, size, _ = text_batches(tmp_path, 2, 10, 30522, 2, 0, limit=2)
    assert size == 2
    with pytest.raises(FitbenchError, match="IMDb has 2 labels"):
        text_batches(tmp_path, 2, 10, 30522, 1, 0)

    cycler, size, description = text_batches(None, 4, 32, 1000, 3, 0)
    batch = next(cycler)
    assert batch["input_ids"].shape == (4, 32) and batch["input_ids"].max() < 1000
    assert size == 16 and description.startswith("synthetic")


def test_importing_the_module_does_not_import_numpy():
    code = "import sys, fitbench.datasets; print('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
