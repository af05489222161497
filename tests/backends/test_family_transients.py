"""The largest moment of a forward pass without autograd (a prefill's scratch), measured on the
CPU with LiveTensors (every tensor an operator creates, alive at once) against the estimator's
inference_transient_bytes, for mixture-of-experts blocks as transformers 5 runs them: k routed
copies of each token, each with its expert's gate_up output, activation and product."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from fitbench.backends.torch.live_tensors import LiveTensors  # noqa: E402
from fitbench.backends.torch.models import build_model  # noqa: E402
from fitbench.estimate import expert_cost, transformer_cost  # noqa: E402
from tiny_families import tiny_workload  # noqa: E402

pytestmark = pytest.mark.torch


def forward_peak(workload, dtype) -> int:
    torch.manual_seed(0)
    model, _ = build_model(workload, device="cpu", dtype=dtype)
    model.eval()
    ids = torch.randint(0, workload.arch.vocab_size, (workload.batch_size, workload.prompt_tokens))
    with torch.no_grad(), LiveTensors() as live:
        model(input_ids=ids, use_cache=False, logits_to_keep=1)
    return live.peak


@pytest.mark.parametrize("name", ["mixtral-8x7b-instruct", "olmoe-1b-7b"])
@pytest.mark.parametrize(("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_moe_prefill_scratch_is_the_routed_copies(name: str, precision: str, dtype) -> None:
    w = tiny_workload(name, mode="infer", batch_size=4, prompt_tokens=256, new_tokens=1, precision=precision)
    measured = forward_peak(w, dtype)
    assert measured == pytest.approx(transformer_cost.inference_transient_bytes(w), rel=0.06)
    # a dense block of the experts' width would be less than half of it
    dense = (
        w.batch_size
        * w.prompt_tokens
        * (3 * w.arch.expert_intermediate_size * dtype.itemsize + 4 * w.arch.hidden_size * dtype.itemsize)
    )
    assert measured > 2 * dense


def _fused_attention_output_only(query, key, value, *args, **kwargs):
    """What CUDA's fused attention kernels allocate: their output (no score matrix). On the CPU
    an MLA model's differing key and value widths take the math path, whose scores a GPU prefill
    never holds."""
    return torch.zeros((*query.shape[:-1], value.shape[-1]), dtype=query.dtype)


# Families whose hidden width outgrows 3/4 of four expert widths: the combining stage is their peak.
WIDE = {
    "olmoe-1b-7b": {"hidden_size": 512, "intermediate_size": 256},
    "qwen3-30b-a3b": {"hidden_size": 512, "moe_intermediate_size": 256},
    "deepseek-v2-lite-chat": {"hidden_size": 512, "moe_intermediate_size": 256, "intermediate_size": 1024},
    "glm-4.5-air": {"hidden_size": 512, "moe_intermediate_size": 256, "intermediate_size": 1024},
    "solar-open-100b-shape.json": {"hidden_size": 512, "moe_intermediate_size": 256},
    "exaone-moe-shape.json": {"hidden_size": 512, "moe_intermediate_size": 256, "intermediate_size": 1024},
    "afmoe-shape.json": {"hidden_size": 512, "moe_intermediate_size": 256, "intermediate_size": 1024},
}


@pytest.mark.parametrize("name", sorted(WIDE))
def test_moe_prefill_scratch_of_a_wide_model_is_the_combining_stage(name, monkeypatch) -> None:
    """Weighting the routed outputs and putting them back in token order: the gathered input and
    the down projection's output beside the weighted output and its reordered copy, those two in
    FP32 where the router hands FP32 weights (DeepSeek, GLM-4-MoE, Solar Open, EXAONE-MoE, AFMoE:
    FP32_ROUTING_WEIGHT_TYPES)."""
    import torch.nn.functional as F

    from fitbench.workloads.hf_config import workload_from_data
    from tiny_families import tiny_config

    monkeypatch.setattr(F, "scaled_dot_product_attention", _fused_attention_output_only)
    config = {**tiny_config(name), **WIDE[name], "num_hidden_layers": 2}
    w = workload_from_data(
        config,
        name=name,
        source="test",
        mode="infer",
        batch_size=2,
        prompt_tokens=256,
        new_tokens=1,
        precision="bf16",
    )
    measured = forward_peak(w, torch.bfloat16)
    assert measured == pytest.approx(transformer_cost.inference_transient_bytes(w), rel=0.05)
    fp32_weights = w.arch.transformers_type in expert_cost.FP32_ROUTING_WEIGHT_TYPES
    assert fp32_weights == name.startswith(("deepseek", "glm", "solar", "exaone", "afmoe"))
