"""Multi-GPU estimates: the published ZeRO/DeepSpeed numbers, sharding invariants, minimum GPU
counts and the communication model."""

from __future__ import annotations

import pytest

from fitbench.catalog import get_gpu
from fitbench.core.units import GiB, MiB
from fitbench.errors import FitbenchError
from fitbench.estimate import communication, limits, timing
from fitbench.estimate import distributed as dist
from fitbench.estimate.api import estimate
from fitbench.estimate.breakdown import PART_NAMES
from fitbench.estimate.memory import memory_breakdown
from fitbench.estimate.profile import get_profile
from fitbench.estimate.single_device import single_device_breakdown
from fitbench.estimate.timing import step_timing
from fitbench.workloads.presets import BERT_BASE, LLAMA_7B, LLAMA_70B, get_workload

PROFILE = get_profile("torch", "default", use_user=False)
TUNED = get_profile("torch", "tuned", use_user=False)
H100 = get_gpu("h100-sxm")


def llama_train(**overrides: object):
    fields: dict[str, object] = {"mode": "train", "seq_len": 1024, "batch_size": 1, "precision": "amp-bf16"}
    return get_workload("llm-6b", **{**fields, **overrides})


# -- DeepSpeed's memory estimator, as DeepSpeed writes it -----------------------------------------
# Transcribed from DeepSpeed 0.19.6 (github.com/deepspeedai/DeepSpeed, commit edaa722), no offload.


def deepspeed_estimate_zero2_gpu_mem(
    total_params: int, num_gpus_per_node: int = 1, num_nodes: int = 1
) -> int:
    # deepspeed/runtime/zero/stage_1_and_2.py, estimate_zero2_model_states_mem_needs, lines 3087-3095
    total_gpus = num_nodes * num_gpus_per_node
    gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
    return int(gpu_mem)


def deepspeed_estimate_zero3_gpu_mem(
    total_params: int, largest_layer_params: int, num_gpus_per_node: int = 1, num_nodes: int = 1
) -> int:
    # deepspeed/runtime/zero/stage3.py, estimate_zero3_model_states_mem_needs, lines 3753-3774
    total_gpus = num_nodes * num_gpus_per_node
    largest_layer_memory = 4 * largest_layer_params
    gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
    return int(gpu_mem)


def deepspeed_stage1_gpu_mem(total_params: int, num_gpus_per_node: int = 1, num_nodes: int = 1) -> int:
    # No stage-1 estimator in DeepSpeed: docs/code-docs/source/memory.rst's
    # "4 * params + 16 * params / (total number of gpus)" (the stage-2 line before the 16-bit
    # gradients were partitioned in the count), written as estimate_zero2 writes its terms.
    total_gpus = num_nodes * num_gpus_per_node
    return int(4 * total_params + int(16 * total_params / total_gpus))


# (total params, GPUs per node, nodes): a prime count, BERT-base, Llama-7B, Llama-2-70B, t5-3b
DEEPSPEED_CASES = [
    (1_000_003, 1, 1),
    (110_000_000, 3, 1),
    (6_738_415_616, 8, 1),
    (6_738_415_616, 8, 4),
    (68_976_648_192, 8, 16),
    (2_851_000_000, 8, 1),
    (7_000_000_001, 6, 3),
]


@pytest.mark.parametrize(("params", "per_node", "nodes"), DEEPSPEED_CASES)
def test_model_states_equal_deepspeeds_estimator(params: int, per_node: int, nodes: int) -> None:
    gpus = per_node * nodes
    largest = params // 51
    assert sum(
        dist.deepspeed_model_states(params, gpus, 2, largest).values()
    ) == deepspeed_estimate_zero2_gpu_mem(params, per_node, nodes)
    assert sum(
        dist.deepspeed_model_states(params, gpus, 3, largest).values()
    ) == deepspeed_estimate_zero3_gpu_mem(params, largest, per_node, nodes)
    assert sum(dist.deepspeed_model_states(params, gpus, 1, largest).values()) == deepspeed_stage1_gpu_mem(
        params, per_node, nodes
    )


