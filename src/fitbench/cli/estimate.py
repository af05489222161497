"""`fitbench estimate`: offline memory, verdict, max batch and speed for catalog GPUs.

Imports no framework: everything here is arithmetic on the workload and the catalog.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fitbench.advise.cost import cost_cell, job_cost
from fitbench.advise.i18n import resolve_lang, t
from fitbench.catalog import BRIEF_GPUS, resolve_gpus
from fitbench.cli.common import (
    add_command,
    add_exec_arg,
    add_gpu_spec_arg,
    add_lang_arg,
    add_workload_args,
    positive_int,
    print_json,
    workload_from_args,
)
from fitbench.core.units import format_bytes, format_rate, format_seconds
from fitbench.errors import FitbenchError
from fitbench.estimate.api import Estimate, estimate
from fitbench.estimate.verdict import VERDICT_ORDER
from fitbench.results.table import colour_verdict, render_table, use_colour

EXAMPLES = """examples:
  fitbench estimate llm-6b                              the brief's three cards and an H100
  fitbench estimate llm-6b --gpu all --json             every catalog card, as JSON
  fitbench estimate bert-base-imdb --gpu rtx-3060-12gb --precision amp-fp16
  fitbench estimate resnet50-cifar10 --gpu 4090 --batch 512 --image-size 64
  fitbench estimate --config ./my-model/config.json --gpu a100-80gb --mode infer
  fitbench estimate llm-6b --gpu rtx-4090 --fail-if tight    exit 3 unless it fits comfortably
  fitbench estimate llm-6b --gpu-spec 'name=My card,memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5'
  fitbench estimate llm-6b --serve --gpu h100-sxm --context 8192   serving: KV blocks, users, tok/s
  fitbench estimate llm-13b --gpu rtx-4090 --offload        runs with layers in CPU memory?
  fitbench estimate llm-13b --gpu 4090 --weights q4_k_m --kv-cache fp8   GGUF weights, fp8 KV cache
  fitbench estimate --config ./Qwen2.5-7B-Instruct-AWQ --gpu 4090        quantization_config is read

JSON: {"estimates": [{gpu, workload, precision, batch_size, verdict, peak_memory_bytes,
       breakdown{name: bytes}, max_batch_size, max_context_tokens, step_seconds, epoch_seconds,
       tokens_per_second, bottleneck, cost_per_million_tokens_usd, cost_per_epoch_usd, price_date, ...,
       offload{...} with --offload}]}; with --serve {"serving": [{kv_cache_tokens, kv_cache_blocks,
       max_concurrent_sequences, ttft_seconds, throughput[...], ...}]}
       (see the README for every field).
