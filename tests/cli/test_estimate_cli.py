"""`fitbench estimate`, `gpus` and `workloads` end to end, and the fast path's imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fitbench.cli.main import main

FRAMEWORKS = ("torch", "paddle", "transformers", "numpy")


def _loaded_after(code: str) -> list[str]:
    probe = code + f"\nimport sys; print('LOADED', [m for m in {FRAMEWORKS!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("LOADED"))
    return eval(line.removeprefix("LOADED "))  # a printed list of str


def test_import_fitbench_loads_no_framework() -> None:
    assert _loaded_after("import fitbench; fitbench.estimate('llm-6b', gpu='rtx-4090')") == []


def test_estimate_command_loads_no_framework() -> None:
    code = (
        "from fitbench.cli.main import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['estimate', 'llm-6b', '--gpu', 'all', '--json'])\n"
        "    main(['estimate', 'bert-base-imdb', '--peft', 'lora', '--gpus', '2', '--strategy', 'zero3'])\n"
        "    main(['estimate', 'llm-6b', '--serve', '--gpu', 'all'])\n"
        "    main(['estimate', 'llm-13b', '--offload', '--gpu', 'all'])"
    )
    assert _loaded_after(code) == []


def test_estimate_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "llm-6b", "--gpu", "all", "--json"]) == 0
    estimates = json.loads(capsys.readouterr().out)["estimates"]
    assert len(estimates) >= 15
    ids = {e["gpu"] for e in estimates}
    assert {"rtx-3060-12gb", "rtx-4090", "a100-40gb", "h100-sxm", "h200"} <= ids
    for e in estimates:
        assert sum(e["breakdown"].values()) == e["peak_memory_bytes"]
        assert e["verdict"] in ("fits", "tight", "oom") and e["bottleneck"] in (
            "compute",
            "memory",
            "overhead",
        )
        assert e["workload"] == "llm-6b" and e["precision"] == "fp16" and e["batch_size"] == 1
        assert e["epoch_seconds"] is None
        # A card where it does not fit has no speed; the would-be speed keeps its own name.
        if e["verdict"] == "oom":
            assert e["tokens_per_second"] is None and e["tokens_per_second_if_it_fit"] > 0
            assert e["limited_by"] == "memory-capacity"
        else:
            assert e["tokens_per_second"] == e["decode_tokens_per_second"] > 0
            assert e["tokens_per_second_if_it_fit"] is None
            assert 0 < e["end_to_end_tokens_per_second"] < e["decode_tokens_per_second"]
    assert any(e["verdict"] == "oom" for e in estimates)


def test_fail_if_gates_on_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "llm-6b", "--gpu", "rtx-3060-12gb", "--fail-if", "oom"]) == 3
    assert main(["estimate", "llm-6b", "--gpu", "a100-40gb", "--fail-if", "tight"]) == 0
    assert (
        main(["estimate", "llm-6b", "--gpu", "rtx-3060-12gb", "--precision", "int4", "--fail-if", "oom"]) == 0
    )


def test_gpus_and_workloads_list_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus", "--json"]) == 0
    gpus = json.loads(capsys.readouterr().out)
    assert all(g["source"] for g in gpus) and len(gpus) >= 15
    assert main(["workloads", "--json"]) == 0
    presets = {w["name"]: w for w in json.loads(capsys.readouterr().out)}
    assert presets["resnet50-cifar10"]["params"] == 23_528_522
    assert presets["llm-6b"]["tiny_variant"] is True


def test_human_table_names_every_card(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "bert-base-imdb", "--precision", "amp-fp16"]) == 0
    out = capsys.readouterr().out
    for card in ("rtx-3060-12gb", "rtx-4090", "a100-40gb", "h100-sxm"):
        assert card in out
    assert "fits" in out and "/epoch" in out


def test_estimate_serve_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "llm-6b", "--serve", "--gpu", "h100-sxm", "--context", "8192", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["serving"][0]
    assert out["gpu"] == "h100-sxm" and out["context"] == 8192 and out["block_size"] == 16
    for key in (
        "kv_cache_tokens",
        "kv_cache_blocks",
        "max_concurrent_sequences",
        "ttft_seconds",
        "throughput",
        "knee_concurrency",
        "memory",
    ):
        assert key in out
    assert out["kv_cache_tokens"] == out["kv_cache_blocks"] * 16
    assert main(["estimate", "llm-6b", "--serve", "--gpu", "h100-sxm", "--lang", "zh"]) == 0
    text = capsys.readouterr().out
    assert "KV 缓存" in text and "首 token" in text


def test_serving_flags_need_serve(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "llm-6b", "--context", "8192"]) != 0
    assert "--serve" in capsys.readouterr().err


def test_offload_verdict_and_fail_if_ladder(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "llm-6b", "--gpu", "rtx-3060-12gb"]
    # Without --offload nothing changes: oom is oom.
    assert main([*args, "--fail-if", "oom"]) == 3
    capsys.readouterr()
    assert main([*args, "--offload", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)["estimates"][0]
    assert est["verdict"] == "oom" and est["offload"]["verdict"] == "offload"
    assert 0 < est["offload"]["gpu_layers"] < est["offload"]["total_layers"]
    # With --offload it runs: not "oom or worse", but "offload or worse".
    assert main([*args, "--offload", "--fail-if", "oom"]) == 0
    assert main([*args, "--offload", "--fail-if", "offload"]) == 3
    capsys.readouterr()
    assert main([*args, "--offload"]) == 0
    assert "layers on the GPU" in capsys.readouterr().out


def test_lang_before_the_command_is_the_commands(capsys) -> None:
    """The usage line puts --lang before COMMAND: `fitbench --lang zh estimate ...` speaks Chinese
    (it was taken as `check` with stray arguments), and --lang=VALUE works too."""
    assert main(["--lang", "zh", "estimate", "llm-6b", "--gpu", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "参数" in out and "parameters" not in out
    assert main(["--lang=en", "estimate", "llm-6b", "--gpu", "h100-sxm"]) == 0
    assert "parameters" in capsys.readouterr().out


@pytest.mark.parametrize(("lang", "phrase"), [("en", "would grow past the card"), ("zh", "超出显卡容量")])
def test_a_reserve_capped_at_the_card_is_explained(
    capsys: pytest.CaptureFixture[str], lang: str, phrase: str
) -> None:
    """A long, wide generation whose regrown caches would reserve more than the card: the peak
    stops at the usable memory, the verdict is no oom, and a note says why (in both languages)."""
    args = ["estimate", "qwen2.5-7b-instruct", "--mode", "infer", "--batch", "64", "--prompt-tokens", "128"]
    assert main([*args, "--new-tokens", "8192", "--gpu", "h100-sxm", "--lang", lang]) == 0
    assert phrase in capsys.readouterr().out
    assert main([*args, "--new-tokens", "8192", "--gpu", "h100-sxm", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["estimates"][0]
    assert row["peak_memory_bytes"] == row["usable_memory_bytes"]
    assert row["verdict"] != "oom"
