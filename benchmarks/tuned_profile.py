"""Where a tuned training step's GPU time goes: kernel classes, launches, and each convolution pass.

The tuned estimate of a training step (estimate/profiles.toml [torch.tuned]) counts the kernels
of the eager step that one CUDA graph replays: each convolution pass at a share of the peak plus a
fixed time per launch, each memory-bound kernel at the streaming rate plus its own fixed time.
Stored H200 data fits the convolution terms on eager ResNet-50 steps at 128 and 224 px; this
script measures what the tuned step really runs, so the terms can be checked where they matter
most (ResNet-50 at 32 px, ~620 launches a step) and BERT's missing time can be placed:

1. `step`: for each workload, the tuned session exactly as `fitbench run --exec tuned` opens it,
   timed over replays, then the torch profiler over a few replays: kernel time and launches a
   step by class (conv, gemm, attention, batchnorm, layernorm, elementwise, reduce, copy,
   optimizer, other; a ResNet's 1x1 convolutions may run as cuBLAS GEMMs, so its convolutions
   are conv + gemm), the kernels' sum against the step (the rest is the gaps between kernels),
   and a histogram of kernel durations. Beside it, today's estimate of the step with
   its compute / memory / floor split and launch count.
2. `convs`: every distinct convolution of ResNet-50 at the chosen image size and batch, in bf16
   channels-last with cudnn.benchmark (what tuned runs), forward, data gradient and weight
   gradient each timed alone inside a CUDA graph of repeats; a least-squares fit of
   time = FLOPs / (share x peak) + fixed over all passes, against profiles.toml's 0.49 and 8.5 us.

    python benchmarks/tuned_profile.py --out benchmarks/results/tuned-profile-h200-DATE.json
    python benchmarks/tuned_profile.py --device cpu --tiny --out /tmp/tuned-profile.json  # smoke test

The step is opened with `fitbench run --exec tuned`'s compile default: on a CUDA GPU with Triton
it is compiled (torch.compile, inductor) before capture, 30-45 s a workload; `--no-compile`
profiles the uncompiled step's eager kernels instead (each row's `compiled_step` says which ran).

On an H200 the whole script takes about 1-2 minutes (two session captures, ~40 convolution
shapes), plus the compiles. --only step|convs runs one part; --workload NAME[:PRECISION]
(repeatable) picks the step workloads (default: resnet50-cifar10 and bert-base-imdb:amp-bf16).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import conv_layout  # benchmarks/ on the path: the kernel-name matcher
import graph_timing  # benchmarks/ on the path: the CUDA-graph timer

# Kernel classes by name fragment, first match wins (lower-case names).
CLASSES = (
    ("optimizer", ("adam", "fused_sgd", "multi_tensor_apply")),
    ("attention", ("flash", "fmha", "sdpa", "attention", "cudnn_generated_fort_native_sdpa")),
    ("batchnorm", ("batch_norm", "bn_fw", "bn_bw", "bn_")),
    ("layernorm", ("layer_norm", "layernorm", "gammabeta")),
    ("conv", ("conv", "xmma", "implicit_gemm", "wgrad", "dgrad", "fprop", "cutlass__5x_cudnn")),
    ("gemm", ("gemm", "nvjet", "cutlass", "cublas", "sm90_", "sm80_", "ampere_", "splitk")),
    ("reduce", ("reduce_kernel", "reduce", "sum")),
    ("copy", ("copy", "cast", "to_copy")),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "pointwise", "clamp", "threshold", "dropout")),
)
DEFAULT_WORKLOADS = ("resnet50-cifar10", "bert-base-imdb:amp-bf16")
BINS_US = (2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def kernel_class(name: str) -> str:
    """The class of a kernel by this script's table (conv_layout's matcher, its own classes)."""
    return conv_layout.kernel_class(name, CLASSES)


def histogram(durations_us: list[float]) -> dict[str, int]:
    """Kernel durations by bin (upper edges BINS_US, then the rest)."""
    out: dict[str, int] = {}
    lo = 0.0
    for hi in BINS_US:
        out[f"{lo:g}-{hi:g}us"] = sum(lo <= d < hi for d in durations_us)
        lo = hi
    out[f">={lo:g}us"] = sum(d >= lo for d in durations_us)
    return out


def _estimate(workload: Any, gpu_id: str | None) -> dict[str, Any] | None:
    """Today's tuned estimate of the step (None without a catalog card)."""
    if gpu_id is None:
        return None
    from fitbench.catalog import get_gpu
    from fitbench.estimate import speed
    from fitbench.estimate.execution import workload_as_run
    from fitbench.estimate.profile import get_profile

    gpu, profile = get_gpu(gpu_id), get_profile("torch", "tuned", use_user=False)
    w = workload_as_run(workload, "tuned", gpu)
    kernels = speed.training_kernels(w, profile)
    t = speed.time_kernels(kernels, w, gpu, profile, host_seconds_per_op=0.0)
    return {
        "gpu": gpu_id,
        "precision": w.precision,
        "step_seconds": t.seconds,
        "compute_seconds": t.compute_seconds,
        "memory_seconds": t.memory_seconds,
        "floor_seconds": t.floor_seconds,
        "launches": speed.kernel_launches(kernels),
    }


