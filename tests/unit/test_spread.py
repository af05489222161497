"""Spreads of timed figures: the repeat-until-stable loop the child uses, the fields a real run
records, the sentences shown for them, and a child started ahead of its turn."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fitbench.advise.text import measured_speed_text, spread_sentences, spread_text
from fitbench.backends.base import RunOptions
from fitbench.cli.main import main
from fitbench.measure.runner import Launch
from fitbench.measure.timing import MIN_WINDOWS, TARGET_SPREAD, repeat_until_stable, spread
from fitbench.records.measurement import Measurement
from fitbench.workloads.presets import get_workload


class Durations:
    """A window function and a clock from a fixed list of window values: each window "takes" its
    value in seconds on the clock, so budgets are spent deterministically."""

    def __init__(self, values: list[float]) -> None:
        self.values: Iterator[float] = iter(values)
        self.now = 0.0
        self.calls = 0

    def window(self) -> dict[str, float | None]:
        value = next(self.values)
        self.now += value
        self.calls += 1
        return {"step_seconds": value, "not_measured": None}

    def clock(self) -> float:
        return self.now


def test_spread_is_range_over_median() -> None:
    assert spread([1.0, 1.02, 0.98]) == pytest.approx(0.04)
    assert spread([2.0]) is None
    assert spread([0.0, 0.0]) is None


def test_a_stable_series_stops_after_the_first_windows() -> None:
    d = Durations([1.0, 1.01, 0.99, 1.0, 1.0, 1.0])
    series = repeat_until_stable(d.window, budget_seconds=100.0, clock=d.clock)
    assert d.calls == MIN_WINDOWS
    assert series.stopped == "stable"
    fs = series.figure_spread("step_seconds")
    assert fs is not None and fs.stable and fs.spread == pytest.approx(0.02)
    assert fs.windows == MIN_WINDOWS and fs.windows_run == MIN_WINDOWS
    # a figure no window measured neither holds the series up nor gets a spread
    assert series.figure_spread("not_measured") is None


def test_a_series_that_settles_late_uses_its_latest_windows() -> None:
    d = Durations([2.0, 1.5, 1.0, 1.01, 1.0, 5.0])
    series = repeat_until_stable(d.window, budget_seconds=100.0, clock=d.clock)
    assert d.calls == 5 and series.stopped == "stable"
    assert [w["step_seconds"] for w in series.kept()] == [1.0, 1.01, 1.0]
    fs = series.figure_spread("step_seconds")
    assert fs is not None and fs.stable and fs.windows_run == 5


def test_a_noisy_series_runs_out_of_budget_and_is_unstable() -> None:
    noisy = [1.0, 1.3, 0.8] * 10
    d = Durations(noisy)
    series = repeat_until_stable(d.window, budget_seconds=6.0, clock=d.clock)
    assert series.stopped == "budget"
    # the budget (6 s of windows of about 1 s) stops it after a handful, not after all thirty
    assert MIN_WINDOWS < d.calls < len(noisy)
    fs = series.figure_spread("step_seconds")
    assert fs is not None and not fs.stable and fs.spread is not None and fs.spread >= TARGET_SPREAD


def test_the_first_windows_run_even_past_the_budget_and_the_deadline_stops_it() -> None:
    d = Durations([10.0, 10.0, 10.0, 1.0])
    series = repeat_until_stable(d.window, budget_seconds=0.0, clock=d.clock)
    assert d.calls == MIN_WINDOWS and series.stopped == "stable"
    d = Durations([1.0, 2.0, 3.0, 4.0])
    series = repeat_until_stable(d.window, budget_seconds=100.0, deadline=1.5, clock=d.clock)
    assert series.stopped == "deadline" and d.calls == 2


def _record(spreads: dict, **fields: object) -> Measurement:
    return Measurement.from_dict({"status": "ok", "spreads": spreads, "spread_target": 0.05, **fields})


def test_text_shows_the_spread_and_says_unstable_in_both_languages() -> None:
    w = get_workload("bert-base-imdb", tiny=True)
    stable = {"spread": 0.018, "stable": True, "windows": 3, "windows_run": 3}
    unstable = {"spread": 0.099, "stable": False, "windows": 3, "windows_run": 7}
    m = _record({"step_seconds": stable}, step_seconds=0.02)
    assert measured_speed_text(m, w, "en").endswith("±1.8 %")
    assert spread_sentences(m, w, "en") == []
    m = _record({"step_seconds": unstable}, step_seconds=0.02)
    assert spread_text(m, "step_seconds", "en") == "±9.9 %, unstable"
    assert spread_text(m, "step_seconds", "zh") == "±9.9 %,不稳定"
    (en,) = spread_sentences(m, w, "en")
    (zh,) = spread_sentences(m, w, "zh")
    assert "unstable" in en and "7 timed windows" in en and "±9.9 %" in en
    assert "不稳定" in zh and "单步耗时" in zh and "±9.9 %" in zh
    # an older record without spreads reads as before
    old = Measurement.from_dict({"status": "ok", "step_seconds": 0.02})
    assert "±" not in measured_speed_text(old, w, "en") and spread_sentences(old, w, "en") == []


@pytest.mark.slow
def test_run_json_of_a_tiny_cpu_generation_has_every_figures_spread(capsys: pytest.CaptureFixture) -> None:
    argv = ["run", "llm-6b", "--tiny", "--device", "cpu", "--min-seconds", "0.2", "--no-history", "--json"]
    assert main(argv) == 0
    m = json.loads(capsys.readouterr().out)["measurement"]
    assert m["status"] == "ok", m.get("error")
    assert m["spread_target"] == TARGET_SPREAD
    for figure in ("step_seconds", "prefill_seconds"):
        entry = m["spreads"][figure]
        assert set(entry) == {"spread", "stable", "windows", "windows_run"}
        assert entry["windows"] == MIN_WINDOWS and entry["windows_run"] >= MIN_WINDOWS
        assert entry["stable"] == (entry["spread"] < TARGET_SPREAD)
    # the figures come from the windows used: three windows of at least one generation each
    assert m["steps"] >= MIN_WINDOWS and len(m["step_samples_seconds"]) == m["steps"]


@pytest.mark.slow
def test_run_text_in_chinese_shows_the_step_times_spread(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "bert-base-imdb", "--tiny", "--device", "cpu", "--min-seconds", "0.2", "--no-history"]
    assert main([*argv, "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    step_row = next(line for line in out.splitlines() if line.strip().startswith("单步耗时"))
    assert "±" in step_row and " %" in step_row
    # an unstable figure (likely on a busy CPU) is said so in Chinese, never in English
    assert "unstable" not in out


def test_a_child_started_ahead_waits_for_its_turn() -> None:
    w = get_workload("bert-base-imdb", tiny=True)
    with Launch(w, "fake", RunOptions(), held=True, min_steps=3, min_seconds=0.0, warmup=0) as launch:
        progress = Path(launch.request["progress_path"])
        phases: list[str] = []
        for _ in range(600):  # until the child has imported and waits (or a minute has passed)
            if progress.is_file():
                phases = [json.loads(x)["phase"] for x in progress.read_text().splitlines() if x]
            if "waiting for its turn" in phases:
                break
            time.sleep(0.1)
        assert phases[-1] == "waiting for its turn"
        assert "measuring" not in phases and not Path(launch.request["result_path"]).exists()
        m = launch.result()
    assert m["status"] == "ok" and m["backend"] == "fake"
    assert m["spreads"]["step_seconds"]["windows"] == 3
