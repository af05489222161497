"""Distributed measurements on the CPU: real launchers, two gloo ranks, tiny real models.

The fast tests check the pieces that need no process (merging rank results, launcher command
lines, what cannot be measured); the slow ones start torch.distributed.run (and Paddle's
launcher) for real and check that one result with one entry per rank comes back, whatever
the ranks did.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fitbench.backends.base import RunOptions
from fitbench.errors import FitbenchError
from fitbench.measure.dist_child import RankEnv, rank_device, rank_request
from fitbench.measure.distributed import (
    GPU_HOST_ENV,
    launcher_command,
    measure_distributed,
    merge_rank_results,
    unsupported,
)
from fitbench.workloads.presets import get_workload

CPU = RunOptions(device="cpu")
# Address space a process of the out-of-memory test may map: room for Python, torch and a process
# group, none for a batch of 20,000 sequences.
CAP_BYTES = 2 * 2**30
HAS_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
HAS_PADDLE = importlib.util.find_spec("paddle") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch and transformers")
needs_paddle = pytest.mark.skipif(not HAS_PADDLE, reason="needs paddlepaddle")


# -- merging rank results (no processes) ------------------------------------------------------
def rank_result(
    rank: int, *, status: str = "ok", peak: int = 100, samples: list[float] | None = None, **extra: object
) -> dict:
    samples = [0.1, 0.2, 0.3] if samples is None else samples
    out = {
        "rank": rank,
        "status": status,
        "error": None if status == "ok" else f"{status} on {rank}",
        "peak_memory_bytes": peak,
        "peak_rss_bytes": peak,
        "peak_memory_source": "rss",
        "step_samples_seconds": samples,
        "step_seconds": sorted(samples)[len(samples) // 2],
        "warnings": [f"warning of rank {rank}"],
        "backend_notes": {"distributed": {"process_group": "gloo"}},
    }
    out.update(extra)
    return out


def test_merge_takes_the_largest_rank_and_the_slowest_rank_of_each_step() -> None:
    w = get_workload("bert-base-imdb", tiny=True, gpus=2)
    ranks = [
        rank_result(0, peak=300, samples=[0.10, 0.40, 0.10]),
        rank_result(1, peak=500, samples=[0.20, 0.10, 0.30]),
    ]
    m = merge_rank_results(w, "torch", CPU, ranks)
    assert m["status"] == "ok" and m["error"] is None
    assert m["peak_memory_bytes"] == 500 and m["peak_rss_bytes"] == 500
    assert m["step_samples_seconds"] == [0.20, 0.40, 0.30]  # per step, the last rank to finish
    assert m["step_seconds"] == pytest.approx(0.30)
    assert m["samples_per_second"] == pytest.approx(2 * 4 / 0.30)  # global: 2 ranks x batch 4
    assert m["samples_per_second_per_gpu"] == pytest.approx(4 / 0.30)
    assert m["tokens_per_second"] == pytest.approx(2 * 4 * 64 / 0.30)
    assert m["epoch_seconds"] == pytest.approx(0.30 * 25_000 / 8)
    assert [r["rank"] for r in m["per_rank"]] == [0, 1]
    assert [r["peak_memory_bytes"] for r in m["per_rank"]] == [300, 500]
    assert m["distributed"]["global_batch_size"] == 8 and m["distributed"]["process_group"] == "gloo"
    assert m["warnings"] == ["warning of rank 0", "warning of rank 1"]


def test_merge_status_out_of_memory_wins_then_error_then_missing() -> None:
    w = get_workload("bert-base-imdb", tiny=True, gpus=3)
    ranks = [rank_result(0, status="error"), rank_result(1, status="oom"), None]
    m = merge_rank_results(w, "torch", CPU, ranks)
    assert m["status"] == "oom" and m["error"].startswith("rank 1:")
    m = merge_rank_results(w, "torch", CPU, [rank_result(0), rank_result(1, status="error"), None])
    assert m["status"] == "error" and m["error"].startswith("rank 1:")
    m = merge_rank_results(w, "torch", CPU, [rank_result(0), None, rank_result(2)])
    assert m["status"] == "error" and "rank 1 ended without a result" in m["error"]
    assert m["per_rank"][1] == {"rank": 1, "status": "missing"}
    m = merge_rank_results(w, "torch", CPU, [None, None, None], timed_out=True, timeout_s=5, phase="step")
    assert m["status"] == "timeout" and "5 s" in m["error"] and "step" in m["error"]


def test_merge_generation_throughput_counts_every_replica() -> None:
    w = get_workload("llm-6b", tiny=True, gpus=2)
    ranks = [rank_result(r, samples=[1.0, 1.0, 1.0], prefill_seconds=0.2) for r in (0, 1)]
    m = merge_rank_results(w, "torch", CPU, ranks)
    assert m["tokens_per_second"] == pytest.approx(2 * 1 * 8 / 1.0)
    assert m["decode_seconds"] == pytest.approx(0.8)
    assert m["decode_tokens_per_second"] == pytest.approx(2 * 8 / 0.8)


# -- launching ---------------------------------------------------------------------------------
def test_launcher_commands(tmp_path: Path) -> None:
    req = tmp_path / "request.json"
    torch_cmd = launcher_command("torch", 4, req, device="cuda", log_dir=tmp_path)
    assert torch_cmd[1:3] == ["-m", "torch.distributed.run"]
    assert "--standalone" in torch_cmd and torch_cmd[torch_cmd.index("--nproc-per-node") + 1] == "4"
    assert torch_cmd[-3:] == ["-m", "fitbench.measure.dist_child", str(req)]
    paddle_cmd = launcher_command("paddle", 2, req, device="cuda:2", log_dir=tmp_path)
    assert paddle_cmd[1:3] == ["-m", "paddle.distributed.launch"]
    assert paddle_cmd[paddle_cmd.index("--devices") + 1] == "2,3"
    assert paddle_cmd[paddle_cmd.index("--max_restart") + 1] == "0"
    assert paddle_cmd[-3:] == ["-m", "fitbench.measure.dist_child", str(req)]
    assert GPU_HOST_ENV == {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }


def test_rank_environment_and_request() -> None:
    assert RankEnv.from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == RankEnv(
        rank=3, world_size=4, local_rank=1
    )
    assert RankEnv.from_env(
        {"PADDLE_TRAINER_ID": "1", "PADDLE_TRAINERS_NUM": "2", "PADDLE_LOCAL_RANK": "1"}
    ) == RankEnv(rank=1, world_size=2, local_rank=1)
    with pytest.raises(FitbenchError):
        RankEnv.from_env({})
    assert rank_device("cpu", 3) == "cpu"
    assert rank_device("cuda", 3) == "cuda:3" and rank_device("cuda:2", 1) == "cuda:3"
    request = {
        "options": {"device": "cuda"},
        "rank_result_pattern": "/x/result.rank{rank}.json",
        "progress_path": "/x/p.jsonl",
        "min_seconds": 3.0,
        "max_seconds": 60.0,
        "workload": {},
    }
    mine = rank_request(request, RankEnv(rank=1, world_size=2, local_rank=1))
    assert mine["options"]["device"] == "cuda:1" and mine["result_path"] == "/x/result.rank1.json"
    assert mine["progress_path"] is None and mine["min_seconds"] == 0.0
    assert rank_request(request, RankEnv(rank=0, world_size=2, local_rank=0))["progress_path"] == "/x/p.jsonl"


def test_what_is_not_measured_is_refused_before_launching() -> None:
    with pytest.raises(FitbenchError, match="tensor-parallel"):
        measure_distributed(get_workload("bert-base-imdb", tiny=True, gpus=2, strategy="tp"), "torch", CPU)
    assert unsupported(get_workload("llm-6b", tiny=True, gpus=2, strategy="fsdp"), "torch", "cpu") is not None
    assert (
        unsupported(get_workload("bert-base-imdb", tiny=True, gpus=2, strategy="zero2"), "paddle", "cpu")
        is not None
    )
    bert = get_workload("bert-base-imdb", tiny=True, gpus=2)
    deepspeed = unsupported(bert.replace(strategy="zero2"), "torch", "cpu")
    assert deepspeed is not None and "DeepSpeed" in deepspeed.message
    assert "fsdp-shard-grad-op" in deepspeed.hint
    assert unsupported(bert.replace(strategy="fsdp-shard-grad-op"), "torch", "cpu") is None
    tuned = unsupported(get_workload("bert-base-imdb", tiny=True, gpus=2), "torch", "cuda", "tuned")
    assert tuned is not None and "--exec default" in tuned.message


# -- real two-rank runs ------------------------------------------------------------------------
def run_two(name: str, strategy: str, backend: str = "torch", **kwargs: object) -> dict:
    w = get_workload(name, tiny=True, gpus=2, strategy=strategy)
    return measure_distributed(
        w,
        backend,
        CPU,
        timeout_s=kwargs.pop("timeout_s", 300),
        min_steps=kwargs.pop("min_steps", 3),
        warmup=1,
        **kwargs,
    )


def check_ok(m: dict, *, wrapper: str, group: str = "gloo") -> None:
    assert m["status"] == "ok", (m.get("error"), m.get("stderr_tail"))
    assert len(m["per_rank"]) == 2
    assert [r["rank"] for r in m["per_rank"]] == [0, 1]
    assert all(r["status"] == "ok" and r["steps"] == 3 for r in m["per_rank"])
    assert m["steps"] == 3 and len(m["step_samples_seconds"]) == 3
    # the median of the per-step slowest rank is at least every rank's own median
    assert m["step_seconds"] >= max(r["step_seconds"] for r in m["per_rank"]) > 0
    assert m["peak_memory_bytes"] == max(r["peak_memory_bytes"] for r in m["per_rank"]) > 0
    assert m["peak_memory_source"] == "rss"
    assert m["samples_per_second"] == pytest.approx(2 * m["batch_size"] / m["step_seconds"])
    dist_notes = m["backend_notes"]["distributed"]
    assert wrapper in dist_notes["wrapper"]
    assert dist_notes["process_group"] == group and dist_notes["world_size"] == 2
    assert m["distributed"]["nproc"] == 2


@pytest.mark.slow
@pytest.mark.torch
@needs_torch
def test_resnet_ddp_two_gloo_ranks() -> None:
    m = run_two("resnet50-cifar10", "ddp")
    check_ok(m, wrapper="DistributedDataParallel")
    assert m["backend_notes"]["distributed"]["local_parameters"] == m["params"]  # a full replica
    assert m["epoch_seconds"] == pytest.approx(m["step_seconds"] * 50_000 / 16)


@pytest.mark.slow
@pytest.mark.torch
@needs_torch
def test_bert_ddp_two_gloo_ranks() -> None:
    m = run_two("bert-base-imdb", "ddp")
    check_ok(m, wrapper="DistributedDataParallel")
    assert m["tokens_per_second"] == pytest.approx(2 * 4 * 64 / m["step_seconds"])


@pytest.mark.slow
@pytest.mark.torch
@needs_torch
def test_bert_fsdp_two_gloo_ranks() -> None:
    # FSDP2 (fully_shard) runs on the CPU with gloo in torch 2.13.
    m = run_two("bert-base-imdb", "fsdp")
    check_ok(m, wrapper="fully_shard")
    notes = m["backend_notes"]["distributed"]
    assert notes["fsdp_units"] == 3  # 2 BertLayers and the root
    assert notes["local_parameters"] <= m["params"] // 2 + 1_000  # this rank holds a half


@pytest.mark.slow
@pytest.mark.torch
@needs_torch
def test_out_of_memory_on_the_ranks_is_a_verdict() -> None:
    """A real allocator out-of-memory on the ranks: the job runs under an address-space cap
    (RLIMIT_AS, inherited by the launcher and both ranks) with a batch that cannot fit in it."""
    code = textwrap.dedent(f"""
        import json, resource
        resource.setrlimit(resource.RLIMIT_AS, ({CAP_BYTES}, resource.RLIM_INFINITY))
        from fitbench.backends.base import RunOptions
        from fitbench.measure.distributed import measure_distributed
        from fitbench.workloads.presets import get_workload
        w = get_workload("bert-base-imdb", tiny=True, gpus=2, strategy="ddp", batch_size=20000)
        m = measure_distributed(w, "torch", RunOptions(device="cpu"), timeout_s=300, min_steps=1, warmup=0)
        print(json.dumps(m))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout.strip().splitlines()[-1])
    assert m["status"] == "oom" and m["error"].startswith("rank ")
    assert len(m["per_rank"]) == 2 and "oom" in {r["status"] for r in m["per_rank"]}
    rank = next(r for r in m["per_rank"] if r["status"] == "oom")
    assert rank["error"] == "out of memory at batch 20000 (phase: step)"


def _rank_processes() -> int:
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        count += b"fitbench.measure.dist_child" in cmdline
    return count


@pytest.mark.slow
@pytest.mark.torch
@needs_torch
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to find left-over ranks")
def test_a_hanging_job_times_out_and_leaves_no_rank_behind() -> None:
    """A job far longer than its timeout (a million steps in 10 s) is stopped with its ranks."""
    m = run_two("bert-base-imdb", "ddp", timeout_s=10, min_steps=10**6)
    assert m["status"] == "timeout" and "10 s" in m["error"]
    assert [r["status"] for r in m["per_rank"]] == ["missing", "missing"]
    deadline = time.monotonic() + 10
    while _rank_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _rank_processes() == 0


@pytest.mark.slow
@pytest.mark.paddle
@needs_paddle
def test_paddle_ddp_two_gloo_ranks() -> None:
    m = run_two("bert-base-imdb", "ddp", backend="paddle")
    check_ok(m, wrapper="fleet.distributed_model")
    assert m["distributed"]["launcher"] == "paddle.distributed.launch"
