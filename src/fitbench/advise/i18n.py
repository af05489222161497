"""Every sentence `fitbench check`, its advice and the reports show, in English and Simplified Chinese.

Why a catalogue and not gettext: fitbench has one dependency-free wheel and two languages; a dict
of key -> {"en", "zh"} with str.format placeholders is enough, is checked by a test (both
languages, the same placeholders) and keeps every user-facing sentence in one file a translator
can read top to bottom. Identifiers (workload names, precisions such as amp-fp16, GPU names,
units such as GiB and tok/s) are never translated.

The language is `--lang en|zh`, else Chinese when $LANG (or $LC_ALL / $LC_MESSAGES) starts with
"zh", else English.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

LANGS = ("en", "zh")

MESSAGES: dict[str, dict[str, str]] = {
    # -- verdicts, statuses, bottlenecks ------------------------------------------------------
    "verdict.fits": {"en": "fits", "zh": "可以运行"},
    "verdict.tight": {"en": "tight", "zh": "勉强"},
    "verdict.offload": {"en": "fits with offload", "zh": "卸载部分层到内存后可运行"},
    "verdict.oom": {"en": "out of memory", "zh": "显存不足"},
    "status.ok": {"en": "ok", "zh": "完成"},
    "status.oom": {"en": "out of memory", "zh": "显存不足"},
    "status.error": {"en": "error", "zh": "出错"},
    "status.timeout": {"en": "timed out", "zh": "超时"},
    "status.killed": {"en": "killed", "zh": "被终止"},
    "status.skipped": {"en": "not run", "zh": "未运行"},
    "bottleneck.compute": {"en": "compute", "zh": "算力"},
    "bottleneck.memory": {"en": "memory bandwidth", "zh": "显存带宽"},
    "bottleneck.overhead": {"en": "launch and host overhead", "zh": "内核启动与主机端开销"},
    # -- memory breakdown parts (fitbench.estimate.breakdown.PART_NAMES) ------------------------
    "part.weights": {"en": "weights", "zh": "权重"},
    "part.quantization_scales": {"en": "quantization scales", "zh": "量化缩放系数"},
    "part.dequant_workspace": {"en": "dequantization workspace", "zh": "反量化工作区"},
    "part.master_weights": {"en": "FP32 master weights", "zh": "FP32 主权重"},
    "part.amp_weight_copies": {"en": "AMP weight copies", "zh": "混合精度权重副本"},
    "part.gradients": {"en": "gradients", "zh": "梯度"},
    "part.optimizer_state": {"en": "optimizer state", "zh": "优化器状态"},
    "part.activations": {"en": "activations", "zh": "激活值"},
    "part.kv_cache": {"en": "KV cache", "zh": "KV 缓存"},
    "part.temporaries": {"en": "temporary buffers", "zh": "临时缓冲区"},
    "part.workspace": {"en": "library workspace", "zh": "计算库工作区"},
    "part.fragmentation": {"en": "allocator fragmentation", "zh": "分配器碎片"},
    "part.cuda_context": {"en": "CUDA context", "zh": "CUDA 上下文"},
    # -- units and small phrases ----------------------------------------------------------------
    "unit.per_step": {"en": "{time}/step", "zh": "{time}/步"},
    "unit.per_epoch": {"en": "{time}/epoch", "zh": "{time}/轮"},
    "unit.gb_class": {"en": "{gb} GB", "zh": "{gb} GB"},
    "cell.tiny": {"en": "{text} (tiny: smoke test)", "zh": "{text}(迷你版:冒烟测试)"},
    "params.millions": {"en": "{value}M", "zh": "{value} 万"},
    "params.billions": {"en": "{value}B", "zh": "{value} 亿"},
    "band.<100M": {"en": "< 100M parameters", "zh": "1 亿参数以下"},
    "band.0.1-3B": {"en": "0.1–3B parameters", "zh": "1 亿~30 亿参数"},
    "band.>3B": {"en": "> 3B parameters", "zh": "30 亿参数以上"},
    "bottleneck.memory-capacity": {"en": "memory capacity (OOM)", "zh": "显存容量(OOM)"},
    "rate.decode": {"en": "decode {rate}", "zh": "解码 {rate}"},
    "rate.end_to_end": {"en": "end-to-end {rate}", "zh": "端到端 {rate}"},
    # -- a timed figure's spread over its repeated windows (fitbench.measure.timing) ------------
    "spread.stable": {"en": "±{pct}", "zh": "±{pct}"},
    "spread.unstable": {"en": "±{pct}, unstable", "zh": "±{pct},不稳定"},
    "spread.figure.step_seconds": {"en": "The step time", "zh": "单步耗时"},
    "spread.figure.generate_seconds": {"en": "The generate call's time", "zh": "每次生成的耗时"},
    "spread.figure.prefill_seconds": {"en": "The prefill time", "zh": "预填充耗时"},
    "spread.figure.decode_step_seconds": {"en": "The decode step", "zh": "解码单步耗时"},
    "spread.not_settled": {
        "en": "{figure} is unstable: after {run} timed windows its last {windows} were still {pct} apart "
        "(the target is under {target}); read it as ±{pct}.",
        "zh": "{figure}不稳定:重复 {run} 个计时窗口后,最后 {windows} 个窗口仍相差 {pct}"
        "(目标是 {target} 以内),请按 ±{pct} 看待。",
    },
    "spread.one_window": {
        "en": "{figure} was timed in one window: its spread is not known.",
        "zh": "{figure}只计时了一个窗口,无法得知其波动。",
    },
    # -- install ------------------------------------------------------------------------------------
    "install.no_framework": {
        "en": "no framework installed to measure with (this install only estimates)",
        "zh": "没有安装用于实测的框架(当前安装只能估算)",
    },
    "install.no_framework_hint": {
        "en": "to measure: pip install 'fitbench[torch]' (or 'fitbench[paddle]'); "
        "`fitbench estimate` needs neither",
        "zh": "如需实测:pip install 'fitbench[torch]'(或 'fitbench[paddle]');"
        "`fitbench estimate` 两者都不需要",
    },
    # -- fitbench estimate --------------------------------------------------------------------------
    "est.title": {
        "en": "{name}: {family} {mode}, {params} parameters, batch {batch}, {shape}, {precision}{extra}",
        "zh": "{name}:{family} {mode},{params}参数,批大小 {batch},{shape},{precision}{extra}",
    },
    "est.shape_seq": {"en": "seq {n}", "zh": "序列长度 {n}"},
    "est.shape_tokens": {"en": "{prompt}+{new} tokens", "zh": "{prompt}+{new} 个 token"},
    "est.shape_image": {"en": "{n}px", "zh": "{n}px"},
    "est.per_gpu": {
        "en": "{gpus} GPUs ({strategy}), memory per GPU",
        "zh": "{gpus} 块 GPU({strategy}),显存按每块计",
    },
    "est.memory_at_peak": {"en": "memory at the peak ({phase}):", "zh": "峰值时刻({phase})的显存构成:"},
    "est.first_step_reserve": {
        "en": "  allocator fragmentation includes {size} that the first step reserves beside its freed "
        "activations (its gradients and optimizer state found no cached block large enough); "
        "the allocator releases it when memory runs short, so the verdict leaves it out.",
        "zh": "  其中分配器碎片含首步预留的 {size}(梯度和优化器状态找不到足够大的缓存块,只能另申请显存段,"
        "与已释放的激活缓存并存);显存紧张时分配器会释放它,因此判定不计入这部分。",
    },
    "est.capture_warmup_reserve": {
        "en": "  allocator fragmentation includes {size} that the CUDA graph's warm-up reserves: it runs "
        "on a side stream, which cannot reuse the blocks the compiling step left cached; the "
        "allocator releases them when memory runs short, so the verdict leaves them out.",
        "zh": "  其中分配器碎片含 CUDA 图预热时预留的 {size}:预热在副流上运行,无法复用编译步骤留下的缓存块;"
        "显存紧张时分配器会释放它们,因此判定不计入这部分。",
    },
    "est.total": {"en": "total", "zh": "合计"},
    "col.part": {"en": "part", "zh": "部分"},
    "col.bytes": {"en": "bytes", "zh": "大小"},
    "est.roofline": {
        "en": "bandwidth roofline: {rate}; prefill {prefill}",
        "zh": "带宽上限:{rate};预填充 {prefill}",
    },
    "est.fragmentation": {
        "en": "peak above usable, yet no oom: the peak counts the allocator's cached blocks "
        "(fragmentation), which it frees under memory pressure; the verdict leaves them out.",
        "zh": "峰值超过可用显存却不是显存不足:峰值包含分配器缓存的空闲块(碎片),"
        "显存紧张时分配器会释放它们,结论不计这部分。",
    },
    "est.fragmentation_capped": {
        "en": "peak at the card's usable memory, yet no oom: the allocator's cached blocks "
        "(fragmentation) would grow past the card, and it frees them and retries before it fails; "
        "the verdict leaves them out.",
        "zh": "峰值达到可用显存上限却不是显存不足:分配器缓存的空闲块(碎片)会超出显卡容量,"
        "分配器在失败前会释放它们并重试;结论不计这部分。",
    },
    "est.legend": {
        "en": "verdict: fits | tight (< 10% of usable memory left) | oom. Speeds: decode tok/s for "
        "generation. "
        "Estimates; `fitbench run` measures.",
        "zh": "结论:可以运行 | 勉强(剩余可用显存不到 10%)| 显存不足。生成任务的速度为解码 tok/s。"
        "以上均为估算;`fitbench run` 可实测。",
    },
    "est.legend_offload": {
        "en": "verdict: fits | tight (< 10% of usable memory left) | offload (runs with layers in CPU "
        "memory) | oom. Speeds: decode tok/s for generation. Estimates; `fitbench run` measures.",
        "zh": "结论:可以运行 | 勉强(剩余可用显存不到 10%)| offload(部分层放在 CPU 内存中运行)"
        "| 显存不足。生成任务的速度为解码 tok/s。以上均为估算;`fitbench run` 可实测。",
    },
    "est.units": {
        "en": 'Memory in GiB (2^30 bytes = 1.074 GB, as nvidia-smi counts); the "24GB" on a card\'s box '
        "means 24 GiB. Usable is what is left after the driver's reserve (`fitbench gpus` shows both units).",
        "zh": "显存单位为 GiB(2^30 字节 = 1.074 GB,与 nvidia-smi 相同);显卡包装上的“24GB”指 24 GiB。"
        "“可用显存”是扣除驱动预留后剩下的部分(`fitbench gpus` 同时列出两种单位)。",
    },
    "est.tf32": {
        "en": "{card}: FP32 matmuls run at the FP32 peak, because PyTorch leaves TF32 off for matmuls by "
        "default; enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True): estimated {speedup}× faster "
        "({speed}).",
        "zh": "{card}:FP32 矩阵乘法按 FP32 峰值估算,因为 PyTorch 默认对矩阵乘法关闭 TF32;"
        "启用 TF32(torch.backends.cuda.matmul.allow_tf32 = True)估计可快 {speedup} 倍({speed})。",
    },
    "est.fix_header": {
        "en": "{name} on {gpu}: {verdict} ({peak} needed, {usable} usable). "
        "What would make it fit (estimated):",
        "zh": "{name} 在 {gpu} 上的结论:{verdict}(需要 {peak},可用 {usable})。以下做法的估算效果:",
    },
    "est.no_fix": {
        "en": "{name} on {gpu}: {verdict}; no single change fitbench knows makes it fit.",
        "zh": "{name} 在 {gpu} 上的结论:{verdict};fitbench 已知的单项改动都无法让它放下。",
    },
    # -- fitbench run -------------------------------------------------------------------------------
    "gpus.units": {
        "en": "Memory in two units: GiB (2^30 bytes, as nvidia-smi and fitbench count) and GB (10^9 bytes). "
        'The "24GB" on a card\'s box means 24 GiB, which is 25.8 GB.',
        "zh": "显存给出两种单位:GiB(2^30 字节,nvidia-smi 与 fitbench 的计法)和 GB(10^9 字节)。"
        "显卡包装上的“24GB”指 24 GiB,即 25.8 GB。",
    },
    "gpus.tflops": {
        "en": "TFLOPS are dense datasheet peaks (tensor cores with FP32 accumulation); price: launch price; "
        "rent: an example on-demand rate per GPU (provider and date: `fitbench gpus --json`).",
        "zh": "TFLOPS 为数据手册中的稠密峰值(Tensor Core,FP32 累加);首发价即发布时的官方价格;"
        "租用价为每块 GPU 的按需租用示例价格(提供商与日期见 `fitbench gpus --json`)。",
    },
    "gpus.not_measured": {
        "en": "* not measured: fitbench has never run on this card's framework path; estimates only.",
        "zh": "* 未实测:fitbench 从未在这类显卡的框架路径上运行过;仅为估算。",
    },
    "history.count": {"en": "{count} run(s) from {path}", "zh": "共 {count} 条记录,来自 {path}"},
    "col.batch": {"en": "batch", "zh": "批大小"},
    "cell.ran": {"en": "ran {precision}", "zh": "实际精度 {precision}"},
    "run.smoke": {"en": "smoke test", "zh": "冒烟测试"},
    "run.smoke_test": {
        "en": "tiny variant: a smoke test of the pipeline at small shapes; its step time and epoch say "
        "nothing about the real job (`fitbench estimate {name}` does).",
        "zh": "迷你版:用很小的尺寸对流程做冒烟测试;它的单步耗时和每轮耗时不代表真实任务"
        "(真实任务请看 `fitbench estimate {name}`)。",
    },
    "run.not_comparable": {
        "en": "not comparable with the estimate: {reasons}.",
        "zh": "实测与估算不可比较:{reasons}。",
    },
    "run.reason.cpu": {
        "en": "measured on the CPU, while the estimate is for a GPU",
        "zh": "实测在 CPU 上进行,而估算针对 GPU",
    },
    "run.reason.tiny": {
        "en": "the tiny variant ran (a smoke test), not the job at its real size",
        "zh": "运行的是迷你版(冒烟测试),不是真实尺寸的任务",
    },
    "run.reason.first_run": {
        "en": "no warm-up steps (--warmup 0): the first steps' start-up costs (first kernels, the "
        "allocator, autotuning) are timed",
        "zh": "没有预热步骤(--warmup 0):前几步的启动开销(首批内核、显存分配器、自动调优)被计入耗时",
    },
    "run.reason.uncompiled": {
        "en": "the step ran uncompiled (--no-compile, no Triton, or compiling failed), while the "
        "estimate counts the compiled step's fused kernels",
        "zh": "步骤未经编译运行(--no-compile、没有 Triton 或编译失败),而估算按编译后步骤的融合内核计算",
    },
    "run.reason.sep": {"en": "; ", "zh": ";"},
    "run.max_batch_not_comparable": {
        "en": "max batch not comparable with the estimate: {reasons}.",
        "zh": "最大批大小无法与估算对照:{reasons}。",
    },
    "run.max_batch_reason.cpu": {
        "en": "found on the CPU, where host RAM bounds it, while the estimate is for the GPU card's memory",
        "zh": "它是在 CPU 上找到的,受主机内存限制,而估算针对的是显卡的显存",
    },
    "run.cell.not_comparable": {"en": "not comparable", "zh": "不可对照"},
    "report.not_comparable": {"en": "not comparable: {reasons}", "zh": "不可对照:{reasons}"},
    "report.host_estimate": {
        "en": "{estimate} for this machine's host (host {ratio}x the reference's time per operation; "
        "reference host: {reference})",
        "zh": "{estimate},按本机的主机计(本机主机每个操作耗时为参考主机的 {ratio} 倍;按参考主机:{reference})",
    },
    "run.search_capped.host_ram": {
        "en": "max-batch search capped at batch {limit} (from {start}, not {uncapped}): a CPU run may "
        "fill at most {share} of the {available} of RAM available, a larger probe would be killed by "
        "the system rather than fail cleanly",
        "zh": "最大批大小搜索上限为 {limit}(从 {start} 开始,而不是 {uncapped}):CPU 运行最多只用可用内存 "
        "{available} 的 {share},更大的试探会被系统强制终止,而不是干净地报内存不足",
    },
    "run.search_capped.device_memory": {
        "en": "max-batch search started at batch {start}, not {uncapped}: sized for this GPU's {available}, "
        "not the memory of the card the estimate is for",
        "zh": "最大批大小搜索从 {start} 开始,而不是 {uncapped}:按本机 GPU 的 {available} 显存确定,"
        "而不是估算所针对显卡的显存",
    },
    "run.ran_precision": {"en": "{ran} (asked {asked})", "zh": "{ran}(请求 {asked})"},
    # -- no GPU ---------------------------------------------------------------------------------------
    "nogpu.header": {
        "en": "Without a GPU: the cheapest catalog cards that run each scenario (verdict fits), and the CPU:",
        "zh": "本机没有 GPU:能运行各场景(结论为可以运行)的最便宜显卡,以及 CPU 上能做什么:",
    },
    "nogpu.card": {
        "en": "{scenario}: {cards}",
        "zh": "{scenario}:{cards}",
    },
    "nogpu.card_item": {"en": "{card} (${price}, {speed})", "zh": "{card}(${price},{speed})"},
    "nogpu.none": {"en": "no priced catalog card fits", "zh": "目录中没有带标价且放得下的显卡"},
    "nogpu.cpu": {
        "en": "On this CPU: every scenario's tiny variant runs as a smoke test (`fitbench run NAME --tiny`); "
        "at full size {fits_ram} fit in this machine's {ram} of RAM, but a CPU is one to two orders of "
        "magnitude slower than these cards.",
        "zh": "在本机 CPU 上:各场景的迷你版可以作为冒烟测试运行(`fitbench run NAME --tiny`);"
        "原尺寸下 {fits_ram} 能放进本机 {ram} 内存,但 CPU 比这些显卡慢一到两个数量级。",
    },
    "nogpu.cpu_needs_framework": {
        "en": " Running them needs a framework: install one first (see the top).",
        "zh": "运行它们需要先安装框架(见开头)。",
    },
    "nogpu.none_in_ram": {"en": "none", "zh": "没有一个"},
    # -- fitbench check ---------------------------------------------------------------------------
    "check.title": {
        "en": "fitbench check: is this machine enough for the three reference scenarios?",
        "zh": "fitbench 检查:这台机器跑得动三个参考场景吗?",
    },
    "check.gpu": {
        "en": "GPU: {name}, {memory}, driver {driver} (catalog card {catalog}).",
        "zh": "GPU:{name},{memory},驱动版本 {driver}(对应目录型号 {catalog})。",
    },
    "check.gpu_unknown": {
        "en": "GPU: {name}, {memory}: not in the catalog, so fitbench cannot estimate for it; "
        "the catalog columns still apply.",
        "zh": "GPU:{name},{memory}:不在型号目录中,无法为它估算;表中其他显卡的估算仍可参考。",
    },
    "check.gpu_count": {
        "en": "{count} GPUs found; fitbench checks the first one.",
        "zh": "发现 {count} 块 GPU,fitbench 只检查第一块。",
    },
    "check.no_gpu": {
        "en": "No NVIDIA GPU found (NVML sees none): estimates for catalog cards, measurements on the CPU.",
        "zh": "未发现 NVIDIA GPU(NVML 未检测到):下面给出目录中各显卡的估算,实测在 CPU 上进行。",
    },
    "check.no_gpu_estimates": {
        "en": "No NVIDIA GPU found (NVML sees none): estimates for catalog cards.",
        "zh": "未发现 NVIDIA GPU(NVML 未检测到):下面给出目录中各显卡的估算。",
    },
    "check.no_backend": {
        "en": "No framework to measure with (PyTorch or PaddlePaddle): nothing can be measured, on a GPU "
        "or the CPU, until one is installed: pip install 'fitbench[torch]' (or 'fitbench[paddle]'). "
        "The estimates still give each card's verdict, peak memory, max batch and speed, and the advice.",
        "zh": "没有可用于实测的框架(PyTorch 或 PaddlePaddle):安装之前,无论 GPU 还是 CPU 都无法实测。"
        "请执行 pip install 'fitbench[torch]'(或 'fitbench[paddle]')。"
        "估算仍会给出每块显卡的结论、峰值显存、最大批大小、速度以及建议。",
    },
    "check.estimate_only": {
        "en": "--estimate-only: nothing was measured.",
        "zh": "已指定 --estimate-only:只估算,不实测。",
    },
    "check.backend": {
        "en": "Measuring with {backend} on {device}.",
        "zh": "使用 {backend} 在 {device} 上实测。",
    },
    "check.exec_tuned": {
        "en": "Tuned code (--exec tuned): CUDA graphs, compiled steps and bf16 where the card has it; "
        "estimates and measurements show what the card can do, not what typical eager code gets.",
        "zh": "调优代码(--exec tuned):CUDA Graph、编译后的步骤,显卡支持时使用 bf16;"
        "估算和实测展示的是显卡的能力上限,而不是常见 eager 代码的速度。",
    },
    "check.tiny_note": {
        "en": "On the CPU fitbench runs the tiny variants (the same code at small shapes): they prove "
        "the pipeline works, not how fast a GPU would be.",
        "zh": "在 CPU 上运行的是各场景的迷你版(代码相同,尺寸很小):用来验证整个流程可用,不代表 GPU 上的速度。",
    },
    "check.measuring": {
        "en": "measuring {scenario} ({variant}) on {device} with {backend}…",
        "zh": "正在实测 {scenario}({variant}),设备 {device},框架 {backend}……",
    },
    "check.measured": {
        "en": "{scenario}: {status} after {seconds}",
        "zh": "{scenario}:{status},用时 {seconds}",
    },
    "check.skip_oom": {
        "en": "{scenario}: not run, estimated out of memory on {gpu} ({peak} needed, {usable} usable).",
        "zh": "{scenario}:未运行,估算在 {gpu} 上显存不足(需要 {peak},可用 {usable})。",
    },
    "check.variant_full": {"en": "the reference settings", "zh": "参考场景的原设置"},
    "check.variant_tiny": {"en": "tiny variant", "zh": "迷你版"},
    "check.col_scenario": {"en": "scenario", "zh": "场景"},
    "check.col_machine": {"en": "this machine: estimate | measured", "zh": "本机:估算 | 实测"},
    "check.legend": {
        "en": "fits = runs with room to spare; tight = less than 10% of the usable memory left; "
        "out of memory = does not run. Speeds are estimates, except in the measured column.",
        "zh": "可以运行 = 显存留有余量;勉强 = 剩余可用显存不到 10%;显存不足 = 无法运行。"
        "除“实测”外,速度均为估算值。",
    },
    "check.stored": {
        "en": "Stored {count} measurement(s) in the history {path}.",
        "zh": "已将 {count} 条实测记录存入历史文件 {path}。",
    },
    "check.report": {"en": "Report: {path}", "zh": "报告:{path}"},
    # -- advice -----------------------------------------------------------------------------------
    "advice.header": {"en": "Advice", "zh": "建议"},
    "advice.target_local": {
        "en": "For this machine's {gpu}:",
        "zh": "针对本机的 {gpu}:",
    },
    "advice.target_brief": {
        "en": "No GPU here, so the advice is for the entry card of the three reference scenarios, {gpu}:",
        "zh": "本机没有 GPU,以下建议针对三个参考场景中的入门卡 {gpu}:",
    },
    "advice.target_unknown": {
        "en": "This GPU is not in the catalog, so the advice is for the entry card of the three reference "
        "scenarios, {gpu}:",
        "zh": "本机 GPU 不在型号目录中,以下建议针对三个参考场景中的入门卡 {gpu}:",
    },
    "bn.tuned": {
        "en": "{scenario}: limited by {bottleneck}: the GPU waits for Python between kernels. CUDA graphs or "
        "torch.compile (`--exec tuned`) are estimated {speedup}× faster ({speed}).",
        "zh": "{scenario}:瓶颈是{bottleneck},GPU 在内核之间等待 Python。改用 CUDA Graphs 或 torch.compile"
        "(`--exec tuned`)估计可快 {speedup} 倍({speed})。",
    },
    "bn.batch": {
        "en": "{scenario}: limited by {bottleneck}: give each step more work; batch {batch} is estimated "
        "{speedup}× faster per sample ({speed}).",
        "zh": "{scenario}:瓶颈是{bottleneck},应让每一步多做些计算;批大小改为 {batch} 后,"
        "按样本计估计可快 {speedup} 倍({speed})。",
    },
    "bn.amp": {
        "en": "{scenario}: limited by {bottleneck}: mixed precision ({precision}) runs on the tensor "
        "cores and moves half the bytes: estimated {speedup}× faster ({speed}).",
        "zh": "{scenario}:瓶颈是{bottleneck}。混合精度({precision})能用上 Tensor Core,数据搬运量减半,"
        "估计可快 {speedup} 倍({speed})。",
    },
    "bn.quantize": {
        "en": "{scenario}: limited by {bottleneck}: every new token reads all the weights; int4 weights "
        "are a quarter of the bytes: estimated {speedup}× faster ({speed}).",
        "zh": "{scenario}:瓶颈是{bottleneck},每生成一个 token 都要把全部权重读一遍;"
        "int4 权重的数据量只有四分之一,估计可快 {speedup} 倍({speed})。",
    },
    "bn.card": {
        "en": "{scenario}: limited by {bottleneck}: {card} is estimated {speedup}× faster ({speed}).",
        "zh": "{scenario}:瓶颈是{bottleneck};换用 {card} 估计可快 {speedup} 倍({speed})。",
    },
    "bn.on_card": {"en": "{scenario} on {gpu}", "zh": "{scenario}(在 {gpu} 上)"},
    # -- what limited a measured run (fitbench.advise.diagnosis): diagnosis.<bottleneck>.<kind> -----
    "diagnosis.line": {
        "en": "bottleneck: {bottleneck} ({compute} of {precision} peak, {bandwidth} of bandwidth{roofline}) "
        "— {suggestion}",
        "zh": "瓶颈:{bottleneck}(达到 {precision} 峰值算力的 {compute}、带宽的 {bandwidth}{roofline})"
        "— {suggestion}",
    },
    "diagnosis.roofline": {"en": ", {times}x the roofline time", "zh": ",为屋顶线时间的 {times} 倍"},
    "diagnosis.overhead.tuned": {
        "en": "the GPU waits for the host: raise the batch, or use --exec tuned (CUDA graphs)",
        "zh": "GPU 在等待主机端:增大批大小,或使用 --exec tuned(CUDA Graphs)",
    },
    "diagnosis.overhead.batch": {
        "en": "the GPU runs many small kernels: raise the batch so that each kernel has more work",
        "zh": "GPU 在执行大量小内核:增大批大小,让每个内核多做些计算",
    },
    "diagnosis.memory.quantize": {
        "en": "decode is bandwidth-bound: int8/int4 weights, more requests per batch, or a card with "
        "more bandwidth",
        "zh": "解码受显存带宽限制:使用 int8/int4 权重、每批处理更多请求,或换用带宽更高的显卡",
    },
    "diagnosis.memory.batch": {
        "en": "decode is bandwidth-bound: batch more requests per step, or a card with more bandwidth",
        "zh": "解码受显存带宽限制:每步批处理更多请求,或换用带宽更高的显卡",
    },
    "diagnosis.memory.amp": {
        "en": "memory-bound: AMP (bf16/fp16) halves the bytes every step moves",
        "zh": "受显存带宽限制:混合精度(bf16/fp16)可使每步搬运的数据量减半",
    },
    "diagnosis.memory.card": {
        "en": "memory-bound: a card with more memory bandwidth",
        "zh": "受显存带宽限制:换用显存带宽更高的显卡",
    },
    "diagnosis.compute.amp": {
        "en": "use AMP (bf16/fp16 tensor cores)",
        "zh": "使用混合精度(bf16/fp16,Tensor Core)",
    },
    "diagnosis.compute.card": {
        "en": "a card with more tensor throughput",
        "zh": "换用 Tensor Core 算力更高的显卡",
    },
    # -- CPU offload (fitbench.estimate.offload) ------------------------------------------------------
    "offload.runs": {
        "en": "{scenario} on {gpu}: runs at ~{speed} with {gpu_layers} of {layers} layers on the GPU "
        '(accelerate device_map="auto", {ram} of weights in CPU RAM over {link}); '
        "llama.cpp --n-gpu-layers {cpp_layers} computes the rest on the CPU: ~{cpp_speed}.",
        "zh": "{scenario}(在 {gpu} 上):把部分层卸载到内存后可运行,约 {speed},"
        "{layers} 层中有 {gpu_layers} 层在 GPU 上"
        '(accelerate device_map="auto",{ram} 权重放在内存,经 {link} 传输);'
        "llama.cpp --n-gpu-layers {cpp_layers} 让其余层在 CPU 上计算:约 {cpp_speed}。",
    },
    "offload.no_ram": {
        "en": "{scenario} on {gpu}: offloading would need {ram} of CPU RAM; "
        "this machine has {available} free.",
        "zh": "{scenario}(在 {gpu} 上):卸载到内存需要 {ram} 内存,本机只有 {available} 可用。",
    },
    "offload.no_room": {
        "en": "{scenario} on {gpu}: even offloaded it does not run: "
        "the GPU has no room for its largest layer.",
        "zh": "{scenario}(在 {gpu} 上):即使卸载到内存也无法运行:显卡放不下最大的一层。",
    },
    # -- serving (fitbench.estimate.serving) --------------------------------------------------------
    "serve.title": {
        "en": "{workload} served by a vLLM-style engine: context {context}, gpu_memory_utilization {util}, "
        "KV blocks of {block} tokens",
        "zh": "{workload} 用 vLLM 式推理服务部署:上下文 {context},gpu_memory_utilization {util},"
        "KV 块大小 {block} 个 token",
    },
    "serve.summary": {
        "en": "{gpu}: the KV cache holds {tokens} tokens ({blocks} blocks): {seqs} sequences of {context} "
        "tokens at once; first token after {ttft}; {peak} at {peak_c} concurrent requests.",
        "zh": "{gpu}:KV 缓存可容纳 {tokens} 个 token({blocks} 个块),即同时 {seqs} 个 {context} token 的序列;"
        "首个 token 需 {ttft};{peak_c} 个并发请求时 {peak}。",
    },
    "serve.knee": {
        "en": "{gpu}: throughput barely grows beyond about {c} concurrent requests ({reason}).",
        "zh": "{gpu}:并发超过约 {c} 个请求后吞吐量几乎不再增长({reason})。",
    },
    "serve.knee.compute": {"en": "the step turns compute-bound", "zh": "计算成为瓶颈"},
    "serve.knee.kv-bandwidth": {
        "en": "each added request mostly adds its own KV-cache reads",
        "zh": "每个新增请求主要增加其自身的 KV 缓存读取",
    },
    "serve.no_fit.weights": {
        "en": "{gpu}: the weights ({weights}) exceed the engine's share of the card ({requested}).",
        "zh": "{gpu}:权重({weights})超过推理引擎可用的显存份额({requested})。",
    },
    "serve.no_fit.no-kv-memory": {
        "en": "{gpu}: nothing is left for the KV cache after weights, profile run and CUDA graphs.",
        "zh": "{gpu}:扣除权重、预跑峰值与 CUDA Graph 后已没有显存留给 KV 缓存。",
    },
    "serve.no_fit.context": {
        "en": "{gpu}: the KV cache ({tokens} tokens) cannot hold one request of {context} tokens; "
        "lower --context or raise --gpu-memory-utilization.",
        "zh": "{gpu}:KV 缓存({tokens} 个 token)放不下一个 {context} token 的请求;"
        "请减小 --context 或提高 --gpu-memory-utilization。",
    },
    "serve.col.kv": {"en": "KV cache", "zh": "KV 缓存"},
    "serve.col.seqs": {"en": "seqs @ context", "zh": "满上下文并发"},
    "serve.col.ttft": {"en": "first token", "zh": "首 token"},
    "serve.col.tps1": {"en": "1 user", "zh": "单用户"},
    "serve.col.peak": {"en": "peak", "zh": "峰值"},
    "serve.col.knee": {"en": "knee", "zh": "拐点"},
    "serve.col.concurrency": {"en": "concurrent", "zh": "并发数"},
    "serve.col.per_user": {"en": "per user", "zh": "每用户"},
    "serve.col.bound": {"en": "bound by", "zh": "瓶颈"},
    "serve.part.weights": {"en": "weights", "zh": "权重"},
    "serve.part.activation": {"en": "profile-run peak", "zh": "预跑激活峰值"},
    "serve.part.non_torch": {"en": "non-torch (cuBLAS, NCCL)", "zh": "非 PyTorch 显存(cuBLAS、NCCL)"},
    "serve.part.cudagraph": {"en": "CUDA graphs", "zh": "CUDA Graph"},
    "serve.part.kv_cache": {"en": "KV cache", "zh": "KV 缓存"},
    "serve.part.requested": {"en": "engine's share", "zh": "引擎可用份额"},
    "serve.footer": {
        "en": "Throughput: decode tokens per second summed over the concurrent requests "
        "(the knee is marked *). "
        "Estimates; the assumptions are in --json.",
        "zh": "吞吐量:所有并发请求每秒解码 token 数之和(拐点以 * 标出)。以上为估算;假设条件见 --json 输出。",
    },
    "bn.none": {
        "en": "{scenario}: limited by {bottleneck}; no catalog card is markedly faster.",
        "zh": "{scenario}:瓶颈是{bottleneck};目录中没有明显更快的显卡。",
    },
    "fix.header": {
        "en": "{scenario} on {gpu}: {verdict} ({peak} needed, {usable} usable). "
        "What would make it fit (estimated):",
        "zh": "{scenario} 在 {gpu} 上的结论:{verdict}(需要 {peak},可用 {usable})。以下做法的估算效果:",
    },
    "fix.effect": {
        "en": "peak {peak}, {verdict}, speed ×{ratio}",
        "zh": "峰值显存 {peak},{verdict},速度 ×{ratio}",
    },
    "fix.amp": {"en": "mixed precision ({precision}): {effect}", "zh": "混合精度({precision}):{effect}"},
    "fix.half": {"en": "16-bit weights ({precision}): {effect}", "zh": "16 位权重({precision}):{effect}"},
    "fix.accumulate": {
        "en": "batch {micro} with {steps} gradient-accumulation steps (effective batch {effective}): "
        "{effect}",
        "zh": "批大小 {micro},梯度累积 {steps} 步(等效批大小 {effective}):{effect}",
    },
    "fix.checkpointing": {
        "en": "activation checkpointing (recompute in the backward pass): {effect}",
        "zh": "激活检查点(反向传播时重新计算):{effect}",
    },
    "fix.int8": {"en": "int8 weights: {effect}", "zh": "int8 权重量化:{effect}"},
    "fix.int4": {"en": "int4 weights: {effect}", "zh": "int4 权重量化:{effect}"},
    "fix.lora": {
        "en": "LoRA (frozen {precision} base, rank-{rank} adapters): {effect}",
        "zh": "LoRA(冻结 {precision} 基座模型,秩 {rank} 的适配器):{effect}",
    },
    "fix.qlora": {
        "en": "QLoRA (frozen 4-bit base, rank-{rank} adapters): {effect}",
        "zh": "QLoRA(冻结 4 位基座模型,秩 {rank} 的适配器):{effect}",
    },
    "fix.gpus": {
        "en": "{gpus} × {gpu} ({strategy}), per GPU: {effect}",
        "zh": "{gpus} 块 {gpu}({strategy}),每块:{effect}",
    },
    "fix.bigger_card": {"en": "a bigger card, {card}: {effect}", "zh": "换更大的显卡 {card}:{effect}"},
    "fix.combined": {"en": "all together ({parts}): {effect}", "zh": "组合使用({parts}):{effect}"},
    "fix.part.amp": {"en": "AMP", "zh": "混合精度"},
    "fix.part.checkpointing": {"en": "checkpointing", "zh": "激活检查点"},
    "fix.part.accumulate": {
        "en": "batch {micro} × {steps} accumulation steps",
        "zh": "批大小 {micro} × 累积 {steps} 步",
    },
    # -- cost (fitbench.advise.cost) -------------------------------------------------------------
    "cost.header": {"en": "cost", "zh": "成本"},
    "cost.per_mtok": {"en": "${value}/M tok", "zh": "${value}/百万 token"},
    "cost.per_epoch": {"en": "${value}/epoch", "zh": "${value}/轮"},
    "cost.per_hour": {"en": "${value}/h", "zh": "${value}/小时"},
    "cost.purchase": {"en": "${price} (${value}/GiB)", "zh": "${price}(${value}/GiB)"},
    "cost.note": {
        "en": "cost: rented cards at the catalog's example on-demand rate (provider and date in "
        "`fitbench gpus --json`), times the estimated time; bought cards show their launch price and "
        "price per GiB only, no amortised hourly cost.",
        "zh": "成本:租用的显卡按目录中的示例按需价格(提供商与日期见 `fitbench gpus --json`)乘以估算时间计算;"
        "购买的显卡只给出首发价和每 GiB 价格,不折算每小时成本。",
    },
    "cheapest.priced": {
        "en": "{scenario}: the cheapest card that runs it comfortably is {card} "
        "(${price}, {source}, {date}): {speed}.",
        "zh": "{scenario}:能宽裕运行的最便宜显卡是 {card}(${price},{source},{date}):{speed}。",
    },
    "cheapest.smallest": {
        "en": "{scenario}: price aside, the smallest card that fits comfortably is {card} ({memory}): "
        "{speed}.",
        "zh": "{scenario}:不计价格,能宽裕运行的显存最小的显卡是 {card}({memory}):{speed}。",
    },
    "cheapest.unpriced": {
        "en": "{scenario}: only data-centre cards without a public list price run it comfortably; "
        "the smallest is {card} ({memory}): {speed}.",
        "zh": "{scenario}:只有没有公开标价的数据中心显卡能宽裕运行;"
        "其中显存最小的是 {card}({memory}):{speed}。",
    },
    "cheapest.none": {
        "en": "{scenario}: no single catalog card runs it comfortably; use several GPUs or cut its memory.",
        "zh": "{scenario}:目录中没有哪块单卡能宽裕运行它;请使用多卡,或设法降低显存占用。",
    },
    "guide.header": {
        "en": "Size guide, derived from the estimator (smallest memory class that fits comfortably):",
        "zh": "按模型规模选卡(由估算器推导,取能宽裕运行的最小显存档位):",
    },
    "guide.line": {"en": "{band}: {items}", "zh": "{band}:{items}"},
    "guide.regime": {"en": "{regime} {steps}", "zh": "{regime}:{steps}"},
    "guide.sep": {"en": "; ", "zh": ";"},
    "guide.step": {"en": "{cls} ({params})", "zh": "{cls}({params})"},
    "guide.no_card": {"en": "no single card", "zh": "单卡放不下"},
    "guide.regime.cnn-train": {"en": "CNN training, FP32:", "zh": "CNN 训练(FP32)"},
    "guide.regime.encoder-finetune": {"en": "fine-tuning with AMP:", "zh": "混合精度微调"},
    "guide.regime.decoder-generate": {"en": "FP16 generation:", "zh": "FP16 推理生成"},
    "guide.brief": {
        "en": 'The article behind the three reference scenarios ("Is your GPU enough for AI projects on '
        'PaddlePaddle 3.3?") said: < 100M → 12 GB; 0.1–3B → 24 GB with AMP; > 3B → 40/80 GB or the cloud.',
        "zh": "三个参考场景所出自的文章(《Is your GPU enough for AI projects on PaddlePaddle 3.3?》)的结论是:"
        "1 亿参数以下 → 12 GB;1 亿~30 亿 → 24 GB(配合混合精度);30 亿以上 → 40/80 GB 或上云。",
    },
    # -- reports ------------------------------------------------------------------------------------
    "report.title": {"en": "fitbench report", "zh": "fitbench 报告"},
    "report.subtitle": {
        "en": "Is this GPU enough? Estimates for catalog cards, measurements, and the run history.",
        "zh": "这块 GPU 够用吗?目录中各显卡的估算、实测结果与历史记录。",
    },
    "report.generated": {
        "en": "Generated {time} by fitbench {version}.",
        "zh": "由 fitbench {version} 生成于 {time}。",
    },
    "report.summary": {"en": "Summary", "zh": "概览"},
    "report.scenario": {"en": "Scenario", "zh": "场景"},
    "report.memory": {"en": "Memory at the peak", "zh": "峰值显存构成"},
    "report.memory_desc": {
        "en": "The parts of the estimated peak memory of {scenario} on each card; the dark mark is the "
        "card's usable memory.",
        "zh": "{scenario} 在各显卡上估算峰值显存的组成;深色竖线是该卡的可用显存。",
    },
    "report.speed": {"en": "Estimated speed", "zh": "估算速度"},
    "report.speed_desc": {
        "en": "Estimated throughput of {scenario} on each card, in {unit}{scale}.",
        "zh": "{scenario} 在各显卡上的估算吞吐量,单位 {unit}{scale}。",
    },
    "report.log_scale": {"en": ", logarithmic scale", "zh": ",对数刻度"},
    "report.usable": {"en": "usable {memory}", "zh": "可用 {memory}"},
    "report.does_not_fit": {"en": "does not fit", "zh": "放不下"},
    "report.estimated_now": {
        "en": "Estimates computed when the report was written (the runs stored none for catalog cards).",
        "zh": "这些估算是生成报告时计算的(历史记录中没有保存目录显卡的估算)。",
    },
    "report.measured": {"en": "Measured", "zh": "实测"},
    "report.est_vs_meas": {"en": "Estimate vs measurement", "zh": "估算与实测对比"},
    "report.est_vs_meas_desc": {
        "en": "Error of the estimate, (estimate − measured) / measured, for each GPU run and metric.",
        "zh": "每次 GPU 实测中各指标的估算误差:(估算 − 实测)/ 实测。",
    },
    "report.no_comparison": {
        "en": "No GPU measurement with an estimate yet: run `fitbench check` or `fitbench run WORKLOAD "
        "--device cuda` on a machine with a GPU.",
        "zh": "还没有带估算的 GPU 实测记录:请在有 GPU 的机器上运行 `fitbench check` 或 "
        "`fitbench run WORKLOAD --device cuda`。",
    },
    "report.history": {"en": "History", "zh": "历史记录"},
    "report.history_desc": {
        "en": "{metric} of past runs over time; one line per workload, precision and device.",
        "zh": "历次运行的{metric}随时间的变化;每条线对应一种负载、精度与设备的组合。",
    },
    "report.no_history": {"en": "No runs in the history yet.", "zh": "历史中还没有运行记录。"},
    "report.environment": {"en": "Environment", "zh": "运行环境"},
    "report.advice": {"en": "Advice", "zh": "建议"},
    "report.runs": {"en": "Runs", "zh": "运行记录"},
    "report.legend": {"en": "Legend", "zh": "图例"},
    "metric.peak_memory": {"en": "peak memory", "zh": "峰值显存"},
    "metric.step_seconds": {"en": "step time", "zh": "单步耗时"},
    "metric.tokens_per_second": {"en": "decode tokens per second", "zh": "解码每秒 token 数"},
    "metric.prefill_seconds": {"en": "prefill time", "zh": "预填充耗时"},
    "metric.max_batch": {"en": "max batch", "zh": "最大批大小"},
    "metric.mfu": {"en": "MFU (model FLOPs / peak)", "zh": "MFU(模型 FLOPs / 峰值)"},
    "metric.throughput": {"en": "throughput", "zh": "吞吐量"},
    "col.card": {"en": "card", "zh": "显卡"},
    "col.verdict": {"en": "verdict", "zh": "结论"},
    "col.peak": {"en": "peak memory", "zh": "峰值显存"},
    "col.usable": {"en": "usable", "zh": "可用显存"},
    "col.max_batch": {"en": "max batch", "zh": "最大批大小"},
    "col.max_context": {"en": "max context", "zh": "最长上下文"},
    "col.speed": {"en": "speed", "zh": "速度"},
    "col.mfu": {"en": "MFU", "zh": "MFU"},
    "col.bottleneck": {"en": "bottleneck", "zh": "瓶颈"},
    "col.run": {"en": "run", "zh": "运行编号"},
    "col.time": {"en": "time (UTC)", "zh": "时间(UTC)"},
    "col.workload": {"en": "workload", "zh": "负载"},
    "col.precision": {"en": "precision", "zh": "精度"},
    "col.device": {"en": "device", "zh": "设备"},
    "col.status": {"en": "status", "zh": "状态"},
    "col.metric": {"en": "metric", "zh": "指标"},
    "col.estimated": {"en": "estimated", "zh": "估算"},
    "col.measured": {"en": "measured", "zh": "实测"},
    "col.error": {"en": "error", "zh": "误差"},
    "col.item": {"en": "item", "zh": "项目"},
    "col.value": {"en": "value", "zh": "值"},
    "col.step": {"en": "step time", "zh": "单步耗时"},
    "col.throughput": {"en": "throughput", "zh": "吞吐量"},
    "col.params": {"en": "parameters", "zh": "参数量"},
    "col.framework": {"en": "framework", "zh": "框架"},
    "col.command": {"en": "command", "zh": "命令"},
    "col.band": {"en": "size", "zh": "规模"},
    "col.regime": {"en": "job", "zh": "任务"},
    "col.model": {"en": "model", "zh": "模型"},
    "col.class": {"en": "smallest class that fits", "zh": "能宽裕运行的最小档位"},
    "col.smallest_card": {"en": "smallest card that fits", "zh": "能宽裕运行的最小显卡"},
    # -- fitbench run: the measured-vs-estimated table ------------------------------------------------
    "run.col.estimate": {"en": "estimate", "zh": "估算"},
    "run.col.estimate_on": {"en": "estimate ({gpu})", "zh": "估算({gpu})"},
    "run.row.peak_memory": {"en": "peak memory", "zh": "峰值显存"},
    "run.row.allocator_peak": {"en": "  allocator peak", "zh": "  分配器峰值"},
    "run.row.cuda_context": {"en": "  CUDA context", "zh": "  CUDA 上下文"},
    "run.row.load": {"en": "load", "zh": "加载"},
    "run.row.memory_after_load": {"en": "memory after load", "zh": "加载后显存"},
    "run.row.prefill": {"en": "prefill", "zh": "预填充"},
    "run.row.decode": {"en": "decode tok/s", "zh": "解码 tok/s"},
    "run.row.end_to_end": {"en": "end-to-end tok/s", "zh": "端到端 tok/s"},
    "run.row.step": {"en": "step time", "zh": "单步耗时"},
    "run.row.throughput": {"en": "throughput", "zh": "吞吐量"},
    "run.row.tokens": {"en": "tokens", "zh": "token 速度"},
    "run.row.epoch": {"en": "epoch", "zh": "每轮"},
    "run.row.mfu": {"en": "MFU (model FLOPs / peak)", "zh": "MFU(模型 FLOPs / 峰值)"},
    "run.row.epoch_smoke": {"en": "epoch (smoke test)", "zh": "每轮(冒烟测试)"},
    "run.row.params": {"en": "parameters", "zh": "参数量"},
    "run.row.max_batch": {"en": "max batch", "zh": "最大批大小"},
    "run.cell.allocated": {
        "en": "{allocated} allocated, {reserved} reserved",
        "zh": "已分配 {allocated},已预留 {reserved}",
    },
    "run.cell.per_generate": {"en": "{rate} ({time} per generate)", "zh": "{rate}(每次生成 {time})"},
    "run.cell.steps": {"en": "{time} (p90 {p90}, {steps} steps)", "zh": "{time}(p90 {p90},共 {steps} 步)"},
    "run.cell.none_fits": {"en": "none fits", "zh": "都放不下"},
    "run.cell.limit": {"en": ">= {n} (limit)", "zh": ">= {n}(已到上限)"},
    "run.title": {
        "en": "{name}{tiny} · {backend} {version} · {device} · {precision} · batch {batch} · "
        "{exec_mode} exec",
        "zh": "{name}{tiny} · {backend} {version} · {device} · {precision} · 批大小 {batch} · "
        "{exec_mode} 执行模式",
    },
    "run.distributed": {
        "en": "{nproc} processes ({launcher}, {group}), {strategy}: batch {per_gpu} per process, "
        "{total} in all; peak memory is the largest process's, throughput is global",
        "zh": "{nproc} 个进程({launcher},{group}),{strategy}:每个进程批大小 {per_gpu},合计 {total};"
        "峰值显存取占用最大的进程,吞吐量为全部进程之和",
    },
    "run.status": {"en": "status: {status} — {error}", "zh": "状态:{status} — {error}"},
    "run.hint": {"en": "hint: {hint}", "zh": "提示:{hint}"},
    "run.warning": {"en": "warning: {warning}", "zh": "警告:{warning}"},
    "run.note": {"en": "note: {note}", "zh": "注意:{note}"},
    "run.run_id": {"en": "run id: {run_id}", "zh": "运行编号:{run_id}"},
    "run.search_stopped": {"en": "max-batch search stopped: {why}", "zh": "最大批大小搜索已停止:{why}"},
    "run.note.cpu": {
        "en": "measured on the CPU: no GPU estimate (pass --gpu ID to see one)",
        "zh": "在 CPU 上实测:没有 GPU 估算(加 --gpu ID 可对照某块显卡的估算)",
    },
    "run.note.no_nvml": {
        "en": "could not identify the local GPU through NVML: no estimate (pass --gpu ID)",
        "zh": "无法通过 NVML 识别本机 GPU:没有估算(请加 --gpu ID)",
    },
    "run.note.not_in_catalog": {
        "en": "{name} is not in the catalog: no estimate (pass --gpu ID for a similar card)",
        "zh": "{name} 不在型号目录中:没有估算(可加 --gpu ID 指定一块相近的显卡)",
    },
    "run.note.no_estimate": {"en": "no estimate: {reason}", "zh": "没有估算:{reason}"},
    "run.host_estimate": {
        "en": "estimate for this machine's host (host {ratio}x the reference's time per operation); "
        "at the reference host: {reference} ({error})",
        "zh": "估算按本机的主机计(本机主机每个操作耗时为参考主机的 {ratio} 倍);"
        "按参考主机:{reference}(误差 {error})",
    },
    "run.compare": {
        "en": "{precision} vs {baseline}: peak memory {memory}, speed-up {speedup}",
        "zh": "{precision} 对比 {baseline}:峰值显存 {memory},加速比 {speedup}",
    },
    "run.compare.less": {"en": "{pct} ({bytes} less)", "zh": "{pct}(少 {bytes})"},
    "run.compare.more": {"en": "{pct} ({bytes} more)", "zh": "{pct}(多 {bytes})"},
    "run.compare.incomplete": {
        "en": "{precision} vs {baseline}: not comparable (a run did not complete)",
        "zh": "{precision} 对比 {baseline}:无法比较(有一次运行没有完成)",
    },
    # -- progress lines (fitbench.measure.progress), one per phase of a measurement ------------------------
    "progress.starting child": {"en": "starting child", "zh": "正在启动子进程"},
    "progress.starting ranks": {"en": "starting {ranks} ranks", "zh": "正在启动 {ranks} 个进程"},
    "progress.importing framework": {"en": "importing framework", "zh": "正在导入框架"},
    "progress.initialising device": {"en": "initialising device", "zh": "正在初始化设备"},
    "progress.importing model libraries": {"en": "importing model libraries", "zh": "正在导入模型库"},
    "progress.building model": {"en": "building model", "zh": "正在构建模型"},
    "progress.building model, compiling and capturing CUDA graphs": {
        "en": "building model, compiling and capturing CUDA graphs",
        "zh": "正在构建模型、编译并捕获 CUDA Graph",
    },
    "progress.timing the host": {"en": "timing the host", "zh": "正在测量主机速度"},
    "progress.warm-up": {"en": "warm-up", "zh": "预热"},
    "progress.prefill": {"en": "prefill", "zh": "预填充"},
    "progress.measuring": {"en": "measuring", "zh": "计时中"},
    "progress.generating": {"en": "generating", "zh": "生成中"},
    "progress.unit.steps": {"en": "steps", "zh": "步"},
    "progress.unit.generations": {"en": "generations", "zh": "次生成"},
    "progress.unit.calls": {"en": "calls", "zh": "次调用"},
    "progress.waiting for its turn": {"en": "waiting for its turn", "zh": "等待轮到它"},
    "progress.one-token generation": {"en": "one-token generation", "zh": "单 token 生成"},
    "progress.timed_seconds": {
        "en": "{seconds}/{min_seconds} s timed",
        "zh": "已计时 {seconds}/{min_seconds} 秒",
    },
    "progress.max-batch search": {"en": "max-batch search", "zh": "搜索最大批大小"},
    "progress.search_range": {"en": "from {start}, at most {limit}", "zh": "从 {start} 开始,最多 {limit}"},
    "progress.probing": {"en": "probing batch {batch}", "zh": "试探批大小 {batch}"},
    "phase.init": {"en": "init", "zh": "初始化"},
    "phase.build": {"en": "build", "zh": "构建模型"},
    "phase.step": {"en": "step", "zh": "训练/推理步"},
    "phase.generate": {"en": "generate", "zh": "生成"},
    # -- what a measurement warns of (the child writes English; see MEASUREMENT_PATTERNS) --------------------
    "warn.cpu_no_graphs": {
        "en": "CUDA graphs need a CUDA device; ran eagerly",
        "zh": "CUDA Graph 需要 CUDA 设备;已按 eager 方式运行",
    },
    "warn.tuned_ran": {
        "en": "tuned changed the precision: ran {ran} ({how}) instead of the requested {asked}",
        "zh": "tuned 模式改变了精度:实际运行 {ran}({how}),而不是请求的 {asked}",
    },
    "warn.tuned_generated": {
        "en": "tuned changed the precision: generated with {ran} weights instead of {asked}",
        "zh": "tuned 模式改变了精度:生成时使用 {ran} 权重,而不是 {asked}",
    },
    "warn.tf32_cpu": {
        "en": "TF32 exists only on NVIDIA GPUs; ran FP32",
        "zh": "TF32 只在 NVIDIA GPU 上可用;已按 FP32 运行",
    },
    "warn.weights_unsupported": {
        "en": "{dtype} weights are not supported on {device} by this torch; ran FP32",
        "zh": "当前 torch 在 {device} 上不支持 {dtype} 权重;已按 FP32 运行",
    },
    "warn.autocast_unsupported": {
        "en": "autocast to {dtype} is not supported on {device} by this torch; ran FP32",
        "zh": "当前 torch 在 {device} 上不支持 autocast 到 {dtype};已按 FP32 运行",
    },
    "warn.pure_fp16": {
        "en": "pure fp16 training has no loss scaling or master weights: fine for speed and memory, "
        "not for convergence",
        "zh": "纯 fp16 训练没有损失缩放和主权重:可以用来看速度和显存,不适合用来训练收敛",
    },
    "warn.no_bf16_autocast": {
        "en": "this GPU has no native bf16; autocast emulates it (slow)",
        "zh": "这块 GPU 没有原生 bf16;autocast 以模拟方式运行(较慢)",
    },
    "warn.sdpa": {
        "en": "tuned uses fused SDPA attention; the workload asked for eager attention",
        "zh": "tuned 模式使用融合的 SDPA 注意力;负载指定的是 eager 注意力",
    },
    "warn.decode_not_slower": {
        "en": "generation was not measurably slower than prefill; decode speed not derived",
        "zh": "生成并不比预填充明显更慢;无法推算解码速度",
    },
    "warn.budget": {
        "en": "stopped after {n} of {of} steps: the {seconds} s budget of the timed loop ran out",
        "zh": "只完成 {of} 步中的 {n} 步就停止了:计时循环的 {seconds} 秒预算已用完",
    },
    "warn.param_mismatch": {
        "en": "the built model has {built} parameters; the workload describes {described}",
        "zh": "构建出的模型有 {built} 个参数;负载描述的是 {described} 个",
    },
    "warn.generate_short": {
        "en": "generate produced {produced} new tokens instead of {wanted}",
        "zh": "generate 只生成了 {produced} 个新 token,而不是 {wanted} 个",
    },
    "warn.no_token_types": {
        "en": "the encoder has no token-type embeddings; BERT keeps one row",
        "zh": "该编码器没有 token 类型嵌入;BERT 保留一行",
    },
    "warn.fused_not_used": {"en": "fused decode kernels not used ({why})", "zh": "未使用融合解码内核({why})"},
    "warn.capture_failed": {
        "en": "CUDA graph capture failed ({why}); the tuned step ran eagerly",
        "zh": "CUDA Graph 捕获失败({why});tuned 步骤已按 eager 方式运行",
    },
    "warn.capture_failed_decode": {
        "en": "CUDA graph capture failed ({why}); decode steps ran eagerly",
        "zh": "CUDA Graph 捕获失败({why});解码步骤已按 eager 方式运行",
    },
    "warn.capture_failed_prefill": {
        "en": "CUDA graph capture of the prefill failed ({why}); the prefill ran eagerly",
        "zh": "预填充的 CUDA Graph 捕获失败({why});预填充已按 eager 方式运行",
    },
    "warn.compile_failed": {
        "en": "torch.compile of the step failed ({why}); the uncompiled step ran",
        "zh": "torch.compile 编译步骤失败({why});已运行未编译的步骤",
    },
    "warn.compile_capture_failed": {
        "en": "CUDA graph capture of the compiled step failed ({why}); fell back to the uncompiled step",
        "zh": "编译后步骤的 CUDA Graph 捕获失败({why});已回退到未编译的步骤",
    },
    "warn.compile_unavailable": {
        "en": "--compile needs a CUDA device with Triton (torch.compile's inductor); the step ran uncompiled",
        "zh": "--compile 需要带 Triton 的 CUDA 设备(torch.compile 的 inductor);已运行未编译的步骤",
    },
    "warn.compile_decode_failed": {
        "en": "torch.compile of the decode step failed ({why}); the eager step was captured",
        "zh": "torch.compile 编译解码步骤失败({why});已捕获 eager 步骤",
    },
    "fail.timeout": {
        "en": "no result within {seconds} s (phase: {phase}); the child was stopped",
        "zh": "{seconds} 秒内没有结果(阶段:{phase});已停止子进程",
    },
    "fail.no_result_killed": {
        "en": "the measuring process ended without a result (killed by {signal})",
        "zh": "实测进程没有产生结果就结束了(被 {signal} 终止)",
    },
    "fail.no_result_oom_killed": {
        "en": "the measuring process ended without a result (killed by SIGKILL (the system may have run out "
        "of memory))",
        "zh": "实测进程没有产生结果就结束了(被 SIGKILL 终止,系统内存可能已耗尽)",
    },
    "fail.no_result_exit": {
        "en": "the measuring process ended without a result (exit code {code})",
        "zh": "实测进程没有产生结果就结束了(退出码 {code})",
    },
    "fail.oom": {
        "en": "out of memory at batch {batch} (phase: {phase})",
        "zh": "批大小 {batch} 时显存不足(阶段:{phase})",
    },
    "fail.probe": {"en": "{status} at batch {batch}: {error}", "zh": "批大小 {batch} 时{status}:{error}"},
    # -- presets' descriptions (fitbench.workloads.presets; the English is the preset's own) -------------
    "preset.resnet50-cifar10": {
        "en": "ResNet-50 training on CIFAR-10 (32x32, 10 classes), batch 128, Adam, FP32",
        "zh": "ResNet-50 在 CIFAR-10 上训练(32x32,10 类),批大小 128,Adam,FP32",
    },
    "preset.bert-base-imdb": {
        "en": "BERT-base fine-tuning on IMDb (seq 512, 2 labels), batch 16, AdamW; try --precision amp-fp16",
        "zh": "BERT-base 在 IMDb 上微调(序列长度 512,2 个标签),批大小 16,AdamW;可试试 --precision amp-fp16",
    },
    "preset.llm-6b": {
        "en": "6.7B Llama-style decoder, FP16 weights, 50-token prompt, 100 new tokens",
        "zh": "67 亿参数的 Llama 式解码器,FP16 权重,50 个 token 的提示,生成 100 个新 token",
    },
    "preset.resnet18-cifar10": {
        "en": "ResNet-18 training on CIFAR-10, batch 128, FP32",
        "zh": "ResNet-18 在 CIFAR-10 上训练,批大小 128,FP32",
    },
    "preset.resnet101-cifar10": {
        "en": "ResNet-101 training on CIFAR-10, batch 128, FP32",
        "zh": "ResNet-101 在 CIFAR-10 上训练,批大小 128,FP32",
    },
    "preset.resnet50-imagenet": {
        "en": "ResNet-50 on ImageNet (224x224, 1000 classes), batch 256, AMP, SGD momentum",
        "zh": "ResNet-50 在 ImageNet 上训练(224x224,1000 类),批大小 256,混合精度,SGD 动量",
    },
    "preset.bert-large-imdb": {
        "en": "BERT-large fine-tuning, seq 512, AMP",
        "zh": "BERT-large 微调,序列长度 512,混合精度",
    },
    "preset.llm-13b": {
        "en": "13B Llama-style decoder, FP16, 50-token prompt, 100 new tokens",
        "zh": "130 亿参数的 Llama 式解码器,FP16,50 个 token 的提示,生成 100 个新 token",
    },
    "preset.llm-70b": {
        "en": "70B Llama-2-style decoder with grouped-query attention, FP16",
        "zh": "700 亿参数的 Llama-2 式解码器,使用分组查询注意力(GQA),FP16",
    },
    "preset.tiny.resnet50-cifar10": {
        "en": "tiny ResNet (bottleneck, width 8, one block a stage), CIFAR-10 shapes",
        "zh": "迷你 ResNet(瓶颈块,宽度 8,每个阶段一个块),CIFAR-10 的输入尺寸",
    },
    "preset.tiny.bert-base-imdb": {
        "en": "tiny BERT (2 layers, hidden 64), IMDb shapes at seq 64",
        "zh": "迷你 BERT(2 层,隐藏维度 64),IMDb 的输入,序列长度 64",
    },
    "preset.tiny.llm-6b": {
        "en": "tiny Llama (2 layers, hidden 64, GQA 4/2 heads)",
        "zh": "迷你 Llama(2 层,隐藏维度 64,GQA 4/2 个头)",
    },
    # -- fitbench gpus, history, models, estimate: the words of tables and titles --------------------------
    "gpus.col.id": {"en": "id", "zh": "型号"},
    "gpus.col.name": {"en": "name", "zh": "名称"},
    "gpus.col.price": {"en": "price", "zh": "首发价"},
    "gpus.col.rent": {"en": "rent", "zh": "租用价"},
    "cell.no": {"en": "no", "zh": "无"},
    "history.none": {
        "en": "no runs in {path}; `fitbench run WORKLOAD` measures one",
        "zh": "{path} 中没有运行记录;`fitbench run WORKLOAD` 可实测一次",
    },
    "history.none_matching": {
        "en": "no runs in {path} matching the filter; `fitbench run WORKLOAD` measures one",
        "zh": "{path} 中没有符合筛选条件的运行记录;`fitbench run WORKLOAD` 可实测一次",
    },
    "models.sliding": {"en": "{window} on {layers}/{total}", "zh": "{window}(用于 {layers}/{total} 层)"},
    "est.peft": {"en": "{method} rank {rank} on {targets}", "zh": "{method} 秩 {rank},作用于 {targets}"},
    "cell.tiny_name": {"en": "{name} (tiny)", "zh": "{name}(迷你版)"},
    "cell.tiny_word": {"en": "tiny", "zh": "迷你版"},
    "est.accumulated": {"en": "{n} micro-batches accumulated", "zh": "累积 {n} 个微批次"},
    "est.weights": {"en": "weights {label}", "zh": "权重 {label}"},
    "est.kv_cache": {"en": "KV cache {dtype}", "zh": "KV 缓存 {dtype}"},
    # -- fitbench compare -------------------------------------------------------------------------------
    "compare.peak_memory_bytes": {"en": "peak memory", "zh": "峰值显存"},
    "compare.peak_allocated_bytes": {"en": "allocator peak", "zh": "分配器峰值"},
    "compare.memory_after_load_bytes": {"en": "memory after load", "zh": "加载后显存"},
    "compare.load_seconds": {"en": "load", "zh": "加载"},
    "compare.step_seconds": {"en": "step time", "zh": "单步耗时"},
    "compare.step_seconds_p90": {"en": "step time p90", "zh": "单步耗时 p90"},
    "compare.samples_per_second": {"en": "throughput", "zh": "吞吐量"},
    "compare.tokens_per_second": {"en": "end-to-end tok/s", "zh": "端到端 tok/s"},
    "compare.prefill_seconds": {"en": "prefill", "zh": "预填充"},
    "compare.decode_tokens_per_second": {"en": "decode tok/s", "zh": "解码 tok/s"},
    "compare.epoch_seconds": {"en": "epoch", "zh": "每轮"},
    "compare.name": {"en": "workload", "zh": "负载"},
    "compare.precision": {"en": "precision", "zh": "精度"},
    "compare.batch_size": {"en": "batch", "zh": "批大小"},
    "compare.mode": {"en": "mode", "zh": "模式"},
    "compare.backend": {"en": "backend", "zh": "后端"},
    "compare.framework_version": {"en": "framework", "zh": "框架版本"},
    "compare.device_name": {"en": "device", "zh": "设备"},
    "compare.exec_mode": {"en": "exec mode", "zh": "执行模式"},
    "compare.precision_in_effect": {"en": "ran in", "zh": "实际精度"},
    "compare.status": {"en": "status", "zh": "状态"},
    # -- fitbench calibrate -----------------------------------------------------------------------------
    "calibrate.removed": {
        "en": "removed {path}: estimates use the built-in efficiencies",
        "zh": "已删除 {path}:估算改用内置效率系数",
    },
    "calibrate.nothing_to_remove": {
        "en": "no fitted values at {path}: estimates already use the built-in efficiencies",
        "zh": "{path} 处没有拟合值:估算本来就使用内置效率系数",
    },
    "calibrate.fitted": {
        "en": "fitted on {gpu} ({backend}, {exec_mode} execution):",
        "zh": "在 {gpu} 上拟合({backend},{exec_mode} 执行模式):",
    },
    "calibrate.points": {"en": "{n} points", "zh": "{n} 个数据点"},
    "calibrate.release": {
        "en": "  the fitted constants come from generations under transformers {release}; "
        "estimates follow that release",
        "zh": "  拟合的常数来自 transformers {release} 下的生成;估算将沿用该版本",
    },
    "calibrate.nothing": {
        "en": "nothing to fit: no measurement was governed by a single constant",
        "zh": "无可拟合:没有一次实测只受单个常数支配",
    },
    "calibrate.kept": {
        "en": "kept in {path}; `fitbench calibrate --reset` returns to the defaults",
        "zh": "已保存到 {path};`fitbench calibrate --reset` 可恢复默认值",
    },
    "calibrate.measuring": {"en": "measuring {name} {overrides} ...", "zh": "正在实测 {name} {overrides} ……"},
    "calibrate.skipped": {"en": "{status}: {error} (skipped)", "zh": "{status}:{error}(已跳过)"},
    # -- fitbench workloads / models --------------------------------------------------------------------
    "col.params_short": {"en": "params", "zh": "参数量"},
    "col.mode": {"en": "mode", "zh": "模式"},
    "col.shape": {"en": "shape", "zh": "形状"},
    "col.description": {"en": "description", "zh": "说明"},
    "col.family": {"en": "family", "zh": "架构"},
    "col.active": {"en": "active", "zh": "激活参数"},
    "col.experts": {"en": "experts", "zh": "专家"},
    "col.kv_heads": {"en": "kv heads", "zh": "KV 头数"},
    "col.sliding_window": {"en": "sliding window", "zh": "滑动窗口"},
    "col.weights": {"en": "weights", "zh": "权重"},
    "col.source": {"en": "source", "zh": "来源"},
    "cell.yes": {"en": "yes", "zh": "有"},
    "workloads.overrides": {
        "en": "Override any field: --batch, --seq-len, --image-size, --precision, --optimizer, --mode, "
        "--prompt-tokens, --new-tokens, --dataset-size, --checkpointing; or --config config.json.",
        "zh": "可覆盖任意字段:--batch、--seq-len、--image-size、--precision、--optimizer、--mode、"
        "--prompt-tokens、--new-tokens、--dataset-size、--checkpointing;或用 --config config.json。",
    },
    "models.kind.encoder": {"en": "encoders", "zh": "编码器"},
    "models.kind.decoder": {"en": "decoders", "zh": "解码器"},
    "models.kind.moe": {"en": "mixture of experts", "zh": "混合专家"},
    "models.kind.multimodal": {
        "en": "multimodal (language model and vision tower)",
        "zh": "多模态(语言模型与视觉塔)",
    },
    "models.kind.cnn": {"en": "convolutional", "zh": "卷积网络"},
    "models.families_usage": {
        "en": "Estimate any model of these families from its config.json: fitbench estimate --config "
        "path/to/config.json --gpu rtx-4090.",
        "zh": "这些家族的任何模型都可以用其 config.json 估算:fitbench estimate --config "
        "path/to/config.json --gpu rtx-4090。",
    },
    "models.usage": {
        "en": "Use a name where a preset goes: fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090 "
        "(generation; --mode train to fine-tune).",
        "zh": "在填写预设名的位置使用模型名:fitbench estimate qwen2.5-7b-instruct --gpu rtx-4090"
        "(默认推理生成;微调请加 --mode train)。",
    },
}


# `--lang` values: en or zh, alone or as a locale (a region, an encoding or a modifier after it).
_LANG_VALUE = re.compile(r"^(en|zh)(?:[-_.@].*)?$", re.IGNORECASE)


def resolve_lang(lang: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """`lang` when given (en or zh), else zh when the locale variables say Chinese, else en.

    A given value is a language, not a hint: `en`, `zh` or a locale of one (`zh_CN.UTF-8`, `en-US`).
    Anything else, an empty `--lang=` included, is an error rather than a silent fall back to the
    locale, so that a typo never quietly answers in a language the user did not ask for."""
    if lang is not None:
        match = _LANG_VALUE.match(lang.strip())
        if match:
            return match[1].lower()
        from fitbench.errors import FitbenchError

        raise FitbenchError(
            f"unknown language '{lang}'",
            "use --lang en or --lang zh",
            message_zh=f"未知的语言 '{lang}'",
            hint_zh="请使用 --lang en 或 --lang zh",
        )
    env = os.environ if environ is None else environ
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(var, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def t(key: str, lang: str = "en", /, **params: Any) -> str:
    """The message `key` in `lang`, formatted with `params`. An unknown key is a bug: KeyError."""
    entry = MESSAGES[key]
    text = entry.get(lang) or entry["en"]
    return text.format(**params) if params else text


def has(key: str) -> bool:
    return key in MESSAGES


def verdict_label(verdict: str | None, lang: str = "en") -> str:
    return t(f"verdict.{verdict}", lang) if verdict and has(f"verdict.{verdict}") else (verdict or "-")


def status_label(status: str | None, lang: str = "en") -> str:
    return t(f"status.{status}", lang) if status and has(f"status.{status}") else (status or "-")


def bottleneck_label(bottleneck: str | None, lang: str = "en") -> str:
    key = f"bottleneck.{bottleneck}"
    return t(key, lang) if bottleneck and has(key) else (bottleneck or "-")


def part_label(part: str, lang: str = "en") -> str:
    key = f"part.{part}"
    return t(key, lang) if has(key) else part.replace("_", " ")


# A measurement's warnings and failures are stored as the child or the runner wrote them (English,
# stable for JSON and the history); shown to a reader, each one that matches its message's pattern is
# said in the reader's language, with the pattern's groups as the message's values. Others (a
# framework's own exception text) are shown as written.
MEASUREMENT_PATTERNS: dict[str, re.Pattern[str]] = {
    key: re.compile(pattern)
    for key, pattern in {
        "warn.cpu_no_graphs": r"CUDA graphs need a CUDA device; ran eagerly",
        "warn.tuned_ran": r"tuned changed the precision: ran (?P<ran>\S+) \((?P<how>[^)]*)\) instead of the "
        r"requested (?P<asked>\S+)",
        "warn.tuned_generated": r"tuned changed the precision: generated with (?P<ran>\S+) weights "
        r"instead of (?P<asked>\S+)",
        "warn.tf32_cpu": r"TF32 exists only on NVIDIA GPUs; ran FP32",
        "warn.weights_unsupported": r"(?P<dtype>\S+) weights are not supported on (?P<device>\S+) by this "
        r"torch; ran FP32",
        "warn.autocast_unsupported": r"autocast to (?P<dtype>\S+) is not supported on (?P<device>\S+) by "
        r"this torch; ran FP32",
        "warn.pure_fp16": r"pure fp16 training has no loss scaling or master weights: fine for speed and "
        r"memory, not for convergence",
        "warn.no_bf16_autocast": r"this GPU has no native bf16; autocast emulates it \(slow\)",
        "warn.sdpa": r"tuned uses fused SDPA attention; the workload asked for eager attention",
        "warn.decode_not_slower": r"generation was not measurably slower than prefill; decode speed not "
        r"derived",
        "warn.budget": r"stopped after (?P<n>\d+) of (?P<of>\d+) steps: the (?P<seconds>\d+) s budget of the "
        r"timed loop ran out",
        "warn.param_mismatch": r"the built model has (?P<built>[\d,]+) parameters; the workload describes "
        r"(?P<described>[\d,]+)",
        "warn.generate_short": r"generate produced (?P<produced>\d+) new tokens instead of (?P<wanted>\d+)",
        "warn.no_token_types": r"the encoder has no token-type embeddings; BERT keeps one row",
        "warn.fused_not_used": r"fused decode kernels not used \((?P<why>.*)\)",
        "warn.capture_failed": r"CUDA graph capture failed \((?P<why>.*)\); the tuned step ran eagerly",
        "warn.capture_failed_decode": r"CUDA graph capture failed \((?P<why>.*)\); decode steps ran eagerly",
        "warn.capture_failed_prefill": r"CUDA graph capture of the prefill failed \((?P<why>.*)\); "
        r"the prefill ran eagerly",
        "warn.compile_failed": r"torch\.compile of the step failed \((?P<why>.*)\); the uncompiled step ran",
        "warn.compile_capture_failed": r"CUDA graph capture of the compiled step failed \((?P<why>.*)\); "
        r"fell back to the uncompiled step",
        "warn.compile_unavailable": r"--compile needs a CUDA device with Triton "
        r"\(torch\.compile's inductor\); the step ran uncompiled",
        "warn.compile_decode_failed": r"torch\.compile of the decode step failed \((?P<why>.*)\); the eager "
        r"step was captured",
        "fail.timeout": r"no result within (?P<seconds>[\d.e+]+) s \(phase: (?P<phase>[^)]*)\); the child "
        r"was stopped",
        "fail.no_result_killed": r"the measuring process ended without a result \(killed by "
        r"(?P<signal>\S+)\)",
        "fail.no_result_oom_killed": r"the measuring process ended without a result \(killed by SIGKILL "
        r"\(the system may have run out of memory\)\)",
        "fail.no_result_exit": r"the measuring process ended without a result \(exit code (?P<code>-?\d+)\)",
        "fail.oom": r"out of memory at batch (?P<batch>\d+) \(phase: (?P<phase>\w+)\)",
        "fail.probe": r"(?P<status>oom|error|timeout|killed) at batch (?P<batch>\d+): (?P<error>.*)",
    }.items()
}


def measurement_text(text: str, lang: str = "en") -> str:
    """A measurement's warning or failure in `lang` (see MEASUREMENT_PATTERNS); one fitbench does not word
    is kept."""
    if lang == "en":
        return text
    for key, pattern in MEASUREMENT_PATTERNS.items():
        match = pattern.fullmatch(text)
        if match:
            values = match.groupdict()
            phase = values.get("phase")
            for where in ("progress", "phase"):  # the phase a child was in, as the reader saw it named
                if phase and has(f"{where}.{phase}"):
                    values["phase"] = t(f"{where}.{phase}", lang)
            if values.get("status"):
                values["status"] = status_label(values["status"], lang)
            if values.get("error"):  # a probe's failure, itself a measurement's
                values["error"] = measurement_text(values["error"], lang)
            return t(key, lang, **values)
    return text


def preset_description(text: str | None, lang: str = "en") -> str:
    """A preset's description in `lang`: stored runs and workloads carry the English text, which is
    looked up among the presets' own (`preset.*`); any other description (a config.json's) is kept."""
    if not text or lang == "en":
        return text or ""
    for key, entry in MESSAGES.items():
        if key.startswith("preset.") and entry["en"] == text:
            return entry.get(lang) or text
    return text


def format_params(n: int | None, lang: str = "en") -> str:
    """110M / 6.7B in English; 1.1 亿 / 67 亿 (and 2500 万 below 100M) in Chinese."""
    if n is None:
        return "-"
    if lang == "zh":
        if n >= 1e8:
            value = n / 1e8
            return t(
                "params.billions",
                lang,
                value=f"{value:.1f}".rstrip("0").rstrip(".") if value < 10 else f"{value:.0f}",
            )
        return t("params.millions", lang, value=f"{n / 1e4:.0f}")
    if n >= 1e9:
        value = n / 1e9
        return t(
            "params.billions",
            lang,
            value=f"{value:.1f}".rstrip("0").rstrip(".") if value < 10 else f"{value:.0f}",
        )
    return t("params.millions", lang, value=f"{n / 1e6:.0f}" if n >= 1e6 else f"{n / 1e6:.2f}")


__all__ = [
    "LANGS",
    "MESSAGES",
    "bottleneck_label",
    "format_params",
    "has",
    "measurement_text",
    "part_label",
    "preset_description",
    "resolve_lang",
    "status_label",
    "t",
    "verdict_label",
]
