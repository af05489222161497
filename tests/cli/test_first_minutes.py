"""What a new user meets in the first minutes, through the real CLI in a fresh process each time.

Each test starts `python -m fitbench.cli.main` with this checkout's src first on the path, a
history folder of its own and an English locale unless the test sets another; a plain install
(no framework at all) is a Python started without its site-packages (`python -S`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fitbench
from fitbench.backends import installed_backends
from fitbench.catalog.detect import detect_local_gpus
from fitbench.cli.main import SUBCOMMANDS
from fitbench.core.precision import PRECISION_NAMES
from fitbench.results.history import History

SRC_DIR = Path(fitbench.__file__).resolve().parents[1]
NO_GPU = not detect_local_gpus()
LOCALE_VARS = ("LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE")


def cli(
    *argv: str,
    home: Path,
    env: dict[str, str] | None = None,
    plain: bool = False,
    cwd: Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """One fitbench command in a fresh process; `plain`: no site-packages, as after `pip install fitbench`."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in (*LOCALE_VARS, "FITBENCH_TEST_FAIL", "FITBENCH_DEBUG", "PYTHONPATH")
    }
    base.update({"LANG": "C.UTF-8", "FITBENCH_HOME": str(home), "PYTHONPATH": str(SRC_DIR)})
    base.update(env or {})
    flags = ["-S"] if plain else []
    return subprocess.run(
        [sys.executable, *flags, "-m", "fitbench.cli.main", *argv],
        env=base,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def cli_json(*argv: str, home: Path, **kw) -> dict:
    out = cli(*argv, "--json", home=home, **kw)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def has_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


# -- install -------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_plain_install_estimates_and_says_what_to_install_to_measure(tmp_path: Path) -> None:
    probe = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import importlib.util as u; "
            "print(u.find_spec('torch') is None and u.find_spec('paddle') is None)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip() == "True"  # the premise: -S hides every framework
    est = cli("estimate", "llm-6b", home=tmp_path, plain=True)
    assert est.returncode == 0, est.stderr
    assert "rtx-4090" in est.stdout and "decode" in est.stdout
    check = cli("--no-report", home=tmp_path, plain=True)
    assert check.returncode == 0, check.stderr
    install = [x for x in check.stdout.splitlines() if "pip install 'fitbench[torch]'" in x]
    assert len(install) == 1 and "fitbench[paddle]" in install[0]
    # One coherent story: nothing is measured (not "measurements on the CPU"), the estimate still answers.
    assert "measurements on the CPU" not in check.stdout
    assert "nothing can be measured" in install[0] and "The estimates still give" in install[0]
    zh = cli("--no-report", "--lang", "zh", home=tmp_path, plain=True).stdout
    assert "实测在 CPU 上进行" not in zh and "都无法实测" in zh
    for lang, word in (("en", "estimate"), ("zh", "估算")):
        out = cli("run", "resnet50-cifar10", "--tiny", "--lang", lang, home=tmp_path, plain=True)
        line = one_line_error(out)
        assert "pip install 'fitbench[torch]'" in line and word in line
        assert has_chinese(line) == (lang == "zh")


# -- bad input: one clear line each -----------------------------------------------------------------------
def test_unknown_precision_lists_every_valid_value(tmp_path: Path) -> None:
    line = one_line_error(cli("estimate", "llm-6b", "--precision", "fp8", home=tmp_path))
    assert "unknown precision 'fp8'" in line
    assert all(name in line for name in PRECISION_NAMES), line


def test_mistyped_option_gets_a_suggestion(tmp_path: Path) -> None:
    line = one_line_error(cli("estimate", "llm-6b", "--bacth", "8", home=tmp_path))
    assert "--bacth" in line and "did you mean '--batch'" in line
    assert "`fitbench estimate --help`" in line  # the command's options, not the list of commands
    line = one_line_error(cli("run", "llm-6b", "--tiny", "--precison", "fp32", home=tmp_path))
    assert "did you mean '--precision'" in line and "`fitbench run --help`" in line


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU to emulate on")
def test_emulate_without_a_gpu_is_one_line_that_does_not_send_the_user_round(tmp_path: Path) -> None:
    if not installed_backends():
        pytest.skip("no framework installed: `fitbench run` stops at that first")
    for extra in ((), ("--device", "cuda"), ("--device", "cpu")):
        line = one_line_error(cli("run", "llm-6b", "--tiny", "--emulate", "rtx-4090", *extra, home=tmp_path))
        assert "has none" in line and "fitbench estimate WORKLOAD --gpu rtx-4090" in line
        assert "--device" not in line


# -- estimate: fixes, speeds, bottlenecks, TF32, units ------------------------------------------------------
@pytest.mark.slow
def test_estimate_oom_says_what_would_make_it_fit_each_re_estimated(tmp_path: Path) -> None:
    out = cli("estimate", "llm-6b", "--gpu", "rtx-3060-12gb", home=tmp_path)
    assert out.returncode == 0
    assert "What would make it fit" in out.stdout
    assert "int8 weights: peak" in out.stdout and "int4 weights: peak" in out.stdout
    data = cli_json("estimate", "llm-6b", "--gpu", "rtx-3060-12gb", home=tmp_path)
    (fix,) = data["fixes"]
    assert fix["gpu"] == "rtx-3060-12gb" and fix["baseline_verdict"] == "oom"
    options = {o["kind"]: o for o in fix["options"]}
    # Each option is the estimator run again on the changed job: the same figures the CLI gives for it.
    int4 = cli_json("estimate", "llm-6b", "--gpu", "rtx-3060-12gb", "--precision", "int4", home=tmp_path)
    assert options["int4"]["verdict"] == int4["estimates"][0]["verdict"] == "fits"
    assert options["int4"]["peak_memory_bytes"] == int4["estimates"][0]["peak_memory_bytes"]
    # Training that does not fit: a smaller batch, checkpointing (the options that make it fit).
    train = cli("estimate", "bert-base-imdb", "--gpu", "rtx-3060-12gb", "--batch", "64", home=tmp_path)
    assert "out of memory" in train.stdout
    assert "activation checkpointing" in train.stdout and "gradient-accumulation" in train.stdout
    fits = cli_json("estimate", "llm-6b", "--gpu", "a100-40gb", home=tmp_path)
    assert fits["fixes"] == []


def test_oom_has_no_speed_and_names_memory_capacity_apart_from_bandwidth(tmp_path: Path) -> None:
    # A T4 holds the 6.7B model and reads its 13 GB of weights at 320 GB/s: bandwidth-bound decode.
    data = cli_json("estimate", "llm-6b", "--gpu", "rtx-3060-12gb,t4", home=tmp_path)
    oom, fits = data["estimates"]
    assert oom["verdict"] == "oom" and fits["verdict"] in ("fits", "tight")
    assert oom["tokens_per_second"] is None and oom["tokens_per_second_if_it_fit"] > 0
    assert oom["limited_by"] == "memory-capacity"
    assert fits["bottleneck"] == "memory" and fits["limited_by"] == "memory-bandwidth"
    table = cli("estimate", "llm-6b", "--gpu", "rtx-3060-12gb,t4", home=tmp_path).stdout
    oom_row = next(x for x in table.splitlines() if x.startswith("rtx-3060-12gb"))
    fits_row = next(x for x in table.splitlines() if x.startswith("t4 "))
    assert "memory capacity (OOM)" in oom_row and "tok/s" not in oom_row
    assert "memory bandwidth" in fits_row and "decode" in fits_row


def test_decode_and_end_to_end_rates_are_named_in_the_estimate(tmp_path: Path) -> None:
    (e,) = cli_json("estimate", "llm-6b", "--gpu", "a100-40gb", home=tmp_path)["estimates"]
    assert e["decode_tokens_per_second"] == e["tokens_per_second"]
    # End to end counts the prompt's prefill too: below decode, by exactly that time.
    seconds = e["prefill_seconds"] + e["new_tokens"] * e["step_seconds"]
    assert e["end_to_end_tokens_per_second"] == pytest.approx(e["new_tokens"] * e["batch_size"] / seconds)
    assert e["end_to_end_tokens_per_second"] < e["decode_tokens_per_second"]
    text = cli("estimate", "llm-6b", "--gpu", "a100-40gb", home=tmp_path).stdout
    assert "decode" in text and "decode tok/s" in text


@pytest.mark.slow
def test_tf32_is_an_assumption_and_advice_re_estimated(tmp_path: Path) -> None:
    data = cli_json("estimate", "bert-base-imdb", "--gpu", "a100-40gb,v100-16gb", home=tmp_path)
    a100, volta = data["estimates"]
    assert any("TF32" in a for a in a100["assumptions"])
    assert not any("TF32" in a for a in volta["assumptions"])  # no TF32 tensor cores there
    (advice,) = data["tf32"]
    tf32 = cli_json("estimate", "bert-base-imdb", "--gpu", "a100-40gb", "--precision", "tf32", home=tmp_path)
    assert advice["gpu"] == "a100-40gb"
    assert advice["speedup"] == pytest.approx(a100["step_seconds"] / tf32["estimates"][0]["step_seconds"])
    assert advice["speedup"] > 1.5
    text = cli("estimate", "bert-base-imdb", "--gpu", "a100-40gb", home=tmp_path).stdout
    speedup = f"{advice['speedup']:.2f}"
    assert f"enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True): estimated {speedup}×" in text
    amp = cli_json(
        "estimate", "bert-base-imdb", "--gpu", "a100-40gb", "--precision", "amp-bf16", home=tmp_path
    )
    assert amp["tf32"] == []


def test_check_advice_says_enable_tf32_on_a_tf32_card() -> None:
    """`fitbench check` advises for the local card; without one here, its advice step is run for an
    A100 directly (the same function the command calls)."""
    from fitbench.catalog import get_gpu
    from fitbench.check.advice import scenario_advice
    from fitbench.check.result import ScenarioResult
    from fitbench.workloads.presets import get_workload

    bert = get_workload("bert-base-imdb")
    result = ScenarioResult(key="bert-base-imdb · fp32", workload=bert, estimates={})
    scenario_advice(result, get_gpu("a100-40gb"), "torch", "default", "en")
    (tf32,) = [a for a in result.advice if a["kind"] == "tf32"]
    assert tf32["data"]["gpu"] == "a100-40gb" and tf32["data"]["speedup"] > 1.5
    assert "enable TF32" in tf32["texts"]["en"] and "TF32" in tf32["texts"]["zh"]


def test_gib_and_gb_are_both_shown_once(tmp_path: Path) -> None:
    gpus = cli("gpus", home=tmp_path).stdout
    header = gpus.splitlines()[0].split()
    assert "GiB" in header and "GB" in header
    row = next(x.split() for x in gpus.splitlines() if x.startswith("rtx-4090"))
    gib, gb = float(row[header.index("GiB") + 2]), float(row[header.index("GB") + 2])
    assert gib == pytest.approx(24.0) and gb == pytest.approx(25.8, abs=0.05)
    assert gpus.count("2^30 bytes") == 1
    assert cli("estimate", "llm-6b", home=tmp_path).stdout.count("2^30 bytes") == 1


# -- check without a GPU ------------------------------------------------------------------------------------
@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
@pytest.mark.slow
def test_check_without_a_gpu_names_the_cheapest_fitting_cards_and_the_cpu(tmp_path: Path) -> None:
    data = cli_json("check", "--estimate-only", "--no-report", home=tmp_path)
    no_gpu = data["no_gpu"]
    assert set(no_gpu["cheapest_cards"]) == {s["key"] for s in data["scenarios"]}
    catalog = {g["id"]: g for g in cli_json("gpus", home=tmp_path)}
    for key, cards in no_gpu["cheapest_cards"].items():
        assert cards, key
        prices = [c["price_usd"] for c in cards]
        assert prices == sorted(prices)
        workload, precision = key.split(" · ")
        ids = ",".join(c["gpu"] for c in cards)
        verdicts = cli_json("estimate", workload, "--precision", precision, "--gpu", ids, home=tmp_path)
        assert all(e["verdict"] == "fits" for e in verdicts["estimates"])
        # No priced card below the first one runs it with verdict fits.
        cheaper = [
            g for g, spec in catalog.items() if spec.get("price_usd") and spec["price_usd"] < prices[0]
        ]
        if cheaper:
            below = cli_json(
                "estimate", workload, "--precision", precision, "--gpu", ",".join(cheaper), home=tmp_path
            )
            assert all(e["verdict"] != "fits" for e in below["estimates"])
    assert no_gpu["ram_bytes"] > 0 and no_gpu["tiny_runs_on_cpu"] is True
    text = cli("check", "--estimate-only", "--no-report", home=tmp_path).stdout
    assert "Without a GPU: the cheapest catalog cards" in text and "On this CPU:" in text


@pytest.mark.slow
def test_the_reference_scenarios_are_named_not_the_brief(tmp_path: Path) -> None:
    from fitbench.advise.i18n import MESSAGES

    assert not [k for k, v in MESSAGES.items() if "brief" in v["en"].lower()]
    en = cli("check", "--estimate-only", "--no-report", home=tmp_path).stdout
    zh = cli("check", "--estimate-only", "--no-report", "--lang", "zh", home=tmp_path).stdout
    assert "brief" not in en.lower() and "three reference scenarios" in en
    assert "三个参考场景" in zh and "Is your GPU enough for AI projects on PaddlePaddle 3.3?" in en


# -- history and report: what ran, both rates, where the report goes ---------------------------------------
def _stored_runs(home: Path) -> list[str]:
    """Two runs as `fitbench run` stores them: AMP asked, bf16 ran (a CPU); and a generation."""
    with History.open(home / "history.sqlite") as h:
        first = h.add_run(
            {
                "command": "run",
                "workload": {
                    "name": "bert-base-imdb",
                    "precision": "amp-fp16",
                    "family": "encoder",
                    "mode": "train",
                    "batch_size": 2,
                    "tiny": True,
                },
                "measurement": {
                    "status": "ok",
                    "device": "cpu",
                    "backend": "torch",
                    "precision_requested": "amp-fp16",
                    "precision_in_effect": "amp-bf16",
                    "step_seconds": 0.01,
                    "samples_per_second": 200.0,
                    "peak_memory_bytes": 300 << 20,
                },
            }
        )
        second = h.add_run(
            {
                "command": "run",
                "workload": {
                    "name": "llm-6b",
                    "precision": "fp32",
                    "family": "decoder",
                    "mode": "infer",
                    "batch_size": 1,
                    "tiny": True,
                    "prompt_tokens": 8,
                    "new_tokens": 16,
                },
                "measurement": {
                    "status": "ok",
                    "device": "cpu",
                    "backend": "torch",
                    "precision_requested": "fp32",
                    "precision_in_effect": "fp32",
                    "step_seconds": 0.2,
                    "tokens_per_second": 80.0,
                    "decode_tokens_per_second": 400.0,
                    "peak_memory_bytes": 300 << 20,
                },
            }
        )
    return [first, second]


def test_history_shows_what_ran_and_names_both_token_rates(tmp_path: Path) -> None:
    _stored_runs(tmp_path)
    text = cli("history", home=tmp_path).stdout
    bert = next(x for x in text.splitlines() if "bert-base-imdb" in x)
    llm = next(x for x in text.splitlines() if "llm-6b" in x)
    assert "amp-bf16 (asked amp-fp16)" in bert
    assert "decode 400 tok/s" in llm and "end-to-end 80.0 tok/s" in llm and "asked" not in llm
    runs = {r["workload"]: r for r in cli_json("history", home=tmp_path)}
    assert runs["bert-base-imdb"]["precision_in_effect"] == "amp-bf16"
    assert runs["bert-base-imdb"]["precision"] == "amp-fp16"  # the stored column keeps its meaning
    assert runs["llm-6b"]["decode_tokens_per_second"] == 400.0
    assert runs["llm-6b"]["end_to_end_tokens_per_second"] == runs["llm-6b"]["tokens_per_second"] == 80.0


@pytest.mark.slow
def test_report_goes_to_the_data_folder_and_out_chooses(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _stored_runs(home)
    out = cli("report", home=home, cwd=work)
    assert out.returncode == 0, out.stderr
    written = home / "fitbench-report.html"
    assert written.is_file() and not list(work.iterdir())
    assert str(written.resolve()) in out.stdout
    assert "amp-bf16 (asked amp-fp16)" in written.read_text(encoding="utf-8")
    zh = cli("report", "--lang", "zh", "--out", str(work / "zh.html"), home=home, cwd=work)
    assert zh.returncode == 0, zh.stderr
    assert "amp-bf16(请求 amp-fp16)" in (work / "zh.html").read_text(encoding="utf-8")
    md = work / "runs.md"
    out = cli("report", "--out", str(md), home=home, cwd=work)
    assert out.returncode == 0 and str(md.resolve()) in out.stdout
    assert md.read_text(encoding="utf-8").startswith("#")


# -- languages ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_command_takes_lang(tmp_path: Path, command: str) -> None:
    out = cli(command, "--help", home=tmp_path)
    assert out.returncode == 0 and "--lang" in out.stdout


@pytest.mark.slow
def test_estimate_and_the_rest_honour_lang_and_the_locale(tmp_path: Path) -> None:
    a, b = _stored_runs(tmp_path)
    zh_env = {"LANG": "zh_CN.UTF-8"}
    stored = SRC_DIR.parent / "benchmarks" / "results" / "accuracy-h200-2026-12-02.json"
    commands = (
        ("estimate", "llm-6b", "--gpu", "rtx-3060-12gb"),
        ("gpus",),
        ("history",),
        ("compare", a, b),
        ("workloads",),
        ("models", "qwen"),
        ("calibrate", "--from", str(stored), "--dry-run"),
    )
    for argv in commands:
        en = cli(*argv, home=tmp_path).stdout
        by_flag = cli(*argv, "--lang", "zh", home=tmp_path).stdout
        by_locale = cli(*argv, home=tmp_path, env=zh_env).stdout
        assert not has_chinese(en), argv
        assert has_chinese(by_flag) and by_flag == by_locale, argv
        assert cli(*argv, "--lang", "en", home=tmp_path, env=zh_env).stdout == en
    zh = cli("estimate", "llm-6b", "--gpu", "rtx-3060-12gb", home=tmp_path, env=zh_env).stdout
    assert "显存不足" in zh and "int4 权重量化" in zh and "显存容量(OOM)" in zh
    compare = cli("compare", a, b, "--lang", "zh", home=tmp_path).stdout
    assert "峰值显存" in compare and "实际精度" in compare and "peak memory" not in compare
    workloads = cli("workloads", "--lang", "zh", home=tmp_path).stdout
    assert workloads.startswith("负载") and "可覆盖任意字段" in workloads
    models = cli("models", "qwen", "--lang", "zh", home=tmp_path).stdout
    assert models.startswith("模型") and "滑动窗口" in models
    calibrate = cli("calibrate", "--from", str(stored), "--dry-run", "--lang", "zh", home=tmp_path).stdout
    assert calibrate.startswith("在 H200") and "个数据点" in calibrate


# -- a real tiny run: smoke test, not comparable, both rates -----------------------------------------------
@pytest.mark.slow
@pytest.mark.torch
def test_tiny_run_is_a_smoke_test_not_comparable_with_a_gpu_estimate(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    argv = (
        "run",
        "llm-6b",
        "--tiny",
        "--backend",
        "torch",
        "--device",
        "cpu",
        "--gpu",
        "rtx-4090",
        "--min-steps",
        "2",
        "--min-seconds",
        "0",
        "--warmup",
        "1",
    )
    data = cli_json(*argv, home=tmp_path, timeout=300)
    m = data["measurement"]
    assert m["status"] == "ok"
    assert data["comparable"] is False and data["not_comparable"] == ["cpu", "tiny"]
    assert m["end_to_end_tokens_per_second"] == m["tokens_per_second"]
    assert m["decode_tokens_per_second"] > m["end_to_end_tokens_per_second"]
    # The text forms render the same result fields: the fake backend measures them (no PyTorch child).
    shown = tuple("fake" if a == "torch" else a for a in argv)
    text = cli(*shown, "--no-history", home=tmp_path, timeout=300).stdout
    assert "smoke test" in text.splitlines()[0]
    assert "not comparable with the estimate: measured on the CPU" in text
    assert "decode tok/s" in text and "end-to-end tok/s" in text
    zh = cli(*shown, "--no-history", "--lang", "zh", home=tmp_path, timeout=300).stdout
    assert "冒烟测试" in zh.splitlines()[0]
    assert all(label in zh for label in ("峰值显存", "解码 tok/s", "端到端 tok/s", "实测", "误差"))
    assert "decode tok/s" not in zh and "peak memory" not in zh
