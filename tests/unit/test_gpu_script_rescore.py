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


def test_offload_run_is_rescored_with_the_priors_and_with_the_measured_host(capsys) -> None:
    run = json.loads((RESULTS / "offload-h200-2026-12-03-run1.json").read_text())
    out = offload_gpu.rescore(run)
    assert out["fitbench"]["gpu_layers"] == run["measured"]["gpu_layers"] == 13
    assert out["fitbench"]["host_copy_source"] == "prior"
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
