"""`fitbench check` end to end: the real CLI, the real estimator, the real runner and SQLite history."""

from __future__ import annotations

import json

import pytest

from fitbench.catalog.detect import detect_local_gpus
from fitbench.cli.estimate import DEFAULT_GPUS
from fitbench.cli.main import main
from fitbench.results.history import History

SCENARIO_KEYS = [
    "resnet50-cifar10 · fp32",
    "bert-base-imdb · fp32",
    "bert-base-imdb · amp-fp16",
    "llm-6b · fp16",
]
NO_GPU = not detect_local_gpus()


def _json(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, json.loads(out), err


@pytest.mark.slow
def test_estimate_only_json_answers_on_this_machine(capsys, tmp_path):
    report = tmp_path / "report.html"
    rc, data, _ = _json(capsys, "check", "--estimate-only", "--json", "--html", str(report))
    assert rc == 0
    assert set(data) >= {"machine", "scenarios", "report", "size_guide"}
    machine = data["machine"]
    assert machine["measured"] is False
    if NO_GPU:
        assert machine["device"] == "cpu" and machine["gpus"] == [] and machine["catalog_gpu"] is None
    assert [s["key"] for s in data["scenarios"]] == SCENARIO_KEYS
    for s in data["scenarios"]:
        assert set(DEFAULT_GPUS) <= set(s["estimates"])
        assert s["measurement"] is None and s["run_id"] is None
        assert any(a["kind"] == "cheapest" for a in s["advice"])
    by_key = {s["key"]: s for s in data["scenarios"]}
    llm = by_key["llm-6b · fp16"]
    # The brief: the 6B model does not load on the 12 GB card and runs on 24 GB and 40 GB ones.
    assert llm["estimates"]["rtx-3060-12gb"]["verdict"] == "oom"
    assert llm["estimates"]["rtx-4090"]["verdict"] in ("fits", "tight")
    assert llm["estimates"]["a100-40gb"]["verdict"] == "fits"
    if NO_GPU:  # the advice targets the brief's entry card, where int8/int4 weights make it fit
        fixes = next(a for a in llm["advice"] if a["kind"] == "fixes")
        kinds = {o["kind"]: o for o in fixes["data"]["options"]}
        assert kinds["int4"]["verdict"] == "fits" and kinds["int8"]["verdict"] == "fits"
        assert set(fixes["texts"]) == {"en", "zh"}
        # It does not fit, but it runs with layers in CPU memory: how many, how much RAM, how fast.
        off = next(a for a in llm["advice"] if a["kind"] == "offload")
        assert 0 < off["data"]["gpu_layers"] < off["data"]["total_layers"]
        assert set(off["texts"]) == {"en", "zh"} and "tok/s" in off["texts"]["en"]
        if off["data"]["host_ram_enough"] is not False:
            assert off["data"]["verdict"] == "offload" and "layers on the GPU" in off["texts"]["en"]
    amp, fp32 = by_key["bert-base-imdb · amp-fp16"], by_key["bert-base-imdb · fp32"]
    for gpu in DEFAULT_GPUS:  # AMP saves memory and time on every card
        assert amp["estimates"][gpu]["peak_memory_bytes"] < fp32["estimates"][gpu]["peak_memory_bytes"]
        assert amp["estimates"][gpu]["step_seconds"] < fp32["estimates"][gpu]["step_seconds"]
    assert data["report"] == str(report.resolve())
    html = report.read_text(encoding="utf-8")
    assert html.count("<svg") >= 2 * len(SCENARIO_KEYS)
    regimes = {row["regime"] for row in data["size_guide"]}
    assert regimes == {"cnn-train", "encoder-finetune", "decoder-generate"}


@pytest.mark.slow
def test_plain_fitbench_is_check(capsys):
    rc, data, _ = _json(capsys, "--estimate-only", "--json", "--no-report")
    assert rc == 0
    assert data["report"] is None
    assert [s["key"] for s in data["scenarios"]] == SCENARIO_KEYS


@pytest.mark.slow
def test_table_and_advice_in_chinese(capsys, tmp_path):
    rc = main(["check", "--estimate-only", "--lang", "zh", "--no-report"])
    out, _ = capsys.readouterr()
    assert rc == 0
    assert "fitbench 检查" in out and "显存不足" in out and "可以运行" in out and "建议" in out
    assert "按模型规模选卡" in out
    assert "报告:" not in out  # --no-report
    if NO_GPU:
        assert "未发现 NVIDIA GPU" in out


def test_table_in_english_has_one_row_per_scenario(capsys, tmp_path):
    rc = main(["check", "--estimate-only", "--lang", "en", "--html", str(tmp_path / "r.html")])
    out, _ = capsys.readouterr()
    assert rc == 0
    table = out.split("\n\n")[1].splitlines()
    assert table[0].startswith("scenario") and "RTX 4090" in table[0] and "H100" in table[0]
    assert [line.split("  ")[0].strip() for line in table[2:]] == SCENARIO_KEYS
    assert "Size guide, derived from the estimator" in out
    assert f"Report: {(tmp_path / 'r.html').resolve()}" in out


def test_a_framework_that_is_not_installed_is_a_one_line_error(capsys, monkeypatch):
    from fitbench import backends

    if all(backends.backend_installed(n) for n in backends.BACKENDS):
        pytest.skip("both frameworks are installed here")
    missing = next(n for n in backends.BACKENDS if not backends.backend_installed(n))
    rc = main(["check", "--backend", missing, "--no-report"])
    _, err = capsys.readouterr()
    assert rc == 2 and f"the {missing} backend is not installed" in err


@pytest.mark.slow
@pytest.mark.torch
def test_check_measures_the_tiny_scenarios_and_stores_them(capsys, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    db, report = tmp_path / "history.sqlite", tmp_path / "report.html"
    rc, data, err = _json(
        capsys,
        "check",
        "--backend",
        "torch",
        "--tiny",
        "--min-seconds",
        "0.1",
        "--db",
        str(db),
        "--html",
        str(report),
        "--json",
    )
    assert rc == 0, err
    assert data["machine"]["measured"] is True and data["machine"]["backend"] == "torch"
    assert "measuring resnet50-cifar10" in err  # progress on stderr
    run_ids = []
    for s in data["scenarios"]:
        m = s["measurement"]
        assert m is not None and m["status"] == "ok", (s["key"], m and m.get("error"))
        assert s["measured_workload"]["tiny"] is True
        assert m["step_seconds"] > 0 and m["peak_memory_bytes"] > 0
        run_ids.append(s["run_id"])
    amp = next(s for s in data["scenarios"] if s["key"] == "bert-base-imdb · amp-fp16")
    assert amp["measured_workload"]["precision"].startswith("amp-")
    with History.open(db) as history:
        stored = history.last_runs(10)
    assert sorted(r["run_id"] for r in stored) == sorted(run_ids)
    assert all(r["command"] == "check" for r in stored)
    assert all(set(DEFAULT_GPUS) <= set(r["catalog_estimates"]["estimates"]) for r in stored)
    html = report.read_text(encoding="utf-8")
    for run_id in run_ids:
        assert run_id in html
    assert html.count("<svg") >= 2 * len(SCENARIO_KEYS) + 1  # and the history chart
    # `fitbench report` reads the same runs back.
    md = tmp_path / "again.md"
    assert main(["report", "--db", str(db), "--markdown", str(md)]) == 0
    capsys.readouterr()
    text = md.read_text(encoding="utf-8")
    assert all(run_id in text for run_id in run_ids)
    assert "resnet50-cifar10 · fp32" in text


@pytest.mark.torch
@pytest.mark.slow
def test_estimate_only_tuned_estimates_the_tuned_code(capsys, tmp_path):
    """Estimates the framework `check` would measure with, the first installed: PyTorch's tuned
    rule (amp-bf16) is asserted below, Paddle's would be bf16."""
    rc, default, _ = _json(capsys, "check", "--estimate-only", "--json", "--no-report")
    rc_t, tuned, _ = _json(capsys, "check", "--estimate-only", "--json", "--no-report", "--exec", "tuned")
    assert rc == rc_t == 0
    for d, t in zip(default["scenarios"], tuned["scenarios"], strict=True):
        for gpu in DEFAULT_GPUS:
            e_d, e_t = d["estimates"][gpu], t["estimates"][gpu]
            assert e_d["exec_mode"] == "default" and e_t["exec_mode"] == "tuned"
            if e_d["verdict"] != "oom":
                # No host overhead in tuned code: where the eager step waits on the host, tuned is
                # faster. Elsewhere its kernels carry their own fitted bandwidth share (profiles.toml
                # [torch.tuned]) and its precision rule may switch amp-fp16 to amp-bf16, so a
                # compute-bound step may read a few percent slower, not more.
                if e_d["bottleneck"] == "overhead":
                    assert e_t["step_seconds"] < e_d["step_seconds"]
                assert e_t["step_seconds"] <= 1.05 * e_d["step_seconds"]
    # FP32 training is estimated as the bf16 autocast tuned code runs (the RTX 4090 has BF16).
    resnet = tuned["scenarios"][0]["estimates"]["rtx-4090"]
    assert resnet["precision"] == "amp-bf16"
    main(["check", "--estimate-only", "--no-report", "--exec", "tuned"])
    assert "--exec tuned" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.torch
def test_check_tuned_measures_with_the_tuned_code(capsys, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    db = tmp_path / "history.sqlite"
    rc, data, err = _json(
        capsys,
        "check",
        "--backend",
        "torch",
        "--tiny",
        "--exec",
        "tuned",
        "--min-seconds",
        "0.1",
        "--db",
        str(db),
        "--no-report",
        "--json",
    )
    assert rc == 0, err
    for s in data["scenarios"]:
        m = s["measurement"]
        assert m["status"] == "ok" and m["exec_mode"] == "tuned", (s["key"], m.get("error"))
        # check compiles by default where inductor can; on this CPU it cannot, and says nothing
        assert m["backend_notes"]["compiled_step"] is False
        assert not any("--compile" in w for w in m["warnings"]), m["warnings"]
    with History.open(db) as history:
        stored = history.last_runs(10)
    assert {r["catalog_estimates"]["exec_mode"] for r in stored} == {"tuned"}


@pytest.mark.slow
def test_estimate_only_imports_no_framework(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys, contextlib, io\n"
        "from fitbench.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    rc = main(['check', '--estimate-only', '--json', '--no-report'])\n"
        "loaded = sorted(m for m in ('torch', 'paddle', 'transformers', 'numpy') if m in sys.modules)\n"
        "print(rc, loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert out.stdout.strip() == "0 []", out.stderr[-2000:]
