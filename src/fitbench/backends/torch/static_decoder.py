"""A compact Llama-style decoder with a static KV cache, for fast greedy generation.

Why fitbench has its own decoder: `transformers.generate` at batch 1 spends most of each token
in Python (logits processors, cache bookkeeping, ~40 framework calls per layer), so a 6.7B model
decodes at 12-17 tokens/s on a card whose memory bandwidth allows ~350. What the card can do
needs a decode step whose every tensor has a fixed shape and a fixed address, so that the whole
step (32 layers, the LM head and the greedy choice of the next token) is captured once in a
CUDA graph and replayed with one launch per token.

Layout (Llama: RMSNorm, rotary positions, grouped-query attention, SwiGLU):
  embed        [vocab, hidden]
  per layer    attn_norm [hidden]; wqkv [q_dim + 2 kv_dim, hidden] (q, k, v stacked: one GEMV);
               wo [hidden, q_dim]; mlp_norm [hidden]; w_gate_up [2 ffn, hidden] (gate, up
               stacked); w_down [hidden, ffn]; biases where the architecture has them
  norm         [hidden]; lm_head [vocab, hidden] (or the embedding, when tied)
Stacking q/k/v and gate/up changes no parameter count (it equals TransformerArch.param_count())
and turns five projections into two: fewer, larger GEMVs per layer for the same weight bytes.

The KV cache is one K and one V tensor per layer, each [batch, kv_heads, max_len, head_dim],
allocated once (separate tensors, not views of one block: torch.compile then updates each in
place instead of rebuilding an aliased whole). Prefill runs the prompt through causal SDPA and
writes positions 0..P-1. A decode step reads the position from a device tensor: it derives the
additive mask (positions <= pos visible) from it, builds the rotary rotation for it as a
head_dim x head_dim matrix (so rotary is one small matmul per layer), writes K/V there with an
indexed store, attends over the whole (masked) cache, takes the argmax of the logits, writes it
into the input-token buffer and advances the position. Nothing in the step reads a value back
to the host, so replaying the captured graph generates token after token. On a CPU the same
step runs eagerly (the same code path, no capture).

With `compile_step` the step goes through torch.compile (inductor) before capture: at batch 1
the four weight GEMVs of a layer take ~80 % of the token and the rest is a dozen small kernels
(RMSNorm, SiLU-and-multiply, cache stores) of a few microseconds each; inductor fuses those,
and the graph then replays the fused step.

On CUDA, `use_fused_kernels` replaces the step with fitbench's fused Triton kernels instead
(fused_decode: five kernels a layer, each weight byte read once per step for all the sequences,
without split-K; attention reads only slots 0..pos of each sequence's cache). They take batches
1 to 32 (FUSED_MAX_BATCH); the compiled step runs larger batches and is the fallback. All
sequences of a batch share one position (`pos` is one number: the prompts have one length),
which is what lets those kernels apply one rotary angle and one cache slot to every sequence.

Weights are created directly on the device in the target dtype and drawn from N(0, 0.02)
(norm scales 1, biases 0): random values, not zeros, so kernels see realistic data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fitbench.backends.torch.backend import is_oom
from fitbench.backends.torch.session import release_cached_blocks
from fitbench.errors import FitbenchError
from fitbench.estimate.execution import tuned_generation_gaps
from fitbench.workloads.arch import TransformerArch

INIT_STD = 0.02
ROPE_THETA = 10000.0  # Llama / Llama-2; the value changes no speed
RMS_EPS = 1e-6  # transformers' LlamaConfig default
CACHE_ALIGN = 64  # cache length rounded up: aligned attention-mask rows, no padding kernels
GRAPH_WARMUP_STEPS = 3  # eager decode steps before capture (kernel selection, cuBLAS handles)
# The batches the tuned decode runs through the fused kernels: all they take (decode_kernels.
# MAX_BATCH). On an H200 the 6.7B model's fused step took 3.89 / 4.07 / 5.04 ms at b2 / b8 / b32
# against the compiled step's 4.41 / 4.61 / 5.46 (benchmarks/decode_kernels.py --batch 2,8,32,
# decode-fused-swap-h200-2026-12-05.json); before their tiles took the weights as tl.dot's first
# operand they ran at half the compiled step's speed and only batch 1 used them. The estimator's
# torch.tuned decode_fused_max_batch is this number (a test holds them equal).
FUSED_MAX_BATCH = 32


@dataclass(frozen=True, kw_only=True)
class DecoderShape:
    """The numbers of a Llama-style decoder (from a TransformerArch)."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    qkv_bias: bool
    out_bias: bool
    mlp_bias: bool
    tie_embeddings: bool

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def groups(self) -> int:
        return self.heads // self.kv_heads

    @classmethod
    def from_arch(cls, arch: TransformerArch) -> DecoderShape:
        supported = (
            arch.kind == "decoder"
            and arch.mlp == "swiglu"
            and arch.norm == "rmsnorm"
            and arch.position == "rotary"
            and arch.type_vocab_size == 0
        )
        if not supported:
            raise FitbenchError(
                f"--exec tuned generates with Llama-style decoders (SwiGLU, RMSNorm, rotary); this one has "
                f"mlp {arch.mlp}, norm {arch.norm}, position {arch.position}",
                "use --exec default for this model",
                message_zh=(
                    "--exec tuned 只用 Llama 式解码器(SwiGLU、RMSNorm、旋转位置编码)"
                    f"生成;这个模型是 mlp {arch.mlp}、norm {arch.norm}、position "
                    f"{arch.position}"
                ),
                hint_zh="这个模型请使用 --exec default",
            )
        other, other_zh = tuned_generation_gaps(arch), tuned_generation_gaps(arch, "zh")
        if other:
            raise FitbenchError(
                f"--exec tuned generates with dense Llama-style decoders; this one has {other}",
                "use --exec default for this model (transformers builds it as its family does)",
                message_zh=(f"--exec tuned 只用稠密的 Llama 式解码器生成;这个模型有{other_zh}"),
                hint_zh="这个模型请使用 --exec default(transformers 按其系列构建)",
            )
        if arch.dim_head % 2:
            raise FitbenchError(
                f"rotary positions need an even head size, got {arch.dim_head}",
                message_zh=f"旋转位置编码需要偶数的注意力头维度,实际为 {arch.dim_head}",
            )
        return cls(
            vocab=arch.vocab_size,
            hidden=arch.hidden_size,
            layers=arch.num_layers,
            heads=arch.num_heads,
            kv_heads=arch.kv_heads,
            head_dim=arch.dim_head,
            ffn=arch.intermediate_size,
            qkv_bias=arch.qkv_bias,
            out_bias=arch.out_bias,
            mlp_bias=arch.mlp_bias,
            tie_embeddings=arch.tie_embeddings,
        )


