"""The Simplified Chinese of every `--help` text of the CLI, and the one walk that puts it into a built
parser.

The English is written once, where the parser is built (argparse is read there); this file keeps the
Chinese top to bottom for a translator, as advise/i18n.py does for the commands' output. An entry is
keyed by where its text is shown: command and option (`"estimate.--gpu"`; `"*.--db"` for an option
several commands share), `"estimate.description"`, `"estimate.epilog"`, `"command.<name>"` (a
command's line in `fitbench --help`), `"group.<title>"`. `{name}` marks a value the English takes
from a constant (a default): VALUES gives the Chinese the same value.

A changed English help must not ship a stale translation: tests/unit/test_help_text.py pins a
fingerprint of the English each entry translates, and names the entries whose English moved.

Flags, preset names, values and example command lines are never translated.
"""

from __future__ import annotations

import argparse
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence

HELP: dict[str, str] = {
    "fitbench.description": "这块 GPU 够不够跑这个深度学习任务?能跑多快?",
    "fitbench.epilog": """示例:
  fitbench                                   用三个参考场景检查这台机器
  fitbench estimate llm-6b --gpu all         6.7B 模型在每块显卡上能否加载、速度多快?
  fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090   内置模型(`fitbench models`)
  fitbench estimate bert-base-imdb --gpu rtx-3060-12gb --precision amp-fp16 --json
  fitbench run resnet50-cifar10 --tiny       在本机实测迷你版
  fitbench run bert-base-imdb --device cuda --precision fp32,amp-fp16
  fitbench history                           历史运行记录
""",
    "*.--help": "显示此帮助信息并退出",
    "fitbench.--version": "显示程序版本号并退出",
    "fitbench.--debug": "出错时显示完整的调用栈,而不是一行错误信息",
    "command.check": "这台机器的 GPU 跑得动三个参考场景吗?(默认命令)",
    "check.epilog": """示例:
  fitbench                                  与 `fitbench check` 相同
  fitbench check --estimate-only            不实测:一秒内给出估算和建议
  fitbench check --exec tuned               显卡的能力上限:CUDA Graph、编译后的步骤、bf16
  fitbench check --backend paddle --lang zh 用 PaddlePaddle 实测,以中文回答
  fitbench check --json --no-report         在标准输出打印一个 JSON 对象

JSON:{"machine": {...}, "scenarios": [{"key", "workload", "precision", "estimates": {gpu: estimate},
       "measurement": measurement | null, "skipped": reason | null, "run_id", "advice": [{kind, text,
       data}]}], "size_guide": [...], "report": path | null}
""",
    "*.--backend": "用于实测的框架(默认:torch、paddle 中第一个已安装的)",
    "*.--exec": (
        "default:大多数用户写的代码(eager 模式);tuned:显卡的能力上限(CUDA Graph、编译后的步骤、bf16;"
        "仅 PyTorch)"
    ),
    "check.--estimate-only": "只估算,不实测",
    "check.--tiny": "即使有 GPU 也只实测迷你版(在 CPU 上总是如此)",
    "check.--gpu": "用于对比的目录显卡(默认:三个参考场景所用的显卡和一块 H100)",
    "*.--gpu-spec": (
        "不在目录中的显卡:`fitbench gpus --toml ID` 写出的 .toml/.json 文件,或内联写法 'name=My card,"
        "memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5,bf16=209.5'(可重复)"
    ),
    "check.--min-seconds": "每个场景至少计时的秒数(默认:GPU 上 {seconds},迷你版 0.5)",
    "check.--timeout": "单次实测超过 S 秒即停止(默认 {seconds})",
    "*.--db": "历史文件(默认:用户的 fitbench 数据目录中)",
    "*.--no-history": "不保存实测结果",
    "check.--html": "报告写到哪里(默认:历史文件所在目录,即用户的 fitbench 数据目录中的 fitbench-report.html)",
    "check.--no-report": "不写 HTML 报告",
    "check.--json": "打印一个 JSON 对象,而不是表格",
    "*.--lang": "en 或 zh(默认:$LANG 以 zh 开头时为 zh)",
    "*.--progress": "在标准错误上显示实时进度行(默认:仅当标准错误是终端时)",
    "command.estimate": "估算目录中各 GPU 的显存、结论、最大批大小和速度",
    "estimate.epilog": """示例:
  fitbench estimate llm-6b                              三个参考场景所用的显卡和一块 H100
  fitbench estimate llm-6b --gpu all --json             目录中的每块显卡,JSON 格式
  fitbench estimate bert-base-imdb --gpu rtx-3060-12gb --precision amp-fp16
  fitbench estimate resnet50-cifar10 --gpu 4090 --batch 512 --image-size 64
  fitbench estimate --config ./my-model/config.json --gpu a100-80gb --mode infer
  fitbench estimate llm-6b --gpu rtx-4090 --fail-if tight    除非能宽裕运行,否则以状态码 3 退出
  fitbench estimate llm-6b --gpu-spec 'name=My card,memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5'
  fitbench estimate llm-6b --serve --gpu h100-sxm --context 8192   推理服务:KV 块数、并发用户数、tok/s
  fitbench estimate llm-13b --gpu rtx-4090 --offload        部分层放在 CPU 内存中能否运行?
  fitbench estimate llm-13b --gpu 4090 --weights q4_k_m --kv-cache fp8   GGUF 权重,fp8 KV 缓存
  fitbench estimate --config ./Qwen2.5-7B-Instruct-AWQ --gpu 4090        会读取 quantization_config

JSON:{"estimates": [{gpu, workload, precision, batch_size, verdict, peak_memory_bytes,
       breakdown{name: bytes}, max_batch_size, max_context_tokens, step_seconds, epoch_seconds,
       tokens_per_second, bottleneck, cost_per_million_tokens_usd, cost_per_epoch_usd, price_date, ...,
       offload{...} with --offload}]};加 --serve 时 {"serving": [{kv_cache_tokens, kv_cache_blocks,
       max_concurrent_sequences, ttft_seconds, throughput[...], ...}]}
       (每个字段的含义见 README)。
""",
    "*.workload": "预设(`fitbench workloads`)或内置模型(`fitbench models`);也可以用 --config",
    "*.--config": "本地的 Hugging Face config.json(或它所在的目录)",
    "*.--tiny": "预设的迷你版(在 CPU 上几秒即可跑完)",
    "*.--batch": "批大小",
    "*.--prompt-tokens": "提示词的 token 数(生成任务)",
    "*.--new-tokens": "要生成的 token 数(生成任务)",
    "*.--seq-len": "序列长度(Transformer)",
    "*.--image-size": "图像边长,高 = 宽(ResNet)",
    "*.--weights": (
        "量化权重格式:int8、nf4[-dq]、fp4[-dq]、gptq[-8bit][-g64]、awq、fp8[-channel|-tensor]、mxfp4、q8_0、"
        "q6_k、q5_k_m、q4_k_m、q4_0、q3_k_m、q2_k;none 表示忽略配置中的 quantization_config"
    ),
    "*.--kv-cache": "生成时 KV 缓存的数据类型:fp16、bf16、fp8 或 int8(默认:与计算精度相同)",
    "*.--optimizer": "adam、adamw、sgd 或 momentum",
    "*.--mode": "train(训练)或 infer(推理)",
    "*.--dataset-size": "每轮的样本数",
    "*.--checkpointing": "激活检查点(反向传播时重新计算激活值)",
    "*.--attention": "fused(SDPA/flash,默认)或 eager",
    "*.--peft": "参数高效微调:lora 或 qlora",
    "*.--lora-rank": "LoRA 秩(默认 16)",
    "*.--lora-targets": "attention、attention-mlp(默认)或 all-linear",
    "*.--gpus": "GPU 数量(默认 1)",
    "*.--strategy": (
        "多卡策略:ddp、zero1、zero2、zero3(DeepSpeed ZeRO)、fsdp-shard-grad-op、fsdp-full-shard(fsdp)或 tp"
    ),
    "*.--optimizer-impl": "torch.optim 的实现:foreach(默认,即 torch 在 CUDA 上的选择)、fused 或 for-loop",
    "*.--grad-accum": (
        "在 N 个微批次上累积梯度(默认 1:梯度在步与步之间释放;N 大于 1 时梯度在前向和反向传播期间一直保留)"
    ),
    "estimate.--gpu": "目录中的 GPU(可重复、可用逗号分隔,或 'all');默认:{gpus}",
    "estimate.--framework": "按哪个框架的显存行为和效率估算(默认 torch)",
    "estimate.--fail-if": (
        "任一结论达到 VERDICT 或更差时以状态码 3 退出,由好到差依次为 fits < tight < offload < "
        "oom(用于 CI 门禁)"
    ),
    "estimate.--offload": (
        "对放不下的生成任务:给出 CPU 卸载时 GPU 上的层数、所需 CPU 内存和速度(accelerate 的 "
        "device_map、llama.cpp 的 --n-gpu-layers);结论为 'offload'"
    ),
    "estimate.--json": '以 JSON 打印 {"estimates": [...]}',
    "estimate.--serve": "KV 缓存容量、并发用户数、首 token 延迟和吞吐量",
    "estimate.--context": "max_model_len:最长的请求(默认 4096)",
    "estimate.--gpu-memory-utilization": "推理引擎占用显卡显存的比例(默认 0.9)",
    "estimate.--max-num-seqs": "每步的序列数(默认:与 vLLM 相同,显存 >= 70 GiB 的显卡为 1024,否则 256)",
    "estimate.--max-num-batched-tokens": (
        "每步的 token 数(默认:与 vLLM 相同,显存 >= 70 GiB 的显卡为 8192,否则 2048)"
    ),
    "estimate.--block-size": "每个 KV 块的 token 数(默认 16)",
    "command.run": "通过 PyTorch 或 PaddlePaddle 实测一个工作负载",
    "run.epilog": """示例:
  fitbench run resnet50-cifar10 --tiny                  端到端跑一个迷你 ResNet,CPU 上几秒完成
  fitbench run bert-base-imdb --device cuda --precision fp32,amp-fp16
                                                        实测 AMP 节省的显存和带来的加速
  fitbench run llm-6b --device cuda --batch 8           6.7B 模型的加载、预填充和 tokens/s
  fitbench run resnet50-cifar10 --device cuda --max-batch
                                                        真正放得下的最大批大小
  fitbench run bert-base-imdb --data ./aclImdb --json   真实的 IMDb 影评,结果为 JSON
  fitbench run llm-6b --backend paddle --gpu rtx-4090   与另一块显卡的估算对比

JSON(单一精度):{"workload", "estimate" | null, "measurement", "error_vs_estimate", "diagnosis",
"run_id"};
给出精度列表时为上述对象的列表,每项带有与第一项对比的 "comparison"。
error_vs_estimate = (estimate - measured) / measured:+0.10 表示估算偏高 10%。
显存不足是一种结论("status" 为 "oom",退出码 0),不是失败。
""",
    "run.--precision": "取值之一:{names};用逗号分隔的列表会逐一对比",
    "run.--device": "cpu、cuda 或 cuda:N(默认:发现 GPU 时为 cuda)",
    "run.--gpu": "与哪块目录 GPU 的估算对比(默认:本机的 GPU)",
    "run.--compile": (
        "配合 --exec tuned(PyTorch):在捕获 CUDA Graph 之前用 torch.compile(inductor)"
        "编译训练或推理步骤的前向和损失,融合其中的小内核;每次运行一次性耗时数十秒;失败时回退到未编译的步骤并给出警告"
        "(默认:在带 Triton 的 CUDA GPU 上配合 --exec tuned 时开启,即估算所建模的步骤;"
        "--no-compile 实测未编译的 CUDA Graph 步骤;生成任务无论如何都会编译其解码步骤)"
    ),
    "run.--emulate": (
        "把设备显存限制为某块目录显卡(或 --gpu-spec 写法描述的显卡)的可用显存:"
        "在那块卡上放得下吗?(隐含 --gpu ID)"
    ),
    "run.--gpu-spec": (
        "不在目录中的显卡:`fitbench gpus --toml ID` 写出的 .toml/.json 文件,或内联写法 'name=My card,"
        "memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5,bf16=209.5'"
    ),
    "run.--data": "本地数据集:CIFAR-10 的 python 批文件或 tar.gz,IMDb 的 aclImdb/(默认为合成数据)",
    "run.--max-batch": "同时搜索放得下的最大批大小(每次探测都在新进程中进行)",
    "run.--batch-limit": "--max-batch 尝试的最大批大小(默认:起始值的 8 倍,至少 64)",
    "run.--timeout": "单次实测超过 S 秒即停止(默认 900)",
    "run.--min-steps": "至少计时的步数(默认 10;生成任务为 3 次 generate 调用)",
    "run.--min-seconds": "至少计时的秒数(默认 3;CPU 上的迷你版为 0.5)",
    "run.--warmup": "先运行的不计时步数(默认 3;生成任务为 1)",
    "run.--json": "以 JSON 打印结果",
    "command.report": "为过去的运行写一份 HTML 或 Markdown 报告",
    "report.epilog": """示例:
  fitbench report                               最新的 10 次运行 -> 数据目录中的 fitbench-report.html
  fitbench report --out ./runs.html             指定写到哪里(.md 则写 Markdown)
  fitbench report --last 30 --html runs.html
  fitbench report 3fa2c1d0 9b1e --markdown runs.md   指定的运行(任何唯一的编号前缀均可)
  fitbench report --lang zh                     简体中文

HTML 文件是自包含的(内联 CSS 和 SVG 图表):可以离线打开,也可以用邮件发送。
""",
    "report.run_ids": "要报告的运行(默认:最新的几次)",
    "report.--last": "最新的 N 次运行(默认 {n})",
    "report.--html": "把 HTML 报告写到这里(默认:历史文件所在目录中的 {file})",
    "report.--out": "报告写到哪里:FILE.md 写 Markdown,其他文件名写 HTML",
    "report.--markdown": "写一份 Markdown 报告(只有表格,没有图表)",
    "command.history": "列出历史中保存的过去运行",
    "history.epilog": """示例:
  fitbench history                          最新的 20 次运行
  fitbench history --workload llm-6b        某个工作负载的运行
  fitbench history --status oom --limit 5   最近五次显存不足的结论
  fitbench history --json --db ./runs.sqlite

JSON:运行的列表,最新的在前:{run_id, created_at, workload, backend, device, gpu_name,
precision, batch_size, mode, exec_mode, status, peak_memory_bytes, step_seconds,
tokens_per_second, throughput, ...}。`fitbench compare RUN_A RUN_B` 并排显示两次运行。
""",
    "history.--limit": "最新的 N 次运行(默认 20)",
    "history.--workload": "只列出这个工作负载的运行",
    "history.--status": "只列出这种状态的运行:ok、oom、error、timeout",
    "history.--json": "以 JSON 列表打印这些运行",
    "command.compare": "对比历史中的两次运行",
    "compare.epilog": """示例:
  fitbench compare 3f2a91c0 7be01d44        按编号指定两次运行(任何唯一前缀均可)
  fitbench compare 3f2a 7be0 --json

JSON:{"a": run, "b": run, "metrics": [{"name", "a", "b", "ratio"}]},ratio = b / a。
运行编号可以用 `fitbench history` 查到。
""",
    "compare.run_a": "运行编号(或唯一前缀),来自 `fitbench history`",
    "compare.run_b": "与 RUN_A 对比的运行",
    "compare.--json": "以 JSON 打印 {a, b, metrics}",
    "calibrate.description": """`fitbench calibrate`:按本机拟合估算器的效率参数并保存。

实测几个工作负载,它们的选择保证每个常数都有由它决定的数据点(受开销限制的 CNN 步骤、
受算力限制的 Transformer 步骤、受开销限制的生成),或用 --from 读取已保存的实测结果,
然后把拟合出的值写入用户配置。
""",
    "calibrate.epilog": """示例:
  fitbench calibrate                          在本机 GPU 上实测(约 2 分钟)并保存拟合结果
  fitbench calibrate --dry-run                显示拟合结果,不保存
  fitbench calibrate --from benchmarks/results/accuracy-h200-2026-12-02.json
                                              用已保存的实测结果拟合(不需要 GPU)
  fitbench calibrate --exec tuned --from benchmarks/results/speed-h200-2026-12-02.json
                                              用 speed.py 的 tuned 运行拟合 tuned 配置
  fitbench calibrate --reset                  丢弃拟合值
""",
    "calibrate.--from": "用已保存的 benchmarks/accuracy.py 或 speed.py 结果拟合",
    "calibrate.--backend": "用于实测的框架(默认 torch)",
    "calibrate.--device": "cuda 或 cuda:N(默认 cuda)",
    "calibrate.--dry-run": "打印拟合结果,不保存",
    "calibrate.--reset": "删除拟合值,改用默认值",
    "calibrate.--json": "以 JSON 打印拟合结果",
    "command.gpus": "列出 GPU 目录",
    "gpus.epilog": """示例:
  fitbench gpus
  fitbench gpus --json                       每行:gpus.toml 的字段,外加精确的国际单位制数值
  fitbench gpus --toml rtx-4090 > my.toml    把一行写成文件:修改后用 --gpu-spec my.toml
""",
    "gpus.--json": "以 JSON 列表打印目录",
    "gpus.--toml": "把一块显卡打印为 gpus.toml 中的一行(可直接用作 --gpu-spec 文件)",
    "command.workloads": "列出工作负载预设",
    "workloads.epilog": """示例:
  fitbench workloads
  fitbench workloads --json""",
    "workloads.--json": "以 JSON 列表打印预设",
    "command.models": "列出内置的热门模型(离线的 config.json 等价物)",
    "models.epilog": """示例:
  fitbench models
  fitbench models qwen
  fitbench models --json
  fitbench models --families
  fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090""",
    "models.filter": "只显示名称中包含这段文字的模型",
    "models.--json": "以 JSON 列表打印模型",
    "models.--families": (
        "列出 fitbench 能读取的 config.json model_type(这些家族的任何模型都能按其配置估算,不论是否内置)"
    ),
    "group.measurement": "实测",
    "group.options": "选项",
    "group.output": "输出",
    "group.positional arguments": "位置参数",
    "group.serving (--serve: a vLLM-style engine with a paged KV cache)": (
        "推理服务(--serve:带分页 KV 缓存的 vLLM 式推理引擎)"
    ),
    "group.workload overrides": "覆盖工作负载设置",
    "*.--precision": "取值之一:{names}",
    "command.calibrate": "按本机拟合估算器的效率参数",
}


