"""What is alive at a training step's allocated peak: the caching allocator's trace of one step.

The estimator states a step's peak as parts (weights, gradients, optimizer state, activations,
temporaries; estimate/single_device.py). Where its total reads high or low, the question is which
tensors were alive at the measured peak. This script builds the session as `fitbench run` does,
warms it up, records the allocator's history (torch.cuda.memory._record_memory_history) over one
more step, replays the trace's allocations and frees to find the allocated peak, and prints the
blocks alive there, largest first, each with the innermost Python frames that allocated it:

    python benchmarks/peak_blocks.py --holdout "qwen3-0.6b mode=train precision=bf16" --out r.json

Blocks allocated before the recorded step (weights, optimizer state, gradients kept between
steps) are summed as `before_step_bytes`, not listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _frames(event: dict[str, Any], depth: int = 4) -> str:
    """The innermost Python frames of an allocation, outside torch's own modules."""
    names = [
        f"{Path(f['filename']).name}:{f['line']} {f['name']}"
        for f in event.get("frames", [])
        if "/torch/" not in f["filename"] and f["filename"].endswith(".py")
    ]
    return " < ".join(names[:depth])


def peak_blocks(trace: list[dict[str, Any]], top: int = 25) -> dict[str, Any]:
    """Replay one device's trace: the allocated peak and the blocks alive there."""
    live: dict[int, dict[str, Any]] = {}
    total = peak = 0
    at_peak: list[dict[str, Any]] = []
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e
            total += e["size"]
            if total > peak:
                peak = total
                at_peak = list(live.values())
        elif e["action"] == "free_requested" and e["addr"] in live:
            # the tensor is dead here; free_completed follows once its stream's work is done
            total -= live.pop(e["addr"])["size"]
    blocks = sorted(at_peak, key=lambda b: -b["size"])
    return {
        "step_peak_bytes": peak,
        "blocks": [{"bytes": b["size"], "frames": _frames(b)} for b in blocks[:top]],
        "blocks_alive": len(blocks),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holdout", required=True, metavar="TEXT", help="a point of accuracy.py's sets")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("peak_blocks.py reads the CUDA caching allocator's trace: it needs a CUDA GPU")
    from allocator_phases import _point
    from fitbench.backends import get_backend
    from fitbench.backends.base import RunOptions

    workload = _point(args.holdout)
    backend = get_backend("torch")
    backend.device_info("cuda")
    session = backend.open(workload, RunOptions(device="cuda"))
    for _ in range(2):
        session.step()
    session.sync()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    session.step()
    session.sync()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    trace = snapshot["device_traces"][torch.cuda.current_device()]
    result = {
        "label": args.holdout,
        "workload": workload.to_dict(),
        "before_step_bytes": before,
        "max_allocated_bytes": torch.cuda.max_memory_allocated(),
        **peak_blocks(trace, args.top),
    }
    peak = result["max_allocated_bytes"] / 2**30
    print(f"{args.holdout}: allocated before the step {before / 2**30:.2f} GiB, peak {peak:.2f} GiB")
    for b in result["blocks"]:
        print(f"  {b['bytes'] / 2**20:9.1f} MiB  {b['frames']}")
    if args.out:
        rows = json.loads(args.out.read_text()) if args.out.exists() else []
        rows.append(result)
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
