"""The HTML and Markdown reports, rendered from real estimates and a real SQLite history.

The run records have the shape `fitbench run` and `fitbench check` store; their measurements are
written out as data (no GPU here), and go through History like any run.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from fitbench.advise.guide import size_guide
from fitbench.advise.i18n import part_label
from fitbench.advise.text import guide_lines
from fitbench.catalog import get_gpu
from fitbench.cli.estimate import DEFAULT_GPUS
from fitbench.cli.report import build_model, comparison_rows, scenarios_from_records, write_reports
from fitbench.estimate.api import estimate
from fitbench.results.agreement import error_vs_estimate
from fitbench.results.history import History
from fitbench.results.report_html import PART_COLOURS, render_html
from fitbench.results.report_markdown import render_markdown
from fitbench.results.report_model import ReportModel
from fitbench.workloads.presets import get_workload

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr", "source", "area", "base", "embed", "track"}


def _environment(device: str) -> dict:
    return {
        "python": "3.11.7",
        "fitbench_version": "0.1.0",
        "torch": "2.5.1+cu124",
        "cuda": "12.4",
        "gpu_driver": "550.54",
        "cpu": "AMD EPYC 7B13",
        "hostname": "lab-1",
        "device": device,
    }


def _gpu_record(workload, gpu_id: str, *, peak_scale: float, step_scale: float) -> dict:
    """A GPU run as `fitbench run` stores it: the estimate, the measurement, their error."""
    est = estimate(workload, get_gpu(gpu_id))
    m = {
        "status": "ok",
        "backend": "torch",
        "framework_version": "2.5.1+cu124",
        "device": "cuda",
        "device_name": "NVIDIA GeForce RTX 4090",
        "exec_mode": "default",
        "precision_requested": workload.precision,
        "precision_in_effect": workload.precision,
        "peak_memory_bytes": int(est.peak_memory_bytes * peak_scale),
        "environment": _environment("cuda"),
    }
    if workload.is_generation:
        decode = est.step_seconds * workload.new_tokens * step_scale
        m.update(
            decode_seconds=decode,
            decode_tokens_per_second=workload.new_tokens / decode,
            tokens_per_second=workload.new_tokens / (decode + 0.02),
            step_seconds=decode + 0.02,
            prefill_seconds=0.02,
        )
    else:
        m.update(
            step_seconds=est.step_seconds * step_scale,
            samples_per_second=workload.batch_size / (est.step_seconds * step_scale),
            epoch_seconds=est.epoch_seconds * step_scale,
        )
    return {
        "command": "run",
        "workload": workload.to_dict(),
        "estimate": est.to_dict(),
        "measurement": m,
        "environment": m["environment"],
        "error_vs_estimate": error_vs_estimate(est, m, workload),
    }


def _cpu_record(name: str) -> dict:
    w = get_workload(name, tiny=True)
    m = {
        "status": "ok",
        "backend": "torch",
        "framework_version": "2.13.0+cpu",
        "device": "cpu",
        "device_name": "AMD EPYC",
        "peak_memory_bytes": 350 * 2**20,
        "step_seconds": 0.012,
        "samples_per_second": w.batch_size / 0.012,
        "environment": _environment("cpu"),
    }
    return {
        "command": "run",
        "workload": w.to_dict(),
        "estimate": None,
        "measurement": m,
        "environment": m["environment"],
        "error_vs_estimate": error_vs_estimate(None, m, w),
    }


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    db = tmp_path_factory.mktemp("history") / "history.sqlite"
    amp = get_workload("bert-base-imdb", precision="amp-fp16")
    with History.open(db) as history:
        history.add_run(_cpu_record("resnet50-cifar10"))
        history.add_run(_gpu_record(amp, "rtx-4090", peak_scale=0.92, step_scale=1.10))
        history.add_run(_gpu_record(amp, "rtx-4090", peak_scale=0.95, step_scale=1.05))
        history.add_run(_gpu_record(get_workload("llm-6b"), "rtx-4090", peak_scale=1.04, step_scale=0.8))
        return history.last_runs(10)


def _model(records, lang="en"):
    rows = size_guide()
    return build_model(
        lang=lang,
        scenarios=scenarios_from_records(records, DEFAULT_GPUS, lang),
        records=records,
        guide=guide_lines(rows, lang),
        guide_rows=[r.to_dict() for r in rows],
    )


class _Checker(HTMLParser):
    """Tag balance, and what is inside each <svg>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.svgs: list[dict] = []
        self.ids: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "svg":
            self.svgs.append({"attrs": attrs, "tags": []})
        elif "svg" in self.stack:
            self.svgs[-1]["tags"].append(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if "svg" in self.stack:
            self.svgs[-1]["tags"].append(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def _check(html: str) -> _Checker:
    checker = _Checker()
    checker.feed(html)
    checker.close()
    assert not checker.errors, checker.errors[:5]
    assert checker.stack == [], checker.stack
    return checker


def test_report_is_self_contained(records):
    html = render_html(_model(records))
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert "http://" not in html and "https://" not in html
    for banned in ("<script", "<link", "@import", "url(", "@font-face", "<iframe"):
        assert banned not in html.lower()
    assert "<style>" in html and ":root" in html  # the CSS is inline


def test_report_has_every_chart_with_a_title_and_description(records):
    model = _model(records)
    html = render_html(model)
    checker = _check(html)
    scenarios = [s for s in model["scenarios"] if s["estimates"]]
    # bert-base-imdb amp-fp16, llm-6b and the tiny ResNet (estimated at the brief's settings)
    assert len(scenarios) == 3
    # memory + speed per scenario, the error chart, history of step time and of tokens/s
    assert len(checker.svgs) == 2 * len(scenarios) + 1 + 2
    assert html.count("<svg") == len(checker.svgs)
    for svg in checker.svgs:
        assert svg["attrs"].get("role") == "img"
        title_id, desc_id = svg["attrs"]["aria-labelledby"].split()
        assert {title_id, desc_id} <= checker.ids
        assert svg["tags"][:2] == ["title", "desc"]
        assert any(tag in ("rect", "circle") for tag in svg["tags"])


def test_memory_chart_names_every_breakdown_part_and_marks_capacity(records):
    model = _model(records)
    html = render_html(model)
    amp = next(s for s in model["scenarios"] if s["key"] == "bert-base-imdb · amp-fp16")
    parts = [p for p, v in amp["estimates"][0]["breakdown"].items() if v]
    assert {"weights", "gradients", "optimizer_state", "activations", "cuda_context"} <= set(parts)
    for p in parts:
        assert f"part-{p}" in html
        assert part_label(p, "en") in html
        assert PART_COLOURS[p] in html
    assert html.count('class="usable') >= len(amp["estimates"])  # one capacity mark per card
    assert "out of memory" in html  # the 6B model on the 12 GB card


def test_estimate_vs_measurement_shows_the_recorded_errors(records):
    model = _model(records)
    rows = model["comparisons"]
    assert {r["metric"] for r in rows} >= {"peak_memory", "step_seconds", "tokens_per_second"}
    html = render_html(model)
    for r in rows:
        assert f"{r['error'] * 100:+.1f}%" in html
    # The bert runs' step time was measured 10% and 5% slower than estimated: errors of about -9% and -5%.
    bert = sorted(
        r["error"] for r in rows if r["workload"] == "bert-base-imdb" and r["metric"] == "step_seconds"
    )
    assert bert == pytest.approx([1 / 1.10 - 1, 1 / 1.05 - 1])


def test_generation_is_compared_on_decode_throughput(records):
    llm = next(r for r in records if r["workload"]["name"] == "llm-6b")
    rows = {row["metric"]: row for row in comparison_rows(llm)}
    m = llm["measurement"]
    assert rows["tokens_per_second"]["measured"] == m["decode_tokens_per_second"]
    assert rows["step_seconds"]["measured"] == pytest.approx(m["decode_seconds"] / 100)


def test_history_and_environment_sections(records):
    model = _model(records)
    assert len(model["history"]) == 4
    html = render_html(model)
    for r in records:
        assert r["run_id"] in html
    for value in ("2.5.1+cu124", "550.54", "AMD EPYC 7B13", "3.11.7"):
        assert value in html
    assert "Size guide" in html and "Llama-2-70B" in html


def test_chinese_report(records):
    html = render_html(_model(records, "zh"))
    _check(html)
    assert '<html lang="zh-CN">' in html
    for word in (
        "可以运行",
        "显存不足",
        "峰值显存构成",
        "估算与实测对比",
        "历史记录",
        "运行环境",
        "权重",
        "优化器状态",
    ):
        assert word in html


def test_markdown_report_has_the_tables_and_no_charts(records):
    model = _model(records)
    md = render_markdown(model)
    assert "<svg" not in md and "<" not in md.replace("< 100M", "")
    assert md.startswith("# fitbench report")
    assert "| card | verdict | peak memory |" in md
    for r in model["comparisons"]:
        assert f"{r['error'] * 100:+.1f}%" in md
    assert "optimizer state (`optimizer_state`)" in md


def test_reports_are_written_to_files(records, tmp_path):
    model = _model(records)
    html_path, md_path = write_reports(model, html=tmp_path / "out" / "r.html", markdown=tmp_path / "r.md")
    assert html_path.read_text(encoding="utf-8") == render_html(model)
    assert md_path.read_text(encoding="utf-8").startswith("# fitbench report")
    assert not list(tmp_path.glob("**/*.tmp"))


def test_the_report_model_is_typed_and_round_trips(records):
    from fitbench.results.report_model import ReportModel

    data = _model(records)
    model = ReportModel.from_dict(data)
    assert model.lang == "en" and model.schema_version == ReportModel.SCHEMA_VERSION
    assert model.comparisons[0].error == data["comparisons"][0]["error"]
    assert model.scenarios[0].estimates[0].gpu == data["scenarios"][0]["estimates"][0]["gpu"]
    assert [r.run_id for r in model.runs] == [r["run_id"] for r in data["runs"]]
    assert render_markdown(model) == render_markdown(data)
    # Written back, the model is the dict it was read from, plus its version; a scenario names
    # `skipped` (only `fitbench check` sets it) and its measurement every measurement key.
    out = model.to_dict()
    assert {k: v for k, v in out.items() if k != "scenarios"} == {
        **{k: v for k, v in data.items() if k != "scenarios"},
        "schema_version": ReportModel.SCHEMA_VERSION,
    }
    for written, given in zip(out["scenarios"], data["scenarios"], strict=True):
        assert written == {**given, "skipped": None, "measurement": written["measurement"]}
        if given["measurement"] is not None:
            assert given["measurement"].items() <= written["measurement"].items()


def test_an_unknown_report_section_is_refused_and_unknown_row_fields_kept(records):
    from fitbench.results.report_model import ReportModel, RunRow

    with pytest.raises(TypeError, match="chartz"):
        ReportModel.from_dict({**_model(records), "chartz": []})
    row = RunRow.from_dict({"run_id": "ab", "scenario_note": "kept"})
    assert row.extra == {"scenario_note": "kept"} and row.to_dict()["scenario_note"] == "kept"


def test_a_scenario_reads_its_workloads_by_attribute_and_marks_a_tiny_measurement() -> None:
    w = get_workload("bert-base-imdb", tiny=True)
    measurement = {"status": "ok", "step_seconds": 0.25, "epoch_seconds": 600.0}
    record = {"command": "run", "workload": w.to_dict(), "measurement": measurement}
    (scenario,) = scenarios_from_records([record], ["rtx-4090"])
    # A tiny run stands for its preset: the scenario is named after the real workload's fields.
    real = get_workload("bert-base-imdb")
    assert (scenario["workload"], scenario["params"]) == (real.name, real.param_count())
    assert scenario["title"] == f"{real.name} · {real.precision}"
    model = ReportModel.from_dict(build_model(lang="en", scenarios=[scenario], records=[record]))
    (typed,) = model.scenarios
    assert typed.measured_view.tiny and not typed.measured_generation
    # The tiny run's epoch says nothing about the real model: its step time is shown, marked tiny.
    table = render_markdown(model)
    assert "ok, 250.0 ms/step (tiny: smoke test)" in table and "10.0 min/epoch" not in table
