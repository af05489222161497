"""A measured run is held against an estimate for its own host: the profile's host times scaled by
the run's host-speed probe over the reference host's (estimate.profile.host_scaled_profile)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import calibrate
from fitbench.estimate.api import estimate
from fitbench.estimate.profile import (
    HOST_TIME_KEYS,
    forget_loaded,
    get_profile,
    host_reference_seconds,
    host_scaled_profile,
    host_speed_ratio,
    user_profile_path,
)
from fitbench.records.measurement import Measurement
from fitbench.records.run import RunRecord
from fitbench.results.agreement import estimate_for_host, measured_speed
from fitbench.results.assemble import assemble_run_record
from fitbench.results.cells import estimated_cell
from fitbench.results.report_model import ComparisonRow
from fitbench.workloads.presets import get_workload

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import accuracy_protocol as protocol  # noqa: E402

H200 = get_gpu("h200")
BASE = get_profile("torch", "default", use_user=False)
REF = BASE.host_probe_reference_seconds
TYPICAL = BASE.generate_host_probe_seconds


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FITBENCH_HOME", str(tmp_path / "home"))
    forget_loaded()


def _measurement(**values: object) -> Measurement:
    return Measurement.from_dict({"status": "ok", "device": "cuda:0", "warmup_steps": 2, **values})


def test_the_reference_round_is_the_builtin_torch_profiles() -> None:
    assert BASE.host_probe_reference_seconds == pytest.approx(43.87e-6)


def test_scaling_multiplies_exactly_the_host_times() -> None:
    """Each host time by the probe round over the round of its own host: training's the fit's,
    the decode calls' the typical host's."""
    scaled = host_scaled_profile(BASE, 2 * REF)
    assert HOST_TIME_KEYS == ("host_seconds_per_op", "generate_host_seconds_per_op")
    for f in dataclasses.fields(BASE):
        before, after = getattr(BASE, f.name), getattr(scaled, f.name)
        if f.name in HOST_TIME_KEYS:
            ratio = 2 * REF / host_reference_seconds(BASE, f.name)
            assert after == pytest.approx(ratio * before) and before > 0, f.name
        else:
            assert after == before, f.name


def test_the_decode_calls_are_stated_for_the_typical_host() -> None:
    """The offline estimate's decode host is the typical one (slower than the fit's), and a run
    on the fit's own host gets the constant that was fitted there (10.0 us a call)."""
    typical = host_reference_seconds(BASE, "generate_host_seconds_per_op")
    assert typical == BASE.generate_host_probe_seconds and typical > 1.2 * REF
    assert host_reference_seconds(BASE, "host_seconds_per_op") == REF
    at_fit_host = host_scaled_profile(BASE, REF)
    assert at_fit_host.generate_host_seconds_per_op == pytest.approx(10.0e-6, rel=0.01)
    assert at_fit_host.host_seconds_per_op == BASE.host_seconds_per_op
    # A run on the typical host decodes as the offline estimate does.
    on_typical = host_scaled_profile(BASE, typical)
    assert on_typical.generate_host_seconds_per_op == pytest.approx(BASE.generate_host_seconds_per_op)
    decode = get_workload("llm-6b", mode="infer", batch_size=1)
    offline = estimate(decode, H200)
    fast = estimate_for_host(decode, H200, _measurement(host_probe_seconds=REF))
    assert fast.estimate.tokens_per_second > 1.15 * offline.tokens_per_second
    # Without a decode host of its own the profile scales the decode calls by the fit's round.
    plain = dataclasses.replace(BASE, generate_host_probe_seconds=None)
    assert host_reference_seconds(plain, "generate_host_seconds_per_op") == REF


@pytest.mark.parametrize(
    ("probe", "device"),
    [(None, "cuda:0"), (0.0, "cuda:0"), (-1e-5, "cuda"), (2 * 43.87e-6, "cpu"), (2 * 43.87e-6, None)],
)
def test_no_usable_probe_leaves_the_profile_as_it_is(probe: float | None, device: str | None) -> None:
    assert host_speed_ratio(BASE, probe, device) is None
    assert host_scaled_profile(BASE, probe, device) == BASE


