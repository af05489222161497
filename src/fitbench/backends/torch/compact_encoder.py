"""A compact BERT-style encoder whose attention is always one fused SDPA call.

Why the tuned mode has its own encoder: transformers' BertModel prepares its attention mask at
run time, and inside a CUDA-graph capture its attention is not eligible for the flash kernel (on
an H200 a flash-only capture fails with "No available kernel"), so SDPA falls back to a kernel
that materialises the [batch, heads, seq, seq] scores: at seq 512, batch 16 the captured step
allocated 10.9 GB and took 41.7 ms, against 4.6 GB and 19.7 ms here. Here nothing depends on
data: no mask, attention-probability dropout inside SDPA's flash kernel, q/k/v from one stacked
projection.

The layout is BERT's exactly (the parameter count equals TransformerArch.param_count() and
transformers' BertForSequenceClassification; q, k and v are stacked in one [3h, h] weight, which
changes no count): word, position and token-type embeddings with LayerNorm; per layer a
post-norm attention block and a post-norm GELU MLP; a tanh pooler on the first token (or the
first token itself when the architecture has no pooler); dropout and a linear classifier.
Dropout rates follow BertConfig's defaults (0.1 for hidden states and attention probabilities).

Each layer's two residual sites, LayerNorm(x + dropout(y)), are one fused operator
(dropout_layer_norm: fitbench's Triton kernels on CUDA, a hashed dropout mask regenerated in the
backward, the normalised output at the residual stream's width and in 16 bits for the next
matmul). The stream is fp32 under autocast, as transformers' BERT keeps it; `residual_dtype` =
bf16 keeps it in bf16 between the layers, as Megatron-LM's bf16 training does (the norms still
compute in fp32 from the rounded sum), which moves 10 bytes an element each way at a site instead
of 16: the tuned step does this where estimate.execution.sixteen_bit_residual says so. The mask's
seed is a step counter on the device (`dropout_seed`), which each training forward increments, so
a captured step draws new masks at every replay. FUSED_RESIDUAL_NORM = False builds the unfused
layers (F.dropout then nn.LayerNorm) that benchmarks compare against.
The MLP's exact GELU, when compiled, takes its erf from a cheaper formula (erf_gelu;
CHEAP_ERF_GELU = False: F.gelu; uncompiled it is F.gelu either way).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from fitbench.backends.torch.dropout_layer_norm import dropout_add_layer_norm
from fitbench.backends.torch.erf_gelu import erf_gelu
from fitbench.backends.torch.models import init_transformer_weights_
from fitbench.errors import FitbenchError
from fitbench.workloads.arch import TransformerArch

LAYER_NORM_EPS = 1e-12  # BertConfig.layer_norm_eps
DROPOUT = 0.1  # BertConfig.hidden_dropout_prob and attention_probs_dropout_prob
#: build layers whose residual sites are the fused operator (False: F.dropout + nn.LayerNorm)
FUSED_RESIDUAL_NORM = True
#: build layers whose GELU takes erf from A&S 7.1.26 (erf_gelu; False: F.gelu and libdevice's erf)
CHEAP_ERF_GELU = True
#: project q, k and v as three products of the one qkv weight (False: one product, q/k/v its views).
#: Views of one product give cuDNN's backward three separate gradients, which the qkv weight's
#: backward stacks again (a copy of 3·tokens·hidden a layer, ~0.4 ms of BERT-base's step at seq
#: 512 b16); three products take their gradients as they come but sum three input gradients and
#: run six narrower GEMMs, which cost more: 14.25 → 14.61 ms on an H100
#: (benchmarks/results/inductor-options-h100-2026-12-07-residual16.json). Kept for A/B runs.
THREE_QKV_PRODUCTS = False


def check_bert_layout(arch: TransformerArch) -> None:
    """Raise when the architecture is not a BERT-style encoder this module can build."""
    problems = []
    if arch.kind != "encoder":
        problems.append(f"kind {arch.kind}")
    if arch.mlp != "gelu" or arch.norm != "layernorm" or arch.position != "learned":
        problems.append(f"mlp {arch.mlp}, norm {arch.norm}, position {arch.position}")
    if not (arch.qkv_bias and arch.out_bias and arch.mlp_bias):
        problems.append("linear layers without bias")
    if arch.kv_heads != arch.num_heads or arch.dim_head * arch.num_heads != arch.hidden_size:
        problems.append("grouped-query attention or a custom head size")
    if problems:
        raise FitbenchError(
            f"--exec tuned builds BERT-style encoders; this one has {'; '.join(problems)}",
            "use --exec default for this model",
            message_zh=f"--exec tuned 只构建 BERT 式编码器;这个模型有 {';'.join(problems)}",
            hint_zh="这个模型请使用 --exec default",
        )


class EncoderLayer(nn.Module):
    """Post-norm block: x = LN(x + drop(attn(x))); x = LN(x + drop(W2 gelu(W1 x))).

    forward(x, x_low, seed) takes the residual stream and, when the previous site produced it,
    its 16-bit copy for the matmuls; it returns both (x_low None from the unfused sites)."""

    def __init__(self, arch: TransformerArch, dropout: float, *, index: int = 0) -> None:
        super().__init__()
        h = arch.hidden_size
        self.heads = arch.num_heads
        self.dropout = dropout
        self.fused_norm = FUSED_RESIDUAL_NORM
        self.gelu = erf_gelu if CHEAP_ERF_GELU else F.gelu
        self.sites = (2 * index + 1, 2 * index + 2)  # this layer's two masks per step
        self.three_qkv_products = THREE_QKV_PRODUCTS
        self.qkv = nn.Linear(h, 3 * h)
        self.out = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h, eps=LAYER_NORM_EPS)
        self.up = nn.Linear(h, arch.intermediate_size)
        self.down = nn.Linear(arch.intermediate_size, h)
        self.mlp_norm = nn.LayerNorm(h, eps=LAYER_NORM_EPS)

    def forward(
        self, x: torch.Tensor, x_low: torch.Tensor | None, seed: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        b, t, h = x.shape
        p = self.dropout if self.training else 0.0
        inputs = x if x_low is None else x_low
        q, k, v = self._project_qkv(inputs)
        attn = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
        attn = attn.transpose(1, 2).reshape(b, t, h)
        x, x_low = self._residual(self.attn_norm, x, self.out(attn), seed, self.sites[0], p)
        # erf_gelu pays where a compiler fuses its operators into one kernel; run one by one (the
        # uncompiled step, a CPU) they would be a dozen passes over the MLP's widest tensor.
        gelu = self.gelu if torch.compiler.is_compiling() else F.gelu
        y = self.down(gelu(self.up(x if x_low is None else x_low)))
        return self._residual(self.mlp_norm, x, y, seed, self.sites[1], p)

    def _project_qkv(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k and v as (batch, heads, tokens, head size), from the one qkv Linear."""
        b, t, h = inputs.shape
        heads = (b, t, self.heads, h // self.heads)
        if self.three_qkv_products:
            w, bias = self.qkv.weight, self.qkv.bias
            q, k, v = (F.linear(inputs, w[i * h : (i + 1) * h], bias[i * h : (i + 1) * h]) for i in range(3))
            return q.view(heads).transpose(1, 2), k.view(heads).transpose(1, 2), v.view(heads).transpose(1, 2)
        return self.qkv(inputs).view(b, t, 3, *heads[2:]).permute(2, 0, 3, 1, 4).unbind(0)

    def _residual(
        self, norm: nn.LayerNorm, x: torch.Tensor, y: torch.Tensor, seed: torch.Tensor, site: int, p: float
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if not self.fused_norm:
            # autocast's LayerNorm returns fp32: a 16-bit stream stays 16-bit (Megatron's order:
            # the residual add at the stream's width, then the norm)
            return norm((x + F.dropout(y, p, self.training)).to(x.dtype)).to(x.dtype), None
        return dropout_add_layer_norm(x, y, norm.weight, norm.bias, seed=seed, site=site, p=p, eps=norm.eps)


class CompactEncoder(nn.Module):
    """BERT for sequence classification; forward(input_ids, token_type_ids) returns the logits."""

    def __init__(self, arch: TransformerArch, *, dropout: float = DROPOUT) -> None:
        super().__init__()
        check_bert_layout(arch)
        h = arch.hidden_size
        self.dropout = dropout
        self.checkpointing = False
        #: the residual stream's dtype between the layers: None keeps the embeddings' (fp32 under
        #: autocast); bf16 is the tuned step's 16-bit stream (execution.sixteen_bit_residual)
        self.residual_dtype: torch.dtype | None = None
        self.word = nn.Embedding(arch.vocab_size, h)
        self.position = nn.Embedding(arch.max_positions, h)
        self.token_type = nn.Embedding(max(arch.type_vocab_size, 1), h)
        self.embed_norm = nn.LayerNorm(h, eps=LAYER_NORM_EPS)
        self.layers = nn.ModuleList(EncoderLayer(arch, dropout, index=i) for i in range(arch.num_layers))
        # the fused residual sites' mask seed: a step counter on the model's device (not saved)
        self.register_buffer("dropout_seed", torch.randint(0, 2**31, (), dtype=torch.int64), persistent=False)
        self.pooler = nn.Linear(h, h) if arch.pooler else None
        self.classifier = nn.Linear(h, max(arch.num_labels, 1))

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        t = input_ids.shape[1]
        positions = torch.arange(t, device=input_ids.device)
        # Without token types every token is segment 0 (BERT's default).
        segments = self.token_type.weight[0] if token_type_ids is None else self.token_type(token_type_ids)
        x = self.word(input_ids) + self.position(positions) + segments
        x = F.dropout(self.embed_norm(x), self.dropout if self.training else 0.0, self.training)
        if self.residual_dtype is not None:
            x = x.to(self.residual_dtype)
        if self.training:
            self.dropout_seed.add_(1)  # new masks every step (and every replay of a captured one)
        x_low = None
        for layer in self.layers:
            if self.checkpointing and self.training:
                x, x_low = checkpoint(layer, x, x_low, self.dropout_seed, use_reentrant=False)
            else:
                x, x_low = layer(x, x_low, self.dropout_seed)
        first = x[:, 0]
        pooled = first if self.pooler is None else torch.tanh(self.pooler(first))
        pooled = F.dropout(pooled, self.dropout if self.training else 0.0, self.training)
        return self.classifier(pooled)


def build_compact_encoder(
    arch: TransformerArch, *, device: torch.device, dtype: torch.dtype
) -> CompactEncoder:
    """The encoder on `device` in `dtype`, drawn like the default mode's models (N(0, 0.02))."""
    with torch.device(device):
        model = CompactEncoder(arch).to(dtype)
    init_transformer_weights_(model)
    return model
