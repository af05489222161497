"""The `fitbench estimate --json` command lines whose every number is pinned by a golden file.

Why: the estimator is refactored and extended often; these files make any change to a number
for the presets and the three reference scenarios visible in review. A deliberate change
regenerates them (`python tests/golden/regen.py`) and says in its commit which numbers moved
and why.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

GOLDEN_DIR = Path(__file__).parent / "estimate"

# name -> argv after `fitbench estimate`. Every preset on every catalog card, the scenarios'
# precisions, generation in 8 and 4 bit, fine-tuning (full, LoRA, QLoRA), several GPUs under
# each strategy, the tuned mode and Paddle.
CASES: dict[str, list[str]] = {
    "resnet50-cifar10": ["resnet50-cifar10"],
    "resnet50-cifar10-amp-bf16": ["resnet50-cifar10", "--precision", "amp-bf16"],
    "resnet50-cifar10-tuned": ["resnet50-cifar10", "--exec", "tuned"],
    "resnet50-cifar10-paddle": ["resnet50-cifar10", "--framework", "paddle"],
    "resnet18-cifar10": ["resnet18-cifar10"],
    "resnet101-cifar10": ["resnet101-cifar10"],
    "resnet50-imagenet": ["resnet50-imagenet"],
    "bert-base-imdb": ["bert-base-imdb"],
    "bert-base-imdb-amp-fp16": ["bert-base-imdb", "--precision", "amp-fp16"],
    "bert-base-imdb-eager-ckpt": ["bert-base-imdb", "--attention", "eager", "--checkpointing"],
    "bert-base-imdb-infer": ["bert-base-imdb", "--mode", "infer"],
    "bert-base-imdb-tuned": ["bert-base-imdb", "--exec", "tuned"],
    "bert-large-imdb": ["bert-large-imdb"],
    "llm-6b": ["llm-6b"],
    "llm-6b-int8": ["llm-6b", "--precision", "int8"],
    "llm-6b-int4-b8": ["llm-6b", "--precision", "int4", "--batch", "8"],
    "llm-6b-tuned": ["llm-6b", "--exec", "tuned"],
    "llm-6b-paddle": ["llm-6b", "--framework", "paddle"],
    "llm-6b-train": ["llm-6b", "--mode", "train"],
    "llm-6b-train-sgd-fp32": [
        "llm-6b",
        "--mode",
        "train",
        "--precision",
        "fp32",
        "--optimizer",
        "sgd",
        "--seq-len",
        "256",
    ],
    "llm-6b-lora": ["llm-6b", "--mode", "train", "--peft", "lora"],
    "llm-6b-qlora": ["llm-6b", "--mode", "train", "--peft", "qlora", "--lora-rank", "64"],
    "llm-13b": ["llm-13b"],
    "llm-70b": ["llm-70b"],
    "bert-base-imdb-ddp4": ["bert-base-imdb", "--gpus", "4", "--strategy", "ddp"],
    "llm-6b-train-zero1-8": ["llm-6b", "--mode", "train", "--gpus", "8", "--strategy", "zero1"],
    "llm-6b-train-zero2-8": ["llm-6b", "--mode", "train", "--gpus", "8", "--strategy", "zero2"],
    "llm-6b-train-zero3-8": ["llm-6b", "--mode", "train", "--gpus", "8", "--strategy", "zero3"],
    "llm-6b-train-fsdp-8": ["llm-6b", "--mode", "train", "--gpus", "8", "--strategy", "fsdp"],
    "llm-6b-train-fsdp-shard-grad-op-8": [
        "llm-6b",
        "--mode",
        "train",
        "--gpus",
        "8",
        "--strategy",
        "fsdp-shard-grad-op",
    ],
    "llm-6b-train-fused": ["llm-6b", "--mode", "train", "--optimizer-impl", "fused"],
    "llm-6b-train-for-loop-accum4": [
        "llm-6b",
        "--mode",
        "train",
        "--optimizer-impl",
        "for-loop",
        "--grad-accum",
        "4",
    ],
    "llm-70b-tp8": ["llm-70b", "--gpus", "8", "--strategy", "tp"],
}


def run_estimate(argv: list[str]) -> dict[str, Any]:
    """`fitbench estimate ARGV --gpu all --json`, in this process, as parsed JSON.

    The user's calibrated profile is ignored: golden numbers are the shipped profile's.
    """
    from fitbench.cli.main import main

    out = io.StringIO()
    saved = os.environ.get("FITBENCH_HOME")
    with tempfile.TemporaryDirectory(prefix="fitbench-golden-") as home:
        os.environ["FITBENCH_HOME"] = home  # an empty data folder: no calibrated profile
        try:
            with contextlib.redirect_stdout(out):
                code = main(["estimate", *argv, "--gpu", "all", "--json"])
        finally:
            if saved is None:
                os.environ.pop("FITBENCH_HOME", None)
            else:
                os.environ["FITBENCH_HOME"] = saved
    if code != 0:
        raise RuntimeError(f"fitbench estimate {' '.join(argv)} exited {code}")
    return json.loads(out.getvalue())


def golden_path(name: str) -> Path:
    if not re.fullmatch(r"[a-z0-9.-]+", name):
        raise ValueError(f"bad golden case name {name!r}")
    return GOLDEN_DIR / f"{name}.json"