def profile_step(
    spec: str, *, device: str, tiny: bool, steps: int, gpu_id: str | None, compile_step: bool | None = None
) -> dict[str, Any]:
    """One tuned training workload: step time, kernel classes a step, the estimate beside it
    (`compile_step` as RunOptions takes it: None compiles where inductor can)."""
    from fitbench.backends.base import RunOptions
    from fitbench.workloads.presets import get_workload

    name, _, precision = spec.partition(":")
    workload = get_workload(name, tiny=tiny, precision=precision or None)
    options = RunOptions(device=device, exec_mode="tuned", compile_step=compile_step)
    return profile_workload(workload, options, label=spec, steps=steps, gpu_id=gpu_id)


def profile_workload(
    workload: Any, options: Any, *, label: str, steps: int, gpu_id: str | None
) -> dict[str, Any]:
    """profile_step for any workload and RunOptions (benchmarks/compiled_step.py: --compile)."""
    from torch.profiler import ProfilerActivity, profile

    from fitbench.backends import get_backend

    device = options.device
    backend = get_backend("torch")
    backend.device_info(device)
    session = backend.open(workload, options)
    try:
        for _ in range(5):
            session.step()
        session.sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            session.step()
        session.sync()
        step_seconds = (time.perf_counter() - t0) / steps
        cuda = device.startswith("cuda")
        profiled = max(1, min(steps, 5))
        activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]

        def kernels_of(step: Any) -> list[tuple[str, float]]:
            """(name, microseconds) of every kernel in `profiled` steps (on the CPU: top-level ops).
            On CUDA only device activity is recorded, so every averaged key is a kernel, a memcpy
            or a memset (as conv_layout.py and decode_attention.py read them on the H200); each
            contributes its count of entries at its mean duration."""
            with profile(activities=activities) as prof:
                for _ in range(profiled):
                    step()
                session.sync()
            if not cuda:
                return [(e.name, e.cpu_time_total) for e in prof.events() if e.cpu_parent is None]
            out: list[tuple[str, float]] = []
            for e in prof.key_averages():
                us = getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0.0)) or 0.0
                if us > 0 and e.count:
                    out += [(e.key, us / e.count)] * e.count
            return out

        kernels = kernels_of(session.step)
        profiled_what = "graph replays" if session.notes.get("cuda_graph") else "eager steps"
        if cuda and len(kernels) < 10 * profiled and hasattr(session, "_eager_step"):
            # The profiler saw no kernels inside the graph: the same kernels, launched eagerly.
            kernels = kernels_of(session._eager_step)
            profiled_what = "eager steps of the captured body (the profiler saw no kernels in the graph)"
        notes = session.notes
        # The graph's output after every replay above (the loss when training): a sanity figure
        # for two variants of one step (compiled or not) started from the same seed and batch.
        out = getattr(session, "static_out", None)
        last_output = float(out.float().mean()) if out is not None else None
    finally:
        session.close()
    by_class: dict[str, dict[str, float]] = {}
    for kname, us in kernels:
        c = by_class.setdefault(kernel_class(kname), {"seconds": 0.0, "launches": 0.0})
        c["seconds"] += us * 1e-6 / profiled
        c["launches"] += 1.0 / profiled
    durations = [us for _, us in kernels]
    top: dict[str, float] = {}
    for kname, us in kernels:
        top[kname[:140]] = top.get(kname[:140], 0.0) + us * 1e-6 / profiled
    kernel_seconds = sum(c["seconds"] for c in by_class.values())
    # Kernels torch.compile generated (inductor names its Triton kernels triton_*), across classes.
    generated = [us for kname, us in kernels if kname.startswith("triton_")]
    return {
        "workload": label,
        "batch_size": workload.batch_size,
        "precision_in_effect": notes.get("precision_in_effect"),
        "cuda_graph": notes.get("cuda_graph"),
        "compiled_step": notes.get("compiled_step"),
        "profiled": profiled_what,
        "step_seconds": step_seconds,
        "kernel_seconds": kernel_seconds,
        "gap_seconds": step_seconds - kernel_seconds,
        "launches": len(kernels) / profiled,
        "generated_kernels": {
            "seconds": sum(generated) * 1e-6 / profiled,
            "launches": len(generated) / profiled,
        },
        "last_output_mean": last_output,
        "median_kernel_us": statistics.median(durations) if durations else None,
        "by_class": dict(sorted(by_class.items(), key=lambda kv: -kv[1]["seconds"])),
        "duration_histogram_per_step": {k: v / profiled for k, v in histogram(durations).items()},
        "top_kernels": sorted(top.items(), key=lambda kv: -kv[1])[:25],
        "estimate": _estimate(workload, gpu_id),
    }


