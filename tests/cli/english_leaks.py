"""Find English prose in output that should be Chinese (`--lang zh` or a Chinese locale).

Not everything ASCII in a Chinese screen is a leak: identifiers and values stay as they are
(workload and model names, precisions such as amp-bf16, units such as GiB and tok/s, flags,
commands in backticks, paths, GPU and CPU names, a price's cited source, an article's title in
《》). What gives an English sentence away is either a run of four or more English words in a
row, or one of the small words English prose cannot do without ("the", "on", "vs") or a label
fitbench prints before a value ("note:", "hint:", "batch 4"). A value can hold such a word (a GPU
called "RTX 6000 Ada Generation"): `values` names the strings to take out before looking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Spans that are values by construction: commands and code in backticks, quotes, titles in 《》.
_QUOTED = re.compile(r"`[^`\n]*`|《[^》\n]*》|\"[^\"\n]*\"|“[^”\n]*”|'[^'\n]*'")
# Flags (--max-batch, --gpu=x), absolute paths, and dotted Python names (torch.backends.cuda...).
_FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*(?:=\S+)?")
_PATH = re.compile(r"(?<![\w.])(?:/[\w.+@-]+){2,}/?")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}\b")
# An English word: letters only (amp-bf16, fp32, 12GB and qwen2.5-7b are identifiers, not words).
_WORD = r"(?<![\w.\-/])[A-Za-z][a-z']*(?:-[A-Za-z][a-z']*)*(?![\w\-/])"
_RUN = re.compile(rf"{_WORD}(?:[ ]+{_WORD}){{3,}}")
_TOKEN = re.compile(_WORD)
# Words English prose needs and identifiers never are; and the labels of fitbench's own lines.
SMALL_WORDS = frozenset(
    re.findall(
        r"\w+",
        """
    the an of to on in at by for from with without and or not no is are was be vs than per when
    this that it its more less after before into only""",
    )
)
# fitbench's own labels and table words: each has a Chinese form, so none may stand alone in Chinese.
LABELS = frozenset(
    re.findall(
        r"\w+",
        """
    note hint warning status batch exec id stopped comparable error ok yes name price rent
    memory compute overhead bandwidth fits tight measured estimated tiny smoke peak usable step steps
    epoch prefill throughput parameters processes""",
    )
)


def strip_values(text: str, values: Iterable[str] = ()) -> str:
    """`text` with every value (longest first), quoted span, flag, path and dotted name blanked."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = text.replace(value, " ")
    for pattern in (_QUOTED, _FLAG, _PATH, _DOTTED):
        text = pattern.sub(" ", text)
    return text


def english_leaks(text: str, values: Iterable[str] = ()) -> list[str]:
    """Each line of `text` that still reads as English once the values are taken out."""
    leaks = []
    values = list(values)
    for line in text.splitlines():
        rest = strip_values(line, values)
        words = [w.lower() for w in _TOKEN.findall(rest)]
        if _RUN.search(rest) or SMALL_WORDS.intersection(words) or LABELS.intersection(words):
            leaks.append(line.strip())
    return leaks
