"""Restricted unpickling: CIFAR-10's pickled batches without ever running what a file names.

Unpickling calls whatever callables a file names, so a crafted "dataset" could run any command.
safe_unpickle lets through dicts, lists, strings, numbers and plain numeric numpy arrays, built
by checked stand-ins; anything else raises Refused (or another exception for corrupt bytes).
"""

from __future__ import annotations

import io
import math
import pickle
from collections.abc import Callable
from typing import Any

from fitbench.datasets.files import numpy_module


class Refused(pickle.UnpicklingError):
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
        dtype = numpy_module().dtype(self.code)
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
        if not (
            isinstance(shape, tuple)
            and len(shape) <= 8
            and all(type(d) is int and 0 <= d < 1 << 40 for d in shape)
        ):
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
        flat = numpy_module().frombuffer(self.raw, dtype=self.dtype.to_numpy())
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
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,  # numpy 1.x and the python2 originals
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,  # numpy 2.x
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,  # protocol 5
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy", "dtype"): _DtypeStub,
    ("_codecs", "encode"): _latin1_encode,  # bytes, protocol 2 from Python 3
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
            raise Refused(f"{module}.{name}")
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
