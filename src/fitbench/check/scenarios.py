"""The brief's scenarios as workloads: at the brief's settings (what is estimated) and as this
machine measures them (the tiny variants on a CPU or with --tiny)."""

from __future__ import annotations

from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

# The brief's scenarios: (preset, precision override). BERT runs with and without AMP, as in the brief
# (Paddle's AMP with a loss scaler, hence fp16).
SCENARIOS: tuple[tuple[str, str | None], ...] = (
    ("resnet50-cifar10", None),
    ("bert-base-imdb", None),
    ("bert-base-imdb", "amp-fp16"),
    ("llm-6b", None),
)
# CPU autocast computes in bfloat16; the tiny AMP row uses it there.
CPU_AMP = "amp-bf16"


def scenario_workloads(tiny: bool, device: str) -> list[tuple[str, Workload, Workload]]:
    """(key, the workload at the brief's settings, the workload to measure) per scenario."""
    out = []
    for name, precision in SCENARIOS:
        full = get_workload(name, precision=precision)
        if tiny:
            tiny_precision = None if precision is None else (CPU_AMP if device == "cpu" else precision)
            measured = get_workload(name, tiny=True, precision=tiny_precision)
        else:
            measured = full
        out.append((f"{name} · {full.precision}", full, measured))
    return out
