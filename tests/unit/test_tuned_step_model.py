"""The tuned mode's training step as it runs: one CUDA graph of the eager kernels.

A graph removes the host, not the kernels: each convolution pass still pays its fixed time per
launch, each small memory-bound kernel its own, and autocast (cache off) still copies every
weight. Pure estimator code, scored on the stored H200 results where they exist.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import resnet_cost, speed, transformer_cost
from fitbench.estimate.execution import features_not_run, workload_as_run
from fitbench.estimate.profile import get_profile
from fitbench.workloads.library import workload_for_model
from fitbench.workloads.presets import get_workload

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks"))

import conv_layout  # noqa: E402  (its scoring half imports no framework)
import tuned_accuracy  # noqa: E402  (imports no framework)

H200 = get_gpu("h200")
DEFAULT = get_profile("torch", "default", use_user=False)
TUNED = get_profile("torch", "tuned", use_user=False)


def _tuned_resnet(**overrides):
    return workload_as_run(get_workload("resnet50-cifar10", **overrides), "tuned", H200)


def _conv_seconds(kernels, workload, profile) -> float:
    convs = [k for k in kernels if k.kind == "conv"]
    return speed.time_kernels(convs, workload, H200, profile, host_seconds_per_op=0.0).gpu_seconds


def test_each_convolution_pass_is_a_launch_with_its_fixed_time() -> None:
    """53 forward convolutions, and in backward a data and a weight gradient each but the stem's
    (its image takes no gradient): 158 launches, each adding conv_fixed_seconds."""
    w = _tuned_resnet()
    kernels = speed.training_kernels(w, TUNED)
    convs = [k for k in kernels if k.kind == "conv"]
    assert speed.kernel_launches(convs) == 53 + 2 * 52 + 1
    slower = dataclasses.replace(TUNED, conv_fixed_seconds=TUNED.conv_fixed_seconds + 1e-6)
    moved = _conv_seconds(kernels, w, slower) - _conv_seconds(kernels, w, TUNED)
    assert moved == pytest.approx(158 * 1e-6)


def test_conv_time_matches_the_measured_channels_last_bf16_kernels() -> None:
    """The tuned profile's convolutions (conv_efficiency and conv_fixed_seconds, fitted on these
    three rows' conv kernel time) against the kernel time the H200 measured for them."""
    data = json.loads((RESULTS / "conv-layout-h200-2026-12-03.json").read_text())
    rows = [r for r in data["rows"] if r["channels_last"] and r["amp_bf16"]]
    assert len(rows) == 3
    for r in rows:
        w = conv_layout.row_workload(r)
        kernels = speed.training_kernels(w, TUNED, channels_last=True)
        measured = r["kernel_seconds_by_class"]["conv"]
        assert _conv_seconds(kernels, w, TUNED) == pytest.approx(measured, rel=0.05), (r["batch"], r["image"])
    # Without the fixed time the small images' convolutions read far too fast.
    r = next(r for r in rows if r["image"] == 128)
    w = conv_layout.row_workload(r)
    kernels = speed.training_kernels(w, TUNED, channels_last=True)
    bare = dataclasses.replace(TUNED, conv_fixed_seconds=0.0)
    assert _conv_seconds(kernels, w, bare) < 0.75 * r["kernel_seconds_by_class"]["conv"]


@pytest.mark.parametrize(
    ("precision", "channels_last", "launches"),
    [
        ("amp-bf16", True, (2.0, 2.0)),  # native channels-last: stats + normalise; reduce + elemt
        ("amp-bf16", False, (2.0, 1.0)),  # native NCHW: one backward kernel
        ("fp32", False, (1.0, 1.0)),  # cuDNN
        ("amp-fp16", True, (1.0, 1.0)),  # cuDNN takes a half input with FP32 weights
    ],
)
def test_batch_norm_launches_follow_the_implementation(
    precision: str, channels_last: bool, launches: tuple[float, float]
) -> None:
    w = get_workload("resnet50-cifar10", precision=precision)
    fwd = resnet_cost.forward_kernels(w, DEFAULT, channels_last=channels_last)
    bn = [k for k in fwd if k.name.endswith(".bn")]
    back = [k for k in speed.backward_kernels(fwd) if k.name.endswith(".bn.backward")]
    assert len(bn) == len(back) == 53
    assert {k.kernel_launches for k in bn} == {launches[0]}
    assert {k.kernel_launches for k in back} == {launches[1]}