def test_a_profile_without_a_reference_round_is_not_rescaled() -> None:
    paddle = get_profile("paddle", "default", use_user=False)
    assert paddle.host_probe_reference_seconds is None
    assert host_scaled_profile(paddle, 1e-4) == paddle
    no_ref = dataclasses.replace(BASE, host_probe_reference_seconds=0.0, generate_host_probe_seconds=None)
    assert host_scaled_profile(no_ref, 1e-4) == no_ref
    # A host time whose host is known still scales where the other's is not.
    decode_only = dataclasses.replace(BASE, host_probe_reference_seconds=None)
    scaled = host_scaled_profile(decode_only, 1e-4)
    assert scaled.host_seconds_per_op == BASE.host_seconds_per_op
    assert scaled.generate_host_seconds_per_op > BASE.generate_host_seconds_per_op


def test_a_calibrated_host_time_without_its_round_drops_the_reference() -> None:
    # Host times fitted on this machine: the built-in round is another host's.
    fit = calibrate.Fit(framework="torch", exec_mode="default", values={"host_seconds_per_op": 30e-6})
    calibrate.save_fit(fit, source="test")
    forget_loaded()
    assert user_profile_path().exists()
    mine = get_profile("torch", "default")
    assert mine.host_seconds_per_op == pytest.approx(30e-6) and mine.host_probe_reference_seconds is None
    # A fit that kept its round keeps it as the reference.
    fit = calibrate.Fit(
        framework="torch",
        exec_mode="default",
        values={"host_seconds_per_op": 30e-6, "host_probe_reference_seconds": 50e-6},
    )
    calibrate.save_fit(fit, source="test")
    forget_loaded()
    assert get_profile("torch", "default").host_probe_reference_seconds == pytest.approx(50e-6)


def test_a_slow_host_slows_a_host_bound_estimate_and_not_a_gpu_bound_one() -> None:
    """Twice the round of the host the offline estimate assumes: the decode calls' typical host
    for generation, the fit's host for training."""
    decode = get_workload("llm-6b", mode="infer", batch_size=1)
    host = estimate_for_host(decode, H200, _measurement(host_probe_seconds=2 * TYPICAL))
    assert host.host_speed_ratio == pytest.approx(2.0)
    assert host.reference is not None and host.reference.bottleneck == "overhead"
    # Overhead-bound decoding: nearly all of the step is host time, which doubles.
    assert host.estimate.step_seconds > 1.8 * host.reference.step_seconds
    assert host.estimate.tokens_per_second < host.reference.tokens_per_second / 1.8
    big = get_workload("bert-base-imdb", batch_size=256)
    host = estimate_for_host(big, H200, _measurement(host_probe_seconds=2 * REF))
    assert host.host_speed_ratio == pytest.approx(2.0)
    assert host.reference is not None and host.reference.bottleneck == "compute"
    assert host.estimate.step_seconds == pytest.approx(host.reference.step_seconds, rel=0.02)
    assert host.estimate.step_seconds > host.reference.step_seconds  # the overlap loss still grows


def test_a_host_bound_estimate_says_whose_host_its_times_describe() -> None:
    """An eager decode step's speed is the CPU's: its assumptions say so, with the reference
    host's probe round, and with that host's figures; a GPU-bound step says nothing of it."""
    decode = estimate(get_workload("llm-6b", mode="infer", batch_size=1), H200)
    (line,) = [a for a in decode.assumptions if a.startswith("host-bound")]
    assert f"{decode.host_seconds * 1e3:.2f} ms" in line and f"{TYPICAL * 1e6:.0f} us" in line
    assert decode.host_seconds >= decode.gpu_seconds
    big = estimate(get_workload("bert-base-imdb", batch_size=256), H200)
    assert big.host_seconds < big.gpu_seconds
    assert not [a for a in big.assumptions if a.startswith("host-bound")]


def test_a_run_without_a_probe_keeps_the_reference_estimate() -> None:
    w = get_workload("llm-6b", mode="infer", batch_size=1)
    reference = estimate(w, H200)
    host = estimate_for_host(w, H200, _measurement(), reference=reference)
    assert host.estimate is reference and host.reference is None and host.host_speed_ratio is None
    cpu = estimate_for_host(w, H200, _measurement(device="cpu", host_probe_seconds=2 * REF))
    assert cpu.host_speed_ratio is None


