"""A card that is not in the catalog: `--gpu-spec FILE.toml` or `--gpu-spec 'name=…,memory_gib=…'`.

Why the catalog's own format: a user copies a row (`fitbench gpus --toml ID` or a row of
`fitbench gpus --json`), changes a figure, and gets the very same arithmetic the catalog card gets.
The same loader checks it, so a spec cannot hold a figure a catalog row could not.

Accepted forms:
    FILE.toml   one card: top-level keys, a [gpu] table, or a single [[gpu]] table
    FILE.json   one object (or a one-element list) as `fitbench gpus --json` prints it; the
                derived SI keys it adds beside the row are ignored
    inline      comma-separated key=value pairs; the peaks fp32, tf32, fp16, bf16, fp8, int8 may
                be given flat (fp16=209 means tflops.fp16 = 209 TFLOPS)

Only name, memory_gib, bandwidth_gb_s and the fp32 and fp16 peaks are required. Defaults: id from
the name, vendor "unknown", architecture "other", bf16 when a bf16 peak is given, a PCIe 4.0 x16
card (form_factor pcie, interconnect pcie4 at its datasheet rate), source "user spec".
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from fitbench.catalog import (
    DERIVED_KEYS,
    PEAK_KEYS,
    ROW_KEYS,
    _row_to_spec,
    default_reserved_mib,
)
from fitbench.core.gpu import GpuSpec
from fitbench.errors import FitbenchError, close_match_hint

__all__ = ["SPEC_REQUIRED", "is_spec", "load_gpu_spec"]

SPEC_REQUIRED = {
    "name": "the card's name, e.g. name=My card",
    "memory_gib": "its memory in GiB, e.g. memory_gib=32",
    "bandwidth_gb_s": "its memory bandwidth in GB/s, e.g. bandwidth_gb_s=1792",
    "fp32": "its FP32 peak in TFLOPS, e.g. fp32=104.8",
    "fp16": "its FP16 tensor peak (FP32 accumulate, dense) in TFLOPS, e.g. fp16=209.5",
}
SPEC_REQUIRED_ZH = {
    "name": "显卡名称,例如 name=My card",
    "memory_gib": "显存大小(GiB),例如 memory_gib=32",
    "bandwidth_gb_s": "显存带宽(GB/s),例如 bandwidth_gb_s=1792",
    "fp32": "FP32 峰值(TFLOPS),例如 fp32=104.8",
    "fp16": "FP16 Tensor 峰值(FP32 累加,稠密,TFLOPS),例如 fp16=209.5",
}
# Per-direction datasheet rate of each PCIe generation at x16 (see gpus.toml).
_PCIE_GB_S = {"pcie3": 16, "pcie4": 32, "pcie5": 64}
_ACCEPTED = ROW_KEYS | set(PEAK_KEYS)
_EXAMPLE = "e.g. --gpu-spec 'name=My card,memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5'"
_EXAMPLE_ZH = "例如 --gpu-spec 'name=My card,memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5'"


def is_spec(text: str) -> bool:
    """Whether a --gpu / --emulate value is a spec (inline pairs or a spec file), not a name."""
    return "=" in text or text.lower().endswith((".toml", ".json"))


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "custom-gpu"


def _scalar(text: str) -> Any:
    t = text.strip()
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    try:
        return float(t) if any(c in t for c in ".eE") else int(t)
    except ValueError:
        return t


def _inline(text: str) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise FitbenchError(
                f"GPU spec part '{part.strip()}' is not key=value",
                _EXAMPLE,
                message_zh=f"GPU 规格片段 '{part.strip()}' 不是 key=value 形式",
                hint_zh=_EXAMPLE_ZH,
            )
        if key in row:
            raise FitbenchError(
                f"GPU spec gives {key} twice",
                "give each key once",
                message_zh=f"GPU 规格中 {key} 出现了两次",
                hint_zh="每个键只写一次",
            )
        row[key] = _scalar(value)
    return row


def _from_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FitbenchError(
            f"cannot read GPU spec {path}: {exc.strerror or exc}",
            "pass an existing .toml (or .json) file, or the inline form",
            message_zh=f"无法读取 GPU 规格文件 {path}:{exc.strerror or exc}",
            hint_zh="请给出一个存在的 .toml(或 .json)文件,或使用内联写法",
        ) from None
    try:
        data: Any = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise FitbenchError(
            f"GPU spec {path} is not valid {path.suffix[1:].upper()}: {exc}",
            "fix the file; `fitbench gpus --toml rtx-4090` prints a valid one",
            message_zh=f"GPU 规格文件 {path} 不是有效的 {path.suffix[1:].upper()}:{exc}",
            hint_zh="请修正该文件;`fitbench gpus --toml rtx-4090` 会输出一个有效示例",
        ) from None
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if isinstance(data, dict) and "gpu" in data:
        inner = data["gpu"]
        if isinstance(inner, list) and len(inner) == 1:
            inner = inner[0]
        if not isinstance(inner, dict):
            raise FitbenchError(
                f"GPU spec {path} holds {len(inner)} cards",
                "put one card in a spec file",
                message_zh=f"GPU 规格文件 {path} 中有 {len(inner)} 张显卡",
                hint_zh="一个规格文件只写一张显卡",
            )
        data = inner
    if not isinstance(data, dict):
        raise FitbenchError(
            f"GPU spec {path} holds no table of keys",
            "write one card's keys, as gpus.toml does",
            message_zh=f"GPU 规格文件 {path} 中没有键值表",
            hint_zh="按 gpus.toml 的格式写出一张显卡的键",
        )
    return {k: v for k, v in data.items() if k not in DERIVED_KEYS and v is not None}


def _complete(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The spec as a full catalog row: flat peaks folded into tflops, defaults filled in."""
    unknown = sorted(set(raw) - _ACCEPTED)
    if unknown:
        key = unknown[0]
        hint = close_match_hint(key, _ACCEPTED) or "keys are those of gpus.toml rows, plus fp32/fp16/... flat"
        hint_zh = (
            close_match_hint(key, _ACCEPTED, lang="zh")
            or "可用的键与 gpus.toml 的行相同,另可平铺写 fp32/fp16/..."
        )
        raise FitbenchError(
            f"unknown key '{key}' in GPU spec {where}",
            hint,
            message_zh=f"GPU 规格 {where} 中有未知的键 '{key}'",
            hint_zh=hint_zh,
        )
    row = dict(raw)
    tflops = _fold_peaks(row, where)
    for key, what in SPEC_REQUIRED.items():
        if key not in row and key not in tflops:
            raise FitbenchError(
                f"GPU spec {where} has no {key}",
                f"add {what}",
                message_zh=f"GPU 规格 {where} 缺少 {key}",
                hint_zh=f"请添加{SPEC_REQUIRED_ZH[key]}",
            )
    _check_figures(row, tflops, where)
    row["tflops"] = tflops
    row.setdefault("id", _slug(str(row["name"])))
    row.setdefault("vendor", "unknown")
    row.setdefault("architecture", "other")
    row.setdefault("bf16", "bf16" in tflops)
    row.setdefault("form_factor", "pcie")
    row.setdefault("interconnect", "pcie4")
    if "interconnect_gb_s" not in row:
        if row["interconnect"] not in _PCIE_GB_S:
            raise FitbenchError(
                f"GPU spec {where} names interconnect {row['interconnect']} without its rate",
                "add interconnect_gb_s (per GPU, per direction)",
                message_zh=f"GPU 规格 {where} 指定了互连 {row['interconnect']},却没有给出其速率",
                hint_zh="请添加 interconnect_gb_s(每块 GPU、单向)",
            )
        row["interconnect_gb_s"] = _PCIE_GB_S[row["interconnect"]]
    row.setdefault("source", f"user spec {where}")
    return row


