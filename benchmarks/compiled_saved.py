"""What the compiled tuned step saves for backward, measured on a CPU through AOT autograd.

`fitbench run --exec tuned` compiles forward + loss with torch.compile (inductor); AOT autograd
traces the joint forward/backward graph and inductor's partitioner
(torch._functorch.partitioners.min_cut_rematerialization_partition) decides which forward
values the backward gets: a min cut that prefers recomputing cheap pointwise chains in the
backward over saving their outputs. So the compiled step saves a different set of tensors from
the eager step the estimator's eager count describes (transformer_cost.layer_saved_bytes_per_token).

This script runs the tuned sessions' own models and losses (BACKEND.open(..., exec tuned) on the
CPU: CompactEncoder for BERT, transformers' Llama with causal SDPA, peft's LoRA on either) under
bf16 autocast, compiled with a backend built from aot_autograd(fw_compiler, bw_compiler,
partition_fn=min_cut_rematerialization_partition, decompositions=inductor's table): the
forward compiler records nothing, the backward compiler reads its placeholders, which are
exactly the saved values (the rest are `tangents_*`). Parameters and autocast's 16-bit weight copies (no batch
dimension; the estimator counts those copies apart, as Segment.cast_params) are left out;
every activation is counted at its shape and dtype.

Per-layer bytes per token: the difference between the model with 2 layers and with 1, over the
batch's tokens; the rest (embeddings, head, loss) is the 1-layer total minus one layer. Printed
next to the estimator's eager count (layer_saved_bytes_per_token) and its compiled count
(compiled_layer_saved_bytes_per_token); the results go to
benchmarks/results/compiled-saved-cpu-<date>.json and a .txt table.

What the CPU cannot show, and how it is handled:
* attention-probability dropout inside SDPA: CUDA's flash kernel regenerates its mask from the
  RNG state in backward (nothing saved), while the CPU falls back to the math path with
  dropout_p > 0; so SDPA runs with dropout_p = 0 here (hidden dropout and LoRA's dropout stay on:
  their masks are decomposed to a bool mask, as inductor does on CUDA).
* inductor's own CUDA code generation is not run: the partition (what is saved) happens before
  code generation and does not depend on it.

    PYTHONPATH=src python benchmarks/compiled_saved.py            # ~1-2 min on a laptop CPU
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._inductor.decomposition import select_decomp_table

from fitbench.backends import get_backend
from fitbench.backends.base import RunOptions
from fitbench.estimate import peft, transformer_cost
from fitbench.estimate.dtypes import activation_dtypes
from fitbench.workloads import library
from fitbench.workloads.presets import get_workload

CASES: dict[str, dict[str, Any]] = {
    "bert": {"name": "bert-base-imdb", "batch_size": 4, "seq_len": 64},
    "bert-lora": {"name": "bert-base-imdb", "batch_size": 4, "seq_len": 64, "peft": "lora"},
    "llama": {"name": "llm-6b", "batch_size": 4, "seq_len": 64},
    "llama-lora": {"name": "llm-6b", "batch_size": 4, "seq_len": 64, "peft": "lora"},
    # a bundled mixture of experts at toy sizes (TOY, TOY_EXPERTS): transformers' grouped experts, FP32
    # weights under autocast, so its fallback operator; batch 3 so no expert count passes for it
    "olmoe": {"model": "olmoe-1b-7b", "batch_size": 3, "seq_len": 64},
    # query/key norms (per head)
    "qwen3": {"model": "qwen3-0.6b", "batch_size": 3, "seq_len": 64},
}
# The toy sizes of a bundled model case (its family's layout: norms, experts, routing).
TOY = {
    "vocab_size": 1000,
    "hidden_size": 64,
    "num_heads": 4,
    "num_kv_heads": None,
    "head_dim": None,
    "intermediate_size": 128,
    "max_positions": 256,
}
TOY_EXPERTS = {"expert_intermediate_size": 128, "num_experts": 4, "experts_per_token": 2}


@contextlib.contextmanager
def sdpa_without_dropout() -> Iterator[None]:
    """SDPA with dropout_p = 0 (CUDA's flash kernel saves no mask; the CPU would take the math path)."""
    original = F.scaled_dot_product_attention

    def sdpa(*args: Any, **kwargs: Any) -> torch.Tensor:
        kwargs["dropout_p"] = 0.0
        if len(args) > 4:
            args = (*args[:4], 0.0, *args[5:])
        return original(*args, **kwargs)

    F.scaled_dot_product_attention = sdpa  # type: ignore[assignment]
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original  # type: ignore[assignment]


def workload_for(case: str, layers: int) -> Any:
    spec = dict(CASES[case])
    if "model" in spec:
        w = library.workload_for_model(spec.pop("model"), mode="train", precision="amp-bf16", **spec)
        toy = {**TOY, **(TOY_EXPERTS if w.arch.is_moe else {})}
        return w.replace(arch=dataclasses.replace(w.arch, num_layers=layers, **toy))
    name = spec.pop("name")
    w = get_workload(name, tiny=True, mode="train", precision="amp-bf16", **spec)
    return w.replace(arch=dataclasses.replace(w.arch, num_layers=layers))


def measure_saved(workload: Any) -> list[dict[str, Any]]:
    """The saved values of the compiled step's forward: one entry per tensor (name, shape, dtype, bytes)."""
    torch.manual_seed(0)
    session = get_backend("torch").open(workload, RunOptions(device="cpu", exec_mode="tuned"))
    try:
        saved: list[dict[str, Any]] = []

        def fw_compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
            return gm

        def bw_compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
            for node in gm.graph.nodes:
                if node.op != "placeholder" or node.name.startswith("tangents"):
                    continue
                val = node.meta.get("val")
                if not isinstance(val, torch.Tensor):
                    continue
                saved.append(
                    {
                        "name": node.name,
                        "shape": list(val.shape),
                        "dtype": str(val.dtype).replace("torch.", ""),
                        "bytes": val.numel() * val.element_size(),
                    }
                )
            return gm

        backend = aot_autograd(
            fw_compiler=fw_compiler,
            bw_compiler=bw_compiler,
            partition_fn=min_cut_rematerialization_partition,
            decompositions=select_decomp_table(),
        )
        torch._dynamo.reset()
        forward = torch.compile(session._eager_forward, backend=backend, dynamic=False)
        with sdpa_without_dropout():
            loss = forward()
            loss.backward()
        # Activations only: their first dimension is the batch, its tokens, or the loss' shifted
        # tokens. The rest are parameters and autocast's 16-bit weight copies, which the
        # estimator counts apart (Segment.cast_params), and a few scalars.
        b, s = workload.batch_size, workload.seq_len
        rows = {b, b * s, b * (s - 1)}
        if workload.arch.is_moe:  # the routed copies: k per token
            rows.add(b * s * workload.arch.experts_per_token)
        kept = [x for x in saved if x["shape"] and x["shape"][0] in rows]
        return kept
    finally:
        torch._dynamo.reset()
        session.close()


def estimator_counts(workload: Any) -> dict[str, float]:
    """Per-layer saved bytes per token, eager and compiled, as the estimator counts them."""
    arch = workload.transformer
    s = workload.seq_len
    if workload.peft:
        eager = peft.layer_saved_bytes_per_token(workload, compiled=False)
        compiled = peft.layer_saved_bytes_per_token(workload, compiled=True)
    else:
        dt_ = activation_dtypes(workload, dropout=arch.kind == "encoder")
        eager = transformer_cost.layer_saved_bytes_per_token(
            arch, dt_, s, workload.attention, moe=arch.is_moe
        )
        residual_op = transformer_cost.runs_residual_site_operator(workload)
        compiled = transformer_cost.compiled_layer_saved_bytes_per_token(
            arch,
            transformer_cost.residual_stream_dtypes(workload, dt_),
            s,
            workload.attention,
            fused_residual_norm=residual_op,
            moe=arch.is_moe,
        )
    return {"eager": eager, "compiled": compiled}


def estimator_total(workload: Any) -> float:
    """The estimator's compiled saved bytes of the whole step (all segments), per token."""
    tokens = workload.batch_size * workload.seq_len
    if workload.peft:
        segs = [seg for seg, _ in peft.peft_segments(workload, compiled=True)]
    else:
        segs = transformer_cost.training_segments(workload, compiled=True)
    return sum(seg.saved_bytes for seg in segs) / tokens


def run_case(case: str) -> dict[str, Any]:
    one, two = workload_for(case, 1), workload_for(case, 2)
    tokens = one.batch_size * one.seq_len
    saved1, saved2 = measure_saved(one), measure_saved(two)
    total1 = sum(s["bytes"] for s in saved1)
    total2 = sum(s["bytes"] for s in saved2)
    per_layer = (total2 - total1) / tokens
    # The extra layer's tensors: the 2-layer list minus the 1-layer list, by (shape, dtype).
    rest = [(tuple(s["shape"]), s["dtype"]) for s in saved1]
    extra: list[dict[str, Any]] = []
    for s in saved2:
        key = (tuple(s["shape"]), s["dtype"])
        if key in rest:
            rest.remove(key)
        else:
            extra.append(s)
    est = estimator_counts(two)
    arch = two.arch
    return {
        "case": case,
        "workload": {
            "name": two.name,
            "peft": two.peft,
            "precision": two.precision,
            "batch_size": two.batch_size,
            "seq_len": two.seq_len,
            "hidden_size": arch.hidden_size,
            "intermediate_size": arch.intermediate_size,
            "num_heads": arch.num_heads,
            "num_kv_heads": arch.num_kv_heads,
            "lora_rank": two.lora_rank if two.peft else None,
        },
        "tokens": tokens,
        "measured_layer_bytes_per_token": per_layer,
        "measured_rest_bytes_per_token": total1 / tokens - per_layer,
        "measured_total_bytes_per_token": total2 / tokens,
        "estimate_compiled_total_bytes_per_token": estimator_total(two),
        "estimate_eager_layer_bytes_per_token": est["eager"],
        "estimate_compiled_layer_bytes_per_token": est["compiled"],
        "layer_tensors": extra,
        "saved_one_layer": saved1,
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "Saved bytes per token per layer of the compiled tuned step (AOT autograd, min-cut partitioner, "
        "bf16 autocast, CPU)",
        f"{'case':<12} {'h':>4} {'f':>5} {'measured':>9} {'eager est':>10} {'compiled est':>13} {'err':>7}"
        f" {'step measured':>14} {'step est':>9} {'err':>7}",
    ]
    for r in rows:
        w = r["workload"]
        m, e, c = (
            r["measured_layer_bytes_per_token"],
            r["estimate_eager_layer_bytes_per_token"],
            r["estimate_compiled_layer_bytes_per_token"],
        )
        shape = f"{r['case']:<12} {w['hidden_size']:>4} {w['intermediate_size']:>5}"
        tm, tc = r["measured_total_bytes_per_token"], r["estimate_compiled_total_bytes_per_token"]
        layer = f"{m:>9.1f} {e:>10.1f} {c:>13.1f} {(c - m) / m:>+7.1%}"
        lines.append(f"{shape} {layer} {tm:>14.1f} {tc:>9.1f} {(tc - tm) / tm:>+7.1%}")
    lines.append(
        "(bytes per token; a layer: the 2-layer model less the 1-layer one; step: the 2-layer model's"
    )
    lines.append(" whole forward, embeddings, head and loss included; autocast's weight copies left out)")
    lines.append("")
    for r in rows:
        lines.append(f"{r['case']}: one layer's saved tensors (batch*seq = {r['tokens']} tokens)")
        for s in r["layer_tensors"]:
            per_token = s["bytes"] / r["tokens"]
            lines.append(f"  {s['name']:<28} {s['shape']!s:<22} {s['dtype']:<9} {per_token:>8.1f} B/token")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES), action="append")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    rows = [run_case(c) for c in (args.only or CASES)]
    text = table(rows)
    print(text)
    date = dt.date.today().isoformat()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"compiled-saved-cpu-{date}"
    payload = {"benchmark": "compiled_saved", "torch": torch.__version__, "date": date, "cases": rows}
    stem.with_suffix(".json").write_text(json.dumps(payload, indent=1) + "\n")
    stem.with_suffix(".txt").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
