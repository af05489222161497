"""The measuring child's generation figures, from a real tiny decoder on the CPU."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from fitbench.backends.base import RunOptions
from fitbench.measure import child, runner
from fitbench.workloads.presets import get_workload

pytestmark = pytest.mark.torch


@pytest.mark.slow
def test_the_decode_step_is_also_measured_by_differencing(tmp_path):
    workload = get_workload("llm-6b", tiny=True, new_tokens=16)
    request = runner.build_request(
        workload,
        "torch",
        RunOptions(device="cpu"),
        min_steps=2,
        min_seconds=0.0,
        warmup=1,
        max_seconds=60.0,
        workdir=tmp_path,
    )
    m = child.run_request(request)
    assert m["status"] == "ok", m.get("error")
    one = m["one_token_generate_seconds"]
    assert len(m["step_samples_seconds"]) >= 2
    assert m["generate_call_overhead_seconds"] == pytest.approx(one - m["prefill_seconds"])
    # 15 decode steps separate a 16-token generation from a one-token one; on a busy CPU the
    # difference of a tiny model can be lost in the noise, and is then recorded as not measured
    difference = (m["step_seconds"] - one) / 15
    if difference > 0:
        assert m["decode_step_seconds"] == pytest.approx(difference)
        assert "decode_step_seconds" in m["spreads"]
    else:
        assert m["decode_step_seconds"] is None and "decode_step_seconds" not in m["spreads"]
    if m["step_seconds"] > m["prefill_seconds"]:
        assert m["decode_seconds"] == pytest.approx(m["step_seconds"] - m["prefill_seconds"])
    else:  # the same rule, for a generation lost in the noise of a busy CPU
        assert m["decode_seconds"] is None and any("not measurably slower" in x for x in m["warnings"])
