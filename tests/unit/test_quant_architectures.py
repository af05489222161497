"""Quantized weights and KV caches on the architectures of the model library: every expert's
matrices at the format's bytes, latent attention's matrices, routers kept 16-bit where the
checkpoint keeps them, the KV dtype on latent and sliding-window caches, pre-quantized model
folders counted once, and bundled quantized checkpoints against their published sizes."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from fitbench.cli.main import main
from fitbench.core.quant import matrix_bytes, matrix_total_bytes, parse_weights
from fitbench.estimate import kv_cache, serving, transformer_cost, weights
from fitbench.workloads import library
from fitbench.workloads.arch import TransformerArch, expected_distinct_experts
from fitbench.workloads.workload import Workload


def _arch(w: Workload) -> TransformerArch:
    assert isinstance(w.arch, TransformerArch)
    return w.arch


def _stored(w: Workload) -> float:
    stored, scales = weights.weight_bytes(w)
    return stored + scales


# -- bundled quantized checkpoints against their published sizes --------------------------------
# Sizes as the repositories publish them (decimal GB; the sources are in each model's JSON note).


def test_deepseek_v3_fp8_blocks_match_the_published_checkpoint() -> None:
    """deepseek-ai/DeepSeek-V3 ships fp8 e4m3 weights with 128x128 block scales (its config.json's
    quantization_config, bundled); its 163 shards hold about 689 GB including the 14B-parameter
    multi-token-prediction module, which the 671B model leaves out (about 16 GB of it)."""
    w = library.workload_for_model("deepseek-v3")
    fmt = w.weight_format
    assert fmt is not None and fmt.method == "fp8" and fmt.block == (128, 128)
    assert fmt.source == "quantization_config"
    assert 642e9 <= _stored(w) <= 690e9
    assert _stored(w) == pytest.approx(673.15e9, rel=1e-3)


@pytest.mark.parametrize("weights", [None, "gptq"])
def test_mixtral_4bit_matches_the_published_checkpoints(weights: str | None) -> None:
    """TheBloke/Mixtral-8x7B-Instruct-v0.1-AWQ: 24.65 GB; the GPTQ repository's 4-bit group-128
    act-order branch: 24.70 GB. Both hold every expert of every layer in 4 bit."""
    if weights is None:
        w = library.workload_for_model("mixtral-8x7b-instruct-awq")
        published = 24.65e9
    else:
        w = library.workload_for_model("mixtral-8x7b-instruct", weights=parse_weights(weights), mode="infer")
        published = 24.70e9
    assert 24e9 <= _stored(w) <= 26e9
    assert _stored(w) == pytest.approx(published, rel=0.01)


def test_dense_quantized_checkpoints_match_their_published_sizes() -> None:
    """Qwen/Qwen2.5-7B-Instruct-AWQ: 5.58 GB in two shards; TheBloke/Llama-2-7B-Chat-GPTQ main
    branch (4-bit, group 128): 3.90 GB."""
    assert _stored(library.workload_for_model("qwen2.5-7b-instruct-awq")) == pytest.approx(5.58e9, rel=0.01)
    assert _stored(library.workload_for_model("llama-2-7b-chat-gptq")) == pytest.approx(3.90e9, rel=0.01)


def test_bundled_quantized_models_run_in_their_config_dtype() -> None:
    w = library.workload_for_model("qwen2.5-7b-instruct-awq")
    assert w.precision == "fp16" and w.weight_format is not None and w.weight_format.method == "awq"
    assert any("torch_dtype" in line for line in w.origin)


# -- experts and latent attention ---------------------------------------------------------------


def test_every_expert_is_stored_in_the_format() -> None:
    """Mixtral in AWQ: 32 layers x 8 experts x (w1, w3: 4096->14336; w2: 14336->4096) plus the
    attention matrices in the AWQ layout; the router, embeddings, norms and LM head in 16 bit."""
    fmt = parse_weights("awq")
    assert fmt is not None
    w = library.workload_for_model("mixtral-8x7b-instruct", weights=fmt, mode="infer")
    arch = _arch(w)
    h, fe = arch.hidden_size, arch.expert_intermediate_size
    shapes = ([(h, fe)] * 2 + [(fe, h)]) * (arch.num_layers * arch.num_experts)
    shapes += [(h, arch.q_dim), (h, arch.kv_dim), (h, arch.kv_dim), (arch.q_dim, h)] * arch.num_layers
    values = sum(matrix_bytes(fmt, fin, fout)[0] for fin, fout in shapes)
    scales = sum(matrix_bytes(fmt, fin, fout)[1] for fin, fout in shapes)
    converted = sum(fin * fout for fin, fout in shapes)
    assert weights.weight_bytes(w) == ((w.param_count() - converted) * 2 + values, scales)
    router = next(m for m in weights.quantized_matrices(w) if m.name == "router")
    assert (router.copies, router.total) == (0, 32)


def test_latent_attention_and_shared_experts_are_quantized() -> None:
    """DeepSeek-V3's fp8 checkpoint: q_a/q_b/kv_a/kv_b/o projections of all 61 layers, the dense
    MLP of the first 3, 256 routed and the shared expert of the other 58; the router stays bf16."""
    w = library.workload_for_model("deepseek-v3")
    mats = {m.name: (m.copies, m.total) for m in weights.quantized_matrices(w)}
    for name in ("q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "o_proj"):
        assert mats[name] == (61, 61)
    assert mats["gate_proj"] == (3, 3)
    assert mats["experts.down_proj"] == (58 * 256, 58 * 256)
    assert mats["shared_experts.up_proj"] == (58, 58)
    assert mats["router"] == (0, 58)
    assert "lm_head" not in mats


def test_decode_reads_the_distinct_experts_quantized_bytes() -> None:
    """One token reads its 2 experts' packed weights and scales; four tokens the expected distinct
    experts; FLOPs count the active experts whatever the storage."""
    fmt = parse_weights("awq")
    assert fmt is not None
    arch = _arch(library.workload_for_model("mixtral-8x7b-instruct"))
    h, fe = arch.hidden_size, arch.expert_intermediate_size
    expert = 2 * matrix_total_bytes(fmt, h, fe) + matrix_total_bytes(fmt, fe, h)
    for batch in (1, 4):
        w = library.workload_for_model("mixtral-8x7b-instruct", weights=fmt, mode="infer", batch_size=batch)
        plain = library.workload_for_model(
            "mixtral-8x7b-instruct", mode="infer", batch_size=batch, precision="fp16"
        )
        ks = {k.name: k for k in transformer_cost.forward_kernels(w, batch, 1, kv_len=100)}
        ref = {k.name: k for k in transformer_cost.forward_kernels(plain, batch, 1, kv_len=100)}
        activations = batch * 2 * 3 * (h + fe) * 2
        distinct = expected_distinct_experts(8, 2, batch)
        assert ks["experts"].bytes == pytest.approx(activations + distinct * expert)
        assert ks["experts"].flops == ref["experts"].flops == 2.0 * batch * 2 * 3 * h * fe
        assert ks["experts"].dequant_bytes == 0  # decoding reads the packed weights
    prefill = transformer_cost.forward_kernels(w, 4, 100)
    assert next(k for k in prefill if k.name == "experts").dequant_bytes > 0


def test_fp8_experts_use_fp8_tensor_cores_where_the_card_has_them() -> None:
    w = library.workload_for_model("deepseek-v3")
    ks = {k.name: k for k in transformer_cost.forward_kernels(w, 1, 512)}
    assert ks["experts"].compute == ks["shared_experts"].compute == ks["kv_b_proj"].compute == "fp8"
    assert ks["router"].compute == ""


# -- modules_to_not_convert ----------------------------------------------------------------------


def _mixtral_skipping(*skip: str, method: str = "bnb-4bit") -> dict[str, tuple[int, int]]:
    base = parse_weights("nf4") if method == "bnb-4bit" else parse_weights("awq")
    assert base is not None
    fmt = dataclasses.replace(base, skip=skip)
    w = library.workload_for_model("mixtral-8x7b-instruct", weights=fmt, mode="infer")
    # as a serving engine converts them: transformers' own bitsandbytes loading leaves Mixtral's
    # stacked experts and router alone whatever the skip list (test_bnb_moe_experts.py)
    return {m.name: (m.copies, m.total) for m in weights.quantized_matrices(w, engine=True)}


def test_router_is_kept_16_bit_where_named() -> None:
    """bitsandbytes converts every Linear, the router too, unless a skip entry names it:
    'mlp.gate' or 'gate' (Mixtral's block_sparse_moe.gate) is the router, never gate_proj."""
    assert _mixtral_skipping()["router"] == (32, 32)
    for entry in ("mlp.gate", "gate", "block_sparse_moe.gate", "re:.*mlp\\.gate$"):
        mats = _mixtral_skipping(entry)
        assert mats["router"] == (0, 32), entry
        assert mats["experts.gate_proj"] == (256, 256), entry
    assert _mixtral_skipping("mlp.gate", method="awq")["router"] == (0, 32)


def test_skip_entries_reach_experts_layers_and_parts() -> None:
    mats = _mixtral_skipping("model.layers.3.mlp")
    assert mats["experts.down_proj"] == (31 * 8, 256) and mats["router"] == (31, 32)
    assert mats["q_proj"] == (32, 32)
    mats = _mixtral_skipping("experts")
    assert mats["experts.up_proj"] == (0, 256) and mats["router"] == (32, 32)
    mats = _mixtral_skipping("w2")  # Mixtral's name for an expert's down projection
    assert mats["experts.down_proj"] == (0, 256) and mats["experts.gate_proj"] == (256, 256)
    mats = _mixtral_skipping("self_attn", "layers.0")
    assert mats["o_proj"] == (0, 32) and mats["experts.gate_proj"] == (31 * 8, 256)


# -- KV cache dtype on latent and sliding-window caches -------------------------------------------


def test_kv_dtype_on_the_latent_cache() -> None:
    """MLA keeps 512 latent + 64 rotary-key values per token and layer: one byte each in fp8,
    plus a scale and zero point a token in int8."""
    fp8 = library.workload_for_model("deepseek-v3", kv_cache="fp8")
    int8 = library.workload_for_model("deepseek-v3", kv_cache="int8")
    bf16 = library.workload_for_model("deepseek-v3")
    assert kv_cache.kv_cache_bytes_per_token(bf16) == 61 * 576 * 2
    assert kv_cache.kv_cache_bytes_per_token(fp8) == 61 * 576
    assert kv_cache.kv_cache_bytes_per_token(int8) == 61 * (576 + 4)
    assert kv_cache.kv_cache_bytes_per_token(fp8, tp=8) == 61 * 576  # replicated
    w = fp8.replace(batch_size=2, prompt_tokens=1000, new_tokens=24)
    assert kv_cache.kv_cache_bytes(w) == 2 * 61 * 1024 * 576


def test_kv_dtype_on_sliding_window_layers() -> None:
    """Gemma-2-9B: 21 of 42 layers hold a 4096-token window while decoding; in fp8 every slot
    takes one byte per element."""
    w = library.workload_for_model("gemma-2-9b-it", prompt_tokens=3000, new_tokens=5000, kv_cache="fp8")
    arch = _arch(w)
    assert kv_cache.kv_cache_bytes(w) == (21 * 8000 + 21 * 4096) * 2 * arch.kv_dim
    half = library.workload_for_model("gemma-2-9b-it", prompt_tokens=3000, new_tokens=5000)
    assert kv_cache.kv_cache_bytes(half) == 2 * kv_cache.kv_cache_bytes(w)


def test_serving_pages_follow_the_kv_dtype() -> None:
    """vLLM's blocks are sized from the bytes a token keeps: fp8 halves them on the latent cache,
    so twice as many blocks fit in the same room."""
    from fitbench.catalog import get_gpu

    plans = [
        serving.memory_plan(
            library.workload_for_model("deepseek-v3", kv_cache=kv),
            get_gpu("h200"),
            serving.ServeConfig(),
            tp=8,
        )
        for kv in (None, "fp8")
    ]
    assert plans[0].kv_bytes_per_token == 61 * 576 * 2 and plans[1].kv_bytes_per_token == 61 * 576
    assert plans[1].num_blocks == pytest.approx(2 * plans[0].num_blocks, abs=1)


def test_decode_reads_the_latent_cache_at_its_dtype() -> None:
    bf16 = library.workload_for_model("deepseek-v3", prompt_tokens=4000, new_tokens=10)
    fp8 = library.workload_for_model("deepseek-v3", prompt_tokens=4000, new_tokens=10, kv_cache="fp8")
    attn = [
        next(k for k in transformer_cost.forward_kernels(w, 1, 1, kv_len=4000) if k.name == "attention")
        for w in (bf16, fp8)
    ]
    cache = 4000 * 576
    assert attn[0].bytes - attn[1].bytes == pytest.approx(cache)


# -- a pre-quantized model folder: the headers' bytes, counted once -------------------------------

_TINY: dict[str, Any] = {
    "model_type": "qwen2",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 256,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}
_AWQ = {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm"}


def _awq_tensors() -> dict[str, tuple[str, list[int], int]]:
    """AutoAWQ's WQLinear_GEMM tensors for the tiny Qwen2: qweight int32 [in, out/8], qzeros int32
    [in/32, out/8], scales fp16 [in/32, out]; biases, norms, embeddings and head in fp16."""
    h, f, kv, v = 64, 128, 32, 256
    out: dict[str, tuple[str, list[int], int]] = {
        "model.embed_tokens.weight": ("F16", [v, h], v * h * 2),
        "lm_head.weight": ("F16", [v, h], v * h * 2),
        "model.norm.weight": ("F16", [h], h * 2),
    }
    for i in range(2):
        p = f"model.layers.{i}"
        mats = {
            "self_attn.q_proj": (h, h),
            "self_attn.k_proj": (h, kv),
            "self_attn.v_proj": (h, kv),
            "self_attn.o_proj": (h, h),
            "mlp.gate_proj": (h, f),
            "mlp.up_proj": (h, f),
            "mlp.down_proj": (f, h),
        }
        for name, (fin, fout) in mats.items():
            out[f"{p}.{name}.qweight"] = ("I32", [fin, fout // 8], fin * fout // 2)
            out[f"{p}.{name}.qzeros"] = ("I32", [fin // 32, fout // 8], fin // 32 * fout // 2)
            out[f"{p}.{name}.scales"] = ("F16", [fin // 32, fout], fin // 32 * fout * 2)
            if name.split(".")[1] in ("q_proj", "k_proj", "v_proj"):
                out[f"{p}.{name}.bias"] = ("F16", [fout], fout * 2)
        for norm in ("input_layernorm", "post_attention_layernorm"):
            out[f"{p}.{norm}.weight"] = ("F16", [h], h * 2)
    return out


def _folder(tmp_path: Path, config: dict[str, Any], tensors: dict[str, tuple[str, list[int], int]]) -> int:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return offset


def _estimate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["estimate", *args, "--gpu", "h200", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["estimates"][0]


def test_prequantized_folder_counts_its_headers_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The headers' exact bytes (packed values and scales together) are the weights; the
    quantization_config's layout is not added on top. The layout's own count agrees with the
    file, which holds exactly AutoAWQ's tensors."""
    stored = _folder(tmp_path, {**_TINY, "quantization_config": _AWQ}, _awq_tensors())
    est = _estimate(capsys, "--config", str(tmp_path))
    assert est["breakdown"]["weights"] == stored
    assert est["breakdown"].get("quantization_scales", 0) == 0
    assert any("replace the AWQ 4-bit group 32 layout's count" in a for a in est["assumptions"])
    (tmp_path / "model.safetensors").unlink()
    counted = _estimate(capsys, "--config", str(tmp_path))
    assert counted["breakdown"]["weights"] + counted["breakdown"]["quantization_scales"] == stored


def test_16_bit_folder_quantized_while_loading_counts_the_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bf16 checkpoint with --weights awq: the headers describe what is on disk, not what is
    loaded, so the format's count decides."""
    shapes = {"w": ("BF16", [64 * 1000], 64 * 1000 * 2)}
    stored = _folder(tmp_path, _TINY, shapes)
    plain = _estimate(capsys, "--config", str(tmp_path), "--precision", "bf16")
    assert plain["breakdown"]["weights"] == stored
    quantized = _estimate(capsys, "--config", str(tmp_path), "--weights", "awq-g32")
    assert quantized["breakdown"]["weights"] != stored
    assert quantized["breakdown"]["quantization_scales"] > 0
