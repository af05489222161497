"""What a LoRA training step really issues on the host, beside the estimator's operation count.

The estimator charges an eager training step `host_seconds_per_op` for every framework
operation of its kernel lists (a forward operation 1, its backward BACKWARD_HOST_SHARE), a
unit fitted on full training steps. A LoRA step changes what there is to issue: the frozen
base computes no weight gradients and accumulates none, peft's per-Linear forward adds its
own operations (the cast to the FP32 adapter dtype, dropout, A, B, the scaling, the add and
the cast back) and checkpointing recomputes the forward inside backward. This script counts,
per training step of the torch backend's own session (`fitbench run`'s code: the model, the
LoraConfig, checkpointing and the optimizer exactly as they run there):

* aten operations reaching the dispatcher (a TorchDispatchMode), in forward (loss included),
  in backward (with checkpointing: the recomputed forward too) and in the optimizer step;
  and of those the ones that launch a kernel (views, transposes, detaches and the like launch
  none);
* the autograd nodes that backward executes (a pre-hook on every node of the graph), and of
  them the AccumulateGrad nodes;
* Python-level torch calls in forward (a TorchFunctionMode, less attribute reads), the unit of
  estimate/generate_ops.py (the mode does not reach the forward that checkpointing recomputes
  inside backward: that one shows in the aten operations and kernels);

at two depths, so each splits into a per-layer part and a fixed part, for full fine-tuning,
the frozen base alone ("frozen": every weight frozen, the embeddings' output requiring a
gradient, as under LoRA), LoRA, and each with checkpointing; and beside them the estimator's
operations for the same workload (forward, backward with the recomputed forward, host total;
`--rank` and the width do not change a count). `--calibration` adds whole-step counts of the
host-bound points that `host_seconds_per_op` was fitted on (ResNet-50 at 32 px, BERT-base at
batch 2); `--time N` times N whole steps per depth (on a GPU at tiny width the GPU work is
negligible and a step is the host's time; on a shared CPU the figure means little).

On a CPU, dropout in training is four aten operations (empty_like, bernoulli_, div_, mul)
where CUDA runs one fused native_dropout: CPU counts are given as CUDA's (three fewer per
dropout, `cuda_dropout_correction`); the autograd nodes are the same on both. The foreach
optimizer's operations are per tensor on a CPU (its slow path), per list on CUDA.

    python benchmarks/lora_ops.py                     # tiny width on the CPU (~2 min)
    python benchmarks/lora_ops.py --device cuda --layers 2,6 --time 20 --calibration \
        --out benchmarks/results/lora-ops-h200.json   # counts and host time per block on a GPU
    python benchmarks/lora_ops.py --device cuda --layers 2,6 --quick \
        --out benchmarks/results/lora-ops-h200.json   # the calibration points, then Qwen2's full,
                                                      # lora and lora+ckpt (about a minute)

The JSON is rewritten after every row ("complete": false until the end), so a run cut short
keeps what it measured.

Models are the published layouts at tiny width (the count does not depend on it); nothing is
downloaded.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.estimate import peft_speed, speed, transformer_cost
from fitbench.estimate.profile import get_profile
from fitbench.workloads.hf_config import workload_from_config
from fitbench.workloads.workload import Workload

CONFIGS = Path(__file__).parent / "configs"
# Tiny width with the published layer structure: GQA (4 query heads, 2 key/value heads), the
# model type's biases and norms. Counts per layer do not depend on the width.
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
}
MODELS = {"qwen2": "qwen2.5-1.5b.json", "llama": "llama-3.2-1b.json"}
# (label, peft, checkpointing). "frozen": the base of a LoRA step alone (every weight frozen, the
# embeddings' output requiring a gradient so that backward runs through every block as it does
# under LoRA): LoRA minus frozen is what the adapters add.
VARIANTS = (
    ("full", None, False),
    ("frozen", None, False),
    ("lora", "lora", False),
    ("full+ckpt", None, True),
    ("frozen+ckpt", None, True),
    ("lora+ckpt", "lora", True),
)
# aten operations that launch no kernel: views and metadata changes (their host cost is the
# dispatcher's and autograd's, no allocation, no launch).
VIEW_OPS = frozenset(
    {
        "view",
        "_unsafe_view",
        "t",
        "transpose",
        "unsqueeze",
        "squeeze",
        "slice",
        "select",
        "expand",
        "detach",
        "alias",
        "as_strided",
        "permute",
        "_reshape_alias",
        "unbind",
        "split",
        "split_with_sizes",
        "chunk",
        "narrow",
        "view_as_real",
        "lift_fresh",
    }
)
CPU_DROPOUT = ("empty_like", "bernoulli_", "div_")  # with a mul: CUDA's one native_dropout


@dataclass
class Phase:
    """What one phase of a step issued: aten operations by name, autograd nodes by name, and
    Python-level torch calls."""

    aten: collections.Counter[str] = field(default_factory=collections.Counter)
    nodes: collections.Counter[str] = field(default_factory=collections.Counter)
    calls: int = 0

    def totals(self, device: str) -> dict[str, float]:
        dropouts = self.aten["bernoulli_"] if device == "cpu" else 0
        aten = sum(self.aten.values()) - 3 * dropouts
        views = sum(n for op, n in self.aten.items() if op in VIEW_OPS)
        return {
            "aten": aten,
            "kernels": aten - views,
            "nodes": sum(self.nodes.values()),
            "accumulate_grad": self.nodes["AccumulateGrad"],
            "calls": self.calls,
            "cuda_dropout_correction": -3 * dropouts,
        }


def _counters() -> tuple[Any, Any]:
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Aten(TorchDispatchMode):
        def __init__(self, phase: Phase) -> None:
            super().__init__()
            self.phase = phase

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.phase.aten[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    class Calls(TorchFunctionMode):
        def __init__(self, phase: Phase) -> None:
            super().__init__()
            self.phase = phase

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") != "__get__":
                self.phase.calls += 1
            return func(*args, **(kwargs or {}))

    del torch
    return Aten, Calls


def _hook_nodes(loss: Any, phase: Phase) -> list[Any]:
    """Count every autograd node of `loss`'s graph as backward executes it; the hooks' handles
    (AccumulateGrad nodes outlive the graph: remove the hooks after this backward)."""
    handles = []
    seen: set[int] = set()
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        name = type(node).__name__

        def hook(_grad_outputs: Any, name: str = name) -> None:
            phase.nodes[name] += 1

        handles.append(node.register_prehook(hook))
        stack.extend(nxt for nxt, _ in node.next_functions)
    return handles


def workload(
    model: str,
    layers: int,
    *,
    peft_method: str | None,
    checkpointing: bool,
    rank: int = 8,
    batch: int = 2,
    seq: int = 32,
    precision: str = "bf16",
    tiny: bool = True,
) -> Workload:
    """The workload of `model` (a benchmarks/configs name) at `layers` layers, tiny width."""
    fields = json.loads((CONFIGS / MODELS[model]).read_text())
    fields = {k: v for k, v in fields.items() if not k.startswith("_")}
    if tiny:
        fields.update(TINY)
    fields["num_hidden_layers"] = layers
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(fields))
        return workload_from_config(
            path,
            mode="train",
            batch_size=batch,
            seq_len=seq,
            precision=precision,
            peft=peft_method,
            lora_rank=rank,
            checkpointing=checkpointing,
        )


def open_session(w: Workload, device: str, *, frozen: bool = False) -> Any:
    """The torch backend's training session for `w`; `frozen`: every weight frozen and the
    embeddings' output requiring a gradient, with no optimizer step (nothing trains)."""
    import torch

    from fitbench.backends.base import RunOptions
    from fitbench.backends.torch.session import open_default

    session = open_default(w, RunOptions(device=device))
    if frozen:
        for p in session.model.parameters():
            p.requires_grad_(False)
        session.model.enable_input_require_grads()
        session.optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)
    return session