def test_autocast_weight_copies_are_gpu_kernels_without_host_operations() -> None:
    """AMP steps copy every weight to 16 bit and every weight gradient back: ~0.3 ms of small
    kernels a ResNet-50 step on an H200 (0.32-0.36 ms measured at every size); the host cost of
    those casts stays with the layers that issue them."""
    amp = get_workload("resnet50-cifar10", precision="amp-bf16")
    fp32 = get_workload("resnet50-cifar10")
    kernels = speed.training_kernels(amp, DEFAULT)
    casts = [k for k in kernels if k.name.endswith(".cast") or k.name.endswith(".cast.backward")]
    assert not [k for k in speed.training_kernels(fp32, DEFAULT) if ".cast" in k.name]
    assert all(k.ops == 0 and k.cast_ops == 0 for k in casts)
    assert speed.kernel_launches(casts) == 53 + 1 + 2 + 53 + 2  # weights, image, fc's two; gradients
    seconds = speed.time_kernels(casts, amp, H200, DEFAULT, host_seconds_per_op=0.0).gpu_seconds
    assert 0.25e-3 < seconds < 0.45e-3
    assert sum(k.bytes for k in casts) == pytest.approx(2 * 6 * amp.param_count(), rel=0.01)


def test_combo_kernels_launch_the_compiled_casts_side_by_side() -> None:
    """The tuned step compiles with inductor's combo kernels (combo_kernel_group): the per-layer
    casts, independent of each other, go out that many to a launch, with every byte still moved;
    the uncompiled step launches each on its own."""
    amp = get_workload("resnet50-cifar10", precision="amp-bf16")
    assert TUNED.combo_kernel_group == 8 and DEFAULT.combo_kernel_group == 0

    def casts(profile):
        return [k for k in speed.training_kernels(amp, profile) if ".cast" in k.name]

    eager = dataclasses.replace(TUNED, fuses_pointwise=False)
    assert speed.kernel_launches(casts(eager)) == 53 + 1 + 2 + 53 + 2
    assert speed.kernel_launches(casts(TUNED)) == pytest.approx((53 + 1 + 2 + 53 + 2) / 8)
    assert sum(k.bytes * k.count for k in casts(TUNED)) == sum(k.bytes * k.count for k in casts(eager))
    compiled = speed.training_step(amp, H200, TUNED)
    without = speed.training_step(amp, H200, dataclasses.replace(TUNED, combo_kernel_group=0))
    assert compiled.seconds < without.seconds


