"""The PaddlePaddle backend on CPU: real tiny models, real Paddle errors, the contract only.

The CPU build of Paddle turns auto_cast and GradScaler into no-ops and has no half-precision
matmul, so these tests check two things: the AMP code path runs, and the session says plainly
that the requested precision was not in effect.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from fitbench.backends import get_backend  # noqa: E402
from fitbench.backends.base import RunOptions  # noqa: E402
from fitbench.backends.input_pipeline import HOST_NO_COPY  # noqa: E402
from fitbench.backends.paddle import models  # noqa: E402
from fitbench.backends.paddle.session import (  # noqa: E402
    LOSS_SCALING,
    native_bf16,
    parse_device,
    plan_precision,
)
from fitbench.catalog import get_gpu  # noqa: E402
from fitbench.errors import FitbenchError  # noqa: E402
from fitbench.estimate.execution import precision_as_run  # noqa: E402
from fitbench.workloads.arch import ResNetArch, TransformerArch  # noqa: E402
from fitbench.workloads.presets import (  # noqa: E402
    BERT_BASE,
    LLAMA_7B,
    SCENARIOS,
    TINY_BERT,
    TINY_LLAMA,
    get_workload,
)

pytestmark = pytest.mark.paddle

BACKEND = get_backend("paddle")
CPU = RunOptions(device="cpu")
TUNED_CPU = RunOptions(device="cpu", exec_mode="tuned")
HOPPER, TURING = (9, 0), (7, 5)  # compute capabilities: H200 has bf16 tensor cores, T4 has none
TRAINABLE = {"resnet50-cifar10": {}, "bert-base-imdb": {}, "llm-6b": {"mode": "train", "seq_len": 16}}


def tiny(name: str, **overrides: object):
    return get_workload(name, tiny=True, **overrides)


def trainable_values(session) -> list[np.ndarray]:
    return [p.numpy().copy() for p in session.model.parameters() if not p.stop_gradient]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- parameter counts -------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCENARIOS)
def test_tiny_models_have_the_estimators_parameter_count(name):
    workload = tiny(name)
    session = BACKEND.open(workload, CPU)
    expected = workload.arch.param_count()
    assert session.notes["params"] == expected
    assert models.trainable_param_count(session.model) == expected
    assert BACKEND.param_count(workload) == expected


def test_resnet50_is_paddle_visions_and_counts_like_torchvision():
    model, source = models.build_model(ResNetArch(depth=50, num_classes=10))
    assert source.startswith("paddle.vision.models.resnet50")
    # BatchNorm's running mean/variance are Paddle parameters with stop_gradient; they are not counted.
    frozen = sum(math.prod(p.shape) for p in model.parameters() if p.stop_gradient)
    assert frozen > 0
    assert models.trainable_param_count(model) == 23_528_522
    assert BACKEND.param_count(get_workload("resnet50-cifar10")) == 23_528_522
    assert models.param_count(ResNetArch(depth=50, num_classes=1000)) == 25_557_032


@pytest.mark.parametrize("depth", [18, 34, 101, 152])
def test_standard_resnets_match_the_estimator(depth):
    arch = ResNetArch(depth=depth, num_classes=1000)
    assert models.param_count(arch) == arch.param_count()


def test_compact_resnet_handles_widths_paddle_vision_cannot():
    arch = ResNetArch(depth=18, num_classes=7, base_width=16, layers=(1, 2, 1, 1))
    model, source = models.build_model(arch)
    assert "BasicBlock" in source
    assert models.trainable_param_count(model) == arch.param_count()
    assert model(paddle.randn([2, 3, 32, 32])).shape == [2, 7]


@pytest.mark.slow
def test_bert_base_real_size_has_109_483_778_parameters():
    model, _ = models.build_model(BERT_BASE)
    assert models.trainable_param_count(model) == 109_483_778 == BERT_BASE.param_count()


def test_llama_7b_is_counted_without_allocating_its_weights():
    before = rss_bytes()
    count = BACKEND.param_count(get_workload("llm-6b"))
    grown = rss_bytes() - before
    assert count == 6_738_415_616 == LLAMA_7B.param_count()
    assert grown < 200 * 2**20, f"counting Llama-7B grew the process by {grown / 2**20:.0f} MiB"


@pytest.mark.parametrize(
    "arch",
    [
        TransformerArch(
            kind="decoder",
            vocab_size=512,
            hidden_size=128,
            num_layers=3,
            num_heads=8,
            num_kv_heads=2,
            intermediate_size=344,
            mlp="swiglu",
            norm="rmsnorm",
            position="rotary",
            qkv_bias=True,
            out_bias=False,
            mlp_bias=False,
            tie_embeddings=True,
            pooler=False,
            num_labels=0,
        ),
        TransformerArch(
            kind="decoder",
            vocab_size=500,
            hidden_size=96,
            num_layers=2,
            num_heads=4,
            intermediate_size=384,
            max_positions=256,
            mlp="gelu",
            norm="layernorm",
            position="learned",
            tie_embeddings=True,
            pooler=False,
            num_labels=0,
        ),
        TransformerArch(
            kind="decoder",
            vocab_size=300,
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            head_dim=32,
            intermediate_size=160,
            mlp="swiglu",
            norm="rmsnorm",
            position="rotary",
            qkv_bias=False,
            out_bias=False,
            mlp_bias=True,
            pooler=False,
            num_labels=0,
        ),
        TransformerArch(
            kind="encoder",
            vocab_size=700,
            hidden_size=96,
            num_layers=2,
            num_heads=3,
            intermediate_size=200,
            max_positions=64,
            type_vocab_size=0,
            num_labels=5,
            pooler=False,
        ),
    ],
    ids=["qwen-like-gqa-tied", "gpt2-like", "wide-heads-mlp-bias", "encoder-no-pooler"],
)
def test_variants_built_for_real_match_the_formula(arch):
    model, _ = models.build_model(arch)
    assert models.trainable_param_count(model) == arch.param_count()
    assert models.param_count(arch) == arch.param_count()


# -- steps --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCENARIOS)
def test_fp32_training_step_updates_every_weight(name):
    session = BACKEND.open(tiny(name, **TRAINABLE[name]), CPU)
    before = trainable_values(session)
    session.step()
    session.step()
    session.sync()
    after = trainable_values(session)
    assert all(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    assert session.notes["precision_in_effect"] == "fp32"
    assert session.notes["warnings"] == []
    assert session.notes["amp_level"] is None and session.scaler is None


@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb"])
def test_inference_step_leaves_weights_alone(name):
    session = BACKEND.open(tiny(name, mode="infer"), CPU)
    before = trainable_values(session)
    session.step()
    assert all(np.array_equal(a, b) for a, b in zip(before, trainable_values(session), strict=True))
    assert session.optimizer is None


@pytest.mark.parametrize("precision", ["amp-fp16", "amp-bf16"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_amp_path_runs_on_cpu_and_says_it_was_not_in_effect(name, precision):
    session = BACKEND.open(tiny(name, precision=precision, **TRAINABLE[name]), CPU)
    before = trainable_values(session)
    session.step()
    assert any(not np.array_equal(a, b) for a, b in zip(before, trainable_values(session), strict=True))
    notes = session.notes
    assert notes["amp_level"] == "O1"
    assert notes["amp_dtype"] == ("float16" if precision == "amp-fp16" else "bfloat16")
    assert notes["loss_scaling"] == 1024
    assert isinstance(session.scaler, paddle.amp.GradScaler)
    assert notes["precision_in_effect"] == "fp32"
    assert notes["warnings"] == [
        f"PaddlePaddle CPU build: {precision} requested, auto_cast is a no-op on CPU; ran in fp32"
    ]
    assert any("amp_guard can only be enabled" in w for w in notes["framework_warnings"])


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_pure_half_training_goes_through_o2_decorate(precision):
    session = BACKEND.open(tiny("bert-base-imdb", precision=precision), CPU)
    session.step()
    assert session.notes["amp_level"] == "O2"
    assert session.notes["precision_in_effect"] == "fp32"
    assert "paddle.amp.decorate(level='O2') kept fp32 weights" in session.notes["warnings"][0]
    assert session.notes["weights_dtype"] == "float32"


@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb", "llm-6b"])
def test_checkpointing_recomputes_and_still_trains(name):
    session = BACKEND.open(tiny(name, checkpointing=True, **TRAINABLE[name]), CPU)
    before = trainable_values(session)
    session.step()
    assert session.notes["checkpointing"] is True
    assert all(not np.array_equal(a, b) for a, b in zip(before, trainable_values(session), strict=True))
    if name == "resnet50-cifar10":
        assert isinstance(session.model.layer1, models.Recomputed)
    else:
        assert session.model.body._recompute is not None


def test_fused_attention_falls_back_to_the_explicit_form_on_cpu():
    session = BACKEND.open(tiny("bert-base-imdb"), CPU)
    assert session.notes["attention"].startswith("eager (fused attention requested")
    assert BACKEND.open(tiny("bert-base-imdb", attention="eager"), CPU).notes["attention"] == "eager"


# -- generation -----------------------------------------------------------------------------


def test_generation_is_counted_like_transformers_generate():
    """decode(n) is a whole generation (prefill + n-1 cached forwards), as the PyTorch backend's
    generate() is, so both backends' tokens per second measure the same thing."""
    workload = tiny("llm-6b")
    session = BACKEND.open(workload, CPU)
    assert session.notes["decode_includes_prefill"] is True
    assert session.cached_tokens == 0
    session.prefill()
    assert session.cached_tokens == workload.prompt_tokens
    session.decode(workload.new_tokens)
    # n new tokens: the last one is produced but never fed back, so it has no cache entry
    assert session.cached_tokens == workload.prompt_tokens + workload.new_tokens - 1
    session.decode(1)  # a new request starts from an empty cache
    assert session.cached_tokens == workload.prompt_tokens
    session.step()  # for a generation workload, one step is one generation
    assert session.cached_tokens == workload.prompt_tokens + workload.new_tokens - 1


