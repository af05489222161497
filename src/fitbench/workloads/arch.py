"""Architectures as plain numbers, with exact parameter counts.

The counts are golden-tested against the reference implementations (torchvision ResNet,
transformers BertForSequenceClassification and LlamaForCausalLM), so that estimator and
backends provably describe the same model.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from fitbench.errors import FitbenchError

RESNET_LAYERS: dict[int, tuple[str, tuple[int, int, int, int]]] = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}


@dataclass(frozen=True, kw_only=True)
class ConvLayer:
    """One convolution (always followed by batch norm in ResNet) at a given input resolution."""

    name: str
    in_channels: int
    out_channels: int
    kernel: int
    stride: int
    in_hw: int  # input height = width

    @property
    def out_hw(self) -> int:
        padding = self.kernel // 2
        return (self.in_hw + 2 * padding - self.kernel) // self.stride + 1

    @property
    def params(self) -> int:
        """Conv weight (no bias) plus batch-norm gamma and beta."""
        return self.in_channels * self.out_channels * self.kernel**2 + 2 * self.out_channels

    def macs_per_sample(self) -> int:
        return self.out_hw**2 * self.out_channels * self.in_channels * self.kernel**2


@dataclass(frozen=True, kw_only=True)
class ResNetArch:
    """He et al. ResNet (torchvision layout: stride on the 3x3 conv, 'ResNet v1.5')."""

    depth: int = 50
    num_classes: int = 10
    base_width: int = 64
    in_channels: int = 3
    layers: tuple[int, int, int, int] | None = None  # override the depth's block counts (tiny models)

    def __post_init__(self) -> None:
        if self.layers is None and self.depth not in RESNET_LAYERS:
            raise FitbenchError(
                f"unsupported ResNet depth {self.depth}",
                "use 18, 34, 50, 101 or 152",
                message_zh=f"不支持的 ResNet 深度 {self.depth}",
                hint_zh="请使用 18、34、50、101 或 152",
            )
        if self.num_classes < 1 or self.base_width < 1:
            raise FitbenchError(
                "ResNet classes and width must be positive", message_zh="ResNet 的类别数和宽度必须为正数"
            )

    @property
    def block(self) -> str:
        return RESNET_LAYERS.get(self.depth, ("bottleneck" if self.depth >= 50 else "basic", None))[0]

    @property
    def block_counts(self) -> tuple[int, int, int, int]:
        return self.layers if self.layers is not None else RESNET_LAYERS[self.depth][1]

    @property
    def expansion(self) -> int:
        return 4 if self.block == "bottleneck" else 1

    @property
    def feature_dim(self) -> int:
        return self.base_width * 8 * self.expansion

    def convs(self, image_size: int) -> list[ConvLayer]:
        """Every convolution with its input resolution, in execution order (built once per
        architecture and size: the estimator and the size guide ask for it thousands of times)."""
        return list(_resnet_convs(self, image_size))

    def _build_convs(self, image_size: int) -> list[ConvLayer]:
        w = self.base_width
        hw = image_size
        out: list[ConvLayer] = []
        stem = ConvLayer(
            name="conv1", in_channels=self.in_channels, out_channels=w, kernel=7, stride=2, in_hw=hw
        )
        out.append(stem)
        hw = stem.out_hw
        hw = (hw + 2 - 3) // 2 + 1  # 3x3 max-pool, stride 2, padding 1
        inplanes = w
        for stage, blocks in enumerate(self.block_counts):
            planes = w * 2**stage
            for b in range(blocks):
                stride = 2 if (stage > 0 and b == 0) else 1
                prefix = f"layer{stage + 1}.{b}"
                if self.block == "bottleneck":
                    c1 = ConvLayer(
                        name=f"{prefix}.conv1",
                        in_channels=inplanes,
                        out_channels=planes,
                        kernel=1,
                        stride=1,
                        in_hw=hw,
                    )
                    c2 = ConvLayer(
                        name=f"{prefix}.conv2",
                        in_channels=planes,
                        out_channels=planes,
                        kernel=3,
                        stride=stride,
                        in_hw=hw,
                    )
                    c3 = ConvLayer(
                        name=f"{prefix}.conv3",
                        in_channels=planes,
                        out_channels=planes * 4,
                        kernel=1,
                        stride=1,
                        in_hw=c2.out_hw,
                    )
                    block = [c1, c2, c3]
                else:
                    c1 = ConvLayer(
                        name=f"{prefix}.conv1",
                        in_channels=inplanes,
                        out_channels=planes,
                        kernel=3,
                        stride=stride,
                        in_hw=hw,
                    )
                    c2 = ConvLayer(
                        name=f"{prefix}.conv2",
                        in_channels=planes,
                        out_channels=planes,
                        kernel=3,
                        stride=1,
                        in_hw=c1.out_hw,
                    )
                    block = [c1, c2]
                out.extend(block)
                if stride != 1 or inplanes != planes * self.expansion:
                    out.append(
                        ConvLayer(
                            name=f"{prefix}.downsample",
                            in_channels=inplanes,
                            out_channels=planes * self.expansion,
                            kernel=1,
                            stride=stride,
                            in_hw=hw,
                        )
                    )
                hw = block[-1].out_hw
                inplanes = planes * self.expansion
        return out

    @property
    def num_blocks(self) -> int:
        return sum(self.block_counts)

    def param_count(self) -> int:
        convs = sum(c.params for c in self.convs(224))
        fc = self.feature_dim * self.num_classes + self.num_classes
        return convs + fc

    def largest_layer_params(self) -> int:
        return max([c.params for c in self.convs(224)] + [self.feature_dim * self.num_classes])


@functools.lru_cache(maxsize=512)
def _resnet_convs(arch: ResNetArch, image_size: int) -> tuple[ConvLayer, ...]:
    return tuple(arch._build_convs(image_size))


# Families whose transformers code is another family's blocks, module for module, under a new
# name (with settings the architecture's own fields carry, such as OLMo-3's windows): the
# estimator's measured per-family rules (norm precision, kernels and host calls a block issues,
# the generation reserve's replay) are the twin's. The torch backend still builds the family's
# own transformers class.
RULE_TWINS = {
    "olmo3": "olmo2",
    "glm4_moe_lite": "deepseek_v3",  # DeepSeek-V3's latent attention with GLM-4.5's experts
    "kimi_k2": "deepseek_v3",  # DeepSeek-V3's blocks (transformers maps the type to them)
}

# Families whose attention output gate comes from a projection of its own (AFMoE's gate_proj)
# rather than from q_proj's doubled output (Qwen3-Next's, Qwen3.5's): the same weights, in two
# matrices and two GEMMs.
SEPARATE_OUTPUT_GATE_TYPES = ("afmoe",)

NORMS = ("layernorm", "rmsnorm", "nonparametric")
QK_NORMS = ("none", "head", "full")
# The recurrent mixers of TransformerArch.linear_layers: Qwen3-Next's and Qwen3.5's Gated DeltaNet,
# the Mamba-2 layer (state-space duality) of Granite 4.0-H and its kin, and LFM2's gated short
# convolution (no recurrent state, no key heads).
LINEAR_KINDS = ("gated_deltanet", "mamba2", "short_conv")
# transformers' chunk lengths where a config gives none: torch_chunk_gated_delta_rule's fixed 64,
# and GraniteMoeHybridConfig's mamba_chunk_size default (a short convolution has no chunks).
LINEAR_CHUNK_DEFAULTS = {"gated_deltanet": 64, "mamba2": 256, "short_conv": 1}


def expected_distinct_experts(num_experts: int, top_k: int, tokens: int) -> float:
    """Experts one MoE layer touches when `tokens` tokens each pick `top_k` of `num_experts`.

    With routing taken as uniform and independent per token, one expert is missed by all tokens
    with probability (1 - k/E)^tokens, so E * (1 - (1 - k/E)^tokens) experts are read: k for one
    token, close to E for a long prefill. Decoding a batch reads this many, not k.
    """
    if num_experts <= 0 or top_k <= 0:
        return 0.0
    if top_k >= num_experts:
        return float(num_experts)
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** max(tokens, 1))


# Decoder families whose transformers configs default to a residual dropout (resid_pdrop 0.1).
RESIDUAL_DROPOUT_TYPES = ("gpt2", "gpt_bigcode")


@dataclass(frozen=True, kw_only=True)
class TransformerArch:
    """A BERT-style encoder or a decoder of the Llama/GPT families, optionally with experts.

    kind            'encoder' (bidirectional, classification head) or 'decoder' (causal LM)
    num_kv_heads    < num_heads for grouped-query attention (Llama-2-70B, Mistral, Qwen2)
    mlp             'gelu' (two matrices, BERT/GPT-2) or 'swiglu' (three matrices, Llama)
    norm            'layernorm' (weight and bias), 'rmsnorm' (weight only) or 'nonparametric'
                    (OLMo's LayerNorm without weights)
    position        'learned' absolute embeddings, 'rotary' (no parameters) or 'none' (no position
                    signal in the attention: Granite 4.0-H's NoPE, order comes from the recurrent
                    layers)
    norms_per_layer 2 in most blocks; 1 where attention and MLP read one norm in parallel (GPT-J,
                    Falcon-7B); 4 with Gemma-2/3's post-norms
    parallel_block  attention and MLP in parallel on the same input (GPT-J, GPT-NeoX, Falcon)
    qk_norm         norms on queries and keys: 'head' (one head_dim weight each: Qwen3, Gemma-3)
                    or 'full' (over all heads: OLMo-2, OLMoE)
    lm_head_bias    GPT-J's LM head has a bias
    extra_params    parameters outside the modelled parts (DeBERTa's relative-position table)
    position_offset learned position rows before the first a token uses: RoBERTa numbers
                    positions from pad_token_id + 1, so its 514 rows hold 512 tokens
                    (`usable_positions`); the table is still `max_positions` rows

    Mixture of experts (num_experts > 0): layers from `dense_layers` on, every `moe_every`-th,
    replace the MLP by `num_experts` SwiGLU experts of width `expert_intermediate_size` of which
    `experts_per_token` run per token, a router Linear(hidden, experts), and shared experts of
    total width `shared_intermediate_size` that every token runs (with Qwen2-MoE's one-output
    `shared_expert_gate`; `expert_score_bias`: ERNIE-4.5's per-expert score correction;
    `router_bias`: gpt-oss's biased router). Experts carry biases where `mlp_bias` says (gpt-oss).
    `attention_sinks`: one learned logit per head that every softmax also normalises over
    (gpt-oss), a parameter per head and layer.
    Dense layers keep `intermediate_size`.

    Multi-head latent attention (kv_lora_rank > 0, DeepSeek-V2/V3): queries through an optional
    low-rank `q_lora_rank`, keys and values from a `kv_lora_rank` latent plus a shared
    `qk_rope_head_dim` rotary key; heads of `qk_nope_head_dim + qk_rope_head_dim` for scores and
    `v_head_dim` for values. The cache keeps the latent and the rotary key per token and layer.

    Vision transformers (patch_size > 0, ViT): the tokens are `patch_size`-square patches of a
    `num_channels` image projected by a convolution, plus a class token; `max_positions` is the
    patch count + 1; pre-norm blocks with a final LayerNorm and a classifier on the class token.

    Multimodal checkpoints (vision_params > 0): the language model these fields describe, plus
    the `vision_params` of a `vision_tower` encoder and its projector that transformers loads
    with it (workloads/multimodal.py). They are weights in memory; text prompts never run them,
    so they are outside the active parameters and every kernel.

    Sliding windows: `sliding_layers` of the layers attend to the last `sliding_window` tokens
    only (all of Mistral-7B v0.1's, every other of Gemma-2's, five of six of Gemma-3's).

    Gated linear attention (linear_layers > 0, Qwen3-Next and Qwen3.5's Gated DeltaNet): that
    many of the blocks mix tokens through a recurrent state instead of attention. Each projects
    the hidden state to queries and keys (`linear_key_heads` of `linear_key_head_dim`), values
    and an output gate (`linear_value_heads` of `linear_value_head_dim`) and two scalars a value
    head (the write strength and the decay), runs a causal depthwise convolution of width
    `linear_conv_kernel` over queries, keys and values, and keeps per sequence a state of
    value heads x key size x value size and the convolution's last inputs: a fixed size, no KV
    cache. The remaining `attention_layers` attend as usual; `attention_output_gate` doubles
    their query projection with a sigmoid gate on the attention output (Qwen3-Next's).

    LFM2's gated short convolutions (`linear_kind` 'short_conv') fill the value fields with one
    head of hidden-size channels and leave the key fields 0: `in_proj` makes B, C and x of the
    hidden size, a depthwise causal convolution of width `linear_conv_kernel` runs over B * x,
    C gates its output, `out_proj` maps it back (`linear_proj_bias` and `linear_conv_bias` both
    follow the config's conv_bias). The state is the convolution's last inputs, no recurrence.

    Mamba-2 layers (`linear_kind` 'mamba2': Granite 4.0-H) fill the same fields with the same
    shapes: `linear_value_heads` SSM heads of `linear_value_head_dim` channels (the inputs x,
    expand x hidden in all), `linear_key_heads` groups of B and C of `linear_key_head_dim` (the
    state size), one step size a head; the state is heads x head size x state size, the
    convolution runs over x, B and C. One `in_proj` makes the gate z, x, B, C and the step sizes
    (`linear_proj_bias`), the convolution has a bias (`linear_conv_bias`), a gated RMSNorm of
    expand x hidden precedes `out_proj`, and A, D and the step bias are one number a head. The
    chunk length of the chunked scan is `linear_chunk` (0: the kind's transformers default).

    Blocks without an MLP (`mlp_free_layers`, Nemotron-H): that many of the layers are a norm and
    a token mixer only. Nemotron-H's blocks are each one norm and one of a Mamba-2 mixer, an
    attention, an MLP or experts; a mixer block followed by an MLP block is one layer here (two
    norms, as a Llama block has), and the mixers no MLP follows are the MLP-free layers (one
    norm). The estimate counts the kinds, not their places: the last `mlp_free_layers` layers are
    the MLP-free ones (`is_mlp_free_layer`).

    `residual_dropout`: a decoder's dropout on its blocks' attention and MLP outputs in training
    (GPT-2's and GPT-BigCode's `resid_pdrop`); None for its family's default
    (`residual_dropout_p`).
    """

    kind: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    num_kv_heads: int | None = None
    head_dim: int | None = None
    max_positions: int = 2048
    position_offset: int = 0
    type_vocab_size: int = 0
    num_labels: int = 2
    mlp: str = "gelu"
    norm: str = "layernorm"
    position: str = "learned"
    qkv_bias: bool = True
    out_bias: bool = True
    mlp_bias: bool = True
    tie_embeddings: bool = False
    pooler: bool = True
    model_type: str = ""
    norms_per_layer: int = 2
    parallel_block: bool = False
    qk_norm: str = "none"
    lm_head_bias: bool = False
    extra_params: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    expert_intermediate_size: int = 0
    shared_intermediate_size: int = 0
    shared_expert_gate: bool = False
    dense_layers: int = 0
    moe_every: int = 1
    expert_score_bias: bool = False
    router_bias: bool = False
    attention_sinks: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int | None = None
    sliding_layers: int = 0
    patch_size: int = 0
    num_channels: int = 3
    vision_params: int = 0
    vision_tower: str = ""
    residual_dropout: float | None = None
    linear_layers: int = 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    linear_kind: str = "gated_deltanet"
    linear_chunk: int = 0
    linear_conv_bias: bool = False
    linear_proj_bias: bool = False
    attention_output_gate: bool = False
    mlp_free_layers: int = 0

    def __post_init__(self) -> None:
        self._check_counts()
        if self.kind not in ("encoder", "decoder"):
            raise FitbenchError(
                f"unknown transformer kind '{self.kind}'",
                "use 'encoder' or 'decoder'",
                message_zh=f"未知的 transformer 类型 '{self.kind}'",
                hint_zh="请使用 'encoder' 或 'decoder'",
            )
        if self.head_dim is None and not self.is_mla and self.hidden_size % self.num_heads:
            raise FitbenchError(
                f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}",
                "fix the config or give head_dim explicitly",
                message_zh=f"hidden_size {self.hidden_size} 不能被 num_heads {self.num_heads} 整除",
                hint_zh="请修正配置,或显式给出 head_dim",
            )
        if self.kv_heads < 1 or self.num_heads % self.kv_heads:
            raise FitbenchError(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.kv_heads}",
                "grouped-query attention needs num_heads divisible by num_key_value_heads",
                message_zh=f"num_heads {self.num_heads} 不是 num_kv_heads {self.kv_heads} 的整数倍",
                hint_zh="分组查询注意力要求 num_heads 能被 num_key_value_heads 整除",
            )
        if self.mlp not in ("gelu", "swiglu") or self.norm not in NORMS or self.qk_norm not in QK_NORMS:
            raise FitbenchError(
                f"unsupported mlp '{self.mlp}', norm '{self.norm}' or qk norm '{self.qk_norm}'",
                message_zh=f"不支持的 mlp '{self.mlp}'、norm '{self.norm}' 或 qk norm '{self.qk_norm}'",
            )
        self._check_experts()
        if self.is_mla and (
            self.qk_rope_head_dim < 1
            or self.qk_nope_head_dim + self.qk_rope_head_dim < 1
            or self.v_head_dim < 1
        ):
            raise FitbenchError(
                "latent attention needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim",
                "give all three with kv_lora_rank",
                message_zh="潜在注意力需要 qk_rope_head_dim、qk_nope_head_dim 和 v_head_dim",
                hint_zh="请与 kv_lora_rank 一起给出这三项",
            )
        if self.sliding_window is not None and (
            isinstance(self.sliding_window, bool)
            or not isinstance(self.sliding_window, int)
            or self.sliding_window < 1
        ):
            raise FitbenchError(
                f"sliding_window must be a positive whole number, got {self.sliding_window!r}",
                message_zh=f"sliding_window 必须是正整数,实际为 {self.sliding_window!r}",
            )
        if self.sliding_layers > self.num_layers:
            raise FitbenchError(
                f"{self.sliding_layers} sliding-window layers of {self.num_layers} layers",
                message_zh=f"{self.num_layers} 层中有 {self.sliding_layers} 层滑动窗口层,数量不合理",
            )
        self._check_linear_attention()
        self._check_mlp_free_layers()

    def _check_mlp_free_layers(self) -> None:
        """MLP-free layers are some of a pre-norm decoder's layers (two norms a block, one of them
        the MLP's)."""
        if not self.mlp_free_layers:
            return
        if self.mlp_free_layers > self.num_layers:
            raise FitbenchError(
                f"{self.mlp_free_layers} layers without an MLP of {self.num_layers} layers",
                message_zh=f"{self.num_layers} 层中有 {self.mlp_free_layers} 层没有 MLP,数量不合理",
            )
        if self.kind != "decoder" or self.norms_per_layer != 2 or self.parallel_block:
            raise FitbenchError(
                "layers without an MLP belong to a pre-norm decoder with two norms a block",
                message_zh="没有 MLP 的层只属于每块两个归一化层的前置归一化解码器",
            )

    def _check_linear_attention(self) -> None:
        """Linear-attention layers are some of the layers, with every size of theirs given."""
        if self.linear_kind not in LINEAR_KINDS:
            raise FitbenchError(
                f"unknown linear-attention kind '{self.linear_kind}'",
                f"use one of {', '.join(LINEAR_KINDS)}",
                message_zh=f"未知的线性注意力类型 '{self.linear_kind}'",
                hint_zh=f"请使用 {'、'.join(LINEAR_KINDS)} 之一",
            )
        if not self.linear_layers:
            return
        if self.linear_layers > self.num_layers:
            raise FitbenchError(
                f"{self.linear_layers} linear-attention layers of {self.num_layers} layers",
                message_zh=f"{self.num_layers} 层中有 {self.linear_layers} 层线性注意力层,数量不合理",
            )
        keyed = self.linear_kind != "short_conv"  # a short convolution has channels, no keys
        sizes = (self.linear_value_heads, self.linear_value_head_dim, self.linear_conv_kernel)
        if keyed:
            sizes += (self.linear_key_heads, self.linear_key_head_dim)
        if min(sizes) < 1 or (keyed and self.linear_value_heads % self.linear_key_heads):
            raise FitbenchError(
                "linear attention needs its head counts and sizes and its convolution width, "
                "with the value heads a multiple of the key heads",
                "give linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, "
                "linear_value_head_dim and linear_conv_kernel_dim",
                message_zh="线性注意力需要头数、头维度和卷积宽度,且值头数须为键头数的整数倍",
                hint_zh=(
                    "请给出 linear_num_key_heads、linear_num_value_heads、linear_key_head_dim、"
                    "linear_value_head_dim 和 linear_conv_kernel_dim"
                ),
            )

    def _check_counts(self) -> None:
        """Sizes and counts are whole numbers (positive where a model cannot do without them)."""
        for field_name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size"):
            value = getattr(self, field_name)
            least = 0 if field_name == "vocab_size" and self.patch_size else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise FitbenchError(
                    f"{field_name} must be a positive whole number, got {value!r}",
                    message_zh=f"{field_name} 必须是正整数,实际为 {value!r}",
                )
        for field_name in ("patch_size", "num_channels"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise FitbenchError(
                    f"{field_name} must be a whole number >= 0, got {value!r}",
                    message_zh=f"{field_name} 必须是 >= 0 的整数,实际为 {value!r}",
                )
        if self.patch_size and self.kind != "encoder":
            raise FitbenchError(
                "patch embeddings (patch_size) belong to an encoder",
                message_zh="patch 嵌入(patch_size)只属于编码器",
            )
        for field_name in (
            "norms_per_layer",
            "extra_params",
            "num_experts",
            "experts_per_token",
            "expert_intermediate_size",
            "shared_intermediate_size",
            "dense_layers",
            "q_lora_rank",
            "kv_lora_rank",
            "qk_rope_head_dim",
            "qk_nope_head_dim",
            "v_head_dim",
            "sliding_layers",
            "position_offset",
            "vision_params",
            "linear_layers",
            "linear_key_heads",
            "linear_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_conv_kernel",
            "linear_chunk",
            "mlp_free_layers",
        ):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise FitbenchError(
                    f"{field_name} must be a whole number >= 0, got {value!r}",
                    message_zh=f"{field_name} 必须是 >= 0 的整数,实际为 {value!r}",
                )
        if self.position_offset and self.position_offset >= self.max_positions:
            raise FitbenchError(
                f"a position offset of {self.position_offset} leaves none of the "
                f"{self.max_positions} positions for tokens",
                "check pad_token_id against max_position_embeddings",
                message_zh=(
                    f"位置偏移 {self.position_offset} 使 {self.max_positions} 个位置中没有一个留给 token"
                ),
                hint_zh="请核对 pad_token_id 与 max_position_embeddings",
            )

    def _check_experts(self) -> None:
        """A mixture of experts routes each token to some of its experts, of a known width."""
        if not self.num_experts:
            return
        if not 1 <= self.experts_per_token <= self.num_experts:
            raise FitbenchError(
                f"{self.experts_per_token} experts per token of {self.num_experts} is not possible",
                "experts per token (num_experts_per_tok) must be between 1 and the number of experts",
                message_zh=(
                    f"{self.num_experts} 个专家中每个 token 选 {self.experts_per_token} 个是不可能的"
                ),
                hint_zh="每个 token 的专家数(num_experts_per_tok)必须在 1 到专家总数之间",
            )
        if self.expert_intermediate_size < 1:
            raise FitbenchError(
                "a mixture-of-experts model needs the experts' width",
                "give moe_intermediate_size (or intermediate_size) in the config",
                message_zh="混合专家模型需要给出专家的宽度",
                hint_zh="请在配置中给出 moe_intermediate_size(或 intermediate_size)",
            )
        if self.moe_every < 1 or self.dense_layers > self.num_layers:
            raise FitbenchError(
                f"MoE layer spacing {self.moe_every} or {self.dense_layers} dense "
                f"layers do not fit {self.num_layers} layers",
                message_zh=(
                    f"MoE 层间隔 {self.moe_every} 或 {self.dense_layers} 个稠密层与 "
                    f"{self.num_layers} 层不匹配"
                ),
            )

    @property
    def usable_positions(self) -> int:
        """The longest sequence the position table numbers: `max_positions` less the rows
        before the first used one (RoBERTa: 514 - 2 = 512). The sequence checks and the
        longest-context search cap here; parameter counts keep every row."""
        return self.max_positions - self.position_offset

    @property
    def transformers_type(self) -> str:
        """model_type as transformers spells it (hf_config keeps the config's with dashes): the
        key backends/torch/family_configs builds the family's model by (the estimator's rules
        look up rules_type)."""
        return self.model_type.lower().replace("-", "_")

    @property
    def rules_type(self) -> str:
        """transformers_type, or the family whose blocks these are (RULE_TWINS): the key the
        estimator's per-family rules look up."""
        return RULE_TWINS.get(self.transformers_type, self.transformers_type)

    @property
    def residual_dropout_p(self) -> float:
        """The decoder blocks' residual dropout in training: the config's, else transformers'
        default for the family (GPT2Config's and GPTBigCodeConfig's resid_pdrop, 0.1; none for
        the rest). Each block then keeps a bool mask for each of its two outputs."""
        if self.residual_dropout is not None:
            return self.residual_dropout
        gpt2_like = not self.rules_type and self.position == "learned"
        family = self.rules_type in RESIDUAL_DROPOUT_TYPES or gpt2_like
        return 0.1 if self.kind == "decoder" and family else 0.0

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads if self.num_kv_heads is not None else self.num_heads

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def dim_head(self) -> int:
        if self.is_mla:
            return self.qk_nope_head_dim + self.qk_rope_head_dim
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_heads

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.dim_head

    @property
    def kv_dim(self) -> int:
        """Width of one of K or V per token (MLA: the mean of the decompressed K and V)."""
        if self.is_mla:
            return self.num_heads * (self.dim_head + self.v_head_dim) // 2
        return self.kv_heads * self.dim_head

    @property
    def attention_layers(self) -> int:
        """Blocks that attend (and keep a KV cache): all but the linear-attention ones."""
        return self.num_layers - self.linear_layers

    @property
    def linear_key_dim(self) -> int:
        return self.linear_key_heads * self.linear_key_head_dim

    @property
    def linear_value_dim(self) -> int:
        return self.linear_value_heads * self.linear_value_head_dim

    @property
    def linear_conv_dim(self) -> int:
        """Channels of a linear-attention layer's convolution: its queries, keys and values."""
        return 2 * self.linear_key_dim + self.linear_value_dim

    def linear_state_elements(self) -> tuple[int, int]:
        """(recurrent, convolution) state elements one linear-attention layer keeps per sequence:
        value heads x key size x value size, and the last `linear_conv_kernel` inputs of each
        convolution channel (transformers' LinearAttentionLayer)."""
        recurrent = self.linear_value_heads * self.linear_key_head_dim * self.linear_value_head_dim
        return recurrent, self.linear_conv_dim * self.linear_conv_kernel

    @property
    def attn_out_dim(self) -> int:
        """Input width of the output projection (MLA: heads x v_head_dim)."""
        return self.num_heads * self.v_head_dim if self.is_mla else self.q_dim

    def kv_elements_per_token(self) -> int:
        """Cache elements one layer keeps per token: K and V, or MLA's latent plus rotary key."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_dim

    def cached_tokens(self, tokens: int, prompt_tokens: int = 0) -> float:
        """Token slots the cache's tensors hold, summed over the attention layers (linear-attention
        layers keep a fixed state instead), at their largest while a sequence grows to `tokens`
        after a prompt of `prompt_tokens`.

        transformers' DynamicSlidingWindowLayer (cache_utils.py) concatenates the new keys to
        the cache, attends over the result, then keeps its last `sliding_window - 1` tokens as a
        view: a window-long tensor stays allocated while decoding, and after a prompt longer than
        the window the view keeps the whole prompt's K/V alive until that layer's next update.
        The peak is the larger of the moment after the prefill (every layer holds the prompt)
        and the end of the generation (sliding layers hold the window).
        """
        if self.sliding_window is None or not self.sliding_layers:
            return float(self.attention_layers * tokens)
        full = self.attention_layers - self.sliding_layers
        end = full * tokens + self.sliding_layers * min(tokens, self.sliding_window)
        return float(max(end, self.attention_layers * min(prompt_tokens, tokens)))

    def attended_tokens(self, context: int) -> float:
        """Keys one query attends to, averaged over layers (sliding layers see the window)."""
        if self.sliding_window is None or not self.sliding_layers:
            return float(context)
        local = min(context, self.sliding_window)
        full = self.num_layers - self.sliding_layers
        return (full * context + self.sliding_layers * local) / self.num_layers

    # -- layers ---------------------------------------------------------------------------------
    def is_mlp_free_layer(self, i: int) -> bool:
        """Block i has no MLP (Nemotron-H's mixers without an MLP block after them): the last
        `mlp_free_layers` blocks."""
        return i >= self.mlp_layers

    @property
    def mlp_layers(self) -> int:
        """Blocks with an MLP or experts."""
        return self.num_layers - self.mlp_free_layers

    @property
    def block_norms(self) -> int:
        """Norms inside the blocks: `norms_per_layer` a block, one fewer in an MLP-free block."""
        return self.num_layers * self.norms_per_layer - self.mlp_free_layers

    def is_moe_layer(self, i: int) -> bool:
        """Block i holds experts: from `dense_layers` on, where (i + 1) is a multiple of `moe_every`
        (Qwen-MoE's decoder_sparse_step, ERNIE-4.5's moe_layer_interval; DeepSeek's
        first_k_dense_replace is `dense_layers`), among the blocks with an MLP."""
        return self.is_moe and self.dense_layers <= i < self.mlp_layers and (i + 1) % self.moe_every == 0

    @property
    def moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        k = self.moe_every
        # multiples of k in [dense_layers + 1, mlp_layers]
        return max(self.mlp_layers // k - self.dense_layers // k, 0)

    @property
    def dense_mlp_layers(self) -> int:
        return self.mlp_layers - self.moe_layers

    # -- parameter counts -------------------------------------------------------------------
    def norm_params(self, width: int | None = None) -> int:
        w = self.hidden_size if width is None else width
        return {"layernorm": 2 * w, "rmsnorm": w, "nonparametric": 0}[self.norm]

    def attention_linears(self) -> list[tuple[str, int, int]]:
        """(name, in, out) of one block's attention matrices."""
        h = self.hidden_size
        if self.is_mla:
            rope, qk = self.qk_rope_head_dim, self.dim_head
            mats = (
                [("q_a_proj", h, self.q_lora_rank), ("q_b_proj", self.q_lora_rank, self.num_heads * qk)]
                if self.q_lora_rank
                else [("q_proj", h, self.num_heads * qk)]
            )
            kv_out = self.num_heads * (self.qk_nope_head_dim + self.v_head_dim)
            return [
                *mats,
                ("kv_a_proj", h, self.kv_lora_rank + rope),
                ("kv_b_proj", self.kv_lora_rank, kv_out),
                ("o_proj", self.attn_out_dim, h),
            ]
        separate = self.attention_output_gate and self.rules_type in SEPARATE_OUTPUT_GATE_TYPES
        fused = self.attention_output_gate and not separate
        return [
            ("q_proj", h, self.q_dim * (2 if fused else 1)),
            ("k_proj", h, self.kv_dim),
            ("v_proj", h, self.kv_dim),
            *([("output_gate_proj", h, self.q_dim)] if separate else []),
            ("o_proj", self.q_dim, h),
        ]

    def linear_attention_linears(self) -> list[tuple[str, int, int]]:
        """(name, in, out) of one linear-attention block's matrices (Qwen3.5's names; Qwen3-Next
        fuses in_proj_qkv with in_proj_z and in_proj_b with in_proj_a, the same weights; a Mamba-2
        layer's in_proj makes z, x, B, C and the step sizes at once)."""
        if not self.linear_layers:
            return []
        h, heads, values = self.hidden_size, self.linear_value_heads, self.linear_value_dim
        if self.linear_kind == "mamba2":
            return [("in_proj", h, values + self.linear_conv_dim + heads), ("out_proj", values, h)]
        if self.linear_kind == "short_conv":
            return [("in_proj", h, 3 * values), ("out_proj", values, h)]
        return [
            ("in_proj_qkv", h, self.linear_conv_dim),
            ("in_proj_z", h, values),
            ("in_proj_b", h, heads),
            ("in_proj_a", h, heads),
            ("out_proj", values, h),
        ]

    def linear_attention_params(self) -> int:
        """One linear-attention block's mixer: its matrices, the depthwise convolution (no bias),
        the decay's A_log and dt_bias per value head, and the gated norm's weight of value size.
        A Mamba-2 layer: its two matrices and their biases, the convolution and its bias, A_log,
        D and dt_bias per head, and the gated norm over all heads' channels. A short convolution:
        its two matrices, their biases and the convolution's, nothing per head."""
        if not self.linear_layers:
            return 0
        weights = sum(fin * fout for _, fin, fout in self.linear_attention_linears())
        conv = self.linear_conv_dim * self.linear_conv_kernel
        if self.linear_kind in ("mamba2", "short_conv"):
            outputs = sum(fout for _, _, fout in self.linear_attention_linears())
            biases = outputs if self.linear_proj_bias else 0
            conv += self.linear_conv_dim if self.linear_conv_bias else 0
            if self.linear_kind == "short_conv":
                return weights + biases + conv
            return weights + biases + conv + 3 * self.linear_value_heads + self.linear_value_dim
        return weights + conv + 2 * self.linear_value_heads + self.linear_value_head_dim

    @property
    def linear_chunk_size(self) -> int:
        """Tokens a chunk of the linear-attention layers' chunked scan: `linear_chunk`, or the
        kind's transformers default."""
        return self.linear_chunk or LINEAR_CHUNK_DEFAULTS[self.linear_kind]

    def is_linear_attention_layer(self, i: int) -> bool:
        """Block i mixes by linear attention: every block but each k-th, k = layers / attention
        layers (Qwen3-Next and Qwen3.5: three of four). The estimate counts the kinds, not their
        places, so any placement with these counts is the same model."""
        if not self.linear_layers:
            return False
        n, a = self.num_layers, self.attention_layers
        return (i + 1) * a // n == i * a // n  # whole numbers: block i ends no period

    def mixer_params_at(self, i: int) -> int:
        """Block i's token mixer: attention or linear attention."""
        return (
            self.linear_attention_params() if self.is_linear_attention_layer(i) else self.attention_params()
        )

    def mixers_params(self) -> int:
        """Every block's token mixer."""
        return (
            self.attention_layers * self.attention_params()
            + self.linear_layers * self.linear_attention_params()
        )

    def mixer_linear_params(self) -> int:
        """Matrix weights of every block's token mixer."""
        attn = sum(fin * fout for _, fin, fout in self.attention_linears())
        linear = sum(fin * fout for _, fin, fout in self.linear_attention_linears())
        return self.attention_layers * attn + self.linear_layers * linear

    def attention_params(self) -> int:
        h = self.hidden_size
        weights = sum(fin * fout for _, fin, fout in self.attention_linears())
        if self.is_mla:
            biases = (self.q_lora_rank + self.kv_lora_rank + self.qk_rope_head_dim) if self.qkv_bias else 0
            norms = self.norm_params(self.kv_lora_rank) + (
                self.norm_params(self.q_lora_rank) if self.q_lora_rank else 0
            )
            return weights + biases + norms + (h if self.out_bias else 0)
        biases = (self.q_dim + 2 * self.kv_dim if self.qkv_bias else 0) + (h if self.out_bias else 0)
        qk = {
            "none": 0,
            "head": 2 * self.norm_params(self.dim_head),
            "full": self.norm_params(self.q_dim) + self.norm_params(self.kv_dim),
        }[self.qk_norm]
        sinks = self.num_heads if self.attention_sinks else 0
        return weights + biases + qk + sinks

    def _ffn_params(self, f: int) -> int:
        h = self.hidden_size
        if self.mlp == "swiglu":
            return 3 * h * f + ((2 * f + h) if self.mlp_bias else 0)
        return 2 * h * f + ((f + h) if self.mlp_bias else 0)

    def mlp_params(self) -> int:
        """A dense block's MLP."""
        return self._ffn_params(self.intermediate_size)

    def moe_params(self, experts: int | None = None) -> int:
        """An MoE block's MLP with `experts` routed experts (default: all of them)."""
        n = self.num_experts if experts is None else experts
        h = self.hidden_size
        shared = self._ffn_params(self.shared_intermediate_size) if self.shared_intermediate_size else 0
        gate = h if self.shared_expert_gate else 0
        bias = self.num_experts if self.expert_score_bias else 0  # ERNIE-4.5's e_score_correction_bias
        router = h * self.num_experts + (self.num_experts if self.router_bias else 0)
        return n * self._ffn_params(self.expert_intermediate_size) + router + shared + gate + bias

    def layer_params_at(self, i: int, *, active: bool = False) -> int:
        """Block i: attention, MLP or experts (only the active ones if `active`), norms."""
        if self.is_mlp_free_layer(i):
            return self.mixer_params_at(i) + (self.norms_per_layer - 1) * self.norm_params()
        if self.is_moe_layer(i):
            mlp = self.moe_params(self.experts_per_token if active else None)
        else:
            mlp = self.mlp_params()
        return self.mixer_params_at(i) + mlp + self.norms_per_layer * self.norm_params()

    def layer_params(self) -> int:
        """The largest block (every block, for a model without experts)."""
        mixer = max(self.attention_params() if self.attention_layers else 0, self.linear_attention_params())
        dense = mixer + self.mlp_params() + self.norms_per_layer * self.norm_params()
        if not self.moe_layers:
            return dense if self.mlp_layers else mixer + (self.norms_per_layer - 1) * self.norm_params()
        moe = mixer + self.moe_params() + self.norms_per_layer * self.norm_params()
        return max(moe, dense) if self.dense_mlp_layers else moe

    def layers_params(self, *, active: bool = False) -> int:
        norms = self.block_norms * self.norm_params()
        total = self.mixers_params() + norms + self.dense_mlp_layers * self.mlp_params()
        if self.moe_layers:
            total += self.moe_layers * self.moe_params(self.experts_per_token if active else None)
        return total

    def linear_params_per_layer(self) -> int:
        """Matrix weights of one block (what int8/int4 and LoRA act on): no biases, no norms. With
        experts, the mean block's (every expert's matrices are cast and stored)."""
        if self.is_moe or self.linear_layers or self.mlp_free_layers:
            return self.linear_params() // self.num_layers
        h, f = self.hidden_size, self.intermediate_size
        attn = sum(fin * fout for _, fin, fout in self.attention_linears())
        mlp = (3 if self.mlp == "swiglu" else 2) * h * f
        return attn + mlp

    def linear_params(self) -> int:
        """Matrix weights of every block, every expert included."""
        mats = 3 if self.mlp == "swiglu" else 2
        h = self.hidden_size
        moe = mats * h * (self.num_experts * self.expert_intermediate_size + self.shared_intermediate_size)
        return (
            self.mixer_linear_params()
            + self.dense_mlp_layers * mats * h * self.intermediate_size
            + self.moe_layers * moe
        )

    def embedding_params(self) -> int:
        h = self.hidden_size
        if self.patch_size:
            # patch projection (a convolution with bias), class token, position embeddings
            return self.num_channels * self.patch_size**2 * h + h + h + self.max_positions * h
        emb = self.vocab_size * h
        if self.position == "learned":
            emb += self.max_positions * h
        if self.type_vocab_size:
            emb += self.type_vocab_size * h
        if self.kind == "encoder":
            emb += self.norm_params()  # BERT's embedding LayerNorm
        return emb

    def head_params(self) -> int:
        h = self.hidden_size
        if self.kind == "encoder":
            pooler = h * h + h if self.pooler else 0
            final_norm = self.norm_params() if self.patch_size else 0  # ViT's last LayerNorm
            return final_norm + pooler + h * self.num_labels + self.num_labels
        final_norm = self.norm_params()
        lm_head = 0 if self.tie_embeddings else self.vocab_size * h
        return final_norm + lm_head + (self.vocab_size if self.lm_head_bias else 0)

    def param_count(self) -> int:
        """Every parameter the checkpoint loads (a multimodal one's vision tower included)."""
        return self.language_param_count() + self.vision_params

    def language_param_count(self) -> int:
        """The language (or encoder) model's parameters: what `fitbench run` builds and trains."""
        return self.embedding_params() + self.layers_params() + self.head_params() + self.extra_params

    def active_param_count(self) -> int:
        """Parameters one token runs through: every shared part plus top-k experts per MoE layer
        (a vision tower is not run by text)."""
        outside = self.embedding_params() + self.head_params() + self.extra_params
        return outside + self.layers_params(active=True)

    def largest_layer_params(self) -> int:
        return max(self.layer_params(), self.vocab_size * self.hidden_size)


def layer_types(arch: TransformerArch, period: int) -> list[str] | None:
    """Which layers attend to a window: `arch.sliding_layers` of them, in the family's pattern
    (every layer but each `period`-th; period 1: the first `sliding_layers`). The estimate counts
    the sliding layers, not their places, so any placement with that count is the same model."""
    if not arch.sliding_layers:
        return None
    if period > 1:
        types = [
            "full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(arch.num_layers)
        ]
        if types.count("sliding_attention") == arch.sliding_layers:
            return types
    return [
        "sliding_attention" if i < arch.sliding_layers else "full_attention" for i in range(arch.num_layers)
    ]
