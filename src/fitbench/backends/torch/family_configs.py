"""transformers configs for the decoder families whose blocks are not Llama's.

`models.decoder_config` writes Llama, Qwen2, GPT-2, Mistral and Mixtral configs from an
architecture's numbers. The families here differ in what a block holds (query/key norms, post
norms, parameter-free norms, parallel attention and MLP, latent attention, shared experts), so a
Llama config would build another model than the one estimated. Each is built through its own
transformers class instead, chosen by the architecture's `model_type` (the config.json's), from
the same numbers the estimator reads: what `fitbench run` measures is what transformers itself
would load for that checkpoint, random weights instead of the real ones.

Each builder returns the keyword arguments of the family's config class; `family_config` adds
the class and the attention implementation. The parameter counts of every library model of
these families equal the estimator's (tests/backends/test_family_configs.py), which is how a
mistake in a builder shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fitbench.errors import FitbenchError
from fitbench.workloads.arch import TransformerArch, layer_types


def llama_sizes(arch: TransformerArch) -> dict[str, Any]:
    """The sizes every Llama-descended config names the same way."""
    return dict(
        vocab_size=arch.vocab_size,
        hidden_size=arch.hidden_size,
        intermediate_size=arch.intermediate_size,
        num_hidden_layers=arch.num_layers,
        num_attention_heads=arch.num_heads,
        num_key_value_heads=arch.kv_heads,
        max_position_embeddings=arch.max_positions,
        tie_word_embeddings=arch.tie_embeddings,
    )


def gpt2_sizes(arch: TransformerArch) -> dict[str, Any]:
    """The sizes in GPT-2's spelling, which GPT-J's config keeps."""
    return dict(
        vocab_size=arch.vocab_size,
        n_positions=arch.max_positions,
        n_embd=arch.hidden_size,
        n_layer=arch.num_layers,
        n_head=arch.num_heads,
        n_inner=arch.intermediate_size,
        tie_word_embeddings=arch.tie_embeddings,
    )


def _windows(arch: TransformerArch, period: int) -> dict[str, Any]:
    types = layer_types(arch, period)
    if types is None:
        return {"sliding_window": None}
    return {"sliding_window": arch.sliding_window, "layer_types": types}


def _shared_experts(arch: TransformerArch) -> int:
    """Shared experts as a count of routed-expert widths (DeepSeek, ERNIE-4.5)."""
    width = arch.expert_intermediate_size
    if arch.shared_intermediate_size % width:
        raise _cannot(
            arch,
            "a shared-expert width that is not a whole number of experts",
            "共享专家的宽度不是专家宽度的整数倍",
        )
    return arch.shared_intermediate_size // width


def _cannot(arch: TransformerArch, what: str, what_zh: str) -> FitbenchError:
    return FitbenchError(
        f"the torch backend cannot build this {arch.model_type} decoder ({what})",
        "`fitbench estimate` covers it",
        message_zh=f"torch 后端无法构建这个 {arch.model_type} 解码器({what_zh})",
        hint_zh="`fitbench estimate` 可以估算它",
    )


def _require(arch: TransformerArch, condition: bool, what: str, what_zh: str) -> None:
    if not condition:
        raise _cannot(arch, what, what_zh)


def _require_uniform_biases(arch: TransformerArch) -> None:
    """Families with one bias switch for every Linear (Falcon's `bias`, ERNIE's `use_bias`)."""
    uniform = arch.qkv_bias == arch.out_bias == arch.mlp_bias
    _require(arch, uniform, "biases on some layers only", "只有部分层有偏置")


def _require_no_biases(arch: TransformerArch, family: str, family_zh: str) -> None:
    """Families whose Linears have no bias at all (Phi-3, DeepSeek, MiniMax-M2)."""
    none = not (arch.qkv_bias or arch.out_bias or arch.mlp_bias)
    _require(arch, none, f"biases {family} does not have", f"{family_zh} 没有的偏置")


def _same_attention_bias(arch: TransformerArch) -> bool:
    """One `attention_bias` switch covers q, k, v and o in these families."""
    return arch.qkv_bias == arch.out_bias


def _require_one_attention_bias(arch: TransformerArch) -> None:
    _require(
        arch, _same_attention_bias(arch), "biases on some attention layers only", "只有部分注意力层有偏置"
    )


def _require_plain_heads(arch: TransformerArch) -> None:
    """Families whose config has no head_dim: heads of hidden_size / num_heads only."""
    custom = arch.dim_head * arch.num_heads != arch.hidden_size
    _require(arch, not custom, "a custom head size", "自定义的注意力头维度")


# -- dense families ------------------------------------------------------------------------------
def _qwen3(arch: TransformerArch) -> dict[str, Any]:
    _require(
        arch,
        _same_attention_bias(arch) and not arch.mlp_bias,
        "biases Qwen3 does not have",
        "Qwen3 没有的偏置",
    )
    types = layer_types(arch, 1)
    return dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        use_sliding_window=types is not None,
        **_windows(arch, 1),
    )


def _gemma(period: int) -> Callable[[TransformerArch], dict[str, Any]]:
    """Gemma-2 (every other layer local: period 2) and Gemma-3 (five of six: period 6)."""

    def build(arch: TransformerArch) -> dict[str, Any]:
        _require(
            arch,
            _same_attention_bias(arch) and not arch.mlp_bias,
            "biases Gemma does not have",
            "Gemma 没有的偏置",
        )
        return dict(
            llama_sizes(arch), head_dim=arch.dim_head, attention_bias=arch.qkv_bias, **_windows(arch, period)
        )

    return build


def _olmo(arch: TransformerArch) -> dict[str, Any]:
    _require(
        arch, _same_attention_bias(arch) and not arch.mlp_bias, "biases OLMo does not have", "OLMo 没有的偏置"
    )
    _require_plain_heads(arch)
    return dict(llama_sizes(arch), attention_bias=arch.qkv_bias)


def _olmo3(arch: TransformerArch) -> dict[str, Any]:
    """OLMo-3: OLMo-2's blocks, three of four layers windowed."""
    return dict(_olmo(arch), **_windows(arch, 4))


