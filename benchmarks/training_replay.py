"""A decoder training step's allocated and reserved peaks, without a GPU: trace on the meta device
with CUDA's kernel choices, replay through the caching-allocator model.

The method of allocator_replay.py (generation), for `fitbench run`'s training step:

1. the model is built on the meta device as the torch backend builds it (LoRA adapters through
   peft, activation checkpointing), with the optimizer the session makes;
2. two steps (zero_grad, forward and the LM loss, backward, optimizer step) run under a dispatch
   mode that records every storage an operator creates and when its last tensor goes, with three
   substitutions where the meta device (or the CPU) would allocate otherwise than CUDA does:
   - SDPA runs as a flash or memory-efficient kernel does: its output, and for backward the
     query, key, value, output and FP32 log-sum-exp; FP32 queries over fewer key/value heads,
     and 16-bit ones handed over without enable_gqa (Falcon-7B), take PyTorch's math path,
     traced as its own implementation, because no CUDA fused kernel takes them
     (estimate/execution.py fp32_grouped_heads_math, sdpa_math_only);
   - dropout is CUDA's fused kernel (native_dropout: a bool mask saved), not the CPU's
     decomposition into a float mask times the input;
   - a fused optimizer (no fused kernels on the meta device) keeps its states and updates them
     in place: no scratch;
   - FP32 experts (AMP's) run through grouped_mm as CUDA's kernel takes them, where the meta
     kernel refuses FP32;
3. the events are replayed through fitbench.estimate.allocator.SegmentedPool from after loading;
   the second step's peaks are the ones `fitbench run` reports (its warm-up step first).

AMP steps run under meta_autocast.MetaAutocast, CUDA autocast's casts re-applied at the
torch-function level (autocast has no meta dispatch): FP32 weights, 16-bit matmuls with the
parameters' casts cached through the forward, FP32 norms and losses; amp-fp16 without its
gradient scaler (a few scalars). QLoRA cannot be traced: bitsandbytes quantizes on a GPU only.
16-bit, FP32 and AMP steps can, LoRA and checkpointing included.

Each row sets the traced peaks beside the estimate's (allocated: the breakdown without the CUDA
context and the fragmentation part; reserved: without the context) and, with --measured, beside
the stored measurement of the same point (peak_allocated_bytes, peak_reserved_bytes). The point
of the script is the mechanism: where the trace agrees with a measurement and the estimate does
not, the estimate is missing an allocation the framework makes, and the blocks alive at the
traced peak (--blocks) say which.

    python benchmarks/training_replay.py qwen3-0.6b:8:1024:bf16 llama-3.2-1b-instruct:4:512:fp32
    python benchmarks/training_replay.py --measured benchmarks/results/accuracy-kernels-h100-2026-12-05.json
    python benchmarks/training_replay.py --measured benchmarks/results/accuracy-*.json --json OUT
    python benchmarks/training_replay.py --sweep 2:1024:bf16 --layers 4 [--peft lora]
    python benchmarks/training_replay.py --sweep 2:1024:bf16 --peft lora --slope

--sweep BATCH:SEQ:PRECISION holds the estimate against the trace for every decoder of the library
(`fitbench models`) at `--layers` blocks (the families' own blocks, few of them: a layer count is
the same rule whatever its number), full fine-tuning or `--peft lora`: the models no measurement
has covered, where a family's block keeps what the estimate does not count.

--slope prints, for one model of each family (and each layout of benchmarks/configs/), the bytes
one more block adds per token: the difference between `--layers` and half as many, traced and
estimated. The head, the embeddings and the allocator's rounding cancel, so a family's own block
is checked alone (benchmarks/results/training-replay-slope-lora-cpu-2026-12-06.txt: LoRA, every
family within 2 % but ChatGLM, whose run builds the Llama layout of its numbers).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import gc
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import transformers.masking_utils as masking_utils

import meta_autocast
from allocator_replay import StorageEvents, load_events, replay
from fitbench.backends.torch.models import build_model
from fitbench.backends.torch.session import enable_checkpointing, make_optimizer
from fitbench.catalog import get_gpu
from fitbench.estimate.allocator import SegmentedPool
from fitbench.estimate.api import estimate
from fitbench.workloads import library
from fitbench.workloads.hf_config import workload_from_data
from fitbench.workloads.workload import Workload
from meta_autocast import MetaAutocast

GB = 1e9
STEPS = 2  # the warm-up step, then the one whose peaks are reported
_AUTOCAST: list[MetaAutocast] = []  # the traced step's autocast mode (casting under AMP only)


class _FusedAttention(torch.autograd.Function):
    """A flash / memory-efficient SDPA kernel's allocations: the output; saved for backward the
    inputs, the output and an FP32 log-sum-exp a query row; backward makes the three gradients."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        out = torch.empty((*query.shape[:-1], value.shape[-1]), dtype=query.dtype, device=query.device)
        lse = torch.empty(query.shape[:-1], dtype=torch.float32, device=query.device)
        ctx.save_for_backward(query, key, value, out, lse)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
        query, key, value, _, _ = ctx.saved_tensors
        return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)


