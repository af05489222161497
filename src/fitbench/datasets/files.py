"""Reading dataset files safely: bounded reads, tar members streamed (never extracted), clear errors.

Every reader in this package goes through here, so a truncated archive, an unreadable file or one
far too large to be what it claims all end in one FitbenchError naming the file and what was
expected. numpy is imported inside functions (numpy_module) so that importing the package stays
cheap: it is present wherever a framework backend runs.
"""

from __future__ import annotations

import lzma
import os
import tarfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fitbench.core.units import format_bytes
from fitbench.errors import FitbenchError

PathLike = str | os.PathLike[str]


def numpy_module() -> Any:
    """numpy, imported on first use."""
    import numpy

    return numpy


def check_positive(**values: int) -> None:
    for name, value in values.items():
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


ARCHIVE_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)


def short_error(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "…"


def tar_files(
    path: Path,
    wanted: Callable[[str], bool],
    *,
    what: str,
    hint: str,
    max_bytes: int,
    stop: Callable[[], bool] = lambda: False,
    what_zh: str | None = None,
    hint_zh: str | None = None,
) -> Iterator[tuple[str, bytes]]:
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
                        f"too large to be one",
                        hint,
                        message_zh=(
                            f"{what_zh or what} 文件 {path}:{member.name} 有 {format_bytes(member.size)},"
                            "太大,不可能是这种文件"
                        ),
                        hint_zh=hint_zh or hint,
                    )
                handle = archive.extractfile(member)
                data = handle.read() if handle is not None else b""
                if len(data) != member.size:
                    raise tarfile.ReadError("unexpected end of data")
                yield member.name, data
                if stop():
                    return
    except FitbenchError:
        raise
    except ARCHIVE_ERRORS as exc:
        raise FitbenchError(
            f"{what} file {path} is not a readable tar.gz archive (truncated or corrupt: {short_error(exc)})",
            hint,
            message_zh=(
                f"{what_zh or what} 文件 {path} 不是可读的 tar.gz 压缩包("
                f"文件被截断或已损坏:{short_error(exc)})"
            ),
            hint_zh=hint_zh or hint,
        ) from exc


def read_file(
    path: Path,
    *,
    what: str,
    hint: str,
    max_bytes: int,
    what_zh: str | None = None,
    hint_zh: str | None = None,
) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        reason = exc.strerror or short_error(exc)
        raise FitbenchError(
            f"{what} file {path} is unreadable ({reason})",
            hint,
            message_zh=f"{what_zh or what} 文件 {path} 无法读取({reason})",
            hint_zh=hint_zh or hint,
        ) from exc
    if len(data) > max_bytes:
        raise FitbenchError(
            f"{what} file {path} is over {format_bytes(max_bytes)}, too large to be one",
            hint,
            message_zh=(
                f"{what_zh or what} 文件 {path} 超过 {format_bytes(max_bytes)},太大,不可能是这种文件"
            ),
            hint_zh=hint_zh or hint,
        )
    return data


def existing_path(
    path: PathLike, what: str, hint: str, *, what_zh: str | None = None, hint_zh: str | None = None
) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise FitbenchError(
            f"{what} path {p} does not exist",
            hint,
            message_zh=f"{what_zh or what} 路径 {p} 不存在",
            hint_zh=hint_zh or hint,
        )
    return p
