"""Typed reads of values from a user's JSON config, shared by the config.json and
quantization_config readers: one way to say "that key holds the wrong kind of value".

Both readers name the file and the key in every error; a bad value is shown short (never
thousands of digits or a whole nested object), so the message stays one line.
"""

from __future__ import annotations

from typing import Any

from fitbench.errors import FitbenchError


def show(value: Any, lang: str = "en") -> str:
    """A short JSON-ish rendering of a bad value for an error message (never thousands of digits),
    in the message's language (`lang` zh for the Chinese text)."""
    zh = lang == "zh"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        if value.bit_length() <= 128:
            return str(value)
        return f"{value.bit_length()} 位的数字" if zh else f"a {value.bit_length()}-bit number"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"字符串 {text!r}" if zh else f"the string {text!r}"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "列表" if zh else "a list"
    if isinstance(value, dict):
        return "对象" if zh else "an object"
    return type(value).__name__


class ConfigValues:
    """Typed access to one config dict. Every error names the file (`source`), then what part of it
    the reader reads (`part`: "quantization_config " for that block, nothing for config.json itself);
    `default_hint` (English, Chinese) is the fix an error gets when its raise gives none."""

    data: dict[str, Any]
    source: str
    part: str = ""
    default_hint: tuple[str, str] | None = None

    def error(
        self,
        message: str,
        hint: str | None = None,
        *,
        message_zh: str | None = None,
        hint_zh: str | None = None,
    ) -> FitbenchError:
        """The one-line error for a bad value of this config (`message_zh`, `hint_zh`: the Chinese)."""
        if not hint and self.default_hint:
            hint, hint_zh = self.default_hint[0], hint_zh or self.default_hint[1]
        return FitbenchError(
            f"{self.source}: {self.part}{message}",
            hint,
            message_zh=f"{self.source}:{self.part}{message_zh}" if message_zh else None,
            hint_zh=hint_zh,
        )

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(
                f"'{key}' must be true or false, got {show(value)}",
                message_zh=f"'{key}' 必须是 true 或 false,实际为 {show(value, 'zh')}",
            )
        return value

    def text(self, key: str, default: str) -> str:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.error(
                f"'{key}' must be a string, got {show(value)}",
                message_zh=f"'{key}' 必须是字符串,实际为 {show(value, 'zh')}",
            )
        return value
