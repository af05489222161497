"""The field names of `fitbench run --json` and `fitbench history --json` are an interface: scripts
read them. These tests pin the key sets, literally, through the fake backend (a real child
process, a real history file), and check that every name the README documents for them is there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fitbench.cli.main import main

FAST = ["--min-steps", "3", "--min-seconds", "0.05", "--warmup", "1"]
README = Path(__file__).resolve().parents[2] / "README.md"

RUN_KEYS = {
    "precision",
    "workload",
    "estimate",
    "measurement",
    "error_vs_estimate",
    "diagnosis",
    "host_speed_ratio",
    "estimate_reference_host",
    "run_id",
    "comparable",
    "not_comparable",
}
# Every measurement, whatever happened.
MEASUREMENT_KEYS = {
    "status",
    "error",
    "backend",
    "framework_version",
    "device",
    "device_name",
    "exec_mode",
    "precision_requested",
    "precision_in_effect",
    "warnings",
    "params",
    "batch_size",
    "peak_memory_bytes",
    "peak_memory_source",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "nvml_process_peak_bytes",
    "nvml_device_used_bytes",
    "cuda_context_bytes",
    "peak_rss_bytes",
    "memory_after_load_bytes",
    "load_seconds",
    "warmup_steps",
    "steps",
    "step_seconds",
    "step_seconds_p90",
    "step_samples_seconds",
    "sample_unit",
    "samples_per_second",
    "tokens_per_second",
    "epoch_seconds",
    "dataset_size",
    "prefill_seconds",
    "decode_seconds",
    "decode_tokens_per_second",
    "environment",
    # optional in a stored record, but every measurement fitbench makes now has them
    "host_probe_seconds",
    "host_probe_parts",
    "host_probe_drift",
}
# A completed run in a child process adds these.
COMPLETED_KEYS = {
    "backend_notes",
    "child_exit_code",
    "wall_seconds",
    "device_total_memory_bytes",
    "memory_after_load_allocated_bytes",
    "step_seconds_mean",
    "step_seconds_min",
    "warmup_peak_allocated_bytes",
    "warmup_peak_reserved_bytes",
    "spreads",
    "spread_target",
}
# Generation adds its second token rate and the prefill's samples.
GENERATION_KEYS = {
    "end_to_end_tokens_per_second",
    "decode_tokens_per_second_per_sequence",
    "prefill_samples_seconds",
    "prefill_tokens_per_second",
    "decode_step_seconds",
    "generate_call_overhead_seconds",
    "one_token_generate_seconds",
}
ERROR_KEYS = {"peak_memory", "step_seconds", "tokens_per_second"}
DIAGNOSIS_KEYS = {
    "available",
    "reason",
    "gpu",
    "basis",
    "measured_seconds",
    "compute_precision",
    "flops_per_step",
    "bytes_per_step",
    "peak_flops_per_second",
    "bandwidth_bytes_per_second",
    "achieved_flops_per_second",
    "achieved_bytes_per_second",
    "compute_fraction",
    "bandwidth_fraction",
    "compute_seconds",
    "memory_seconds",
    "roofline_seconds",
    "times_roofline",
    "model_flops_per_step",
    "mfu",
    "estimate_host_seconds",
    "estimate_gpu_seconds",
    "bottleneck",
    "suggestion_kind",
    "suggestion",
}
MAX_BATCH_KEYS = {
    "estimated",
    "max_batch",
    "start",
    "limit",
    "reached_limit",
    "first_oom",
    "stopped",
    "probes",
    "capped",
    "uncapped_start",
    "memory_bytes",
    "budget_bytes",
    "comparable",
    "not_comparable",
}
COMPARISON_KEYS = {"baseline", "memory_saving", "memory_saved_bytes", "speedup"}
HISTORY_KEYS = {
    "run_id",
    "created_at",
    "command",
    "workload",
    "backend",
    "framework_version",
    "device",
    "gpu_name",
    "precision",
    "batch_size",
    "mode",
    "exec_mode",
    "status",
    "peak_memory_bytes",
    "step_seconds",
    "tokens_per_second",
    "throughput",
    "hostname",
    "fitbench_version",
    "precision_requested",
    "precision_in_effect",
    "decode_tokens_per_second",
    "end_to_end_tokens_per_second",
}


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _documented(start: str, end: str) -> set[str]:
    """The `names` in the README paragraph from `start` up to `end`."""
    text = README.read_text(encoding="utf-8")
    paragraph = text[text.index(start) : text.index(end, text.index(start))]
    return set(re.findall(r"`([a-z_0-9]+)`", paragraph))


def _all_keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _all_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _all_keys(v)}
    return set()


@pytest.mark.slow
def test_run_json_keys_are_pinned_and_documented(capsys, tmp_path: Path) -> None:
    db = str(tmp_path / "h.sqlite")
    generation = _json(
        capsys,
        "run",
        "llm-6b",
        "--tiny",
        "--backend",
        "fake",
        "--device",
        "cpu",
        "--gpu",
        "h200",
        "--db",
        db,
        *FAST,
    )
    assert isinstance(generation, dict)
    assert set(generation) == RUN_KEYS
    assert set(generation["measurement"]) == MEASUREMENT_KEYS | COMPLETED_KEYS | GENERATION_KEYS
    assert set(generation["error_vs_estimate"]) == ERROR_KEYS
    assert set(generation["diagnosis"]) == DIAGNOSIS_KEYS

    runs = _json(
        capsys,
        "run",
        "bert-base-imdb",
        "--tiny",
        "--backend",
        "fake",
        "--device",
        "cpu",
        "--gpu",
        "h200",
        "--precision",
        "fp32,amp-bf16",
        "--max-batch",
        "--batch-limit",
        "4",
        "--db",
        db,
        *FAST,
    )
    assert isinstance(runs, list) and len(runs) == 2
    for r in runs:
        assert set(r) == RUN_KEYS | {"max_batch", "comparison"}
        assert set(r["measurement"]) == MEASUREMENT_KEYS | COMPLETED_KEYS | {"max_batch_search"}
        assert set(r["error_vs_estimate"]) == ERROR_KEYS | {"max_batch"}
        assert set(r["max_batch"]) == MAX_BATCH_KEYS
        assert set(r["comparison"]) == COMPARISON_KEYS

    # Every name the README gives for `fitbench run --json` is in the output.
    documented = _documented("`fitbench run --json` prints", "`fitbench history")
    shown = _all_keys(generation) | _all_keys(runs)
    # Words in backticks there that are values or code, not fields.
    values = {
        "ok",
        "oom",
        "error",
        "timeout",
        "cpu",
        "tiny",
        "first_run",
        "uncompiled",
        "false",
        "null",
        "generate",
    }
    values |= {"host_ram", "device_memory"}
    assert documented - values <= shown

    history = _json(capsys, "history", "--db", db)
    assert isinstance(history, list) and len(history) == 3
    assert all(set(h) == HISTORY_KEYS for h in history)
    added = _documented("`fitbench history\n--json` adds", "`fitbench check --json`")
    assert added == {
        "precision_in_effect",
        "precision",
        "decode_tokens_per_second",
        "end_to_end_tokens_per_second",
    }
    assert added <= HISTORY_KEYS


def test_a_failed_run_keeps_every_measurement_key(capsys, tmp_path: Path) -> None:
    out = _json(
        capsys,
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--backend",
        "fake:oom",
        "--device",
        "cpu",
        "--gpu",
        "h200",
        "--db",
        str(tmp_path / "h.sqlite"),
        *FAST,
    )
    assert isinstance(out, dict) and set(out) == RUN_KEYS
    assert out["measurement"]["status"] == "oom"
    assert set(out["measurement"]) >= MEASUREMENT_KEYS