def _fold_peaks(row: dict[str, Any], where: str) -> dict[str, Any]:
    """The peaks as one tflops table: its own entries and the flat keys (fp32 = ...) moved
    out of `row` into it."""
    tflops = dict(row.pop("tflops", {}) or {})
    if not isinstance(tflops, dict):
        raise FitbenchError(
            f"tflops in GPU spec {where} must be a table",
            "e.g. tflops = { fp32 = 104.8, fp16 = 209.5 }",
            message_zh=f"GPU 规格 {where} 中的 tflops 必须是一个表",
            hint_zh="例如 tflops = { fp32 = 104.8, fp16 = 209.5 }",
        )
    for key in PEAK_KEYS:
        if key == "bf16" and isinstance(row.get(key), bool):
            continue  # bf16=true is the row's flag; bf16=209 is the peak
        if key in row:
            if key in tflops:
                raise FitbenchError(
                    f"GPU spec {where} gives {key} twice",
                    f"give {key} once",
                    message_zh=f"GPU 规格 {where} 中 {key} 出现了两次",
                    hint_zh=f"{key} 只写一次",
                )
            tflops[key] = row.pop(key)
    return tflops


def _check_figures(row: dict[str, Any], tflops: dict[str, Any], where: str) -> None:
    """Sizes, rates and peaks are positive numbers."""
    for key in ("memory_gib", "bandwidth_gb_s", "interconnect_gb_s", *tflops):
        value = tflops.get(key, row.get(key))
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FitbenchError(
                f"{key} in GPU spec {where} must be a number, got '{value}'",
                "write it in the row's units: GiB, GB/s, TFLOPS",
                message_zh=f"GPU 规格 {where} 中的 {key} 必须是数字,实际为 '{value}'",
                hint_zh="按该行的单位填写:GiB、GB/s、TFLOPS",
            )
        if value <= 0:
            raise FitbenchError(
                f"{key} in GPU spec {where} must be positive, got {value}",
                "give the datasheet figure",
                message_zh=f"GPU 规格 {where} 中的 {key} 必须为正数,实际为 {value}",
                hint_zh="请填写数据手册中的数值",
            )


