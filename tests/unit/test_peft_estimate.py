"""LoRA and QLoRA estimates: adapter arithmetic, the parts of the peak, ordering, and the CLI.

Hand-derived numbers are for Llama-7B (h 4096, MLP 11008, 32 blocks, 32 heads) at rank 16.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from fitbench.catalog import get_gpu
from fitbench.cli.main import main
from fitbench.estimate import expert_cost, peft, peft_options, peft_speed, transformer_cost
from fitbench.estimate.api import estimate
from fitbench.estimate.dtypes import activation_dtypes
from fitbench.estimate.memory import memory_breakdown
from fitbench.estimate.profile import get_profile
from fitbench.estimate.verdict import OOM, verdict
from fitbench.estimate.weights import quantizable_params
from fitbench.workloads import library
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.presets import get_workload

PROFILE = get_profile("torch", "default", use_user=False)
GiB = 2**30
LLAMA_PARAMS = 6_738_415_616


def llama(**overrides: object):
    base = {"mode": "train", "seq_len": 512, "batch_size": 1, "precision": "bf16", "peft": "lora"}
    return get_workload("llm-6b", **{**base, **overrides})


def full_llama(**overrides: object):
    base = {"mode": "train", "seq_len": 512, "batch_size": 1, "precision": "amp-bf16"}
    return get_workload("llm-6b", **{**base, **overrides})


def peak(workload) -> int:
    return memory_breakdown(workload, PROFILE).total


# -- adapter arithmetic ---------------------------------------------------------------------------
def test_llama_7b_adapter_counts_by_hand():
    # attention: q, k, v, o are 4096 x 4096: 16 * 8192 each; MLP: gate/up 4096->11008, down back:
    # 16 * 15104 each. Per block 4 * 131,072 + 3 * 241,664 = 1,249,280; times 32 blocks.
    assert peft.lora_param_count(llama()) == 32 * 1_249_280 == 39_976_960
    assert peft.lora_param_count(llama(lora_targets="attention")) == 32 * 4 * 16 * 8192 == 16_777_216
    assert peft.lora_param_count(llama(lora_targets="all-linear")) == peft.lora_param_count(llama())
    assert peft.trainable_param_count(llama()) == 39_976_960  # the LM head stays frozen


def test_adapters_scale_linearly_with_rank():
    assert peft.lora_param_count(llama(lora_rank=64)) == 4 * peft.lora_param_count(llama(lora_rank=16))


def test_grouped_query_attention_adapts_narrower_k_and_v():
    w = get_workload(
        "llm-70b", mode="train", seq_len=512, precision="bf16", peft="lora", lora_targets="attention"
    )
    h, kv = 8192, 1024
    assert peft.lora_params_per_layer(w) == 16 * ((h + h) + 2 * (h + kv) + (h + h))


def test_encoder_trains_its_classifier_but_not_the_pooler():
    w = get_workload("bert-base-imdb", peft="lora", lora_rank=8)
    assert peft.head_trainable_params(w) == 768 * 2 + 2
    assert peft.trainable_param_count(w) == peft.lora_param_count(w) + 1538
    # 12 blocks x (4 attention 768x768 + 768->3072 + 3072->768) at rank 8
    assert peft.lora_param_count(w) == 12 * 8 * (4 * 1536 + 2 * 3840)


def test_fused_qkv_layouts_adapt_one_matrix():
    gpt2 = TransformerArch(
        kind="decoder",
        vocab_size=50257,
        hidden_size=768,
        num_layers=12,
        num_heads=12,
        intermediate_size=3072,
        max_positions=1024,
        model_type="gpt2",
    )
    w = get_workload("llm-6b", mode="train", seq_len=128, precision="bf16", peft="lora").replace(arch=gpt2)
    names = [n for n, _, _ in peft.lora_linears(w)]
    assert names == ["qkv", "o", "fc1", "fc2"]
    assert peft.lora_params_per_layer(w) == 16 * ((768 + 2304) + 1536 + 2 * 3840)


def test_nf4_constants_are_the_qlora_papers_bits_per_parameter():
    assert peft.NF4_CONSTANT_BITS[False] == 0.5
    assert round(peft.NF4_CONSTANT_BITS[True], 3) == 0.127


# -- memory ---------------------------------------------------------------------------------------
def test_lora_weights_are_the_16_bit_base_and_fp32_adapters():
    parts = memory_breakdown(llama(), PROFILE).parts
    assert parts["weights"] == 2 * LLAMA_PARAMS  # 12.55 GiB
    assert round(parts["weights"] / GiB, 2) == 12.55
    assert parts["quantization_scales"] == 0 and parts["dequant_workspace"] == 0
    assert parts["adapter_weights"] == 4 * 39_976_960
    assert parts["optimizer_state"] == 2 * 4 * 39_976_960  # Adam: two FP32 moments
    assert parts["master_weights"] == 0 and parts["amp_weight_copies"] == 0


def test_qlora_weights_are_nf4_plus_constants_plus_16_bit_rest():
    w = llama(peft="qlora")
    q = quantizable_params(w)
    assert q == 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    parts = memory_breakdown(w, PROFILE).parts
    assert parts["weights"] == q // 2 + (LLAMA_PARAMS - q) * 2
    assert parts["quantization_scales"] == round(q * (8 / 64 + 32 / (64 * 256)) / 8)
    assert parts["dequant_workspace"] == 2 * 4096 * 11008 * 2  # largest Linear, bf16, twice


def test_amp_keeps_the_frozen_base_in_fp32_and_says_so():
    w = llama(precision="amp-bf16")
    parts = memory_breakdown(w, PROFILE).parts
    assert parts["weights"] == 4 * LLAMA_PARAMS
    assert parts["amp_weight_copies"] > 0  # autocast's 16-bit weight copies kept for backward
    assert any("FP32 as loaded" in line for line in peft.assumptions(w))


def test_amp_lora_keeps_the_head_s_16_bit_copy_tied_or_not():
    """The frozen LM head's matmul keeps autocast's 16-bit copy of its FP32 weight for the input
    gradient; a tied head's weight is the embedding's, cast the same way."""
    for tied in (False, True):
        w = llama(precision="amp-bf16")
        w = w.replace(arch=dataclasses.replace(w.arch, tie_embeddings=tied))
        head, _ = peft.peft_segments(w)[-1]
        assert head.name == "head"
        assert head.cast_params == w.arch.vocab_size * w.arch.hidden_size
    assert peft.peft_segments(llama())[-1][0].cast_params == 0  # 16-bit weights: no copy


def test_a_frozen_fused_projection_saves_one_autocast_copy_less_than_separate_ones():
    """Full training under autocast keeps one 16-bit copy of the norm output for a fused
    projection (Phi-3's qkv_proj, gate_up_proj), one per Linear for separate q/k/v and gate/up;
    a frozen block keeps none, so LoRA's saving is what full training counted, not three and
    two copies (which read Phi-3's LoRA blocks 7.5 % low against the meta-device trace)."""
    phi3 = library.workload_for_model("phi-3-mini-4k-instruct", weights="none").arch
    assert phi3.hidden_size == 3072 and transformer_cost.fused_projections(phi3) == (True, True)
    dt = activation_dtypes(llama(precision="amp-bf16"), dropout=False)
    fused_qkv, fused_mlp = transformer_cost.decoder_linear_inputs_saved_bytes_per_token(phi3, dt)
    assert (fused_qkv, fused_mlp) == (3072 * 2, 3072 * 2)
    llama_like = dataclasses.replace(phi3, model_type="llama")
    assert transformer_cost.decoder_linear_inputs_saved_bytes_per_token(llama_like, dt) == (
        3 * 3072 * 2,
        2 * 3072 * 2,
    )
    gap = peft.frozen_savings_per_token(llama_like, dt) - peft.frozen_savings_per_token(phi3, dt)
    assert gap == (2 + 1) * 3072 * 2


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"peft": "qlora"},
        {"checkpointing": True},
        {"peft": "qlora", "checkpointing": True},
        {"precision": "amp-fp16"},
        {"attention": "eager"},
        {"lora_targets": "attention"},
        {"optimizer": "sgd"},
    ],
)
def test_breakdown_adds_up(overrides):
    mem = memory_breakdown(llama(**overrides), PROFILE)
    assert set(mem.parts) == set(peft.PEFT_PART_NAMES)
    assert sum(mem.parts.values()) == mem.total
    assert all(v >= 0 for v in mem.parts.values())
    assert mem.phase in ("backward", "optimizer")
    assert mem.details["trainable_params"] == peft.trainable_param_count(llama(**overrides))


