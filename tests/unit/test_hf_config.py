"""Hugging Face config.json -> TransformerArch/ResNetArch/Workload.

Golden counts use the real config.json contents of the published checkpoints, written to
tmp_path and read through the same path as `--config`; the published parameter counts are those
of the transformers models (sequence classification with 2 labels for encoders, causal LM for
decoders). When transformers is installed, tiny configs are also built into real models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fitbench.errors import FitbenchError
from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.hf_config import (
    SUPPORTED_MODEL_TYPES,
    arch_from_hf_config,
    load_hf_config,
    workload_from_config,
)

# -- real config.json files (as published with each checkpoint) --------------------------------
BERT_BASE_UNCASED = {
    "architectures": ["BertForMaskedLM"],
    "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "transformers_version": "4.6.0.dev0",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 30522,
}
ROBERTA_BASE = {
    "architectures": ["RobertaForMaskedLM"],
    "attention_probs_dropout_prob": 0.1,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 514,
    "model_type": "roberta",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 1,
    "type_vocab_size": 1,
    "vocab_size": 50265,
}
DISTILBERT_BASE_UNCASED = {
    "activation": "gelu",
    "architectures": ["DistilBertForMaskedLM"],
    "attention_dropout": 0.1,
    "dim": 768,
    "dropout": 0.1,
    "hidden_dim": 3072,
    "initializer_range": 0.02,
    "max_position_embeddings": 512,
    "model_type": "distilbert",
    "n_heads": 12,
    "n_layers": 6,
    "pad_token_id": 0,
    "qa_dropout": 0.1,
    "seq_classif_dropout": 0.2,
    "sinusoidal_pos_embds": False,
    "tie_weights_": True,
    "vocab_size": 30522,
}
LLAMA_2_7B = {
    "_name_or_path": "meta-llama/Llama-2-7b-hf",
    "architectures": ["LlamaForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 11008,
    "max_position_embeddings": 4096,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "transformers_version": "4.31.0.dev0",
    "use_cache": True,
    "vocab_size": 32000,
}
LLAMA_3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}
MISTRAL_7B_V01 = {
    "architectures": ["MistralForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.34.0.dev0",
    "use_cache": True,
    "vocab_size": 32000,
}
QWEN2_0_5B = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 896,
    "initializer_range": 0.02,
    "intermediate_size": 4864,
    "max_position_embeddings": 131072,
    "max_window_layers": 24,
    "model_type": "qwen2",
    "num_attention_heads": 14,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
GEMMA_2B = {
    "architectures": ["GemmaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 2,
    "eos_token_id": 1,
    "head_dim": 256,
    "hidden_act": "gelu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 16384,
    "max_position_embeddings": 8192,
    "model_type": "gemma",
    "num_attention_heads": 8,
    "num_hidden_layers": 18,
    "num_key_value_heads": 1,
    "pad_token_id": 0,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.38.0.dev0",
    "use_cache": True,
    "vocab_size": 256000,
}
PHI3_MINI_4K = {
    "_name_or_path": "Phi-3-mini-4k-instruct",
    "architectures": ["Phi3ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "embd_pdrop": 0.0,
    "eos_token_id": 32000,
    "hidden_act": "silu",
    "hidden_size": 3072,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 4096,
    "model_type": "phi3",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096,
    "pad_token_id": 32000,
    "resid_pdrop": 0.0,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "sliding_window": 2047,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.2",
    "use_cache": True,
    "vocab_size": 32064,
}
GPT2 = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}
CHATGLM2_6B = {
    "_name_or_path": "THUDM/chatglm2-6b",
    "model_type": "chatglm",
    "architectures": ["ChatGLMModel"],
    "auto_map": {
        "AutoConfig": "configuration_chatglm.ChatGLMConfig",
        "AutoModel": "modeling_chatglm.ChatGLMForConditionalGeneration",
    },
    "add_bias_linear": False,
    "add_qkv_bias": True,
    "apply_query_key_layer_scaling": True,
    "apply_residual_connection_post_layernorm": False,
    "attention_dropout": 0.0,
    "attention_softmax_in_fp32": True,
    "bias_dropout_fusion": True,
    "ffn_hidden_size": 13696,
    "fp32_residual_connection": False,
    "hidden_dropout": 0.0,
    "hidden_size": 4096,
    "kv_channels": 128,
    "layernorm_epsilon": 1e-05,
    "multi_query_attention": True,
    "multi_query_group_num": 2,
    "num_attention_heads": 32,
    "num_layers": 28,
    "original_rope": True,
    "padded_vocab_size": 65024,
    "post_layer_norm": True,
    "rmsnorm": True,
    "seq_length": 32768,
    "use_cache": True,
    "torch_dtype": "float16",
    "transformers_version": "4.27.1",
    "tie_word_embeddings": False,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
RESNET_50 = {
    "architectures": ["ResNetForImageClassification"],
    "depths": [3, 4, 6, 3],
    "downsample_in_first_stage": False,
    "embedding_size": 64,
    "hidden_act": "relu",
    "hidden_sizes": [256, 512, 1024, 2048],
    "id2label": {str(i): f"class_{i}" for i in range(1000)},
    "layer_type": "bottleneck",
    "model_type": "resnet",
    "num_channels": 3,
    "torch_dtype": "float32",
    "transformers_version": "4.18.0.dev0",
}
RESNET_18 = {
    "architectures": ["ResNetForImageClassification"],
    "depths": [2, 2, 2, 2],
    "downsample_in_first_stage": False,
    "embedding_size": 64,
    "hidden_act": "relu",
    "hidden_sizes": [64, 128, 256, 512],
    "id2label": {str(i): f"class_{i}" for i in range(1000)},
    "layer_type": "basic",
    "model_type": "resnet",
    "num_channels": 3,
}


def write_config(tmp_path: Path, data: Any, folder: str = "model") -> Path:
    """A config.json inside `tmp_path/folder`, as a downloaded model folder has it."""
    directory = tmp_path / folder
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.json"
    path.write_text(json.dumps(data, indent=2))
    return path


# -- golden parameter counts through the file path -------------------------------------------
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param(BERT_BASE_UNCASED, 109_483_778, id="bert-base-uncased"),
        pytest.param(ROBERTA_BASE, 124_647_170, id="roberta-base"),
        pytest.param(DISTILBERT_BASE_UNCASED, 66_955_010, id="distilbert-base-uncased"),
        pytest.param(LLAMA_2_7B, 6_738_415_616, id="llama-2-7b"),
        pytest.param(MISTRAL_7B_V01, 7_241_732_096, id="mistral-7b-v0.1"),
        pytest.param(QWEN2_0_5B, 494_032_768, id="qwen2-0.5b"),
        pytest.param(GPT2, 124_439_808, id="gpt2"),
        pytest.param(LLAMA_3_8B, 8_030_261_248, id="llama-3-8b"),
        pytest.param(CHATGLM2_6B, 6_243_584_000, id="chatglm2-6b"),
        pytest.param(GEMMA_2B, 2_506_172_416, id="gemma-2b"),
        pytest.param(PHI3_MINI_4K, 3_821_079_552, id="phi-3-mini-4k"),
        pytest.param(RESNET_50, 25_557_032, id="resnet-50"),
        pytest.param(RESNET_18, 11_689_512, id="resnet-18"),
    ],
)
def test_published_param_counts(tmp_path: Path, config: dict[str, Any], expected: int) -> None:
    path = write_config(tmp_path, config)
    assert load_hf_config(path).param_count() == expected
    assert load_hf_config(str(path.parent)).param_count() == expected  # the folder works too


def test_bert_maps_to_the_bert_base_preset() -> None:
    from fitbench.workloads.presets import BERT_BASE

    assert arch_from_hf_config(BERT_BASE_UNCASED) == BERT_BASE


def test_llama_maps_to_the_llama_7b_preset() -> None:
    from fitbench.workloads.presets import LLAMA_7B

    assert arch_from_hf_config(LLAMA_2_7B) == LLAMA_7B


def test_roberta_keeps_its_positions_and_single_token_type() -> None:
    arch = arch_from_hf_config(ROBERTA_BASE)
    assert isinstance(arch, TransformerArch)
    assert (arch.kind, arch.max_positions, arch.type_vocab_size) == ("encoder", 514, 1)
    assert arch.model_type == "roberta"
    assert (arch.position_offset, arch.usable_positions) == (2, 512)  # pad_token_id 1, plus one


def test_encoder_labels_from_num_labels_then_id2label_then_two() -> None:
    assert arch_from_hf_config(BERT_BASE_UNCASED).num_labels == 2
    with_map = {**BERT_BASE_UNCASED, "id2label": {"0": "neg", "1": "neutral", "2": "pos"}}
    assert arch_from_hf_config(with_map).num_labels == 3
    assert arch_from_hf_config({**with_map, "num_labels": 7}).num_labels == 7
    # Each label adds one classifier row of hidden_size weights plus a bias.
    two_labels = arch_from_hf_config(BERT_BASE_UNCASED).param_count()
    assert arch_from_hf_config(with_map).param_count() - two_labels == 769


def test_distilbert_reads_its_own_key_names() -> None:
    arch = arch_from_hf_config(DISTILBERT_BASE_UNCASED)
    assert isinstance(arch, TransformerArch)
    assert (arch.hidden_size, arch.num_layers, arch.num_heads, arch.intermediate_size) == (768, 6, 12, 3072)
    assert arch.type_vocab_size == 0


def test_qwen2_has_qkv_bias_but_no_output_bias() -> None:
    arch = arch_from_hf_config(QWEN2_0_5B)
    assert isinstance(arch, TransformerArch)
    assert (arch.qkv_bias, arch.out_bias, arch.mlp_bias, arch.tie_embeddings) == (True, False, False, True)
    assert (arch.num_kv_heads, arch.norm, arch.mlp, arch.position) == (2, "rmsnorm", "swiglu", "rotary")


def test_llama_attention_and_mlp_bias_flags_are_read() -> None:
    arch = arch_from_hf_config({**LLAMA_2_7B, "attention_bias": True, "mlp_bias": True})
    assert isinstance(arch, TransformerArch)
    assert (arch.qkv_bias, arch.out_bias, arch.mlp_bias) == (True, True, True)
    plain = arch_from_hf_config(LLAMA_2_7B).param_count()
    h, f = 4096, 11008
    assert arch.param_count() - plain == 32 * (4 * h + 2 * f + h)


def test_gemma_head_dim_and_tied_embeddings_by_default() -> None:
    arch = arch_from_hf_config(GEMMA_2B)
    assert isinstance(arch, TransformerArch)
    assert (arch.dim_head, arch.kv_heads, arch.tie_embeddings) == (256, 1, True)
    # gemma-7b: 16 heads of 256 = 4096 query width on a 3072-wide model.
    gemma_7b = {
        **GEMMA_2B,
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "num_hidden_layers": 28,
    }
    arch_7b = arch_from_hf_config(gemma_7b)
    assert isinstance(arch_7b, TransformerArch)
    assert (arch_7b.head_dim, arch_7b.q_dim) == (256, 4096)
    assert arch_from_hf_config(gemma_7b).param_count() == 8_537_680_896


def test_gpt2_inner_size_defaults_to_four_times_hidden() -> None:
    arch = arch_from_hf_config(GPT2)
    assert isinstance(arch, TransformerArch)
    assert (arch.intermediate_size, arch.max_positions) == (3072, 1024)
    assert (arch.position, arch.norm, arch.mlp, arch.tie_embeddings) == ("learned", "layernorm", "gelu", True)
    assert arch_from_hf_config({**GPT2, "n_inner": None}).intermediate_size == 3072
    assert arch_from_hf_config({**GPT2, "n_inner": 1000}).intermediate_size == 1000


def test_gpt2_residual_dropout_is_its_config_s_resid_pdrop() -> None:
    """transformers' GPT-2 and GPT-BigCode configs default resid_pdrop to 0.1: training then keeps
    two dropout masks a block (dtypes.keeps_dropout_masks); a config that turns it off keeps none,
    and the default leaves the arch equal to the preset's."""
    from fitbench.estimate.dtypes import keeps_dropout_masks

    default = arch_from_hf_config(GPT2)
    assert isinstance(default, TransformerArch)
    assert default.residual_dropout is None and default.residual_dropout_p == 0.1
    assert arch_from_hf_config({**GPT2, "resid_pdrop": 0.1}) == default
    off = arch_from_hf_config({**GPT2, "resid_pdrop": 0.0})
    assert off.residual_dropout_p == 0.0 and not keeps_dropout_masks(off)
    assert keeps_dropout_masks(default)
    bigcode = arch_from_hf_config({**GPT2, "model_type": "gpt_bigcode"})
    assert bigcode.residual_dropout_p == 0.1
    llama_like = arch_from_hf_config(
        {
            "model_type": "llama",
            "vocab_size": 64,
            "hidden_size": 8,
            "intermediate_size": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
        }
    )
    assert llama_like.residual_dropout_p == 0.0 and not keeps_dropout_masks(llama_like)
    with pytest.raises(FitbenchError, match="'resid_pdrop' must be a probability between 0 and 1"):
        arch_from_hf_config({**GPT2, "resid_pdrop": 1.5})


