"""The three model families in paddle.nn, built from the same arch objects the estimator reads.

ResNets come from paddle.vision.models (what Paddle users train); widths or block counts that
paddle.vision cannot express (the tiny variant) reuse its BasicBlock/BottleneckBlock with our
own stem and stage widths, so the layers are still Paddle's. BERT and Llama are compact
definitions with exactly the parameters `TransformerArch.param_count()` counts: that equality
is what lets estimate and measurement describe the same model.
"""

from __future__ import annotations

import math
from typing import Any

import paddle
import paddle.nn.functional as F
from paddle import nn
from paddle.vision.models import resnet as paddle_resnet

from fitbench.errors import FitbenchError
from fitbench.workloads.arch import RESNET_LAYERS, ResNetArch, TransformerArch

STANDARD_RESNETS = {18: "resnet18", 34: "resnet34", 50: "resnet50", 101: "resnet101", 152: "resnet152"}


def recompute_fn() -> Any:
    """Paddle's activation recomputation (checkpointing), or None when this build lacks it."""
    try:
        from paddle.distributed.fleet.utils import recompute
    except ImportError:
        return None
    return recompute


def trainable_param_count(model: nn.Layer) -> int:
    """Parameters that receive gradients.

    Paddle registers BatchNorm's running mean and variance as parameters with
    stop_gradient=True; torchvision keeps them as buffers. Counting trainable ones only makes
    both frameworks and the estimator agree. Shapes, not numel(), so lazily built (LazyGuard)
    models with no storage can be counted too.
    """
    return sum(math.prod(p.shape) for p in model.parameters() if not p.stop_gradient)


# -- ResNet -----------------------------------------------------------------------------------


class Recomputed(nn.Layer):
    """Runs a sub-layer under activation recomputation while training (checkpointing)."""

    def __init__(self, inner: nn.Layer, recompute: Any) -> None:
        super().__init__()
        self.inner = inner
        self._recompute = recompute

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        if self.training:
            return self._recompute(self.inner, x)
        return self.inner(x)


