"""Stored weight formats: how many bytes a quantized matrix really takes, and how it is computed.

Why one value for every format: `--precision int4`, `--weights gptq` and a config.json's
`quantization_config` must all reach the same memory and speed arithmetic. A `WeightFormat`
says what a quantized Linear stores (packed values, scales, zero points, indices, each in the
layout of the library that writes it) and which compute path its matmuls take; `matrix_bytes`
turns that into bytes for one [out_features, in_features] matrix.

Layouts counted (tensor shapes as the libraries register them):

* bitsandbytes 8-bit (`Int8Params`, LLM.int8): CB int8 [out, in] and SCB fp32 [out].
* bitsandbytes 4-bit (`Params4bit`, `functional.quantize_4bit`, blocksize 64): the flattened
  matrix packed two values a byte, uint8 [ceil(n / 2)]; absmax fp32 [ceil(n / 64)]. With double
  quantisation (`bnb_4bit_use_double_quant`, `compress_statistics`) absmax becomes uint8 (one
  byte a block) plus the nested state's fp32 absmax per 256 blocks and one fp32 offset. The
  4-bit and 8-bit code books (16 and 256 fp32 values) are shared lookup tables and not counted.
* GPTQ (AutoGPTQ / GPTQModel `QuantLinear`, checkpoint_format "gptq"): qweight int32
  [in * bits / 32, out], qzeros int32 [groups, out * bits / 32], scales fp16 [groups, out],
  g_idx int32 [in], with groups = ceil(in / group_size) (group_size -1: one group). The
  "marlin" checkpoint format stores no qzeros and no g_idx.
* AWQ (AutoAWQ `WQLinear_GEMM`): qweight int32 [in, out * bits / 32], qzeros int32
  [groups, out * bits / 32] (absent with zero_point false), scales fp16 [groups, out].
* compressed-tensors pack-quantized (vLLM `CompressedTensorsWNA16`): weight_packed int32
  [out, in * bits / 32], weight_scale [out, groups] in the model dtype, weight_zero_point int32
  [ceil(out * bits / 32), groups] when asymmetric, weight_shape int64 [2].
* fp8 e4m3 (transformers `FP8Linear`, DeepSeek-V3's `weight_block_size` [128, 128]):
  weight float8_e4m3fn [out, in] and weight_scale_inv fp32 [ceil(out / 128), ceil(in / 128)];
  per-channel (fbgemm_fp8, compressed-tensors "channel"): fp32 [out, 1]; per-tensor: one fp32.
* MXFP4 (OCP microscaling, transformers' Mxfp4 quantizer as gpt-oss ships it): `*_blocks`
  uint8 [.., in / 32, 16] (two e2m1 values a byte) and `*_scales` uint8 [.., in / 32] (one e8m0
  exponent per 32 values): 4.25 bits a weight.
* GGUF types (llama.cpp): published bits per weight, see GGUF_BPW.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from fitbench.errors import FitbenchError, did_you_mean

# llama.cpp's own sizes for LLaMA-v1-7B (6,738,415,616 parameters) per type, in GiB, from the
# QUANT_OPTIONS table of tools/quantize/quantize.cpp (e.g. `{ "Q4_K_M", ..., " 3.80G, +0.0532
# ppl @ LLaMA-v1-7B" }`); bits per weight = GiB * 2^30 * 8 / parameters. These are whole-file
# figures, so they include the block scales and, for the k-quant mixes (_M), the higher types
# the mix gives some tensors (attention V, feed-forward down, the output matrix).
LLAMA_V1_7B_PARAMS = 6_738_415_616
GGUF_GIB_LLAMA_7B = {
    "q8_0": 6.70,
    "q6_k": 5.15,
    "q5_k_m": 4.45,
    "q4_k_m": 3.80,
    "q4_0": 3.56,
    "q3_k_m": 3.07,
    "q2_k": 2.63,
}
GGUF_BPW = {k: round(v * 2**30 * 8 / LLAMA_V1_7B_PARAMS, 3) for k, v in GGUF_GIB_LLAMA_7B.items()}
# The bits each type's blocks hold per value before scales (ggml-common.h block layouts).
GGUF_VALUE_BITS = {"q8_0": 8, "q6_k": 6, "q5_k_m": 5, "q4_k_m": 4, "q4_0": 4, "q3_k_m": 3, "q2_k": 2}

# Share of the card's bandwidth the dequantising kernels of a method reach while decoding,
# relative to a plain 16-bit GEMV. bitsandbytes is markedly slower than fp16 at batch 1 (its
# kernels dequantise through shared memory); fused GPTQ/AWQ (ExLlama, Marlin), fp8 and GGUF
# kernels stream the packed weights at about the 16-bit rate.
BANDWIDTH_SHARE = {"bnb-int8": 0.35, "bnb-4bit": 0.6}

KV_CACHE_DTYPES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1, "int8": 1}


@dataclass(frozen=True, kw_only=True)
class WeightFormat:
    """How the quantized Linear layers of a model are stored and computed.

    method        bnb-int8 | bnb-4bit | gptq | awq | compressed-int | fp8 | mxfp4 | gguf
    bits          bits of each stored value (GGUF: the type's published bits per weight,
                  scales included)
    group_size    input columns sharing one scale; -1: one per output row over all inputs
    block         fp8 block scales (rows, columns); (0, 0) per channel; None per tensor
    scale_bytes   bytes of one scale
    zero_points   integer zero points stored (GPTQ / AWQ / asymmetric compressed-tensors)
    g_idx         GPTQ's int32 group index per input column
    double_quant  bitsandbytes' nested absmax quantisation
    compute       the matmul path of compute-bound phases: 'dequant' (expand to 16 bit, then a
                  16-bit GEMM) or 'fp8' / 'int8' (tensor cores of that type, where the card has
                  them; otherwise dequant)
    quantize_head the LM head is quantized too (compressed-tensors without it in `ignore`,
                  GPTQModel's lm_head option, GGUF)
    skip          module names kept in 16 bit (modules_to_not_convert / ignore)
    label         the short name shown to users
    source        where the format came from: '--weights', '--precision', 'quantization_config'
    """

    method: str
    bits: float
    group_size: int = -1
    block: tuple[int, int] | None = None
    scale_bytes: int = 2
    zero_points: bool = False
    g_idx: bool = False
    double_quant: bool = False
    compute: str = "dequant"
    quantize_head: bool = False
    skip: tuple[str, ...] = ()
    label: str = ""
    source: str = "--weights"

    @property
    def bandwidth_share(self) -> float:
        return BANDWIDTH_SHARE.get(self.method, 1.0)

    def describe(self) -> str:
        """E.g. 'GPTQ 4-bit group 128' for the assumptions list."""
        if self.method == "gguf":
            return f"GGUF {self.label} ({self.bits:g} bits a weight, llama.cpp's figure for LLaMA-7B)"
        if self.method == "fp8":
            scales = (
                "per tensor"
                if self.block is None
                else "per channel"
                if self.block == (0, 0)
                else f"block {self.block[0]}x{self.block[1]}"
            )
            return f"fp8 e4m3 ({scales} scales)"
        if self.method == "mxfp4":
            return "MXFP4 (4-bit e2m1 values, one e8m0 scale per 32)"
        if self.method == "bnb-int8":
            return "bitsandbytes int8 (LLM.int8)"
        if self.method == "bnb-4bit":
            return f"bitsandbytes {self.label}" + (" with double quantization" if self.double_quant else "")
        group = "per channel" if self.group_size == -1 else f"group {self.group_size}"
        name = {"gptq": "GPTQ", "awq": "AWQ", "compressed-int": "compressed-tensors int"}[self.method]
        return f"{name} {self.bits:g}-bit {group}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WeightFormat:
        data = dict(data)
        if data.get("block") is not None:
            data["block"] = tuple(data["block"])
        data["skip"] = tuple(data.get("skip") or ())
        return cls(**data)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _bnb_int8_bytes(fmt: WeightFormat, fin: int, fout: int) -> tuple[int, int]:
    return fin * fout, 4 * fout


def _bnb_4bit_bytes(fmt: WeightFormat, fin: int, fout: int) -> tuple[int, int]:
    n = fin * fout
    blocks = _ceil(n, 64)
    if fmt.double_quant:
        return _ceil(n, 2), blocks + 4 * _ceil(blocks, 256) + 4
    return _ceil(n, 2), 4 * blocks


def _fp8_bytes(fmt: WeightFormat, fin: int, fout: int) -> tuple[int, int]:
    if fmt.block is None:
        scales = 1
    elif fmt.block == (0, 0):
        scales = fout
    else:
        scales = _ceil(fout, fmt.block[0]) * _ceil(fin, fmt.block[1])
    return fin * fout, 4 * scales


def _mxfp4_bytes(fmt: WeightFormat, fin: int, fout: int) -> tuple[int, int]:
    blocks = _ceil(fin, 32) * fout
    return 16 * blocks, blocks


def _groups(fmt: WeightFormat, fin: int) -> int:
    return _ceil(fin, fin if fmt.group_size == -1 else fmt.group_size)


def _gptq_bytes(fmt: WeightFormat, fin: int, fout: int) -> tuple[int, int]:
    bits, groups = int(fmt.bits), _groups(fmt, fin)
    packed = 4 * _ceil(fin * bits, 32) * fout
    meta = 2 * groups * fout
    if fmt.zero_points:
        meta += 4 * groups * _ceil(fout * bits, 32)
    if fmt.g_idx:
        meta += 4 * fin
    return packed, meta


def _awq_bytes(fmt: WeightFormat, fin: int, fout: int) -> tuple[int, int]:
    bits, groups = int(fmt.bits), _groups(fmt, fin)
    packed = 4 * fin * _ceil(fout * bits, 32)
    meta = 2 * groups * fout + (4 * groups * _ceil(fout * bits, 32) if fmt.zero_points else 0)
    return packed, meta


def _compressed_int_bytes(fmt: WeightFormat, fin: int, fout: int) -> tuple[int, int]:
    bits, groups = int(fmt.bits), _groups(fmt, fin)
    if bits == 8:  # int-quantized: int8 [out, in] and fp32 scales (vLLM CompressedTensorsW8A8Int8)
        return fin * fout, 4 * fout * groups
    packed = 4 * fout * _ceil(fin * bits, 32)
    meta = fmt.scale_bytes * fout * groups + 16
    if fmt.zero_points:
        meta += 4 * _ceil(fout * bits, 32) * groups
    return packed, meta


def matrix_bytes(fmt: WeightFormat, fin: int, fout: int) -> tuple[int, int]:
    """(packed values, scales and other metadata) in bytes of one [fout, fin] weight matrix
    stored in `fmt`, counted from the tensors its library registers (module docstring)."""
    if fmt.method == "gguf":
        return _gguf_bytes(fmt, fin * fout)
    count = _MATRIX_BYTES.get(fmt.method)
    if count is None:
        raise FitbenchError(
            f"unknown weight format method '{fmt.method}'", message_zh=f"未知的权重格式方法 '{fmt.method}'"
        )
    return count(fmt, fin, fout)


def _gguf_bytes(fmt: WeightFormat, n: int) -> tuple[int, int]:
    """GGUF: the published bits per weight split into the type's value bits and the rest (block
    scales, and the higher types a k-quant mix gives some tensors)."""
    values = n * GGUF_VALUE_BITS[fmt.label] / 8
    total = n * fmt.bits / 8
    return round(values), round(total - values)


_MATRIX_BYTES = {
    "bnb-int8": _bnb_int8_bytes,
    "bnb-4bit": _bnb_4bit_bytes,
    "fp8": _fp8_bytes,
    "gptq": _gptq_bytes,
    "awq": _awq_bytes,
    "compressed-int": _compressed_int_bytes,
    "mxfp4": _mxfp4_bytes,
}


def matrix_total_bytes(fmt: WeightFormat, fin: int, fout: int) -> int:
    values, meta = matrix_bytes(fmt, fin, fout)
    return values + meta


# -- formats by name ----------------------------------------------------------------------------
LEGACY = {
    "int8": WeightFormat(method="bnb-int8", bits=8, scale_bytes=4, label="int8", source="--precision"),
    "int4": WeightFormat(
        method="bnb-4bit", bits=4, group_size=64, scale_bytes=4, label="nf4", source="--precision"
    ),
}

WEIGHT_NAMES = (
    "none",
    "int8",
    "nf4",
    "nf4-dq",
    "fp4",
    "fp4-dq",
    "gptq",
    "gptq-8bit",
    "gptq-3bit",
    "gptq-2bit",
    "awq",
    "fp8",
    "fp8-channel",
    "fp8-tensor",
    "mxfp4",
    *GGUF_BPW,
)
_GROUPED = re.compile(r"^(gptq|awq)(?:-(\d+)bit)?(?:-g(\d+|all))?$")


def parse_weights(text: str) -> WeightFormat | None:
    """A `--weights` name: none, int8, nf4[-dq], fp4[-dq], gptq[-Nbit][-gG|-gall], awq[-gG],
    fp8 (128x128 blocks), fp8-channel, fp8-tensor, mxfp4, or a GGUF type (q8_0 ... q2_k).
    'none' (None) keeps the weights in the precision's own dtype."""
    key = text.strip().lower().replace("_", "-") if isinstance(text, str) else ""
    gguf_key = key.replace("-", "_")
    if key == "none":
        return None
    if key in ("int8", "bnb-int8", "llm-int8"):
        return WeightFormat(method="bnb-int8", bits=8, scale_bytes=4, label="int8")
    if key in ("nf4", "nf4-dq", "fp4", "fp4-dq", "int4"):
        kind = "fp4" if key.startswith("fp4") else "nf4"
        return WeightFormat(
            method="bnb-4bit",
            bits=4,
            group_size=64,
            scale_bytes=4,
            label=kind,
            double_quant=key.endswith("-dq"),
        )
    key = {"fp8-e4m3": "fp8", "e4m3": "fp8", "float8-e4m3fn": "fp8"}.get(key, key)
    if key in ("fp8", "fp8-block", "fp8-channel", "fp8-tensor"):
        block = {"fp8-channel": (0, 0), "fp8-tensor": None}.get(key, (128, 128))
        return WeightFormat(method="fp8", bits=8, block=block, scale_bytes=4, compute="fp8", label=key)
    if key == "mxfp4":
        return WeightFormat(method="mxfp4", bits=4.25, group_size=32, scale_bytes=1, label="mxfp4")
    if gguf_key in GGUF_BPW:
        return WeightFormat(method="gguf", bits=GGUF_BPW[gguf_key], quantize_head=True, label=gguf_key)
    match = _GROUPED.match(key)
    if match:
        method, bits_text, group_text = match.groups()
        bits = int(bits_text or 4)
        allowed = (2, 3, 4, 8) if method == "gptq" else (4,)
        if bits not in allowed:
            raise FitbenchError(
                f"--weights {text}: {method} stores {', '.join(map(str, allowed))} bits, not {bits}",
                f"for example --weights {method}",
                message_zh=(
                    f"--weights {text}:{method} 只支持 {', '.join(map(str, allowed))} 位,不支持 {bits} 位"
                ),
                hint_zh=f"例如 --weights {method}",
            )
        group = -1 if group_text == "all" else int(group_text or 128)
        if group != -1 and not 1 <= group <= 1 << 20:
            raise FitbenchError(
                f"--weights {text}: group size {group} is not usable",
                "use -g32 ... -g128",
                message_zh=f"--weights {text}:分组大小 {group} 不可用",
                hint_zh="请使用 -g32 ... -g128",
            )
        return make_grouped(method, bits, group)
    raise FitbenchError(
        f"unknown weight format '{text}'",
        did_you_mean(key, WEIGHT_NAMES),
        message_zh=f"未知的权重格式 '{text}'",
        hint_zh=did_you_mean(key, WEIGHT_NAMES, lang="zh"),
    )


