"""The backward walk: which activations, autocast copies and gradients are alive at once.

The peak of a training step is found by walking the backward pass over the segments in forward
order: while segment i runs backward, the activations of segments <= i are still alive (with
activation checkpointing, a block keeps only its input until it is recomputed) and the gradients
of segments >= i already exist (gradients are set to None between steps, PyTorch's default
`zero_grad(set_to_none=True)`). With gradient accumulation (Workload.grad_accum > 1) zero_grad
runs once every N micro-batches, so from the second micro-batch on every gradient is alive
through the forward and the whole backward. The optimizer step is the other candidate: every
gradient plus the optimizer's scratch, with activations gone. The parts are those of whichever
moment is larger, so they describe a real instant, not a sum of maxima. "Larger" is judged by
what the breakdown reports for the moment: its parts plus the allocator's fragmentation share of
its dynamic part (everything but autocast's copies); judged on the parts alone, a moment with
more copies and fewer gradients could win and report less, so a larger batch could read a
smaller peak.

Why one walk for every model: full training and LoRA differ only in their segments and in the
dtype of each segment's gradients (FP32 adapters beside a 16-bit classifier copy), so both pass
(segment, gradient bytes per parameter) pairs here and the liveness rule exists once.
"""

from __future__ import annotations

from collections.abc import Sequence

from fitbench.estimate.segments import Segment

# A segment with the bytes per element of its trainable parameters' gradients.
GradedSegment = tuple[Segment, float]


def _backward_moment(
    segments: Sequence[GradedSegment],
    *,
    cast_bytes: float,
    checkpointing: bool,
    grad_accum: int,
    gradients: bool,
    fragmentation: float = 0.0,
) -> tuple[float, dict[str, float]]:
    """(total, parts) of the largest moment of forward+backward, totals with the fragmentation
    share of their dynamic part; with `gradients` False the gradients are left out of the
    comparison (the parts still say which exist then)."""
    prefix_act: list[float] = []
    prefix_cast: list[float] = []
    acts_before = casts_before = 0.0  # of segments < i (checkpointed blocks: their inputs only)
    for seg, _ in segments:
        prefix_act.append(acts_before)
        prefix_cast.append(casts_before)
        checkpointed = checkpointing and seg.name.startswith("layer")
        acts_before += seg.input_bytes if checkpointed else seg.saved_bytes
        # a checkpointed block's 16-bit weight copies are dropped with its other tensors (autocast's
        # cache with the forward's end) and made again by its recompute: only its own count then
        casts_before += 0.0 if checkpointed else seg.cast_params * cast_bytes
    all_grads = sum(seg.params * grad_b for seg, grad_b in segments)
    best: dict[str, float] = {}
    best_total = -1.0
    grads_after = 0.0
    for i in range(len(segments) - 1, -1, -1):
        seg, grad_b = segments[i]
        grads_after += seg.params * grad_b
        if grad_accum > 1:
            # Accumulating: the previous micro-batches' gradients exist through this backward.
            grads_after = all_grads
        acts = prefix_act[i] + seg.saved_bytes
        dynamic = acts + seg.transient_bytes + (grads_after if gradients else 0.0)
        total = dynamic * (1.0 + fragmentation) + prefix_cast[i] + seg.cast_params * cast_bytes
        if total > best_total:
            best_total = total
            best = {
                "activations": acts,
                "amp_weight_copies": prefix_cast[i] + seg.cast_params * cast_bytes,
                "gradients": grads_after,
                "temporaries": seg.transient_bytes,
            }
    return best_total, best


def activation_moment(
    segments: Sequence[GradedSegment], *, cast_bytes: float, checkpointing: bool, grad_accum: int
) -> dict[str, float]:
    """The moment of the backward walk with the most activations, autocast copies and
    temporaries, gradients left out: for strategies that hold every gradient for the whole step
    (DeepSpeed's ZeRO counts them in its model states)."""
    _, parts = _backward_moment(
        segments, cast_bytes=cast_bytes, checkpointing=checkpointing, grad_accum=grad_accum, gradients=False
    )
    return parts


def step_peak(
    segments: Sequence[GradedSegment],
    *,
    cast_bytes: float,
    checkpointing: bool,
    grad_accum: int,
    optimizer_scratch: float,
    fragmentation: float = 0.0,
) -> tuple[str, dict[str, float]]:
    """(phase, parts) of the larger of the backward walk's largest moment ('backward') and the
    optimizer step ('optimizer': every gradient and the optimizer's scratch), each judged with
    the `fragmentation` share the breakdown adds to its dynamic part."""
    best_total, best = _backward_moment(
        segments,
        cast_bytes=cast_bytes,
        checkpointing=checkpointing,
        grad_accum=grad_accum,
        gradients=True,
        fragmentation=fragmentation,
    )
    all_grads = sum(seg.params * grad_b for seg, grad_b in segments)
    if (all_grads + optimizer_scratch) * (1.0 + fragmentation) > best_total:
        return "optimizer", {
            "activations": 0.0,
            "amp_weight_copies": 0.0,
            "gradients": all_grads,
            "temporaries": optimizer_scratch,
        }
    return "backward", best
