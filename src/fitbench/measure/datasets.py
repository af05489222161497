"""Local datasets for real training runs: CIFAR-10, IMDb, and synthetic data of the same shapes.

fitbench never downloads at run time. A dataset is read from the files its authors publish
(CIFAR-10's "python version" pickles, IMDb's ``aclImdb/`` text files, or the tar.gz holding
either), and synthetic data of the same shapes and dtypes is the default: speed and memory do
not depend on pixel values or on which words a review holds, only on shapes and lengths.

Everything here is framework-free; numpy is imported inside functions so that importing this
module stays cheap (numpy is present wherever a framework backend runs).

Batches are plain dicts of numpy arrays, named the way models take them:
images  ``{"images": float32 N x 3 x H x W (normalised), "labels": int64 N}``
text    ``{"input_ids", "attention_mask", "token_type_ids": int64 N x L, "labels": int64 N}``
"""

from __future__ import annotations

import io
import lzma
import math
import os
import pickle
import re
import tarfile
import unicodedata
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fitbench.core.units import format_bytes
from fitbench.errors import FitbenchError, did_you_mean

if TYPE_CHECKING:
    import numpy as np

PathLike = str | os.PathLike[str]

CIFAR_HINT = ("expected the 'python version' from the CIFAR-10 site: cifar-10-python.tar.gz "
              "or its cifar-10-batches-py/ folder")
IMDB_HINT = ("expected the Large Movie Review Dataset: aclImdb_v1.tar.gz or its aclImdb/ folder "
             "(train/ and test/, each with pos/ and neg/ folders of .txt reviews)")

CIFAR_DIR = "cifar-10-batches-py"
CIFAR_TAR = "cifar-10-python.tar.gz"
CIFAR_SPLITS = {"train": tuple(f"data_batch_{i}" for i in range(1, 6)), "test": ("test_batch",)}
CIFAR_CLASSES = 10
CIFAR_IMAGE_SIZE = 32
#: per-channel mean and standard deviation of the CIFAR-10 training pixels, in [0, 1] units
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)

IMDB_DIR = "aclImdb"
IMDB_TAR = "aclImdb_v1.tar.gz"
IMDB_SPLITS = ("train", "test")
IMDB_LABELS = {"neg": 0, "pos": 1}

# A CIFAR batch is 30.7 MB and an IMDb review a few KB; a file far larger is not one (or is a
# decompression bomb), and is refused before it is read into memory.
_MAX_BATCH_BYTES = 128 << 20
_MAX_REVIEW_BYTES = 1 << 20
# Synthetic pools stop growing here; the cycler repeats them, which speed does not notice.
_SYNTHETIC_POOL_BYTES = 256 << 20


def _numpy() -> Any:
    import numpy

    return numpy


# =============================================================================================
# Results
# =============================================================================================
@dataclass(frozen=True, kw_only=True, eq=False)
class ImageData:
    """Images as stored (uint8 N x 3 x H x W, channels R, G, B) and their int64 labels."""

    images: np.ndarray
    labels: np.ndarray
    source: str
    split: str = "train"

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True, kw_only=True, eq=False)
class TextData:
    """Reviews as text with their labels (1 = positive, 0 = negative)."""

    texts: list[str]
    labels: list[int]
    source: str
    split: str = "train"

    def __len__(self) -> int:
        return len(self.labels)


# =============================================================================================
# Restricted unpickling
# =============================================================================================
class _Refused(pickle.UnpicklingError):
    """The pickle names a callable a CIFAR-10 batch never contains."""

    def __init__(self, qualified_name: str) -> None:
        super().__init__(qualified_name)
        self.qualified_name = qualified_name


class _Marker:
    """Stands for numpy.ndarray inside a pickle: passed to _reconstruct, never callable."""

    __slots__ = ()

    def __setstate__(self, state: Any) -> None:
        raise pickle.UnpicklingError("numpy.ndarray takes no state here")


class _Allowed:
    """An allowed global, made fresh for each load: callable, and nothing can be set on it.

    (Unpickling's BUILD opcode sets attributes on objects without __setstate__; handing out
    plain module functions would let one file change them for the next.)
    """

    __slots__ = ("_function", "_name")

    def __init__(self, function: Callable[..., Any], name: str) -> None:
        self._function, self._name = function, name

    def __call__(self, *args: Any) -> Any:
        return self._function(*args)

    def __setstate__(self, state: Any) -> None:
        raise pickle.UnpicklingError(f"{self._name} takes no state")

# numpy dtypes a numeric array can have; structured, object and string dtypes are refused.
_DTYPE_CODES = frozenset({"b1", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8"})
_BYTE_ORDERS = frozenset("|<>=")


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, str):
        return value
    raise pickle.UnpicklingError(f"expected a string, got {type(value).__name__}")


class _DtypeStub:
    """What ``numpy.dtype(code, align, copy)`` plus its ``__setstate__`` would build, checked.

    numpy itself never sees the pickled state: a crafted dtype state (fields, object flags)
    is where reconstructing a numpy array from untrusted bytes gets dangerous.
    """

    def __init__(self, code: Any, align: Any = False, copy: Any = True) -> None:
        self.code = _text(code)
        if self.code not in _DTYPE_CODES:
            raise pickle.UnpicklingError(f"dtype {self.code!r} is not a plain numeric dtype")
        self.byteorder = "="

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) < 5:
            raise pickle.UnpicklingError("malformed dtype state")
        order = _text(state[1])
        if order not in _BYTE_ORDERS or any(part is not None for part in state[2:5]):
            raise pickle.UnpicklingError("dtype state is not that of a plain numeric dtype")
        self.byteorder = order

    def to_numpy(self) -> Any:
        dtype = _numpy().dtype(self.code)
        return dtype if self.byteorder in ("|", "=") else dtype.newbyteorder(self.byteorder)


