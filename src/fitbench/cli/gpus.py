"""`fitbench gpus`: the catalog, with the local GPU marked when NVML sees one."""

from __future__ import annotations

import argparse

from fitbench.catalog import gpu_to_dict, load_catalog
from fitbench.cli.common import add_command, print_json
from fitbench.core.units import GiB
from fitbench.results.table import render_table


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text, "examples:\n  fitbench gpus\n  fitbench gpus --json")
    parser.add_argument("--json", action="store_true", help="print the catalog as a JSON list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from fitbench.advise.i18n import resolve_lang, t

    lang = resolve_lang(args.lang)
    catalog = load_catalog()
    if args.json:
        print_json([gpu_to_dict(g) for g in catalog.values()])
        return 0
    rows = []
    for g in catalog.values():
        peaks = g.peak_flops
        rows.append(
            [
                g.id,
                g.name,
                f"{g.memory_bytes / GiB:.1f}",
                f"{g.memory_bytes / 1e9:.1f}",
                f"{g.bandwidth_bytes_s / 1e9:,.0f}",
                f"{peaks['fp32'] / 1e12:.1f}",
                f"{peaks['tf32'] / 1e12:.0f}" if "tf32" in peaks else "-",
                f"{peaks['fp16'] / 1e12:.0f}",
                "yes" if g.bf16 else "no",
                f"${g.price_usd:,.0f}" if g.price_usd else "-",
            ]
        )
    print(
        render_table(
            ["id", "name", "GiB", "GB", "GB/s", "FP32", "TF32", "FP16/BF16", "BF16", "price"],
            rows,
            align="llrrrrrrll",
        )
    )
    print("\n" + t("gpus.units", lang))
    print(t("gpus.tflops", lang))
    return 0
