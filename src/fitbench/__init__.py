"""fitbench: is this GPU enough for this deep-learning job, and how fast will it run?

The public API is small and lazy: importing fitbench imports no framework.

    >>> import fitbench
    >>> est = fitbench.estimate("bert-base-imdb", gpu="rtx-4090", precision="amp-fp16")
    >>> est.verdict, est.peak_memory_bytes
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The one place the version is written: pyproject.toml reads it from here (setuptools' dynamic
# version), so the package, its metadata and `fitbench --version` cannot disagree.
__version__ = "0.1.0"

if TYPE_CHECKING:
    from fitbench.estimate.api import Estimate


def estimate(
    workload: str,
    gpu: str = "rtx-4090",
    *,
    framework: str = "torch",
    exec_mode: str = "default",
    tiny: bool = False,
    **overrides: Any,
) -> Estimate:
    """Estimate a preset workload (with overrides such as batch_size=32) on one catalog GPU.

    The overrides mean what the CLI's flags mean, with the same implied defaults
    (`Workload.with_overrides`): `fitbench estimate llm-6b --mode train` and
    `fitbench.estimate("llm-6b", mode="train")` answer one question alike.
    """
    from fitbench.catalog import get_gpu
    from fitbench.estimate.api import estimate as _estimate
    from fitbench.workloads.presets import get_workload

    job = get_workload(workload, tiny=tiny).with_overrides(**overrides)
    return _estimate(job, get_gpu(gpu), framework=framework, exec_mode=exec_mode)


# Loading the subpackage fitbench.estimate binds it as this package's attribute `estimate`
# (Python does so for every submodule); the subpackage is callable and calls this function, so
# `fitbench.estimate(...)` works before and after.
estimate_preset = estimate


def run(
    workload: str, backend: str = "torch", device: str = "cpu", tiny: bool = False, **overrides: Any
) -> dict:
    """Measure a preset workload in a fresh child process; returns the measurement dict. The
    overrides mean what `fitbench run`'s flags mean (`Workload.with_overrides`)."""
    from fitbench.backends.base import RunOptions
    from fitbench.measure.runner import measure
    from fitbench.workloads.presets import get_workload

    job = get_workload(workload, tiny=tiny).with_overrides(**overrides)
    return measure(job, backend, RunOptions(device=device))


__all__ = ["__version__", "estimate", "run"]
