"""Every `--help` text of the CLI in English and Simplified Chinese, and the one walk that puts the
Chinese into a built parser.

Why a table beside the call sites: each option keeps its English help where it is defined (argparse
is read there), and this file keeps what a translator needs top to bottom, as advise/i18n.py does for
the commands' output. An entry is keyed by command and option (`"estimate.--gpu"`; `"*.--db"` for an
option several commands share, `"estimate.description"`, `"estimate.epilog"`, `"group.<title>"`),
and holds the English it translates: the walk swaps a help only when the parser's English is still
that text, so a changed English help shows up in English in both languages (and fails the test that
builds every parser in Chinese) instead of shipping a stale translation. `{name}` marks a value the
English carries (a default taken from a constant): the Chinese gets the same value.

Flags, preset names, values and example command lines are never translated.
"""

from __future__ import annotations

import argparse
import re
import unicodedata
from collections.abc import Mapping, Sequence
from functools import cache

HELP: dict[str, dict[str, str]] = {
    "fitbench.description": {
        "en": "Is this GPU enough for this deep-learning job, and how fast will it run?",
        "zh": "这块 GPU 够不够跑这个深度学习任务?能跑多快?",
    },
    "fitbench.epilog": {
        "en": """examples:
  fitbench                                   check this machine against the three scenarios
  fitbench estimate llm-6b --gpu all         will a 6.7B model load, and how fast, on every card?
  fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090   a bundled model (`fitbench models`)
  fitbench estimate bert-base-imdb --gpu rtx-3060-12gb --precision amp-fp16 --json
  fitbench run resnet50-cifar10 --tiny       measure a tiny variant on this machine
  fitbench run bert-base-imdb --device cuda --precision fp32,amp-fp16
  fitbench history                           past runs
""",
        "zh": """示例:
  fitbench                                   用三个参考场景检查这台机器
  fitbench estimate llm-6b --gpu all         6.7B 模型在每块显卡上能否加载、速度多快?
  fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090   内置模型(`fitbench models`)
  fitbench estimate bert-base-imdb --gpu rtx-3060-12gb --precision amp-fp16 --json
  fitbench run resnet50-cifar10 --tiny       在本机实测迷你版
  fitbench run bert-base-imdb --device cuda --precision fp32,amp-fp16
  fitbench history                           历史运行记录
""",
    },
    "*.--help": {
        "en": "show this help message and exit",
        "zh": "显示此帮助信息并退出",
    },
    "fitbench.--version": {
        "en": "show program's version number and exit",
        "zh": "显示程序版本号并退出",
    },
    "fitbench.--debug": {
        "en": "show tracebacks instead of one-line errors",
        "zh": "出错时显示完整的调用栈,而不是一行错误信息",
    },
    "command.check": {
        "en": "is this machine's GPU enough for the three scenarios? (default)",
        "zh": "这台机器的 GPU 跑得动三个参考场景吗?(默认命令)",
    },
    "check.epilog": {
        "en": """examples:
  fitbench                                  the same as `fitbench check`
  fitbench check --estimate-only            no measurement: estimates and advice in a second
  fitbench check --exec tuned               what the card can do: CUDA graphs, compiled steps, bf16
  fitbench check --backend paddle --lang zh measure with PaddlePaddle, answer in Chinese
  fitbench check --json --no-report         one JSON object on stdout

JSON: {"machine": {...}, "scenarios": [{"key", "workload", "precision", "estimates": {gpu: estimate},
       "measurement": measurement | null, "skipped": reason | null, "run_id", "advice": [{kind, text,
       data}]}], "size_guide": [...], "report": path | null}
""",
        "zh": """示例:
  fitbench                                  与 `fitbench check` 相同
  fitbench check --estimate-only            不实测:一秒内给出估算和建议
  fitbench check --exec tuned               显卡的能力上限:CUDA Graph、编译后的步骤、bf16
  fitbench check --backend paddle --lang zh 用 PaddlePaddle 实测,以中文回答
  fitbench check --json --no-report         在标准输出打印一个 JSON 对象

JSON:{"machine": {...}, "scenarios": [{"key", "workload", "precision", "estimates": {gpu: estimate},
       "measurement": measurement | null, "skipped": reason | null, "run_id", "advice": [{kind, text,
       data}]}], "size_guide": [...], "report": path | null}
""",
    },
    "*.--backend": {
        "en": "framework to measure with (default: the first installed of torch, paddle)",
        "zh": "用于实测的框架(默认:torch、paddle 中第一个已安装的)",
    },
    "*.--exec": {
        "en": (
            "default: the code most users write (eager); tuned: what the card can do (CUDA graphs, "
            "compiled steps, bf16; PyTorch)"
        ),
        "zh": (
            "default:大多数用户写的代码(eager 模式);tuned:显卡的能力上限(CUDA Graph、编译后的步骤、bf16;"
            "仅 PyTorch)"
        ),
    },
    "check.--estimate-only": {
        "en": "estimate only; measure nothing",
        "zh": "只估算,不实测",
    },
    "check.--tiny": {
        "en": "measure the tiny variants even on a GPU (always on a CPU)",
        "zh": "即使有 GPU 也只实测迷你版(在 CPU 上总是如此)",
    },
    "check.--gpu": {
        "en": "catalog cards to compare with (default: the three reference scenarios' cards and an H100)",
        "zh": "用于对比的目录显卡(默认:三个参考场景所用的显卡和一块 H100)",
    },
    "*.--gpu-spec": {
        "en": (
            "a card not in the catalog: a .toml/.json file as `fitbench gpus --toml ID` writes, or "
            "inline 'name=My card,memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5,bf16=209.5' "
            "(repeatable)"
        ),
        "zh": (
            "不在目录中的显卡:`fitbench gpus --toml ID` 写出的 .toml/.json 文件,或内联写法 'name=My card,"
            "memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5,bf16=209.5'(可重复)"
        ),
    },
    "check.--min-seconds": {
        "en": "timed seconds per scenario (default {seconds} on a GPU, 0.5 for tiny runs)",
        "zh": "每个场景至少计时的秒数(默认:GPU 上 {seconds},迷你版 0.5)",
    },
    "check.--timeout": {
        "en": "stop one measurement after S seconds (default {seconds})",
        "zh": "单次实测超过 S 秒即停止(默认 {seconds})",
    },
    "*.--db": {
        "en": "history file (default: the user's fitbench data folder)",
        "zh": "历史文件(默认:用户的 fitbench 数据目录中)",
    },
    "*.--no-history": {
        "en": "do not store the measurements",
        "zh": "不保存实测结果",
    },
    "check.--html": {
        "en": (
            "where to write the report (default: fitbench-report.html in the history's folder, the "
            "user's fitbench data folder)"
        ),
        "zh": "报告写到哪里(默认:历史文件所在目录,即用户的 fitbench 数据目录中的 fitbench-report.html)",
    },
    "check.--no-report": {
        "en": "write no HTML report",
        "zh": "不写 HTML 报告",
    },
    "check.--json": {
        "en": "print one JSON object instead of the table",
        "zh": "打印一个 JSON 对象,而不是表格",
    },
    "*.--lang": {
        "en": "en or zh (default: zh when $LANG starts with zh)",
        "zh": "en 或 zh(默认:$LANG 以 zh 开头时为 zh)",
    },
    "*.--progress": {
        "en": "live progress line on stderr (default: only when stderr is a terminal)",
        "zh": "在标准错误上显示实时进度行(默认:仅当标准错误是终端时)",
    },
    "command.estimate": {
        "en": "estimate memory, verdict, max batch and speed for catalog GPUs",
        "zh": "估算目录中各 GPU 的显存、结论、最大批大小和速度",
    },
    "estimate.epilog": {
        "en": """examples:
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
""",
        "zh": """示例:
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
    },
    "*.workload": {
        "en": "a preset (`fitbench workloads`), a bundled model (`fitbench models`); or use --config",
        "zh": "预设(`fitbench workloads`)或内置模型(`fitbench models`);也可以用 --config",
    },
    "*.--config": {
        "en": "a local Hugging Face config.json (or its folder)",
        "zh": "本地的 Hugging Face config.json(或它所在的目录)",
    },
    "*.--tiny": {
        "en": "the tiny variant of a preset (runs in seconds on a CPU)",
        "zh": "预设的迷你版(在 CPU 上几秒即可跑完)",
    },
    "*.--batch": {
        "en": "batch size",
        "zh": "批大小",
    },
    "*.--prompt-tokens": {
        "en": "prompt length in tokens (generation)",
        "zh": "提示词的 token 数(生成任务)",
    },
    "*.--new-tokens": {
        "en": "tokens to generate (generation)",
        "zh": "要生成的 token 数(生成任务)",
    },
    "*.--seq-len": {
        "en": "sequence length (transformers)",
        "zh": "序列长度(Transformer)",
    },
    "*.--image-size": {
        "en": "image height = width (ResNet)",
        "zh": "图像边长,高 = 宽(ResNet)",
    },
    "*.--weights": {
        "en": (
            "quantized weight storage: int8, nf4[-dq], fp4[-dq], gptq[-8bit][-g64], awq, "
            "fp8[-channel|-tensor], q8_0, q6_k, q5_k_m, q4_k_m, q4_0, q3_k_m, q2_k; none ignores a "
            "config's quantization_config"
        ),
        "zh": (
            "量化权重格式:int8、nf4[-dq]、fp4[-dq]、gptq[-8bit][-g64]、awq、fp8[-channel|-tensor]、q8_0、"
            "q6_k、q5_k_m、q4_k_m、q4_0、q3_k_m、q2_k;none 表示忽略配置中的 quantization_config"
        ),
    },
    "*.--kv-cache": {
        "en": "KV cache dtype for generation: fp16, bf16, fp8 or int8 (default: the compute dtype)",
        "zh": "生成时 KV 缓存的数据类型:fp16、bf16、fp8 或 int8(默认:与计算精度相同)",
    },
    "*.--optimizer": {
        "en": "adam, adamw, sgd or momentum",
        "zh": "adam、adamw、sgd 或 momentum",
    },
    "*.--mode": {
        "en": "train or infer",
        "zh": "train(训练)或 infer(推理)",
    },
    "*.--dataset-size": {
        "en": "samples per epoch",
        "zh": "每轮的样本数",
    },
    "*.--checkpointing": {
        "en": "activation checkpointing (recompute activations in the backward pass)",
        "zh": "激活检查点(反向传播时重新计算激活值)",
    },
    "*.--attention": {
        "en": "fused (SDPA/flash, default) or eager",
        "zh": "fused(SDPA/flash,默认)或 eager",
    },
    "*.--peft": {
        "en": "parameter-efficient fine-tuning: lora or qlora",
        "zh": "参数高效微调:lora 或 qlora",
    },
    "*.--lora-rank": {
        "en": "LoRA rank (default 16)",
        "zh": "LoRA 秩(默认 16)",
    },
    "*.--lora-targets": {
        "en": "attention, attention-mlp (default) or all-linear",
        "zh": "attention、attention-mlp(默认)或 all-linear",
    },
    "*.--gpus": {
        "en": "number of GPUs (default 1)",
        "zh": "GPU 数量(默认 1)",
    },
    "*.--strategy": {
        "en": (
            "multi-GPU strategy: ddp, zero1, zero2, zero3 (DeepSpeed ZeRO), fsdp-shard-grad-op, "
            "fsdp-full-shard (fsdp) or tp"
        ),
        "zh": (
            "多卡策略:ddp、zero1、zero2、zero3(DeepSpeed ZeRO)、fsdp-shard-grad-op、fsdp-full-shard(fsdp)"
            "或 tp"
        ),
    },
    "*.--optimizer-impl": {
        "en": "torch.optim implementation: foreach (default, what torch picks on CUDA), fused or for-loop",
        "zh": "torch.optim 的实现:foreach(默认,即 torch 在 CUDA 上的选择)、fused 或 for-loop",
    },
    "*.--grad-accum": {
        "en": (
            "gradient accumulation over N micro-batches (default 1: gradients freed between steps; N > 1 "
            "keeps them alive through forward and backward)"
        ),
        "zh": (
            "在 N 个微批次上累积梯度(默认 1:梯度在步与步之间释放;N 大于 1 时梯度在前向和反向传播期间一直保留)"
        ),
    },
    "estimate.--gpu": {
        "en": "catalog GPU (repeatable, comma-separated, or 'all'); default: {gpus}",
        "zh": "目录中的 GPU(可重复、可用逗号分隔,或 'all');默认:{gpus}",
    },
    "estimate.--framework": {
        "en": "whose memory behaviour and efficiencies to assume (default torch)",
        "zh": "按哪个框架的显存行为和效率估算(默认 torch)",
    },
    "estimate.--fail-if": {
        "en": (
            "exit with status 3 when any verdict is VERDICT or worse, on the ladder fits < tight < "
            "offload < oom (for CI gates)"
        ),
        "zh": (
            "任一结论达到 VERDICT 或更差时以状态码 3 退出,由好到差依次为 fits < tight < offload < "
            "oom(用于 CI 门禁)"
        ),
    },
    "estimate.--offload": {
        "en": (
            "for generation that does not fit: layers on the GPU, CPU RAM and speed with CPU offload "
            "(accelerate device_map, llama.cpp --n-gpu-layers); verdict 'offload'"
        ),
        "zh": (
            "对放不下的生成任务:给出 CPU 卸载时 GPU 上的层数、所需 CPU 内存和速度(accelerate 的 "
            "device_map、llama.cpp 的 --n-gpu-layers);结论为 'offload'"
        ),
    },
    "estimate.--json": {
        "en": 'print {"estimates": [...]} as JSON',
        "zh": '以 JSON 打印 {"estimates": [...]}',
    },
    "estimate.--serve": {
        "en": "KV-cache capacity, concurrent users, time to first token and throughput",
        "zh": "KV 缓存容量、并发用户数、首 token 延迟和吞吐量",
    },
    "estimate.--context": {
        "en": "max_model_len: the longest request (default 4096)",
        "zh": "max_model_len:最长的请求(默认 4096)",
    },
    "estimate.--gpu-memory-utilization": {
        "en": "share of the card the engine takes (default 0.9)",
        "zh": "推理引擎占用显卡显存的比例(默认 0.9)",
    },
    "estimate.--max-num-seqs": {
        "en": "sequences per step (default: vLLM's, 1024 on >= 70 GiB cards, else 256)",
        "zh": "每步的序列数(默认:与 vLLM 相同,显存 >= 70 GiB 的显卡为 1024,否则 256)",
    },
    "estimate.--max-num-batched-tokens": {
        "en": "tokens per step (default: vLLM's, 8192 on >= 70 GiB cards, else 2048)",
        "zh": "每步的 token 数(默认:与 vLLM 相同,显存 >= 70 GiB 的显卡为 8192,否则 2048)",
    },
    "estimate.--block-size": {
        "en": "tokens per KV block (default 16)",
        "zh": "每个 KV 块的 token 数(默认 16)",
    },
    "command.run": {
        "en": "measure a workload for real through PyTorch or PaddlePaddle",
        "zh": "通过 PyTorch 或 PaddlePaddle 实测一个工作负载",
    },
    "run.epilog": {
        "en": """examples:
  fitbench run resnet50-cifar10 --tiny                  a tiny ResNet end to end, in seconds on a CPU
  fitbench run bert-base-imdb --device cuda --precision fp32,amp-fp16
                                                        AMP's memory saving and speed-up, measured
  fitbench run llm-6b --device cuda --batch 8           load, prefill and tokens/s of a 6.7B model
  fitbench run resnet50-cifar10 --device cuda --max-batch
                                                        the largest batch that really fits
  fitbench run bert-base-imdb --data ./aclImdb --json   real IMDb reviews, JSON result
  fitbench run llm-6b --backend paddle --gpu rtx-4090   compare against another card's estimate

JSON (one precision): {"workload", "estimate" | null, "measurement", "error_vs_estimate", "diagnosis",
"run_id"};
with a precision list, a list of those, each with "comparison" against the first.
error_vs_estimate = (estimate - measured) / measured: +0.10 means the estimate is 10% high.
Out of memory is a verdict (status "oom", exit code 0), not a failure.
""",
        "zh": """示例:
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
    },
    "run.--precision": {
        "en": "one of {names}; a comma-separated list compares them",
        "zh": "取值之一:{names};用逗号分隔的列表会逐一对比",
    },
    "run.--device": {
        "en": "cpu, cuda or cuda:N (default: cuda when a GPU is found)",
        "zh": "cpu、cuda 或 cuda:N(默认:发现 GPU 时为 cuda)",
    },
    "run.--gpu": {
        "en": "catalog GPU whose estimate to compare with (default: this machine's GPU)",
        "zh": "与哪块目录 GPU 的估算对比(默认:本机的 GPU)",
    },
    "run.--emulate": {
        "en": (
            "cap device memory at a catalog card's usable memory (or a --gpu-spec form's): does it fit "
            "there? (implies --gpu ID)"
        ),
        "zh": (
            "把设备显存限制为某块目录显卡(或 --gpu-spec 写法描述的显卡)的可用显存:"
            "在那块卡上放得下吗?(隐含 --gpu ID)"
        ),
    },
    "run.--gpu-spec": {
        "en": (
            "a card not in the catalog: a .toml/.json file as `fitbench gpus --toml ID` writes, or "
            "inline 'name=My card,memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5,bf16=209.5'"
        ),
        "zh": (
            "不在目录中的显卡:`fitbench gpus --toml ID` 写出的 .toml/.json 文件,或内联写法 'name=My card,"
            "memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5,bf16=209.5'"
        ),
    },
    "run.--data": {
        "en": "local dataset: CIFAR-10 python batches or tar.gz, IMDb aclImdb/ (default synthetic)",
        "zh": "本地数据集:CIFAR-10 的 python 批文件或 tar.gz,IMDb 的 aclImdb/(默认为合成数据)",
    },
    "run.--max-batch": {
        "en": "also search the largest batch that fits (fresh process per probe)",
        "zh": "同时搜索放得下的最大批大小(每次探测都在新进程中进行)",
    },
    "run.--batch-limit": {
        "en": "largest batch --max-batch tries (default: 8x the start, at least 64)",
        "zh": "--max-batch 尝试的最大批大小(默认:起始值的 8 倍,至少 64)",
    },
    "run.--timeout": {
        "en": "stop a measurement after S seconds (default 900)",
        "zh": "单次实测超过 S 秒即停止(默认 900)",
    },
    "run.--min-steps": {
        "en": "timed steps at least (default 10; 3 generate calls)",
        "zh": "至少计时的步数(默认 10;生成任务为 3 次 generate 调用)",
    },
    "run.--min-seconds": {
        "en": "timed seconds at least (default 3; 0.5 for tiny CPU runs)",
        "zh": "至少计时的秒数(默认 3;CPU 上的迷你版为 0.5)",
    },
    "run.--warmup": {
        "en": "untimed steps first (default 3; 1 for generation)",
        "zh": "先运行的不计时步数(默认 3;生成任务为 1)",
    },
    "run.--json": {
        "en": "print the result as JSON",
        "zh": "以 JSON 打印结果",
    },
    "command.report": {
        "en": "write an HTML or Markdown report of past runs",
        "zh": "为过去的运行写一份 HTML 或 Markdown 报告",
    },
    "report.epilog": {
        "en": """examples:
  fitbench report                               the 10 newest runs -> the data folder's fitbench-report.html
  fitbench report --out ./runs.html             choose where it goes (.md writes Markdown)
  fitbench report --last 30 --html runs.html
  fitbench report 3fa2c1d0 9b1e --markdown runs.md   chosen runs (any unique id prefix)
  fitbench report --lang zh                     in Simplified Chinese

The HTML file is self-contained (inline CSS and SVG charts): it opens offline and can be mailed.
""",
        "zh": """示例:
  fitbench report                               最新的 10 次运行 -> 数据目录中的 fitbench-report.html
  fitbench report --out ./runs.html             指定写到哪里(.md 则写 Markdown)
  fitbench report --last 30 --html runs.html
  fitbench report 3fa2c1d0 9b1e --markdown runs.md   指定的运行(任何唯一的编号前缀均可)
  fitbench report --lang zh                     简体中文

HTML 文件是自包含的(内联 CSS 和 SVG 图表):可以离线打开,也可以用邮件发送。
""",
    },
    "report.run_ids": {
        "en": "runs to report (default: the newest)",
        "zh": "要报告的运行(默认:最新的几次)",
    },
    "report.--last": {
        "en": "the N newest runs (default {n})",
        "zh": "最新的 N 次运行(默认 {n})",
    },
    "report.--html": {
        "en": "write the HTML report here (default: {file} in the history's folder)",
        "zh": "把 HTML 报告写到这里(默认:历史文件所在目录中的 {file})",
    },
    "report.--out": {
        "en": "where the report goes: FILE.md writes Markdown, any other name HTML",
        "zh": "报告写到哪里:FILE.md 写 Markdown,其他文件名写 HTML",
    },
    "report.--markdown": {
        "en": "write a Markdown report (tables, no charts)",
        "zh": "写一份 Markdown 报告(只有表格,没有图表)",
    },
    "command.history": {
        "en": "list past runs stored in the history",
        "zh": "列出历史中保存的过去运行",
    },
    "history.epilog": {
        "en": """examples:
  fitbench history                          the 20 newest runs
  fitbench history --workload llm-6b        runs of one workload
  fitbench history --status oom --limit 5   the last five out-of-memory verdicts
  fitbench history --json --db ./runs.sqlite

JSON: a list of runs, newest first: {run_id, created_at, workload, backend, device, gpu_name,
precision, batch_size, mode, exec_mode, status, peak_memory_bytes, step_seconds,
tokens_per_second, throughput, ...}. `fitbench compare RUN_A RUN_B` shows two side by side.
""",
        "zh": """示例:
  fitbench history                          最新的 20 次运行
  fitbench history --workload llm-6b        某个工作负载的运行
  fitbench history --status oom --limit 5   最近五次显存不足的结论
  fitbench history --json --db ./runs.sqlite

JSON:运行的列表,最新的在前:{run_id, created_at, workload, backend, device, gpu_name,
precision, batch_size, mode, exec_mode, status, peak_memory_bytes, step_seconds,
tokens_per_second, throughput, ...}。`fitbench compare RUN_A RUN_B` 并排显示两次运行。
""",
    },
    "history.--limit": {
        "en": "newest N runs (default 20)",
        "zh": "最新的 N 次运行(默认 20)",
    },
    "history.--workload": {
        "en": "only runs of this workload",
        "zh": "只列出这个工作负载的运行",
    },
    "history.--status": {
        "en": "only runs with this status: ok, oom, error, timeout",
        "zh": "只列出这种状态的运行:ok、oom、error、timeout",
    },
    "history.--json": {
        "en": "print the runs as a JSON list",
        "zh": "以 JSON 列表打印这些运行",
    },
    "command.compare": {
        "en": "compare two runs from the history",
        "zh": "对比历史中的两次运行",
    },
    "compare.epilog": {
        "en": """examples:
  fitbench compare 3f2a91c0 7be01d44        two runs by id (any unique prefix works)
  fitbench compare 3f2a 7be0 --json

JSON: {"a": run, "b": run, "metrics": [{"name", "a", "b", "ratio"}]}, ratio = b / a.
Find run ids with `fitbench history`.
""",
        "zh": """示例:
  fitbench compare 3f2a91c0 7be01d44        按编号指定两次运行(任何唯一前缀均可)
  fitbench compare 3f2a 7be0 --json

JSON:{"a": run, "b": run, "metrics": [{"name", "a", "b", "ratio"}]},ratio = b / a。
运行编号可以用 `fitbench history` 查到。
""",
    },
    "compare.run_a": {
        "en": "run id (or unique prefix) from `fitbench history`",
        "zh": "运行编号(或唯一前缀),来自 `fitbench history`",
    },
    "compare.run_b": {
        "en": "the run to compare with RUN_A",
        "zh": "与 RUN_A 对比的运行",
    },
    "compare.--json": {
        "en": "print {a, b, metrics} as JSON",
        "zh": "以 JSON 打印 {a, b, metrics}",
    },
    "calibrate.description": {
        "en": """`fitbench calibrate`: fit the estimator's efficiencies to this machine and keep them.

Measures a few workloads chosen so that each constant has points it governs (an
overhead-bound CNN step, compute-bound transformer steps, an overhead-bound generation), or
reads stored measurements with --from, then writes the fitted values to the user profile.
""",
        "zh": """`fitbench calibrate`:按本机拟合估算器的效率参数并保存。

实测几个工作负载,它们的选择保证每个常数都有由它决定的数据点(受开销限制的 CNN 步骤、
受算力限制的 Transformer 步骤、受开销限制的生成),或用 --from 读取已保存的实测结果,
然后把拟合出的值写入用户配置。
""",
    },
    "calibrate.epilog": {
        "en": """examples:
  fitbench calibrate                          measure on this GPU (about 2 minutes) and keep the fit
  fitbench calibrate --dry-run                show the fit, keep nothing
  fitbench calibrate --from benchmarks/results/accuracy-h200-2026-12-02.json
                                              fit from stored measurements (no GPU needed)
  fitbench calibrate --exec tuned --from benchmarks/results/speed-h200-2026-12-02.json
                                              fit the tuned profile from speed.py's tuned runs
  fitbench calibrate --reset                  forget the fitted values
""",
        "zh": """示例:
  fitbench calibrate                          在本机 GPU 上实测(约 2 分钟)并保存拟合结果
  fitbench calibrate --dry-run                显示拟合结果,不保存
  fitbench calibrate --from benchmarks/results/accuracy-h200-2026-12-02.json
                                              用已保存的实测结果拟合(不需要 GPU)
  fitbench calibrate --exec tuned --from benchmarks/results/speed-h200-2026-12-02.json
                                              用 speed.py 的 tuned 运行拟合 tuned 配置
  fitbench calibrate --reset                  丢弃拟合值
""",
    },
    "calibrate.--from": {
        "en": "fit from a stored benchmarks/accuracy.py or speed.py result",
        "zh": "用已保存的 benchmarks/accuracy.py 或 speed.py 结果拟合",
    },
    "calibrate.--backend": {
        "en": "framework to measure with (default torch)",
        "zh": "用于实测的框架(默认 torch)",
    },
    "calibrate.--device": {
        "en": "cuda or cuda:N (default cuda)",
        "zh": "cuda 或 cuda:N(默认 cuda)",
    },
    "calibrate.--dry-run": {
        "en": "print the fit, do not keep it",
        "zh": "打印拟合结果,不保存",
    },
    "calibrate.--reset": {
        "en": "delete the fitted values and use the defaults",
        "zh": "删除拟合值,改用默认值",
    },
    "calibrate.--json": {
        "en": "print the fit as JSON",
        "zh": "以 JSON 打印拟合结果",
    },
    "command.gpus": {
        "en": "list the GPU catalog",
        "zh": "列出 GPU 目录",
    },
    "gpus.epilog": {
        "en": """examples:
  fitbench gpus
  fitbench gpus --json                       every row: the gpus.toml fields plus exact SI figures
  fitbench gpus --toml rtx-4090 > my.toml    one row as a file: edit it, then --gpu-spec my.toml
""",
        "zh": """示例:
  fitbench gpus
  fitbench gpus --json                       每行:gpus.toml 的字段,外加精确的国际单位制数值
  fitbench gpus --toml rtx-4090 > my.toml    把一行写成文件:修改后用 --gpu-spec my.toml
""",
    },
    "gpus.--json": {
        "en": "print the catalog as a JSON list",
        "zh": "以 JSON 列表打印目录",
    },
    "gpus.--toml": {
        "en": "print one card as a gpus.toml row (a valid --gpu-spec file)",
        "zh": "把一块显卡打印为 gpus.toml 中的一行(可直接用作 --gpu-spec 文件)",
    },
    "command.workloads": {
        "en": "list the workload presets",
        "zh": "列出工作负载预设",
    },
    "workloads.epilog": {
        "en": """examples:
  fitbench workloads
  fitbench workloads --json""",
        "zh": """示例:
  fitbench workloads
  fitbench workloads --json""",
    },
    "workloads.--json": {
        "en": "print the presets as a JSON list",
        "zh": "以 JSON 列表打印预设",
    },
    "command.models": {
        "en": "list the bundled popular models (offline config.json equivalents)",
        "zh": "列出内置的热门模型(离线的 config.json 等价物)",
    },
    "models.epilog": {
        "en": """examples:
  fitbench models
  fitbench models qwen
  fitbench models --json
  fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090""",
        "zh": """示例:
  fitbench models
  fitbench models qwen
  fitbench models --json
  fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090""",
    },
    "models.filter": {
        "en": "show only models whose name contains this text",
        "zh": "只显示名称中包含这段文字的模型",
    },
    "models.--json": {
        "en": "print the models as a JSON list",
        "zh": "以 JSON 列表打印模型",
    },
    "group.measurement": {
        "en": "measurement",
        "zh": "实测",
    },
    "group.options": {
        "en": "options",
        "zh": "选项",
    },
    "group.output": {
        "en": "output",
        "zh": "输出",
    },
    "group.positional arguments": {
        "en": "positional arguments",
        "zh": "位置参数",
    },
    "group.serving (--serve: a vLLM-style engine with a paged KV cache)": {
        "en": "serving (--serve: a vLLM-style engine with a paged KV cache)",
        "zh": "推理服务(--serve:带分页 KV 缓存的 vLLM 式推理引擎)",
    },
    "group.workload overrides": {
        "en": "workload overrides",
        "zh": "覆盖工作负载设置",
    },
    "*.--precision": {
        "en": "one of {names}",
        "zh": "取值之一:{names}",
    },
    "command.calibrate": {
        "en": "fit the estimator's efficiencies to this machine",
        "zh": "按本机拟合估算器的效率参数",
    },
}