def _exaone4(arch: TransformerArch) -> dict[str, Any]:
    """EXAONE 4.0: post-norms, head-wise query/key norms, three of four layers windowed where a
    window is set; the layer list is always given (the class divides by a zero period without)."""
    _require_no_biases(arch, "EXAONE 4.0", "EXAONE 4.0")
    windows = _windows(arch, 4)
    windows.setdefault("layer_types", ["full_attention"] * arch.num_layers)
    return dict(llama_sizes(arch), head_dim=arch.dim_head, **windows)


def _exaone_moe(arch: TransformerArch) -> dict[str, Any]:
    """K-EXAONE: EXAONE 4.0's attention in pre-norm blocks, leading dense layers, then routed
    plus shared experts (one routing group); the layer lists always given."""
    _require_no_biases(arch, "K-EXAONE", "K-EXAONE")
    _require(arch, arch.moe_every == 1, "dense layers between the experts", "专家层之间的稠密层")
    windows = _windows(arch, 4)
    windows.setdefault("layer_types", ["full_attention"] * arch.num_layers)
    dense = arch.dense_layers
    return dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        **windows,
        moe_intermediate_size=arch.expert_intermediate_size,
        num_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
        num_shared_experts=_shared_experts(arch),
        mlp_layer_types=["dense"] * dense + ["sparse"] * (arch.num_layers - dense),
        first_k_dense_replace=dense,
        n_group=1,
        topk_group=1,
    )


def _afmoe(arch: TransformerArch) -> dict[str, Any]:
    """AFMoE: gated attention with query/key norms, four norms a block, windows in three of four
    layers, leading dense layers, then sigmoid-routed plus shared experts."""
    _require(
        arch,
        not arch.mlp_bias and _same_attention_bias(arch),
        "biases AFMoE does not have",
        "AFMoE 没有的偏置",
    )
    _require(arch, arch.moe_every == 1, "dense layers between the experts", "专家层之间的稠密层")
    windows = _windows(arch, 4)
    windows.setdefault("layer_types", ["full_attention"] * arch.num_layers)
    return dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        **windows,
        global_attn_every_n_layers=4,
        moe_intermediate_size=arch.expert_intermediate_size,
        num_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
        num_shared_experts=_shared_experts(arch),
        num_dense_layers=arch.dense_layers,
    )


def _seed_oss(arch: TransformerArch) -> dict[str, Any]:
    """Seed-OSS: q/k/v biases (`attention_bias`) apart from the output projection's."""
    return dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        attention_out_bias=arch.out_bias,
        mlp_bias=arch.mlp_bias,
        attention_dropout=0.0,
        residual_dropout=0.0,
    )


def _hunyuan(arch: TransformerArch) -> dict[str, Any]:
    """Hunyuan dense and MoE: one `attention_bias` for q/k/v/o, head-wise query/key norms; the
    MoE's experts and its one shared MLP at `intermediate_size`."""
    _require(
        arch,
        _same_attention_bias(arch) and not arch.mlp_bias,
        "biases Hunyuan does not have",
        "Hunyuan 没有的偏置",
    )
    fields = dict(llama_sizes(arch), head_dim=arch.dim_head, attention_bias=arch.qkv_bias)
    if arch.is_moe:
        _require(
            arch,
            arch.shared_intermediate_size == arch.expert_intermediate_size == arch.intermediate_size
            and arch.dense_layers == 0
            and arch.moe_every == 1,
            "experts or a shared MLP of another width, or dense layers",
            "其他宽度的专家或共享 MLP,或稠密层",
        )
        fields.update(num_experts=arch.num_experts, moe_topk=arch.experts_per_token)
    return fields


def _phi3(arch: TransformerArch) -> dict[str, Any]:
    """Phi-3: one fused qkv_proj and one gate_up_proj, which change no count but what autograd
    keeps (the value is a view of the fused output) and how many kernels run."""
    _require_no_biases(arch, "Phi-3", "Phi-3")
    _require_plain_heads(arch)
    return dict(llama_sizes(arch), pad_token_id=None, **_windows(arch, 1))


def _glm4(arch: TransformerArch) -> dict[str, Any]:
    _require(arch, not arch.out_bias and not arch.mlp_bias, "biases GLM-4 does not have", "GLM-4 没有的偏置")
    # Glm4Config's pad_token_id (151329) would index past a smaller vocabulary's embedding
    return dict(llama_sizes(arch), head_dim=arch.dim_head, attention_bias=arch.qkv_bias, pad_token_id=None)


def _arcee(arch: TransformerArch) -> dict[str, Any]:
    """Arcee, Nemotron: Llama's attention with one `attention_bias`, a two-matrix MLP (ReLU
    squared) biased by `mlp_bias`."""
    _require_one_attention_bias(arch)
    return dict(
        llama_sizes(arch), head_dim=arch.dim_head, attention_bias=arch.qkv_bias, mlp_bias=arch.mlp_bias
    )


def _jais2(arch: TransformerArch) -> dict[str, Any]:
    """Jais 2: Llama's attention with one `attention_bias`, a two-matrix MLP (ReLU squared)
    biased by `mlp_bias`, LayerNorms."""
    _require_one_attention_bias(arch)
    return dict(
        llama_sizes(arch), head_dim=arch.dim_head, attention_bias=arch.qkv_bias, mlp_bias=arch.mlp_bias
    )


