"""The safetensors header reader: exact sizes from real files, the header bytes only, one clear
line for every damaged header (fuzzed with hypothesis)."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fitbench.errors import FitbenchError
from fitbench.workloads.safetensors_header import read_checkpoint, read_file, read_header, size_from_header


def _write(path: Path, tensors: dict[str, tuple[str, list[int], int]], *, extra: bytes = b"") -> None:
    """A real safetensors file: tensors as name -> (dtype, shape, bytes per element x 8 / bits)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset + extra)


def test_sizes_by_dtype(tmp_path: Path) -> None:
    f = tmp_path / "model.safetensors"
    _write(f, {"w": ("BF16", [4, 8], 64), "q": ("I32", [2, 8], 64), "s": ("F16", [2, 4], 16)})
    size = read_file(f)
    assert size.bytes_by_dtype == {"BF16": 64, "I32": 64, "F16": 16} and size.total_bytes == 144
    assert size.params == 32 + 16 + 8


def test_matches_the_safetensors_library(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    tensors = {
        "a": torch.zeros(3, 5, dtype=torch.bfloat16),
        "b": torch.zeros(7, dtype=torch.float32),
        "c": torch.zeros(2, 2, dtype=torch.int8),
    }
    safetensors_torch.save_file(tensors, str(tmp_path / "model.safetensors"))
    size = read_checkpoint(tmp_path)
    assert size is not None
    assert size.total_bytes == sum(t.numel() * t.element_size() for t in tensors.values())


def test_sharded_index(tmp_path: Path) -> None:
    _write(tmp_path / "a.safetensors", {"x": ("F16", [10], 20)})
    _write(tmp_path / "b.safetensors", {"y": ("F16", [5], 10)})
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})
    )
    size = read_checkpoint(tmp_path)
    assert size is not None and size.total_bytes == 30 and size.files == 2


def test_index_cannot_point_outside_the_folder(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"x": "../etc.safetensors"}})
    )
    with pytest.raises(FitbenchError, match="outside the model folder"):
        read_checkpoint(tmp_path)


class CountingStream(io.BytesIO):
    """A real in-memory file that remembers how many bytes were asked of it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        out = super().read(size)
        self.bytes_read += len(out)
        return out


def test_reads_only_the_header() -> None:
    header = json.dumps(
        {"w": {"dtype": "F32", "shape": [1000, 1000], "data_offsets": [0, 4_000_000]}}
    ).encode()
    stream = CountingStream(struct.pack("<Q", len(header)) + header + b"\1" * 4_000_000)
    read_header(stream, len(stream.getvalue()))
    assert stream.bytes_read == 8 + len(header)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"\1\2\3", "truncated"),
        (struct.pack("<Q", 1000) + b"{}", "past the end"),
        (struct.pack("<Q", 1 << 40) + b"{}", "beyond any real"),
        (struct.pack("<Q", 4) + b"[1,]", "not valid JSON"),
    ],
)
def test_damaged_headers(tmp_path: Path, content: bytes, match: str) -> None:
    f = tmp_path / "model.safetensors"
    f.write_bytes(content)
    with pytest.raises(FitbenchError, match=match):
        read_file(f)


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}, "unknown dtype"),
        ({"dtype": "F16", "shape": [-2], "data_offsets": [0, 4]}, "invalid shape"),
        ({"dtype": "F16", "shape": [2], "data_offsets": [0, 6]}, "need 4"),
        ({"dtype": "F16", "shape": [200], "data_offsets": [0, 400]}, "outside"),
        ({"dtype": "F16", "shape": [2], "data_offsets": "0-4"}, "outside"),
    ],
)
def test_bad_entries(entry: dict[str, Any], match: str) -> None:
    with pytest.raises(FitbenchError, match=match):
        size_from_header({"t": entry}, 100)


def test_overlapping_offsets() -> None:
    header = {
        "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
        "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},
    }
    with pytest.raises(FitbenchError, match="overlap"):
        size_from_header(header, 24)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=5), st.integers(0, 1 << 20))
def test_arbitrary_headers_never_crash(header: dict[str, Any], data_size: int) -> None:
    try:
        size = size_from_header(header, data_size)
    except FitbenchError as exc:
        assert "\n" not in exc.message
    else:
        assert 0 <= size.total_bytes <= data_size


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=64), st.integers(0, 2**64 - 1))
def test_arbitrary_files_never_crash(tmp_path: Path, body: bytes, length: int) -> None:
    f = tmp_path / "x.safetensors"
    f.write_bytes(struct.pack("<Q", length) + body)
    try:
        read_file(f)
    except FitbenchError as exc:
        assert "\n" not in exc.message


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(json_values)
def test_arbitrary_index_files_never_crash(tmp_path: Path, index: Any) -> None:
    """Whatever model.safetensors.index.json holds, one clear line or a size, never a traceback."""
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    _write(folder / "a.safetensors", {"x": ("F16", [4], 8)})
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    try:
        size = read_checkpoint(folder)
    except FitbenchError as exc:
        assert "\n" not in exc.message
    else:
        assert size is not None and size.total_bytes in (0, 8)
