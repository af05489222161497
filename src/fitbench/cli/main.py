"""Entry point: parse, dispatch, and turn FitbenchError into one line and a non-zero exit.

Subcommand modules are imported lazily by name so `fitbench estimate` never pays for the
imports of `fitbench run` (and never imports a framework).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from fitbench import __version__
from fitbench.advise.i18n import resolve_lang
from fitbench.cli.common import add_lang_arg
from fitbench.cli.help_text import requested_lang
from fitbench.errors import FitbenchError, close_match_hint, did_you_mean, one_line

# subcommand -> (module, one-line help). Order is the order of `fitbench --help`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "check": ("fitbench.cli.check", "is this machine's GPU enough for the three scenarios? (default)"),
    "estimate": ("fitbench.cli.estimate", "estimate memory, verdict, max batch and speed for catalog GPUs"),
    "run": ("fitbench.cli.run", "measure a workload for real through PyTorch or PaddlePaddle"),
    "report": ("fitbench.cli.report", "write an HTML or Markdown report of past runs"),
    "history": ("fitbench.cli.history", "list past runs stored in the history"),
    "compare": ("fitbench.cli.compare", "compare two runs from the history"),
    "calibrate": ("fitbench.cli.calibrate", "fit the estimator's efficiencies to this machine"),
    "gpus": ("fitbench.cli.gpus", "list the GPU catalog"),
    "workloads": ("fitbench.cli.workloads", "list the workload presets"),
    "models": ("fitbench.cli.models", "list the bundled popular models (offline config.json equivalents)"),
}

EPILOG = """examples:
  fitbench                                   check this machine against the three scenarios
  fitbench estimate llm-6b --gpu all         will a 6.7B model load, and how fast, on every card?
  fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090   a bundled model (`fitbench models`)
  fitbench estimate bert-base-imdb --gpu rtx-3060-12gb --precision amp-fp16 --json
  fitbench run resnet50-cifar10 --tiny       measure a tiny variant on this machine
  fitbench run bert-base-imdb --device cuda --precision fp32,amp-fp16
  fitbench history                           past runs
"""


# argparse's own messages (Python 3.11-3.13 wording), said in Chinese; the groups keep the arguments.
_ARGPARSE_ZH: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), zh)
    for pattern, zh in (
        (r"^unrecognized arguments: (?P<rest>.*)$", "无法识别的参数:{rest}"),
        (r"^the following arguments are required: (?P<rest>.*)$", "缺少必需的参数:{rest}"),
        (r"^(?P<arg>argument [^:]+): expected one argument$", "{arg}:需要一个值"),
        (r"^(?P<arg>argument [^:]+): expected at least one argument$", "{arg}:至少需要一个值"),
        (r"^(?P<arg>argument [^:]+): expected (?P<n>\d+) arguments?$", "{arg}:需要 {n} 个值"),
        (
            r"^(?P<arg>argument [^:]+): invalid (?P<type>\w+) value: (?P<rest>.*)$",
            "{arg}:无效的 {type} 值 {rest}",
        ),
        (r"^(?P<arg>argument [^:]+): not allowed with (?P<rest>.*)$", "{arg}:不能与{rest} 同时使用"),
        (r"^(?P<arg>argument [^:]+): ignored explicit argument (?P<rest>.*)$", "{arg}:不接受值 {rest}"),
        (r"^ambiguous option: (?P<opt>\S+) could match (?P<rest>.*)$", "选项 {opt} 有歧义,可能是 {rest}"),
        # fitbench's own argparse types (cli/common.py, cli/estimate.py)
        (r"^(?P<arg>argument [^:]+): (?P<v>'.*') is not a whole number$", "{arg}:{v} 不是整数"),
        (
            r"^(?P<arg>argument [^:]+): must be (?P<n>\d+) or more, got (?P<v>.*)$",
            "{arg}:必须不小于 {n},实际为 {v}",
        ),
        (r"^(?P<arg>argument [^:]+): (?P<v>'.*') is not a number of seconds$", "{arg}:{v} 不是有效的秒数"),
        (
            r"^(?P<arg>argument [^:]+): must be a finite number of seconds, 0 or more; got (?P<v>.*)$",
            "{arg}:必须是不小于 0 的有限秒数,实际为 {v}",
        ),
        (
            r"^(?P<arg>argument [^:]+): must be a finite number of seconds, more than 0; got (?P<v>.*)$",
            "{arg}:必须是大于 0 的有限秒数,实际为 {v}",
        ),
        (r"^(?P<arg>argument [^:]+): (?P<v>'.*') is not a number$", "{arg}:{v} 不是数字"),
        (
            r"^(?P<arg>argument [^:]+): must be more than 0 and at most 1, got (?P<v>.*)$",
            "{arg}:必须大于 0 且不超过 1,实际为 {v}",
        ),
        (r"^(?P<arg>argument [^:]+): (?P<rest>.*)$", "{arg}:{rest}"),
        (r"^one of the arguments (?P<rest>.*) is required$", "参数 {rest} 必须给出其中一个"),
    )
)


def argparse_zh(message: str) -> str:
    """argparse's `message` in Chinese ("argument" becomes 参数), or as it is where no pattern fits."""
    for pattern, zh in _ARGPARSE_ZH:
        match = pattern.match(message)
        if match:
            values = {k: (v or "").replace("argument ", "参数 ", 1) for k, v in match.groupdict().items()}
            return zh.format(**values)
    return message


