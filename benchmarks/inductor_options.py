"""Which torch._inductor settings make the compiled tuned training step faster.

`fitbench run --exec tuned` compiles the step's forward and loss with torch.compile (inductor,
mode "default"; AOT autograd compiles the backward at its first call), then captures forward,
backward and optimizer step in one CUDA graph (backends/torch/tuned.py). Inductor has settings
beyond its modes that change the kernels it generates; this script measures a few of them on the
same step, so fitbench's default can be chosen from data:

    baseline             what fitbench runs today: inductor's defaults plus its own options
    combo_kernels        combo_kernels: independent small kernels fused side by side into one
    coordinate_descent   coordinate_descent_tuning: each generated Triton kernel's block sizes
                         tuned by coordinate descent while compiling (longer compiles)
    both                 the two together

fitbench's own options (tuned.py INDUCTOR_OPTIONS: combo_kernels; ENCODER_INDUCTOR_OPTIONS for the
BERT-style encoder: fallback_random) go to torch.compile, whose options win over a set's patch of
the same setting: a set can add settings, not turn those off (change the constants to compare).

Each set is applied with `torch._inductor.config.patch(options)` around the whole life of one tuned
session, opened in this process as tuned_profile.py opens it (the compile and the capture happen
while it opens). Then warm-up replays, --windows timed windows of --steps replays (a CUDA sync
around each; the median window is the step time, max - min over the median its spread; without
--steps a window holds as many replays as fill 0.25 s, chosen on the scenario's first set and kept
for its other sets), the loss the graph returned at its last replay (so a set that changes the
numbers shows: every set compiled and graphed runs the same number of updates from the same seed
and batch; one that fell back to the uncompiled step runs one fewer, its compile step), the compile
seconds and the session's notes (compiled_step, cuda_graph, warnings). The session is closed, then
torch._dynamo.reset() and the allocator's cache emptied before the next set. A set that raises
keeps its one-line error in its row and the run goes on. Sets run in turn, each on every scenario
(so a run cut short has the same sets of each); --budget-s starts no set that would end past that
many seconds (1.5x the scenario's longest set so far, 90 s before any), its row says skipped, and
the table is still printed.

Every set compiles from scratch: inductor's FX-graph cache, AOT autograd's cache and the local
autotuning cache are turned off for each set and the loaded kernel modules dropped after it
(--keep-caches leaves all that on), so compile seconds compare and no set reuses another's tuned
kernels. Triton's own cache of compiled binaries stays (it saves compile time only, never changes
a kernel).

The rows go to benchmarks/results/inductor-options-<gpu>-<date>.json, rewritten after each row
(a run stopped midway keeps what it measured), and a table is printed: step ms, spread, samples/s,
speed-up against baseline, compile seconds, loss, whether the step was compiled and graphed.

    PYTHONPATH=src python benchmarks/inductor_options.py --only resnet50-cifar10 --budget-s 560
    PYTHONPATH=src python benchmarks/inductor_options.py --only bert-base-imdb --budget-s 560
    PYTHONPATH=src python benchmarks/inductor_options.py --budget-s 560     # both scenarios, one call
    PYTHONPATH=src python benchmarks/inductor_options.py --only-sets baseline,combo_kernels
    PYTHONPATH=src python benchmarks/inductor_options.py --cpu --tiny --out /tmp/io   # smoke test

On an H200 a set takes about its compile (ResNet-50 ~45-60 s, BERT-base ~30 s from a cold cache;
coordinate descent adds to it, by a third to double in PyTorch's and others' reports) plus ~15 s:
one scenario ~4-6 min, both ~8-11 min, which is why --budget-s exists. Settings inside a group
are named with a dot: e.g. --sets 'cd_rblock={"coordinate_descent_tuning": true,
"triton.persistent_reductions": false}' (a persistent reduction's RBLOCK is fixed, so coordinate
descent cannot tune it; PyTorch's own coordinate-descent experiments turned them off).

On a CPU the step is not compiled (inductor's GPU code needs CUDA with Triton): the rows say so
(compiled False, the warning kept), which is what the smoke test checks: the wiring.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import math
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import compiled_step  # benchmarks/ on the path: the scenarios (workloads) compiled_step measures
import speed  # benchmarks/ on the path: the local card
from fitbench.core.units import format_rate
from fitbench.results.table import render_table

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_SCENARIOS = ("resnet50-cifar10", "bert-base-imdb")
#: in the order they run (the quick compiles first: a --budget-s cut drops the slow ones)
DEFAULT_SETS: dict[str, dict[str, Any]] = {
    "baseline": {},
    "combo_kernels": {"combo_kernels": True},
    "coordinate_descent": {"coordinate_descent_tuning": True},
    "both": {"coordinate_descent_tuning": True, "combo_kernels": True},
}
#: inductor settings that only cache work between compiles (turned off per set unless --keep-caches)
FRESH_INDUCTOR = {"fx_graph_cache": False, "autotune_local_cache": False}
FRESH_FUNCTORCH = {"enable_autograd_cache": False}
WINDOW_SECONDS = 0.25  # a timed window without --steps (ResNet-50 b128 at 32 px: ~2.6 ms a step)
FIRST_SET_GUESS_S = 90.0  # --budget-s: what a scenario's first set is taken to need (compile ~30-60 s)


# -- the option sets ---------------------------------------------------------------------------------
def parse_set(text: str) -> tuple[str, dict[str, Any]]:
    """NAME=JSON (a JSON object of torch._inductor.config settings) -> (name, settings)."""
    name, sep, body = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"expected NAME=JSON, got {text!r}")
    try:
        options = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not JSON ({exc})") from exc
    if not isinstance(options, dict):
        raise ValueError(f"{name}: expected a JSON object of settings, got {body!r}")
    return name, options


def option_sets(added: list[str], only: str | None) -> dict[str, dict[str, Any]]:
    """The default sets, with --sets added or overriding by name, then --only-sets picked (in the
    order the sets are defined; baseline first where it is kept)."""
    sets = {name: dict(options) for name, options in DEFAULT_SETS.items()}
    for text in added:
        name, options = parse_set(text)
        sets[name] = options
    if only:
        wanted = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in sets]
        if unknown or not wanted:
            raise ValueError(
                f"unknown set(s) {', '.join(unknown) or '(none)'}: choose from {', '.join(sets)}"
            )
        sets = {n: o for n, o in sets.items() if n in wanted}
    return sets


@contextlib.contextmanager
def patched(options: dict[str, Any], *, fresh: bool) -> Iterator[None]:
    """torch._inductor.config patched with `options` (an unknown setting raises), and with `fresh`
    the compile caches off (those of this torch that exist). A setting named with its module,
    "fitbench.<module path>.<NAME>", patches that fitbench constant instead (e.g.
    "fitbench.backends.torch.compact_encoder.FUSED_RESIDUAL_NORM": false compares the tuned
    encoder's unfused residual sites)."""
    import importlib
    from unittest import mock

    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    ours = {k: v for k, v in options.items() if k.startswith("fitbench.")}
    options = {k: v for k, v in options.items() if k not in ours}
    with contextlib.ExitStack() as stack:
        for name, value in ours.items():
            module, _, attribute = name.rpartition(".")
            target = importlib.import_module(module)
            if not hasattr(target, attribute):
                raise AttributeError(f"{module} has no setting {attribute}")
            stack.enter_context(mock.patch.object(target, attribute, value))
        if fresh:
            stack.enter_context(
                inductor_config.patch(
                    {k: v for k, v in FRESH_INDUCTOR.items() if hasattr(inductor_config, k)}
                )
            )
            stack.enter_context(
                functorch_config.patch(
                    {k: v for k, v in FRESH_FUNCTORCH.items() if hasattr(functorch_config, k)}
                )
            )
        stack.enter_context(inductor_config.patch(dict(options)))
        yield


def forget_kernels() -> None:
    """Drop the generated kernel modules this process loaded (each holds its autotuned launchers),
    so the next set's identical kernels are tuned again rather than reused."""
    try:
        from torch._inductor.codecache import PyCodeCache

        PyCodeCache.cache_clear()
    except Exception:  # an internal of inductor: without it only compile seconds are affected
        pass


# -- one set on one workload -------------------------------------------------------------------------
def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def read_loss(session: Any) -> tuple[float | None, str | None]:
    """The loss the step returned last: the graph's output after its last replay, or (no graph:
    the eager step keeps no output) the loss of one more eager step."""
    out = getattr(session, "static_out", None)
    if out is not None:
        return float(out.float().mean()), "the graph's output at its last replay"
    if hasattr(session, "_body") and hasattr(session, "_before_capture"):
        session._before_capture()
        out = session._body()
        session.sync()
        return float(out.float().mean()), "one more eager step (no graph)"
    return None, None


def steps_for_window(session: Any, *, warmup: int, window_s: float) -> int:
    """Steps a timed window holds so that it lasts about `window_s` (from the warm-up, timed with
    a device sync before and after; 5 to 1000)."""
    session.sync()
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        session.step()
    session.sync()
    per_step = (time.perf_counter() - t0) / max(warmup, 1)
    return int(min(max(math.ceil(window_s / max(per_step, 1e-6)), 5), 1000))


def time_windows(session: Any, *, warmup: int, steps: int | None, windows: int) -> tuple[int, list[float]]:
    """(steps a window, seconds a step in each of `windows` windows), after `warmup` steps (a device
    sync before and after each window). `steps` None: as many as fill WINDOW_SECONDS."""
    if steps is None:
        steps = steps_for_window(session, warmup=warmup, window_s=WINDOW_SECONDS)
    else:
        for _ in range(warmup):
            session.step()
        session.sync()
    out = []
    for _ in range(windows):
        t0 = time.perf_counter()
        for _ in range(steps):
            session.step()
        session.sync()
        out.append((time.perf_counter() - t0) / steps)
    return steps, out


def measure_set(
    workload: Any,
    name: str,
    options: dict[str, Any],
    *,
    device: str,
    warmup: int,
    steps: int | None,
    windows: int,
    fresh: bool,
) -> dict[str, Any]:
    """One option set on one workload: the row (status ok, oom or error; never raises). `steps`
    None: the window's steps are chosen from the warm-up (the row's steps_per_window)."""
    import torch

    from fitbench.backends import get_backend
    from fitbench.backends.base import RunOptions

    backend = get_backend("torch")
    row: dict[str, Any] = {"set": name, "options": dict(options), "status": "ok", "error": None}
    session = None
    notes: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        with patched(options, fresh=fresh):
            session = backend.open(workload, RunOptions(device=device, exec_mode="tuned", compile_step=True))
            notes = dict(session.notes)  # what compiled and what was captured, kept if timing fails
            row["open_seconds"] = time.perf_counter() - started
            steps, windows_s = time_windows(session, warmup=warmup, steps=steps, windows=windows)
            row["steps_per_window"] = steps
            row["loss"], row["loss_from"] = read_loss(session)
        step = statistics.median(windows_s)
        row.update(
            step_seconds=step,
            window_seconds=windows_s,
            spread=(max(windows_s) - min(windows_s)) / step,
            samples_per_second=workload.batch_size / step,
        )
    except Exception as exc:  # the set's error is its row; the run goes on
        row.update(status="oom" if backend.is_oom(exc) else "error", error=_one_line(exc))
    finally:
        if session is not None:
            with contextlib.suppress(Exception):
                session.close()
        session = None
        torch._dynamo.reset()
        if fresh:
            forget_kernels()
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    row.update(
        compiled_step=notes.get("compiled_step"),
        compile_mode=notes.get("compile_mode"),
        cuda_graph=notes.get("cuda_graph"),
        compile_seconds=notes.get("compile_seconds"),
        capture_seconds=notes.get("capture_seconds"),
        precision_in_effect=notes.get("precision_in_effect"),
        warnings=list(notes.get("warnings") or []),
        wall_seconds=time.perf_counter() - started,
    )
    return row


def add_speedups(rows: list[dict[str, Any]]) -> None:
    """Each row's speed-up and loss difference against its scenario's baseline row (None where
    either number is missing)."""
    base = {r["scenario"]: r for r in rows if r["set"] == "baseline"}
    for r in rows:
        b = base.get(r["scenario"], {})
        step, base_step = r.get("step_seconds"), b.get("step_seconds")
        loss, base_loss = r.get("loss"), b.get("loss")
        r["speedup"] = base_step / step if base_step and step else None
        r["loss_delta"] = loss - base_loss if loss is not None and base_loss is not None else None


BUDGET_SKIP = "not started: the --budget-s time would have run out"


def fits_budget(rows: list[dict[str, Any]], scenario: str, budget_s: float | None, elapsed_s: float) -> bool:
    """Whether one more set of `scenario` should start: no budget, or the elapsed time plus 1.5x the
    longest set of that scenario so far (FIRST_SET_GUESS_S before any) stays within it."""
    if not budget_s:
        return True
    walls = [r["wall_seconds"] for r in rows if r["scenario"] == scenario and r.get("wall_seconds")]
    expected = 1.5 * max(walls) if walls else FIRST_SET_GUESS_S
    return elapsed_s + expected <= budget_s


def _said(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return f"{row['status']}: {row['error']}"
    return (
        f"{row['step_seconds'] * 1e3:.3f} ms a step (spread {row['spread']:.1%}, {row['steps_per_window']} "
        f"steps a window), compiled {row['compiled_step']}, graph {row['cuda_graph']}, "
        f"compile {row['compile_seconds']} s, loss {row['loss']}"
    )


# -- output -----------------------------------------------------------------------------------------
def _yes_no(value: Any) -> str:
    return "-" if value is None else ("yes" if value else "no")


def table(rows: list[dict[str, Any]]) -> str:
    cells = []
    for r in rows:
        ok = r["status"] == "ok"
        cells.append(
            [
                r["scenario"] + (" (tiny)" if r.get("tiny") else ""),
                r["set"],
                f"{r['step_seconds'] * 1e3:.3f}" if ok else r["status"],
                f"{r['spread']:.1%}" if ok else "",
                format_rate(r["samples_per_second"], "samples/s") if ok else "",
                f"{r['speedup']:.3f}x" if r.get("speedup") else "",
                f"{r['compile_seconds']:.1f}" if r.get("compile_seconds") else "",
                f"{r['loss']:.6g}" if r.get("loss") is not None else "",
                _yes_no(r.get("compiled_step")),
                _yes_no(r.get("cuda_graph")),
            ]
        )
    head = [
        "scenario",
        "set",
        "step ms",
        "spread",
        "rate",
        "vs baseline",
        "compile s",
        "loss",
        "compiled",
        "graph",
    ]
    out = render_table(head, cells, align="llrrrrrrll")
    errors = [f"  {r['scenario']} {r['set']}: {r['error']}" for r in rows if r["error"]]
    warned = [
        f"  {r['scenario']} {r['set']}: {w}"
        for r in rows
        for w in r.get("warnings", [])
        if "compile" in w or "capture" in w
    ]
    if errors:
        out += "\nerrors:\n" + "\n".join(errors)
    if warned:
        out += "\ncompile / capture warnings:\n" + "\n".join(warned)
    return out


def output_path(folder: Path, gpu_slug: str) -> Path:
    day = dt.date.today().isoformat()
    path = folder / f"inductor-options-{gpu_slug}-{day}.json"
    n = 2
    while path.exists():
        path = folder / f"inductor-options-{gpu_slug}-{day}-{n}.json"
        n += 1
    return path


def _versions() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (the step is not compiled there)")
    parser.add_argument("--tiny", action="store_true", help="tiny variants of the workloads")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default cuda; cpu with --cpu)")
    parser.add_argument("--gpu", default=None, help="catalog GPU for the file name (default: the local GPU)")
    parser.add_argument(
        "--only",
        action="append",
        choices=[s.name for s in compiled_step.SCENARIOS],
        help=f"a scenario (repeatable; default {', '.join(DEFAULT_SCENARIOS)})",
    )
    parser.add_argument(
        "--sets",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="add or override a set of torch._inductor.config settings, e.g. "
        "cd='{\"coordinate_descent_tuning\": true}' (repeatable)",
    )
    parser.add_argument("--only-sets", default=None, help="comma-separated set names to run (default: all)")
    parser.add_argument("--warmup", type=int, default=10, help="replays before timing (default 10)")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"replays a timed window (default: as many as fill {WINDOW_SECONDS} s, chosen on a scenario's "
        "first set and kept for the others)",
    )
    parser.add_argument(
        "--windows", type=int, default=5, help="timed windows; the median is kept (default 5)"
    )
    parser.add_argument(
        "--keep-caches",
        action="store_true",
        help="leave inductor's compile caches on (compile seconds then vary)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="start no set that would end past this many seconds from the start (its row says skipped)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON result")
    args = parser.parse_args(argv)
    try:
        sets = option_sets(args.sets, args.only_sets)
    except ValueError as exc:
        parser.error(str(exc))
    if (args.steps is not None and args.steps < 1) or args.windows < 1 or args.warmup < 0:
        parser.error("--steps and --windows must be at least 1, --warmup at least 0")

    device = args.device or ("cpu" if args.cpu else "cuda")
    gpu, note = speed.local_gpu(args.gpu, device)
    if note:
        from fitbench.advise.i18n import t

        params = {k: v for k, v in note.items() if k != "key"}
        print(f"note: {t(note['key'], 'en', **params)}", file=sys.stderr)
    from fitbench.backends import get_backend

    info = get_backend("torch").device_info(device)
    names = args.only or list(DEFAULT_SCENARIOS)
    chosen = [s for s in compiled_step.SCENARIOS if s.name in names]
    gpu_slug = (
        "cpu" if device == "cpu" else (gpu.id if gpu is not None else speed.slug(str(info.get("name"))))
    )
    args.out.mkdir(parents=True, exist_ok=True)
    path = output_path(args.out, gpu_slug)
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    workloads: dict[str, Any] = {}

    def save() -> None:
        """The record so far (rewritten after each row: a run stopped midway keeps its rows)."""
        record = {
            **speed.run_header(
                "inductor_options", argv, started=started, t0=t0, device=device, device_name=info.get("name")
            ),
            "versions": _versions(),
            "gpu": gpu.id if gpu is not None else None,
            "settings": {
                "tiny": args.tiny,
                "warmup": args.warmup,
                "steps": args.steps,
                "window_seconds_without_steps": WINDOW_SECONDS,
                "windows": args.windows,
                "budget_s": args.budget_s,
                "sets": sets,
                "fresh_caches": not args.keep_caches,
                "exec": "tuned, compile_step=True (inductor, mode default), one CUDA graph",
                "step_seconds": "median of the windows; spread = (max - min) / median",
            },
            "workloads": workloads,
            "rows": rows,
        }
        path.write_text(json.dumps(record, indent=1, default=str) + "\n")

    total, n = len(chosen) * len(sets), 0
    built = {s.name: s.build(args.tiny) for s in chosen}
    workloads.update({name: w.to_dict() for name, w in built.items()})
    steps_for: dict[str, int | None] = {s.name: args.steps for s in chosen}
    for name, options in sets.items():  # each set on every scenario, then the next set
        for scenario in chosen:
            n += 1
            label = f"[{n}/{total}] {scenario.name} {name} {json.dumps(options)}"
            if not fits_budget(rows, scenario.name, args.budget_s, time.perf_counter() - t0):
                row = {"set": name, "options": dict(options), "status": "skipped", "error": BUDGET_SKIP}
                print(f"  {label}: skipped ({BUDGET_SKIP})", file=sys.stderr, flush=True)
            else:
                print(f"  {label} ...", file=sys.stderr, flush=True)
                row = measure_set(
                    built[scenario.name],
                    name,
                    options,
                    device=device,
                    warmup=args.warmup,
                    steps=steps_for[scenario.name],
                    windows=args.windows,
                    fresh=not args.keep_caches,
                )
                # Every later set of the scenario runs as many steps: the losses stay comparable.
                steps_for[scenario.name] = steps_for[scenario.name] or row.get("steps_per_window")
                print(f"  {label}: {_said(row)} ({row['wall_seconds']:.0f} s)", file=sys.stderr, flush=True)
            rows.append({"scenario": scenario.name, "tiny": args.tiny, **row})
            add_speedups(rows)
            save()
    order = [sc.name for sc in chosen]
    print(table(sorted(rows, key=lambda r: order.index(r["scenario"]))))  # stable: sets in run order
    print(f"wrote {path} ({(time.perf_counter() - t0) / 60:.1f} min)")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
