"""Tuned decoding at several batches through `fitbench run`: one line per run, the JSON kept.

Each run is its own process, as a user's would be (`fitbench run MODEL --exec tuned --batch N
--mode infer --precision fp16 --min-seconds 1 --json --no-history --no-progress`); the line says
whether the fused decode kernels ran (backend_notes.fused_kernels), the decode step, tokens per
second over the batch, their share of the estimate's bandwidth roofline (weights once a step plus
every sequence's KV at the generation's mean context, at the datasheet bandwidth), the estimate,
and any warning. Batches above static_decoder.FUSED_MAX_BATCH (32) run the compiled step, as
`fitbench run` does; `benchmarks/decode_kernels.py --batch` times the fused and compiled steps.

    python benchmarks/decode_batches.py llm-6b:2,8,32 mistral-7b-instruct-v0.3:16 --out results/
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def run(model: str, batch: int, out: Path, extra: list[str]) -> dict[str, Any] | None:
    """One `fitbench run`; its JSON under `out` (None, and the error's tail printed, on failure)."""
    cmd = [sys.executable, "-m", "fitbench", "run", model, "--exec", "tuned", "--batch", str(batch)]
    cmd += ["--mode", "infer", "--precision", "fp16", "--min-seconds", "1", "--json", "--no-history"]
    cmd += ["--no-progress", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    path = out / f"{model}-b{batch}.json"
    path.write_text(done.stdout)
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        print(f"{model} b{batch}: exit {done.returncode}; {done.stderr.strip()[-600:]}")
        return None


def summary(model: str, batch: int, record: dict[str, Any]) -> str:
    m = record.get("measurement") or {}
    notes = m.get("backend_notes") or {}
    est = record.get("estimate") or {}
    step = m.get("decode_step_seconds")
    if m.get("status") != "ok" or not step:
        return f"{model} b{batch}: {m.get('status')} {str(m.get('error'))[:300]}"
    rate = batch / step
    roof = est.get("roofline_tokens_per_second")
    estimated = est.get("decode_tokens_per_second") or est.get("tokens_per_second")
    line = f"{model} b{batch}: fused={notes.get('fused_kernels')} graph={notes.get('cuda_graph')} "
    line += f"decode {step * 1e3:.2f} ms/step, {rate:.0f} tok/s"
    if roof:
        line += f" ({rate / roof:.0%} of roofline {roof:.0f})"
    if estimated:
        line += f"; estimate {estimated:.0f} tok/s"
    warnings = m.get("warnings") or []
    if warnings:
        line += "; warnings: " + " | ".join(str(w)[:200] for w in warnings)
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="MODEL:BATCH[,BATCH...]")
    parser.add_argument("--out", default=".", help="directory for each run's JSON")
    parser.add_argument("--extra", default="", help="more `fitbench run` arguments, space-separated")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for spec in args.runs:
        model, _, batches = spec.partition(":")
        for batch in [int(b) for b in (batches or "1").split(",")]:
            record = run(model, batch, out, args.extra.split())
            if record is None:
                failed += 1
                continue
            print(summary(model, batch, record), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
