"""`fitbench run`, `history` and `compare` end to end: real CLI, real child processes, real SQLite.

The tiny scenarios really run through PyTorch on the CPU. Failures are produced by the fake
backend (`--backend fake:FAULT`, fitbench.backends.fake), which fails inside the real child
process; one real allocator out-of-memory runs under an address-space cap (test_real_oom.py).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
import time

import pytest

from fitbench.cli.main import main
from fitbench.measure import nvml
from fitbench.measure.progress import Progress, should_show
from fitbench.measure.timing import summarize
from fitbench.workloads.presets import get_workload

FAST = ["--min-steps", "3", "--min-seconds", "0.05", "--warmup", "1"]


def run_cli(capsys, *argv: str) -> tuple[int, object, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    data = json.loads(out) if "--json" in argv and out.strip() else out
    return rc, data, err


def history_json(capsys, db) -> list[dict]:
    rc, runs, _ = run_cli(capsys, "history", "--json", "--db", str(db))
    assert rc == 0
    return runs


needs_torch = [pytest.mark.torch, pytest.mark.slow]


def _torch():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")


# -- the three tiny scenarios ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb", "llm-6b"])
@pytest.mark.torch
@pytest.mark.slow
def test_tiny_scenario_end_to_end_lands_in_history(capsys, tmp_path, name):
    _torch()
    db = tmp_path / "h.sqlite"
    rc, data, _ = run_cli(
        capsys,
        "run",
        name,
        "--tiny",
        "--backend",
        "torch",
        "--device",
        "cpu",
        "--json",
        "--db",
        str(db),
        *FAST,
    )
    assert rc == 0
    m = data["measurement"]
    workload = get_workload(name, tiny=True)
    assert m["status"] == "ok", m
    assert m["error"] is None and m["backend"] == "torch" and m["device"] == "cpu"
    assert m["precision_requested"] == m["precision_in_effect"] == "fp32"
    assert m["params"] == workload.param_count()
    samples = m["step_samples_seconds"]
    assert m["steps"] == len(samples) >= 3
    assert m["step_seconds"] == pytest.approx(summarize(samples).median)
    assert m["step_seconds_p90"] >= m["step_seconds"] > 0
    assert m["peak_memory_bytes"] == m["peak_rss_bytes"] > 50 * 2**20  # a process holding torch
    assert m["peak_memory_source"] == "rss"
    assert m["memory_after_load_bytes"] > 0 and m["load_seconds"] > 0
    assert m["environment"]["torch"] and m["environment"]["python"] and m["environment"]["hostname"]
    # The host's speed, timed in this process before and after the timed work (a CPU is a host too).
    parts = m["host_probe_parts"]
    assert set(parts) == {"F.linear (autograd on)", "nn.Linear module call", "torch.add", "Tensor.view"}
    assert all(math.isfinite(v) and v > 0 for v in parts.values())
    assert m["host_probe_seconds"] == pytest.approx(sum(parts.values()))
    assert math.isfinite(m["host_probe_drift"]) and m["host_probe_drift"] > 0
    if workload.is_generation:
        tokens = workload.batch_size * workload.new_tokens
        assert m["tokens_per_second"] == pytest.approx(tokens / m["step_seconds"])
        assert m["prefill_seconds"] > 0
        if m["prefill_seconds"] < m["step_seconds"]:
            assert m["decode_tokens_per_second"] == pytest.approx(
                tokens / (m["step_seconds"] - m["prefill_seconds"])
            )
            assert m["decode_tokens_per_second"] > m["tokens_per_second"]
        else:  # a busy CPU can slow the separately timed prefills past a whole generation
            assert m["decode_tokens_per_second"] is None
            assert any("decode speed not derived" in w for w in m["warnings"])
    else:
        assert m["samples_per_second"] == pytest.approx(workload.batch_size / m["step_seconds"])
        assert m["epoch_seconds"] == pytest.approx(
            m["step_seconds"] * math.ceil(workload.dataset_size / workload.batch_size)
        )
    if workload.family == "encoder":
        assert m["tokens_per_second"] == pytest.approx(
            workload.batch_size * workload.seq_len / m["step_seconds"]
        )
    assert data["estimate"] is None  # a CPU run has no GPU to estimate for
    assert set(data["error_vs_estimate"]) >= {"peak_memory", "step_seconds", "tokens_per_second"}

    runs = history_json(capsys, db)
    assert [r["run_id"] for r in runs] == [data["run_id"]]
    assert runs[0]["workload"] == name and runs[0]["status"] == "ok" and runs[0]["backend"] == "torch"
    assert runs[0]["peak_memory_bytes"] == m["peak_memory_bytes"]


@pytest.mark.torch
@pytest.mark.slow
def test_amp_bf16_on_cpu_reports_what_ran(capsys, tmp_path):
    _torch()
    rc, data, _ = run_cli(
        capsys,
        "run",
        "bert-base-imdb",
        "--tiny",
        "--device",
        "cpu",
        "--precision",
        "amp-bf16",
        "--json",
        "--no-history",
        *FAST,
    )
    assert rc == 0
    m = data["measurement"]
    assert m["status"] == "ok"
    assert m["precision_requested"] == "amp-bf16"
    assert m["precision_in_effect"] == "amp-bf16"
    assert m["backend_notes"]["autocast_dtype"] == "bfloat16"
    assert data["run_id"] is None


@pytest.mark.torch
@pytest.mark.slow
def test_precision_list_gives_a_comparison(capsys, tmp_path):
    _torch()
    db = tmp_path / "h.sqlite"
    rc, data, _ = run_cli(
        capsys,
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--device",
        "cpu",
        "--precision",
        "fp32,amp-bf16",
        "--json",
        "--db",
        str(db),
        *FAST,
    )
    assert rc == 0
    assert isinstance(data, list) and [r["precision"] for r in data] == ["fp32", "amp-bf16"]
    assert data[0]["comparison"]["speedup"] == pytest.approx(1.0)
    assert data[0]["comparison"]["memory_saving"] == pytest.approx(0.0)
    other = data[1]["comparison"]
    assert other["baseline"] == "fp32"
    m0, m1 = data[0]["measurement"], data[1]["measurement"]
    assert other["speedup"] == pytest.approx(m0["step_seconds"] / m1["step_seconds"])
    assert other["memory_saving"] == pytest.approx(1 - m1["peak_memory_bytes"] / m0["peak_memory_bytes"])
    assert len(history_json(capsys, db)) == 2

    # The text form of the same comparison: its rendering is the framework's no more than the
    # history is, so the fake backend measures it (two more PyTorch children would add ~20 s).
    rc, text, _ = run_cli(
        capsys,
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--device",
        "cpu",
        "--precision",
        "fp32,amp-bf16",
        "--no-history",
        "--backend",
        "fake",
        *FAST,
    )
    assert rc == 0 and "amp-bf16 vs fp32: peak memory" in text and "speed-up" in text


@pytest.mark.slow
def test_max_batch_search_through_the_cli(capsys):
    rc, data, _ = run_cli(
        capsys,
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--device",
        "cpu",
        "--backend",
        "fake:oom-above:10",
        "--max-batch",
        "--batch-limit",
        "16",
        "--json",
        "--no-history",
        *FAST,
    )
    assert rc == 0
    assert data["measurement"]["status"] == "ok"  # batch 8 itself fits
    assert data["max_batch"]["max_batch"] == 10
    assert data["max_batch"]["first_oom"] == 11
    assert data["measurement"]["max_batch_search"]["max_batch"] == 10


def _cpu_search_against_h200(capsys, db, *extra: str) -> tuple[int, object, str]:
    """bert-base-imdb at its real size, searched on the CPU against the H200's estimate: the fake
    backend stands in for the model, the bounds come from this machine's RAM."""
    return run_cli(
        capsys,
        "run",
        "bert-base-imdb",
        "--device",
        "cpu",
        "--backend",
        "fake",
        "--gpu",
        "h200",
        "--max-batch",
        "--db",
        str(db),
        *FAST,
        *extra,
    )