# Placeholders: a `{name}` in an English text stands for a value (a default from a constant).
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
# argparse's own heading before the usage line (the other headings are group titles, in HELP).
USAGE_PREFIX = {"en": "usage: ", "zh": "用法:"}


@cache
def _pattern(english: str) -> re.Pattern[str]:
    """The English text as a regular expression whose groups are its placeholders' values."""
    parts = _PLACEHOLDER.split(english)
    return re.compile(
        "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts)), re.S
    )


def translate(keys: Sequence[str], text: str | None, lang: str, used: set[str] | None = None) -> str | None:
    """`text` in `lang`, from the first of `keys` whose English it is (values carried over); else `text`."""
    if not text or lang == "en":
        return text
    for key in keys:
        entry = HELP.get(key)
        match = _pattern(entry["en"]).fullmatch(text) if entry else None
        if entry and match:
            if used is not None:
                used.add(key)
            values = match.groupdict()
            return _PLACEHOLDER.sub(lambda m, v=values: v[m[1]], entry.get(lang) or entry["en"])
    return text


def option_key(action: argparse.Action) -> str:
    """How HELP names an argument: its first long option (`--batch` for --batch/--batch-size), else
    its only option (`-h`), else its name (a positional's dest)."""
    longs = [o for o in action.option_strings if o.startswith("--")]
    return longs[0] if longs else (action.option_strings[0] if action.option_strings else action.dest)


def localize(
    parser: argparse.ArgumentParser, lang: str, command: str = "fitbench", used: set[str] | None = None
) -> None:
    """Put `lang`'s help texts into `parser` and every subcommand parser built under it, in place.

    `command` is the parser's name in HELP (`fitbench` for the top parser). `used` collects the keys
    that matched (a test uses it to find entries no parser needs any more).
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


__all__ = ["HELP", "USAGE_PREFIX", "ZhHelpFormatter", "localize", "requested_lang", "translate", "wrap"]