def make_grouped(
    method: str,
    bits: int,
    group: int,
    *,
    g_idx: bool = True,
    zero_points: bool = True,
    skip: tuple[str, ...] = (),
    quantize_head: bool = False,
    source: str = "--weights",
    scale_bytes: int = 2,
) -> WeightFormat:
    label = f"{method}-{bits}bit-g{group if group != -1 else 'all'}"
    return WeightFormat(
        method=method,
        bits=bits,
        group_size=group,
        scale_bytes=scale_bytes,
        zero_points=zero_points,
        g_idx=g_idx and method == "gptq",
        skip=skip,
        quantize_head=quantize_head,
        label=label,
        source=source,
    )


def kv_cache_element_bytes(dtype: str) -> int:
    """Bytes of one cached K or V element for a `--kv-cache` dtype."""
    return KV_CACHE_DTYPES[dtype]


def kv_cache_scale_bytes_per_head(dtype: str) -> int:
    """Metadata per head and token of one of K/V: an int8 cache keeps an fp16 scale and zero
    point per head and token (LMDeploy's kv int8, asymmetric per-head per-token); an fp8 cache
    one scale per layer (vLLM's k_scale / v_scale), which is nothing per token."""
    return 4 if dtype == "int8" else 0


def check_kv_cache(name: str) -> str:
    key = name.strip().lower() if isinstance(name, str) else ""
    key = {
        "float16": "fp16",
        "half": "fp16",
        "bfloat16": "bf16",
        "float32": "fp32",
        "fp8-e4m3": "fp8",
        "fp8_e4m3": "fp8",
        "e4m3": "fp8",
    }.get(key, key)
    if key not in KV_CACHE_DTYPES:
        raise FitbenchError(
            f"unknown KV cache dtype '{name}'",
            did_you_mean(key, tuple(KV_CACHE_DTYPES)),
            message_zh=f"未知的 KV 缓存数据类型 '{name}'",
            hint_zh=did_you_mean(key, tuple(KV_CACHE_DTYPES), lang="zh"),
        )
    return key


def bits_per_weight(fmt: WeightFormat, fin: int = 4096, fout: int = 4096) -> float:
    """Effective bits a weight (values plus metadata) for a matrix of the given shape."""
    return 8 * matrix_total_bytes(fmt, fin, fout) / (fin * fout)


def is_finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
