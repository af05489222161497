"""Memory and decode speed of architectures read from config.json, measured against the estimate.

Each case is a config.json-equivalent (random weights, nothing downloaded) that `fitbench run`
builds in a fresh child process through its normal machinery; the script records the peak
memory (NVML process peak and the allocator's reserved peak) and the decode speed next to
`fitbench estimate` for the local GPU, prints a table and writes --out JSON. CASES is a list:
other weight layouts (pre-quantized paths) are added as entries of their own.

Decode speed is batch / decode_step_seconds (one decode step by differencing whole generate
calls, (t(n) - t(1)) / (n - 1), what the estimate's step predicts), or the child's
decode_tokens_per_second where an older record has no step. Eager `generate` is host-bound and
its step time differs between processes by up to ~1.5x on one machine, so `--repeat N` measures
each case in N fresh processes and scores the median run, printing the spread (max / min - 1).
`--rescore FILE [FILE ...]` scores stored results (several files of the same cases count as
repeats) against this checkout's estimator, offline.

    PYTHONPATH=src python benchmarks/models_gpu.py --repeat 3 --out benchmarks/results/models-h200.json
    PYTHONPATH=src python benchmarks/models_gpu.py --cpu-tiny --repeat 2 --out /tmp/models-cpu.json
    PYTHONPATH=src python benchmarks/models_gpu.py --rescore benchmarks/results/models-h200-*.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import local_gpu_id
from fitbench.backends.base import RunOptions
from fitbench.catalog import get_gpu
from fitbench.estimate.api import estimate
from fitbench.measure.runner import measure
from fitbench.results.agreement import estimate_for_host, measured_speed, relative_error
from fitbench.results.table import render_table
from fitbench.workloads.hf_config import workload_from_data
from fitbench.workloads.workload import Workload

# (label, config.json fields, overrides). Sizes keep each case well under a minute on an H200.
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "gqa qwen2.5-1.5b",
        {
            "model_type": "qwen2",
            "hidden_size": 1536,
            "num_hidden_layers": 28,
            "num_attention_heads": 12,
            "num_key_value_heads": 2,
            "intermediate_size": 8960,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
            "max_position_embeddings": 32768,
        },
        {"precision": "bf16", "batch_size": 8, "prompt_tokens": 512, "new_tokens": 64},
    ),
    (
        "moe mixtral 8x(1/4 width)",
        {
            "model_type": "mixtral",
            "hidden_size": 2048,
            "num_hidden_layers": 16,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "intermediate_size": 5632,
            "vocab_size": 32000,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "max_position_embeddings": 32768,
        },
        {"precision": "bf16", "batch_size": 4, "prompt_tokens": 256, "new_tokens": 64},
    ),
    (
        "sliding mistral w=1024",
        {
            "model_type": "mistral",
            "hidden_size": 2048,
            "num_hidden_layers": 16,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "intermediate_size": 5632,
            "vocab_size": 32000,
            "sliding_window": 1024,
            "max_position_embeddings": 32768,
        },
        {"precision": "bf16", "batch_size": 4, "prompt_tokens": 2048, "new_tokens": 64},
    ),
]


def tiny(config: dict[str, Any]) -> dict[str, Any]:
    """The same family at a size a CPU runs in seconds."""
    small = dict(
        config,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        vocab_size=512,
    )
    if "sliding_window" in small:
        small["sliding_window"] = 8
    return small


def decode_tokens_per_second(m: dict[str, Any], workload: Workload) -> float | None:
    """Decode tok/s of a measurement: batch / decode_step_seconds where the record has the
    differenced step, else the child's decode_tokens_per_second (older records)."""
    return measured_speed(m, workload)[1]


