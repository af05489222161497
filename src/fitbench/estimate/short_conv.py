"""LFM2's gated short convolutions: what transformers' PyTorch code for them keeps, moves,
launches and calls.

An LFM2 conv layer (`Lfm2ShortConv`) projects the hidden state to B, C and x (`in_proj`, three
times the hidden size), multiplies B by x, runs a depthwise causal convolution of width
`conv_L_cache` (3) over it, gates the result by C and projects it back (`out_proj`). Without the
causal-conv1d package transformers runs the convolution through `F.conv1d` with the width less
one of padding, then cuts the padded outputs away (`causal_conv1d_fn`), and a decode step
concatenates the kept inputs with the new one, copies the last ones back into the cache and
convolves the few columns (`causal_conv1d_update`). There is no recurrent state, no chunking and
no loop: a handful of elementwise passes a layer whatever the length, so these layers cost far
less than attention's at long contexts and keep only `conv_L_cache` inputs per channel.

The figures are counted on the real module (transformers 5.17 and 5.24 alike, no causal-conv1d)
with the modes of benchmarks/linear_attention_counts.py (kernels: every aten operation but views
and the projections' products, the convolution included; bytes: each operation's inputs and
output; saved: the tensors autograd keeps, less the weights and the layer's input; calls:
Python-level torch calls less attribute reads), in units of the activation's bytes a (2 in 16
bit, 4 in FP32) per token and channel (`python benchmarks/linear_attention_counts.py --mixer
short-conv`); tests/unit/test_short_conv.py counts the module again on the CPU at other sizes and
holds these formulas to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fitbench.estimate.segments import Kernel

if TYPE_CHECKING:
    from fitbench.estimate.dtypes import ActivationDtypes
    from fitbench.workloads.arch import TransformerArch

# A forward's passes per token and channel, in activation bytes: B * x and C * y (read two, write
# one: 3 each) and the convolution (read one, write one), whose output is longer by the width
# less one (FORWARD_PAD, per sequence).
FORWARD_BYTES = 8.0
FORWARD_PAD = 1.0
# Saved for backward: in_proj's output (B, C and x: 3), B * x (the convolution's input), the
# convolution's output and the gated output out_proj reads.
SAVED_BYTES = 6.0
SAVED_PAD = 1.0
# The backward: both products' gradients (four passes of 3), the cut's and the convolution's
# gradients (2 and 3) and the concatenation of dB, dC and dx (6); with more than one sequence
# the transposed gradient is copied to a contiguous one for in_proj's (6 more).
BACKWARD_BYTES = 23.0
BACKWARD_BATCH_COPY = 6.0
BACKWARD_PAD = 3.0
# Under autocast with FP32 weights the convolution's input is cast to the weight's FP32
# (`.to(weight.dtype)`) and autocast casts it back to 16 bit for the convolution: two more casts
# forward and two back (16-bit activations: 6 + 6 bytes), and the convolution weight's cast.
AUTOCAST_CAST_BYTES = 12.0
AUTOCAST_CAST_LAUNCHES = 3.0

# Kernels: forward (two products, the convolution), backward (four products, the cut's and the
# convolution's gradients, the concatenation; the copy with more than one sequence).
FORWARD_LAUNCHES = 3.0
BACKWARD_LAUNCHES = 7.0

# Python-level torch calls besides the two projections: a training forward, and a prompt with the
# cache (its state's initialisation); a decode step's, its projections included.
FORWARD_CALLS = 12.0
PREFILL_CALLS = 16.0
DECODE_CALLS = 17.0
PROJECTION_CALLS = 2.0

# A decode step per sequence and channel, in activation bytes: the two products (3 each), the
# concatenation of the kept inputs with the new one (read width + 1, write width + 1), the copy
# back into the cache (counted as its source, target and output: 3 x width) and the convolution
# over width + 1 columns (read them, write two), plus the convolution's weights once a step.
DECODE_LAUNCHES = 5.0

# A prompt's working set per token and channel under no_grad: in_proj's output, B * x, the
# convolution's output and the gated output alive together (LiveBytes, linear_attention_counts.py:
# 6.3-6.5 with out_proj's output).
PREFILL_TRANSIENT = 6.0
# The backward's largest live bytes per token and channel beyond what the forward saved: the
# gradients of B, C and x and their concatenation, with the gated output's (counted: 6-7).
BACKWARD_TRANSIENT = 7.0


def _width(arch: TransformerArch) -> int:
    return arch.linear_conv_kernel


def decode_bytes_per_channel(arch: TransformerArch, act: int, batch: int) -> float:
    """Bytes one decode step moves per sequence and channel (see DECODE_LAUNCHES)."""
    w = _width(arch)
    return act * (6 * w + 11) + act * w / batch


def saved_bytes_per_token(arch: TransformerArch, act: int, seq: int | None = None) -> float:
    """Bytes one conv layer saves for backward per token of a `seq`-token sequence; its input,
    the norm's output, is the block's."""
    pad = (_width(arch) - 1) / seq if seq else 0.0
    return arch.linear_value_dim * act * (SAVED_BYTES + SAVED_PAD * pad)


def prefill_transient_bytes_per_token(arch: TransformerArch, act: int) -> float:
    """A prompt's working set per token in one conv layer (PREFILL_TRANSIENT)."""
    return arch.linear_value_dim * act * PREFILL_TRANSIENT