def _time_in_graph(fn: Any, device: str, repeats: int) -> float:
    """Seconds of one call of `fn`: the fastest of three timings of a CUDA graph of `repeats`
    calls (graph_timing.replay_seconds; on the CPU, wall time)."""
    return min(graph_timing.replay_seconds(fn, device, repeats, 3))


def time_convs(*, device: str, tiny: bool, batch: int, image: int, repeats: int) -> dict[str, Any]:
    """Each distinct convolution of the workload's ResNet: forward, data and weight gradient alone."""
    import torch

    from fitbench.workloads.presets import get_workload

    workload = get_workload("resnet50-cifar10", tiny=tiny, batch_size=batch, image_size=image)
    cuda = device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    if cuda:
        torch.backends.cudnn.benchmark = True
    seen: dict[tuple[int, ...], dict[str, Any]] = {}
    for conv in workload.arch.convs(image):
        key = (conv.in_channels, conv.out_channels, conv.kernel, conv.stride, conv.in_hw)
        if key in seen:
            seen[key]["count"] += 1
            continue
        x = torch.randn(batch, conv.in_channels, conv.in_hw, conv.in_hw, device=device, dtype=dtype)
        x = x.contiguous(memory_format=torch.channels_last)
        wt = torch.randn(
            conv.out_channels, conv.in_channels, conv.kernel, conv.kernel, device=device, dtype=dtype
        )
        wt = wt.contiguous(memory_format=torch.channels_last)
        pad, stride = conv.kernel // 2, conv.stride
        y = torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad)
        dy = torch.randn_like(y)

        def backward(mask: list[bool], x=x, wt=wt, dy=dy, stride=stride, pad=pad) -> Any:
            return torch.ops.aten.convolution_backward(
                dy, x, wt, None, [stride, stride], [pad, pad], [1, 1], False, [0, 0], 1, mask
            )

        macs = batch * conv.macs_per_sample()
        row = {
            "name": conv.name,
            "count": 1,
            "in_channels": conv.in_channels,
            "out_channels": conv.out_channels,
            "kernel": conv.kernel,
            "stride": stride,
            "in_hw": conv.in_hw,
            "out_hw": conv.out_hw,
            "flops": 2.0 * macs,
            "fprop_seconds": _time_in_graph(
                lambda x=x, wt=wt, stride=stride, pad=pad: torch.nn.functional.conv2d(
                    x, wt, stride=stride, padding=pad
                ),
                device,
                repeats,
            ),
            "wgrad_seconds": _time_in_graph(lambda: backward([False, True, False]), device, repeats),
            "dgrad_seconds": _time_in_graph(lambda: backward([True, False, False]), device, repeats),
        }
        seen[key] = row
    rows = list(seen.values())
    fit = fit_passes(rows, device)
    return {"batch": batch, "image": image, "dtype": str(dtype), "rows": rows, "fit": fit}