def test_the_record_carries_the_ratio_and_the_reference_host_figures() -> None:
    w = get_workload("resnet50-cifar10")
    m = _measurement(step_seconds=0.030, tokens_per_second=None, host_probe_seconds=1.5 * REF)
    host = estimate_for_host(w, H200, m)
    assert host.reference is not None
    record = assemble_run_record(
        command="run",
        workload=w,
        estimate=host.estimate,
        measurement=m,
        gpu=H200,
        reference_estimate=host.reference,
        host_speed_ratio=host.host_speed_ratio,
    )
    data = json.loads(json.dumps(record.to_dict()))
    assert data["host_speed_ratio"] == pytest.approx(1.5)
    ref = data["estimate_reference_host"]
    assert ref["step_seconds"] == pytest.approx(host.reference.step_seconds)
    assert data["estimate"]["step_seconds"] == pytest.approx(host.estimate.step_seconds)
    # The errors are taken against this host's estimate; the reference host's beside them.
    assert data["error_vs_estimate"]["step_seconds"] == pytest.approx(host.estimate.step_seconds / 0.030 - 1)
    assert ref["error_vs_estimate"]["step_seconds"] == pytest.approx(host.reference.step_seconds / 0.030 - 1)
    # Read back from the history's JSON, the fields survive.
    again = RunRecord.from_dict(data)
    assert again.host_speed_ratio == pytest.approx(1.5) and again.to_dict() == record.to_dict()
    # Without a probe the record has neither key.
    plain = assemble_run_record(command="run", workload=w, estimate=host.reference, measurement=m, gpu=H200)
    assert "host_speed_ratio" not in plain.to_dict() and "estimate_reference_host" not in plain.to_dict()


def test_measured_speed_prefers_the_differenced_decode_step() -> None:
    w = get_workload("llm-6b", mode="infer", batch_size=4, new_tokens=100)
    old = {"status": "ok", "device": "cuda", "decode_seconds": 3.0, "decode_tokens_per_second": 120.0}
    assert measured_speed(old, w) == (pytest.approx(0.03), 120.0)
    new = {**old, "decode_step_seconds": 0.025}
    step, tokens = measured_speed(new, w)
    assert step == pytest.approx(0.025) and tokens == pytest.approx(4 / 0.025)
    # The speed sentence beside an estimate (check, reports) shows that rate too.
    from fitbench.advise.text import measured_speed_text

    assert "160 tok/s" in measured_speed_text(Measurement.from_dict(new), w)
    # calibrate reads the same step (one helper: Measurement.decode_step)
    assert calibrate._measured_step(Measurement.from_dict(new), w) == pytest.approx(0.025)
    assert calibrate._measured_step(Measurement.from_dict(old), w) == pytest.approx(0.03)


def test_the_report_cell_names_the_host_in_both_languages() -> None:
    row = ComparisonRow(
        metric="step_seconds",
        unit="seconds",
        estimated=0.04,
        host_speed_ratio=2.0,
        estimated_reference_host=0.02,
    )
    en, zh = estimated_cell(row, "en"), estimated_cell(row, "zh")
    assert "this machine's host" in en and "2.00x" in en and "20" in en
    assert "本机" in zh and "2.00" in zh
    assert estimated_cell(dataclasses.replace(row, host_speed_ratio=None), "en") == "40.0 ms"


def test_the_held_out_protocol_scores_a_probed_run_at_both_hosts() -> None:
    path = ROOT / "benchmarks" / "results" / "accuracy-holdout-h200-2026-12-03.json"
    samples = protocol.load_samples(path)
    decode = next(s for s in samples if s.workload.is_generation)
    plain = protocol.errors(decode)
    assert plain["speed_own_host"] is None and plain["speed"] == plain["speed_reference_host"]
    probed = dataclasses.replace(decode, measurement={**decode.measurement, "host_probe_seconds": 1.3 * REF})
    scored = protocol.errors(probed)
    assert scored["speed_reference_host"] == plain["speed"]
    assert scored["speed"] == scored["speed_reference_host"] and scored["speed_own_host"] is not None
    assert scored["speed_own_host"] < scored["speed_reference_host"]  # slower host: fewer tok/s estimated
    assert scored["peak"] == plain["peak"]


