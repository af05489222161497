"""Memory and decode speed of architectures read from config.json, measured against the estimate.

Each case is a config.json-equivalent (random weights, nothing downloaded) that `fitbench run`
builds in a fresh child process through its normal machinery; the script records the peak
memory (NVML process peak and the allocator's reserved peak) and the decode tokens/s next to
`fitbench estimate` for the local GPU, prints a table and writes --out JSON. CASES is a list:
other weight layouts (pre-quantized paths) are added as entries of their own.

    PYTHONPATH=src python benchmarks/models_gpu.py --out benchmarks/results/models-h200.json
    PYTHONPATH=src python benchmarks/models_gpu.py --cpu-tiny --out /tmp/models-cpu.json
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
from fitbench.results.agreement import measured_speed, relative_error
from fitbench.results.table import render_table
from fitbench.workloads.hf_config import workload_from_data

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
        {"precision": "bf16", "batch_size": 8, "prompt_tokens": 512, "new_tokens": 128},
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
        {"precision": "bf16", "batch_size": 4, "prompt_tokens": 256, "new_tokens": 128},
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
        {"precision": "bf16", "batch_size": 4, "prompt_tokens": 2048, "new_tokens": 256},
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


def run_case(
    label: str,
    config: dict[str, Any],
    overrides: dict[str, Any],
    *,
    device: str,
    gpu_id: str | None,
    cpu_tiny: bool,
) -> dict[str, Any]:
    if cpu_tiny:
        config = tiny(config)
        overrides = dict(overrides, precision="fp32", batch_size=2, prompt_tokens=16, new_tokens=8)
    workload = workload_from_data(config, name=label.split()[1], source=label, **overrides)
    t0 = time.perf_counter()
    m = measure(
        workload, "torch", RunOptions(device=device), min_seconds=0.2 if cpu_tiny else 2.0, timeout_s=150.0
    )
    point: dict[str, Any] = {
        "label": label,
        "workload": workload.to_dict(),
        "measurement": m,
        "wall_seconds": time.perf_counter() - t0,
    }
    if gpu_id is not None:
        est = estimate(workload, get_gpu(gpu_id))
        _, tokens = measured_speed(m, workload)
        point["estimate"] = est.to_dict()
        point["errors"] = {
            "peak_vs_nvml": relative_error(est.peak_memory_bytes, m.get("nvml_process_peak_bytes")),
            "peak_vs_reserved": relative_error(
                est.peak_memory_bytes - est.breakdown["cuda_context"], m.get("peak_reserved_bytes")
            ),
            "decode_speed": relative_error(est.tokens_per_second, tokens),
        }
    return point


def gib(value: Any) -> str:
    return f"{value / 2**30:.2f} GiB" if isinstance(value, int | float) else "-"


def pct(value: Any) -> str:
    return f"{value * 100:+.1f}%" if isinstance(value, int | float) else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    parser.add_argument("--gpu", help="catalog id of the local GPU (default: detected)")
    parser.add_argument("--cpu-tiny", action="store_true", help="tiny variants on the CPU, no estimate")
    args = parser.parse_args(argv)
    device = "cpu" if args.cpu_tiny else "cuda"
    gpu_id = None if args.cpu_tiny else local_gpu_id(args.gpu)
    points = [
        run_case(label, config, overrides, device=device, gpu_id=gpu_id, cpu_tiny=args.cpu_tiny)
        for label, config, overrides in CASES
    ]
    rows = []
    for p in points:
        m, e, err = p["measurement"], p.get("estimate", {}), p.get("errors", {})
        rows.append(
            [
                p["label"],
                m.get("status", "?"),
                gib(e.get("peak_memory_bytes")),
                gib(m.get("nvml_process_peak_bytes")),
                pct(err.get("peak_vs_nvml")),
                gib(m.get("peak_reserved_bytes")),
                pct(err.get("peak_vs_reserved")),
                f"{e['tokens_per_second']:.1f}" if e.get("tokens_per_second") else "-",
                f"{m['decode_tokens_per_second']:.1f}" if m.get("decode_tokens_per_second") else "-",
                pct(err.get("decode_speed")),
            ]
        )
    print(
        render_table(
            [
                "case",
                "status",
                "est peak",
                "NVML peak",
                "err",
                "reserved",
                "err",
                "est tok/s",
                "tok/s",
                "err",
            ],
            rows,
            align="llrrrrrrrr",
        )
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"gpu": gpu_id, "device": device, "points": points}, indent=1, default=str)
    )
    print(f"\nwritten {args.out}")
    return 0 if all(p["measurement"].get("status") == "ok" for p in points) else 1


if __name__ == "__main__":
    raise SystemExit(main())