def test_the_fused_decode_attention_reads_k_and_v_once_per_query_head() -> None:
    """At batch 1 the tuned step's own attention kernel reads a kv head's K and V once for each of
    its query heads, at the kernel's share, in two launches: a GQA model's attention costs what an
    MHA model's of the same query heads does, and grows with the context; a serving engine's
    (Profile.as_engine) reads each kv head once, as counted."""
    mha = get_workload("llm-6b")
    gqa_arch = dataclasses.replace(mha.arch, num_kv_heads=8)
    short, long = (dataclasses.replace(mha, prompt_tokens=p, new_tokens=64) for p in (64, 4000))
    gqa_long = dataclasses.replace(long, arch=gqa_arch)

    def attention_seconds(w, profile):
        kernels = speed.decode_as_run(
            [k for k in transformer_cost.forward_kernels(w, 1, 1, kv_len=4032) if k.kind == "attention"],
            1,
            profile,
            groups=w.arch.num_heads // w.arch.kv_heads,
        )
        return speed.time_kernels(kernels, w, H200, profile, host_seconds_per_op=0.0).gpu_seconds

    assert TUNED.decode_fused_attention_efficiency is not None
    assert TUNED.as_engine().decode_fused_attention_efficiency is None
    layers = mha.arch.num_layers
    # the H200 sweep: 31.2 us a layer at 4,160 slots (4,120 visible) for 32 query heads
    assert attention_seconds(long, TUNED) / layers == pytest.approx(31e-6, rel=0.1)
    assert attention_seconds(gqa_long, TUNED) == pytest.approx(attention_seconds(long, TUNED), rel=0.01)
    engine = TUNED.as_engine()
    assert attention_seconds(gqa_long, engine) < 0.3 * attention_seconds(long, engine)
    tokens = [1 / speed.generation(w, H200, TUNED).decode.seconds for w in (short, long)]
    assert tokens[1] < 0.9 * tokens[0]


def test_the_fused_decode_attention_moves_each_query_and_output_once() -> None:
    """Only the K and V reads repeat for each query head of a group: the queries in and the
    output out are one head's each (transformer_cost.attention_query_bytes)."""
    gqa = get_workload("llm-6b")
    gqa = dataclasses.replace(gqa, arch=dataclasses.replace(gqa.arch, num_kv_heads=8))
    attention = next(
        k for k in transformer_cost.forward_kernels(gqa, 1, 1, kv_len=100) if k.kind == "attention"
    )
    queries = transformer_cost.attention_query_bytes(gqa, 1)
    assert queries == (gqa.arch.q_dim + gqa.arch.attn_out_dim) * 2  # FP16 queries and outputs
    (fused,) = speed.decode_as_run([attention], 1, TUNED, groups=4, query_bytes=queries)
    assert fused.bytes == pytest.approx((attention.bytes - queries) * 4 + queries)
    (engine,) = speed.decode_as_run([attention], 1, TUNED.as_engine(), groups=4, query_bytes=queries)
    assert engine.bytes == attention.bytes


def test_decode_keeps_its_own_fixed_time_while_training_pays_the_eager_one() -> None:
    """The tuned decode step runs fused or compiled kernels (decode_kernel_fixed_seconds, 0): the
    fixed time of the graph-replayed eager kernels moves training, and of decoding only the fused
    attention's two launches a layer (split and merge)."""
    assert TUNED.in_force("decode_kernel_fixed_seconds") == TUNED.decode_kernel_fixed_seconds == 0.0
    assert DEFAULT.in_force("decode_kernel_fixed_seconds") == DEFAULT.kernel_fixed_seconds
    more = dataclasses.replace(TUNED, kernel_fixed_seconds=2 * TUNED.kernel_fixed_seconds)
    llm = workload_as_run(get_workload("llm-6b"), "tuned", H200)
    before = speed.generation(llm, H200, TUNED).decode.seconds
    added = speed.generation(llm, H200, more).decode.seconds - before
    assert added == pytest.approx(2 * llm.arch.num_layers * TUNED.kernel_fixed_seconds)
    w = _tuned_resnet()
    assert speed.training_step(w, H200, more).seconds > 1.2 * speed.training_step(w, H200, TUNED).seconds