@pytest.mark.parametrize("strategy", ["zero1", "zero2", "zero3"])
@pytest.mark.parametrize(
    ("name", "gpus"), [("llm-6b", 8), ("llm-13b", 4), ("bert-large-imdb", 2), ("resnet50-cifar10", 8)]
)
def test_estimator_uses_deepspeeds_model_states(strategy: str, name: str, gpus: int) -> None:
    """The breakdown the estimator reports (not a helper beside it) holds DeepSpeed's figure."""
    w = get_workload(
        name,
        gpus=gpus,
        strategy=strategy,
        mode="train",
        precision="amp-bf16",
        **({"seq_len": 512} if name.startswith("llm") else {}),
    )
    mem = estimate(w, get_gpu("h100-sxm")).memory
    states = sum(
        mem.parts[k]
        for k in ("weights", "master_weights", "gradients", "optimizer_state", "gathered_weights")
    )
    params = w.param_count()
    expected = {
        "zero1": deepspeed_stage1_gpu_mem(params, gpus),
        "zero2": deepspeed_estimate_zero2_gpu_mem(params, gpus),
        "zero3": deepspeed_estimate_zero3_gpu_mem(params, dist.deepspeed_largest_layer_params(w.arch), gpus),
    }[strategy]
    assert states == expected
    assert mem.details["model_states"] == expected


def test_t5_3b_as_deepspeeds_memory_page_prints_it() -> None:
    # docs/code-docs/source/memory.rst: t5-3b, 2851M params, 32M largest layer, 1 node x 8 GPUs:
    # ZeRO-3 without offload 6.09GB (its estimator's output; the ZeRO-2 line of that page predates
    # the 2P + 18P/N count and reads 15.93GB, the stage-1 figure here).
    zero3 = sum(dist.deepspeed_model_states(2_851_000_000, 8, 3, 32_000_000).values())
    assert f"{zero3 / 2**30:.2f}" == "6.09"
    assert f"{sum(dist.deepspeed_model_states(2_851_000_000, 8, 1, 0).values()) / 2**30:.2f}" == "15.93"


def test_largest_layer_is_one_modules_own_parameters() -> None:
    # Llama-7B: the 32000 x 4096 embedding (and the untied LM head), not a whole decoder block
    assert dist.deepspeed_largest_layer_params(LLAMA_7B) == 32000 * 4096
    # BERT-base: the 30522 x 768 word embeddings
    assert dist.deepspeed_largest_layer_params(BERT_BASE) == 30522 * 768


def test_bad_stage_is_rejected() -> None:
    with pytest.raises(ValueError):
        dist.deepspeed_model_states(10**9, 8, 4, 0)
    with pytest.raises(ValueError):
        dist.deepspeed_model_states(10**9, 0, 2, 0)


def test_deepspeed_zero2_fits_a_7b_fine_tune_on_8_a100_40gb() -> None:
    """The job DeepSpeed users run: Llama-7B, bf16 mixed precision, Adam, 8 x A100-40GB, ZeRO-2.
    FSDP's SHARD_GRAD_OP at the same precision keeps FP32 weights gathered through backward and
    does not fit; neither does ZeRO-1 (4P + 16P/N of model states alone is 37.7 GiB)."""
    a100 = get_gpu("a100-40gb")
    w = get_workload("llm-6b", mode="train", seq_len=512, precision="amp-bf16", gpus=8)
    assert estimate(w.replace(strategy="zero2"), a100).verdict in ("fits", "tight")
    assert estimate(w.replace(strategy="zero3"), a100).verdict == "fits"
    assert estimate(w.replace(strategy="fsdp-shard-grad-op"), a100).verdict == "oom"
    assert estimate(w.replace(strategy="zero1"), a100).verdict == "oom"


