"""Model FLOPs utilization in `fitbench report`: the estimate's beside its speed on every card, and
a GPU training run's measured one (its diagnosis's `mfu`) beside the estimated one; nothing where
neither exists (generation, inference) and no measured figure where the run had none (the CPU).

The records are put together as `fitbench run` puts them (results.assemble: the estimate, the
measurement, the errors and the diagnosis), stored in a real SQLite history and read back; the
reports are rendered and written to real files through the CLI's writer.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fitbench.advise.i18n import t
from fitbench.catalog import get_gpu
from fitbench.cli.estimate import DEFAULT_GPUS
from fitbench.cli.report import build_model, comparison_rows, scenarios_from_records, write_reports
from fitbench.estimate.api import estimate
from fitbench.records.measurement import Measurement
from fitbench.records.run import RunRecord
from fitbench.results.assemble import assemble_run_record
from fitbench.results.history import History
from fitbench.workloads.presets import get_workload

STEP_SCALE = 1.25  # the measured step is 25 % slower than the estimate: its MFU 20 % lower


def _gpu_run(workload, gpu_id: str = "rtx-4090"):
    """A completed GPU run of `workload`, as `fitbench run` records it (diagnosis included)."""
    gpu = get_gpu(gpu_id)
    est = estimate(workload, gpu)
    m = {
        "status": "ok",
        "backend": "torch",
        "framework_version": "2.5.1+cu124",
        "device": "cuda",
        "device_name": "NVIDIA GeForce RTX 4090",
        "exec_mode": "default",
        "precision_requested": workload.precision,
        "precision_in_effect": workload.precision,
        "peak_memory_bytes": int(est.peak_memory_bytes * 0.95),
        "warmup_steps": 3,
    }
    if workload.is_generation:
        decode = est.step_seconds * workload.new_tokens * STEP_SCALE
        m.update(
            decode_seconds=decode,
            decode_tokens_per_second=workload.new_tokens / decode,
            tokens_per_second=workload.new_tokens / (decode + 0.02),
            step_seconds=decode + 0.02,
            prefill_seconds=0.02,
        )
    else:
        step = est.step_seconds * STEP_SCALE
        m.update(step_seconds=step, samples_per_second=workload.batch_size / step)
    return assemble_run_record(
        command="run", workload=workload, estimate=est, measurement=Measurement.from_dict(m), gpu=gpu
    )


def _cpu_run(workload):
    """The same job measured on the CPU against the RTX 4090's estimate: no diagnosis to take MFU from."""
    gpu = get_gpu("rtx-4090")
    m = {
        "status": "ok",
        "backend": "torch",
        "framework_version": "2.13.0+cpu",
        "device": "cpu",
        "device_name": "AMD EPYC",
        "peak_memory_bytes": 3 * 2**30,
        "step_seconds": 4.0,
        "samples_per_second": workload.batch_size / 4.0,
        "warmup_steps": 3,
    }
    return assemble_run_record(
        command="run",
        workload=workload,
        estimate=estimate(workload, gpu),
        measurement=Measurement.from_dict(m),
        gpu=gpu,
    )


def _stored(tmp_path: Path, *runs) -> list:
    with History.open(tmp_path / "history.sqlite") as history:
        for run in runs:
            history.add_run(run)
        return history.last_runs(10)


def _reports(tmp_path: Path, records: list, lang: str) -> tuple[str, str]:
    model = build_model(
        lang=lang, scenarios=scenarios_from_records(records, DEFAULT_GPUS, lang), records=records
    )
    html, md = tmp_path / f"r-{lang}.html", tmp_path / f"r-{lang}.md"
    write_reports(model, html=html, markdown=md)
    return html.read_text(encoding="utf-8"), md.read_text(encoding="utf-8")


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def test_a_gpu_training_run_shows_estimated_and_measured_mfu(tmp_path: Path) -> None:
    workload = get_workload("bert-base-imdb", precision="amp-fp16")
    records = _stored(tmp_path, _gpu_run(workload))
    (record,) = records
    stored = RunRecord.from_dict(record)  # as the history gives it back
    est_mfu, measured = stored.estimate.mfu, stored.diagnosis.mfu
    assert est_mfu and measured and 0 < measured < est_mfu < 1
    assert measured == pytest.approx(est_mfu / STEP_SCALE, rel=0.02)

    rows = [r for r in comparison_rows(record) if r["metric"] == "mfu"]
    assert len(rows) == 1
    (row,) = rows
    assert (row["unit"], row["estimated"], row["measured"]) == ("ratio", est_mfu, measured)
    assert row["error"] == pytest.approx((est_mfu - measured) / measured)
    order = [r["metric"] for r in comparison_rows(record)]
    assert order.index("mfu") == order.index("step_seconds") + 1  # beside the speed

    for lang in ("en", "zh"):
        html, md = _reports(tmp_path, records, lang)
        label = t("metric.mfu", lang)
        assert label == {"en": "MFU (model FLOPs / peak)", "zh": "MFU(模型 FLOPs / 峰值)"}[lang]
        for text in (html, md):
            # the comparison row: its label, the estimated and measured percentages and the error
            assert label in text
            assert _pct(est_mfu) in text and _pct(measured) in text
            assert f"{row['error'] * 100:+.1f}%" in text
        # the scenario's estimates on the default cards: an MFU column beside the speed
        line = next(x for x in md.splitlines() if x.startswith("| " + t("col.card", lang)))
        headers = [h.strip() for h in line.strip("|").split("|")]
        assert headers.index("MFU") == headers.index(t("col.speed", lang)) + 1
        on_card = next(e for e in scenarios_from_records(records, DEFAULT_GPUS)[0]["estimates"])
        if on_card["verdict"] != "oom":
            assert _pct(on_card["mfu"]) in md and _pct(on_card["mfu"]) in html
        assert re.search(r"<th[^>]*>MFU</th>", html)


def test_generation_has_no_mfu_anywhere(tmp_path: Path) -> None:
    records = _stored(tmp_path, _gpu_run(get_workload("llm-6b")))
    (record,) = records
    stored = RunRecord.from_dict(record)
    assert stored.estimate.mfu is None and stored.diagnosis.mfu is None
    assert comparison_rows(record) and all(r["metric"] != "mfu" for r in comparison_rows(record))
    for lang in ("en", "zh"):
        html, md = _reports(tmp_path, records, lang)
        assert "MFU" not in html and "MFU" not in md


def test_a_cpu_run_has_the_cards_estimated_mfu_but_no_measured_one(tmp_path: Path) -> None:
    workload = get_workload("bert-base-imdb", precision="amp-fp16")
    records = _stored(tmp_path, _cpu_run(workload))
    (record,) = records
    stored = RunRecord.from_dict(record)
    assert stored.estimate.mfu is not None and not stored.diagnosis.available
    assert all(r["metric"] != "mfu" for r in comparison_rows(record))
    html, md = _reports(tmp_path, records, "en")
    assert t("metric.mfu", "en") not in html and t("metric.mfu", "en") not in md
    assert re.search(r"<th[^>]*>MFU</th>", html)  # the GPU cards' estimates still have theirs
