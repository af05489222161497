"""Rules the estimator's modules must share: which profile a framework and mode get, which weights
autocast copies in every phase, the bytes of a saved input image, and the optimizer's dtype in
memory and in time."""

from __future__ import annotations

from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.cli.main import main
from fitbench.errors import FitbenchError
from fitbench.estimate import optimizer as optimizer_memory
from fitbench.estimate import resnet_cost, single_device, speed
from fitbench.estimate.api import estimate
from fitbench.estimate.profile import exec_modes, get_profile
from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

# -- profiles: unknown names are errors, the one shared table says so ---------------------------


def test_an_unknown_exec_mode_is_a_one_line_error_with_a_suggestion() -> None:
    with pytest.raises(FitbenchError) as info:
        get_profile("torch", "tunned")
    assert "exec mode 'tunned'" in info.value.message
    assert info.value.hint is not None and "'tuned'" in info.value.hint
    assert "\n" not in str(info.value)


def test_an_unknown_framework_is_an_error_listing_the_known_ones() -> None:
    with pytest.raises(FitbenchError) as info:
        get_profile("jax", "default")
    assert "framework 'jax'" in info.value.message
    assert info.value.hint is not None and "paddle" in info.value.hint and "torch" in info.value.hint


def test_estimate_refuses_a_mode_without_a_profile() -> None:
    with pytest.raises(FitbenchError, match="exec mode 'fastest'"):
        estimate(get_workload("bert-base-imdb"), get_gpu("rtx-4090"), exec_mode="fastest")


def test_paddle_tuned_uses_paddle_default_values_and_says_so() -> None:
    tuned = get_profile("paddle", "tuned", use_user=False)
    default = get_profile("paddle", "default", use_user=False)
    assert exec_modes("paddle") == ("default", "tuned")
    assert tuned.exec_mode == "tuned"
    differing = {k for k, v in tuned.to_dict().items() if default.to_dict()[k] != v}
    assert differing == {"exec_mode", "provenance"}
    assert tuned.provenance.endswith(default.provenance)
    est = estimate(get_workload("bert-base-imdb"), get_gpu("rtx-4090"), framework="paddle", exec_mode="tuned")
    assert "Paddle's default profile" in est.assumptions[0]


def _user_file(home: Path, text: str) -> None:
    home.mkdir(parents=True)
    (home / "profiles.toml").write_text(text)


def test_a_calibration_of_paddle_tuned_itself_wins_over_the_shared_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = "[paddle.default]\nhost_seconds_per_op = 9.0e-5\n"
    _user_file(tmp_path / "a", shared)
    monkeypatch.setenv("FITBENCH_HOME", str(tmp_path / "a"))
    assert get_profile("paddle", "tuned").host_seconds_per_op == 9.0e-5
    own = shared + '\n[paddle.tuned]\nhost_seconds_per_op = 1.0e-5\nprovenance = "fitted here"\n'
    _user_file(tmp_path / "b", own)
    monkeypatch.setenv("FITBENCH_HOME", str(tmp_path / "b"))
    profile = get_profile("paddle", "tuned")
    assert profile.host_seconds_per_op == 1.0e-5 and profile.provenance == "fitted here"


def test_estimate_cli_runs_paddle_tuned(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "bert-base-imdb", "--framework", "paddle", "--exec", "tuned", "--gpu", "rtx-4090"]
    assert main(argv) == 0
    assert "rtx-4090" in capsys.readouterr().out


# -- autocast's weight copies: one rule for training, forward and generation --------------------


def _cast_weights(w: Workload) -> int:
    """Parameters autocast casts in a decoder: every block's Linear layers and the untied LM head
    (not the embeddings or the norms)."""
    arch = w.arch
    assert isinstance(arch, TransformerArch) and not arch.tie_embeddings
    return arch.num_layers * arch.linear_params_per_layer() + arch.vocab_size * arch.hidden_size


@pytest.mark.parametrize("precision", ["amp-fp16", "amp-bf16"])
def test_amp_generation_holds_autocasts_weight_copies(precision: str) -> None:
    w = get_workload("llm-6b", precision=precision)
    assert w.is_generation
    est = estimate(w, get_gpu("h100-sxm"))
    assert est.breakdown["amp_weight_copies"] == 2 * _cast_weights(w) > 0


def test_generation_and_forward_follow_the_training_cast_count() -> None:
    profile = get_profile("torch", "default", use_user=False)
    for w in (
        get_workload("llm-6b", precision="amp-fp16"),
        get_workload("bert-base-imdb", precision="amp-fp16", mode="infer"),
        get_workload("resnet50-cifar10", precision="amp-bf16", mode="infer"),
    ):
        trained = w.replace(mode="train") if w.is_resnet else w.replace(mode="train", seq_len=w.seq_len or 64)
        cast = sum(s.cast_params for s in single_device.training_segments(trained, "torch"))
        assert single_device.single_device_breakdown(w, profile).parts["amp_weight_copies"] == 2 * cast
    bert = get_workload("bert-base-imdb", precision="amp-fp16", mode="infer")
    assert isinstance(bert.arch, TransformerArch)
    embeddings = bert.arch.embedding_params()  # looked up in FP32: no cast copy
    copies = estimate(bert, get_gpu("rtx-4090")).breakdown["amp_weight_copies"]
    assert copies < 2 * (bert.param_count() - embeddings)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16", "int8"])
