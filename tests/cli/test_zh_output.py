"""In Chinese, every command prints Chinese: no English sentence, label or table word leaks through.

Each command runs through the real CLI in a fresh process (`--lang zh`, and a Chinese locale for
some), measurements through the fake backend; its stdout and stderr (progress lines included) and
the reports it writes are searched with tests/cli/english_leaks.py. Values stay as they are
(names, precisions, units, flags, GPU and CPU names, a price's source): the search leaves them out.
"""

from __future__ import annotations

import html.parser
import json
from pathlib import Path

import pytest
from english_leaks import english_leaks
from test_first_minutes import SRC_DIR, cli

from fitbench.catalog import load_catalog
from fitbench.core.host import cpu_model

VALUES = [
    cpu_model(),
    *(g.name for g in load_catalog().values()),
    *(g.price_source for g in load_catalog().values() if g.price_source),
]
CALIBRATION = SRC_DIR.parent / "benchmarks" / "results" / "accuracy-h200-2026-12-02.json"
FAKE = ("--backend", "fake", "--device", "cpu")

COMMANDS = {
    "check": ("check", "--estimate-only", "--no-report"),
    "estimate": ("estimate", "llm-6b", "--gpu", "rtx-3060-12gb,rtx-4090"),
    "estimate-train": (
        "estimate",
        "llm-6b",
        "--mode",
        "train",
        "--peft",
        "qlora",
        "--grad-accum",
        "4",
        "--gpu",
        "rtx-4090,a100-40gb",
    ),
    "estimate-serve": ("estimate", "llm-6b", "--serve", "--gpu", "h100-sxm"),
    "estimate-offload": ("estimate", "llm-6b", "--gpu", "rtx-3060-12gb", "--offload"),
    "run-generation": ("run", "llm-6b", "--tiny", *FAKE, "--no-history", "--progress"),
    "run-precisions": (
        "run",
        "bert-base-imdb",
        "--tiny",
        *FAKE,
        "--precision",
        "fp32,amp-bf16",
        "--gpu",
        "rtx-4090",
        "--max-batch",
        "--batch-limit",
        "8",
        "--progress",
    ),
    "run-oom": (
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--backend",
        "fake:oom",
        "--device",
        "cpu",
        "--no-history",
    ),
    "run-crash": (
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--backend",
        "fake:crash",
        "--device",
        "cpu",
        "--no-history",
    ),
    "run-timeout": (
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--backend",
        "fake:hang",
        "--device",
        "cpu",
        "--no-history",
        "--timeout",
        "2",
    ),
    "gpus": ("gpus",),
    "workloads": ("workloads",),
    "models": ("models",),
    "history": ("history",),
    "calibrate": ("calibrate", "--from", str(CALIBRATION), "--dry-run"),
}


