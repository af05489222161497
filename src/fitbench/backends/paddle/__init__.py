"""The PaddlePaddle backend, driven through the base.py contract.

Paddle is imported only when a method needs it, so asking for this backend (its name, or
whether a framework error is an out-of-memory) costs nothing; the runner's child process is
where models are built.
"""

from __future__ import annotations

import os
from typing import Any

from fitbench.backends.base import Backend, RunOptions, Session
from fitbench.core.host import cpu_model
from fitbench.workloads.workload import Workload

# Paddle raises ResourceExhausted as MemoryError ("(ResourceExhausted) Out of memory error on
# GPU 0. Cannot allocate ..."); older paths raise EnforceNotMet/RuntimeError with the same text.
OOM_MARKERS = (
    "out of memory",
    "resourceexhausted",
    "resource exhausted",
    "fail to alloc memory",
    "cudaerrormemoryallocation",
    "cublas_status_alloc_failed",
)


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class PaddleBackend(Backend):
    """Implements the Backend protocol (fitbench.backends.base) for PaddlePaddle."""

    name = "paddle"

    def version(self) -> str:
        import paddle

        commit = getattr(paddle.version, "commit", "")[:7]
        cuda = paddle.version.cuda()
        build = "CPU build" if cuda in (None, "False", "") else f"CUDA {cuda}, cuDNN {paddle.version.cudnn()}"
        return f"{paddle.__version__} ({'commit ' + commit + ', ' if commit else ''}{build})"

    def device_info(self, device: str) -> dict[str, Any]:
        """What Paddle sees. On a GPU this also starts the device (a one-element tensor), so that
        the runner can read the CUDA context's size right after, with `reserved_bytes` being what
        Paddle's allocator holds at that moment."""
        import paddle

        from fitbench.backends.paddle.session import check_gpu, parse_device

        kind, index = parse_device(device)
        environment = {
            "paddle": paddle.__version__,
            "paddle_commit": getattr(paddle.version, "commit", ""),
            "paddle_cuda": paddle.version.cuda(),
            "paddle_cudnn": paddle.version.cudnn(),
        }
        if kind == "cpu":
            return {
                "name": cpu_model(),
                "type": "cpu",
                "cores": os.cpu_count(),
                "total_memory_bytes": _host_memory(),
                "environment": environment,
            }
        check_gpu(index)
        paddle.set_device(f"gpu:{index}")
        paddle.zeros([1], dtype="float32")
        props = paddle.device.cuda.get_device_properties(index)
        return {
            "name": props.name,
            "type": "cuda",
            "index": index,
            "total_memory_bytes": int(props.total_memory),
            "capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count,
            "reserved_bytes": int(paddle.device.cuda.memory_reserved(index)),
            "environment": environment,
        }

    def open(self, workload: Workload, options: RunOptions) -> Session:
        from fitbench.backends.paddle.session import open_session

        return open_session(workload, options)

    def is_oom(self, exc: BaseException) -> bool:
        from fitbench.errors import FitbenchError

        seen = 0
        current: BaseException | None = exc
        while current is not None and seen < 8:
            if isinstance(current, MemoryError):
                return True
            if not isinstance(current, FitbenchError):
                text = str(current).lower()
                if any(marker in text for marker in OOM_MARKERS):
                    return True
            current = current.__cause__ or current.__context__
            seen += 1
        return False

    def param_count(self, workload: Workload) -> int:
        from fitbench.backends.paddle.models import param_count

        return param_count(workload.arch)


__all__ = ["PaddleBackend"]