class _ArrayStub:
    """What ``numpy.ndarray`` reconstruction would build, checked before numpy sees the bytes."""

    def __init__(self) -> None:
        self.shape: tuple[int, ...] | None = None
        self.dtype: _DtypeStub | None = None
        self.fortran = False
        self.raw = b""

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise pickle.UnpicklingError("malformed array state")
        shape, dtype, fortran, raw = state[-4:]
        self.set(raw, dtype, shape, fortran)

    def set(self, raw: Any, dtype: Any, shape: Any, fortran: Any) -> None:
        if not isinstance(dtype, _DtypeStub):
            raise pickle.UnpicklingError("array dtype is not a numpy dtype")
        if not (isinstance(shape, tuple) and len(shape) <= 8
                and all(type(d) is int and 0 <= d < 1 << 40 for d in shape)):
            raise pickle.UnpicklingError(f"malformed array shape {shape!r}")
        if not isinstance(raw, bytes | bytearray):
            raise pickle.UnpicklingError("array data is not a byte string")
        itemsize = int(dtype.code[1:])
        if len(raw) != math.prod(shape) * itemsize:
            raise pickle.UnpicklingError(f"array of shape {shape} has {len(raw)} data bytes")
        self.shape, self.dtype, self.fortran, self.raw = shape, dtype, bool(fortran), bytes(raw)

    def to_numpy(self) -> Any:
        if self.shape is None or self.dtype is None:
            raise pickle.UnpicklingError("array without data")
        flat = _numpy().frombuffer(self.raw, dtype=self.dtype.to_numpy())
        return flat.reshape(self.shape, order="F" if self.fortran else "C")


def _reconstruct(subtype: Any, shape: Any, typecode: Any) -> _ArrayStub:
    """numpy's ``_reconstruct(ndarray, (0,), b'b')``: always exactly those arguments."""
    if not isinstance(subtype, _Marker) or shape != (0,) or typecode not in (b"b", "b"):
        raise pickle.UnpicklingError("unexpected arguments to numpy's array reconstruction")
    return _ArrayStub()


def _frombuffer(buf: Any, dtype: Any, shape: Any, order: Any) -> _ArrayStub:
    """numpy's ``_frombuffer(buffer, dtype, shape, order)`` (pickle protocol 5)."""
    stub = _ArrayStub()
    stub.set(buf, dtype, shape, _text(order) == "F")
    return stub