def test_encoder_breakdown_adds_up():
    w = get_workload("bert-base-imdb", peft="lora", precision="amp-fp16")
    est = estimate(w, get_gpu("rtx-3060-12gb"), profile=PROFILE)
    assert sum(est.breakdown.values()) == est.peak_memory_bytes
    assert est.breakdown["weights"] == 4 * w.param_count()
    assert est.breakdown["adapter_weights"] == 4 * peft.lora_param_count(w) + 4 * 1538


def test_activation_change_per_token_by_hand():
    """One middle block of Llama-7B in pure bf16 (fused attention), LoRA minus full training:
    dropped: the Linears' saved inputs 2h (q/k/v) + 2h (gate/up) + 2h (o) + 2f (down), and the
    frozen RMSNorm scales' 16-bit copies 2 * 2h; added per adapted Linear an FP32 dropped input,
    a bool mask and A's FP32 output: 5 * (6h + f) + 7 * 4r."""
    w = llama()
    arch = w.arch
    dt = activation_dtypes(w, dropout=False)
    h, f, r = 4096, 11008, 16
    assert peft.frozen_savings_per_token(arch, dt) == 2 * h + 2 * h + 2 * h + 2 * f + 2 * 2 * h
    assert peft.lora_saved_bytes_per_token(w, dt) == 5 * (6 * h + f) + 7 * 4 * r
    full = transformer_cost.training_segments(dataclasses.replace(w, peft=None))
    lora = [seg for seg, _ in peft.peft_segments(w)]
    assert lora[5].name == full[5].name == "layer4"
    per_token = (lora[5].saved_bytes - full[5].saved_bytes) / 512
    assert per_token == (5 * (6 * h + f) + 7 * 4 * r) - (6 * h + 2 * f + 4 * h)