class CompactResNet(nn.Layer):
    """A ResNet with any base width and block counts, built from paddle.vision's own blocks.

    paddle.vision.models.ResNet fixes the stem at 64 channels and its `width` argument is the
    bottleneck's width per group (ResNeXt/Wide-ResNet), not the stage width the estimator's
    `base_width` scales; the layout here follows torchvision (stride on the 3x3 conv).
    """

    def __init__(self, arch: ResNetArch) -> None:
        super().__init__()
        block = paddle_resnet.BottleneckBlock if arch.block == "bottleneck" else paddle_resnet.BasicBlock
        w = arch.base_width
        self.conv1 = nn.Conv2D(arch.in_channels, w, kernel_size=7, stride=2, padding=3, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(w)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2D(kernel_size=3, stride=2, padding=1)
        inplanes = w
        stages = []
        for stage, blocks in enumerate(arch.block_counts):
            planes = w * 2**stage
            stride = 1 if stage == 0 else 2
            layers = []
            for b in range(blocks):
                s = stride if b == 0 else 1
                downsample = None
                if s != 1 or inplanes != planes * block.expansion:
                    downsample = nn.Sequential(
                        nn.Conv2D(inplanes, planes * block.expansion, 1, stride=s, bias_attr=False),
                        nn.BatchNorm2D(planes * block.expansion),
                    )
                layers.append(block(inplanes, planes, s, downsample))
                inplanes = planes * block.expansion
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2D((1, 1))
        self.fc = nn.Linear(inplanes, arch.num_classes)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(paddle.flatten(self.avgpool(x), 1))


def build_resnet(arch: ResNetArch, *, checkpointing: bool = False) -> tuple[nn.Layer, str]:
    """The model and a description of where it came from."""
    standard = (
        arch.depth in STANDARD_RESNETS
        and arch.base_width == 64
        and arch.in_channels == 3
        and arch.block_counts == RESNET_LAYERS[arch.depth][1]
    )
    if standard:
        name = STANDARD_RESNETS[arch.depth]
        model = getattr(paddle.vision.models, name)(num_classes=arch.num_classes)
        source = f"paddle.vision.models.{name}(num_classes={arch.num_classes})"
    else:
        model = CompactResNet(arch)
        source = (
            f"paddle.vision BottleneckBlock/BasicBlock, base width {arch.base_width}, "
            f"blocks {arch.block_counts}"
        )
    if checkpointing:
        recompute = recompute_fn()
        for name in ("layer1", "layer2", "layer3", "layer4"):
            setattr(model, name, Recomputed(getattr(model, name), recompute))
    return model, source


# -- Transformers ---------------------------------------------------------------------------


class RMSNorm(nn.Layer):
    """Llama's RMSNorm: weight only, statistics in fp32 even when the weights are half."""

    def __init__(self, size: int, epsilon: float = 1e-6) -> None:
        super().__init__()
        self.epsilon = epsilon
        self.weight = self.create_parameter(shape=[size], default_initializer=nn.initializer.Constant(1.0))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        dtype = x.dtype
        x32 = x.astype("float32")
        x32 = x32 * paddle.rsqrt(x32.pow(2).mean(axis=-1, keepdim=True) + self.epsilon)
        return self.weight * x32.astype(dtype)


def make_norm(arch: TransformerArch) -> nn.Layer:
    if arch.norm == "rmsnorm":
        return RMSNorm(arch.hidden_size)
    return nn.LayerNorm(arch.hidden_size, epsilon=1e-12 if arch.kind == "encoder" else 1e-5)


def rotate_half(x: paddle.Tensor) -> paddle.Tensor:
    x1, x2 = paddle.chunk(x, 2, axis=-1)
    return paddle.concat([-x2, x1], axis=-1)


def repeat_kv(x: paddle.Tensor, n_rep: int) -> paddle.Tensor:
    """[B, S, Hkv, D] -> [B, S, Hkv*n_rep, D] for grouped-query attention in the explicit form."""
    return x if n_rep == 1 else paddle.repeat_interleave(x, n_rep, axis=2)


class Attention(nn.Layer):
    """Multi-head (or grouped-query) self-attention in Paddle's [batch, seq, heads, head_dim] layout.

    `impl` is 'sdpa' (paddle.nn.functional.scaled_dot_product_attention, which picks a flash or
    memory-efficient kernel on GPU) or 'eager' (softmax(QK^T/sqrt(d) + mask)V, the score
    matrix materialised). The session sets it from the workload and the device.
    """

    def __init__(self, arch: TransformerArch, dropout: float) -> None:
        super().__init__()
        h = arch.hidden_size
        self.num_heads, self.kv_heads, self.head_dim = arch.num_heads, arch.kv_heads, arch.dim_head
        qkv_bias = None if arch.qkv_bias else False
        self.q_proj = nn.Linear(h, arch.q_dim, bias_attr=qkv_bias)
        self.k_proj = nn.Linear(h, arch.kv_dim, bias_attr=qkv_bias)
        self.v_proj = nn.Linear(h, arch.kv_dim, bias_attr=qkv_bias)
        self.o_proj = nn.Linear(arch.q_dim, h, bias_attr=None if arch.out_bias else False)
        # Query/key norms: per head (Qwen3, Gemma-3) or over all heads (OLMo-2, OLMoE).
        self.qk_norm = arch.qk_norm
        if arch.qk_norm == "head":
            self.q_norm, self.k_norm = RMSNorm(arch.dim_head), RMSNorm(arch.dim_head)
        elif arch.qk_norm == "full":
            self.q_norm, self.k_norm = RMSNorm(arch.q_dim), RMSNorm(arch.kv_dim)
        self.dropout = dropout
        self.impl = "eager"

    def forward(
        self,
        x: paddle.Tensor,
        mask: paddle.Tensor | None,
        causal: bool,
        rope: tuple[paddle.Tensor, paddle.Tensor] | None = None,
        cache: list[paddle.Tensor] | None = None,
    ) -> paddle.Tensor:
        b, s = x.shape[0], x.shape[1]
        q, k = self.q_proj(x), self.k_proj(x)
        if self.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.reshape([b, s, self.num_heads, self.head_dim])
        k = k.reshape([b, s, self.kv_heads, self.head_dim])
        v = self.v_proj(x).reshape([b, s, self.kv_heads, self.head_dim])
        if self.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            cos, sin = rope
            q = q * cos.astype(q.dtype) + rotate_half(q) * sin.astype(q.dtype)
            k = k * cos.astype(k.dtype) + rotate_half(k) * sin.astype(k.dtype)
        if cache is not None:
            # Grown by concatenation each token, as transformers' DynamicCache does.
            if cache:
                k = paddle.concat([cache[0], k], axis=1)
                v = paddle.concat([cache[1], v], axis=1)
            cache[:] = [k, v]
        causal = causal and s > 1
        if causal and k.shape[1] != s:
            raise ValueError("a multi-token chunk after a filled cache is not supported")
        p = self.dropout if self.training else 0.0
        if self.impl == "sdpa":
            if mask is not None:
                # [B, 1, 1, Sk] -> [B, 1, Sq, Sk], a shape every kernel SDPA may pick accepts
                mask = paddle.expand(mask.astype(q.dtype), [b, 1, s, k.shape[1]])
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, training=self.training
            )
        else:
            out = self._eager(q, k, v, mask, causal, p)
        return self.o_proj(out.reshape([b, s, self.num_heads * self.head_dim]))

    def _eager(
        self,
        q: paddle.Tensor,
        k: paddle.Tensor,
        v: paddle.Tensor,
        mask: paddle.Tensor | None,
        causal: bool,
        p: float,
    ) -> paddle.Tensor:
        n_rep = self.num_heads // self.kv_heads
        q = q.transpose([0, 2, 1, 3])
        k = repeat_kv(k, n_rep).transpose([0, 2, 1, 3])
        v = repeat_kv(v, n_rep).transpose([0, 2, 1, 3])
        scores = paddle.matmul(q, k, transpose_y=True) * (1.0 / math.sqrt(self.head_dim))
        if mask is not None:
            scores = scores + mask.astype(scores.dtype)
        if causal:
            s = q.shape[2]
            upper = paddle.triu(paddle.full([s, s], float("-inf"), dtype="float32"), diagonal=1)
            scores = scores + upper.astype(scores.dtype)
        probs = F.softmax(scores.astype("float32"), axis=-1).astype(q.dtype)
        if p:
            probs = F.dropout(probs, p, training=True)
        return paddle.matmul(probs, v).transpose([0, 2, 1, 3])


