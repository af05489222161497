"""The routed copies' memory passes and the grouped expert products, as the estimator times them.

An MoE block on transformers' grouped_mm path moves its k routed copies through gathers,
sentinel masks (release-dependent), the gated activation and the routing-weight product, which
run as memory kernels of their own (expert_cost.expert_routing_kernels); its grouped
products sit near the card's ridge point, where their arithmetic and weight reads overlap only
in part (speed.grouped_seconds).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import expert_cost, speed, transformer_cost
from fitbench.estimate.profile import get_profile
from fitbench.estimate.segments import Kernel
from fitbench.workloads import library
from fitbench.workloads.workload import Workload


def _model(name: str, precision: str = "bf16") -> Workload:
    return library.workload_for_model(name, weights="none").replace(
        mode="train", batch_size=2, seq_len=1024, precision=precision
    )


def _moe(precision: str = "bf16") -> Workload:
    return _model("olmoe-1b-7b", precision)


def _names(kernels: list[Kernel]) -> dict[str, Kernel]:
    return {k.name: k for k in kernels}


@pytest.mark.parametrize(
    ("release", "masks"),
    [
        ("5.12.0", (2, 0)),
        ("5.16.1", (2, 0)),
        ("5.17.0", (2, 1)),
        ("5.18.0", (0, 0)),
        ("5.24.0", (0, 0)),
        (None, (0, 0)),
    ],
)
def test_the_sentinel_masks_follow_the_release(release: str | None, masks: tuple[int, int]) -> None:
    assert expert_cost.routing_masks(release) == masks


def test_routed_copies_are_memory_kernels_of_each_moe_layer() -> None:
    w = _moe()
    ks = _names(transformer_cost.forward_kernels(w, w.batch_size, w.seq_len, release="5.24.0"))
    masked, copies = ks["expert_routing_masked"], ks["expert_routing_copies"]
    assert masked.kind == copies.kind == "memory"
    assert masked.count == copies.count == w.arch.moe_layers
    assert masked.ops == copies.ops == 0.0  # their calls are the experts kernel's
    tokens = w.batch_size * w.seq_len
    fwd_index, bwd_index, fwd_stream, bwd_stream = expert_cost.expert_routing_bytes_per_token(
        w.arch, 2.0, 2.0
    )
    assert masked.bytes == tokens * fwd_index and masked.backward_bytes == tokens * bwd_index
    assert copies.bytes == tokens * fwd_stream and copies.backward_bytes == tokens * bwd_stream
    # k copies of the hidden width, at least: more than the token's own row many times over
    assert fwd_index + fwd_stream > 4 * w.arch.experts_per_token * w.arch.hidden_size


def test_release_5_17_masks_cost_more_bytes_than_the_newest() -> None:
    w = _moe()
    tokens = w.batch_size * w.seq_len
    old = _names(transformer_cost.forward_kernels(w, w.batch_size, w.seq_len, release="5.17.0"))
    new = _names(transformer_cost.forward_kernels(w, w.batch_size, w.seq_len, release="5.24.0"))
    k, h, fe = w.arch.experts_per_token, w.arch.hidden_size, w.arch.expert_intermediate_size
    masks = 2 * (2 * k * h * 2) + 4 * k * fe * 2  # two hidden-width and one gate/up-width mask, bf16
    assert old["expert_routing_masked"].bytes - new["expert_routing_masked"].bytes == tokens * masks
    assert old["expert_routing_masked"].kernel_launches == new["expert_routing_masked"].kernel_launches + 3


def test_fp32_routing_weights_widen_the_weighted_copies() -> None:
    arch = _model("mixtral-8x7b-instruct").arch
    bf16 = expert_cost.expert_routing_bytes_per_token(arch, 2.0, 2.0)
    fp32 = expert_cost.expert_routing_bytes_per_token(arch, 2.0, expert_cost.routing_weight_bytes(arch, 2.0))
    assert expert_cost.routing_weight_bytes(arch, 2.0) == 4.0
    assert all(a > b for a, b in zip(fp32, bf16, strict=True))


def test_dense_models_and_decode_steps_have_no_routed_passes() -> None:
    dense = _model("llama-3.2-1b-instruct")
    assert not any("expert_routing" in k.name for k in transformer_cost.forward_kernels(dense, 1, 512))
    w = _moe()
    decode = transformer_cost.forward_kernels(w, 4, 1, kv_len=512, batched_experts=True, release="5.17.0")
    assert not any("expert_routing" in k.name for k in decode)
    assert not _names(decode)["experts"].grouped
    assert _names(transformer_cost.forward_kernels(w, 2, 1024))["experts"].grouped


def test_an_moe_block_counts_its_shared_experts_activation_not_the_dense_width() -> None:
    dt = transformer_cost.activation_dtypes(_moe(), dropout=False)
    moe = _model("qwen3-30b-a3b").arch
    dense_like = dataclasses.replace(moe, num_experts=0, experts_per_token=0)
    with_experts, _ = transformer_cost._elementwise_bytes_per_token(moe, dt)
    as_dense, _ = transformer_cost._elementwise_bytes_per_token(dense_like, dt)
    # Qwen3-MoE has no shared expert: its blocks run no activation of intermediate_size's width
    assert as_dense - with_experts == pytest.approx(5 * moe.intermediate_size * dt.act)


def test_grouped_products_take_the_root_of_the_sum_of_squares() -> None:
    assert speed.grouped_seconds(3.0, 4.0) == pytest.approx(5.0)
    assert speed.grouped_seconds(1.0, 0.0) == pytest.approx(1.0)
    t_c, t_m = 2.0, 1.5
    assert max(t_c, t_m) < speed.grouped_seconds(t_c, t_m) < t_c + t_m


def test_a_grouped_product_near_the_ridge_is_slower_than_the_plain_roofline() -> None:
    gpu, profile = get_gpu("h100-sxm"), get_profile("torch", "default", use_user=False)
    w = _moe()
    # 256 rows an expert: OLMoE's gate/up product over 64 experts of 2048 x 2048
    rows, experts, fin, fout = 256, 64, 2048, 2048
    plain = Kernel(
        name="experts",
        kind="matmul",
        flops=2.0 * rows * experts * fin * fout,
        bytes=experts * fin * fout * 2.0 + rows * experts * (fin + fout) * 2.0,
        ops=0.0,
        launches=1.0,
    )
    grouped = dataclasses.replace(plain, grouped=True)
    t_plain = speed.time_kernels([plain], w, gpu, profile, host_seconds_per_op=0.0).gpu_seconds
    t_grouped = speed.time_kernels([grouped], w, gpu, profile, host_seconds_per_op=0.0).gpu_seconds
    assert t_grouped > 1.2 * t_plain
    # the grouped share and the norm, and nothing else
    eff = profile.matmul_efficiency * speed.gemm_rate_factor(gpu, "bf16") * speed.GROUPED_GEMM_SHARE
    t_c = plain.flops / (gpu.peak("bf16") * eff) + profile.matmul_fixed_seconds
    t_m = plain.bytes / (gpu.stream_bandwidth_bytes_s * profile.memory_efficiency)
    assert t_grouped == pytest.approx(math.hypot(t_c, t_m), rel=1e-6)
    # and its backward keeps the flag
    assert speed.backward_kernels([grouped])[0].grouped


def test_peft_times_the_merged_stacks_weight_gradient_as_a_grouped_product() -> None:
    from fitbench.estimate import peft_speed

    w = _moe().replace(peft="lora", lora_rank=16, lora_targets="attention-mlp")
    merges, backward = peft_speed.expert_adapter_kernels(w)
    gradients = [k for k in backward if k.name.endswith("weight_gradient")]
    assert len(gradients) == 2 and all(k.grouped for k in gradients)
    # the folds are memory passes over the stacks, not grouped products
    assert merges and not any(k.grouped for k in merges)


def test_autocast_folds_and_differentiates_the_experts_adapters_in_fp32() -> None:
    """Under autocast the master weights are FP32 and peft folds them outside autocast, so the
    fold, the merged stack's weight gradient (grouped_mm's per-expert fallback: its grouped kernel
    takes bf16 only) and the factors' gradients are FP32 products; in bf16 they are bf16 ones."""
    from fitbench.catalog import get_gpu
    from fitbench.estimate import peft_speed
    from fitbench.estimate.profile import get_profile

    gpu, profile = get_gpu("h100-sxm"), get_profile("torch", "default", use_user=False)
    lora = {"peft": "lora", "lora_rank": 16, "lora_targets": "attention-mlp"}
    times = {}
    for precision in ("bf16", "amp-bf16"):
        w = _moe().replace(precision=precision, **lora)
        merges, backward = peft_speed.expert_adapter_kernels(w)
        kernels = merges + backward
        assert all(k.compute == ("fp32" if precision == "amp-bf16" else "") for k in kernels), precision
        gradient = next(k for k in backward if k.name.endswith("weight_gradient"))
        assert (gradient.launches or 1.0) > 1.0 if precision == "amp-bf16" else gradient.launches is None
        times[precision] = speed.time_kernels(kernels, w, gpu, profile, host_seconds_per_op=0.0).gpu_seconds
    assert times["amp-bf16"] > 2.5 * times["bf16"]  # FP32 products and FP32 stacks