# The values a `{name}` in an entry stands for, by entry: read from the constants the English help is
# built from (imported when the entry is used, i.e. when its command's module has been).
def _check_values(name: str) -> dict[str, str]:
    from fitbench.check import plan

    return {"seconds": f"{getattr(plan, name):g}"}


def _precision_values() -> dict[str, str]:
    from fitbench.core.precision import PRECISION_NAMES

    return {"names": ", ".join(PRECISION_NAMES)}


def _report_values(name: str, constant: str) -> dict[str, str]:
    from fitbench.cli import report

    return {name: str(getattr(report, constant))}


def _estimate_values() -> dict[str, str]:
    from fitbench.cli.estimate import DEFAULT_GPUS

    return {"gpus": ", ".join(DEFAULT_GPUS)}


VALUES: dict[str, Callable[[], dict[str, str]]] = {
    "check.--min-seconds": lambda: _check_values("GPU_MIN_SECONDS"),
    "check.--timeout": lambda: _check_values("DEFAULT_TIMEOUT_S"),
    "estimate.--gpu": _estimate_values,
    "run.--precision": _precision_values,
    "*.--precision": _precision_values,
    "report.--last": lambda: _report_values("n", "DEFAULT_LAST"),
    "report.--html": lambda: _report_values("file", "DEFAULT_HTML"),
}
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
# argparse's own heading before the usage line (the other headings are group titles, in HELP).
USAGE_PREFIX = {"en": "usage: ", "zh": "用法:"}


