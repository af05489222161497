"""Every error a user can read exists in Chinese: each FitbenchError raised in src/ gives its
Chinese message (and hint, when it has one) beside the English, so none can be added without.

The walk reads the source (ast), not a run: a raise on a path no test reaches is still checked.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import fitbench
from fitbench.cli.help_text import requested_lang
from fitbench.cli.main import argparse_zh, error_line
from fitbench.errors import FitbenchError, close_match_hint, did_you_mean, unknown_name

SRC = Path(fitbench.__file__).resolve().parent
CJK = re.compile(r"[\u4e00-\u9fff]")
# Calls that build a user's error from a message and a hint: FitbenchError itself, and the config
# readers' `error` (hf_config, quant_config, config_values), which prefix the file's name.
BUILDERS = {"FitbenchError", "error"}


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _is_builder(call: ast.Call, path: Path) -> bool:
    name = _name(call)
    if name == "FitbenchError":
        return True
    # `.error(...)` builds a FitbenchError only in the config readers (parser.error is argparse's).
    return name == "error" and path.parent.name == "workloads" and isinstance(call.func, ast.Attribute)


def _texts(node: ast.expr) -> list[str]:
    """The literal text in `node`: its string constants, f-string parts included."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _english_literal(node: ast.expr) -> bool:
    """A string or f-string whose own words are English and none Chinese (values in {} aside)."""
    if not isinstance(node, ast.Constant | ast.JoinedStr):
        return False
    text = " ".join(_texts(node))
    return bool(re.search(r"[A-Za-z]{3,}\s+[A-Za-z]{2,}", text)) and not CJK.search(text)


def _error_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _is_builder(node, path):
                calls.append((f"{path.relative_to(SRC.parent)}:{node.lineno}", node))
    return calls


CALLS = _error_calls()


def test_the_walk_finds_the_raise_sites() -> None:
    """A walk that finds nothing would pass vacuously."""
    assert sum(_name(c) == "FitbenchError" for _, c in CALLS) >= 200
    assert sum(_name(c) == "error" for _, c in CALLS) >= 40


def _missing_chinese(call: ast.Call) -> list[str]:
    keywords = {k.arg: k.value for k in call.keywords}
    has_hint = len(call.args) >= 2 or "hint" in keywords
    problems = []
    for part, needed in (("message_zh", True), ("hint_zh", has_hint)):
        if not needed:
            continue
        value = keywords.get(part)
        if value is None:
            problems.append(f"no {part}")
        elif part == "message_zh" and _english_literal(value):
            # A literal Chinese message has Chinese in it (English pasted twice would pass otherwise).
            problems.append(f"{part} has no Chinese")
    return problems


def test_every_error_raised_in_src_has_its_chinese_text() -> None:
    missing = [f"{where}: {', '.join(p)}" for where, call in CALLS if (p := _missing_chinese(call))]
    assert missing == [], "errors without Chinese text:\n" + "\n".join(missing)


def test_the_check_catches_a_raise_without_chinese() -> None:
    """The rule itself: an English-only raise, or one whose Chinese is English, is caught."""

    def problems(code: str) -> list[str]:
        call = ast.parse(code).body[0].value  # type: ignore[attr-defined]
        return _missing_chinese(call)

    assert problems('FitbenchError("bad", "fix it")') == ["no message_zh", "no hint_zh"]
    assert problems('FitbenchError(f"bad {x} here", message_zh=f"bad {x} here")') == [
        "message_zh has no Chinese"
    ]
    assert problems('FitbenchError("bad", "fix", message_zh="坏", hint_zh="修")') == []
    assert problems('FitbenchError("bad", message_zh=exc.message_zh)') == []


# -- the text itself ------------------------------------------------------------------------------------
def test_text_picks_the_language_and_falls_back_to_english_per_part() -> None:
    both = FitbenchError("bad size", "use 8", message_zh="尺寸错误", hint_zh="请使用 8")
    assert both.text("zh") == ("尺寸错误", "请使用 8")
    assert both.text("en") == ("bad size", "use 8")
    assert str(both) == "bad size (use 8)"  # logs and --debug keep the English
    half = FitbenchError("bad size", "use 8", message_zh="尺寸错误")
    assert half.text("zh") == ("尺寸错误", "use 8")
    assert FitbenchError("bad size").text("zh") == ("bad size", None)
    assert FitbenchError("坏\n  行", message_zh="多\n行").text("zh")[0] == "多 行"  # one line too


