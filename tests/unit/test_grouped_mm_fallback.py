"""torch's grouped GEMM kernel exists for bf16 on compute capability 9.0 / 10.0 only; elsewhere,
and for FP16 or FP32 weights on any card, `_grouped_mm` loops over the experts with one mm each
(speed.grouped_mm_fast_path, expert_cost.expert_kernels' fallback launches)."""

from __future__ import annotations

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.estimate.speed import grouped_mm_fast_path
from fitbench.workloads import library


@pytest.mark.parametrize(
    ("gpu", "fast"),
    [
        ("h100-sxm", True),
        ("h200", True),
        ("b200", True),
        ("a100-80gb", False),
        ("rtx-4090", False),
        ("l4", False),
        ("rtx-5090", False),
        ("mi300x", False),
    ],
)
def test_the_grouped_kernel_exists_on_hopper_and_data_centre_blackwell_only(gpu: str, fast: bool) -> None:
    assert grouped_mm_fast_path(get_gpu(gpu)) is fast


def _host(name: str, precision: str, gpu: str) -> float:
    w = library.workload_for_model(name, weights="none").replace(
        mode="train", batch_size=2, seq_len=1024, precision=precision
    )
    return estimate(w, get_gpu(gpu)).host_seconds


def test_bf16_experts_pay_the_per_expert_loop_where_the_card_has_no_grouped_kernel() -> None:
    moe = "qwen3-30b-a3b"
    assert _host(moe, "bf16", "a100-80gb") > _host(moe, "bf16", "h100-sxm") * 1.2
    # FP16 weights take the loop on every card, as bf16 does on an A100
    assert _host(moe, "fp16", "h100-sxm") == pytest.approx(_host(moe, "bf16", "a100-80gb"))
    # a dense model's host work does not depend on the card
    dense = "llama-3.2-1b-instruct"
    assert _host(dense, "bf16", "a100-80gb") == pytest.approx(_host(dense, "bf16", "h100-sxm"))
