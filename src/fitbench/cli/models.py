"""`fitbench models`: the bundled library of popular models, with total and active parameters."""

from __future__ import annotations

import argparse

from fitbench.advise.i18n import resolve_lang, t
from fitbench.cli.common import add_command, print_json
from fitbench.errors import FitbenchError
from fitbench.results.table import render_table
from fitbench.workloads import library
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.hf_config import (
    DECODER_TYPES,
    ENCODER_TYPES,
    MOE_TYPES,
    MULTIMODAL_TYPES,
    arch_from_hf_config,
    arch_label,
)
from fitbench.workloads.quant_config import weight_format_from_config


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(
        subparsers,
        name,
        help_text,
        "examples:\n  fitbench models\n  fitbench models qwen\n  fitbench models --json\n"
        "  fitbench models --families\n"
        "  fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090",
    )
    parser.add_argument(
        "filter", nargs="?", metavar="TEXT", help="show only models whose name contains this text"
    )
    parser.add_argument("--json", action="store_true", help="print the models as a JSON list")
    parser.add_argument(
        "--families",
        action="store_true",
        help="list the config.json model_type values fitbench reads (any model of these families "
        "can be estimated from its config, bundled or not)",
    )
    parser.set_defaults(func=run)


FAMILY_GROUPS = (
    ("encoder", ENCODER_TYPES),
    ("decoder", DECODER_TYPES),
    ("moe", MOE_TYPES),
    ("multimodal", MULTIMODAL_TYPES),
    ("cnn", ("resnet",)),
)


def _families(args: argparse.Namespace, lang: str) -> int:
    """The model types arch_from_hf_config reads, by kind: what `--config` and a model folder take."""
    if args.json:
        print_json({kind: list(types) for kind, types in FAMILY_GROUPS})
        return 0
    colon = ":" if lang == "zh" else ": "
    for kind, types in FAMILY_GROUPS:
        print(f"{t(f'models.kind.{kind}', lang)}{colon}{', '.join(types)}")
    print("\n" + t("models.families_usage", lang))
    return 0


def run(args: argparse.Namespace) -> int:
    lang = resolve_lang(getattr(args, "lang", None))
    if args.families:
        return _families(args, lang)
    chosen = list(library.models().values())
    if args.filter:
        text = args.filter.strip().lower()
        chosen = [m for m in chosen if text in m.name or text in m.repo.lower()]
        if not chosen:
            library.get_model(args.filter)  # raises with the nearest names
            raise FitbenchError(
                f"no bundled model matches '{args.filter[:60]}'",
                "run `fitbench models`",
                message_zh=f"没有内置模型匹配 '{args.filter[:60]}'",
                hint_zh="请运行 `fitbench models`",
            )
    rows, records = [], []
    for m in chosen:
        arch = arch_from_hf_config(dict(m.config), source=m.repo)
        assert isinstance(arch, TransformerArch)
        total, active = arch.param_count(), arch.active_param_count()
        window = (
            t(
                "models.sliding",
                lang,
                window=arch.sliding_window,
                layers=arch.sliding_layers,
                total=arch.num_layers,
            )
            if arch.sliding_layers
            else ""
        )
        experts = f"{arch.experts_per_token}/{arch.num_experts}" if arch.is_moe else ""
        fmt, _ = weight_format_from_config(m.config, m.repo)
        weights = fmt.label if fmt is not None else None
        records.append(
            {
                "name": m.name,
                "repo": m.repo,
                "source": m.source,
                "family": arch_label(arch),
                "params": total,
                "active_params": active,
                "published_params": m.published_params,
                "experts_per_token": arch.experts_per_token or None,
                "num_experts": arch.num_experts or None,
                "vision_params": arch.vision_params or None,
                "vision_tower": arch.vision_tower or None,
                "sliding_window": arch.sliding_window,
                "kv_cache_elements_per_token_layer": arch.kv_elements_per_token(),
                "weights": weights,
            }
        )
        rows.append(
            [
                m.name,
                arch_label(arch),
                f"{total / 1e9:,.2f}B",
                f"{active / 1e9:,.2f}B" if arch.is_moe else "",
                experts,
                "MLA" if arch.is_mla else f"{arch.kv_heads}/{arch.num_heads}",
                window,
                weights or "",
                m.repo,
            ]
        )
    if args.json:
        print_json(records)
        return 0
    keys = (
        "model",
        "family",
        "params_short",
        "active",
        "experts",
        "kv_heads",
        "sliding_window",
        "weights",
        "source",
    )
    print(
        render_table(
            [t(f"col.{k}", lang) for k in keys],
            rows,
            align="llrrlllll",
        )
    )
    print("\n" + t("models.usage", lang))
    return 0
