"""Facts about the host machine that results record (no framework needed)."""

from __future__ import annotations

import platform


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo, else what the platform module knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def memory_bytes(meminfo: str = "/proc/meminfo") -> tuple[int, int] | None:
    """(total, available) RAM of this machine from /proc/meminfo (Linux), else None.

    MemAvailable is the kernel's own estimate of what a new process can take without swapping,
    which is what offloaded weights need; no dependency (psutil) is required for it.
    """
    values: dict[str, int] = {}
    try:
        with open(meminfo) as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable"):
                    values[key] = int(rest.split()[0]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    if "MemTotal" not in values:
        return None
    return values["MemTotal"], values.get("MemAvailable", values["MemTotal"])