def test_the_error_line_in_each_language() -> None:
    exc = FitbenchError("unknown GPU 'x'", "name one", message_zh="未知的 GPU 'x'", hint_zh="请指定一个")
    assert error_line(exc, "estimate", "en") == "fitbench: error: unknown GPU 'x' (name one)"
    assert error_line(exc, "estimate", "zh") == "fitbench: 错误: 未知的 GPU 'x' (请指定一个)"
    bare = FitbenchError("no run id given", message_zh="没有给出运行 ID")
    assert (
        error_line(bare, "report", "zh")
        == "fitbench: 错误: 没有给出运行 ID (`fitbench report --help` 可查看全部选项)"
    )


def test_close_matches_and_unknown_names_in_chinese() -> None:
    assert close_match_hint("fp33", ["fp32", "bf16"], lang="zh") == "是否想输入 'fp32'?"
    assert did_you_mean("zzz", ["a", "b"], lang="zh") == "可选值:a, b"
    exc = unknown_name(
        "workload", "bert-bas", ["bert-base", "llm-6b"], kind_zh="工作负载", list_command="fitbench workloads"
    )
    assert exc.text("zh") == (
        "未知的工作负载 'bert-bas'",
        "是否想输入 'bert-base'?;`fitbench workloads` 可列出全部",
    )
    assert exc.text("en")[0] == "unknown workload 'bert-bas'"


@pytest.mark.parametrize(
    ("message", "zh"),
    [
        ("unrecognized arguments: --bacth 8", "无法识别的参数:--bacth 8"),
        ("the following arguments are required: WORKLOAD", "缺少必需的参数:WORKLOAD"),
        ("argument --gpu: expected one argument", "参数 --gpu:需要一个值"),
        (
            "ambiguous option: --ba could match --batch, --backend",
            "选项 --ba 有歧义,可能是 --batch, --backend",
        ),
        ("argument --x: not allowed with argument --y", "参数 --x:不能与参数 --y 同时使用"),
        (
            "argument --batch/--batch-size: 'x' is not a whole number",
            "参数 --batch/--batch-size:'x' 不是整数",
        ),
        ("argument --batch: must be 1 or more, got 0", "参数 --batch:必须不小于 1,实际为 0"),
        (
            "argument --timeout: must be a finite number of seconds, more than 0; got 'nan'",
            "参数 --timeout:必须是大于 0 的有限秒数,实际为 'nan'",
        ),
        (
            "something argparse says that fitbench does not know",
            "something argparse says that fitbench does not know",
        ),
    ],
)
def test_argparse_messages_in_chinese(message: str, zh: str) -> None:
    assert argparse_zh(message) == zh


@pytest.mark.parametrize(
    ("argv", "env", "lang"),
    [
        (["estimate", "x", "--lang", "zh"], {}, "zh"),
        (["estimate", "x", "--lang=zh-CN"], {"LANG": "en_US.UTF-8"}, "zh"),
        (["estimate", "x", "--lang", "en"], {"LANG": "zh_CN.UTF-8"}, "en"),
        (["estimate", "x"], {"LANG": "zh_CN.UTF-8"}, "zh"),
        (["estimate", "x"], {"LANG": "C.UTF-8"}, "en"),
        (["estimate", "x", "--lang", "klingon"], {"LANG": "zh_CN.UTF-8"}, "zh"),  # the locale refuses it
    ],
)
def test_the_language_of_a_line_not_yet_parsed(
    argv: list[str], env: dict[str, str], lang: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert requested_lang(argv) == lang


def test_a_note_quoting_an_error_is_said_in_the_readers_language() -> None:
    """`fitbench run` notes an estimate it could not make: the error's own text, in both languages."""
    from fitbench.cli.run import note_text

    note = {"key": "run.note.no_estimate", "reason": "tensor parallelism ...", "reason_zh": "张量并行……"}
    assert note_text(note, "en") == "no estimate: tensor parallelism ..."
    assert note_text(note, "zh") == "没有估算:张量并行……"


@pytest.mark.parametrize(
    ("extra", "zh"),
    [
        ("memory_mib=1000", "memory_mib 1000 不在 memory_gib 的 90-100 % 之内"),
        ("price_usd=100", "price_usd 需要同时给出 price_source 和 price_date(YYYY-MM)"),
        ("bf16=true", "bf16 必须且只能在 tflops 含 bf16 峰值时为 true"),
    ],
)
def test_a_gpu_spec_refused_by_the_catalogs_row_checks_in_chinese(extra: str, zh: str) -> None:
    from fitbench.catalog.spec import load_gpu_spec

    with pytest.raises(FitbenchError) as info:
        load_gpu_spec(f"name=X,memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5,{extra}")
    assert info.value.text("zh")[0] == f"GPU 规格 (inline):{zh}"
    assert info.value.message.startswith("GPU spec (inline): ")
