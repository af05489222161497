"""This machine as `fitbench check` sees it: its GPUs, their catalog card and the frameworks installed.

NVML and the backend table answer without importing a framework.
"""

from __future__ import annotations

import dataclasses
import platform
from dataclasses import dataclass
from typing import Any

from fitbench.backends import backend_installed, entry, installed_backends
from fitbench.catalog.detect import detect_local_gpus, spec_for_local
from fitbench.core.gpu import GpuSpec
from fitbench.errors import FitbenchError


@dataclass(frozen=True, kw_only=True)
class Machine:
    """What this machine offers: its GPU (as NVML and the catalog know it) and its frameworks."""

    gpus: tuple[Any, ...]  # LocalGpu records, nvidia-smi order
    spec: GpuSpec | None  # the catalog card of the first GPU
    backend: str | None  # the framework that measures, None when none is installed
    installed: tuple[str, ...]

    @property
    def device(self) -> str:
        return "cuda" if self.gpus else "cpu"

    def to_dict(self, *, measured: bool, tiny: bool) -> dict[str, Any]:
        return {
            "device": self.device,
            "gpus": [dataclasses.asdict(g) for g in self.gpus],
            "catalog_gpu": self.spec.id if self.spec else None,
            "catalog_gpu_name": self.spec.name if self.spec else None,
            "backend": self.backend,
            "backends_installed": list(self.installed),
            "measured": measured,
            "tiny": tiny,
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        }


def find_machine(backend: str | None) -> Machine:
    """The local GPUs and the backend that measures: `backend` when given (it must be installed),
    else the first installed one, else None (estimates only)."""
    gpus = tuple(detect_local_gpus())
    spec = spec_for_local(gpus[0]) if gpus else None
    installed = tuple(installed_backends())
    if backend is not None and not backend_installed(backend):
        raise FitbenchError(
            f"the {backend} backend is not installed",
            f"pip install 'fitbench[{entry(backend).extra}]'",
            message_zh=f"{backend} 后端没有安装",
            hint_zh=f"pip install 'fitbench[{entry(backend).extra}]'",
        )
    chosen = backend or (installed[0] if installed else None)
    return Machine(gpus=gpus, spec=spec, backend=chosen, installed=installed)