def test_generation_in_batches():
    workload = tiny("llm-6b", batch_size=3)
    session = BACKEND.open(workload, CPU)
    session.decode(4)
    assert session._next.shape == [3, 1]
    assert session._caches[0][0].shape == [
        3,
        workload.prompt_tokens + 3,
        TINY_LLAMA.kv_heads,
        TINY_LLAMA.dim_head,
    ]


def test_classifiers_do_not_generate():
    session = BACKEND.open(tiny("bert-base-imdb"), CPU)
    with pytest.raises(TypeError):
        session.prefill()
    with pytest.raises(TypeError):
        session.decode(1)


@pytest.mark.parametrize("precision,dtype", [("fp16", "float16"), ("bf16", "bfloat16")])
def test_half_generation_on_cpu_keeps_fp32_weights_and_says_why(precision, dtype):
    session = BACKEND.open(tiny("llm-6b", precision=precision), CPU)
    session.prefill()
    session.decode(2)
    assert session.notes["precision_in_effect"] == "fp32"
    assert session.notes["weights_dtype"] == "float32"
    assert session.notes["warnings"] == [
        f"PaddlePaddle CPU build: {precision} requested, no {dtype} matmul kernel on CPU; ran in fp32"
    ]


def assert_cached_decoding_matches_a_full_forward(model, vocab_size: int, prompt: int = 8, total: int = 12):
    """A prefill of `prompt` tokens then one-token steps through the KV cache give the logits of
    one forward over all `total` tokens."""
    paddle.seed(3)
    model.eval()
    ids = paddle.randint(0, vocab_size, [2, total])
    with paddle.no_grad():
        full = model(ids).numpy()
        caches = model.new_cache()
        prefill = model(ids[:, :prompt], caches, start=0).numpy()
        steps = [
            model(ids[:, i : i + 1], caches, start=i, last_only=True).numpy()[:, 0]
            for i in range(prompt, total)
        ]
    np.testing.assert_allclose(prefill, full[:, :prompt], atol=1e-5)
    np.testing.assert_allclose(np.stack(steps, axis=1), full[:, prompt:], atol=1e-5)


