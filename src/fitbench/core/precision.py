"""Precision modes: how many bytes each tensor class takes and which tensor-core rate applies.

One table instead of if-chains, so the memory model, the speed model and the backends agree
on what `amp-bf16` or `int4` means.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitbench.errors import FitbenchError, close_match_hint


@dataclass(frozen=True, kw_only=True)
class Precision:
    """What a precision mode stores and computes in.

    weight_bytes       bytes per parameter of the stored (trainable or frozen) weights
    cast_cache_bytes   autocast's per-forward low-precision copy of each weight (AMP only)
    grad_bytes         bytes per parameter of gradients (same dtype as the weights)
    activation_bytes   bytes per saved activation element
    compute            which datasheet peak the matmuls run at: fp32 | tf32 | fp16 | bf16
    quant_bits         4 or 8 for weight-only quantized inference, else None
    """

    name: str
    weight_bytes: float
    cast_cache_bytes: float
    grad_bytes: float
    activation_bytes: int
    compute: str
    amp: bool = False
    quant_bits: int | None = None
    training: bool = True


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision(
            name="fp32", weight_bytes=4, cast_cache_bytes=0, grad_bytes=4, activation_bytes=4, compute="fp32"
        ),
        Precision(
            name="tf32", weight_bytes=4, cast_cache_bytes=0, grad_bytes=4, activation_bytes=4, compute="tf32"
        ),
        # torch.autocast keeps FP32 weights and caches one FP16/BF16 copy per weight while the
        # forward pass runs (torch/csrc/autograd autocast weight cache); gradients are FP32.
        Precision(
            name="amp-fp16",
            weight_bytes=4,
            cast_cache_bytes=2,
            grad_bytes=4,
            activation_bytes=2,
            compute="fp16",
            amp=True,
        ),
        Precision(
            name="amp-bf16",
            weight_bytes=4,
            cast_cache_bytes=2,
            grad_bytes=4,
            activation_bytes=2,
            compute="bf16",
            amp=True,
        ),
        # Pure half precision: weights, gradients and (in PyTorch) optimizer state in 16 bit.
        Precision(
            name="fp16", weight_bytes=2, cast_cache_bytes=0, grad_bytes=2, activation_bytes=2, compute="fp16"
        ),
        Precision(
            name="bf16", weight_bytes=2, cast_cache_bytes=0, grad_bytes=2, activation_bytes=2, compute="bf16"
        ),
        # Weight-only quantization for inference: int8 (LLM.int8 / per-channel) and int4
        # (NF4/GPTQ-style groups); activations and compute stay in fp16.
        Precision(
            name="int8",
            weight_bytes=1,
            cast_cache_bytes=0,
            grad_bytes=0,
            activation_bytes=2,
            compute="fp16",
            quant_bits=8,
            training=False,
        ),
        Precision(
            name="int4",
            weight_bytes=0.5,
            cast_cache_bytes=0,
            grad_bytes=0,
            activation_bytes=2,
            compute="fp16",
            quant_bits=4,
            training=False,
        ),
    )
}

PRECISION_NAMES = ("fp32", "amp-fp16", "amp-bf16", "fp16", "bf16", "int8", "int4")


def get_precision(name: str) -> Precision:
    key = name.strip().lower().replace("_", "-")
    aliases = {
        "float32": "fp32",
        "float16": "fp16",
        "half": "fp16",
        "bfloat16": "bf16",
        "amp": "amp-fp16",
        "amp-float16": "amp-fp16",
        "amp-bfloat16": "amp-bf16",
        "q8": "int8",
        "q4": "int4",
        "nf4": "int4",
    }
    key = aliases.get(key, key)
    if key not in PRECISIONS:
        # The valid values are always listed: a close match alone hides the others (fp8 -> fp16?).
        close = close_match_hint(key, PRECISION_NAMES)
        valid = "valid precisions: " + ", ".join(PRECISION_NAMES)
        close_zh = close_match_hint(key, PRECISION_NAMES, lang="zh")
        valid_zh = "可用的精度:" + ", ".join(PRECISION_NAMES)
        raise FitbenchError(
            f"unknown precision '{name}'",
            f"{close} {valid}" if close else valid,
            message_zh=f"未知的精度 '{name}'",
            hint_zh=f"{close_zh} {valid_zh}" if close_zh else valid_zh,
        )
    return PRECISIONS[key]
