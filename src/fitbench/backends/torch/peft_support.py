"""LoRA and QLoRA on the torch backend's models, through Hugging Face `peft` and `bitsandbytes`.

The adapters are configured from the same constants the estimator reads
(fitbench.estimate.peft: dropout, alpha per rank, which Linears), so a measured LoRA step and its
estimate describe one model. Order in a session: build (or quantize) the model, `apply_lora`,
then give the optimizer only the parameters that require a gradient.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from typing import Any

import torch
from torch import nn

from fitbench.errors import FitbenchError
from fitbench.estimate.peft import LORA_ALPHA_PER_RANK, lora_dropout
from fitbench.workloads.workload import Workload

# Module-name suffixes of each block's Linears in the transformers models the backend builds
# (peft matches a name when it equals the entry or ends with "." + entry). Neither the LM head,
# the classifier nor BERT's pooler is listed: they are outside the blocks.
TARGET_MODULES: dict[str, dict[str, tuple[str, ...]]] = {
    "bert": {
        "attention": ("query", "key", "value", "attention.output.dense"),
        "mlp": ("intermediate.dense", "output.dense"),
    },
    "llama": {
        "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
        "mlp": ("gate_proj", "up_proj", "down_proj"),
    },
    # the dense families backends/torch/family_configs.py builds with Llama's module names
    **{
        model_type: {
            "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
            "mlp": ("gate_proj", "up_proj", "down_proj"),
        }
        for model_type in (
            "qwen2",
            "qwen3",
            "gemma2",
            "gemma3_text",
            "olmo",
            "olmo2",
            "olmo3",
            "exaone4",
            "seed_oss",
            "hunyuan_v1_dense",
            "ministral",
            "ministral3",
            "stablelm",
        )
    },
    # Two-matrix MLPs (ReLU squared, xIELU) under Llama's attention names.
    **{
        model_type: {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ("up_proj", "down_proj")}
        for model_type in ("arcee", "nemotron", "jais2", "apertus")
    },
    "phi": {"attention": ("q_proj", "k_proj", "v_proj", "self_attn.dense"), "mlp": ("fc1", "fc2")},
    # Mixture-of-experts families by their transformers 4 names, which peft turns into target
    # parameters on transformers 5's stacked experts (estimate/peft.py PEFT_STACKED_EXPERT_TYPES);
    # Qwen2-MoE's names reach its shared expert's Linears only.
    "mixtral": {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ("w1", "w2", "w3")},
    **{
        model_type: {
            "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
            "mlp": ("gate_proj", "up_proj", "down_proj"),
        }
        for model_type in ("qwen2_moe", "qwen3_moe", "olmoe", "flex_olmo")
    },
    # More MoE families peft's map covers (estimate/peft.py PEFT_STACKED_EXPERT_TYPES), by Llama's
    # names: their dense layers, shared experts and stacked experts.
    **{
        model_type: {
            "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
            "mlp": ("gate_proj", "up_proj", "down_proj"),
        }
        for model_type in ("ernie4_5_moe", "glm4_moe", "solar_open", "exaone_moe", "afmoe", "dots1")
    },
    # Latent attention (DeepSeek-V2/V3, Kimi K2 built as DeepSeek-V3, GLM-4.7-Flash, MiniCPM3):
    # the query's one or two projections (q_proj, or q_a_proj and q_b_proj), the compressed
    # key/value projection and its expansion, the output.
    **{
        model_type: {
            "attention": ("q_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"),
            "mlp": ("gate_proj", "up_proj", "down_proj"),
        }
        for model_type in ("deepseek_v2", "deepseek_v3", "glm4_moe_lite", "minicpm3", "youtu")
    },
    # GLM-4-0414 (and GLM-4.1V's language model) fuse gate and up (estimate/peft.py FUSED_GATE_UP).
    "glm4": {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ("gate_up_proj", "down_proj")},
    # Granite MoE's experts are two 3-D parameters peft's map does not name: attention only.
    **{
        model_type: {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ()}
        for model_type in ("granitemoe", "granitemoeshared")
    },
    # MiniMax-M2 converts its experts as Mixtral does (transformers' conversion pattern "mixtral"):
    # peft reaches the stacked experts through Mixtral's v4 names.
    "minimax_m2": {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ("w1", "w2", "w3")},
    # gpt-oss stacks its experts in parameters no v4 name of peft's map reaches: attention only,
    # as the estimate counts (PEFT_STACKED_EXPERT_TYPES has no gpt_oss).
    "gpt_oss": {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ()},
    # Llama-4's routed experts are 3-D parameters; Llama's MLP names reach its shared expert's
    # and its dense layers' Linears.
    "llama4_text": {
        "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
        "mlp": ("gate_proj", "up_proj", "down_proj"),
    },
    # Phi-3.5-MoE stacks its experts as Mixtral does, but peft's family map has no `phimoe`
    # entry, so no v4 name reaches them: its adapters are the attention's, as the estimate counts.
    "phimoe": {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ()},
    # Phi-3 fuses q, k, v in qkv_proj and gate, up in gate_up_proj (estimate/peft.py FUSED_QKV,
    # FUSED_GATE_UP adapt each fused matrix once).
    "phi3": {"attention": ("qkv_proj", "o_proj"), "mlp": ("gate_up_proj", "down_proj")},
    # Command-R and Command-R7B: Llama's names in parallel blocks.
    **{
        model_type: {
            "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
            "mlp": ("gate_proj", "up_proj", "down_proj"),
        }
        for model_type in ("cohere", "cohere2")
    },
    # GPT-NeoX and Falcon fuse q, k and v in one query_key_value (estimate/peft.py FUSED_QKV); the
    # output projection is the attention block's `dense`, which the MLP's two names do not end in.
    "gpt_neox": {
        "attention": ("query_key_value", "attention.dense"),
        "mlp": ("dense_h_to_4h", "dense_4h_to_h"),
    },
    "falcon": {
        "attention": ("query_key_value", "self_attention.dense"),
        "mlp": ("dense_h_to_4h", "dense_4h_to_h"),
    },
    "gptj": {"attention": ("q_proj", "k_proj", "v_proj", "out_proj"), "mlp": ("fc_in", "fc_out")},
    "starcoder2": {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ("c_fc", "c_proj")},
    # GPT-2's Conv1D layers store the weight transposed (fan_in_fan_out) and fuse q, k, v in c_attn;
    # GPT-BigCode keeps the names with plain Linears.
    "gpt2": {"attention": ("c_attn", "attn.c_proj"), "mlp": ("c_fc", "mlp.c_proj")},
    "gpt_bigcode": {"attention": ("c_attn", "attn.c_proj"), "mlp": ("c_fc", "mlp.c_proj")},
}
FAN_IN_FAN_OUT = ("gpt2",)

QLORA_HINT = "pip install bitsandbytes; `fitbench estimate --peft qlora` covers it"
QLORA_HINT_ZH = "pip install bitsandbytes;`fitbench estimate --peft qlora` 可以估算它"


def _import_peft() -> Any:
    try:
        import peft
    except ImportError as exc:
        raise FitbenchError(
            "LoRA measurement needs the peft library",
            "pip install 'fitbench[peft]'; `fitbench estimate --peft lora` covers it",
            message_zh="LoRA 实测需要 peft 库",
            hint_zh="pip install 'fitbench[peft]';`fitbench estimate --peft lora` 可以估算它",
        ) from exc
    return peft


def _model_type(model: nn.Module) -> str:
    config = getattr(model, "config", None)
    return str(getattr(config, "model_type", "") or "")


def target_modules(model_type: str, targets: str) -> list[str]:
    """Names peft adapts for `targets` ('attention' | 'attention-mlp' | 'all-linear') in this model.

    'all-linear' means every Linear of the blocks, the same set as 'attention-mlp' here (peft's
    own "all-linear" would also take BERT's pooler).
    """
    if model_type not in TARGET_MODULES:
        covered = ", ".join(TARGET_MODULES)
        raise FitbenchError(
            f"LoRA measurement has no target list for '{model_type or 'this'}' models",
            f"it covers {covered}; `fitbench estimate --peft` covers others",
            message_zh=f"LoRA 实测没有 '{model_type or 'this'}' 模型的目标模块列表",
            hint_zh=f"已覆盖:{covered};其他模型可用 `fitbench estimate --peft` 估算",
        )
    table = TARGET_MODULES[model_type]
    names = list(table["attention"])
    if targets != "attention":
        names += table["mlp"]
    return names


def lora_config(model: nn.Module, workload: Workload) -> Any:
    """peft's LoraConfig for `workload`: rank r, alpha 2r, dropout 0.05 (none where peft adapts
    stacked experts: estimate/peft.py lora_dropout), the block Linears; task
    type SEQ_CLS for encoders (the classifier is trained: modules_to_save) or CAUSAL_LM."""
    peft = _import_peft()
    model_type = _model_type(model)
    task = peft.TaskType.SEQ_CLS if workload.family == "encoder" else peft.TaskType.CAUSAL_LM
    r = workload.lora_rank
    return peft.LoraConfig(
        r=r,
        lora_alpha=LORA_ALPHA_PER_RANK * r,
        lora_dropout=lora_dropout(workload),
        target_modules=target_modules(model_type, workload.lora_targets),
        task_type=task,
        fan_in_fan_out=model_type in FAN_IN_FAN_OUT,
        bias="none",
    )


def apply_lora(model: nn.Module, workload: Workload) -> nn.Module:
    """Freeze `model` and wrap it with LoRA adapters (a peft PeftModel, in train mode).

    Adapters are FP32 whatever the base dtype (`autocast_adapter_dtype=True`, peft's default,
    stated here because the estimate depends on it). For QLoRA pass the model that
    `quantize_for_qlora` returns: peft then uses its bitsandbytes-aware LoRA layers.
    """
    if workload.peft is None:
        raise FitbenchError(
            "apply_lora needs a workload with --peft lora or qlora",
            message_zh="apply_lora 需要带 --peft lora 或 qlora 的工作负载",
        )
    peft = _import_peft()
    config = lora_config(model, workload)
    with warnings.catch_warnings():
        # transformers 5 renamed gradient checkpointing; peft still asks by the old name.
        warnings.simplefilter("ignore", FutureWarning)
        wrapped = peft.get_peft_model(model, config, autocast_adapter_dtype=True)
    wrapped.train()
    return wrapped


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """What the optimizer must get: adapters (and an encoder's classifier copy) only."""
    return [p for p in model.parameters() if p.requires_grad]


def lora_summary(model: nn.Module) -> dict[str, Any]:
    """Notes for a measurement: trainable and adapter parameter counts, adapter dtype, versions."""
    trainable = trainable_parameters(model)
    adapters = [p for n, p in model.named_parameters() if p.requires_grad and ".lora_" in n]
    return {
        "trainable_params": sum(p.numel() for p in trainable),
        "adapter_params": sum(p.numel() for p in adapters),
        "adapter_dtype": str(adapters[0].dtype).removeprefix("torch.") if adapters else None,
        "peft": _version("peft"),
    }


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def quantize_for_qlora(
    workload: Workload,
    *,
    device: torch.device | str,
    dtype: torch.dtype,
    compute_dtype: torch.dtype | None = None,
) -> tuple[nn.Module, dict[str, Any]]:
    """The workload's model with NF4 block Linears (double quantization, as in QLoRA) and every
    other parameter in `dtype`; the 4-bit layers dequantize to `compute_dtype` (default `dtype`).

    Builds through the backend's int4 loader (never a 16-bit copy of the whole model on the GPU),
    then re-types what that loader leaves in fp16, and marks the model as 4-bit loaded so that
    peft picks its bitsandbytes LoRA layers. Embeddings, norms and the head are not upcast to
    FP32 (peft's prepare_model_for_kbit_training would do that): the estimate assumes 16 bit.
    """
    try:
        import bitsandbytes as bnb
    except Exception as exc:
        raise FitbenchError(
            "QLoRA measurement needs bitsandbytes (CUDA)",
            QLORA_HINT,
            message_zh="QLoRA 实测需要 bitsandbytes(CUDA)",
            hint_zh=QLORA_HINT_ZH,
        ) from exc
    device = torch.device(device)
    if device.type != "cuda":
        raise FitbenchError(
            "QLoRA measurement needs bitsandbytes (CUDA)",
            QLORA_HINT,
            message_zh="QLoRA 实测需要 bitsandbytes(CUDA)",
            hint_zh=QLORA_HINT_ZH,
        )
    from fitbench.backends.torch.quant import build_quantized

    model, notes = build_quantized(workload, bits=4, device=device)
    compute = compute_dtype or dtype
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, bnb.nn.Linear4bit):
                module.compute_dtype = compute
            for name, param in list(module.named_parameters(recurse=False)):
                keep = isinstance(param, bnb.nn.Params4bit) or not param.is_floating_point()
                if keep or param.dtype == dtype:
                    continue
                module._parameters[name] = nn.Parameter(
                    param.data.to(dtype), requires_grad=param.requires_grad
                )
    tied = getattr(workload.arch, "tie_embeddings", False)
    if tied and hasattr(model, "tie_weights"):
        model.tie_weights()  # re-typing replaced the shared parameter
    model.is_loaded_in_4bit = True
    source = notes.get("model_source", "")
    notes["model_source"] = f"{source}; NF4 with double quantization, {compute} compute"
    return model, notes