def test_ordering_qlora_below_lora_below_full_for_7b():
    for ckpt in (False, True):
        full = peak(full_llama(checkpointing=ckpt))
        lora = peak(llama(checkpointing=ckpt))
        qlora = peak(llama(peft="qlora", checkpointing=ckpt))
        assert qlora < lora < full
    assert peak(full_llama()) > 80 * GiB  # Adam full fine-tune: far beyond one card


def test_7b_totals():
    # Weights dominate: 12.55 GiB bf16 (LoRA) or about 3.6 GiB NF4 (QLoRA); with checkpointing only
    # block inputs stay, so the totals sit just above weights + context.
    assert 13 * GiB < peak(llama(checkpointing=True)) < 16 * GiB
    assert 5 * GiB < peak(llama(peft="qlora", checkpointing=True)) < 7 * GiB
    # Without checkpointing the FP32 adapter inputs add ~4.8 GiB of activations at 512 tokens.
    acts = memory_breakdown(llama(), PROFILE).parts["activations"]
    assert 4 * GiB < acts < 6 * GiB


@pytest.mark.parametrize("peft_method", ["lora", "qlora"])
def test_memory_grows_with_rank_and_batch(peft_method):
    ranks = [peak(llama(peft=peft_method, lora_rank=r)) for r in (4, 16, 64, 256)]
    assert ranks == sorted(ranks) and len(set(ranks)) == 4
    batches = [peak(llama(peft=peft_method, batch_size=b)) for b in (1, 2, 4, 8)]
    assert batches == sorted(batches) and len(set(batches)) == 4


@pytest.mark.parametrize("name", ["llm-6b", "bert-base-imdb"])
def test_checkpointing_lowers_activations(name):
    w = llama() if name == "llm-6b" else get_workload("bert-base-imdb", peft="lora", precision="bf16")
    plain = memory_breakdown(w, PROFILE)
    ckpt = memory_breakdown(w.replace(checkpointing=True), PROFILE)
    assert ckpt.parts["activations"] < plain.parts["activations"] / 4
    assert ckpt.total < plain.total


def test_peft_breakdown_refuses_a_full_fine_tune():
    with pytest.raises(ValueError):
        peft.memory_breakdown(full_llama(), PROFILE)


# -- step time ------------------------------------------------------------------------------------
def test_frozen_base_needs_two_thirds_of_the_flops():
    gpu = get_gpu("a100-40gb")
    lora = peft_speed.training_step(llama(), gpu, PROFILE)
    from fitbench.estimate import speed

    full = speed.training_step(full_llama(), gpu, PROFILE)
    assert 0.62 < lora.flops / full.flops < 0.72  # 2x instead of 3x forward FLOPs
    assert lora.seconds > 0 and lora.bottleneck in ("compute", "memory", "overhead")


def test_qlora_pays_for_dequantization():
    gpu = get_gpu("rtx-4090")
    lora = peft_speed.training_step(llama(), gpu, PROFILE)
    qlora = peft_speed.training_step(llama(peft="qlora"), gpu, PROFILE)
    deq = sum(k.bytes * k.count for k in peft_speed.dequant_kernels(llama(peft="qlora")))
    assert qlora.bytes == pytest.approx(lora.bytes + 2 * deq)  # forward and backward
    assert qlora.gpu_seconds > lora.gpu_seconds
    ckpt = peft_speed.training_step(llama(peft="qlora", checkpointing=True), gpu, PROFILE)
    assert ckpt.gpu_seconds > qlora.gpu_seconds  # recomputed forward


