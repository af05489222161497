"""`fitbench estimate`: offline memory, verdict, max batch and speed for catalog GPUs.

Imports no framework: everything here is arithmetic on the workload and the catalog.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fitbench.advise.cost import cost_cell, job_cost
from fitbench.advise.fixes import Fix
from fitbench.advise.i18n import resolve_lang, t
from fitbench.advise.tf32 import tf32_advice, tf32_dict, tf32_texts
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
from fitbench.core.gpu import GpuSpec
from fitbench.core.names import FRAMEWORKS
from fitbench.core.units import format_bytes, format_rate, format_seconds
from fitbench.errors import FitbenchError
from fitbench.estimate.api import Estimate, estimate
from fitbench.estimate.verdict import FITS, VERDICT_ORDER
from fitbench.results.table import colour_verdict, render_table, use_colour

EXAMPLES = """examples:
  fitbench estimate llm-6b                              the three reference scenarios' cards and an H100
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
    parser.add_argument(
        "--gpu",
        action="append",
        metavar="ID",
        help="catalog GPU (repeatable, comma-separated, or 'all'); default: " + ", ".join(DEFAULT_GPUS),
    )
    add_gpu_spec_arg(parser)
    parser.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        default="torch",
        help="whose memory behaviour and efficiencies to assume (default torch)",
    )
    add_exec_arg(parser)
    parser.add_argument(
        "--fail-if",
        choices=("oom", "offload", "tight"),
        metavar="VERDICT",
        help="exit with status 3 when any verdict is VERDICT or worse, on the ladder "
        "fits < tight < offload < oom (for CI gates)",
    )
    parser.add_argument(
        "--offload",
        action="store_true",
        help="for generation that does not fit: layers on the GPU, CPU RAM and speed with "
        "CPU offload (accelerate device_map, llama.cpp --n-gpu-layers); "
        "verdict 'offload'",
    )
    parser.add_argument("--json", action="store_true", help='print {"estimates": [...]} as JSON')
    add_lang_arg(parser)
    serve = parser.add_argument_group("serving (--serve: a vLLM-style engine with a paged KV cache)")
    serve.add_argument(
        "--serve",
        action="store_true",
        help="KV-cache capacity, concurrent users, time to first token and throughput",
    )
    serve.add_argument(
        "--context", type=positive_int, metavar="N", help="max_model_len: the longest request (default 4096)"
    )
    serve.add_argument(
        "--gpu-memory-utilization",
        type=_fraction,
        metavar="F",
        help="share of the card the engine takes (default 0.9)",
    )
    serve.add_argument(
        "--max-num-seqs",
        type=positive_int,
        metavar="N",
        help="sequences per step (default: vLLM's, 1024 on >= 70 GiB cards, else 256)",
    )
    serve.add_argument(
        "--max-num-batched-tokens",
        type=positive_int,
        metavar="N",
        help="tokens per step (default: vLLM's, 8192 on >= 70 GiB cards, else 2048)",
    )
    serve.add_argument(
        "--block-size", type=positive_int, metavar="N", help="tokens per KV block (default 16)"
    )
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


def selected_gpus(args: argparse.Namespace) -> list[GpuSpec]:
    """The cards of --gpu and --gpu-spec (the default cards where neither is given); none is an error."""
    gpus = resolve_gpus(args.gpu or ([] if args.gpu_spec else list(DEFAULT_GPUS)), args.gpu_spec or ())
    if not gpus:
        raise FitbenchError(
            "no GPU selected",
            "pass --gpu ID or --gpu all",
            message_zh="没有选择 GPU",
            hint_zh="请传入 --gpu ID 或 --gpu all",
        )
    return gpus


def estimates_for(args: argparse.Namespace) -> list[Estimate]:
    workload = workload_from_args(args)
    gpus = selected_gpus(args)
    return [estimate(workload, gpu, framework=args.framework, exec_mode=args.exec_mode) for gpu in gpus]


def run(args: argparse.Namespace) -> int:
    given = [f"--{k.replace('_', '-')}" for k in SERVE_ONLY if getattr(args, k, None) is not None]
    if args.serve:
        if args.offload or args.fail_if:
            raise FitbenchError(
                "--serve does not combine with --offload or --fail-if",
                "run the serving estimate on its own",
                message_zh="--serve 不能与 --offload 或 --fail-if 同时使用",
                hint_zh="请单独运行推理服务估算",
            )
        return run_serve(args)
    if given:
        raise FitbenchError(
            f"{', '.join(given)} apply to --serve only",
            "add --serve, or drop them",
            message_zh=f"{', '.join(given)} 只适用于 --serve",
            hint_zh="请加上 --serve,或去掉它们",
        )
    lang = resolve_lang(args.lang)
    results = estimates_for(args)
    offloads = [_offload(e, args) if args.offload else None for e in results]
    fixes = fixes_for(results)
    tf32 = tf32_advice(results)
    if args.json:
        dicts = [e.to_dict() | job_cost(e).to_dict() for e in results]
        if args.offload:
            for d, off in zip(dicts, offloads, strict=True):
                d["offload"] = off.to_dict() if off is not None else None
        print_json(
            {
                "estimates": dicts,
                "fixes": [_fixes_dict(base, options) for base, options in fixes],
                "tf32": [tf32_dict(base, alt) for base, alt in tf32],
            }
        )
    else:
        print(format_estimates(results, offloads if args.offload else None, lang, fixes=fixes, tf32=tf32))
    if args.fail_if:
        from fitbench.estimate.offload import effective_verdict

        worst = max(
            VERDICT_ORDER[effective_verdict(e, off)] for e, off in zip(results, offloads, strict=True)
        )
        if worst >= VERDICT_ORDER[args.fail_if]:
            print(f"fitbench: verdict is '{args.fail_if}' or worse on at least one GPU", file=sys.stderr)
            return 3
    return 0


