"""PyTorch models built from the same Workload objects the estimator reads.

ResNet is torchvision's when torchvision imports and the shape is a standard one; otherwise a
compact definition that matches torchvision module for module (Bottleneck/BasicBlock, stride on
the 3x3 conv, batch norm after every conv, downsample = conv1x1 + BN, adaptive average pool,
fc), so tiny and custom-width variants have the same structure and exact parameter count.
Transformers come from Hugging Face configs built from the architecture's numbers: BERT for
encoders; for decoders the family's own class where its blocks are not Llama's
(family_configs.py: Qwen3, Gemma-2/3, DeepSeek, ...), else Llama (or Qwen2 / GPT-2 / Mistral /
Mixtral where the biases, norms, windows or experts say so); random weights, never a download.

Large models are built directly in their target dtype on their target device: no FP32 copy
first, no framework weight initialisation (slow on a CPU for billions of parameters); the
weights are then filled in place with a cheap normal draw. Random values, not zeros: some
kernels and the sparsity of all-zero data could run faster than real weights would.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from fitbench.backends.torch.family_configs import family_config, family_key, gpt2_sizes, llama_sizes
from fitbench.errors import FitbenchError
from fitbench.estimate.execution import transformers_lacks_sdpa
from fitbench.workloads.arch import RESNET_LAYERS, ResNetArch, TransformerArch
from fitbench.workloads.workload import Workload

INIT_STD = 0.02


# -- helpers -------------------------------------------------------------------------------------
@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Create floating-point tensors in `dtype` inside the block."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (tied weights once), quantized layers counted by their logical shape."""
    total = 0
    seen: set[int] = set()
    for module in model.modules():
        for param in module.parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            logical = getattr(module, "fitbench_logical_params", None)
            total += param.numel() if logical is None else 0
        logical = getattr(module, "fitbench_logical_params", None)
        if logical is not None:
            total += int(logical)
    return total


@torch.no_grad()
def init_transformer_weights_(model: nn.Module, *, std: float = INIT_STD) -> None:
    """Cheap in-place init: matrices ~ N(0, std), norm scales 1, biases 0 (what HF draws, roughly)."""
    for name, param in model.named_parameters():
        if param.device.type == "meta":
            continue
        if param.ndim >= 2:
            param.normal_(0.0, std)
        elif name.endswith("bias"):
            param.zero_()
        else:
            param.fill_(1.0)


def _no_init_weights() -> contextlib.AbstractContextManager[Any]:
    """transformers' switch that skips weight initialisation (its location moved in 5.x)."""
    try:
        from transformers.initialization import no_init_weights

        return no_init_weights()
    except ImportError:
        pass
    try:
        from transformers.modeling_utils import no_init_weights

        return no_init_weights()
    except ImportError:
        return contextlib.nullcontext()


def _from_config(
    factory: Callable[..., nn.Module], config: Any, *, dtype: torch.dtype, **kwargs: Any
) -> nn.Module:
    """`Auto*.from_config(config, dtype=...)` across transformers 4.x (`torch_dtype`) and 5.x (`dtype`)."""
    try:
        return factory(config, dtype=dtype, **kwargs)
    except TypeError as exc:
        if "dtype" not in str(exc):
            raise
        return factory(config, torch_dtype=dtype, **kwargs)


def _build_transformer(
    auto_class: Any,
    config: Any,
    *,
    attention: str,
    device: torch.device,
    dtype: torch.dtype,
    prepare: Callable[[nn.Module], None] | None = None,
) -> tuple[nn.Module, dict[str, Any]]:
    """A transformers `auto_class` model from `config`, built and filled the way this module promises.

    Encoders and decoders differ only in their Auto class, their config and one structural fix-up
    (`prepare`, run before the weights are filled, e.g. so tied weights are drawn once); the rest
    (no framework init, target device and dtype directly, cheap random fill, the notes) is one
    recipe, so both kinds of model are built alike.
    """
    with torch.device(device), _no_init_weights():
        model = _from_config(auto_class.from_config, config, dtype=dtype, attn_implementation=attention)
    if prepare is not None:
        prepare(model)
    if device.type != "meta":
        init_transformer_weights_(model)
    notes: dict[str, Any] = {
        "model_source": f"transformers {type(model).__name__} (random init)",
        "attn_implementation": model.config._attn_implementation,
    }
    return model, notes


