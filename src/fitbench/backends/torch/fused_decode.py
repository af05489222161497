"""The decode step of a StaticKVGenerator as fitbench's fused Triton kernels, batch 1 to 32.

Same inputs, outputs and in-place state as StaticKVGenerator._step (each sequence's token at
`pos` in, the next token per sequence into `token` and `tokens`, `pos` advanced, K/V written
into each sequence's cache), but each layer is five kernels instead of a dozen-odd (see
decode_kernels for what each fuses). Nothing reads a value back to the host, so the step is
captured in a CUDA graph like the other one.

Every batch reads each weight byte once per step: at batch 1 the GEMV kernels, at 2..32 the
batched tiles (tl.dot of all sequences' activations against one read of the weight tile), so a
step of B sequences costs about a batch-1 step plus B sequences' KV reads. Above 32 the compiled
step of cuBLAS GEMMs stays (the batched tiles' accumulator and the activation re-reads grow with
B, and the tile defaults below were chosen up to 32).

Measured on an H200, the first batched tiles (x @ W^T: the activations as tl.dot's first
operand) were correct but slow where RMSNorm was folded in (qkv, gate_up, the head: 1.2-2.4 TB/s
against cuBLAS's 3.6-4.1, decode-kernels-batched-h200-2026-12-04.json); benchmarks/decode_tiles.py
traced that to the layout, and the tiles now accumulate W @ x^T (3.5-4.1 TB/s, at or ahead of
cuBLAS on every projection but gate/up, 0.2-0.35 TB/s behind with its norm folded in;
decode-tiles-h200-2026-12-05.json). A 6.7B step then took 3.89 / 4.07 /
5.04 ms at b2 / b8 / b32 against the compiled step's 4.41 / 4.61 / 5.46, so the tuned mode runs
them at every batch they take (static_decoder.FUSED_MAX_BATCH). Tiles for 2-8 sequences that
multiply by FP32 FMAs, as batch 1 does, with a [rows, 2 * block_n, block_k] accumulator, were
tried and are not kept: 2.0-2.75 TB/s at b2, 0.9-1.0 at b8, and a 6.7B step of 5.58 / 7.32 /
14.28 ms at b2 / b4 / b8 (decode-kernels-fma-trial-h200-2026-12-04.json); their 3-D product
converts a layout through shared memory at every step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from fitbench.backends.torch import decode_kernels as kernels
from fitbench.backends.torch.decode_kernels import GemvConfig

if TYPE_CHECKING:
    from fitbench.backends.torch.static_decoder import StaticKVGenerator

# Tile sizes per projection: the fastest of benchmarks/decode_kernels.py's sweep on an H200
# (benchmarks/results/decode-kernels-h200-2026-12-02.json; weight bytes read per second:
# qkv 3.9, o 3.2, gate_up 4.1, down 4.0, head 4.2 TB/s, against cuBLAS' 3.7, 2.5, 4.1, 3.3, 4.1).
# Any CUDA GPU runs them; the interpreter ignores warps and stages.
GEMV_CONFIGS: dict[str, GemvConfig] = {
    "qkv": GemvConfig(block_n=8, block_k=256, num_warps=2, num_stages=3),
    "o": GemvConfig(block_n=2, block_k=2048, num_warps=4, num_stages=3),
    "gate_up": GemvConfig(block_n=4, block_k=1024, num_warps=4, num_stages=2),
    "down": GemvConfig(block_n=4, block_k=1024, num_warps=4, num_stages=4),
    "head": GemvConfig(block_n=4, block_k=1024, num_warps=4, num_stages=2),
}
# Batched tiles (2..32 sequences), by the padded activation rows of decode_kernels.rows_pad (16:
# batches 2-16; 32: 17-32). The tiles accumulate W @ x^T (the weight tile is tl.dot's first
# operand: 64 or 128 rows reach Hopper's wgmma), and the sizes are the fastest of
# benchmarks/decode_tiles.py's sweep on an H200 (decode-tiles-h200-2026-12-05.json, weight bytes
# read per second at b2 / b32: qkv 3.71 / 3.50, o 2.84 / 2.57, gate_up 3.81 / 3.55, down
# 3.52 / 3.41, head 4.07 / 3.89 TB/s, with the norm folded in where the step folds one, against
# cuBLAS's 3.61 / 3.47, 2.49 / 2.46, 4.00 / 3.90, 3.26 / 3.07, 4.00 / 3.89). The same sizes won
# at both buckets. The layout before (x @ W^T, the activations as the first operand) read
# 1.2-2.4 TB/s where a norm was folded in: its per-step sum of squares and x * g sat between
# the loads and an M = 16 product. benchmarks/decode_kernels_sm90.py checks that each compiles
# for sm_90 without spills and with its weight loads in the asynchronous pipeline. What bounds
# them:
# * a program re-reads the B activation rows for its weight tile (B / (2 * block_n) of the weight
#   bytes, from L2);
# * without split-K a GEMV has N / (2 * block_n) programs, and below about one per SM the stream
#   starves: o and down (4096 outputs) stop at 32 rows (128 programs), below wgmma's 64.
# tl.dot needs 2 * block_n >= 16.
_TALL = GemvConfig(block_n=64, block_k=128, num_warps=8, num_stages=4)  # qkv, head
_WIDE = GemvConfig(block_n=64, block_k=64, num_warps=4, num_stages=5)  # gate_up
_SHORT = GemvConfig(block_n=16, block_k=256, num_warps=4, num_stages=4)  # o and down (4096 rows)
_BATCHED = {"qkv": _TALL, "o": _SHORT, "gate_up": _WIDE, "down": _SHORT, "head": _TALL}
BATCHED_GEMV_CONFIGS: dict[int, dict[str, GemvConfig]] = {16: dict(_BATCHED), 32: dict(_BATCHED)}
ATTENTION_BLOCK = 64  # cache slots per step of the attention loop
MAX_BATCH = kernels.MAX_BATCH


def configs_for(batch: int, element_size: int = 2) -> dict[str, GemvConfig]:
    """The tile configuration of each projection at this batch, for weights of `element_size`
    bytes.

    4-byte weights (an FP32 decode) double the batched tiles' shared-memory stages: the 16-bit
    qkv and head tiles would need 264 KB at 32 rows, over the 227 KB an H100 / H200 block can
    have; half the block_k fits them (132 KB, a few hundred bytes of spills:
    `benchmarks/decode_kernels_sm90.py --dtype fp32`)."""
    if batch == 1:
        return dict(GEMV_CONFIGS)
    configs = dict(BATCHED_GEMV_CONFIGS[kernels.rows_pad(batch)])
    if element_size > 2:
        half = {name: max(kernels.MIN_DOT, cfg.block_k // 2) for name, cfg in configs.items()}
        configs = {name: replace(cfg, block_k=half[name]) for name, cfg in configs.items()}
    return configs


def unsupported_reason(generator: StaticKVGenerator) -> str | None:
    """Why the fused step cannot run this generator (None: it can)."""
    s = generator.model.shape
    if not 1 <= generator.batch <= MAX_BATCH:
        return f"the fused decode kernels run batches 1 to {MAX_BATCH}, not {generator.batch}"
    if s.head_dim & (s.head_dim - 1):
        return f"the fused decode attention needs a power-of-two head size, not {s.head_dim}"
    if generator.device.type != "cuda" and not kernels.INTERPRETED:
        return "the fused decode kernels need a CUDA device (or Triton's interpreter)"
    return None


class FusedDecodeStep:
    """Callable decode step over a generator's weights, cache and state (static buffers).

    `configs` overrides the tile configuration of some projections (qkv, o, gate_up, down,
    head) at this generator's batch.
    """

    def __init__(
        self,
        generator: StaticKVGenerator,
        *,
        configs: Mapping[str, GemvConfig] | None = None,
        eps: float = kernels.RMS_EPS_DEFAULT,
    ) -> None:
        why = unsupported_reason(generator)
        if why is not None:
            raise ValueError(why)
        self.g = generator
        b = generator.batch
        self.configs = {**configs_for(b, generator.dtype.itemsize), **(configs or {})}
        self.eps = eps
        s, device, dtype = generator.model.shape, generator.device, generator.dtype
        # One row per sequence; a batch of one ([1, K]) runs the batch-1 GEMV kernels.
        self.x = torch.empty(b, s.hidden, device=device, dtype=dtype)  # the residual stream
        self.q = torch.empty(b, s.q_dim, device=device, dtype=dtype)
        self.attn = torch.empty(b, s.q_dim, device=device, dtype=dtype)
        self.h = torch.empty(b, s.ffn, device=device, dtype=dtype)
        self.logits = torch.empty(b, s.vocab, device=device, dtype=torch.float32)

    def __call__(self) -> None:
        g, m, s, c = self.g, self.g.model, self.g.model.shape, self.configs
        torch.index_select(m.embed, 0, g.token, out=self.x)
        for i, layer in enumerate(m.layers):
            k_cache, v_cache = g.keys[i], g.values[i]  # [batch, kv_heads, max_len, head_dim]
            kernels.qkv_rope(
                self.x,
                layer.wqkv,
                q_out=self.q,
                k_cache=k_cache,
                v_cache=v_cache,
                cos=g.cos,
                sin=g.sin,
                pos=g.pos,
                heads=s.heads,
                kv_heads=s.kv_heads,
                head_dim=s.head_dim,
                bias=layer.bqkv,
                norm_weight=layer.attn_norm,
                eps=self.eps,
                config=c["qkv"],
            )
            kernels.decode_attention(
                self.q,
                k_cache,
                v_cache,
                self.attn,
                pos=g.pos,
                heads=s.heads,
                kv_heads=s.kv_heads,
                block_l=ATTENTION_BLOCK,
            )
            kernels.linear(self.attn, layer.wo, self.x, bias=layer.bo, residual=self.x, config=c["o"])
            kernels.swiglu(
                self.x,
                layer.w_gate_up,
                self.h,
                bias=layer.b_gate_up,
                norm_weight=layer.mlp_norm,
                eps=self.eps,
                config=c["gate_up"],
            )
            kernels.linear(self.h, layer.w_down, self.x, bias=layer.b_down, residual=self.x, config=c["down"])
        kernels.linear(self.x, m.head_weight, self.logits, norm_weight=m.norm, eps=self.eps, config=c["head"])
        nxt = self.logits.argmax(dim=-1)  # [batch]: the greedy token of each sequence
        g.token.copy_(nxt)
        g.pos.add_(1)
        g.tokens.index_copy_(1, g.pos, nxt.unsqueeze(1))
