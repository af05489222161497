"""GPU memory as the driver sees it, through NVML: what nvidia-smi shows, whatever the framework.

Allocator statistics only count what the framework's caching allocator handed out; the driver
also holds the CUDA context, cuBLAS/cuDNN workspaces and anything a library allocated on its
own. NVML sees all of it, per process and per device, so it is the figure a user compares with
the card's memory. Everything here is optional: without the NVML library (no NVIDIA driver, a
CPU machine, `nvidia-ml-py` not installed) every function returns None and nothing fails.

No framework is imported here: the parent process uses this module to decide whether a CUDA
device exists before any child imports torch or paddle.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

_state: dict[str, Any] = {}
_lock = threading.Lock()


def _nvml() -> Any | None:
    """The initialised pynvml module, or None when NVML is unavailable (checked once)."""
    with _lock:
        if "module" in _state:
            return _state["module"]
        module = None
        try:
            import pynvml

            pynvml.nvmlInit()
            module = pynvml
        except Exception:  # missing package, missing driver library, driver/library mismatch
            module = None
        _state["module"] = module
        return module


def available() -> bool:
    return _nvml() is not None


def device_count() -> int | None:
    """GPUs this process may use (CUDA_VISIBLE_DEVICES applied), or None without NVML."""
    nv = _nvml()
    if nv is None:
        return None
    try:
        total = int(nv.nvmlDeviceGetCount())
    except Exception:
        return None
    visible = _visible_devices()
    if visible is None:
        return total
    return sum(1 for i in range(len(visible)) if _handle(i) is not None)


def cuda_index(device: str) -> int | None:
    """'cuda' -> 0, 'cuda:1' -> 1, anything else (cpu) -> None."""
    if device == "cuda":
        return 0
    if device.startswith("cuda:"):
        try:
            return int(device.split(":", 1)[1])
        except ValueError:
            return None
    return None


def _visible_devices() -> list[str] | None:
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


def _handle(index: int) -> Any | None:
    """NVML handle of the framework's device `index`.

    The framework numbers the devices CUDA_VISIBLE_DEVICES leaves visible; NVML numbers all of
    them. Map through the variable (indices or GPU-UUIDs) so both talk about the same card.
    """
    nv = _nvml()
    if nv is None:
        return None
    visible = _visible_devices()
    try:
        if visible is None:
            return nv.nvmlDeviceGetHandleByIndex(index)
        if index >= len(visible):
            return None
        item = visible[index]
        if item.isdigit():
            return nv.nvmlDeviceGetHandleByIndex(int(item))
        if item.startswith(("GPU-", "MIG-")):
            return nv.nvmlDeviceGetHandleByUUID(item)
        return None
    except Exception:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def device_name(index: int) -> str | None:
    handle = _handle(index)
    if handle is None:
        return None
    try:
        return _text(_nvml().nvmlDeviceGetName(handle))
    except Exception:
        return None


def device_names() -> list[str]:
    count = device_count() or 0
    return [name for name in (device_name(i) for i in range(count)) if name]


def driver_version() -> str | None:
    nv = _nvml()
    if nv is None:
        return None
    try:
        return _text(nv.nvmlSystemGetDriverVersion())
    except Exception:
        return None


def device_total(index: int) -> int | None:
    handle = _handle(index)
    if handle is None:
        return None
    try:
        return int(_nvml().nvmlDeviceGetMemoryInfo(handle).total)
    except Exception:
        return None


def device_used(index: int) -> int | None:
    """Memory in use on the whole device, by every process (bytes)."""
    return _device_used(_handle(index))


def _device_used(handle: Any | None) -> int | None:
    if handle is None:
        return None
    try:
        return int(_nvml().nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:
        return None


def process_memory(index: int, pid: int | None = None) -> int | None:
    """Device memory held by process `pid` (default: this one), or None if NVML cannot tell.

    None also when the process is not listed, which happens inside containers where NVML
    reports host process ids: callers then fall back to the device-wide figure.
    """
    return _process_memory(_handle(index), os.getpid() if pid is None else pid)


def _process_memory(handle: Any | None, pid: int) -> int | None:
    if handle is None:
        return None
    nv = _nvml()
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            processes = getattr(nv, getter)(handle)
        except Exception:
            continue
        for proc in processes:
            if int(proc.pid) == pid:
                used = getattr(proc, "usedGpuMemory", None)
                return int(used) if isinstance(used, int) and used >= 0 else None
    return None


class MemorySampler:
    """Samples this process's and the device's NVML memory every `interval` seconds.

    A training step's peak lasts milliseconds and NVML has no peak counter, so the sampler polls
    in a daemon thread and keeps the maxima; `sample()` is also called at phase boundaries so
    that the known high points (after load, after the last step) are never missed.
    """

    def __init__(self, index: int, *, pid: int | None = None, interval: float = 0.05) -> None:
        self.index = index
        self.pid = os.getpid() if pid is None else pid
        self.interval = interval
        self.peak_process: int | None = None
        self.peak_device_used: int | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sample_lock = threading.Lock()
        self._handle: Any | None = None

    def sample(self) -> tuple[int | None, int | None]:
        # The handle is looked up once: each NVML call is a ctypes call, and the sampler thread
        # takes the GIL back after every one, which is time a host-bound timed loop waits.
        if self._handle is None:
            self._handle = _handle(self.index)
        proc = _process_memory(self._handle, self.pid)
        used = _device_used(self._handle)
        with self._sample_lock:
            self.samples += 1
            if proc is not None:
                self.peak_process = max(self.peak_process or 0, proc)
            if used is not None:
                self.peak_device_used = max(self.peak_device_used or 0, used)
        return proc, used

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> MemorySampler:
        if available() and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="fitbench-nvml", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            with contextlib.suppress(RuntimeError):
                self._thread.join(timeout=1.0)
        self.sample()

    def __enter__(self) -> MemorySampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for(predicate: Any, timeout: float, interval: float = 0.01) -> bool:
    """Poll `predicate()` until true or `timeout` seconds pass (NVML lags allocations slightly)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