@pytest.mark.parametrize("model", ["llm-6b", "mistral-7b-instruct-v0.3"])
def test_tuned_decode_reads_weights_once_and_the_kv_its_step_attends_over(model) -> None:
    """Batches 1 to 32 decode through fitbench's fused kernels (decode_fused_max_batch): no
    pointwise kernels of their own, each sequence's KV at its real context, and from 2 sequences
    on the weights stream at the batched tiles' share. Larger batches run the compiled
    static-cache step: weights still once a step, but its attention reads every slot of the cache
    (prompt + new tokens + warm-up, rounded up to 64) and its pointwise chains are kernels of
    their own."""
    assert TUNED.decode_fused_max_batch == 32 and DEFAULT.decode_fused_max_batch == 0
    assert TUNED.decode_compiled_memory_efficiency < TUNED.decode_memory_efficiency
    assert TUNED.decode_fused_batched_memory_efficiency < TUNED.decode_memory_efficiency

    def decode(batch: int):
        base = get_workload(model, batch_size=batch) if model == "llm-6b" else None
        base = base or workload_for_model(model, batch_size=batch)
        w = workload_as_run(base, "tuned", H200)
        return w, speed.generation(w, H200, TUNED).decode

    w1, one = decode(1)
    arch = w1.arch
    prompt, new = (w1.prompt_tokens or 1), (w1.new_tokens or 1)
    per_slot = arch.num_layers * arch.kv_elements_per_token() * 2  # 16-bit cache, bytes a slot
    slots = speed.static_cache_slots(prompt, new, 40, TUNED)
    assert slots is not None and slots % 64 == 0 and prompt + new < slots <= prompt + new + 64 + 3
    for fused in (1, 8, 32):  # the fused step reads 0..pos
        assert speed.static_cache_slots(prompt, new, fused, TUNED) is None
    _, two = decode(2)
    _, eight = decode(8)
    more = eight.bytes - two.bytes  # six more sequences: their real caches and activations
    groups = arch.num_heads // arch.kv_heads  # each query head reads its kv head's cache
    assert 6 * per_slot * prompt < more < 6 * (per_slot * (prompt + new) * groups + 30e6)
    assert more < 0.05 * one.bytes * 6  # not the weights again
    batched_share = TUNED.decode_fused_batched_memory_efficiency / TUNED.decode_memory_efficiency
    assert two.seconds > 0.99 * one.seconds / batched_share
    kernels = speed.decode_as_run(speed.transformer_cost.forward_kernels(w1, 8, 1, kv_len=150), 8, TUNED)
    assert not {"elementwise", "layer_norm"} & {k.name for k in kernels}
    compiled = speed.decode_as_run(speed.transformer_cost.forward_kernels(w1, 40, 1, kv_len=150), 40, TUNED)
    assert {"elementwise"} & {k.name for k in compiled}


def test_the_roofline_counts_the_real_context_whatever_the_step_reads() -> None:
    """The bandwidth roofline is what no implementation beats: weights once and each sequence's
    real KV, not the padded static cache the compiled step attends over."""
    w = workload_as_run(get_workload("llm-6b", batch_size=8), "tuned", H200)
    tuned = speed.generation(w, H200, TUNED)
    default = speed.generation(w, H200, DEFAULT)
    assert tuned.roofline_tokens_per_second == pytest.approx(default.roofline_tokens_per_second)


def test_stored_compiled_steps_and_decode_are_within_twenty_percent() -> None:
    """benchmarks/tuned_accuracy.py on the stored runs: the compiled tuned ResNet-50 CIFAR b128
    (2.64 ms) and BERT-base seq 512 b16 (15.0 ms) steps of compiled_step.py, and speed.py's 6.7B
    decode at batch 1 (270 tok/s). speed.py's tuned training steps of 2026-12-02 ran uncompiled:
    they are not scored against the compiled estimate."""
    points = tuned_accuracy.speed_points(RESULTS / "speed-h200-2026-12-02.json")
    assert {p.workload.is_generation for p in points} == {True}
    points += tuned_accuracy.compiled_step_points(RESULTS / "compiled-step-h200-2026-12-04.json")
    rows = {r["label"]: r for r in map(tuned_accuracy.score, points)}
    resnet, bert = rows["resnet50-cifar10 b128 compiled"], rows["bert-base-imdb b16 compiled"]
    decode = rows["llm-6b b1"]
    assert resnet["precision"] == "amp-bf16"
    for row in (resnet, bert, decode):
        assert abs(row["error"]) <= 0.20, row["label"]
    # The breakdown adds up to the step (no host in a replayed graph).
    parts = resnet["compute_seconds"] + resnet["memory_seconds"] + resnet["floor_seconds"]
    assert parts == pytest.approx(resnet["step_seconds"]) and resnet["host_seconds"] == 0.0


