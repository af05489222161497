"""Which GPUs this machine has, read through NVML (package nvidia-ml-py, module ``pynvml``).

NVML talks to the driver directly, so detection needs no framework and no CUDA context: it is
cheap enough for `fitbench check` to run before deciding anything. No driver, no GPU or no
pynvml all mean the same thing to the caller, an empty list; detection never raises for them.

NVML numbers devices in PCI bus order and ignores CUDA_VISIBLE_DEVICES, so ``index`` here is
the nvidia-smi index, which can differ from the CUDA device index a framework uses.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import ModuleType

from fitbench.catalog import get_gpu, load_catalog
from fitbench.core.gpu import GpuSpec
from fitbench.errors import FitbenchError

__all__ = ["LocalGpu", "detect_local_gpus", "match_catalog", "nvml_available", "spec_for_local"]

# A catalog match whose memory differs from the card's by more than this is a sibling sharing the
# NVML name (RTX 3060 8 GB vs 12 GB, RTX 4060 Ti 8 GB vs 16 GB), not the catalog card.
_MEMORY_TOLERANCE = 0.10


@dataclass(frozen=True, kw_only=True)
class LocalGpu:
    """One GPU as NVML reports it.

    memory_total_bytes     the total nvidia-smi shows
    memory_reserved_bytes  what the driver keeps (NVML memory info v2), None on drivers without it
    cuda_capability        (major, minor), None where NVML cannot tell
    catalog_id             the matching catalog row, None for a card the catalog does not know
    """

    index: int
    name: str
    uuid: str
    memory_total_bytes: int
    memory_used_bytes: int
    memory_reserved_bytes: int | None
    driver_version: str
    cuda_capability: tuple[int, int] | None
    catalog_id: str | None


def _text(value: str | bytes) -> str:
    # pynvml returned bytes before 11.5 and str since; accept both.
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def nvml_available() -> bool:
    """True when pynvml imports and NVML initialises (a driver is loaded)."""
    try:
        import pynvml
    except ImportError:
        return False
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return False
    with contextlib.suppress(pynvml.NVMLError):
        pynvml.nvmlShutdown()
    return True


def match_catalog(name: str, memory_total_bytes: int) -> str | None:
    """The catalog id for an NVML name and memory size, or None when the catalog lacks the card."""
    try:
        spec = get_gpu(name)
    except FitbenchError:
        return None
    if abs(spec.memory_bytes - memory_total_bytes) > _MEMORY_TOLERANCE * spec.memory_bytes:
        return None
    return spec.id


def detect_local_gpus() -> list[LocalGpu]:
    """Every GPU NVML can see, in nvidia-smi order; [] without pynvml, a driver or a GPU."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return []
    try:
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError:
            driver = ""
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError:
            return []
        gpus = []
        for index in range(count):
            try:
                gpus.append(_query(pynvml, index, driver))
            except pynvml.NVMLError:
                # A device that errors mid-query (fallen off the bus, being reset) is left out
                # rather than failing detection: the others are still worth reporting.
                continue
        return gpus
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _query(pynvml: ModuleType, index: int, driver: str) -> LocalGpu:
    """One device's record; optional fields become None/"" where the driver cannot answer."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    name = _text(pynvml.nvmlDeviceGetName(handle))
    try:
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        reserved: int | None = int(memory.reserved)
    except (pynvml.NVMLError, AttributeError, TypeError):
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        reserved = None
    try:
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        capability: tuple[int, int] | None = (int(major), int(minor))
    except pynvml.NVMLError:
        capability = None
    try:
        uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
    except pynvml.NVMLError:
        uuid = ""
    total = int(memory.total)
    return LocalGpu(
        index=index,
        name=name,
        uuid=uuid,
        memory_total_bytes=total,
        memory_used_bytes=int(memory.used),
        memory_reserved_bytes=reserved,
        driver_version=driver,
        cuda_capability=capability,
        catalog_id=match_catalog(name, total),
    )


def spec_for_local(gpu: LocalGpu) -> GpuSpec | None:
    """The catalog GpuSpec for a detected GPU, or None for a card the catalog does not know."""
    if gpu.catalog_id is None:
        return None
    return load_catalog()[gpu.catalog_id]