def test_kv_cache_decoding_matches_a_full_forward():
    model, _ = models.build_model(TINY_LLAMA)
    assert_cached_decoding_matches_a_full_forward(model, TINY_LLAMA.vocab_size)


@pytest.mark.parametrize("arch", [TINY_LLAMA, TINY_BERT], ids=["causal-gqa", "encoder-padding-mask"])
def test_sdpa_path_computes_what_the_explicit_form_does(arch):
    """The GPU path calls paddle's scaled_dot_product_attention in [batch, seq, heads, dim] layout;
    on CPU it runs Paddle's math fallback, which must agree with the explicit form."""
    paddle.seed(4)
    model, _ = models.build_model(arch)
    model.eval()
    ids = paddle.randint(0, arch.vocab_size, [2, 10])
    kwargs = {}
    if arch.kind == "encoder":
        mask = paddle.ones([2, 10], dtype="int64")
        mask[1, 6:] = 0
        kwargs["attention_mask"] = mask
    with paddle.no_grad():
        eager = model(ids, **kwargs).numpy()
        model.body.set_attention("sdpa")
        fused = model(ids, **kwargs).numpy()
    np.testing.assert_allclose(fused, eager, atol=1e-5)


def test_padding_mask_hides_padded_tokens():
    paddle.seed(5)
    model, _ = models.build_model(TINY_BERT)
    model.eval()
    ids = paddle.randint(0, TINY_BERT.vocab_size, [2, 10])
    mask = paddle.ones([2, 10], dtype="int64")
    mask[1, 6:] = 0
    changed = ids.clone()
    changed[1, 8] = (int(ids[1, 8]) + 1) % TINY_BERT.vocab_size
    with paddle.no_grad():
        a, b = model(ids, attention_mask=mask).numpy(), model(changed, attention_mask=mask).numpy()
        c = model(changed).numpy()
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert np.abs(a - c).max() > 1e-4


