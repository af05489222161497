"""Tensor-level calls of a decoder block (Kernel.tensor_ops) and their host share.

A Hugging Face decoder block writes its RMSNorm, rotary embedding and gated activation out as
tensor operations; the estimator counts them among the block's elementwise operations and charges
each the profile's tensor_op_host_share of a reference operation (benchmarks/host_layers.py
measures both on a GPU host)."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import speed, transformer_cost
from fitbench.estimate.profile import get_profile
from fitbench.estimate.segments import Kernel
from fitbench.workloads.library import workload_for_model


def _dt(w):
    return transformer_cost.activation_dtypes(w, dropout=transformer_cost.keeps_dropout_masks(w.arch))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # two RMSNorms (7 passes each), the rotary embedding (12), SwiGLU's activation and product
        ("llama-3.2-1b-instruct", 7 * 2 + 12 + 2),
        # Qwen3: the query and key norms' passes besides
        ("qwen3-0.6b", 7 * 2 + 7 * 2 + 12 + 2),
        # Gemma-3: four block norms and the query and key norms
        ("gemma-3-1b-it", 7 * 4 + 7 * 2 + 12 + 2),
        # GPT-2: LayerNorm modules and learned positions; its GELU written in Python (8 in bf16)
        ("gpt2", 8),
        # BERT: module calls only (LayerNorm, GELU, dropout)
        ("bert-base-uncased", 0),
    ],
)
def test_tensor_level_calls_of_a_block(model: str, expected: int) -> None:
    w = workload_for_model(model, mode="train", precision="bf16", batch_size=1, seq_len=128)
    dt = _dt(w)
    tensor = transformer_cost.elementwise_tensor_ops(w.arch, dt)
    assert tensor == expected
    _, ops = transformer_cost._elementwise_bytes_per_token(w.arch, dt)
    assert tensor <= ops  # a part of the block's elementwise operations, never more


def test_the_elementwise_kernel_carries_them_forward_and_backward() -> None:
    w = workload_for_model("llama-3.2-1b-instruct", mode="train", precision="bf16", batch_size=1, seq_len=128)
    profile = get_profile("torch", "default", use_user=False)
    ks = speed.training_kernels(w, profile)
    fwd = next(k for k in ks if k.name == "elementwise")
    bwd = next(k for k in ks if k.name == "elementwise.backward")
    assert fwd.tensor_ops == transformer_cost.elementwise_tensor_ops(w.arch, _dt(w))
    assert bwd.tensor_ops == pytest.approx(fwd.tensor_ops * speed.BACKWARD_HOST_SHARE)
    assert fwd.fused is not None and fwd.fused.tensor_ops == fwd.tensor_ops


def test_host_time_charges_tensor_ops_at_the_share() -> None:
    base = get_profile("torch", "default", use_user=False)
    w = workload_for_model("qwen3-0.6b", mode="train", precision="bf16", batch_size=1, seq_len=128)
    gpu = get_gpu("h100-sxm")
    k = Kernel(name="elementwise", kind="memory", flops=0.0, bytes=1e6, count=3, ops=40.0, tensor_ops=28.0)

    def host(share: float) -> float:
        p = dataclasses.replace(base, tensor_op_host_share=share)
        return speed.time_kernels([k], w, gpu, p, host_seconds_per_op=1.0).host_seconds

    assert host(1.0) == pytest.approx(3 * 40.0)
    assert host(0.25) == pytest.approx(3 * (12.0 + 0.25 * 28.0))
    # the launches stay the operations' (the host share moves no GPU work)
    assert k.kernel_launches == 40.0


def test_a_decoder_steps_host_falls_by_its_tensor_calls_only() -> None:
    """Lowering the share lowers a decoder step's host time by exactly its tensor-level calls,
    forward and backward nodes, and leaves BERT's and ResNet's steps as they were."""
    base = dataclasses.replace(get_profile("torch", "default", use_user=False), tensor_op_host_share=1.0)
    cheap = dataclasses.replace(base, tensor_op_host_share=0.5)
    gpu = get_gpu("h100-sxm")
    w = workload_for_model("llama-3.2-1b-instruct", mode="train", precision="bf16", batch_size=1, seq_len=128)
    per_layer = transformer_cost.elementwise_tensor_ops(w.arch, _dt(w)) * (1 + speed.BACKWARD_HOST_SHARE)
    drop = speed.training_step(w, gpu, base).host_seconds - speed.training_step(w, gpu, cheap).host_seconds
    assert drop == pytest.approx(0.5 * per_layer * w.arch.num_layers * base.host_seconds_per_op)
    from fitbench.workloads.presets import get_workload

    bert = workload_for_model("bert-base-uncased", mode="train", precision="fp32", batch_size=2, seq_len=128)
    for other in (bert, get_workload("resnet50-cifar10")):
        assert (
            speed.training_step(other, gpu, cheap).host_seconds
            == speed.training_step(other, gpu, base).host_seconds
        )


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "train", "precision": "bf16", "batch_size": 2, "seq_len": 256},
        {"mode": "train", "precision": "amp-bf16", "batch_size": 2, "seq_len": 256, "checkpointing": True},
        {"mode": "train", "precision": "bf16", "batch_size": 2, "seq_len": 256, "peft": "lora"},
        {"mode": "infer", "precision": "bf16", "batch_size": 2, "prompt_tokens": 256, "new_tokens": 16},
    ],
)
def test_a_lower_share_never_adds_host_time_and_leaves_decode_calls_alone(fields: dict) -> None:
    """Where the estimate zeroes a kernel's operations (a decode step's calls are generate_ops'
    count), its tensor-level calls go with them: the share only ever lowers a host time, and a
    decode step's host time does not move with it."""
    from fitbench.estimate.api import estimate

    base = get_profile("torch", "default", use_user=False)
    gpu = get_gpu("h100-sxm")
    w = workload_for_model("qwen3-0.6b", **fields)
    full = estimate(w, gpu, profile=dataclasses.replace(base, tensor_op_host_share=1.0))
    cheap = estimate(w, gpu, profile=dataclasses.replace(base, tensor_op_host_share=0.25))
    assert 0.0 < cheap.host_seconds <= full.host_seconds
    if w.is_generation:
        assert cheap.host_seconds == pytest.approx(full.host_seconds)
    else:
        assert cheap.host_seconds < full.host_seconds