def _apertus(arch: TransformerArch) -> dict[str, Any]:
    """Apertus: head-wise query/key norms, a two-matrix xIELU MLP without bias."""
    _require(
        arch,
        _same_attention_bias(arch) and not arch.mlp_bias,
        "biases Apertus does not have",
        "Apertus 没有的偏置",
    )
    _require_plain_heads(arch)
    return dict(llama_sizes(arch), attention_bias=arch.qkv_bias)


def _ministral(arch: TransformerArch) -> dict[str, Any]:
    """Ministral: Mistral's blocks, the windowed layers listed (none: no window)."""
    _require_no_biases(arch, "Ministral", "Ministral")
    windows = _windows(arch, 1)
    windows.setdefault("layer_types", ["full_attention"] * arch.num_layers)
    return dict(llama_sizes(arch), head_dim=arch.dim_head, **windows)


def _ministral3(arch: TransformerArch) -> dict[str, Any]:
    """Ministral 3: Mistral's blocks, one `sliding_window` for every layer or none; the config
    class's rope_parameters (YaRN with Llama 4's query scale), as the published files set them."""
    _require_no_biases(arch, "Ministral 3", "Ministral 3")
    _require(
        arch,
        arch.sliding_layers in (0, arch.num_layers),
        "a window on some layers only",
        "仅部分层使用滑动窗口",
    )
    window = arch.sliding_window if arch.sliding_layers else None
    return dict(llama_sizes(arch), head_dim=arch.dim_head, sliding_window=window)


def _stablelm(arch: TransformerArch) -> dict[str, Any]:
    """StableLM: q/k/v biases only, LayerNorms, optional parallel residual."""
    no_bias = not (arch.out_bias or arch.mlp_bias)
    _require(arch, no_bias, "biases StableLM does not have", "StableLM 没有的偏置")
    _require_plain_heads(arch)
    return dict(
        llama_sizes(arch),
        use_qkv_bias=arch.qkv_bias,
        use_parallel_residual=arch.parallel_block,
        qk_layernorm=False,
    )


def _phi(arch: TransformerArch) -> dict[str, Any]:
    """Phi-2: parallel attention and GELU MLP on one LayerNorm, biases everywhere."""
    _require_plain_heads(arch)
    return dict(llama_sizes(arch), resid_pdrop=0.0, embd_pdrop=0.0)


def _latent_sizes(arch: TransformerArch) -> dict[str, Any]:
    """The latent-attention sizes every DeepSeek-descended config names the same way (no
    q_lora_rank: queries without compression)."""
    return dict(
        q_lora_rank=arch.q_lora_rank or None,
        kv_lora_rank=arch.kv_lora_rank,
        qk_rope_head_dim=arch.qk_rope_head_dim,
        qk_nope_head_dim=arch.qk_nope_head_dim,
        v_head_dim=arch.v_head_dim,
    )


def _minicpm3(arch: TransformerArch) -> dict[str, Any]:
    """MiniCPM3: latent attention over a dense SwiGLU MLP."""
    _require(arch, not (arch.qkv_bias or arch.out_bias), "attention biases", "注意力偏置")
    return dict(
        llama_sizes(arch), mlp_bias=arch.mlp_bias, **_latent_sizes(arch), head_dim=arch.qk_rope_head_dim
    )


def _youtu(arch: TransformerArch) -> dict[str, Any]:
    """Youtu-LLM: DeepSeek-V3's latent attention (one `attention_bias` for its projections) over
    a dense SwiGLU MLP."""
    _require(arch, not arch.mlp_bias, "MLP biases", "MLP 偏置")
    _require_one_attention_bias(arch)
    return dict(llama_sizes(arch), attention_bias=arch.qkv_bias, **_latent_sizes(arch))


# -- parallel blocks -----------------------------------------------------------------------------
def _gpt_neox(arch: TransformerArch) -> dict[str, Any]:
    _require(
        arch,
        _same_attention_bias(arch) and arch.mlp_bias,
        "biases GPT-NeoX does not have",
        "GPT-NeoX 没有的偏置",
    )
    _require(arch, arch.kv_heads == arch.num_heads, "grouped-query attention", "分组查询注意力")
    return dict(llama_sizes(arch), use_parallel_residual=arch.parallel_block, attention_bias=arch.qkv_bias)


def _gptj(arch: TransformerArch) -> dict[str, Any]:
    _require(arch, arch.kv_heads == arch.num_heads, "grouped-query attention", "分组查询注意力")
    return dict(gpt2_sizes(arch), rotary_dim=min(64, arch.dim_head))


def _gpt_bigcode(arch: TransformerArch) -> dict[str, Any]:
    """GPT-BigCode: GPT-2's blocks with one key/value head (multi-query) or one per query head."""
    _require(arch, arch.kv_heads in (1, arch.num_heads), "grouped-query attention", "分组查询注意力")
    return dict(gpt2_sizes(arch), multi_query=arch.kv_heads == 1 and arch.num_heads > 1)


def _falcon(arch: TransformerArch) -> dict[str, Any]:
    _require_uniform_biases(arch)
    new_architecture = arch.norms_per_layer == 2 or arch.kv_heads not in (1, arch.num_heads)
    return dict(
        vocab_size=arch.vocab_size,
        hidden_size=arch.hidden_size,
        num_hidden_layers=arch.num_layers,
        num_attention_heads=arch.num_heads,
        num_kv_heads=arch.kv_heads,
        new_decoder_architecture=new_architecture,
        num_ln_in_parallel_attn=arch.norms_per_layer if new_architecture else None,
        multi_query=arch.kv_heads == 1,
        parallel_attn=arch.parallel_block,
        bias=arch.qkv_bias,
        alibi=arch.position == "relative",
        ffn_hidden_size=arch.intermediate_size,
        max_position_embeddings=arch.max_positions,
        tie_word_embeddings=arch.tie_embeddings,
    )