# -- options for the advice -----------------------------------------------------------------------
def test_peft_options_on_the_brief_cards():
    for gpu_id in ("rtx-3060-12gb", "rtx-4090", "a100-40gb"):
        gpu = get_gpu(gpu_id)
        rows = peft_options.peft_options(full_llama(), gpu, PROFILE)
        assert [(r["method"], r["checkpointing"]) for r in rows] == [
            (m, c) for m in ("full", "lora", "qlora") for c in (False, True)
        ]
        for r in rows:
            assert r["verdict"] == verdict(r["peak_memory_bytes"], gpu.usable_bytes)
            assert r["peak_memory_bytes"] == sum(r["breakdown"].values())
            assert (r["max_batch_size"] == 0) == (r["verdict"] == OOM)
        assert rows[0]["verdict"] == OOM and rows[0]["precision"] == "amp-bf16"
        assert rows[5]["verdict"] != OOM  # QLoRA + checkpointing fits 12 GB
        assert rows[2]["precision"] == "bf16" and rows[2]["trainable_params"] == 39_976_960


def test_peft_options_from_a_peft_workload_compares_a_mixed_precision_full_fine_tune():
    rows = peft_options.peft_options(llama(), get_gpu("h100-sxm"), PROFILE)
    assert rows[0]["method"] == "full" and rows[0]["precision"] == "amp-bf16"


# -- CLI ------------------------------------------------------------------------------------------
def test_estimate_cli_json_end_to_end(capsys):
    code = main(["estimate", "llm-6b", "--mode", "train", "--peft", "lora", "--gpu", "rtx-4090", "--json"])
    assert code == 0
    (row,) = json.loads(capsys.readouterr().out)["estimates"]
    assert row["precision"] == "bf16" and row["seq_len"] == 512
    assert row["breakdown"]["adapter_weights"] == 4 * 39_976_960
    assert row["peak_memory_bytes"] == sum(row["breakdown"].values()) == peak(llama())
    assert row["verdict"] == "fits" and row["step_seconds"] > 0


def test_estimate_cli_table_for_qlora(capsys):
    code = main(
        [
            "estimate",
            "llm-6b",
            "--mode",
            "train",
            "--peft",
            "qlora",
            "--checkpointing",
            "--gpu",
            "rtx-3060-12gb",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "dequantization workspace" in out and "quantization scales" in out and "fits" in out


def test_merged_expert_stacks_add_one_stack_s_gradient_at_their_backward_peak():
    """Backward writes the down stack's gradient beside the saved merged copies, then frees that
    stack's copy before gate_up's gradient (twice its size) is written: the peak adds one down
    stack's size, where counting both gradients read Mixtral's LoRA step 13 % high against the
    H100 and the meta-device trace."""
    w = library.workload_for_model("mixtral-8x7b-instruct", weights="none").replace(
        mode="train", batch_size=2, seq_len=1024, precision="bf16", peft="lora", lora_rank=16
    )
    e = w.arch.num_experts
    gate_up, down = (e * fin * fout * 2 for _, fin, fout, _ in peft.expert_adapters(w))
    assert gate_up == 2 * down
    assert peft.merged_expert_bytes(w) == gate_up + down
    assert peft.merged_expert_gradient_bytes(w) == max(down, gate_up - down) == down
    moe_layer = next(seg for seg, _ in peft.peft_segments(w) if seg.name == "layer1")
    dense = peft.peft_segments(w.replace(lora_targets="attention"))[2][0]
    assert moe_layer.transient_bytes - dense.transient_bytes == down


def test_gpt_oss_block_counts_its_own_attention_norm_and_experts():
    """gpt-oss's own eager attention, norm and clamped experts (transformer_cost): the softmax in
    the scores' dtype, the norm in FP32 to the end, seven expert widths a routed copy where
    SwiGLU keeps four (tests/backends/test_training_replay.py holds the whole block against the
    meta-device trace's saved tensors)."""
    w = library.workload_for_model("gpt-oss-20b", weights="none").replace(
        mode="train", batch_size=1, seq_len=1024, precision="bf16", peft="lora", lora_rank=16
    )
    arch = w.arch
    assert not transformer_cost.eager_softmax_in_fp32(arch)
    dt = activation_dtypes(w, dropout=False)
    assert transformer_cost.norm_saved_bytes_per_token(arch, arch.hidden_size, dt.res) == 8 * arch.hidden_size
    k, fe = expert_cost.routed_copies(arch), arch.expert_intermediate_size
    plain = dataclasses.replace(arch, model_type="qwen3_moe")
    extra = expert_cost.moe_mlp_saved_bytes_per_token(arch, dt) - expert_cost.moe_mlp_saved_bytes_per_token(
        plain, dt
    )
    assert extra == k * 3 * fe * dt.act
