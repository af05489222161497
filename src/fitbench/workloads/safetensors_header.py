"""Exact stored weight sizes from safetensors headers, reading the headers only.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON naming every
tensor's dtype, shape and byte range, then the data. The header alone gives the exact bytes a
checkpoint holds per dtype — pre-quantized checkpoints included (int4 packed in I32/U8, FP8, the
scales) — so fitbench reads those 8 + N bytes and never the tensors. A sharded checkpoint
lists its files in model.safetensors.index.json (`weight_map`); each shard's header is read.

Every malformed header (truncated, a length past the file or past MAX_HEADER_BYTES, unknown
dtypes, shapes that disagree with the byte range, ranges past the data or overlapping) raises a
FitbenchError naming the file.
"""

from __future__ import annotations

import itertools
import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from fitbench.errors import FitbenchError

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
# The largest real headers (DeepSeek-V3 shards, ~10k tensors) are a few MB; the format's own
# reference implementation refuses headers above 100 MB.
MAX_HEADER_BYTES = 100_000_000
MAX_SHARDS = 10_000
MAX_INDEX_BYTES = 64 * 2**20

# Bits per element of each safetensors dtype (safetensors' Dtype enum).
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
}


@dataclass(frozen=True)
class CheckpointSize:
    """What the headers say: elements and bytes, per dtype and in total."""

    bytes_by_dtype: dict[str, int] = field(default_factory=dict)
    elements_by_dtype: dict[str, int] = field(default_factory=dict)
    files: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_by_dtype.values())

    @property
    def params(self) -> int:
        """Stored elements (packed quantized tensors count their storage elements)."""
        return sum(self.elements_by_dtype.values())

    def merged(self, other: CheckpointSize) -> CheckpointSize:
        b, e = dict(self.bytes_by_dtype), dict(self.elements_by_dtype)
        for k, v in other.bytes_by_dtype.items():
            b[k] = b.get(k, 0) + v
        for k, v in other.elements_by_dtype.items():
            e[k] = e.get(k, 0) + v
        return CheckpointSize(b, e, self.files + other.files)


def read_header(stream: BinaryIO, file_size: int, *, source: str = "safetensors") -> dict[str, Any]:
    """The parsed JSON header of a safetensors stream of `file_size` bytes; reads 8 + N bytes only."""
    head = stream.read(8)
    if len(head) < 8:
        raise FitbenchError(
            f"{source}: truncated safetensors file ({len(head)} bytes, the header length alone takes 8)",
            "download the file again",
            message_zh=f"{source}:safetensors 文件被截断({len(head)} 字节,仅头部长度就要 8 字节)",
            hint_zh="请重新下载该文件",
        )
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER_BYTES:
        raise FitbenchError(
            f"{source}: safetensors header of {n} bytes is beyond any real checkpoint",
            f"a header is at most {MAX_HEADER_BYTES} bytes; the file is damaged",
            message_zh=f"{source}:{n} 字节的 safetensors 头部超出了任何真实检查点的大小",
            hint_zh=f"头部最多 {MAX_HEADER_BYTES} 字节;该文件已损坏",
        )
    if 8 + n > file_size:
        raise FitbenchError(
            f"{source}: safetensors header length {n} runs past the end of the {file_size}-byte file",
            "the file is truncated; download it again",
            message_zh=f"{source}:safetensors 头部长度 {n} 超出了 {file_size} 字节文件的末尾",
            hint_zh="文件被截断;请重新下载",
        )
    raw = stream.read(n)
    if len(raw) != n:
        raise FitbenchError(
            f"{source}: truncated safetensors header",
            "download the file again",
            message_zh=f"{source}:safetensors 头部被截断",
            hint_zh="请重新下载该文件",
        )
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise FitbenchError(
            f"{source}: the safetensors header is not valid JSON",
            "download the file again",
            message_zh=f"{source}:safetensors 头部不是有效的 JSON",
            hint_zh="请重新下载该文件",
        ) from None
    if not isinstance(header, dict):
        raise FitbenchError(
            f"{source}: the safetensors header is not a JSON object",
            message_zh=f"{source}:safetensors 头部不是 JSON 对象",
        )
    return header