# -- experts -------------------------------------------------------------------------------------
def _qwen2_moe(arch: TransformerArch) -> dict[str, Any]:
    _require(arch, arch.dense_layers == 0, "dense layers before the experts", "专家层之前的稠密层")
    return dict(
        llama_sizes(arch),
        moe_intermediate_size=arch.expert_intermediate_size,
        shared_expert_intermediate_size=arch.shared_intermediate_size,
        num_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
        decoder_sparse_step=arch.moe_every,
        mlp_only_layers=[],
        qkv_bias=arch.qkv_bias,
        use_sliding_window=arch.sliding_layers > 0,
        **_windows(arch, 1),
    )


def _qwen3_moe(arch: TransformerArch) -> dict[str, Any]:
    no_dense = arch.dense_layers == 0 and not arch.shared_intermediate_size
    _require(arch, no_dense, "dense layers or shared experts", "稠密层或共享专家")
    return dict(
        _qwen3(arch),
        moe_intermediate_size=arch.expert_intermediate_size,
        num_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
        decoder_sparse_step=arch.moe_every,
        mlp_only_layers=[],
    )


def _linear_layer_types(arch: TransformerArch) -> list[str]:
    """Qwen3-Next's and Qwen3.5's layer kinds in the estimator's placement
    (TransformerArch.is_linear_attention_layer: any placement with these counts is the same model)."""
    return [
        "linear_attention" if arch.is_linear_attention_layer(i) else "full_attention"
        for i in range(arch.num_layers)
    ]


def _qwen3_5_text(arch: TransformerArch) -> dict[str, Any]:
    """Qwen3.5's language model (and, with experts, Qwen3.5-MoE's and Qwen3-Next's): gated
    attention layers and Gated DeltaNet layers."""
    _require(arch, arch.attention_output_gate, "attention without the output gate", "没有输出门的注意力")
    _require(
        arch,
        _same_attention_bias(arch)
        and not arch.mlp_bias
        and arch.qk_norm == "head"
        and not arch.sliding_layers,
        "biases, norms or windows Qwen3.5 does not have",
        "Qwen3.5 没有的偏置、归一化或滑动窗口",
    )
    return dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        linear_num_key_heads=arch.linear_key_heads,
        linear_num_value_heads=arch.linear_value_heads,
        linear_key_head_dim=arch.linear_key_head_dim,
        linear_value_head_dim=arch.linear_value_head_dim,
        linear_conv_kernel_dim=arch.linear_conv_kernel,
        layer_types=_linear_layer_types(arch),
    )


def _gated_shared_experts(arch: TransformerArch) -> dict[str, Any]:
    """Qwen3.5-MoE's and Qwen3-Next's experts: routed ones and a shared expert behind a sigmoid
    gate, from the first layer on."""
    _require(
        arch,
        arch.shared_expert_gate and not arch.dense_layers,
        "dense first layers or an ungated shared expert",
        "开头的稠密层或无门控的共享专家",
    )
    return dict(
        moe_intermediate_size=arch.expert_intermediate_size,
        shared_expert_intermediate_size=arch.shared_intermediate_size,
        num_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
    )


def _qwen3_5_moe_text(arch: TransformerArch) -> dict[str, Any]:
    _require(arch, arch.moe_layers == arch.num_layers, "dense layers", "稠密层")
    return dict(_qwen3_5_text(arch), **_gated_shared_experts(arch))


def _qwen3_next(arch: TransformerArch) -> dict[str, Any]:
    """Qwen3-Next: every `decoder_sparse_step`-th layer holds the experts, the rest a dense MLP."""
    return dict(
        _qwen3_5_text(arch),
        **_gated_shared_experts(arch),
        decoder_sparse_step=arch.moe_every,
        mlp_only_layers=[],
    )


def _flex_olmo(arch: TransformerArch) -> dict[str, Any]:
    """FlexOlmo: OLMoE's keys (its OLMo-2 post-norms are the class's own); FlexOlmoConfig's
    pad_token_id (100277) would index past a smaller vocabulary's embedding."""
    return dict(_olmoe(arch), pad_token_id=None)


def _olmoe(arch: TransformerArch) -> dict[str, Any]:
    _require(
        arch,
        arch.dense_layers == 0 and arch.moe_every == 1,
        "dense layers between the experts",
        "专家层之间的稠密层",
    )
    return dict(
        _olmo(arch),
        intermediate_size=arch.expert_intermediate_size,
        num_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
    )


def _ernie45_moe(arch: TransformerArch) -> dict[str, Any]:
    _require_uniform_biases(arch)
    return dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        use_bias=arch.qkv_bias,
        moe_intermediate_size=arch.expert_intermediate_size,
        moe_k=arch.experts_per_token,
        moe_num_experts=arch.num_experts,
        moe_num_shared_experts=_shared_experts(arch),
        moe_layer_start_index=arch.dense_layers,
        moe_layer_end_index=-1,
        moe_layer_interval=arch.moe_every,
    )


def _granitemoe(arch: TransformerArch) -> dict[str, Any]:
    """Granite MoE: experts in every layer, one optional shared MLP (`granitemoeshared`)."""
    _require(
        arch,
        arch.dense_layers == 0
        and arch.moe_every == 1
        and arch.expert_intermediate_size == arch.intermediate_size,
        "dense layers or experts of another width",
        "稠密层或其他宽度的专家",
    )
    _require_one_attention_bias(arch)
    fields = dict(
        llama_sizes(arch),
        attention_bias=arch.qkv_bias,
        num_local_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
    )
    if arch.transformers_type == "granitemoeshared":
        fields["shared_intermediate_size"] = arch.shared_intermediate_size
    else:
        _require(arch, not arch.shared_intermediate_size, "shared experts", "共享专家")
    return fields


