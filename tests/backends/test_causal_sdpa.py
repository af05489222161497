"""The tuned decoder's mask-free causal SDPA computes what transformers' masked attention does."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fitbench.backends.torch.causal_sdpa import CAUSAL_SDPA, use_causal_sdpa  # noqa: E402
from fitbench.backends.torch.models import build_decoder  # noqa: E402
from fitbench.workloads.presets import TINY_LLAMA  # noqa: E402


def _logits(attention: str, *, causal_sdpa: bool, compiled: bool = False) -> torch.Tensor:
    torch.manual_seed(0)
    model, _ = build_decoder(TINY_LLAMA, attention=attention, device=torch.device("cpu"), dtype=torch.float32)
    if causal_sdpa:
        assert use_causal_sdpa(model, sliding_layers=0) is None
        assert model.config._attn_implementation == CAUSAL_SDPA
    ids = torch.randint(0, TINY_LLAMA.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))

    def forward(x: torch.Tensor) -> torch.Tensor:
        return model(input_ids=x, use_cache=False).logits

    run = torch.compile(forward, backend="aot_eager") if compiled else forward
    return run(ids).detach()


def test_mask_free_causal_sdpa_equals_the_eager_masked_attention():
    """Against eager attention (an explicit causal mask): a non-causal kernel would differ."""
    reference = _logits("eager", causal_sdpa=False)
    assert torch.allclose(_logits("sdpa", causal_sdpa=True), reference, atol=1e-4, rtol=1e-4)


def test_mask_free_causal_sdpa_holds_under_torch_compile():
    """Traced by dynamo (as the compiled tuned step is), it stays causal."""
    reference = _logits("eager", causal_sdpa=False)
    got = _logits("sdpa", causal_sdpa=True, compiled=True)
    assert torch.allclose(got, reference, atol=1e-4, rtol=1e-4)


def test_sliding_window_models_keep_their_mask():
    torch.manual_seed(0)
    model, _ = build_decoder(TINY_LLAMA, attention="sdpa", device=torch.device("cpu"), dtype=torch.float32)
    why = use_causal_sdpa(model, sliding_layers=2)
    assert why is not None and "sliding" in why
    assert model.config._attn_implementation == "sdpa"
