"""The PyTorch backend builds mixture-of-experts and sliding-window decoders read from configs:
the parameters it creates are the estimator's, and a tiny one generates on the CPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fitbench.backends import get_backend  # noqa: E402
from fitbench.backends.base import RunOptions  # noqa: E402
from fitbench.backends.torch.models import build_model, count_parameters  # noqa: E402
from fitbench.errors import FitbenchError  # noqa: E402
from fitbench.workloads import library  # noqa: E402
from fitbench.workloads.hf_config import workload_from_data  # noqa: E402

TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "vocab_size": 256,
    "max_position_embeddings": 512,
}


@pytest.mark.parametrize("name", ["mixtral-8x7b-instruct", "mistral-7b-v0.1"])
def test_real_size_counts_match_on_meta(name: str) -> None:
    workload = library.workload_for_model(name)
    model, _ = build_model(workload, device="meta")
    assert count_parameters(model) == workload.param_count()
    config = model.config
    assert config.sliding_window == workload.arch.sliding_window


def test_families_it_cannot_build_are_one_clear_error() -> None:
    with pytest.raises(FitbenchError, match="cannot build"):
        build_model(library.workload_for_model("deberta-v3-base"), device="meta")


@pytest.mark.parametrize(
    "config",
    [
        {**TINY, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2},
        {**TINY, "model_type": "mistral", "sliding_window": 8},
    ],
)
def test_tiny_models_generate_on_the_cpu(config: dict) -> None:
    workload = workload_from_data(
        config, name="tiny", source="test", precision="fp32", batch_size=2, prompt_tokens=12, new_tokens=6
    )
    session = get_backend("torch").open(workload, RunOptions(device="cpu"))
    assert session.notes["params"] == workload.param_count()
    session.step()
    session.sync()


def test_sliding_cache_storage_is_what_the_estimator_counts() -> None:
    """transformers' DynamicSlidingWindowLayer keeps a view: the whole prompt's storage after a
    longer prefill, a window-long tensor once decoding (TransformerArch.cached_tokens)."""
    import transformers

    config = {**TINY, "model_type": "mistral", "sliding_window": 8}
    workload = workload_from_data(
        config, name="w", source="test", precision="fp32", prompt_tokens=20, new_tokens=3
    )
    model, _ = build_model(workload, device="cpu")
    assert isinstance(model.config, transformers.MistralConfig)

    def slots(cache) -> int:  # token slots the first layer's key storage holds
        keys = cache.layers[0].keys
        return keys.untyped_storage().nbytes() // (keys.element_size() * keys.shape[1] * keys.shape[3])

    arch = workload.arch
    with torch.no_grad():
        out = model(torch.randint(0, 256, (1, 20)), use_cache=True)
        assert slots(out.past_key_values) == 20 == arch.cached_tokens(20, 20) / arch.num_layers
        out = model(out.logits[:, -1:].argmax(-1), past_key_values=out.past_key_values, use_cache=True)
        assert slots(out.past_key_values) == 8 == arch.cached_tokens(21, 0) / arch.num_layers