# Past this many oom/tight cards (`--gpu all`), the options are shown for the first ones only: the
# table already says which cards fit.
MAX_FIX_CARDS = 4


def fixes_for(results: list[Estimate]) -> list[tuple[Estimate, list[Fix]]]:
    """What would make it fit, each option re-estimated, for the cards whose verdict is oom or tight
    (the same options `fitbench check` gives: fitbench.advise.fixes)."""
    from fitbench.advise.fixes import what_would_make_it_fit
    from fitbench.advise.ranking import rank_catalog

    bad = [e for e in results if e.verdict != FITS][:MAX_FIX_CARDS]
    if not bad:
        return []
    first = bad[0]
    rows = rank_catalog(first.workload, framework=first.framework, exec_mode=first.exec_mode)
    out = []
    for e in bad:
        # The workload as asked (the estimate's may be the tuned mode's rewrite of it).
        options = what_would_make_it_fit(
            e.workload, e.gpu, framework=e.framework, exec_mode=e.exec_mode, rows=rows
        )
        out.append((e, options))
    return out


def _fixes_dict(base: Estimate, options: list[Fix]) -> dict:
    return {
        "gpu": base.gpu.id,
        "baseline_verdict": base.verdict,
        "required_memory_bytes": base.required_memory_bytes,
        "options": [f.to_dict() for f in options],
    }


def _offload(e: Estimate, args: argparse.Namespace) -> Any:
    from fitbench.estimate.offload import offload_estimate

    return offload_estimate(e, framework=args.framework)


def run_serve(args: argparse.Namespace) -> int:
    """`--serve`: the engine's memory plan and speed on each card."""
    from fitbench.estimate.serving import ServeConfig, serving_estimate

    workload = workload_from_args(args)
    gpus = selected_gpus(args)
    config = ServeConfig(**{k: getattr(args, k) for k in SERVE_ONLY if getattr(args, k) is not None})
    results = [serving_estimate(workload, gpu, config, framework=args.framework) for gpu in gpus]
    if args.json:
        print_json({"serving": [r.to_dict() for r in results]})
    else:
        from fitbench.cli.serve_format import format_serving

        print(format_serving(results, resolve_lang(args.lang)))
    return 0


def speed_cell(e: Estimate, off: Any = None, lang: str = "en") -> str:
    if off is not None and off.verdict == "offload" and off.tokens_per_second:
        rate = t("rate.decode", lang, rate=format_rate(off.tokens_per_second, "tok/s"))
        return f"{rate} ({off.gpu_layers}/{off.total_layers} layers)"
    if e.verdict == "oom":
        return "-"  # a speed for a job that cannot run would mislead; see tokens_per_second_if_it_fit
    if e.workload.is_generation:
        return t("rate.decode", lang, rate=format_rate(e.tokens_per_second, "tok/s"))
    per_step = t("unit.per_step", lang, time=format_seconds(e.step_seconds))
    if e.epoch_seconds is not None:
        return f"{per_step}, {t('unit.per_epoch', lang, time=format_seconds(e.epoch_seconds))}"
    return per_step


def bottleneck_cell(e: Estimate, lang: str = "en") -> str:
    """ "memory capacity (OOM)" where it does not fit, else the speed bottleneck ("memory bandwidth")."""
    from fitbench.advise.i18n import bottleneck_label

    return bottleneck_label(e.limited_by.replace("memory-bandwidth", "memory"), lang)


def _reserve_notes(est: Estimate, lang: str) -> list[str]:
    """The cached reserves inside the fragmentation part, said in the reader's language: the
    first step's new segments, and a compiled tuned step's side-stream warm-up."""
    notes = []
    for detail, key in (
        ("first_step_segments", "est.first_step_reserve"),
        ("capture_warmup_reserve", "est.capture_warmup_reserve"),
    ):
        size = est.memory.details.get(detail)
        if size:
            notes.append(t(key, lang, size=format_bytes(size)))
    return notes