# -- precision plans --------------------------------------------------------------------------


def test_precision_mapping():
    train = tiny("bert-base-imdb")
    assert plan_precision(train.replace(precision="amp-fp16")).amp_level == "O1"
    assert plan_precision(train.replace(precision="fp16")).amp_level == "O2"
    assert plan_precision(train.replace(precision="bf16")).loss_scaling == 1024
    # bf16 needs no loss scaling; 'tuned' drops the scaler the brief's code keeps
    assert plan_precision(train.replace(precision="amp-bf16"), "tuned").loss_scaling is None
    assert plan_precision(train.replace(precision="amp-fp16"), "tuned").loss_scaling == 1024
    assert plan_precision(train.replace(precision="amp-fp16", mode="infer")).loss_scaling is None
    gen = plan_precision(tiny("llm-6b", precision="fp16"))
    assert gen.half_weights == "float16" and gen.amp_level is None
    fp32 = plan_precision(train)
    assert fp32.amp_level is None and fp32.loss_scaling is None and fp32.half_weights is None


def test_native_bf16_starts_at_ampere():
    assert native_bf16((8, 0)) and native_bf16(HOPPER) and native_bf16((12, 0))
    assert not native_bf16(TURING) and not native_bf16((7, 0)) and not native_bf16(None)


@pytest.mark.parametrize("mode", ["train", "infer"])
@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp-fp16", "amp-bf16"])
@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb"])
def test_tuned_runs_amp_o2_bf16_on_a_bf16_gpu(name, precision, mode):
    workload = tiny(name, precision=precision, mode=mode)
    plan = plan_precision(workload, "tuned", HOPPER)
    training = mode == "train"
    assert (plan.requested, plan.runs) == (precision, "bf16")
    assert (plan.amp_level, plan.amp_dtype, plan.half_weights) == ("O2", "bfloat16", None)
    assert plan.master_weight is training
    assert plan.loss_scaling is None  # bf16 has fp32's exponent range: no GradScaler
    how = "Paddle AMP O2: bf16 weights, fp32 master weights" if training else "Paddle AMP O2: bf16 weights"
    assert plan.notes == (
        f"tuned changed the precision: ran bf16 ({how}) instead of the requested {precision}",
    )


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp-fp16", "amp-bf16"])
def test_tuned_runs_amp_o2_fp16_with_a_grad_scaler_on_a_gpu_without_bf16(precision):
    plan = plan_precision(tiny("bert-base-imdb", precision=precision), "tuned", TURING)
    assert (plan.runs, plan.amp_level, plan.amp_dtype) == ("fp16", "O2", "float16")
    assert plan.master_weight is True and plan.loss_scaling == LOSS_SCALING
    assert plan.notes == (
        "tuned changed the precision: ran fp16 (Paddle AMP O2: fp16 weights, fp32 master weights, "
        f"GradScaler) instead of the requested {precision}; this GPU has no native bf16",
    )
    infer = plan_precision(tiny("bert-base-imdb", precision=precision, mode="infer"), "tuned", TURING)
    assert (infer.runs, infer.amp_dtype, infer.master_weight, infer.loss_scaling) == (
        "fp16",
        "float16",
        False,
        None,
    )


