"""LoRA through peft on the torch backend's tiny models, on the CPU, against the estimator.

Real transformers models, real peft adapters, a real optimizer step; the autograd saved-tensor
hooks measure what a LoRA step keeps for backward, which the estimator predicts.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from fitbench.backends.torch.models import build_model  # noqa: E402
from fitbench.backends.torch.peft_support import (  # noqa: E402
    apply_lora,
    lora_summary,
    quantize_for_qlora,
    trainable_parameters,
)
from fitbench.errors import FitbenchError  # noqa: E402
from fitbench.estimate import peft  # noqa: E402
from fitbench.workloads.arch import TransformerArch  # noqa: E402
from fitbench.workloads.presets import get_workload  # noqa: E402

pytestmark = pytest.mark.torch

TINY_GPT2 = TransformerArch(
    kind="decoder",
    vocab_size=1000,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    intermediate_size=128,
    max_positions=128,
    model_type="gpt2",
)


def tiny(name: str, **overrides: object):
    base = {"mode": "train", "seq_len": 32, "batch_size": 2, "precision": "fp32", "peft": "lora"}
    return get_workload(name, tiny=True, **{**base, **overrides})


def lora_model(workload, dtype=torch.float32):
    torch.manual_seed(0)
    model, _ = build_model(workload, device="cpu", dtype=dtype)
    return apply_lora(model, workload)


def loss_of(model, workload, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    b, s = workload.batch_size, workload.seq_len
    ids = torch.randint(0, workload.arch.vocab_size, (b, s), generator=g)
    if workload.family == "encoder":
        return model(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            token_type_ids=torch.zeros_like(ids),
            labels=torch.randint(0, 2, (b,), generator=g),
        ).loss
    return model(input_ids=ids, labels=ids, use_cache=False).loss


# -- the estimator's adapter count is peft's ------------------------------------------------------
@pytest.mark.parametrize("targets", ["attention", "attention-mlp", "all-linear"])
@pytest.mark.parametrize("name", ["llm-6b", "bert-base-imdb"])
def test_adapter_count_matches_peft(name, targets):
    w = tiny(name, lora_rank=4, lora_targets=targets)
    model = lora_model(w)
    trainable, _ = model.get_nb_trainable_parameters()
    assert trainable == peft.trainable_param_count(w)
    assert sum(p.numel() for p in trainable_parameters(model)) == trainable
    summary = lora_summary(model)
    assert summary["adapter_params"] == peft.lora_param_count(w)
    assert summary["trainable_params"] - summary["adapter_params"] == peft.head_trainable_params(w)


def test_fused_gpt2_adapter_count_matches_peft():
    w = tiny("llm-6b", lora_rank=8).replace(arch=TINY_GPT2)
    model = lora_model(w)
    assert model.get_nb_trainable_parameters()[0] == peft.lora_param_count(w)
    loss_of(model, w).backward()  # Conv1D (fan_in_fan_out) works


def test_adapters_are_fp32_on_a_bf16_base_as_the_estimate_assumes():
    w = tiny("llm-6b", precision="bf16")
    model = lora_model(w, dtype=torch.bfloat16)
    assert lora_summary(model)["adapter_dtype"] == "float32" and peft.ADAPTER_BYTES == 4
    frozen = [p for p in model.parameters() if not p.requires_grad]
    assert frozen and all(p.dtype == torch.bfloat16 for p in frozen)


# -- a real LoRA training step ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["llm-6b", "bert-base-imdb"])
def test_lora_step_changes_only_the_adapters(name):
    w = tiny(name)
    model = lora_model(w)
    optimizer = torch.optim.Adam(trainable_parameters(model), lr=1e-2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for step in range(2):  # B starts at zero, so A's gradient is zero until B has moved once
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(model, w, seed=step)
        loss.backward()
        optimizer.step()
    assert torch.isfinite(loss)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    base = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert base and not (changed & base)  # frozen weights untouched
    assert any(".lora_A." in n for n in changed) and any(".lora_B." in n for n in changed)
    assert all(p.grad is None for n, p in model.named_parameters() if n in base)
    if w.family == "encoder":
        assert any("classifier.modules_to_save" in n for n in changed)


def test_lora_with_activation_checkpointing():
    w = tiny("llm-6b", checkpointing=True)
    model = lora_model(w)
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers 5 name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    assert any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
    loss_of(model, w).backward()
    grads = [p.grad for p in trainable_parameters(model)]
    assert all(g is not None for g in grads) and any(g.abs().sum() > 0 for g in grads)


# -- the estimator's activations are what autograd keeps -------------------------------------------
def saved_storages(model, workload, skip=lambda: False) -> dict[int, int]:
    """Bytes of each distinct storage autograd saves for backward in one training step
    (parameters excluded, and whatever is saved while `skip()` is true), by storage address."""
    params = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}
    seen: dict[int, int] = {}

    def pack(t):
        if not skip() and t.data_ptr() not in params and t.numel() > 1:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_of(model, workload)
    loss.backward()
    return seen


def saved_bytes(model, workload) -> int:
    """Distinct storages autograd saves for backward (parameters excluded)."""
    return sum(saved_storages(model, workload).values())


@pytest.mark.slow
@pytest.mark.parametrize(("precision", "dtype"), [("bf16", torch.bfloat16), ("fp32", torch.float32)])
def test_saved_activations_match_the_estimate(precision, dtype):
    w = tiny("llm-6b", precision=precision, seq_len=128)
    model = lora_model(w, dtype=dtype)
    model.train()
    measured = saved_bytes(model, w)
    estimated = sum(seg.saved_bytes for seg, _ in peft.peft_segments(w))
    # On a CPU, dropout keeps an FP32 noise tensor instead of CUDA's bool mask; and the first
    # block's q/k/v adapters keep no mask at all (their input needs no gradient).
    tokens = w.batch_size * w.seq_len
    fins = [fin for _, fin, _ in peft.lora_linears(w)]
    qkv = sum(fin for n, fin, _ in peft.lora_linears(w) if n in ("q", "k", "v"))
    masked = w.arch.num_layers * sum(fins) - qkv
    estimated += (4 - peft.MASK_BYTES) * masked * tokens
    assert measured == pytest.approx(estimated, rel=0.03)


# -- QLoRA needs bitsandbytes on CUDA ---------------------------------------------------------------
@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is not None, reason="bitsandbytes is installed")
def test_qlora_without_bitsandbytes_is_one_clear_error():
    w = tiny("llm-6b", peft="qlora", precision="bf16")
    with pytest.raises(FitbenchError) as info:
        quantize_for_qlora(w, device="cpu", dtype=torch.bfloat16)
    assert info.value.message == "QLoRA measurement needs bitsandbytes (CUDA)"
    assert "pip install bitsandbytes" in info.value.hint and "--peft qlora" in info.value.hint


def test_apply_lora_refuses_a_workload_without_peft():
    w = tiny("llm-6b")
    model, _ = build_model(w, device="cpu", dtype=torch.float32)
    with pytest.raises(FitbenchError):
        apply_lora(model, dataclasses.replace(w, peft=None))
