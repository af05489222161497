"""Plain-text tables for the terminal: aligned columns, no dependency, honest widths.

Reporters only read results; they never compute. Colour is used only on a TTY and only to
mark verdicts, so piped output stays clean.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

VERDICT_COLOURS = {"fits": "32", "tight": "33", "oom": "31", "ok": "32", "error": "31", "timeout": "31"}


def use_colour(stream: object = None) -> bool:
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


def colour_verdict(text: str, *, enabled: bool) -> str:
    code = VERDICT_COLOURS.get(text)
    return f"\x1b[{code}m{text}\x1b[0m" if enabled and code else text


def _visible_len(text: str) -> int:
    """Length without ANSI colour codes."""
    out, skip = 0, False
    for ch in text:
        if ch == "\x1b":
            skip = True
        elif skip and ch == "m":
            skip = False
        elif not skip:
            out += 1
    return out


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, align: str | None = None,
                 indent: str = "") -> str:
    """Columns padded to their widest cell; `align` is a string of 'l'/'r' per column."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max([_visible_len(h)] + [_visible_len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def fmt(cells: Sequence[str]) -> str:
        parts = []
        for i, cell in enumerate(cells):
            pad = " " * (widths[i] - _visible_len(cell))
            parts.append(cell + pad if align[i] == "l" else pad + cell)
        return indent + "  ".join(parts).rstrip()

    lines = [fmt(headers), indent + "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)