def _sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    **_: Any,
) -> torch.Tensor:
    """SDPA as CUDA dispatches a causal training batch: fused, or the math path where no fused
    CUDA kernel takes fewer key/value heads than query heads: FP32 queries, or any dtype without
    enable_gqa (Falcon-7B's multi-query call; the math path then computes 16-bit inputs in FP32).
    Under AMP the inputs are cast first, as autocast casts SDPA's."""
    if _AUTOCAST:
        query, key, value = (_AUTOCAST[-1].lower(t) for t in (query, key, value))
    if key.shape[-3] != query.shape[-3] and (query.dtype == torch.float32 or not enable_gqa):
        return torch.ops.aten._scaled_dot_product_attention_math(
            query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
        )[0]
    return _FusedAttention.apply(query, key, value)


def _fused_dropout(
    input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> torch.Tensor:
    """CUDA's dropout: native_dropout's output, a bool mask saved for backward."""
    if not training or p == 0.0:
        return input
    return torch.ops.aten.native_dropout(input, p, True)[0]


_GROUPED_MM = getattr(F, "grouped_mm", None)


class _GroupedMM(torch.autograd.Function):
    """grouped_mm's allocations: the [tokens, out] product; saved, the input and the weight stack;
    backward writes the input's gradient and the stack's only where it needs one (a frozen
    stack under LoRA: none), as aten's derivative does."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input, weight)
        return torch.empty((input.shape[0], weight.shape[-1]), dtype=input.dtype, device=input.device)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        input, weight = ctx.saved_tensors
        grad_input = torch.empty_like(input) if ctx.needs_input_grad[0] else None
        return grad_input, torch.empty_like(weight) if ctx.needs_input_grad[1] else None


def _grouped_mm(input: torch.Tensor, weight: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """CUDA's grouped GEMM takes FP32 experts (AMP's, which autocast leaves uncast) where the meta
    kernel refuses them: those run as _GroupedMM, with the same output and saved tensors."""
    if input.dtype == torch.float32 and "offs" in kwargs and not args:
        return _GroupedMM.apply(input, weight)
    assert _GROUPED_MM is not None
    return _GROUPED_MM(input, weight, *args, **kwargs)


@contextlib.contextmanager
def cuda_kernels() -> Iterator[None]:
    """The substitutions above, and transformers' packed-sequence check skipped (it reads a value,
    which the meta device has not; a training batch of whole sequences is not packed)."""
    saved = (F.scaled_dot_product_attention, F.dropout, masking_utils.find_packed_sequence_indices)
    F.scaled_dot_product_attention, F.dropout = _sdpa, _fused_dropout
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    if _GROUPED_MM is not None:
        F.grouped_mm = _grouped_mm
    try:
        yield
    finally:
        F.scaled_dot_product_attention, F.dropout, masking_utils.find_packed_sequence_indices = saved
        if _GROUPED_MM is not None:
            F.grouped_mm = _GROUPED_MM


class _InPlaceStates:
    """A fused optimizer on the meta device: its states made at the first step, updated in place."""

    def __init__(self, params: list[torch.nn.Parameter], states: int) -> None:
        self.params, self.states = params, states
        self.kept: list[torch.Tensor] | None = None

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        if self.kept is None:
            self.kept = [torch.zeros_like(p) for p in self.params for _ in range(self.states)]


def trace_step(workload: Workload) -> dict[str, Any]:
    """Trace STEPS training steps of `workload` (a decoder, 16-bit, FP32 or AMP) and replay them:
    the last step's allocated and reserved peaks, and the blocks alive at the allocated peak."""
    if not workload.is_training or workload.family != "decoder" or workload.peft == "qlora":
        raise ValueError(f"{workload.name}: only decoder training steps without QLoRA can be traced")
    amp = workload.precision.startswith("amp")
    dtype = torch.float32 if workload.precision == "fp32" or amp else torch.bfloat16
    if workload.precision == "fp16":
        dtype = torch.float16
    model, _ = build_model(workload, device="meta", dtype=dtype)
    if workload.peft:
        from fitbench.backends.torch.peft_support import apply_lora

        model = apply_lora(model, workload)
    model.train()
    pool = replay(load_events(model))
    trainable = [p for p in model.parameters() if p.requires_grad]
    if workload.optimizer_impl == "fused":
        optimizer: Any = _InPlaceStates(trainable, 2 if workload.optimizer in ("adam", "adamw") else 1)
    else:
        optimizer = make_optimizer(workload.optimizer, trainable, workload.optimizer_impl)
    if workload.checkpointing:
        enable_checkpointing(model)
    trace = StorageEvents()
    # without AMP the mode makes no casts but stands in for torch.autocast, which peft's expert
    # adapters call and the meta device refuses
    autocast = MetaAutocast(torch.float16 if workload.precision == "amp-fp16" else torch.bfloat16, on=amp)
    with cuda_kernels(), trace, autocast:
        _AUTOCAST.append(autocast)
        try:
            for step in range(STEPS):
                optimizer.zero_grad(set_to_none=True)
                ids = torch.zeros((workload.batch_size, workload.seq_len), dtype=torch.long, device="meta")
                with autocast.forward() if amp else contextlib.nullcontext():
                    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                meta_autocast.backward(loss)
                del loss
                optimizer.step()
                trace.events.append(("step", step))
        finally:
            _AUTOCAST.clear()
        gc.collect()
    return _replay_last_step(pool, trace.events)


