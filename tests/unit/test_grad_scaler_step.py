"""An AMP-fp16 training step waits for its backward before the optimizer: torch's GradScaler reads
its inf check on the host (GradScaler._maybe_opt_step). The estimate times the forward, backward
and the scaler's unscale pass with their host work, and the optimizer after them."""

from __future__ import annotations

import dataclasses

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import peft_speed, speed
from fitbench.estimate.profile import get_profile
from fitbench.workloads.presets import get_workload

H100 = get_gpu("h100-sxm")
DEFAULT = get_profile("torch", "default", use_user=False)


def test_only_torch_eager_amp_fp16_training_waits() -> None:
    bert = get_workload("bert-base-imdb", precision="amp-fp16")
    assert speed.grad_scaler_waits(bert, DEFAULT)
    assert not speed.grad_scaler_waits(bert.replace(precision="amp-bf16"), DEFAULT)
    assert not speed.grad_scaler_waits(bert.replace(mode="infer"), DEFAULT)
    assert not speed.grad_scaler_waits(bert, get_profile("torch", "tuned", use_user=False))
    assert not speed.grad_scaler_waits(bert, get_profile("paddle", "default", use_user=False))


def test_the_optimizer_follows_the_rest_of_the_step() -> None:
    bert = get_workload("bert-base-imdb", precision="amp-fp16")
    kernels = speed.training_kernels(bert, DEFAULT)
    optimizer = [k for k in kernels if k.name == "optimizer"]
    rest = [k for k in kernels if k.name != "optimizer"]
    unscale = speed.unscale_kernel(bert, bert.trained_param_count())
    assert unscale.bytes == 2 * 4 * bert.trained_param_count()  # FP32 gradients read and written
    host = DEFAULT.host_seconds_per_op
    first = speed.time_kernels(
        [*rest, unscale], bert, H100, DEFAULT, host_seconds_per_op=host, fixed_ops=speed.STEP_FIXED_OPS
    )
    then = speed.time_kernels(optimizer, bert, H100, DEFAULT, host_seconds_per_op=host)
    step = speed.training_step(bert, H100, DEFAULT)
    assert step.seconds == pytest.approx(first.seconds + then.seconds)
    overlapped = speed.training_step(bert, H100, dataclasses.replace(DEFAULT, grad_scaler_syncs=False))
    assert step.seconds > overlapped.seconds


def test_lora_under_a_grad_scaler_waits_too() -> None:
    lora = get_workload("llm-6b", mode="train", peft="lora", precision="amp-fp16", seq_len=256)
    waits = peft_speed.training_step(lora, H100, DEFAULT)
    free = peft_speed.training_step(lora, H100, dataclasses.replace(DEFAULT, grad_scaler_syncs=False))
    assert waits.seconds > free.seconds
    assert waits.gpu_seconds > free.gpu_seconds  # the unscale pass over the adapters' gradients


def test_torchs_grad_scaler_reads_its_inf_check_on_the_host() -> None:
    """The mechanism as the installed torch has it: the step is skipped on a host-side sum of
    `.item()` reads."""
    torch = pytest.importorskip("torch")
    import inspect

    source = inspect.getsource(torch.amp.GradScaler._maybe_opt_step)
    assert ".item()" in source