# argparse's wording of a bad choice: "invalid choice: 'x' (choose from 'a', 'b')" (quotes vary by version).
_INVALID_CHOICE = re.compile(
    r"^(?P<arg>argument [^:]+): invalid choice: '?(?P<value>.*?)'? \(choose from (?P<choices>.*)\)$"
)


class Parser(argparse.ArgumentParser):
    """argparse with fitbench's error style: one line saying what is wrong and how to fix it.

    argparse's own errors print the whole usage block before the message; on a terminal the
    message then hides below a wall of options. Here a usage error is one line, with "did you
    mean" for a mistyped choice and a pointer to `--help`. Subparsers inherit this class.
    """

    command: str | None = None  # the subcommand being parsed, set by build_parser on the top parser
    lang: str = "en"  # the language of the line being parsed (requested_lang), set by main on every parser

    def error(self, message: str) -> NoReturn:
        zh = self.lang == "zh"
        sep = ";" if zh else "; "
        shows = "可查看全部选项" if zh else "shows the options"
        help_hint = f"`{self.prog} --help` {shows}"
        match = _INVALID_CHOICE.match(message)
        if match:
            value = match["value"]
            choices = [c.strip().strip("'\"") for c in match["choices"].split(",")]
            if match["arg"] == "argument COMMAND":
                message = f"未知的命令 '{value}'" if zh else f"unknown command '{value}'"
                lists = "可列出全部命令" if zh else "lists the commands"
                help_hint = f"{_command_hint(value, choices, self.lang)}{sep}`{self.prog} --help` {lists}"
            else:
                arg = match["arg"].replace("argument ", "参数 ", 1) if zh else match["arg"]
                message = f"{arg}:无效的取值 '{value}'" if zh else f"{arg}: invalid choice '{value}'"
                help_hint = f"{did_you_mean(value, choices, lang=self.lang)}{sep}{help_hint}"
        elif message.startswith("unrecognized arguments:"):
            # argparse reports a subcommand's unknown option from the top parser: point to the
            # subcommand's own help, where the option the user meant is listed.
            if self.command:
                help_hint = f"`{self.prog} {self.command} --help` {shows}"
            suggestion = self._option_hint(message.split(":", 1)[1].split())
            if suggestion:
                help_hint = f"{suggestion}{sep}{help_hint}"
            if zh:
                message = argparse_zh(message)
        elif zh:
            message = argparse_zh(message)
        label = "错误" if zh else "error"
        self.exit(2, f"{self.prog}: {label}: {one_line(message)} ({help_hint})\n")

    def _option_hint(self, unknown: list[str]) -> str | None:
        """ "did you mean '--batch'?" for a mistyped option (`--bacth 8`), from the options of this
        parser and of the subcommand parsers built (main builds only the chosen command's)."""
        options: set[str] = set(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    options.update(sub._option_string_actions)
        long_options = [o for o in options if o.startswith("--")]
        for token in unknown:
            if token.startswith("--"):
                hint = close_match_hint(token.split("=", 1)[0], long_options, n=2, cutoff=0.6, lang=self.lang)
                if hint:
                    return hint
        return None


def _command_hint(value: str, commands: list[str], lang: str = "en") -> str:
    """`fitbench llm-6b` most likely meant to estimate that workload."""
    from fitbench.workloads.presets import PRESETS

    if value.strip().lower() in PRESETS:
        if lang == "zh":
            return f"是否想输入 `fitbench estimate {value}` 或 `fitbench run {value}`?"
        return f"did you mean `fitbench estimate {value}` or `fitbench run {value}`?"
    return did_you_mean(value, commands, lang=lang)


def _set_lang(parser: argparse.ArgumentParser, lang: str) -> None:
    """Give `parser` and every subcommand parser under it the language of their errors."""
    if isinstance(parser, Parser):
        parser.lang = lang
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _set_lang(sub, lang)


def build_parser(only: str | None = None, lang: str = "en") -> argparse.ArgumentParser:
    """The parser of `fitbench` (with only the `only` command's options built, when given), its help
    in `lang` (fitbench.cli.help_text: the English is written here and in each command's module)."""
    parser = Parser(
        prog="fitbench",
        description="Is this GPU enough for this deep-learning job, and how fast will it run?",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.command = only
    parser.add_argument("--version", action="version", version=f"fitbench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    # Only so that `fitbench --lang zh --help` is read; each command has its own --lang.
    parser.add_argument(
        "--lang",
        metavar="LANG",
        default=argparse.SUPPRESS,
        help="en or zh (default: zh when $LANG starts with zh)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_path, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            subparsers.add_parser(name, help=help_text)
            continue
        module = importlib.import_module(module_path)
        module.register(subparsers, name, help_text)
        sub = subparsers.choices[name]
        # Every command speaks both languages: --lang (else the locale) on each, not only on some.
        if "--lang" not in sub._option_string_actions:
            add_lang_arg(sub)
    if lang != "en":
        from fitbench.cli.help_text import localize

        localize(parser, lang)
    return parser


def error_line(exc: FitbenchError, command: str | None, lang: str) -> str:
    """The one line a FitbenchError prints, in `lang` (English where the raise gave no Chinese).

    Every error says how to fix it; one raised without a hint points to the command's help."""
    message, hint = exc.text(lang)
    where = f"`fitbench {command + ' ' if command else ''}--help`"
    if lang == "zh":
        return f"fitbench: 错误: {message} ({hint or where + ' 可查看全部选项'})"
    return f"fitbench: error: {message} ({hint or where + ' shows the options'})"


def _command_first(argv: list[str]) -> list[str]:
    """`fitbench --lang zh estimate ...` as `fitbench estimate --lang zh ...`: the usage line puts
    --lang before the command, and every command takes it, so a leading --lang moves behind the
    command that follows it. A line without a command after it stays `check`'s."""
    i = 0
    while i < len(argv) and (argv[i] == "--lang" or argv[i].startswith("--lang=")):
        i += 1 if "=" in argv[i] else 2
    if 0 < i < len(argv) and argv[i] in SUBCOMMANDS:
        return [argv[i], *argv[:i], *argv[i + 1 :]]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("FITBENCH_DEBUG") == "1"
    # --debug is accepted anywhere on the line (`fitbench estimate llm-6b --debug`), not only first.
    argv = [a for a in argv if a != "--debug"]
    argv = _command_first(argv)
    # Build only the chosen subcommand's parser: importing every subcommand would cost startup time.
    # The command comes first; a line that starts with an option is `check`'s (`fitbench --lang zh`:
    # "zh" is the option's value, not a command).
    first = argv[0] if argv else None
    if (first is None or first.startswith("-")) and not any(a in ("-h", "--help", "--version") for a in argv):
        argv = ["check", *argv]
        first = "check"
    only = first if first in SUBCOMMANDS else None
    lang = requested_lang(argv)
    try:
        # The help and the errors speak the reader's language: --lang on the line, else the locale.
        parser = build_parser(only, lang)
        _set_lang(parser, lang)
        args = parser.parse_args(argv)
        if getattr(args, "lang", None) is not None:
            # Every command takes --lang: refuse a bad value here, once, before any command's work.
            resolve_lang(args.lang)
        if getattr(args, "func", None) is None:
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except FitbenchError as exc:
        if debug:
            traceback.print_exc()
        print(error_line(exc, only, lang), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fitbench: 已中断" if lang == "zh" else "fitbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `fitbench ... | head` closes the pipe early: not an error worth a traceback.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
