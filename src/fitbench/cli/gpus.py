"""`fitbench gpus`: the catalog, with the local GPU marked when NVML sees one."""

from __future__ import annotations

import argparse

from fitbench.catalog import get_gpu, gpu_to_dict, gpu_to_row, load_catalog, row_to_toml
from fitbench.cli.common import add_command, print_json
from fitbench.core.units import GiB
from fitbench.results.table import render_table

EXAMPLES = """examples:
  fitbench gpus
  fitbench gpus --json                       every row: the gpus.toml fields plus exact SI figures
  fitbench gpus --toml rtx-4090 > my.toml    one row as a file: edit it, then --gpu-spec my.toml
"""


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text, EXAMPLES)
    parser.add_argument("--json", action="store_true", help="print the catalog as a JSON list")
    parser.add_argument(
        "--toml", metavar="ID", help="print one card as a gpus.toml row (a valid --gpu-spec file)"
    )
    parser.set_defaults(func=run)


def _tflops(peaks: dict[str, float], key: str, digits: int = 0) -> str:
    return f"{peaks[key] / 1e12:.{digits}f}" if key in peaks else "-"


def run(args: argparse.Namespace) -> int:
    from fitbench.advise.i18n import resolve_lang, t

    lang = resolve_lang(args.lang)
    if args.toml:
        print(row_to_toml(gpu_to_row(get_gpu(args.toml))), end="")
        return 0
    catalog = load_catalog()
    if args.json:
        print_json([gpu_to_dict(g) for g in catalog.values()])
        return 0
    rows = []
    for g in catalog.values():
        peaks = g.peak_flops
        rows.append(
            [
                g.id + ("" if g.measured else " *"),
                g.name,
                f"{g.memory_bytes / GiB:.1f}",
                f"{g.memory_bytes / 1e9:.1f}",
                f"{g.bandwidth_bytes_s / 1e9:,.0f}",
                _tflops(peaks, "fp32", 1),
                _tflops(peaks, "tf32"),
                _tflops(peaks, "fp16"),
                _tflops(peaks, "fp8"),
                t("cell.yes" if g.bf16 else "cell.no", lang),
                f"${g.price_usd:,.0f}" if g.price_usd else "-",
                f"${g.rent_usd_per_hour:.2f}/h" if g.rent_usd_per_hour else "-",
            ]
        )
    print(
        render_table(
            [
                t("gpus.col.id", lang),
                t("gpus.col.name", lang),
                "GiB",
                "GB",
                "GB/s",
                "FP32",
                "TF32",
                "FP16/BF16",
                "FP8",
                "BF16",
                t("gpus.col.price", lang),
                t("gpus.col.rent", lang),
            ],
            rows,
            align="llrrrrrrrlrr",
        )
    )
    print("\n" + t("gpus.units", lang))
    print(t("gpus.tflops", lang))
    if any(not g.measured for g in catalog.values()):
        print(t("gpus.not_measured", lang))
    return 0
