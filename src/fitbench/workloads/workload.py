"""Workload: one job to estimate or run, the shared vocabulary of every fitbench command."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from fitbench.core.names import STRATEGY_ALIASES, strategy
from fitbench.core.precision import Precision, get_precision
from fitbench.core.quant import LEGACY, WeightFormat, check_kv_cache
from fitbench.errors import FitbenchError, did_you_mean
from fitbench.workloads.arch import ResNetArch, TransformerArch

OPTIMIZERS = ("adam", "adamw", "sgd", "momentum")
MODES = ("train", "infer")
ATTENTION_IMPLS = ("fused", "eager")
PEFT_METHODS = ("lora", "qlora")
LORA_TARGETS = ("attention", "attention-mlp", "all-linear")
# Fields a user names in words: compared lower-case, without surrounding blanks.
NAME_FIELDS = (
    "precision",
    "optimizer",
    "mode",
    "attention",
    "peft",
    "lora_targets",
    "strategy",
    "optimizer_impl",
)

# A decoder switched from generation to training needs a sequence length; this is the one a
# fine-tuning recipe most often starts from.
DECODER_TRAIN_SEQ_LEN = 512
# How torch.optim runs the update: 'foreach' (torch._foreach_* over lists; what torch picks when
# every parameter is on CUDA), 'fused' (one kernel, opt-in fused=True), 'for-loop' (one tensor at
# a time, foreach=False). Their step temporaries differ (estimate.optimizer.optimizer_step_scratch).
OPTIMIZER_IMPLS = ("foreach", "fused", "for-loop")

# Sizes beyond these are typos, not jobs (the largest production contexts are ~1M tokens).
LIMITS = {
    "lora_rank": 1 << 16,
    "gpus": 1 << 16,
    "grad_accum": 1 << 16,
    "batch_size": 1 << 20,
    "seq_len": 1 << 21,
    "image_size": 16384,
    "prompt_tokens": 1 << 21,
    "new_tokens": 1 << 21,
    "dataset_size": 1 << 40,
    "checkpoint_bytes": 1 << 50,
    "checkpoint_params": 1 << 48,
}


@dataclass(frozen=True, kw_only=True)
class Workload:
    """A deep-learning job: a model, what is done with it, and at what size.

    family       'resnet' | 'encoder' | 'decoder'
    mode         'train' (a training step) or 'infer' (classification forward, or generation
                 for decoders: prefill `prompt_tokens`, then decode `new_tokens`)
    attention    'fused' when the attention score matrix is never materialised (SDPA,
                 FlashAttention, memory-efficient kernels) or 'eager' when it is
    optimizer_impl  how torch.optim runs the update: 'foreach' (the default torch picks when
                 every parameter is on CUDA and the optimizer is not differentiable), 'fused'
                 (opt-in `fused=True`; what the tuned mode runs) or 'for-loop' (`foreach=False`)
    grad_accum   micro-batches per optimizer step: 1 frees gradients between steps
                 (`zero_grad(set_to_none=True)`); N > 1 keeps them alive through the next
                 micro-batches' forward and backward
    """

    name: str
    arch: ResNetArch | TransformerArch
    mode: str = "train"
    batch_size: int = 1
    precision: str = "fp32"
    optimizer: str = "adam"
    seq_len: int | None = None
    image_size: int | None = None
    dataset_size: int | None = None
    prompt_tokens: int | None = None
    new_tokens: int | None = None
    checkpointing: bool = False
    attention: str = "fused"
    tiny: bool = False
    peft: str | None = None
    lora_rank: int = 16
    lora_targets: str = "attention-mlp"
    gpus: int = 1
    strategy: str = "ddp"
    # How the optimizer step runs and what survives between micro-batches (estimate.liveness).
    optimizer_impl: str = "foreach"
    grad_accum: int = 1
    description: str = ""
    # Quantized storage of the Linear layers (--weights, quantization_config); None: the
    # precision's own dtype (or int8/int4's bitsandbytes layout). The KV cache dtype (--kv-cache)
    # defaults to the activations' dtype. `origin` says where defaults came from (config.json).
    weights: WeightFormat | None = None
    kv_cache: str | None = None
    origin: tuple[str, ...] = ()
    # Exact stored weights read from a model folder's safetensors headers (memory uses them).
    checkpoint_bytes: int | None = None
    checkpoint_params: int | None = None

    def __post_init__(self) -> None:
        # Order matters: types before names, names before the sizes and combinations that use them.
        self._check_types()
        # Validate, then keep the canonical name ('half' -> 'fp16', 'AMP' -> 'amp-fp16'): results,
        # history and code comparing names must see one spelling per mode.
        object.__setattr__(self, "precision", get_precision(self.precision).name)
        self._check_names()
        self._check_storage()
        self._check_sizes()
        self._check_shape()

    def _check_types(self) -> None:
        """A number where a name belongs (or the reverse) must be a clear error, not an
        AttributeError deep in the estimator."""
        for field_name in (
            "name",
            "precision",
            "mode",
            "optimizer",
            "attention",
            "lora_targets",
            "strategy",
            "optimizer_impl",
        ):
            value = getattr(self, field_name)
            if not isinstance(value, str):
                raise FitbenchError(
                    f"{field_name.replace('_', '-')} must be a name, got {value!r}",
                    f"pass --{field_name.replace('_', '-')} as text",
                    message_zh=f"{field_name.replace('_', '-')} 必须是名称,实际为 {value!r}",
                    hint_zh=f"请以文本形式传入 --{field_name.replace('_', '-')}",
                )
        if self.peft is not None and not isinstance(self.peft, str):
            raise FitbenchError(
                f"peft must be a name, got {self.peft!r}",
                "use lora or qlora",
                message_zh=f"peft 必须是名称,实际为 {self.peft!r}",
                hint_zh="请使用 lora 或 qlora",
            )
        for field_name in ("checkpointing", "tiny"):
            if not isinstance(getattr(self, field_name), bool):
                raise FitbenchError(
                    f"{field_name} must be true or false, got {getattr(self, field_name)!r}",
                    f"pass {field_name}=True or False",
                    message_zh=f"{field_name} 必须是 true 或 false,实际为 {getattr(self, field_name)!r}",
                    hint_zh=f"请传入 {field_name}=True 或 False",
                )

    def _check_names(self) -> None:
        """Every named choice is one of its set (with the closest names as a hint)."""
        named = (
            ("mode", "mode", "模式", MODES),
            ("optimizer", "optimizer", "优化器", OPTIMIZERS),
            ("attention", "attention", "注意力实现", ATTENTION_IMPLS),
            ("peft", "fine-tuning method", "微调方法", PEFT_METHODS),
            ("lora_targets", "LoRA targets", "LoRA 目标模块", LORA_TARGETS),
            ("optimizer_impl", "optimizer implementation", "优化器实现", OPTIMIZER_IMPLS),
        )
        for field_name, what, what_zh, choices in named:
            value = getattr(self, field_name)
            if value is not None and value not in choices:
                raise FitbenchError(
                    f"unknown {what} '{value}'",
                    did_you_mean(value, choices),
                    message_zh=f"未知的{what_zh} '{value}'",
                    hint_zh=did_you_mean(value, choices, lang="zh"),
                )
        # One spelling per strategy ('fsdp' is fsdp-full-shard), one of fitbench.core.names.Strategy.
        canonical = strategy(STRATEGY_ALIASES.get(self.strategy, self.strategy))
        object.__setattr__(self, "strategy", canonical.value)
        if self.peft is not None and (self.mode != "train" or self.is_resnet):
            raise FitbenchError(
                f"--peft {self.peft} fine-tunes a transformer",
                "use it with --mode train on an encoder or decoder workload",
                message_zh=f"--peft {self.peft} 用于微调 transformer",
                hint_zh="请在编码器或解码器工作负载上配合 --mode train 使用",
            )
        if self.peft is not None and getattr(self.arch, "mlp_free_layers", 0):
            raise FitbenchError(
                f"--peft {self.peft} is not modelled for models with layers without an MLP yet",
                "estimate full fine-tuning (drop --peft) or inference",
                message_zh=f"含无 MLP 层的模型尚未建模 --peft {self.peft}",
                hint_zh="请估算全量微调(去掉 --peft)或推理",
            )
        if self.peft is not None and getattr(self.arch, "linear_layers", 0):
            kind, kind_zh = {
                "mamba2": ("Mamba-2", "Mamba-2 "),
                "short_conv": ("short-convolution", "短卷积"),
            }.get(getattr(self.arch, "linear_kind", ""), ("linear-attention", "线性注意力"))
            raise FitbenchError(
                f"--peft {self.peft} is not modelled for models with {kind} layers yet",
                "estimate full fine-tuning (drop --peft) or inference",
                message_zh=f"含{kind_zh}层的模型尚未建模 --peft {self.peft}",
                hint_zh="请估算全量微调(去掉 --peft)或推理",
            )

    def _check_sizes(self) -> None:
        """Sizes are whole numbers from 1 to a bound no real job reaches (LIMITS)."""
        for field_name, limit in LIMITS.items():
            value = getattr(self, field_name)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                flag = field_name.replace("_", "-")
                raise FitbenchError(
                    f"{flag} must be a positive integer, got {value!r}",
                    f"use a whole number from 1 to {limit}",
                    message_zh=f"{flag} 必须是正整数,实际为 {value!r}",
                    hint_zh=f"请使用 1 到 {limit} 之间的整数",
                )
            if value > limit:
                raise FitbenchError(
                    f"{field_name.replace('_', '-')} {value} is beyond any real job",
                    f"use at most {limit}",
                    message_zh=f"{field_name.replace('_', '-')} {value} 超出了任何真实任务的范围",
                    hint_zh=f"请使用不超过 {limit} 的值",
                )

    def _check_shape(self) -> None:
        """The input sizes the job's family needs, a precision that can train, and a sequence
        the model's learned positions can hold."""
        if self.is_resnet and self.image_size is None:
            raise FitbenchError(
                "a ResNet workload needs an image size",
                "pass --image-size",
                message_zh="ResNet 工作负载需要图像尺寸",
                hint_zh="请传入 --image-size",
            )
        if self.is_resnet and self.image_size is not None and self.image_size < 8:
            raise FitbenchError(
                f"image-size {self.image_size} is too small for a ResNet",
                "use 8 or more",
                message_zh=f"image-size {self.image_size} 对 ResNet 来说太小",
                hint_zh="请使用 8 或更大的值",
            )
        needs_tokens = self.prompt_tokens is None or self.new_tokens is None
        if not self.is_resnet and self.is_generation and needs_tokens:
            raise FitbenchError(
                "generation needs --prompt-tokens and --new-tokens",
                "pass both, e.g. --prompt-tokens 50 --new-tokens 100, or --mode train",
                message_zh="生成任务需要 --prompt-tokens 和 --new-tokens",
                hint_zh="两者都要给出,例如 --prompt-tokens 50 --new-tokens 100,或使用 --mode train",
            )
        if not self.is_resnet and not self.is_generation and self.seq_len is None:
            raise FitbenchError(
                "a transformer workload needs a sequence length",
                "pass --seq-len",
                message_zh="transformer 工作负载需要序列长度",
                hint_zh="请传入 --seq-len",
            )
        if not self.precision_info.training and self.mode == "train":
            raise FitbenchError(
                f"precision '{self.precision}' is for inference only",
                "use --mode infer, or fp32/amp-fp16/amp-bf16/fp16/bf16 to train",
                message_zh=f"精度 '{self.precision}' 只用于推理",
                hint_zh="请使用 --mode infer,或用 fp32/amp-fp16/amp-bf16/fp16/bf16 训练",
            )
        if isinstance(self.arch, TransformerArch) and self.arch.position == "learned":
            longest, most = self.tokens_per_sequence, self.arch.usable_positions
            if longest > most:
                if self.is_generation:
                    what = f"prompt and new tokens ({self.prompt_tokens} + {self.new_tokens} = {longest})"
                    hint = f"keep --prompt-tokens plus --new-tokens at {most} or less"
                    what_zh = f"提示词与新 token 合计({self.prompt_tokens} + {self.new_tokens} = {longest})"
                    hint_zh = f"请让 --prompt-tokens 与 --new-tokens 之和不超过 {most}"
                else:
                    what, hint = f"sequence of {longest} tokens", f"use --seq-len {most} or less"
                    what_zh, hint_zh = f"{longest} 个 token 的序列", f"请使用不超过 {most} 的 --seq-len"
                why = why_zh = ""
                if self.arch.position_offset:  # RoBERTa: positions start after the padding index
                    rows, offset = self.arch.max_positions, self.arch.position_offset
                    why = f" ({rows} position embeddings less {offset} reserved by the padding offset)"
                    why_zh = f"({rows} 个位置嵌入减去填充偏移保留的 {offset} 个)"
                raise FitbenchError(
                    f"{what} is longer than the model's {most} positions{why}",
                    hint,
                    message_zh=f"{what_zh}超过了模型的 {most} 个位置{why_zh}",
                    hint_zh=hint_zh,
                )

    def _check_storage(self) -> None:
        """--weights and --kv-cache: a quantized model generates or classifies in 16 bit."""
        if self.weights is not None:
            if not isinstance(self.weights, WeightFormat):
                raise FitbenchError(
                    f"weights must be a weight format, got {self.weights!r}",
                    "pass --weights NAME",
                    message_zh=f"weights 必须是权重格式,实际为 {self.weights!r}",
                    hint_zh="请传入 --weights NAME",
                )
            if self.precision in LEGACY:
                raise FitbenchError(
                    f"--weights {self.weights.label} and --precision {self.precision} both "
                    "say how weights are stored",
                    "give one of them; with --weights use --precision fp16 or bf16 for the compute dtype",
                    message_zh=(
                        f"--weights {self.weights.label} 和 --precision {self.precision} "
                        "都指定了权重的存储方式"
                    ),
                    hint_zh="两者只能给一个;使用 --weights 时,请用 --precision fp16 或 bf16 指定计算精度",
                )
            if self.mode == "train":
                raise FitbenchError(
                    f"quantized weights ({self.weights.label}) are for inference",
                    "use --mode infer, or --peft qlora to fine-tune a 4-bit model",
                    message_zh=f"量化权重({self.weights.label})只用于推理",
                    hint_zh="请使用 --mode infer,或用 --peft qlora 微调 4 位模型",
                )
            if self.precision not in ("fp16", "bf16"):
                raise FitbenchError(
                    f"quantized weights ({self.weights.label}) compute in 16 bit, not {self.precision}",
                    "use --precision fp16 or bf16",
                    message_zh=f"量化权重({self.weights.label})以 16 位计算,不支持 {self.precision}",
                    hint_zh="请使用 --precision fp16 或 bf16",
                )
            if isinstance(self.arch, ResNetArch):
                raise FitbenchError(
                    "--weights applies to transformer models",
                    "use --precision int8 or int4",
                    message_zh="--weights 只适用于 transformer 模型",
                    hint_zh="请使用 --precision int8 或 int4",
                )
        if self.kv_cache is not None:
            object.__setattr__(self, "kv_cache", check_kv_cache(self.kv_cache))
            if not self.is_generation:
                raise FitbenchError(
                    "--kv-cache applies to generation: this job keeps no KV cache",
                    "use it with a decoder and --mode infer, or drop --kv-cache",
                    message_zh="--kv-cache 只适用于生成任务:这个任务不保留 KV 缓存",
                    hint_zh="请在解码器上配合 --mode infer 使用,或去掉 --kv-cache",
                )
        if not isinstance(self.origin, tuple) or not all(isinstance(o, str) for o in self.origin):
            raise FitbenchError("origin must be a tuple of notes", message_zh="origin 必须是由说明组成的元组")

    # -- what kind of job ---------------------------------------------------------------------
    @property
    def family(self) -> str:
        return "resnet" if isinstance(self.arch, ResNetArch) else self.arch.kind

    @property
    def is_resnet(self) -> bool:
        return isinstance(self.arch, ResNetArch)

    @property
    def transformer(self) -> TransformerArch:
        """The arch of a transformer workload: code that models transformers only reads it here
        instead of narrowing the union itself (a ResNet raises)."""
        if not isinstance(self.arch, TransformerArch):
            raise TypeError(f"{self.name} is a {self.family}, not a transformer")
        return self.arch

    @property
    def is_generation(self) -> bool:
        return self.family == "decoder" and self.mode == "infer"

    @property
    def is_training(self) -> bool:
        return self.mode == "train"

    @property
    def precision_info(self) -> Precision:
        return get_precision(self.precision)

    @property
    def weight_format(self) -> WeightFormat | None:
        """How the Linear layers are stored when they are quantized, else None."""
        return self.weights if self.weights is not None else LEGACY.get(self.precision)

    @property
    def kv_cache_dtype(self) -> str:
        """The KV cache's dtype: --kv-cache, else the activations' (16-bit or FP32)."""
        if self.kv_cache is not None:
            return self.kv_cache
        p = self.precision_info
        if p.activation_bytes != 2:
            return "fp32"
        return p.compute if p.compute in ("fp16", "bf16") else "fp16"

    @property
    def tokens_per_sequence(self) -> int:
        if self.is_generation:
            return (self.prompt_tokens or 0) + (self.new_tokens or 0)
        return self.seq_len or 0

    @property
    def sample_unit(self) -> str:
        return "images" if self.is_resnet else ("tokens" if self.is_generation else "samples")

    def param_count(self) -> int:
        return self.arch.param_count()

    def trained_param_count(self) -> int:
        """Parameters a full fine-tune gives gradients: all of them, except a multimodal
        checkpoint's vision tower, which text batches never reach (its grads stay None, so torch
        optimizers create no state for it either)."""
        if isinstance(self.arch, TransformerArch):
            return self.arch.language_param_count()
        return self.arch.param_count()

    def active_param_count(self) -> int:
        """Parameters a token runs through (the total, except for mixture-of-experts models)."""
        if isinstance(self.arch, TransformerArch):
            return self.arch.active_param_count()
        return self.arch.param_count()

    # -- derivation ---------------------------------------------------------------------------
    def replace(self, **changes: Any) -> Workload:
        """A copy with exactly these fields changed, validated again (frozen dataclasses never
        mutate). None leaves a field as it is. No default follows a change: code that derives one
        workload from another (the estimator, the advice) uses this; a user's request goes
        through `with_overrides`."""
        changes = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **changes)

    def with_overrides(self, **overrides: Any) -> Workload:
        """This job as a user asked to change it: names normalised ('LoRA' -> 'lora'), and the
        defaults a change implies filled in (see `implied_defaults`). The CLI and the Python
        API both come through here, so one question gets one answer."""
        given = {k: v for k, v in overrides.items() if v is not None}
        for key in NAME_FIELDS:
            if isinstance(given.get(key), str):
                given[key] = given[key].strip().lower()
        return self.replace(**implied_defaults(self, given), **given)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: flat job fields plus the architecture under 'arch'."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "arch"}
        out["family"] = self.family
        out["params"] = self.param_count()
        out["active_params"] = self.active_param_count()
        out["arch"] = dataclasses.asdict(self.arch)
        out["weights"] = self.weights.to_dict() if self.weights is not None else None
        out["origin"] = list(self.origin)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        """Inverse of to_dict, used to hand a workload to a child process as JSON."""
        data = dict(data)
        arch_data = dict(data.pop("arch"))
        family = data.pop("family", None)
        data.pop("params", None)
        if data.get("weights") is not None:
            data["weights"] = WeightFormat.from_dict(data["weights"])
        data["origin"] = tuple(data.get("origin") or ())
        data.pop("active_params", None)
        if family == "resnet" or "depth" in arch_data:
            if arch_data.get("layers") is not None:
                arch_data["layers"] = tuple(arch_data["layers"])
            arch: ResNetArch | TransformerArch = ResNetArch(**arch_data)
        else:
            arch = TransformerArch(**arch_data)
        return cls(arch=arch, **data)


def implied_defaults(workload: Workload, given: dict[str, Any]) -> dict[str, Any]:
    """The fields a requested change implies but does not name, so that the job stays the one a
    user most likely means (the values `given` sets itself always win).

    Switching a generating decoder to training gives it a sequence length (its own or
    DECODER_TRAIN_SEQ_LEN) and mixed precision (amp-bf16), as fine-tuning recipes do; asking for
    PEFT on a decoder keeps the frozen weights in 16 bit (bf16) instead, unless a precision is
    named.
    """
    implied: dict[str, Any] = {}
    if given.get("weights") is not None and workload.precision not in ("fp16", "bf16"):
        implied["precision"] = "fp16"  # quantized weights are expanded into 16-bit matmuls
    if given.get("mode", workload.mode) == "train" and workload.family == "decoder":
        if workload.is_generation:
            implied["seq_len"] = workload.seq_len or DECODER_TRAIN_SEQ_LEN
            implied["precision"] = "amp-bf16"
        if given.get("peft"):
            implied["precision"] = "bf16"
    return {k: v for k, v in implied.items() if k not in given}