def test_chatglm_multi_query_groups_become_kv_heads() -> None:
    arch = arch_from_hf_config(CHATGLM2_6B)
    assert isinstance(arch, TransformerArch)
    assert (arch.kv_heads, arch.dim_head, arch.max_positions) == (2, 128, 32768)
    assert (arch.qkv_bias, arch.out_bias, arch.mlp_bias, arch.tie_embeddings) == (True, False, False, False)
    without_mqa = arch_from_hf_config({**CHATGLM2_6B, "multi_query_attention": False})
    assert isinstance(without_mqa, TransformerArch)
    assert without_mqa.kv_heads == 32


def test_resnet_picks_the_standard_depth() -> None:
    assert arch_from_hf_config(RESNET_50) == ResNetArch(depth=50, num_classes=1000, base_width=64)
    assert arch_from_hf_config(RESNET_18) == ResNetArch(depth=18, num_classes=1000, base_width=64)
    resnet_101 = {**RESNET_50, "depths": [3, 4, 23, 3]}
    assert arch_from_hf_config(resnet_101) == ResNetArch(depth=101, num_classes=1000, base_width=64)


def test_resnet_with_non_standard_depths_passes_its_layers() -> None:
    tiny = {
        "model_type": "resnet",
        "depths": [1, 1, 1, 1],
        "hidden_sizes": [32, 64, 128, 256],
        "embedding_size": 8,
        "layer_type": "bottleneck",
        "num_labels": 10,
    }
    arch = arch_from_hf_config(tiny)
    assert isinstance(arch, ResNetArch)
    assert (arch.block, arch.block_counts) == ("bottleneck", (1, 1, 1, 1))
    assert (arch.base_width, arch.num_classes) == (8, 10)
    from fitbench.workloads.presets import TINY_RESNET

    assert arch.param_count() == TINY_RESNET.param_count()
    basic = arch_from_hf_config(
        {**tiny, "layer_type": "basic", "hidden_sizes": [8, 16, 32, 64], "depths": [30, 1, 1, 1]}
    )
    assert isinstance(basic, ResNetArch)
    assert (basic.block, basic.block_counts) == ("basic", (30, 1, 1, 1))