# -- the per-GPU breakdown ------------------------------------------------------------------------
STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "fsdp-shard-grad-op", "fsdp-full-shard", "tp")
WORKLOADS = [
    ("llm-6b", {"mode": "train", "seq_len": 512, "precision": "amp-bf16"}),
    ("llm-6b", {"mode": "train", "seq_len": 256, "precision": "bf16", "checkpointing": True}),
    ("bert-base-imdb", {}),
    ("bert-base-imdb", {"precision": "amp-fp16", "attention": "eager"}),
    ("llm-70b", {}),
    ("llm-6b", {"precision": "int4", "batch_size": 8}),
    ("bert-large-imdb", {"mode": "infer"}),
]


@pytest.mark.parametrize(("name", "overrides"), WORKLOADS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("gpus", [2, 4, 8])
@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_breakdown_adds_up(name: str, overrides: dict, strategy: str, gpus: int, framework: str) -> None:
    w = get_workload(name, gpus=gpus, strategy=strategy, **overrides)
    profile = get_profile(framework, "default", use_user=False)
    if strategy == "tp" and not dist.tp_supported(w.arch, gpus):  # BERT's 12 heads over 8 GPUs
        with pytest.raises(FitbenchError, match="split evenly"):
            memory_breakdown(w, profile)
        return
    mem = memory_breakdown(w, profile)
    assert mem.total == sum(mem.parts.values())
    assert all(v >= 0 for v in mem.parts.values())
    assert set(mem.parts) == {*PART_NAMES, *dist.DISTRIBUTED_PART_NAMES}
    assert mem.parts["weights"] > 0 and mem.parts["cuda_context"] > 0
    assert mem.phase in ("backward", "optimizer", "forward", "generate")
    assert mem.details["gpus"] == gpus


@pytest.mark.parametrize("strategy", ["zero3", "fsdp-full-shard", "tp"])
@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("llm-6b", {"mode": "train", "seq_len": 1024, "precision": "amp-bf16"}),
        ("llm-6b", {"mode": "train", "seq_len": 1024, "precision": "fp32", "optimizer": "sgd"}),
        ("llm-70b", {}),
        ("bert-large-imdb", {"batch_size": 32}),
    ],
)
def test_per_gpu_memory_falls_with_more_gpus(strategy: str, name: str, overrides: dict) -> None:
    base = get_workload(name, **overrides)
    single = single_device_breakdown(base, PROFILE).total
    per_gpu = [memory_breakdown(base.replace(gpus=n, strategy=strategy), PROFILE).total for n in (2, 4, 8)]
    # DeepSpeed's ZeRO-3 of an FP32 model keeps an FP32 partition copy and a 2 GB reduce bucket
    # besides the FP32 weights: on 2 GPUs that can outweigh halving (llm-6b in FP32 with SGD).
    assert per_gpu[0 if strategy != "zero3" else 1] < single
    assert per_gpu[0] > per_gpu[1] > per_gpu[2]


@pytest.mark.parametrize(("name", "overrides"), WORKLOADS)
@pytest.mark.parametrize("gpus", [2, 8, 64])
def test_ddp_is_never_below_one_gpu(name: str, overrides: dict, gpus: int) -> None:
    w = get_workload(name, **overrides)
    single = single_device_breakdown(w, PROFILE)
    ddp = memory_breakdown(w.replace(gpus=gpus, strategy="ddp"), PROFILE)
    assert ddp.total >= single.total
    # a replica: the same weights, optimizer state and activations on every GPU
    for part in ("weights", "optimizer_state", "activations", "kv_cache"):
        assert ddp.parts[part] == single.parts[part]


def test_ddp_buckets_copy_every_gradient() -> None:
    w = get_workload("bert-base-imdb", gpus=4, strategy="ddp")
    mem = memory_breakdown(w, PROFILE)
    assert mem.parts["gradient_buckets"] == w.param_count() * 4  # fp32 gradients
    assert mem.parts["communication_buffers"] == dist.NCCL_BUFFER_BYTES


