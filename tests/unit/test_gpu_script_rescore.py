"""The serving and offload GPU scripts re-score a saved H200 run offline with today's estimator."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


offload_gpu = _load("offload_gpu")
serving_gpu = _load("serving_gpu")


def test_offload_run_is_rescored_with_the_built_in_figures_and_with_the_measured_host(capsys) -> None:
    run = json.loads((RESULTS / "offload-h200-2026-12-03-run1.json").read_text())
    out = offload_gpu.rescore(run)
    assert out["fitbench"]["gpu_layers"] == run["measured"]["gpu_layers"] == 13
    assert out["fitbench"]["host_copy_source"].startswith("measured on the H200 host")
    assert out["fitbench_with_host_copy"] is None  # the first run had no copy microbenchmark
    assert "| decode tok/s | 1.85 |" in capsys.readouterr().out
    # A run with the microbenchmark: the estimate uses the host's figures, by hand arithmetic.
    run2 = copy.deepcopy(run)
    run2["host_copy"] = {"pageable_bytes_s": 7e9, "hook_seconds_per_tensor": 2e-4}
    est = offload_gpu.rescore(run2)["fitbench_with_host_copy"]
    prior = out["fitbench"]
    gpu_step = 1 / prior["tokens_per_second"] - prior["copy_seconds_per_pass"]
    copy_s = est["cpu_ram_bytes"] / 7e9 + est["offloaded_tensors"] * 2e-4
    assert est["copy_seconds_per_pass"] == pytest.approx(copy_s, rel=1e-6)
    assert est["tokens_per_second"] == pytest.approx(1 / (gpu_step + copy_s), rel=1e-6)
    assert est["host_copy_source"].startswith("measured on NVIDIA H200")


def test_the_built_in_copy_figures_are_the_second_h200_runs_own(capsys) -> None:
    # The estimator's PCIe 5 constants are that run's microbenchmark, rounded (8.204 GB/s, 0.379 ms),
    # so the built-in estimate and the one with the run's exact figures print the same rows.
    run = json.loads((RESULTS / "offload-h200-2026-12-03-run2.json").read_text())
    assert run["host_copy"]["pageable_bytes_s"] == pytest.approx(8.2e9, rel=1e-3)
    assert run["host_copy"]["hook_seconds_per_tensor"] == pytest.approx(0.38e-3, rel=1e-2)
    out = offload_gpu.rescore(run)
    printed = capsys.readouterr().out
    assert "| prefill (s) | 0.67 | 0.54 | 0.54 |" in printed
    assert "| decode tok/s | 1.63 | 1.86 | 1.86 |" in printed
    est = out["fitbench"]
    gpu_step = 1 / est["tokens_per_second"] - est["copy_seconds_per_pass"]
    assert est["copy_seconds_per_pass"] == pytest.approx(
        est["cpu_ram_bytes"] / 8.2e9 + 137 * 0.38e-3, rel=1e-9
    )
    assert est["offloaded_tensors"] == run["host_copy"]["offloaded_tensors"] == 137
    assert gpu_step < 0.025  # the copies are nearly all of the 0.54 s step (the rest: kernels, host calls)


def test_serving_run_compares_the_static_cache_with_the_tuned_estimate() -> None:
    run = json.loads((RESULTS / "serving-h200-2026-12-03-run1.json").read_text())
    rows = serving_gpu.rescore(run)
    first = rows[0]
    # The first run's 'generate' used a static cache, which transformers compiles: the tuned column.
    assert first["measured_compiled_tokens_per_second"] == pytest.approx(319.4, rel=1e-3)
    assert first["estimate_tuned_tokens_per_second"] > 3 * first["estimate_eager_tokens_per_second"]
    assert "measured_eager_tokens_per_second" not in first
    assert [r["concurrency"] for r in rows] == [1, 4, 16, 64]


def test_decode_rate_from_step_stamps_and_from_whole_calls() -> None:
    assert serving_gpu.decode_tps(8, 64, {"decode_step_seconds": 0.004}) == pytest.approx(2000)
    assert serving_gpu.decode_tps(1, 11, {"seconds": 1.5, "prefill_seconds": 0.5}) == pytest.approx(10)
    assert serving_gpu.decode_tps(1, 11, {"error": "x"}) is None


models_gpu = _load("models_gpu")
quant_gpu = _load("quant_gpu")
# the first three runs of one machine (no decode step recorded); later files add runs of their own
MODEL_RUNS = [RESULTS / f"models-h200-2026-12-03{s}.json" for s in ("", "-run2", "-run3")]
QUANT_RUNS = [RESULTS / f"quant-h200-2026-12-03{s}.json" for s in ("", "-run2")]  # 100 new tokens each


def test_models_runs_pool_across_files_and_score_the_median_run() -> None:
    assert len(MODEL_RUNS) == 3
    out = models_gpu.rescore(MODEL_RUNS)
    by_label = {p["label"]: p for p in out["points"]}
    qwen = by_label["gqa qwen2.5-1.5b"]
    speeds = qwen["decode_tokens_per_second_runs"]
    assert len(qwen["runs"]) == 3 and speeds == sorted(speeds)
    # the stored runs have no decode step: their decode tok/s is the figure, and the median is scored
    assert qwen["measurement"]["decode_tokens_per_second"] == pytest.approx(speeds[1])
    assert qwen["errors"]["decode_speed"] == pytest.approx(
        qwen["estimate"]["tokens_per_second"] / speeds[1] - 1
    )
    assert qwen["decode_spread"] == pytest.approx(speeds[-1] / speeds[0] - 1)


def test_models_decode_speed_prefers_the_differenced_step() -> None:
    w = models_gpu.Workload.from_dict(json.loads(MODEL_RUNS[0].read_text())["points"][0]["workload"])
    m = {"decode_step_seconds": 0.02, "decode_seconds": 1.0, "decode_tokens_per_second": 1.0}
    assert models_gpu.decode_tokens_per_second(m, w) == pytest.approx(w.batch_size / 0.02)
    assert models_gpu.decode_tokens_per_second({"decode_tokens_per_second": 7.0}, w) == 7.0


def test_quant_runs_pool_by_model_and_rescore_with_todays_estimate() -> None:
    rows = [r for f in QUANT_RUNS for r in json.loads(f.read_text())["rows"]]
    pooled = {r["model"]: r for r in quant_gpu.pool(rows, "h200")}
    llama = pooled["llama3-8b"]
    assert llama["runs"] == 2
    slow, fast = llama["decode_tokens_per_second_runs"]
    assert slow <= fast and llama["measured"]["decode_tokens_per_second"] == slow
    w = quant_gpu.workload_for("llama3-8b", 1, 50, 100)
    est = quant_gpu.fitbench_estimate(w, "h200")["tokens_per_second"]
    assert llama["estimate"]["tokens_per_second"] == est
    assert llama["error"]["decode_tokens_per_second"] == pytest.approx(est / slow - 1)


def test_quant_decode_step_and_child_arguments() -> None:
    row = {"batch": 4, "measured": {"decode_step_seconds": 0.025, "decode_tokens_per_second": 1.0}}
    assert quant_gpu.decode_tps(row) == pytest.approx(160.0)
    argv = ["--model", "tiny", "--repeat", "3", "--out=x.json", "--device", "cpu"]
    assert quant_gpu.strip(argv, "--repeat", "--out") == ["--model", "tiny", "--device", "cpu"]