@pytest.mark.parametrize("capability", [HOPPER, TURING])
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_tuned_keeps_pure_half_precision_as_asked(precision, capability):
    plan = plan_precision(tiny("bert-base-imdb", precision=precision), "tuned", capability)
    assert (plan.runs, plan.amp_level, plan.master_weight, plan.notes) == (precision, "O2", True, ())
    assert plan.loss_scaling == (LOSS_SCALING if precision == "fp16" else None)


@pytest.mark.parametrize(
    ("precision", "capability", "weights", "note"),
    [
        ("amp-bf16", HOPPER, "bf16", "generated with bf16 weights instead of amp-bf16"),
        ("amp-fp16", HOPPER, "fp16", "generated with fp16 weights instead of amp-fp16"),
        (
            "amp-bf16",
            TURING,
            "fp16",
            "generated with fp16 weights instead of amp-bf16; this GPU has no native bf16",
        ),
        ("amp-fp16", TURING, "fp16", "generated with fp16 weights instead of amp-fp16"),
    ],
)
def test_tuned_generation_creates_16_bit_weights_for_amp(precision, capability, weights, note):
    plan = plan_precision(tiny("llm-6b", precision=precision), "tuned", capability)
    assert (plan.runs, plan.amp_level) == (weights, None)
    assert plan.half_weights == {"bf16": "bfloat16", "fp16": "float16"}[weights]
    assert plan.notes == (f"tuned changed the precision: {note}",)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_tuned_generation_keeps_non_amp_requests(precision):
    workload = tiny("llm-6b", precision=precision)
    assert plan_precision(workload, "tuned", HOPPER) == plan_precision(workload, "default", HOPPER)


@pytest.mark.parametrize("precision", ["fp32", "amp-fp16", "amp-bf16", "fp16", "bf16"])
def test_default_plan_does_not_depend_on_the_gpu(precision):
    for name in ("bert-base-imdb", "llm-6b"):
        workload = tiny(name, precision=precision)
        assert (
            plan_precision(workload, "default", HOPPER)
            == plan_precision(workload, "default", TURING)
            == (plan_precision(workload))
        )


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16", "bf16"])
@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("resnet50-cifar10", "train"),
        ("resnet50-cifar10", "infer"),
        ("bert-base-imdb", "train"),
        ("bert-base-imdb", "infer"),
        ("llm-6b", "train"),
        ("llm-6b", "infer"),
    ],
)
def test_the_estimators_tuned_precision_is_what_the_backend_plans(name, mode, precision):
    """fitbench.estimate.execution mirrors plan_precision: an estimate of Paddle's tuned mode
    describes the precision the backend really runs on that card."""
    if mode == "infer" and name == "llm-6b" and precision == "tf32":
        pytest.skip("tf32 generation is fp32 to the backend and tf32 to the estimator in both modes")
    overrides = {"seq_len": 16} if (name, mode) == ("llm-6b", "train") else {}
    workload = tiny(name, precision=precision, mode=mode, **overrides)
    for capability, gpu in ((HOPPER, get_gpu("h200")), (TURING, get_gpu("t4"))):
        assert gpu.bf16 is native_bf16(capability)
        plan = plan_precision(workload, "tuned", capability)
        assert plan.runs == precision_as_run(workload, "tuned", gpu, "paddle")


