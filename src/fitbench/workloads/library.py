"""The bundled library of popular models: config.json equivalents that work offline.

Each file in workloads/models/ holds one model's architecture fields as its config.json spells
them, the URL they were taken from and the published parameter count (tests check the count
from the architecture against it). `fitbench estimate NAME` reads them through the same
config reader as a user's own config.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fitbench.errors import FitbenchError, close_match_hint
from fitbench.workloads.workload import Workload

MODELS_DIR = Path(__file__).with_name("models")


@dataclass(frozen=True)
class LibraryModel:
    name: str
    repo: str
    source: str
    published_params: int
    published_active_params: int | None
    note: str
    config: dict[str, Any]
    active_excludes_embeddings: bool = False


@cache
def models() -> dict[str, LibraryModel]:
    """Every bundled model by its name (lower case)."""
    out: dict[str, LibraryModel] = {}
    for path in sorted(MODELS_DIR.glob("*.json")):
        d = json.loads(path.read_text(encoding="utf-8"))
        out[d["name"]] = LibraryModel(
            name=d["name"],
            repo=d["repo"],
            source=d["source"],
            published_params=d["published_params"],
            published_active_params=d.get("published_active_params"),
            note=d.get("note", ""),
            config=d["config"],
            active_excludes_embeddings=d.get("published_active_excludes_embeddings", False),
        )
    return out


def find(name: str) -> LibraryModel | None:
    """The model called `name`, or whose Hub id (`Org/Name`, any case) is `name`; else None."""
    key = name.strip().lower()
    table = models()
    if key in table:
        return table[key]
    for model in table.values():
        if model.repo.lower() == key or model.repo.lower().rsplit("/", 1)[-1] == key:
            return model
    return None


def get_model(name: str) -> LibraryModel:
    model = find(name)
    if model is None:
        close = close_match_hint(name.strip().lower(), models(), n=3, cutoff=0.5)
        close_zh = close_match_hint(name.strip().lower(), models(), n=3, cutoff=0.5, lang="zh")
        raise FitbenchError(
            f"unknown model '{name[:60]}'",
            f"{close + ' ' if close else ''}`fitbench models` lists the bundled models; "
            "or pass --config PATH for a local config.json",
            message_zh=f"未知的模型 '{name[:60]}'",
            hint_zh=(
                f"{close_zh + ' ' if close_zh else ''}`fitbench models` "
                "可列出内置模型;也可传入 --config PATH 指定本地 config.json"
            ),
        )
    return model


def workload_for_model(name: str, **overrides: Any) -> Workload:
    """A Workload for a bundled model with the config reader's defaults and `overrides`."""
    from fitbench.workloads.hf_config import workload_from_data

    model = get_model(name)
    return workload_from_data(dict(model.config), name=model.name, source=model.repo, **overrides)