def _replay_last_step(pool: SegmentedPool, events: list[tuple[Any, ...]]) -> dict[str, Any]:
    live: dict[Any, int] = {}
    peak, at_peak, step = 0, {}, 0
    for event in events:
        if event[0] == "step":
            step += 1
            if step == STEPS - 1:
                pool.reset_peak_allocated()
                pool.peak_reserved = pool.reserved
            continue
        if event[0] == "alloc":
            pool.malloc(event[1], event[2])
            live[event[1]] = event[2]
            if step == STEPS - 1 and pool.allocated > peak:
                peak, at_peak = pool.allocated, dict(live)
        else:
            pool.free(event[1])
            live.pop(event[1], None)
    blocks = collections.Counter(at_peak.values())
    return {
        "allocated_peak_bytes": peak,
        "reserved_peak_bytes": pool.peak_reserved,
        "blocks_at_peak": sorted(([size, n] for size, n in blocks.items()), key=lambda b: -b[0] * b[1]),
    }


def estimated(workload: Workload, gpu: str) -> dict[str, float]:
    """The estimate's allocated and reserved peaks of the same step."""
    est = estimate(workload, get_gpu(gpu))
    reserved = est.peak_memory_bytes - est.breakdown["cuda_context"]
    return {"allocated": reserved - est.breakdown.get("fragmentation", 0.0), "reserved": reserved}


def _parse_point(spec: str) -> Workload:
    """NAME:BATCH:SEQ:PRECISION (a library model's fine-tuning, AdamW)."""
    name, batch, seq, precision = spec.split(":")
    return library.workload_for_model(name, weights="none").replace(
        mode="train", batch_size=int(batch), seq_len=int(seq), precision=precision
    )


