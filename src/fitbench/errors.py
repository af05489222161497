"""The one exception type the CLI turns into a single line instead of a traceback.

Anything a user can get wrong (a name, a size, a file) raises ``FitbenchError`` with a message
that says what is wrong and a hint that says how to fix it. Everything else is a bug and keeps
its traceback.

Every user reads the line in their language: each raise gives the Chinese text beside the English
(``message_zh``, ``hint_zh``), written next to it so the two cannot drift apart the way a distant
catalogue entry could (the advice's own sentences live in ``fitbench.advise.i18n``; an error's
values are the raise site's locals, hence inline). The CLI prints ``text(lang)``; a missing
Chinese text falls back to the English one. `tests/unit/test_error_zh.py` fails on a raise
without it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def one_line(text: str) -> str:
    """`text` with its line breaks folded into spaces: messages often quote other libraries'
    exceptions (a tarfile or an import error lists causes on several lines), and a user-facing
    error must stay one line on the terminal."""
    return _LINE_BREAKS.sub(" ", str(text)).strip()


class FitbenchError(Exception):
    """A problem with the user's input or environment, reported as one line."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        message_zh: str | None = None,
        hint_zh: str | None = None,
        exit_code: int = 2,
    ) -> None:
        message = one_line(message)
        hint = one_line(hint) if hint else None
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.message_zh = one_line(message_zh) if message_zh else None
        self.hint_zh = one_line(hint_zh) if hint_zh else None
        self.exit_code = exit_code

    def text(self, lang: str = "en") -> tuple[str, str | None]:
        """(message, hint) in `lang`; each part falls back to English where it has no Chinese."""
        if lang == "zh":
            return self.message_zh or self.message, (self.hint_zh or self.hint) if self.hint else None
        return self.message, self.hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


def zh_or(names: Iterable[str]) -> str:
    """'a'、'b' 或 'c': a Chinese list of alternatives (English says 'a' or 'b' or 'c')."""
    quoted = [f"'{n}'" for n in names]
    return "、".join(quoted[:-1]) + " 或 " + quoted[-1] if len(quoted) > 1 else "".join(quoted)


def close_match_hint(
    name: str, choices: Iterable[str], *, n: int = 3, cutoff: float = 0.5, lang: str = "en"
) -> str | None:
    """The hint "did you mean 'a' or 'b'?" for the choices close to `name`, or None when none is.

    For a caller that lists its choices in a wording of its own; a higher `cutoff` keeps a name
    that is merely similar (another model family, say) from being offered as a typo's fix.
    """
    close = difflib.get_close_matches(name.lower(), sorted(set(choices)), n=n, cutoff=cutoff)
    if not close:
        return None
    if lang == "zh":
        return f"是否想输入 {zh_or(close)}?"
    return "did you mean " + " or ".join(f"'{c}'" for c in close) + "?"


def did_you_mean(name: str, choices: Iterable[str], *, n: int = 3, lang: str = "en") -> str:
    """A hint naming the closest valid choices, or listing them all when none is close."""
    options = sorted(set(choices))
    close = close_match_hint(name, options, n=n, lang=lang)
    if close:
        return close
    shown = ", ".join(options[:12]) + (", …" if len(options) > 12 else "")
    return f"可选值:{shown}" if lang == "zh" else f"choose one of: {shown}"


def unknown_name(
    kind: str, name: str, choices: Iterable[str], *, kind_zh: str, list_command: str | None = None
) -> FitbenchError:
    """The standard error for a name that is not in a registry; `kind_zh` names the kind in Chinese."""
    choices = tuple(choices)
    hint = did_you_mean(name, choices)
    hint_zh = did_you_mean(name, choices, lang="zh")
    if list_command:
        hint += f"; `{list_command}` lists them all"
        hint_zh += f";`{list_command}` 可列出全部"
    return FitbenchError(
        f"unknown {kind} '{name}'", hint, message_zh=f"未知的{kind_zh} '{name}'", hint_zh=hint_zh
    )