def median_run(runs: list[dict[str, Any]], workload: Workload) -> tuple[dict[str, Any], list[float]]:
    """The run whose decode speed is the median (the lower middle for an even count: a real run,
    so its memory and speed figures belong together) and every run's decode tok/s."""
    speeds = [decode_tokens_per_second(m, workload) for m in runs]
    ranked = sorted((s, i) for i, s in enumerate(speeds) if s is not None)
    if not ranked:
        return runs[0], []
    return runs[ranked[(len(ranked) - 1) // 2][1]], [s for s, _ in ranked]


def score(point: dict[str, Any], gpu_id: str) -> dict[str, Any]:
    """Estimate and errors of a point (workload + runs) with this checkout's estimator."""
    workload = Workload.from_dict(point["workload"])
    m, speeds = median_run(point["runs"], workload)
    est = estimate(workload, get_gpu(gpu_id))
    tokens = decode_tokens_per_second(m, workload)
    return dict(
        point,
        measurement=m,
        decode_tokens_per_second_runs=speeds,
        decode_spread=(max(speeds) / min(speeds) - 1) if len(speeds) > 1 else None,
        estimate=est.to_dict(),
        errors={
            "peak_vs_nvml": relative_error(est.peak_memory_bytes, m.get("nvml_process_peak_bytes")),
            "peak_vs_reserved": relative_error(
                est.peak_memory_bytes - est.breakdown["cuda_context"], m.get("peak_reserved_bytes")
            ),
            "decode_speed": relative_error(est.tokens_per_second, tokens),
            # the estimate for the host (its probe round) and transformers release the run had
            "decode_speed_own_host": relative_error(
                estimate_for_host(workload, get_gpu(gpu_id), m, reference=est).estimate.tokens_per_second,
                tokens,
            ),
        },
    )


def run_case(
    label: str,
    config: dict[str, Any],
    overrides: dict[str, Any],
    *,
    device: str,
    gpu_id: str | None,
    cpu_tiny: bool,
    repeat: int,
) -> dict[str, Any]:
    if cpu_tiny:
        config = tiny(config)
        overrides = dict(overrides, precision="fp32", batch_size=2, prompt_tokens=16, new_tokens=8)
    workload = workload_from_data(config, name=label.split()[1], source=label, **overrides)
    t0 = time.perf_counter()
    runs = [
        measure(
            workload,
            "torch",
            RunOptions(device=device),
            min_seconds=0.2 if cpu_tiny else 1.0,
            timeout_s=150.0,
        )
        for _ in range(repeat)
    ]
    point: dict[str, Any] = {
        "label": label,
        "workload": workload.to_dict(),
        "runs": runs,
        "wall_seconds": time.perf_counter() - t0,
    }
    if gpu_id is not None:
        return score(point, gpu_id)
    m, speeds = median_run(runs, workload)
    return dict(point, measurement=m, decode_tokens_per_second_runs=speeds)


def rescore(paths: list[Path]) -> dict[str, Any]:
    """Stored results scored with this checkout's estimator: the runs of a case (same label and
    workload) across all files pooled, as if measured with --repeat."""
    by_label: dict[str, dict[str, Any]] = {}
    gpu_id = None
    for path in paths:
        data = json.loads(path.read_text())
        gpu_id = gpu_id or data["gpu"]
        for p in data["points"]:
            runs = p.get("runs") or [p["measurement"]]
            entry = by_label.setdefault(p["label"], {"label": p["label"], "workload": p["workload"]})
            entry.setdefault("runs", []).extend(runs)
    if gpu_id is None:
        raise SystemExit("no GPU in the result files: they are CPU runs")
    points = [score(p, gpu_id) for p in by_label.values()]
    return {"gpu": gpu_id, "device": "cuda", "rescored": [str(p) for p in paths], "points": points}


def gib(value: Any) -> str:
    return f"{value / 2**30:.2f} GiB" if isinstance(value, int | float) else "-"


def pct(value: Any) -> str:
    return f"{value * 100:+.1f}%" if isinstance(value, int | float) else "-"


def spread(p: dict[str, Any]) -> str:
    speeds = p.get("decode_tokens_per_second_runs") or []
    if len(speeds) < 2:
        return "-"
    return f"{min(speeds):.0f}-{max(speeds):.0f} ({max(speeds) / min(speeds) - 1:+.0%})"


def print_table(points: list[dict[str, Any]]) -> None:
    rows = []
    for p in points:
        m, e, err = p["measurement"], p.get("estimate", {}), p.get("errors", {})
        tokens = decode_tokens_per_second(m, Workload.from_dict(p["workload"]))
        rows.append(
            [
                p["label"],
                m.get("status", "?"),
                str(len(p.get("runs") or [m])),
                gib(e.get("peak_memory_bytes")),
                gib(m.get("nvml_process_peak_bytes")),
                pct(err.get("peak_vs_nvml")),
                gib(m.get("peak_reserved_bytes")),
                pct(err.get("peak_vs_reserved")),
                f"{e['tokens_per_second']:.1f}" if e.get("tokens_per_second") else "-",
                f"{tokens:.1f}" if tokens else "-",
                pct(err.get("decode_speed")),
                pct(err.get("decode_speed_own_host")),
                spread(p),
            ]
        )
    headers = ["case", "status", "runs", "est peak", "NVML peak", "err", "reserved", "err"]
    headers += ["est tok/s", "tok/s", "err", "own host", "runs' tok/s"]
    print(render_table(headers, rows, align="lllrrrrrrrrrr"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="where to write the JSON result")
    parser.add_argument("--gpu", help="catalog id of the local GPU (default: detected)")
    parser.add_argument("--cpu-tiny", action="store_true", help="tiny variants on the CPU, no estimate")
    parser.add_argument("--repeat", type=int, default=1, help="fresh processes per case (median scored)")
    parser.add_argument("--rescore", type=Path, nargs="+", metavar="FILE", help="score stored results")
    args = parser.parse_args(argv)
    if args.rescore:
        result = rescore(args.rescore)
        print_table(result["points"])
        if args.out:
            args.out.write_text(json.dumps(result, indent=1, default=str))
        return 0
    if args.out is None:
        parser.error("--out is required when measuring")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    device = "cpu" if args.cpu_tiny else "cuda"
    gpu_id = None if args.cpu_tiny else local_gpu_id(args.gpu)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    points = []
    for label, config, overrides in CASES:
        points.append(
            run_case(
                label,
                config,
                overrides,
                device=device,
                gpu_id=gpu_id,
                cpu_tiny=args.cpu_tiny,
                repeat=args.repeat,
            )
        )
        # written after every case: a run cut short by a time limit keeps the cases it finished
        args.out.write_text(
            json.dumps({"gpu": gpu_id, "device": device, "points": points}, indent=1, default=str)
        )
    print_table(points)
    print(f"\nwritten {args.out}")
    return 0 if all(m.get("status") == "ok" for p in points for m in p["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
