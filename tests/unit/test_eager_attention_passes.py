"""Eager attention's traffic over its scores (transformer_cost.eager_score_bytes) equals what the
real Hugging Face BERT, GPT-2, Llama and Gemma-2 eager attention moves (a forward, and for the
16-bit decoders their backward too): every ATen operation that reads or writes a (batch x heads)
x queries x keys tensor is counted by its bytes, views aside, on tiny models on the CPU, with a
padded batch (its mask is added, as in real data)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from fitbench.estimate.dtypes import ActivationDtypes  # noqa: E402
from fitbench.estimate.transformer_cost import eager_score_bytes  # noqa: E402

pytestmark = pytest.mark.torch

B, S, HEADS = 2, 40, 4  # no other tensor of the block has B*HEADS*S*S elements
VIEWS = {
    "view",
    "_unsafe_view",
    "expand",
    "reshape",
    "transpose",
    "t",
    "detach",
    "alias",
    "as_strided",
    "slice",
}


class ScoreTraffic(TorchDispatchMode):
    """Bytes read and written by ATen operations on score-sized tensors (B*HEADS*S*S elements)."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.__name__.split(".")[0] in VIEWS:
            return out
        tensors = [x for x in args if isinstance(x, torch.Tensor)]
        tensors += [
            x for x in (out if isinstance(out, tuple | list) else [out]) if isinstance(x, torch.Tensor)
        ]
        self.bytes += sum(t.numel() * t.element_size() for t in tensors if t.numel() == B * HEADS * S * S)
        return out


def forward_score_bytes(model, **inputs) -> float:
    model.config._attn_implementation = "eager"
    mask = torch.ones(B, S, dtype=torch.long)
    mask[0, -5:] = 0  # one padded sequence: the mask is materialised and added
    counter = ScoreTraffic()
    with torch.no_grad(), counter:
        model(input_ids=torch.randint(0, 100, (B, S)), attention_mask=mask, **inputs)
    return counter.bytes / (B * HEADS * S * S)


def test_bert_and_gpt2_eager_forward_move_what_the_estimate_counts() -> None:
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    fp32_inference = ActivationDtypes(act=4, res=4, mask=0, amp=False)
    bert = BertModel(
        BertConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=HEADS, intermediate_size=128)
    )
    gpt2 = GPT2Model(GPT2Config(n_embd=64, n_layer=1, n_head=HEADS, n_positions=64))
    for model in (bert.eval(), gpt2.eval()):
        assert forward_score_bytes(model) == eager_score_bytes(fp32_inference), type(model).__name__


def test_training_adds_dropouts_passes_and_its_mask() -> None:
    train = ActivationDtypes(act=4, res=4, mask=1, amp=False)
    infer = ActivationDtypes(act=4, res=4, mask=0, amp=False)
    assert eager_score_bytes(train) == eager_score_bytes(infer) + 2 * 4 + 1


def forward_and_backward_score_bytes(model) -> tuple[float, float]:
    """Score bytes per element of a training forward and of its backward (no dropout)."""
    model.config._attn_implementation = "eager"
    mask = torch.ones(B, S, dtype=torch.long)
    mask[0, -5:] = 0
    counter = ScoreTraffic()
    with counter:
        out = model(input_ids=torch.randint(0, 100, (B, S)), attention_mask=mask)
        forward = counter.bytes
        out.last_hidden_state.float().sum().backward()
    return forward / (B * HEADS * S * S), (counter.bytes - forward) / (B * HEADS * S * S)


def test_16_bit_decoders_take_softmax_in_fp32_and_gpt2_does_not() -> None:
    """transformers' shared eager attention copies 16-bit scores up to FP32 for softmax and back
    (forward), and its backward moves EAGER_UPCAST_BACKWARD_RATIO of that; GPT-2's own eager
    code keeps softmax in the scores' dtype. Gemma-2 adds its soft-capping's passes."""
    from transformers import Gemma2Config, Gemma2Model, GPT2Config, GPT2Model, LlamaConfig, LlamaModel

    from fitbench.estimate.transformer_cost import (
        EAGER_UPCAST_BACKWARD_RATIO,
        SOFTCAP_PASSES,
        eager_upcasts,
    )
    from fitbench.workloads.hf_config import arch_from_hf_config

    bf16 = ActivationDtypes(act=2, res=2, mask=0, amp=False)
    llama = LlamaConfig(
        hidden_size=64, num_hidden_layers=1, num_attention_heads=HEADS, intermediate_size=128, vocab_size=128
    )
    gemma2 = Gemma2Config(
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        head_dim=16,
        intermediate_size=128,
        vocab_size=128,
        sliding_window=4096,
    )
    gpt2 = GPT2Config(n_embd=64, n_layer=1, n_head=HEADS, n_positions=64, attn_pdrop=0.0, resid_pdrop=0.0)
    cases = [(LlamaModel, llama, 0), (Gemma2Model, gemma2, SOFTCAP_PASSES * bf16.act), (GPT2Model, gpt2, 0)]
    for cls, config, capping in cases:
        torch.manual_seed(0)
        model = cls(config).to(torch.bfloat16).train()
        upcast = eager_upcasts(arch_from_hf_config(config.to_dict(), source="config.json"), bf16)
        assert upcast is (cls is not GPT2Model)
        forward, backward = forward_and_backward_score_bytes(model)
        assert forward == eager_score_bytes(bf16, upcast=upcast) + capping, cls.__name__
        if upcast:
            assert backward == pytest.approx(EAGER_UPCAST_BACKWARD_RATIO * forward, rel=0.02), cls.__name__


def test_gpt_oss_keeps_its_softmax_in_the_scores_dtype() -> None:
    """gpt-oss's own eager attention takes softmax in its logits' dtype over the scores and the
    sink (`softmax(..., dtype=combined_logits.dtype)`): no FP32 copies, unlike Llama's path."""
    from fitbench.estimate.transformer_cost import eager_upcasts
    from fitbench.workloads import library

    bf16 = ActivationDtypes(act=2, res=2, mask=0, amp=False)
    assert not eager_upcasts(library.workload_for_model("gpt-oss-20b").arch, bf16)
    assert eager_upcasts(library.workload_for_model("gemma-2-2b-it").arch, bf16)
    fp32 = ActivationDtypes(act=4, res=4, mask=0, amp=False)
    assert not eager_upcasts(library.workload_for_model("gemma-2-2b-it").arch, fp32)
