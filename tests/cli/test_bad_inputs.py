"""Bad input through the real CLI: every mistake is one clear line with a fix, never a traceback.

Each row of BAD_INPUTS runs `python -m fitbench ...` in a fresh process, with its own
FITBENCH_HOME and history file under tmp_path, and checks what a user sees: a non-zero exit
code, nothing on stdout, and exactly one line on stderr that names what is wrong and ends with
a parenthesised hint saying how to fix it. Files a row points at (a history that is not ours, a
history from a newer fitbench) must come out byte for byte unchanged: refusing a file must
never damage it.

The rows are real files and real processes: a garbage CIFAR-10 archive, an empty aclImdb
folder, a random-bytes "history", another program's SQLite database, and a PaddlePaddle whose
import fails (a `paddle` package earlier on PYTHONPATH that raises ImportError, as a broken CUDA
library would).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import fitbench
from fitbench.measure import nvml

SRC_DIR = Path(fitbench.__file__).resolve().parents[1]
# The parent refuses these before a child starts: the fake backend stands in for a framework.
TINY = ("--tiny", "--backend", "fake", "--db", "{tmp}/h.sqlite")
TINY_RUN = (*TINY, "--device", "cpu")
# The measuring child reads the dataset: a real framework.
TORCH_RUN = ("--tiny", "--backend", "torch", "--db", "{tmp}/h.sqlite", "--device", "cpu")
RUN_ID = "1d2e3f4a"  # placeholder replaced by the id of the run stored by `history_with_a_run`


# -- files the rows point at ------------------------------------------------------------------------
def write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")


LLAMA_KEYS = {
    "model_type": "llama",
    "vocab_size": 32000,
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "intermediate_size": 11008,
}


def config(tmp: Path, text: str) -> None:
    write(tmp / "cfg" / "config.json", text)


def random_bytes(n: int) -> bytes:
    # Deterministic "random" bytes that do not start with the SQLite magic.
    out = b""
    seed = b"fitbench"
    while len(out) < n:
        seed = hashlib.sha256(seed).digest()
        out += seed
    return out[:n]


def other_apps_sqlite(tmp: Path) -> None:
    conn = sqlite3.connect(tmp / "other.sqlite")
    conn.execute("CREATE TABLE bookmarks (url TEXT, title TEXT)")
    conn.execute("INSERT INTO bookmarks VALUES ('https://example.org', 'example')")
    conn.commit()
    conn.close()


def history_with_a_run(tmp: Path) -> str:
    from fitbench.results.history import History

    with History.open(tmp / "h.sqlite") as h:
        return h.add_run(
            {"command": "run", "workload": {"name": "resnet50-cifar10"}, "measurement": {"status": "ok"}}
        )


def newer_history(tmp: Path) -> None:
    history_with_a_run(tmp)
    conn = sqlite3.connect(tmp / "h.sqlite")
    conn.execute("PRAGMA user_version = 999")
    conn.commit()
    conn.close()


def broken_paddle(tmp: Path) -> None:
    write(
        tmp / "fake" / "paddle" / "__init__.py",
        'raise ImportError("libcudart.so.12: cannot open shared object file: No such file or directory")\n',
    )


# -- the table --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bad:
    """One bad input: argv ('{tmp}' is the test's folder), exit code, what the line must say."""

    id: str
    argv: tuple[str, ...]
    says: str  # the problem, as the single stderr line names it
    hint: str  # part of the fix hint (the line's final parentheses)
    code: int = 2
    setup: Callable[[Path], object] | None = None
    unchanged: tuple[str, ...] = ()  # files (under tmp) that must come out byte for byte the same
    env: dict[str, str] = field(default_factory=dict)
    slow: bool = False  # starts a measuring child that imports torch


BAD_INPUTS: list[Bad] = [
    # -- unknown names, with "did you mean"
    Bad(
        "unknown-workload",
        ("estimate", "resnet5-cifar10"),
        "unknown workload 'resnet5-cifar10'",
        "did you mean 'resnet50-cifar10'",
    ),
    Bad("unknown-gpu", ("estimate", "llm-6b", "--gpu", "rtx-4009"), "unknown GPU 'rtx-4009'", "did you mean"),
    Bad(
        "unknown-precision",
        ("estimate", "bert-base-imdb", "--precision", "fp61"),
        "unknown precision 'fp61'",
        "did you mean",
    ),
    Bad(
        "unknown-optimizer",
        ("estimate", "resnet50-cifar10", "--optimizer", "adamm"),
        "unknown optimizer 'adamm'",
        "did you mean 'adam'",
    ),
    Bad(
        "unknown-mode",
        ("estimate", "resnet50-cifar10", "--mode", "trian"),
        "unknown mode 'trian'",
        "did you mean 'train'",
    ),
    Bad(
        "unknown-backend",
        ("run", "resnet50-cifar10", "--tiny", "--backend", "torc", "--device", "cpu"),
        "argument --backend: invalid choice 'torc'",
        "did you mean 'torch'",
    ),
    Bad(
        "unknown-strategy",
        ("estimate", "llm-6b", "--gpus", "2", "--strategy", "zero4"),
        "unknown strategy 'zero4'",
        "did you mean",
    ),
    Bad(
        "unknown-optimizer-impl",
        ("estimate", "bert-base-imdb", "--optimizer-impl", "fuzed"),
        "unknown optimizer implementation 'fuzed'",
        "did you mean 'fused'",
    ),
    Bad(
        "grad-accum-on-inference",
        ("estimate", "bert-base-imdb", "--mode", "infer", "--grad-accum", "4"),
        "--grad-accum applies to training only",
        "add --mode train, or drop --grad-accum",
    ),
    Bad(
        "deepspeed-strategy-run",
        ("run", "bert-base-imdb", *TORCH_RUN, "--gpus", "2", "--strategy", "zero2"),
        "--strategy zero2 is DeepSpeed's ZeRO: fitbench run does not launch it",
        "fsdp-shard-grad-op",
    ),
    Bad(
        "unknown-peft",
        ("estimate", "bert-base-imdb", "--peft", "lroa"),
        "unknown fine-tuning method 'lroa'",
        "did you mean 'lora'",
    ),
    Bad("unknown-command", ("nosuchcommand",), "unknown command 'nosuchcommand'", "`fitbench --help` lists"),
    Bad("workload-as-command", ("llm-6b",), "unknown command 'llm-6b'", "`fitbench estimate llm-6b`"),
    Bad(
        "fail-if-bad-value",
        ("estimate", "llm-6b", "--fail-if", "bad"),
        "argument --fail-if: invalid choice 'bad'",
        "choose one of: offload, oom, tight",
    ),
    Bad(
        "serve-a-classifier",
        ("estimate", "bert-base-imdb", "--serve"),
        "--serve describes text generation by a decoder",
        "use a decoder preset",
    ),
    Bad(
        "serving-flag-without-serve",
        ("estimate", "llm-6b", "--context", "8192"),
        "--context apply to --serve only",
        "add --serve",
    ),
    Bad(
        "bad-utilization",
        ("estimate", "llm-6b", "--serve", "--gpu-memory-utilization", "1.5"),
        "argument --gpu-memory-utilization: must be more than 0 and at most 1",
        "fitbench estimate --help",
    ),
    Bad(
        "unknown-history-status",
        ("history", "--status", "bogus", "--db", "{tmp}/h.sqlite"),
        "unknown status 'bogus'",
        "choose one of",
        setup=history_with_a_run,
    ),
    Bad(
        "history-db-missing",
        ("history", "--db", "{tmp}/typo/h.sqlite"),
        "no history file at",
        "check the --db path",
    ),
    Bad(
        "no-tiny-variant", ("estimate", "llm-13b", "--tiny"), "has no tiny variant", "tiny variants exist for"
    ),
    # -- sizes
    Bad(
        "batch-zero",
        ("estimate", "llm-6b", "--batch", "0"),
        "argument --batch/--batch-size: must be 1 or more",
        "`fitbench estimate --help`",
    ),
    Bad("batch-negative", ("estimate", "llm-6b", "--batch", "-3"), "must be 1 or more, got -3", "--help"),
    Bad(
        "batch-not-a-number",
        ("estimate", "llm-6b", "--batch", "abc"),
        "'abc' is not a whole number",
        "--help",
    ),
    Bad(
        "batch-absurd",
        ("estimate", "llm-6b", "--batch", "10000000000"),
        "batch-size 10000000000 is beyond any real job",
        "use at most 1048576",
    ),
    Bad(
        "seq-len-absurd",
        ("estimate", "bert-base-imdb", "--seq-len", "99999999"),
        "seq-len 99999999 is beyond any real job",
        "use at most",
    ),
    Bad(
        "image-too-small",
        ("estimate", "resnet50-cifar10", "--image-size", "4"),
        "image-size 4 is too small for a ResNet",
        "use 8 or more",
    ),
    Bad(
        "new-tokens-zero",
        ("estimate", "llm-6b", "--new-tokens", "0"),
        "argument --new-tokens: must be 1 or more",
        "--help",
    ),
    Bad(
        "longer-than-positions",
        ("estimate", "bert-base-imdb", "--seq-len", "1024"),
        "sequence of 1024 tokens is longer than the model's 512 positions",
        "use --seq-len 512 or less",
    ),
    Bad(
        "seq-len-on-resnet",
        ("estimate", "resnet50-cifar10", "--seq-len", "128"),
        "--seq-len does not apply here: resnet50-cifar10 is a ResNet",
        "--image-size",
    ),
    Bad(
        "image-size-on-bert",
        ("estimate", "bert-base-imdb", "--image-size", "64"),
        "--image-size applies to ResNet workloads only",
        "--seq-len",
    ),
    Bad(
        "prompt-on-training",
        ("estimate", "bert-base-imdb", "--prompt-tokens", "10"),
        "--prompt-tokens applies to generation only",
        "--seq-len",
    ),
    Bad(
        "int4-training",
        ("estimate", "llm-6b", "--mode", "train", "--precision", "int4"),
        "precision 'int4' is for inference only",
        "use --mode infer",
    ),
    Bad(
        "timeout-nan",
        ("run", "resnet50-cifar10", *TINY_RUN, "--timeout", "nan"),
        "argument --timeout: must be a finite number of seconds",
        "--help",
    ),
    Bad(
        "min-seconds-inf",
        ("run", "resnet50-cifar10", *TINY_RUN, "--min-seconds", "inf"),
        "argument --min-seconds: must be a finite number of seconds",
        "--help",
    ),
    # -- config.json
    Bad(
        "config-not-json",
        ("estimate", "--config", "{tmp}/cfg/config.json"),
        "is not valid JSON",
        "fix the file",
        setup=lambda t: config(t, "{not json"),
    ),
    Bad(
        "config-json-list",
        ("estimate", "--config", "{tmp}/cfg"),
        "holds a JSON list, not an object",
        "one JSON object",
        setup=lambda t: config(t, "[1, 2, 3]"),
    ),
    Bad(
        "config-missing-keys",
        ("estimate", "--config", "{tmp}/cfg"),
        "'llama' configs need 'vocab_size'",
        "add the missing keys",
        setup=lambda t: config(t, '{"model_type": "llama"}'),
    ),
    Bad(
        "config-string-for-int",
        ("estimate", "--config", "{tmp}/cfg"),
        "'hidden_size' must be a whole number, got the string '4096'",
        "without quotes",
        setup=lambda t: config(t, json.dumps({**LLAMA_KEYS, "hidden_size": "4096"})),
    ),
    Bad(
        "config-negative-heads",
        ("estimate", "--config", "{tmp}/cfg"),
        "'num_attention_heads' must be at least 1, got -32",
        "fix that value in the config file",
        setup=lambda t: config(t, json.dumps({**LLAMA_KEYS, "num_attention_heads": -32})),
    ),
    Bad(
        "config-heads-do-not-divide",
        ("estimate", "--config", "{tmp}/cfg"),
        "hidden_size 4096 is not divisible by num_heads 30",
        "head_dim",
        setup=lambda t: config(t, json.dumps({**LLAMA_KEYS, "num_attention_heads": 30})),
    ),
    Bad(
        "config-file-missing",
        ("estimate", "--config", "{tmp}/nowhere/config.json"),
        "not found",
        "pass the path to a config.json",
    ),
    Bad(
        "config-folder-without-file",
        ("estimate", "--config", "{tmp}/cfg"),
        "no config.json in folder",
        "pass the path to a config.json",
        setup=lambda t: (t / "cfg").mkdir(),
    ),
    Bad(
        "config-and-preset",
        ("estimate", "llm-6b", "--config", "{tmp}/cfg"),
        "both a WORKLOAD preset ('llm-6b') and --config were given",
        "give one of them",
        setup=lambda t: config(t, json.dumps(LLAMA_KEYS)),
    ),
    Bad(
        "config-and-tiny",
        ("estimate", "--config", "{tmp}/cfg", "--tiny"),
        "--tiny applies to presets",
        "drop --tiny",
        setup=lambda t: config(t, json.dumps(LLAMA_KEYS)),
    ),
    Bad("no-workload", ("estimate",), "no workload given", "name a preset"),
    # -- datasets (the measuring child reads them: torch is imported)
    Bad(
        "cifar-garbage-tar",
        ("run", "resnet50-cifar10", *TORCH_RUN, "--data", "{tmp}/cifar-10-python.tar.gz"),
        "is not a readable tar.gz archive",
        "cifar-10-python.tar.gz",
        setup=lambda t: write(t / "cifar-10-python.tar.gz", random_bytes(5000)),
        slow=True,
    ),
    Bad(
        "imdb-empty-folder",
        ("run", "bert-base-imdb", *TORCH_RUN, "--data", "{tmp}/aclImdb"),
        "no IMDb reviews in",
        "aclImdb",
        setup=lambda t: (t / "aclImdb").mkdir(),
        slow=True,
    ),
    Bad(
        "compile-without-tuned",
        ("run", "resnet50-cifar10", *TINY_RUN, "--compile"),
        "--compile compiles the tuned step",
        "add --exec tuned",
    ),
    Bad(
        "compile-with-paddle",
        (
            "run",
            "resnet50-cifar10",
            "--tiny",
            "--backend",
            "paddle",
            "--device",
            "cpu",
            "--exec",
            "tuned",
            "--compile",
            "--db",
            "{tmp}/h.sqlite",
        ),
        "the paddle backend has none",
        "use --backend torch",
        # a paddle package that is found (so the backend counts as installed) but never imported
        setup=broken_paddle,
        env={"PYTHONPATH": "{tmp}/fake"},
    ),
    Bad(
        "data-path-missing",
        ("run", "resnet50-cifar10", *TINY_RUN, "--data", "{tmp}/nowhere"),
        "does not exist",
        "pass the CIFAR-10 or aclImdb path",
    ),
    # -- history files
    Bad(
        "history-random-bytes",
        ("history", "--db", "{tmp}/h.sqlite"),
        "is not a fitbench history (not an SQLite database)",
        "pass --db with another file",
        setup=lambda t: write(t / "h.sqlite", random_bytes(4096)),
        unchanged=("h.sqlite",),
    ),
    Bad(
        "history-other-apps-sqlite",
        ("history", "--db", "{tmp}/other.sqlite"),
        "is not a fitbench history (an SQLite database of another program)",
        "pass --db with another file",
        setup=other_apps_sqlite,
        unchanged=("other.sqlite",),
    ),
    Bad(
        "run-into-other-apps-sqlite",
        (
            "run",
            "resnet50-cifar10",
            "--tiny",
            "--backend",
            "fake",
            "--device",
            "cpu",
            "--db",
            "{tmp}/other.sqlite",
        ),
        "is not a fitbench history",
        "pass --db with another file",
        setup=other_apps_sqlite,
        unchanged=("other.sqlite",),
    ),
    Bad(
        "history-newer-schema",
        ("history", "--db", "{tmp}/h.sqlite"),
        "was written by a newer fitbench (schema 999)",
        "upgrade fitbench",
        setup=newer_history,
        unchanged=("h.sqlite",),
    ),
    Bad("history-db-is-a-folder", ("history", "--db", "{tmp}"), "is a folder", "pass --db with a file path"),
    Bad(
        "compare-unknown-run",
        ("compare", RUN_ID, "ffffffff", "--db", "{tmp}/h.sqlite"),
        "no run 'ffffffff'",
        "`fitbench history` lists runs",
        setup=history_with_a_run,
        unchanged=("h.sqlite",),
    ),
    # -- frameworks and devices
    Bad(
        "framework-import-fails",
        (
            "run",
            "resnet50-cifar10",
            "--tiny",
            "--backend",
            "paddle",
            "--device",
            "cpu",
            "--db",
            "{tmp}/h.sqlite",
        ),
        "the paddle backend cannot import 'paddle': ImportError: libcudart.so.12",
        "pip install 'fitbench[paddle]'",
        setup=broken_paddle,
        env={"PYTHONPATH": "{tmp}/fake"},
    ),
    Bad(
        "device-tpu",
        ("run", "resnet50-cifar10", *TINY, "--device", "tpu"),
        "unknown device 'tpu'",
        "use cpu, cuda or cuda:N",
    ),
    Bad(
        "device-cuda-x",
        ("run", "resnet50-cifar10", *TINY, "--device", "cuda:x"),
        "unknown device 'cuda:x'",
        "use cpu, cuda or cuda:N",
    ),
    Bad(
        "device-cuda-without-gpu",
        ("run", "resnet50-cifar10", *TINY, "--device", "cuda"),
        "no CUDA GPU found",
        "use --device cpu",
    ),
]

NEEDS_NO_GPU = {"device-cuda-without-gpu"}


def _params() -> list:
    out = []
    for row in BAD_INPUTS:
        marks = []
        if row.slow:
            marks += [pytest.mark.slow, pytest.mark.torch]
        if row.id in NEEDS_NO_GPU:
            marks.append(pytest.mark.skipif(bool(nvml.device_count()), reason="this machine has a GPU"))
        out.append(pytest.param(row, id=row.id, marks=marks))
    return out


def fitbench_cli(
    argv: list[str], tmp: Path, env_extra: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FITBENCH_DEBUG"}
    env["FITBENCH_HOME"] = str(tmp / "home")
    env["NO_COLOR"] = "1"
    paths = [p for p in ((env_extra or {}).get("PYTHONPATH"), str(SRC_DIR), env.get("PYTHONPATH")) if p]
    env.update(env_extra or {})
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return subprocess.run(
        [sys.executable, "-m", "fitbench", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=tmp,
    )


def final_parenthesised(line: str) -> str:
    """The hint of "fitbench: error: what is wrong (how to fix it)": the balanced group at the end."""
    assert line.endswith(")"), f"no fix hint at the end of: {line}"
    depth = 0
    for i in range(len(line) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(line[i], 0)
        if depth == 0:
            return line[i + 1 : -1]
    raise AssertionError(f"unbalanced parentheses: {line}")


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def test_the_table_is_big_and_its_ids_unique() -> None:
    assert len(BAD_INPUTS) >= 30
    assert len({row.id for row in BAD_INPUTS}) == len(BAD_INPUTS)


@pytest.mark.parametrize("row", _params())
def test_bad_input_is_one_clear_line(row: Bad, tmp_path: Path) -> None:
    if row.slow:
        pytest.importorskip("torch")
    if row.argv[0] == "run" and "torch" in row.argv and importlib.util.find_spec("torch") is None:
        pytest.skip("`fitbench run` checks its backend first: needs torch installed")
    stored = row.setup(tmp_path) if row.setup else None
    before = {name: digest(tmp_path / name) for name in row.unchanged}
    assert all(before.values()), "the row's setup did not write the files it names"

    def fill(text: str) -> str:
        text = text.replace("{tmp}", str(tmp_path))
        return text.replace(RUN_ID, stored) if isinstance(stored, str) else text

    argv = [fill(a) for a in row.argv]
    env = {k: fill(v) for k, v in row.env.items()}
    proc = fitbench_cli(argv, tmp_path, env)

    err = proc.stderr
    assert "Traceback" not in err, err
    assert proc.returncode == row.code, (proc.returncode, err)
    assert proc.stdout == "", proc.stdout
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("fitbench") and ": error: " in line, line
    assert row.says in line, line
    hint = final_parenthesised(line)
    assert row.hint in hint, f"hint {hint!r} lacks {row.hint!r}"
    assert row.says not in hint, "the problem belongs before the hint"
    for name, sha in before.items():
        assert digest(tmp_path / name) == sha, f"{name} was modified by a command that refused it"


# -- --debug --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["--debug", "estimate", "resnet5-cifar10"],
        ["estimate", "resnet5-cifar10", "--debug"],  # accepted anywhere on the line
    ],
)
def test_debug_shows_the_traceback_and_still_the_one_line(argv: list[str], tmp_path: Path) -> None:
    proc = fitbench_cli(argv, tmp_path)
    assert proc.returncode == 2
    assert "Traceback (most recent call last)" in proc.stderr
    assert "FitbenchError: unknown workload 'resnet5-cifar10'" in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fitbench: error: unknown workload 'resnet5-cifar10' (did you mean")


def test_debug_from_the_environment(tmp_path: Path) -> None:
    proc = fitbench_cli(["estimate", "llm-6b", "--batch", "10000000000"], tmp_path, {"FITBENCH_DEBUG": "1"})
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr and "beyond any real job" in proc.stderr.strip().splitlines()[-1]


def test_a_good_command_next_to_the_bad_ones_still_works(tmp_path: Path) -> None:
    """The checks above must not refuse what is valid: --config alone, --seq-len on a decoder
    being fine-tuned, --debug on a command that succeeds."""
    config(tmp_path, json.dumps(LLAMA_KEYS))
    proc = fitbench_cli(
        ["estimate", "--config", str(tmp_path / "cfg"), "--gpu", "a100-80gb", "--json", "--debug"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["estimates"][0]["params"] == 6_738_415_616
    proc = fitbench_cli(
        [
            "estimate",
            "llm-6b",
            "--mode",
            "train",
            "--seq-len",
            "1024",
            "--peft",
            "lora",
            "--lora-rank",
            "8",
            "--gpu",
            "h100-sxm",
            "--json",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["estimates"][0]["seq_len"] == 1024
