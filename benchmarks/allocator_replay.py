"""A generation's caching-allocator reserve, without a GPU: trace on the meta device, replay.

What nvidia-smi shows for a `fitbench run` generation is the caching allocator's reserve, and it
sits above the allocated peak by what freed blocks of the wrong sizes hold. This script reproduces
that on any machine:

1. it builds the library model on the meta device (shapes, no memory) the way the torch backend
   does, and lists the allocations loading it makes: every parameter in order, and for a model with
   tied embeddings the LM head's own weight, which transformers frees when it ties it;
2. it runs the prefill and the decode steps on the meta device under a dispatch mode that records
   every storage an operator creates and when its last tensor goes (SDPA runs as a fused
   kernel does: its output only; the meta device runs no arithmetic);
3. it replays those events through a model of PyTorch's CUDA caching allocator
   (fitbench.estimate.allocator.SegmentedPool): best fit over the free blocks of the large pool, a
   block split when more than 1 MiB remains, 2 MiB rounding of a new segment (20 MiB for requests
   under 10 MiB), freed blocks merged with free neighbours of their own segment, segments never
   merged or released; the allocated peak counts from after loading, as `fitbench run` measures.

It prints the reserve above the weights, the allocated peak above them, and the gap between the
two; the gap the estimate's own layout gives (estimate/generation_reserve.py: one generation, as
traced, and two, as `fitbench run` generates: the estimate's figure); and a committed measurement
of the same point where one exists (`--measured FILE`: an accuracy.py result,
`peak_reserved_bytes` and `peak_allocated_bytes` less the weights' allocation after load).

    python benchmarks/allocator_replay.py qwen2.5-1.5b-instruct:8:1024 llama-3.2-1b-instruct:16:1024
    python benchmarks/allocator_replay.py mistral-7b-instruct-v0.3:4:6144 --new 32 \\
        --measured benchmarks/results/accuracy-holdout-h200-2026-12-03.json
    python benchmarks/allocator_replay.py --sweep 1:512 --new 16   # every library decoder

--sweep BATCH:PROMPT holds the whole estimate against the trace for every 16-bit decoder of the
library (`fitbench models`, up to 120B parameters): the reserve above the weights the estimate
gives (KV cache, temporaries and fragmentation, laid out or not) beside the traced one, and the
difference as a share of the whole process's figure (weights included).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import weakref
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import transformers
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from fitbench.backends.torch.models import build_model
from fitbench.estimate import generation_reserve
from fitbench.estimate.allocator import SegmentedPool
from fitbench.estimate.profile import get_profile
from fitbench.workloads import library

MiB = 1 << 20
GB = 1e9


class StorageEvents(TorchDispatchMode):
    """('alloc', id, bytes) and ('free', id) of every storage the dispatched operators create: a
    storage is freed when the last tensor the mode saw on it goes (views keep it alive)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[Any, ...]] = []
        self._refs: dict[int, int] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {
            t.untyped_storage()._cdata for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)
        }
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            sid = t.untyped_storage()._cdata
            if sid not in self._refs:
                if sid in inputs:
                    continue  # a view of a storage made outside the mode (a parameter)
                self._refs[sid] = 0
                self.events.append(("alloc", sid, t.untyped_storage().nbytes()))
            self._refs[sid] += 1
            weakref.finalize(t, self._drop, sid)
        return out

    def _drop(self, sid: int) -> None:
        self._refs[sid] -= 1
        if not self._refs[sid]:
            del self._refs[sid]
            self.events.append(("free", sid))


def _fused_attention(
    query: Any, key: Any, value: Any, attn_mask: Any = None, *args: Any, **kwargs: Any
) -> Any:
    """A fused attention kernel's allocations: a boolean mask made additive in the query's dtype
    first (PyTorch's convert_boolean_attn_mask, at::where, before its memory-efficient kernel),
    then its output; no score matrix."""
    additive = None
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        additive = torch.empty(attn_mask.shape, dtype=query.dtype, device=query.device)
    out = torch.empty((*query.shape[:-1], value.shape[-1]), dtype=query.dtype, device=query.device)
    del additive
    return out


