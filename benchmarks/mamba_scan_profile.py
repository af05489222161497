"""Time one Mamba-2 layer of transformers' PyTorch scan on a GPU, kernel by kernel, beside the
bytes estimate/mamba_mixer.py counts for it.

The estimator times the scan as memory traffic (its counted bytes over the card's bandwidth).
This script measures what the installed transformers' layer (GraniteMoeHybridMambaLayer, no
mamba-ssm) takes on the local GPU for a prompt (no_grad) and for a training forward and
backward, groups the CUDA kernels by the aten operation that launched them, and prints the
bytes a second each phase moved by the estimator's count: the rate the broadcast products and
the reductions really reach.

    python benchmarks/mamba_scan_profile.py                      # Granite 4.0-H-Micro's sizes
    python benchmarks/mamba_scan_profile.py --seq 1024 4096 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fitbench.estimate import mamba_mixer
from fitbench.estimate.dtypes import ActivationDtypes
from linear_attention_counts import arch_of, mamba_config


def _timed(fn: Any, repeat: int = 3) -> tuple[float, dict[str, float]]:
    """Mean wall time of `fn` on the GPU, and CUDA time per aten op (the profiler's self time)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / repeat
    by_op: dict[str, float] = defaultdict(float)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    for event in prof.key_averages():
        us = getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0.0)
        if us:
            by_op[event.key] += us / 1e6
    return seconds, dict(by_op)


def measure(heads: int, head_dim: int, state: int, chunk: int, seq: int, batch: int) -> dict[str, Any]:
    import transformers
    from transformers.models.granitemoehybrid.modeling_granitemoehybrid import GraniteMoeHybridMambaLayer

    config = mamba_config(heads, head_dim, state, 1, chunk)
    arch = arch_of(config)
    layer = GraniteMoeHybridMambaLayer(config, 0).to("cuda", torch.bfloat16)
    x = torch.randn(batch, seq, config.hidden_size, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def prompt() -> None:
        with torch.no_grad():
            layer(x)

    def step() -> None:
        layer(x).float().sum().backward()

    torch.cuda.reset_peak_memory_stats()
    prompt_s, prompt_ops = _timed(prompt)
    prompt_peak = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step_s, step_ops = _timed(step)
    step_peak = torch.cuda.max_memory_allocated()
    release = transformers.__version__
    dt = ActivationDtypes(act=2, res=2, mask=0, amp=False)
    infer = mamba_mixer.mixer_kernel(arch, dt, batch, seq, decode=False, training=False, release=release)
    train = mamba_mixer.mixer_kernel(arch, dt, batch, seq, decode=False, training=True, release=release)
    tokens = batch * seq
    return {
        "shape": {
            "heads": heads,
            "head_dim": head_dim,
            "state": state,
            "chunk": chunk,
            "seq": seq,
            "batch": batch,
        },
        "transformers": release,
        "prompt_seconds": prompt_s,
        "step_seconds": step_s,
        "prompt_bytes_estimated": infer.bytes,
        "step_bytes_estimated": train.bytes + (train.backward_bytes or 0.0),
        "prompt_rate_tb_s": infer.bytes / prompt_s / 1e12,
        "step_rate_tb_s": (train.bytes + (train.backward_bytes or 0.0)) / step_s / 1e12,
        "prompt_peak_bytes": prompt_peak,
        "step_peak_bytes": step_peak,
        "prompt_transient_estimated": tokens
        * mamba_mixer.prefill_transient_bytes_per_token(arch, seq, release),
        "step_saved_estimated": tokens * mamba_mixer.saved_bytes_per_token(arch, seq, release),
        "step_transient_estimated": tokens
        * mamba_mixer.backward_transient_bytes_per_token(arch, seq, release),
        "prompt_ops": dict(sorted(prompt_ops.items(), key=lambda kv: -kv[1])[:15]),
        "step_ops": dict(sorted(step_ops.items(), key=lambda kv: -kv[1])[:25]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seq", type=int, nargs="+", default=[512, 2048])
    parser.add_argument(
        "--shape", type=int, nargs=4, default=[64, 64, 128, 256], metavar=("HEADS", "HEAD", "STATE", "CHUNK")
    )
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("mamba_scan_profile.py needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = [measure(*args.shape, seq, args.batch) for seq in args.seq]
    print(f"GPU {torch.cuda.get_device_name()}, transformers {rows[0]['transformers']}")
    print(
        f"{'seq':>6} {'prompt ms':>10} {'TB/s':>6} {'step ms':>9} {'TB/s':>6} "
        f"{'prompt peak GB':>15} {'step peak GB':>13}"
    )
    for r in rows:
        print(
            f"{r['shape']['seq']:6d} {1e3 * r['prompt_seconds']:10.2f} {r['prompt_rate_tb_s']:6.2f} "
            f"{1e3 * r['step_seconds']:9.2f} {r['step_rate_tb_s']:6.2f} {r['prompt_peak_bytes'] / 1e9:15.2f} "
            f"{r['step_peak_bytes'] / 1e9:13.2f}"
        )
        for phase in ("prompt_ops", "step_ops"):
            total = sum(r[phase].values())
            top = ", ".join(f"{k} {1e3 * v:.1f}" for k, v in list(r[phase].items())[:8])
            print(f"       {phase}: {1e3 * total:.1f} ms of kernels; {top}")
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
