"""The workload as an execution mode runs it, and the memory of tuned AMP without autocast's cache."""

from __future__ import annotations

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.estimate.execution import precision_as_run, workload_as_run
from fitbench.workloads.presets import get_workload

H200, T4 = get_gpu("h200"), get_gpu("t4")  # T4 (Turing) has no BF16 tensor cores


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16", "int8"])
def test_default_runs_what_was_asked(precision):
    w = get_workload("llm-6b", precision=precision)
    assert precision_as_run(w, "default", H200) == precision
    assert workload_as_run(w, "default", H200) is w


@pytest.mark.parametrize(
    ("name", "mode", "asked", "h200", "t4"),
    [
        ("resnet50-cifar10", "train", "fp32", "amp-bf16", "amp-fp16"),
        ("bert-base-imdb", "train", "amp-fp16", "amp-bf16", "amp-fp16"),
        ("bert-base-imdb", "infer", "tf32", "amp-bf16", "amp-fp16"),
        ("bert-base-imdb", "train", "bf16", "bf16", "bf16"),  # pure half stays as asked
        ("llm-6b", "infer", "amp-fp16", "fp16", "fp16"),  # the static decoder has no autocast
        ("llm-6b", "infer", "fp16", "fp16", "fp16"),
        ("llm-6b", "infer", "fp32", "fp32", "fp32"),
        ("llm-6b", "infer", "int4", "int4", "int4"),  # refused by tuned at run time, not changed
    ],
)
def test_tuned_runs_what_the_tuned_backend_chooses(name, mode, asked, h200, t4):
    w = get_workload(name, mode=mode, precision=asked)
    assert precision_as_run(w, "tuned", H200) == h200
    assert precision_as_run(w, "tuned", T4) == t4
    assert workload_as_run(w, "tuned", H200).precision == h200


def test_tuned_amp_inference_keeps_no_cached_weight_copies():
    w = get_workload("bert-base-imdb", mode="infer", precision="amp-bf16")
    default = estimate(w, H200)
    tuned = estimate(w, H200, exec_mode="tuned")
    assert default.breakdown["amp_weight_copies"] > 100e6  # ~86M cast weights x 2 bytes
    assert tuned.breakdown["amp_weight_copies"] == 0
    # Training saves the casts for backward whatever the cache does.
    t = get_workload("bert-base-imdb", precision="amp-bf16")
    assert estimate(t, H200, exec_mode="tuned").breakdown["amp_weight_copies"] == (
        estimate(t, H200).breakdown["amp_weight_copies"]
    )
