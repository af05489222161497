"""Causal SDPA without a materialised mask, for the tuned decoder training step.

transformers hands `F.scaled_dot_product_attention` `is_causal=True` and no mask only when it
can prove the mask is plain causal (`masking_utils._ignore_causal_mask_sdpa`): no padding, and
not while tracing. Releases before 5.2x count CUDA-stream capture and torch.compile as tracing,
so a decoder step captured in a CUDA graph (the tuned mode) builds the full (batch, 1, seq, seq)
causal mask and SDPA runs the mask-taking kernel over the whole score square: on an H200 the
Llama-3.2-1B step at seq 2048 spent 29.6 ms a step in cuDNN's attention, where the same shapes
with `is_causal=True` take 15.2 ms (benchmarks/results/sdpa-backends-h200-2026-12-04.json and
compiled-step-profile-h200-2026-12-04.json).

The tuned step's batches are synthetic and unpadded, so the mask is known to be plain causal.
This registers an attention implementation with transformers' AttentionInterface that is its
own SDPA function called without a mask (so `is_causal` follows the module, as for the default
path's eager step), and a mask function that builds none (newer releases skip the mask of an
implementation the mask registry does not know; older ones look it up). Sliding-window layers
need their band mask and are left alone.
"""

from __future__ import annotations

from typing import Any

CAUSAL_SDPA = "fitbench_causal_sdpa"


def _causal_sdpa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
    """transformers' SDPA attention with no mask: causal by the module's `is_causal`."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, None, **kwargs)


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """The mask function of CAUSAL_SDPA: none (the attention is causal by `is_causal`)."""
    return None


# transformers models whose attention tests `_attn_implementation == "sdpa"` and calls SDPA
# itself: any other implementation name sends them down their eager branch.
OWN_SDPA_CALL_TYPES = ("falcon",)


def use_causal_sdpa(model: Any, *, sliding_layers: int) -> str | None:
    """Switch a transformers decoder to mask-free causal SDPA; the reason it was not, or None.

    Only for unpadded batches (the tuned mode's synthetic ones) and models without sliding-window
    layers; a transformers without AttentionInterface keeps its SDPA."""
    if sliding_layers:
        return "sliding-window layers need their mask"
    if getattr(getattr(model, "config", None), "model_type", "") in OWN_SDPA_CALL_TYPES:
        return "its attention calls SDPA itself, not through transformers' AttentionInterface"
    try:
        from transformers import AttentionInterface
    except ImportError:
        return "this transformers has no AttentionInterface"
    AttentionInterface.register(CAUSAL_SDPA, _causal_sdpa)
    try:  # releases that look every implementation up in the mask registry: build no mask
        from transformers import AttentionMaskInterface

        AttentionMaskInterface.register(CAUSAL_SDPA, _no_mask)
    except ImportError:
        pass
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        setter(CAUSAL_SDPA)
    else:
        model.config._attn_implementation = CAUSAL_SDPA
    return None
