"""`--help` speaks the reader's language: `fitbench --help` and two commands' help, in a fresh process,
in Chinese with `--lang zh` and with a Chinese locale, in English otherwise.

The Chinese help is searched for English with tests/cli/english_leaks.py; the example command lines,
choices and JSON field names it shows are values and are left out of the search.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from english_leaks import english_leaks
from test_first_minutes import cli, has_chinese

from fitbench.cli.help_text import HELP
from fitbench.cli.main import SUBCOMMANDS, build_parser

HELPS = {"top": ("--help",), "estimate": ("estimate", "--help"), "run": ("run", "--help")}
ZH_WAYS = {"--lang zh": (("--lang", "zh"), None), "LANG=zh_CN.UTF-8": ((), {"LANG": "zh_CN.UTF-8"})}


def _values() -> list[str]:
    """What the help shows as written in both languages: example command lines (each epilog line's
    command, up to the two spaces before its note) and the field names of the JSON blocks."""
    values = []
    for entry in HELP.values():
        in_json = False
        for line in entry.splitlines():
            if line.strip().startswith("fitbench"):
                values.append(re.split(r"\s{2,}", line.strip())[0])
            in_json = bool(line.strip()) and (in_json or line.startswith("JSON"))
            if in_json:
                values += re.findall(r"[ -~]{2,}", line)
    return values


VALUES = [
    *_values(),
    "{torch,paddle}",
    "{default,tuned}",
    "name=My card",
    "fits < tight < offload < oom",
    "error_vs_estimate = (estimate - measured) / measured",
    "ok、oom、error、timeout",
]


@pytest.mark.slow
@pytest.mark.parametrize("way", sorted(ZH_WAYS))
@pytest.mark.parametrize("name", sorted(HELPS))
def test_help_in_chinese_prints_no_english(tmp_path: Path, name: str, way: str) -> None:
    extra, env = ZH_WAYS[way]
    out = cli(*HELPS[name], *extra, home=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("用法:fitbench")
    assert "选项:" in out.stdout and "示例:" in out.stdout
    assert "usage:" not in out.stdout and "options:" not in out.stdout
    assert english_leaks(out.stdout, VALUES) == []
    if name != "top":
        assert "位置参数:" in out.stdout and "覆盖工作负载设置:" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HELPS))
def test_help_in_english_stays_english(tmp_path: Path, name: str) -> None:
    for extra, env in (((), None), (("--lang", "en"), {"LANG": "zh_CN.UTF-8"})):
        out = cli(*HELPS[name], *extra, home=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("usage: fitbench")
        assert "options:" in out.stdout and "examples:" in out.stdout
        assert not has_chinese(out.stdout)


@pytest.mark.slow
def test_the_chinese_help_keeps_flags_presets_and_examples(tmp_path: Path) -> None:
    out = cli("estimate", "--help", "--lang", "zh", home=tmp_path)
    for kept in (
        "--gpu ID",
        "--fail-if VERDICT",
        "fits < tight < offload < oom",
        "fitbench estimate llm-6b --gpu rtx-4090 --fail-if tight",
        "rtx-3060-12gb, rtx-4090, a100-40gb, h100-sxm",  # the default, from the constant
        "取值之一:fp32, amp-fp16",
    ):
        assert kept in out.stdout, kept


@pytest.mark.parametrize("name", [None, *SUBCOMMANDS])
def test_every_command_help_in_chinese_prints_no_english(name: str | None) -> None:
    """In process, each command's whole help as argparse prints it (usage, headings, wrapping)."""
    parser = build_parser(name, "zh")
    text = (
        parser.format_help()
        if name is None
        else parser._subparsers._group_actions[0].choices[name].format_help()
    )
    assert text.startswith("用法:fitbench")
    assert english_leaks(text, VALUES) == []
