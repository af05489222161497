"""The GPU catalog: datasheet rows from gpus.toml turned into GpuSpec, and a forgiving name lookup.

GPU figures are data, not code: every row in gpus.toml carries its source, so a reader can check
a number without reading Python. The TOML keeps the units people read on datasheets (GiB, GB/s,
TFLOPS); this module converts them once into the SI units GpuSpec holds (bytes, bytes/s, FLOP/s).

Usable memory rule (what one process can allocate, before its own CUDA context):
    usable = nvidia-smi total - driver reserve
where the reserve is the row's ``reserved_mib`` (a public observation: nvidia-smi total minus the
total CUDA reports) or, without one, the catalog's ``default_reserved_mib`` (512 MiB).

Name lookup, in order (``get_gpu``):
    1. normalise: lowercase, punctuation to spaces, drop the words NVIDIA/GeForce/Tesla,
       "rtx4090" -> "rtx 4090", "4060ti" -> "4060 ti", "16 GB" -> "16gb";
    2. exact: the normalised name, with spaces removed, equals a row's id, name or alias
       (so "RTX 4090", "rtx4090", "NVIDIA GeForce RTX 4090" and "rtx-4090" all match);
    3. tokens: otherwise the rows whose id/name/alias words include every word of the query;
       exactly one such row is the answer ("4090"), several are an ambiguity error that names
       them ("a100 pcie"). A bare family name resolves only where the catalog lists it as an
       alias of one row ("A100" -> a100-40gb, "H100" -> h100-sxm, "V100" -> v100-16gb);
    4. nothing matches: an unknown-name error with the closest ids.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fitbench.core.gpu import STREAM_EFFICIENCY, GpuSpec
from fitbench.core.units import GB, TFLOPS, GiB, MiB
from fitbench.errors import FitbenchError, did_you_mean, zh_or

__all__ = [
    "BRIEF_GPUS",
    "LIST_COMMAND",
    "PEAK_KEYS",
    "PRECISION_KEYS",
    "TENSOR_KEYS",
    "get_gpu",
    "gpu_to_dict",
    "gpu_to_row",
    "load_catalog",
    "lookup_gpu",
    "nearest_gpus",
    "resolve_gpus",
    "row_to_toml",
]

# The three cards of the report fitbench reproduces: entry, enthusiast, data centre.
BRIEF_GPUS = ("rtx-3060-12gb", "rtx-4090", "a100-40gb")
LIST_COMMAND = "fitbench gpus"
PRECISION_KEYS = ("fp32", "tf32", "fp16", "bf16")
# Peaks no precision mode computes in yet: fp8 marks FP8 tensor cores, int8 is TOPS.
TENSOR_KEYS = ("fp8", "int8")
PEAK_KEYS = PRECISION_KEYS + TENSOR_KEYS

ARCHITECTURES = frozenset({"volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "other"})
_NO_FP8 = frozenset({"volta", "turing", "ampere"})
FORM_FACTORS = frozenset({"pcie", "sxm", "oam"})
INTERCONNECTS = frozenset({"nvlink", "xgmi", "pcie3", "pcie4", "pcie5"})
_REQUIRED = frozenset(
    {
        "id",
        "name",
        "vendor",
        "architecture",
        "memory_gib",
        "bandwidth_gb_s",
        "tflops",
        "bf16",
        "form_factor",
        "interconnect",
        "interconnect_gb_s",
        "source",
    }
)
_OPTIONAL = frozenset(
    {
        "memory_mib",
        "reserved_mib",
        "price_usd",
        "price_source",
        "price_date",
        "rent_usd_per_hour",
        "rent_source",
        "rent_date",
        "measured",
        "aliases",
        "notes",
        "memory_type",
        "sm_count",
        "gemm_tflops",
        "gemm_source",
    }
)
ROW_KEYS = _REQUIRED | _OPTIONAL
_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_DATE_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")

_VENDOR_WORDS = frozenset({"nvidia", "geforce", "tesla", "amd", "instinct"})
_VARIANT_WORDS = frozenset({"ti", "super"})
_REWRITES = (
    (re.compile(r"\brtx(?=\d)"), "rtx "),  # rtx4090 -> rtx 4090
    (re.compile(r"(?<=\d)(ti|super)\b"), r" \1"),  # 4060ti -> 4060 ti
    (re.compile(r"\b(\d+) gb\b"), r"\1gb"),  # 16 gb -> 16gb
)


# ----------------------------------------------------------------------------- loading


def _default_text() -> tuple[str, str]:
    ref = resources.files(__name__).joinpath("gpus.toml")
    return ref.read_text(encoding="utf-8"), "fitbench/catalog/gpus.toml"


@functools.lru_cache(maxsize=8)
def _load(path: Path | None) -> dict[str, GpuSpec]:
    if path is None:
        text, where = _default_text()
    else:
        text, where = Path(path).read_text(encoding="utf-8"), str(path)
    data = tomllib.loads(text)
    default_reserved = data.get("default_reserved_mib", 512)
    rows = data.get("gpu")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{where}: no [[gpu]] tables")
    specs: dict[str, GpuSpec] = {}
    for n, row in enumerate(rows, start=1):
        spec = _row_to_spec(row, default_reserved, f"{where} [[gpu]] #{n}")
        if spec.id in specs:
            raise ValueError(f"{where}: id '{spec.id}' appears twice")
        specs[spec.id] = spec
    _Index.build(specs, where)  # rejects names that would resolve to two cards
    return specs


@functools.lru_cache(maxsize=1)
def default_reserved_mib() -> float:
    """The catalog's driver reserve for rows without an observed one (default_reserved_mib)."""
    return tomllib.loads(_default_text()[0]).get("default_reserved_mib", 512)


