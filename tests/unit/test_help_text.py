"""Every `--help` text in Chinese: each command's parser built in zh has no English help left.

The parsers are the real ones (fitbench.cli.main.build_parser), built in English and in Chinese and
compared text by text: an argument added without a Chinese help, or an English help changed without
its translation, keeps its English in the Chinese parser, and this test names it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from functools import cache
from pathlib import Path

import pytest

from fitbench.cli.help_text import HELP, VALUES, localize, option_key, requested_lang, translate, wrap
from fitbench.cli.main import SUBCOMMANDS, build_parser

CJK = re.compile(r"[\u4e00-\u9fff]")
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def _texts(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every text a reader of `parser`'s help sees, by where it is shown."""
    texts = {"description": parser.description, "epilog": parser.epilog}
    texts.update({f"group {i}": g.title for i, g in enumerate(parser._action_groups)})
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            texts.update({f"command {c.dest}": c.help for c in action._choices_actions})
        else:
            texts[f"argument {'/'.join(action.option_strings) or action.dest}"] = action.help
    return {where: text for where, text in texts.items() if text and text != argparse.SUPPRESS}


def _command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("name", [None, *SUBCOMMANDS])
def test_every_help_text_of_every_parser_is_chinese_in_zh(name: str | None) -> None:
    en, zh = build_parser(name, "en"), build_parser(name, "zh")
    if name is not None:
        en, zh = _command_parser(en, name), _command_parser(zh, name)
    english, chinese = _texts(en), _texts(zh)
    assert english.keys() == chinese.keys()
    untranslated = [
        where for where in english if chinese[where] == english[where] or not CJK.search(chinese[where])
    ]
    assert untranslated == [], f"no Chinese help (add it to fitbench.cli.help_text.HELP): {untranslated}"


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_argument_says_what_it_is_for(name: str) -> None:
    parser = _command_parser(build_parser(name, "en"), name)
    silent = [option_key(a) for a in parser._actions if not a.help]
    assert silent == []


def test_the_english_parser_is_left_as_written() -> None:
    parser = build_parser("estimate", "en")
    assert parser.format_help().startswith("usage: fitbench")
    assert not any(CJK.search(text) for text in _texts(_command_parser(parser, "estimate")).values())


@cache
def _english() -> dict[str, set[str]]:
    """The English texts each HELP entry replaces, over every command's parser."""
    used: dict[str, set[str]] = {}
    localize(build_parser(None), "zh", used=used)  # every command's parser
    return used


def test_no_entry_outlives_the_argument_it_translates() -> None:
    assert sorted(set(HELP) - set(_english())) == []


@pytest.mark.parametrize("key", sorted(HELP))
def test_each_entry_keeps_its_flags_and_values(key: str) -> None:
    zh = HELP[key]
    assert CJK.search(zh), key
    for english in _english()[key]:
        assert set(FLAG.findall(english)) <= set(FLAG.findall(zh)), key
        # Example command lines stay exactly as written.
        commands = [line.split("  ")[0].strip() for line in english.splitlines() if "fitbench " in line]
        for command in commands:
            if command.startswith("fitbench"):
                assert command in zh, (key, command)
    # Each `{name}` is a value VALUES fills in: none is left for the reader to see.
    values = VALUES[key]() if key in VALUES else {}
    assert set(re.findall(r"\{([a-z_]+)\}", zh)) == set(values), key
    for value in values.values():
        assert all(value in english for english in _english()[key]), (key, value)


def test_a_value_the_english_carries_is_carried_into_the_chinese() -> None:
    english = "stop one measurement after S seconds (default 600)"
    assert translate(["check.--timeout"], english, "zh") == "单次实测超过 S 秒即停止(默认 600)"
    assert translate(["estimate.--gpu"], "catalog GPU", "zh").endswith(
        "默认:rtx-3060-12gb, rtx-4090, a100-40gb, h100-sxm"
    )
    # A help the table has no entry for stays as written.
    assert translate(["check.--no-such-option"], "stop after S seconds", "zh") == "stop after S seconds"


# -- the English each entry translates, pinned: a changed English help must not ship a stale Chinese --------
FINGERPRINTS = Path(__file__).parent / "data" / "help_english.json"


def fingerprints(english: dict[str, set[str]]) -> dict[str, str]:
    """Per entry, a short digest of the English texts it replaces (the text itself lives once, in the
    parser's module)."""
    return {
        key: hashlib.sha256("\0".join(sorted(texts)).encode()).hexdigest()[:12]
        for key, texts in sorted(english.items())
    }


def test_the_english_each_entry_translates_is_the_english_it_was_written_for() -> None:
    pinned = json.loads(FINGERPRINTS.read_text(encoding="utf-8"))
    now = fingerprints(_english())
    moved = sorted(k for k in now.keys() | pinned.keys() if now.get(k) != pinned.get(k))
    assert moved == [], (
        f"the English of {moved} changed: update the Chinese in fitbench.cli.help_text.HELP, then "
        f"`PYTHONPATH=src python tests/unit/test_help_text.py` rewrites {FINGERPRINTS.name}"
    )


def test_the_fingerprint_moves_with_the_english() -> None:
    parser = build_parser("report")
    sub = _command_parser(parser, "report")
    before = _english()["report.--last"]
    next(a for a in sub._actions if "--last" in a.option_strings).help = "the N newest runs (default 20)"
    used: dict[str, set[str]] = {}
    localize(parser, "zh", used=used)
    assert fingerprints({"k": used["report.--last"]}) != fingerprints({"k": before})


@pytest.mark.parametrize(
    ("argv", "environ", "lang"),
    [
        (["estimate", "--help", "--lang", "zh"], {}, "zh"),
        (["--lang=zh-CN", "--help"], {"LANG": "en_US.UTF-8"}, "zh"),
        (["--help"], {"LANG": "zh_CN.UTF-8"}, "zh"),
        (["--help"], {"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
        (["--help"], {"LC_MESSAGES": "zh_CN.UTF-8"}, "zh"),
        (["run", "--help", "--lang", "en"], {"LANG": "zh_CN.UTF-8"}, "en"),
        (["--help"], {"LANG": "C.UTF-8"}, "en"),
        (["--help", "--lang", "fr"], {"LANG": "zh_CN.UTF-8"}, "zh"),  # a bad value: the locale
        (["--help", "--lang", "fr"], {"LANG": "C.UTF-8"}, "en"),
    ],
)
def test_the_help_language_is_read_from_the_line_then_the_locale(argv, environ, lang) -> None:
    assert requested_lang(argv, environ) == lang


def test_chinese_help_wraps_by_display_width_and_keeps_values_whole() -> None:
    text = HELP["*.--weights"]
    lines = wrap(text, 40)
    assert len(lines) > 1
    assert all(sum(2 if CJK.match(ch) else 1 for ch in line) <= 40 for line in lines)
    assert "gptq[-8bit][-g64]" in "\n".join(lines)
    assert not any(line.startswith((",", ";", ":", "、", ")")) for line in lines)


if __name__ == "__main__":  # rewrite the fingerprints once the Chinese is checked
    text = json.dumps(fingerprints(_english()), indent=1, sort_keys=True)
    FINGERPRINTS.write_text(text + "\n", encoding="utf-8")
