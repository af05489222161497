"""Units: every number in fitbench carries one, and conversions live here only."""

from __future__ import annotations

KiB = 1024
MiB = 1024**2
GiB = 1024**3
GB = 1000**3
TB = 1000**4
TFLOPS = 1e12


def format_bytes(n: float | None, *, unit: str = "auto") -> str:
    """Binary units (GiB) because that is what nvidia-smi and the allocators report."""
    if n is None:
        return "-"
    if unit == "GiB" or (unit == "auto" and abs(n) >= GiB):
        return f"{n / GiB:.2f} GiB"
    if unit == "MiB" or (unit == "auto" and abs(n) >= MiB):
        return f"{n / MiB:.0f} MiB"
    return f"{n / KiB:.0f} KiB"


def format_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def format_rate(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M{unit}"
    if x >= 1e4:
        return f"{x / 1e3:.1f} k{unit}"
    if x >= 100:
        return f"{x:.0f} {unit}"
    return f"{x:.1f} {unit}"
