"""Errors in Chinese, as a user sees them: `--lang zh` or a Chinese locale turns every one-line
error into Chinese, argparse's own included, and English stays English.

The table of test_bad_inputs.py (real files, real histories) is run again under LANG=zh_CN.UTF-8:
each row must still be one line and exit as before, now with no English prose left in it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from english_leaks import english_leaks
from test_bad_inputs import BAD_INPUTS, RUN_ID, SRC_DIR, _params, digest, final_parenthesised, fitbench_cli

from fitbench.cli.main import SUBCOMMANDS

ZH = {"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": ""}
EN = {"LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": ""}
# Text that is a value, not fitbench's prose: what the operating system, SQLite, JSON or a pickle
# said (quoted inside a fitbench message), kept as those libraries wrote it.
FOREIGN = (
    "No such file or directory",
    "Is a directory",
    "Permission denied",
    "file is not a database",
    "database disk image is malformed",
    "Expecting value",
    "Expecting property name enclosed in double quotes",
    "unexpected end of data",
    "not a gzip file",
    "invalid load key",
    "file could not be opened successfully",
    "pickle data was truncated",
    "Error -3 while decompressing data",
    "invalid block type",
    "Compressed file ended before the end-of-stream marker was reached",
    "is not the CIFAR-10",
    "cannot open shared object file",
)


def _one_error_line(proc, code: int = 2) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("row", _params())
def test_every_bad_input_is_one_chinese_line(row, tmp_path: Path) -> None:
    if row.slow:
        pytest.importorskip("torch")
    if row.argv[0] == "run" and "torch" in row.argv:
        pytest.importorskip("torch")
    stored = row.setup(tmp_path) if row.setup else None

    def fill(text: str) -> str:
        text = text.replace("{tmp}", str(tmp_path))
        return text.replace(RUN_ID, stored) if isinstance(stored, str) else text

    argv = [fill(a) for a in row.argv]
    env = {**ZH, **{k: fill(v) for k, v in row.env.items()}}
    line = _one_error_line(fitbench_cli(argv, tmp_path, env), row.code)
    assert line.startswith("fitbench") and ": 错误: " in line, line
    assert row.says not in line, f"still English: {line}"
    assert final_parenthesised(line), line
    # a list of valid choices is names, not prose ("可选值:offload, oom, tight")
    values = [str(tmp_path), *argv, *FOREIGN, *re.findall(r"可选值:([^;)]*)", line)]
    assert english_leaks(line, values) == [], line


def test_the_table_reaches_many_raise_sites() -> None:
    assert len(BAD_INPUTS) >= 30


# -- named cases, each in both languages ---------------------------------------------------------------
def test_unknown_gpu_with_lang_zh_and_in_english(tmp_path: Path) -> None:
    argv = ["estimate", "llm-6b", "--gpu", "rtx-4091"]
    zh = _one_error_line(fitbench_cli([*argv, "--lang", "zh"], tmp_path, EN))
    assert zh.startswith("fitbench: 错误: 未知的 GPU 'rtx-4091' (是否想输入 'rtx-4090'"), zh
    assert "`fitbench gpus` 可列出全部" in zh
    en = _one_error_line(fitbench_cli(argv, tmp_path, EN))
    assert en.startswith("fitbench: error: unknown GPU 'rtx-4091' (did you mean 'rtx-4090'"), en


def test_a_bad_config_file_in_a_chinese_locale(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 64}), encoding="utf-8")
    argv = ["estimate", "--config", str(cfg), "--gpu", "rtx-4090"]
    zh = _one_error_line(fitbench_cli(argv, tmp_path, ZH))
    assert zh.startswith(f"fitbench: 错误: {cfg}:配置中没有 'model_type' (fitbench 能读取 "), zh
    en = _one_error_line(fitbench_cli(argv, tmp_path, EN))
    assert en.startswith(f"fitbench: error: {cfg}: the config has no 'model_type' (fitbench reads "), en


@pytest.mark.parametrize(
    ("extra", "en", "zh"),
    [
        (  # config.json itself: the file, then the key; the raise's own fix
            {"hidden_size": "big"},
            "'hidden_size' must be a whole number, got the string 'big' (write sizes as JSON numbers, "
            "without quotes)",
            "'hidden_size' 必须是整数,实际为 字符串 'big' (尺寸请写成 JSON 数字,不要加引号)",
        ),
        (  # its quantization_config: the file, the block, then the key; the block's default fix
            {"quantization_config": {"quant_method": "gptq", "bits": "four"}},
            "quantization_config 'bits' must be a whole number, got the string 'four' (fix the value, "
            "or pass --weights NAME to override it)",
            "quantization_config 'bits' 必须是整数,实际为 字符串 'four' "
            "(请修正该值,或传入 --weights NAME 覆盖它)",
        ),
    ],
)
def test_a_bad_value_in_a_config_names_the_file_and_the_part(extra, en: str, zh: str, tmp_path: Path) -> None:
    from test_bad_inputs import LLAMA_KEYS

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**LLAMA_KEYS, **extra}), encoding="utf-8")
    argv = ["estimate", "--config", str(cfg)]
    assert _one_error_line(fitbench_cli(argv, tmp_path, EN)) == f"fitbench: error: {cfg}: {en}"
    assert _one_error_line(fitbench_cli(argv, tmp_path, ZH)) == f"fitbench: 错误: {cfg}:{zh}"


def test_lang_en_wins_over_a_chinese_locale(tmp_path: Path) -> None:
    line = _one_error_line(fitbench_cli(["estimate", "llm-6b", "--batch", "0", "--lang", "en"], tmp_path, ZH))
    assert line.startswith("fitbench estimate: error: argument --batch/--batch-size: must be 1 or more"), line


@pytest.mark.parametrize(
    ("argv", "env", "says", "hint"),
    [
        # argparse's own errors, reworded by fitbench's parser, before any command runs
        (
            ["estimat", "llm-6b", "--lang", "zh"],
            EN,
            "fitbench: 错误: 未知的命令 'estimat'",
            "是否想输入 'estimate'?",
        ),
        (
            ["estimate", "llm-6b", "--bacth", "8"],
            ZH,
            "fitbench: 错误: 无法识别的参数:--bacth 8",
            "是否想输入 '--batch'",
        ),
        (
            ["estimate", "llm-6b", "--exec", "fastest"],
            ZH,
            "fitbench estimate: 错误: 参数 --exec:无效的取值 'fastest'",
            "可选值:default, tuned",
        ),
        (
            ["estimate", "llm-6b", "--mode", "fly"],
            ZH,
            "fitbench: 错误: 未知的模式 'fly'",
            "可选值:infer, train",
        ),
        (
            ["estimate", "llm-6b", "--gpu"],
            ZH,
            "fitbench estimate: 错误: 参数 --gpu:需要一个值",
            "可查看全部选项",
        ),
        (
            ["estimate", "llm-6b", "--batch", "x"],
            ZH,
            "fitbench estimate: 错误: 参数 --batch/--batch-size:'x' 不是整数",
            "",
        ),
        # fitbench's own, raised by the workload and the history
        (
            ["estimate", "llm-6b", "--batch", "10000000000", "--lang=zh"],
            EN,
            "超出了任何真实任务的范围",
            "请使用不超过",
        ),
        (
            ["report", "--db", "{tmp}/none.sqlite", "--lang", "zh"],
            EN,
            "处没有历史记录文件",
            "请检查 --db 路径",
        ),
    ],
)
def test_real_errors_in_chinese(
    argv: list[str], env: dict[str, str], says: str, hint: str, tmp_path: Path
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    line = _one_error_line(fitbench_cli(argv, tmp_path, env))
    assert says in line, line
    assert hint in final_parenthesised(line), line
    assert english_leaks(line, [str(tmp_path), *argv]) == [], line


def test_a_refused_file_is_left_as_it_was_in_chinese_too(tmp_path: Path) -> None:
    """The Chinese path refuses as the English one does: nothing written."""
    db = tmp_path / "other.sqlite"
    db.write_bytes(b"not a database at all, just bytes " * 40)
    before = digest(db)
    line = _one_error_line(fitbench_cli(["history", "--db", str(db)], tmp_path, ZH))
    assert "不是 fitbench 历史记录" in line, line
    assert digest(db) == before


# -- a bad --lang, on every command that takes it ---------------------------------------------------------
# What each command needs besides --lang to get past argparse (its positionals).
_LANG_ARGS = {"estimate": ["llm-6b"], "run": ["llm-6b", "--tiny"], "compare": ["1", "2"]}


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
@pytest.mark.parametrize("value", ["fr", "", "english"])
def test_a_bad_lang_is_refused_on_every_command_in_both_languages(
    command: str, value: str, tmp_path: Path
) -> None:
    argv = [command, *_LANG_ARGS.get(command, []), f"--lang={value}"]
    if command in ("check", "run", "report", "history", "compare"):
        argv += ["--db", str(tmp_path / "h.sqlite")]
    en = _one_error_line(fitbench_cli(argv, tmp_path, EN))
    assert en == f"fitbench: error: unknown language '{value}' (use --lang en or --lang zh)", en
    zh = _one_error_line(fitbench_cli(argv, tmp_path, ZH))
    assert zh == f"fitbench: 错误: 未知的语言 '{value}' (请使用 --lang en 或 --lang zh)", zh
    assert not (tmp_path / "h.sqlite").exists()  # refused before the command did anything


@pytest.mark.parametrize("model", ["qwen2-57b-a14b-instruct", "qwen3-30b-a3b"])
def test_a_qwen_moe_with_dense_layers_listed_is_refused(model: str, tmp_path: Path) -> None:
    bundled = Path(SRC_DIR, "fitbench", "workloads", "models", f"{model}.json")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**json.loads(bundled.read_text())["config"], "mlp_only_layers": [0]}))
    argv = ["estimate", "--config", str(cfg)]
    en = _one_error_line(fitbench_cli(argv, tmp_path, EN))
    assert en == f"fitbench: error: {cfg}: 'mlp_only_layers' is not supported (remove it or leave it empty)"
    zh = _one_error_line(fitbench_cli(argv, tmp_path, ZH))
    assert zh == f"fitbench: 错误: {cfg}:不支持 'mlp_only_layers' (请删除它或留空)"


@pytest.mark.parametrize("serve", [[], ["--serve"]])
def test_no_gpu_selected_is_refused_by_the_estimate_and_the_serving_estimate(serve, tmp_path: Path) -> None:
    argv = ["estimate", "llm-6b", "--gpu", "", *serve]
    en = _one_error_line(fitbench_cli(argv, tmp_path, EN))
    assert en == "fitbench: error: no GPU selected (pass --gpu ID or --gpu all)"
    zh = _one_error_line(fitbench_cli(argv, tmp_path, ZH))
    assert zh == "fitbench: 错误: 没有选择 GPU (请传入 --gpu ID 或 --gpu all)"