def load_catalog(path: str | Path | None = None) -> dict[str, GpuSpec]:
    """Every catalog GPU by id, in file order. Parsed once and cached; each call returns a new dict.

    ``path`` reads another catalog file in the same format (tests, private catalogs); a file
    that breaks the conventions raises ValueError naming the row, because a wrong row would
    otherwise become a wrong verdict.
    """
    return dict(_load(Path(path) if path is not None else None))


def _number(row: Mapping[str, Any], key: str, where: str, *, positive: bool = True) -> float:
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: {key} must be a number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{where}: {key} must be positive, got {value!r}")
    return value


def _check_labels(row: Mapping[str, Any], where: str) -> None:
    """The id, the names and the labels that must be one of a known set."""
    if not isinstance(row["id"], str) or not _ID_RE.match(row["id"]):
        raise ValueError(f"{where}: id must be lowercase words joined by dashes")
    for key in ("name", "vendor", "source"):
        if not isinstance(row[key], str) or not row[key].strip():
            raise ValueError(f"{where}: {key} must be a non-empty string")
    if row["architecture"] not in ARCHITECTURES:
        raise ValueError(f"{where}: architecture must be one of {sorted(ARCHITECTURES)}")
    if row["form_factor"] not in FORM_FACTORS:
        raise ValueError(f"{where}: form_factor must be one of {sorted(FORM_FACTORS)}")
    if row["interconnect"] not in INTERCONNECTS:
        raise ValueError(f"{where}: interconnect must be one of {sorted(INTERCONNECTS)}")


def _memory_bytes(row: Mapping[str, Any], default_reserved_mib: float, where: str) -> tuple[int, int]:
    """(total, usable) bytes: the exact nvidia-smi total where known, else the nominal size in
    GiB, less what the driver reserves."""
    nominal_mib = _number(row, "memory_gib", where) * 1024
    total_mib = _number(row, "memory_mib", where) if "memory_mib" in row else nominal_mib
    if not 0.9 * nominal_mib <= total_mib <= nominal_mib:
        raise ValueError(f"{where}: memory_mib {total_mib} is not within 90-100 % of memory_gib")
    reserved_mib = _number(row, "reserved_mib", where) if "reserved_mib" in row else default_reserved_mib
    if reserved_mib >= total_mib * 0.1:
        raise ValueError(f"{where}: reserved_mib {reserved_mib} is implausibly large")
    return int(total_mib * MiB), int((total_mib - reserved_mib) * MiB)


