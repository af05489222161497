"""What an execution mode really runs: the workload as `fitbench run --exec MODE` executes it.

The tuned mode changes precision where that is how fast code is written (fitbench.backends.
torch.tuned): FP32 and AMP requests become bf16 autocast on cards with native BF16 (amp-fp16
elsewhere), and AMP generation becomes pure 16-bit weights (its static decoder has no autocast).
An estimate compared with a tuned measurement must describe that workload, not the requested
one, or the comparison measures the precision change instead of the estimator.
"""

from __future__ import annotations

from fitbench.core.gpu import GpuSpec
from fitbench.workloads.workload import Workload

AUTOCAST_REQUESTS = ("fp32", "tf32", "amp-fp16", "amp-bf16")


def precision_as_run(
    workload: Workload, exec_mode: str, gpu: GpuSpec | None, framework: str = "torch"
) -> str:
    """The precision `exec_mode` runs `workload` at on `gpu` (None: a card with BF16). Only
    PyTorch's tuned mode changes it (Paddle's runs the requested precision)."""
    if exec_mode != "tuned" or framework != "torch":
        return workload.precision
    info = workload.precision_info
    if workload.is_generation:
        return info.compute if info.amp else workload.precision
    if workload.precision in AUTOCAST_REQUESTS:
        return "amp-bf16" if gpu is None or gpu.bf16 else "amp-fp16"
    return workload.precision


def workload_as_run(
    workload: Workload, exec_mode: str, gpu: GpuSpec | None, framework: str = "torch"
) -> Workload:
    """`workload` with the precision `exec_mode` really uses on `gpu`."""
    precision = precision_as_run(workload, exec_mode, gpu, framework)
    return workload if precision == workload.precision else workload.replace(precision=precision)
