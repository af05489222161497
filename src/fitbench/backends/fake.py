"""The fake backend: the Backend protocol in pure Python, with no framework behind it.

Why it exists: everything around a measurement (the runner and its fresh child process, the
result file, statuses, the history, the reports, the CLI) is fitbench's own code and must be
testable on a machine without torch or paddle, and its failure paths must be testable without
exhausting a machine. `--backend fake` runs that whole pipeline with a stand-in session whose
steps do a little real work on the CPU. It is never chosen by default and not offered in help
(fitbench.backends.BACKENDS lists it as unlisted); its results say `backend: fake`.

A fault after a colon makes it fail the way a framework can, inside the child process:
    fake:oom           out of memory at the first step (a MemoryError, as a CPU allocator raises)
    fake:oom-above:N   the same, only when the batch is larger than N (for max-batch searches)
    fake:error         an ordinary exception while building the model
    fake:crash         the child is killed by SIGKILL while building (no result file)
    fake:hang          building never ends (the runner's timeout stops it)
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from fitbench.backends.base import Backend, RunOptions, Session
from fitbench.core.host import cpu_model
from fitbench.errors import FitbenchError
from fitbench.workloads.workload import Workload

FAULTS = ("oom", "oom-above:N", "error", "crash", "hang")
BYTES_PER_SAMPLE = 64 * 1024  # what one sample of a step holds, so peaks grow with the batch
HANG_SLEEP_S = 3600.0


class FakeFailure(RuntimeError):
    """The fault `fake:error` raises: an ordinary bug, not an out-of-memory error."""


class FakeBackend(Backend):
    """Implements the Backend protocol (fitbench.backends.base) without a framework."""

    name = "fake"

    def __init__(self, fault: str | None = None) -> None:
        self.fault, self.oom_above = _parse_fault(fault)

    def version(self) -> str:
        from fitbench import __version__

        return f"fitbench {__version__} fake backend (pure Python)"

    def device_info(self, device: str) -> dict[str, Any]:
        if device != "cpu":
            raise FitbenchError(
                f"the fake backend runs on the CPU only, not '{device}'",
                "use --device cpu",
                message_zh=f"fake 后端只在 CPU 上运行,不支持 '{device}'",
                hint_zh="请使用 --device cpu",
            )
        return {"name": cpu_model(), "type": "cpu", "environment": {"backend": "fake"}}

    def open(self, workload: Workload, options: RunOptions) -> Session:
        if self.fault == "error":
            raise FakeFailure("the fake backend failed while building the model (fault 'error')")
        if self.fault == "crash":
            sys.stderr.write("fitbench fake backend: crashing on purpose (fault 'crash')\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fault == "hang":
            while True:
                time.sleep(HANG_SLEEP_S)
        above = self.oom_above is not None and workload.batch_size > self.oom_above
        return FakeSession(workload, out_of_memory=self.fault == "oom" or above)

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError)

    def param_count(self, workload: Workload) -> int:
        return workload.param_count()


def _parse_fault(fault: str | None) -> tuple[str | None, int | None]:
    if fault is None:
        return None, None
    if fault.startswith("oom-above:"):
        limit = fault.removeprefix("oom-above:")
        if limit.isdigit():
            return "oom-above", int(limit)
    elif fault in FAULTS:
        return fault, None
    raise FitbenchError(
        f"unknown fault '{fault}' of the fake backend",
        "use fake:" + ", fake:".join(FAULTS),
        message_zh=f"fake 后端没有故障类型 '{fault}'",
        hint_zh="可用:fake:" + ", fake:".join(FAULTS),
    )


class FakeSession(Session):
    """A stand-in session: each step holds a buffer that grows with the batch and sums it."""

    def __init__(self, workload: Workload, *, out_of_memory: bool) -> None:
        self.workload = workload
        self.out_of_memory = out_of_memory
        self.notes: dict[str, Any] = {
            "precision_in_effect": workload.precision,
            "params": workload.param_count(),
        }
        self._held = 0
        self._peak = 0
        self._prefilled = False

    def _work(self, samples: int) -> None:
        if self.out_of_memory:
            raise MemoryError(f"out of memory: the fake backend refused batch {self.workload.batch_size}")
        buffer = bytearray(samples * BYTES_PER_SAMPLE)
        self._held = len(buffer)
        self._peak = max(self._peak, self._held)
        sum(buffer[::4096])  # touch it: a step does some real work

    def step(self) -> None:
        self._work(self.workload.batch_size)

    def prefill(self) -> None:
        self._work(self.workload.batch_size)
        self._prefilled = True

    def decode(self, new_tokens: int) -> None:
        if not self._prefilled:
            raise RuntimeError("decode() before prefill()")
        for _ in range(new_tokens):
            self._work(self.workload.batch_size)

    def sync(self) -> None:
        """Nothing is queued: the work above is done when it returns."""

    def reset_peak(self) -> None:
        self._peak = self._held

    def memory(self) -> dict[str, int | None]:
        return {
            "peak_allocated": self._peak,
            "peak_reserved": self._peak,
            "allocated": self._held,
            "reserved": self._held,
        }
