"""Rewrite the golden files from today's estimator: `python tests/golden/regen.py [NAME ...]`.

Run it only for a deliberate change of the numbers, and say in the commit which moved and why
(`git diff --stat tests/golden` shows which cases did).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import CASES, GOLDEN_DIR, golden_path, run_estimate


def main(names: list[str]) -> int:
    GOLDEN_DIR.mkdir(exist_ok=True)
    for name in names or list(CASES):
        data = run_estimate(CASES[name])
        golden_path(name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {golden_path(name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