def _latin1_encode(text: Any, encoding: Any = "latin1") -> bytes:
    """``_codecs.encode(str, 'latin1')``: how Python 3 writes bytes with pickle protocol 2."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("unexpected arguments to _codecs.encode")
    return text.encode("latin-1")


def _empty_bytes(*args: Any) -> bytes:
    """``bytes()``: how Python 3 writes an empty bytes object with pickle protocol 2."""
    if args:
        raise pickle.UnpicklingError("unexpected arguments to bytes()")
    return b""


_ALLOWED_GLOBALS: dict[tuple[str, str], Callable[..., Any]] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,   # numpy 1.x and the python2 originals
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,  # numpy 2.x
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,        # protocol 5
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy", "dtype"): _DtypeStub,
    ("_codecs", "encode"): _latin1_encode,                     # bytes, protocol 2 from Python 3
    ("builtins", "bytes"): _empty_bytes,
    ("__builtin__", "bytes"): _empty_bytes,
}


class _SafeUnpickler(pickle.Unpickler):
    """Builds dicts, lists, strings, numbers and plain numeric arrays, and nothing else.

    Unpickling calls whatever callables the file names, so a crafted "dataset" could run any
    command. Only numpy's array reconstruction is let through, and even that is served by
    checked stand-ins (_ArrayStub, _DtypeStub) rather than numpy, so no attacker-chosen state
    reaches a C constructor. Names are matched as the file spells them (protocol 2 files
    written by Python 3 use Python 2 names: __builtin__, commands.Popen).
    """

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("numpy", "ndarray"):
            return _Marker()
        function = _ALLOWED_GLOBALS.get((module, name))
        if function is None:
            raise _Refused(f"{module}.{name}")
        return _Allowed(function, f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent references are not allowed")


def safe_unpickle(blob: bytes) -> Any:
    """Unpickle bytes that may come from anywhere (Python 2 strings load as bytes).

    Raises pickle.UnpicklingError (or another exception, for corrupt data) instead of ever
    calling anything outside the allowed set; numpy arrays come back as numpy arrays.

    The opcodes are walked once first (pickletools.genops), which checks every counted length
    against the bytes that remain: the unpickler allocates the length a BINBYTES8/BYTEARRAY8
    opcode claims before reading it, so a 20-byte file could otherwise ask for terabytes.
    """
    import pickletools

    for _ in pickletools.genops(blob):
        pass
    obj = _SafeUnpickler(io.BytesIO(blob), encoding="bytes").load()
    return _materialise(obj, depth=0)


def _materialise(obj: Any, depth: int) -> Any:
    """Replace array stand-ins by numpy arrays inside the dict/list structure of a batch."""
    if isinstance(obj, _ArrayStub):
        return obj.to_numpy()
    if depth >= 3:
        return obj
    if isinstance(obj, dict):
        return {key: _materialise(value, depth + 1) for key, value in obj.items()}
    if isinstance(obj, list) and any(isinstance(item, _ArrayStub) for item in obj):
        return [_materialise(item, depth + 1) for item in obj]
    return obj


# =============================================================================================
# Archives and files
# =============================================================================================
_ARCHIVE_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "…"


def _tar_files(path: Path, wanted: Callable[[str], bool], *, what: str, hint: str,
               max_bytes: int, stop: Callable[[], bool] = lambda: False) -> Iterator[tuple[str, bytes]]:
    """Regular files of a tar (gz, bz2, xz or plain) whose names pass `wanted`, in archive order.

    Members are read straight from the stream, never extracted to disk, so the archive's own
    paths (absolute, '..') cannot touch the file system. `stop` ends the scan early.
    """
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                if not member.isfile() or not wanted(member.name):
                    continue
                if member.size > max_bytes:
                    raise FitbenchError(
                        f"{what} file {path}:{member.name} is {format_bytes(member.size)}, "
                        f"too large to be one", hint)
                handle = archive.extractfile(member)
                data = handle.read() if handle is not None else b""
                if len(data) != member.size:
                    raise tarfile.ReadError("unexpected end of data")
                yield member.name, data
                if stop():
                    return
    except FitbenchError:
        raise
    except _ARCHIVE_ERRORS as exc:
        raise FitbenchError(
            f"{what} file {path} is not a readable tar.gz archive (truncated or corrupt: {_short(exc)})",
            hint) from exc


def _read_file(path: Path, *, what: str, hint: str, max_bytes: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        reason = exc.strerror or _short(exc)
        raise FitbenchError(f"{what} file {path} is unreadable ({reason})", hint) from exc
    if len(data) > max_bytes:
        raise FitbenchError(f"{what} file {path} is over {format_bytes(max_bytes)}, too large to be one",
                            hint)
    return data


def _existing(path: PathLike, what: str, hint: str) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise FitbenchError(f"{what} path {p} does not exist", hint)
    return p


# =============================================================================================
# CIFAR-10
# =============================================================================================
def _cifar_error(where: str, problem: str) -> FitbenchError:
    return FitbenchError(f"CIFAR-10 file {where} is {problem}", CIFAR_HINT)


def read_cifar10(path: PathLike, split: str = "train") -> ImageData:
    """Read CIFAR-10's "python version": images uint8 N x 3 x 32 x 32, labels int64 N.

    `path` may be the ``cifar-10-batches-py/`` folder, a folder holding it (or holding
    ``cifar-10-python.tar.gz``), one of its batch files, or the tar.gz itself, which is read
    member by member without extracting. Train is data_batch_1..5 (50,000 images), test is
    test_batch (10,000). Batches are unpickled with a restricted unpickler (see _SafeUnpickler).
    """
    if split not in CIFAR_SPLITS:
        raise FitbenchError(f"unknown CIFAR-10 split '{split}'", did_you_mean(split, CIFAR_SPLITS))
    names = CIFAR_SPLITS[split]
    p = _existing(path, "CIFAR-10", CIFAR_HINT)
    if p.is_file() and p.name in {n for group in CIFAR_SPLITS.values() for n in group}:
        p = p.parent
    if p.is_dir():
        folder = _cifar_folder(p)
        if folder is None:
            archive = p / CIFAR_TAR
            if not archive.is_file():
                raise FitbenchError(f"no CIFAR-10 batches in {p}: neither {CIFAR_DIR}/ nor {CIFAR_TAR} "
                                    f"nor {names[0]} is there", CIFAR_HINT)
            p = archive
        else:
            blobs = {}
            for name in names:
                file = folder / name
                if not file.is_file():
                    raise _cifar_error(str(file), "missing")
                blobs[name] = (str(file), _read_file(file, what="CIFAR-10", hint=CIFAR_HINT,
                                                     max_bytes=_MAX_BATCH_BYTES))
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

    for member, data in _tar_files(archive, is_wanted, what="CIFAR-10", hint=CIFAR_HINT,
                                   max_bytes=_MAX_BATCH_BYTES, stop=lambda: len(blobs) == len(wanted)):
        blobs[member.rsplit("/", 1)[-1]] = (f"{archive}:{member}", data)
    for name in names:
        if name not in blobs:
            raise _cifar_error(f"{archive}:{CIFAR_DIR}/{name}", "missing from the archive")
    return _cifar_from_blobs(blobs, names, source=str(archive), split=split)


def _cifar_from_blobs(blobs: Mapping[str, tuple[str, bytes]], names: Sequence[str], *,
                      source: str, split: str) -> ImageData:
    np = _numpy()
    parts = [parse_cifar_batch(*blobs[name]) for name in names]
    images = np.concatenate([data for data, _ in parts]).reshape(-1, 3, CIFAR_IMAGE_SIZE, CIFAR_IMAGE_SIZE)
    labels = np.concatenate([labels for _, labels in parts])
    if images.shape[0] == 0:
        raise _cifar_error(blobs[names[0]][0], "empty: the batches hold no images")
    return ImageData(images=images, labels=labels, source=source, split=split)


def _field(batch: dict[Any, Any], key: str) -> Any:
    """Python 2 originals have bytes keys; a batch re-pickled under Python 3 may have str keys."""
    if key.encode() in batch:
        return batch[key.encode()]
    return batch.get(key)


def parse_cifar_batch(where: str, blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch -> (data uint8 N x 3072, labels int64 N), or a FitbenchError naming `where`."""
    np = _numpy()
    try:
        batch = safe_unpickle(blob)
    except _Refused as exc:
        raise _cifar_error(where, f"refused: loading it would call {exc.qualified_name}, which a "
                                  "CIFAR-10 batch never does (it was not unpickled)") from None
    except Exception as exc:  # corrupt bytes raise almost any exception type from the unpickler
        raise _cifar_error(where, f"not a readable pickle ({type(exc).__name__}: {_short(exc)})") from None
    if not isinstance(batch, dict):
        raise _cifar_error(where, f"not a CIFAR-10 batch: it holds a {type(batch).__name__}, not a dict")
    data, labels = _field(batch, "data"), _field(batch, "labels")
    for key, value in (("data", data), ("labels", labels)):
        if value is None:
            raise _cifar_error(where, f"missing the key '{key}'")
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2
            and data.shape[1] == 3 * CIFAR_IMAGE_SIZE * CIFAR_IMAGE_SIZE):
        got = (f"{data.dtype} array of shape {data.shape}" if isinstance(data, np.ndarray)
               else type(data).__name__)
        raise _cifar_error(where, f"malformed: 'data' is a {got}, expected a uint8 array of N x 3072")
    array_labels = isinstance(labels, np.ndarray) and labels.ndim == 1 and labels.dtype.kind in "iu"
    list_labels = isinstance(labels, list | tuple) and all(type(v) is int for v in labels)
    if not (array_labels or list_labels):
        raise _cifar_error(where, "malformed: 'labels' is not a list of integers")
    if len(labels) != data.shape[0]:
        raise _cifar_error(where, f"malformed: {data.shape[0]} images but {len(labels)} labels")
    if len(labels):
        low, high = (int(labels.min()), int(labels.max())) if array_labels else (min(labels), max(labels))
        if low < 0 or high >= CIFAR_CLASSES:
            raise _cifar_error(where, f"malformed: label {low if low < 0 else high} is outside "
                                      f"0..{CIFAR_CLASSES - 1}")
    array = np.asarray(labels, dtype=np.int64)
    return data, array


