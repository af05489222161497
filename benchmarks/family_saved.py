"""What each decoder family's training step saves for backward, on the CPU, against the estimate.

saved_bytes / estimated_bytes are the measurement and the count the tests use too
(tests/backends/test_saved_activations.py: ResNet, BERT and the presets' Llama besides).

Tiny variants of the bundled models (tiny_families.py: each family's layout at hidden size 64,
3 layers) built through `fitbench run`'s own model builder (transformers' class of the family),
one forward and backward at batch 2 x 64 tokens under `torch.autograd.graph.saved_tensors_hooks`:
every tensor autograd keeps is counted once per storage, parameters and buffers excluded. Next to
it the estimator's count for the same workload as PyTorch runs it (estimate.execution.
workload_as_run: Gemma-2 takes eager attention; Falcon-7B's multi-query SDPA call takes its math
path, which the model is built to run and which computes 16-bit inputs in FP32): the segments'
saved bytes plus autocast's 16-bit weight copies. AMP runs as bf16 autocast on the CPU.

What the CPU cannot show: SDPA with query/key heads wider than the values' (DeepSeek's latent
attention) takes the math path on the CPU only, and the CPU's autocast leaves pow in 16 bits
(GPT-J's Python GELU); those rows are printed but are no check of the estimate
(tests/backends/test_saved_activations.py guards the others at +-7 %).

    PYTHONPATH=src python benchmarks/family_saved.py            # ~1 minute
    PYTHONPATH=src python benchmarks/family_saved.py --out benchmarks/results/family-saved-cpu.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from torch import nn

from fitbench.backends.torch.models import build_model, resnet_forward
from fitbench.estimate import resnet_cost, transformer_cost
from fitbench.estimate.execution import sdpa_math_only, workload_as_run
from fitbench.results.table import render_table
from fitbench.workloads import library
from fitbench.workloads.workload import Workload
from tiny_families import tiny_workload

MODELS = [
    "llama-3.2-1b-instruct",
    "qwen3-0.6b",
    "gemma-2-2b-it",
    "gemma-3-1b-it",
    "olmo-7b",
    "olmo-2-7b",
    "olmo-3-7b",
    "exaone-4.0-32b",
    "seed-oss-36b-instruct",
    "internlm3-8b-instruct",
    "phi-3-mini-4k-instruct",
    "gpt-neox-20b",
    "gpt-j-6b",
    "falcon-7b",
    "mixtral-8x7b-instruct",
    "olmoe-1b-7b",
    "qwen3-30b-a3b",
    "qwen2-57b-a14b-instruct",
    "ernie-4.5-21b-a3b",
    "deepseek-v2-lite-chat",
    # layouts of families no bundled config has (benchmarks/configs)
    "ministral-3-8b-shape.json",
    "jais-2-8b-shape.json",
    "solar-open-100b-shape.json",
    "exaone-moe-shape.json",
    "afmoe-shape.json",
    "flexolmo-7x7b-shape.json",
]
NOT_A_CHECK = {
    ("deepseek-v2-lite-chat", "fp32"),
    ("deepseek-v2-lite-chat", "amp-bf16"),
    ("gpt-j-6b", "amp-bf16"),
}


def saved_bytes(workload: Workload, *, dropout: bool = True, dtype: torch.dtype | None = None) -> int:
    """Bytes of the distinct storages autograd saves in one forward of the backend's model;
    `dtype`: its weights cast to that dtype first (a pure 16-bit step, which the CPU build keeps
    in FP32)."""
    torch.manual_seed(0)
    if sdpa_math_only(workload.arch) and workload.attention == "eager":
        # Falcon-7B as run: its multi-query SDPA call takes the math path (on the CPU too), which
        # computes 16-bit inputs in FP32 where eager attention would not: build it with SDPA
        workload = workload.replace(attention="fused")
    model, _ = build_model(workload, device="cpu")
    if dtype is not None:
        model = model.to(dtype)
    model.train()
    if not dropout:
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
    owned = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in owned:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    g = torch.Generator().manual_seed(1)
    b = workload.batch_size
    amp = workload.precision_info.amp
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        if workload.is_resnet:
            x = torch.randn(b, 3, workload.image_size, workload.image_size, generator=g)
            logits = resnet_forward(model, x, checkpointing=False)
            loss = nn.functional.cross_entropy(logits, torch.randint(0, 10, (b,), generator=g))
        else:
            ids = torch.randint(0, workload.arch.vocab_size, (b, workload.seq_len), generator=g)
            if workload.family == "encoder":
                loss = model(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    token_type_ids=torch.zeros_like(ids),
                    labels=torch.randint(0, 2, (b,), generator=g),
                ).loss
            else:
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    return sum(seen.values())


def estimated_bytes(workload: Workload, *, dropout: bool | None = None) -> float:
    """The estimator's saved activations plus the autocast weight copies autograd keeps."""
    if workload.is_resnet:
        segs = resnet_cost.training_segments(workload, "torch")
    else:
        segs = transformer_cost.training_segments(workload, dropout=dropout)
    casts = sum(s.cast_params for s in segs) * workload.precision_info.cast_cache_bytes
    return sum(s.saved_bytes for s in segs) + casts


def family_workload(name: str, precision: str) -> Workload:
    """The tiny training step of a bundled model, as PyTorch's default mode runs it."""
    w = tiny_workload(name, mode="train", batch_size=2, seq_len=64, precision=precision)
    return workload_as_run(w, "default", None)


def row(name: str, precision: str) -> dict[str, Any]:
    w = family_workload(name, precision)
    measured, estimated = saved_bytes(w, dropout=False), estimated_bytes(w, dropout=False)
    return {
        "model": name,
        "model_type": w.arch.model_type,
        "precision": precision,
        "attention_as_run": w.attention,
        "measured_bytes": measured,
        "estimated_bytes": estimated,
        "ratio": estimated / measured,
        "a_check": (name, precision) not in NOT_A_CHECK,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where to write the JSON result")
    parser.add_argument("--only", action="append", help="models whose name contains this")
    args = parser.parse_args(argv)
    names = [n for n in MODELS if not args.only or any(o in n for o in args.only)]
    unknown = [n for n in names if library.find(n) is None]
    if unknown:
        parser.error(f"not bundled models: {', '.join(unknown)}")
    rows = []
    for name in names:
        for precision in ("fp32", "amp-bf16"):
            rows.append(row(name, precision))
            r = rows[-1]
            print(f"{name} {precision}: {r['ratio']:.3f}", file=sys.stderr, flush=True)
    table = render_table(
        ["model", "precision", "attention", "measured", "estimated", "est/measured", "check"],
        [
            [
                r["model"],
                r["precision"],
                r["attention_as_run"],
                f"{r['measured_bytes']:,}",
                f"{r['estimated_bytes']:,.0f}",
                f"{r['ratio']:.3f}",
                "yes" if r["a_check"] else "no (CPU differs)",
            ]
            for r in rows
        ],
        align="lllrrrl",
    )
    print(table)
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "benchmark": "family_saved",
                    "date": dt.date.today().isoformat(),
                    "torch": torch.__version__,
                    "transformers": __import__("transformers").__version__,
                    "shape": "batch 2 x 64 tokens, hidden 64, 3 layers (tiny_families.py)",
                    "rows": rows,
                },
                indent=1,
            )
        )
        args.out.with_suffix(".txt").write_text(table + "\n")
        print(f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
