"""The stored model's bytes: which matrices a weight format converts, and what they weigh.

Why a module of its own: the weights are the one memory part every other model reads (the
single-device and per-GPU breakdowns, the kernels' weight traffic, tensor parallelism's shards,
serving's and offload's placement), so it sits below all of them and depends only on the
matrix shapes (matrices.py) and the formats' layouts (core.quant).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache

from fitbench.core.quant import WeightFormat, matrix_bytes
from fitbench.estimate.matrices import block_gemms, expert_gemms, layer_gemms
from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.workload import Workload


def quantizable_params(workload: Workload) -> int:
    """Matrix weights that weight-only quantization converts: every block's Linear layers
    (embeddings, norms and the LM head stay 16-bit, as in bitsandbytes/GPTQ defaults), or every
    convolution of a ResNet."""
    arch = workload.arch
    if isinstance(arch, TransformerArch):
        return arch.linear_params()
    assert isinstance(arch, ResNetArch)
    return sum(c.in_channels * c.out_channels * c.kernel**2 for c in arch.convs(224))


def quantized_rows(workload: Workload) -> int:
    """Output rows of the quantized matrices (int8 keeps one FP32 scale per row)."""
    arch = workload.arch
    if isinstance(arch, TransformerArch):
        return sum(fout * layers for _, _, fout, layers in layer_gemms(arch))
    assert isinstance(arch, ResNetArch)
    return sum(c.out_channels for c in arch.convs(224))


# Where a block matrix lives, as module paths spell it after the layer index (the first path
# is the one fitbench names; the rest are the other families' spellings a skip list may use).
_ATTENTION_PARENTS = ("self_attn", "attn", "attention", "self_attention")
_ALIASES = {
    "kv_a_proj": ("kv_a_proj_with_mqa",),
    "gate_proj": ("w1",),
    "up_proj": ("w3",),
    "down_proj": ("w2",),
    "fc1": ("c_fc", "dense_h_to_4h"),
    "fc2": ("c_proj", "dense_4h_to_h"),
}
_MLP_PARENTS = ("mlp", "feed_forward", "block_sparse_moe")
# A Gated DeltaNet layer's matrices (TransformerArch.linear_attention_linears), under linear_attn.
_LINEAR_ATTENTION_LEAVES = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj")
# A Mamba-2 layer's (Granite 4.0-H), under mamba; LFM2's short convolution's, under conv.
_MAMBA_LEAVES = ("in_proj", "out_proj")
_RECURRENT_PARENTS = (
    ("linear_attn", _LINEAR_ATTENTION_LEAVES),
    ("mamba", _MAMBA_LEAVES),
    ("conv", _MAMBA_LEAVES),
)


@dataclass(frozen=True)
class QuantMatrix:
    """A matrix shape of the model: `copies` of its `total` instances (layers, or layers x
    experts) are stored in the weight format, the rest in 16 bit."""

    name: str
    fin: int
    fout: int
    copies: int
    total: int


def _module_paths(name: str) -> list[str]:
    """The module paths below `layers.N.` a block matrix called `name` goes by: attention
    matrices under self_attn (attn, attention, self_attention), MLP ones under mlp
    (feed_forward; Mixtral's block_sparse_moe with w1/w2/w3), routed experts under
    mlp.experts, shared experts under mlp.shared_experts (Qwen-MoE: shared_expert), the router
    as mlp.gate (mlp.router)."""
    part, _, leaf = name.rpartition(".")
    leaves = (leaf, *_ALIASES.get(leaf, ()))
    if name == "router":
        return [f"{p}.{r}" for p in _MLP_PARENTS for r in ("gate", "router")]
    if part == "experts":
        return [f"{p}.experts.{lf}" for p in _MLP_PARENTS for lf in leaves]
    if part == "shared_experts":
        return [
            f"{p}.{s}.{lf}"
            for p in _MLP_PARENTS
            for s in ("shared_experts", "shared_expert")
            for lf in leaves
        ]
    if leaf in ("gate_proj", "up_proj", "down_proj", "fc1", "fc2"):
        return [f"{p}.{lf}" for p in _MLP_PARENTS for lf in leaves]
    if leaf in _LINEAR_ATTENTION_LEAVES or leaf in _MAMBA_LEAVES:
        parents = [p for p, names in _RECURRENT_PARENTS if leaf in names]
        return [f"{p}.{lf}" for p in parents for lf in leaves]
    return [f"{p}.{lf}" for p in _ATTENTION_PARENTS for lf in leaves]


def _contains(tokens: list[str], path: list[str]) -> bool:
    n = len(tokens)
    return any(path[i : i + n] == tokens for i in range(len(path) - n + 1))


def kept_in_16_bit(entry: str, layer: int, paths: list[str]) -> bool:
    """Whether a modules_to_not_convert / ignore entry keeps layer `layer`'s matrix (known by
    `paths`) unquantized, matching module names as transformers does, by dotted parts:
    'mlp' or 'self_attn' (a whole part), 'down_proj' (that matrix everywhere), 'mlp.gate' (the
    router, not gate_proj), 'model.layers.3.mlp.down_proj' (one layer's; 'layers.3' all of
    it), compressed-tensors' 're:' regular expressions against 'model.layers.N.<path>', and
    wildcards ('model.layers.*.self_attn', gpt-oss's) against that name and its parents."""
    if "*" in entry and not entry.startswith("re:"):
        names = [f"model.layers.{layer}.{path}" for path in paths]
        return any(fnmatch.fnmatchcase(n, entry) or fnmatch.fnmatchcase(n, entry + ".*") for n in names)
    if entry.startswith("re:"):
        try:
            pattern = re.compile(entry[3:])
        except re.error:
            return False
        return any(pattern.search(f"model.layers.{layer}.{path}") for path in paths)
    tokens = [t for t in entry.split(".") if t]
    index = next((i for i, t in enumerate(tokens) if t.isdigit()), None)
    if index is not None:
        if int(tokens[index]) != layer:
            return False
        rest = tokens[index + 1 :]
        return not rest or any(path.split(".")[: len(rest)] == rest for path in paths)
    return bool(tokens) and any(_contains(tokens, path.split(".")) for path in paths)


def quantized_layers(fmt: WeightFormat, name: str, layers: list[int]) -> int:
    """How many of a block matrix's copies in `layers` `fmt` quantizes: all, unless a skip
    entry (kept_in_16_bit) names the matrix, its part or its layer."""
    if not fmt.skip:
        return len(layers)
    paths = _module_paths(name)
    return sum(1 for i in layers if not any(kept_in_16_bit(e, i, paths) for e in fmt.skip))


def router_quantized(fmt: WeightFormat) -> bool:
    """The MoE router (`mlp.gate`, a Linear(hidden, experts)) is converted only by bitsandbytes,
    which replaces every nn.Linear but the skipped ones (transformers 5's routers are no Linear:
    experts_stay_16_bit); GPTQ and AWQ quantizers list the
    expert and attention matrices per model and leave the router alone, DeepSeek-V3's fp8
    checkpoint keeps it in bf16, and llama.cpp keeps `ffn_gate_inp` unquantized."""
    return fmt.method in ("bnb-int8", "bnb-4bit")


# bitsandbytes converts nn.Linear modules only. transformers 5 stores the routed experts of every
# MoE family as stacked 3-D parameters (gate_up_proj, down_proj; integrations/moe.py) and their
# routers as a module holding a weight Parameter (MixtralTopKRouter and its kin), so loading
# with bitsandbytes leaves both in 16 bit (bitsandbytes issue #1849), except Llama-4's, which its
# quantizer first unfuses into Linears (quantizers/base.py MODULES_TO_PATCH_FOR_QUANTIZATION).
# Serving engines quantize them (vLLM's bitsandbytes MoE method): `engine`.
BNB_METHODS = ("bnb-int8", "bnb-4bit")
UNFUSED_FOR_BNB_TYPES = ("llama4_text", "llama4")


def experts_stay_16_bit(fmt: WeightFormat, arch: TransformerArch, *, engine: bool = False) -> bool:
    """Whether transformers' bitsandbytes loading leaves the routed experts unconverted."""
    return not engine and fmt.method in BNB_METHODS and stacked_expert_params(arch) > 0


def stacked_expert_params(arch: TransformerArch) -> int:
    """The routed experts' weights that transformers 5 holds as stacked 3-D parameters, which
    bitsandbytes (and QLoRA's NF4 through it) leaves in the base dtype; 0 for dense models and
    Llama-4 (UNFUSED_FOR_BNB_TYPES)."""
    if not arch.is_moe or arch.rules_type in UNFUSED_FOR_BNB_TYPES:
        return 0
    per_expert = sum(fin * fout for _, fin, fout in expert_gemms(arch)["experts"])
    return arch.moe_layers * arch.num_experts * per_expert


def quantized_matrices(workload: Workload, *, engine: bool = False) -> list[QuantMatrix]:
    """The matrices `weight_format` may store quantized, with how many copies it does: each
    block's attention matrices (latent attention's low-rank ones included), the dense blocks'
    MLP, every routed expert's and the shared experts' matrices of the MoE blocks (memory holds
    them all; none of the routed ones where transformers loads them with bitsandbytes:
    experts_stay_16_bit, unless an `engine` serves the model), the router where the method
    converts it, the LM head where quantized, and for GGUF (whose published bits per weight
    cover every tensor) the token embedding too."""
    fmt = workload.weight_format
    arch = workload.arch
    assert fmt is not None and isinstance(arch, TransformerArch)
    return list(_quantized_matrices(fmt, arch, engine))


@lru_cache(maxsize=64)
def _quantized_matrices(fmt: WeightFormat, arch: TransformerArch, engine: bool) -> tuple[QuantMatrix, ...]:
    """quantized_matrices for one format and architecture (the largest-batch and longest-context
    searches ask for the same answer hundreds of times)."""
    every = list(range(arch.num_layers))
    moe = [i for i in every if arch.is_moe_layer(i)]
    dense = [i for i in every if not arch.is_moe_layer(i)]
    attention = {name for name, _, _ in arch.attention_linears()}
    linear = [i for i in every if arch.is_linear_attention_layer(i)]
    attending = [i for i in every if not arch.is_linear_attention_layer(i)]
    mats = []
    for name, fin, fout in block_gemms(arch):
        layers = attending if name in attention else dense
        if layers:
            mats.append(QuantMatrix(name, fin, fout, quantized_layers(fmt, name, layers), len(layers)))
    for name, fin, fout in arch.linear_attention_linears():
        mats.append(QuantMatrix(name, fin, fout, quantized_layers(fmt, name, linear), len(linear)))
    if moe:
        parts = expert_gemms(arch)
        stay = experts_stay_16_bit(fmt, arch, engine=engine)
        for name, fin, fout in parts["experts"]:
            n = arch.num_experts
            copies = 0 if stay else n * quantized_layers(fmt, name, moe)
            mats.append(QuantMatrix(name, fin, fout, copies, n * len(moe)))
        for name, fin, fout in parts["shared"]:
            mats.append(QuantMatrix(name, fin, fout, quantized_layers(fmt, name, moe), len(moe)))
        for name, fin, fout in parts["router"]:
            # transformers 5's routers hold a plain weight Parameter too (MixtralTopKRouter, ...)
            copies = quantized_layers(fmt, name, moe) if router_quantized(fmt) and not stay else 0
            mats.append(QuantMatrix(name, fin, fout, copies, len(moe)))
    head = (
        arch.kind == "decoder"
        and fmt.quantize_head
        and not any(e.split(".")[-1] == "lm_head" for e in fmt.skip)
    )
    if head:
        mats.append(QuantMatrix("lm_head", arch.hidden_size, arch.vocab_size, 1, 1))
    if fmt.method == "gguf" and not (arch.tie_embeddings and head):
        mats.append(QuantMatrix("embed_tokens", arch.hidden_size, arch.vocab_size, 1, 1))
    return tuple(mats)


def checkpoint_weight_bytes(workload: Workload) -> int | None:
    """The weights' exact bytes from the checkpoint's safetensors headers, where they describe
    what is loaded: a checkpoint stored at the workload's weight width (a bf16 checkpoint run in
    fp16 or bf16), or a pre-quantized one (under 16 bits an element on average, packed weights
    and their scales together) loaded in a 16-bit mode. The headers win over a
    quantization_config's layout (they are that layout, counted exactly), so the two are never
    added. None otherwise (the count decides): training, or a 16-bit checkpoint that --weights
    or --precision int8/int4 quantizes while loading."""
    if not workload.checkpoint_bytes or not workload.checkpoint_params or workload.is_training:
        return None
    p = workload.precision_info
    fmt = workload.weight_format
    per_element = workload.checkpoint_bytes / workload.checkpoint_params
    if fmt is None and abs(per_element - p.weight_bytes) <= 0.01 * p.weight_bytes:
        return workload.checkpoint_bytes
    if fmt is None and p.weight_bytes == 2 and per_element < 1.9:
        return workload.checkpoint_bytes
    # A quantization_config says the stored tensors are the quantized ones. Their elements are
    # packed (GPTQ/AWQ: eight 4-bit values an int32), so the check is bytes per model parameter.
    if (
        fmt is not None
        and fmt.source == "quantization_config"
        and p.weight_bytes == 2
        and workload.checkpoint_bytes < 1.9 * workload.param_count()
    ):
        return workload.checkpoint_bytes
    return None


def weight_bytes(workload: Workload, *, engine: bool = False) -> tuple[int, int]:
    """(weights, quantization scales) in bytes for the stored model (as transformers loads it,
    or as a serving `engine` does: quantized_matrices).

    Unquantized: every parameter in the precision's dtype. Quantized: the matrices the format
    converts at their layout's bytes (core.quant.matrix_bytes: packed values as weights, scales,
    zero points and indices as scales); everything else (embeddings, norms, biases, the LM head
    unless quantized, skipped modules) in 16 bit. A model folder's safetensors headers, where
    they describe what is loaded, give the exact bytes instead (checkpoint_weight_bytes).
    """
    p = workload.precision_info
    params = workload.param_count()
    fmt = workload.weight_format
    exact = checkpoint_weight_bytes(workload)
    if exact is not None:
        return exact, 0
    if fmt is None:
        return int(params * p.weight_bytes), 0
    if workload.is_resnet:  # int8 / int4 of a ResNet: its convolutions, as bitsandbytes would
        q = quantizable_params(workload)
        packed = q * int(fmt.bits) // 8
        scales = quantized_rows(workload) * 4 if fmt.method == "bnb-int8" else (q // 64) * 4
        return int((params - q) * 2 + packed), int(scales)
    values = meta = 0
    converted = 0
    for m in quantized_matrices(workload, engine=engine):
        v, scales = matrix_bytes(fmt, m.fin, m.fout)
        values += m.copies * v
        meta += m.copies * scales
        converted += m.copies * m.fin * m.fout
    return int((params - converted) * 2 + values), int(meta)
