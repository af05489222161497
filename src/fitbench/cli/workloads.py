"""`fitbench workloads`: the presets, their sizes and the overrides they accept."""

from __future__ import annotations

import argparse

from fitbench.advise.i18n import preset_description, resolve_lang, t
from fitbench.cli.common import add_command, print_json
from fitbench.results.table import render_table
from fitbench.workloads.presets import PRESETS, TINY_PRESETS


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(
        subparsers, name, help_text, "examples:\n  fitbench workloads\n  fitbench workloads --json"
    )
    parser.add_argument("--json", action="store_true", help="print the presets as a JSON list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    workloads = [factory() for factory in PRESETS.values()]
    if args.json:
        print_json([dict(w.to_dict(), tiny_variant=w.name in TINY_PRESETS) for w in workloads])
        return 0
    lang = resolve_lang(getattr(args, "lang", None))
    rows = []
    for w in workloads:
        shape = (
            f"{w.prompt_tokens}+{w.new_tokens} tok"
            if w.is_generation
            else f"seq {w.seq_len}"
            if w.seq_len
            else f"{w.image_size}px"
        )
        rows.append(
            [
                w.name,
                f"{w.param_count() / 1e6:,.1f}M",
                w.mode,
                str(w.batch_size),
                shape,
                w.precision,
                t("cell.yes", lang) if w.name in TINY_PRESETS else "",
                preset_description(w.description, lang),
            ]
        )
    head = [t(f"col.{k}", lang) for k in ("workload", "params_short", "mode", "batch", "shape", "precision")]
    print(render_table([*head, "--tiny", t("col.description", lang)], rows, align="lrlrlll" + "l"))
    print("\n" + t("workloads.overrides", lang))
    return 0