def test_a_stored_step_is_scored_as_the_step_it_ran() -> None:
    """A stored tuned training run whose backend notes name neither the 16-bit weights nor the
    16-bit residual stream measured the step without them: tuned_accuracy scores it against that
    step's estimate (slower than today's), and a run naming both against today's."""
    bert = workload_as_run(get_workload("bert-base-imdb"), "tuned", H200)
    older = features_not_run(bert, {"compiled_step": True})
    assert older == ("sixteen_bit_weights", "sixteen_bit_residual")
    both = {"sixteen_bit_weights": {"params": 1}, "residual_stream": "bf16"}
    assert features_not_run(bert, both) == ()
    decode = get_workload("llm-6b", batch_size=1)
    assert features_not_run(decode, {}) == ()  # generation: none of the features

    def point(off):
        return tuned_accuracy.Point(
            label="bert", source="-", workload=bert, measured=0.014, unit="s/step", features_off=off
        )

    then, now = tuned_accuracy.score(point(older)), tuned_accuracy.score(point(()))
    assert then["features_off"] == list(older) and now["features_off"] == []
    assert then["estimated"] > now["estimated"] * 1.05


def test_compiling_removes_the_pointwise_passes_not_the_gemms() -> None:
    """The tuned profile times each kernel's fused form: the memory-bound time of a BERT step
    falls, its GEMM and attention FLOPs stay; the default profile keeps the eager kernels."""
    w = workload_as_run(get_workload("bert-base-imdb", precision="amp-bf16"), "tuned", H200)
    eager = dataclasses.replace(TUNED, fuses_pointwise=False)
    fused_t = speed.training_step(w, H200, TUNED)
    eager_t = speed.training_step(w, H200, eager)
    assert fused_t.flops == pytest.approx(eager_t.flops)
    assert fused_t.compute_seconds == pytest.approx(eager_t.compute_seconds, rel=0.05)
    # (the encoder's hidden dropouts stay aten's own kernels, ENCODER_INDUCTOR_OPTIONS: 0.61)
    assert fused_t.memory_seconds < 0.65 * eager_t.memory_seconds
    assert fused_t.bytes < 0.8 * eager_t.bytes
    assert DEFAULT.fuses_pointwise is False and TUNED.fuses_pointwise is True


def test_attention_share_falls_below_head_dim_128() -> None:
    """Stored eager H200 profiles: fused attention at 0.22-0.23 of the peak at head_dim 64, 0.38
    at 128. Both tables follow the head dimension (the same cuDNN and flash kernels run in either
    mode); FP32 attention keeps one share."""
    bert = get_workload("bert-base-imdb", precision="amp-bf16")  # 12 heads of 64
    llm = get_workload("llm-6b")  # 32 heads of 128
    for table in (TUNED, DEFAULT):
        assert speed.attention_share(table, bert) == pytest.approx(0.225, abs=0.005)
        assert speed.attention_share(table, llm) == pytest.approx(table.attention_efficiency)
    fp32 = bert.replace(precision="fp32")
    assert speed.attention_share(DEFAULT, fp32) == DEFAULT.attention_efficiency
    # The BERT step's attention kernels take the longer for it, by the share's ratio.
    w = workload_as_run(bert, "tuned", H200)
    attention = [k for k in speed.training_kernels(w, TUNED) if k.kind == "attention"]
    flat = dataclasses.replace(TUNED, attention_head_dim_exponent=0.0)
    ratio = (
        speed.time_kernels(attention, w, H200, TUNED, host_seconds_per_op=0.0).gpu_seconds
        / speed.time_kernels(attention, w, H200, flat, host_seconds_per_op=0.0).gpu_seconds
    )
    assert ratio == pytest.approx(TUNED.attention_efficiency / 0.225, rel=0.03)


