"""Mamba-2 layers (Granite 4.0-H): what transformers' PyTorch code for them keeps, moves,
launches and calls.

transformers runs these layers through mamba-ssm's and causal-conv1d's kernels where those
packages are installed, and through its own PyTorch reference code otherwise: the chunked scan
of state-space duality (`mamba2_chunk_scan`) over a prompt or a training step, one recurrent
step (`mamba2_selective_state_update`) in a decode step. fitbench models the PyTorch code, which
is what `pip install transformers` runs and what `fitbench run` measures where the packages are
absent. It decides the answer in ways a FLOP count would not:

* The scan is written over whole tensors, with no loop: a fixed number of calls and kernels a
  layer whatever the length (FORWARD_CALLS, FORWARD_LAUNCHES), unlike Gated DeltaNet's chunk loop.
* Its arithmetic is FP32 (the code upcasts x, B and C), and it materialises per chunk the
  CHUNK x CHUNK decay and score matrices of every head (`segment_sum`'s masked cumulative sums,
  their exponential, C.B and their product): bytes per token and head that grow with the chunk
  length (256 in Granite 4.0), which dominate the layer's traffic and what a training step saves.
  At 4,096 tokens one Granite 4.0-H-Small layer keeps ~4.5 GB for backward (from 5.18 on).
* A decode step reads and writes the FP32 state (heads x head size x state size per layer and
  sequence) DECODE_STATE_BYTES bytes an element: the discretised decay, input and their sum are
  state-sized tensors, then the cache's copy.

The figures are counted on the real module (transformers 5.24, `GraniteMoeHybridMambaLayer`, no
mamba-ssm) with the modes of benchmarks/linear_attention_counts.py (kernels: every aten
operation but views and the projections' and convolution's products; bytes: each operation's
inputs and output; saved: the tensors autograd keeps, less the weights and the layer's input;
calls: Python-level torch calls less attribute reads) at several head counts, head sizes, state
sizes, group counts, chunk lengths and lengths (`--mixer mamba2`). Per token they are linear in
the head size, the state size, the chunk length and the state over the chunk length, which is
how they are written here (within 1.5 % of every count; 16-bit activations); the scan's tensors
are padded to whole chunks, the projections' and the gated norm's are not.
tests/unit/test_mamba_mixer.py counts the module again on the CPU and holds these formulas to it.

Releases before 5.18 (the reference stack's 5.17 among them; `release`, Profile.
transformers_version) write the scan's contractions as broadcast products summed afterwards
(`(C[:, :, :, None] * B[:, :, None]).sum(-1)` and four more): each materialises an FP32 tensor
of chunk x state (C.B), chunk x head size (the scores times x) or head size x state (the chunk
states and their read-out) per token and head, 16 MB a token in a Granite 4.0-H-Micro layer, and
the chunk states' recurrence one of (chunks + 1)^2 x head size x state per head and sequence.
Nothing of them is saved, but they are the layer's working set: one product alive in the
forward, about 2.3 of them in its backward, and their bytes (BROADCAST_PRODUCT_BYTES) dominate
the layer's traffic. Counted on 5.17's module the same way (its figures in the BROADCAST tables).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from fitbench.estimate.generate_ops import release as release_of
from fitbench.estimate.segments import Kernel

if TYPE_CHECKING:
    from fitbench.estimate.dtypes import ActivationDtypes
    from fitbench.workloads.arch import TransformerArch


class ScanBytes(NamedTuple):
    """One table of bytes per token (see below): per padded token and head (per channel, per
    state dimension, per chunk position, per state element over the chunk length), per real token
    and head (per channel, one scalar), per real token, group and state dimension."""

    padded: tuple[float, float, float, float]
    tokens: tuple[float, float]
    groups: float


# Bytes per token and head over the scan's padded tokens: per channel of the head (p), per state
# dimension (n), per position of a chunk (l) and per element of the state over the chunk length
# (p n / l: the chunk states); per real token and head: per channel and one scalar (the step
# size); per real token and group: per state dimension (B and C before they are repeated to the
# heads). Forward bytes moved, bytes saved for backward, backward bytes moved.
FORWARD = ScanBytes(padded=(78.0, 90.0, 52.0, 32.0), tokens=(100.0, 71.0), groups=23.0)
SAVED = ScanBytes(padded=(22.6, 20.3, 12.0, 8.2), tokens=(25.8, 18.4), groups=8.7)
BACKWARD = ScanBytes(padded=(147.0, 125.0, 95.0, 46.0), tokens=(200.0, 306.0), groups=48.0)

# transformers before 5.18: the same tables counted on 5.17's module (its broadcast products apart),
# the bytes each product element moves forward (written, then read by its sum) and backward
# (about three such passes), and the products alive at the layer's largest moment, forward and
# backward, in the largest product's FP32 bytes (counted: 0.83-0.92 and 2.1-2.5).
EINSUM_SINCE = (5, 18)
BROADCAST_FORWARD = ScanBytes(padded=(45.2, 55.4, 59.8, 23.2), tokens=(110.5, 71.1), groups=26.0)
BROADCAST_SAVED = ScanBytes(padded=(19.6, 12.6, 11.9, 7.9), tokens=(25.7, 10.9), groups=8.8)
BROADCAST_BACKWARD = ScanBytes(padded=(98.9, 105.0, 88.0, 33.7), tokens=(200.8, 243.6), groups=46.0)
BROADCAST_PRODUCT_BYTES = {"forward": 8.0, "backward": 24.0}
# The rate those products' passes reach: the multiplies run through TensorIterator's broadcast
# (non-vectorised) elementwise kernel, which computes each output element's offsets and writes
# it one at a time, so their time is per-SM work in series with the memory's (speed.series_share):
# bytes/s per SM, forward (the multiplies and their sums) and backward (the gradients' products
# and reductions). Measured on an H100 with benchmarks/mamba_scan_profile.py at Granite
# 4.0-H-Micro's and Bamba-9B's sizes (64 and 128 heads of 64, state 128, chunk 256; 512-2,048
# tokens: 19.2-20.0 and 77-82 GB/s, 0.45-0.47 and 0.77-0.78 of the stream), results in
# benchmarks/results/mamba-scan-profile-h100-2026-12-07-*.json. At 32 heads, state 64, chunk 128
# (not fitted) the same passes ran at 0.35 and 0.67 of the stream: the rate there reads 23 % and
# 15 % fast.
BROADCAST_PRODUCT_SM_RATE = {"forward": 19.4e9, "backward": 79.4e9}
BROADCAST_FORWARD_PRODUCTS = 0.9
BROADCAST_BACKWARD_PRODUCTS = 2.3
# Its calls: a training forward, a prompt, a decode step (projections as above).
BROADCAST_CALLS = {"forward": 133.0, "prefill": 138.0, "decode": 77.0}


def broadcasts(release: str | None) -> bool:
    """Whether `release` (None: the newest) computes the scan's contractions as broadcast
    products (before 5.18)."""
    known = release_of(release)
    return known is not None and known < EINSUM_SINCE


def _product_elements(arch: TransformerArch) -> float:
    """Elements the four broadcast products hold per padded token and head: C.B (chunk x state),
    the scores times x (chunk x head size), the chunk states and their read-out (head size x
    state, twice)."""
    p, n, chunk = arch.linear_value_head_dim, arch.linear_key_head_dim, arch.linear_chunk_size
    return chunk * n + chunk * p + 2 * p * n


def _largest_product(arch: TransformerArch) -> float:
    """Elements of the largest broadcast product per padded token and head."""
    p, n, chunk = arch.linear_value_head_dim, arch.linear_key_head_dim, arch.linear_chunk_size
    return max(chunk * n, chunk * p, p * n)


# A prompt's working set under no_grad: the scan's locals stay referenced until it returns (per
# padded token and head, the same four terms; peak of the live tensors, counted).
PREFILL_TRANSIENT = (35.4, 15.4, 11.8, 3.7)

# The backward's largest live bytes per padded token and head, per position of a chunk, per
# channel and per state dimension: the gradients of the chunk matrices and of the FP32 x, B and C
# (LiveBytes, linear_attention_counts.py --json: within 2.3 % at eight shapes).
BACKWARD_TRANSIENT = (11.5, 12.5, 16.3)

# Kernels of a forward and a backward with 16-bit and FP32 activations (the casts), the
# depthwise convolution included (its product is the mixer's, the two projections the block's).
FORWARD_LAUNCHES = {True: 78.0, False: 70.0}
BACKWARD_LAUNCHES = {True: 119.0, False: 107.0}

# Python-level torch calls of the mixer besides its two projections: a training forward, and a
# prompt with the cache (its state writes); a decode step's, its projections included.
FORWARD_CALLS = 118.0
PREFILL_CALLS = 123.0
DECODE_CALLS = 79.0
PROJECTION_CALLS = 2.0

# A decode step's bytes per FP32 state element (counted: 66 in 16-bit, 72 in FP32, ~17 passes
# of 4 bytes) and per channel (x, z, the gated norm: heads x head size), and its kernels.
DECODE_STATE_BYTES = 68.0
DECODE_CHANNEL_BYTES = {True: 150.0, False: 244.0}
DECODE_LAUNCHES = {True: 34.0, False: 28.0}


def padded_tokens(arch: TransformerArch, seq: int) -> int:
    """Tokens of one `seq`-token sequence once padded to whole chunks."""
    chunk = arch.linear_chunk_size
    return max(1, math.ceil(seq / chunk)) * chunk


def _per_token(arch: TransformerArch, seq: int, table: ScanBytes) -> float:
    """Bytes per real token of a `seq`-token sequence by one of the tables above."""
    p, n, chunk = arch.linear_value_head_dim, arch.linear_key_head_dim, arch.linear_chunk_size
    per_channel, per_state, per_position, per_chunk_state = table.padded
    scan = per_channel * p + per_state * n + per_position * chunk + per_chunk_state * p * n / chunk
    per_head_channel, per_head = table.tokens
    pad = padded_tokens(arch, seq) / seq
    groups = arch.linear_key_heads * n * table.groups
    return arch.linear_value_heads * (pad * scan + per_head_channel * p + per_head) + groups


def saved_bytes_per_token(arch: TransformerArch, seq: int | None = None, release: str | None = None) -> float:
    """Bytes one Mamba-2 mixer saves for backward per token of a `seq`-token sequence (None: a
    whole number of chunks); its input, the norm's output, is the block's."""
    table = BROADCAST_SAVED if broadcasts(release) else SAVED
    return _per_token(arch, seq or arch.linear_chunk_size, table)


def _products_per_token(arch: TransformerArch, seq: int, products: float) -> float:
    """FP32 bytes of `products` largest broadcast products per real token of a `seq`-token sequence."""
    pad = padded_tokens(arch, seq) / seq
    return 4.0 * products * arch.linear_value_heads * _largest_product(arch) * pad


def prefill_transient_bytes_per_token(arch: TransformerArch, seq: int, release: str | None = None) -> float:
    """The scan's working set per token of a `seq`-token prompt under no_grad (PREFILL_TRANSIENT;
    before 5.18 with the broadcast product alive beside it)."""
    p, n, chunk = arch.linear_value_head_dim, arch.linear_key_head_dim, arch.linear_chunk_size
    a, b, c, d = PREFILL_TRANSIENT
    per_head = a * p + b * n + c * chunk + d * p * n / chunk
    scan = arch.linear_value_heads * per_head * padded_tokens(arch, seq) / seq
    if broadcasts(release):
        scan += _products_per_token(arch, seq, BROADCAST_FORWARD_PRODUCTS)
    return scan


def backward_transient_bytes_per_token(
    arch: TransformerArch, seq: int | None = None, release: str | None = None
) -> float:
    """Scratch of one Mamba-2 mixer's backward per token of a `seq`-token sequence (None: a
    whole number of chunks): BACKWARD_TRANSIENT; before 5.18 the broadcast products' gradients,
    BROADCAST_BACKWARD_PRODUCTS."""
    seq = seq or arch.linear_chunk_size
    if broadcasts(release):
        return _products_per_token(arch, seq, BROADCAST_BACKWARD_PRODUCTS)
    p, n, chunk = arch.linear_value_head_dim, arch.linear_key_head_dim, arch.linear_chunk_size
    per_position, per_channel, per_state = BACKWARD_TRANSIENT
    per_head = per_position * chunk + per_channel * p + per_state * n
    return arch.linear_value_heads * per_head * padded_tokens(arch, seq) / seq


def prefill_extra_calls(arch: TransformerArch, prompt: int, release: str | None = None) -> float:
    """Calls a prompt issues in the Mamba-2 layers beyond a decode step's (the scan has no loop:
    the same at any `prompt`)."""
    if broadcasts(release):
        prefill, decode = BROADCAST_CALLS["prefill"], BROADCAST_CALLS["decode"]
    else:
        prefill, decode = PREFILL_CALLS, DECODE_CALLS
    return arch.linear_layers * (prefill + PROJECTION_CALLS - decode)


def broadcast_product_elements(arch: TransformerArch, batch: int, seq: int) -> float:
    """Elements of the broadcast products one layer's scan materialises before 5.18: the four
    products per padded token and head, and the chunk states' recurrence, one product of
    (chunks + 1)^2 x heads x head size x state a sequence."""
    p, n = arch.linear_value_head_dim, arch.linear_key_head_dim
    n_chunks = padded_tokens(arch, seq) // arch.linear_chunk_size
    recurrence = batch * (n_chunks + 1) ** 2 * arch.linear_value_heads * p * n
    return batch * padded_tokens(arch, seq) * arch.linear_value_heads * _product_elements(arch) + recurrence


def timed_kernels(
    arch: TransformerArch,
    dt: ActivationDtypes,
    batch: int,
    seq: int,
    *,
    decode: bool,
    training: bool,
    release: str | None = None,
) -> list[Kernel]:
    """mixer_kernel as the step times it: before 5.18 its broadcast products' bytes apart, in a
    kernel of their own at their measured rate (BROADCAST_PRODUCT_SM_RATE; no launches or calls
    of their own, the mixer's counts hold them)."""
    mixer = mixer_kernel(arch, dt, batch, seq, decode=decode, training=training, release=release)
    if decode or not broadcasts(release):
        return [mixer]
    elements = broadcast_product_elements(arch, batch, seq)
    forward = BROADCAST_PRODUCT_BYTES["forward"] * elements
    backward = BROADCAST_PRODUCT_BYTES["backward"] * elements
    products = Kernel(
        name="linear_attention_products",
        kind="memory",
        flops=0.0,
        bytes=forward,
        count=mixer.count,
        ops=0.0,
        launches=0.0,
        backward_bytes=backward,
        backward_launches=0.0,
        stream_share=1.0,
        sm_rate=BROADCAST_PRODUCT_SM_RATE["forward"],
        backward_sm_rate=BROADCAST_PRODUCT_SM_RATE["backward"],
    )
    rest = replace(
        mixer, bytes=mixer.bytes - forward, backward_bytes=(mixer.backward_bytes or 0.0) - backward
    )
    return [rest, products]


def mixer_kernel(
    arch: TransformerArch,
    dt: ActivationDtypes,
    batch: int,
    seq: int,
    *,
    decode: bool,
    training: bool,
    release: str | None = None,
) -> Kernel:
    """The mixer of every Mamba-2 layer of one forward (its two projections are GEMMs of the
    block: TransformerArch.linear_attention_linears): the chunked scan over `seq` tokens, or with
    `decode` the recurrent step of one token per sequence against the kept state."""
    half = dt.act < 4
    recurrent, conv = arch.linear_state_elements()
    if decode:
        channels = arch.linear_value_dim
        return Kernel(
            name="linear_attention",
            kind="memory",
            flops=0.0,
            bytes=batch
            * (DECODE_STATE_BYTES * recurrent + DECODE_CHANNEL_BYTES[half] * channels + 2.0 * conv * dt.act),
            count=arch.linear_layers,
            ops=0.0,  # a decode step's host work is generate_ops' count of its calls
            launches=DECODE_LAUNCHES[half],
        )
    tokens = batch * seq
    padded = batch * padded_tokens(arch, seq)
    p, n, chunk = arch.linear_value_head_dim, arch.linear_key_head_dim, arch.linear_chunk_size
    # FP32 products per padded token and head: C.B over the chunk, the scores times x, the chunk
    # states (B x) and their read-out (C times the states)
    flops = padded * arch.linear_value_heads * (2 * chunk * n + 2 * chunk * p + 4 * p * n)
    if broadcasts(release):
        calls = BROADCAST_CALLS["forward" if training else "prefill"]
        products = broadcast_product_elements(arch, batch, seq)
        forward = tokens * _per_token(arch, seq, BROADCAST_FORWARD)
        forward += BROADCAST_PRODUCT_BYTES["forward"] * products
        backward = tokens * _per_token(arch, seq, BROADCAST_BACKWARD)
        backward += BROADCAST_PRODUCT_BYTES["backward"] * products
    else:
        calls = FORWARD_CALLS if training else PREFILL_CALLS
        forward = tokens * _per_token(arch, seq, FORWARD)
        backward = tokens * _per_token(arch, seq, BACKWARD)
    return Kernel(
        name="linear_attention",
        kind="memory",
        flops=float(flops),
        bytes=forward,
        count=arch.linear_layers,
        ops=calls,
        tensor_ops=calls,
        compute="fp32",
        launches=FORWARD_LAUNCHES[half],
        backward_bytes=backward,
        backward_launches=BACKWARD_LAUNCHES[half],
    )