def _granitemoehybrid(arch: TransformerArch) -> dict[str, Any]:
    """Granite 4.0: Mamba-2 layers in the estimator's placement (TransformerArch.
    is_linear_attention_layer) among attention ones, every layer a shared MLP, experts beside it
    where the model has them; rotary positions or none."""
    _require(
        arch,
        not arch.mlp_bias and arch.qk_norm == "none" and not arch.sliding_layers,
        "biases, norms or windows Granite 4.0 does not have",
        "Granite 4.0 没有的偏置、归一化或滑动窗口",
    )
    _require_one_attention_bias(arch)
    fields = dict(
        llama_sizes(arch),
        attention_bias=arch.qkv_bias,
        position_embedding_type="rope" if arch.position == "rotary" else "nope",
        layer_types=[
            "mamba" if arch.is_linear_attention_layer(i) else "attention" for i in range(arch.num_layers)
        ],
    )
    if arch.is_moe:
        _require(
            arch,
            arch.moe_layers == arch.num_layers and arch.shared_intermediate_size > 0,
            "dense layers or no shared MLP",
            "稠密层或没有共享 MLP",
        )
        fields.update(
            intermediate_size=arch.expert_intermediate_size,
            shared_intermediate_size=arch.shared_intermediate_size,
            num_local_experts=arch.num_experts,
            num_experts_per_tok=arch.experts_per_token,
        )
    else:
        fields.update(shared_intermediate_size=arch.intermediate_size, num_local_experts=0)
    return dict(fields, **_mamba2_sizes(arch))


def _mamba2_sizes(arch: TransformerArch) -> dict[str, Any]:
    """The Mamba-2 layers' sizes in Granite 4.0's and Bamba's spelling (with none, sizes the
    config validates)."""
    if not arch.linear_layers:
        return dict(mamba_n_heads=1, mamba_d_head=2 * arch.hidden_size, mamba_expand=2)
    _require(
        arch,
        arch.linear_kind == "mamba2" and arch.linear_value_dim % arch.hidden_size == 0,
        "linear layers other than Mamba-2 ones of a whole expansion",
        "非 Mamba-2 的线性层,或扩展倍数不是整数",
    )
    return dict(
        mamba_n_heads=arch.linear_value_heads,
        mamba_d_head=arch.linear_value_head_dim,
        mamba_expand=arch.linear_value_dim // arch.hidden_size,
        mamba_n_groups=arch.linear_key_heads,
        mamba_d_state=arch.linear_key_head_dim,
        mamba_d_conv=arch.linear_conv_kernel,
        mamba_chunk_size=arch.linear_chunk_size,
        mamba_conv_bias=arch.linear_conv_bias,
        mamba_proj_bias=arch.linear_proj_bias,
    )


def _bamba(arch: TransformerArch) -> dict[str, Any]:
    """Bamba: Mamba-2 layers and attention ones (at attn_layer_indices, in the estimator's
    placement), a SwiGLU MLP in every layer."""
    _require(
        arch,
        not arch.is_moe and arch.qk_norm == "none" and not arch.sliding_layers and arch.position == "rotary",
        "experts, norms, windows or positions Bamba does not have",
        "Bamba 没有的专家、归一化、滑动窗口或位置编码",
    )
    _require_one_attention_bias(arch)
    return dict(
        llama_sizes(arch),
        attention_bias=arch.qkv_bias,
        mlp_bias=arch.mlp_bias,
        attn_layer_indices=[i for i in range(arch.num_layers) if not arch.is_linear_attention_layer(i)],
        **_mamba2_sizes(arch),
    )


def nemotron_h_blocks(arch: TransformerArch) -> list[str]:
    """Nemotron-H's block kinds (NemotronHConfig.layers_block_type) in the estimator's placement:
    each layer's mixer block (Mamba-2 where TransformerArch.is_linear_attention_layer, attention
    otherwise), then its MLP or experts block, none after the MLP-free layers."""
    kinds: list[str] = []
    for i in range(arch.num_layers):
        kinds.append("linear_attention" if arch.is_linear_attention_layer(i) else "full_attention")
        if not arch.is_mlp_free_layer(i):
            kinds.append("moe" if arch.is_moe_layer(i) else "mlp")
    return kinds


def _nemotron_h(arch: TransformerArch) -> dict[str, Any]:
    """Nemotron-H: the blocks of nemotron_h_blocks, Mamba-2 sizes in NemotronHConfig's spelling,
    attention without positions or biases, squared-ReLU MLPs, experts with one shared MLP."""
    _require(
        arch,
        arch.position == "none"
        and not (arch.qkv_bias or arch.out_bias)
        and arch.qk_norm == "none"
        and not arch.sliding_layers
        and arch.mlp == "gelu"
        and arch.norm == "rmsnorm"
        and (not arch.linear_layers or arch.linear_kind == "mamba2"),
        "biases, norms, positions, windows or mixers Nemotron-H does not have",
        "Nemotron-H 没有的偏置、归一化、位置编码、滑动窗口或混合层",
    )
    sizes = {k: v for k, v in llama_sizes(arch).items() if k != "num_hidden_layers"}
    fields = dict(
        sizes,
        head_dim=arch.dim_head,
        mlp_bias=arch.mlp_bias,
        mlp_hidden_act="relu2",
        layers_block_type=nemotron_h_blocks(arch),
    )
    if arch.linear_layers:
        fields.update(
            mamba_num_heads=arch.linear_value_heads,
            mamba_head_dim=arch.linear_value_head_dim,
            n_groups=arch.linear_key_heads,
            ssm_state_size=arch.linear_key_head_dim,
            conv_kernel=arch.linear_conv_kernel,
            chunk_size=arch.linear_chunk_size,
            use_conv_bias=arch.linear_conv_bias,
            use_bias=arch.linear_proj_bias,
        )
    if arch.is_moe:
        _require(arch, not arch.expert_score_bias, "a learned expert score bias", "可学习的专家分数偏置")
        fields.update(
            n_routed_experts=arch.num_experts,
            num_experts_per_tok=arch.experts_per_token,
            moe_intermediate_size=arch.expert_intermediate_size,
            moe_shared_expert_intermediate_size=arch.shared_intermediate_size,
            n_group=1,
            topk_group=1,
        )
    return fields


