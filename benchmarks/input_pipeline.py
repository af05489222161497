"""What feeding the inputs costs a `fitbench run` training step, before and after preparing them once.

`fitbench run` of eager ResNet-50 SGD steps measured 13-51 ms more per step on an H200 than a
standalone loop over tensors already on the GPU (benchmarks/conv_layout.py). The suspect was the
torch backend's input path: every step drew a batch from fitbench.datasets (a numpy
gather, then uint8 -> float32 normalisation on the host) and copied it with a blocking
`.to(device)` from pageable memory, all on the critical path while the GPU idled. The backends
now prepare every distinct batch once, in the run's input dtype and, on a GPU, in pinned memory,
and each step only queues `.to(device, non_blocking=True)` (fitbench.backends.input_pipeline).

Per case this script times:

* the old per-step path, reproduced here (`legacy_*`): the dataset's gather of stored samples,
  its normalisation, then the conversion and blocking copy;
* the current `next_batch()` (fitbench.backends.torch.data.batch_source): the host's time per call
  (`next_batch_host_ms`; on a GPU the copy is only queued) and the time until the copy has landed
  (`next_batch_done_ms`, a synchronise after the call), plus the one-off preparation;
* with `--steps` (the default on cuda), the backend's own training step three ways: inputs already
  on the device (`step_resident_ms`, what a standalone benchmark times), the current next_batch
  (`step_ms`, what `fitbench run` times now) and the old path (`step_legacy_ms`).

    PYTHONPATH=src python benchmarks/input_pipeline.py --out benchmarks/results/input-pipeline-h200.json
    PYTHONPATH=src python benchmarks/input_pipeline.py --device cpu --out /tmp/ip.json   # next_batch only
    PYTHONPATH=src python benchmarks/input_pipeline.py --device cpu --tiny --steps       # a smoke test

Models are built from benchmarks/configs with random weights; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

# label -> (config file, workload fields): the accuracy-holdout ResNet points and a text batch
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "resnet-50 b64 224px fp32": (
        "resnet-50.json",
        {"mode": "train", "batch_size": 64, "image_size": 224, "precision": "fp32", "optimizer": "momentum"},
    ),
    "resnet-50 b128 224px amp-bf16": (
        "resnet-50.json",
        {
            "mode": "train",
            "batch_size": 128,
            "image_size": 224,
            "precision": "amp-bf16",
            "optimizer": "momentum",
            "optimizer_impl": "fused",
        },
    ),
    "resnet-50 b128 128px fp32": (
        "resnet-50.json",
        {"mode": "train", "batch_size": 128, "image_size": 128, "precision": "fp32", "optimizer": "momentum"},
    ),
    "bert-large b16 seq512 amp-bf16": (
        "bert-large-uncased.json",
        {"mode": "train", "batch_size": 16, "seq_len": 512, "precision": "amp-bf16"},
    ),
}


def _ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1e3, 4)


def _timed(fn: Callable[[], Any], sync: Callable[[], None], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def legacy_source(
    workload: Any, device: Any, float_dtype: Any, seed: int
) -> tuple[Callable[[], Any], Callable[[Any], Any], Callable[[Any], Any]]:
    """The per-step input path `fitbench run` used before, in its three parts, for one batch each.

    gather(): the dataset cycler's next batch of stored samples (a numpy fancy index);
    normalise(batch): its per-batch transform (uint8 -> normalised float32 for images);
    to_device(batch): torch.as_tensor and a blocking `.to(device, dtype)` from pageable memory.
    """
    import torch

    from fitbench import datasets
    from fitbench.workloads.arch import ResNetArch

    arch = workload.arch
    if isinstance(arch, ResNetArch):
        cycler, _, _ = datasets.image_batches(
            None, workload.batch_size, workload.image_size, arch.num_classes, seed
        )
    else:
        cycler, _, _ = datasets.text_batches(
            None, workload.batch_size, workload.seq_len, arch.vocab_size, max(arch.num_labels, 2), seed
        )
    transform = cycler._transform  # run separately below, so that its share shows
    cycler._transform = None

    def gather() -> dict[str, Any]:
        return dict(next(cycler))

    def normalise(batch: dict[str, Any]) -> dict[str, Any]:
        batch = transform(batch) if transform is not None else batch
        if "images" in batch:
            batch = {"pixel_values" if k == "images" else k: v for k, v in batch.items()}
        return batch

    def to_device(batch: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, array in batch.items():
            tensor = torch.as_tensor(array)
            dtype = float_dtype if tensor.is_floating_point() else torch.long
            out[name] = tensor.to(device=device, dtype=dtype)
        return out

    return gather, normalise, to_device


def one_case(
    label: str,
    config: str,
    fields: dict[str, Any],
    *,
    device_name: str,
    tiny: bool,
    steps: bool,
    repeats: int,
) -> dict[str, Any]:
    import torch

    import accuracy
    from fitbench.backends.base import RunOptions
    from fitbench.backends.torch.data import batch_source
    from fitbench.backends.torch.precision import plan_precision

    workload, _ = accuracy.build_workload(config, fields, smoke=tiny)
    device = torch.device(device_name)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    plan = plan_precision(workload.precision, device, training=workload.is_training)
    options = RunOptions(device=device_name)
    row: dict[str, Any] = {
        "case": label,
        "batch": workload.batch_size,
        "image_size": workload.image_size,
        "seq_len": workload.seq_len,
        "precision": workload.precision,
        "input_dtype": str(plan.input_dtype).removeprefix("torch."),
    }

    gather, normalise, to_device = legacy_source(workload, device, plan.input_dtype, options.seed)
    raw: list[Any] = []
    ready: list[Any] = []
    row["legacy_gather_ms"] = _ms(_timed(lambda: raw.append(gather()), sync, repeats))
    row["legacy_normalise_ms"] = _ms(_timed(lambda: ready.append(normalise(raw.pop())), sync, repeats))
    row["legacy_convert_copy_ms"] = _ms(_timed(lambda: to_device(ready.pop()), sync, repeats))
    row["legacy_next_batch_ms"] = round(
        row["legacy_gather_ms"] + row["legacy_normalise_ms"] + row["legacy_convert_copy_ms"], 4
    )

    t0 = time.perf_counter()
    source = batch_source(workload, options, device, plan.input_dtype)
    row["prepare_seconds"] = round(time.perf_counter() - t0, 3)
    row.update(
        prepared_batches=source.prepared_batches,
        batch_bytes=source.batch_bytes,
        input_pipeline=source.pipeline,
    )
    source.next_batch()
    sync()
    host = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        source.next_batch()
        host.append(time.perf_counter() - t0)
    sync()
    row["next_batch_host_ms"] = _ms(host)
    row["next_batch_done_ms"] = _ms(_timed(source.next_batch, sync, repeats))
    del source

    if steps:
        row.update(
            step_times(workload, options, device, sync, lambda: to_device(normalise(gather())), repeats)
        )
    return row


def step_times(
    workload: Any,
    options: Any,
    device: Any,
    sync: Callable[[], None],
    legacy: Callable[[], Any],
    repeats: int,
) -> dict[str, Any]:
    """The backend's own training step with inputs resident, with next_batch, with the old path."""
    from fitbench.backends.torch.session import open_default

    session = open_default(workload, options)
    current = session.next_batch  # type: ignore[attr-defined]
    resident = current()
    variants = {"step_resident_ms": lambda: resident, "step_ms": current, "step_legacy_ms": legacy}
    out: dict[str, Any] = {}
    for _ in range(3):  # warm-up: kernel choice, optimizer state, allocator growth
        session.step()
    for name, feed in variants.items():
        session.next_batch = feed  # type: ignore[attr-defined]
        session.step()
        out[name] = _ms(_timed(session.step, sync, repeats))
    out["input_overhead_ms"] = round(out["step_ms"] - out["step_resident_ms"], 4)
    out["legacy_input_overhead_ms"] = round(out["step_legacy_ms"] - out["step_resident_ms"], 4)
    session.close()
    return out


