"""Every number `fitbench estimate --json` prints for the presets stays what the golden files say.

A refactor must leave them identical; a deliberate change of the estimator regenerates them
with `python tests/golden/regen.py` and explains the change in its commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "golden"))
from cases import CASES, golden_path, run_estimate


@pytest.mark.parametrize("name", sorted(CASES))
def test_estimate_json_matches_golden_file(name: str) -> None:
    expected = json.loads(golden_path(name).read_text())
    actual = json.loads(json.dumps(run_estimate(CASES[name]), sort_keys=True))
    assert len(actual["estimates"]) == len(expected["estimates"])
    for got, want in zip(actual["estimates"], expected["estimates"], strict=True):
        assert got["gpu"] == want["gpu"]
        differing = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        assert not differing, f"{name} on {got['gpu']}: {differing} changed"
    # the rest (the fixes the advice ranks for a card where the job does not fit, the header)
    rest = sorted(
        k for k in set(actual) | set(expected) if k != "estimates" and actual.get(k) != expected.get(k)
    )
    assert not rest, f"{name}: {rest} changed"


def test_every_golden_file_has_a_case() -> None:
    """A case removed from CASES must take its golden file with it (no stale pins)."""
    on_disk = {p.stem for p in golden_path("x").parent.glob("*.json")}
    assert on_disk == set(CASES)