def fit_passes(rows: list[dict[str, Any]], device: str) -> dict[str, Any] | None:
    """time = flops / (share x peak) + fixed over every pass (weighted by occurrences in the
    network; the stem's data gradient does not run in training). Peak: the H200's dense bf16."""
    if not device.startswith("cuda"):
        return None
    peak = 989e12
    xs, ys, ws = [], [], []
    for r in rows:
        for p in ("fprop", "dgrad", "wgrad"):
            if p == "dgrad" and r["name"] == "conv1":
                continue
            xs.append(r["flops"] / peak)
            ys.append(r[f"{p}_seconds"])
            ws.append(r["count"])
    n = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs, strict=True)) / n
    my = sum(w * y for w, y in zip(ws, ys, strict=True)) / n
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs, strict=True))
    sxy = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys, strict=True))
    slope = sxy / sxx if sxx else 0.0
    return {
        "share_of_peak": 1.0 / slope if slope > 0 else None,
        "fixed_seconds": my - slope * mx,
        "passes_per_step": n,
        "sum_seconds_per_step": sum(w * y for w, y in zip(ws, ys, strict=True)),
        "estimator": {"share_of_peak": 0.49, "fixed_seconds": 8.5e-6},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny models (a smoke test of the script)")
    ap.add_argument("--only", choices=("step", "convs"))
    ap.add_argument("--workload", action="append", help="NAME[:PRECISION] for the step part (repeatable)")
    ap.add_argument("--steps", type=int, default=50, help="timed replays a workload")
    ap.add_argument("--batch", type=int, default=128, help="convs: batch")
    ap.add_argument("--image", type=int, default=32, help="convs: image size")
    ap.add_argument("--repeats", type=int, default=20, help="convs: calls inside one timed graph")
    ap.add_argument("--gpu", default=None, help="catalog card for the estimate (default: h200 on CUDA)")
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument(
        "--compile",
        dest="compile_step",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="step: compile before capture (default: as fitbench run --exec tuned, on where inductor can)",
    )
    args = ap.parse_args(argv)

    import torch

    cuda = args.device.startswith("cuda")
    gpu_id = args.gpu or ("h200" if cuda else None)
    out: dict[str, Any] = {
        "benchmark": "tuned_profile",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", "benchmarks/tuned_profile.py", *(argv or sys.argv[1:])]),
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version() if cuda else None,
            "device": torch.cuda.get_device_name() if cuda else "cpu",
        },
    }
    if args.only in (None, "step"):
        out["steps"] = []
        for spec in args.workload or DEFAULT_WORKLOADS:
            row = profile_step(
                spec,
                device=args.device,
                tiny=args.tiny,
                steps=args.steps,
                gpu_id=gpu_id,
                compile_step=args.compile_step,
            )
            out["steps"].append(row)
            est = row["estimate"] or {}
            est_ms = est.get("step_seconds", float("nan")) * 1e3
            print(
                f"{spec}: {row['step_seconds'] * 1e3:.3f} ms a step, kernels "
                f"{row['kernel_seconds'] * 1e3:.3f} ms in {row['launches']:.0f} launches "
                f"(graph: {row['cuda_graph']}); estimate {est_ms:.3f} ms in "
                f"{est.get('launches', float('nan')):.0f}"
            )
            for cls, c in row["by_class"].items():
                print(f"    {cls:12s} {c['seconds'] * 1e3:8.3f} ms  {c['launches']:6.0f} launches")
    if args.only in (None, "convs"):
        batch, image = (4, 32) if args.tiny else (args.batch, args.image)
        convs = time_convs(device=args.device, tiny=args.tiny, batch=batch, image=image, repeats=args.repeats)
        out["convs"] = convs
        for r in convs["rows"]:
            print(
                f"  {r['name']:22s} x{r['count']} {r['in_channels']:5d}->{r['out_channels']:5d} "
                f"k{r['kernel']} s{r['stride']} {r['in_hw']:3d}px  "
                f"fprop {r['fprop_seconds'] * 1e6:8.1f} us  dgrad {r['dgrad_seconds'] * 1e6:8.1f} us  "
                f"wgrad {r['wgrad_seconds'] * 1e6:8.1f} us"
            )
        if convs["fit"]:
            f = convs["fit"]
            print(
                f"  fit: {f['share_of_peak']} of the bf16 peak + {f['fixed_seconds'] * 1e6:.1f} us a pass; "
                f"{f['sum_seconds_per_step'] * 1e3:.3f} ms of convolutions a step (estimator: 0.49, 8.5 us)"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
