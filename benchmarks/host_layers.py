"""What one more layer costs the host in an eager training step, by family, beside the estimate.

The estimator charges the host `host_seconds_per_op` for every framework operation a step issues
(half of it again for the operation's backward node), a figure fitted on host-bound ResNet-50 and
BERT-base steps (profiles.toml). A Hugging Face decoder's layer issues other operations than a
BERT layer: its RMSNorm is seven tensor-level calls (an upcast, pow, mean, add, rsqrt and two
products), its rotary embedding twelve (slices, a negation, a concatenation, products and sums),
where BERT's are module calls (nn.LayerNorm, nn.Dropout, the GELU module) with cuBLAS or cuDNN
setup behind them. This script measures, on the local device and with tiny sizes (the GPU keeps
up, only the host is timed):

  layers   per family and precision, the host issue time of one training step (forward,
           backward and the optimizer, issued by the torch backend's session exactly as
           `fitbench run` does) at two depths; the difference per layer, beside the estimator's
           operations per layer (transformer_cost's counts: forward operations, backward nodes at
           BACKWARD_HOST_SHARE, autocast casts at cast_host_share); their ratio in microseconds
           per counted operation, and that ratio over BERT-base's (the reference operation)
  parts    the pieces a decoder layer is made of, one call's forward and backward each, chained
           many times on one tensor and minus a short chain: transformers' RMSNorm, the rotary
           embedding on q and k, SwiGLU's activation and product, a residual add, and BERT's
           module calls (nn.LayerNorm, nn.Linear, nn.Dropout, GELU), in microseconds per counted
           operation the same way

    python benchmarks/host_layers.py --device cuda --out benchmarks/results/host-layers-h100-DATE.json
    python benchmarks/host_layers.py --device cpu --families bert-base-uncased llama-3.2-1b-instruct \\
        --steps 3 --out /tmp/host-layers-cpu.json        # a smoke test
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tiny_families  # benchmarks/ on the path: the bundled configs at tiny sizes
from accuracy import with_layers
from fitbench.backends import get_backend
from fitbench.backends.base import RunOptions
from fitbench.estimate import speed
from fitbench.estimate.profile import Profile, get_profile
from fitbench.workloads.workload import Workload

FAMILIES = (
    "bert-base-uncased",
    "llama-3.2-1b-instruct",
    "qwen2.5-0.5b-instruct",
    "qwen3-0.6b",
    "gemma-3-1b-it",
    "phi-3-mini-4k-instruct",
    "olmo-2-7b",
    "stablelm-2-1.6b",
    "gpt2",
)
PRECISIONS = ("bf16", "amp-bf16")
DEPTHS = (2, 10)
REFERENCE_FAMILY = "bert-base-uncased"
WARMUP = 3
BATCH, SEQ = 1, 16


def layer_units(w: Workload, profile: Profile, depths: tuple[int, int] = DEPTHS) -> tuple[float, float]:
    """(reference, tensor-level) host operations per layer of `w`'s training step as the
    estimator counts them: forward operations and backward nodes (BACKWARD_HOST_SHARE), autocast
    casts at cast_host_share; the tensor-level calls (Kernel.tensor_ops) apart, at a full
    operation each."""

    def units(layers: int, share: float) -> float:
        p = dataclasses.replace(profile, tensor_op_host_share=share)
        ks = speed.training_kernels(with_layers(w, layers), p)
        return sum(
            (k.ops + k.tensor_ops * (share - 1.0) + k.cast_ops * p.cast_host_share) * k.count for k in ks
        )

    span = depths[1] - depths[0]
    reference = (units(depths[1], 0.0) - units(depths[0], 0.0)) / span
    every = (units(depths[1], 1.0) - units(depths[0], 1.0)) / span
    return reference, every - reference


def issue_seconds(w: Workload, device: str, steps: int) -> float:
    """Median host seconds to issue one training step of `w` (synchronised before, not inside)."""
    from fitbench.backends.torch.host_probe import device_sync

    sync = device_sync(device)
    session = get_backend("torch").open(w, RunOptions(device=device))
    try:
        for _ in range(WARMUP):
            session.step()
        times = []
        for _ in range(steps):
            sync()
            t0 = time.perf_counter()
            session.step()
            times.append(time.perf_counter() - t0)
        sync()
    finally:
        session.close()
    return statistics.median(times)


def family_workload(name: str, precision: str, layers: int) -> Workload:
    w = tiny_families.tiny_workload(
        name, mode="train", precision=precision, batch_size=BATCH, seq_len=SEQ, optimizer="adamw"
    )
    return with_layers(w, layers)


def measure_layers(families: list[str], device: str, steps: int) -> list[dict[str, Any]]:
    profile = get_profile("torch", "default", use_user=False)
    rows = []
    for name in families:
        for precision in PRECISIONS:
            shallow, deep = (family_workload(name, precision, d) for d in DEPTHS)
            t = [issue_seconds(w, device, steps) for w in (shallow, deep)]
            per_layer = (t[1] - t[0]) / (DEPTHS[1] - DEPTHS[0])
            reference, tensor = layer_units(shallow, profile)
            units = reference + tensor
            rows.append(
                {
                    "family": name,
                    "model_type": deep.arch.model_type,
                    "precision": precision,
                    "issue_seconds": dict(zip(map(str, DEPTHS), t, strict=True)),
                    "seconds_per_layer": per_layer,
                    "units_per_layer": units,
                    "reference_units_per_layer": reference,
                    "tensor_units_per_layer": tensor,
                    "seconds_per_unit": per_layer / units,
                }
            )
            print(
                f"{name:28} {precision:9} {1e6 * per_layer:8.1f} us/layer  {units:6.1f} ops  "
                f"{1e6 * per_layer / units:6.2f} us/op",
                flush=True,
            )
    return rows


# part -> the forward operations the estimator counts for one call (transformer_cost: an RMSNorm
# is seven passes, the rotary embedding twelve over q and k, SwiGLU two, a LayerNorm one).
PART_OPS = {
    "rmsnorm": 7.0,
    "rotary q,k": 12.0,
    "swiglu act*up": 2.0,
    "residual add": 1.0,
    "view, transpose x2, reshape": 4.0,
    "sdpa causal": 1.0,
    "nn.Linear no bias": 1.0,
    "nn.LayerNorm": 1.0,
    "nn.Linear": 1.0,
    "nn.Dropout": 1.0,
    "gelu module": 1.0,
}


def _parts(device: str, amp: bool) -> tuple[dict[str, tuple[Callable[..., Any], int]], tuple[int, int, int]]:
    """({part: (one call on `arity` tensors returning as many of the same shapes, arity)},
    (hidden size, heads, head size) of the tensors)."""
    import torch
    import torch.nn.functional as F
    from torch import nn
    from transformers.activations import ACT2FN
    from transformers.models.llama.modeling_llama import LlamaRMSNorm, apply_rotary_pos_emb

    dtype = torch.float32 if amp else torch.bfloat16
    h, heads, d = 64, 4, 16
    with torch.device(device):
        norm = LlamaRMSNorm(h).to(dtype)
        ln, lin = nn.LayerNorm(h).to(dtype), nn.Linear(h, h).to(dtype)
        proj = nn.Linear(h, h, bias=False).to(dtype)
        drop, gelu = nn.Dropout(0.1), ACT2FN["gelu"]
        cos = torch.randn(1, SEQ, d, dtype=dtype)
        sin = torch.randn(1, SEQ, d, dtype=dtype)
    silu = ACT2FN["silu"]
    return {
        "rmsnorm": (lambda x: (norm(x),), 1),
        "rotary q,k": (lambda q, k: apply_rotary_pos_emb(q, k, cos, sin), 2),
        "swiglu act*up": (lambda x: (silu(x) * x,), 1),
        "residual add": (lambda x: (x + x,), 1),
        "view, transpose x2, reshape": (
            lambda x: (x.view(1, SEQ, heads, d).transpose(1, 2).transpose(1, 2).reshape(1, SEQ, h),),
            1,
        ),
        "sdpa causal": (lambda q, k: (F.scaled_dot_product_attention(q, k, k, is_causal=True), k), 2),
        "nn.Linear no bias": (lambda x: (proj(x),), 1),
        "nn.LayerNorm": (lambda x: (ln(x),), 1),
        "nn.Linear": (lambda x: (lin(x),), 1),
        "nn.Dropout": (lambda x: (drop(x),), 1),
        "gelu module": (lambda x: (gelu(x),), 1),
    }, (h, heads, d)


def measure_parts(device: str, *, calls: int, repeats: int) -> list[dict[str, Any]]:
    """Host seconds of one call's forward and backward per part: a chain of `long` calls on one
    tensor and its backward, minus a chain of `short`, over the difference."""
    import torch

    from fitbench.backends.torch.host_probe import device_sync, host_seconds

    sync = device_sync(device)
    short, long = 4, 24
    rows = []
    for amp in (False, True):
        parts, (h, heads, d) = _parts(device, amp)
        dtype = torch.float32 if amp else torch.bfloat16
        for name, (fn, arity) in parts.items():
            shapes = [(1, heads, SEQ, d)] * 2 if arity == 2 else [(1, SEQ, h)]
            leaves = [torch.randn(s, device=device, dtype=dtype, requires_grad=True) for s in shapes]

            def chain(
                n: int, fn: Callable[..., Any] = fn, leaves: list[Any] = leaves, amp: bool = amp
            ) -> Callable[[], None]:
                def run() -> None:
                    with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=amp):
                        xs = tuple(leaves)
                        for _ in range(n):
                            xs = tuple(fn(*xs))
                        total = sum(x.float().sum() for x in xs)
                    total.backward()

                return run

            t_short, t_long = (
                host_seconds(chain(n), sync, calls=calls, repeats=repeats) for n in (short, long)
            )
            per_call = (t_long - t_short) / (long - short)
            rows.append(
                {
                    "part": name,
                    "precision": "amp-bf16" if amp else "bf16",
                    "seconds_per_call": per_call,
                    "counted_ops": PART_OPS[name],
                    "seconds_per_unit": per_call / (PART_OPS[name] * (1 + speed.BACKWARD_HOST_SHARE)),
                }
            )
            print(
                f"{name:28} {rows[-1]['precision']:9} {1e6 * per_call:8.2f} us/call  "
                f"{1e6 * rows[-1]['seconds_per_unit']:6.2f} us/op",
                flush=True,
            )
    return rows


def reference_seconds(result: dict[str, Any]) -> dict[str, float]:
    """Host seconds per reference operation on the measuring host, by precision: BERT-base's layer
    (the kind of operation host_seconds_per_op was fitted on) over its counted operations."""
    return {
        r["precision"]: r["seconds_per_layer"] / r["units_per_layer"]
        for r in result["layers"]
        if r["family"] == REFERENCE_FAMILY
    }


def implied_share(row: dict[str, Any], reference: float) -> float | None:
    """The tensor_op_host_share that makes the estimate of `row`'s layer its measured host time
    at `reference` seconds per operation: (measured / reference - reference units) / tensor units;
    None for a layer without tensor-level calls."""
    if row["tensor_units_per_layer"] <= 0:
        return None
    measured_units = row["seconds_per_layer"] / reference
    return (measured_units - row["reference_units_per_layer"]) / row["tensor_units_per_layer"]


def summarise(result: dict[str, Any]) -> float | None:
    """Print each layer's and part's microseconds per counted operation over BERT-base's at the
    same precision, and each decoder layer's implied tensor_op_host_share; return their median."""
    ref = reference_seconds(result)
    if not ref:
        print(f"no {REFERENCE_FAMILY} rows: no reference operation to compare with")
        return None
    heads = f"{'us/op':>7} {'/ BERT':>7} {'ref ops':>7} {'tensor':>7} {'share':>6}"
    print(f"\n{'family':28} {'precision':9} {heads}")
    shares = []
    for r in result["layers"]:
        base = ref.get(r["precision"]) or next(iter(ref.values()))
        share = implied_share(r, base)
        if share is not None:
            shares.append(share)
        us = 1e6 * r["seconds_per_unit"]
        cells = f"{r['reference_units_per_layer']:7.1f} {r['tensor_units_per_layer']:7.1f}"
        shown = "     -" if share is None else f"{share:6.2f}"
        print(f"{r['family']:28} {r['precision']:9} {us:7.2f} {us / (1e6 * base):7.2f} {cells} {shown}")
    print(f"\n{'part':28} {'precision':9} {'us/op':>7} {'/ BERT':>7}")
    for r in result["parts"]:
        base = ref.get(r["precision"]) or next(iter(ref.values()))
        us = 1e6 * r["seconds_per_unit"]
        print(f"{r['part']:28} {r['precision']:9} {us:7.2f} {us / (1e6 * base):7.2f}")
    if not shares:
        return None
    median = statistics.median(shares)
    print(f"\ntensor_op_host_share: median {median:.3f} over {len(shares)} decoder layers")
    return median


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), help="bundled model names")
    parser.add_argument("--steps", type=int, default=15, help="timed steps per depth (default 15)")
    parser.add_argument("--calls", type=int, default=20, help="chains per timed loop of a part (default 20)")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per part (default 5)")
    parser.add_argument("--out", type=Path, help="the JSON file to write")
    parser.add_argument("--share", type=Path, help="read a stored result and print the shares it implies")
    args = parser.parse_args(argv)
    if args.share:
        return 0 if summarise(json.loads(args.share.read_text())) is not None else 1
    if args.out is None:
        parser.error("--out is required to measure")

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA device: pass --device cpu")
    if args.device == "cpu":
        torch.set_num_threads(1)  # time issuing the calls, not the thread pool's waits
    from fitbench.backends.torch.host_probe import probe

    started = time.time()
    result: dict[str, Any] = {
        "benchmark": "host_layers",
        "device": args.device,
        "device_name": torch.cuda.get_device_name()
        if args.device.startswith("cuda")
        else platform.processor(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "batch_size": BATCH,
        "seq_len": SEQ,
        "depths": list(DEPTHS),
        "host_probe_round_seconds": sum(probe(args.device).values()),
        "host_seconds_per_op": get_profile("torch", "default", use_user=False).host_seconds_per_op,
        "layers": measure_layers(args.families, args.device, args.steps),
        "parts": measure_parts(args.device, calls=args.calls, repeats=args.repeats),
    }
    result["tensor_op_host_share"] = summarise(result)
    result["elapsed_seconds"] = time.time() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"\nwritten {args.out} ({result['elapsed_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