def test_bias_gradients_are_reductions_of_their_own_in_backward_only() -> None:
    """BERT's biased Linears each sum their output gradient over the tokens in backward (the eager
    BERT-large profile: 147 reductions a step at 0.31 of streaming); Llama's Linears have no bias,
    frozen PEFT bases take no gradient, inference no backward."""
    from fitbench.estimate import transformer_cost

    bert = get_workload("bert-base-imdb", precision="amp-bf16")
    kernels = speed.training_kernels(bert, TUNED)
    forward = [k for k in kernels if k.name == "bias_gradients"]
    backward = [k for k in kernels if k.name == "bias_gradients.backward"]
    assert len(forward) == len(backward) == 1
    tokens = bert.batch_size * bert.seq_len
    h, f = bert.arch.hidden_size, bert.arch.intermediate_size
    assert backward[0].bytes == 12 * tokens * (3 * h + h + f + h) * 2  # 16-bit gradients, 12 layers
    assert backward[0].kernel_launches == 12 * 6
    # The forward half costs nothing; the backward half its bytes at the share plus its launches.
    alone = speed.time_kernels(forward, bert, H200, TUNED, host_seconds_per_op=0.0)
    assert alone.gpu_seconds == 0.0
    back = speed.time_kernels(backward, bert, H200, TUNED, host_seconds_per_op=0.0).gpu_seconds
    stream = H200.stream_bandwidth_bytes_s * transformer_cost.BIAS_GRADIENT_SHARE
    assert back == pytest.approx(backward[0].bytes / stream + 72 * TUNED.kernel_fixed_seconds)
    llm = get_workload("llm-6b", mode="train", batch_size=1, seq_len=512)
    assert not [k for k in speed.training_kernels(llm, TUNED) if "bias" in k.name]
    lora = get_workload("bert-base-imdb", peft="lora")
    assert not [k for k in transformer_cost.forward_kernels(lora, 2, 128) if "bias" in k.name]


def test_layer_norms_run_kernels_of_their_own_at_their_measured_share() -> None:
    """A block's two LayerNorms (BERT, GPT-2, ViT) leave the elementwise lump: 2 launches forward,
    4 backward (input gradient, gamma/beta reduction), at 0.50 of streaming (the eager BERT-large
    profile); their host operations move with them, so the host time is unchanged. RMSNorm
    models (Llama) keep HF's elementwise RMSNorm in the lump."""
    from fitbench.estimate import transformer_cost

    bert = get_workload("bert-base-imdb", precision="amp-bf16")
    arch, tokens = bert.arch, bert.batch_size * bert.seq_len
    kernels = transformer_cost.forward_kernels(bert, bert.batch_size, bert.seq_len)
    ln = next(k for k in kernels if k.name == "layer_norm")
    ew = next(k for k in kernels if k.name == "elementwise")
    gelu = next(k for k in kernels if k.name == "gelu")  # a kernel of its own (test_gelu_cost.py)
    assert (ln.count, ln.kernel_launches, ln.backward_launches) == (arch.num_layers, 2.0, 4.0)
    assert ln.memory_efficiency == transformer_cost.LAYER_NORM_SHARE
    assert ln.bytes == tokens * 2 * 2 * arch.hidden_size * 4  # FP32 rows under autocast
    dt = transformer_cost.activation_dtypes(bert, dropout=True)
    lump_bytes, lump_ops = transformer_cost._elementwise_bytes_per_token(arch, dt)
    assert ln.ops + ew.ops + gelu.ops == lump_ops
    assert ln.bytes + ew.bytes + gelu.bytes == pytest.approx(tokens * lump_bytes)
    # Pure 16-bit rows (no autocast to run the norm in FP32) stream at their own, lower share.
    half = get_workload("bert-base-imdb", mode="infer", precision="fp16")
    half_ln = next(k for k in transformer_cost.forward_kernels(half, 16, 512) if k.name == "layer_norm")
    assert half_ln.memory_efficiency == transformer_cost.LAYER_NORM_SHARE_16BIT
    assert half_ln.memory_efficiency < transformer_cost.LAYER_NORM_SHARE
    llm = get_workload("llm-6b", mode="train", batch_size=1, seq_len=512)
    assert not [k for k in transformer_cost.forward_kernels(llm, 1, 512) if k.name == "layer_norm"]