def count_step(
    w: Workload, device: str = "cpu", warmup: int = 2, *, frozen: bool = False
) -> dict[str, Phase]:
    """Forward (loss included), backward and optimizer (zero_grad + step) of one step of the torch
    backend's training session for `w`, after `warmup` steps (lazy initialisations, optimizer state)."""
    return count_and_time(w, device, warmup, frozen=frozen)[0]


def count_and_time(
    w: Workload, device: str = "cpu", warmup: int = 2, *, frozen: bool = False, steps: int = 0
) -> tuple[dict[str, Phase], float | None]:
    """count_step's phases and, with `steps`, the median seconds of that many whole steps timed
    afterwards in the same session (one model build per depth and variant, not two: the GPU
    run's time goes to building models otherwise)."""
    session = open_session(w, device, frozen=frozen)
    for _ in range(warmup):
        session.step()
    aten_mode, calls_mode = _counters()
    phases = {"forward": Phase(), "backward": Phase(), "optimizer": Phase()}
    # Two identical steps: one counted by the dispatcher, one by the Python-level modes.
    for counting in ("aten", "calls"):

        def mode(phase: Phase) -> Any:
            return aten_mode(phase) if counting == "aten" else calls_mode(phase)  # noqa: B023

        batch = session.next_batch()
        with mode(phases["optimizer"]):
            session.optimizer.zero_grad(set_to_none=True)
        with mode(phases["forward"]), session.plan.autocast(session.device):
            loss = session._loss(batch)
        handles = _hook_nodes(loss, phases["backward"]) if counting == "aten" else []
        with mode(phases["backward"]):
            loss.backward()
        for handle in handles:
            handle.remove()
        with mode(phases["optimizer"]):
            session.optimizer.step()
    seconds = timed_steps(session, device, steps) if steps else None
    session.close()
    return phases, seconds