@pytest.mark.parametrize("optimizer", ["adam", "momentum"])
def test_tuned_training_uses_the_multi_tensor_update_and_matches_the_default_step(optimizer):
    """One kernel for all parameters changes how the update is launched, not what it computes."""
    workload = tiny("llm-6b", mode="train", seq_len=16, optimizer=optimizer)
    default, tuned = BACKEND.open(workload, CPU), BACKEND.open(workload, TUNED_CPU)
    before = trainable_values(tuned)
    for session in (default, tuned):
        session.step()
        session.step()
    after = trainable_values(tuned)
    assert all(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    for d, t in zip(trainable_values(default), after, strict=True):
        np.testing.assert_allclose(t, d, rtol=1e-5, atol=1e-6)
    kind = {"adam": "Adam", "momentum": "Momentum"}[optimizer]
    assert tuned.notes["optimizer"] == f"{kind}(use_multi_tensor=True)"
    assert default.notes["optimizer"] == kind
    assert tuned.optimizer._use_multi_tensor and not default.optimizer._use_multi_tensor


@pytest.mark.parametrize(("optimizer", "kind"), [("adamw", "AdamW"), ("sgd", "SGD")])
def test_tuned_says_when_paddle_has_no_multi_tensor_update(optimizer, kind):
    session = BACKEND.open(tiny("resnet50-cifar10", optimizer=optimizer), TUNED_CPU)
    before = trainable_values(session)
    session.step()
    assert all(not np.array_equal(a, b) for a, b in zip(before, trainable_values(session), strict=True))
    assert session.notes["optimizer"] == (
        f"{kind} (per-parameter update: Paddle's {kind} has no use_multi_tensor)"
    )


@pytest.mark.parametrize("name", SCENARIOS)
def test_tuned_on_cpu_keeps_the_requested_precision_and_says_so(name):
    session = BACKEND.open(tiny(name, **TRAINABLE[name]), TUNED_CPU)
    before = trainable_values(session)
    session.step()
    assert all(not np.array_equal(a, b) for a, b in zip(before, trainable_values(session), strict=True))
    assert session.notes["precision_in_effect"] == "fp32"
    assert session.notes["amp_level"] is None and session.scaler is None
    assert session.notes["warnings"] == [
        "tuned runs fp32 as AMP O2 on CUDA GPUs only; on CPU it kept the requested fp32"
    ]


def test_tuned_amp_bf16_on_cpu_drops_the_scaler_and_reports_fp32():
    session = BACKEND.open(tiny("bert-base-imdb", precision="amp-bf16"), TUNED_CPU)
    session.step()
    notes = session.notes
    assert (notes["amp_level"], notes["loss_scaling"], session.scaler) == ("O1", None, None)
    assert notes["precision_in_effect"] == "fp32"
    assert notes["warnings"] == [
        "tuned runs amp-bf16 as AMP O2 on CUDA GPUs only; on CPU it kept the requested amp-bf16",
        "PaddlePaddle CPU build: amp-bf16 requested, auto_cast is a no-op on CPU; ran in fp32",
    ]


def test_tuned_amp_generation_on_cpu_runs_and_says_what_ran():
    workload = tiny("llm-6b", precision="amp-fp16")
    session = BACKEND.open(workload, TUNED_CPU)
    session.decode(3)
    assert session.cached_tokens == workload.prompt_tokens + 2
    assert session.notes["precision_in_effect"] == "fp32"
    assert session.notes["warnings"][0] == (
        "tuned generates AMP requests with 16-bit weights on CUDA GPUs only; on CPU it kept the requested "
        "amp-fp16"
    )


def test_tuned_pure_bf16_training_decorates_with_master_weights():
    session = BACKEND.open(tiny("bert-base-imdb", precision="bf16"), TUNED_CPU)
    session.step()
    assert session.plan.master_weight is True and session.scaler is None
    assert session.notes["amp_level"] == "O2"
    # Paddle's CPU build leaves the weights fp32, so no master copies exist and none are claimed
    assert session.notes["weights_dtype"] == "float32"
    assert session.notes["master_weights"] is False
    assert session.notes["precision_in_effect"] == "fp32"


@pytest.mark.parametrize("precision", ["int8", "int4"])
def test_quantized_weights_are_refused_with_a_hint(precision):
    with pytest.raises(FitbenchError, match=f"does not run {precision}") as err:
        BACKEND.open(tiny("llm-6b", precision=precision), CPU)
    assert "estimate" in err.value.hint


# -- device, memory, errors -----------------------------------------------------------------


def test_memory_is_unknown_on_cpu_and_peak_controls_are_harmless():
    session = BACKEND.open(tiny("resnet50-cifar10"), CPU)
    session.reset_peak()
    session.step()
    session.sync()
    assert session.memory() == {
        "peak_allocated": None,
        "peak_reserved": None,
        "allocated": None,
        "reserved": None,
    }
    session.close()


def test_device_strings():
    assert parse_device("cpu") == ("cpu", None)
    assert parse_device("cuda") == ("gpu", 0)
    assert parse_device("CUDA:2") == ("gpu", 2)
    assert parse_device("gpu:1") == ("gpu", 1)
    for bad in ("tpu", "cuda:x", "cuda:-1"):
        with pytest.raises(FitbenchError, match="unknown device"):
            parse_device(bad)


@pytest.mark.skipif(paddle.device.is_compiled_with_cuda(), reason="this PaddlePaddle build has CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_on_a_cpu_build_is_one_clear_error(device):
    with pytest.raises(FitbenchError) as err:
        BACKEND.device_info(device)
    assert err.value.message == "this PaddlePaddle build has no CUDA support"
    assert "paddlepaddle-gpu" in err.value.hint and "--device cpu" in err.value.hint
    with pytest.raises(FitbenchError, match="no CUDA support"):
        BACKEND.open(tiny("resnet50-cifar10"), RunOptions(device=device))


def test_device_info_and_version_on_cpu():
    info = BACKEND.device_info("cpu")
    assert info["type"] == "cpu" and info["name"]
    assert info["total_memory_bytes"] > 2**28
    assert info["environment"]["paddle"] == paddle.__version__
    assert BACKEND.version().startswith(paddle.__version__)
    assert BACKEND.name == "paddle"


def test_is_oom_recognises_paddles_own_errors():
    try:
        paddle.empty([1 << 50], dtype="uint8")  # 1 PiB: refused by Paddle's allocator at once
    except Exception as exc:  # Paddle raises ResourceExhausted as MemoryError
        real = exc
    else:
        pytest.fail("a 1 PiB allocation succeeded")
    assert "ResourceExhausted" in str(real)
    assert BACKEND.is_oom(real)
    gpu_text = (
        "(ResourceExhausted) Out of memory error on GPU 0. Cannot allocate 2.000000GB memory "
        "on GPU 0, 21.5GB memory has been allocated and available memory is only 1.2GB."
    )
    assert BACKEND.is_oom(RuntimeError(gpu_text))
    assert BACKEND.is_oom(SystemError("ResourceExhaustedError: Out of memory error on GPU 1."))
    try:
        try:
            raise MemoryError("cudaErrorMemoryAllocation")
        except MemoryError as inner:
            raise RuntimeError("step failed") from inner
    except RuntimeError as chained:
        assert BACKEND.is_oom(chained)
    assert not BACKEND.is_oom(ValueError("(InvalidArgument) The shape of input does not match"))
    assert not BACKEND.is_oom(FitbenchError("out of memory on a 12 GB card", "use a smaller batch"))


# -- local datasets ---------------------------------------------------------------------------


def _write_cifar(folder) -> None:
    rng = np.random.default_rng(0)
    folder.mkdir()
    for i in range(1, 6):
        batch = {
            b"data": rng.integers(0, 256, size=(4, 3072), dtype=np.uint8),
            b"labels": [int(v) for v in rng.integers(0, 10, size=4)],
        }
        (folder / f"data_batch_{i}").write_bytes(pickle.dumps(batch, protocol=2))


def _write_imdb(root) -> None:
    for label, words in (("pos", "a wonderful warm film"), ("neg", "dull and far too long")):
        folder = root / "train" / label
        folder.mkdir(parents=True)
        for i in range(3):
            (folder / f"{i}_{7 if label == 'pos' else 2}.txt").write_text(f"{words} number {i}.")


def test_training_on_a_local_cifar10_folder(tmp_path):
    _write_cifar(tmp_path / "cifar-10-batches-py")
    session = BACKEND.open(tiny("resnet50-cifar10"), RunOptions(device="cpu", data=str(tmp_path)))
    session.step()
    session.step()
    assert session.notes["dataset_size"] == 20
    assert "CIFAR-10" in session.notes["data"]


def test_training_on_a_local_imdb_folder_uses_the_padding_mask(tmp_path):
    _write_imdb(tmp_path / "aclImdb")
    session = BACKEND.open(tiny("bert-base-imdb"), RunOptions(device="cpu", data=str(tmp_path)))
    batch = session.batches.next()
    assert "attention_mask" in batch  # short reviews are padded to seq 64
    session.step()
    assert session.notes["dataset_size"] == 6


# -- inputs prepared once ---------------------------------------------------------------------


def test_inputs_are_prepared_once_and_cycled_without_a_copy_on_cpu(tmp_path):
    _write_cifar(tmp_path / "cifar-10-batches-py")  # 20 images at batch 8: 3 batches an epoch
    session = BACKEND.open(tiny("resnet50-cifar10"), RunOptions(device="cpu", data=str(tmp_path)))
    batches = session.batches
    assert len(batches.prepared) == 3
    assert session.notes["input_pipeline"] == HOST_NO_COPY
    assert session.notes["input_batches_prepared"] == 3
    first = [batches.next() for _ in range(3)]
    assert first[0]["pixel_values"].dtype == paddle.float32 and first[0]["labels"].dtype == paddle.int64
    assert batches.next()["pixel_values"] is first[0]["pixel_values"]  # the fourth step starts over
    session.step()
    assert session.notes["dataset_size"] == 20


def test_synthetic_inputs_hold_only_what_each_model_reads():
    decoder = BACKEND.open(tiny("llm-6b", mode="train", seq_len=16), CPU)
    assert set(decoder.batches.next()) == {"input_ids"}
    encoder = BACKEND.open(tiny("bert-base-imdb"), CPU)
    batch = encoder.batches.next()
    # synthetic sequences are full length: no padding, so no mask
    assert set(batch) == {"input_ids", "token_type_ids", "labels"}
    assert all(t.dtype == paddle.int64 for t in batch.values())
    assert encoder.notes["input_pipeline"] == HOST_NO_COPY
    generator = BACKEND.open(tiny("llm-6b"), CPU)
    w = generator.workload
    assert generator.batches.next()["input_ids"].shape == [w.batch_size, w.prompt_tokens]


# -- layouts beyond Llama's: query/key norms, four norms a block -----------------------------------
QK_HEAD = dataclasses.replace(TINY_LLAMA, qk_norm="head", model_type="qwen3")
QK_FULL = dataclasses.replace(TINY_LLAMA, qk_norm="full", model_type="olmo2")
FOUR_NORMS = dataclasses.replace(TINY_LLAMA, norms_per_layer=4, model_type="glm4")


@pytest.mark.parametrize("arch", [QK_HEAD, QK_FULL, FOUR_NORMS], ids=["qk-head", "qk-full", "four-norms"])
def test_norm_layouts_count_like_the_estimator_train_and_decode(arch):
    model, _ = models.build_model(arch)
    assert models.trainable_param_count(model) == arch.param_count() > TINY_LLAMA.param_count()
    workload = tiny("llm-6b", mode="train", seq_len=16).replace(arch=arch)
    session = BACKEND.open(workload, CPU)
    before = trainable_values(session)
    session.step()
    session.sync()
    assert all(not np.array_equal(a, b) for a, b in zip(before, trainable_values(session), strict=True))
    assert_cached_decoding_matches_a_full_forward(model, arch.vocab_size, total=10)


def test_query_key_norms_change_the_attention():
    """The norms are applied: with a weight of 2 on every query element the scores change."""
    paddle.seed(0)
    model, _ = models.build_model(QK_HEAD)
    model.eval()
    ids = paddle.randint(0, QK_HEAD.vocab_size, [1, 6])
    with paddle.no_grad():
        before = model(ids).numpy()
        for layer in model.body.layers:
            layer.attn.q_norm.weight.set_value(paddle.full_like(layer.attn.q_norm.weight, 2.0))
        after = model(ids).numpy()
    assert not np.allclose(before, after)


@pytest.mark.parametrize(
    "fields",
    [
        dict(linear_layers=1, linear_kind="mamba2", linear_key_heads=1, linear_key_head_dim=8)
        | dict(linear_value_heads=4, linear_value_head_dim=32, linear_conv_kernel=4),
        dict(mlp_free_layers=1),
    ],
    ids=["mamba-2 layers", "a block without an MLP"],
)
def test_hybrid_layouts_are_refused_not_built_as_a_plain_decoder(fields):
    """A decoder with Mamba-2 layers (Bamba, rotary like Llama) or blocks without an MLP
    (Nemotron-H) is refused: built from the plain decoder it would be another model."""
    arch = dataclasses.replace(TINY_LLAMA, **fields)
    with pytest.raises(FitbenchError, match="state-space or linear-attention layers"):
        models.build_transformer(arch)