def test_every_compiled_tuned_training_row_of_the_stored_speed_run_is_within_twenty_percent() -> None:
    """speed.py's latest H200 run of 2026-12-04 (tuned steps compiled with combo kernels, decoders
    causal SDPA): ResNet-50 CIFAR, BERT-base, Llama-3.2-1B full fine-tune and LoRA r16, and the
    6.7B decode with its graphed prefill, each against today's estimate."""
    points = tuned_accuracy.speed_points(RESULTS / "speed-h200-2026-12-04-run2.json")
    prefill = [p for p in points if p.unit == "s/prefill"]
    assert len(prefill) == 1  # this run replayed its prefill from a CUDA graph
    assert abs(tuned_accuracy.score(prefill[0])["error"]) <= 0.20
    training = [p for p in points if not p.workload.is_generation]
    assert {p.workload.peft for p in training} == {None, "lora"} and len(training) == 4
    for row in map(tuned_accuracy.score, training):
        assert abs(row["error"]) <= 0.20, (row["label"], row["error"])


def test_the_h100_run_with_both_step_features_is_scored_on_the_h100() -> None:
    """speed.py on an H100 of 2026-12-07 (the tuned BERT step with 16-bit weights and the bf16
    residual stream, 14.3 ms; its LoRA row was cut off by the run's time limit): every tuned row
    is scored against the H100's estimate with no step feature taken off, within ±20 %."""
    points = tuned_accuracy.speed_points(RESULTS / "speed-h100-2026-12-07-residual16.json", "h100")
    rows = {r["label"]: r for r in map(tuned_accuracy.score, points)}
    bert = rows["bert-base-imdb b16 h100"]
    assert bert["gpu"] == "h100" and bert["features_off"] == []
    assert 0.0135 < bert["measured"] < 0.0150
    h200 = tuned_accuracy.score(dataclasses.replace(points[0], gpu="h200"))
    assert h200["estimated"] != rows[points[0].label]["estimated"]  # the card's own estimate
    for row in rows.values():
        assert abs(row["error"]) <= 0.20, (row["label"], row["error"])


def test_gemm_launch_time_describes_the_stored_h200_gemm_shapes() -> None:
    """The tuned profile's GEMM model, one share of the peak plus matmul_fixed_seconds a launch,
    against the 144 transformer-layer GEMMs of benchmarks/gemm_shapes.py on an H200: at that
    machine's own sustained rate (its square GEMMs of gemm_rate.py, times the 1.06 its transformer
    shapes reached over them) every shape is within ±16 %, where one share alone misses the short
    ones by more than 40 %."""
    results = Path(__file__).parents[2] / "benchmarks" / "results"
    shapes = json.loads((results / "gemm-shapes-h200-2026-12-04.json").read_text())
    square = json.loads((results / "gemm-rate-h200-2026-12-04.json").read_text())
    bf16 = [r for r in square["rows"] if r["precision"] == "bf16"]
    peak = shapes["peak_tflops"] * 1e12
    share = 1.06 * sum(r["tflops"] for r in bf16) / len(bf16) * 1e12 / peak
    fixed = TUNED.matmul_fixed_seconds
    assert fixed > 0 and DEFAULT.matmul_fixed_seconds == fixed  # the same cuBLAS kernels in both modes

    def worst(launch: float) -> float:
        return max(
            abs((2 * r["m"] * r["n"] * r["k"] / (share * peak) + launch) / r["seconds"] - 1)
            for r in shapes["rows"]
        )

    assert len(shapes["rows"]) == 144
    assert worst(fixed) < 0.16
    assert worst(0.0) > 0.4
    # the estimator adds it to each GEMM launch of a step
    w = workload_as_run(get_workload("bert-base-imdb"), "tuned", H200)
    gemm = next(k for k in speed.transformer_cost.forward_kernels(w, 16, 512) if k.kind == "matmul")
    no_launch = dataclasses.replace(TUNED, matmul_fixed_seconds=0.0)
    with_launch = speed.time_kernels([gemm], w, H200, TUNED, host_seconds_per_op=0.0).gpu_seconds
    without = speed.time_kernels([gemm], w, H200, no_launch, host_seconds_per_op=0.0).gpu_seconds
    assert with_launch - without == pytest.approx(gemm.kernel_launches * gemm.count * fixed, rel=1e-6)