def _weight(shape: tuple[int, ...], device: torch.device, dtype: torch.dtype, fill: str) -> nn.Parameter:
    """A frozen parameter created on `device` in `dtype` (no FP32 copy, no framework init)."""
    data = torch.empty(shape, device=device, dtype=dtype)
    if device.type != "meta":
        with torch.no_grad():
            if fill == "normal":
                data.normal_(0.0, INIT_STD)
            elif fill == "ones":
                data.fill_(1.0)
            else:
                data.zero_()
    return nn.Parameter(data, requires_grad=False)


class DecoderLayer(nn.Module):
    """One block's parameters (the computation lives in StaticDecoder and StaticKVGenerator)."""

    def __init__(self, s: DecoderShape, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        h = s.hidden
        self.attn_norm = _weight((h,), device, dtype, "ones")
        self.wqkv = _weight((s.q_dim + 2 * s.kv_dim, h), device, dtype, "normal")
        self.bqkv = _weight((s.q_dim + 2 * s.kv_dim,), device, dtype, "zeros") if s.qkv_bias else None
        self.wo = _weight((h, s.q_dim), device, dtype, "normal")
        self.bo = _weight((h,), device, dtype, "zeros") if s.out_bias else None
        self.mlp_norm = _weight((h,), device, dtype, "ones")
        self.w_gate_up = _weight((2 * s.ffn, h), device, dtype, "normal")
        self.b_gate_up = _weight((2 * s.ffn,), device, dtype, "zeros") if s.mlp_bias else None
        self.w_down = _weight((h, s.ffn), device, dtype, "normal")
        self.b_down = _weight((h,), device, dtype, "zeros") if s.mlp_bias else None


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm (one fused kernel on CUDA in recent torch)."""
    return F.rms_norm(x, (x.shape[-1],), weight, RMS_EPS)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions, transformers' Llama convention (halves, not interleaved pairs).

    x [..., T, head_dim]; cos/sin [T, head_dim] in x's dtype.
    """
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def rotary_tables(length: int, head_dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [length, head_dim] in FP32 for positions 0..length-1."""
    inv_freq = 1.0 / (
        ROPE_THETA ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    )
    positions = torch.arange(length, device=device, dtype=torch.float32)
    freqs = torch.outer(positions, inv_freq)
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos(), angles.sin()


def _mlp(layer: DecoderLayer, h: torch.Tensor, ffn: int) -> torch.Tensor:
    gate_up = F.linear(h, layer.w_gate_up, layer.b_gate_up)
    return F.silu(gate_up[..., :ffn]) * gate_up[..., ffn:]


class StaticDecoder(nn.Module):
    """The weights, plus a plain full-sequence forward (the reference for the cached path)."""

    def __init__(self, arch: TransformerArch, *, device: torch.device | str, dtype: torch.dtype) -> None:
        super().__init__()
        device = torch.device(device)
        s = DecoderShape.from_arch(arch)
        self.shape = s
        self.embed = _weight((s.vocab, s.hidden), device, dtype, "normal")
        self.layers = nn.ModuleList(DecoderLayer(s, device, dtype) for _ in range(s.layers))
        self.norm = _weight((s.hidden,), device, dtype, "ones")
        self.lm_head = None if s.tie_embeddings else _weight((s.vocab, s.hidden), device, dtype, "normal")

    @property
    def head_weight(self) -> torch.Tensor:
        return self.embed if self.lm_head is None else self.lm_head

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.dtype

    @property
    def device(self) -> torch.device:
        return self.embed.device

    def block(
        self,
        index: int,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kv_out: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """One block over a whole sequence x [b, T, hidden] at positions 0..T-1 (causal).

        `kv_out`, when given, receives this block's K and V [b, kv_heads, T, head_dim] (prefill).
        """
        s, layer = self.shape, self.layers[index]
        b, t, _ = x.shape
        qkv = F.linear(rms_norm(x, layer.attn_norm), layer.wqkv, layer.bqkv)
        q, k, v = qkv.split((s.q_dim, s.kv_dim, s.kv_dim), dim=-1)
        q = rotate(q.view(b, t, s.heads, s.head_dim).transpose(1, 2), cos, sin)
        k = rotate(k.view(b, t, s.kv_heads, s.head_dim).transpose(1, 2), cos, sin)
        v = v.view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        if kv_out is not None:
            kv_out[0].copy_(k)
            kv_out[1].copy_(v)
        if s.groups > 1:  # query head i reads kv head i // groups (transformers' repeat_kv)
            k = k.repeat_interleave(s.groups, dim=1)
            v = v.repeat_interleave(s.groups, dim=1)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + F.linear(attn.transpose(1, 2).reshape(b, t, s.q_dim), layer.wo, layer.bo)
        h = _mlp(layer, rms_norm(x, layer.mlp_norm), s.ffn)
        return x + F.linear(h, layer.w_down, layer.b_down)

    @torch.no_grad()
    def forward_full(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits [b, T, vocab] of a whole sequence, no cache: what every cached step must equal."""
        cos, sin = rotary_tables(ids.shape[1], self.shape.head_dim, ids.device)
        cos, sin = cos.to(self.dtype), sin.to(self.dtype)
        x = F.embedding(ids, self.embed)
        for i in range(len(self.layers)):
            x = self.block(i, x, cos, sin)
        return F.linear(rms_norm(x, self.norm), self.head_weight)


@torch.no_grad()
def reference_greedy(model: StaticDecoder, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy generation by re-running the full sequence for every token (slow, obviously right)."""
    ids = prompt
    for _ in range(new_tokens):
        nxt = model.forward_full(ids)[:, -1].argmax(dim=-1, keepdim=True)
        ids = torch.cat((ids, nxt), dim=1)
    return ids


def _summary(exc: BaseException) -> str:
    """One line for a warning: the error's first line, and the next one when the first only
    introduces it (torch.compile's "backend='inductor' raised:")."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else (lines[0] if lines else "")
    return f"{type(exc).__name__}: {text[:300]}"


def cache_length(prompt_tokens: int, new_tokens: int) -> int:
    """Cache slots: the prompt, the new tokens and the warm-up steps, rounded up for alignment."""
    need = prompt_tokens + new_tokens + GRAPH_WARMUP_STEPS
    return CACHE_ALIGN * math.ceil(need / CACHE_ALIGN)


class StaticKVGenerator:
    """Greedy generation over a preallocated KV cache; one decode step, captured once, replayed.

    Semantics match transformers' generate(max_new_tokens=n): prefill() runs the prompt and
    picks the first new token; decode(n) runs n - 1 decode steps, so a prefill + decode(n)
    call produces n new tokens per sequence.

    The prompt's shape is static too ([batch, prompt_tokens]), so capture() also records the
    prefill in a CUDA graph of its own: replayed, the prompt's ~20 eager kernels a layer run
    without the host issuing each one (for a 32-layer 7B model at 50 prompt tokens the eager
    prefill is host-bound: ~1,000 launches at 10-20 us each against ~6 ms of kernels).
    """

    def __init__(
        self, model: StaticDecoder, *, batch: int, prompt_tokens: int, new_tokens: int, use_graph: bool
    ) -> None:
        s = model.shape
        self.model = model
        self.batch = batch
        self.prompt_tokens = prompt_tokens
        self.length = cache_length(prompt_tokens, new_tokens)
        device, dtype = model.device, model.dtype
        self.device, self.dtype = device, dtype
        if use_graph and device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.use_graph = use_graph
        L = self.length
        # Static state: allocated once, written in place by prefill and by every decode step.
        kv_shape = (batch, s.kv_heads, L, s.head_dim)
        self.keys = [torch.zeros(kv_shape, device=device, dtype=dtype) for _ in range(s.layers)]
        self.values = [torch.zeros(kv_shape, device=device, dtype=dtype) for _ in range(s.layers)]
        self.slots = torch.arange(L, device=device)  # cache positions, compared with `pos` for the mask
        self.masked = torch.finfo(dtype).min
        self.token = torch.zeros(batch, device=device, dtype=torch.long)  # the token fed next
        self.pos = torch.zeros(1, device=device, dtype=torch.long)  # the position it is fed at
        self.tokens = torch.zeros(batch, L + 1, device=device, dtype=torch.long)  # prompt + generated
        # The prefill graph's input: each prefill copies its prompt here.
        self.prompt_ids = torch.zeros(batch, prompt_tokens, device=device, dtype=torch.long)
        cos, sin = rotary_tables(L, s.head_dim, device)
        half = s.head_dim // 2
        self.cos, self.sin = cos, sin
        # A decode step's rotary as one matrix M (x_rotated = x @ M):
        #   M[j, i] = cos[i] if j == i;  -sin[i] if j == i + half (i < half);  sin[i] if j == i - half.
        self.sin_signed = torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)
        self.eye = torch.eye(s.head_dim, device=device, dtype=torch.float32)
        partner_of = torch.cat((torch.arange(half, s.head_dim), torch.arange(0, half))).to(device)
        self.partner = torch.zeros(s.head_dim, s.head_dim, device=device, dtype=torch.float32)
        self.partner[partner_of, torch.arange(s.head_dim, device=device)] = 1.0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.prefill_graph: torch.cuda.CUDAGraph | None = None
        self.capture_seconds: float | None = None
        self.capture_error: str | None = None
        self.prefill_capture_error: str | None = None
        self.compile_seconds: float | None = None
        self._host_pos = 0  # host mirror of `pos`: bounds checks without a device sync

    @property
    def cache_shape(self) -> tuple[int, ...]:
        """[layers, 2 (K and V), batch, kv_heads, max_len, head_dim]."""
        return (len(self.keys), 2, *self.keys[0].shape)

    @property
    def cache_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    @torch.no_grad()
    def compile_step(
        self, prompt: torch.Tensor, *, backend: str | Callable[..., Any] = "inductor"
    ) -> str | None:
        """Route decode steps through torch.compile; None when that worked, else why not.

        Compiles by running one real step (tens of seconds for a 32-layer model with inductor);
        on failure the eager step stays. Results equal the eager step's up to floating-point
        rounding (fused kernels sum in another order). Call before capture().
        """
        started = time.perf_counter()
        return self._adopt_step(
            lambda: torch.compile(self._step, fullgraph=True, dynamic=False, backend=backend), prompt, started
        )

    def _adopt_step(
        self, make: Callable[[], Callable[[], None]], prompt: torch.Tensor, started: float
    ) -> str | None:
        """Build a replacement decode step, run it once for real (compiling it), and keep it;
        on failure keep the current step and say why (an OOM is raised: it is a verdict)."""
        try:
            step = make()
            self.prefill(prompt)
            step()
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        except Exception as exc:
            if is_oom(exc):
                raise
            return _summary(exc)
        self._step = step  # type: ignore[method-assign]
        self.compile_seconds = time.perf_counter() - started
        return None

    @torch.no_grad()
    def use_fused_kernels(
        self, prompt: torch.Tensor, *, configs: Mapping[str, Any] | None = None
    ) -> str | None:
        """Route decode steps through fitbench's fused Triton kernels (fused_decode); None when
        that worked, else why not (the current step stays).

        Batches 1 to 32 (FUSED_MAX_BATCH, all the tuned mode asks for). Compiles the kernels by
        running one real step; results equal the eager step's up to floating-point rounding (FP32
        accumulation, RMSNorm folded into the GEMVs). Call before capture().
        """
        started = time.perf_counter()
        try:
            from fitbench.backends.torch.fused_decode import FusedDecodeStep, unsupported_reason
        except ImportError as exc:  # no Triton
            return _summary(exc)
        why = unsupported_reason(self)
        if why is not None:
            return why
        return self._adopt_step(lambda: FusedDecodeStep(self, configs=configs), prompt, started)

    # -- prefill ------------------------------------------------------------------------------
    @torch.no_grad()
    def prefill(self, prompt: torch.Tensor) -> None:
        """Run the prompt [batch, P], fill cache positions 0..P-1 and choose the first new token
        (replayed from the prefill graph once capture() has recorded it)."""
        b, p = prompt.shape
        if b != self.batch or p != self.prompt_tokens:
            raise ValueError(
                f"prompt {tuple(prompt.shape)} does not match the cache ({self.batch}, {self.prompt_tokens})"
            )
        if self.prefill_graph is not None:
            self.prompt_ids.copy_(prompt)
            self.prefill_graph.replay()
        else:
            self._prefill(prompt)
        self._host_pos = p

    def _prefill(self, prompt: torch.Tensor) -> None:
        """The prefill's device work (what the prefill graph records): no host reads, the
        position written as a constant of the static prompt length."""
        m, s = self.model, self.model.shape
        p = self.prompt_tokens
        cos, sin = self.cos[:p].to(self.dtype), self.sin[:p].to(self.dtype)
        x = F.embedding(prompt, m.embed)
        for i in range(s.layers):
            kv = (self.keys[i][:, :, :p], self.values[i][:, :, :p])
            x = m.block(i, x, cos, sin, kv_out=kv)
        logits = F.linear(rms_norm(x[:, -1], m.norm), m.head_weight)
        first = logits.argmax(dim=-1)
        self.tokens[:, :p].copy_(prompt)
        self.tokens[:, p].copy_(first)
        self.token.copy_(first)
        self.pos.fill_(p)

    # -- one decode step (the captured region) ---------------------------------------------------
    def _step(self) -> None:
        """Feed `token` at `pos`; write the next token into `token` and `tokens`; advance `pos`.

        Static by construction: fixed shapes, in-place writes into preallocated buffers, the
        position only as a device tensor, no host reads.
        """
        m, s = self.model, self.model.shape
        b = self.batch
        x = F.embedding(self.token, m.embed)  # [b, hidden]
        # Positions up to this one are visible; the rest of the cache is masked out.
        mask = torch.where(self.slots <= self.pos, 0.0, self.masked).to(self.dtype).view(1, 1, 1, -1)
        cos = self.cos.index_select(0, self.pos)  # [1, head_dim]
        sin = self.sin_signed.index_select(0, self.pos)
        rotation = torch.addcmul(self.eye * cos, self.partner, sin).to(self.dtype)
        qk_heads = s.heads + s.kv_heads
        for i, layer in enumerate(m.layers):
            qkv = F.linear(rms_norm(x, layer.attn_norm), layer.wqkv, layer.bqkv)  # [b, q+2kv]
            qk = torch.matmul(qkv[:, : s.q_dim + s.kv_dim].view(b, qk_heads, s.head_dim), rotation)
            # Decode has one query per head: the query heads of one kv head become that kv head's
            # query rows, so grouped-query attention reads each K/V once, with no expansion.
            q = qk[:, : s.heads].view(b, s.kv_heads, s.groups, s.head_dim)
            k = qk[:, s.heads :].unsqueeze(2)  # [b, kv_heads, 1, head_dim]
            v = qkv[:, s.q_dim + s.kv_dim :].view(b, s.kv_heads, 1, s.head_dim)
            k_cache, v_cache = self.keys[i], self.values[i]
            k_cache[:, :, self.pos] = k  # an indexed store (index_put_), updated in place when compiled
            v_cache[:, :, self.pos] = v
            attn = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
            # Residual adds apart from the GEMMs (not addmm, which copies x into the output first):
            # compiled, each add fuses into the RMSNorm kernel that follows it.
            x = x + F.linear(attn.reshape(b, s.q_dim), layer.wo, layer.bo)
            h = _mlp(layer, rms_norm(x, layer.mlp_norm), s.ffn)
            x = x + F.linear(h, layer.w_down, layer.b_down)
        logits = F.linear(rms_norm(x, m.norm), m.head_weight)
        nxt = logits.argmax(dim=-1)
        self.token.copy_(nxt)
        self.pos.add_(1)
        self.tokens.index_copy_(1, self.pos, nxt.unsqueeze(1))

    # -- capture and replay ---------------------------------------------------------------------
    @torch.no_grad()
    def capture(self, prompt: torch.Tensor) -> None:
        """Warm up on a side stream, then capture one decode step (PyTorch's documented recipe),
        and the prefill in a graph of its own (_capture_prefill).

        The warm-up runs real steps (after a real prefill) so that cuBLAS handles, SDPA kernel
        choices and lazily created state exist before capture; capture itself executes nothing.
        """
        if not self.use_graph:
            return
        started = time.perf_counter()
        self.prefill(prompt)
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(GRAPH_WARMUP_STEPS):
                self._step()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        torch.cuda.synchronize(self.device)
        # On failure decode still works eagerly (the same step, one launch per kernel); say why.
        self.graph, self.capture_error = self._record(self._step, stream)
        self._capture_prefill(prompt, stream)
        self.capture_seconds = time.perf_counter() - started
        self.prefill(prompt)  # the warm-up moved the position; start clean

    def _capture_prefill(self, prompt: torch.Tensor, stream: torch.cuda.Stream) -> None:
        """Record the prefill over `prompt_ids` in its own graph (its own memory pool: nothing
        it allocates outlives a replay, its results land in the static cache and token buffers).
        One eager prefill on the capture stream first, as for the decode step; on failure the
        prefill stays eager and `prefill_capture_error` says why.

        The eager prefills' activations go back to the driver before capture: the graph's pool
        cannot reuse the blocks they leave cached in the allocator, so without this a long prompt
        at a large batch would hold its activations twice (cached, and in the pool)."""
        self.prompt_ids.copy_(prompt)

        def warm_then_prefill() -> None:
            with torch.cuda.stream(stream):
                self._prefill(self.prompt_ids)
            torch.cuda.current_stream(self.device).wait_stream(stream)
            torch.cuda.synchronize(self.device)
            release_cached_blocks(self.device)

        self.prefill_graph, self.prefill_capture_error = self._record(
            lambda: self._prefill(self.prompt_ids), stream, before=warm_then_prefill
        )

    def _record(
        self,
        fn: Callable[[], None],
        stream: torch.cuda.Stream,
        *,
        before: Callable[[], None] | None = None,
    ) -> tuple[torch.cuda.CUDAGraph | None, str | None]:
        """`fn` captured on `stream` into a new CUDA graph (after `before`, run eagerly): (graph,
        None), or (None, why) where the warm-up or the capture failed for a reason other than
        memory (an out-of-memory error propagates: it is the run's verdict)."""
        graph = torch.cuda.CUDAGraph()
        try:
            if before is not None:
                before()
            with torch.cuda.graph(graph, stream=stream):
                fn()
            torch.cuda.synchronize(self.device)
        except Exception as exc:
            if is_oom(exc):
                raise
            torch.cuda.synchronize(self.device)
            return None, _summary(exc)
        return graph, None

    @torch.no_grad()
    def decode(self, new_tokens: int) -> None:
        """Produce the remaining new_tokens - 1 tokens (prefill chose the first)."""
        steps = max(0, int(new_tokens) - 1)
        if self._host_pos + steps > self.length:
            raise FitbenchError(
                f"the static KV cache holds {self.length} positions; {self._host_pos} are used and "
                f"{steps} more were asked",
                "build the session for the prompt and new-token counts it runs",
                message_zh=(
                    f"静态 KV 缓存只能容纳 {self.length} 个位置;已用 {self._host_pos} 个,又请求了 {steps} 个"
                ),
                hint_zh="按实际运行的提示词与新 token 数量构建会话",
            )
        for _ in range(steps):
            if self.graph is not None:
                self.graph.replay()
            else:
                self._step()
        self._host_pos += steps

    def generated(self) -> torch.Tensor:
        """Prompt and generated tokens so far [batch, P + n] (copied to the host: tests only)."""
        return self.tokens[:, : self._host_pos + 1].cpu()