def load_events(model: Any) -> list[tuple[Any, ...]]:
    """Loading: every parameter in order; a tied LM head's own weight is made, then freed."""
    events: list[tuple[Any, ...]] = [
        ("alloc", ("param", i), p.numel() * p.element_size()) for i, p in enumerate(model.parameters())
    ]
    if getattr(model.config, "tie_word_embeddings", False):
        embedding = model.get_input_embeddings().weight
        events.append(("alloc", "lm_head", embedding.numel() * embedding.element_size()))
        events.append(("free", "lm_head"))
    return events


def generation_events(model: Any, batch: int, prompt: int, new: int) -> list[tuple[Any, ...]]:
    """The prefill (last token's logits only, as generate asks) and `new` decode steps."""
    from transformers import DynamicCache

    previous = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _fused_attention
    trace = StorageEvents()
    try:
        with torch.no_grad(), trace:
            cache = DynamicCache(config=model.config)
            ids = torch.zeros((batch, prompt), dtype=torch.long, device="meta")
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            del out
            step = torch.zeros((batch, 1), dtype=torch.long, device="meta")
            # generate's decode loop on a GPU (and on the meta device) runs grouped experts
            # through batched_mm: each token-expert pair gathers its expert's weights
            decoding = getattr(model, "_optimize_model_for_decode", contextlib.nullcontext)
            with decoding():
                for _ in range(new):
                    out = model(input_ids=step, past_key_values=cache, use_cache=True)
                    del out
            del cache
            gc.collect()
    finally:
        F.scaled_dot_product_attention = previous
    return trace.events


def replay(events: list[tuple[Any, ...]], pool: SegmentedPool | None = None) -> SegmentedPool:
    """The events through the allocator's rules (fitbench.estimate.allocator.SegmentedPool)."""
    pool = pool or SegmentedPool()
    for event in events:
        if event[0] == "alloc":
            pool.malloc(event[1], event[2])
        else:
            pool.free(event[1])
    return pool


def replay_point(name: str, batch: int, prompt: int, new: int, attention: str = "fused") -> dict[str, Any]:
    workload = library.workload_for_model(name).replace(
        mode="infer",
        batch_size=batch,
        prompt_tokens=prompt,
        new_tokens=new,
        precision="bf16",
        attention=attention,
    )
    return {"model": name, **replay_workload(workload)}


def replay_workload(workload: Any) -> dict[str, Any]:
    """Load, then one generation of the workload's prompt and new tokens, traced and replayed."""
    batch, prompt, new = workload.batch_size, workload.prompt_tokens, workload.new_tokens
    model, _ = build_model(workload, device="meta", dtype=torch.bfloat16)
    model.eval()
    after_load = replay(load_events(model))
    weights, load_gap = after_load.allocated, after_load.reserved - after_load.allocated
    after_load.reset_peak_allocated()  # as `fitbench run` measures: after loading and warming up
    run = replay(generation_events(model, batch, prompt, new), after_load)
    return {
        "batch": batch,
        "prompt": prompt,
        "new": new,
        "weights_bytes": weights,
        "load_gap_bytes": load_gap,
        "reserved_above_weights_bytes": run.peak_reserved - weights,
        "allocated_above_weights_bytes": run.peak_allocated - weights,
        "gap_bytes": run.peak_reserved - run.peak_allocated,
    }


def _measured(path: Path | None, row: dict[str, Any]) -> dict[str, float] | None:
    """The committed measurement of the same point (its label's model name begins the library
    name: qwen2.5-1.5b for qwen2.5-1.5b-instruct): reserve and allocated peak above the weights'
    allocation after load, and their gap."""
    if path is None:
        return None
    shape = (row["batch"], row["prompt"], row["new"])
    for point in json.loads(path.read_text())["points"]:
        w, m = point["workload"], point.get("measurement") or {}
        name = str(point.get("label", "")).split(" ")[0]
        same = (w["batch_size"], w.get("prompt_tokens"), w.get("new_tokens")) == shape
        if not same or m.get("status") != "ok" or not row["model"].startswith(name):
            continue
        loaded = m["memory_after_load_allocated_bytes"]
        return {
            "reserved_above_weights_bytes": m["peak_reserved_bytes"] - loaded,
            "allocated_above_weights_bytes": m["peak_allocated_bytes"] - loaded,
            "gap_bytes": m["peak_reserved_bytes"] - m["peak_allocated_bytes"],
        }
    return None


