"""How long `fitbench check` takes end to end on this machine, where its time goes, and each
measured figure's spread.

Runs `python -m fitbench.cli.main check --json --progress` in a fresh process, as a user would
(start-up, estimates, the scenarios' measurements, the history and the HTML report included),
times it from the outside, and timestamps each progress line as it arrives on stderr, so that
the phases of every scenario (importing, building, warm-up, timing, ...) get their seconds. The
target is 45 s on a GPU; each measured figure (step time, prefill, decode step) is held to a
spread below 5 % over repeated short windows or reported unstable (fitbench.measure.timing).

    PYTHONPATH=src python benchmarks/check_wall.py --out check-wall.json          # the local GPU
    PYTHONPATH=src python benchmarks/check_wall.py --tiny --out check-wall.json   # tiny variants

On a machine without a GPU `fitbench check` measures the tiny variants on the CPU: the same
command is then the script's smoke test. The history goes to a temporary file, never the user's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
TARGET_S = 45.0
FIGURES = ("step_seconds", "prefill_seconds", "decode_step_seconds")


def run_check(extra: list[str], workdir: Path) -> dict[str, Any]:
    """One `fitbench check --json`: its wall time, exit code, JSON and timestamped progress lines."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    command = [
        sys.executable,
        "-m",
        "fitbench.cli.main",
        "check",
        "--json",
        "--progress",
        "--lang",
        "en",
        "--db",
        str(workdir / "history.sqlite"),
        "--html",
        str(workdir / "report.html"),
        *extra,
    ]
    lines: list[tuple[float, str]] = []
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic() - started, line.rstrip("\n")))

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    out = proc.stdout.read() if proc.stdout is not None else ""
    code = proc.wait()
    wall = time.monotonic() - started
    reader.join(timeout=5.0)
    try:
        data = json.loads(out)
    except ValueError:
        data = None
    return {"command": command, "exit_code": code, "wall_seconds": wall, "json": data, "stderr": lines}


def phases(stderr: list[tuple[float, str]]) -> list[dict[str, Any]]:
    """Progress lines ("fitbench: LABEL · PHASE · ... · 1.2s") as phases with their seconds: from
    the line's arrival to the next line's."""
    out: list[dict[str, Any]] = []
    for i, (at, line) in enumerate(stderr):
        if not line.startswith("fitbench: "):
            continue
        parts = line[len("fitbench: ") :].split(" · ")
        nxt = stderr[i + 1][0] if i + 1 < len(stderr) else at
        out.append({"at": round(at, 3), "seconds": round(nxt - at, 3), "line": line[len("fitbench: ") :]})
        out[-1]["parts"] = parts
    return out


def figure_rows(data: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per measured figure of each scenario: value, spread, stable, windows run."""
    rows: list[dict[str, Any]] = []
    for s in (data or {}).get("scenarios", []):
        m = s.get("measurement") or {}
        spreads = m.get("spreads") or {}
        for figure in FIGURES:
            entry = spreads.get(figure)
            if entry is None:
                continue
            rows.append(
                {
                    "scenario": s["key"],
                    "figure": figure,
                    "seconds": m.get(figure),
                    "spread": entry.get("spread"),
                    "stable": entry.get("stable"),
                    "windows": entry.get("windows"),
                    "windows_run": entry.get("windows_run"),
                    "child_wall_seconds": m.get("wall_seconds"),
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="pass --tiny to check (tiny variants on a GPU)")
    parser.add_argument("--exec", dest="exec_mode", default=None, help="pass --exec to check")
    parser.add_argument(
        "--target", type=float, default=TARGET_S, help=f"seconds to stay under ({TARGET_S:g})"
    )
    parser.add_argument("--out", help="write everything as JSON here")
    args = parser.parse_args(argv)
    extra = ["--tiny"] if args.tiny else []
    if args.exec_mode:
        extra += ["--exec", args.exec_mode]

    with tempfile.TemporaryDirectory(prefix="fitbench-check-wall-") as tmp:
        run = run_check(extra, Path(tmp))
    data = run["json"]
    rows = figure_rows(data)
    timeline = phases(run["stderr"])

    print("phases (seconds from the previous progress line to the next):")
    for p in timeline:
        print(f"  {p['at']:7.2f} s  +{p['seconds']:6.2f} s  {p['line']}")
    print()
    head = ("scenario", "figure", "value", "spread", "stable", "windows", "child s")
    print(f"{head[0]:28} {head[1]:20} {head[2]:>12} {head[3]:>8} {head[4]:>7} {head[5]:>8} {head[6]:>8}")
    for r in rows:
        spread = "-" if r["spread"] is None else f"{r['spread'] * 100:.1f} %"
        value = "-" if r["seconds"] is None else f"{r['seconds'] * 1e3:.2f} ms"
        print(
            f"{r['scenario']:28} {r['figure']:20} {value:>12} {spread:>8} {r['stable']!s:>7} "
            f"{r['windows_run']!s:>8} {r['child_wall_seconds']!s:>8}"
        )
    machine = (data or {}).get("machine", {})
    verdict = "under" if run["wall_seconds"] < args.target else "OVER"
    print()
    print(
        f"fitbench check: {run['wall_seconds']:.1f} s end to end on {machine.get('device', '?')} "
        f"({machine.get('catalog_gpu_name') or machine.get('cpu') or '?'}), exit code {run['exit_code']}: "
        f"{verdict} the {args.target:g} s target"
    )
    unstable = [r for r in rows if r["stable"] is False]
    print(f"figures: {len(rows)}, unstable: {len(unstable)}")
    if args.out:
        record = {
            "benchmark": "check-wall",
            "target_seconds": args.target,
            "wall_seconds": run["wall_seconds"],
            "exit_code": run["exit_code"],
            "command": run["command"],
            "machine": machine,
            "figures": rows,
            "phases": timeline,
            "check": data,
        }
        Path(args.out).write_text(json.dumps(record, indent=1, default=str))
        print(f"wrote {args.out}")
    return 0 if run["exit_code"] == 0 and data is not None else 1


if __name__ == "__main__":
    sys.exit(main())