def _lfm2_layers(arch: TransformerArch, name: str) -> dict[str, Any]:
    """The layer kinds and convolution switches LFM2 and LFM2-MoE share: gated short
    convolutions and attention with per-head query and key norms (in the estimator's placement),
    no biases but the convolution's."""
    _require(
        arch,
        arch.qk_norm == "head"
        and not arch.sliding_layers
        and arch.position == "rotary"
        and not (arch.qkv_bias or arch.out_bias or arch.mlp_bias),
        f"norms, windows, positions or biases {name} does not have",
        f"{name} 没有的归一化、滑动窗口、位置编码或偏置",
    )
    conv: dict[str, Any] = {}
    if arch.linear_layers:
        _require(
            arch,
            arch.linear_kind == "short_conv" and arch.linear_proj_bias == arch.linear_conv_bias,
            "linear layers other than short convolutions with one bias switch",
            "非短卷积的线性层,或偏置设置不一致",
        )
        conv = dict(conv_L_cache=arch.linear_conv_kernel, conv_bias=arch.linear_conv_bias)
    return dict(
        llama_sizes(arch),
        layer_types=[
            "conv" if arch.is_linear_attention_layer(i) else "full_attention" for i in range(arch.num_layers)
        ],
        **conv,
    )


def _lfm2(arch: TransformerArch) -> dict[str, Any]:
    """LFM2: `_lfm2_layers` with a SwiGLU MLP of the arch's width in every layer (no automatic
    two-thirds adjustment)."""
    _require(arch, not arch.is_moe, "experts", "专家")
    return dict(_lfm2_layers(arch, "LFM2"), block_auto_adjust_ff_dim=False)


def _lfm2_moe(arch: TransformerArch) -> dict[str, Any]:
    """LFM2-MoE: `_lfm2_layers`, leading dense MLPs, then routed experts in every layer (no shared
    expert) behind the sigmoid router with its selection bias."""
    _require(
        arch,
        arch.moe_every == 1 and not arch.shared_intermediate_size and not arch.router_bias,
        "dense layers between the experts, a shared expert or a router bias",
        "专家层之间的稠密层、共享专家或路由偏置",
    )
    return dict(
        _lfm2_layers(arch, "LFM2-MoE"),
        moe_intermediate_size=arch.expert_intermediate_size,
        num_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
        num_dense_layers=arch.dense_layers,
        use_expert_bias=True,
    )


def _solar_open(arch: TransformerArch) -> dict[str, Any]:
    """Solar Open: Llama's attention with q/k/v biases by `attention_bias`, routed plus shared
    experts in every layer (one routing group); its config class has no `intermediate_size`."""
    _require(
        arch,
        arch.dense_layers == 0 and arch.moe_every == 1,
        "dense layers among the experts",
        "专家层之间的稠密层",
    )
    no_bias = not (arch.out_bias or arch.mlp_bias)
    _require(arch, no_bias, "biases Solar Open does not have", "Solar Open 没有的偏置")
    sizes = llama_sizes(arch)
    sizes.pop("intermediate_size")
    return dict(
        sizes,
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        moe_intermediate_size=arch.expert_intermediate_size,
        n_routed_experts=arch.num_experts,
        n_shared_experts=_shared_experts(arch),
        num_experts_per_tok=arch.experts_per_token,
        n_group=1,
        topk_group=1,
    )


def _dots1(arch: TransformerArch) -> dict[str, Any]:
    """dots.llm1: Qwen3's attention, dense layers, then routed and shared experts (one routing
    group); the windowed layers are the last ones."""
    _require(arch, arch.moe_every == 1, "dense layers between the experts", "专家层之间的稠密层")
    no_bias = not arch.mlp_bias and _same_attention_bias(arch)
    _require(arch, no_bias, "biases dots1 does not have", "dots1 没有的偏置")
    types = layer_types(arch, 1)
    if types is not None:
        types = types[::-1]  # the last `sliding_layers` layers, as max_window_layers places them
    return dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        moe_intermediate_size=arch.expert_intermediate_size,
        n_routed_experts=arch.num_experts,
        n_shared_experts=_shared_experts(arch),
        num_experts_per_tok=arch.experts_per_token,
        first_k_dense_replace=arch.dense_layers,
        n_group=1,
        topk_group=1,
        sliding_window=arch.sliding_window if types else None,
        layer_types=types or ["full_attention"] * arch.num_layers,
    )


def _deepseek(arch: TransformerArch) -> dict[str, Any]:
    """DeepSeek-V2/V3: latent attention, routed and shared experts after the dense layers. One
    routing group (n_group = topk_group = 1): group-limited routing picks which experts run, not
    how many, and any expert count divides into one group."""
    _require(arch, arch.moe_every == 1, "dense layers between the experts", "专家层之间的稠密层")
    _require_no_biases(arch, "DeepSeek", "DeepSeek")
    return dict(
        llama_sizes(arch),
        moe_intermediate_size=arch.expert_intermediate_size,
        n_routed_experts=arch.num_experts,
        n_shared_experts=_shared_experts(arch),
        num_experts_per_tok=arch.experts_per_token,
        first_k_dense_replace=arch.dense_layers,
        n_group=1,
        topk_group=1,
        topk_method="greedy",
        **_latent_sizes(arch),
        head_dim=arch.qk_rope_head_dim,
        attention_bias=False,
    )