# -- loading and the Workload ---------------------------------------------------------------------
def test_encoder_workload_defaults(tmp_path: Path) -> None:
    w = workload_from_config(write_config(tmp_path, BERT_BASE_UNCASED, "bert-base-uncased"))
    assert (w.name, w.family, w.mode) == ("bert-base-uncased", "encoder", "train")
    assert (w.seq_len, w.batch_size) == (512, 16)
    assert (w.precision, w.optimizer, w.dataset_size) == ("fp32", "adamw", None)
    assert w.param_count() == 109_483_778


def test_encoder_seq_len_is_capped_by_positions(tmp_path: Path) -> None:
    short = {**BERT_BASE_UNCASED, "max_position_embeddings": 128}
    assert workload_from_config(write_config(tmp_path, short)).seq_len == 128


def test_decoder_workload_generates_in_fp16(tmp_path: Path) -> None:
    w = workload_from_config(write_config(tmp_path, LLAMA_2_7B, "Llama-2-7b-hf"))
    assert (w.name, w.family, w.mode, w.is_generation) == ("Llama-2-7b-hf", "decoder", "infer", True)
    assert (w.precision, w.batch_size, w.prompt_tokens, w.new_tokens) == ("fp16", 1, 50, 100)


def test_decoder_with_a_short_context_gets_prompts_that_fit(tmp_path: Path) -> None:
    tiny_gpt2 = {**GPT2, "n_positions": 64, "n_embd": 64, "n_layer": 2, "n_head": 2}
    w = workload_from_config(write_config(tmp_path, tiny_gpt2))
    assert w.tokens_per_sequence <= 64
    assert w.prompt_tokens == 21