def measured_points(paths: list[Path]) -> Iterator[tuple[str, str, Workload, dict[str, Any]]]:
    """(label, gpu, workload, measurement) of every traceable training point of the files, once."""
    seen: set[str] = set()
    for path in paths:
        data = json.loads(path.read_text())
        for point in data["points"]:
            m = point["measurement"]
            w = Workload.from_dict(point["workload"])
            if m.get("status") != "ok" or point["label"] in seen or w.family != "decoder":
                continue
            if not w.is_training or w.weight_format is not None:
                continue
            if w.peft == "qlora":  # bitsandbytes quantizes on a GPU only
                continue
            seen.add(point["label"])
            yield point["label"], data["gpu"], w, m


def sweep_points(spec: str, layers: int, peft: str | None) -> Iterator[tuple[str, str, Workload, None]]:
    """Every library decoder at BATCH:SEQ:PRECISION with `layers` blocks (the model's own
    pattern of dense, expert, windowed and convolution layers, cut short), unquantized."""
    batch, seq, precision = spec.split(":")
    for name in sorted(library.models()):
        w = library.workload_for_model(name, weights="none")
        arch = w.arch
        if getattr(arch, "kind", None) != "decoder" or arch.max_positions < int(seq):
            continue
        cut = {"num_layers": min(layers, arch.num_layers)}
        if arch.sliding_layers:
            cut["sliding_layers"] = min(arch.sliding_layers, max(cut["num_layers"] - 1, 1))
        if arch.linear_layers:  # LFM2's convolutions: the cut keeps one attention layer
            cut["linear_layers"] = min(arch.linear_layers, max(cut["num_layers"] - 1, 1))
        w = w.replace(
            arch=dataclasses.replace(arch, **cut),
            mode="train",
            batch_size=int(batch),
            seq_len=int(seq),
            precision=precision,
            **({"peft": peft} if peft else {}),
        )
        yield f"{name} {spec}{' ' + peft if peft else ''} ({cut['num_layers']} layers)", "h100-sxm", w, None


def family_points(spec: str, peft: str | None) -> Iterator[tuple[str, Workload]]:
    """One library model per decoder model type, then each layout of benchmarks/configs/ of a type
    no bundled model has, at BATCH:SEQ:PRECISION."""
    batch, seq, precision = spec.split(":")
    configs = Path(__file__).resolve().parent / "configs"
    seen: set[str] = set()
    named = [(n, library.workload_for_model(n, weights="none")) for n in sorted(library.models())]
    for path in sorted(configs.glob("*.json")):
        layout = {k: v for k, v in json.loads(path.read_text()).items() if not k.startswith("_")}
        try:
            named.append((path.name, workload_from_data(layout, name=path.stem, source=path.name)))
        except Exception:  # an encoder or CNN layout the decoder reader refuses
            continue
    for name, w in named:
        arch = w.arch
        if (
            getattr(arch, "kind", None) != "decoder"
            or arch.model_type in seen
            or arch.max_positions < int(seq)
        ):
            continue
        seen.add(arch.model_type)
        yield (
            name,
            w.replace(
                mode="train",
                batch_size=int(batch),
                seq_len=int(seq),
                precision=precision,
                weight_format=None,
                **({"peft": peft} if peft else {}),
            ),
        )


