"""The Linear layers of a transformer block, by name and shape.

Why a module of its own: what a weight format stores (weights.py), what the kernels read
(transformer_cost.py) and what LoRA adapts or QLoRA dequantizes (peft.py) all walk the same
matrices; naming them once, below all three, keeps those views from disagreeing and lets each
import it without importing the others.
"""

from __future__ import annotations

from fitbench.workloads.arch import TransformerArch


def block_gemms(arch: TransformerArch) -> list[tuple[str, int, int]]:
    """(name, in_features, out_features) of one dense block's Linear layers."""
    h, f = arch.hidden_size, arch.intermediate_size
    mats = arch.attention_linears()
    if arch.mlp == "swiglu":
        mats += [("gate_proj", h, f), ("up_proj", h, f), ("down_proj", f, h)]
    else:
        mats += [("fc1", h, f), ("fc2", f, h)]
    return mats


def layer_gemms(arch: TransformerArch) -> list[tuple[str, int, int, int]]:
    """(name, in_features, out_features, layers) of the blocks' Linear layers outside the
    experts: the attention matrices in the attention layers, the linear-attention ones in the
    linear-attention layers (TransformerArch.linear_attention_linears), a dense MLP's in the
    layers without experts."""
    attention = {name for name, _, _ in arch.attention_linears()}
    rows = [
        (name, fin, fout, arch.attention_layers if name in attention else arch.dense_mlp_layers)
        for name, fin, fout in block_gemms(arch)
    ]
    rows += [(name, fin, fout, arch.linear_layers) for name, fin, fout in arch.linear_attention_linears()]
    return rows


def expert_gemms(arch: TransformerArch) -> dict[str, list[tuple[str, int, int]]]:
    """(name, in_features, out_features) of one MoE block's matrices by part: 'router', one
    routed expert's ('experts'), and the shared experts' ('shared', all of them as one MLP)."""
    h, fe, fs = arch.hidden_size, arch.expert_intermediate_size, arch.shared_intermediate_size

    def ffn(prefix: str, f: int) -> list[tuple[str, int, int]]:
        if arch.mlp == "swiglu":
            return [(f"{prefix}.gate_proj", h, f), (f"{prefix}.up_proj", h, f), (f"{prefix}.down_proj", f, h)]
        return [(f"{prefix}.fc1", h, f), (f"{prefix}.fc2", f, h)]

    return {
        "router": [("router", h, arch.num_experts)],
        "experts": ffn("experts", fe),
        "shared": ffn("shared_experts", fs) if fs else [],
    }
