"""Which kernels a checkpointed step runs again, by framework (transformer_cost.recomputed_kernels).

torch's non-reentrant checkpoint (what `fitbench run` asks transformers for) stops once a block's
saved tensors are back, so a Llama block's down projection is not rerun; Paddle's fleet recompute is
reentrant and reruns the whole block. Neither reruns the embedding, the head or the loss. (The
torch side is counted on real models in tests/backends/test_recompute.py.)
"""

from __future__ import annotations

import dataclasses

from fitbench.estimate import speed
from fitbench.estimate.profile import get_profile
from fitbench.workloads import library


def _names(framework: str, checkpointing: bool) -> list[str]:
    w = library.workload_for_model("llama-3.2-1b-instruct").replace(
        mode="train", precision="bf16", seq_len=512, batch_size=2
    )
    w = dataclasses.replace(w, checkpointing=checkpointing)
    return [k.name for k in speed.training_kernels(w, get_profile(framework, "default", use_user=False))]


def test_torch_reruns_all_but_the_down_projection_and_paddle_reruns_the_block() -> None:
    for framework in ("torch", "paddle"):
        plain, checkpointed = _names(framework, False), _names(framework, True)
        for outside in ("lm_head", "lm_loss", "embedding"):
            assert checkpointed.count(outside) == plain.count(outside) == 1, (framework, outside)
        assert checkpointed.count("q_proj") == plain.count("q_proj") + 1, framework
    assert _names("torch", True).count("down_proj") == 1
    assert _names("paddle", True).count("down_proj") == 2
