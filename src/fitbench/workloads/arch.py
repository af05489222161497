"""Architectures as plain numbers, with exact parameter counts.

The counts are golden-tested against the reference implementations (torchvision ResNet,
transformers BertForSequenceClassification and LlamaForCausalLM), so that estimator and
backends provably describe the same model.
"""

from __future__ import annotations

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
            raise FitbenchError(f"unsupported ResNet depth {self.depth}", "use 18, 34, 50, 101 or 152")
        if self.num_classes < 1 or self.base_width < 1:
            raise FitbenchError("ResNet classes and width must be positive")

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
        """Every convolution with its input resolution, in execution order."""
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


@dataclass(frozen=True, kw_only=True)
class TransformerArch:
    """A BERT-style encoder or a Llama/GPT-style decoder.

    kind            'encoder' (bidirectional, classification head) or 'decoder' (causal LM)
    num_kv_heads    < num_heads for grouped-query attention (Llama-2-70B, Mistral, Qwen2)
    mlp             'gelu' (two matrices, BERT/GPT-2) or 'swiglu' (three matrices, Llama)
    norm            'layernorm' (weight and bias) or 'rmsnorm' (weight only)
    position        'learned' absolute embeddings or 'rotary' (no parameters)
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

    def __post_init__(self) -> None:
        for field_name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size"):
            if getattr(self, field_name) < 1:
                raise FitbenchError(f"{field_name} must be positive, got {getattr(self, field_name)}")
        if self.kind not in ("encoder", "decoder"):
            raise FitbenchError(f"unknown transformer kind '{self.kind}'", "use 'encoder' or 'decoder'")
        if self.head_dim is None and self.hidden_size % self.num_heads:
            raise FitbenchError(
                f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}",
                "fix the config or give head_dim explicitly",
            )
        if self.kv_heads < 1 or self.num_heads % self.kv_heads:
            raise FitbenchError(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.kv_heads}",
                "grouped-query attention needs num_heads divisible by num_key_value_heads",
            )
        if self.mlp not in ("gelu", "swiglu") or self.norm not in ("layernorm", "rmsnorm"):
            raise FitbenchError(f"unsupported mlp '{self.mlp}' or norm '{self.norm}'")

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads if self.num_kv_heads is not None else self.num_heads

    @property
    def dim_head(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_heads

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.dim_head

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.dim_head

    # -- parameter counts -------------------------------------------------------------------
    def norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    def attention_params(self) -> int:
        h = self.hidden_size
        weights = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        biases = (self.q_dim + 2 * self.kv_dim if self.qkv_bias else 0) + (h if self.out_bias else 0)
        return weights + biases

    def mlp_params(self) -> int:
        h, f = self.hidden_size, self.intermediate_size
        if self.mlp == "swiglu":
            return 3 * h * f + ((2 * f + h) if self.mlp_bias else 0)
        return 2 * h * f + ((f + h) if self.mlp_bias else 0)

    def layer_params(self) -> int:
        """One transformer block: attention, MLP and two norms."""
        return self.attention_params() + self.mlp_params() + 2 * self.norm_params()

    def linear_params_per_layer(self) -> int:
        """Matrix weights of one block (what int8/int4 and LoRA act on): no biases, no norms."""
        h, f = self.hidden_size, self.intermediate_size
        attn = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        mlp = (3 if self.mlp == "swiglu" else 2) * h * f
        return attn + mlp

    def embedding_params(self) -> int:
        h = self.hidden_size
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
            return pooler + h * self.num_labels + self.num_labels
        final_norm = self.norm_params()
        lm_head = 0 if self.tie_embeddings else self.vocab_size * h
        return final_norm + lm_head

    def param_count(self) -> int:
        return self.embedding_params() + self.num_layers * self.layer_params() + self.head_params()

    def largest_layer_params(self) -> int:
        return max(self.layer_params(), self.vocab_size * self.hidden_size)
