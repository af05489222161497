"""Read a config.json's `quantization_config` and `torch_dtype` into fitbench's vocabulary.

Why a reader of its own: pre-quantized checkpoints say how they are stored only here (GPTQ,
AWQ, bitsandbytes, fp8, compressed-tensors each spell it their own way), and a wrong guess of
bits, group size or skipped modules moves the memory estimate by gigabytes. Every value a
user's file can get wrong (an unknown method, bits 0, 3.7 or "4", a negative group size, a list
where a number belongs) raises one FitbenchError naming the key, never a raw exception.
"""

from __future__ import annotations

from typing import Any

from fitbench.core.quant import WeightFormat, make_grouped
from fitbench.errors import FitbenchError, did_you_mean
from fitbench.workloads.config_values import ConfigValues, show

METHODS = ("gptq", "awq", "bitsandbytes", "fp8", "fbgemm_fp8", "compressed-tensors", "mxfp4")
MAX_GROUP = 1 << 20
# config.json torch_dtype (transformers <= 4) or dtype (transformers 5) -> precision name
DTYPES = {
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "half": "fp16",
    "float": "fp32",
    "fp16": "fp16",
    "bf16": "bf16",
    "fp32": "fp32",
}


class _Q(ConfigValues):
    """Typed access to one quantization_config; errors name the file and the key."""

    part = "quantization_config "
    default_hint = (
        "fix the value, or pass --weights NAME to override it",
        "请修正该值,或传入 --weights NAME 覆盖它",
    )

    def __init__(self, data: dict[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def get(self, *keys: str) -> tuple[str, Any]:
        for key in keys:
            if self.data.get(key) is not None:
                return key, self.data[key]
        return keys[0], None

    def int(
        self,
        *keys: str,
        default: int | None = None,
        allowed: tuple[int, ...] | None = None,
        minimum: int = 1,
        maximum: int = MAX_GROUP,
        also: tuple[int, ...] = (),
    ) -> int:
        key, value = self.get(*keys)
        if value is None:
            if default is None:
                raise self.error(f"needs '{key}'", message_zh=f"需要 '{key}'")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(
                f"'{key}' must be a whole number, got {show(value)}",
                message_zh=f"'{key}' 必须是整数,实际为 {show(value, 'zh')}",
            )
        if allowed is not None and value not in allowed:
            raise self.error(
                f"'{key}' is {value}; this method stores {', '.join(map(str, allowed))} bits",
                message_zh=f"'{key}' 为 {value};这种方法只存储 {', '.join(map(str, allowed))} 位",
            )
        if allowed is None and value not in also and not minimum <= value <= maximum:
            extra = f" or {', '.join(map(str, also))}" if also else ""
            extra_zh = f",或为 {', '.join(map(str, also))}" if also else ""
            raise self.error(
                f"'{key}' must be from {minimum} to {maximum}{extra}, got {value}",
                message_zh=f"'{key}' 必须在 {minimum} 到 {maximum} 之间{extra_zh},实际为 {value}",
            )
        return value

    def names(self, *keys: str) -> tuple[str, ...]:
        key, value = self.get(*keys)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(
                f"'{key}' must be a list of module names", message_zh=f"'{key}' 必须是模块名称列表"
            )
        return tuple(value[:4096])


def precision_from_config(data: dict[str, Any], source: str) -> tuple[str, str] | None:
    """(precision, key) from `dtype` (transformers 5) or `torch_dtype`; None when neither is set
    or the value is 'auto'."""
    for key in ("dtype", "torch_dtype"):
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise FitbenchError(
                f"{source}: '{key}' must be a dtype name such as \"bfloat16\"",
                "fix the value, or pass --precision",
                message_zh=f"{source}:'{key}' 必须是数据类型名称,例如 \"bfloat16\"",
                hint_zh="请修正该值,或传入 --precision",
            )
        name = value.strip().lower().removeprefix("torch.")
        if name == "auto":
            return None
        if name not in DTYPES:
            raise FitbenchError(
                f"{source}: '{key}' {value[:40]!r} is not a dtype fitbench knows",
                "use float16, bfloat16 or float32, or pass --precision",
                message_zh=f"{source}:'{key}' {value[:40]!r} 不是 fitbench 认识的数据类型",
                hint_zh="请使用 float16、bfloat16 或 float32,或传入 --precision",
            )
        return DTYPES[name], key
    return None


def weight_format_from_config(data: dict[str, Any], source: str) -> tuple[WeightFormat | None, str | None]:
    """(weight format, KV cache dtype) from a config's `quantization_config`, (None, None) if absent."""
    raw = data.get("quantization_config")
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        raise FitbenchError(
            f"{source}: 'quantization_config' must be an object, got {type(raw).__name__}",
            "fix the file, or pass --weights NAME",
            message_zh=f"{source}:'quantization_config' 必须是对象,实际为 {type(raw).__name__}",
            hint_zh="请修正该文件,或传入 --weights NAME",
        )
    q = _Q(raw, source)
    method_raw = raw.get("quant_method")
    if method_raw is None and ("load_in_4bit" in raw or "load_in_8bit" in raw):
        method_raw = "bitsandbytes"
    if not isinstance(method_raw, str):
        raise q.error(
            "needs 'quant_method' as a string",
            f"fitbench reads {', '.join(METHODS)}",
            message_zh="需要字符串形式的 'quant_method'",
            hint_zh=f"fitbench 能读取 {', '.join(METHODS)}",
        )
    method = method_raw.strip().lower().replace("_", "-")
    method = {"fbgemm-fp8": "fbgemm_fp8", "compressed_tensors": "compressed-tensors"}.get(method, method)
    if method not in METHODS:
        shown = method_raw if len(method_raw) <= 40 else method_raw[:37] + "..."
        raise q.error(
            f"quant_method {shown!r} is not supported",
            f"{did_you_mean(method, METHODS) or ''} fitbench reads {', '.join(METHODS)}; "
            "or pass --weights NAME".strip(),
            message_zh=f"不支持 quant_method {shown!r}",
            hint_zh=(
                f"{did_you_mean(method, METHODS, lang='zh')} fitbench 能读取 "
                f"{', '.join(METHODS)};或传入 --weights NAME"
            ),
        )
    reader = {
        "gptq": _gptq,
        "awq": _awq,
        "bitsandbytes": _bnb,
        "fp8": _fp8,
        "fbgemm_fp8": _fbgemm_fp8,
        "compressed-tensors": _compressed,
        "mxfp4": _mxfp4,
    }[method]
    return reader(q)


def _gptq(q: _Q) -> tuple[WeightFormat, None]:
    bits = q.int("bits", allowed=(2, 3, 4, 8))
    group = q.int("group_size", default=128, also=(-1,))
    marlin = q.text("checkpoint_format", "gptq").lower() == "marlin"
    skip = q.names("modules_to_not_convert")
    fmt = make_grouped(
        "gptq",
        bits,
        group,
        g_idx=not marlin,
        zero_points=not marlin,
        skip=skip,
        quantize_head=q.flag("lm_head", False),
        source="quantization_config",
    )
    q.flag("desc_act", False)
    q.flag("sym", True)
    return fmt, None


def _awq(q: _Q) -> tuple[WeightFormat, None]:
    bits = q.int("bits", "w_bit", allowed=(4,))
    group = q.int("group_size", "q_group_size", default=128, also=(-1,))
    skip = q.names("modules_to_not_convert")
    return make_grouped(
        "awq", bits, group, zero_points=q.flag("zero_point", True), skip=skip, source="quantization_config"
    ), None


def _bnb(q: _Q) -> tuple[WeightFormat, None]:
    four, eight = q.flag("load_in_4bit", False), q.flag("load_in_8bit", False)
    if four == eight:
        raise q.error(
            "must set exactly one of 'load_in_4bit' and 'load_in_8bit' to true",
            message_zh="'load_in_4bit' 和 'load_in_8bit' 必须恰好有一个为 true",
        )
    skip = q.names("llm_int8_skip_modules", "modules_to_not_convert")
    if eight:
        return WeightFormat(
            method="bnb-int8", bits=8, scale_bytes=4, label="int8", skip=skip, source="quantization_config"
        ), None
    kind = q.text("bnb_4bit_quant_type", "fp4").lower()
    if kind not in ("nf4", "fp4"):
        raise q.error(
            f"'bnb_4bit_quant_type' {kind[:20]!r} is not nf4 or fp4",
            message_zh=f"'bnb_4bit_quant_type' {kind[:20]!r} 不是 nf4 或 fp4",
        )
    return WeightFormat(
        method="bnb-4bit",
        bits=4,
        group_size=64,
        scale_bytes=4,
        label=kind,
        skip=skip,
        double_quant=q.flag("bnb_4bit_use_double_quant", False),
        source="quantization_config",
    ), None


def _block(q: _Q, key: str, value: Any) -> tuple[int, int]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(type(v) is int and 1 <= v <= MAX_GROUP for v in value)
    ):
        raise q.error(
            f"'{key}' must be two positive whole numbers such as [128, 128]",
            message_zh=f"'{key}' 必须是两个正整数,例如 [128, 128]",
        )
    return value[0], value[1]


def _fp8(q: _Q) -> tuple[WeightFormat, None]:
    fmt_name = q.text("fmt", "e4m3").lower()
    if fmt_name not in ("e4m3", "float8_e4m3fn"):
        raise q.error(
            f"'fmt' {fmt_name[:20]!r} is not e4m3",
            "fitbench models fp8 e4m3 weights",
            message_zh=f"'fmt' {fmt_name[:20]!r} 不是 e4m3",
            hint_zh="fitbench 按 fp8 e4m3 权重建模",
        )
    value = q.data.get("weight_block_size")
    block = None if value is None else _block(q, "weight_block_size", value)
    skip = q.names("modules_to_not_convert")
    return WeightFormat(
        method="fp8",
        bits=8,
        block=block,
        scale_bytes=4,
        compute="fp8",
        skip=skip,
        label="fp8",
        source="quantization_config",
    ), None


def _fbgemm_fp8(q: _Q) -> tuple[WeightFormat, None]:
    skip = q.names("modules_to_not_convert")
    return WeightFormat(
        method="fp8",
        bits=8,
        block=(0, 0),
        scale_bytes=4,
        compute="fp8",
        skip=skip,
        label="fp8-channel",
        source="quantization_config",
    ), None


def _mxfp4(q: _Q) -> tuple[WeightFormat, None]:
    """MXFP4 (gpt-oss): the experts in 4-bit microscaled blocks, the modules in
    `modules_to_not_convert` (attention, router, embeddings, LM head) in 16 bit. transformers keeps
    them packed where its MXFP4 kernels run (CUDA capability >= 7.5 with triton and `kernels`);
    vLLM and llama.cpp read them packed too."""
    return WeightFormat(
        method="mxfp4",
        bits=4.25,
        group_size=32,
        scale_bytes=1,
        skip=q.names("modules_to_not_convert"),
        label="mxfp4",
        source="quantization_config",
    ), None


def _compressed(q: _Q) -> tuple[WeightFormat | None, str | None]:
    """compressed-tensors: the first config group's weights scheme, its `format`, `ignore`, and
    a `kv_cache_scheme` (8-bit float -> an fp8 KV cache, 8-bit int -> int8)."""
    groups = q.data.get("config_groups")
    kv = _kv_scheme(q)
    if groups is None:
        return None, kv
    if not isinstance(groups, dict) or not groups:
        raise q.error(
            "'config_groups' must be an object of named schemes",
            message_zh="'config_groups' 必须是由命名方案组成的对象",
        )
    scheme = next(iter(groups.values()))
    if not isinstance(scheme, dict) or not isinstance(scheme.get("weights"), dict):
        raise q.error(
            "'config_groups' schemes need a 'weights' object",
            message_zh="'config_groups' 的方案需要 'weights' 对象",
        )
    w = _Q(scheme["weights"], q.source)
    bits = w.int("num_bits", allowed=(2, 4, 8))
    kind = w.text("type", "int").lower()
    if kind not in ("int", "float"):
        raise q.error(
            f"weights 'type' {kind[:20]!r} is not int or float",
            message_zh=f"weights 的 'type' {kind[:20]!r} 不是 int 或 float",
        )
    strategy = w.text("strategy", "tensor").lower()
    if strategy not in ("tensor", "channel", "group", "block", "tensor_group"):
        raise q.error(
            f"weights 'strategy' {strategy[:20]!r} is not tensor, channel, group or block",
            message_zh=f"weights 的 'strategy' {strategy[:20]!r} 不是 tensor、channel、group 或 block",
        )
    ignore = q.names("ignore")
    head = not any(name == "lm_head" or name.endswith("lm_head") for name in ignore)
    acts = scheme.get("input_activations")
    if kind == "float":
        return _compressed_fp8(q, w, bits, strategy, ignore, head, acts), kv
    if strategy in ("group", "tensor_group"):
        group = w.int("group_size", also=(-1,))
    elif strategy == "block":
        raise q.error(
            "int weights with block scales are not supported",
            "pass --weights NAME",
            message_zh="不支持带分块缩放的 int 权重",
            hint_zh="请传入 --weights NAME",
        )
    else:
        group = -1
    fmt = make_grouped(
        "compressed-int",
        bits,
        group,
        g_idx=False,
        zero_points=not w.flag("symmetric", True),
        skip=ignore,
        quantize_head=head,
        source="quantization_config",
    )
    if bits == 8 and acts:
        fmt = _replace(fmt, compute="int8")
    return fmt, kv


def _compressed_fp8(
    q: _Q, w: _Q, bits: int, strategy: str, ignore: tuple[str, ...], head: bool, acts: Any
) -> WeightFormat:
    """compressed-tensors float weights: fp8 with per-tensor, per-channel or block scales."""
    if bits != 8:
        raise q.error(
            f"float weights of {bits} bits are not supported",
            "fitbench models fp8 weights",
            message_zh=f"不支持 {bits} 位的浮点权重",
            hint_zh="fitbench 按 fp8 权重建模",
        )
    block: tuple[int, int] | None = None
    if strategy == "channel":
        block = (0, 0)
    elif strategy == "block":
        block = _block(q, "block_structure", w.data.get("block_structure"))
    return WeightFormat(
        method="fp8",
        bits=8,
        block=block,
        scale_bytes=4,
        skip=ignore,
        quantize_head=head,
        compute="fp8" if acts else "dequant",
        label="fp8",
        source="quantization_config",
    )


def _replace(fmt: WeightFormat, **changes: Any) -> WeightFormat:
    from dataclasses import replace

    return replace(fmt, **changes)


def _kv_scheme(q: _Q) -> str | None:
    value = q.data.get("kv_cache_scheme")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise q.error("'kv_cache_scheme' must be an object", message_zh="'kv_cache_scheme' 必须是对象")
    kv = _Q(value, q.source)
    bits = kv.int("num_bits", allowed=(8,))
    kind = kv.text("type", "float").lower()
    if kind not in ("int", "float"):
        raise q.error(
            f"kv_cache_scheme 'type' {kind[:20]!r} is not int or float",
            message_zh=f"kv_cache_scheme 的 'type' {kind[:20]!r} 不是 int 或 float",
        )
    return "fp8" if kind == "float" and bits == 8 else "int8"


def config_storage(
    data: dict[str, Any], source: str, defaults: dict[str, Any], given: dict[str, Any]
) -> dict[str, Any]:
    """Defaults a config.json sets for how the model is stored, where the user gave none:
    `precision` from torch_dtype / dtype (for inference; training keeps mixed precision),
    `weights` and `kv_cache` from quantization_config, and `origin` notes saying so. Removes a
    `weights` of 'none' from `given` (the user's way to ignore quantization_config)."""
    out: dict[str, Any] = {}
    origin: list[str] = []
    mode = given.get("mode") or defaults.get("mode")
    inference = mode == "infer"
    dtype = precision_from_config(data, source)
    if dtype is not None and inference and given.get("precision") is None:
        out["precision"] = dtype[0]
        origin.append(f"precision {dtype[0]} from config.json {dtype[1]}")
    fmt, kv = weight_format_from_config(data, source)
    user_weights = given.pop("weights", None)
    if fmt is not None and user_weights is None:
        if not inference:
            origin.append(f"quantization_config ({fmt.method}) not applied: training runs it unquantized")
        elif given.get("precision") in ("int8", "int4"):
            origin.append(f"quantization_config ({fmt.method}) gave way to --precision {given['precision']}")
        else:
            out["weights"] = fmt
            precision = given.get("precision") or out.get("precision") or defaults.get("precision")
            if precision not in ("fp16", "bf16"):
                out["precision"] = "fp16"
                origin.append("precision fp16 for the quantized weights' compute")
    elif user_weights is not None and user_weights != "none":
        given["weights"] = user_weights
        chosen = given.get("precision") or out.get("precision") or defaults.get("precision")
        if chosen not in ("fp16", "bf16"):
            out["precision"] = "fp16"
    if kv is not None and given.get("kv_cache") is None and "prompt_tokens" in defaults:  # generation
        out["kv_cache"] = kv
        origin.append(f"KV cache {kv} from quantization_config kv_cache_scheme")
    out["origin"] = tuple(origin)
    return out