class _Text(html.parser.HTMLParser):
    """The text a reader sees in an HTML page: element text and titles, not styles or scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._hidden += tag in ("style", "script")
        self.parts += [v for k, v in attrs if k in ("title", "aria-label", "alt") and v]

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in ("style", "script")

    def handle_data(self, data: str) -> None:
        if not self._hidden and data.strip():
            self.parts.append(data.strip())


def html_text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return "\n".join(parser.parts)


def _leaks(out) -> list[str]:
    assert out.returncode in (0, 1), out.stderr  # 1: a measurement failed, as asked; 2 would be bad input
    return english_leaks(out.stdout + "\n" + out.stderr, VALUES)


# -- the search itself: it finds what leaked, and leaves values alone -------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        "llm-6b (迷你版: 冒烟测试) · fake 0.1 · AMD EPYC · fp32 · batch 1 · default exec",
        "  note: measured on the CPU: no GPU estimate (pass --gpu ID to see one)",
        "amp-bf16 vs fp32: peak memory +5% (928 KiB more), speed-up 1.60x",
        "  status: oom — out of memory at batch 8 (phase: step)",
        "  run id: 4d493404",
        "fitbench: llm-6b (tiny) fp32 · importing framework · 0.3s",
        "resnet50-cifar10  23.5M  train  128  32px  fp32  有  ResNet-50 training on CIFAR-10, batch 128",
        "gemma-2-9b-it  gemma2  9.24B  8/16  4096 on 21/42  google/gemma-2-9b-it",
        "id  name  GiB  GB  price  rent",
        "h100-sxm  1 tok/s  memory",
    ],
)
def test_the_search_finds_english_that_leaked(line: str) -> None:
    assert english_leaks(line, VALUES) == [line.strip()]


@pytest.mark.parametrize(
    "line",
    [
        "llm-6b (迷你版: 冒烟测试) · torch 2.13.0+cpu · AMD EPYC · amp-bf16(请求 amp-fp16) · 批大小 1",
        "  - 换更大的显卡 GeForce RTX 5060 Ti 16GB ($429):峰值显存 13.42 GiB,可以运行,速度 ×1.22",
        "  llm-6b · fp16:能宽裕运行的最便宜显卡是 GeForce RTX 5060 Ti 16GB($429,"
        "NVIDIA launch price (GeForce RTX 5060 family announcement),2025-04):17.6 tok/s。",
        "三个参考场景所出自的文章(《Is your GPU enough for AI projects on PaddlePaddle 3.3?》)的结论是:",
        "启用 TF32(torch.backends.cuda.matmul.allow_tf32 = True)估计可快 5.21 倍",
        "在本机 CPU 上:可以作为冒烟测试运行(`fitbench run NAME --tiny`)",
        "共 2 条记录,来自 /tmp/fitbench home/history.sqlite",
        "qwen2.5-7b-instruct-awq  qwen2  7.62B  4/28  awq-4bit-g128  Qwen/Qwen2.5-7B-Instruct-AWQ",
    ],
)
def test_the_search_leaves_values_alone(line: str) -> None:
    assert english_leaks(line, VALUES) == []


# -- every command, in Chinese -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_in_chinese_prints_no_english(tmp_path: Path, name: str) -> None:
    argv = COMMANDS[name]
    if name == "history":  # something to list
        cli("run", "llm-6b", "--tiny", *FAKE, home=tmp_path)
    assert _leaks(cli(*argv, "--lang", "zh", home=tmp_path)) == []
    if name.startswith(("run", "estimate")) or name == "check":
        assert _leaks(cli(*argv, home=tmp_path, env={"LANG": "zh_CN.UTF-8"})) == []


@pytest.mark.slow
def test_compare_and_both_reports_in_chinese_print_no_english(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for preset in ("llm-6b", "bert-base-imdb"):
        out = cli("run", preset, "--tiny", *FAKE, "--gpu", "rtx-4090", "--json", home=home)
        assert out.returncode == 0, out.stderr
    ids = [r["run_id"] for r in json.loads(cli("history", "--json", home=home).stdout)]
    assert len(ids) == 2
    assert _leaks(cli("compare", *ids, "--lang", "zh", home=home)) == []
    md, page = tmp_path / "runs.md", tmp_path / "runs.html"
    for path in (md, page):
        assert _leaks(cli("report", "--lang", "zh", "--out", str(path), home=home)) == []
    assert english_leaks(md.read_text(encoding="utf-8"), VALUES) == []
    # The page's text, less the command column ("run" names the command that stored the run).
    text = html_text(page.read_text(encoding="utf-8"))
    assert english_leaks("\n".join(x for x in text.splitlines() if x != "run"), VALUES) == []


@pytest.mark.slow
@pytest.mark.torch
def test_a_real_tuned_run_warns_in_chinese(tmp_path: Path) -> None:
    """PyTorch on the CPU, tuned: the backend's own warnings (no CUDA graphs, the precision it chose,
    --compile that needs a GPU)."""
    argv = (
        "run",
        "bert-base-imdb",
        "--tiny",
        "--backend",
        "torch",
        "--device",
        "cpu",
        "--exec",
        "tuned",
        "--gpu",
        "a100-40gb",
        "--min-steps",
        "2",
        "--min-seconds",
        "0",
        "--warmup",
        "1",
        "--no-history",
        "--compile",
    )
    out = cli(*argv, "--lang", "zh", home=tmp_path, timeout=300)
    assert "警告:CUDA Graph 需要 CUDA 设备" in out.stdout
    assert "--compile 需要带 Triton 的 CUDA 设备" in out.stdout  # --compile reached the child
    assert _leaks(out) == []
