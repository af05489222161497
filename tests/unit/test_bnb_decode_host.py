"""bitsandbytes decoding: each converted Linear's forward costs the host its own Python.

A Linear4bit's inference forward (bitsandbytes 0.50: a cast, a view, the gemm_4bit custom op's
Python kernel with its own casts, allocation and ctypes launch, a cast back) and a Linear8bitLt's
(LLM.int8: an autograd Function, the activation quantization with its outlier check, the int8
product and its dequantization, each a custom op with a ctypes launch) issue many Python-level
calls where a 16-bit Linear issues one F.linear (profiles.toml bnb_4bit_linear_host_calls,
bnb_int8_linear_host_calls). LLM.int8's outlier check (`if outliers.any()`) reads a device value
every Linear, so the host waits for the GPU and a step's host and GPU times add (bnb_int8_syncs).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.core.quant import parse_weights
from fitbench.estimate import generate_ops, speed
from fitbench.estimate.profile import get_profile
from fitbench.workloads import library

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from tiny_families import tiny_workload

H100 = get_gpu("h100-sxm")
BASE = get_profile("torch", "default", use_user=False)


@pytest.mark.parametrize(
    "name", ["llama-3.1-8b-instruct", "qwen2.5-7b-instruct", "mixtral-8x7b-instruct", "qwen3-30b-a3b"]
)
def test_the_count_is_the_linears_the_loader_converts(name: str) -> None:
    """The real tiny model (meta device): one call of each nn.Linear the loader swaps for a
    bitsandbytes layer (every one but the heads) in a forward, and none of the stacked experts."""
    pytest.importorskip("transformers")
    import torch
    from torch import nn

    from fitbench.backends.torch.models import build_model
    from fitbench.backends.torch.quant import SKIP

    w = tiny_workload(name, mode="infer", precision="fp16", prompt_tokens=8, new_tokens=2)
    model, _ = build_model(w, device=torch.device("meta"), dtype=torch.float16)
    swapped = sum(
        1
        for path, module in model.named_modules()
        if isinstance(module, nn.Linear) and not any(s in path for s in SKIP)
    )
    for fmt in ("nf4", "int8"):
        assert generate_ops.bnb_linear_calls(w.replace(weights=parse_weights(fmt))) == swapped
    assert generate_ops.bnb_linear_calls(w.replace(weights=parse_weights("awq"))) == 0
    assert generate_ops.bnb_linear_calls(w) == 0


def _decode(fmt: str, profile=BASE) -> speed.Timing:
    w = library.workload_for_model("llama-3.1-8b-instruct").replace(
        mode="infer", batch_size=1, prompt_tokens=128, new_tokens=128, weights=parse_weights(fmt)
    )
    return speed.generation(w, H100, profile).decode


def test_each_converted_linear_adds_its_calls_to_the_decode_step() -> None:
    plain = dataclasses.replace(BASE, bnb_4bit_linear_host_calls=1.0, bnb_int8_linear_host_calls=1.0)
    linears = 32 * 7
    for fmt, per in (("nf4", BASE.bnb_4bit_linear_host_calls), ("int8", BASE.bnb_int8_linear_host_calls)):
        assert per > 5  # several Python-level calls where F.linear is one
        added = _decode(fmt).host_seconds - _decode(fmt, plain).host_seconds
        assert added == pytest.approx(linears * (per - 1) * BASE.generate_host_seconds_per_op)
    # formats whose Linear is one kernel call add nothing
    assert _decode("awq").host_seconds == pytest.approx(_decode("awq", plain).host_seconds)


def test_llm_int8_serializes_host_and_gpu() -> None:
    """An int8 step is the sum of its host and GPU times; NF4 keeps generate's overlap rule."""
    int8 = _decode("int8")
    assert int8.seconds == pytest.approx(int8.host_seconds + int8.gpu_seconds)
    nf4 = _decode("nf4")
    loss = BASE.overlap_loss if BASE.generate_overlap_loss is None else BASE.generate_overlap_loss
    assert nf4.seconds == pytest.approx(speed.overlapped_seconds(nf4.gpu_seconds, nf4.host_seconds, loss))
    no_sync = _decode("int8", dataclasses.replace(BASE, bnb_int8_syncs=False))
    assert no_sync.seconds < int8.seconds