# =============================================================================================
# IMDb
# =============================================================================================
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
        raise FitbenchError(f"unknown IMDb split '{split}'", did_you_mean(split, IMDB_SPLITS))
    if limit is not None and (type(limit) is not int or limit < 1):
        raise FitbenchError(f"limit must be a positive integer, got {limit!r}")
    p = _existing(path, "IMDb", IMDB_HINT)
    if p.is_dir():
        root = next((c for c in (p, p / IMDB_DIR) if (c / "train").is_dir() or (c / "test").is_dir()), None)
        if root is None:
            if not (p / IMDB_TAR).is_file():
                raise FitbenchError(f"no IMDb reviews in {p}: neither {IMDB_DIR}/ (with train/ and test/) "
                                    f"nor {IMDB_TAR} is there", IMDB_HINT)
            p = p / IMDB_TAR
        else:
            return _imdb_from_folder(root, split, limit)
    return _imdb_from_tar(p, split, limit)


def _imdb_from_folder(root: Path, split: str, limit: int | None) -> TextData:
    by_label: dict[str, list[str]] = {}
    for label in IMDB_LABELS:
        folder = root / split / label
        if not folder.is_dir():
            raise FitbenchError(f"IMDb folder {root} has no {split}/{label}/ folder", IMDB_HINT)
        try:
            with os.scandir(folder) as entries:
                names = [e.name for e in entries if e.name.endswith(".txt") and e.is_file()]
        except OSError as exc:
            raise FitbenchError(f"IMDb folder {folder} is unreadable ({exc.strerror or _short(exc)})",
                                IMDB_HINT) from exc
        if not names:
            raise FitbenchError(f"IMDb folder {folder} is empty: it holds no .txt reviews", IMDB_HINT)
        by_label[label] = names
    texts: list[str] = []
    labels: list[int] = []
    for label, name in _select_reviews(by_label, limit):
        raw = _read_file(root / split / label / name, what="IMDb", hint=IMDB_HINT,
                         max_bytes=_MAX_REVIEW_BYTES)
        texts.append(raw.decode("utf-8", errors="replace"))
        labels.append(IMDB_LABELS[label])
    return TextData(texts=texts, labels=labels, source=str(root), split=split)


def _imdb_from_tar(archive: Path, split: str, limit: int | None) -> TextData:
    blobs: dict[str, dict[str, bytes]] = {label: {} for label in IMDB_LABELS}

    def is_wanted(member: str) -> bool:
        parts = member.split("/")
        return (len(parts) >= 4 and parts[-4] == IMDB_DIR and parts[-3] == split
                and parts[-2] in IMDB_LABELS and parts[-1].endswith(".txt"))

    for member, data in _tar_files(archive, is_wanted, what="IMDb", hint=IMDB_HINT,
                                   max_bytes=_MAX_REVIEW_BYTES):
        parts = member.split("/")
        blobs[parts[-2]][parts[-1]] = data
    for label, files in blobs.items():
        if not files:
            raise FitbenchError(f"IMDb file {archive} is missing {IMDB_DIR}/{split}/{label}/*.txt reviews",
                                IMDB_HINT)
    chosen = _select_reviews({label: list(files) for label, files in blobs.items()}, limit)
    return TextData(texts=[blobs[label][name].decode("utf-8", errors="replace") for label, name in chosen],
                    labels=[IMDB_LABELS[label] for label, _ in chosen], source=str(archive), split=split)


