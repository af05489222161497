"""bitsandbytes through transformers leaves a MoE's stacked experts in 16 bit.

bitsandbytes converts nn.Linear modules; transformers 5 stores the routed experts of every MoE
family but Llama-4 as 3-D parameters (gate_up_proj, down_proj) and the router as a module holding
a weight, so `--weights nf4` / `int8` on a Mixtral quantizes its attention and leaves the router
and the experts, nearly all of its weights, in 16 bit (bitsandbytes issue #1849). fitbench's own
bitsandbytes loader (backends/torch/quant.py) swaps the same modules. A serving engine quantizes
the experts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.core.quant import parse_weights
from fitbench.estimate import expert_cost
from fitbench.estimate.api import estimate
from fitbench.estimate.weights import experts_stay_16_bit, quantized_matrices, weight_bytes
from fitbench.workloads import library

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from tiny_families import tiny_workload


def _converted(workload, *, engine: bool = False) -> int:
    return sum(m.copies * m.fin * m.fout for m in quantized_matrices(workload, engine=engine))


@pytest.mark.parametrize("name", ["mixtral-8x7b-instruct", "qwen3-30b-a3b", "olmoe-1b-7b"])
def test_the_estimate_converts_the_linears_bitsandbytes_swaps(name: str) -> None:
    """The real tiny model (meta device): the weights of the nn.Linear modules the loader swaps
    (every one but the heads) are the weights the estimate stores in 4 bit."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch
    from torch import nn

    from fitbench.backends.torch.models import build_model
    from fitbench.backends.torch.quant import SKIP

    w = tiny_workload(name, mode="infer", precision="fp16", prompt_tokens=8, new_tokens=2)
    w = w.replace(weights=parse_weights("nf4"))

    model, _ = build_model(w, device=torch.device("meta"), dtype=torch.float16)
    swapped = sum(
        module.weight.numel()
        for path, module in model.named_modules()
        if isinstance(module, nn.Linear) and not any(s in path for s in SKIP)
    )
    assert experts_stay_16_bit(w.weight_format, w.arch)
    assert swapped == _converted(w)
    assert swapped < _converted(w, engine=True)


def test_mixtral_in_4_bit_through_transformers_holds_its_experts_in_16_bit() -> None:
    w = library.workload_for_model("mixtral-8x7b-instruct").replace(
        mode="infer", batch_size=1, prompt_tokens=512, new_tokens=64, weights=parse_weights("nf4")
    )
    transformers_bytes, _ = weight_bytes(w)
    engine_bytes, _ = weight_bytes(w, engine=True)
    assert transformers_bytes > 3 * engine_bytes  # the experts are ~96 % of Mixtral's weights
    est = estimate(w, get_gpu("h200"))
    assert est.breakdown["weights"] == transformers_bytes
    assert any("issue #1849" in line for line in est.assumptions)
    # and generate's decode steps gather those 16-bit experts as batched_mm does
    assert expert_cost.decode_expert_gathers(w)[0] > 0
    awq = w.replace(weights=parse_weights("awq"))
    assert expert_cost.decode_expert_gathers(awq) == (0.0, 0.0)


def test_dense_models_and_llama4_quantize_as_before() -> None:
    nf4 = parse_weights("nf4")
    dense = library.workload_for_model("mistral-7b-instruct-v0.3").replace(mode="infer", weights=nf4)
    assert weight_bytes(dense) == weight_bytes(dense, engine=True)
    llama4 = library.workload_for_model("llama-4-scout-17b-16e-instruct").replace(mode="infer", weights=nf4)
    assert not experts_stay_16_bit(nf4, llama4.arch)  # transformers unfuses them into Linears first
    assert weight_bytes(llama4) == weight_bytes(llama4, engine=True)
    gptq = parse_weights("gptq-4bit")
    mixtral = library.workload_for_model("mixtral-8x7b-instruct").replace(mode="infer", weights=gptq)
    assert not experts_stay_16_bit(gptq, mixtral.arch)


@pytest.mark.parametrize("name", ["mixtral-8x7b-instruct", "olmoe-1b-7b"])
def test_qlora_quantizes_the_linears_the_loader_swaps(name: str) -> None:
    """QLoRA's NF4 goes through the same bitsandbytes swap: on a MoE the routed experts stay in
    the base dtype, so the quantized weights are the swapped Linears' of the real tiny model."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch
    from torch import nn

    from fitbench.backends.torch.models import build_model
    from fitbench.backends.torch.quant import SKIP
    from fitbench.estimate import peft
    from fitbench.estimate.profile import get_profile

    w = tiny_workload(name, mode="train", precision="bf16", batch_size=1, seq_len=16, peft="qlora")
    model, _ = build_model(w, device=torch.device("meta"), dtype=torch.bfloat16)
    swapped = sum(
        module.weight.numel()
        for path, module in model.named_modules()
        if isinstance(module, nn.Linear) and not any(s in path for s in SKIP)
    )
    details = peft.memory_breakdown(w, get_profile("torch", "default")).details
    assert details["quantized_params"] == swapped
    # and the step dequantizes those same weights, no more
    from fitbench.estimate.peft_speed import NF4_BITS, dequant_kernels

    per_weight = NF4_BITS / 8 + peft.NF4_CONSTANT_BITS[peft.DOUBLE_QUANT] / 8 + peft.peft_bytes(w).compute
    assert sum(k.bytes * k.count for k in dequant_kernels(w)) == pytest.approx(swapped * per_weight)
    assert any("routed experts" in line for line in peft.assumptions(w))


def test_a_serving_engine_decodes_the_experts_it_quantized() -> None:
    """The engine's profile loads weights as the engine does: its decode step reads 4-bit
    experts, where transformers' own generate reads the 16-bit ones it left."""
    import dataclasses

    from fitbench.estimate.profile import get_profile
    from fitbench.estimate.speed import generation

    w = library.workload_for_model("mixtral-8x7b-instruct").replace(
        mode="infer", batch_size=1, prompt_tokens=512, new_tokens=64, weights=parse_weights("nf4")
    )
    engine = get_profile("torch", "tuned").as_engine()
    assert engine.engine_loading
    as_transformers = dataclasses.replace(engine, engine_loading=False)
    h200 = get_gpu("h200")
    assert generation(w, h200, engine).decode.bytes < 0.5 * generation(w, h200, as_transformers).decode.bytes
