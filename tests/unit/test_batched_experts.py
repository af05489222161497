"""transformers' generate decodes mixture-of-experts models through batched_mm on a GPU.

generation/utils.py switches grouped_mm experts to batched_mm for the decode loop on any device
but the CPU (every transformers 5 release): each token-expert pair gathers its expert's whole
gate/up and down weights into new tensors, and batched matmuls read those copies. The estimate
counts the copies as a decode step's memory (expert_cost.decode_expert_gathers) and as its
traffic their write and the batched matmul's read, every pair, plus the gather's read of each
expert reached within one launch of the index kernel (expert_kernels `batched`,
expert_cost.batched_gather_reads, Profile.decode_experts_batched); here the real experts
code, run through batched_mm on the CPU, makes exactly those copies.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import expert_cost, transformer_cost
from fitbench.estimate.api import estimate
from fitbench.estimate.profile import get_profile
from fitbench.estimate.speed import generation
from fitbench.workloads import library

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from tiny_families import tiny_workload

BATCH = 3


def _mixtral_decode(batch: int = 4):
    return library.workload_for_model("mixtral-8x7b-instruct").replace(
        mode="infer", batch_size=batch, prompt_tokens=512, new_tokens=64, precision="bf16"
    )


def test_the_decode_gathers_are_the_copies_batched_mm_makes() -> None:
    """One decode forward of a tiny Mixtral through batched_mm: its two largest gathers per MoE
    layer are the gate/up and down weights of every token-expert pair, as estimated."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils._python_dispatch import TorchDispatchMode

    from fitbench.backends.torch.models import build_model

    w = tiny_workload("mixtral-8x7b-instruct", weights="none").replace(
        mode="infer", batch_size=BATCH, prompt_tokens=8, new_tokens=2, precision="fp32"
    )
    model, _ = build_model(w, device="cpu")
    model.eval()
    model.set_experts_implementation("batched_mm")

    class Gathers(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.sizes: list[int] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten.index.Tensor and args[0].dim() == 3:  # a stacked expert weight
                self.sizes.append(out.numel() * out.element_size())
            return out

    with torch.no_grad(), Gathers() as gathers:
        model(torch.randint(3, w.arch.vocab_size, (BATCH, 1)))
    up, down = expert_cost.decode_expert_gathers(w)
    assert up > 0 and down > 0
    assert gathers.sizes == [up, down] * w.arch.moe_layers


def test_a_batched_decode_step_writes_and_reads_each_pairs_copy_and_reads_each_expert_once() -> None:
    """Mixtral at batch 4: 8 pairs of 235 MB gate/up copies, one launch of the gather; the grouped
    path reads the experts reached once, the batched one that plus two passes a pair."""
    arch = _mixtral_decode().arch
    expert = 3 * arch.hidden_size * arch.expert_intermediate_size * 2.0

    def expert_bytes(batched: bool) -> float:
        kernels = expert_cost.expert_kernels(arch, 4, 2.0, 2.0, amp=False, batched=batched)
        return next(k.bytes for k in kernels if k.name == "experts")

    pairs = 4 * arch.experts_per_token
    assert expert_bytes(True) - expert_bytes(False) == pytest.approx(2 * pairs * expert)


def test_the_gather_reads_each_expert_once_a_launch_and_splits_launches_over_2_gib() -> None:
    """gather_reuse.py's reading: one read of each expert reached by a launch's pairs; an output
    over 2 GiB is split along the pairs in halves, each piece reading its own experts."""
    reads = expert_cost.batched_gather_reads
    distinct = transformer_cost.expected_distinct_experts
    small = 2 * 1792 * 2048 * 2  # LFM2-8B-A1B's gate/up: 128 pairs at batch 32 stay in one launch
    assert reads(32, 4, 32, small) == pytest.approx(distinct(32, 4, 32))
    exact = 2 * 1024 * 2048 * 2  # OLMoE's: 256 pairs fill exactly 2 GiB, still one launch
    assert reads(64, 8, 32, exact) == pytest.approx(distinct(64, 8, 32))
    assert reads(64, 8, 32, exact + 2) == pytest.approx(2 * distinct(64, 8, 16))
    big = 2 * 14336 * 4096 * 2  # Mixtral's: 64 pairs make eight launches of four tokens
    assert reads(8, 2, 32, big) == pytest.approx(8 * distinct(8, 2, 4))
    assert reads(8, 2, 1, big) == pytest.approx(2.0)


def test_transformers_generate_decodes_slower_than_grouped_experts_would() -> None:
    """Mixtral at batch 4: the gathers multiply the experts' traffic by about four, which the
    default mode's decode pays and an engine's fused MoE kernels do not."""
    w, h200 = _mixtral_decode(), get_gpu("h200")
    default = get_profile("torch", "default")
    assert default.decode_experts_batched
    assert not get_profile("torch", "tuned").as_engine().decode_experts_batched
    grouped = dataclasses.replace(default, decode_experts_batched=False)
    batched_gpu = generation(w, h200, default).decode.gpu_seconds
    assert batched_gpu > 2.5 * generation(w, h200, grouped).decode.gpu_seconds
    # the prefill runs grouped_mm in both
    assert generation(w, h200, default).prefill.seconds == generation(w, h200, grouped).prefill.seconds


def test_the_decode_step_holds_the_gathered_weights() -> None:
    w = _mixtral_decode(batch=16)
    est = estimate(w, get_gpu("h200"))
    assert est.breakdown["temporaries"] >= sum(expert_cost.decode_expert_gathers(w))
    assert any("batched_mm" in line for line in est.assumptions)
    dense = library.workload_for_model("mistral-7b-instruct-v0.3").replace(
        mode="infer", batch_size=16, prompt_tokens=512, new_tokens=64, precision="bf16"
    )
    assert expert_cost.decode_expert_gathers(dense) == (0.0, 0.0)


def test_fp8_experts_are_read_once_per_pair_by_the_batched_kernel() -> None:
    """fp8 block-scaled experts go through the same switch to fp8's batched kernel, which reads
    each pair's expert by id: one pass per pair, no copy."""
    arch = _mixtral_decode().arch
    tokens = 4

    def expert_bytes(**kw: bool) -> float:
        kernels = expert_cost.expert_kernels(arch, tokens, 2.0, 1.0, amp=False, **kw)
        return next(k.bytes for k in kernels if k.name == "experts")

    expert = 3 * arch.hidden_size * arch.expert_intermediate_size * 1.0
    distinct = transformer_cost.expected_distinct_experts(arch.num_experts, arch.experts_per_token, tokens)
    pairs = tokens * arch.experts_per_token
    assert expert_bytes(batched_fp8=True) - expert_bytes() == pytest.approx((pairs - distinct) * expert)
    assert expert_bytes(batched=True) - expert_bytes() == pytest.approx(2 * pairs * expert)