def layer_slope(workload: Workload, layers: int, gpu: str) -> tuple[float, float]:
    """(traced, estimated) allocated bytes per token that `layers` blocks add over half as many."""
    tokens = workload.batch_size * (workload.seq_len or 0)
    peaks = []
    for n in (max(layers // 2, 1), layers):
        arch = workload.arch
        cut: dict[str, Any] = {"num_layers": n}
        if arch.sliding_layers:
            cut["sliding_layers"] = min(arch.sliding_layers, max(n - 1, 1))
        w = workload.replace(arch=dataclasses.replace(arch, **cut))
        peaks.append((trace_step(w)["allocated_peak_bytes"], estimated(w, gpu)["allocated"]))
    blocks = layers - max(layers // 2, 1)
    return tuple((peaks[1][i] - peaks[0][i]) / blocks / tokens for i in (0, 1))  # type: ignore[return-value]


def slopes(spec: str, layers: int, peft: str | None, gpu: str) -> int:
    print(f"{'model type':18} {'model':34} {'trace B/token/block':>20} {'estimate':>10}")
    for name, workload in family_points(spec, peft):
        try:
            traced, est = layer_slope(workload, layers, gpu)
        except Exception as exc:  # a family this release cannot build or trace is a line, not a stop
            print(f"{workload.arch.model_type:18} {name:34} not traced: {str(exc).splitlines()[0][:60]}")
            continue
        print(
            f"{workload.arch.model_type:18} {name:34} {traced:20.0f} {est:10.0f} {_share(est, traced)}",
            flush=True,
        )
    return 0


def _share(value: float, reference: float | None) -> str:
    return f"{(value / reference - 1) * 100:+6.1f}%" if reference else "      -"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("points", nargs="*", help="NAME:BATCH:SEQ:PRECISION (16-bit, fp32 or amp-*)")
    parser.add_argument("--measured", nargs="*", type=Path, default=[], help="accuracy.py result files")
    parser.add_argument("--gpu", default="h100-sxm", help="catalog GPU of the estimate for named points")
    parser.add_argument("--sweep", metavar="BATCH:SEQ:PRECISION", help="every library decoder")
    parser.add_argument("--layers", type=int, default=4, help="blocks of each swept model (default 4)")
    parser.add_argument("--peft", choices=["lora"], help="sweep LoRA fine-tuning instead of full")
    parser.add_argument("--blocks", action="store_true", help="print the blocks alive at each traced peak")
    parser.add_argument(
        "--slope",
        action="store_true",
        help="with --sweep: one more block's bytes per token, traced vs estimated",
    )
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    if args.slope:
        if not args.sweep:
            parser.error("--slope needs --sweep BATCH:SEQ:PRECISION")
        return slopes(args.sweep, args.layers, args.peft, args.gpu)
    rows: list[dict[str, Any]] = []
    todo: list[tuple[str, str, Workload, dict[str, Any] | None]] = [
        (p, args.gpu, _parse_point(p), None) for p in args.points
    ]
    todo += list(measured_points(args.measured))
    if args.sweep:
        todo += list(sweep_points(args.sweep, args.layers, args.peft))
    print(
        f"{'point':72} {'alloc GB':>8} {'trace':>7} {'estim.':>7}   "
        f"{'reserved':>8} {'trace':>7} {'estim.':>7}"
    )
    for label, gpu, workload, m in todo:
        try:
            traced = trace_step(workload)
        except Exception as exc:  # a family this release cannot build or trace is a line, not a stop
            print(f"{label[:72]:72} not traced: {str(exc).splitlines()[0][:60]}", flush=True)
            continue
        est = estimated(workload, gpu)
        alloc, reserved = traced["allocated_peak_bytes"], traced["reserved_peak_bytes"]
        m_alloc = m.get("peak_allocated_bytes") if m else None
        m_reserved = m.get("peak_reserved_bytes") if m else None
        ref_alloc, ref_reserved = m_alloc or alloc, m_reserved or reserved
        print(
            f"{label[:72]:72} {ref_alloc / GB:8.2f} {_share(alloc, m_alloc)} "
            f"{_share(est['allocated'], ref_alloc)}   {ref_reserved / GB:8.2f} "
            f"{_share(reserved, m_reserved)} {_share(est['reserved'], ref_reserved)}",
            flush=True,
        )
        if args.blocks:
            print(
                "   at the peak: "
                + ", ".join(f"{n} x {size / 1e6:.0f} MB" for size, n in traced["blocks_at_peak"][:8])
            )
        rows.append(
            {
                "gpu": gpu,
                "label": label,
                "workload": workload.to_dict(),
                "measured": {"allocated_peak_bytes": m_alloc, "reserved_peak_bytes": m_reserved},
                "traced": {k: traced[k] for k in ("allocated_peak_bytes", "reserved_peak_bytes")},
                "estimated": {
                    "allocated_peak_bytes": est["allocated"],
                    "reserved_peak_bytes": est["reserved"],
                },
                "blocks_at_peak": traced["blocks_at_peak"][:16],
            }
        )
    print(
        "alloc GB, reserved GB: the measurement's (else the trace's); "
        "trace, estim.: their difference from it."
    )
    if args.json:
        args.json.write_text(json.dumps({"transformers": _versions(), "rows": rows}, indent=1) + "\n")
    return 0


def _versions() -> dict[str, str]:
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


if __name__ == "__main__":
    sys.exit(main())