def translate(
    keys: Sequence[str], text: str | None, lang: str, used: dict[str, set[str]] | None = None
) -> str | None:
    """`text` in `lang`: the entry of the first of `keys` that HELP holds (its values filled in); else `text`.

    `used` collects, by key, the English texts an entry replaced (tests use it: entries no parser
    needs any more, and the fingerprints of the English each entry translates)."""
    if not text or lang == "en":
        return text
    for key in keys:
        if key in HELP:
            if used is not None:
                used.setdefault(key, set()).add(text)
            values = VALUES[key]() if key in VALUES else {}
            return _PLACEHOLDER.sub(lambda m, v=values: v.get(m[1], m[0]), HELP[key])
    return text


def option_key(action: argparse.Action) -> str:
    """How HELP names an argument: its first long option (`--batch` for --batch/--batch-size), else
    its only option (`-h`), else its name (a positional's dest)."""
    longs = [o for o in action.option_strings if o.startswith("--")]
    return longs[0] if longs else (action.option_strings[0] if action.option_strings else action.dest)


def localize(
    parser: argparse.ArgumentParser,
    lang: str,
    command: str = "fitbench",
    used: dict[str, set[str]] | None = None,
) -> None:
    """Put `lang`'s help texts into `parser` and every subcommand parser built under it, in place.

    `command` is the parser's name in HELP (`fitbench` for the top parser). `used`: see translate.
    """
    if lang == "en":
        return
    parser.formatter_class = ZhHelpFormatter
    parser.description = translate(
        [f"{command}.description", f"command.{command}"], parser.description, lang, used
    )
    parser.epilog = translate([f"{command}.epilog"], parser.epilog, lang, used)
    for group in parser._action_groups:
        group.title = translate([f"group.{group.title}"], group.title, lang, used)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:  # the one-line help of each command
                choice.help = translate([f"command.{choice.dest}"], choice.help, lang, used)
            for name, sub in action.choices.items():
                localize(sub, lang, name, used)
        elif action.help and action.help is not argparse.SUPPRESS:
            key = option_key(action)
            action.help = translate([f"{command}.{key}", f"*.{key}"], action.help, lang, used)


