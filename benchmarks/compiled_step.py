"""The tuned step compiled (`fitbench run --exec tuned`, its default on a CUDA GPU with Triton)
against the uncompiled one (`--no-compile`).

`--exec tuned` captures forward + backward + optimizer step in one CUDA graph, which removes the
host but keeps every eager kernel: on an H200 BERT-base (seq 512, b16) spends ~12 of its ~19.5 ms
of kernels outside GEMMs and attention (LayerNorm and residual adds in FP32, bias-gradient
reductions, autocast's casts, fused AdamW), and ResNet-50 at 32 px runs ~811 kernels a step
(batch norm 1.31 ms in 265 launches). `--compile` runs the forward and loss through
torch.compile (inductor) before capture, so those small kernels fuse. This script measures both
variants of each workload through fitbench's own runner (a fresh child process per measurement,
as `fitbench run` does):

    resnet50-cifar10     ResNet-50 training, CIFAR-10 shapes, batch 128, bf16 autocast (img/s)
    bert-base-imdb       BERT-base fine-tuning, seq 512, batch 16, bf16 autocast     (ms/step)
    llama-3.2-1b-train   the bundled Llama 3.2 1B config trained as an LM, seq 2048, batch 4,
                         bf16 autocast, AdamW                                        (MFU, tok/s)

For each: step time, samples/s (and tokens/s for transformers), peak memory, load and compile
seconds, the speed-up of the compiled step, and the share of the dense bf16 peak that the
estimator's FLOPs of the step reach (MFU). Every number, with the full measurements, goes to one
JSON file, benchmarks/results/compiled-step-<gpu>-<date>.json (rewritten after each scenario, so
a run stopped midway keeps what it measured). With --profile each variant is also opened in this
process and profiled (benchmarks/tuned_profile.py's kernel classes: the profile behind each gain;
about 3-5 more minutes on an H200, the compiles repeated); --profile-only does that alone.

    PYTHONPATH=src python benchmarks/compiled_step.py                       # ~5-7 min on an H200
    PYTHONPATH=src python benchmarks/compiled_step.py --profile-only        # kernel classes, ~3-5 min
    PYTHONPATH=src python benchmarks/compiled_step.py --only bert-base-imdb --autotune
    PYTHONPATH=src python benchmarks/compiled_step.py --cpu --tiny --out /tmp/cs   # smoke test
    PYTHONPATH=src python benchmarks/compiled_step.py --compiled-only --out DIR   # peaks, ~3-4 min

On a CPU --compile cannot run (inductor's GPU code needs CUDA with Triton): the compiled rows
say so in their warnings and run the uncompiled step, which is what the smoke test checks.
Both variants name their choice (compile_step False or True), never the default (None), so the
rows keep their meaning whatever `fitbench run` defaults to.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import speed  # benchmarks/ on the path: the local card and the precision tuned ran
from fitbench.advise.diagnosis import compute_class
from fitbench.backends.base import RunOptions
from fitbench.core.gpu import GpuSpec
from fitbench.core.units import format_bytes, format_rate, format_seconds
from fitbench.estimate.api import estimate
from fitbench.measure.runner import measure
from fitbench.results.table import render_table
from fitbench.workloads.library import workload_for_model
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
TIMEOUT_S = 600.0  # a measurement: inductor compiles a training step in 30-120 s on an H200
DEFAULT_MIN_SECONDS = 2.0  # timed seconds a measurement (the runner repeats unstable windows)


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    build: Callable[[bool], Workload]  # tiny -> the workload
    text: str


def _llama_1b(tiny: bool) -> Workload:
    if tiny:  # the tiny Llama preset trained the same way
        return get_workload("llm-6b", tiny=True, mode="train", seq_len=64, batch_size=2, precision="amp-bf16")
    return workload_for_model(
        "llama-3.2-1b-instruct", mode="train", seq_len=2048, batch_size=4, precision="amp-bf16"
    )


SCENARIOS = (
    Scenario(
        name="resnet50-cifar10",
        build=lambda tiny: get_workload("resnet50-cifar10", tiny=tiny, precision="amp-bf16"),
        text="ResNet-50 CIFAR-10 b128 training",
    ),
    Scenario(
        name="bert-base-imdb",
        build=lambda tiny: get_workload("bert-base-imdb", tiny=tiny, precision="amp-bf16"),
        text="BERT-base seq 512 b16 training",
    ),
    Scenario(name="llama-3.2-1b-train", build=_llama_1b, text="Llama 3.2 1B seq 2048 b4 LM training"),
)


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str
    compile_step: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def options(self, device: str) -> RunOptions:
        return RunOptions(
            device=device, exec_mode="tuned", compile_step=self.compile_step, extra=dict(self.extra)
        )


UNCOMPILED = Variant(name="uncompiled", compile_step=False)
COMPILED = Variant(name="compiled", compile_step=True)
AUTOTUNED = Variant(
    name="compiled-autotune", compile_step=True, extra={"compile_mode": "max-autotune-no-cudagraphs"}
)


# -- one measurement ------------------------------------------------------------------------------
def _printer(label: str) -> Callable[[dict[str, Any]], None]:
    """The runner's progress events, one line per new phase (compiles are long: show they run)."""
    started = time.perf_counter()
    last: list[str | None] = [None]

    def show(event: dict[str, Any]) -> None:
        phase = event.get("phase") or event.get("event")
        if phase and phase != last[0]:
            last[0] = phase
            print(
                f"    {label}: {phase} (+{time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True
            )

    return show


