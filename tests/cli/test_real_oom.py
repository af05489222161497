"""One real allocator out-of-memory through the child, the runner and the CLI, end to end.

No GPU here, so the memory is capped the way a container caps it: the address space of the
`fitbench run` process (RLIMIT_AS), which its measuring child inherits. A tiny ResNet at batch
6,000 needs more than that for its activations; PyTorch's CPU allocator refuses ("DefaultCPUAllocator: can't
allocate memory"), the backend's is_oom recognises it, the child writes an `oom` result, the
runner reads it and the CLI stores and prints it as a verdict. Nothing in fitbench is told.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.slow]

# Room for Python, torch and a tiny model (about 0.7 GiB of address space), not for the batch.
CAP_BYTES = int(1.5 * 2**30)
# The inputs are prepared before anything is timed (backends/input_pipeline.py): the batch is
# small enough that its 74 MB of images fit, and large enough that its activations do not, so the
# allocator refuses inside the step (at batch 8,000 it already refuses while preparing the inputs).
BATCH = 6_000


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, resource.RLIM_INFINITY))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS caps allocations on Linux")
def test_an_allocator_out_of_memory_is_an_oom_verdict_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    argv = [
        sys.executable,
        "-m",
        "fitbench",
        "run",
        "resnet50-cifar10",
        "--tiny",
        "--backend",
        "torch",
        "--device",
        "cpu",
        "--batch",
        str(BATCH),
        "--min-steps",
        "1",
        "--warmup",
        "0",
        "--min-seconds",
        "0",
        "--json",
        "--db",
        str(db),
    ]
    proc = subprocess.run(argv, preexec_fn=_capped, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    m = json.loads(proc.stdout)["measurement"]
    assert m["status"] == "oom", m.get("error")
    assert m["error"] == f"out of memory at batch {BATCH} (phase: step)"
    assert "can't allocate memory" in m["oom_detail"]  # PyTorch's own CPU allocator said so
    assert m["load_seconds"] is not None and 0 < m["peak_memory_bytes"] < CAP_BYTES

    history = subprocess.run(
        [sys.executable, "-m", "fitbench", "history", "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    runs = json.loads(history.stdout)
    assert [(r["status"], r["batch_size"]) for r in runs] == [("oom", BATCH)]
