"""benchmarks/peak_blocks.py's replay of a caching-allocator trace (the shape
torch.cuda.memory._snapshot()['device_traces'] gives): the allocated peak of the recorded step
and the blocks alive there, each named by its innermost frames outside torch."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import peak_blocks  # imports torch only inside main


def _alloc(addr: int, size: int, where: str = "model.py") -> dict:
    frames = [
        {"filename": "/site-packages/torch/nn/modules/module.py", "line": 1, "name": "_call_impl"},
        {"filename": f"/src/{where}", "line": 7, "name": "forward"},
    ]
    return {"action": "alloc", "addr": addr, "size": size, "frames": frames}


def _free(addr: int) -> list[dict]:
    return [{"action": "free_requested", "addr": addr}, {"action": "free_completed", "addr": addr}]


def test_the_peak_is_the_most_alive_at_once_and_lists_those_blocks() -> None:
    trace = [
        _alloc(1, 100, "logits.py"),
        _alloc(2, 300, "loss.py"),
        *_free(1),
        _alloc(3, 50),
        *_free(2),
        _alloc(4, 320, "backward.py"),  # 370 alive: below the 400 peak
    ]
    result = peak_blocks.peak_blocks(trace)
    assert result["step_peak_bytes"] == 400
    assert [b["bytes"] for b in result["blocks"]] == [300, 100]
    assert result["blocks"][0]["frames"] == "loss.py:7 forward"  # torch's own frames left out
    assert result["blocks_alive"] == 2


def test_a_free_of_a_block_from_before_the_step_is_ignored() -> None:
    trace = [*_free(99), _alloc(1, 10), _alloc(2, 20)]
    assert peak_blocks.peak_blocks(trace)["step_peak_bytes"] == 30
