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

import functools
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fitbench.core.gpu import GpuSpec
from fitbench.core.units import GB, TFLOPS, GiB, MiB
from fitbench.errors import FitbenchError, did_you_mean

__all__ = [
    "BRIEF_GPUS",
    "LIST_COMMAND",
    "PRECISION_KEYS",
    "get_gpu",
    "gpu_to_dict",
    "load_catalog",
    "resolve_gpus",
]

# The three cards of the report fitbench reproduces: entry, enthusiast, data centre.
BRIEF_GPUS = ("rtx-3060-12gb", "rtx-4090", "a100-40gb")
LIST_COMMAND = "fitbench gpus"
PRECISION_KEYS = ("fp32", "tf32", "fp16", "bf16")

_ARCHITECTURES = frozenset({"volta", "turing", "ampere", "ada", "hopper", "blackwell"})
_FORM_FACTORS = frozenset({"pcie", "sxm"})
_INTERCONNECTS = frozenset({"nvlink", "pcie3", "pcie4", "pcie5"})
_REQUIRED = frozenset({
    "id", "name", "vendor", "architecture", "memory_gib", "bandwidth_gb_s", "tflops", "bf16",
    "form_factor", "interconnect", "interconnect_gb_s", "source",
})
_OPTIONAL = frozenset({
    "memory_mib", "reserved_mib", "price_usd", "price_source", "price_date", "aliases", "notes",
})
_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_DATE_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")

_VENDOR_WORDS = frozenset({"nvidia", "geforce", "tesla"})
_REWRITES = (
    (re.compile(r"\brtx(?=\d)"), "rtx "),            # rtx4090 -> rtx 4090
    (re.compile(r"(?<=\d)(ti|super)\b"), r" \1"),    # 4060ti -> 4060 ti
    (re.compile(r"\b(\d+) gb\b"), r"\1gb"),          # 16 gb -> 16gb
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


def _row_to_spec(row: Mapping[str, Any], default_reserved_mib: float, where: str) -> GpuSpec:
    keys = set(row)
    if missing := _REQUIRED - keys:
        raise ValueError(f"{where}: missing {', '.join(sorted(missing))}")
    if unknown := keys - _REQUIRED - _OPTIONAL:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    gid = row["id"]
    where = f"{where} ({gid})"
    if not isinstance(gid, str) or not _ID_RE.match(gid):
        raise ValueError(f"{where}: id must be lowercase words joined by dashes")
    for key in ("name", "vendor", "source"):
        if not isinstance(row[key], str) or not row[key].strip():
            raise ValueError(f"{where}: {key} must be a non-empty string")
    if row["architecture"] not in _ARCHITECTURES:
        raise ValueError(f"{where}: architecture must be one of {sorted(_ARCHITECTURES)}")
    if row["form_factor"] not in _FORM_FACTORS:
        raise ValueError(f"{where}: form_factor must be one of {sorted(_FORM_FACTORS)}")
    if row["interconnect"] not in _INTERCONNECTS:
        raise ValueError(f"{where}: interconnect must be one of {sorted(_INTERCONNECTS)}")

    # Memory: the exact nvidia-smi total where known, else the nominal size in GiB.
    nominal_mib = _number(row, "memory_gib", where) * 1024
    total_mib = _number(row, "memory_mib", where) if "memory_mib" in row else nominal_mib
    if not 0.9 * nominal_mib <= total_mib <= nominal_mib:
        raise ValueError(f"{where}: memory_mib {total_mib} is not within 90-100 % of memory_gib")
    reserved_mib = _number(row, "reserved_mib", where) if "reserved_mib" in row else default_reserved_mib
    if reserved_mib >= total_mib * 0.1:
        raise ValueError(f"{where}: reserved_mib {reserved_mib} is implausibly large")
    memory_bytes = int(total_mib * MiB)
    usable_bytes = int((total_mib - reserved_mib) * MiB)

    tflops = row["tflops"]
    if not isinstance(tflops, dict) or not {"fp32", "fp16"} <= set(tflops) <= set(PRECISION_KEYS):
        raise ValueError(f"{where}: tflops needs fp32 and fp16 and may add tf32, bf16")
    peak = {k: _number(tflops, k, where) * TFLOPS for k in PRECISION_KEYS if k in tflops}
    if not isinstance(row["bf16"], bool) or row["bf16"] != ("bf16" in peak):
        raise ValueError(f"{where}: bf16 must be true exactly when tflops has a bf16 rate")

    price = row.get("price_usd")
    if price is not None:
        _number(row, "price_usd", where)
        if not row.get("price_source") or not _DATE_RE.match(str(row.get("price_date", ""))):
            raise ValueError(f"{where}: price_usd needs price_source and price_date (YYYY-MM)")

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
        form_factor=row["form_factor"],
        interconnect=row["interconnect"],
        interconnect_bytes_s=_number(row, "interconnect_gb_s", where) * GB,
        price_usd=float(price) if price is not None else None,
        price_source=row.get("price_source", ""),
        price_date=row.get("price_date", ""),
        source=row["source"],
        aliases=tuple(aliases),
        notes=row.get("notes", ""),
    )


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
    exact: dict[str, str]             # normalised id/name/alias -> id
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
            f"no GPU named in '{name}'", f"name a GPU such as rtx-4090; `{LIST_COMMAND}` lists them all"
        )
    key = "".join(tokens)
    if key in index.exact:
        return catalog[index.exact[key]]
    wanted = set(tokens)
    matches = [gid for gid, words in index.words.items() if wanted <= words]
    if len(matches) == 1:
        return catalog[matches[0]]
    if matches:
        hint = f"it could be {' or '.join(matches)}; name one of them"
        raise FitbenchError(f"ambiguous GPU '{name}'", hint)
    hint = did_you_mean("-".join(tokens), catalog)
    raise FitbenchError(f"unknown GPU '{name}'", f"{hint}; `{LIST_COMMAND}` lists them all")


