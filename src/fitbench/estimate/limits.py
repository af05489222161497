"""How far a job stretches on a card: the largest batch, the longest context, the fewest GPUs.

Each is a search over the memory model (memory.py) against the verdict's ladder (verdict.py),
counting what must fit as the API counts it (breakdown.required_bytes). Why a module of its
own: these searches re-ask the memory model many times (memory.needed_bytes is cached for them)
and sit between it and the API, so the strategies' and PEFT's models never search by calling up.
"""

from __future__ import annotations

from fitbench.core.gpu import GpuSpec
from fitbench.core.names import Strategy
from fitbench.estimate.breakdown import required_bytes
from fitbench.estimate.distributed import MAX_GPUS, tp_supported
from fitbench.estimate.memory import memory_breakdown, needed_bytes
from fitbench.estimate.profile import Profile
from fitbench.estimate.verdict import OOM, max_fitting, verdict
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import LIMITS, Workload


def max_batch_size(workload: Workload, gpu: GpuSpec, profile: Profile) -> int:
    return max_fitting(lambda b: needed_bytes(workload.replace(batch_size=b), profile), gpu.usable_bytes)


def max_context_tokens(workload: Workload, gpu: GpuSpec, profile: Profile) -> int | None:
    """The longest sequence that fits at the workload's batch: prompt plus new tokens for
    generation (the prompt grows, the new tokens stay; fewer if they alone do not fit), the
    sequence length for training and classification; None for a ResNet. Found by bisection on
    the memory model, like the largest batch, and capped at the positions a token can use
    (RoBERTa's 514-row table holds 512: `usable_positions`)."""
    arch = workload.arch
    if not isinstance(arch, TransformerArch):
        return None
    cap = min(arch.usable_positions, LIMITS["seq_len"])
    usable = gpu.usable_bytes
    if workload.is_generation:
        new = workload.new_tokens or 1
        if cap < 2:
            return 0

        def need(total: int) -> int:  # total >= 2: at least one prompt and one new token
            new_tokens = min(new, total - 1)
            return needed_bytes(
                workload.replace(prompt_tokens=total - new_tokens, new_tokens=new_tokens), profile
            )

        longest = max_fitting(lambda t: need(t + 1), usable, limit=cap - 1)
        return longest + 1 if longest else 0
    return max_fitting(lambda s: needed_bytes(workload.replace(seq_len=s), profile), usable, limit=cap)


def min_gpus(workload: Workload, gpu: GpuSpec, profile: Profile, strategy: str) -> int:
    """The fewest GPUs (1..MAX_GPUS) of this card on which `workload` fits under `strategy`
    (verdict fits or tight for the per-GPU memory, counted as api.estimate counts it), 0 when
    none does.

    Counts a strategy cannot use (tensor parallelism over a number of GPUs that does not divide
    the heads) are skipped. "llm-70b in fp16 needs 2 x h100-sxm with tp" comes from here.
    """
    probe = workload.replace(strategy=strategy)  # validates the name
    arch = workload.arch
    for n in range(1, MAX_GPUS + 1):
        if strategy == Strategy.TP and n > 1:
            if not isinstance(arch, TransformerArch):
                return 0
            if not tp_supported(arch, n):
                continue
        need = required_bytes(memory_breakdown(probe.replace(gpus=n), profile, reserve=False))
        if verdict(need, gpu.usable_bytes) != OOM:
            return n
        if strategy == Strategy.DDP and n >= 2:
            return 0  # a replica per GPU: more GPUs never lower the per-GPU peak
    return 0