@pytest.mark.parametrize("gpus", [2, 8])
def test_what_each_zero_stage_shards(gpus: int) -> None:
    w = llama_train(optimizer="adamw", batch_size=8)
    p = w.param_count()
    zero = {
        s: memory_breakdown(w.replace(gpus=gpus, strategy=s), PROFILE) for s in ("zero1", "zero2", "zero3")
    }
    for s, mem in zero.items():
        assert mem.parts["optimizer_state"] == int(8 * p / gpus), s  # FP32 moments partitioned
        assert mem.parts["master_weights"] == int(4 * p / gpus), s  # FP32 master partition
        assert mem.parts["amp_weight_copies"] == 0 and mem.parts["gradient_buckets"] == 0, s
    assert zero["zero1"].parts["weights"] == zero["zero2"].parts["weights"] == 2 * p  # 16-bit, whole
    assert zero["zero3"].parts["weights"] == int(2 * p / gpus)
    assert zero["zero1"].parts["gradients"] > zero["zero2"].parts["gradients"]
    assert zero["zero3"].total < zero["zero2"].total < zero["zero1"].total


@pytest.mark.parametrize("gpus", [2, 8])
def test_what_each_fsdp_strategy_shards(gpus: int) -> None:
    w = llama_train(optimizer="adamw", batch_size=8)  # activations make backward the peak
    single = single_device_breakdown(w, PROFILE).parts
    fsdp = {
        s: memory_breakdown(w.replace(gpus=gpus, strategy=s), PROFILE)
        for s in ("fsdp-shard-grad-op", "fsdp-full-shard")
    }
    for s, mem in fsdp.items():
        assert mem.parts["optimizer_state"] == pytest.approx(single["optimizer_state"] / gpus, abs=1), s
        assert mem.parts["weights"] == pytest.approx(single["weights"] / gpus, abs=1), s
        assert mem.details["gradients_total"] == pytest.approx(w.param_count() * 4 / gpus, abs=1)
        assert mem.parts["gradient_buckets"] == 0
    # at the backward peak FULL_SHARD holds a couple of gathered blocks, SHARD_GRAD_OP the whole
    # model (on top of its resting 1/N shard, not of a second full copy)
    assert {m.phase for m in fsdp.values()} == {"backward"}
    assert 0 < fsdp["fsdp-full-shard"].parts["gathered_weights"] < single["weights"] / 4
    assert fsdp["fsdp-shard-grad-op"].parts["gathered_weights"] == single["weights"]
    assert fsdp["fsdp-full-shard"].total < fsdp["fsdp-shard-grad-op"].total


def test_fsdp_is_another_name_for_full_shard() -> None:
    w = llama_train()
    a = memory_breakdown(w.replace(gpus=4, strategy="fsdp"), PROFILE)
    b = memory_breakdown(w.replace(gpus=4, strategy="fsdp-full-shard"), PROFILE)
    assert a.parts == b.parts
    assert w.replace(gpus=4, strategy="fsdp").strategy == "fsdp-full-shard"


def test_tensor_parallel_parameter_split() -> None:
    for arch in (BERT_BASE, LLAMA_7B, LLAMA_70B):
        assert dist.tp_params_per_gpu(arch, 1) == pytest.approx(arch.param_count())
    # Llama-2-70B on 8 GPUs: 8 KV heads split 8 ways: 1/8 of everything but the 2 x 80 + 1
    # RMSNorm weights of width 8192, which every GPU keeps
    norms = 161 * 8192
    expected = (LLAMA_70B.param_count() - norms) / 8 + norms
    assert dist.tp_params_per_gpu(LLAMA_70B, 8) == pytest.approx(expected)
    # beyond 8 GPUs the KV projections are replicated instead of split
    assert dist.tp_params_per_gpu(LLAMA_70B, 16) > LLAMA_70B.param_count() / 16


