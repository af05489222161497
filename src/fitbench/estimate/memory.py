"""The memory model's entry: the peak of one job on one device, or on one GPU of several.

One device: the full-parameter breakdown (single_device.py) or, under PEFT, the adapted
model's (peft.py). Several GPUs: that one-device breakdown, sharded as the strategy shards it
(sharding.py), except DeepSpeed's ZeRO training, which DeepSpeed's own count of the model states
replaces (sharding.deepspeed_breakdown, no one-device breakdown needed). Why a module of its
own: it is the one place that chooses among the models, so the models never call back up to
choose, and everything above (the searches of limits.py, the options, the API) asks here.
"""

from __future__ import annotations

from functools import lru_cache

from fitbench.estimate import peft, sharding
from fitbench.estimate.breakdown import MemoryBreakdown, required_bytes
from fitbench.estimate.execution import cleared_with_step_features
from fitbench.estimate.profile import Profile
from fitbench.estimate.single_device import single_device_breakdown
from fitbench.workloads.workload import Workload


def one_device_breakdown(workload: Workload, profile: Profile, *, reserve: bool = True) -> MemoryBreakdown:
    """The job on one device: frozen base and adapters under PEFT, every parameter trained otherwise."""
    if workload.peft:
        return peft.memory_breakdown(workload, profile, reserve=reserve)
    return single_device_breakdown(workload, profile, reserve=reserve)


def memory_breakdown(workload: Workload, profile: Profile, *, reserve: bool = True) -> MemoryBreakdown:
    """Peak memory of one step (training), forward (inference) or generation, as parts: of the
    one device, or of one of `workload.gpus` GPUs (the one-device breakdown, sharded). `reserve`
    False skips the allocator replays, which only add to the fragmentation part: what must fit
    (required_bytes) is the same either way, and a search asks for it many times."""
    if sharding.counts_own_model_states(workload):  # DeepSpeed's ZeRO: no one-device breakdown needed
        return sharding.deepspeed_breakdown(workload, profile)
    if workload.gpus > 1:
        one = one_device_breakdown(workload.replace(gpus=1), profile, reserve=False)
        return sharding.per_gpu_breakdown(workload, one, profile)
    return one_device_breakdown(workload, profile, reserve=reserve)


@cleared_with_step_features
@lru_cache(maxsize=4096)
def peak_bytes(workload: Workload, profile: Profile) -> int:
    """Peak memory only (cached: the max-batch search evaluates many batch sizes)."""
    return memory_breakdown(workload, profile).total


@cleared_with_step_features
@lru_cache(maxsize=4096)
def needed_bytes(workload: Workload, profile: Profile) -> int:
    """Memory that must fit for the job to run (cached like peak_bytes)."""
    return required_bytes(memory_breakdown(workload, profile, reserve=False))