def row_of(m: dict[str, Any], workload: Workload, gpu: GpuSpec | None, variant: Variant) -> dict[str, Any]:
    """The figures of one measurement (the whole measurement kept beside them)."""
    notes = m.get("backend_notes") or {}
    step = m.get("step_seconds") if m.get("status") == "ok" else None
    ran = workload.replace(precision=speed.tuned_precision(workload, gpu, m))
    est = estimate(ran, gpu, framework="torch", exec_mode="tuned").to_dict() if gpu is not None else None
    mfu = None
    if est is not None and step:
        mfu = est["flops_per_step"] / step / gpu.peak(compute_class(ran.precision, ran.family))
    tokens = workload.batch_size * workload.seq_len if not workload.is_resnet and workload.seq_len else None
    return {
        "variant": variant.name,
        "compile_requested": variant.compile_step,
        "compile_mode_requested": variant.extra.get("compile_mode", "default")
        if variant.compile_step
        else None,
        "status": m.get("status"),
        "error": m.get("error"),
        "precision_in_effect": m.get("precision_in_effect"),
        "compiled_step": notes.get("compiled_step"),
        "compile_mode": notes.get("compile_mode"),
        "cuda_graph": notes.get("cuda_graph"),
        "step_seconds": step,
        "step_p90_seconds": m.get("step_p90_seconds"),
        "samples_per_second": m.get("samples_per_second") if step else None,
        "tokens_per_second": tokens / step if tokens and step else None,
        "peak_memory_bytes": m.get("peak_memory_bytes"),
        "load_seconds": m.get("load_seconds"),
        "compile_seconds": notes.get("compile_seconds"),
        "capture_seconds": notes.get("capture_seconds"),
        "wall_seconds": m.get("wall_seconds"),
        "mfu": mfu,
        "estimate_step_seconds": est.get("step_seconds") if est else None,
        "estimate_flops_per_step": est.get("flops_per_step") if est else None,
        "warnings": list(m.get("warnings") or []),
        "measurement": m,
    }