class MLP(nn.Layer):
    """GELU MLP (BERT, GPT-2) or SwiGLU (Llama): down(silu(gate(x)) * up(x))."""

    def __init__(self, arch: TransformerArch) -> None:
        super().__init__()
        h, f = arch.hidden_size, arch.intermediate_size
        bias = None if arch.mlp_bias else False
        self.swiglu = arch.mlp == "swiglu"
        if self.swiglu:
            self.gate_proj = nn.Linear(h, f, bias_attr=bias)
            self.up_proj = nn.Linear(h, f, bias_attr=bias)
            self.down_proj = nn.Linear(f, h, bias_attr=bias)
        else:
            self.fc1 = nn.Linear(h, f, bias_attr=bias)
            self.fc2 = nn.Linear(f, h, bias_attr=bias)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        if self.swiglu:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Layer):
    """One layer: post-LN for encoders (BERT), pre-norm for decoders (Llama, GPT-2); four norms a
    block (Gemma-2/3, GLM-4) also normalise the attention's and the MLP's outputs before their
    residual adds."""

    def __init__(self, arch: TransformerArch, dropout: float) -> None:
        super().__init__()
        self.post_norm = arch.kind == "encoder"
        self.attn = Attention(arch, dropout)
        self.mlp = MLP(arch)
        self.norm1 = make_norm(arch)
        self.norm2 = make_norm(arch)
        four = arch.norms_per_layer == 4
        self.attn_out_norm = make_norm(arch) if four else None
        self.mlp_out_norm = make_norm(arch) if four else None
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: paddle.Tensor,
        mask: paddle.Tensor | None = None,
        causal: bool = False,
        rope: tuple[paddle.Tensor, paddle.Tensor] | None = None,
        cache: list[paddle.Tensor] | None = None,
    ) -> paddle.Tensor:
        if self.post_norm:
            x = self.norm1(x + self.dropout(self.attn(x, mask, causal, rope, cache)))
            return self.norm2(x + self.dropout(self.mlp(x)))
        a = self.attn(self.norm1(x), mask, causal, rope, cache)
        x = x + (a if self.attn_out_norm is None else self.attn_out_norm(a))
        m = self.mlp(self.norm2(x))
        return x + (m if self.mlp_out_norm is None else self.mlp_out_norm(m))