def timed_steps(session: Any, device: str, steps: int) -> float:
    """Median seconds of `steps` whole training steps of an open, warm session, each synchronised
    (on a CPU at tiny width: mostly the host's work, the unit that the counts stand for; on a GPU
    at tiny width the GPU work is negligible and a step is the host's time)."""
    import torch

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    session.step()  # one uncounted step after the counting modes
    times = []
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        session.step()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def estimated_ops(w: Workload, *, frozen: bool = False) -> dict[str, float]:
    """The estimator's host operations for one step of `w`: forward, backward (and recomputed
    forward) of the base and of the adapters, the optimizer and fixed, and the total that its
    host time charges (autocast casts at their share). `frozen` (with `w` a LoRA workload): the
    base part of its step alone."""
    profile = get_profile("torch", "default")
    gpu = get_gpu("h200")
    fwd = transformer_cost.forward_kernels(w, w.batch_size, w.seq_len or 1)

    def ops(kernels: list[Any]) -> float:
        return sum(k.ops * k.count for k in kernels)

    if w.peft:
        timing = peft_speed.training_step(w, gpu, profile)
        lora_fwd, lora_bwd = peft_speed.lora_kernels(w)
        bwd = peft_speed._frozen_backward(fwd)
        optimizer = ops(peft_speed.optimizer_kernels(w))
        if frozen:
            lora_fwd, lora_bwd, optimizer = [], [], 0.0
    else:
        timing = speed.training_step(w, gpu, profile)
        lora_fwd, lora_bwd = [], []
        bwd = speed.backward_kernels(fwd)
        optimizer = ops(speed.optimizer_kernels(w))
    again = transformer_cost.recomputed_kernels
    recompute = ops(again(fwd, w)) + ops(again(lora_fwd, w)) if w.checkpointing else 0.0
    forward, backward = ops(fwd) + ops(lora_fwd), ops(bwd) + ops(lora_bwd) + recompute
    host = timing.host_seconds / profile.host_seconds_per_op
    if frozen:
        host = forward + backward + speed.STEP_FIXED_OPS
    return {
        "forward": forward,
        "backward": backward,
        "recompute": recompute,
        "adapters": ops(lora_fwd) + ops(lora_bwd),
        "optimizer": optimizer,
        "fixed": speed.STEP_FIXED_OPS,
        "host_ops": host,
    }


def split(
    shallow: dict[str, float], deep: dict[str, float], layers: tuple[int, int]
) -> dict[str, dict[str, float]]:
    """Per-layer and fixed parts of counts taken at two depths."""
    span = layers[1] - layers[0]
    per = {k: (deep[k] - shallow[k]) / span for k in shallow}
    return {"per_layer": per, "fixed": {k: shallow[k] - layers[0] * per[k] for k in shallow}}


