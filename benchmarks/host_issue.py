"""How long the host takes to issue one eager training step, beside the estimator's host time.

The estimator times an eager step as max(gpu, host) + overlap_loss x min(gpu, host), with host =
operations x host_seconds_per_op. Where host and GPU are close (LoRA on a 1.5B model) the step's
time hangs on a host figure that no measured step shows by itself. This script opens the torch
backend's training session exactly as `fitbench run` does (the workloads of accuracy.py, built by
its build_workload; backend.open with the default exec mode), warms it up, and then per step:

    t0; session.step() (issues forward, backward and optimizer without waiting); t1; sync; t2

`TrainSession.step` itself never synchronises (no .item(), no host copy; bf16 and fp32 use no
GradScaler, whose unscale would read the inf check back). On CUDA one more step runs under
torch.cuda.set_sync_debug_mode("warn") and the synchronising calls it reports are recorded
(`sync_warnings`): anything there (a model's own .item() or host copy) stalls the issue and
makes t1 - t0 include GPU time.

Per workload it reports the medians of the host issue time (t1 - t0), of the issuing thread's
CPU time over the same span (time.thread_time), of the wall (t2 - t0) and of the drain
(t2 - t1: the GPU work still queued when the host was done), and the estimator's host and GPU
seconds for the same workload on an H200 (fitbench.estimate.timing.one_device_step). Caveat: when
the GPU is slower than the host, CUDA's launch queue (about a thousand launches) fills and a
launch blocks until a slot frees, so t1 - t0 then includes waiting. The thread's CPU time leaves
that wait out only if the driver sleeps while it waits; by default (cudaDeviceScheduleAuto, fewer
active contexts than cores) it spins, and the CPU time counts the wait too. A drain near zero says
the host was the bottleneck (t1 - t0 is then close to pure issue time); a large drain with
t1 - t0 near the wall says the host may have waited. The host-speed probe
(backends/torch/host_probe.py) runs once per workload, so the issue time can be read against
this host's speed (profiles.toml's host_probe_reference_seconds is a round on the calibration
machines).

    python benchmarks/host_issue.py --tiny --device cpu --out /tmp/host-issue-cpu.json   # smoke
    python benchmarks/host_issue.py --device cuda --out benchmarks/results/host-issue-h200.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy  # benchmarks/ on the path: the measured points' own workload builder
from fitbench.backends import get_backend
from fitbench.backends.base import RunOptions
from fitbench.catalog import get_gpu
from fitbench.estimate import peft_speed, speed, timing, transformer_cost
from fitbench.estimate.profile import get_profile
from fitbench.workloads.workload import Workload


def _held_out_lora(rank: int, checkpointing: bool) -> tuple[str, dict[str, Any]]:
    """accuracy.py's held-out LoRA point of `rank`, with or without checkpointing (its own spec)."""
    return next(
        (source, fields)
        for source, fields in accuracy.HOLDOUT
        if fields.get("peft") == "lora"
        and fields.get("lora_rank") == rank
        and bool(fields.get("checkpointing")) == checkpointing
    )