class TransformerBody(nn.Layer):
    """Embeddings and the stack of blocks, shared by the encoder and the decoder."""

    def __init__(self, arch: TransformerArch, dropout: float, checkpointing: bool) -> None:
        super().__init__()
        self.arch = arch
        h = arch.hidden_size
        self.word_embeddings = nn.Embedding(arch.vocab_size, h)
        self.position_embeddings = nn.Embedding(arch.max_positions, h) if arch.position == "learned" else None
        self.token_type_embeddings = nn.Embedding(arch.type_vocab_size, h) if arch.type_vocab_size else None
        self.embedding_norm = make_norm(arch) if arch.kind == "encoder" else None
        self.embedding_dropout = nn.Dropout(dropout)
        self.layers = nn.LayerList([Block(arch, dropout) for _ in range(arch.num_layers)])
        self._recompute = recompute_fn() if checkpointing else None
        self._rope: dict[str, tuple[paddle.Tensor, paddle.Tensor]] = {}

    def set_attention(self, impl: str) -> None:
        for layer in self.layers:
            layer.attn.impl = impl

    def rope(self, start: int, length: int) -> tuple[paddle.Tensor, paddle.Tensor]:
        """cos/sin tables [1, length, 1, head_dim] for positions start..start+length (theta 10000).

        Built on first use and grown on demand, so that building the model creates parameters
        only (LazyGuard counts them without storage).
        """
        d = self.arch.dim_head
        cached = self._rope.get("tables")
        if cached is None or cached[0].shape[1] < start + length:
            n = max(start + length, 2 * (cached[0].shape[1] if cached else 0), 64)
            inv = 1.0 / (10000.0 ** (paddle.arange(0, d, 2, dtype="float32") / d))
            freqs = paddle.outer(paddle.arange(n, dtype="float32"), inv)
            emb = paddle.concat([freqs, freqs], axis=-1)
            cached = (emb.cos()[None, :, None, :], emb.sin()[None, :, None, :])
            self._rope["tables"] = cached
        return cached[0][:, start : start + length], cached[1][:, start : start + length]

    def forward(
        self,
        input_ids: paddle.Tensor,
        token_type_ids: paddle.Tensor | None = None,
        mask: paddle.Tensor | None = None,
        caches: list[list[paddle.Tensor]] | None = None,
        start: int = 0,
    ) -> paddle.Tensor:
        s = input_ids.shape[1]
        x = self.word_embeddings(input_ids)
        if self.position_embeddings is not None:
            x = x + self.position_embeddings(paddle.arange(start, start + s, dtype="int64"))[None]
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = paddle.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        if self.embedding_norm is not None:
            x = self.embedding_norm(x)
        x = self.embedding_dropout(x)
        causal = self.arch.kind == "decoder"
        rope = self.rope(start, s) if self.arch.position == "rotary" else None
        for i, layer in enumerate(self.layers):
            cache = caches[i] if caches is not None else None
            if self._recompute is not None and self.training:
                x = self._recompute(layer, x, mask, causal, rope, cache)
            else:
                x = layer(x, mask, causal, rope, cache)
        return x


class EncoderForSequenceClassification(nn.Layer):
    """BERT for sequence classification: body, tanh pooler on the first token, linear classifier."""

    def __init__(self, arch: TransformerArch, *, dropout: float = 0.1, checkpointing: bool = False) -> None:
        super().__init__()
        self.body = TransformerBody(arch, dropout, checkpointing)
        self.pooler = nn.Linear(arch.hidden_size, arch.hidden_size) if arch.pooler else None
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(arch.hidden_size, arch.num_labels)

    def forward(
        self,
        input_ids: paddle.Tensor,
        token_type_ids: paddle.Tensor | None = None,
        attention_mask: paddle.Tensor | None = None,
    ) -> paddle.Tensor:
        mask = None
        if attention_mask is not None:
            # [B, S] of 1/0 -> additive [B, 1, 1, S], broadcast over heads and query positions.
            mask = ((1.0 - attention_mask.astype("float32")) * -1e4)[:, None, None, :]
        x = self.body(input_ids, token_type_ids, mask)
        pooled = x[:, 0]
        if self.pooler is not None:
            pooled = paddle.tanh(self.pooler(pooled))
        return self.classifier(self.dropout(pooled))


