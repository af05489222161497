"""The PyTorch backend: exact models from Workload objects, precisions, sessions, OOM detection.

Real torch, real tiny models on the CPU; real-size models only on the meta device (shapes, no
memory), which is enough to pin their parameter counts against the estimator's arithmetic.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fitbench.backends import get_backend  # noqa: E402
from fitbench.backends.base import RunOptions  # noqa: E402
from fitbench.backends.torch.models import build_model, count_parameters  # noqa: E402
from fitbench.backends.torch.precision import plan_precision  # noqa: E402
from fitbench.errors import FitbenchError  # noqa: E402
from fitbench.workloads.arch import ResNetArch, TransformerArch  # noqa: E402
from fitbench.workloads.presets import LLAMA_70B, TINY_LLAMA, get_workload  # noqa: E402
from fitbench.workloads.workload import Workload  # noqa: E402

pytestmark = pytest.mark.torch

BACKEND = get_backend("torch")
CPU = RunOptions(device="cpu")


# -- parameter counts -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("resnet50-cifar10", 23_528_522),
        ("bert-base-imdb", 109_483_778),
        ("llm-6b", 6_738_415_616),
    ],
)
def test_real_size_models_match_the_estimator_exactly(name, expected):
    workload = get_workload(name)
    assert workload.param_count() == expected
    assert BACKEND.param_count(workload) == expected


def test_resnet50_imagenet_is_torchvisions_25_557_032():
    assert BACKEND.param_count(get_workload("resnet50-imagenet")) == 25_557_032


@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb", "llm-6b"])
def test_tiny_models_match_the_estimator(name):
    workload = get_workload(name, tiny=True)
    assert BACKEND.param_count(workload) == workload.param_count()


@pytest.mark.parametrize(
    "arch",
    [
        ResNetArch(depth=18, num_classes=10),
        ResNetArch(depth=34, num_classes=100, base_width=32),
        ResNetArch(depth=101, num_classes=10, base_width=16, layers=(1, 2, 1, 1)),
    ],
)
def test_resnet_variants(arch):
    workload = Workload(name="r", arch=arch, image_size=32)
    assert BACKEND.param_count(workload) == arch.param_count()


@pytest.mark.parametrize(
    "arch",
    [
        LLAMA_70B,  # grouped-query attention, 80 layers: still instant on the meta device
        TransformerArch(
            kind="decoder",
            vocab_size=500,
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            num_kv_heads=2,
            intermediate_size=128,
            mlp="swiglu",
            norm="rmsnorm",
            position="rotary",
            qkv_bias=True,
            out_bias=False,
            mlp_bias=False,
            tie_embeddings=True,
            pooler=False,
            num_labels=0,
        ),  # Qwen2
        TransformerArch(
            kind="decoder",
            vocab_size=500,
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            intermediate_size=256,
            max_positions=128,
            tie_embeddings=True,
            pooler=False,
            num_labels=0,
        ),  # GPT-2
        TransformerArch(
            kind="encoder",
            vocab_size=500,
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            intermediate_size=128,
            max_positions=128,
            type_vocab_size=2,
            pooler=False,
        ),
    ],
)
def test_other_transformer_layouts(arch):
    mode = "infer" if arch.kind == "decoder" else "train"
    workload = Workload(name="t", arch=arch, mode=mode, seq_len=32, prompt_tokens=4, new_tokens=2)
    assert BACKEND.param_count(workload) == arch.param_count()


def test_unsupported_layout_is_one_clear_error():
    arch = TransformerArch(
        kind="encoder",
        vocab_size=500,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        intermediate_size=128,
        mlp="swiglu",
        norm="rmsnorm",
        position="rotary",
    )
    with pytest.raises(FitbenchError, match="cannot build"):
        BACKEND.param_count(Workload(name="x", arch=arch, seq_len=16))


def test_torchvision_and_fitbench_resnet_have_the_same_structure():
    tvm = pytest.importorskip("torchvision.models")
    from fitbench.backends.torch.models import ResNet

    arch = ResNetArch(depth=50, num_classes=10)
    ours = ResNet(arch).to("meta").state_dict()
    theirs = tvm.resnet50(weights=None, num_classes=10).to("meta").state_dict()
    assert {k: tuple(v.shape) for k, v in ours.items()} == {k: tuple(v.shape) for k, v in theirs.items()}


# -- building: dtype, device, values ------------------------------------------------------------
def test_weights_are_created_in_the_target_dtype():
    model, _ = build_model(get_workload("llm-6b"), device="meta", dtype=torch.float16)
    dtypes = {p.dtype for p in model.parameters()}
    assert dtypes == {torch.float16}


def test_transformer_weights_are_random_not_zero_and_tied_when_asked():
    arch = TransformerArch(**{**TINY_LLAMA.__dict__, "tie_embeddings": True})
    workload = Workload(name="t", arch=arch, mode="infer", prompt_tokens=4, new_tokens=2)
    model, notes = build_model(workload, device="cpu")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert count_parameters(model) == arch.param_count()
    weight = model.model.layers[0].mlp.gate_proj.weight
    assert torch.isfinite(weight).all()
    assert 0.01 < float(weight.detach().std()) < 0.04  # N(0, 0.02), not zeros and not garbage
    norm = model.model.layers[0].input_layernorm.weight
    assert torch.equal(norm, torch.ones_like(norm))
    assert notes["attn_implementation"] == "sdpa"


def test_eager_attention_is_built_when_asked():
    workload = get_workload("bert-base-imdb", tiny=True).replace(attention="eager")
    _, notes = build_model(workload, device="meta")
    assert notes["attn_implementation"] == "eager"


# -- precision plans ------------------------------------------------------------------------------
def test_precision_plans_on_cpu():
    cpu = torch.device("cpu")
    fp32 = plan_precision("fp32", cpu, training=True)
    assert (fp32.in_effect, fp32.param_dtype, fp32.autocast_dtype) == ("fp32", torch.float32, None)
    amp = plan_precision("amp-bf16", cpu, training=True)
    assert amp.in_effect == "amp-bf16" and amp.autocast_dtype == torch.bfloat16 and not amp.grad_scaler
    amp16 = plan_precision("amp-fp16", cpu, training=True)
    if amp16.in_effect == "amp-fp16":
        assert amp16.grad_scaler
    else:
        assert amp16.warnings  # honest about what ran
    tf32 = plan_precision("tf32", cpu, training=True)
    assert tf32.in_effect == "fp32" and "TF32" in tf32.warnings[0]
    pure = plan_precision("bf16", cpu, training=False)
    assert pure.param_dtype in (torch.bfloat16, torch.float32)


def test_int8_without_bitsandbytes_or_gpu_is_a_clear_error():
    with pytest.raises(FitbenchError) as info:
        plan_precision("int8", torch.device("cpu"), training=False)
    assert "bitsandbytes" in str(info.value) or "CUDA" in str(info.value)


# -- sessions ---------------------------------------------------------------------------------------
def _first_param(session):
    return next(p for p in session.model.parameters() if p.requires_grad).detach().clone()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb"])
def test_training_step_updates_the_weights(name):
    session = BACKEND.open(get_workload(name, tiny=True), CPU)
    before = _first_param(session)
    session.step()
    session.sync()
    assert not torch.equal(before, _first_param(session))
    assert session.notes["params"] == get_workload(name, tiny=True).param_count()
    assert session.notes["precision_in_effect"] == "fp32"
    assert session.memory() == {
        "peak_allocated": None,
        "peak_reserved": None,
        "allocated": None,
        "reserved": None,
    }


def test_amp_bf16_training_on_cpu_runs_in_bf16():
    workload = get_workload("bert-base-imdb", tiny=True).replace(precision="amp-bf16")
    session = BACKEND.open(workload, CPU)
    session.step()
    assert session.notes["precision_in_effect"] == "amp-bf16"
    assert session.notes["autocast_dtype"] == "bfloat16"
    assert session.notes["param_dtype"] == "float32"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb"])
def test_checkpointing_and_sgd_momentum(name):
    workload = get_workload(name, tiny=True).replace(checkpointing=True, optimizer="momentum")
    session = BACKEND.open(workload, CPU)
    before = _first_param(session)
    session.step()
    session.step()
    assert not torch.equal(before, _first_param(session))
    assert session.notes["optimizer"] == "SGD(foreach)" and session.notes["checkpointing"] is True


@pytest.mark.parametrize(("impl", "flag"), [("foreach", "foreach"), ("fused", "fused"), ("for-loop", None)])
def test_the_optimizer_implementation_asked_for_is_the_one_that_runs(impl, flag):
    workload = get_workload("resnet50-cifar10", tiny=True).replace(optimizer="adamw", optimizer_impl=impl)
    session = BACKEND.open(workload, CPU)
    session.step()
    group = session.optimizer.param_groups[0]
    assert session.notes["optimizer"] == f"AdamW({impl})"
    assert bool(group["fused"]) == (flag == "fused") and bool(group["foreach"]) == (flag == "foreach")


def test_gradient_accumulation_keeps_gradients_until_the_nth_micro_batch():
    workload = get_workload("bert-base-imdb", tiny=True).replace(grad_accum=3)
    session = BACKEND.open(workload, CPU)
    first = _first_param(session)
    session.step()
    session.step()
    # two micro-batches: gradients accumulated and alive, no update yet
    assert torch.equal(first, _first_param(session))
    assert all(p.grad is not None for p in session.model.parameters() if p.requires_grad)
    session.step()  # the third: the optimizer steps
    assert not torch.equal(first, _first_param(session))
    assert session.notes["grad_accum"] == 3


def test_decoder_training_step():
    workload = get_workload("llm-6b", tiny=True).replace(mode="train", seq_len=32, precision="fp32")
    session = BACKEND.open(workload, CPU)
    before = _first_param(session)
    session.step()
    assert not torch.equal(before, _first_param(session))


@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb"])
def test_inference_step(name):
    session = BACKEND.open(get_workload(name, tiny=True).replace(mode="infer"), CPU)
    session.step()
    assert not session.model.training


def test_generation_produces_exactly_the_new_tokens():
    workload = get_workload("llm-6b", tiny=True).replace(batch_size=2, new_tokens=5)
    session = BACKEND.open(workload, CPU)
    session.prefill()
    session.decode(5)
    assert session.notes["generated_tokens"] == 5
    assert session.notes["decode_includes_prefill"] is True
    assert session.input_ids.shape == (2, workload.prompt_tokens)


def test_unknown_exec_mode_is_one_line():
    with pytest.raises(FitbenchError, match="fastest"):
        BACKEND.open(get_workload("resnet50-cifar10", tiny=True), RunOptions(exec_mode="fastest"))


# -- device and errors ------------------------------------------------------------------------------
def test_device_info_cpu():
    info = BACKEND.device_info("cpu")
    assert info["type"] == "cpu" and info["name"]
    assert info["environment"]["torch"] == torch.__version__


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_one_line():
    with pytest.raises(FitbenchError) as info:
        BACKEND.device_info("cuda")
    assert "no CUDA GPU found" in info.value.message and info.value.hint == "use --device cpu"


def test_is_oom_recognises_torch_out_of_memory_errors():
    assert BACKEND.is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert BACKEND.is_oom(RuntimeError("CUDA error: out of memory"))
    assert BACKEND.is_oom(
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] . DefaultCPUAllocator: "
            "can't allocate memory: you tried to allocate 1099511627776 bytes."
        )
    )
    assert BACKEND.is_oom(RuntimeError("CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"))
    wrapped = ValueError("step failed")
    wrapped.__cause__ = torch.OutOfMemoryError("CUDA out of memory.")
    assert BACKEND.is_oom(wrapped)


def test_is_oom_rejects_other_errors():
    assert not BACKEND.is_oom(ValueError("out of range"))
    assert not BACKEND.is_oom(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not BACKEND.is_oom(KeyError("memory"))


def test_a_real_cpu_allocation_failure_is_recognised():
    """An impossible allocation fails at once (no memory is touched) with the CPU allocator's error."""
    with pytest.raises(RuntimeError) as info:
        torch.empty(1 << 62, dtype=torch.uint8)
    assert BACKEND.is_oom(info.value)