# label -> (accuracy.py source, overrides): the LoRA points of its held-out set and the host-bound
# points host_seconds_per_op was fitted on (profiles.toml).
WORKLOADS: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen-lora-r8": _held_out_lora(8, False),
    "qwen-lora-r8-ckpt": _held_out_lora(8, True),
    "qwen-lora-r256": _held_out_lora(256, False),
    "resnet50-b64": ("resnet50-cifar10", {"batch_size": 64}),
    "bert-b2-s128": ("bert-base-imdb", {"batch_size": 2, "seq_len": 128, "precision": "fp32"}),
}
# Host-bound LoRA steps of models outside the held-out set (short sequences: the GPU finishes
# well before the host), with the same model trained in full beside them: what the adapters'
# operations cost the host, to be fitted here and scored on the held-out Qwen2.5 points.
_LLAMA_1B = {"mode": "train", "precision": "bf16", "optimizer": "adamw", "batch_size": 1, "seq_len": 256}
CALIBRATION: dict[str, tuple[str, dict[str, Any]]] = {
    "llama1b-full": ("llama-3.2-1b.json", _LLAMA_1B),
    "llama1b-lora-r16": ("llama-3.2-1b.json", {**_LLAMA_1B, "peft": "lora", "lora_rank": 16}),
    "llama1b-lora-r16-ckpt": (
        "llama-3.2-1b.json",
        {**_LLAMA_1B, "peft": "lora", "lora_rank": 16, "checkpointing": True},
    ),
    "gpt2m-lora-r8": (
        "gpt2-medium.json",
        {
            "mode": "train",
            "precision": "bf16",
            "batch_size": 1,
            "seq_len": 256,
            "peft": "lora",
            "lora_rank": 8,
        },
    ),
    "bert-lora-r8": (
        "bert-base-imdb",
        {"batch_size": 2, "seq_len": 128, "precision": "bf16", "peft": "lora", "lora_rank": 8},
    ),
}
WORKLOADS.update(CALIBRATION)
# Host-bound forward passes under torch.inference_mode (no autograd recording, no backward):
# what an inference operation costs the host against a training step's, in the same process.
INFERENCE: dict[str, tuple[str, dict[str, Any]]] = {
    "resnet50-infer-b8": ("resnet50-cifar10", {"mode": "infer", "batch_size": 8}),
    "bert-infer-b1-s128": (
        "bert-base-imdb",
        {"mode": "infer", "batch_size": 1, "seq_len": 128, "precision": "fp32"},
    ),
}
WORKLOADS.update(INFERENCE)
WARMUP = 3
# The workload's fields a row records (as built: --tiny shrinks the model and the sizes).
FIELDS = ("batch_size", "seq_len", "image_size", "precision", "peft", "lora_rank", "checkpointing")


def estimated(w: Workload) -> dict[str, float]:
    """The estimator's host, GPU and step milliseconds for `w` on an H200 (default profile)."""
    t = timing.one_device_step(w, get_gpu("h200"), get_profile("torch", "default"))
    return {
        "est_host_ms": 1e3 * t.host_seconds,
        "est_gpu_ms": 1e3 * t.gpu_seconds,
        "est_step_ms": 1e3 * t.seconds,
    }


def sync_warnings(session: Any) -> list[str] | None:
    """The synchronising calls CUDA's sync debug mode reports during one step (None on a CPU)."""
    import torch

    if session.device.type != "cuda":
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            session.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    session.sync()
    return [str(c.message).splitlines()[0][:200] for c in caught]


def measure(w: Workload, device: str, steps: int) -> dict[str, Any]:
    """Issue, CPU, wall and drain milliseconds (medians over `steps`) of `w`'s training step."""
    from fitbench.backends.torch.host_probe import probe

    session = get_backend("torch").open(w, RunOptions(device=device))
    try:
        for _ in range(WARMUP):
            session.step()
        session.sync()
        syncs = sync_warnings(session)
        issue, cpu, wall, drain = [], [], [], []
        for _ in range(steps):
            session.sync()
            c0, t0 = time.thread_time(), time.perf_counter()
            session.step()
            t1, c1 = time.perf_counter(), time.thread_time()
            session.sync()
            t2 = time.perf_counter()
            issue.append(t1 - t0)
            cpu.append(c1 - c0)
            wall.append(t2 - t0)
            drain.append(t2 - t1)
    finally:
        session.close()
    med = {
        k: 1e3 * statistics.median(v)
        for k, v in (("issue", issue), ("cpu", cpu), ("wall", wall), ("drain", drain))
    }
    return {
        "issue_ms": med["issue"],
        "issue_cpu_ms": med["cpu"],
        "wall_ms": med["wall"],
        "drain_ms": med["drain"],
        "issue_over_wall": med["issue"] / med["wall"],
        "issue_ms_all": [1e3 * s for s in issue],
        "wall_ms_all": [1e3 * s for s in wall],
        "sync_warnings": syncs,
        "probe_round_s": sum(probe(device).values()),
    }