def _glm4_moe_lite(arch: TransformerArch) -> dict[str, Any]:
    """GLM-4.7-Flash: DeepSeek-V3's latent attention and experts under GLM's names, its dense
    layers listed in `mlp_layer_types`."""
    fields = _deepseek(arch)
    for key in ("first_k_dense_replace", "topk_method", "head_dim"):
        fields.pop(key)
    dense = arch.dense_layers
    return dict(fields, mlp_layer_types=["dense"] * dense + ["sparse"] * (arch.num_layers - dense))


def _glm4_moe(arch: TransformerArch) -> dict[str, Any]:
    """GLM-4.5: GQA attention with query/key biases and optional query/key norms, dense layers,
    then routed plus shared experts (one routing group, as for DeepSeek)."""
    _require(arch, arch.moe_every == 1, "dense layers between the experts", "专家层之间的稠密层")
    _require(arch, not (arch.out_bias or arch.mlp_bias), "biases GLM-4.5 does not have", "GLM-4.5 没有的偏置")
    return dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        use_qk_norm=arch.qk_norm == "head",
        moe_intermediate_size=arch.expert_intermediate_size,
        n_routed_experts=arch.num_experts,
        n_shared_experts=_shared_experts(arch),
        num_experts_per_tok=arch.experts_per_token,
        first_k_dense_replace=arch.dense_layers,
        n_group=1,
        topk_group=1,
    )


def _gpt_oss(arch: TransformerArch) -> dict[str, Any]:
    """gpt-oss: biased GQA attention with sinks, every other layer windowed, biased experts in
    every layer behind a biased router (bf16 experts: the checkpoint's MXFP4 is not built)."""
    _require(arch, arch.moe_every == 1 and arch.dense_layers == 0, "dense layers", "稠密层")
    _require(
        arch,
        _same_attention_bias(arch) and arch.mlp_bias,
        "biases gpt-oss does not have",
        "gpt-oss 没有的偏置",
    )
    _require(arch, not arch.shared_intermediate_size, "shared experts", "共享专家")
    return dict(
        llama_sizes(arch),
        intermediate_size=arch.expert_intermediate_size,
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        num_local_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
        **_windows(arch, 2),
    )


def _llama4_text(arch: TransformerArch) -> dict[str, Any]:
    """Llama-4 text: MoE every `moe_every`-th layer (routed experts plus one shared expert of their
    width), dense layers of `intermediate_size`, chunked attention on the window layers (every
    fourth layer global, the family's pattern when the count matches)."""
    _require(
        arch,
        arch.shared_intermediate_size == arch.expert_intermediate_size and arch.dense_layers == 0,
        "a shared expert of another width, or leading dense layers",
        "宽度不同的共享专家,或前置稠密层",
    )
    _require(
        arch,
        _same_attention_bias(arch) and not arch.mlp_bias,
        "biases Llama-4 does not have",
        "Llama-4 没有的偏置",
    )
    types = layer_types(arch, 4)
    chunked = [t == "sliding_attention" for t in types] if types else [False] * arch.num_layers
    return dict(
        llama_sizes(arch),
        intermediate_size=arch.expert_intermediate_size,
        intermediate_size_mlp=arch.intermediate_size,
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        num_local_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
        interleave_moe_layer_step=arch.moe_every,
        attention_chunk_size=arch.sliding_window if types else None,
        no_rope_layers=[int(c) for c in chunked] if types else [1] * arch.num_layers,
        layer_types=["chunked_attention" if c else "full_attention" for c in chunked],
    )


def _minimax_m2(arch: TransformerArch) -> dict[str, Any]:
    """MiniMax-M2: query/key norms over all heads, routed experts in every layer, no biases."""
    _require(arch, arch.qk_norm == "full", "no query/key norms", "没有 query/key 归一化")
    _require(
        arch,
        arch.dense_layers == 0 and arch.moe_every == 1 and not arch.shared_intermediate_size,
        "dense layers or shared experts",
        "稠密层或共享专家",
    )
    _require_no_biases(arch, "MiniMax-M2", "MiniMax-M2")
    return dict(
        llama_sizes(arch),
        intermediate_size=arch.expert_intermediate_size,
        head_dim=arch.dim_head,
        num_local_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
    )


def _phimoe(arch: TransformerArch) -> dict[str, Any]:
    """Phi-3.5-MoE: Mixtral's experts with LayerNorms, q/k/v/o biases and an LM head bias."""
    _require(
        arch,
        arch.norm == "layernorm" and not arch.mlp_bias,
        "another norm or MLP biases",
        "其他归一化或 MLP 偏置",
    )
    _require(
        arch, _same_attention_bias(arch), "biases on some attention layers only", "只有部分注意力层有偏置"
    )
    return dict(
        llama_sizes(arch),
        head_dim=arch.dim_head,
        attention_bias=arch.qkv_bias,
        lm_head_bias=arch.lm_head_bias,
        num_local_experts=arch.num_experts,
        num_experts_per_tok=arch.experts_per_token,
        sliding_window=arch.sliding_window if arch.sliding_layers else None,
    )


def _starcoder2(arch: TransformerArch) -> dict[str, Any]:
    """StarCoder2: one `use_bias` switch for every Linear, windows on every layer where set."""
    _require_uniform_biases(arch)
    _require_plain_heads(arch)
    _require(
        arch,
        arch.sliding_layers in (0, arch.num_layers),
        "windows on some layers only",
        "只有部分层使用滑动窗口",
    )
    return dict(
        llama_sizes(arch),
        use_bias=arch.qkv_bias,
        sliding_window=arch.sliding_window if arch.sliding_layers else None,
    )