SWEEP_MAX_PARAMS = 120e9


def sweep(batch: int, prompt: int, new: int) -> int:
    """Every 16-bit library decoder: the estimate's reserve above the weights against the trace."""
    from fitbench.catalog import get_gpu
    from fitbench.estimate.api import estimate

    gpu = get_gpu("h200")
    print(f"b{batch} x {prompt} + {new}: GB above the weights, traced and estimated; error of the total")
    for name in sorted(library.models()):
        workload = library.workload_for_model(name)
        arch = workload.arch
        if getattr(arch, "kind", None) != "decoder" or workload.weight_format is not None:
            continue
        if workload.param_count() > SWEEP_MAX_PARAMS or arch.max_positions < prompt + new:
            continue  # too large to trace quickly, or a context the model does not take
        workload = workload.replace(
            mode="infer", batch_size=batch, prompt_tokens=prompt, new_tokens=new, precision="bf16"
        )
        traced = replay_workload(workload)["reserved_above_weights_bytes"]
        parts = estimate(workload, gpu).memory.parts
        estimated = parts["kv_cache"] + parts["temporaries"] + parts["fragmentation"]
        total = parts["weights"] + traced
        laid = "laid out" if generation_reserve.applies(workload) else "share"
        print(
            f"{name:<32} {laid:<8} {traced / GB:7.2f} {estimated / GB:7.2f} "
            f"{(estimated - traced) / total:+7.1%}",
            flush=True,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("points", nargs="*", metavar="MODEL:BATCH:PROMPT")
    parser.add_argument("--sweep", metavar="BATCH:PROMPT", help="every library decoder at this shape")
    parser.add_argument("--new", type=int, default=32, help="decode steps (default 32)")
    parser.add_argument("--measured", type=Path, action="append", default=[], help="accuracy.py results")
    parser.add_argument(
        "--attention",
        choices=("fused", "eager"),
        default="fused",
        help="attention asked for (default fused: SDPA)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.sweep:
        batch, prompt = (int(x) for x in args.sweep.split(":"))
        return sweep(batch, prompt, args.new)
    if not args.points:
        parser.error("give MODEL:BATCH:PROMPT points or --sweep BATCH:PROMPT")
    rows = []
    for spec in args.points:
        name, batch, prompt = spec.split(":")
        row = replay_point(name, int(batch), int(prompt), args.new, args.attention)
        row["measured"] = next((m for m in (_measured(p, row) for p in args.measured) if m), None)
        workload = library.workload_for_model(name).replace(
            mode="infer",
            batch_size=int(batch),
            prompt_tokens=int(prompt),
            new_tokens=args.new,
            precision="bf16",
            attention=args.attention,
        )
        laid_out = generation_reserve.applies(workload)
        # as traced: one generation, the installed release's code; as estimated: two, the profile's
        release = transformers.__version__
        profile_release = get_profile("torch", "default").transformers_version
        installed = generation_reserve.replayed_gap(workload, 1, decode=True, transformers=release)
        estimated = generation_reserve.reserve_excess(workload, profile_release)
        row["laid_out_gap_bytes"] = installed if laid_out else None
        row["estimate_gap_bytes"] = estimated if laid_out else None
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(
        "GB above the weights    traced: reserve  allocated  gap | laid out: gap  x2 gens"
        " | measured: reserve  allocated  gap"
    )
    for r in rows:
        m = r["measured"] or {}
        measured = "  ".join(
            f"{m[k] / GB:8.2f}" if k in m else f"{'-':>8}"
            for k in ("reserved_above_weights_bytes", "allocated_above_weights_bytes", "gap_bytes")
        )
        laid = "  ".join(
            f"{r[k] / GB:6.2f}" if r[k] is not None else f"{'-':>6}"
            for k in ("laid_out_gap_bytes", "estimate_gap_bytes")
        )
        print(
            f"{r['model'][:22]:<22} b{r['batch']:<3} {r['reserved_above_weights_bytes'] / GB:7.2f} "
            f"{r['allocated_above_weights_bytes'] / GB:9.2f} {r['gap_bytes'] / GB:6.2f} "
            f"|  {laid}  | {measured}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
