"""The batch-1 decode step of a StaticKVGenerator as fitbench's fused Triton kernels.

Same inputs, outputs and in-place state as StaticKVGenerator._step (the token at `pos` in, the
next token into `token` and `tokens`, `pos` advanced, K/V written into the cache), but each
layer is five kernels instead of a dozen-odd (see decode_kernels for what each fuses). Nothing
reads a value back to the host, so the step is captured in a CUDA graph like the other one.

Batch 1 only: that is where decode is a pure stream of weight bytes and launch overheads are
the gap to the bandwidth roofline; at larger batches the GEMMs are matrix products, which
cuBLAS (through the compiled step) already does well.
"""

from __future__ import annotations

from collections.abc import Mapping
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
ATTENTION_BLOCK = 64  # cache slots per step of the attention loop


def unsupported_reason(generator: StaticKVGenerator) -> str | None:
    """Why the fused step cannot run this generator (None: it can)."""
    s = generator.model.shape
    if generator.batch != 1:
        return f"the fused decode kernels run batch 1, not {generator.batch}"
    if s.head_dim & (s.head_dim - 1):
        return f"the fused decode attention needs a power-of-two head size, not {s.head_dim}"
    if generator.device.type != "cuda" and not kernels.INTERPRETED:
        return "the fused decode kernels need a CUDA device (or Triton's interpreter)"
    return None


class FusedDecodeStep:
    """Callable decode step over a generator's weights, cache and state (static buffers)."""

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
        self.configs = {**GEMV_CONFIGS, **(configs or {})}
        self.eps = eps
        s, device, dtype = generator.model.shape, generator.device, generator.dtype
        self.x = torch.empty(s.hidden, device=device, dtype=dtype)  # the residual stream
        self.q = torch.empty(s.q_dim, device=device, dtype=dtype)
        self.attn = torch.empty(s.q_dim, device=device, dtype=dtype)
        self.h = torch.empty(s.ffn, device=device, dtype=dtype)
        self.logits = torch.empty(s.vocab, device=device, dtype=torch.float32)
        # Batch 0 of each cache tensor: [kv_heads, max_len, head_dim], contiguous.
        self.k_caches = [k[0] for k in generator.keys]
        self.v_caches = [v[0] for v in generator.values]

    def __call__(self) -> None:
        g, m, s, c = self.g, self.g.model, self.g.model.shape, self.configs
        torch.index_select(m.embed, 0, g.token, out=self.x.view(1, -1))
        for i, layer in enumerate(m.layers):
            k_cache, v_cache = self.k_caches[i], self.v_caches[i]
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
        nxt = self.logits.argmax().view(1)
        g.token.copy_(nxt)
        g.pos.add_(1)
        g.tokens.index_copy_(1, g.pos, nxt.view(1, 1))
