"""`fitbench workloads`: the presets, their sizes and the overrides they accept."""

from __future__ import annotations

import argparse

from fitbench.cli.common import add_command, print_json
from fitbench.results.table import render_table
from fitbench.workloads.presets import PRESETS, TINY_PRESETS


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text,
                         "examples:\n  fitbench workloads\n  fitbench workloads --json")
    parser.add_argument("--json", action="store_true", help="print the presets as a JSON list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    workloads = [factory() for factory in PRESETS.values()]
    if args.json:
        print_json([dict(w.to_dict(), tiny_variant=w.name in TINY_PRESETS) for w in workloads])
        return 0
    rows = []
    for w in workloads:
        shape = (f"{w.prompt_tokens}+{w.new_tokens} tok" if w.is_generation else
                 f"seq {w.seq_len}" if w.seq_len else f"{w.image_size}px")
        rows.append([w.name, f"{w.param_count() / 1e6:,.1f}M", w.mode, str(w.batch_size), shape, w.precision,
                     "yes" if w.name in TINY_PRESETS else "", w.description])
    print(render_table(["workload", "params", "mode", "batch", "shape", "precision", "--tiny", "description"],
                       rows, align="lrlrlll" + "l"))
    print("\nOverride any field: --batch, --seq-len, --image-size, --precision, --optimizer, --mode, "
          "--prompt-tokens, --new-tokens, --dataset-size, --checkpointing; or --config config.json.")
    return 0
