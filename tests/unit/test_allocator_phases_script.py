"""benchmarks/allocator_phases.py --compare: the committed GPU phases beside the first-step model.

Pure estimator code on a stored file (no GPU, no framework): every measured point is rebuilt and
printed with both columns, and where the measurement saw the first optimizer step take many
gigabytes of new segments the estimate does too (the mechanism, not a fitted share), and the two
steps' replayed reserve is the one the GPU reached.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import allocator_phases  # noqa: E402

FILE = BENCHMARKS / "results" / "allocator-phases-h100-2026-12-05.json"


def test_compare_prints_every_point_with_both_columns(capsys):
    assert allocator_phases.compare(FILE) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if re.search(r"\d+\.\d\d\s*$", line)]
    assert len(rows) == 11
    for row in rows:
        numbers = [float(x) for x in row.split()[-8:]]
        measured_new, est_new = numbers[2:4]
        if measured_new > 5:  # the step that found no block for its moments
            assert est_new > 5, row
        if measured_new == 0:
            assert est_new < 1, row
        # the two-step replay's reserve against the one the GPU's steps reached (measured before
        # the replay was written)
        measured_reserve, est_reserve = numbers[6:8]
        assert abs(est_reserve / measured_reserve - 1) < 0.11, row