# =============================================================================================
# Tokenisation
# =============================================================================================
# BERT's BasicTokenizer (Devlin et al. 2019, google-research/bert tokenization.py): drop control
# characters, isolate CJK ideographs, lowercase and strip accents, split on whitespace, and make
# every punctuation character (ASCII symbols included) a token of its own.
_ASCII_PUNCT = r"!-/:-@\[-`{-~"
_ASCII_TOKEN = re.compile(rf"[^\s{_ASCII_PUNCT}]+|[{_ASCII_PUNCT}]")
_ASCII_CONTROLS = dict.fromkeys([*range(0, 9), 11, 12, *range(14, 32), 127])
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
#: words longer than this become [UNK], as in BERT's WordPiece
MAX_WORD_CHARS = 100


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def basic_tokens(text: str, lowercase: bool = True) -> list[str]:
    """Split text into words and single punctuation characters the way BERT does before WordPiece.

    ASCII text (nearly all of IMDb) takes a single regular expression; other text goes
    character by character through BERT's Unicode rules.
    """
    if text.isascii():
        text = text.translate(_ASCII_CONTROLS)
        return _ASCII_TOKEN.findall(text.lower() if lowercase else text)
    text = _clean_unicode(text)
    if lowercase:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    tokens: list[str] = []
    for word in text.split():
        tokens.extend(_split_punctuation(word))
    return tokens


def _clean_unicode(text: str) -> str:
    """BERT's clean-up: controls and NUL/U+FFFD dropped, whitespace a blank, CJK characters
    surrounded by blanks (each is a word)."""
    chars: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch in " \t\n\r":
            chars.append(" ")
            continue
        category = unicodedata.category(ch)
        if category == "Zs":
            chars.append(" ")
        elif category[0] == "C":
            continue
        elif any(low <= cp <= high for low, high in _CJK_RANGES):
            chars.extend((" ", ch, " "))
        else:
            chars.append(ch)
    return "".join(chars)


def _split_punctuation(word: str) -> list[str]:
    """A word split before and after each punctuation character, which stands alone."""
    tokens: list[str] = []
    start = 0
    for i, ch in enumerate(word):
        if _is_punctuation(ch):
            if start < i:
                tokens.append(word[start:i])
            tokens.append(ch)
            start = i + 1
    if start < len(word):
        tokens.append(word[start:])
    return tokens


class Tokenizer(Protocol):
    """What text_batches needs from a tokenizer: a vocabulary size and fixed-length encoding."""

    vocab_size: int
    description: str

    def encode(self, texts: Sequence[str], seq_len: int) -> dict[str, np.ndarray]: ...


def _check_seq_len(seq_len: int) -> None:
    if type(seq_len) is not int or seq_len < 2:
        raise FitbenchError(f"seq-len must be at least 2 to hold [CLS] and [SEP], got {seq_len!r}")


_WORD_CACHE_LIMIT = 1 << 20


class _BertStyleTokenizer(ABC):
    """Shared encoding: [CLS] ids [SEP], truncated and padded to a fixed length."""

    vocab_size: int
    description: str
    cls_id: int
    sep_id: int
    pad_id: int
    unk_id: int
    lowercase: bool

    def __init__(self) -> None:
        self._cache: dict[str, tuple[int, ...]] = {}

    @abstractmethod
    def word_ids(self, word: str) -> tuple[int, ...]:
        """Ids of one basic token (a hashed id, or WordPiece pieces)."""

    def ids(self, text: str, limit: int | None = None) -> list[int]:
        """Token ids of one text, without [CLS]/[SEP]; at most `limit` of them."""
        cache = self._cache
        out: list[int] = []
        # every word yields at least one id, so words past the limit cannot matter
        for word in basic_tokens(text, self.lowercase)[:limit]:
            got = cache.get(word)
            if got is None:
                got = self.word_ids(word)
                if len(cache) < _WORD_CACHE_LIMIT:
                    cache[word] = got
            out.extend(got)
        return out[:limit]

    def encode(self, texts: Sequence[str], seq_len: int) -> dict[str, np.ndarray]:
        """input_ids, attention_mask, token_type_ids: int64 arrays of len(texts) x seq_len."""
        _check_seq_len(seq_len)
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not one string")
        np = _numpy()
        input_ids = np.full((len(texts), seq_len), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(texts), seq_len), dtype=np.int64)
        for row, text in enumerate(texts):
            body = self.ids(text, seq_len - 2)
            end = len(body) + 1
            input_ids[row, 0] = self.cls_id
            input_ids[row, 1:end] = body
            input_ids[row, end] = self.sep_id
            mask[row, : end + 1] = 1
        return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}