def _check_prices(row: Mapping[str, Any], where: str) -> None:
    """A price or a rental rate comes with its source and its month."""
    if row.get("price_usd") is not None:
        _number(row, "price_usd", where)
        if not row.get("price_source") or not _DATE_RE.match(str(row.get("price_date", ""))):
            raise ValueError(f"{where}: price_usd needs price_source and price_date (YYYY-MM)")
    if row.get("rent_usd_per_hour") is not None:
        _number(row, "rent_usd_per_hour", where)
        if not row.get("rent_source") or not _DATE_RE.match(str(row.get("rent_date", ""))):
            raise ValueError(f"{where}: rent_usd_per_hour needs rent_source and rent_date (YYYY-MM)")


def _sm_count(row: Mapping[str, Any], where: str) -> int:
    value = row.get("sm_count", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: sm_count must be a whole number of streaming multiprocessors")
    return value


def _row_to_spec(row: Mapping[str, Any], default_reserved_mib: float, where: str) -> GpuSpec:
    keys = set(row)
    if missing := _REQUIRED - keys:
        raise ValueError(f"{where}: missing {', '.join(sorted(missing))}")
    if unknown := keys - _REQUIRED - _OPTIONAL:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    gid = row["id"]
    where = f"{where} ({gid})"
    _check_labels(row, where)
    memory_bytes, usable_bytes = _memory_bytes(row, default_reserved_mib, where)

    tflops = row["tflops"]
    if not isinstance(tflops, dict) or not {"fp32", "fp16"} <= set(tflops) <= set(PEAK_KEYS):
        raise ValueError(f"{where}: tflops needs fp32 and fp16 and may add tf32, bf16, fp8, int8")
    peak = {k: _number(tflops, k, where) * TFLOPS for k in PEAK_KEYS if k in tflops}
    if not isinstance(row["bf16"], bool) or row["bf16"] != ("bf16" in peak):
        raise ValueError(f"{where}: bf16 must be true exactly when tflops has a bf16 rate")
    if "fp8" in peak and row["architecture"] in _NO_FP8:
        raise ValueError(f"{where}: {row['architecture']} cards have no FP8 tensor cores; drop fp8")

    gemm = _gemm_flops(row, peak, where)
    memory_type = row.get("memory_type", "")
    if memory_type and memory_type not in STREAM_EFFICIENCY:
        raise ValueError(f"{where}: memory_type must be one of {', '.join(sorted(STREAM_EFFICIENCY))}")
    _check_prices(row, where)
    price, rent = row.get("price_usd"), row.get("rent_usd_per_hour")
    measured = row.get("measured", True)
    if not isinstance(measured, bool):
        raise ValueError(f"{where}: measured must be true or false")

    aliases = row.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise ValueError(f"{where}: aliases must be a list of non-empty strings")

    return GpuSpec(
        id=gid,
        name=row["name"],
        vendor=row["vendor"],
        architecture=row["architecture"],
        memory_bytes=memory_bytes,
        usable_bytes=usable_bytes,
        bandwidth_bytes_s=_number(row, "bandwidth_gb_s", where) * GB,
        peak_flops=peak,
        bf16=row["bf16"],
        memory_type=memory_type,
        sm_count=_sm_count(row, where),
        nominal_memory_gib=float(row["memory_gib"]),
        form_factor=row["form_factor"],
        interconnect=row["interconnect"],
        interconnect_bytes_s=_number(row, "interconnect_gb_s", where) * GB,
        price_usd=float(price) if price is not None else None,
        price_source=row.get("price_source", ""),
        price_date=row.get("price_date", ""),
        rent_usd_per_hour=float(rent) if rent is not None else None,
        rent_source=row.get("rent_source", ""),
        rent_date=row.get("rent_date", ""),
        measured=measured,
        source=row["source"],
        aliases=tuple(aliases),
        notes=row.get("notes", ""),
        gemm_flops=gemm,
        gemm_source=row.get("gemm_source", ""),
    )


def _gemm_flops(row: Mapping[str, Any], peak: Mapping[str, float], where: str) -> dict[str, float]:
    """The published sustained GEMM rates (gemm_tflops) in FLOP/s: only for precisions the row has
    a peak for, with their source, and within a plausible band of that peak (a measurement
    half a card's peak or less is a power limit; one well above it is a typo)."""
    gemm = row.get("gemm_tflops")
    if gemm is None:
        if "gemm_source" in row:
            raise ValueError(f"{where}: gemm_source without gemm_tflops")
        return {}
    if not isinstance(gemm, dict) or not gemm or not set(gemm) <= set(PRECISION_KEYS):
        raise ValueError(f"{where}: gemm_tflops takes fp32, tf32, fp16 and bf16 rates")
    if not str(row.get("gemm_source", "")).strip():
        raise ValueError(f"{where}: gemm_tflops needs gemm_source (where the rates were published)")
    out = {}
    for key in PRECISION_KEYS:
        if key not in gemm:
            continue
        if key not in peak:
            raise ValueError(f"{where}: gemm_tflops has {key} but tflops has no {key} peak")
        value = _number(gemm, key, where) * TFLOPS
        if not 0.2 * peak[key] <= value <= 1.3 * peak[key]:
            raise ValueError(f"{where}: gemm_tflops {key} is not within 20-130 % of its peak")
        out[key] = value
    return out


# ----------------------------------------------------------------------------- lookup


def _tokens(text: str) -> tuple[str, ...]:
    """The words of a GPU name after normalisation (see the module docstring)."""
    s = re.sub(r"[^a-z0-9]+", " ", text.lower())
    for pattern, replacement in _REWRITES:
        s = pattern.sub(replacement, s)
    return tuple(t for t in s.split() if t not in _VENDOR_WORDS)


def _key(text: str) -> str:
    return "".join(_tokens(text))


@dataclass(frozen=True, kw_only=True)
class _Index:
    exact: dict[str, str]  # normalised id/name/alias -> id
    words: dict[str, frozenset[str]]  # id -> every word of its id, name and aliases

    @classmethod
    def build(cls, specs: Mapping[str, GpuSpec], where: str) -> _Index:
        exact: dict[str, str] = {}
        words: dict[str, frozenset[str]] = {}
        for spec in specs.values():
            spellings = (spec.id, spec.name, *spec.aliases)
            for spelling in spellings:
                key = _key(spelling)
                if not key:
                    raise ValueError(f"{where}: '{spelling}' of {spec.id} normalises to nothing")
                if exact.get(key, spec.id) != spec.id:
                    raise ValueError(f"{where}: '{spelling}' would name both {exact[key]} and {spec.id}")
                exact[key] = spec.id
            words[spec.id] = frozenset(w for s in spellings for w in _tokens(s))
        return cls(exact=exact, words=words)


@functools.lru_cache(maxsize=1)
def _default_index() -> _Index:
    return _Index.build(_load(None), "fitbench/catalog/gpus.toml")


def get_gpu(name: str) -> GpuSpec:
    """The catalog GPU a user or NVML means by ``name`` (id, marketing name, NVML name or alias).

    Raises FitbenchError for an ambiguous name (listing the candidates) or an unknown one
    (with the closest ids).
    """
    catalog = _load(None)
    index = _default_index()
    tokens = _tokens(name)
    if not tokens:
        raise FitbenchError(
            f"no GPU named in '{name}'",
            f"name a GPU such as rtx-4090; `{LIST_COMMAND}` lists them all",
            message_zh=f"'{name}' 中没有 GPU 名称",
            hint_zh=f"请给出 GPU 名称,例如 rtx-4090;`{LIST_COMMAND}` 可列出全部",
        )
    key = "".join(tokens)
    if key in index.exact:
        return catalog[index.exact[key]]
    wanted = set(tokens)
    # A variant word the query lacks is another card: "4070" is not the 4070 SUPER.
    matches = [
        gid
        for gid, words in index.words.items()
        if wanted <= words and not (_VARIANT_WORDS & set(_tokens(gid))) - wanted
    ]
    if len(matches) == 1:
        return catalog[matches[0]]
    if matches:
        hint = f"it could be {' or '.join(matches)}; name one of them"
        raise FitbenchError(
            f"ambiguous GPU '{name}'",
            hint,
            message_zh=f"GPU 名称 '{name}' 有歧义",
            hint_zh=f"可能是 {' 或 '.join(matches)};请指定其中一个",
        )
    near = nearest_gpus(name)
    hint = (
        ("did you mean " + " or ".join(f"'{g}'" for g in near) + "?") if near else did_you_mean(key, catalog)
    )
    hint_zh = f"是否想输入 {zh_or(near)}?" if near else did_you_mean(key, catalog, lang="zh")
    raise FitbenchError(
        f"unknown GPU '{name}'",
        f"{hint}; `{LIST_COMMAND}` lists them all, --gpu-spec describes any other card",
        message_zh=f"未知的 GPU '{name}'",
        hint_zh=f"{hint_zh};`{LIST_COMMAND}` 可列出全部,--gpu-spec 可描述其他任何显卡",
    )


def nearest_gpus(name: str, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The ids of the catalog cards whose spellings are closest to `name` (normalised), best first.

    Every spelling of a card counts (id, name, aliases), so "4090ti" finds rtx-4090 through
    "rtx 4090" and "A10G" finds a10."""
    key = _key(name)
    numbers = {t for t in _tokens(name) if any(c.isdigit() for c in t)}
    best: dict[str, float] = {}
    for spec in _load(None).values():
        for spelling in (spec.id, spec.name, *spec.aliases):
            other = _key(spelling)
            ratio = difflib.SequenceMatcher(None, key, other).ratio()
            if other and (other in key or key in other):
                ratio = max(ratio, 0.8)
            if numbers & set(_tokens(spelling)):
                ratio += 0.3  # the model number is the strongest clue: "4090ti" is about a 4090
            best[spec.id] = max(best.get(spec.id, 0.0), ratio)
    ranked = sorted((r, gid) for gid, r in best.items() if r >= cutoff)
    ranked.sort(key=lambda item: -item[0])
    return [gid for _, gid in ranked[:n]]


def resolve_gpus(names: Iterable[str], specs: Iterable[str] = ()) -> list[GpuSpec]:
    """GpuSpecs for command-line GPU names, in the order given, without duplicates, then one
    for each `--gpu-spec` value in `specs` (fitbench.catalog.spec).

    Each entry may hold several names separated by commas; "all" stands for the whole catalog
    in catalog order. An empty input gives an empty list (the caller picks its default).
    """
    catalog = _load(None)
    out: dict[str, GpuSpec] = {}
    extra = [lookup_gpu(s, spec=True) for s in specs]
    for entry in names:
        for part in entry.split(","):
            part = part.strip()
            if not part:
                continue
            cards = list(catalog.values()) if part.lower() == "all" else [get_gpu(part)]
            for card in cards:
                out.setdefault(card.id, card)
    return list(out.values()) + extra


def lookup_gpu(text: str, *, spec: bool | None = None) -> GpuSpec:
    """A catalog card by name, or a card described by a `--gpu-spec` value (a .toml/.json file or
    inline key=value pairs). `spec=None` tells them apart by the text itself (`--emulate`)."""
    from fitbench.catalog.spec import is_spec, load_gpu_spec

    if spec or (spec is None and is_spec(text)):
        return load_gpu_spec(text)
    return get_gpu(text)


def _plain(value: float) -> float | int:
    """A figure as the catalog writes it: 82.6, not 82.60000000000001; 1008, not 1008.0.

    Catalog figures have at most a few decimals, so rounding to 6 recovers the literal exactly
    and reading it back multiplies out to the very same float."""
    value = round(value, 6)
    return int(value) if value == int(value) else value


def gpu_to_row(spec: GpuSpec) -> dict[str, Any]:
    """One GPU as a gpus.toml row: the same keys and units, so it reads back (a catalog file or
    `--gpu-spec`) as the identical GpuSpec."""
    total_mib = spec.memory_bytes / MiB
    row: dict[str, Any] = {
        "id": spec.id,
        "name": spec.name,
        "vendor": spec.vendor,
        "architecture": spec.architecture,
        "memory_gib": _plain(spec.nominal_memory_gib or math.ceil(total_mib / 1024 * 100) / 100),
        "memory_mib": _plain(total_mib),
        "reserved_mib": _plain((spec.memory_bytes - spec.usable_bytes) / MiB),
        "bandwidth_gb_s": _plain(spec.bandwidth_bytes_s / GB),
        **({"memory_type": spec.memory_type} if spec.memory_type else {}),
        **({"sm_count": spec.sm_count} if spec.sm_count else {}),
        "tflops": {k: _plain(spec.peak_flops[k] / TFLOPS) for k in PEAK_KEYS if k in spec.peak_flops},
        "bf16": spec.bf16,
        "form_factor": spec.form_factor,
        "interconnect": spec.interconnect,
        "interconnect_gb_s": _plain(spec.interconnect_bytes_s / GB),
    }
    if spec.price_usd is not None:
        row |= {
            "price_usd": _plain(spec.price_usd),
            "price_source": spec.price_source,
            "price_date": spec.price_date,
        }
    if spec.rent_usd_per_hour is not None:
        row |= {
            "rent_usd_per_hour": _plain(spec.rent_usd_per_hour),
            "rent_source": spec.rent_source,
            "rent_date": spec.rent_date,
        }
    row |= {"measured": spec.measured, "source": spec.source, "aliases": list(spec.aliases)}
    if spec.notes:
        row["notes"] = spec.notes
    if spec.gemm_flops:
        row["gemm_tflops"] = {
            k: _plain(spec.gemm_flops[k] / TFLOPS) for k in PRECISION_KEYS if k in spec.gemm_flops
        }
        row["gemm_source"] = spec.gemm_source
    return row


# Keys gpu_to_dict adds beside the row: exact SI figures and rounded human units, derived from it.
DERIVED_KEYS = frozenset(
    {
        "memory_bytes",
        "usable_bytes",
        "usable_gib",
        "bandwidth_bytes_s",
        "peak_flops",
        "peak_tflops",
        "interconnect_bytes_s",
    }
)


def gpu_to_dict(spec: GpuSpec) -> dict[str, Any]:
    """A JSON-ready dict of one GPU: its gpus.toml row (same field names, so a row of
    `fitbench gpus --json` is a valid `--gpu-spec`) plus the exact SI figures (DERIVED_KEYS)."""
    row = gpu_to_row(spec)
    for key in ("price_usd", "price_source", "price_date", "rent_usd_per_hour", "rent_source", "rent_date"):
        row.setdefault(key, None)  # JSON readers find every key; TOML has no null, so rows omit them
    return row | {
        "memory_bytes": spec.memory_bytes,
        "usable_bytes": spec.usable_bytes,
        "usable_gib": round(spec.usable_bytes / GiB, 2),
        "bandwidth_bytes_s": spec.bandwidth_bytes_s,
        "peak_flops": dict(spec.peak_flops),
        "peak_tflops": {k: round(v / TFLOPS, 2) for k, v in spec.peak_flops.items()},
        "interconnect_bytes_s": spec.interconnect_bytes_s,
    }


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def row_to_toml(row: Mapping[str, Any]) -> str:
    """A row as one [[gpu]] table, the catalog's own format."""
    return "[[gpu]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in row.items())
