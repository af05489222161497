"""The three headline scenarios and their tiny variants, plus a few well-known model sizes.

Presets are functions so that nothing is built at import time; `get_workload` applies the
user's overrides through `Workload.replace`, which validates them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from fitbench.errors import FitbenchError, unknown_name
from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.workload import Workload

CIFAR10_TRAIN_IMAGES = 50_000
IMDB_TRAIN_REVIEWS = 25_000

BERT_BASE = TransformerArch(
    kind="encoder",
    vocab_size=30522,
    hidden_size=768,
    num_layers=12,
    num_heads=12,
    intermediate_size=3072,
    max_positions=512,
    type_vocab_size=2,
    num_labels=2,
    model_type="bert",
)
BERT_LARGE = dataclasses.replace(
    BERT_BASE, hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096
)
# Llama-7B (Touvron et al. 2023): 6,738,415,616 parameters, the class of the 'llm-6b' scenario's model.
LLAMA_7B = TransformerArch(
    kind="decoder",
    vocab_size=32000,
    hidden_size=4096,
    num_layers=32,
    num_heads=32,
    intermediate_size=11008,
    max_positions=4096,
    mlp="swiglu",
    norm="rmsnorm",
    position="rotary",
    qkv_bias=False,
    out_bias=False,
    mlp_bias=False,
    pooler=False,
    num_labels=0,
    model_type="llama",
)
# The larger Llama-2 sizes differ from 7B only in their dimensions (70B adds grouped-query attention).
LLAMA_13B = dataclasses.replace(
    LLAMA_7B, hidden_size=5120, num_layers=40, num_heads=40, intermediate_size=13824
)
LLAMA_70B = dataclasses.replace(
    LLAMA_7B, hidden_size=8192, num_layers=80, num_heads=64, num_kv_heads=8, intermediate_size=28672
)

TINY_RESNET = ResNetArch(depth=50, num_classes=10, base_width=8, layers=(1, 1, 1, 1))
# Tiny variants: the same layouts at toy sizes, so the whole pipeline runs in seconds on a CPU.
TINY_BERT = dataclasses.replace(
    BERT_BASE,
    vocab_size=1000,
    hidden_size=64,
    num_layers=2,
    num_heads=2,
    intermediate_size=128,
    max_positions=128,
)
TINY_LLAMA = dataclasses.replace(
    LLAMA_7B,
    vocab_size=1000,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=172,
    max_positions=256,
)


def _resnet(depth: int, name: str, desc: str) -> Callable[[], Workload]:
    return lambda: Workload(
        name=name,
        arch=ResNetArch(depth=depth, num_classes=10),
        mode="train",
        batch_size=128,
        image_size=32,
        precision="fp32",
        optimizer="adam",
        dataset_size=CIFAR10_TRAIN_IMAGES,
        description=desc,
    )


PRESETS: dict[str, Callable[[], Workload]] = {
    "resnet50-cifar10": _resnet(
        50, "resnet50-cifar10", "ResNet-50 training on CIFAR-10 (32x32, 10 classes), batch 128, Adam, FP32"
    ),
    "bert-base-imdb": lambda: Workload(
        name="bert-base-imdb",
        arch=BERT_BASE,
        mode="train",
        batch_size=16,
        seq_len=512,
        precision="fp32",
        optimizer="adamw",
        dataset_size=IMDB_TRAIN_REVIEWS,
        description="BERT-base fine-tuning on IMDb (seq 512, 2 labels), batch 16, AdamW; "
        "try --precision amp-fp16",
    ),
    "llm-6b": lambda: Workload(
        name="llm-6b",
        arch=LLAMA_7B,
        mode="infer",
        batch_size=1,
        precision="fp16",
        prompt_tokens=50,
        new_tokens=100,
        description="6.7B Llama-style decoder, FP16 weights, 50-token prompt, 100 new tokens",
    ),
    "resnet18-cifar10": _resnet(18, "resnet18-cifar10", "ResNet-18 training on CIFAR-10, batch 128, FP32"),
    "resnet101-cifar10": _resnet(
        101, "resnet101-cifar10", "ResNet-101 training on CIFAR-10, batch 128, FP32"
    ),
    "resnet50-imagenet": lambda: Workload(
        name="resnet50-imagenet",
        arch=ResNetArch(depth=50, num_classes=1000),
        mode="train",
        batch_size=256,
        image_size=224,
        precision="amp-fp16",
        optimizer="momentum",
        dataset_size=1_281_167,
        description="ResNet-50 on ImageNet (224x224, 1000 classes), batch 256, AMP, SGD momentum",
    ),
    "bert-large-imdb": lambda: Workload(
        name="bert-large-imdb",
        arch=BERT_LARGE,
        mode="train",
        batch_size=16,
        seq_len=512,
        precision="amp-fp16",
        optimizer="adamw",
        dataset_size=IMDB_TRAIN_REVIEWS,
        description="BERT-large fine-tuning, seq 512, AMP",
    ),
    "llm-13b": lambda: Workload(
        name="llm-13b",
        arch=LLAMA_13B,
        mode="infer",
        batch_size=1,
        precision="fp16",
        prompt_tokens=50,
        new_tokens=100,
        description="13B Llama-style decoder, FP16, 50-token prompt, 100 new tokens",
    ),
    "llm-70b": lambda: Workload(
        name="llm-70b",
        arch=LLAMA_70B,
        mode="infer",
        batch_size=1,
        precision="fp16",
        prompt_tokens=50,
        new_tokens=100,
        description="70B Llama-2-style decoder with grouped-query attention, FP16",
    ),
}

TINY_PRESETS: dict[str, Callable[[], Workload]] = {
    "resnet50-cifar10": lambda: Workload(
        name="resnet50-cifar10",
        arch=TINY_RESNET,
        mode="train",
        batch_size=8,
        image_size=32,
        precision="fp32",
        optimizer="adam",
        dataset_size=CIFAR10_TRAIN_IMAGES,
        tiny=True,
        description="tiny ResNet (bottleneck, width 8, one block a stage), CIFAR-10 shapes",
    ),
    "bert-base-imdb": lambda: Workload(
        name="bert-base-imdb",
        arch=TINY_BERT,
        mode="train",
        batch_size=4,
        seq_len=64,
        precision="fp32",
        optimizer="adamw",
        dataset_size=IMDB_TRAIN_REVIEWS,
        tiny=True,
        description="tiny BERT (2 layers, hidden 64), IMDb shapes at seq 64",
    ),
    "llm-6b": lambda: Workload(
        name="llm-6b",
        arch=TINY_LLAMA,
        mode="infer",
        batch_size=1,
        precision="fp32",
        prompt_tokens=16,
        new_tokens=8,
        tiny=True,
        description="tiny Llama (2 layers, hidden 64, GQA 4/2 heads)",
    ),
}

SCENARIOS = ("resnet50-cifar10", "bert-base-imdb", "llm-6b")


def preset_names() -> list[str]:
    return list(PRESETS)


def get_workload(name: str, *, tiny: bool = False, **overrides: object) -> Workload:
    """A preset by name (forgiving case and underscores), with exactly these fields changed
    (`Workload.replace`). A user's request goes through `Workload.with_overrides` instead, which
    adds the defaults a change implies: `get_workload(name, tiny=t).with_overrides(**asked)`."""
    key = name.strip().lower().replace("_", "-")
    table = TINY_PRESETS if tiny else PRESETS
    if key not in table:
        if tiny and key in PRESETS:
            raise FitbenchError(
                f"workload '{name}' has no tiny variant",
                "tiny variants exist for " + ", ".join(TINY_PRESETS),
                message_zh=f"工作负载 '{name}' 没有迷你版",
                hint_zh="有迷你版的预设:" + ", ".join(TINY_PRESETS),
            )
        raise unknown_name("workload", name, table, kind_zh="工作负载", list_command="fitbench workloads")
    return table[key]().replace(**overrides)