class DecoderForCausalLM(nn.Layer):
    """Llama-style causal LM (or GPT-2-style with learned positions and LayerNorm), with a KV cache."""

    def __init__(self, arch: TransformerArch, *, dropout: float = 0.0, checkpointing: bool = False) -> None:
        super().__init__()
        self.arch = arch
        self.body = TransformerBody(arch, dropout, checkpointing)
        self.final_norm = make_norm(arch)
        self.lm_head = (
            None if arch.tie_embeddings else nn.Linear(arch.hidden_size, arch.vocab_size, bias_attr=False)
        )

    def new_cache(self) -> list[list[paddle.Tensor]]:
        return [[] for _ in range(self.arch.num_layers)]

    def forward(
        self,
        input_ids: paddle.Tensor,
        caches: list[list[paddle.Tensor]] | None = None,
        start: int = 0,
        last_only: bool = False,
    ) -> paddle.Tensor:
        x = self.final_norm(self.body(input_ids, caches=caches, start=start))
        if last_only:
            x = x[:, -1:]  # generation needs the next token's logits only
        if self.lm_head is None:
            return paddle.matmul(x, self.body.word_embeddings.weight, transpose_y=True)
        return self.lm_head(x)


def build_transformer(arch: TransformerArch, *, checkpointing: bool = False) -> tuple[nn.Layer, str]:
    if (
        arch.is_moe
        or arch.is_mla
        or arch.sliding_layers
        or arch.parallel_block
        or arch.norms_per_layer not in (2, 4)
        or arch.extra_params
        or arch.lm_head_bias
        or arch.norm == "nonparametric"
        or arch.position not in ("learned", "rotary")
        or arch.patch_size
        or arch.linear_layers
        or arch.mlp_free_layers
    ):
        raise FitbenchError(
            f"the paddle backend cannot build this {arch.model_type or arch.kind} (experts, "
            "latent attention, sliding windows, parallel blocks, other norm layouts, "
            "state-space or linear-attention layers, or blocks without an MLP)",
            "`fitbench estimate` covers it; run it with --backend torch where the torch "
            "backend builds it, or estimate only",
            message_zh=(
                f"paddle 后端无法构建这个 {arch.model_type or arch.kind}("
                "专家层、潜在注意力、滑动窗口、并行块、其他归一化布局、"
                "状态空间或线性注意力层,或没有 MLP 的块)"
            ),
            hint_zh=(
                "`fitbench estimate` 可以估算它;若 torch 后端能构建,请用 --backend torch 运行,否则只做估算"
            ),
        )
    if arch.kind == "encoder":
        return (
            EncoderForSequenceClassification(arch, checkpointing=checkpointing),
            "compact BERT-for-sequence-classification in paddle.nn (post-LN, dropout 0.1)",
        )
    return (
        DecoderForCausalLM(arch, checkpointing=checkpointing),
        f"compact {'Llama' if arch.position == 'rotary' else 'GPT'}-style causal LM in paddle.nn",
    )


def build_model(arch: ResNetArch | TransformerArch, *, checkpointing: bool = False) -> tuple[nn.Layer, str]:
    """The model for an arch, and where it came from (for the session's notes)."""
    if isinstance(arch, ResNetArch):
        return build_resnet(arch, checkpointing=checkpointing)
    return build_transformer(arch, checkpointing=checkpointing)


def param_count(arch: ResNetArch | TransformerArch) -> int:
    """Trainable parameters of the model `build_model` makes, without allocating its weights.

    paddle.LazyGuard delays parameter initialisation: the layers and their shapes exist, their
    storage does not, so Llama-7B is counted in milliseconds and a few kilobytes.
    """
    with paddle.LazyGuard():
        model, _ = build_model(arch)
    return trainable_param_count(model)
