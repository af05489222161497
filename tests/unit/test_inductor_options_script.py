"""benchmarks/inductor_options.py: the option sets it builds from the command line, the config
patch around each set, and a tiny run on the CPU through the real tuned session (there the step
is not compiled, so what is checked is the wiring a GPU run relies on, and the rows' fields)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import inductor_options  # noqa: E402
from fitbench.backends.torch.tuned import COMPILE_UNAVAILABLE  # noqa: E402


def test_option_sets_add_override_and_pick_by_name() -> None:
    sets = inductor_options.option_sets([], None)
    assert list(sets) == ["baseline", "combo_kernels", "coordinate_descent", "both"]
    assert sets["baseline"] == {} and sets["both"] == {
        "coordinate_descent_tuning": True,
        "combo_kernels": True,
    }
    sets = inductor_options.option_sets(
        [
            'combo_kernels={"combo_kernels": true, "max_autotune_pointwise": true}',
            'x={"epilogue_fusion": false}',
        ],
        "x,baseline,combo_kernels",
    )
    assert list(sets) == ["baseline", "combo_kernels", "x"]  # the order the sets are defined in
    assert sets["combo_kernels"] == {"combo_kernels": True, "max_autotune_pointwise": True}
    assert sets["x"] == {"epilogue_fusion": False}
    for bad in (["noequals"], ["x=not json"], ["x=[1, 2]"], ["=true"]):
        with pytest.raises(ValueError):
            inductor_options.option_sets(bad, None)
    with pytest.raises(ValueError, match="nope"):
        inductor_options.option_sets([], "baseline,nope")


def test_patch_applies_the_settings_restores_them_and_refuses_unknown_ones() -> None:
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    before = (inductor_config.combo_kernels, inductor_config.fx_graph_cache)
    with inductor_options.patched({"combo_kernels": not before[0]}, fresh=True):
        assert inductor_config.combo_kernels is (not before[0])
        assert inductor_config.fx_graph_cache is False
        assert functorch_config.enable_autograd_cache is False
    assert (inductor_config.combo_kernels, inductor_config.fx_graph_cache) == before
    with pytest.raises(AttributeError), inductor_options.patched({"no_such_setting": 1}, fresh=False):
        pass


def test_a_setting_named_with_its_fitbench_module_patches_that_constant() -> None:
    import torch._inductor.config as inductor_config

    from fitbench.backends.torch import compact_encoder

    name = "fitbench.backends.torch.compact_encoder.FUSED_RESIDUAL_NORM"
    combo = inductor_config.combo_kernels
    with inductor_options.patched({name: False, "combo_kernels": not combo}, fresh=False):
        assert compact_encoder.FUSED_RESIDUAL_NORM is False
        assert inductor_config.combo_kernels is (not combo)
    assert compact_encoder.FUSED_RESIDUAL_NORM is True and inductor_config.combo_kernels is combo
    with (
        pytest.raises(AttributeError),
        inductor_options.patched({"fitbench.backends.torch.compact_encoder.NO_SUCH": 1}, fresh=False),
    ):
        pass


def test_speedups_and_loss_deltas_are_against_each_scenarios_baseline() -> None:
    rows = [
        {"scenario": "a", "set": "baseline", "step_seconds": 0.02, "loss": 1.0},
        {"scenario": "a", "set": "x", "step_seconds": 0.016, "loss": 1.25},
        {"scenario": "a", "set": "broken"},
        {"scenario": "b", "set": "x", "step_seconds": 0.01, "loss": 2.0},  # no baseline for b
    ]
    inductor_options.add_speedups(rows)
    assert [r["speedup"] for r in rows] == [1.0, pytest.approx(1.25), None, None]
    assert [r["loss_delta"] for r in rows] == [0.0, 0.25, None, None]


@pytest.mark.slow
def test_tiny_cpu_run_writes_a_row_per_set_and_keeps_a_failing_sets_error(tmp_path: Path, capsys) -> None:
    argv = ["--cpu", "--tiny", "--only", "bert-base-imdb", "--steps", "2", "--windows", "2", "--warmup", "1"]
    argv += ["--sets", 'bad={"no_such_setting": true}', "--only-sets", "baseline,combo_kernels,bad"]
    assert inductor_options.main([*argv, "--out", str(tmp_path)]) == 1  # the bad set's error
    (written,) = tmp_path.glob("inductor-options-cpu-*.json")
    record = json.loads(written.read_text())
    assert record["benchmark"] == "inductor_options" and record["settings"]["fresh_caches"] is True
    assert list(record["settings"]["sets"]) == ["baseline", "combo_kernels", "bad"]
    assert record["workloads"]["bert-base-imdb"]["batch_size"] > 0
    base, combo, bad = record["rows"]
    for row in (base, combo):
        assert row["scenario"] == "bert-base-imdb" and row["tiny"] is True and row["status"] == "ok"
        assert len(row["window_seconds"]) == 2 and row["step_seconds"] > 0 and row["spread"] >= 0
        assert row["samples_per_second"] == pytest.approx(
            record["workloads"]["bert-base-imdb"]["batch_size"] / row["step_seconds"]
        )
        assert row["compiled_step"] is False and row["cuda_graph"] is False  # a CPU: no inductor
        assert COMPILE_UNAVAILABLE in row["warnings"] and row["compile_seconds"] is None
        assert isinstance(row["loss"], float) and row["loss_from"] == "one more eager step (no graph)"
    assert combo["options"] == {"combo_kernels": True}
    assert base["speedup"] == 1.0 and combo["speedup"] == pytest.approx(
        base["step_seconds"] / combo["step_seconds"]
    )
    # Same seed, same batch, same eager kernels (combo_kernels changes nothing uncompiled): same loss.
    assert combo["loss_delta"] == 0.0
    assert bad["status"] == "error" and "no_such_setting" in bad["error"] and bad["speedup"] is None
    out = capsys.readouterr().out
    assert "vs baseline" in out and "errors:" in out and "no_such_setting" in out


class _SleepySession:
    """A step of known length (10 ms of sleep) in the two calls time_windows makes."""

    def __init__(self) -> None:
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        time.sleep(0.01)

    def sync(self) -> None:
        pass


def test_windows_fill_their_time_without_steps_and_run_exactly_steps_with_them() -> None:
    session = _SleepySession()
    steps, windows = inductor_options.time_windows(session, warmup=3, steps=None, windows=2)
    # ~0.25 s of 10 ms steps (sleep overshoots a little, never undershoots)
    assert 5 <= steps <= inductor_options.WINDOW_SECONDS / 0.01 + 1
    assert len(windows) == 2 and all(w >= 0.01 for w in windows)
    assert session.steps == 3 + 2 * steps
    session = _SleepySession()
    assert inductor_options.time_windows(session, warmup=1, steps=4, windows=3)[0] == 4
    assert session.steps == 1 + 3 * 4


def test_budget_starts_no_set_that_would_end_past_it() -> None:
    rows = [{"scenario": "a", "wall_seconds": 100.0}, {"scenario": "b", "wall_seconds": 10.0}]
    fits = inductor_options.fits_budget
    assert fits(rows, "a", None, 1e6)  # no budget
    assert fits(rows, "a", 400.0, 250.0) and not fits(rows, "a", 400.0, 251.0)  # 1.5 x 100 s
    assert fits(rows, "b", 400.0, 385.0)
    assert not fits(rows, "c", 400.0, 400.0 - inductor_options.FIRST_SET_GUESS_S + 1)
