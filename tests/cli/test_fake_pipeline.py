"""The whole measuring pipeline without a framework: CLI -> runner -> child process -> result ->
history -> compare -> report, through the fake backend (fitbench.backends.fake).

No torch or paddle is needed (the parent and the child import neither); the child is a real
process, the history a real SQLite file, the reports real files.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from fitbench.backends import BACKENDS, get_backend, installed_backends, listed_backends
from fitbench.cli.main import main
from fitbench.errors import FitbenchError
from fitbench.workloads.presets import SCENARIOS, get_workload

FAST = ["--min-steps", "3", "--min-seconds", "0.05", "--warmup", "1"]


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object]:
    rc = main(list(argv))
    out, _ = capsys.readouterr()
    return rc, (json.loads(out) if "--json" in argv else out)


def test_three_scenarios_run_land_in_history_and_reach_both_reports(capsys, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    run_ids = []
    for name in SCENARIOS:
        rc, data = _cli(
            capsys,
            "run",
            name,
            "--tiny",
            "--backend",
            "fake",
            "--device",
            "cpu",
            "--json",
            "--db",
            str(db),
            "--gpu",
            "rtx-4090",
            *FAST,
        )
        assert rc == 0
        m, workload = data["measurement"], get_workload(name, tiny=True)
        assert m["status"] == "ok" and m["backend"] == "fake" and m["error"] is None
        assert m["params"] == workload.param_count() and m["precision_in_effect"] == "fp32"
        assert m["steps"] >= 3 and m["step_seconds"] > 0 and m["peak_memory_bytes"] > 0
        if workload.is_generation:
            assert m["tokens_per_second"] == pytest.approx(workload.new_tokens / m["step_seconds"])
        else:
            assert m["epoch_seconds"] == pytest.approx(
                m["step_seconds"] * math.ceil(workload.dataset_size / workload.batch_size)
            )
        # The fake backend stands in for PyTorch: the comparison uses PyTorch's estimate.
        assert data["estimate"]["framework"] == "torch" and data["estimate"]["gpu"] == "rtx-4090"
        run_ids.append(data["run_id"])

    rc, runs = _cli(capsys, "history", "--json", "--db", str(db))
    assert rc == 0 and {r["run_id"] for r in runs} == set(run_ids)
    assert all(r["backend"] == "fake" and r["status"] == "ok" for r in runs)
    rc, text = _cli(capsys, "compare", run_ids[0], run_ids[1], "--db", str(db))
    assert rc == 0 and run_ids[0] in text

    html, md = tmp_path / "r.html", tmp_path / "r.md"
    rc, _ = _cli(capsys, "report", "--last", "3", "--html", str(html), "--markdown", str(md), "--db", str(db))
    assert rc == 0
    page, table = html.read_text(encoding="utf-8"), md.read_text(encoding="utf-8")
    assert all(run_id in table for run_id in run_ids)
    assert all(name in page and name in table for name in SCENARIOS)


def test_the_parent_and_the_child_import_no_framework(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "from fitbench.backends.base import RunOptions\n"
        "from fitbench.measure.runner import measure\n"
        "from fitbench.workloads.presets import get_workload\n"
        "m = measure(get_workload('bert-base-imdb', tiny=True), 'fake', RunOptions(), min_steps=2,"
        " min_seconds=0.01, warmup=1)\n"
        "loaded = [n for n in ('torch', 'paddle', 'transformers', 'numpy') if n in sys.modules]\n"
        "print(json.dumps([m['status'], loaded, sorted(m['environment'])]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    status, loaded, environment = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == "ok" and loaded == [], out.stderr
    assert "torch" not in environment and "paddle" not in environment  # the child had none either


def test_the_fake_backend_is_never_offered_nor_chosen() -> None:
    assert "fake" not in listed_backends() and "fake" not in installed_backends()
    assert BACKENDS["fake"].listed is False
    from fitbench.cli.main import build_parser

    run = next(a for a in build_parser()._actions if a.dest == "command").choices["run"]
    helptext = run.format_help()
    assert "--backend {torch,paddle}" in helptext and "fake" not in helptext


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=() if row.requires is None else (pytest.mark.slow, getattr(pytest.mark, n)))
        for n, row in BACKENDS.items()
    ],
)
def test_every_backend_implements_the_protocol_explicitly(name: str) -> None:
    """The registry names classes, imported on demand; each subclasses the Backend protocol. In
    a child process each, as torch and paddle never share one (a framework's test skips where
    its marker's package is missing)."""
    code = (
        "import sys\n"
        "from fitbench.backends import get_backend\n"
        "from fitbench.backends.base import Backend\n"
        f"b = get_backend({name!r})\n"
        "print(Backend in type(b).__mro__, isinstance(b, Backend), b.name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["True", "True", name], out.stderr[-2000:]


@pytest.mark.parametrize("name", ["fake:bogus", "fake:oom-above:x", "torch:oom"])
def test_a_fault_or_option_the_backend_does_not_have_is_one_line(name: str) -> None:
    with pytest.raises(FitbenchError) as info:
        get_backend(name)
    assert "\n" not in str(info.value)