@pytest.mark.slow
def test_cpu_search_is_capped_by_host_ram_not_started_at_the_gpu_estimate(capsys, tmp_path):
    from fitbench.measure.search_bounds import HOST_RAM_SHARE, largest_batch
    from fitbench.workloads.workload import Workload

    rc, data, _ = _cpu_search_against_h200(capsys, tmp_path / "h.sqlite", "--json")
    assert rc == 0
    mb = data["max_batch"]
    workload = Workload.from_dict(data["workload"])
    # The estimate's largest batch is the H200's; the search started below it, at what the memory
    # model fits in a quarter of the RAM this machine had available.
    assert mb["uncapped_start"] == mb["estimated"] == data["estimate"]["max_batch_size"]
    assert mb["capped"] == "host_ram"
    assert mb["budget_bytes"] == int(mb["memory_bytes"] * HOST_RAM_SHARE)
    fit = largest_batch(workload, mb["budget_bytes"], "torch", "default")
    assert mb["limit"] == min(fit, max(64, 8 * mb["estimated"]))
    assert mb["start"] == min(mb["estimated"], mb["limit"])
    assert all(p["batch_size"] <= mb["limit"] for p in mb["probes"])
    if fit < mb["estimated"]:  # a machine with less than ~4 x 141 GB of RAM: the start moved
        assert mb["start"] == fit < mb["estimated"]
    # A largest batch found on the CPU is not held against a GPU card's estimate.
    assert data["error_vs_estimate"]["max_batch"] is None
    assert mb["comparable"] is False and mb["not_comparable"] == ["cpu"]