def test_resnet_workload_defaults(tmp_path: Path) -> None:
    w = workload_from_config(write_config(tmp_path, RESNET_50, "resnet-50"))
    assert (w.family, w.mode, w.image_size, w.batch_size, w.precision) == ("resnet", "train", 224, 64, "fp32")
    assert w.param_count() == 25_557_032


def test_overrides_apply_and_none_means_default(tmp_path: Path) -> None:
    path = write_config(tmp_path, BERT_BASE_UNCASED)
    w = workload_from_config(path, batch_size=8, precision="amp-fp16", seq_len=None, dataset_size=25_000)
    assert (w.batch_size, w.precision, w.seq_len, w.dataset_size) == (8, "amp-fp16", 512, 25_000)


def test_switching_a_decoder_to_training_gets_a_sequence_length(tmp_path: Path) -> None:
    w = workload_from_config(write_config(tmp_path, LLAMA_2_7B), mode="train")
    assert (w.mode, w.seq_len, w.precision, w.optimizer) == ("train", 512, "amp-bf16", "adamw")
    w = workload_from_config(write_config(tmp_path, LLAMA_2_7B), mode="train", precision="bf16", seq_len=2048)
    assert (w.seq_len, w.precision) == (2048, "bf16")


def test_invalid_override_is_a_fitbench_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, GPT2)
    with pytest.raises(FitbenchError, match="longer than the model's 1024 positions"):
        workload_from_config(path, prompt_tokens=1000, new_tokens=100)
    with pytest.raises(FitbenchError, match="unknown optimizer"):
        workload_from_config(path, optimizer="adagrad")


def test_workload_name_falls_back_to_a_renamed_files_stem(tmp_path: Path) -> None:
    path = tmp_path / "my-llama.json"
    path.write_text(json.dumps(LLAMA_2_7B))
    assert workload_from_config(path).name == "my-llama"


def test_workload_round_trips_through_json(tmp_path: Path) -> None:
    from fitbench.workloads.workload import Workload

    for config in (CHATGLM2_6B, QWEN2_0_5B, RESNET_50):
        w = workload_from_config(write_config(tmp_path, config, config["model_type"]))
        again = Workload.from_dict(json.loads(json.dumps(w.to_dict())))
        assert again == w


