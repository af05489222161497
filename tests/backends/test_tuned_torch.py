"""`--exec tuned` for PyTorch on a CPU: the tuned sessions through the real runner, and the static
KV-cache decoder checked against a plain full-sequence forward of the same weights.

CUDA graphs need a GPU; on a CPU the tuned code runs the same step eagerly and says so. What
these tests pin is what a GPU run relies on: the static cache, the position handling, rotary as
a per-position matrix, grouped-query attention over the cache, and exact parameter counts.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fitbench.advise.i18n import measurement_text  # noqa: E402
from fitbench.backends import get_backend  # noqa: E402
from fitbench.backends.base import RunOptions  # noqa: E402
from fitbench.backends.torch.models import count_parameters  # noqa: E402
from fitbench.backends.torch.static_decoder import (  # noqa: E402
    StaticDecoder,
    StaticKVGenerator,
    cache_length,
    reference_greedy,
    rotary_tables,
)
from fitbench.backends.torch.tuned import (  # noqa: E402
    COMPILE_UNAVAILABLE,
    CPU_NO_GRAPHS,
    choose_precision,
    generation_precision,
    open_step_session,
)
from fitbench.errors import FitbenchError  # noqa: E402
from fitbench.measure.runner import measure  # noqa: E402
from fitbench.workloads.arch import TransformerArch  # noqa: E402
from fitbench.workloads.presets import LLAMA_7B, LLAMA_70B, TINY_LLAMA, get_workload  # noqa: E402
from fitbench.workloads.workload import Workload  # noqa: E402

pytestmark = pytest.mark.torch

BACKEND = get_backend("torch")
TUNED_CPU = RunOptions(device="cpu", exec_mode="tuned")

MHA = TransformerArch(**{**TINY_LLAMA.__dict__, "num_kv_heads": None, "vocab_size": 512})
QWEN_LIKE = TransformerArch(**{**TINY_LLAMA.__dict__, "qkv_bias": True, "tie_embeddings": True})
ALL_BIASES = TransformerArch(
    **{
        **TINY_LLAMA.__dict__,
        "num_heads": 8,
        "num_kv_heads": 2,
        "qkv_bias": True,
        "out_bias": True,
        "mlp_bias": True,
    }
)
ARCHS = {"gqa": TINY_LLAMA, "mha": MHA, "qwen-like": QWEN_LIKE, "biases": ALL_BIASES}


def _model(arch: TransformerArch, seed: int = 0) -> StaticDecoder:
    torch.manual_seed(seed)
    return StaticDecoder(arch, device="cpu", dtype=torch.float32)


# -- the static decoder ---------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS.values(), ids=ARCHS.keys())
@pytest.mark.parametrize("batch", [1, 3])
def test_static_cache_generates_what_the_full_forward_generates(arch, batch):
    model = _model(arch)
    prompt = torch.randint(3, arch.vocab_size, (batch, 11), generator=torch.Generator().manual_seed(1))
    gen = StaticKVGenerator(model, batch=batch, prompt_tokens=11, new_tokens=13, use_graph=False)
    gen.prefill(prompt)
    gen.decode(13)
    out = gen.generated()
    assert out.shape == (batch, 11 + 13)
    assert torch.equal(out[:, :11], prompt)
    assert torch.equal(out, reference_greedy(model, prompt, 13))


@pytest.mark.parametrize("arch", [TINY_LLAMA, ALL_BIASES], ids=["gqa", "biases"])
def test_cached_keys_and_values_equal_a_full_forward_at_every_position(arch):
    """Positions, rotary-as-a-matrix and index_copy_ writes, checked value by value."""
    model = _model(arch, seed=3)
    s = model.shape
    prompt = torch.randint(3, arch.vocab_size, (2, 7), generator=torch.Generator().manual_seed(2))
    gen = StaticKVGenerator(model, batch=2, prompt_tokens=7, new_tokens=9, use_graph=False)
    gen.prefill(prompt)
    gen.decode(9)
    seq = gen.generated()[:, :-1]  # the last token is chosen but never fed
    t = seq.shape[1]
    cos, sin = rotary_tables(t, s.head_dim, torch.device("cpu"))
    x = torch.nn.functional.embedding(seq, model.embed)
    with torch.no_grad():
        for i in range(s.layers):
            k = torch.empty(2, s.kv_heads, t, s.head_dim)
            v = torch.empty_like(k)
            x = model.block(i, x, cos, sin, kv_out=(k, v))
            torch.testing.assert_close(gen.keys[i][:, :, :t], k, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(gen.values[i][:, :, :t], v, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_the_decode_step_traces_as_one_graph_and_generates_the_same_tokens():
    """torch.compile(fullgraph=True) through dynamo and AOT autograd's functionalization (the
    same trace inductor gets on a GPU, executed eagerly here): no graph break, the in-place
    cache stores survive, and greedy decoding still equals the full-sequence reference."""
    torch._dynamo.reset()
    model = _model(TINY_LLAMA, seed=7)
    prompt = torch.randint(3, TINY_LLAMA.vocab_size, (2, 6), generator=torch.Generator().manual_seed(8))
    gen = StaticKVGenerator(model, batch=2, prompt_tokens=6, new_tokens=7, use_graph=False)
    assert gen.compile_step(prompt, backend="aot_eager") is None
    assert gen.compile_seconds is not None and gen.compile_seconds > 0
    gen.prefill(prompt)
    gen.decode(7)
    assert torch.equal(gen.generated(), reference_greedy(model, prompt, 7))


@pytest.mark.slow
def test_a_failed_compile_keeps_the_eager_step():
    model = _model(TINY_LLAMA)
    prompt = torch.randint(3, 1000, (1, 5), generator=torch.Generator().manual_seed(9))
    gen = StaticKVGenerator(model, batch=1, prompt_tokens=5, new_tokens=4, use_graph=False)

    def no_code_generator(graph_module, example_inputs):
        raise RuntimeError("no code generator here")

    why = gen.compile_step(prompt, backend=no_code_generator)
    assert why is not None and "no code generator here" in why and gen.compile_seconds is None
    gen.prefill(prompt)
    gen.decode(4)
    assert torch.equal(gen.generated(), reference_greedy(model, prompt, 4))


def test_a_second_generation_starts_clean():
    model = _model(TINY_LLAMA)
    first = torch.randint(3, 1000, (1, 5), generator=torch.Generator().manual_seed(5))
    second = torch.randint(3, 1000, (1, 5), generator=torch.Generator().manual_seed(6))
    gen = StaticKVGenerator(model, batch=1, prompt_tokens=5, new_tokens=10, use_graph=False)
    gen.prefill(first)
    gen.decode(10)
    gen.prefill(second)
    gen.decode(10)
    assert torch.equal(gen.generated(), reference_greedy(model, second, 10))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_the_captured_prefill_and_decode_generate_what_the_full_forward_generates():
    """On a GPU capture() records the prefill and the decode step; two generations with different
    prompts, both replayed from the graphs, equal the full-sequence reference."""
    torch.manual_seed(3)
    model = StaticDecoder(TINY_LLAMA, device="cuda", dtype=torch.float32)
    prompts = [torch.randint(3, 1000, (2, 9), device="cuda") for _ in range(3)]
    gen = StaticKVGenerator(model, batch=2, prompt_tokens=9, new_tokens=12, use_graph=True)
    gen.capture(prompts[0])
    assert gen.graph is not None and gen.prefill_graph is not None, gen.prefill_capture_error
    for prompt in prompts[1:]:
        gen.prefill(prompt)
        gen.decode(12)
        assert torch.equal(gen.generated(), reference_greedy(model, prompt, 12).cpu())


def test_inductor_gets_the_mode_s_settings_and_fitbench_s_options():
    from fitbench.backends.torch.compact_encoder import build_compact_encoder
    from fitbench.backends.torch.tuned import INDUCTOR_OPTIONS, compile_settings

    assert compile_settings("inductor", "default") == {"options": INDUCTOR_OPTIONS}
    autotune = compile_settings("inductor", "max-autotune-no-cudagraphs")["options"]
    assert autotune["max_autotune"] is True and autotune["combo_kernels"] is True
    assert "fallback_random" not in autotune  # inductor draws LoRA's and other models' dropout
    # The BERT-style encoder's dropouts are drawn by aten's kernel (four numbers per Philox call).
    arch = get_workload("bert-base-imdb", tiny=True).arch
    encoder = build_compact_encoder(arch, device=torch.device("cpu"), dtype=torch.float32)
    assert compile_settings("inductor", "default", encoder)["options"] == {
        **INDUCTOR_OPTIONS,
        "fallback_random": True,
    }
    assert compile_settings("inductor", "default", torch.nn.Linear(2, 2)) == {"options": INDUCTOR_OPTIONS}
    assert "triton.cudagraphs" not in autotune or autotune["triton.cudagraphs"] is False
    assert compile_settings("aot_eager", "default") == {}


def test_the_cache_has_the_documented_layout_and_bounds():
    model = _model(TINY_LLAMA)
    gen = StaticKVGenerator(model, batch=2, prompt_tokens=16, new_tokens=8, use_graph=False)
    s = model.shape
    assert gen.cache_shape == (s.layers, 2, 2, s.kv_heads, gen.length, s.head_dim)
    assert all(tuple(t.shape) == gen.cache_shape[2:] for t in (*gen.keys, *gen.values))
    # separate tensors, not views of one block (torch.compile updates each in place)
    assert len({t.data_ptr() for t in (*gen.keys, *gen.values)}) == 2 * s.layers
    assert gen.length == cache_length(16, 8) and gen.length % 64 == 0 and gen.length >= 16 + 8
    assert gen.cache_bytes == 2 * s.layers * 2 * s.kv_heads * gen.length * s.head_dim * 4
    gen.prefill(torch.randint(3, 1000, (2, 16)))
    with pytest.raises(FitbenchError, match="static KV cache"):
        gen.decode(gen.length)  # more positions than the cache holds
    with pytest.raises(ValueError):
        gen.prefill(torch.randint(3, 1000, (2, 15)))  # the prompt length is part of the static shape
    with pytest.raises(ValueError, match="CUDA"):
        StaticKVGenerator(model, batch=1, prompt_tokens=4, new_tokens=4, use_graph=True)


@pytest.mark.parametrize(
    "arch",
    [TINY_LLAMA, MHA, QWEN_LIKE, ALL_BIASES, LLAMA_7B, LLAMA_70B],
    ids=["tiny", "mha", "qwen-like", "biases", "llama-7b", "llama-70b"],
)
def test_parameter_count_equals_the_architecture(arch):
    device = "cpu" if arch.hidden_size < 1024 else "meta"  # real sizes: shapes only, no memory
    model = StaticDecoder(arch, device=device, dtype=torch.float16)
    assert count_parameters(model) == arch.param_count()


def test_llama_7b_is_6_738_415_616_parameters_in_fp16():
    model = StaticDecoder(LLAMA_7B, device="meta", dtype=torch.float16)
    assert count_parameters(model) == 6_738_415_616
    assert {p.dtype for p in model.parameters()} == {torch.float16}
    assert not any(p.requires_grad for p in model.parameters())


def test_weights_are_random_normal_not_zeros():
    model = _model(TINY_LLAMA)
    w = model.layers[0].wqkv
    assert torch.isfinite(w).all() and 0.015 < float(w.std()) < 0.025
    assert torch.equal(model.layers[0].attn_norm, torch.ones_like(model.layers[0].attn_norm))
    assert model.head_weight is model.lm_head
    tied = _model(QWEN_LIKE)
    assert tied.head_weight is tied.embed and torch.count_nonzero(tied.layers[0].bqkv) == 0


def test_other_decoder_layouts_are_one_clear_error():
    gpt2 = TransformerArch(
        kind="decoder",
        vocab_size=500,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        intermediate_size=256,
        max_positions=128,
        pooler=False,
        num_labels=0,
    )
    with pytest.raises(FitbenchError, match="Llama-style") as info:
        StaticDecoder(gpt2, device="meta", dtype=torch.float16)
    assert info.value.hint == "use --exec default for this model"


# -- precision choices -------------------------------------------------------------------------------
def test_tuned_training_runs_amp_bf16_and_says_so():
    cpu = torch.device("cpu")
    choice = choose_precision(get_workload("resnet50-cifar10", tiny=True), cpu)
    assert choice.plan.in_effect == "amp-bf16" and choice.plan.autocast_dtype == torch.bfloat16
    assert any("instead of the requested fp32" in w for w in choice.warnings)
    same = choose_precision(get_workload("bert-base-imdb", tiny=True, precision="amp-bf16"), cpu)
    assert same.plan.in_effect == "amp-bf16" and not any("changed" in w for w in same.warnings)
    pure = choose_precision(get_workload("bert-base-imdb", tiny=True, precision="bf16"), cpu)
    assert pure.plan.autocast_dtype is None and pure.plan.param_dtype in (torch.bfloat16, torch.float32)
    with pytest.raises(FitbenchError, match="int8"):
        choose_precision(get_workload("bert-base-imdb", tiny=True, precision="int8", mode="infer"), cpu)


def test_tuned_generation_weights_follow_the_precision():
    cpu = torch.device("cpu")
    assert generation_precision(get_workload("llm-6b", tiny=True), cpu)[:2] == ("fp32", torch.float32)
    name, dtype, warnings = generation_precision(get_workload("llm-6b", tiny=True, precision="amp-bf16"), cpu)
    if name == "bf16":  # bf16 matmuls exist on this CPU build
        assert dtype == torch.bfloat16 and "instead of amp-bf16" in warnings[0]
    with pytest.raises(FitbenchError, match="int4"):
        generation_precision(get_workload("llm-6b", tiny=True, precision="int4"), cpu)


# -- sessions in this process ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb"])
def test_tuned_training_step_updates_the_weights_with_a_fused_optimizer(name):
    workload = get_workload(name, tiny=True)
    session = BACKEND.open(workload, TUNED_CPU)
    before = [p.detach().clone() for p in session.model.parameters()]
    session.step()
    session.step()
    after = list(session.model.parameters())
    assert any(not torch.equal(b, a.detach()) for b, a in zip(before, after, strict=True))
    notes = session.notes
    assert "fused" in notes["optimizer"] and notes["cuda_graph"] is False
    assert CPU_NO_GRAPHS in notes["warnings"]
    assert notes["params"] == workload.param_count()
    if name == "resnet50-cifar10":
        assert session.static["pixel_values"].is_contiguous(memory_format=torch.channels_last)
    else:
        assert "attention_mask" not in session.static  # flash-eligible SDPA: no padding mask
        assert notes["model_source"].startswith("fitbench CompactEncoder")
        # amp-bf16 (what tuned runs here): the residual stream is bf16 between the layers
        assert session.model.residual_dtype == torch.bfloat16 and "bf16" in notes["residual_stream"]


@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb"])
def test_tuned_inference_step(name):
    session = BACKEND.open(get_workload(name, tiny=True, mode="infer"), TUNED_CPU)
    session.step()
    assert not session.model.training and session.notes["precision_in_effect"] == "amp-bf16"
    assert ("residual_stream" in session.notes) == (name == "bert-base-imdb")


@pytest.mark.slow
def test_tuned_generation_session_produces_the_reference_tokens():
    workload = get_workload("llm-6b", tiny=True, batch_size=2, new_tokens=6)
    session = BACKEND.open(workload, TUNED_CPU)
    session.prefill()
    session.decode(6)
    out = session.generator.generated()
    ref = reference_greedy(session.generator.model, session.prompt.cpu(), 6)
    assert torch.equal(out, ref)
    assert session.notes["decode_includes_prefill"] is False
    assert session.notes["decode_steps_per_call"] == 5
    assert session.notes["params"] == workload.param_count()


# -- the compiled step (--compile) --------------------------------------------------------------------
CPU = torch.device("cpu")


def _dropout_off(model: torch.nn.Module) -> None:
    """The compact encoder keeps its dropout probability as a float on each module."""
    for module in model.modules():
        if isinstance(getattr(module, "dropout", None), float):
            module.dropout = 0.0
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0


def _loss_and_grads(session, forward) -> tuple[torch.Tensor, list[torch.Tensor]]:
    session.optimizer.zero_grad(set_to_none=True)
    loss = forward()
    loss.backward()
    return loss.detach(), [p.grad.detach().clone() for p in session.model.parameters()]


COMPILED_TRAINING = {
    "resnet50-cifar10": {},
    "bert-base-imdb": {},
    "llm-6b": {"mode": "train", "seq_len": 64, "batch_size": 2, "precision": "amp-bf16"},  # an LM, trained
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMPILED_TRAINING))
def test_the_compiled_step_computes_the_eager_steps_loss_and_gradients(name):
    """The compiled forward (dynamo's trace and AOT autograd's backward, as inductor gets them on a
    GPU; run by "aot_eager" here, since inductor's C++ code generation takes minutes on this CPU)
    gives the uncompiled step's loss and every gradient, on the same weights and batch: the loss
    within rtol 1e-4 / atol 1e-5, each gradient within 2^-6 of its largest element (two bf16
    roundings: under bf16 autocast AOT autograd's decompositions round at other points; the
    Llama's gradients differ by up to 0.7 % of their scale, ResNet's and BERT's not at all)."""
    torch._dynamo.reset()
    workload = get_workload(name, tiny=True, **COMPILED_TRAINING[name])
    assert workload.is_training
    session = open_step_session(workload, TUNED_CPU, CPU, compile_backend="aot_eager")
    notes = session.notes
    assert notes["compiled_step"] is True and session.compiled
    assert notes["compile_seconds"] > 0 and notes["compile_mode"] == "default"
    assert session._forward_fn is not session._eager_forward
    _dropout_off(session.model)  # random masks would differ; a changed probability recompiles
    compiled_loss, compiled_grads = _loss_and_grads(session, session._forward_fn)
    eager_loss, eager_grads = _loss_and_grads(session, session._eager_forward)
    assert torch.isfinite(eager_loss) and eager_loss > 0
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-4, atol=1e-5)
    assert len(compiled_grads) == len(eager_grads) == len(list(session.model.parameters()))
    for got, want in zip(compiled_grads, eager_grads, strict=True):
        assert (got - want).abs().max() <= 2**-6 * want.abs().max()
    assert any(g.abs().sum() > 0 for g in eager_grads)
    # and the step itself (forward, backward, fused optimizer) still moves the weights
    before = [p.detach().clone() for p in session.model.parameters()]
    session.step()
    assert any(
        not torch.equal(b, a.detach()) for b, a in zip(before, session.model.parameters(), strict=True)
    )


@pytest.mark.slow
def test_a_compiled_inference_step_returns_the_eager_logits():
    torch._dynamo.reset()
    workload = get_workload("bert-base-imdb", tiny=True, mode="infer")
    session = open_step_session(workload, TUNED_CPU, CPU, compile_backend="aot_eager")
    assert session.notes["compiled_step"] is True
    torch.testing.assert_close(session._forward_fn(), session._eager_forward(), rtol=1e-4, atol=1e-5)


def test_a_failed_compile_runs_the_uncompiled_step_and_says_why():
    torch._dynamo.reset()

    def no_code_generator(graph_module, example_inputs):
        raise RuntimeError("no code generator here")

    workload = get_workload("resnet50-cifar10", tiny=True)
    session = open_step_session(workload, TUNED_CPU, CPU, compile_backend=no_code_generator)
    notes = session.notes
    assert notes["compiled_step"] is False and "compile_seconds" not in notes
    (warning,) = [w for w in notes["warnings"] if w.startswith("torch.compile of the step failed")]
    assert "no code generator here" in warning and warning.endswith("; the uncompiled step ran")
    assert "未编译" in measurement_text(warning, "zh")  # a pattern of advise.i18n recognises it
    assert session._forward_fn is session._eager_forward
    assert all(p.grad is None for p in session.model.parameters())  # the failed step left none behind
    before = [p.detach().clone() for p in session.model.parameters()]
    session.step()
    assert any(
        not torch.equal(b, a.detach()) for b, a in zip(before, session.model.parameters(), strict=True)
    )


def test_a_compiled_step_that_cannot_be_captured_falls_back_to_the_uncompiled_graph():
    """capture()'s order on a GPU, with capture itself stood in for (CUDA graphs need CUDA): the
    compiled step first; when its capture fails, the uncompiled step is captured, and a warning says so."""
    torch._dynamo.reset()
    session = open_step_session(
        get_workload("bert-base-imdb", tiny=True, mode="infer"), TUNED_CPU, CPU, compile_backend="aot_eager"
    )
    attempts: list[bool] = []

    def capture_stand_in() -> str | None:
        attempts.append(session.compiled)
        if session.compiled:
            return "RuntimeError: operation not permitted when stream is capturing"
        session.graph = object()  # what a successful capture leaves
        return None

    session._try_capture = capture_stand_in
    session.use_graph = True
    session.notes["warnings"].clear()
    session.capture()
    notes = session.notes
    assert attempts == [True, False]
    assert notes["compiled_step"] is False and notes["cuda_graph"] is True and "compile_seconds" not in notes
    assert session._forward_fn is session._eager_forward
    (warning,) = notes["warnings"]
    assert warning.startswith("CUDA graph capture of the compiled step failed (RuntimeError: operation")
    assert warning.endswith("fell back to the uncompiled step")
    assert "未编译" in measurement_text(warning, "zh")
    session.graph = None


def test_compile_on_a_cpu_warns_and_runs_uncompiled():
    options = RunOptions(device="cpu", exec_mode="tuned", compile_step=True)
    session = BACKEND.open(get_workload("resnet50-cifar10", tiny=True), options)
    assert COMPILE_UNAVAILABLE in session.notes["warnings"]
    assert session.notes["compiled_step"] is False
    session.step()


@pytest.mark.parametrize("compile_step", [None, False], ids=["default", "no-compile"])
def test_the_default_and_no_compile_run_uncompiled_on_a_cpu_without_a_warning(compile_step):
    """The default (None) compiles where inductor can; on a CPU it cannot, and nobody asked for it:
    the uncompiled step runs, and no warning says so (the notes still do)."""
    options = RunOptions(device="cpu", exec_mode="tuned", compile_step=compile_step)
    assert RunOptions(device="cpu", exec_mode="tuned").compile_step is None  # the default
    session = BACKEND.open(get_workload("resnet50-cifar10", tiny=True), options)
    assert session.notes["compiled_step"] is False and "compile_seconds" not in session.notes
    assert COMPILE_UNAVAILABLE not in session.notes["warnings"]
    assert not any("compile" in w for w in session.notes["warnings"])
    session.step()


@pytest.mark.parametrize(
    ("compile_step", "inductor", "expected"),
    [
        (None, True, ("inductor", None)),  # the default on a GPU with Triton: compiled
        (True, True, ("inductor", None)),
        (False, True, (None, None)),  # --no-compile
        (None, False, (None, None)),  # the default where inductor cannot: silently uncompiled
        (True, False, (None, COMPILE_UNAVAILABLE)),  # asked for and impossible: said
        (False, False, (None, None)),
    ],
)
def test_step_compiler_resolves_the_default_to_inductor_where_it_can(
    monkeypatch, compile_step, inductor, expected
):
    from fitbench.backends.torch import tuned

    monkeypatch.setattr(tuned, "inductor_available", lambda device: inductor)
    options = RunOptions(device="cuda", exec_mode="tuned", compile_step=compile_step)
    backend, mode, warning = tuned.step_compiler(options, torch.device("cuda"))
    assert (backend, warning) == expected and mode == "default"


def test_the_compile_choice_reaches_the_child_process_as_given(tmp_path):
    """The runner hands RunOptions to a fresh child as JSON: None (the default) must stay None, not
    become False (never compile) or True (warn on a CPU)."""
    import json

    from fitbench.measure.runner import build_request

    workload = get_workload("resnet50-cifar10", tiny=True)
    for compile_step in (None, True, False):
        options = RunOptions(device="cpu", exec_mode="tuned", compile_step=compile_step)
        request = build_request(
            workload,
            "torch",
            options,
            min_steps=1,
            min_seconds=0.0,
            warmup=1,
            max_seconds=1.0,
            workdir=tmp_path,
        )
        assert RunOptions(**json.loads(json.dumps(request))["options"]) == options


def test_an_unknown_compile_mode_is_one_clear_error():
    options = RunOptions(device="cpu", exec_mode="tuned", compile_step=True, extra={"compile_mode": "fast"})
    with pytest.raises(FitbenchError, match="unknown compile mode 'fast'"):
        BACKEND.open(get_workload("resnet50-cifar10", tiny=True), options)


# -- through the runner (fresh child processes, as `fitbench run --exec tuned` does) ------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50-cifar10", "bert-base-imdb", "llm-6b"])
def test_tuned_runs_through_the_runner_on_a_cpu(name):
    # Generation: enough new tokens that decoding clearly outlasts the prefill on a busy CPU.
    overrides = {"new_tokens": 48} if name == "llm-6b" else {}
    workload = get_workload(name, tiny=True, **overrides)
    m = measure(workload, "torch", TUNED_CPU, timeout_s=300)
    assert m["status"] == "ok", m.get("error") or m.get("stderr_tail")
    assert m["exec_mode"] == "tuned"
    assert CPU_NO_GRAPHS in m["warnings"]
    assert m["backend_notes"]["cuda_graph"] is False
    # the default compile choice (None) reached the child: nothing compiled, nothing to warn of
    assert m["backend_notes"]["compiled_step"] is False and COMPILE_UNAVAILABLE not in m["warnings"]
    assert m["params"] == workload.param_count()
    if workload.is_generation:
        assert m["precision_in_effect"] == "fp32"
        assert m["decode_tokens_per_second"] and m["decode_tokens_per_second"] > 0
        assert m["prefill_seconds"] > 0
        assert m["backend_notes"]["kv_cache_shape"][0] == workload.arch.num_layers
    else:
        assert m["precision_in_effect"] == "amp-bf16"
        assert any("tuned changed the precision" in w for w in m["warnings"])
        assert m["steps"] >= 10 and m["samples_per_second"] > 0


def test_qlora_is_one_clear_error_in_both_languages():
    qlora = Workload(name="x", arch=TINY_LLAMA, mode="train", seq_len=16, peft="qlora")
    with pytest.raises(FitbenchError, match="QLoRA") as info:
        BACKEND.open(qlora, TUNED_CPU)
    message_zh, hint_zh = info.value.text("zh")
    assert "QLoRA" in message_zh and "不实测" in message_zh and "--peft lora" in hint_zh


# -- LoRA in the tuned mode ------------------------------------------------------------------------
def _lora(name: str, **overrides):
    base = {"mode": "train", "seq_len": 32, "batch_size": 2, "precision": "fp32", "peft": "lora"}
    return get_workload(name, tiny=True, **{**base, **overrides})


def _no_dropout(model) -> None:
    """Dropout off (LoRA's 0.05, BERT's 0.1): two sessions draw different masks, not different math."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0


@pytest.mark.parametrize("name", ["llm-6b", "bert-base-imdb"])
def test_tuned_lora_step_computes_the_default_paths_loss_and_trains_only_the_adapters(name):
    workload = _lora(name)
    default = BACKEND.open(workload, RunOptions(device="cpu", exec_mode="default"))
    tuned = BACKEND.open(workload, TUNED_CPU)
    # The same model: base weights and the adapters' initialisation (one seed, one build order).
    named_default = dict(default.model.named_parameters())
    named_tuned = dict(tuned.model.named_parameters())
    assert named_default.keys() == named_tuned.keys()
    assert all(torch.equal(named_default[n], p) for n, p in named_tuned.items())
    _no_dropout(default.model)
    _no_dropout(tuned.model)
    batch = {k: v.clone() for k, v in tuned.static.items()}
    ids = batch["input_ids"]
    default_batch = {**batch, "attention_mask": torch.ones_like(ids)}
    with torch.no_grad():
        fp32 = default._loss(default_batch)  # the default path as it runs here: FP32
        with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
            bf16 = default._loss(default_batch)  # the default path under tuned's autocast
    frozen = {n: p.detach().clone() for n, p in tuned.model.named_parameters() if not p.requires_grad}
    adapters = {n: p.detach().clone() for n, p in tuned.model.named_parameters() if p.requires_grad}
    loss = tuned._body()  # the tuned step (forward, loss, backward, fused AdamW): its loss
    # Same math in the same precision: the loss agrees to float rounding (the default path's
    # loss is transformers' own, the tuned one F.cross_entropy over upcast logits).
    assert loss.item() == pytest.approx(bf16.item(), rel=1e-4)
    # Against the FP32 default: bf16 autocast's rounding, within 0.1 % on these tiny models.
    assert loss.item() == pytest.approx(fp32.item(), rel=1e-3)
    tuned._before_capture()
    tuned._body()  # a second step: B starts at zero, so A's gradient is zero until B has moved
    after = dict(tuned.model.named_parameters())
    assert frozen and all(torch.equal(after[n], p) for n, p in frozen.items())
    assert all(after[n].grad is None for n in frozen)
    changed = {n for n, p in adapters.items() if not torch.equal(after[n].detach(), p)}
    assert any(".lora_A." in n for n in changed) and any(".lora_B." in n for n in changed)
    # The fused optimizer holds the trainable parameters only.
    held = [p for g in tuned.optimizer.param_groups for p in g["params"]]
    assert len(held) == len(adapters) and all(p.requires_grad for p in held)
    notes = tuned.notes
    assert "fused" in notes["optimizer"] and notes["precision_in_effect"] == "amp-bf16"
    assert notes["peft"]["trainable_params"] == sum(p.numel() for p in adapters.values())
    assert notes["params"] == workload.param_count()  # the base model, as the default path counts it
    assert "attention_mask" not in tuned.static


def test_tuned_lora_with_checkpointing_trains_the_adapters():
    workload = _lora("llm-6b", checkpointing=True)
    session = BACKEND.open(workload, TUNED_CPU)
    assert any(getattr(m, "gradient_checkpointing", False) for m in session.model.modules())
    before = {n: p.detach().clone() for n, p in session.model.named_parameters() if p.requires_grad}
    session.step()
    session.step()
    after = dict(session.model.named_parameters())
    assert any(not torch.equal(after[n].detach(), p) for n, p in before.items() if ".lora_B." in n)


@pytest.mark.slow
def test_the_compile_hands_its_memory_back_before_capture():
    """After the first compiled step the session collects garbage (and on CUDA empties the
    allocator's cache) before warm-up and capture: a full collection runs from
    `_release_compile_memory`, called from `_compile` once the compiled step has run (other full
    collections, dynamo's own, do not count: the callers on the stack are checked)."""
    import gc
    import sys

    torch._dynamo.reset()
    callers: list[tuple[str, ...]] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            frame, names = sys._getframe(1), []
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            callers.append(tuple(names))

    gc.callbacks.append(seen)
    try:
        workload = get_workload("bert-base-imdb", tiny=True, mode="train", batch_size=2, seq_len=16)
        session = open_step_session(workload, TUNED_CPU, CPU, compile_backend="aot_eager")
    finally:
        gc.callbacks.remove(seen)
    assert session.compiled
    released = [names for names in callers if "_release_compile_memory" in names]
    assert released and all("_compile" in names for names in released)
    session._release_compile_memory()  # CPU: gc only, no CUDA call
    session.step()
