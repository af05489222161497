"""TF32 advice: an FP32 PyTorch job on a card with TF32 tensor cores, which PyTorch leaves off for
matmuls by default, and how much faster turning them on is estimated to run.

`fitbench estimate` and `fitbench check` both give it, from here.
"""

from __future__ import annotations

from typing import Any

from fitbench.advise.fixes import MIN_SPEEDUP, throughput_ratio
from fitbench.advise.i18n import LANGS, t
from fitbench.advise.text import speed_text
from fitbench.core.names import Framework
from fitbench.estimate.api import Estimate, estimate
from fitbench.estimate.verdict import OOM


def tf32_advice(results: list[Estimate]) -> list[tuple[Estimate, Estimate]]:
    """(fp32 estimate, the same job with TF32 matmuls) where the card has TF32 tensor cores and
    PyTorch's default (TF32 off for matmuls) costs at least MIN_SPEEDUP."""
    out = []
    for e in results:
        if e.framework != Framework.TORCH or e.workload.precision != "fp32" or "tf32" not in e.gpu.peak_flops:
            continue
        if e.verdict == OOM:
            continue
        alt = estimate(
            e.workload.replace(precision="tf32"), e.gpu, framework=e.framework, exec_mode=e.exec_mode
        )
        if (throughput_ratio(alt, e) or 0.0) >= MIN_SPEEDUP:
            out.append((e, alt))
    return out


def tf32_texts(base: Estimate, alt: Estimate, *, scenario: str | None = None) -> dict[str, str]:
    """ "enable TF32: x faster", in every language; `scenario` names the job in front (check's advice)."""
    ratio = throughput_ratio(alt, base) or 1.0
    card = f"{scenario} ({base.gpu.name})" if scenario else base.gpu.name
    return {
        lg: t("est.tf32", lg, card=card, speedup=f"{ratio:.2f}", speed=speed_text(alt, lg)) for lg in LANGS
    }


def tf32_dict(base: Estimate, alt: Estimate) -> dict[str, Any]:
    """The advice's numbers, as `estimate --json` ("tf32") and check's advice data carry them."""
    return {
        "gpu": base.gpu.id,
        "speedup": throughput_ratio(alt, base),
        "step_seconds": alt.step_seconds,
        "tokens_per_second": alt.tokens_per_second,
        "samples_per_second": alt.samples_per_second,
    }
