"""The buying guide by model size, derived from the estimator instead of written down.

The brief ends with a rule of thumb: < 100M parameters -> 12 GB class; 0.1-3B -> 24 GB class
with AMP; > 3B -> 40/80 GB data-centre cards or the cloud. fitbench does not repeat it: it
estimates models of each family at a ladder of sizes, at the brief's settings, on every catalog
card, and reports the smallest memory class in which each one fits. Where the rule holds the
derived guide says so with numbers; where it does not (full fine-tuning above ~1B parameters
needs far more than 24 GB; a 7B model in FP16 generates on a 16 GB card) the guide shows it.

Families and settings (the brief's three scenarios, scaled):
    cnn-train         ResNet-18/50/101/152 on CIFAR-10 (32x32), batch 128, Adam, FP32
    encoder-finetune  BERT-base, BERT-large and wider encoders, seq 512, batch 16, AdamW, AMP fp16
    decoder-generate  Llama-style decoders 1.3B-70B, FP16 weights, 50-token prompt, 100 new tokens

Transformer shapes beyond the published BERT/Llama ones follow the GPT-3 paper's model ladder
(Brown et al. 2020, Table 2.1: d_model x n_layers = 1536x24 for 760M, 2048x24 for 1.3B,
2560x32 for 2.7B), in each family's own layout.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fitbench.catalog import load_catalog
from fitbench.core.gpu import GpuSpec
from fitbench.core.units import GiB
from fitbench.estimate.api import estimate
from fitbench.estimate.verdict import FITS, OOM
from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.presets import LLAMA_7B, LLAMA_13B, LLAMA_70B, get_workload
from fitbench.workloads.workload import Workload

__all__ = ["BANDS", "MEMORY_CLASSES_GB", "GuideRow", "band_of", "guide_bands", "memory_class", "size_guide"]

# Marketing memory sizes in GB. A card belongs to the smallest class at least as large as its
# nvidia-smi total in GiB (ECC cards such as the L4 show 22.5 GiB and are sold as 24 GB).
MEMORY_CLASSES_GB = (8, 10, 12, 16, 20, 24, 32, 40, 48, 80, 96, 141, 180, 192)

# The brief's size bands, in parameters: (name, lower bound inclusive, upper bound exclusive).
BANDS: tuple[tuple[str, int, float], ...] = (
    ("<100M", 0, 100e6),
    ("0.1-3B", int(100e6), 3.05e9),  # a "3B" model such as the 2.7B of the GPT-3 ladder is in it
    (">3B", int(3.05e9), float("inf")),
)

REGIMES = ("cnn-train", "encoder-finetune", "decoder-generate")


def memory_class(gpu: GpuSpec) -> int:
    """The marketing memory class (GB) of a card."""
    gib = gpu.memory_bytes / GiB
    for size in MEMORY_CLASSES_GB:
        if gib <= size + 0.01:
            return size
    return round(gib)


def band_of(params: int) -> str:
    for name, low, high in BANDS:
        if low <= params < high:
            return name
    return BANDS[-1][0]


@dataclass(frozen=True, kw_only=True)
class GuideRow:
    """One model of the ladder and the smallest class that runs it.

    fits_class_gb   smallest memory class with a card whose verdict is 'fits' (None: no single card)
    runs_class_gb   the same, allowing 'tight'
    card            the card with the least usable memory that fits comfortably (None: none)
    workload        the job that was estimated
    """

    regime: str
    model: str
    params: int
    peak_bytes: int
    fits_class_gb: int | None
    runs_class_gb: int | None
    card: str | None
    workload: Workload | None = field(default=None, compare=False, repr=False)

    @property
    def band(self) -> str:
        return band_of(self.params)

    def to_dict(self) -> dict[str, Any]:
        return {
            "regime": self.regime,
            "model": self.model,
            "params": self.params,
            "band": self.band,
            "peak_memory_bytes": self.peak_bytes,
            "fits_class_gb": self.fits_class_gb,
            "runs_class_gb": self.runs_class_gb,
            "card": self.card,
            "card_name": load_catalog()[self.card].name if self.card else None,
        }


def _encoder(hidden: int, layers: int, heads: int) -> TransformerArch:
    """A BERT-layout encoder (GELU MLP of 4x width, learned positions, pooler, 2 labels)."""
    return TransformerArch(
        kind="encoder",
        vocab_size=30522,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=4 * hidden,
        max_positions=512,
        type_vocab_size=2,
        num_labels=2,
        model_type="bert",
    )


def _decoder(hidden: int, layers: int, heads: int) -> TransformerArch:
    """A Llama-layout decoder (SwiGLU of ~8/3 width rounded to 256, RMSNorm, rotary, no biases):
    Llama-7B's layout at other dimensions."""
    ffn = -(-(8 * hidden // 3) // 256) * 256
    return dataclasses.replace(
        LLAMA_7B, hidden_size=hidden, num_layers=layers, num_heads=heads, intermediate_size=ffn
    )


def _ladder() -> list[tuple[str, str, Callable[[], Workload]]]:
    """(regime, model name, workload factory) for every model of the guide."""
    cnn = get_workload("resnet50-cifar10")
    enc = get_workload("bert-base-imdb", precision="amp-fp16")
    gen = get_workload("llm-6b")
    out: list[tuple[str, str, Callable[[], Workload]]] = []
    for depth in (18, 50, 101, 152):
        out.append(
            (
                "cnn-train",
                f"ResNet-{depth}",
                lambda d=depth: cnn.replace(arch=ResNetArch(depth=d, num_classes=10)),
            )
        )
    encoders = (
        ("BERT-base", 768, 12, 12),
        ("BERT-large", 1024, 24, 16),
        ("encoder 1536x24", 1536, 24, 16),
        ("encoder 2048x24", 2048, 24, 16),
        ("encoder 2560x32", 2560, 32, 32),
    )
    for name, h, n, heads in encoders:
        out.append(("encoder-finetune", name, lambda h=h, n=n, a=heads: enc.replace(arch=_encoder(h, n, a))))
    decoders: tuple[tuple[str, Callable[[], TransformerArch]], ...] = (
        ("decoder 2048x24", lambda: _decoder(2048, 24, 16)),
        ("decoder 2560x32", lambda: _decoder(2560, 32, 32)),
        ("Llama-7B", lambda: LLAMA_7B),
        ("Llama-13B", lambda: LLAMA_13B),
        ("Llama-2-70B", lambda: LLAMA_70B),
    )
    for name, arch in decoders:
        out.append(("decoder-generate", name, lambda a=arch: gen.replace(arch=a())))
    return out


@functools.lru_cache(maxsize=4)
def _size_guide(framework: str) -> tuple[GuideRow, ...]:
    cards = sorted(load_catalog().values(), key=lambda g: (g.usable_bytes, g.id))
    rows = []
    for regime, model, make in _ladder():
        workload = make()
        # The estimator's own verdict on every card: whatever it counts as "must fit" counts here.
        estimates = [estimate(workload, g, framework=framework) for g in cards]
        fitting = [e.gpu for e in estimates if e.verdict == FITS]
        running = [e.gpu for e in estimates if e.verdict != OOM]
        rows.append(
            GuideRow(
                regime=regime,
                model=model,
                params=workload.param_count(),
                peak_bytes=estimates[0].peak_memory_bytes,  # the job's peak does not depend on the card
                fits_class_gb=min((memory_class(g) for g in fitting), default=None),
                runs_class_gb=min((memory_class(g) for g in running), default=None),
                card=fitting[0].id if fitting else None,
                workload=workload,
            )
        )
    return tuple(rows)


def size_guide(framework: str = "torch") -> list[GuideRow]:
    """The guide derived from the estimator: every model of the ladder, in ladder order."""
    return list(_size_guide(framework))


def guide_bands(rows: list[GuideRow] | None = None) -> dict[str, dict[str, tuple[int | None, int | None]]]:
    """band -> regime -> (smallest, largest) class that fits comfortably across the band's models.

    None as the largest means at least one model of the band fits no single card.
    """
    rows = size_guide() if rows is None else rows
    out: dict[str, dict[str, tuple[int | None, int | None]]] = {}
    for row in rows:
        lo, hi = out.setdefault(row.band, {}).get(row.regime, (row.fits_class_gb, row.fits_class_gb))
        classes = [c for c in (lo, row.fits_class_gb) if c is not None]
        new_lo = min(classes) if classes else None
        new_hi = None if (hi is None or row.fits_class_gb is None) else max(hi, row.fits_class_gb)
        out[row.band][row.regime] = (new_lo, new_hi)
    return out