# -- errors: one FitbenchError line, never a raw exception ------------------------------------
def one_line(exc: pytest.ExceptionInfo[FitbenchError]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FitbenchError) as exc:
        load_hf_config(tmp_path / "nope" / "config.json")
    assert "not found" in one_line(exc)
    assert "folder holding it" in one_line(exc)


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(FitbenchError, match=r"no config\.json in folder"):
        load_hf_config(tmp_path)


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "model_type": "bert",\n  "hidden_size": 768,,\n}')
    with pytest.raises(FitbenchError) as exc:
        load_hf_config(path)
    assert "not valid JSON" in one_line(exc)
    assert "line 3 column 22" in one_line(exc)


def test_json_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("[1, 2, 3]")
    with pytest.raises(FitbenchError, match="holds a JSON list, not an object"):
        load_hf_config(path)


def test_binary_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\x80\x81\xfe\xff model weights")
    with pytest.raises(FitbenchError, match="not UTF-8"):
        load_hf_config(path)


def test_unknown_model_type_lists_supported_ones() -> None:
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config({**LLAMA_2_7B, "model_type": "tinyformer"}, source="m/config.json")
    text = one_line(exc)
    assert text.startswith("m/config.json: model_type 'tinyformer' is not supported")
    assert f"fitbench reads {len(SUPPORTED_MODEL_TYPES)} model types" in text
    assert "`fitbench models --families`" in text and len(text) < 600
    with pytest.raises(FitbenchError, match="did you mean 'llama'"):
        arch_from_hf_config({**LLAMA_2_7B, "model_type": "lama"})


def test_an_unknown_text_config_type_in_a_multimodal_file_is_named_not_the_wrapper() -> None:
    """Mistral3's wrapper is read; a language model inside it that is not must be the type the
    refusal names (a user would otherwise look for what is wrong with 'mistral3')."""
    data = {
        "model_type": "mistral3",
        "text_config": {**LLAMA_2_7B, "model_type": "tinyformer"},
        "vision_config": {"model_type": "pixtral", "num_hidden_layers": 1},
    }
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config(data, source="m/config.json")
    assert one_line(exc).startswith("m/config.json: text_config's model_type 'tinyformer' is not supported")
    assert "text_config 的 model_type 'tinyformer'" in exc.value.message_zh


@pytest.mark.parametrize(
    ("model_type", "reason", "reason_zh"),
    [
        ("mamba", "Mamba has state-space or recurrent layers", "Mamba 含状态空间或循环层"),
        ("falcon_h1", "Falcon-H1 has state-space or recurrent layers", "Falcon-H1 含状态空间或循环层"),
        ("t5", "T5 is an encoder-decoder", "T5 是编码器-解码器模型"),
        ("whisper", "Whisper is an encoder-decoder", "Whisper 是编码器-解码器模型"),
    ],
)
def test_families_of_another_kind_say_what_they_are_not_a_near_name(
    model_type: str, reason: str, reason_zh: str
) -> None:
    """'mamba' is one letter from 'llama' and 'bamba' two, but reading either as Llama would
    count another model: the reason is named instead of a "did you mean"."""
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config({**LLAMA_2_7B, "model_type": model_type}, source="m/config.json")
    assert exc.value.message.startswith(f"m/config.json: {reason}")
    assert "did you mean" not in one_line(exc)
    assert reason_zh in (exc.value.message_zh or "")


def test_missing_model_type() -> None:
    data = {k: v for k, v in LLAMA_2_7B.items() if k != "model_type"}
    with pytest.raises(FitbenchError, match="no 'model_type'"):
        arch_from_hf_config(data)


def test_missing_keys_are_all_named() -> None:
    data = {k: v for k, v in LLAMA_2_7B.items() if k not in ("hidden_size", "vocab_size")}
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config(data)
    need = "'llama' configs need 'vocab_size' or 'padded_vocab_size', 'hidden_size' or 'n_embd'"
    assert need in one_line(exc)


def test_null_counts_as_missing_for_required_keys() -> None:
    with pytest.raises(FitbenchError, match="'gpt2' configs need 'n_layer' or 'num_hidden_layers'"):
        arch_from_hf_config({**GPT2, "n_layer": None})


def test_first_chatglm_layout_is_refused_with_a_reason() -> None:
    chatglm_6b_v1 = {
        "model_type": "chatglm",
        "hidden_size": 4096,
        "inner_hidden_size": 16384,
        "num_layers": 28,
        "num_attention_heads": 32,
        "vocab_size": 130528,
        "position_encoding_2d": True,
    }
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config(chatglm_6b_v1)
    assert "'padded_vocab_size', 'ffn_hidden_size'" in one_line(exc)
    assert "first ChatGLM-6B layout" in one_line(exc)