def measure(
    model: str,
    label: str,
    peft_method: str | None,
    checkpointing: bool,
    *,
    layers: tuple[int, int],
    device: str,
    rank: int,
    tiny: bool,
    steps: int = 0,
) -> dict[str, Any]:
    """Dispatched and estimated counts of one variant, per layer and fixed."""
    by_depth = []
    for depth in layers:
        frozen = label.startswith("frozen")
        w = workload(
            model,
            depth,
            peft_method="lora" if frozen else peft_method,
            checkpointing=checkpointing,
            rank=rank,
            tiny=tiny,
        )
        phases, seconds = count_and_time(
            dataclasses.replace(w, peft=None) if frozen else w, device, frozen=frozen, steps=steps
        )
        flat = {f"{name}.{k}": v for name, ph in phases.items() for k, v in ph.totals(device).items()}
        flat.update({f"estimate.{k}": v for k, v in estimated_ops(w, frozen=frozen).items()})
        if seconds is not None:
            flat["step_ms"] = 1e3 * seconds
        by_depth.append(flat)
        if depth == layers[1]:
            names = {name: dict(ph.aten) for name, ph in phases.items()}
            nodes = dict(phases["backward"].nodes)
    parts = split(by_depth[0], by_depth[1], layers)
    return {
        "model": model,
        "variant": label,
        "peft": peft_method,
        "checkpointing": checkpointing,
        "layers": list(layers),
        **parts,
        "aten_by_name_deep": names,
        "nodes_by_name_deep": nodes,
    }


def calibration_counts(
    device: str, steps: int, on_row: Callable[[dict[str, Any]], None] | None = None
) -> list[dict[str, Any]]:
    """Whole-step counts of the host-bound training points that host_seconds_per_op was fitted on
    (profiles.toml: ResNet-50 at 32 px, measured at batch 64-256; BERT-base at batch 2), beside
    the estimator's operations: what one of its operations stands for. Counted at batch 2 (a
    count does not depend on the batch)."""
    from fitbench.workloads.presets import get_workload

    profile = get_profile("torch", "default")
    out = []
    for name, overrides in (
        ("resnet50-cifar10", {"batch_size": 2}),
        ("bert-base-imdb", {"batch_size": 2, "seq_len": 128}),
    ):
        w = get_workload(name, **overrides)
        phases, seconds = count_and_time(w, device, steps=steps)
        timing = speed.training_step(w, get_gpu("h200"), profile)
        row: dict[str, Any] = {
            "name": name,
            **{k: v.totals(device) for k, v in phases.items()},
            "estimate_host_ops": timing.host_seconds / profile.host_seconds_per_op,
            "estimate_host_ms": timing.host_seconds * 1e3,
            "estimate_gpu_ms": timing.gpu_seconds * 1e3,
        }
        if seconds is not None:
            row["step_ms"] = 1e3 * seconds
        out.append(row)
        if on_row is not None:
            on_row(row)
    return out


COLUMNS = (
    ("fwd aten", "forward.aten"),
    ("fwd kern", "forward.kernels"),
    ("bwd aten", "backward.aten"),
    ("bwd kern", "backward.kernels"),
    ("nodes", "backward.nodes"),
    ("acc", "backward.accumulate_grad"),
    ("py fwd", "forward.calls"),
    ("est fwd", "estimate.forward"),
    ("est bwd", "estimate.backward"),
    ("est host", "estimate.host_ops"),
)


def table(rows: list[dict[str, Any]], *, head: bool = True) -> str:
    """Rows as text; `head`: with the column names (off for the rows printed after the first)."""
    timed = "step_ms" in rows[0]["fixed"]
    columns = COLUMNS + ((("step ms", "step_ms"),) if timed else ())
    names = f"{'model':7} {'variant':11} {'part':9} " + " ".join(f"{c:>8}" for c, _ in columns)
    names += f" {'us/op':>8}" if timed else ""
    lines = [names, "-" * len(names)] if head else []
    for row in rows:
        for part in ("per_layer", "fixed"):
            vals = row[part]
            line = f"{row['model']:7} {row['variant']:11} {part:9} " + " ".join(
                f"{vals[k]:8.1f}" for _, k in columns
            )
            if timed and part == "per_layer":
                line += f" {us_per_op(vals['step_ms'], vals['estimate.host_ops']):8.1f}"
            lines.append(line)
    return "\n".join(lines)


def us_per_op(step_ms: float, estimated_ops: float) -> float:
    """Measured host microseconds per estimator operation (a host-bound step's time over the ops
    the estimator charges for it): beside profiles.toml's host_seconds_per_op it says whether a
    layer's operations cost the host what the unit fitted on the calibration points says."""
    return 1e3 * step_ms / estimated_ops if estimated_ops else float("nan")


