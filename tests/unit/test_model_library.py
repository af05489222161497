"""The bundled models: counts against published figures, names, and the estimates they give."""

from __future__ import annotations

import json
import math

import pytest

from fitbench.errors import FitbenchError
from fitbench.estimate import kv_cache, transformer_cost
from fitbench.workloads import library
from fitbench.workloads.arch import TransformerArch, expected_distinct_experts
from fitbench.workloads.hf_config import arch_from_hf_config
from fitbench.workloads.workload import Workload

MODELS = sorted(library.models())


def _arch(name: str) -> TransformerArch:
    arch = arch_from_hf_config(dict(library.models()[name].config), source=name)
    assert isinstance(arch, TransformerArch)
    return arch


def test_library_has_thirty_models_with_sources() -> None:
    assert len(MODELS) >= 30
    for m in library.models().values():
        assert m.source.startswith("https://huggingface.co/") and m.repo in m.source


@pytest.mark.parametrize("name", MODELS)
def test_total_params_within_one_percent_of_published(name: str) -> None:
    m = library.models()[name]
    assert abs(_arch(name).param_count() / m.published_params - 1) <= 0.01


def _rounding(value: int) -> float:
    """Half a unit of the last significant digit a figure like 2.4B or 37B was published with."""
    digits = str(value).rstrip("0")
    return 0.5 * 10 ** (len(str(value)) - len(digits))


@pytest.mark.parametrize("name", [n for n in MODELS if library.models()[n].published_active_params])
def test_active_params_match_published(name: str) -> None:
    """Active counts are published rounded (3B, 2.4B, 37B): within that rounding plus 1 %. DeepSeek
    counts them without the input embedding table (a lookup), which the model file says."""
    m = library.models()[name]
    arch = _arch(name)
    active = arch.active_param_count() - (
        arch.vocab_size * arch.hidden_size if m.active_excludes_embeddings else 0
    )
    published = m.published_active_params
    assert published is not None
    assert abs(active - published) <= _rounding(published) + 0.01 * published
    assert arch.is_moe and active < arch.param_count()


def test_every_family_is_in_the_library() -> None:
    types = {m.config["model_type"] for m in library.models().values()}
    assert {
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "gemma2",
        "gemma3_text",
        "phi3",
        "gpt2",
        "gptj",
        "gpt_neox",
        "falcon",
        "chatglm",
        "baichuan",
        "internlm2",
        "olmo",
        "ernie4_5",
        "bert",
        "roberta",
        "deberta-v2",
        "vit",
        "mixtral",
        "qwen3_moe",
        "qwen2_moe",
        "deepseek_v2",
        "deepseek_v3",
        "olmoe",
        "ernie4_5_moe",
    } <= types


def test_unknown_names_get_the_nearest() -> None:
    with pytest.raises(FitbenchError) as exc:
        library.get_model("qwen2.5-7b-instuct")
    assert "qwen2.5-7b-instruct" in (exc.value.hint or "")


def test_hub_ids_are_accepted() -> None:
    assert library.find("Qwen/Qwen2.5-7B-Instruct") is library.models()["qwen2.5-7b-instruct"]


def test_workload_round_trips_through_json() -> None:
    for name in ("deepseek-v3", "gemma-2-9b-it", "mixtral-8x7b-instruct"):
        w = library.workload_for_model(name)
        back = Workload.from_dict(json.loads(json.dumps(w.to_dict())))
        assert back == w
        moe = isinstance(w.arch, TransformerArch) and w.arch.is_moe
        assert (back.to_dict()["active_params"] < back.to_dict()["params"]) == moe


def test_mla_cache_is_latent_plus_rotary_key() -> None:
    w = library.workload_for_model("deepseek-v3", batch_size=2, prompt_tokens=1000, new_tokens=24)
    assert kv_cache.kv_cache_bytes(w) == 2 * 61 * 1024 * (512 + 64) * 2


def test_sliding_layers_hold_the_window_or_the_prompt() -> None:
    """Gemma-2: 21 of 42 layers slide over 4096 tokens. transformers' DynamicSlidingWindowLayer keeps
    a view of the last 4095 tokens of a 4096-token tensor while decoding, and after a longer
    prefill a view into the whole prompt's K/V: the peak is the larger moment."""
    arch = _arch("gemma-2-9b-it")
    per_token = 2 * arch.kv_dim * 2
    decoding = library.workload_for_model("gemma-2-9b-it", prompt_tokens=3000, new_tokens=5000)
    assert kv_cache.kv_cache_bytes(decoding) == (21 * 8000 + 21 * 4096) * per_token
    prefill = library.workload_for_model("gemma-2-9b-it", prompt_tokens=8000, new_tokens=100)
    assert kv_cache.kv_cache_bytes(prefill) == 42 * 8000 * per_token
    short = library.workload_for_model("gemma-2-9b-it", prompt_tokens=100, new_tokens=100)
    assert kv_cache.kv_cache_bytes(short) == 42 * 200 * per_token


def test_distinct_experts() -> None:
    assert expected_distinct_experts(8, 2, 1) == 2
    assert math.isclose(expected_distinct_experts(8, 2, 2), 8 * (1 - 0.75**2))
    assert expected_distinct_experts(64, 6, 4096) == pytest.approx(64)


def _decode_expert_bytes(w: Workload) -> float:
    ks = transformer_cost.forward_kernels(w, w.batch_size, 1, kv_len=100)
    return next(k.bytes for k in ks if k.name == "experts")


def test_decode_reads_distinct_experts_and_computes_active_ones() -> None:
    one = library.workload_for_model("mixtral-8x7b-instruct", batch_size=1)
    four = library.workload_for_model("mixtral-8x7b-instruct", batch_size=4)
    arch = _arch("mixtral-8x7b-instruct")
    expert = 3 * arch.hidden_size * arch.expert_intermediate_size * 2
    assert _decode_expert_bytes(one) == pytest.approx(2 * expert, rel=1e-3)
    assert _decode_expert_bytes(four) == pytest.approx(8 * (1 - 0.75**4) * expert, rel=1e-3)
    flops = {k.name: k.flops for k in transformer_cost.forward_kernels(one, 1, 1, kv_len=100)}
    assert flops["experts"] == 2.0 * 2 * 3 * arch.hidden_size * arch.expert_intermediate_size


def test_moe_weights_hold_every_expert() -> None:
    from fitbench.estimate.weights import weight_bytes

    w = library.workload_for_model("qwen3-30b-a3b")
    assert weight_bytes(w)[0] == w.param_count() * 2


@pytest.mark.parametrize("name", ["mixtral-8x7b-instruct", "deepseek-v3", "qwen3-30b-a3b"])
def test_tensor_parallel_gpus_hold_their_share_of_every_expert(name: str) -> None:
    from fitbench.estimate.distributed import tp_params_per_gpu

    arch = _arch(name)
    assert tp_params_per_gpu(arch, 1) == pytest.approx(arch.param_count())
    share = tp_params_per_gpu(arch, 8) / arch.param_count()
    assert 1 / 8 <= share < 1 / 8 + 0.02