def backward_transient_bytes_per_token(arch: TransformerArch, act: int) -> float:
    """Scratch of one conv layer's backward per token (BACKWARD_TRANSIENT)."""
    return arch.linear_value_dim * act * BACKWARD_TRANSIENT


def prefill_extra_calls(arch: TransformerArch) -> float:
    """Calls a prompt issues in the conv layers beyond a decode step's (no loop: the same at any
    length)."""
    return arch.linear_layers * (PREFILL_CALLS + PROJECTION_CALLS - DECODE_CALLS)


def mixer_kernel(
    arch: TransformerArch, dt: ActivationDtypes, batch: int, seq: int, *, decode: bool, training: bool
) -> Kernel:
    """Every conv layer's mixer in one forward over `seq` tokens a sequence (its projections are
    GEMMs of the block: TransformerArch.linear_attention_linears), or with `decode` one token a
    sequence against the kept inputs."""
    channels, a = arch.linear_value_dim, dt.act
    if decode:
        return Kernel(
            name="linear_attention",
            kind="memory",
            flops=2.0 * batch * channels * _width(arch),
            bytes=batch * channels * decode_bytes_per_channel(arch, a, batch),
            count=arch.linear_layers,
            ops=0.0,  # a decode step's host work is generate_ops' count of its calls
            launches=DECODE_LAUNCHES,
        )
    tokens = batch * seq
    pad = (_width(arch) - 1) / seq
    casts = dt.amp and a < 4
    forward = (
        tokens
        * channels
        * (a * (FORWARD_BYTES + FORWARD_PAD * pad) + (AUTOCAST_CAST_BYTES if casts else 0.0))
    )
    backward_per = BACKWARD_BYTES + (BACKWARD_BATCH_COPY if batch > 1 else 0.0) + BACKWARD_PAD * pad
    backward = tokens * channels * (a * backward_per + (AUTOCAST_CAST_BYTES if casts else 0.0))
    calls = FORWARD_CALLS if training else PREFILL_CALLS
    cast_launches = AUTOCAST_CAST_LAUNCHES if casts else 0.0
    return Kernel(
        name="linear_attention",
        kind="memory",
        # the depthwise convolution's products and sums, and the two gating products
        flops=float(tokens * channels * (2 * _width(arch) + 2)),
        bytes=float(forward),
        count=arch.linear_layers,
        ops=calls,
        tensor_ops=calls,
        launches=FORWARD_LAUNCHES + cast_launches,
        backward_bytes=float(backward),
        backward_launches=BACKWARD_LAUNCHES + (1.0 if batch > 1 else 0.0) + cast_launches,
    )
