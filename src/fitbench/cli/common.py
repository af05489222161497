"""Options shared by several subcommands, the one place that turns them into a Workload, and
the history a measuring command writes to."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from fitbench.core.names import EXEC_MODES, FRAMEWORKS
from fitbench.core.precision import PRECISION_NAMES
from fitbench.errors import FitbenchError
from fitbench.workloads.workload import Workload


def _whole_number(text: str, *, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {least} or more, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: a positive integer, with a message that names the problem."""
    return _whole_number(text, least=1)


def non_negative_int(text: str) -> int:
    """argparse type: 0, 1, 2, ... (counts that may be zero, such as warm-up steps)."""
    return _whole_number(text, least=0)


def _seconds(text: str, *, allow_zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    # nan compares false with everything and inf never ends: both would silently disable a limit.
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = "0 or more" if allow_zero else "more than 0"
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, {bound}; got '{text}'")
    return value


def seconds(text: str) -> float:
    """argparse type: a finite duration, 0 or more."""
    return _seconds(text, allow_zero=True)


def positive_seconds(text: str) -> float:
    """argparse type: a finite duration above 0 (a timeout)."""
    return _seconds(text, allow_zero=False)


def add_command(
    subparsers: argparse._SubParsersAction,
    name: str,
    help_text: str,
    epilog: str,
    *,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """The parser of one subcommand, shaped as every subcommand's is: its one-line help as the
    description (unless it has a longer one), and its examples printed as written."""
    return subparsers.add_parser(
        name,
        help=help_text,
        description=help_text if description is None else description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


class BackendChoices(tuple[str, ...]):
    """--backend's choices: the listed backends (what help and errors show), and containing
    also the unlisted ones a user may name (fitbench.backends.fake and its faults)."""

    def __new__(cls) -> BackendChoices:
        return super().__new__(cls, FRAMEWORKS)

    def __contains__(self, name: object) -> bool:
        from fitbench.backends import entry

        if not isinstance(name, str):
            return False
        try:
            entry(name)
        except FitbenchError:
            return False
        return True


def add_backend_arg(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--backend: the framework that measures."""
    parser.add_argument(
        "--backend",
        choices=BackendChoices(),
        help="framework to measure with (default: the first installed of torch, paddle)",
    )


def add_exec_arg(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--exec: which code runs (and is estimated), the kind most users write or the tuned kind."""
    parser.add_argument(
        "--exec",
        dest="exec_mode",
        choices=EXEC_MODES,
        default="default",
        help="default: the code most users write (eager); tuned: what the card can do "
        "(CUDA graphs, compiled steps, bf16; PyTorch)",
    )


def add_gpu_spec_arg(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, repeat: bool = True
) -> None:
    """--gpu-spec: a card that is not in the catalog, described as a catalog row is."""
    parser.add_argument(
        "--gpu-spec",
        action="append" if repeat else "store",
        metavar="SPEC",
        help="a card not in the catalog: a .toml/.json file as `fitbench gpus --toml ID` "
        "writes, or inline 'name=My card,memory_gib=32,bandwidth_gb_s=1792,"
        "fp32=104.8,fp16=209.5,bf16=209.5'" + (" (repeatable)" if repeat else ""),
    )


def add_db_arg(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--db: the history file every command that reads or writes runs accepts."""
    parser.add_argument(
        "--db", metavar="PATH", help="history file (default: the user's fitbench data folder)"
    )


def add_history_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--db and --no-history, for the commands that store measurements."""
    add_db_arg(parser)
    parser.add_argument("--no-history", action="store_true", help="do not store the measurements")


def add_progress_arg(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--progress / --no-progress: the live progress line of a measurement."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="live progress line on stderr (default: only when stderr is a terminal)",
    )


def add_lang_arg(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--lang: the language of advice and reports."""
    parser.add_argument("--lang", metavar="LANG", help="en or zh (default: zh when $LANG starts with zh)")


class HistoryStore:
    """The history a measuring command writes to, or nothing at all with --no-history.

    Opened before measuring, so that a bad --db fails before minutes are spent.
    """

    def __init__(self, path: str | None, *, enabled: bool) -> None:
        self.history: Any = None
        if enabled:
            from fitbench.results.history import History

            self.history = History.open(path)

    def add(self, record: Any) -> str | None:
        """Store one record (a RunRecord, or a mapping of the same shape); its run id, or None
        when nothing is stored."""
        return self.history.add_run(record) if self.history is not None else None

    def last(self, n: int) -> list[dict[str, Any]]:
        return self.history.last_runs(n) if self.history is not None else []

    @property
    def path(self) -> Any:
        return self.history.path if self.history is not None else None

    def close(self) -> None:
        if self.history is not None:
            self.history.close()


def add_workload_args(
    parser: argparse.ArgumentParser, *, workload_required: bool = True, multi_precision: bool = False
) -> None:
    """WORKLOAD plus every override of the brief's presets.

    WORKLOAD is optional to argparse even when `workload_required`: `--config` can take its
    place, and `workload_from_args` says in one line when neither is given.
    """
    parser.add_argument(
        "workload",
        nargs="?",
        metavar="WORKLOAD",
        help="a preset (`fitbench workloads`), a bundled model (`fitbench models`); or use --config",
    )
    group = parser.add_argument_group("workload overrides")
    group.add_argument("--config", metavar="PATH", help="a local Hugging Face config.json (or its folder)")
    group.add_argument(
        "--tiny", action="store_true", help="the tiny variant of a preset (runs in seconds on a CPU)"
    )
    group.add_argument(
        "--batch", "--batch-size", dest="batch_size", type=positive_int, metavar="N", help="batch size"
    )
    group.add_argument("--seq-len", type=positive_int, metavar="N", help="sequence length (transformers)")
    group.add_argument("--image-size", type=positive_int, metavar="N", help="image height = width (ResNet)")
    help_precision = "one of " + ", ".join(PRECISION_NAMES)
    if multi_precision:
        help_precision += "; a comma-separated list compares them"
    group.add_argument("--precision", metavar="P", help=help_precision)
    group.add_argument(
        "--weights",
        metavar="FORMAT",
        help="quantized weight storage: int8, nf4[-dq], fp4[-dq], gptq[-8bit][-g64], awq, "
        "fp8[-channel|-tensor], mxfp4, q8_0, q6_k, q5_k_m, q4_k_m, q4_0, q3_k_m, q2_k; "
        "none ignores a config's quantization_config",
    )
    group.add_argument(
        "--kv-cache",
        metavar="DTYPE",
        help="KV cache dtype for generation: fp16, bf16, fp8 or int8 (default: the compute dtype)",
    )
    group.add_argument("--optimizer", metavar="NAME", help="adam, adamw, sgd or momentum")
    group.add_argument("--mode", metavar="MODE", help="train or infer")
    group.add_argument(
        "--prompt-tokens", type=positive_int, metavar="N", help="prompt length in tokens (generation)"
    )
    group.add_argument("--new-tokens", type=positive_int, metavar="N", help="tokens to generate (generation)")
    group.add_argument("--dataset-size", type=positive_int, metavar="N", help="samples per epoch")
    group.add_argument(
        "--checkpointing",
        action="store_true",
        default=None,
        help="activation checkpointing (recompute activations in the backward pass)",
    )
    group.add_argument("--attention", metavar="IMPL", help="fused (SDPA/flash, default) or eager")
    group.add_argument("--peft", metavar="METHOD", help="parameter-efficient fine-tuning: lora or qlora")
    group.add_argument("--lora-rank", type=positive_int, metavar="R", help="LoRA rank (default 16)")
    group.add_argument("--lora-targets", metavar="T", help="attention, attention-mlp (default) or all-linear")
    group.add_argument("--gpus", type=positive_int, metavar="N", help="number of GPUs (default 1)")
    group.add_argument(
        "--strategy",
        metavar="S",
        help="multi-GPU strategy: ddp, zero1, zero2, zero3 (DeepSpeed ZeRO), "
        "fsdp-shard-grad-op, fsdp-full-shard (fsdp) or tp",
    )
    group.add_argument(
        "--optimizer-impl",
        metavar="IMPL",
        help="torch.optim implementation: foreach (default, what torch picks on CUDA), fused or for-loop",
    )
    group.add_argument(
        "--grad-accum",
        type=positive_int,
        metavar="N",
        help="gradient accumulation over N micro-batches (default 1: gradients freed "
        "between steps; N > 1 keeps them alive through forward and backward)",
    )


def workload_from_args(args: argparse.Namespace, *, precision: str | None = None) -> Workload:
    """The Workload the user described: a preset or a config file, with overrides applied."""
    overrides: dict[str, Any] = {
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "image_size": args.image_size,
        "precision": precision if precision is not None else args.precision,
        "optimizer": args.optimizer,
        "mode": args.mode,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "dataset_size": args.dataset_size,
        "checkpointing": args.checkpointing,
        "attention": args.attention,
        "peft": args.peft,
        "lora_rank": args.lora_rank,
        "lora_targets": args.lora_targets,
        "gpus": args.gpus,
        "strategy": args.strategy,
        "optimizer_impl": args.optimizer_impl,
        "grad_accum": args.grad_accum,
        "kv_cache": getattr(args, "kv_cache", None),
    }
    weights_text = getattr(args, "weights", None)
    if weights_text is not None:
        from fitbench.core.quant import parse_weights

        overrides["weights"] = parse_weights(weights_text) or NO_WEIGHTS
    if args.config:
        if args.workload:
            raise FitbenchError(
                f"both a WORKLOAD preset ('{args.workload}') and --config were given",
                "give one of them, not both",
                message_zh=f"同时给出了工作负载预设('{args.workload}')和 --config",
                hint_zh="两者只能给一个",
            )
        if args.tiny:
            raise FitbenchError(
                "--tiny applies to presets, not to --config",
                "drop --tiny, or name a preset that has a tiny variant",
                message_zh="--tiny 只适用于预设,不适用于 --config",
                hint_zh="去掉 --tiny,或指定一个有迷你版的预设",
            )
        from fitbench.workloads.hf_config import workload_from_config

        try:
            workload = workload_from_config(args.config, **overrides)
        except FitbenchError as exc:
            if exc.hint:
                raise
            raise FitbenchError(
                exc.message,
                "fix that value in the config file, or use the model's original config.json",
                message_zh=exc.message_zh,
                hint_zh="请修正配置文件中的这个值,或使用模型原始的 config.json",
            ) from exc
        return check_overrides_apply(workload, args)
    if not args.workload:
        raise FitbenchError(
            "no workload given",
            "name a preset or pass --config PATH; `fitbench workloads` lists the presets",
            message_zh="没有给出工作负载",
            hint_zh="请给出一个预设名,或传入 --config PATH;`fitbench workloads` 可列出全部预设",
        )
    from fitbench.workloads.presets import PRESETS, get_workload

    key = args.workload.strip().lower().replace("_", "-")
    if key not in PRESETS:
        from fitbench.workloads import library

        if library.find(args.workload) is not None or (not args.tiny and _nearer_a_model(key)):
            if args.tiny:
                raise FitbenchError(
                    "--tiny applies to presets, not to library models",
                    "drop --tiny, or name a preset (`fitbench workloads`)",
                    message_zh="--tiny 只适用于预设,不适用于内置模型库中的模型",
                    hint_zh="去掉 --tiny,或指定一个预设(`fitbench workloads`)",
                )
            # Read as config files are: Workload.with_overrides adds the defaults a change implies.
            return check_overrides_apply(library.workload_for_model(args.workload, **overrides), args)
    if overrides.get("weights") is NO_WEIGHTS:
        overrides["weights"] = None  # a preset has no quantization_config to drop
    # The defaults an override implies (a decoder switched to training, quantized weights that
    # compute in 16 bit) belong to the workload: `fitbench.estimate()` applies the same ones.
    workload = get_workload(args.workload, tiny=args.tiny).with_overrides(**overrides)
    return check_overrides_apply(workload, args)


# `--weights none`: drop a config's quantization_config and keep the precision's own dtype.
NO_WEIGHTS = "none"


def _nearer_a_model(key: str) -> bool:
    """Whether an unknown name looks like a library model rather than a preset (for its error)."""
    import difflib

    from fitbench.workloads import library
    from fitbench.workloads.presets import PRESETS

    def best(names: Any) -> float:
        return max((difflib.SequenceMatcher(None, key, n).ratio() for n in names), default=0.0)

    return best(library.models()) > best(PRESETS)


def check_overrides_apply(workload: Workload, args: argparse.Namespace) -> Workload:
    """Refuse a size the user gave that the job would silently ignore (`--seq-len` on a ResNet,
    `--image-size` on BERT, `--prompt-tokens` on a training job): the estimate would otherwise
    answer a different question than the one asked."""
    if workload.is_resnet:
        kind, shape_hint = "a ResNet", "set its input with --image-size"
        kind_zh, shape_hint_zh = "ResNet", "请用 --image-size 设置它的输入"
    elif workload.is_generation:
        kind, shape_hint = "a generation job", "set its input with --prompt-tokens and --new-tokens"
        kind_zh, shape_hint_zh = "生成任务", "请用 --prompt-tokens 和 --new-tokens 设置它的输入"
    else:
        job = "training" if workload.is_training else "inference"
        kind = f"{'an' if workload.family == 'encoder' else 'a'} {workload.family} {job} job"
        family_zh = {"encoder": "编码器", "decoder": "解码器"}.get(workload.family, workload.family)
        kind_zh = f"{family_zh}{'训练' if workload.is_training else '推理'}任务"
        shape_hint = "set its input with --seq-len"
        shape_hint_zh = "请用 --seq-len 设置它的输入"
    what = f"{workload.name} is {kind}"
    what_zh = f"{workload.name} 是{kind_zh}"
    if getattr(args, "seq_len", None) is not None and (workload.is_resnet or workload.is_generation):
        extra = ", or pass --mode train to fine-tune it" if workload.is_generation else ""
        extra_zh = ",或传入 --mode train 对它做微调" if workload.is_generation else ""
        raise FitbenchError(
            f"--seq-len does not apply here: {what}",
            shape_hint + extra,
            message_zh=f"--seq-len 在这里不适用:{what_zh}",
            hint_zh=shape_hint_zh + extra_zh,
        )
    if getattr(args, "image_size", None) is not None and not workload.is_resnet:
        raise FitbenchError(
            f"--image-size applies to ResNet workloads only: {what}",
            shape_hint,
            message_zh=f"--image-size 只适用于 ResNet 工作负载:{what_zh}",
            hint_zh=shape_hint_zh,
        )
    tokens = [f for f in ("prompt_tokens", "new_tokens") if getattr(args, f, None) is not None]
    if tokens and not workload.is_generation:
        flag = "/".join("--" + f.replace("_", "-") for f in tokens)
        extra = ", or --mode infer to generate" if workload.family == "decoder" else ""
        extra_zh = ",或用 --mode infer 做生成" if workload.family == "decoder" else ""
        raise FitbenchError(
            f"{flag} applies to generation only: {what}",
            shape_hint + extra,
            message_zh=f"{flag} 只适用于生成任务:{what_zh}",
            hint_zh=shape_hint_zh + extra_zh,
        )
    if getattr(args, "strategy", None) is not None and workload.gpus < 2:
        raise FitbenchError(
            "--strategy applies to several GPUs: this job runs on one",
            "add --gpus N (2 or more), or drop --strategy",
            message_zh="--strategy 用于多块 GPU:这个任务只在一块上运行",
            hint_zh="请加上 --gpus N(2 或更多),或去掉 --strategy",
        )
    training_only = [f for f in ("optimizer_impl", "grad_accum") if getattr(args, f, None) is not None]
    if training_only and not workload.is_training:
        flag = "/".join("--" + f.replace("_", "-") for f in training_only)
        raise FitbenchError(
            f"{flag} applies to training only: {what}",
            "add --mode train, or drop " + flag,
            message_zh=f"{flag} 只适用于训练:{what_zh}",
            hint_zh="请加上 --mode train,或去掉 " + flag,
        )
    lora = [f for f in ("lora_rank", "lora_targets") if getattr(args, f, None) is not None]
    if lora and not workload.peft:
        flag = "/".join("--" + f.replace("_", "-") for f in lora)
        raise FitbenchError(
            f"{flag} applies to parameter-efficient fine-tuning only",
            "add --peft lora (or qlora) with --mode train, or drop " + flag,
            message_zh=f"{flag} 只适用于参数高效微调",
            hint_zh="请加上 --peft lora(或 qlora)并配合 --mode train,或去掉 " + flag,
        )
    return workload


def precision_list(text: str | None) -> list[str | None]:
    """`--precision fp32,amp-fp16` -> ['fp32', 'amp-fp16']; None -> [None] (the preset's own)."""
    if text is None:
        return [None]
    items = [p.strip().lower() for p in text.split(",") if p.strip()]
    if not items:
        raise FitbenchError(
            "--precision is empty",
            "for example --precision fp32,amp-fp16",
            message_zh="--precision 为空",
            hint_zh="例如 --precision fp32,amp-fp16",
        )
    return items


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=_json_default)
    sys.stdout.write("\n")


def _json_default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if isinstance(o, tuple | set):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