def run_scenario(
    scenario: Scenario,
    variants: list[Variant],
    *,
    tiny: bool,
    device: str,
    gpu: GpuSpec | None,
    min_seconds: float,
    counter: list[int],
    total: int,
) -> dict[str, Any]:
    workload = scenario.build(tiny)
    out: dict[str, Any] = {
        "scenario": scenario.name,
        "text": scenario.text,
        "tiny": tiny,
        "workload": workload.to_dict(),
        "runs": {},
    }
    for variant in variants:
        counter[0] += 1
        label = f"[{counter[0]}/{total}] {scenario.name} {variant.name}"
        print(f"  {label} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        m = measure(
            workload,
            "torch",
            variant.options(device),
            timeout_s=TIMEOUT_S,
            min_seconds=min_seconds,
            progress=_printer(label),
        )
        row = row_of(m, workload, gpu, variant)
        out["runs"][variant.name] = row
        said = (
            f"{_fmt_step(row['step_seconds'])} a step, compiled_step={row['compiled_step']}, "
            f"compile {row['compile_seconds']} s"
            if row["status"] == "ok"
            else f"{row['status']}: {row['error']}"
        )
        print(f"  {label}: {said} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        for warning in row["warnings"]:
            if "compile" in warning:
                print(f"    warning: {warning}", file=sys.stderr, flush=True)
    base = out["runs"].get(UNCOMPILED.name) or {"step_seconds": None}  # --compiled-only: none
    for name, row in out["runs"].items():
        if name != UNCOMPILED.name:
            row["speedup"] = (
                base["step_seconds"] / row["step_seconds"]
                if base["step_seconds"] and row["step_seconds"]
                else None
            )
    return out


# -- the profile behind each gain -------------------------------------------------------------------
def profile_scenario(
    scenario: Scenario, variants: list[Variant], *, tiny: bool, device: str, steps: int
) -> dict[str, Any]:
    """Each variant opened in this process and profiled: kernel classes a step (tuned_profile)."""
    import torch

    import tuned_profile

    workload = scenario.build(tiny)
    out: dict[str, Any] = {}
    for variant in variants:
        print(f"  profile {scenario.name} {variant.name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            out[variant.name] = tuned_profile.profile_workload(
                workload,
                variant.options(device),
                label=f"{scenario.name} {variant.name}",
                steps=steps,
                gpu_id=None,
            )
        except Exception as exc:  # a failed profile is recorded, the measurements stand
            out[variant.name] = {"error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
        finally:
            torch._dynamo.reset()
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        print(f"  profile {scenario.name} {variant.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return out


def profile_table(scenario: str, profiles: dict[str, dict[str, Any]]) -> str:
    """Kernel milliseconds and launches a step by class, one column per variant."""
    names = [n for n, p in profiles.items() if "by_class" in p]
    if not names:
        return f"{scenario}: no profile ({'; '.join(p.get('error', '') for p in profiles.values())})"
    classes: list[str] = []
    for n in names:
        classes += [c for c in profiles[n]["by_class"] if c not in classes]
    rows = []
    for c in classes:
        cells = []
        for n in names:
            got = profiles[n]["by_class"].get(c)
            cells.append(f"{got['seconds'] * 1e3:.3f} ms / {got['launches']:.0f}" if got else "-")
        rows.append([c, *cells])
    for label, key in (("kernels", "kernel_seconds"), ("step", "step_seconds"), ("gaps", "gap_seconds")):
        rows.append([label, *(f"{profiles[n][key] * 1e3:.3f} ms" for n in names)])
    rows.append(["launches", *(f"{profiles[n]['launches']:.0f}" for n in names)])
    rows.append(
        [
            "generated (triton_*)",
            *(
                f"{profiles[n]['generated_kernels']['seconds'] * 1e3:.3f} ms / "
                f"{profiles[n]['generated_kernels']['launches']:.0f}"
                for n in names
            ),
        ]
    )
    rows.append(["last output (loss)", *(_fmt_num(profiles[n].get("last_output_mean")) for n in names)])
    return f"{scenario}: kernel time / launches a step\n" + render_table(
        ["class", *names], rows, align="l" + "r" * len(names)
    )


# -- output ---------------------------------------------------------------------------------------
def _fmt_step(value: float | None) -> str:
    return format_seconds(value) if value else "-"


def _fmt_num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def table(results: list[dict[str, Any]]) -> str:
    rows: list[list[str]] = []
    for r in results:
        for name, run in r["runs"].items():
            ok = run["status"] == "ok"
            rate = ""
            if ok and run["samples_per_second"]:
                rate = format_rate(
                    run["samples_per_second"], "img/s" if "resnet" in r["scenario"] else "samples/s"
                )
            if ok and run["tokens_per_second"]:
                rate += f", {format_rate(run['tokens_per_second'], 'tok/s')}"
            rows.append(
                [
                    r["scenario"] + (" (tiny)" if r["tiny"] else ""),
                    name + ("" if run["compiled_step"] or not run["compile_requested"] else " (fell back)"),
                    _fmt_step(run["step_seconds"]) if ok else str(run["status"]),
                    rate,
                    f"{run['speedup']:.2f}x" if run.get("speedup") else "",
                    f"{run['compile_seconds']:.0f} s" if run["compile_seconds"] else "",
                    f"{run['load_seconds']:.0f} s" if run["load_seconds"] else "",
                    format_bytes(run["peak_memory_bytes"]) if run["peak_memory_bytes"] else "-",
                    f"{run['mfu']:.1%}" if run["mfu"] else "",
                    _fmt_step(run["estimate_step_seconds"]),
                ]
            )
    head = [
        "scenario",
        "variant",
        "step",
        "rate",
        "speed-up",
        "compile",
        "load",
        "peak mem",
        "MFU",
        "estimate",
    ]
    return render_table(head, rows, align="llrrrrrrrr")


def output_path(folder: Path, gpu_slug: str) -> Path:
    day = dt.date.today().isoformat()
    path = folder / f"compiled-step-{gpu_slug}-{day}.json"
    n = 2
    while path.exists():
        path = folder / f"compiled-step-{gpu_slug}-{day}-{n}.json"
        n += 1
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cpu", action="store_true", help="measure on the CPU (no CUDA needed)")
    parser.add_argument("--tiny", action="store_true", help="tiny variants of the workloads")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default cuda; cpu with --cpu)")
    parser.add_argument(
        "--gpu", default=None, help="catalog GPU for estimates and MFU (default: the local GPU)"
    )
    parser.add_argument("--only", action="append", choices=[s.name for s in SCENARIOS], help="one scenario")
    parser.add_argument(
        "--autotune", action="store_true", help="also measure mode max-autotune-no-cudagraphs (minutes more)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also profile each variant's kernels in-process"
    )
    parser.add_argument(
        "--profile-only",
        action="store_true",
        help="profile without the runner's measurements (a second invocation that fits a time limit)",
    )
    parser.add_argument(
        "--compiled-only",
        action="store_true",
        help="measure the compiled variant only (its peaks; no speed-up), ~3-4 min on an H200",
    )
    parser.add_argument("--profile-steps", type=int, default=20, help="timed replays before each profile")
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=DEFAULT_MIN_SECONDS,
        help="timed seconds a measurement (default 2)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON result")
    args = parser.parse_args(argv)

    device = args.device or ("cpu" if args.cpu else "cuda")
    gpu, note = speed.local_gpu(args.gpu, device)
    if note:
        print(f"note: {note}", file=sys.stderr)
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only]
    variants = [
        *([] if args.compiled_only else [UNCOMPILED]),
        COMPILED,
        *([AUTOTUNED] if args.autotune else []),
    ]
    gpu_slug = "cpu" if device == "cpu" else (gpu.id if gpu is not None else speed.slug(device))
    args.out.mkdir(parents=True, exist_ok=True)
    path = output_path(args.out, gpu_slug)
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    settings = {
        "tiny": args.tiny,
        "min_seconds": args.min_seconds,
        "timeout_s": TIMEOUT_S,
        "variants": [v.name for v in variants],
        "profile": args.profile or args.profile_only,
        "measured": not args.profile_only,
        "mfu": "estimator's flops_per_step (fitbench.estimate, tuned) / step_seconds / the card's dense "
        "peak of the precision that ran",
    }

    def save() -> None:
        """The record so far (rewritten after each scenario: a run stopped midway keeps its rows)."""
        record = {
            **speed.run_header(
                "compiled_step",
                argv,
                started=started,
                t0=t0,
                device=device,
                device_name=_device_name(results),
            ),
            "versions": speed.environment(results),
            "gpu": {"id": gpu.id, "name": gpu.name, "peak_flops": dict(gpu.peak_flops)}
            if gpu is not None
            else None,
            "settings": settings,
            "scenarios": results,
        }
        path.write_text(json.dumps(record, indent=1, default=str) + "\n")

    counter, total = [0], len(chosen) * len(variants)
    for s in chosen:
        if args.profile_only:
            workload = s.build(args.tiny)
            results.append(
                {
                    "scenario": s.name,
                    "text": s.text,
                    "tiny": args.tiny,
                    "workload": workload.to_dict(),
                    "runs": {},
                }
            )
        else:
            results.append(
                run_scenario(
                    s,
                    variants,
                    tiny=args.tiny,
                    device=device,
                    gpu=gpu,
                    min_seconds=args.min_seconds,
                    counter=counter,
                    total=total,
                )
            )
        save()
    if not args.profile_only:
        print(table(results))
        print(f"measurements: {(time.perf_counter() - t0) / 60:.1f} min", file=sys.stderr)
    if args.profile or args.profile_only:
        for s, r in zip(chosen, results, strict=True):
            r["profile"] = profile_scenario(
                s, variants, tiny=args.tiny, device=device, steps=args.profile_steps
            )
            print(profile_table(s.name, r["profile"]))
            save()
    save()
    print(f"wrote {path} ({(time.perf_counter() - t0) / 60:.1f} min)")
    return 0 if all(run["status"] == "ok" for r in results for run in r["runs"].values()) else 1


def _device_name(results: list[dict[str, Any]]) -> str | None:
    return next(
        (
            run["measurement"].get("device_name")
            for r in results
            for run in r["runs"].values()
            if run["measurement"].get("device_name")
        ),
        None,
    )


if __name__ == "__main__":
    raise SystemExit(main())