def test_tensor_parallel_kv_cache_is_split_by_kv_heads() -> None:
    w = get_workload("llm-70b", batch_size=8, prompt_tokens=2000, new_tokens=2000)
    single = single_device_breakdown(w, PROFILE).parts["kv_cache"]
    assert memory_breakdown(w.replace(gpus=4, strategy="tp"), PROFILE).parts["kv_cache"] == pytest.approx(
        single / 4, abs=1
    )
    assert memory_breakdown(w.replace(gpus=16, strategy="tp"), PROFILE).parts["kv_cache"] == pytest.approx(
        single / 8, abs=1
    )  # 8 KV heads: each holds one at least


def test_tensor_parallel_activations_are_partly_split() -> None:
    w = get_workload("bert-large-imdb", precision="fp32")
    single = single_device_breakdown(w, PROFILE)
    tp = memory_breakdown(w.replace(gpus=4, strategy="tp"), PROFILE)
    assert single.phase == tp.phase == "backward"
    assert single.parts["activations"] / 4 < tp.parts["activations"] < single.parts["activations"]
    # with fused attention: (10 + 24/4) / 34 of the activations stay
    assert dist.tp_activation_factor(w, 4) == pytest.approx(16 / 34)


def test_tensor_parallel_needs_even_head_splits() -> None:
    with pytest.raises(FitbenchError, match="attention heads"):
        memory_breakdown(get_workload("llm-70b", gpus=3, strategy="tp"), PROFILE)
    with pytest.raises(FitbenchError, match="transformer"):
        memory_breakdown(get_workload("resnet50-cifar10", gpus=2, strategy="tp"), PROFILE)


def test_batch_is_per_gpu_except_for_tensor_parallelism() -> None:
    w = get_workload("bert-base-imdb", batch_size=16)
    assert dist.global_batch_size(w.replace(gpus=8, strategy="ddp")) == 128
    assert dist.global_batch_size(w.replace(gpus=8, strategy="fsdp")) == 128
    assert dist.global_batch_size(w.replace(gpus=4, strategy="tp")) == 16
    # so a data-parallel GPU keeps the one-GPU activations
    single = single_device_breakdown(w, PROFILE).parts["activations"]
    assert memory_breakdown(w.replace(gpus=8, strategy="zero3"), PROFILE).parts["activations"] == single


# -- how many GPUs --------------------------------------------------------------------------------
def test_llm_70b_fp16_generation_needs_two_h100_with_tensor_parallelism() -> None:
    w = get_workload("llm-70b")
    assert w.precision == "fp16" and w.is_generation
    assert limits.min_gpus(w, H100, PROFILE, "tp") == 2


def test_min_gpus_edges() -> None:
    assert limits.min_gpus(get_workload("llm-70b"), H100, PROFILE, "ddp") == 0  # replicas never shrink
    assert limits.min_gpus(get_workload("llm-6b"), H100, PROFILE, "tp") == 1
    assert limits.min_gpus(get_workload("llm-6b"), get_gpu("rtx-3060-12gb"), PROFILE, "tp") == 2
    huge = get_workload("resnet50-cifar10", batch_size=100_000)
    assert limits.min_gpus(huge, get_gpu("t4"), PROFILE, "tp") == 0
    # 70B fine-tuning in bf16 with Adam: weights + grads + states = 6 bytes x 70B, sharded
    train = get_workload("llm-70b", mode="train", seq_len=512, precision="bf16", checkpointing=True)
    n = limits.min_gpus(train, H100, PROFILE, "fsdp")
    assert 8 <= n <= 16
    assert estimate(train.replace(gpus=n, strategy="fsdp"), H100, profile=PROFILE).verdict != "oom"
    assert estimate(train.replace(gpus=n - 1, strategy="fsdp"), H100, profile=PROFILE).verdict == "oom"