class HashingTokenizer(_BertStyleTokenizer):
    """BERT-style tokenisation with no vocabulary file: each word's id is a stable hash.

    Why this is legitimate for a speed and memory benchmark: the model's cost depends on the
    shapes it is fed (batch x sequence length) and on how much of each sequence is padding,
    never on which ids fill it. Splitting reviews into words and punctuation the way BERT
    does gives realistic sequence lengths (WordPiece splits rare words further, so real
    sequences run slightly longer; at 512 most IMDb reviews are truncated either way).
    Accuracy is not measured with it; for real ids, pass a local vocab.txt to load_tokenizer.

    Ids come from zlib.crc32 of the UTF-8 word, folded into [first_free_id, vocab_size):
    identical in every process and on every machine, unlike Python's salted hash().
    Words longer than MAX_WORD_CHARS map to unk_id, as in BERT.
    """

    def __init__(self, vocab_size: int, cls_id: int = 101, sep_id: int = 102, pad_id: int = 0,
                 unk_id: int = 100, *, lowercase: bool = True) -> None:
        super().__init__()
        specials = {"cls_id": cls_id, "sep_id": sep_id, "pad_id": pad_id, "unk_id": unk_id}
        for name, value in {"vocab_size": vocab_size, **specials}.items():
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        self.first_free_id = max(specials.values()) + 1
        if vocab_size <= self.first_free_id:
            raise FitbenchError(f"vocab size {vocab_size} leaves no room for words after the special "
                                f"ids (up to {self.first_free_id - 1})", "use a larger vocab size")
        self.vocab_size, self.cls_id, self.sep_id, self.pad_id, self.unk_id = (
            vocab_size, cls_id, sep_id, pad_id, unk_id)
        self.lowercase = lowercase
        self._ids: dict[str, int] = {}
        self.description = f"hashing tokenizer (vocab {vocab_size:,})"

    def word_id(self, word: str) -> int:
        """The id of one basic token (a word or a punctuation character)."""
        if len(word) > MAX_WORD_CHARS:
            return self.unk_id
        span = self.vocab_size - self.first_free_id
        return self.first_free_id + zlib.crc32(word.encode("utf-8", "surrogatepass")) % span

    def word_ids(self, word: str) -> tuple[int, ...]:
        return (self.word_id(word),)

    def ids(self, text: str, limit: int | None = None) -> list[int]:
        cache = self._ids
        words = basic_tokens(text, self.lowercase)[:limit]
        missing = [word for word in words if word not in cache]
        if missing and len(cache) < _WORD_CACHE_LIMIT:
            cache.update((word, self.word_id(word)) for word in missing)
        elif missing:
            return [self.word_id(word) for word in words]
        return [cache[word] for word in words]


class WordPieceTokenizer(_BertStyleTokenizer):
    """BERT's WordPiece over a local vocab.txt, in pure Python (used when transformers is absent).

    Greedy longest-match-first over each basic token, continuation pieces prefixed with '##',
    and a word with no match becomes [UNK] (google-research/bert tokenization.py).
    """

    def __init__(self, vocab: Mapping[str, int], *, lowercase: bool = True, source: str = "") -> None:
        super().__init__()
        self.vocab = dict(vocab)
        missing = [tok for tok in ("[CLS]", "[SEP]", "[PAD]", "[UNK]") if tok not in self.vocab]
        if missing:
            raise FitbenchError(f"vocabulary {source or ''} lacks {', '.join(missing)}",
                                "pass the vocab.txt of a BERT-style checkpoint")
        self.cls_id, self.sep_id = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.pad_id, self.unk_id = self.vocab["[PAD]"], self.vocab["[UNK]"]
        self.vocab_size = max(self.vocab.values()) + 1
        self.lowercase = lowercase
        self.description = f"WordPiece vocabulary {source} ({self.vocab_size:,} tokens)"

    @classmethod
    def from_vocab_file(cls, vocab_file: PathLike, *, lowercase: bool = True) -> WordPieceTokenizer:
        raw = _read_file(Path(vocab_file), what="vocabulary", hint="pass a BERT vocab.txt",
                         max_bytes=64 << 20)
        lines = raw.decode("utf-8", errors="replace").splitlines()
        vocab: dict[str, int] = {}
        for index, token in enumerate(lines):
            vocab.setdefault(token.rstrip("\r\n"), index)
        return cls(vocab, lowercase=lowercase, source=str(vocab_file))

    def word_ids(self, word: str) -> tuple[int, ...]:
        if len(word) > MAX_WORD_CHARS:
            return (self.unk_id,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk_id,)
            pieces.append(found)
            start = end
        return tuple(pieces)


class _TransformersTokenizer:
    """transformers' fast BERT tokenizer behind the Tokenizer protocol."""

    def __init__(self, tokenizer: Any, source: str) -> None:
        self._tokenizer = tokenizer
        self.vocab_size = len(tokenizer)
        self.description = f"WordPiece vocabulary {source} ({self.vocab_size:,} tokens, transformers)"

    def encode(self, texts: Sequence[str], seq_len: int) -> dict[str, np.ndarray]:
        _check_seq_len(seq_len)
        np = _numpy()
        out = self._tokenizer(list(texts), max_length=seq_len, padding="max_length", truncation=True,
                              return_tensors="np", return_attention_mask=True, return_token_type_ids=True)
        return {key: np.asarray(out[key], dtype=np.int64)
                for key in ("input_ids", "attention_mask", "token_type_ids")}


def load_tokenizer(vocab_size: int, tokenizer_path: PathLike | None = None) -> Tokenizer:
    """The tokenizer for a text run: hashing by default, a checkpoint's WordPiece when given.

    tokenizer_path: a folder holding a BERT vocab.txt (or the file itself). transformers'
    BertTokenizerFast reads it when transformers is installed (fast, and it honours the
    folder's tokenizer_config.json); otherwise WordPieceTokenizer does the same in Python.
    Without a path, HashingTokenizer uses BERT's special ids (0, 100, 101, 102) when the
    vocabulary has room for them, else 0..3.
    """
    if tokenizer_path is None:
        if vocab_size > 104:
            return HashingTokenizer(vocab_size)
        return HashingTokenizer(vocab_size, cls_id=2, sep_id=3, pad_id=0, unk_id=1)
    hint = "pass a folder holding a BERT-style vocab.txt, or none to use the hashing tokenizer"
    p = _existing(tokenizer_path, "tokenizer", hint)
    folder = p.parent if p.is_file() else p
    vocab_file = folder / "vocab.txt"
    if not vocab_file.is_file():
        raise FitbenchError(f"no vocab.txt in {folder}", hint)
    lowercase = _config_lowercase(folder)
    tokenizer: Tokenizer
    try:
        from transformers import BertTokenizerFast
    except ImportError:
        tokenizer = WordPieceTokenizer.from_vocab_file(vocab_file, lowercase=lowercase)
    else:
        try:
            hf = BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)
        except Exception as exc:  # transformers raises OSError, ValueError or its own types here
            raise FitbenchError(f"transformers cannot read the tokenizer in {folder} ({_short(exc)})",
                                hint) from exc
        tokenizer = _TransformersTokenizer(hf, str(folder))
    if tokenizer.vocab_size > vocab_size:
        raise FitbenchError(f"the tokenizer in {folder} has {tokenizer.vocab_size:,} tokens but the model's "
                            f"vocabulary only {vocab_size:,}", "use the tokenizer that belongs to the model")
    return tokenizer