def test_the_tuned_encoder_s_residual_sites_move_what_fitbench_s_operator_moves() -> None:
    """The tuned BERT-style encoder runs each residual site as fitbench's fused operator: forward
    reads y (bf16) and x and writes s, out and out's bf16 copy, x, s and out at the residual
    stream's width: 16 bytes an element with autocast's FP32 stream (amp-fp16, a T4), 10 with the
    bf16 stream tuned keeps at amp-bf16 (execution.sixteen_bit_residual); backward the same count,
    with three kernels a site (the row kernel and two column sums). A LoRA-adapted encoder
    (transformers' BERT) keeps inductor's region, mask inside, and a backward of twice its
    forward."""
    from fitbench.estimate.dtypes import activation_dtypes
    from fitbench.estimate.transformer_cost import forward_kernels, fused_pointwise_bytes_per_token

    w = workload_as_run(get_workload("bert-base-imdb", precision="amp-bf16"), "tuned", H200)
    arch = w.arch
    dt = activation_dtypes(w, dropout=True)
    h, tokens = arch.hidden_size, 16 * 512
    inside, inside_k, _, _ = fused_pointwise_bytes_per_token(arch, dt)
    ours, ours_k, _, _ = fused_pointwise_bytes_per_token(arch, dt, fused_residual_norm=True)
    assert (inside_k, ours_k) == (2.0, 2.0)
    assert ours == pytest.approx(2 * h * 16)  # two sites, 16 bytes an element with an FP32 stream
    assert inside == pytest.approx(2 * h * (2 + 4 + 4 + 2 + 1))  # y, x in; x, bf16 copy, mask out
    sixteen, _, _, _ = fused_pointwise_bytes_per_token(
        arch, dataclasses.replace(dt, res=2), fused_residual_norm=True
    )
    assert sixteen == pytest.approx(2 * h * 10)

    def layer_norm(workload):
        (k,) = [k for k in forward_kernels(workload, 16, 512) if k.name == "layer_norm"]
        return k.fused

    plain = layer_norm(w)
    assert plain.kernel_launches == 2.0 and plain.bytes == pytest.approx(tokens * sixteen)
    assert plain.backward_bytes == pytest.approx(tokens * sixteen) and plain.backward_launches == 6.0
    on_t4 = workload_as_run(get_workload("bert-base-imdb", precision="amp-bf16"), "tuned", get_gpu("t4"))
    assert on_t4.precision == "amp-fp16"  # no bf16 on a T4: autocast's FP32 stream
    fp32_stream = layer_norm(on_t4)
    assert fp32_stream.bytes == fp32_stream.backward_bytes == pytest.approx(tokens * ours)
    lora = layer_norm(w.replace(peft="lora"))
    assert lora.kernel_launches == 2.0 and lora.bytes == pytest.approx(tokens * inside)
    assert lora.backward_bytes == pytest.approx(2 * tokens * inside) and lora.backward_launches == 4.0
