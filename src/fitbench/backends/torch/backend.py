"""TorchBackend: the PyTorch implementation of fitbench.backends.base.Backend."""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

import torch

from fitbench.backends.base import Backend, RunOptions, Session
from fitbench.backends.torch.models import meta_param_count
from fitbench.backends.torch.session import resolve_device
from fitbench.core.host import cpu_model
from fitbench.core.names import ExecMode, exec_mode
from fitbench.workloads.workload import Workload

# Messages of the out-of-memory errors that are not torch.OutOfMemoryError: the CPU allocator,
# cuBLAS/cuDNN workspace allocation, and CUDA errors raised as plain RuntimeError.
OOM_MARKERS = (
    "out of memory",
    "can't allocate memory",
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
    "cudnn_status_not_enough_workspace",
    "memory allocation failed",
)


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def is_oom(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, is an out-of-memory error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, torch.OutOfMemoryError | MemoryError):
            return True
        if isinstance(current, RuntimeError):
            text = str(current).lower()
            if any(marker in text for marker in OOM_MARKERS):
                return True
        current = current.__cause__ or current.__context__
    return False


# exec mode -> its session factory, as "module:function" (tuned imports this module, so it is
# imported when first asked for).
SESSION_FACTORIES: dict[ExecMode, str] = {
    ExecMode.DEFAULT: "fitbench.backends.torch.session:open_default",
    ExecMode.TUNED: "fitbench.backends.torch.tuned:open_tuned",
}


def open_session(workload: Workload, options: RunOptions) -> Session:
    """A session of `workload` built by the code of its exec mode (SESSION_FACTORIES)."""
    module_path, _, function = SESSION_FACTORIES[exec_mode(options.exec_mode)].partition(":")
    factory = getattr(importlib.import_module(module_path), function)
    return factory(workload, options)


class TorchBackend(Backend):
    """Implements the Backend protocol (fitbench.backends.base) for PyTorch."""

    name = "torch"

    def version(self) -> str:
        return str(torch.__version__)

    def environment(self) -> dict[str, Any]:
        cudnn = None
        if torch.backends.cudnn.is_available():
            cudnn = torch.backends.cudnn.version()
        return {
            "torch": str(torch.__version__),
            "cuda": torch.version.cuda,
            "cudnn": cudnn,
            "transformers": _dist_version("transformers"),
            "torchvision": _dist_version("torchvision"),
            "bitsandbytes": _dist_version("bitsandbytes"),
            "torch_threads": torch.get_num_threads(),
        }

    def device_info(self, device: str) -> dict[str, Any]:
        """What torch sees; on CUDA this also creates the context (a one-element tensor), so that
        the runner can measure the context's size before any model exists."""
        dev = resolve_device(device)
        if dev.type == "cpu":
            return {
                "name": cpu_model(),
                "type": "cpu",
                "threads": torch.get_num_threads(),
                "environment": self.environment(),
            }
        torch.cuda.set_device(dev)
        torch.empty(1, device=dev)
        torch.cuda.synchronize(dev)
        props = torch.cuda.get_device_properties(dev)
        return {
            "name": props.name,
            "type": "cuda",
            "index": dev.index,
            "total_memory_bytes": int(props.total_memory),
            "capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count,
            "reserved_bytes": int(torch.cuda.memory_reserved(dev)),
            "environment": self.environment(),
        }

    def limit_memory(self, device: str, allocator_bytes: int) -> None:
        """Cap the caching allocator (torch.cuda.set_per_process_memory_fraction): allocations
        beyond it raise the same OutOfMemoryError a smaller card would."""
        dev = resolve_device(device)
        if dev.type != "cuda":
            return
        total = torch.cuda.get_device_properties(dev).total_memory
        torch.cuda.set_per_process_memory_fraction(max(0.0, min(1.0, allocator_bytes / total)), dev)

    def prepare(self, workload: Workload, options: RunOptions) -> None:
        """Import what building `workload` will need, so the timed load measures building only.

        transformers imports its model code lazily (seconds), and the first optimizer pulls in
        torch._dynamo (about two seconds more): real costs, but of starting Python, not of
        loading a model. A build on the meta device touches every module without any memory.
        """
        import importlib

        importlib.import_module("fitbench.datasets")
        if workload.is_training:
            importlib.import_module("torch._dynamo")
        meta_param_count(workload)

    def open(self, workload: Workload, options: RunOptions) -> Session:
        return open_session(workload, options)

    def is_oom(self, exc: BaseException) -> bool:
        return is_oom(exc)

    def host_probe(self, device: str) -> dict[str, float] | None:
        from fitbench.backends.torch.host_probe import probe

        return probe(resolve_device(device))

    def param_count(self, workload: Workload) -> int:
        return meta_param_count(workload)