def _cohere(period: int) -> Callable[[TransformerArch], dict[str, Any]]:
    """Command-R (no windows) and Command-R7B (`cohere2`: three of four layers windowed)."""

    def build(arch: TransformerArch) -> dict[str, Any]:
        _require(
            arch,
            _same_attention_bias(arch) and not arch.mlp_bias,
            "biases Cohere does not have",
            "Cohere 没有的偏置",
        )
        fields = dict(llama_sizes(arch), attention_bias=arch.qkv_bias, use_qk_norm=arch.qk_norm == "full")
        if period:
            fields.update(head_dim=arch.dim_head, **_windows(arch, period))
        return fields

    return build


# model_type (as config.json spells it, and as hf_config keeps it on the architecture) -> the
# transformers model_type to build and the builder of its config's keyword arguments.
FAMILIES: dict[str, tuple[str, Callable[[TransformerArch], dict[str, Any]]]] = {
    "qwen3": ("qwen3", _qwen3),
    "qwen3_moe": ("qwen3_moe", _qwen3_moe),
    "qwen3_next": ("qwen3_next", _qwen3_next),
    "qwen3_5_text": ("qwen3_5_text", _qwen3_5_text),
    "qwen3_5_moe_text": ("qwen3_5_moe_text", _qwen3_5_moe_text),
    "gemma2": ("gemma2", _gemma(2)),
    "gemma3_text": ("gemma3_text", _gemma(6)),
    "gemma3": ("gemma3_text", _gemma(6)),
    "olmo": ("olmo", _olmo),
    "olmo2": ("olmo2", _olmo),
    "olmo3": ("olmo3", _olmo3),
    "exaone4": ("exaone4", _exaone4),
    "exaone_moe": ("exaone_moe", _exaone_moe),
    "afmoe": ("afmoe", _afmoe),
    "seed_oss": ("seed_oss", _seed_oss),
    "hunyuan_v1_dense": ("hunyuan_v1_dense", _hunyuan),
    "hunyuan_v1_moe": ("hunyuan_v1_moe", _hunyuan),
    "olmoe": ("olmoe", _olmoe),
    "flex_olmo": ("flex_olmo", _flex_olmo),
    "glm4": ("glm4", _glm4),
    "phi3": ("phi3", _phi3),
    "gpt_neox": ("gpt_neox", _gpt_neox),
    "gptj": ("gptj", _gptj),
    "falcon": ("falcon", _falcon),
    "qwen2_moe": ("qwen2_moe", _qwen2_moe),
    "ernie4_5_moe": ("ernie4_5_moe", _ernie45_moe),
    "deepseek_v2": ("deepseek_v2", _deepseek),
    "deepseek_v3": ("deepseek_v3", _deepseek),
    "kimi_k2": ("deepseek_v3", _deepseek),
    "glm4_moe_lite": ("glm4_moe_lite", _glm4_moe_lite),
    "glm4_moe": ("glm4_moe", _glm4_moe),
    "solar_open": ("solar_open", _solar_open),
    "gpt_oss": ("gpt_oss", _gpt_oss),
    "llama4_text": ("llama4_text", _llama4_text),
    "phimoe": ("phimoe", _phimoe),
    "minimax_m2": ("minimax_m2", _minimax_m2),
    "starcoder2": ("starcoder2", _starcoder2),
    "cohere": ("cohere", _cohere(0)),
    "cohere2": ("cohere2", _cohere(4)),
    "arcee": ("arcee", _arcee),
    "nemotron": ("nemotron", _arcee),
    "jais2": ("jais2", _jais2),
    "apertus": ("apertus", _apertus),
    "ministral": ("ministral", _ministral),
    "ministral3": ("ministral3", _ministral3),
    "stablelm": ("stablelm", _stablelm),
    "phi": ("phi", _phi),
    "minicpm3": ("minicpm3", _minicpm3),
    "youtu": ("youtu", _youtu),
    "gpt_bigcode": ("gpt_bigcode", _gpt_bigcode),
    "granitemoe": ("granitemoe", _granitemoe),
    "granitemoeshared": ("granitemoeshared", _granitemoe),
    "granitemoehybrid": ("granitemoehybrid", _granitemoehybrid),
    "bamba": ("bamba", _bamba),
    "nemotron_h": ("nemotron_h", _nemotron_h),
    "lfm2": ("lfm2", _lfm2),
    "lfm2_moe": ("lfm2_moe", _lfm2_moe),
    "dots1": ("dots1", _dots1),
}


def family_key(arch: TransformerArch) -> str | None:
    """The FAMILIES key of this decoder, or None where the Llama-style configs describe it."""
    key = arch.transformers_type
    return key if key in FAMILIES else None


def family_config(arch: TransformerArch, *, attention: str) -> Any:
    """The transformers config of `arch`'s own family (see FAMILIES)."""
    import transformers

    key = family_key(arch)
    if key is None:
        raise _cannot(arch, "no family builder", "没有该系列的构建方法")
    model_type, build = FAMILIES[key]
    if model_type not in transformers.CONFIG_MAPPING:
        raise FitbenchError(
            f"transformers {transformers.__version__} has no '{model_type}' models",
            "upgrade transformers (pip install -U transformers) to measure this family",
            message_zh=f"transformers {transformers.__version__} 没有 '{model_type}' 模型",
            hint_zh="请升级 transformers(pip install -U transformers)后再实测这个系列",
        )
    config = transformers.CONFIG_MAPPING[model_type](**build(arch))
    config._attn_implementation = attention
    return config