# -- time -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["ddp", "zero2", "fsdp", "tp"])
def test_communication_grows_with_parameters(strategy: str) -> None:
    gpu = get_gpu("a100-40gb")
    small = timing.step_timing(get_workload("bert-base-imdb", gpus=4, strategy=strategy), gpu, PROFILE)
    large = timing.step_timing(
        get_workload("bert-large-imdb", precision="fp32", gpus=4, strategy=strategy), gpu, PROFILE
    )
    assert large.communication_bytes > small.communication_bytes > 0
    assert large.communication_total_seconds > small.communication_total_seconds > 0


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "zero3", "tp"])
@pytest.mark.parametrize(("nvlink", "pcie"), [("a100-40gb", "a100-40gb-pcie"), ("h100-sxm", "h100-pcie")])
def test_communication_falls_with_interconnect_bandwidth(strategy: str, nvlink: str, pcie: str) -> None:
    w = llama_train(gpus=8, strategy=strategy)
    fast, slow = get_gpu(nvlink), get_gpu(pcie)
    assert fast.interconnect_bytes_s > slow.interconnect_bytes_s
    t_fast, t_slow = timing.step_timing(w, fast, PROFILE), timing.step_timing(w, slow, PROFILE)
    assert t_fast.communication_bytes == t_slow.communication_bytes
    assert t_slow.communication_total_seconds > 5 * t_fast.communication_total_seconds
    assert t_slow.communication_seconds >= t_fast.communication_seconds


def test_ring_all_reduce_volume_of_ddp() -> None:
    w = get_workload("bert-base-imdb", gpus=8, strategy="ddp")
    t = timing.step_timing(w, H100, PROFILE)
    assert t.communication_bytes == pytest.approx(2 * 7 / 8 * w.param_count() * 4)
    fsdp = timing.step_timing(w.replace(strategy="fsdp"), H100, PROFILE)
    assert fsdp.communication_bytes == pytest.approx(3 * 7 / 8 * w.param_count() * 4)


def test_ddp_hides_most_communication_behind_backward() -> None:
    w = get_workload("bert-base-imdb", gpus=8, strategy="ddp")
    t = timing.step_timing(w, H100, PROFILE)
    assert 0 < t.communication_seconds < t.communication_total_seconds
    # on slow PCIe the all-reduce outlasts the backward pass and shows
    slow = timing.step_timing(w, get_gpu("rtx-4090"), PROFILE)
    assert slow.communication_seconds > t.communication_seconds
    assert slow.seconds >= t.seconds


def test_sharded_optimizer_runs_a_shard_of_the_update() -> None:
    w = llama_train(gpus=8)
    ddp = timing.step_timing(w.replace(strategy="ddp"), H100, TUNED)
    zero1 = timing.step_timing(w.replace(strategy="zero1"), H100, TUNED)
    assert zero1.memory_seconds < ddp.memory_seconds
    assert zero1.compute_seconds == ddp.compute_seconds


def test_tensor_parallel_divides_the_gpu_work() -> None:
    w = llama_train(batch_size=4)
    gpu = get_gpu("h200")
    single = step_timing(w, gpu, TUNED)
    tp = timing.step_timing(w.replace(gpus=4, strategy="tp"), gpu, TUNED)
    assert tp.compute_seconds == pytest.approx(single.compute_seconds / 4)
    assert tp.memory_seconds == pytest.approx(single.memory_seconds / 4)
    assert tp.communication_seconds == tp.communication_total_seconds > 0  # on the critical path
    assert single.seconds / 4 < tp.seconds < single.seconds


def test_communication_can_be_the_bottleneck() -> None:
    # Sharded weights all-gathered for every generated token over PCIe.
    w = get_workload("llm-70b", gpus=8, strategy="zero3")
    t = timing.step_timing(w, get_gpu("l40s"), PROFILE)
    assert t.bottleneck == "communication"
    assert t.communication_seconds > t.compute_seconds + t.memory_seconds


