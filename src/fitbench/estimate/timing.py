"""The time model's entry: one step, forward pass or generation, on one device or one GPU of several.

One device: the full-parameter roofline (speed.py) or, under PEFT, the adapted step
(peft_speed.py). Several GPUs: that one-device time divided as the strategy divides it, plus
the collectives (communication.py). Why a module of its own: it is the one place that chooses
among the time models, so none of them calls back up to choose.
"""

from __future__ import annotations

from fitbench.core.gpu import GpuSpec
from fitbench.estimate import communication, peft_speed, speed
from fitbench.estimate.profile import Profile
from fitbench.workloads.workload import Workload


def one_device_step(workload: Workload, gpu: GpuSpec, profile: Profile) -> speed.Timing:
    """One training step (LoRA/QLoRA or every parameter) or one forward pass on one device."""
    if workload.peft:
        return peft_speed.training_step(workload, gpu, profile)
    return (speed.training_step if workload.is_training else speed.inference_step)(workload, gpu, profile)


def step_timing(workload: Workload, gpu: GpuSpec, profile: Profile) -> speed.Timing:
    """One training step or forward pass (of one GPU, communication included, when there are
    several; for a generation job there, one decode step)."""
    if workload.gpus > 1:
        if workload.is_generation:
            return communication.generation(workload, gpu, profile).decode
        single = one_device_step(workload.replace(gpus=1), gpu, profile)
        return communication.step_timing(workload, single, gpu, profile)
    return one_device_step(workload, gpu, profile)


def generation(workload: Workload, gpu: GpuSpec, profile: Profile) -> speed.GenerationTiming:
    """Prefill and one decode step: speed.generation on one GPU, communication.generation on several."""
    if workload.gpus > 1:
        return communication.generation(workload, gpu, profile)
    return speed.generation(workload, gpu, profile)
