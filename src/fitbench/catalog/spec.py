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
# Per-direction datasheet rate of each PCIe generation at x16 (see gpus.toml).
_PCIE_GB_S = {"pcie3": 16, "pcie4": 32, "pcie5": 64}
_ACCEPTED = ROW_KEYS | set(PEAK_KEYS)
_EXAMPLE = "e.g. --gpu-spec 'name=My card,memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5'"


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
            raise FitbenchError(f"GPU spec part '{part.strip()}' is not key=value", _EXAMPLE)
        if key in row:
            raise FitbenchError(f"GPU spec gives {key} twice", "give each key once")
        row[key] = _scalar(value)
    return row


def _from_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FitbenchError(
            f"cannot read GPU spec {path}: {exc.strerror or exc}",
            "pass an existing .toml (or .json) file, or the inline form",
        ) from None
    try:
        data: Any = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise FitbenchError(
            f"GPU spec {path} is not valid {path.suffix[1:].upper()}: {exc}",
            "fix the file; `fitbench gpus --toml rtx-4090` prints a valid one",
        ) from None
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if isinstance(data, dict) and "gpu" in data:
        inner = data["gpu"]
        if isinstance(inner, list) and len(inner) == 1:
            inner = inner[0]
        if not isinstance(inner, dict):
            raise FitbenchError(f"GPU spec {path} holds {len(inner)} cards", "put one card in a spec file")
        data = inner
    if not isinstance(data, dict):
        raise FitbenchError(
            f"GPU spec {path} holds no table of keys", "write one card's keys, as gpus.toml does"
        )
    return {k: v for k, v in data.items() if k not in DERIVED_KEYS and v is not None}


def _complete(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The spec as a full catalog row: flat peaks folded into tflops, defaults filled in."""
    unknown = sorted(set(raw) - _ACCEPTED)
    if unknown:
        key = unknown[0]
        hint = close_match_hint(key, _ACCEPTED) or "keys are those of gpus.toml rows, plus fp32/fp16/... flat"
        raise FitbenchError(f"unknown key '{key}' in GPU spec {where}", hint)
    row = dict(raw)
    tflops = _fold_peaks(row, where)
    for key, what in SPEC_REQUIRED.items():
        if key not in row and key not in tflops:
            raise FitbenchError(f"GPU spec {where} has no {key}", f"add {what}")
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
            f"tflops in GPU spec {where} must be a table", "e.g. tflops = { fp32 = 104.8, fp16 = 209.5 }"
        )
    for key in PEAK_KEYS:
        if key == "bf16" and isinstance(row.get(key), bool):
            continue  # bf16=true is the row's flag; bf16=209 is the peak
        if key in row:
            if key in tflops:
                raise FitbenchError(f"GPU spec {where} gives {key} twice", f"give {key} once")
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
            )
        if value <= 0:
            raise FitbenchError(
                f"{key} in GPU spec {where} must be positive, got {value}", "give the datasheet figure"
            )


def load_gpu_spec(text: str) -> GpuSpec:
    """The GpuSpec of a `--gpu-spec` value: a .toml/.json file path or inline key=value pairs.

    Every problem is a FitbenchError of one line naming the key; the figures go through the
    catalog's own row checks (units, bf16 flag, memory_mib within the nominal size, ...).
    """
    text = text.strip()
    if not text:
        raise FitbenchError("empty --gpu-spec", _EXAMPLE)
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
        ) from None