def format_estimates(
    results: list[Estimate],
    offloads: list[Any] | None = None,
    lang: str | None = None,
    *,
    fixes: list[tuple[Estimate, list[Fix]]] | None = None,
    tf32: list[tuple[Estimate, Estimate]] | None = None,
) -> str:
    from fitbench.advise.i18n import format_params, part_label, verdict_label
    from fitbench.advise.text import fix_lines

    lang = resolve_lang(lang)
    first = results[0]
    w = first.workload
    colour = use_colour()
    shape = (
        t("est.shape_seq", lang, n=w.seq_len)
        if w.seq_len and not w.is_generation
        else t("est.shape_tokens", lang, prompt=w.prompt_tokens, new=w.new_tokens)
        if w.is_generation
        else t("est.shape_image", lang, n=w.image_size)
    )
    extra = (
        (f", {w.optimizer} ({w.optimizer_impl})" if w.is_training else "")
        + (", " + t("est.accumulated", lang, n=w.grad_accum) if w.is_training and w.grad_accum > 1 else "")
        + (f", {t('fix.part.checkpointing', lang)}" if w.checkpointing else "")
        + (
            ", " + t("est.peft", lang, method=w.peft, rank=w.lora_rank, targets=w.lora_targets)
            if w.peft
            else ""
        )
        + (", " + t("est.per_gpu", lang, gpus=w.gpus, strategy=w.strategy) if w.gpus > 1 else "")
        + (", " + t("est.weights", lang, label=w.weights.label) if w.weights is not None else "")
        + (", " + t("est.kv_cache", lang, dtype=w.kv_cache) if w.kv_cache else "")
    )
    title = t(
        "est.title",
        lang,
        name=w.name,
        family=w.family,
        mode=w.mode,
        params=format_params(w.param_count(), lang),
        batch=w.batch_size,
        shape=shape,
        precision=w.precision,
        extra=extra,
    )
    rows = []
    offs = offloads or [None] * len(results)
    for e, off in zip(results, offs, strict=True):
        shown = "offload" if off is not None and off.verdict == "offload" else e.verdict
        label = verdict_label(shown, lang)
        rows.append(
            [
                e.gpu.id,
                format_bytes(e.gpu.usable_bytes),
                format_bytes(e.peak_memory_bytes),
                colour_verdict(shown, enabled=colour, label=label),
                str(e.max_batch_size),
                "-" if e.max_context_tokens is None else f"{e.max_context_tokens:,}",
                speed_cell(e, off, lang),
                bottleneck_cell(e, lang),
                "-" if e.verdict == "oom" else cost_cell(job_cost(e), lang),
            ]
        )
    headers = [
        t(k, lang)
        for k in (
            "col.card",
            "col.usable",
            "col.peak",
            "col.verdict",
            "col.max_batch",
            "col.max_context",
            "col.speed",
            "col.bottleneck",
            "cost.header",
        )
    ]
    table = render_table(headers, rows, align="lrrlrrrlr")
    lines = [title, "", table]
    if len(results) == 1:
        lines += ["", t("est.memory_at_peak", lang, phase=first.memory.phase)]
        parts = [(k, v) for k, v in first.breakdown.items() if v]
        lines.append(
            render_table(
                [t("col.part", lang), t("col.bytes", lang)],
                [[part_label(k, lang), format_bytes(v)] for k, v in parts]
                + [[t("est.total", lang), format_bytes(first.peak_memory_bytes)]],
                indent="  ",
            )
        )
        lines += _reserve_notes(first, lang)
        if first.roofline_tokens_per_second:
            roofline = format_rate(first.roofline_tokens_per_second, "tok/s")
            prefill = format_seconds(first.prefill_seconds)
            lines.append("\n" + t("est.roofline", lang, rate=roofline, prefill=prefill))
    if any(e.verdict != "oom" and e.peak_memory_bytes > e.gpu.usable_bytes for e in results):
        lines.append("\n" + t("est.fragmentation", lang))
    if any(e.verdict != "oom" and e.memory.details.get("fragmentation_released") for e in results):
        lines.append("\n" + t("est.fragmentation_capped", lang))
    if any(r[-1] != "-" for r in rows):
        lines.append("\n" + t("cost.note", lang))
    if offloads is not None:
        lines += _offload_notes(offs, lang)
    for base, options in fixes or []:
        helpful = [f for f in options if f.makes_it_fit]
        lines.append("")
        if helpful:
            head, *option_lines = fix_lines(base, helpful, lang)
            lines.append(head)
            lines.extend("  - " + x for x in option_lines)
        else:
            lines.append(
                t(
                    "est.no_fix",
                    lang,
                    name=w.name,
                    gpu=base.gpu.name,
                    verdict=verdict_label(base.verdict, lang),
                )
            )
    for base, alt in tf32 or []:
        lines.append("\n" + tf32_texts(base, alt)[lang])
    lines.append("\n" + t("est.units", lang))
    lines.append(t("est.legend_offload" if offloads is not None else "est.legend", lang))
    return "\n".join(lines)


def _offload_notes(offloads: list[Any], lang: str) -> list[str]:
    """One sentence per card whose generation job is oom on the GPU alone: how it runs offloaded,
    or why it does not."""
    from fitbench.advise.text import offload_line

    lines = [offload_line(off, lang) for off in offloads if off is not None]
    return ["", *lines] if lines else []