def attention_impl(workload: Workload) -> str:
    """transformers' attn_implementation for `workload`: SDPA for fused attention, except where
    the model has none under the installed release (estimate.execution.transformers_lacks_sdpa,
    which the estimate's attention_as_run follows too, at the newest release)."""
    lacks = transformers_lacks_sdpa(workload.arch, transformers_version())
    return "sdpa" if workload.attention == "fused" and not lacks else "eager"


def transformers_version() -> str | None:
    """The installed transformers release (None without it)."""
    try:
        import transformers
    except ImportError:
        return None
    return transformers.__version__


# -- ResNet ----------------------------------------------------------------------------------------
def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(
        self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """torchvision's Bottleneck ("ResNet v1.5": the stride sits on the 3x3 conv)."""

    expansion = 4

    def __init__(
        self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision.models.ResNet's layout (attribute names included) for any width and block counts."""

    def __init__(self, arch: ResNetArch) -> None:
        super().__init__()
        block: type[BasicBlock] | type[Bottleneck] = Bottleneck if arch.block == "bottleneck" else BasicBlock
        width = arch.base_width
        self.inplanes = width
        self.conv1 = nn.Conv2d(arch.in_channels, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        counts = arch.block_counts
        self.layer1 = self._make_layer(block, width, counts[0])
        self.layer2 = self._make_layer(block, width * 2, counts[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, counts[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, counts[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, arch.num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(
        self, block: type[BasicBlock] | type[Bottleneck], planes: int, blocks: int, stride: int = 1
    ) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers: list[nn.Module] = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers.extend(block(self.inplanes, planes) for _ in range(1, blocks))
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return resnet_forward(self, x, checkpointing=False)


def resnet_forward(model: nn.Module, x: torch.Tensor, *, checkpointing: bool) -> torch.Tensor:
    """Forward pass of a torchvision-layout ResNet, optionally recomputing each stage in backward."""
    from torch.utils.checkpoint import checkpoint

    x = model.maxpool(model.relu(model.bn1(model.conv1(x))))
    for stage in (model.layer1, model.layer2, model.layer3, model.layer4):
        x = checkpoint(stage, x, use_reentrant=False) if checkpointing else stage(x)
    x = torch.flatten(model.avgpool(x), 1)
    return model.fc(x)


def _is_standard_resnet(arch: ResNetArch) -> bool:
    return (
        arch.depth in RESNET_LAYERS
        and arch.base_width == 64
        and arch.in_channels == 3
        and (arch.layers is None or tuple(arch.layers) == RESNET_LAYERS[arch.depth][1])
    )


def _torchvision_resnet(arch: ResNetArch) -> tuple[Callable[[], nn.Module] | None, str]:
    """torchvision's constructor when it imports and works with this torch, else (None, why)."""
    if not _is_standard_resnet(arch):
        return None, "non-standard width or depth"
    try:
        import torchvision.models as tvm

        factory = getattr(tvm, f"resnet{arch.depth}")
    except Exception as exc:  # absent, or built against another torch
        return None, f"torchvision unavailable ({type(exc).__name__})"
    return (lambda: factory(weights=None, num_classes=arch.num_classes)), "torchvision"


def build_resnet(
    arch: ResNetArch, *, device: torch.device, dtype: torch.dtype
) -> tuple[nn.Module, dict[str, Any]]:
    factory, why = _torchvision_resnet(arch)
    notes: dict[str, Any] = {}
    with torch.device(device), default_dtype(dtype):
        model: nn.Module | None = None
        if factory is not None:
            try:
                model = factory()
                notes["model_source"] = f"torchvision resnet{arch.depth}"
            except Exception as exc:
                why = f"torchvision failed ({type(exc).__name__})"
        if model is None:
            model = ResNet(arch)
            notes["model_source"] = f"fitbench ResNet (torchvision layout; {why})"
    return model, notes


# -- encoder -------------------------------------------------------------------------------------
class FirstToken(nn.Module):
    """A pooler without parameters (for encoders whose head reads the first token directly)."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states[:, 0]


def _unsupported(what: str, arch: TransformerArch, what_zh: str) -> FitbenchError:
    return FitbenchError(
        f"the torch backend cannot build this {arch.kind} ({what})",
        "`fitbench estimate` covers it; `fitbench run` builds BERT-style encoders, "
        "Llama/Qwen2/GPT-2/Mistral/Mixtral-style decoders and the families of "
        "backends/torch/family_configs.py (Qwen3, Gemma-2/3, OLMo, GPT-NeoX, GPT-J, Falcon, "
        "Qwen-MoE, OLMoE, ERNIE-4.5-MoE, DeepSeek-V2/V3, GLM-4.5, gpt-oss, Llama-4, Phi-3.5-MoE, "
        "StarCoder2, Command-R)",
        message_zh=f"torch 后端无法构建这个 {arch.kind}({what_zh})",
        hint_zh=(
            "`fitbench estimate` 可以估算它;`fitbench run` 能构建 BERT "
            "式编码器、Llama/Qwen2/GPT-2/Mistral/Mixtral 式解码器,以及 "
            "backends/torch/family_configs.py 中的系列(Qwen3、Gemma-2/3、OLMo、GPT-NeoX、GPT-J、"
            "Falcon、Qwen-MoE、OLMoE、ERNIE-4.5-MoE、DeepSeek-V2/V3、GLM-4.5、gpt-oss、Llama-4、"
            "Phi-3.5-MoE、StarCoder2、Command-R)"
        ),
    )


def bert_config(arch: TransformerArch, *, attention: str) -> Any:
    from transformers import BertConfig

    if arch.mlp != "gelu" or arch.norm != "layernorm" or arch.position != "learned":
        raise _unsupported(
            f"mlp {arch.mlp}, norm {arch.norm}, position {arch.position}",
            arch,
            f"mlp {arch.mlp}、norm {arch.norm}、position {arch.position}",
        )
    if arch.extra_params or arch.norms_per_layer != 2 or arch.qk_norm != "none" or arch.patch_size:
        raise _unsupported(
            "relative-position tables, extra norms or patch embeddings (DeBERTa, ViT)",
            arch,
            "相对位置表、额外的归一化层或 patch 嵌入(DeBERTa、ViT)",
        )
    if not (arch.qkv_bias and arch.out_bias and arch.mlp_bias):
        raise _unsupported("linear layers without bias", arch, "没有偏置的线性层")
    if arch.kv_heads != arch.num_heads or arch.dim_head * arch.num_heads != arch.hidden_size:
        raise _unsupported(
            "grouped-query attention or a custom head size", arch, "分组查询注意力或自定义的注意力头维度"
        )
    config = BertConfig(
        vocab_size=arch.vocab_size,
        hidden_size=arch.hidden_size,
        num_hidden_layers=arch.num_layers,
        num_attention_heads=arch.num_heads,
        intermediate_size=arch.intermediate_size,
        max_position_embeddings=arch.max_positions,
        type_vocab_size=max(arch.type_vocab_size, 1),
        num_labels=max(arch.num_labels, 1),
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    config._attn_implementation = attention
    return config


def build_encoder(
    arch: TransformerArch, *, attention: str, device: torch.device, dtype: torch.dtype
) -> tuple[nn.Module, dict[str, Any]]:
    from transformers import AutoModelForSequenceClassification

    def drop_pooler(model: nn.Module) -> None:
        if not arch.pooler:
            model.bert.pooler = FirstToken()

    model, notes = _build_transformer(
        AutoModelForSequenceClassification,
        bert_config(arch, attention=attention),
        prepare=drop_pooler,
        attention=attention,
        device=device,
        dtype=dtype,
    )
    if arch.type_vocab_size == 0:
        notes.setdefault("warnings", []).append(
            "the encoder has no token-type embeddings; BERT keeps one row"
        )
    return model, notes


# -- decoder -------------------------------------------------------------------------------------
def decoder_config(arch: TransformerArch, *, attention: str) -> Any:
    """A transformers config describing exactly this decoder: its own family's where
    family_configs has one (query/key norms, post norms, parallel blocks, latent attention,
    shared experts), else Llama, Qwen2, GPT-2, Mistral or Mixtral."""
    import transformers

    if family_key(arch) is not None:
        return family_config(arch, attention=attention)
    plain = (
        arch.norms_per_layer == 2
        and arch.qk_norm == "none"
        and not arch.is_mla
        and not arch.parallel_block
        and not arch.lm_head_bias
        and not arch.extra_params
    )
    if not plain:
        raise _unsupported(
            "latent attention, query/key norms, parallel blocks or extra norms",
            arch,
            "潜在注意力、query/key 归一化、并行块或额外的归一化层",
        )
    if arch.is_moe or arch.sliding_layers:
        return _mixtral_or_mistral_config(arch, attention=attention)
    if arch.mlp == "swiglu" and arch.norm == "rmsnorm" and arch.position == "rotary":
        common = llama_sizes(arch)
        if arch.qkv_bias == arch.out_bias:
            config = transformers.LlamaConfig(
                head_dim=arch.dim_head, attention_bias=arch.qkv_bias, mlp_bias=arch.mlp_bias, **common
            )
        elif arch.qkv_bias and not arch.out_bias and not arch.mlp_bias:
            if arch.dim_head * arch.num_heads != arch.hidden_size:
                raise _unsupported(
                    "Qwen2-style biases with a custom head size", arch, "Qwen2 式偏置加自定义的注意力头维度"
                )
            config = transformers.Qwen2Config(**common)
        else:
            raise _unsupported(
                "an output-projection bias without q/k/v biases", arch, "有输出投影偏置却没有 q/k/v 偏置"
            )
    elif arch.mlp == "gelu" and arch.norm == "layernorm" and arch.position == "learned":
        if not (arch.qkv_bias and arch.out_bias and arch.mlp_bias):
            raise _unsupported("a GPT-style decoder without biases", arch, "没有偏置的 GPT 式解码器")
        if arch.kv_heads != arch.num_heads or arch.dim_head * arch.num_heads != arch.hidden_size:
            raise _unsupported(
                "a GPT-style decoder with grouped-query attention", arch, "使用分组查询注意力的 GPT 式解码器"
            )
        config = transformers.GPT2Config(**gpt2_sizes(arch))
    else:
        raise _unsupported(
            f"mlp {arch.mlp}, norm {arch.norm}, position {arch.position}",
            arch,
            f"mlp {arch.mlp}、norm {arch.norm}、position {arch.position}",
        )
    config._attn_implementation = attention
    return config


def _mixtral_or_mistral_config(arch: TransformerArch, *, attention: str) -> Any:
    """Mixtral (experts, optionally a window on every layer) or Mistral (a window on every layer):
    the bias-free SwiGLU decoders transformers builds with sliding windows and routed experts."""
    import transformers

    if not (arch.mlp == "swiglu" and arch.norm == "rmsnorm" and arch.position == "rotary"):
        raise _unsupported(
            f"mlp {arch.mlp}, norm {arch.norm}, position {arch.position}",
            arch,
            f"mlp {arch.mlp}、norm {arch.norm}、position {arch.position}",
        )
    if arch.qkv_bias or arch.out_bias or arch.mlp_bias:
        raise _unsupported(
            "biases in a sliding-window or mixture-of-experts decoder",
            arch,
            "滑动窗口或混合专家解码器中的偏置",
        )
    if arch.sliding_layers not in (0, arch.num_layers):
        raise _unsupported("sliding windows on some layers only", arch, "只有部分层使用滑动窗口")
    if arch.is_moe and (
        arch.shared_intermediate_size or arch.dense_layers or arch.moe_every != 1 or arch.expert_score_bias
    ):
        raise _unsupported(
            "shared experts or dense layers between expert layers", arch, "共享专家,或专家层之间的稠密层"
        )
    common = dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        sliding_window=arch.sliding_window if arch.sliding_layers else None,
    )
    if arch.is_moe:
        config = transformers.MixtralConfig(
            **{**common, "intermediate_size": arch.expert_intermediate_size},
            num_local_experts=arch.num_experts,
            num_experts_per_tok=arch.experts_per_token,
        )
    else:
        config = transformers.MistralConfig(**common)
    config._attn_implementation = attention
    return config


def build_decoder(
    arch: TransformerArch, *, attention: str, device: torch.device, dtype: torch.dtype
) -> tuple[nn.Module, dict[str, Any]]:
    from transformers import AutoModelForCausalLM

    def tie(model: nn.Module) -> None:
        if arch.tie_embeddings:
            model.tie_weights()  # skipping init also skipped the tying that init_weights() does

    model, notes = _build_transformer(
        AutoModelForCausalLM,
        decoder_config(arch, attention=attention),
        prepare=tie,
        attention=attention,
        device=device,
        dtype=dtype,
    )
    if getattr(model, "generation_config", None) is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = 0
    if arch.vision_params:
        add_vision_tower_stand_in(model, arch, notes)
    return model, notes


def add_vision_tower_stand_in(model: nn.Module, arch: TransformerArch, notes: dict[str, Any]) -> None:
    """A multimodal checkpoint's vision tower as one frozen tensor of its parameters.

    transformers loads the tower with the language model (AutoModelForCausalLM maps Gemma-3 to
    Gemma3ForConditionalGeneration), so its weights take memory on the card; text never runs
    it, and a text fine-tune gives it no gradient, so AdamW keeps no state for it
    (tests/unit/test_multimodal.py checks that on a real tiny Gemma-3). A frozen parameter of
    the same element count, in the model's dtype and on its device, is exactly that: the
    measured memory and parameter count include it, and no step touches it.
    """
    reference = next(model.parameters())
    stand_in = nn.Parameter(
        torch.empty(arch.vision_params, dtype=reference.dtype, device=reference.device), requires_grad=False
    )
    model.register_parameter("vision_tower_stand_in", stand_in)
    notes["vision_tower"] = f"{arch.vision_tower}: a frozen stand-in of its {arch.vision_params:,} parameters"


# -- entry points ----------------------------------------------------------------------------------
def build_model(
    workload: Workload,
    *,
    device: torch.device | str,
    dtype: torch.dtype = torch.float32,
) -> tuple[nn.Module, dict[str, Any]]:
    """The model of `workload` on `device` in `dtype`, plus notes on what was built."""
    device = torch.device(device)
    arch = workload.arch
    if isinstance(arch, ResNetArch):
        return build_resnet(arch, device=device, dtype=dtype)
    if arch.kind == "encoder":
        return build_encoder(arch, attention=attention_impl(workload), device=device, dtype=dtype)
    return build_decoder(arch, attention=attention_impl(workload), device=device, dtype=dtype)


def meta_param_count(workload: Workload) -> int:
    """Parameters of the model `build_model` makes, counted on the meta device (no memory, no time)."""
    model, _ = build_model(workload, device="meta")
    return count_parameters(model)
