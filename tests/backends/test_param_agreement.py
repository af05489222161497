"""Estimator, PaddlePaddle backend and PyTorch backend count the same parameters, exactly.

If the three disagree, estimate and measurement describe different models and every
comparison between them is meaningless; this is the test that rules it out, for the brief's
three scenarios at real size and for their tiny variants.

Paddle and Torch never share a process in fitbench, so the PyTorch counts come from a child
Python (one for all workloads), built under ``torch.device("meta")`` so that Llama-7B's
6.7 billion parameters cost shapes, not 27 GB. Paddle counts through paddle.LazyGuard.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("paddle")

from fitbench.backends import get_backend
from fitbench.workloads.presets import SCENARIOS, get_workload

pytestmark = pytest.mark.paddle

# Real size: the brief's three models; expected counts pinned from the reference implementations.
PINNED = {"resnet50-cifar10": 23_528_522, "bert-base-imdb": 109_483_778, "llm-6b": 6_738_415_616}
CASES = {
    f"{name}{suffix}": get_workload(name, tiny=tiny)
    for name in SCENARIOS
    for suffix, tiny in (("", False), ("/tiny", True))
}

MARK = "FITBENCH-COUNTS "
TORCH_CHILD = textwrap.dedent(f"""
    import json, sys
    from fitbench.workloads.workload import Workload
    requests = json.loads(sys.stdin.read())
    import torch
    from fitbench.backends import get_backend
    count = get_backend("torch").param_count
    counts = {{}}
    for key, data in requests.items():
        try:
            with torch.device("meta"):
                counts[key] = count(Workload.from_dict(data))
        except Exception as exc:
            counts[key] = f"{{type(exc).__name__}}: {{exc}}"
    print({MARK!r} + json.dumps({{"counts": counts, "paddle_loaded": "paddle" in sys.modules}}))
""")


@pytest.fixture(scope="module")
def torch_counts() -> dict[str, object]:
    """PyTorch backend counts from a separate Python process (skipped only without PyTorch: a
    fitbench module that fails to import there fails the test)."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed")
    requests = {key: workload.to_dict() for key, workload in CASES.items()}
    proc = subprocess.run(
        [sys.executable, "-c", TORCH_CHILD],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    assert proc.returncode == 0 and lines, f"torch child failed:\n{proc.stderr[-3000:]}"
    result = json.loads(lines[-1][len(MARK) :])
    assert result["paddle_loaded"] is False, "the torch child imported paddle"
    return result["counts"]


@pytest.mark.parametrize("key", list(CASES))
def test_paddle_backend_agrees_with_the_estimator(key):
    workload = CASES[key]
    paddle_count = get_backend("paddle").param_count(workload)
    assert paddle_count == workload.arch.param_count()
    if key in PINNED:
        assert paddle_count == PINNED[key]


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("key", list(CASES))
def test_torch_backend_agrees_with_estimator_and_paddle(key, torch_counts):
    workload = CASES[key]
    estimator = workload.arch.param_count()
    paddle_count = get_backend("paddle").param_count(workload)
    torch_count = torch_counts[key]
    assert isinstance(torch_count, int), f"the PyTorch backend could not count {key}: {torch_count}"
    assert torch_count == estimator == paddle_count