@pytest.mark.parametrize(
    ("model_type", "why"),
    [
        ("kimi_linear", "linear-attention"),
        ("gemma4", "per-layer input embeddings"),
        ("deepseek_v32", "sparse-attention indexer"),
        ("mistral_large4", "sparse-attention indexer"),
        ("glm_moe_dsa", "sparse-attention indexer"),
    ],
)
def test_a_newer_family_near_a_supported_name_gets_its_reason_not_a_guess(model_type: str, why: str) -> None:
    """Kimi-Linear's name is near Kimi K2's and Gemma 4 is one letter from Gemma-3, but their
    blocks are other kinds: the error says why they are not read, in both languages, and
    suggests no near name."""
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config({"model_type": model_type, "hidden_size": 64})
    assert why in exc.value.message and "did you mean" not in one_line(exc)
    assert exc.value.message_zh and "fitbench 尚未对其建模" in exc.value.message_zh


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("768", "must be a whole number, got the string '768'"),
        (True, "must be a whole number, got true"),
        (767.5, "must be a whole number, got 767.5"),
        (float("nan"), "must be a whole number, got nan"),
        (float("inf"), "must be a whole number, got inf"),
        ([768], "must be a whole number, got a list"),
        ({"x": 1}, "must be a whole number, got an object"),
        (0, "must be at least 1, got 0"),
        (-768, "must be at least 1, got -768"),
        (10**40, "beyond any real model"),
        (10**400, "a 1329-bit number, beyond any real model"),
    ],
)
def test_bad_size_values(value: Any, expected: str) -> None:
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config({**BERT_BASE_UNCASED, "hidden_size": value}, source="x.json")
    text = one_line(exc)
    assert text.startswith("x.json: 'hidden_size'")
    assert expected in text


def test_whole_floats_are_accepted() -> None:
    arch = arch_from_hf_config({**BERT_BASE_UNCASED, "hidden_size": 768.0})
    assert isinstance(arch, TransformerArch)
    assert arch.hidden_size == 768
    assert type(arch.hidden_size) is int


def test_bad_flag_values() -> None:
    with pytest.raises(FitbenchError, match="'tie_word_embeddings' must be true or false, got the string"):
        arch_from_hf_config({**QWEN2_0_5B, "tie_word_embeddings": "yes"})
    with pytest.raises(FitbenchError, match="'multi_query_attention' must be true or false, got 1"):
        arch_from_hf_config({**CHATGLM2_6B, "multi_query_attention": 1})


def test_model_type_must_be_a_string() -> None:
    with pytest.raises(FitbenchError, match="'model_type' must be a string, got 3"):
        arch_from_hf_config({**GPT2, "model_type": 3})


def test_inconsistent_sizes_name_the_file() -> None:
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config({**BERT_BASE_UNCASED, "num_attention_heads": 7}, source="bert/config.json")
    assert one_line(exc).startswith("bert/config.json: hidden_size 768 is not divisible by num_heads 7")
    with pytest.raises(FitbenchError, match="not a multiple of num_kv_heads 5"):
        arch_from_hf_config({**MISTRAL_7B_V01, "num_key_value_heads": 5})


def test_bad_labels() -> None:
    with pytest.raises(FitbenchError, match="'id2label' must be an object"):
        arch_from_hf_config({**BERT_BASE_UNCASED, "id2label": ["neg", "pos"]})
    with pytest.raises(FitbenchError, match="'id2label' is empty"):
        arch_from_hf_config({**BERT_BASE_UNCASED, "id2label": {}})
    with pytest.raises(FitbenchError, match="'num_labels' must be at least 1"):
        arch_from_hf_config({**RESNET_50, "num_labels": 0})


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"depths": [3, 4, 6]}, "'depths' must be a list of 4 numbers (one per stage), got a list of 3"),
        ({"depths": "3,4,6,3"}, "'depths' must be a list of 4 numbers"),
        ({"depths": [3, 4, 0, 3]}, "'depths[2]' must be at least 1"),
        ({"hidden_sizes": [256, 512, 1000, 2048]}, "do not double from stage to stage"),
        ({"hidden_sizes": [250, 500, 1000, 2000]}, "not a multiple of 4"),
        ({"embedding_size": 32}, "'embedding_size' 32 differs from the first stage's width 64"),
        ({"layer_type": "preact"}, "'layer_type' must be 'bottleneck' or 'basic'"),
    ],
)
def test_resnet_layouts_fitbench_cannot_model_are_refused(change: dict[str, Any], expected: str) -> None:
    with pytest.raises(FitbenchError) as exc:
        arch_from_hf_config({**RESNET_50, **change})
    assert expected in one_line(exc)