def _config_lowercase(folder: Path) -> bool:
    import json

    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    value = config.get("do_lower_case", True) if isinstance(config, dict) else True
    return value if isinstance(value, bool) else True


# =============================================================================================
# Synthetic data
# =============================================================================================
def _positive(**values: int) -> None:
    for name, value in values.items():
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def synthetic_images(n: int, image_size: int, num_classes: int, seed: int) -> ImageData:
    """Random uint8 images N x 3 x S x S with int64 labels in [0, num_classes): CIFAR's dtypes."""
    _positive(n=n, image_size=image_size, num_classes=num_classes)
    np = _numpy()
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 3, image_size, image_size), dtype=np.uint8)
    labels = rng.integers(0, num_classes, size=n, dtype=np.int64)
    source = f"synthetic: {n:,} random images 3x{image_size}x{image_size}, {num_classes} classes"
    return ImageData(images=images, labels=labels, split="train", source=source)


def synthetic_tokens(n: int, seq_len: int, vocab_size: int, seed: int,
                     num_labels: int) -> dict[str, np.ndarray]:
    """Random full-length sequences: the arrays encode() returns, plus int64 labels.

    Every position is a real token (no padding): the worst case, and what a 512-token run
    on IMDb mostly is. [CLS]/[SEP] are BERT's 101/102 when the vocabulary holds them.
    """
    _positive(n=n, seq_len=seq_len, vocab_size=vocab_size, num_labels=num_labels)
    np = _numpy()
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


