"""What one eager operation costs the host: the figures behind the estimator's host-cost model.

The speed model charges `host_seconds_per_op` for every framework operation that Python issues
(fitted on whole host-bound steps) and a share of it, `cast_host_share`, for each cast that
autocast issues from C++ inside another operation (profiles.toml). This script measures the
parts on the local device with tiny tensors, so the GPU keeps up and only the host is timed
(the timing and the first four calls are `fitbench run`'s host-speed probe,
fitbench/backends/torch/host_probe.py, whose round is their sum):

  python-level ops   F.linear with autograd recording, an nn.Linear module call, torch.add,
                     a view: each goes through Python's argument parsing and the dispatcher
  autocast casts     F.linear under torch.autocast with its cache off (the input, weight and
                     bias each cast from C++ before the 16-bit matmul), minus the autocast
                     region alone and minus F.linear on 16-bit copies made beforehand: / 3

    python benchmarks/host_ops.py                 # on cuda, prints a table, writes a JSON
    python benchmarks/host_ops.py --device cpu    # the same on the CPU (a smoke test)

The cast's share is printed against the profile's host_seconds_per_op for the same device.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
from pathlib import Path

from fitbench.estimate.profile import get_profile

RESULTS = Path(__file__).with_name("results")


def measure(device: str, *, calls: int, repeats: int) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    from fitbench.backends.torch.host_probe import device_sync, host_seconds, probe_calls, probe_inputs

    sync = device_sync(device)
    low = torch.bfloat16
    x, linear = probe_inputs(device)
    w, b = linear.weight, linear.bias  # leaf parameters: autograd records every call
    probe = probe_calls(x, linear)  # the four calls of fitbench run's host-speed probe

    x16 = x.to(low)
    w16, b16 = (t.detach().to(low).requires_grad_() for t in (w, b))

    def plain_low() -> object:  # the 16-bit matmul that autocast ends in, without the casts
        return F.linear(x16, w16, b16)

    def autocast_linear() -> object:
        with torch.autocast(device.split(":")[0], dtype=low, cache_enabled=False):
            return F.linear(x, w, b)

    def autocast_empty() -> object:  # the context manager alone, to take it out of the casts
        with torch.autocast(device.split(":")[0], dtype=low, cache_enabled=False):
            return x

    ops = {
        "F.linear (autograd on)": probe["F.linear (autograd on)"],
        "F.linear on 16-bit copies": plain_low,
        "nn.Linear module call": probe["nn.Linear module call"],
        "torch.add": probe["torch.add"],
        "Tensor.view": probe["Tensor.view"],
        "autocast context alone": autocast_empty,
        "F.linear under autocast": autocast_linear,
    }
    t = {name: host_seconds(fn, sync, calls=calls, repeats=repeats) for name, fn in ops.items()}
    casts = t["F.linear under autocast"] - t["autocast context alone"] - t["F.linear on 16-bit copies"]
    t["one autocast cast (from C++)"] = casts / 3
    return t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed loop (default 2000)")
    parser.add_argument("--repeats", type=int, default=7, help="timed loops per operation (default 7)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON result")
    args = parser.parse_args(argv)

    import torch

    from fitbench.backends.torch.host_probe import PROBE_NAMES

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA device: pass --device cpu")
    times = measure(args.device, calls=args.calls, repeats=args.repeats)
    profile = get_profile("torch", "default", use_user=False)
    per_op = profile.host_seconds_per_op
    cast = times["one autocast cast (from C++)"]
    width = max(map(len, times))
    print(f"{'host seconds per call':{width}}   us")
    for name, seconds in times.items():
        print(f"{name:{width}}  {seconds * 1e6:6.2f}")
    print(f"\nprofile host_seconds_per_op (torch.default): {per_op * 1e6:.1f} us per framework op")
    print(
        f"one autocast cast / host_seconds_per_op = {cast / per_op:.3f} "
        f"(profile cast_host_share: {profile.cast_host_share})"
    )
    probe_round = sum(times[name] for name in PROBE_NAMES)
    reference = profile.host_probe_reference_seconds
    print(
        f"host-speed probe round (the first four summed, as fitbench run records host_probe_seconds): "
        f"{probe_round * 1e6:.2f} us"
        + (f" (profile host_probe_reference_seconds: {reference * 1e6:.2f} us)" if reference else "")
    )
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or "cpu"
    result = {
        "benchmark": "host_ops",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": args.device,
        "device_name": name,
        "torch": torch.__version__,
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "calls": args.calls,
        "repeats": args.repeats,
        "host_seconds": times,
        "host_seconds_per_op": per_op,
        "cast_share": cast / per_op,
        "host_probe_round_seconds": probe_round,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    tag = "h200" if "H200" in name else args.device.split(":")[0]
    path = args.out / f"host-ops-{tag}-{dt.date.today().isoformat()}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"\nwritten {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
