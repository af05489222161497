"""Kernel timing as the tuned step runs kernels: captured in one CUDA graph, replayed, no host.

Eager timing of a short kernel measures its launch (a BERT-sized attention call read ~0.6 ms
eagerly against 0.27 ms in a graph), so the benchmarks that time single kernels capture `calls`
of them in a graph and time its replays with CUDA events. On a CPU the same calls run eagerly.
"""

from __future__ import annotations

import time
from typing import Any

WARMUP_CALLS = 3  # on a side stream before capture, as PyTorch's capture recipe requires


def replay_seconds(fn: Any, device: str, calls: int, replays: int) -> list[float]:
    """Seconds of one call of `fn` in each of `replays` timings of `calls` calls: on CUDA a graph
    of `calls` calls replayed (after one untimed replay); on the CPU `calls` eager calls."""
    import torch

    if not device.startswith("cuda"):
        fn()
        out = []
        for _ in range(replays):
            started = time.perf_counter()
            for _ in range(calls):
                fn()
            out.append((time.perf_counter() - started) / calls)
        return out
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(WARMUP_CALLS):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) * 1e-3 / calls)
    return out
