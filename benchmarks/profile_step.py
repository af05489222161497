"""Where a step's time goes: the torch profiler over a few steps of any workload and exec mode.

Builds the session exactly as `fitbench run` does (fitbench.backends, the same Workload and
RunOptions), warms it up, profiles a few steps and prints the operators and kernels that take
the most device (or CPU) time. Use it when a measurement is far from its roofline:

    python benchmarks/profile_step.py bert-base-imdb --exec tuned --precision amp-bf16
    python benchmarks/profile_step.py llm-6b --exec tuned --steps 2
    python benchmarks/profile_step.py resnet50-cifar10 --tiny --device cpu      # a smoke test
    python benchmarks/profile_step.py --holdout "lora_rank=8 batch=2"   # a point of accuracy.py's sets
    python benchmarks/profile_step.py --holdout falcon-7b --steps 1     # any set's (families here)

With --trace DIR it also writes a Chrome trace (open it in chrome://tracing or Perfetto). A tuned
training or classification step compiles as `fitbench run --exec tuned` does (on a CUDA GPU with
Triton); --no-compile profiles the uncompiled step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from fitbench.backends import get_backend
from fitbench.backends.base import RunOptions
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workload", nargs="?", help="a preset (or use --holdout)")
    parser.add_argument(
        "--holdout", metavar="TEXT", help="the first point of accuracy.py's sets whose label contains TEXT"
    )
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--precision")
    parser.add_argument("--batch", type=int, dest="batch_size")
    parser.add_argument("--exec", dest="exec_mode", default="default", choices=("default", "tuned"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--compile",
        dest="compile_step",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="tuned: compile the step (default: as fitbench run, on where inductor can)",
    )
    parser.add_argument("--steps", type=int, default=5, help="profiled steps (after 3 warm-up steps)")
    parser.add_argument("--rows", type=int, default=25, help="rows of the operator table")
    parser.add_argument("--trace", type=Path, help="folder for a Chrome trace")
    parser.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="append every kernel's device time and a split by kernel class (kernel_classes) to FILE",
    )
    parser.add_argument(
        "--sort",
        choices=("device", "host"),
        default="device",
        help="order the table by device time (default) or by host time (a host-bound step)",
    )
    args = parser.parse_args(argv)

    from torch.profiler import ProfilerActivity, profile

    workload = _point(args.holdout) if args.holdout else None
    if workload is None:
        if not args.workload:
            parser.error("give a preset, or --holdout TEXT matching a point of accuracy.py")
        workload = get_workload(
            args.workload, tiny=args.tiny, precision=args.precision, batch_size=args.batch_size
        )
    backend = get_backend("torch")
    backend.device_info(args.device)
    options = RunOptions(device=args.device, exec_mode=args.exec_mode, compile_step=args.compile_step)
    session = backend.open(workload, options)
    once = session.step
    if workload.is_generation and not session.notes.get("decode_includes_prefill"):

        def once() -> None:
            session.prefill()
            session.decode(int(workload.new_tokens or 1))

    for _ in range(3):
        once()
    session.sync()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        once()
    session.sync()
    unprofiled = (time.perf_counter() - t0) / args.steps
    cuda = args.device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    t0 = time.perf_counter()
    with profile(activities=activities, record_shapes=False) as prof:
        for _ in range(args.steps):
            once()
        session.sync()
    wall = (time.perf_counter() - t0) / args.steps
    sort = "self_cuda_time_total" if cuda and args.sort == "device" else "self_cpu_time_total"
    print(
        f"{workload.name} {args.exec_mode} {workload.precision} batch {workload.batch_size}: "
        f"{wall * 1e3:.2f} ms per step over {args.steps} profiled steps "
        f"({unprofiled * 1e3:.2f} ms unprofiled)"
    )
    print("notes:", {k: v for k, v in session.notes.items() if k not in ("params",)})
    print(prof.key_averages().table(sort_by=sort, row_limit=args.rows))
    if args.json and cuda:
        _append_json(args.json, workload, args, (wall, unprofiled), prof)
    if args.trace:
        args.trace.mkdir(parents=True, exist_ok=True)
        path = args.trace / f"trace-{workload.name}-{args.exec_mode}.json"
        prof.export_chrome_trace(str(path))
        print(f"trace written to {path}")
    return 0


#: kernel classes by name, first match wins (user annotations such as Optimizer.step#...
#: are not kernels and are left out): what the estimator times as GEMMs, fused attention,
#: the optimizer's foreach kernels, the LM loss's softmax, and the rest (memory-bound
#: elementwise, reduction, copy and concatenation kernels)
KERNEL_CLASSES = (
    ("attention", ("flash", "fmha", "sdpa", "attention")),  # before matmul: fmha_cutlassF_...
    ("conv", ("implicit_gemm", "fprop", "dgrad", "wgrad", "conv")),  # cuDNN's, before matmul: xmma
    ("matmul", ("gemm", "nvjet", "xmma", "cutlass", "cublas", "splitk", "gemv")),
    ("optimizer", ("multi_tensor", "fused_adam", "fused_sgd")),
    ("loss", ("softmax",)),
)


#: device-side ranges the profiler lists beside the kernels (they span kernels already counted)
ANNOTATIONS = ("Optimizer.", "ProfilerStep")


def kernel_class(name: str) -> str:
    """The class of a CUDA kernel by its name (KERNEL_CLASSES), 'memory' for the rest."""
    low = name.lower()
    for cls, keys in KERNEL_CLASSES:
        if any(k in low for k in keys):
            return cls
    return "memory"


def _append_json(
    path: Path, workload: Workload, args: argparse.Namespace, walls: tuple[float, float], prof: object
) -> None:
    """Every CUDA kernel's total device time and launches per step, and their sum per class."""
    import json

    from torch.autograd import DeviceType

    kernels = [
        {
            "name": e.key,
            "class": kernel_class(e.key),
            "ms_per_step": e.self_device_time_total / 1e3 / args.steps,
            "launches_per_step": e.count / args.steps,
        }
        for e in prof.key_averages()  # type: ignore[attr-defined]
        if e.device_type == DeviceType.CUDA and not e.key.startswith(ANNOTATIONS)
    ]
    # the runtime calls behind the kernels: launches, and the copies and synchronisations that
    # stall the host (a step that syncs cannot run ahead of the GPU)
    runtime = {
        e.key: {
            "calls_per_step": e.count / args.steps,
            "ms_per_step": e.self_cpu_time_total / 1e3 / args.steps,
        }
        for e in prof.key_averages()  # type: ignore[attr-defined]
        if e.device_type == DeviceType.CPU and e.key.startswith(("cuda", "cu"))
    }
    classes: dict[str, dict[str, float]] = {}
    for k in kernels:
        c = classes.setdefault(k["class"], {"ms_per_step": 0.0, "launches_per_step": 0.0})
        c["ms_per_step"] += k["ms_per_step"]
        c["launches_per_step"] += k["launches_per_step"]
    busy, gaps = _device_busy(prof)
    rows = json.loads(path.read_text()) if path.exists() else []
    rows.append(
        {
            "workload": workload.to_dict(),
            "label": args.holdout or workload.name,
            "exec_mode": args.exec_mode,
            "profiled_wall_ms_per_step": walls[0] * 1e3,
            "unprofiled_wall_ms_per_step": walls[1] * 1e3,
            "kernel_ms_per_step": sum(k["ms_per_step"] for k in kernels),
            "kernel_classes": classes,
            "runtime_calls": runtime,
            # the union of the kernels' intervals: the GPU's busy time, and how long it waited
            "device_busy_ms_per_step": busy / 1e3 / args.steps,
            "device_idle_gaps_us": gaps,
            "kernels": sorted(kernels, key=lambda k: -k["ms_per_step"]),
        }
    )
    path.write_text(json.dumps(rows, indent=1))


def _device_busy(prof: object, top: int = 20) -> tuple[float, list[float]]:
    """(µs the GPU ran any kernel, the `top` longest gaps between kernels in µs): where a step's
    wall time exceeds the busy time, the GPU waited for the host (a sync, or slow issue)."""
    from torch.autograd import DeviceType

    spans = sorted(
        (e.time_range.start, e.time_range.end)
        for e in prof.events()  # type: ignore[attr-defined]
        if e.device_type == DeviceType.CUDA and not e.name.startswith(ANNOTATIONS)
    )
    busy = 0.0
    gaps: list[float] = []
    end = None
    for a, b in spans:
        if end is None or a > end:
            if end is not None:
                gaps.append(a - end)
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    return busy, sorted(gaps, reverse=True)[:top]


def _point(text: str) -> Workload | None:
    """The workload of the first point of accuracy.py's sets whose label contains text."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import accuracy

    for name, overrides in (point for points in accuracy.SETS.values() for point in points):
        if text in accuracy.label(name, overrides):
            return accuracy.build_workload(name, overrides)[0]
    return None


if __name__ == "__main__":
    raise SystemExit(main())
