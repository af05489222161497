"""What would make a workload fit a card, and what would make it faster.

Every option is *computed*, never asserted: the workload is changed (precision, batch, activation
checkpointing, quantized weights, LoRA, several GPUs, another card) and the estimator runs again,
so each option carries its estimated peak memory, verdict and speed change. A rule such as "AMP
saves memory" is only ever shown with the number that proves it for this job on this card.

The size guide of the brief (< 100M parameters -> 12 GB class, ...) is not written here either:
``fitbench.advise.guide`` derives it from the same estimator.

Pure functions: no framework import, nothing printed; fitbench.advise.text turns the results
into sentences.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fitbench.advise.ranking import RankRow, cheapest_comfortable, rank_catalog, throughput
from fitbench.core.gpu import GpuSpec
from fitbench.core.names import ExecMode, Strategy
from fitbench.errors import FitbenchError
from fitbench.estimate.api import Estimate, estimate
from fitbench.estimate.limits import min_gpus
from fitbench.estimate.memory import needed_bytes
from fitbench.estimate.peft_options import peft_options
from fitbench.estimate.profile import get_profile
from fitbench.estimate.verdict import FITS, OOM, TIGHT_MARGIN, VERDICT_ORDER, max_fitting
from fitbench.workloads.workload import Workload

__all__ = [
    "BottleneckAdvice",
    "Fix",
    "bottleneck_advice",
    "largest_batch",
    "offload_option",
    "what_would_make_it_fit",
]

FULL_PRECISIONS = ("fp32", "tf32")
QUANTIZED = ("int8", "int4")
# Multi-GPU strategies tried for "more GPUs": fully sharded training, tensor-parallel inference.
TRAIN_STRATEGY = "fsdp-full-shard"
INFER_STRATEGY = "tp"
# A suggestion must be estimated at least this much faster to be worth a line.
MIN_SPEEDUP = 1.05


def _half(gpu: GpuSpec) -> str:
    """The 16-bit type a card runs fast: bf16 where it has BF16 tensor cores, else fp16."""
    return "bf16" if gpu.bf16 else "fp16"


def throughput_ratio(new: Estimate, base: Estimate) -> float | None:
    """new throughput / base throughput (> 1: faster)."""
    a, _ = throughput(new)
    b, _ = throughput(base)
    if a is None or not b:
        return None
    return a / b


@dataclass(frozen=True, kw_only=True)
class Fix:
    """One option and its estimated effect.

    kind       amp | half | accumulate | checkpointing | int8 | int4 | lora | qlora | gpus |
               bigger-card | combined
    changes    the workload fields changed, as given to Workload.replace
    gpu        the card the option is estimated on (another card for 'bigger-card')
    estimate   the changed workload on `gpu`
    baseline   the unchanged workload on the card asked about
    accumulation_steps  micro-batches per optimizer step ('accumulate'): the effective batch
                        (micro-batch x steps) is at least the original batch
    """

    kind: str
    changes: dict[str, Any]
    gpu: GpuSpec
    estimate: Estimate
    baseline: Estimate
    accumulation_steps: int | None = None
    parts: tuple[str, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> str:
        return self.estimate.verdict

    @property
    def peak_bytes(self) -> int:
        return self.estimate.peak_memory_bytes

    @property
    def makes_it_fit(self) -> bool:
        """The option runs (fits or tight) where the baseline does not, or fits where it was tight."""
        return VERDICT_ORDER[self.verdict] < VERDICT_ORDER[self.baseline.verdict]

    @property
    def speed_ratio(self) -> float | None:
        """Estimated throughput after / before (> 1 is faster). With gradient accumulation the
        throughput is that of the micro-batch steps, which is what the job then runs at. With
        data-parallel strategies every GPU processes its own batch, so the job's throughput is
        the per-GPU estimate times the GPUs (tensor parallelism shares one batch)."""
        ratio = throughput_ratio(self.estimate, self.baseline)
        w = self.estimate.workload
        if ratio is not None and w.gpus > 1 and w.strategy != Strategy.TP:
            ratio *= w.gpus
        return ratio

    def to_dict(self) -> dict[str, Any]:
        speed, unit = throughput(self.estimate)
        return {
            "kind": self.kind,
            "changes": dict(self.changes),
            "gpu": self.gpu.id,
            "verdict": self.verdict,
            "peak_memory_bytes": self.peak_bytes,
            "usable_memory_bytes": self.gpu.usable_bytes,
            "baseline_verdict": self.baseline.verdict,
            "baseline_peak_memory_bytes": self.baseline.peak_memory_bytes,
            "speed": speed,
            "speed_unit": unit,
            "speed_ratio": self.speed_ratio,
            "accumulation_steps": self.accumulation_steps,
            "makes_it_fit": self.makes_it_fit,
            "parts": list(self.parts),
        }


def largest_batch(
    workload: Workload,
    gpu: GpuSpec,
    *,
    framework: str = "torch",
    comfortable: bool = True,
    limit: int | None = None,
) -> int:
    """The largest batch (at most `limit`) whose estimated verdict is 'fits' (comfortable) or at
    least not 'oom'; 0 when not even one sample fits."""
    profile = get_profile(framework)
    budget = int(gpu.usable_bytes * (1.0 - TIGHT_MARGIN)) if comfortable else gpu.usable_bytes
    kwargs = {"limit": limit} if limit is not None else {}
    return max_fitting(lambda b: needed_bytes(workload.replace(batch_size=b), profile), budget, **kwargs)


class _Builder:
    """Estimates changed workloads on one card and collects the options."""

    def __init__(self, workload: Workload, gpu: GpuSpec, framework: str, exec_mode: str) -> None:
        self.workload = workload
        self.gpu = gpu
        self.framework = framework
        self.exec_mode = exec_mode
        self.baseline = estimate(workload, gpu, framework=framework, exec_mode=exec_mode)
        self.fixes: list[Fix] = []

    def estimate(self, changed: Workload, gpu: GpuSpec | None = None) -> Estimate | None:
        try:
            return estimate(changed, gpu or self.gpu, framework=self.framework, exec_mode=self.exec_mode)
        except FitbenchError:
            return None

    def add(
        self,
        kind: str,
        changes: dict[str, Any],
        *,
        accumulation_steps: int | None = None,
        parts: tuple[str, ...] = (),
    ) -> Fix | None:
        try:
            changed = self.workload.replace(**changes)
        except FitbenchError:
            return None  # not a valid job (e.g. a precision the mode does not allow)
        est = self.estimate(changed)
        if est is None:
            return None
        fix = Fix(
            kind=kind,
            changes=changes,
            gpu=self.gpu,
            estimate=est,
            baseline=self.baseline,
            accumulation_steps=accumulation_steps,
            parts=parts,
        )
        self.fixes.append(fix)
        return fix


def _accumulation(b: _Builder) -> tuple[dict[str, Any], int] | None:
    """The largest micro-batch that fits comfortably (else at all) and the accumulation steps
    that keep the effective batch: steps = ceil(batch / micro-batch)."""
    w = b.workload
    if w.batch_size <= 1:
        return None
    micro = largest_batch(w, b.gpu, framework=b.framework, comfortable=True, limit=w.batch_size)
    if micro == 0:
        micro = largest_batch(w, b.gpu, framework=b.framework, comfortable=False, limit=w.batch_size)
    if not 0 < micro < w.batch_size:
        return None
    steps = math.ceil(w.batch_size / micro)
    # Spread the batch evenly over the steps: the smallest effective batch >= the original.
    return {"batch_size": math.ceil(w.batch_size / steps)}, steps


def _peft_fixes(b: _Builder) -> None:
    """LoRA and QLoRA: the base weights frozen in 16 bit (4 bit for QLoRA), small adapters trained.

    Estimated by the estimator's PEFT model (fitbench.estimate.peft); `peft_options` lists
    the methods it models, and each is re-estimated here so that its speed is known too.
    """
    w = b.workload
    if not w.is_training or w.is_resnet or w.peft is not None:
        return
    try:
        listed = list(peft_options(w, b.gpu, get_profile(b.framework, b.exec_mode)) or [])
    except (FitbenchError, AttributeError, TypeError, ValueError):
        return
    for method in ("lora", "qlora"):
        variants = [o for o in listed if isinstance(o, dict) and o.get("method") == method]
        if not variants:
            continue
        # The variant without activation checkpointing, unless only the checkpointed one runs.
        plain = [o for o in variants if not o.get("checkpointing")]
        chosen = plain[0] if plain else variants[0]
        if chosen.get("verdict") == OOM:
            chosen = next((o for o in variants if o.get("verdict") != OOM), chosen)
        changes: dict[str, Any] = {"peft": method, "precision": chosen.get("precision") or _half(b.gpu)}
        if chosen.get("checkpointing"):
            changes["checkpointing"] = True
        b.add(method, changes)


def _gpu_fix(b: _Builder) -> None:
    """The fewest GPUs of this card that run the job (fitbench.estimate.limits.min_gpus)."""
    w = b.workload
    if w.gpus > 1 or b.baseline.verdict == FITS:
        return
    strategy = TRAIN_STRATEGY if w.is_training else INFER_STRATEGY
    try:
        n = min_gpus(w, b.gpu, get_profile(b.framework, b.exec_mode), strategy)
    except (FitbenchError, TypeError, ValueError):
        return
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        b.add("gpus", {"gpus": n, "strategy": strategy})


def _bigger_card(b: _Builder, rows: Sequence[RankRow] | None) -> None:
    """The cheapest priced card that runs the job comfortably (else the smallest that does)."""
    choice = cheapest_comfortable(b.workload, framework=b.framework, exec_mode=b.exec_mode, rows=rows)
    row = choice.cheapest or choice.smallest
    if row is None or row.gpu.id == b.gpu.id or row.gpu.usable_bytes <= b.gpu.usable_bytes:
        return
    b.fixes.append(
        Fix(kind="bigger-card", changes={}, gpu=row.gpu, estimate=row.estimate, baseline=b.baseline)
    )


def what_would_make_it_fit(
    workload: Workload,
    gpu: GpuSpec,
    *,
    framework: str = "torch",
    exec_mode: str = "default",
    rows: Sequence[RankRow] | None = None,
) -> list[Fix]:
    """The options that change the job's memory on `gpu`, each with its estimated effect.

    Training: mixed precision (amp-bf16, or amp-fp16 on cards without BF16), a smaller batch with
    gradient accumulation (same effective batch), activation checkpointing, LoRA/QLoRA for
    transformers, and — when no single option reaches 'fits' — all of them that apply together.
    Inference: 16-bit weights, int8 and int4 weights. Both: more GPUs of this card, and a bigger
    card. `rows` (a rank_catalog result) saves re-ranking the catalog for the bigger card.
    """
    b = _Builder(workload, gpu, framework, exec_mode)
    w = workload
    if w.is_training:
        if w.precision in FULL_PRECISIONS:
            b.add("amp", {"precision": "amp-" + _half(gpu)})
        acc = _accumulation(b)
        if acc is not None:
            b.add("accumulate", acc[0], accumulation_steps=acc[1])
        if not w.checkpointing:
            b.add("checkpointing", {"checkpointing": True})
        if not any(f.verdict == FITS for f in b.fixes):
            _combined(b)
        _peft_fixes(b)
    else:
        if w.precision in FULL_PRECISIONS:
            b.add("half", {"precision": _half(gpu)})
        if w.precision not in QUANTIZED:
            b.add("int8", {"precision": "int8"})
            b.add("int4", {"precision": "int4"})
    _gpu_fix(b)
    _bigger_card(b, rows)
    return b.fixes


def _combined(b: _Builder) -> None:
    """Options together: activation checkpointing (with AMP, or without it, since autocast's weight
    copies add memory), then the largest micro-batch that fits with gradient accumulation. Of the
    combinations that change more than one thing, the one with the best verdict, then the fastest,
    is offered."""
    w = b.workload
    bases: list[tuple[dict[str, Any], tuple[str, ...]]] = []
    if not w.checkpointing:
        bases.append(({"checkpointing": True}, ("checkpointing",)))
    if w.precision in FULL_PRECISIONS:
        amp = {"precision": "amp-" + _half(b.gpu)}
        bases.append(
            ({**amp, "checkpointing": True}, ("amp", "checkpointing"))
            if not w.checkpointing
            else (amp, ("amp",))
        )
    best: tuple[tuple[int, float], dict[str, Any], int | None, tuple[str, ...]] | None = None
    for base_changes, base_parts in bases:
        changes, parts, steps = dict(base_changes), list(base_parts), None
        try:
            changed = w.replace(**changes)
        except FitbenchError:
            continue
        alone = b.estimate(changed)
        if w.batch_size > 1 and (alone is None or alone.verdict != FITS):
            micro = largest_batch(changed, b.gpu, framework=b.framework, limit=w.batch_size) or largest_batch(
                changed, b.gpu, framework=b.framework, comfortable=False, limit=w.batch_size
            )
            if 0 < micro < w.batch_size:
                steps = math.ceil(w.batch_size / micro)
                changes["batch_size"] = math.ceil(w.batch_size / steps)
                parts.append("accumulate")
        if len(parts) < 2:
            continue  # a single option is already listed on its own
        est = b.estimate(w.replace(**changes))
        if est is None:
            continue
        rank = (VERDICT_ORDER[est.verdict], -(throughput(est)[0] or 0.0))
        if best is None or rank < best[0]:
            best = (rank, changes, steps, tuple(parts))
    if best is not None:
        b.add("combined", best[1], accumulation_steps=best[2], parts=best[3])


# ----------------------------------------------------------------------------- bottleneck


@dataclass(frozen=True, kw_only=True)
class BottleneckAdvice:
    """One concrete suggestion for the estimate's bottleneck, with its estimated effect.

    suggestion   tuned (CUDA graphs / compiled step, `--exec tuned`) | batch (more samples per
                 step) | amp (tensor cores, half the bytes) | quantize (int4 weights) | card (a
                 faster card or one with more bandwidth) | none (nothing in the catalog is faster)
    alternative  the estimate with the suggestion applied (on `alternative.gpu` for 'card')
    """

    bottleneck: str
    suggestion: str
    baseline: Estimate
    alternative: Estimate | None
    changes: dict[str, Any] = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        return throughput_ratio(self.alternative, self.baseline) if self.alternative is not None else None

    def to_dict(self) -> dict[str, Any]:
        speed, unit = throughput(self.alternative) if self.alternative is not None else (None, "")
        return {
            "bottleneck": self.bottleneck,
            "suggestion": self.suggestion,
            "gpu": self.baseline.gpu.id,
            "alternative_gpu": self.alternative.gpu.id if self.alternative is not None else None,
            "changes": dict(self.changes),
            "speed": speed,
            "speed_unit": unit,
            "speedup": self.speedup,
        }


def _try(
    workload: Workload, changes: dict[str, Any], gpu: GpuSpec, framework: str, exec_mode: str
) -> Estimate | None:
    try:
        return estimate(workload.replace(**changes), gpu, framework=framework, exec_mode=exec_mode)
    except FitbenchError:
        return None


def _faster_card(
    base: Estimate, rows: Sequence[RankRow], better: Callable[[GpuSpec], bool]
) -> Estimate | None:
    """The fastest card that fits comfortably and is better than the base card on one axis."""
    base_speed, _ = throughput(base)
    for row in rows:  # ranked: fits first, fastest first
        if row.verdict != FITS or not better(row.gpu):
            continue
        if row.speed and base_speed and row.speed >= base_speed * MIN_SPEEDUP:
            return row.estimate
    return None


def bottleneck_advice(est: Estimate, *, rows: Sequence[RankRow] | None = None) -> BottleneckAdvice:
    """The one suggestion that attacks the estimate's bottleneck, estimated.

    overhead  the GPU waits for the host: replay the step as CUDA graphs (`--exec tuned`), or
              give each launch more work (a larger batch)
    memory    bytes moved limit the speed: AMP for FP32 training, int4 weights for generation,
              otherwise a card with more bandwidth
    compute   arithmetic limits the speed: AMP to use the tensor cores, otherwise a faster card
    """
    w, gpu, fw, mode = est.workload, est.gpu, est.framework, est.exec_mode
    kind = est.bottleneck
    for suggestion, changes, run_mode, reported in _targeted_changes(est):
        alt = _try(w, changes, gpu, fw, run_mode)
        ratio = throughput_ratio(alt, est) if alt is not None else None
        if alt is not None and ratio is not None and ratio >= MIN_SPEEDUP and alt.verdict != OOM:
            return BottleneckAdvice(
                bottleneck=kind, suggestion=suggestion, baseline=est, alternative=alt, changes=reported
            )
    ranked = rows if rows is not None else rank_catalog(w, framework=fw, exec_mode=mode)
    better = _better_card_test(est)
    alt = _faster_card(est, ranked, better) if better is not None else None
    if alt is not None:
        return BottleneckAdvice(bottleneck=kind, suggestion="card", baseline=est, alternative=alt)
    # Nothing targeted helps: the fastest card that fits is the last resort.
    alt = _faster_card(est, ranked, lambda g: g.id != gpu.id)
    if alt is not None:
        return BottleneckAdvice(bottleneck=kind, suggestion="card", baseline=est, alternative=alt)
    return BottleneckAdvice(bottleneck=kind, suggestion="none", baseline=est, alternative=None)


def _targeted_changes(est: Estimate) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """The changes that attack `est`'s bottleneck, in the order they are tried: (suggestion,
    changes to the workload, exec mode to estimate, changes as reported)."""
    w, gpu, mode = est.workload, est.gpu, est.exec_mode
    out: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = []
    if est.bottleneck == "overhead":
        # the tuned mode runs LoRA but not QLoRA (backends/torch/tuned.py): not a change to offer
        if mode == ExecMode.DEFAULT and w.peft != "qlora":
            out.append(("tuned", {}, "tuned", {"exec_mode": "tuned"}))
        bigger = min(est.max_batch_size, w.batch_size * 4)
        if bigger > w.batch_size:
            out.append(("batch", {"batch_size": bigger}, mode, {"batch_size": bigger}))
    elif est.bottleneck == "memory":
        if w.is_training and w.precision in FULL_PRECISIONS:
            amp = {"precision": "amp-" + _half(gpu)}
            out.append(("amp", amp, mode, amp))
        if w.is_generation and w.precision not in QUANTIZED:
            out.append(("quantize", {"precision": "int4"}, mode, {"precision": "int4"}))
    elif est.bottleneck == "compute" and w.precision in FULL_PRECISIONS:
        amp = {"precision": ("amp-" if w.is_training else "") + _half(gpu)}
        out.append(("amp", amp, mode, amp))
    return out


def _better_card_test(est: Estimate) -> Callable[[GpuSpec], bool] | None:
    """Which cards lift `est`'s bottleneck: more bandwidth for memory, more FLOP/s at its
    compute precision for compute (None: no card is better by its bottleneck alone)."""
    gpu = est.gpu
    if est.bottleneck == "memory":
        return lambda g: g.bandwidth_bytes_s > gpu.bandwidth_bytes_s
    if est.bottleneck == "compute":
        compute = est.workload.precision_info.compute
        return lambda g: g.peak(compute) > gpu.peak(compute)
    return None


def offload_option(est: Estimate, *, ram: Any = True) -> Any:
    """CPU offload for a generation job that is oom on `est`'s card: an OffloadEstimate (whose
    verdict is 'offload' when it runs that way, with layers on the GPU, CPU RAM and speed), or
    None where offload does not apply (the job fits, trains, or spans several GPUs).
    `ram`: this machine's RAM is read unless (total, available) or None is given."""
    from fitbench.estimate.offload import offload_estimate

    return offload_estimate(est, ram=ram)