# --quick: the variants that decide a LoRA step's host time (full fine-tuning as the reference,
# LoRA with and without checkpointing) on one model, and this many timed steps.
QUICK_VARIANTS = ("full", "lora", "lora+ckpt")
QUICK_STEPS = 20


def write_json(
    path: Path,
    meta: dict[str, Any],
    rows: list[dict[str, Any]],
    calibration: list[dict[str, Any]],
    *,
    complete: bool,
) -> None:
    """The JSON as far as it got: written after every row, so a run cut short keeps what it measured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(
        json.dumps({**meta, "complete": complete, "rows": rows, "calibration": calibration}, indent=1)
    )
    tmp.replace(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default="qwen2,llama", help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--layers", default="1,2", help="the two depths")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--full-width", action="store_true", help="the published width (on a GPU)")
    parser.add_argument(
        "--time",
        type=int,
        default=0,
        metavar="STEPS",
        help="also time STEPS whole steps per depth (median): on a GPU at tiny width the "
        "GPU work is negligible and a step is the host's time",
    )
    parser.add_argument(
        "--calibration",
        action="store_true",
        help="also count the host-bound points the host constant was fitted on "
        "(ResNet-50 at 32 px, BERT-base batch 2), whole steps",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"first model only, variants {', '.join(QUICK_VARIANTS)}, at most {QUICK_STEPS} timed "
        "steps, calibration first (about a minute on an H200)",
    )
    parser.add_argument("--out", type=Path, help="JSON, rewritten after every row")
    args = parser.parse_args()

    import peft as peft_lib
    import torch
    import transformers

    layers = tuple(int(x) for x in args.layers.split(","))
    assert len(layers) == 2 and layers[0] < layers[1], "--layers takes two increasing depths"
    models = args.models.split(",")
    variants = VARIANTS
    steps = args.time
    if args.quick:
        models = models[:1]
        variants = tuple(v for v in VARIANTS if v[0] in QUICK_VARIANTS)
        steps = min(steps or QUICK_STEPS, QUICK_STEPS)
        args.calibration = True
    if args.device == "cpu":
        torch.set_num_threads(1)  # one thread: no pool hand-offs in a tiny step's host time
    meta = {
        "benchmark": "lora_ops",
        "host_us_per_op_profile": round(get_profile("torch", "default").host_seconds_per_op * 1e6, 3),
        "device": args.device,
        "rank": args.rank,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft_lib.__version__,
        "layers": list(layers),
        "timed_steps": steps,
    }
    rows: list[dict[str, Any]] = []
    calibration: list[dict[str, Any]] = []

    def save() -> None:
        if args.out:
            write_json(args.out, meta, rows, calibration, complete=False)

    def calibrate() -> None:
        for row in calibration_counts(args.device, steps, on_row=lambda r: (calibration.append(r), save())):
            print(
                f"{row['name']:18} est ops {row['estimate_host_ops']:6.1f}  "
                f"fwd calls {row['forward']['calls']:5}  "
                f"fwd kernels {row['forward']['kernels']:5}  bwd kernels {row['backward']['kernels']:5}  "
                f"nodes {row['backward']['nodes']:5}  est host {row['estimate_host_ms']:.1f} ms"
                + (
                    f"  step {row['step_ms']:.1f} ms"
                    f"  us/op {us_per_op(row['step_ms'], row['estimate_host_ops']):.1f}"
                    if "step_ms" in row
                    else ""
                ),
                flush=True,
            )

    # Quick runs measure the calibration points first: they say what the host unit is on this
    # machine, which the per-layer times are read against.
    if args.calibration and args.quick:
        calibrate()
    for model in models:
        for label, method, ckpt in variants:
            rows.append(
                measure(
                    model,
                    label,
                    method,
                    ckpt,
                    layers=layers,
                    device=args.device,
                    rank=args.rank,
                    tiny=not args.full_width,
                    steps=steps,
                )
            )
            save()
            print(table(rows[-1:], head=len(rows) == 1), flush=True)
    if args.calibration and not args.quick:
        calibrate()
    if args.out:
        write_json(args.out, meta, rows, calibration, complete=True)
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
