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
    python benchmarks/lora_ops.py --device cuda --layers 2,6 --time 50 --calibration \
        --out benchmarks/results/lora-ops-h200.json   # counts and host time per block on a GPU

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
    session.close()
    return phases


def step_seconds(w: Workload, device: str, steps: int, *, frozen: bool = False) -> float:
    """Median seconds of the session's whole training step (on a CPU at tiny width: mostly the
    host's work, the unit that the counts stand for)."""
    import torch

    session = open_session(w, device, frozen=frozen)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(3):
        session.step()
    times = []
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        session.step()
        sync()
        times.append(time.perf_counter() - t0)
    session.close()
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
        bwd = speed._backward(fwd)
        optimizer = ops(speed.optimizer_kernels(w))
    recompute = ops(fwd) + ops(lora_fwd) if w.checkpointing else 0.0
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
        phases = count_step(dataclasses.replace(w, peft=None) if frozen else w, device, frozen=frozen)
        flat = {f"{name}.{k}": v for name, ph in phases.items() for k, v in ph.totals(device).items()}
        flat.update({f"estimate.{k}": v for k, v in estimated_ops(w, frozen=frozen).items()})
        if steps:
            flat["step_ms"] = 1e3 * step_seconds(
                dataclasses.replace(w, peft=None) if frozen else w, device, steps, frozen=frozen
            )
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


def calibration_counts(device: str, steps: int) -> list[dict[str, Any]]:
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
        phases = count_step(w, device)
        timing = speed.training_step(w, get_gpu("h200"), profile)
        row: dict[str, Any] = {
            "name": name,
            **{k: v.totals(device) for k, v in phases.items()},
            "estimate_host_ops": timing.host_seconds / profile.host_seconds_per_op,
            "estimate_host_ms": timing.host_seconds * 1e3,
        }
        if steps:
            row["step_ms"] = 1e3 * step_seconds(w, device, steps)
        out.append(row)
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


def table(rows: list[dict[str, Any]]) -> str:
    columns = COLUMNS + ((("step ms", "step_ms"),) if "step_ms" in rows[0]["fixed"] else ())
    head = f"{'model':7} {'variant':11} {'part':9} " + " ".join(f"{c:>8}" for c, _ in columns)
    lines = [head, "-" * len(head)]
    for row in rows:
        for part in ("per_layer", "fixed"):
            vals = row[part]
            lines.append(
                f"{row['model']:7} {row['variant']:11} {part:9} "
                + " ".join(f"{vals[k]:8.1f}" for _, k in columns)
            )
    return "\n".join(lines)


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
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch
    import transformers

    layers = tuple(int(x) for x in args.layers.split(","))
    assert len(layers) == 2 and layers[0] < layers[1], "--layers takes two increasing depths"
    if args.device == "cpu":
        torch.set_num_threads(1)  # one thread: no pool hand-offs in a tiny step's host time
    rows = [
        measure(
            model,
            label,
            method,
            ckpt,
            layers=layers,
            device=args.device,
            rank=args.rank,
            tiny=not args.full_width,
            steps=args.time,
        )
        for model in args.models.split(",")
        for label, method, ckpt in VARIANTS
    ]
    print(table(rows))
    calibration = calibration_counts(args.device, args.time) if args.calibration else []
    for row in calibration:
        print(
            f"{row['name']:18} est ops {row['estimate_host_ops']:6.1f}  "
            f"fwd calls {row['forward']['calls']:5}  "
            f"fwd kernels {row['forward']['kernels']:5}  bwd kernels {row['backward']['kernels']:5}  "
            f"nodes {row['backward']['nodes']:5}  est host {row['estimate_host_ms']:.1f} ms"
            + (f"  step {row['step_ms']:.1f} ms" if "step_ms" in row else "")
        )
    if args.out:
        import peft as peft_lib

        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "benchmark": "lora_ops",
                    "device": args.device,
                    "rank": args.rank,
                    "torch": torch.__version__,
                    "transformers": transformers.__version__,
                    "peft": peft_lib.__version__,
                    "layers": list(layers),
                    "rows": rows,
                    "calibration": calibration,
                },
                indent=1,
            )
        )
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
