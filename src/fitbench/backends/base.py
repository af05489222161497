"""The contract every framework backend fulfils; the runner never asks which framework it holds.

A backend is stateless; `open()` builds a `Session` that owns the model, optimizer and data on
one device. The runner (fitbench.measure) drives sessions only through these methods, in a
fresh child process per measurement, so peaks are clean and an OOM cannot take the CLI down.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from fitbench.core.names import exec_mode
from fitbench.errors import FitbenchError
from fitbench.workloads.workload import Workload


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How to run a workload (not what it is: that is the Workload).

    device      'cpu', 'cuda' or 'cuda:N'
    exec_mode   'default' (the code most users write) or 'tuned' (what the card can do)
    data        path to a local dataset (CIFAR-10 pickle folder/tar.gz, aclImdb/), None = synthetic
    memory_limit_bytes  cap the process's device memory (context included) to emulate a smaller
                card on a bigger one: what fits under the cap fits on that card
    compile_step  tuned training / classification steps: torch.compile (inductor) the forward and
                loss before the CUDA graph is captured. None (the default) = the mode's default:
                compiled where inductor can (CUDA with Triton), silently uncompiled where it
                cannot (a CPU: nothing was asked). True = asked for: where it cannot, the
                uncompiled step runs and a warning says so. False = the uncompiled step. On by
                default because it is what the best code does on a GPU (an H200: ResNet-50,
                BERT-base and Llama 3.2 1B training steps 1.3-1.4x faster for 30-45 s of compiling
                once per run) and the estimator models the compiled step. On any failure the
                uncompiled step runs with a warning. Generation's decode step is compiled (or
                fused) whatever this says.
    extra       backend-specific settings (e.g. "tokenizer"; "compile_mode": torch.compile's mode
                for compile_step, default "default")
    """

    device: str = "cpu"
    exec_mode: str = "default"
    data: str | None = None
    memory_limit_bytes: int | None = None
    seed: int = 0
    compile_step: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        exec_mode(self.exec_mode)  # one of fitbench.core.names.ExecMode, or one clear line


class Session(ABC):
    """A built workload on a device, ready to step."""

    #: what the backend actually runs: e.g. {"precision_in_effect": "fp32", "warnings": [...]}
    notes: dict[str, Any]

    @abstractmethod
    def step(self) -> None:
        """One training step (forward, backward, optimizer) or one inference forward pass."""

    def prefill(self) -> None:
        """Generation: run the prompt through the model and fill the KV cache."""
        raise TypeError("this workload does not generate")

    def decode(self, new_tokens: int) -> None:
        """Generation: produce `new_tokens` tokens after `prefill` (greedy, no early stop)."""
        raise TypeError("this workload does not generate")

    @abstractmethod
    def sync(self) -> None:
        """Wait for queued device work, so that host clocks measure it."""

    @abstractmethod
    def reset_peak(self) -> None:
        """Start a new peak-memory window (allocator statistics)."""

    @abstractmethod
    def memory(self) -> dict[str, int | None]:
        """Allocator figures in bytes: peak_allocated, peak_reserved, allocated, reserved (None: unknown)."""

    def close(self) -> None:  # noqa: B027 - optional hook: the child process exits anyway
        """Release the model and free device memory."""


@runtime_checkable
class Backend(Protocol):
    """A framework: names itself, reports its version, and opens sessions.

    The contract the runner relies on, and nothing else: the torch, paddle and fake backends
    subclass this Protocol explicitly (a class that misses a method cannot be instantiated, which
    a test of the registry checks for every backend), and fitbench.backends.BACKENDS lists them.
    """

    name: str

    @abstractmethod
    def version(self) -> str:
        """The framework's version as the result records it."""

    @abstractmethod
    def device_info(self, device: str) -> dict[str, Any]:
        """What the framework sees: name, total memory, capability; raises FitbenchError if absent."""

    def prepare(self, workload: Workload, options: RunOptions) -> None:
        """Import what building `workload` will need, so that the timed load measures building
        only (optional: nothing to do by default)."""

    @abstractmethod
    def open(self, workload: Workload, options: RunOptions) -> Session:
        """Build model, optimizer and data for `workload` on `options.device`."""

    @abstractmethod
    def is_oom(self, exc: BaseException) -> bool:
        """Whether an exception is the framework's out-of-memory error."""

    def limit_memory(self, device: str, allocator_bytes: int) -> None:
        """Let the framework's allocator hold at most `allocator_bytes` on `device`."""
        raise FitbenchError(
            f"the {self.name} backend cannot cap its device memory",
            "run without --emulate, or with --backend torch",
            message_zh=f"{self.name} 后端无法限制设备显存",
            hint_zh="去掉 --emulate 运行,或使用 --backend torch",
        )

    def host_probe(self, device: str) -> dict[str, float] | None:
        """One round of the host-speed probe on `device`: {call name: host seconds per call}
        (fitbench.measure.host_speed); None where the backend has no probe (optional)."""
        return None

    @abstractmethod
    def param_count(self, workload: Workload) -> int:
        """Parameters of the model this backend builds (checked against the estimator in tests)."""
