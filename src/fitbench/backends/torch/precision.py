"""What a fitbench precision name means in PyTorch, and what actually runs on this device.

    fp32          FP32 weights and math. On CUDA the torch defaults stay as they are (matmul
                  TF32 off, cuDNN TF32 on): that is what most users run; the flags are recorded.
    tf32          FP32 weights, TF32 tensor-core math for matmuls and convolutions (CUDA only).
    amp-fp16      FP32 weights, torch.autocast(fp16) around forward and loss, GradScaler.
    amp-bf16      FP32 weights, torch.autocast(bf16), no scaler (bf16 has FP32's range).
    fp16, bf16    the whole model in half precision, no autocast, no scaler.
    int8, int4    bitsandbytes weight-only quantized linear layers, fp16 compute (inference).

When the device cannot run what was asked (autocast fp16 on an old CPU build, TF32 on a CPU),
the plan says what runs instead and why, so the result never claims a precision it did not use.
"""

from __future__ import annotations

import contextlib
import importlib.util
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from fitbench.core.precision import Precision, get_precision
from fitbench.errors import FitbenchError

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True, kw_only=True)
class PrecisionPlan:
    requested: str
    in_effect: str
    param_dtype: torch.dtype
    autocast_dtype: torch.dtype | None = None
    grad_scaler: bool = False
    quant_bits: int | None = None
    allow_tf32: bool | None = None  # None: leave the torch defaults alone
    warnings: tuple[str, ...] = ()

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=self.autocast_dtype)

    @property
    def input_dtype(self) -> torch.dtype:
        """Floating inputs (images) match the weights: FP32 under autocast, half for pure half."""
        return self.param_dtype


def tf32_flags() -> dict[str, Any]:
    """The TF32 switches as they are now (reading them may warn on newer torch; silence that)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flags: dict[str, Any] = {
            "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        }
    return flags


def _autocast_works(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether autocast on this device really computes a matmul in `dtype`."""
    try:
        with torch.autocast(device_type=device.type, dtype=dtype):
            a = torch.ones(4, 4, device=device)
            out = a @ a
        return out.dtype == dtype
    except Exception:
        return False


def _half_works(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether this device runs the ops the models need (matmul, conv, norm, backward) in `dtype`."""
    try:
        x = torch.ones(2, 3, 8, 8, device=device, dtype=dtype, requires_grad=True)
        w = torch.ones(4, 3, 3, 3, device=device, dtype=dtype)
        y = torch.nn.functional.conv2d(x, w)
        y = torch.nn.functional.layer_norm(y, y.shape[-1:])
        (y.flatten(1) @ torch.ones(y.flatten(1).shape[1], 2, device=device, dtype=dtype)).sum().backward()
        return True
    except Exception:
        return False


def plan_precision(name: str, device: torch.device, *, training: bool) -> PrecisionPlan:
    info = get_precision(name)
    key = info.name
    notes: list[str] = []
    if info.quant_bits is not None:
        return _quantized_plan(info, device, training=training)
    if key == "fp32":
        return PrecisionPlan(requested=key, in_effect=key, param_dtype=torch.float32)
    if key == "tf32":
        if device.type != "cuda":
            notes.append("TF32 exists only on NVIDIA GPUs; ran FP32")
            return PrecisionPlan(
                requested=key, in_effect="fp32", param_dtype=torch.float32, warnings=tuple(notes)
            )
        return PrecisionPlan(requested=key, in_effect=key, param_dtype=torch.float32, allow_tf32=True)
    if info.amp:
        return _autocast_plan(info, device, training=training)
    low = DTYPES[info.compute]
    if not _half_works(device, low):
        notes.append(f"{info.compute} weights are not supported on {device.type} by this torch; ran FP32")
        return PrecisionPlan(
            requested=key, in_effect="fp32", param_dtype=torch.float32, warnings=tuple(notes)
        )
    if training and low == torch.float16:
        notes.append(
            "pure fp16 training has no loss scaling or master weights: fine for speed and memory, "
            "not for convergence"
        )
    return PrecisionPlan(requested=key, in_effect=key, param_dtype=low, warnings=tuple(notes))


def _quantized_plan(info: Precision, device: torch.device, *, training: bool) -> PrecisionPlan:
    """int8 / int4 weights through bitsandbytes: inference on a CUDA GPU only."""
    key = info.name
    if training:
        raise FitbenchError(
            f"precision '{key}' is for inference only",
            "use --mode infer",
            message_zh=f"精度 '{key}' 只用于推理",
            hint_zh="请使用 --mode infer",
        )
    if importlib.util.find_spec("bitsandbytes") is None:
        raise FitbenchError(
            "int8/int4 measurement needs bitsandbytes",
            "pip install bitsandbytes (CUDA only); `fitbench estimate` covers it",
            message_zh="int8/int4 实测需要 bitsandbytes",
            hint_zh="pip install bitsandbytes(仅支持 CUDA);`fitbench estimate` 可以估算它",
        )
    if device.type != "cuda":
        raise FitbenchError(
            "int8/int4 measurement needs a CUDA GPU",
            "run with --device cuda; `fitbench estimate` covers it",
            message_zh="int8/int4 实测需要 CUDA GPU",
            hint_zh="请使用 --device cuda 运行;`fitbench estimate` 可以估算它",
        )
    return PrecisionPlan(requested=key, in_effect=key, param_dtype=torch.float16, quant_bits=info.quant_bits)


def _autocast_plan(info: Precision, device: torch.device, *, training: bool) -> PrecisionPlan:
    """amp-fp16 / amp-bf16: fp32 weights under autocast, a GradScaler for fp16 training."""
    key, low = info.name, DTYPES[info.compute]
    notes: list[str] = []
    if not _autocast_works(device, low):
        notes.append(f"autocast to {info.compute} is not supported on {device.type} by this torch; ran FP32")
        return PrecisionPlan(
            requested=key, in_effect="fp32", param_dtype=torch.float32, warnings=tuple(notes)
        )
    if device.type == "cuda" and low == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        notes.append("this GPU has no native bf16; autocast emulates it (slow)")
    return PrecisionPlan(
        requested=key,
        in_effect=key,
        param_dtype=torch.float32,
        autocast_dtype=low,
        grad_scaler=(low == torch.float16 and training),
        warnings=tuple(notes),
    )


def set_math_flags(
    device: torch.device, *, allow_tf32: bool | None = None, cudnn_benchmark: bool | None = None
) -> dict[str, Any]:
    """The one place that flips torch's global math switches; return them as now in effect.

    `allow_tf32` sets TF32 for matmuls and cuDNN together, `cudnn_benchmark` lets cuDNN time its
    convolution algorithms per shape; None leaves a switch as it is. CUDA only: on other devices
    nothing is touched and nothing is reported. Writing the switches may warn on newer torch
    (they are being renamed); that is silenced, as reading them is in tf32_flags.
    """
    if device.type != "cuda":
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if allow_tf32 is not None:
            torch.backends.cuda.matmul.allow_tf32 = allow_tf32
            torch.backends.cudnn.allow_tf32 = allow_tf32
        if cudnn_benchmark is not None:
            torch.backends.cudnn.benchmark = cudnn_benchmark
    return tf32_flags()


def apply_math_flags(plan: PrecisionPlan, device: torch.device) -> dict[str, Any]:
    """Set TF32 switches when the plan asks for them; return the switches in effect (CUDA only)."""
    return set_math_flags(device, allow_tf32=plan.allow_tf32)