# -- cross-check against the real transformers models ------------------------------------------
_ENC = {
    "vocab_size": 101,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 48,
    "max_position_embeddings": 40,
}
_DEC = {
    "vocab_size": 101,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 48,
}
TINY_CONFIGS = [
    pytest.param("bert", "seq-cls", _ENC, id="bert"),
    pytest.param("bert", "seq-cls", {**_ENC, "num_labels": 5}, id="bert-5-labels"),
    pytest.param(
        "roberta", "seq-cls", {**_ENC, "type_vocab_size": 1, "max_position_embeddings": 42}, id="roberta"
    ),
    pytest.param("xlm-roberta", "seq-cls", _ENC, id="xlm-roberta"),
    pytest.param("camembert", "seq-cls", {**_ENC, "type_vocab_size": 1}, id="camembert"),
    pytest.param("electra", "seq-cls", {**_ENC, "embedding_size": 32}, id="electra"),
    pytest.param(
        "distilbert",
        "seq-cls",
        {
            "vocab_size": 101,
            "dim": 32,
            "n_layers": 2,
            "n_heads": 4,
            "hidden_dim": 48,
            "max_position_embeddings": 40,
        },
        id="distilbert",
    ),
    pytest.param("llama", "causal-lm", _DEC, id="llama"),
    pytest.param(
        "llama",
        "causal-lm",
        {**_DEC, "attention_bias": True, "mlp_bias": True, "head_dim": 16, "tie_word_embeddings": True},
        id="llama-biases-tied",
    ),
    pytest.param("mistral", "causal-lm", {**_DEC, "num_key_value_heads": 1}, id="mistral"),
    pytest.param("qwen2", "causal-lm", {**_DEC, "tie_word_embeddings": True}, id="qwen2-tied"),
    pytest.param("qwen2", "causal-lm", {**_DEC, "tie_word_embeddings": False}, id="qwen2"),
    pytest.param("gemma", "causal-lm", {**_DEC, "num_key_value_heads": 1, "head_dim": 16}, id="gemma"),
    pytest.param("phi3", "causal-lm", {**_DEC, "pad_token_id": 0}, id="phi3"),
    pytest.param(
        "gpt2",
        "causal-lm",
        {"vocab_size": 101, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 40},
        id="gpt2",
    ),
    pytest.param(
        "gpt2",
        "causal-lm",
        {
            "vocab_size": 101,
            "n_embd": 32,
            "n_layer": 2,
            "n_head": 4,
            "n_positions": 40,
            "n_inner": 40,
            "tie_word_embeddings": False,
        },
        id="gpt2-untied",
    ),
    pytest.param(
        "resnet",
        "image-cls",
        {
            "embedding_size": 8,
            "hidden_sizes": [32, 64, 128, 256],
            "depths": [1, 2, 1, 1],
            "layer_type": "bottleneck",
            "num_labels": 10,
        },
        id="resnet-bottleneck",
    ),
    pytest.param(
        "resnet",
        "image-cls",
        {"embedding_size": 8, "hidden_sizes": [8, 16, 32, 64], "depths": [2, 2, 2, 2], "layer_type": "basic"},
        id="resnet-basic",
    ),
]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "head", "sizes"), TINY_CONFIGS)
def test_param_count_matches_transformers(
    tmp_path: Path, model_type: str, head: str, sizes: dict[str, Any]
) -> None:
    """The config transformers itself writes, read by fitbench, counts what transformers builds."""
    transformers = pytest.importorskip("transformers")
    auto = {
        "seq-cls": transformers.AutoModelForSequenceClassification,
        "causal-lm": transformers.AutoModelForCausalLM,
        "image-cls": transformers.AutoModelForImageClassification,
    }[head]
    config = transformers.AutoConfig.for_model(model_type, **sizes)
    config.save_pretrained(tmp_path)
    model = auto.from_config(config)
    expected = sum(p.numel() for p in model.parameters())  # shared (tied) tensors counted once
    assert load_hf_config(tmp_path).param_count() == expected


# -- families added from transformers' own classes ------------------------------------------------
EXAONE4 = {
    "model_type": "exaone4",
    "vocab_size": 1000,
    "hidden_size": 64,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "sliding_window": 32,
}


@pytest.mark.parametrize(("pattern", "local"), [("LLLG", 6), ("LLGL", 6), ("LG", 4), (4, 6), (2, 4)])
def test_exaone4_windows_follow_its_pattern_as_letters_or_a_period(pattern: Any, local: int) -> None:
    arch = arch_from_hf_config({**EXAONE4, "sliding_window_pattern": pattern})
    assert isinstance(arch, TransformerArch)
    assert (arch.sliding_layers, arch.sliding_window, arch.qk_norm) == (local, 32, "head")


def test_exaone4_keys_left_out_take_transformers_defaults() -> None:
    """A saved EXAONE 4.0 config without `sliding_window` or its pattern builds, in transformers,
    Exaone4Config's defaults (a 4096-token window, every fourth layer global): so does fitbench,
    and it agrees with the layer types transformers' own config class derives."""
    transformers = pytest.importorskip("transformers")
    bare = {k: v for k, v in EXAONE4.items() if k != "sliding_window"}
    arch = arch_from_hf_config(bare)
    assert isinstance(arch, TransformerArch)
    theirs = transformers.Exaone4Config(**{k: v for k, v in bare.items() if k != "model_type"})
    local = sum(t == "sliding_attention" for t in theirs.layer_types)
    assert (arch.sliding_window, arch.sliding_layers) == (theirs.sliding_window, local) == (4096, 6)