@pytest.mark.slow
def test_cpu_search_says_it_is_capped_and_not_comparable_in_both_languages(capsys, tmp_path):
    db = tmp_path / "h.sqlite"
    rc, out, _ = _cpu_search_against_h200(capsys, db)
    assert rc == 0
    row = next(line for line in out.splitlines() if line.strip().startswith("max batch"))
    assert row.rstrip().endswith("not comparable") and "%" not in row
    assert "max-batch search capped at batch" in out and "25% of the" in out and "of RAM available" in out
    assert "max batch not comparable with the estimate: found on the CPU" in out
    rc, out, _ = _cpu_search_against_h200(capsys, db, "--lang", "zh")
    assert rc == 0
    assert "不可对照" in out and "最大批大小搜索上限为" in out and "最大批大小无法与估算对照" in out

    # The reports list the figure as not comparable, with the reason, and chart no error for it.
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    assert main(["report", "--db", str(db), "--last", "1", "--out", str(md)]) == 0
    assert main(["report", "--db", str(db), "--last", "1", "--html", str(html), "--lang", "zh"]) == 0
    capsys.readouterr()
    line = next(x for x in md.read_text().splitlines() if "| bert-base-imdb |" in x and "| max batch |" in x)
    assert "not comparable: found on the CPU" in line and "%" not in line
    page = html.read_text()
    assert "不可对照:它是在 CPU 上找到的" in page
    assert 'id="err"' not in page  # no error bar: nothing else of a CPU run compares either


# -- failures are verdicts or one-line errors --------------------------------------------------------
def test_out_of_memory_is_a_verdict_not_a_crash(capsys, tmp_path):
    db = tmp_path / "h.sqlite"
    fake_oom = ["--backend", "fake:oom", *FAST]
    rc, data, err = run_cli(
        capsys, "run", "resnet50-cifar10", "--tiny", "--device", "cpu", "--json", "--db", str(db), *fake_oom
    )
    assert rc == 0
    m = data["measurement"]
    assert m["status"] == "oom"
    assert m["error"] == "out of memory at batch 8 (phase: step)"
    assert "traceback" not in m and "Traceback" not in err
    assert m["oom_detail"].startswith("MemoryError: out of memory")
    assert m["load_seconds"] is not None  # the model was built before the step failed
    assert history_json(capsys, db)[0]["status"] == "oom"

    rc, text, _ = run_cli(
        capsys, "run", "resnet50-cifar10", "--tiny", "--device", "cpu", "--no-history", *fake_oom
    )
    assert rc == 0 and "status: oom — out of memory at batch 8 (phase: step)" in text


