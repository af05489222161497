"""The largest moment of a forward pass without autograd (a prefill's scratch), measured on the
CPU with LiveTensors (every tensor an operator creates, alive at once) against the estimator's
inference_transient_bytes, for mixture-of-experts blocks as transformers 5 runs them: k routed
copies of each token, each with its expert's gate_up output, activation and product."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from fitbench.backends.torch.live_tensors import LiveTensors  # noqa: E402
from fitbench.backends.torch.models import build_model  # noqa: E402
from fitbench.estimate import transformer_cost  # noqa: E402
from tiny_families import tiny_workload  # noqa: E402

pytestmark = pytest.mark.torch


def forward_peak(workload, dtype) -> int:
    torch.manual_seed(0)
    model, _ = build_model(workload, device="cpu", dtype=dtype)
    model.eval()
    ids = torch.randint(0, workload.arch.vocab_size, (workload.batch_size, workload.prompt_tokens))
    with torch.no_grad(), LiveTensors() as live:
        model(input_ids=ids, use_cache=False, logits_to_keep=1)
    return live.peak


@pytest.mark.parametrize("name", ["mixtral-8x7b-instruct", "olmoe-1b-7b"])
@pytest.mark.parametrize(("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_moe_prefill_scratch_is_the_routed_copies(name: str, precision: str, dtype) -> None:
    w = tiny_workload(name, mode="infer", batch_size=4, prompt_tokens=256, new_tokens=1, precision=precision)
    measured = forward_peak(w, dtype)
    assert measured == pytest.approx(transformer_cost.inference_transient_bytes(w), rel=0.06)
    # a dense block of the experts' width would be less than half of it
    dense = (
        w.batch_size
        * w.prompt_tokens
        * (3 * w.arch.expert_intermediate_size * dtype.itemsize + 4 * w.arch.hidden_size * dtype.itemsize)
    )
    assert measured > 2 * dense