# The catalog's row checks (fitbench.catalog._row_to_spec) speak English, as the bundled catalog's
# maintainers read them; a --gpu-spec user reads the ones a spec can reach in their language.
_ROW_PROBLEMS_ZH: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), zh)
    for pattern, zh in (
        (r"(?P<key>\w+) must be a number, got (?P<v>.*)", "{key} 必须是数字,实际为 {v}"),
        (r"(?P<key>\w+) must be positive, got (?P<v>.*)", "{key} 必须为正数,实际为 {v}"),
        (r"id must be lowercase words joined by dashes", "id 必须是用短横线连接的小写单词"),
        (r"(?P<key>\w+) must be a non-empty string", "{key} 必须是非空字符串"),
        (r"(?P<key>\w+) must be one of (?P<v>.*)", "{key} 必须是以下之一:{v}"),
        (
            r"memory_mib (?P<v>\S+) is not within 90-100 % of memory_gib",
            "memory_mib {v} 不在 memory_gib 的 90-100 % 之内",
        ),
        (r"reserved_mib (?P<v>\S+) is implausibly large", "reserved_mib {v} 大得不合理"),
        (
            r"(?P<key>\w+) needs (?P<a>\w+) and (?P<b>\w+) \(YYYY-MM\)",
            "{key} 需要同时给出 {a} 和 {b}(YYYY-MM)",
        ),
        (
            r"sm_count must be a whole number of streaming multiprocessors",
            "sm_count 必须是流式多处理器的整数个数",
        ),
        (r"missing (?P<v>.*)", "缺少 {v}"),
        (r"unknown key\(s\) (?P<v>.*)", "未知的键 {v}"),
        (
            r"tflops needs fp32 and fp16 and may add tf32, bf16, fp8, int8",
            "tflops 需要 fp32 和 fp16,还可以加 tf32、bf16、fp8、int8",
        ),
        (
            r"bf16 must be true exactly when tflops has a bf16 rate",
            "bf16 必须且只能在 tflops 含 bf16 峰值时为 true",
        ),
        (
            r"(?P<arch>\S+) cards have no FP8 tensor cores; drop fp8",
            "{arch} 显卡没有 FP8 Tensor Core;请去掉 fp8",
        ),
        (r"measured must be true or false", "measured 必须是 true 或 false"),
        (r"aliases must be a list of non-empty strings", "aliases 必须是非空字符串的列表"),
    )
)


def _row_problem_zh(message: str) -> str:
    """A row check's `message` in Chinese (kept as it is where no pattern fits)."""
    for pattern, zh in _ROW_PROBLEMS_ZH:
        match = pattern.fullmatch(message)
        if match:
            return zh.format(**match.groupdict())
    return message


def load_gpu_spec(text: str) -> GpuSpec:
    """The GpuSpec of a `--gpu-spec` value: a .toml/.json file path or inline key=value pairs.

    Every problem is a FitbenchError of one line naming the key; the figures go through the
    catalog's own row checks (units, bf16 flag, memory_mib within the nominal size, ...).
    """
    text = text.strip()
    if not text:
        raise FitbenchError("empty --gpu-spec", _EXAMPLE, message_zh="--gpu-spec 为空", hint_zh=_EXAMPLE_ZH)
    if "=" in text:
        raw, where = _inline(text), "(inline)"
    else:
        path = Path(text).expanduser()
        raw, where = _from_file(path), str(path)
    row = _complete(raw, where)
    default_reserved = default_reserved_mib()
    try:
        return _row_to_spec(row, default_reserved, f"GPU spec {where}")
    except ValueError as exc:
        message = str(exc).replace(f"GPU spec {where} ({row['id']}): ", "")
        raise FitbenchError(
            f"GPU spec {where}: {message}",
            "keys and units are those of gpus.toml; `fitbench gpus --toml rtx-4090` prints a valid row",
            message_zh=f"GPU 规格 {where}:{_row_problem_zh(message)}",
            hint_zh="键与单位与 gpus.toml 相同;`fitbench gpus --toml rtx-4090` 会输出一个有效的行",
        ) from None
