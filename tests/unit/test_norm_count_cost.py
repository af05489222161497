"""A block's elementwise work counts every norm it runs: Gemma-2/3's four (pre and post norms)
and the query and key norms of Qwen3, Gemma-3 and OLMo-2, each the seven FP32 passes of
transformers' RMSNorm over its width (the same rule as Llama's two). Measured on an H200, a
Qwen3-0.6B training step spent 120 ms of its 192 ms of kernels in elementwise work where the
estimate counted 44 ms before these norms were counted (benchmarks/profile_step.py)."""

from __future__ import annotations

import dataclasses

from fitbench.estimate import transformer_cost
from fitbench.workloads.presets import get_workload

TOKENS = 2 * 256


def _elementwise(workload):
    kernels = transformer_cost.forward_kernels(workload, 2, 256)
    return next(k for k in kernels if k.name == "elementwise")


def llama():
    return get_workload("llm-6b", mode="train", precision="amp-bf16", seq_len=256, batch_size=2)


def test_each_extra_norm_adds_seven_fp32_passes_over_the_hidden_width():
    base = llama()
    four = base.replace(arch=dataclasses.replace(base.arch, norms_per_layer=4))
    extra = _elementwise(four).bytes - _elementwise(base).bytes
    assert extra == TOKENS * 2 * 7 * 2 * base.arch.hidden_size * 4
    assert _elementwise(four).ops - _elementwise(base).ops == 2 * 7


def test_query_and_key_norms_pass_over_q_and_k():
    base = llama()
    normed = base.replace(arch=dataclasses.replace(base.arch, qk_norm="head"))
    extra = _elementwise(normed).bytes - _elementwise(base).bytes
    assert extra == TOKENS * 7 * 2 * (base.arch.q_dim + base.arch.kv_dim) * 4
    assert _elementwise(normed).ops - _elementwise(base).ops == 2 * 7


def test_a_norm_keeps_what_its_implementation_saves_for_backward():
    """Llama's RMSNorm: its FP32 input and its normalised tensor at the input's width; Gemma's
    and OLMo-2's: both FP32; a LayerNorm with parameters: its input; OLMo-1's LayerNorm without
    parameters: the FP32 copy it normalises, whatever the input's width (benchmarks/
    training_replay.py: OLMo-7B's LoRA blocks in bf16 read 7.6 % under the trace without it)."""
    arch = llama().arch
    width = arch.hidden_size
    cases = [
        (arch, 2, 6 * width),
        (dataclasses.replace(arch, model_type="gemma2"), 2, 8 * width),
        (dataclasses.replace(arch, norm="layernorm"), 2, 2 * width),
        (dataclasses.replace(arch, norm="nonparametric"), 2, 4 * width),
        (dataclasses.replace(arch, norm="nonparametric"), 4, 4 * width),
        (dataclasses.replace(arch, model_type="cohere2"), 2, 12 * width),
    ]
    for a, input_bytes, saved in cases:
        assert transformer_cost.norm_saved_bytes_per_token(a, width, input_bytes) == saved


def test_a_frozen_norm_keeps_what_its_input_gradient_needs():
    """With the weight frozen (LoRA): an RMSNorm only its FP32 input; Command-R's norm its two
    mean-subtracted FP32 copies (the normalised tensor served the weight's gradient only); a
    LayerNorm everything it kept (benchmarks/training_replay.py: Command-R7B's LoRA blocks read
    9.4 % under the trace when counted as RMSNorms, 4.6 % now; its full blocks to 0.1 MB)."""
    arch = llama().arch
    width = arch.hidden_size
    frozen = transformer_cost.frozen_norm_saved_bytes_per_token
    assert frozen(arch, width, 2) == 4 * width
    assert frozen(dataclasses.replace(arch, model_type="cohere"), width, 2) == 8 * width
    layernorm = dataclasses.replace(arch, norm="layernorm")
    assert frozen(layernorm, width, 2) == transformer_cost.norm_saved_bytes_per_token(layernorm, width, 2)
