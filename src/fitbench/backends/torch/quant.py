"""int8 / int4 weight-only quantized decoders and encoders through bitsandbytes (CUDA only).

`BitsAndBytesConfig(load_in_8bit/4bit)` only works with `from_pretrained`; fitbench builds from a
config, so it builds the model skeleton on the meta device (no memory), swaps every linear layer
of the transformer blocks for a bitsandbytes one whose fp16 weights are drawn on the GPU one layer
at a time, handed to bitsandbytes on the CPU and quantized as they move back to the GPU (the CPU's
own fp16 random generator took minutes for an 8B model), then materialises the remaining parameters
(embeddings, norms, the LM head, kept in fp16 as bitsandbytes does) directly on the GPU. The
peak while loading is the quantized model plus one layer: never a full fp16 copy.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from fitbench.backends.torch.models import INIT_STD, build_model
from fitbench.errors import FitbenchError
from fitbench.workloads.workload import Workload

SKIP = ("lm_head", "classifier", "score")  # heads stay in fp16, as transformers' integration leaves them


def _replace(parent: nn.Module, name: str, new: nn.Module) -> None:
    setattr(parent, name, new)


def _quantized_linear(bnb: Any, linear: nn.Linear, bits: int, device: torch.device) -> nn.Module:
    """One bitsandbytes layer for `linear`, its random fp16 weight quantized as it moves to `device`.

    The layer is built on the meta device (its own default initialisation would fill a CPU fp16
    weight first: 0.5 s a 4096 x 14336 layer on an H100 host) and its weight drawn on `device`
    (the CPU's fp16 normal_ took 2.3-2.9 s there, which made an 8B model take minutes to build),
    then handed to bitsandbytes on the CPU, whose move to the GPU quantizes it (Int8Params does so
    only from the CPU)."""
    has_bias = linear.bias is not None
    with torch.device("meta"):
        if bits == 8:
            layer = bnb.nn.Linear8bitLt(
                linear.in_features, linear.out_features, bias=has_bias, has_fp16_weights=False, threshold=6.0
            )
        else:
            layer = bnb.nn.Linear4bit(
                linear.in_features,
                linear.out_features,
                bias=has_bias,
                compute_dtype=torch.float16,
                quant_type="nf4",
            )
    with torch.no_grad():
        weight = torch.empty(linear.out_features, linear.in_features, dtype=torch.float16, device=device)
        weight = weight.normal_(0, INIT_STD).cpu()
        meta = layer.weight
        if bits == 8:
            layer.weight = bnb.nn.Int8Params(weight, requires_grad=False, has_fp16_weights=False)
        else:
            layer.weight = bnb.nn.Params4bit(
                weight,
                requires_grad=False,
                compress_statistics=meta.compress_statistics,
                quant_type=meta.quant_type,
                quant_storage=meta.quant_storage,
                module=layer,
            )
        if has_bias:
            layer.bias = nn.Parameter(torch.zeros(linear.out_features, dtype=torch.float16))
    layer = layer.to(device)
    layer.fitbench_logical_params = linear.in_features * linear.out_features + (
        linear.out_features if has_bias else 0
    )
    return layer


def _materialise(model: nn.Module, device: torch.device) -> None:
    """Give every parameter still on the meta device real fp16 storage on `device`, then init it."""
    with torch.no_grad():
        for module in model.modules():
            for name, param in list(module.named_parameters(recurse=False)):
                if param.device.type != "meta":
                    continue
                data = torch.empty(param.shape, dtype=param.dtype, device=device)
                if param.ndim >= 2:
                    data.normal_(0, INIT_STD)
                elif name == "bias":
                    data.zero_()
                else:
                    data.fill_(1.0)
                module._parameters[name] = nn.Parameter(data, requires_grad=False)
            for name, buf in list(module.named_buffers(recurse=False)):
                if buf is None or buf.device.type != "meta":
                    continue
                if name == "position_ids":  # BERT's arange(max_positions)
                    module._buffers[name] = torch.arange(buf.shape[-1], device=device).expand(buf.shape)
                else:  # token-type ids and masks: zeros are their real values
                    module._buffers[name] = torch.zeros(buf.shape, dtype=buf.dtype, device=device)


def _rebuild_rotary(model: nn.Module, device: torch.device) -> None:
    """Rotary-embedding buffers are computed in __init__: rebuild those modules on the real device."""
    for _, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if "RotaryEmbedding" in type(child).__name__ and hasattr(child, "config"):
                with torch.device(device):
                    try:
                        rebuilt = type(child)(config=child.config, device=device)
                    except TypeError:  # transformers 5.x dropped the device argument
                        rebuilt = type(child)(config=child.config)
                _replace(module, child_name, rebuilt)


def build_quantized(
    workload: Workload, *, bits: int, device: torch.device
) -> tuple[nn.Module, dict[str, Any]]:
    try:
        import bitsandbytes as bnb
    except Exception as exc:
        raise FitbenchError(
            "int8/int4 measurement needs a working bitsandbytes",
            f"pip install bitsandbytes (CUDA only) — import failed: {type(exc).__name__}",
            message_zh="int8/int4 实测需要可用的 bitsandbytes",
            hint_zh=f"pip install bitsandbytes(仅支持 CUDA)— 导入失败:{type(exc).__name__}",
        ) from exc
    if workload.is_resnet:
        raise FitbenchError(
            "int8/int4 measurement covers transformer models",
            "use fp16 or bf16 for a ResNet",
            message_zh="int8/int4 实测只支持 transformer 模型",
            hint_zh="ResNet 请使用 fp16 或 bf16",
        )
    model, notes = build_model(workload, device=torch.device("meta"), dtype=torch.float16)
    for module_name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{module_name}.{child_name}" if module_name else child_name
            if isinstance(child, nn.Linear) and not any(s in full for s in SKIP):
                _replace(module, child_name, _quantized_linear(bnb, child, bits, device))
    tied = workload.arch.tie_embeddings if not workload.is_resnet else False  # type: ignore[union-attr]
    _rebuild_rotary(model, device)
    _materialise(model, device)
    if tied and hasattr(model, "tie_weights"):
        model.tie_weights()
    notes["model_source"] = notes.get("model_source", "") + f"; bitsandbytes {bits}-bit linear layers"
    notes["bitsandbytes"] = getattr(bnb, "__version__", "?")
    return model, notes
