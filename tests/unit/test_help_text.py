"""Every `--help` text in Chinese: each command's parser built in zh has no English help left.

The parsers are the real ones (fitbench.cli.main.build_parser), built in English and in Chinese and
compared text by text: an argument added without a Chinese help, or an English help changed without
its translation, keeps its English in the Chinese parser, and this test names it.
"""

from __future__ import annotations

import argparse
import re

import pytest

from fitbench.cli.help_text import HELP, localize, option_key, requested_lang, translate, wrap
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


def test_no_entry_outlives_the_argument_it_translates() -> None:
    used: set[str] = set()
    localize(build_parser(None), "zh", used=used)  # every command's parser
    assert sorted(set(HELP) - used) == []


@pytest.mark.parametrize("key", sorted(HELP))
def test_each_entry_keeps_its_flags_and_values(key: str) -> None:
    entry = HELP[key]
    assert CJK.search(entry["zh"]), key
    assert set(FLAG.findall(entry["en"])) <= set(FLAG.findall(entry["zh"])), key
    assert set(re.findall(r"\{([a-z_]+)\}", entry["en"])) == set(re.findall(r"\{([a-z_]+)\}", entry["zh"]))
    # Example command lines stay exactly as written.
    commands = [line.split("  ")[0].strip() for line in entry["en"].splitlines() if "fitbench " in line]
    for command in commands:
        if command.startswith("fitbench"):
            assert command in entry["zh"], (key, command)


def test_a_value_the_english_carries_is_carried_into_the_chinese() -> None:
    assert translate(["check.--timeout"], "stop one measurement after S seconds (default 45)", "zh") == (
        "单次实测超过 S 秒即停止(默认 45)"
    )
    # An English text the table does not hold (a changed help) stays as written.
    assert translate(["check.--timeout"], "stop after S seconds", "zh") == "stop after S seconds"


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
    text = HELP["*.--weights"]["zh"]
    lines = wrap(text, 40)
    assert len(lines) > 1
    assert all(sum(2 if CJK.match(ch) else 1 for ch in line) <= 40 for line in lines)
    assert "gptq[-8bit][-g64]" in "\n".join(lines)
    assert not any(line.startswith((",", ";", ":", "、", ")")) for line in lines)