def requested_lang(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> str:
    """The language of the help and the errors, before argparse runs: `--lang X` (or `--lang=X`) on the
    line, else the locale. A value that is neither en nor zh gives the locale's language: main then
    refuses the value in the language the reader's machine speaks."""
    from fitbench.advise.i18n import resolve_lang
    from fitbench.errors import FitbenchError

    value = None
    for i, arg in enumerate(argv):
        if arg == "--lang" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--lang="):
            value = arg.split("=", 1)[1]
    try:
        return resolve_lang(value, environ)
    except FitbenchError:
        return resolve_lang(None, environ)


def display_width(text: str) -> int:
    """Terminal columns: a Chinese character takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


# A wrap may break a Chinese line between any two characters, and an ASCII run (a flag, a value) only
# after a comma or semicolon; never before a closing mark.
_TOKENS = re.compile(r"[,;:)\]]|[!-~]+?(?=[\s,;:)\]]|[^!-~]|$)|\s+|.")
_NO_LINE_START = frozenset(",.;:!?)]、。,;:!?)》”")


def wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` columns (argparse's textwrap counts characters and breaks only
    at spaces: Chinese help would run past the terminal's edge in one line)."""
    lines: list[str] = []
    line, used = "", 0
    for token in _TOKENS.findall(" ".join(text.split())):
        size = display_width(token)
        if line and used + size > width and not token.isspace() and token not in _NO_LINE_START:
            lines.append(line.rstrip())
            line, used = "", 0
        if not line and token.isspace():
            continue
        line, used = line + token, used + size
    if line.strip():
        lines.append(line.rstrip())
    return lines


class ZhHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The help of a Chinese parser: argparse's "usage:" in Chinese, help wrapped by display width."""

    def add_usage(self, usage, actions, groups, prefix=None):  # type: ignore[no-untyped-def]
        super().add_usage(usage, actions, groups, USAGE_PREFIX["zh"] if prefix is None else prefix)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap(text, width)


__all__ = [
    "HELP",
    "USAGE_PREFIX",
    "VALUES",
    "ZhHelpFormatter",
    "localize",
    "requested_lang",
    "translate",
    "wrap",
]
