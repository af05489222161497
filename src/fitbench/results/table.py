"""Plain-text tables for the terminal: aligned columns, no dependency, honest widths.

Reporters only read results; they never compute. Colour is used only on a TTY and only to
mark verdicts, so piped output stays clean.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Sequence

VERDICT_COLOURS = {
    "fits": "32",
    "tight": "33",
    "offload": "35",
    "oom": "31",
    "ok": "32",
    "error": "31",
    "timeout": "31",
}


def use_colour(stream: object = None) -> bool:
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


def colour_verdict(text: str, *, enabled: bool, label: str | None = None) -> str:
    """`label` (default: the verdict itself, e.g. a translated one) in the verdict's colour."""
    code = VERDICT_COLOURS.get(text)
    shown = text if label is None else label
    return f"\x1b[{code}m{shown}\x1b[0m" if enabled and code else shown


def visible_width(text: str) -> int:
    """Terminal columns the text takes: ANSI colour codes take none, East Asian wide and
    full-width characters (CJK, full-width punctuation) take two, combining marks none."""
    out, skip = 0, False
    for ch in text:
        if ch == "\x1b":
            skip = True
        elif skip:
            skip = ch != "m"
        elif unicodedata.combining(ch):
            continue
        else:
            out += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return out


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, align: str | None = None, indent: str = ""
) -> str:
    """Columns padded to their widest cell; `align` is a string of 'l'/'r' per column."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max([visible_width(h)] + [visible_width(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def fmt(cells: Sequence[str]) -> str:
        parts = []
        for i, cell in enumerate(cells):
            pad = " " * (widths[i] - visible_width(cell))
            parts.append(cell + pad if align[i] == "l" else pad + cell)
        return indent + "  ".join(parts).rstrip()

    lines = [fmt(headers), indent + "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)
