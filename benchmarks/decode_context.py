"""What a Hugging Face `generate` decode step costs as the context grows, and where it goes.

One model is built as `fitbench run` builds it (the torch backend's GenerateSession, default
mode) with the longest prompt asked for; shorter contexts are the first tokens of that prompt.
For each context the decode step is the difference of two timed generate calls, 1 + N new tokens
and 1, over N (the runner's method). At the longest context the torch profiler then runs both
calls, and the difference of their per-kernel device times, per-operator host times and runtime
calls over N is one decode step's: what grew with the context, kernel by kernel.

    python benchmarks/decode_context.py llama-3.1-8b-instruct:1:128,4096,16384
    python benchmarks/decode_context.py chatglm3-6b:4:128,2048 --precision fp16 --json results/x.json
    python benchmarks/decode_context.py qwen3-0.6b:1:16,64 --device cpu --new-tokens 4   # smoke
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from fitbench.backends import get_backend
from fitbench.backends.base import RunOptions
from fitbench.catalog import get_gpu
from fitbench.estimate import speed
from fitbench.estimate.profile import following_release, get_profile, host_scaled_profile
from fitbench.workloads import library


def parse_case(text: str) -> tuple[str, int, list[int]]:
    """MODEL:BATCH:CTX[,CTX...] -> (model, batch, contexts ascending)."""
    try:
        model, batch, contexts = text.split(":")
        return model, int(batch), sorted(int(c) for c in contexts.split(","))
    except ValueError:
        raise SystemExit(f"bad case {text!r}: write MODEL:BATCH:CTX[,CTX...]") from None


def timed(fn: Any, sync: Any, repeats: int) -> float:
    """The median wall seconds of `repeats` calls of fn, each synchronised."""
    samples = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t0)
    return sorted(samples)[len(samples) // 2]


def profiled(fn: Any, sync: Any, cuda: bool) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Per-kernel device microseconds, per-operator host microseconds and runtime-call counts of
    one call of fn."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        fn()
        sync()
    kernels: dict[str, float] = {}
    host: dict[str, float] = {}
    runtime: dict[str, float] = {}
    for e in prof.key_averages():
        if e.device_type == DeviceType.CUDA:
            kernels[e.key] = kernels.get(e.key, 0.0) + e.self_device_time_total
        elif e.key.startswith(("cuda", "cu")):
            runtime[e.key] = runtime.get(e.key, 0.0) + e.count
        else:
            host[e.key] = host.get(e.key, 0.0) + e.self_cpu_time_total
    return kernels, host, runtime


def per_step(long: dict[str, float], short: dict[str, float], steps: int) -> dict[str, float]:
    """(long - short) / steps for every key, largest first."""
    keys = set(long) | set(short)
    diff = {k: (long.get(k, 0.0) - short.get(k, 0.0)) / steps for k in keys}
    return dict(sorted(diff.items(), key=lambda kv: -abs(kv[1])))


def estimate_step(
    workload: Any, gpu_id: str | None, probe: float | None, release: str | None
) -> dict[str, float]:
    """The estimate's decode step (seconds, host, GPU) at this workload's context."""
    if gpu_id is None:
        return {}
    profile = following_release(get_profile("torch", "default", use_user=False), release)
    if probe:
        profile = host_scaled_profile(profile, probe)
    decode = speed.generation(workload, get_gpu(gpu_id), profile).decode
    return {"seconds": decode.seconds, "host_seconds": decode.host_seconds, "gpu_seconds": decode.gpu_seconds}


def run_case(case: str, args: argparse.Namespace) -> dict[str, Any]:
    import transformers

    from fitbench.backends.torch import host_probe

    model, batch, contexts = parse_case(case)
    workload = library.workload_for_model(
        model,
        mode="infer",
        precision=args.precision,
        batch_size=batch,
        prompt_tokens=contexts[-1],
        new_tokens=args.new_tokens,
    )
    if args.layers:
        workload = dataclasses.replace(
            workload, arch=dataclasses.replace(workload.arch, num_layers=args.layers)
        )
    backend = get_backend("torch")
    backend.device_info(args.device)
    session = backend.open(workload, RunOptions(device=args.device))
    cuda = args.device.startswith("cuda")
    full_ids, full_mask = session.input_ids, session.attention_mask
    n = args.new_tokens
    # this host's probe round, so that the estimate beside each row is this host's (as the
    # accuracy sets' own-host scores are)
    probe = sum(host_probe.probe(args.device).values())
    rows = []
    profile_rows: dict[str, Any] = {}
    for ctx in contexts:
        session.input_ids, session.attention_mask = full_ids[:, :ctx], full_mask[:, :ctx]
        session.decode(1)  # warm: allocator segments and kernels for this context
        session.decode(1 + n)
        one = timed(lambda: session.decode(1), session.sync, args.repeats)
        many = timed(lambda: session.decode(1 + n), session.sync, args.repeats)
        step = (many - one) / n
        at = dataclasses.replace(workload, prompt_tokens=ctx, new_tokens=n)
        est = estimate_step(at, args.gpu, probe, transformers.__version__)
        rows.append({"context": ctx, "decode_step_seconds": step, "one_token_seconds": one, "estimate": est})
        est_text = ""
        if est:
            parts = f"host {est['host_seconds'] * 1e3:.1f}, GPU {est['gpu_seconds'] * 1e3:.1f}"
            est_text = f"  estimate {est['seconds'] * 1e3:6.1f} ms ({parts})"
        print(f"{model} b{batch} context {ctx:>6}: decode step {step * 1e3:7.2f} ms{est_text}", flush=True)
    if args.profile:
        k1, h1, r1 = profiled(lambda: session.decode(1), session.sync, cuda)
        kn, hn, rn = profiled(lambda: session.decode(1 + n), session.sync, cuda)
        kernels, host, runtime = per_step(kn, k1, n), per_step(hn, h1, n), per_step(rn, r1, n)
        profile_rows = {
            "context": contexts[-1],
            "kernel_us_per_step": {k: round(v, 2) for k, v in list(kernels.items())[:40]},
            "kernel_us_total": sum(kernels.values()),
            "host_us_per_step": {k: round(v, 2) for k, v in list(host.items())[:40]},
            "host_us_total": sum(host.values()),
            "runtime_calls_per_step": {k: round(v, 2) for k, v in runtime.items() if abs(v) > 0.01},
        }
        kernel_ms, host_ms = profile_rows["kernel_us_total"] / 1e3, profile_rows["host_us_total"] / 1e3
        print(
            f"  per decode step at context {contexts[-1]}: kernels {kernel_ms:.2f} ms, "
            f"host operators {host_ms:.2f} ms (profiled)"
        )
        for name, us in list(kernels.items())[: args.rows]:
            print(f"    {us:9.1f} us  {name[:110]}")
        print("  host operators:")
        for name, us in list(host.items())[: args.rows]:
            print(f"    {us:9.1f} us  {name[:110]}")
        print("  runtime calls:", profile_rows["runtime_calls_per_step"])
    return {
        "case": case,
        "workload": workload.to_dict(),
        "host_probe_seconds": probe,
        "rows": rows,
        "profile": profile_rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("cases", nargs="+", help="MODEL:BATCH:CTX[,CTX...] (a model of `fitbench models`)")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layers", type=int, help="build this many blocks instead of the model's")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu", help="catalog card for the estimate beside each row (none: no estimate)")
    parser.add_argument("--no-profile", dest="profile", action="store_false")
    parser.add_argument("--rows", type=int, default=15)
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    results = [run_case(case, args) for case in args.cases]
    if args.json:
        record = {"benchmark": "decode_context", "argv": sys.argv[1:], "cases": results}
        args.json.write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