"""

DEFAULT_GPUS = (*BRIEF_GPUS, "h100-sxm")


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text, EXAMPLES)
    add_workload_args(parser)
    parser.add_argument("--gpu", action="append", metavar="ID",
                        help="catalog GPU (repeatable, comma-separated, or 'all'); default: "
                             + ", ".join(DEFAULT_GPUS))
    add_gpu_spec_arg(parser)
    parser.add_argument("--framework", choices=("torch", "paddle"), default="torch",
                        help="whose memory behaviour and efficiencies to assume (default torch)")
    add_exec_arg(parser)
    parser.add_argument("--fail-if", choices=("oom", "offload", "tight"), metavar="VERDICT",
                        help="exit with status 3 when any verdict is VERDICT or worse, on the ladder "
                             "fits < tight < offload < oom (for CI gates)")
    parser.add_argument("--offload", action="store_true",
                        help="for generation that does not fit: layers on the GPU, CPU RAM and speed with "
                             "CPU offload (accelerate device_map, llama.cpp --n-gpu-layers); "
                             "verdict 'offload'")
    parser.add_argument("--json", action="store_true", help="print {\"estimates\": [...]} as JSON")
    add_lang_arg(parser)
    serve = parser.add_argument_group("serving (--serve: a vLLM-style engine with a paged KV cache)")
    serve.add_argument("--serve", action="store_true",
                       help="KV-cache capacity, concurrent users, time to first token and throughput")
    serve.add_argument("--context", type=positive_int, metavar="N",
                       help="max_model_len: the longest request (default 4096)")
    serve.add_argument("--gpu-memory-utilization", type=_fraction, metavar="F",
                       help="share of the card the engine takes (default 0.9)")
    serve.add_argument("--max-num-seqs", type=positive_int, metavar="N",
                       help="sequences per step (default: vLLM's, 1024 on >= 70 GiB cards, else 256)")
    serve.add_argument("--max-num-batched-tokens", type=positive_int, metavar="N",
                       help="tokens per step (default: vLLM's, 8192 on >= 70 GiB cards, else 2048)")
    serve.add_argument("--block-size", type=positive_int, metavar="N",
                       help="tokens per KV block (default 16)")
    parser.set_defaults(func=run)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 1, got {text}")
    return value


SERVE_ONLY = ("context", "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "block_size")


def estimates_for(args: argparse.Namespace) -> list[Estimate]:
    workload = workload_from_args(args)
    gpus = resolve_gpus(args.gpu or ([] if args.gpu_spec else list(DEFAULT_GPUS)), args.gpu_spec or ())
    if not gpus:
        raise FitbenchError("no GPU selected", "pass --gpu ID or --gpu all")
    return [estimate(workload, gpu, framework=args.framework, exec_mode=args.exec_mode) for gpu in gpus]


def run(args: argparse.Namespace) -> int:
    given = [f"--{k.replace('_', '-')}" for k in SERVE_ONLY if getattr(args, k, None) is not None]
    if args.serve:
        if args.offload or args.fail_if:
            raise FitbenchError("--serve does not combine with --offload or --fail-if",
                                "run the serving estimate on its own")
        return run_serve(args)
    if given:
        raise FitbenchError(f"{', '.join(given)} apply to --serve only", "add --serve, or drop them")
    results = estimates_for(args)
    offloads = [_offload(e, args) if args.offload else None for e in results]
    if args.json:
        dicts = [e.to_dict() | job_cost(e).to_dict() for e in results]
        if args.offload:
            for d, off in zip(dicts, offloads, strict=True):
                d["offload"] = off.to_dict() if off is not None else None
        print_json({"estimates": dicts})
    else:
        print(format_estimates(results, offloads if args.offload else None, args.lang))
    if args.fail_if:
        from fitbench.estimate.offload import effective_verdict

        worst = max(VERDICT_ORDER[effective_verdict(e, off)]
                    for e, off in zip(results, offloads, strict=True))
        if worst >= VERDICT_ORDER[args.fail_if]:
            print(f"fitbench: verdict is '{args.fail_if}' or worse on at least one GPU", file=sys.stderr)
            return 3
    return 0


def _offload(e: Estimate, args: argparse.Namespace) -> Any:
    from fitbench.estimate.offload import offload_estimate

    return offload_estimate(e, framework=args.framework)


def run_serve(args: argparse.Namespace) -> int:
    """`--serve`: the engine's memory plan and speed on each card."""
    from fitbench.estimate.serving import ServeConfig, serving_estimate

    workload = workload_from_args(args)
    gpus = resolve_gpus(args.gpu or ([] if args.gpu_spec else list(DEFAULT_GPUS)), args.gpu_spec or ())
    if not gpus:
        raise FitbenchError("no GPU selected", "pass --gpu ID or --gpu all")
    config = ServeConfig(**{k: getattr(args, k) for k in SERVE_ONLY if getattr(args, k) is not None})
    results = [serving_estimate(workload, gpu, config, framework=args.framework) for gpu in gpus]
    if args.json:
        print_json({"serving": [r.to_dict() for r in results]})
    else:
        from fitbench.cli.serve_format import format_serving

        print(format_serving(results, resolve_lang(args.lang)))
    return 0


def speed_cell(e: Estimate, off: Any = None) -> str:
    if off is not None and off.verdict == "offload" and off.tokens_per_second:
        return f"{format_rate(off.tokens_per_second, 'tok/s')} ({off.gpu_layers}/{off.total_layers} layers)"
    if e.verdict == "oom":
        return "-"  # a speed for a job that cannot run would mislead; the JSON still has it
    if e.workload.is_generation:
        return format_rate(e.tokens_per_second, "tok/s")
    if e.epoch_seconds is not None:
        return f"{format_seconds(e.step_seconds)}/step, {format_seconds(e.epoch_seconds)}/epoch"
    return f"{format_seconds(e.step_seconds)}/step"