COLUMNS = (
    ("issue", "issue_ms"),
    ("cpu", "issue_cpu_ms"),
    ("wall", "wall_ms"),
    ("drain", "drain_ms"),
    ("iss/wall", "issue_over_wall"),
    ("est host", "est_host_ms"),
    ("est gpu", "est_gpu_ms"),
    ("est step", "est_step_ms"),
)


def table_row(row: dict[str, Any], *, head: bool) -> str:
    """One workload as a line of the table (milliseconds; the probe round in microseconds)."""
    names = f"{'workload':18} " + " ".join(f"{c:>9}" for c, _ in COLUMNS) + f" {'probe us':>9} {'syncs':>5}"
    line = f"{row['label']:18} " + " ".join(f"{row[k]:9.2f}" for _, k in COLUMNS)
    syncs = row["sync_warnings"]
    line += f" {1e6 * row['probe_round_s']:9.1f} {'-' if syncs is None else len(syncs):>5}"
    return "\n".join([names, "-" * len(names), line] if head else [line])


def host_split_ms(w: Workload) -> dict[str, float]:
    """The estimator's host milliseconds of a LoRA step by part: the frozen base (forward,
    input-gradient backward, recomputation, the step's fixed operations), the adapters at a full
    operation each (adapter_host_share 1), and the optimizer."""
    profile = dataclasses.replace(get_profile("torch", "default"), adapter_host_share=1.0)
    gpu = get_gpu("h200")
    fwd = transformer_cost.forward_kernels(w, w.batch_size, w.seq_len or 1)
    again = transformer_cost.recomputed_kernels
    base = fwd + peft_speed._frozen_backward(fwd) + (again(fwd, w) if w.checkpointing else [])
    lora_fwd, lora_bwd = peft_speed.lora_kernels(w)
    adapters = lora_fwd + lora_bwd + (again(lora_fwd, w) if w.checkpointing else [])
    fp32 = w if w.precision_info.amp else dataclasses.replace(w, precision="fp32")

    def host(kernels: list[Any], job: Workload, fixed: float = 0.0) -> float:
        t = speed.time_kernels(
            kernels, job, gpu, profile, host_seconds_per_op=profile.host_seconds_per_op, fixed_ops=fixed
        )
        return 1e3 * t.host_seconds

    return {
        "base": host(base, w, speed.STEP_FIXED_OPS),
        "adapters": host(adapters, fp32),
        "optimizer": host(peft_speed.optimizer_kernels(w), fp32),
    }