def size_from_header(
    header: dict[str, Any], data_size: int, *, source: str = "safetensors"
) -> CheckpointSize:
    """Bytes and elements per dtype, after checking every tensor's range against the data."""
    bytes_by: dict[str, int] = {}
    elems_by: dict[str, int] = {}
    ranges: list[tuple[int, int, str]] = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        shown = name if len(name) <= 60 else name[:57] + "..."
        if not isinstance(info, dict):
            raise FitbenchError(
                f"{source}: tensor '{shown}' is not described by an object",
                message_zh=f"{source}:张量 '{shown}' 的描述不是对象",
            )
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
            raise FitbenchError(
                f"{source}: tensor '{shown}' has unknown dtype {str(dtype)[:20]!r}",
                "safetensors dtypes are " + ", ".join(DTYPE_BITS),
                message_zh=f"{source}:张量 '{shown}' 的数据类型 {str(dtype)[:20]!r} 未知",
                hint_zh="safetensors 的数据类型有 " + ", ".join(DTYPE_BITS),
            )
        if (
            not isinstance(shape, list)
            or len(shape) > 16
            or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**48 for d in shape)
        ):
            raise FitbenchError(
                f"{source}: tensor '{shown}' has an invalid shape",
                message_zh=f"{source}:张量 '{shown}' 的形状无效",
            )
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_size
        ):
            raise FitbenchError(
                f"{source}: tensor '{shown}' has byte range {str(offsets)[:40]} outside the "
                f"{data_size} data bytes",
                "the file is damaged; download it again",
                message_zh=(
                    f"{source}:张量 '{shown}' 的字节范围 {str(offsets)[:40]} 超出了 {data_size} 字节的数据区"
                ),
                hint_zh="文件已损坏;请重新下载",
            )
        elements = math.prod(shape)
        nbytes = (elements * DTYPE_BITS[dtype] + 7) // 8
        if offsets[1] - offsets[0] != nbytes:
            raise FitbenchError(
                f"{source}: tensor '{shown}' spans {offsets[1] - offsets[0]} bytes but its "
                f"shape and dtype need {nbytes}",
                "the file is damaged; download it again",
                message_zh=(
                    f"{source}:张量 '{shown}' 占 {offsets[1] - offsets[0]} 字节,"
                    f"但其形状和数据类型需要 {nbytes} 字节"
                ),
                hint_zh="文件已损坏;请重新下载",
            )
        bytes_by[dtype] = bytes_by.get(dtype, 0) + nbytes
        elems_by[dtype] = elems_by.get(dtype, 0) + elements
        if nbytes:
            ranges.append((offsets[0], offsets[1], shown))
    ranges.sort()
    for (_, end, a), (start, _, b) in itertools.pairwise(ranges):
        if start < end:
            raise FitbenchError(
                f"{source}: tensors '{a}' and '{b}' overlap in the data",
                "the file is damaged; download it again",
                message_zh=f"{source}:张量 '{a}' 和 '{b}' 的数据区重叠",
                hint_zh="文件已损坏;请重新下载",
            )
    return CheckpointSize(bytes_by, elems_by, 1)


def read_file(path: str | Path) -> CheckpointSize:
    """One .safetensors file's sizes, from its header only."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as stream:
            header = read_header(stream, size, source=str(p))
            header_length = stream.tell() - 8
    except OSError as exc:
        raise FitbenchError(
            f"cannot read {p}: {exc.strerror or exc}", message_zh=f"无法读取 {p}:{exc.strerror or exc}"
        ) from None
    return size_from_header(header, size - 8 - header_length, source=str(p))


def read_checkpoint(folder: str | Path) -> CheckpointSize | None:
    """A model folder's weights: the index's shards, else model.safetensors, else every
    *.safetensors file; None where the folder holds none."""
    root = Path(folder)
    index = root / INDEX_NAME
    if index.is_file():
        try:
            if index.stat().st_size > MAX_INDEX_BYTES:
                raise FitbenchError(
                    f"{index} is larger than any real index",
                    "the file is damaged",
                    message_zh=f"{index} 比任何真实的索引文件都大",
                    hint_zh="该文件已损坏",
                )
            data = json.loads(index.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            raise FitbenchError(
                f"{index} is not a readable JSON index",
                "download it again",
                message_zh=f"{index} 不是可读的 JSON 索引",
                hint_zh="请重新下载",
            ) from None
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise FitbenchError(
                f"{index} has no 'weight_map' of tensor names to files",
                message_zh=f"{index} 中没有把张量名映射到文件的 'weight_map'",
            )
        shards = sorted(set(weight_map.values()))
        if len(shards) > MAX_SHARDS:
            raise FitbenchError(
                f"{index} names {len(shards)} shards, beyond any real checkpoint",
                message_zh=f"{index} 列出了 {len(shards)} 个分片,超出了任何真实检查点",
            )
        total = CheckpointSize()
        for shard in shards:
            path = (root / shard).resolve()
            if root.resolve() not in path.parents:
                raise FitbenchError(
                    f"{index} names a shard outside the model folder: {shard[:60]!r}",
                    message_zh=f"{index} 列出了模型文件夹之外的分片:{shard[:60]!r}",
                )
            if not path.is_file():
                raise FitbenchError(
                    f"{index} names {shard[:60]!r}, which is not in {root}",
                    "download every shard, or remove the index",
                    message_zh=f"{index} 列出了 {shard[:60]!r},但它不在 {root} 中",
                    hint_zh="请下载所有分片,或删除该索引",
                )
            total = total.merged(read_file(path))
        return total
    single = root / SINGLE_NAME
    files = [single] if single.is_file() else sorted(root.glob("*.safetensors"))
    if not files:
        return None
    total = CheckpointSize()
    for f in files:
        total = total.merged(read_file(f))
    return total