def test_no_weight_copies_without_autocast(precision: str) -> None:
    est = estimate(get_workload("llm-6b", precision=precision), get_gpu("h100-sxm"))
    assert est.breakdown["amp_weight_copies"] == 0


# -- ResNet: the saved image is in the activation dtype ------------------------------------------


@pytest.mark.parametrize(
    ("precision", "framework", "element_bytes"),
    [
        ("fp32", "torch", 4),
        ("amp-fp16", "torch", 2),
        ("fp16", "torch", 2),
        ("bf16", "torch", 2),
        ("fp16", "paddle", 2),
    ],
)
def test_resnet_saved_image_uses_the_activation_dtype(
    precision: str, framework: str, element_bytes: int
) -> None:
    w = get_workload("resnet50-cifar10", precision=precision, batch_size=8, image_size=64)
    arch = w.arch
    assert isinstance(arch, ResNetArch)
    stem = resnet_cost.training_segments(w, framework)[0]
    assert stem.input_bytes == 8 * arch.in_channels * 64 * 64 * element_bytes


def test_resnet_pure_half_activations_are_half_of_fp32() -> None:
    """Every saved tensor of a ResNet without integer indices halves from fp32 to fp16."""
    fp32, fp16 = (get_workload("resnet50-cifar10", precision=p, batch_size=4) for p in ("fp32", "fp16"))
    for a, b in zip(resnet_cost.training_segments(fp32), resnet_cost.training_segments(fp16), strict=True):
        if a.name != "input+pool":  # the max-pool's int64 indices do not shrink
            assert b.saved_bytes * 2 == a.saved_bytes
        assert b.input_bytes * 2 == a.input_bytes


# -- the optimizer moves the bytes the breakdown holds -------------------------------------------


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "momentum", "sgd"])
@pytest.mark.parametrize("framework", ["torch", "paddle"])
@pytest.mark.parametrize("precision", ["fp32", "amp-bf16", "bf16", "fp16"])
def test_optimizer_traffic_uses_the_memory_models_element_bytes(
    optimizer: str, framework: str, precision: str
) -> None:
    w = get_workload("bert-base-imdb", precision=precision, optimizer=optimizer)
    params = w.param_count()
    state, master, _ = optimizer_memory.optimizer_bytes(w, framework)
    element = optimizer_memory.optimizer_element_bytes(w, framework)
    states = optimizer_memory.OPTIMIZER_STATES[optimizer]
    assert state == states * params * element
    assert master in (0, params * element)
    (kernel,) = speed.optimizer_kernels(w, framework)
    assert kernel.bytes == speed.OPTIMIZER_PASSES[optimizer] * params * element


def test_paddle_o2_optimizer_moves_fp32_state() -> None:
    w = get_workload("bert-base-imdb", precision="bf16")
    params = w.param_count()
    passes = speed.OPTIMIZER_PASSES[w.optimizer]
    assert speed.optimizer_kernels(w, "paddle")[0].bytes == passes * params * 4
    assert speed.optimizer_kernels(w, "torch")[0].bytes == passes * params * 2
    gpu = get_gpu("h100-sxm")
    paddle = speed.training_step(w, gpu, get_profile("paddle", "default", use_user=False))
    torch_ = speed.training_step(w, gpu, get_profile("torch", "default", use_user=False))
    assert paddle.bytes - torch_.bytes == passes * params * 2  # the forward/backward kernels agree


def test_a_tied_lm_head_is_cast_by_autocast_too():
    """Tying changes the parameter count, not what autocast caches for the head's matmul."""
    import dataclasses

    from fitbench.estimate.single_device import autocast_copy_bytes
    from fitbench.workloads.presets import TINY_LLAMA
    from fitbench.workloads.workload import Workload

    base = get_workload("llm-6b", tiny=True, precision="amp-bf16", mode="train", seq_len=32)
    untied = dataclasses.replace(base, arch=dataclasses.replace(TINY_LLAMA, tie_embeddings=False))
    tied = dataclasses.replace(base, arch=dataclasses.replace(TINY_LLAMA, tie_embeddings=True))
    assert isinstance(tied, Workload)
    head = TINY_LLAMA.vocab_size * TINY_LLAMA.hidden_size
    assert tied.param_count() == untied.param_count() - head
    assert autocast_copy_bytes(tied, "torch") == autocast_copy_bytes(untied, "torch")