def resolve_gpus(names: Iterable[str]) -> list[GpuSpec]:
    """GpuSpecs for command-line GPU names, in the order given, without duplicates.

    Each entry may hold several names separated by commas; "all" stands for the whole catalog
    in catalog order. An empty input gives an empty list (the caller picks its default).
    """
    catalog = _load(None)
    out: dict[str, GpuSpec] = {}
    for entry in names:
        for part in entry.split(","):
            part = part.strip()
            if not part:
                continue
            specs = list(catalog.values()) if part.lower() == "all" else [get_gpu(part)]
            for spec in specs:
                out.setdefault(spec.id, spec)
    return list(out.values())


def gpu_to_dict(spec: GpuSpec) -> dict[str, Any]:
    """A JSON-ready dict of one GPU: the exact SI figures plus rounded human units beside them."""
    return {
        "id": spec.id,
        "name": spec.name,
        "vendor": spec.vendor,
        "architecture": spec.architecture,
        "memory_bytes": spec.memory_bytes,
        "usable_bytes": spec.usable_bytes,
        "memory_gib": round(spec.memory_bytes / GiB, 2),
        "usable_gib": round(spec.usable_bytes / GiB, 2),
        "bandwidth_bytes_s": spec.bandwidth_bytes_s,
        "bandwidth_gb_s": round(spec.bandwidth_bytes_s / GB, 1),
        "peak_flops": dict(spec.peak_flops),
        "peak_tflops": {k: round(v / TFLOPS, 2) for k, v in spec.peak_flops.items()},
        "bf16": spec.bf16,
        "form_factor": spec.form_factor,
        "interconnect": spec.interconnect,
        "interconnect_bytes_s": spec.interconnect_bytes_s,
        "interconnect_gb_s": round(spec.interconnect_bytes_s / GB, 2),
        "price_usd": spec.price_usd,
        "price_source": spec.price_source,
        "price_date": spec.price_date,
        "source": spec.source,
        "aliases": list(spec.aliases),
        "notes": spec.notes,
    }