def test_the_profiles_share_is_what_the_stored_h100_layers_imply(capsys) -> None:
    """profiles.toml's tensor_op_host_share is the median share `host_layers.py --share` reads off
    the committed H100 measurement (decoder layers against BERT-base's, same process)."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    import host_layers

    stored = root / "benchmarks" / "results" / "host-layers-h100-2026-12-06.json"
    assert host_layers.main(["--share", str(stored)]) == 0
    out = capsys.readouterr().out
    fitted = float(out.split("tensor_op_host_share: median ")[1].split()[0])
    assert fitted == pytest.approx(
        get_profile("torch", "default", use_user=False).tensor_op_host_share, abs=0.005
    )
    assert "over 16 decoder layers" in out


@pytest.mark.slow
@pytest.mark.torch
def test_host_layers_measures_real_layers_and_parts_on_the_cpu(tmp_path) -> None:
    """benchmarks/host_layers.py end to end on a CPU: two families at two depths through the torch
    backend's session, every part chained and differentiated, the shares summarised."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import host_layers

    out = tmp_path / "layers.json"
    args = ["--device", "cpu", "--families", "bert-base-uncased", "llama-3.2-1b-instruct"]
    assert host_layers.main([*args, "--steps", "2", "--calls", "2", "--repeats", "1", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = {(r["family"], r["precision"]): r for r in data["layers"]}
    assert set(rows) == {(f, p) for f in args[3:] for p in host_layers.PRECISIONS}
    llama = rows[("llama-3.2-1b-instruct", "bf16")]
    # the count splits into reference and tensor-level operations, the latter the block's own
    assert llama["tensor_units_per_layer"] == pytest.approx(28 * 1.5)
    assert rows[("bert-base-uncased", "bf16")]["tensor_units_per_layer"] == 0
    assert all(r["seconds_per_layer"] > 0 for r in rows.values())
    assert {p["part"] for p in data["parts"]} == set(host_layers.PART_OPS)
    assert data["tensor_op_host_share"] is not None


def test_ministral3_scales_its_queries_by_position_in_every_block() -> None:
    """Ministral 3's attention multiplies the rotated queries by Llama 4's position scale, which
    each layer computes again from the position ids: nine tensor-level calls (the decode count of
    benchmarks/generate_ops_families.py on a real tiny model says the same) and a pass over q;
    Mistral's blocks of the same sizes have neither."""
    import json
    from pathlib import Path

    from fitbench.workloads.hf_config import workload_from_data

    layout = Path(__file__).resolve().parents[2] / "benchmarks" / "configs" / "ministral-3-8b-shape.json"
    config = json.loads(layout.read_text(encoding="utf-8"))
    shape = dict(mode="train", precision="bf16", batch_size=1, seq_len=128)
    ministral3 = workload_from_data(config, name="m3", source="m3", **shape)
    mistral = workload_from_data({**config, "model_type": "mistral"}, name="m", source="m", **shape)
    assert ministral3.param_count() == mistral.param_count()
    dt = _dt(ministral3)
    extra = transformer_cost.elementwise_tensor_ops(ministral3.arch, dt)
    extra -= transformer_cost.elementwise_tensor_ops(mistral.arch, dt)
    assert extra == transformer_cost.POSITION_SCALE_OPS == 9
    (b3, ops3), (b, ops) = (
        transformer_cost._elementwise_bytes_per_token(w.arch, dt) for w in (ministral3, mistral)
    )
    assert ops3 - ops == 9
    assert b3 - b == 2 * ministral3.arch.q_dim * dt.act