def test_exaone4_without_a_window_is_global_everywhere_and_a_bad_pattern_is_named() -> None:
    arch = arch_from_hf_config({**EXAONE4, "sliding_window": None, "sliding_window_pattern": "LLLG"})
    assert isinstance(arch, TransformerArch) and arch.sliding_layers == 0
    with pytest.raises(FitbenchError, match="'sliding_window_pattern' must be a number or letters L"):
        arch_from_hf_config({**EXAONE4, "sliding_window_pattern": "LXG"})


GLM_LITE = {
    "model_type": "glm4_moe_lite",
    "vocab_size": 1000,
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
}


def test_mlp_layer_types_give_the_leading_dense_layers_and_refuse_a_dense_one_after() -> None:
    listed = arch_from_hf_config({**GLM_LITE, "mlp_layer_types": ["dense", "dense", "sparse", "sparse"]})
    counted = arch_from_hf_config({**GLM_LITE, "first_k_dense_replace": 2})
    assert isinstance(listed, TransformerArch) and listed.dense_layers == 2
    assert listed == counted
    with pytest.raises(FitbenchError, match="'mlp_layer_types' must list 'dense' then 'sparse'"):
        arch_from_hf_config({**GLM_LITE, "mlp_layer_types": ["dense", "sparse", "dense", "sparse"]})


def test_expert_counts_read_under_transformers_5_aliases() -> None:
    """transformers 5 saves Qwen3-MoE's `num_experts` as `num_local_experts` (its attribute_map):
    the same model either way."""
    base = {**LLAMA_2_7B, "model_type": "qwen3_moe", "moe_intermediate_size": 768, "num_experts_per_tok": 8}
    published = arch_from_hf_config({**base, "num_experts": 128})
    saved = arch_from_hf_config({**base, "num_local_experts": 128})
    assert published == saved and isinstance(saved, TransformerArch) and saved.num_experts == 128


def test_qwen3_moe_without_head_dim_splits_the_hidden_size_as_its_class_does() -> None:
    """Qwen3MoeConfig has no head_dim default (Qwen3Config's is 128): hidden / heads."""
    arch = arch_from_hf_config(
        {
            **LLAMA_2_7B,
            "model_type": "qwen3_moe",
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 64,
        }
    )
    assert isinstance(arch, TransformerArch) and arch.dim_head == 4096 // 32


@pytest.mark.parametrize(
    "overrides",
    [
        {"mode": "infer", "batch_size": 4, "prompt_tokens": 512, "new_tokens": 32},
        {"mode": "train", "batch_size": 2, "seq_len": 1024, "precision": "amp-bf16"},
    ],
)
def test_a_family_with_a_twin_estimates_as_the_twin(overrides: dict[str, Any]) -> None:
    """Kimi K2 is DeepSeek-V3 module for module (arch.RULE_TWINS): the estimator's per-family
    rules (FP32 router, host calls, the generation reserve's layout) are DeepSeek-V3's, so both
    configs of the same numbers give the same estimate. OLMo-3 is OLMo-2 with windows: without
    calls counted for OLMo-3's own code it takes OLMo-2's; with a window a generation differs (a
    windowed cache)."""
    from fitbench.catalog import get_gpu
    from fitbench.estimate.api import estimate
    from fitbench.workloads.hf_config import workload_from_data

    gpu = get_gpu("h200")
    mla = {
        "vocab_size": 32000,
        "hidden_size": 2048,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "intermediate_size": 5632,
        "moe_intermediate_size": 512,
        "n_routed_experts": 16,
        "num_experts_per_tok": 4,
        "kv_lora_rank": 256,
        "qk_rope_head_dim": 32,
        "qk_nope_head_dim": 64,
        "v_head_dim": 64,
    }
    kimi, deepseek = (
        estimate(workload_from_data({**mla, "model_type": t}, name="m", source="m", **overrides), gpu)
        for t in ("kimi_k2", "deepseek_v3")
    )
    assert (kimi.peak_memory_bytes, kimi.step_seconds) == (deepseek.peak_memory_bytes, deepseek.step_seconds)

    numbers = {
        "vocab_size": 100278,
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "intermediate_size": 11008,
        "max_position_embeddings": 65536,
    }
    olmo2 = estimate(
        workload_from_data({**numbers, "model_type": "olmo2"}, name="m", source="m", **overrides), gpu
    )
    olmo3 = estimate(
        workload_from_data({**numbers, "model_type": "olmo3"}, name="m", source="m", **overrides), gpu
    )
    assert olmo3.peak_memory_bytes == olmo2.peak_memory_bytes
    windowed = workload_from_data(
        {**numbers, "model_type": "olmo3", "sliding_window": 256}, name="m", source="m", **overrides
    )
    if windowed.is_generation:
        assert estimate(windowed, gpu).peak_memory_bytes != olmo2.peak_memory_bytes