def print_adapter_share(result: dict[str, Any]) -> int:
    """The adapters' host share that each calibration LoRA step of `result` implies.

    A host-bound step issues in its host time (drain near zero), so per step
    issue / machine = base + share x adapters + optimizer, where `machine` is this process's
    host speed against the estimate, read off the full-model reference steps it also issued
    (ResNet-50 and BERT-base: issue / estimated host, averaged). Calibration workloads only: the
    held-out Qwen2.5 points are printed for comparison and never enter the median."""
    rows = {r["label"]: r for r in result["rows"]}
    refs = [
        rows[x]["issue_ms"] / rows[x]["est_host_ms"] for x in ("resnet50-b64", "bert-b2-s128") if x in rows
    ]
    if not refs:
        print("no reference step (resnet50-b64, bert-b2-s128) in the file")
        return 1
    machine = statistics.fmean(refs)
    listed = ", ".join(f"{r:.2f}" for r in refs)
    print(f"machine: {machine:.2f} x the estimated host (reference steps: {listed})")
    print(f"{'workload':24} {'issue':>7} {'base':>7} {'adapt':>7} {'opt':>5} {'share':>6}")
    shares = []
    for label, (source, overrides) in WORKLOADS.items():
        if label not in rows or overrides.get("peft") != "lora":
            continue
        w, _ = accuracy.build_workload(source, overrides)
        part = host_split_ms(w)
        issue = rows[label]["issue_ms"] / machine
        share = (issue - part["base"] - part["optimizer"]) / part["adapters"]
        held_out = label not in CALIBRATION
        if not held_out:
            shares.append(share)
        print(
            f"{label:24} {issue:7.1f} {part['base']:7.1f} {part['adapters']:7.1f} {part['optimizer']:5.1f} "
            f"{share:6.2f}{'  (held out: not fitted)' if held_out else ''}"
        )
    if shares:
        print(
            f"adapter_host_share: median {statistics.median(shares):.2f} over {len(shares)} calibration steps"
        )
    inference = []
    for label in INFERENCE:
        if label in rows:
            issued, counted = rows[label]["issue_ms"] / machine, rows[label]["est_host_ms"]
            inference.append(issued / counted)
            print(f"{label:24} {issued:7.1f} ms issued, {counted:7.1f} counted: {issued / counted:.2f}")
    if inference:
        mean = statistics.fmean(inference)
        print(f"inference forward operations: {mean:.2f} of a training step's (mean of {len(inference)})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)}"
    )
    parser.add_argument("--steps", type=int, default=10, help=f"timed steps (after {WARMUP} warm-up steps)")
    parser.add_argument("--tiny", action="store_true", help="each workload on a toy model (a CPU smoke test)")
    parser.add_argument("--out", type=Path, help="JSON, rewritten after every workload")
    parser.add_argument(
        "--adapter-share",
        type=Path,
        metavar="FILE",
        help="from a stored result: the LoRA adapters' host share per calibration workload (no GPU)",
    )
    args = parser.parse_args(argv)
    if args.adapter_share:
        return print_adapter_share(json.loads(args.adapter_share.read_text()))
    labels = args.workloads.split(",")
    unknown = [x for x in labels if x not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")

    import torch

    threads = torch.get_num_threads()
    if args.device == "cpu":
        torch.set_num_threads(1)  # one thread: no pool hand-offs in a tiny step's host time
    try:
        return run(args, labels)
    finally:
        torch.set_num_threads(threads)


def run(args: argparse.Namespace, labels: list[str]) -> int:
    """Measure each workload of `labels`, print its line of the table, rewrite the JSON."""
    import torch

    profile = get_profile("torch", "default")
    meta = {
        "benchmark": "host_issue",
        "device": args.device,
        "gpu_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "tiny": args.tiny,
        "steps": args.steps,
        "warmup": WARMUP,
        "host_us_per_op_profile": 1e6 * profile.host_seconds_per_op,
        "host_probe_reference_s": profile.host_probe_reference_seconds,
        "estimate_gpu": "h200",
    }
    rows: list[dict[str, Any]] = []
    for label in labels:
        source, overrides = WORKLOADS[label]
        w, _ = accuracy.build_workload(source, overrides, smoke=args.tiny)
        start = time.perf_counter()
        row = {
            "label": label,
            "workload": w.name,
            **{k: getattr(w, k) for k in FIELDS},
            **estimated(w),
            **measure(w, args.device, args.steps),
        }
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
        print(table_row(row, head=len(rows) == 1), flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            complete = len(rows) == len(labels)
            args.out.write_text(json.dumps({**meta, "complete": complete, "rows": rows}, indent=1))
    reference = meta["host_probe_reference_s"]
    print(
        f"\nms; est = the estimator on an H200 (host at {meta['host_us_per_op_profile']:.1f} us/op); probe "
        f"reference round {'-' if reference is None else f'{1e6 * reference:.1f} us'}; "
        "syncs: CUDA sync warnings in one step"
    )
    if args.out:
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