def format_estimates(results: list[Estimate], offloads: list[Any] | None = None,
                     lang: str | None = None) -> str:
    first = results[0]
    w = first.workload
    colour = use_colour()
    shape = (f"seq {w.seq_len}" if w.seq_len and not w.is_generation else
             f"{w.prompt_tokens}+{w.new_tokens} tokens" if w.is_generation else f"{w.image_size}px")
    title = (f"{w.name}: {w.family} {w.mode}, {first.workload.param_count() / 1e6:,.1f}M params, "
             f"batch {w.batch_size}, {shape}, {w.precision}"
             + (f", {w.optimizer} ({w.optimizer_impl})" if w.is_training else "")
             + (f", {w.grad_accum} micro-batches accumulated" if w.is_training and w.grad_accum > 1 else "")
             + (", checkpointing" if w.checkpointing else "")
             + (f", {w.peft} rank {w.lora_rank} on {w.lora_targets}" if w.peft else "")
             + (f", {w.gpus} GPUs ({w.strategy}), memory per GPU" if w.gpus > 1 else "")
             + (f", weights {w.weights.label}" if w.weights is not None else "")
             + (f", KV cache {w.kv_cache}" if w.kv_cache else ""))
    lang = resolve_lang(lang)
    rows = []
    offs = offloads or [None] * len(results)
    for e, off in zip(results, offs, strict=True):
        shown = "offload" if off is not None and off.verdict == "offload" else e.verdict
        rows.append([e.gpu.id, format_bytes(e.gpu.usable_bytes), format_bytes(e.peak_memory_bytes),
                     colour_verdict(shown, enabled=colour), str(e.max_batch_size),
                     "-" if e.max_context_tokens is None else f"{e.max_context_tokens:,}", speed_cell(e, off),
                     e.bottleneck, "-" if e.verdict == "oom" else cost_cell(job_cost(e), lang)])
    headers = ["GPU", "usable", "peak", "verdict", "max batch", t("col.max_context", lang), "speed",
               "bottleneck", t("cost.header", lang)]
    table = render_table(headers, rows, align="lrrlrrrlr")
    lines = [title, "", table]
    if len(results) == 1:
        lines += ["", f"memory at the peak ({first.memory.phase}):"]
        parts = [(k, v) for k, v in first.breakdown.items() if v]
        lines.append(render_table(["part", "bytes"], [[k, format_bytes(v)] for k, v in parts]
                                  + [["total", format_bytes(first.peak_memory_bytes)]], indent="  "))
        if first.roofline_tokens_per_second:
            lines.append(f"\nbandwidth roofline: {format_rate(first.roofline_tokens_per_second, 'tok/s')}; "
                         f"prefill {format_seconds(first.prefill_seconds)}")
    if any(e.verdict != "oom" and e.peak_memory_bytes > e.gpu.usable_bytes for e in results):
        lines.append("\npeak above usable, yet no oom: the peak counts the allocator's cached blocks "
                     "(fragmentation), which it frees under memory pressure; the verdict leaves them out.")
    if any(r[-1] != "-" for r in rows):
        lines.append("\n" + t("cost.note", lang))
    if offloads is not None:
        lines += _offload_notes(offs, lang)
    lines.append("\nverdict: fits | tight (< 10% of usable memory left) | "
                 + ("offload (runs with layers in CPU memory) | " if offloads is not None else "")
                 + "oom.  Estimates; `fitbench run` measures.")
    return "\n".join(lines)


def _offload_notes(offloads: list[Any], lang: str) -> list[str]:
    """One sentence per card whose generation job is oom on the GPU alone: how it runs offloaded,
    or why it does not."""
    from fitbench.advise.text import offload_line

    lines = [offload_line(off, lang) for off in offloads if off is not None]
    return ["", *lines] if lines else []