def test_child_exception_is_reported_with_its_traceback(capsys, tmp_path):
    db = tmp_path / "h.sqlite"
    rc, data, err = run_cli(
        capsys,
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--device",
        "cpu",
        "--json",
        "--db",
        str(db),
        "--backend",
        "fake:error",
    )
    assert rc == 1
    m = data["measurement"]
    assert m["status"] == "error"
    assert m["error"].startswith("FakeFailure: the fake backend failed while building the model")
    assert "Traceback" in m["traceback"] and "FakeFailure" in m["traceback"]
    assert "Traceback" not in err
    assert history_json(capsys, db)[0]["status"] == "error"


def test_child_crash_is_an_error_with_the_signal(capsys):
    rc, data, _ = run_cli(
        capsys,
        "run",
        "llm-6b",
        "--tiny",
        "--device",
        "cpu",
        "--json",
        "--no-history",
        "--backend",
        "fake:crash",
    )
    assert rc == 1
    m = data["measurement"]
    assert m["status"] == "error"
    assert "killed by SIGKILL" in m["error"]
    assert "crashing on purpose" in m["stderr_tail"]
    assert m["child_exit_code"] == -9


@pytest.mark.slow
def test_hung_child_is_stopped_at_the_timeout(capsys):
    started = time.monotonic()
    rc, data, _ = run_cli(
        capsys,
        "run",
        "bert-base-imdb",
        "--tiny",
        "--device",
        "cpu",
        "--json",
        "--no-history",
        "--backend",
        "fake:hang",
        "--timeout",
        "1.5",
    )
    assert time.monotonic() - started < 15
    assert rc == 1
    assert data["measurement"]["status"] == "timeout"
    assert data["measurement"]["error"].startswith("no result within 1.5 s")


@pytest.mark.skipif(bool(nvml.device_count()), reason="needs a machine without an NVIDIA GPU")
@pytest.mark.parametrize(
    ("flags", "expected"), [((), None), (("--compile",), True), (("--no-compile",), False)]
)
def test_compile_defaults_to_the_modes_choice_and_either_flag_is_passed_on(flags, expected):
    """No flag leaves the choice to the tuned mode (None: compiled where inductor can); --compile
    asks for it (a warning where it cannot), --no-compile measures the uncompiled step."""
    from fitbench.cli import run
    from fitbench.cli.main import build_parser

    argv = ["run", "resnet50-cifar10", "--tiny", "--backend", "fake", "--device", "cpu", "--exec", "tuned"]
    args = build_parser("run").parse_args([*argv, *flags])
    assert args.compile_step is expected
    assert run._plan(args, "en").options.compile_step is expected


def test_cuda_without_a_gpu_is_one_line(capsys):
    rc, _, err = run_cli(
        capsys, "run", "resnet50-cifar10", "--tiny", "--device", "cuda", "--no-history", "--backend", "fake"
    )
    assert rc == 2
    assert err.strip().count("\n") == 0
    assert "no CUDA GPU found" in err and "use --device cpu" in err


def test_bad_device_name(capsys):
    rc, _, err = run_cli(
        capsys, "run", "resnet50-cifar10", "--tiny", "--device", "gpu0", "--no-history", "--backend", "fake"
    )
    assert rc == 2 and "unknown device 'gpu0'" in err


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--precision", "int8", "--mode", "infer"], "int8/int4 measurement needs"),
        (["--precision", "int4", "--mode", "infer"], "int8/int4 measurement needs"),
    ],
)
def test_unavailable_paths_are_one_line_errors(capsys, extra, message):
    _torch()
    rc, _, err = run_cli(capsys, "run", "llm-6b", "--tiny", "--device", "cpu", "--no-history", *extra)
    assert rc == 2
    assert message in err and err.strip().count("\n") == 0


