"""`fitbench estimate` on the command line and `fitbench.estimate()` answer one question alike.

Both build the workload through `Workload.with_overrides`, so the defaults a change implies (a
decoder switched to training gets a sequence length and mixed precision; PEFT keeps it in bf16)
are the same on both roads. Compared on every field of the JSON, across the presets, modes,
precisions, PEFT and the tuned mode; a question one side refuses, the other refuses too.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

import fitbench
from fitbench.advise.cost import job_cost
from fitbench.cli.main import main
from fitbench.errors import FitbenchError
from fitbench.workloads.presets import PRESETS, TINY_PRESETS

GPU = "a100-80gb"
SCENARIOS = ["llm-6b", "bert-base-imdb", "resnet50-cifar10"]
MODES = (None, "train", "infer")
PRECISIONS = (None, "fp32", "amp-fp16", "amp-bf16", "bf16", "int8")


def _cli(argv: list[str]) -> list[dict[str, Any]] | None:
    """The estimates `fitbench estimate ARGV --json` prints, or None when it refuses."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["estimate", *argv, "--gpu", GPU, "--json"])
    if code != 0:
        assert "Traceback" not in err.getvalue()
        return None
    return json.loads(out.getvalue())["estimates"]


def _api(name: str, options: dict[str, Any]) -> list[dict[str, Any]] | None:
    try:
        est = fitbench.estimate(name, gpu=GPU, **options)
    except FitbenchError:
        return None
    # The CLI adds what the job costs on the card (fitbench.advise.cost) to every estimate.
    return [json.loads(json.dumps(est.to_dict() | job_cost(est).to_dict()))]


def _argv(name: str, options: dict[str, Any]) -> list[str]:
    flags = {
        "mode": "--mode",
        "precision": "--precision",
        "peft": "--peft",
        "exec_mode": "--exec",
        "framework": "--framework",
    }
    argv = [name] + (["--tiny"] if options.get("tiny") else [])
    for key, flag in flags.items():
        if options.get(key) is not None:
            argv += [flag, options[key]]
    return argv


def _grid(names: list[str], *, tiny: bool = False) -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for name in names:
        for mode in MODES:
            for precision in PRECISIONS:
                cases.append((name, {"mode": mode, "precision": precision, "tiny": tiny}))
        if PRESETS[name]().family != "resnet":
            cases.append((name, {"mode": "train", "peft": "lora", "tiny": tiny}))
            cases.append((name, {"mode": "train", "peft": "qlora", "precision": "bf16", "tiny": tiny}))
        cases.append((name, {"mode": "train", "exec_mode": "tuned", "tiny": tiny}))
        cases.append((name, {"mode": "train", "framework": "paddle", "tiny": tiny}))
    return cases


def _check(name: str, options: dict[str, Any]) -> None:
    api_options = {k: v for k, v in options.items() if v is not None}
    cli, api = _cli(_argv(name, options)), _api(name, api_options)
    assert (cli is None) == (api is None), f"{name} {options}: cli {'refuses' if cli is None else 'answers'}"
    assert cli == api, f"{name} {options}: the CLI and the API disagree"


@pytest.mark.parametrize("name, options", _grid(SCENARIOS))
def test_cli_estimate_equals_api_estimate_for_the_scenarios(name: str, options: dict[str, Any]) -> None:
    _check(name, options)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, options", _grid([n for n in PRESETS if n not in SCENARIOS]) + _grid(list(TINY_PRESETS), tiny=True)
)
def test_cli_estimate_equals_api_estimate_for_every_preset(name: str, options: dict[str, Any]) -> None:
    _check(name, options)


def test_decoder_switched_to_training_gets_the_same_defaults_on_both_roads() -> None:
    """The case that once disagreed: the API used to keep fp16 (and no sequence length)."""
    est = fitbench.estimate("llm-6b", gpu=GPU, mode="train")
    assert (est.workload.precision, est.workload.seq_len) == ("amp-bf16", 512)
    assert fitbench.estimate("llm-6b", gpu=GPU, mode="train", peft="LoRA").workload.precision == "bf16"
    assert fitbench.estimate("llm-6b", gpu=GPU, mode="train", precision="fp32").workload.precision == "fp32"
    assert _cli(["llm-6b", "--mode", "train"]) == _api("llm-6b", {"mode": "train"})