COLUMNS = (
    ("case", "case", 30),
    ("legacy_gather_ms", "old gather", 10),
    ("legacy_normalise_ms", "old norm", 9),
    ("legacy_convert_copy_ms", "old copy", 9),
    ("next_batch_host_ms", "new host", 9),
    ("next_batch_done_ms", "new done", 9),
    ("prepared_batches", "prep n", 7),
    ("prepare_seconds", "prep s", 7),
    ("step_resident_ms", "step res", 9),
    ("step_ms", "step new", 9),
    ("step_legacy_ms", "step old", 9),
)


def print_table(rows: list[dict[str, Any]]) -> None:
    print("  ".join(title.rjust(width) for _, title, width in COLUMNS) + "   (ms unless marked)")
    for row in rows:
        cells = []
        for key, _, width in COLUMNS:
            value = row.get(key)
            text = "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
            cells.append(text.rjust(width))
        print("  ".join(cells), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the same jobs on toy models (CPU smoke test)")
    ap.add_argument(
        "--steps",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time training steps (default: on for cuda, off for cpu)",
    )
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--only", help="cases whose label contains this text")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import torch

    steps = args.device.startswith("cuda") if args.steps is None else args.steps
    if args.device == "cpu":
        torch.set_num_threads(1)  # toy steps on a shared CPU: intra-op threads only add contention
    cases = {k: v for k, v in CASES.items() if not args.only or args.only in k}
    rows = []
    for label, (config, fields) in cases.items():
        rows.append(
            one_case(
                label,
                config,
                fields,
                device_name=args.device,
                tiny=args.tiny,
                steps=steps,
                repeats=args.repeats,
            )
        )
    print_table(rows)
    on_cuda = args.device.startswith("cuda")
    doc = {
        "benchmark": "input_pipeline",
        "date": dt.date.today().isoformat(),
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if on_cuda else platform.machine(),
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "tiny": args.tiny,
        "repeats": args.repeats,
        "rows": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
