"""benchmarks/speed.py on the CPU with a catalog card's estimate beside each run: the path a GPU
run takes (estimate, roofline and the diagnosis of each measurement) on tiny models."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import speed  # noqa: E402


@pytest.mark.slow
def test_speed_runs_default_and_tuned_with_an_estimate_and_a_diagnosis(tmp_path: Path, capsys) -> None:
    argv = ["--cpu", "--tiny", "--gpu", "h200", "--only", "resnet50-cifar10", "--min-seconds", "0.2"]
    assert speed.main([*argv, "--out", str(tmp_path)]) == 0
    # The tuned run takes the mode's compile default: compiled on a GPU with Triton; on this CPU
    # uncompiled, without a --compile warning, and the table says which.
    out, err = capsys.readouterr()
    assert "tuned step uncompiled" in out
    # each run's figures as it ends (stderr), before the table: a run cut off keeps them
    assert err.count("(estimate ") == 2 and err.index("--exec default") < err.index("(estimate ")
    (written,) = tmp_path.glob("speed-*.json")
    (scenario,) = json.loads(written.read_text())["scenarios"]
    for mode in ("default", "tuned"):
        run = scenario["runs"][mode]
        assert run["status"] == "ok", run["error"]
        assert run["estimate"]["gpu"] == "h200"
        assert run["estimate_headline"] > 0 and run["roofline"] > 0
        # a CPU run against a GPU's estimate: the diagnosis says why it has no verdict
        assert run["diagnosis"]["available"] is False and run["diagnosis"]["reason"]
    tuned = scenario["runs"]["tuned"]
    assert scenario["tuned_step_compiled"] is False and tuned["compiled_step"] is False
    assert tuned["compile_seconds"] is None and scenario["runs"]["default"]["compiled_step"] is None
    assert not any("--compile" in w for w in tuned["measurement"]["warnings"])


@pytest.mark.slow
def test_decoder_training_rows_carry_mfu_and_the_target(tmp_path: Path, capsys) -> None:
    argv = ["--cpu", "--tiny", "--gpu", "h200", "--only", "llama-1b-train", "--only", "llama-1b-lora"]
    assert speed.main([*argv, "--min-seconds", "0.2", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "MFU" in table and "est. MFU" in table
    (written,) = tmp_path.glob("speed-*.json")
    full, lora = json.loads(written.read_text())["scenarios"]
    assert full["workload"]["peft"] is None and lora["workload"]["peft"] == "lora"
    for scenario in (full, lora):
        assert scenario["workload"]["mode"] == "train" and scenario["tiny"]
        for mode in ("default", "tuned"):
            run = scenario["runs"][mode]
            assert run["status"] == "ok", run["error"]
            est = run["estimate"]
            assert 0 < run["estimate_mfu"] <= 1 and run["estimate_mfu"] == est["mfu"]
            assert est["model_flops_per_step"] > 0
            assert run["mfu"] is None  # measured on a CPU: no share of a GPU's peak
    assert lora["runs"]["tuned"]["measurement"]["backend_notes"]["peft"]["trainable_params"] > 0
    # the full fine-tune is judged by MFU on a GPU only
    assert full["target"]["metric"] == "mfu" and full["target"]["judged"] is False
    assert "target" not in lora


def test_the_decoder_training_scenarios_are_the_bundled_1b_model_at_seq_2048() -> None:
    by_name = {s.name: s for s in speed.SCENARIOS}
    full = by_name["llama-1b-train"].workload(tiny=False)
    lora = by_name["llama-1b-lora"].workload(tiny=False)
    assert full.name == "llama-3.2-1b-instruct" and 1.2e9 < full.param_count() < 1.3e9
    for w in (full, lora):
        assert (w.mode, w.seq_len, w.precision, w.optimizer) == ("train", 2048, "amp-bf16", "adamw")
    assert full.peft is None and lora.peft == "lora"
    assert by_name["llama-1b-train"].target.value == 0.45
    assert by_name["llama-1b-lora"].workload(tiny=True).tiny