def test_tensor_parallel_decoding_is_faster_without_host_overhead() -> None:
    w = get_workload("llm-6b", batch_size=1)
    tp2 = communication.generation(w.replace(gpus=2, strategy="tp"), H100, TUNED)
    tp4 = communication.generation(w.replace(gpus=4, strategy="tp"), H100, TUNED)
    single = estimate(w, H100, profile=TUNED)
    assert tp2.tokens_per_second > single.tokens_per_second
    assert tp4.tokens_per_second > tp2.tokens_per_second
    assert tp2.roofline_tokens_per_second == pytest.approx(2 * single.roofline_tokens_per_second)
    # 2 all-reduces per layer and token: latency, not bandwidth
    assert tp2.decode.communication_seconds >= 2 * 32 * dist.COLLECTIVE_LATENCY_S["nvlink"]


def test_estimate_end_to_end_on_several_gpus() -> None:
    w = get_workload(
        "llm-70b", mode="train", seq_len=512, precision="bf16", checkpointing=True, gpus=16, strategy="fsdp"
    )
    est = estimate(w, H100)
    assert est.verdict in ("fits", "tight")
    assert est.max_batch_size >= 1
    assert est.bottleneck in ("compute", "memory", "overhead", "communication")
    assert sum(est.breakdown.values()) == est.peak_memory_bytes
    assert est.breakdown["communication_buffers"] == 256 * MiB
    # gathered blocks exist during backward; at the optimizer step only shards are left
    assert (est.breakdown["gathered_weights"] > 0) == (est.memory.phase == "backward")
    one = estimate(w.replace(gpus=1), H100)
    assert one.verdict == "oom" and one.peak_memory_bytes > 10 * est.peak_memory_bytes


def test_assumption_lines_say_what_the_batch_means() -> None:
    lines = dist.assumptions(get_workload("bert-base-imdb", gpus=4, strategy="ddp"), H100)
    assert any("global batch 64" in line for line in lines)
    lines = dist.assumptions(get_workload("bert-base-imdb", gpus=4, strategy="tp"), get_gpu("rtx-4090"))
    assert any("shared" in line for line in lines) and any("pcie4" in line for line in lines)


def test_inference_replicas_need_no_communication() -> None:
    w = get_workload("bert-base-imdb", mode="infer", gpus=4, strategy="ddp")
    mem = memory_breakdown(w, PROFILE)
    assert mem.parts["communication_buffers"] == 0 and mem.parts["gradient_buckets"] == 0
    assert mem.total == single_device_breakdown(w.replace(gpus=1), PROFILE).total
    assert timing.step_timing(w, H100, PROFILE).communication_total_seconds == 0


def test_units_are_bytes() -> None:
    mem = memory_breakdown(get_workload("llm-70b", gpus=2, strategy="tp"), PROFILE)
    assert 60 * GiB < mem.parts["weights"] < 66 * GiB  # 138 GB of fp16 weights, half each


def test_lora_on_several_gpus_reduces_only_the_adapters() -> None:
    w = get_workload("llm-6b", mode="train", seq_len=512, precision="bf16", peft="lora")
    single = memory_breakdown(w, PROFILE)
    trainable = single.details["gradients_total"]
    assert 0 < trainable < w.param_count()
    for strategy in ("ddp", "fsdp"):
        mem = memory_breakdown(w.replace(gpus=4, strategy=strategy), PROFILE)
        assert mem.total == sum(mem.parts.values())
        assert mem.parts["weights"] == single.parts["weights"]  # the frozen base is replicated
        assert mem.parts["gradient_buckets"] == trainable
        t = timing.step_timing(w.replace(gpus=4, strategy=strategy), H100, PROFILE)
        assert t.communication_bytes == pytest.approx(2 * 3 / 4 * trainable)