def _pool_size(batch_size: int, bytes_per_sample: int) -> int:
    """Four batches of distinct samples, fewer when that would take more than 256 MB."""
    return max(batch_size, min(4 * batch_size, _SYNTHETIC_POOL_BYTES // max(1, bytes_per_sample)))


# =============================================================================================
# Batches
# =============================================================================================
class BatchCycler:
    """Endless batches of `batch_size` samples drawn from in-memory arrays, reshuffled every epoch.

    A benchmark loop wants every step to look the same: every batch is full (an epoch's tail
    continues into the next epoch's permutation) and a dataset smaller than a batch repeats
    within it. `transform` runs on each batch (e.g. uint8 -> normalised float32), so the
    stored data stays compact. Deterministic for a given seed.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray], batch_size: int, seed: int, *,
                 transform: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None) -> None:
        _positive(batch_size=batch_size)
        if not arrays:
            raise ValueError("BatchCycler needs at least one array")
        np = _numpy()
        self._arrays = {name: np.asarray(array) for name, array in arrays.items()}
        sizes = {name: (array.shape[0] if array.ndim else 0) for name, array in self._arrays.items()}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"arrays differ in length: {sizes}")
        self.size = next(iter(sizes.values()))
        if self.size == 0:
            raise ValueError("BatchCycler needs at least one sample")
        self.batch_size = batch_size
        self.samples_drawn = 0
        self._transform = transform
        self._rng = np.random.default_rng(seed)
        self._order = np.zeros(0, dtype=np.int64)
        self._pos = 0

    @property
    def epochs(self) -> float:
        """Passes over the dataset so far (fractional)."""
        return self.samples_drawn / self.size

    def __iter__(self) -> BatchCycler:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        np = _numpy()
        parts = []
        need = self.batch_size
        while need:
            if self._pos == len(self._order):
                self._order = self._rng.permutation(self.size)
                self._pos = 0
            chunk = self._order[self._pos: self._pos + need]
            self._pos += len(chunk)
            need -= len(chunk)
            parts.append(chunk)
        index = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.samples_drawn += self.batch_size
        batch = {name: array[index] for name, array in self._arrays.items()}
        return self._transform(batch) if self._transform is not None else batch


def resize_nearest(images: np.ndarray, size: int) -> np.ndarray:
    """N x C x H x W (square) -> N x C x size x size by nearest-neighbour sampling.

    Output pixel i takes input pixel floor(i * H / size): an integer upscale repeats every
    pixel (32 -> 224 is each pixel 7 x 7), a downscale keeps evenly spaced rows and columns.
    Speed and memory depend only on the tensor's shape, so no smoother filter is worth its
    cost here; it is also what a user feeding CIFAR to an ImageNet-sized model does.
    """
    _positive(size=size)
    np = _numpy()
    source = images.shape[-1]
    if images.shape[-2] != source:
        raise ValueError(f"images must be square, got {images.shape[-2]}x{source}")
    if size == source:
        return images
    index = (np.arange(size) * source) // size
    return images.take(index, axis=-2).take(index, axis=-1)


def normalise_images(images: np.ndarray) -> np.ndarray:
    """uint8 N x 3 x H x W -> float32 (x / 255 - mean) / std with CIFAR-10's channel statistics."""
    np = _numpy()
    std = np.asarray(CIFAR_STD, dtype=np.float32).reshape(1, 3, 1, 1)
    mean = np.asarray(CIFAR_MEAN, dtype=np.float32).reshape(1, 3, 1, 1)
    out = images.astype(np.float32)
    out *= 1.0 / (255.0 * std)
    out -= mean / std
    return out


def _image_transform(image_size: int) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    def transform(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"images": normalise_images(resize_nearest(batch["images"], image_size)),
                "labels": batch["labels"]}

    return transform


def image_batches(path_or_none: PathLike | None, batch_size: int, image_size: int, num_classes: int,
                  seed: int, *, synthetic_size: int | None = None) -> tuple[BatchCycler, int, str]:
    """(cycler, dataset size, description) for an image classification run.

    With a path: CIFAR-10's training split, resized to image_size (see resize_nearest) and
    normalised per batch. Without: `synthetic_size` random images (default: a few batches),
    normalised the same way. Batches: images float32 N x 3 x S x S, labels int64 N.
    """
    _positive(batch_size=batch_size, image_size=image_size, num_classes=num_classes)
    if path_or_none is None:
        n = synthetic_size or _pool_size(batch_size, 3 * image_size * image_size)
        data = synthetic_images(n, image_size, num_classes, seed)
        description = data.source
    else:
        if num_classes < CIFAR_CLASSES:
            raise FitbenchError(f"CIFAR-10 has {CIFAR_CLASSES} classes but the model predicts {num_classes}",
                                f"use a model with at least {CIFAR_CLASSES} classes")
        data = read_cifar10(path_or_none, "train")
        description = f"CIFAR-10 train: {len(data):,} images from {data.source}"
        if image_size != CIFAR_IMAGE_SIZE:
            description += f", nearest-neighbour resized {CIFAR_IMAGE_SIZE}->{image_size}"
    cycler = BatchCycler({"images": data.images, "labels": data.labels}, batch_size, seed,
                         transform=_image_transform(image_size))
    return cycler, len(data), description + ", normalised with CIFAR-10 mean/std"


def _widen(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    np = _numpy()
    return {name: array.astype(np.int64, copy=False) for name, array in batch.items()}


def text_batches(path_or_none: PathLike | None, batch_size: int, seq_len: int, vocab_size: int,
                 num_labels: int, seed: int, tokenizer_path: PathLike | None = None, *,
                 limit: int | None = None, synthetic_size: int | None = None) -> tuple[BatchCycler, int, str]:
    """(cycler, dataset size, description) for a text classification run.

    With a path: IMDb's training reviews, tokenised once up front (as a training script's
    dataset.map would, so the timed loop only slices arrays) by load_tokenizer(vocab_size,
    tokenizer_path), then truncated/padded to seq_len. Without: random full-length sequences
    (tokenizer_path is then unused). Batches: input_ids, attention_mask, token_type_ids and
    labels, all int64.
    """
    _positive(batch_size=batch_size, seq_len=seq_len, vocab_size=vocab_size, num_labels=num_labels)
    if path_or_none is None:
        n = synthetic_size or _pool_size(batch_size, 3 * 8 * seq_len)
        arrays = synthetic_tokens(n, seq_len, vocab_size, seed, num_labels)
        description = (f"synthetic: {n:,} random sequences of {seq_len} tokens (vocab {vocab_size:,}), "
                       f"{num_labels} labels")
        return BatchCycler(arrays, batch_size, seed), n, description
    if num_labels < len(IMDB_LABELS):
        raise FitbenchError(f"IMDb has 2 labels (negative, positive) but the model predicts {num_labels}",
                            "use a classification head with at least 2 labels")
    np = _numpy()
    data = read_imdb(path_or_none, "train", limit)
    tokenizer = load_tokenizer(vocab_size, tokenizer_path)
    n = len(data)
    # Stored compactly (ids int32, masks uint8) and widened to int64 per batch: 6 bytes a token.
    stored = {"input_ids": np.empty((n, seq_len), dtype=np.int32),
              "attention_mask": np.empty((n, seq_len), dtype=np.uint8),
              "token_type_ids": np.empty((n, seq_len), dtype=np.uint8)}
    for start in range(0, n, 1024):
        encoded = tokenizer.encode(data.texts[start: start + 1024], seq_len)
        for name, array in stored.items():
            array[start: start + 1024] = encoded[name]
    lengths = stored["attention_mask"].sum(axis=1, dtype=np.int64)
    arrays = {**stored, "labels": np.asarray(data.labels, dtype=np.int64)}
    description = (f"IMDb train: {n:,} reviews from {data.source}, {tokenizer.description}, "
                   f"mean {lengths.mean():.0f} of {seq_len} tokens, "
                   f"{100 * (lengths == seq_len).mean():.0f}% truncated")
    return BatchCycler(arrays, batch_size, seed, transform=_widen), n, description


__all__ = [
    "CIFAR_HINT", "CIFAR_MEAN", "CIFAR_STD", "IMDB_HINT", "BatchCycler", "HashingTokenizer", "ImageData",
    "TextData", "Tokenizer", "WordPieceTokenizer", "basic_tokens", "image_batches", "load_tokenizer",
    "normalise_images", "parse_cifar_batch", "read_cifar10", "read_imdb", "resize_nearest", "safe_unpickle",
    "synthetic_images", "synthetic_tokens", "text_batches",
]
