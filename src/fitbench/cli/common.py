"""Options shared by estimate, run and check, and the one place that turns them into a Workload."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from fitbench.core.precision import PRECISION_NAMES
from fitbench.errors import FitbenchError
from fitbench.workloads.workload import Workload


def positive_int(text: str) -> int:
    """argparse type: a positive integer, with a message that names the problem."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def add_workload_args(parser: argparse.ArgumentParser, *, workload_required: bool = True,
                      multi_precision: bool = False) -> None:
    """WORKLOAD plus every override of the brief's presets."""
    nargs = None if workload_required else "?"
    parser.add_argument("workload", nargs=nargs, metavar="WORKLOAD",
                        help="a preset (see `fitbench workloads`); or use --config")
    group = parser.add_argument_group("workload overrides")
    group.add_argument("--config", metavar="PATH", help="a local Hugging Face config.json (or its folder)")
    group.add_argument("--tiny", action="store_true", help="the tiny variant of a preset (runs in seconds on a CPU)")
    group.add_argument("--batch", "--batch-size", dest="batch_size", type=positive_int, metavar="N")
    group.add_argument("--seq-len", type=positive_int, metavar="N", help="sequence length (transformers)")
    group.add_argument("--image-size", type=positive_int, metavar="N", help="image height = width (ResNet)")
    help_precision = "one of " + ", ".join(PRECISION_NAMES)
    if multi_precision:
        help_precision += "; a comma-separated list compares them"
    group.add_argument("--precision", metavar="P", help=help_precision)
    group.add_argument("--optimizer", metavar="NAME", help="adam, adamw, sgd or momentum")
    group.add_argument("--mode", metavar="MODE", help="train or infer")
    group.add_argument("--prompt-tokens", type=positive_int, metavar="N")
    group.add_argument("--new-tokens", type=positive_int, metavar="N")
    group.add_argument("--dataset-size", type=positive_int, metavar="N", help="samples per epoch")
    group.add_argument("--checkpointing", action="store_true", default=None,
                       help="activation checkpointing (recompute activations in the backward pass)")
    group.add_argument("--attention", metavar="IMPL", help="fused (SDPA/flash, default) or eager")
    group.add_argument("--peft", metavar="METHOD", help="parameter-efficient fine-tuning: lora or qlora")
    group.add_argument("--lora-rank", type=positive_int, metavar="R", help="LoRA rank (default 16)")
    group.add_argument("--lora-targets", metavar="T", help="attention, attention-mlp (default) or all-linear")
    group.add_argument("--gpus", type=positive_int, metavar="N", help="number of GPUs (default 1)")
    group.add_argument("--strategy", metavar="S", help="multi-GPU strategy: ddp, zero1, zero2, zero3, fsdp or tp")


def workload_from_args(args: argparse.Namespace, *, precision: str | None = None) -> Workload:
    """The Workload the user described: a preset or a config file, with overrides applied."""
    overrides: dict[str, Any] = {
        "batch_size": args.batch_size, "seq_len": args.seq_len, "image_size": args.image_size,
        "precision": precision if precision is not None else args.precision,
        "optimizer": args.optimizer, "mode": args.mode, "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens, "dataset_size": args.dataset_size,
        "checkpointing": args.checkpointing, "attention": args.attention, "peft": args.peft,
        "lora_rank": args.lora_rank, "lora_targets": args.lora_targets, "gpus": args.gpus,
        "strategy": args.strategy,
    }
    for key in ("peft", "lora_targets", "strategy", "attention", "optimizer", "mode"):
        if isinstance(overrides[key], str):
            overrides[key] = overrides[key].strip().lower()
    if overrides["precision"] is not None:
        overrides["precision"] = overrides["precision"].strip().lower()
    if args.config:
        if args.workload:
            raise FitbenchError("give either a WORKLOAD preset or --config, not both")
        from fitbench.workloads.hf_config import workload_from_config

        return workload_from_config(args.config, **overrides)
    if not args.workload:
        raise FitbenchError("no workload given", "name a preset (`fitbench workloads` lists them) or pass --config")
    from fitbench.workloads.presets import get_workload

    workload = get_workload(args.workload, tiny=args.tiny)
    # Switching a decoder to training needs a sequence length; a train job needs no prompt.
    if overrides["mode"] == "train" and workload.family == "decoder" and overrides["seq_len"] is None:
        overrides["seq_len"] = workload.seq_len or 512
    if overrides["mode"] == "train" and workload.is_generation and overrides["precision"] is None:
        # Fine-tuning a decoder: 16-bit frozen weights for PEFT, mixed precision otherwise.
        overrides["precision"] = "bf16" if overrides["peft"] else "amp-bf16"
    return workload.replace(**overrides)


def precision_list(text: str | None) -> list[str | None]:
    """`--precision fp32,amp-fp16` -> ['fp32', 'amp-fp16']; None -> [None] (the preset's own)."""
    if text is None:
        return [None]
    items = [p.strip().lower() for p in text.split(",") if p.strip()]
    if not items:
        raise FitbenchError("--precision is empty", "for example --precision fp32,amp-fp16")
    return items


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=_json_default)
    sys.stdout.write("\n")


def _json_default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if isinstance(o, tuple | set):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