def test_fitbench_run_says_the_estimate_is_for_this_host() -> None:
    from fitbench.cli.run import RunOutcome, format_one

    w = get_workload("llm-6b", mode="infer", batch_size=1)
    m = _measurement(
        decode_step_seconds=0.03,
        decode_tokens_per_second=30.0,
        host_probe_seconds=0.8 * TYPICAL,
        batch_size=1,
    )
    host = estimate_for_host(w, H200, m)
    record = assemble_run_record(
        command="run",
        workload=w,
        estimate=host.estimate,
        measurement=m,
        gpu=H200,
        reference_estimate=host.reference,
        host_speed_ratio=host.host_speed_ratio,
    )
    outcome = RunOutcome(record=record, workload=w, comparable=True)
    en, zh = format_one(outcome, H200, "en"), format_one(outcome, H200, "zh")
    assert "estimate for this machine's host (host 0.80x the reference's time per operation)" in en
    assert "0.80 倍" in zh and "参考主机" in zh
    assert outcome.to_dict()["host_speed_ratio"] == pytest.approx(0.8)
    # The decode row shows the rate the error is taken of: batch / decode_step_seconds.
    assert "33.3 tok/s" in en


def test_calibration_keeps_the_probe_round_of_the_hosts_it_fitted() -> None:
    result = ROOT / "benchmarks" / "results" / "accuracy-h200-2026-12-02.json"
    gpu_id, points = calibrate.points_from_result_file(result)
    rounds = [40e-6 + 1e-6 * i for i in range(len(points))]
    probed = [(w, m.with_values(host_probe_seconds=r)) for (w, m), r in zip(points, rounds, strict=True)]
    fit = calibrate.fit_profile(probed, get_gpu(gpu_id), BASE)
    assert "host_seconds_per_op" in fit.values
    # Each fitted host time keeps the rounds of its own points.
    for key, round_key in (
        ("host_seconds_per_op", "host_probe_reference_seconds"),
        ("generate_host_seconds_per_op", "generate_host_probe_seconds"),
    ):
        used = fit.evidence[round_key]
        assert len(used) == len(fit.evidence[key]) >= 6, key
        assert fit.values[round_key] == pytest.approx(sorted(used)[len(used) // 2], rel=0.05)
    assert fit.values["host_probe_reference_seconds"] != fit.values["generate_host_probe_seconds"]
    # One host point without a probe: the fitted host times' round is not known.
    partly = list(probed)
    host_point = next(
        i
        for i, (w, m) in enumerate(points)
        if calibrate._ratio_key(estimate(w, H200).bottleneck, w) in HOST_TIME_KEYS
    )
    partly[host_point] = points[host_point]
    fit = calibrate.fit_profile(partly, get_gpu(gpu_id), BASE)
    assert "host_seconds_per_op" in fit.values and "host_probe_reference_seconds" not in fit.values
    assert "generate_host_probe_seconds" in fit.values  # the decode points all probed theirs


def test_report_rows_carry_the_host_ratio_on_speed_rows_only() -> None:
    from fitbench.cli.report import comparison_rows

    w = get_workload("resnet50-cifar10")
    m = _measurement(step_seconds=0.030, peak_memory_bytes=2_000_000_000, host_probe_seconds=1.5 * REF)
    host = estimate_for_host(w, H200, m)
    assert host.reference is not None
    record = assemble_run_record(
        command="run",
        workload=w,
        estimate=host.estimate,
        measurement=m,
        gpu=H200,
        reference_estimate=host.reference,
        host_speed_ratio=host.host_speed_ratio,
    )
    rows = {r["metric"]: r for r in comparison_rows(RunRecord.from_dict(record.to_dict()))}
    assert rows["step_seconds"]["host_speed_ratio"] == pytest.approx(1.5)
    assert rows["step_seconds"]["estimated_reference_host"] == pytest.approx(host.reference.step_seconds)
    assert rows["step_seconds"]["estimated"] == pytest.approx(host.estimate.step_seconds)
    assert "host_speed_ratio" not in rows["peak_memory"]
    # MFU follows the step: this host's estimate beside it, the reference host's as its own
    assert rows["mfu"]["estimated"] == pytest.approx(host.estimate.mfu)
    assert rows["mfu"]["host_speed_ratio"] == pytest.approx(1.5)
    assert rows["mfu"]["estimated_reference_host"] == pytest.approx(host.reference.mfu)
    assert host.reference.mfu != pytest.approx(host.estimate.mfu)
    cell = estimated_cell(ComparisonRow.from_dict(rows["step_seconds"]), "en")
    assert "1.50x" in cell and "reference host" in cell
