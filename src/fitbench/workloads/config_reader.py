"""Typed reads of a config.json's sizes: aliases, required keys and bounds, one-line errors.

Why a module of its own: the decoder readers (hf_config.py), the multimodal wrappers that pull
a language model and a vision tower out of one file (multimodal.py) and the vision-tower
counters (vision_tower.py) all read sizes the same way; each error names the file and the key.
"""

from __future__ import annotations

import math
from typing import Any

from fitbench.workloads.config_values import ConfigValues, show

# Sizes past these are typos, not models (the largest real vocabularies are ~1M tokens and the
# widest layers ~64k); they also keep later arithmetic on sane numbers.
MAX_SIZE = 1 << 24
MAX_POSITIONS = 1 << 30

_MISSING = object()


# -- reading keys with one-line errors ----------------------------------------------------------
class ConfigReader(ConfigValues):
    """Typed access to one config dict; every problem becomes a FitbenchError naming the file."""

    def __init__(self, data: dict[str, Any], source: str, model_type: str) -> None:
        self.data = data
        self.source = source
        self.model_type = model_type

    def lookup(self, keys: tuple[str, ...]) -> tuple[str, Any]:
        """The first of `keys` present with a non-null value (aliases of one size), else _MISSING."""
        for key in keys:
            value = self.data.get(key)
            if value is not None:
                return key, value
        return keys[0], _MISSING

    def require(self, *specs: str | tuple[str, ...]) -> None:
        """Name every missing required key at once, so one edit fixes the file."""
        missing: list[tuple[str, ...]] = []
        for spec in specs:
            keys = (spec,) if isinstance(spec, str) else spec
            if self.lookup(keys)[1] is _MISSING:
                # the two usual spellings (more aliases are accepted than named)
                missing.append(tuple(f"'{k}'" for k in keys[:2]))
        if missing:
            raise self.error(
                f"'{self.model_type}' configs need {', '.join(' or '.join(m) for m in missing)}",
                "add the missing keys, or use the model's original config.json",
                message_zh=f"'{self.model_type}' 配置需要 {'、'.join(' 或 '.join(m) for m in missing)}",
                hint_zh="请补上缺少的键,或使用模型原始的 config.json",
            )

    def int(self, *keys: str, default: Any = _MISSING, minimum: int = 1, maximum: int = MAX_SIZE) -> int:
        key, value = self.lookup(keys)
        if value is _MISSING:
            if default is _MISSING:
                raise self.error(
                    f"'{self.model_type}' configs need '{key}'",
                    "add it to the file",
                    message_zh=f"'{self.model_type}' 配置需要 '{key}'",
                    hint_zh="请把它加到文件中",
                )
            return default
        return self.check_int(key, value, minimum=minimum, maximum=maximum)

    def check_int(self, key: str, value: Any, *, minimum: int = 1, maximum: int = MAX_SIZE) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(
                f"'{key}' must be a whole number, got {show(value)}",
                "write sizes as JSON numbers, without quotes",
                message_zh=f"'{key}' 必须是整数,实际为 {show(value, 'zh')}",
                hint_zh="尺寸请写成 JSON 数字,不要加引号",
            )
        if isinstance(value, float):
            if not math.isfinite(value) or not value.is_integer():
                raise self.error(
                    f"'{key}' must be a whole number, got {show(value)}",
                    message_zh=f"'{key}' 必须是整数,实际为 {show(value, 'zh')}",
                )
            value = int(value)
        if value < minimum:
            raise self.error(
                f"'{key}' must be at least {minimum}, got {show(value)}",
                message_zh=f"'{key}' 至少为 {minimum},实际为 {show(value, 'zh')}",
            )
        if value > maximum:
            raise self.error(
                f"'{key}' is {show(value)}, beyond any real model",
                f"use at most {maximum}",
                message_zh=f"'{key}' 为 {show(value, 'zh')},超出了任何真实模型",
                hint_zh=f"请使用不超过 {maximum} 的值",
            )
        return value

    def probability(self, key: str) -> float | None:
        """A probability (a dropout rate), or None when the config leaves it out."""
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise self.error(
                f"'{key}' must be a probability between 0 and 1, got {show(value)}",
                "write it as a JSON number, such as 0.1",
                message_zh=f"'{key}' 必须是 0 到 1 之间的概率,实际为 {show(value, 'zh')}",
                hint_zh="请写成 JSON 数字,例如 0.1",
            )
        return float(value)

    def num_labels(self) -> int:
        """`num_labels`, else the size of `id2label`, else transformers' default of 2."""
        if self.data.get("num_labels") is not None:
            return self.int("num_labels")
        id2label = self.data.get("id2label")
        if id2label is None:
            return 2
        if not isinstance(id2label, dict):
            raise self.error(
                f"'id2label' must be an object mapping ids to labels, got {show(id2label)}",
                message_zh=f"'id2label' 必须是从 id 到标签的映射对象,实际为 {show(id2label, 'zh')}",
            )
        if not id2label:
            raise self.error(
                "'id2label' is empty",
                "a classifier needs at least one label",
                message_zh="'id2label' 为空",
                hint_zh="分类器至少需要一个标签",
            )
        return len(id2label)
