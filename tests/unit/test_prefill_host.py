"""A generation's prefill: the host issues the decode step's Python-level calls (the same forward
code and loop iteration, generate_ops) at the generation's cost per call, while the GPU runs the
prompt's kernels. Held against the stored H200 prefills of Hugging Face generate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import generate_ops, speed
from fitbench.estimate.profile import get_profile, host_scaled_profile
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
H200 = get_gpu("h200")


def test_prefill_host_is_the_decode_steps_calls_at_the_generation_rate() -> None:
    profile = get_profile("torch", "default", use_user=False)
    w = get_workload("llm-6b")
    gen = speed.generation(w, H200, profile)
    calls = generate_ops.decode_step_calls(w.arch, w.prompt_tokens, profile.transformers_version)
    assert gen.prefill.host_seconds == pytest.approx(calls * profile.generate_host_seconds_per_op)
    # a longer prompt: more GPU work, the same calls
    longer = speed.generation(w.replace(prompt_tokens=4 * w.prompt_tokens), H200, profile)
    assert longer.prefill.host_seconds == pytest.approx(gen.prefill.host_seconds, rel=0.02)
    assert longer.prefill.gpu_seconds > gen.prefill.gpu_seconds


def test_stored_h200_prefills_within_twenty_percent() -> None:
    """llm-6b generate at batch 1-48 (accuracy-h200-2026-12-02.json): a prefill of 50 tokens took
    21-72 ms; counted as kernel operations at the training steps' host rate it read 95-109 ms.
    Held at the host those runs fitted (their round is the profile's reference)."""
    base = get_profile("torch", "default", use_user=False)
    profile = host_scaled_profile(base, base.host_probe_reference_seconds)
    points = json.loads((RESULTS / "accuracy-h200-2026-12-02.json").read_text())["points"]
    scored = 0
    for p in points:
        w = Workload.from_dict(p["workload"])
        measured = p["measurement"].get("prefill_seconds")
        if not w.is_generation or not measured:
            continue
        est = speed.generation(w, H200, profile).prefill.seconds
        assert abs(est / measured - 1) <= 0.20, (p["label"], est, measured)
        scored += 1
    assert scored >= 6