def test_parent_never_imports_a_framework(tmp_path):
    code = (
        "import sys; from fitbench.cli.main import main; "
        "rc = main(['run', 'resnet50-cifar10', '--tiny', '--device', 'cpu', '--no-history', '--json', "
        "'--backend', 'fake:error']); "
        "bad = [m for m in ('torch', 'paddle', 'transformers', 'numpy') if m in sys.modules]; "
        "print('LOADED', bad, rc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "LOADED [] 1" in out.stdout, out.stderr


# -- progress ---------------------------------------------------------------------------------------
def test_forced_progress_writes_phase_lines_to_stderr(capsys):
    rc, _, err = run_cli(
        capsys,
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--device",
        "cpu",
        "--no-history",
        "--progress",
        "--backend",
        "fake:error",
    )
    assert rc == 1
    assert "fitbench: resnet50-cifar10 (tiny) fp32 · starting child" in err
    assert "importing framework" in err


def test_progress_is_silent_unless_a_terminal_or_forced():
    assert should_show(None, io.StringIO()) is False
    assert should_show(True, io.StringIO()) is True
    assert should_show(False, sys.stderr) is False
    stream = io.StringIO()
    with Progress(enabled=True, label="job", stream=stream) as progress:
        progress({"phase": "warm-up", "step": 1, "of": 3})
        progress({"phase": "warm-up", "step": 2, "of": 3})
        progress({"phase": "measuring", "step": 1, "of": 10})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2  # one line per phase on a non-terminal, no redraws
    assert lines[0].startswith("fitbench: job · warm-up 1/3")
    quiet = io.StringIO()
    with Progress(enabled=False, stream=quiet) as progress:
        progress({"phase": "measuring"})
    assert quiet.getvalue() == ""


def _progress_on_a_terminal(*argv: str) -> str:
    """The progress a real `fitbench run` draws when stderr is a terminal (a pseudo-terminal here)."""
    import pty
    from pathlib import Path

    src = str(Path(__file__).parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fitbench.cli.main", "run", *argv],
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_timed_loop_progress_never_counts_past_its_total():
    """The timed loop runs until a step count and a time both hold: a fast step passes the count
    long before the time, and is then shown against the time instead of as '2611/10'."""
    text = _progress_on_a_terminal(
        "resnet50-cifar10",
        "--tiny",
        "--device",
        "cpu",
        "--backend",
        "fake",
        "--no-history",
        *("--min-steps", "3", "--min-seconds", "1.5", "--warmup", "1"),
    )
    shown = [seg.split(" · ")[1:3] for seg in text.split("\r") if " · measuring " in seg]
    assert shown
    for phase, _ in shown:
        for current, total in re.findall(r"(\d+)/(\d+)", phase):
            assert int(current) <= int(total) == 3, phase
    timed = [
        (re.fullmatch(r"measuring (\d+) steps", p), re.fullmatch(r"([\d.]+)/1\.5 s timed", d))
        for p, d in shown
    ]
    timed = [(int(count[1]), float(seconds[1])) for count, seconds in timed if count and seconds]
    assert timed, shown  # the fake step is fast: the count was met long before the time
    assert all(count >= 3 and seconds <= 1.5 for count, seconds in timed)
    assert all(re.fullmatch(r"measuring (\d+/3|\d+) steps", phase) for phase, _ in shown), shown


def test_progress_units_and_the_timed_bound_in_chinese():
    stream = io.StringIO()
    with Progress(enabled=True, label="job", stream=stream, lang="zh") as progress:
        progress({"phase": "generating", "step": 2, "of": 3, "unit": "generations"})
        progress(
            {
                "phase": "measuring",
                "step": 40,
                "unit": "steps",
                "detail": "0.4/2.0 s timed",
                "detail_key": "progress.timed_seconds",
                "seconds": "0.4",
                "min_seconds": "2.0",
            }
        )
        progress({"phase": "warm-up", "step": 12, "of": 10})
    lines = stream.getvalue().splitlines()
    assert "生成中 2/3 次生成" in lines[0]
    assert "计时中 40 步 · 已计时 0.4/2.0 秒" in lines[1]
    # A count beyond its total is shown without the total.
    assert "预热 12 ·" in lines[2] and "12/10" not in lines[2]


def test_runner_relays_child_events():
    from fitbench.backends.base import RunOptions
    from fitbench.measure.runner import MEASUREMENT_KEYS, measure

    events: list[dict] = []
    workload = get_workload("resnet50-cifar10", tiny=True)
    m = measure(workload, "fake:error", RunOptions(), progress=events.append)
    assert set(MEASUREMENT_KEYS) <= set(m)
    assert [e["phase"] for e in events][:2] == ["starting child", "importing framework"]
    assert m["status"] == "error" and m["wall_seconds"] > 0


def test_runner_rejects_nonsense_settings():
    from fitbench.backends.base import RunOptions
    from fitbench.measure.runner import measure

    with pytest.raises(ValueError):
        measure(get_workload("resnet50-cifar10", tiny=True), "torch", RunOptions(), min_steps=0)


# -- device choice without a framework ----------------------------------------------------------------
def test_cuda_index_parsing_and_no_nvml_fallbacks():
    assert nvml.cuda_index("cuda") == 0
    assert nvml.cuda_index("cuda:3") == 3
    assert nvml.cuda_index("cpu") is None
    if not nvml.available():
        assert nvml.device_count() is None
        assert nvml.process_memory(0) is None and nvml.device_used(0) is None
        sampler = nvml.MemorySampler(0).start()
        sampler.stop()
        assert sampler.peak_process is None and sampler.peak_device_used is None


# -- history and compare ------------------------------------------------------------------------------
def _record(precision: str, peak: int, step: float) -> dict:
    workload = get_workload("bert-base-imdb", tiny=True).replace(precision=precision)
    return {
        "command": "run",
        "workload": workload.to_dict(),
        "estimate": None,
        "measurement": {
            "status": "ok",
            "backend": "torch",
            "device": "cpu",
            "device_name": "cpu",
            "exec_mode": "default",
            "precision_in_effect": precision,
            "peak_memory_bytes": peak,
            "step_seconds": step,
            "samples_per_second": 4 / step,
        },
        "environment": {"hostname": "test"},
    }


def test_history_lists_and_filters(capsys, tmp_path):
    from fitbench.results.history import History

    db = tmp_path / "h.sqlite"
    History.open(db).close()  # an empty history (reading commands do not create one)
    rc, text, _ = run_cli(capsys, "history", "--db", str(db))
    assert rc == 0 and "no runs" in text
    with History.open(db) as h:
        first = h.add_run(_record("fp32", 400 * 2**20, 0.020))
        second = h.add_run(_record("amp-bf16", 300 * 2**20, 0.010))
    runs = history_json(capsys, db)
    assert [r["run_id"] for r in runs] == [second, first]
    rc, limited, _ = run_cli(capsys, "history", "--json", "--db", str(db), "--limit", "1")
    assert [r["run_id"] for r in limited] == [second]
    rc, none, _ = run_cli(capsys, "history", "--json", "--db", str(db), "--workload", "llm-6b")
    assert none == []
    rc, text, _ = run_cli(capsys, "history", "--db", str(db))
    assert rc == 0 and first in text and "amp-bf16" in text and "2 run(s)" in text


def test_compare_two_runs(capsys, tmp_path):
    from fitbench.results.history import History

    db = tmp_path / "h.sqlite"
    with History.open(db) as h:
        a = h.add_run(_record("fp32", 400 * 2**20, 0.020))
        b = h.add_run(_record("amp-bf16", 300 * 2**20, 0.010))
    rc, data, _ = run_cli(capsys, "compare", a, b[:5], "--db", str(db), "--json")
    assert rc == 0
    assert data["a"]["run_id"] == a and data["b"]["run_id"] == b
    ratios = {m["name"]: m["ratio"] for m in data["metrics"]}
    assert ratios["peak_memory_bytes"] == pytest.approx(0.75)
    assert ratios["step_seconds"] == pytest.approx(0.5)
    assert ratios["samples_per_second"] == pytest.approx(2.0)
    rc, text, _ = run_cli(capsys, "compare", a, b, "--db", str(db))
    assert rc == 0 and "0.75x" in text and "amp-bf16" in text

    rc, _, err = run_cli(capsys, "compare", a, "ffffffff", "--db", str(db))
    assert rc == 2 and "no run 'ffffffff'" in err


# -- local datasets --------------------------------------------------------------------------------
def _write_cifar(root, per_batch: int):
    """A cifar-10-batches-py/ folder in the published format, `per_batch` images per batch."""
    import pickle

    np = pytest.importorskip("numpy")
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            b"batch_label": name.encode(),
            b"labels": [int(v) for v in rng.integers(0, 10, per_batch)],
            b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
            b"filenames": [f"{name}_{i}.png".encode() for i in range(per_batch)],
        }
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    return folder


def _write_imdb(root, per_label: int):
    for split in ("train", "test"):
        for label in ("pos", "neg"):
            folder = root / "aclImdb" / split / label
            folder.mkdir(parents=True)
            for i in range(per_label):
                (folder / f"{i}_{7 if label == 'pos' else 2}.txt").write_text(
                    f"A {label} review number {i}. " * (5 + i), encoding="utf-8"
                )
    return root / "aclImdb"


@pytest.mark.torch
@pytest.mark.slow
def test_local_cifar10_sets_the_epoch(capsys, tmp_path):
    _torch()
    folder = _write_cifar(tmp_path, per_batch=20)
    rc, data, _ = run_cli(
        capsys,
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--device",
        "cpu",
        "--data",
        str(folder),
        "--json",
        "--no-history",
        *FAST,
    )
    assert rc == 0
    m = data["measurement"]
    assert m["status"] == "ok", m
    assert m["dataset_size"] == 100
    assert m["epoch_seconds"] == pytest.approx(m["step_seconds"] * math.ceil(100 / 8))
    assert "CIFAR-10 train" in m["backend_notes"]["data_source"]


@pytest.mark.torch
@pytest.mark.slow
def test_local_imdb_reviews(capsys, tmp_path):
    _torch()
    folder = _write_imdb(tmp_path, per_label=6)
    rc, data, _ = run_cli(
        capsys,
        "run",
        "bert-base-imdb",
        "--tiny",
        "--device",
        "cpu",
        "--data",
        str(folder),
        "--json",
        "--no-history",
        *FAST,
    )
    assert rc == 0
    m = data["measurement"]
    assert m["status"] == "ok", m
    assert m["dataset_size"] == 12
    assert m["epoch_seconds"] == pytest.approx(m["step_seconds"] * 3)


def test_missing_dataset_path_is_one_line(capsys, tmp_path):
    rc, _, err = run_cli(
        capsys,
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--device",
        "cpu",
        "--no-history",
        "--backend",
        "fake",
        "--data",
        str(tmp_path / "nowhere"),
    )
    assert rc == 2 and "does not exist" in err


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def default_sigint() -> None:
    """preexec_fn: the CLI under test starts with SIGINT at its default, as a terminal gives it.

    A shell starts a background job (`python -m pytest &`, nohup, some CI runners) with SIGINT
    ignored, and a process inherits that: Python then installs no KeyboardInterrupt handler and
    the CLI, rightly by POSIX convention, never sees Ctrl-C. A test that sends SIGINT must not
    depend on how its own runner was started."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to see the child process")
def test_ctrl_c_stops_the_child_and_exits_130():
    import signal

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fitbench",
            "run",
            "resnet50-cifar10",
            "--tiny",
            "--device",
            "cpu",
            "--no-history",
            "--backend",
            "fake:hang",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        deadline = time.monotonic() + 30
        children: list[int] = []
        while time.monotonic() < deadline and not children:
            children = _children(proc.pid)
            time.sleep(0.05)
        assert children, "the measuring child never started"
        time.sleep(0.5)  # let the child reach its hang
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    for child in children:
        assert not os.path.exists(f"/proc/{child}") or _state(child) == "Z"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
