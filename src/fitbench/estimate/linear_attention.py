"""Gated DeltaNet layers (Qwen3-Next, Qwen3.5): what transformers' PyTorch code for them keeps,
moves, launches and calls.

transformers runs these layers through flash-linear-attention's and causal-conv1d's kernels where
those packages are installed, and through its own PyTorch reference code otherwise: the chunked
gated delta rule (`torch_chunk_gated_delta_rule`) over a prompt or a training step, the
token-by-token one (`torch_recurrent_gated_delta_rule`) in a decode step. fitbench models the
PyTorch code, which is what `pip install transformers` runs and what `fitbench run` measures
where the packages are absent. It decides the answer in ways a FLOP count would not:

* The chunked rule loops in Python over the sequence in chunks of CHUNK tokens. Every chunk
  issues CHUNK_CALLS torch calls and CHUNK_LAUNCHES small kernels forward (four FP32 batched
  products, the state update), CHUNK_BACKWARD_LAUNCHES backward: at 2,048 tokens a layer issues
  about 600 calls, so a training step is host-bound long before its GEMMs fill the card.
* Its arithmetic is FP32 (the code upcasts queries, keys and values), on the CUDA cores; its many
  elementwise passes over FP32 copies outweigh the products.
* The backward of the loop's per-chunk slices (`x[:, :, i]`, the output's slice assignment)
  writes a zero-filled gradient of the whole tensor per chunk and adds it to the running one:
  traffic that grows with the square of the chunk count (BACKWARD_QUADRATIC_BYTES).
* A decode step reads and writes the FP32 state (value heads x key size x value size per layer
  and sequence) DECODE_STATE_BYTES bytes an element: seven elementwise passes over state-sized
  tensors, and the cache's copy.

The figures are counted on the real module (transformers 5.24, `Qwen3_5GatedDeltaNet`, bf16
weights) with a TorchDispatchMode (kernels: every aten operation but views; bytes: each
operation's inputs and output) and a TorchFunctionMode (calls, less attribute reads:
generate_ops says why), at several head counts, head sizes and lengths; per token and value head
they are linear in the key size, the value size and the chunk length, which is how they are
written here. tests/unit/test_linear_attention.py counts the module again on the CPU and holds
these formulas to it.

Mamba-2 layers (TransformerArch.linear_kind 'mamba2') fill the same fields and are modelled in
estimate/mamba_mixer.py, LFM2's short convolutions ('short_conv') in estimate/short_conv.py; the
functions here hand them over, so the rest of the estimator asks one module whatever the mixer.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fitbench.estimate import mamba_mixer, short_conv
from fitbench.estimate.segments import Kernel

if TYPE_CHECKING:
    from fitbench.estimate.dtypes import ActivationDtypes
    from fitbench.workloads.arch import TransformerArch

# transformers' chunk length (torch_chunk_gated_delta_rule's chunk_size default).
CHUNK = 64

# Bytes one layer saves for backward per token and value head: per key dimension, per value
# dimension, per position of a chunk (the chunk's decay and score matrices), and the FP32 state
# each chunk keeps for the products that read it (4 bytes x key x value size over the chunk).
SAVED_PER_KEY_DIM = 36.0
SAVED_PER_VALUE_DIM = 34.0
SAVED_PER_CHUNK_POSITION = 21.0
SAVED_STATE_BYTES = 4.0

# Bytes the forward moves per token and value head, the same way (the state's reads and writes
# in the loop: 32 bytes an element per chunk).
FORWARD_PER_KEY_DIM = 164.0
FORWARD_PER_VALUE_DIM = 178.0
FORWARD_PER_CHUNK_POSITION = 67.0
FORWARD_STATE_BYTES = 32.0

# The backward's bytes per token and value head, plus its slices' whole-tensor gradients: per
# pair of chunks, BACKWARD_QUADRATIC_BYTES x CHUNK x value heads x (2 value + 3 key sizes + CHUNK)
# (the output, the new values, the decayed keys, queries, keys and the chunk scores, each a zero
# fill and an accumulation: four FP32 passes).
BACKWARD_PER_KEY_DIM = 409.0
BACKWARD_PER_VALUE_DIM = 355.0
BACKWARD_PER_CHUNK_POSITION = 170.0
BACKWARD_QUADRATIC_BYTES = 16.0

# Kernels (aten operations that are not views; the five projections are the block's GEMMs, the
# convolution is counted here): forward, and per chunk; the backward's.
FORWARD_LAUNCHES = 73.0
CHUNK_LAUNCHES = 9.0
BACKWARD_LAUNCHES = 114.0
CHUNK_BACKWARD_LAUNCHES = 32.0

# Python-level torch calls of the mixer besides its five projections: a training forward, a
# prompt with the cache (its state writes), and per chunk. With as many key as value heads the
# two repeat_interleave calls of grouped keys are not made.
FORWARD_CALLS = 110.0
PREFILL_CALLS = 116.0
CHUNK_CALLS = 16.0
GROUPED_KEY_CALLS = 2.0

# A decode step's calls of the mixer, its five projections included (the recurrent rule's
# repeat_interleave of grouped keys as in the prompt's count): a prompt issues the chunked rule's
# instead, PREFILL_CALLS + the projections + CHUNK_CALLS a chunk, where generate_ops counts a
# decode step's calls for the prefill too.
DECODE_CALLS = 96.0
PROJECTION_CALLS = 5.0


def prefill_extra_calls(arch: TransformerArch, prompt: int, release: str | None = None) -> float:
    """Calls a `prompt`-token prefill issues in the linear-attention layers beyond a decode step's
    (generate_ops.decode_step_calls, which the prefill's host time starts from)."""
    if not arch.linear_layers:
        return 0.0
    if arch.linear_kind == "mamba2":
        return mamba_mixer.prefill_extra_calls(arch, prompt, release)
    if arch.linear_kind == "short_conv":
        return short_conv.prefill_extra_calls(arch)
    prefill = PREFILL_CALLS + PROJECTION_CALLS + CHUNK_CALLS * chunks(prompt)
    return arch.linear_layers * (prefill - DECODE_CALLS)


# A decode step's kernels (16-bit weights; FP32 weights issue no casts) and its bytes per FP32
# state element: decay (read, write), the key's product and sum (read, write, read), the update's
# outer product (write) and sum (two reads, a write), the query's product and sum (read, write,
# read), and the cache's copy (read, write) are 14 passes of 4 bytes; counted, the step's bytes
# grow by 64 an element with the key size, of which the queries' and keys' own passes are about 4.
DECODE_LAUNCHES = {True: 55.0, False: 44.0}
DECODE_STATE_BYTES = 60.0


# Of the passes over the key and value widths, the share that runs on the padded tensors: the
# upcasts, the norms and the scaling run before the padding, the gated output norm after the
# output is cut back; the betas, the products, the solves and the loop on the padded chunks. Set
# so that the CPU counts at 100 and 200 tokens (a chunk padded by 28 and 56 tokens) agree within
# 3 % (all padded: +10 %; none: -8 %).
PADDED_SHARE = 0.6


def chunks(seq: int) -> int:
    """Chunks a sequence of `seq` tokens is padded and cut into."""
    return max(1, math.ceil(seq / CHUNK))


def _state_per_chunk_position(arch: TransformerArch) -> float:
    """Key x value size of the state over the chunk length: one state per chunk, per token."""
    return arch.linear_key_head_dim * arch.linear_value_head_dim / CHUNK


def saved_bytes_per_token(
    arch: TransformerArch, seq: int | None = None, release: str | None = None, act: int = 2
) -> float:
    """Bytes one linear-attention mixer saves for backward per token of a `seq`-token sequence
    (None: a whole number of chunks); its input, the norm's output, is the block's
    (decoder_linear_inputs_saved_bytes_per_token). `act`: the activations' bytes, which a short
    convolution's follow (the scans' FP32 tables were counted with 16-bit activations)."""
    if arch.linear_kind == "mamba2":
        return mamba_mixer.saved_bytes_per_token(arch, seq, release)
    if arch.linear_kind == "short_conv":
        return short_conv.saved_bytes_per_token(arch, act, seq)
    pad = 1.0 if seq is None else chunks(seq) * CHUNK / seq
    dk, dv = arch.linear_key_head_dim, arch.linear_value_head_dim
    widths = (1.0 + PADDED_SHARE * (pad - 1.0)) * (SAVED_PER_KEY_DIM * dk + SAVED_PER_VALUE_DIM * dv)
    chunked = pad * (SAVED_PER_CHUNK_POSITION * CHUNK + SAVED_STATE_BYTES * _state_per_chunk_position(arch))
    return arch.linear_value_heads * (widths + chunked)


def prefill_transient_bytes_per_token(
    arch: TransformerArch, seq: int, release: str | None = None, act: int = 2
) -> float:
    """The chunked rule's working set per token of a `seq`-token prompt under no_grad: its FP32
    copies, decay and score matrices stay referenced until the function returns, the same
    tensors the training step saves."""
    if arch.linear_kind == "mamba2":
        return mamba_mixer.prefill_transient_bytes_per_token(arch, seq, release)
    if arch.linear_kind == "short_conv":
        return short_conv.prefill_transient_bytes_per_token(arch, act)
    return saved_bytes_per_token(arch, seq)


# The backward's running gradients of the loop's whole FP32 tensors (the output, the new values,
# the decayed keys, queries, keys and the chunk scores), alive together while it walks the chunks
# back, and the zero-filled one of the chunk at hand: about 1.5 of them, 4 bytes an element.
BACKWARD_TRANSIENT_BYTES = 6.0


def backward_transient_bytes_per_token(
    arch: TransformerArch, seq: int | None = None, release: str | None = None, act: int = 2
) -> float:
    """Scratch of one linear-attention mixer's backward per token (BACKWARD_TRANSIENT_BYTES; read
    from the code's structure, not measured)."""
    if arch.linear_kind == "mamba2":
        return mamba_mixer.backward_transient_bytes_per_token(arch, seq, release)
    if arch.linear_kind == "short_conv":
        return short_conv.backward_transient_bytes_per_token(arch, act)
    dk, dv = arch.linear_key_head_dim, arch.linear_value_head_dim
    return BACKWARD_TRANSIENT_BYTES * arch.linear_value_heads * (3 * dk + 2 * dv + CHUNK)


def _calls(arch: TransformerArch, first: float, n: int) -> float:
    grouped = GROUPED_KEY_CALLS if arch.linear_value_heads != arch.linear_key_heads else 0.0
    return first - GROUPED_KEY_CALLS + grouped + CHUNK_CALLS * n


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
    """The mixer of every linear-attention layer of one forward (its projections are GEMMs of
    the block: TransformerArch.linear_attention_linears): the chunked rule over `seq` tokens, or
    with `decode` the recurrent step of one token per sequence against the kept state."""
    if arch.linear_kind == "mamba2":
        return mamba_mixer.mixer_kernel(
            arch, dt, batch, seq, decode=decode, training=training, release=release
        )
    if arch.linear_kind == "short_conv":
        return short_conv.mixer_kernel(arch, dt, batch, seq, decode=decode, training=training)
    heads = arch.linear_value_heads
    recurrent, conv = arch.linear_state_elements()
    if decode:
        return Kernel(
            name="linear_attention",
            kind="memory",
            flops=0.0,
            bytes=batch * (DECODE_STATE_BYTES * recurrent + 2.0 * conv * dt.act),
            count=arch.linear_layers,
            ops=0.0,  # a decode step's host work is generate_ops' count of its calls
            launches=DECODE_LAUNCHES[dt.act < 4],
        )
    n = chunks(seq)
    tokens = batch * seq
    padded = batch * n * CHUNK  # the chunk loop's tensors are padded to whole chunks
    dk, dv = arch.linear_key_head_dim, arch.linear_value_head_dim

    def per_head(per_key: float, per_value: float, per_position: float, state: float) -> float:
        # the passes over key and value widths partly before the padding, partly after it
        # (PADDED_SHARE); the chunk matrices and the states at the padded tokens
        width_tokens = tokens + PADDED_SHARE * (padded - tokens)
        widths = width_tokens * (per_key * dk + per_value * dv)
        return widths + padded * (per_position * CHUNK + state * _state_per_chunk_position(arch))

    forward = heads * per_head(
        FORWARD_PER_KEY_DIM, FORWARD_PER_VALUE_DIM, FORWARD_PER_CHUNK_POSITION, FORWARD_STATE_BYTES
    )
    backward = heads * per_head(
        BACKWARD_PER_KEY_DIM, BACKWARD_PER_VALUE_DIM, BACKWARD_PER_CHUNK_POSITION, 0.0
    ) + BACKWARD_QUADRATIC_BYTES * batch * heads * n * n * CHUNK * (2 * dv + 3 * dk + CHUNK)
    # FP32 products per token and head: the chunk's two score matrices, the two triangular
    # solves, and in the loop three state products and one over the chunk's scores.
    flops = padded * heads * (4 * CHUNK * dk + CHUNK * (dk + dv) + 6 * dk * dv + 2 * CHUNK * dv)
    calls = _calls(arch, FORWARD_CALLS if training else PREFILL_CALLS, n)
    return Kernel(
        name="linear_attention",
        kind="memory",
        flops=float(flops),
        bytes=float(forward),
        count=arch.linear_layers,
        ops=calls,
        tensor_ops=calls,
        compute="fp32",
        launches=FORWARD_LAUNCHES + CHUNK_LAUNCHES * n,
        backward_bytes=float(backward),
        backward_launches=BACKWARD_LAUNCHES + CHUNK_BACKWARD_LAUNCHES * n,
    )


def mixer_kernels(
    arch: TransformerArch,
    dt: ActivationDtypes,
    batch: int,
    seq: int,
    *,
    kv_len: int | None,
    training: bool,
    release: str | None = None,
) -> list[Kernel]:
    """mixer_kernel for a forward over `seq` new tokens (`kv_len`: a decode step's context), none
    for a model without linear-attention layers (`release`: the transformers release the mode
    runs, which decides how a Mamba-2 scan contracts)."""
    if not arch.linear_layers:
        return []
    decode = kv_len is not None
    if arch.linear_kind == "mamba2":  # before 5.18 its broadcast products are timed apart
        return mamba_mixer.timed_kernels(
            arch, dt, batch, seq, decode=decode, training=training, release=release
        )
    return [mixer_kernel(arch, dt, batch, seq, decode=decode, training=training, release=release)]
