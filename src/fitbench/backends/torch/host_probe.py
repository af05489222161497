"""How fast this process's host issues eager PyTorch calls: the host-speed probe.

A host-bound step (Hugging Face `generate`, a LoRA or small-batch training step) costs what the
host spends issuing its operations, and the estimator charges per-operation constants fitted on
the machines of its calibration (profiles.toml). Another machine's CPU, or the same machine on
another day, issues them faster or slower, so a measurement is only comparable with an estimate
once this host's speed is known. The probe times a few Python-level calls on the run's device
with tiny tensors (the device keeps up, so only the host is timed), in the process that measures
the workload: `fitbench run`'s child records one round before the timed steps and one after
(fitbench.measure.host_speed), and benchmarks/host_ops.py prints the same calls beside others.

One probe round is the sum of the four calls' median seconds per call; profiles.toml's
`host_probe_reference_seconds` is a round on the calibration machines.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

# Calls per timed loop and timed loops per call: a round takes ~0.1 s on an H200 host.
PROBE_CALLS = 500
PROBE_REPEATS = 5
PROBE_NAMES = ("F.linear (autograd on)", "nn.Linear module call", "torch.add", "Tensor.view")


def device_sync(device: str | torch.device) -> Callable[[], None]:
    """Wait for the device's queued work (nothing to wait for on a CPU)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return lambda: torch.cuda.synchronize(dev)
    return lambda: None


def host_seconds(fn: Callable[[], object], sync: Callable[[], None], *, calls: int, repeats: int) -> float:
    """Median host seconds per call of `fn` over `repeats` loops of `calls` calls, timed on the
    host alone (the device is synchronised before each loop, not inside it)."""
    for _ in range(max(1, calls // 10)):  # warm-up: allocator blocks, autocast state, lazy inits
        fn()
    sync()
    per_call = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) / calls)
    sync()
    return statistics.median(per_call)


def probe_inputs(device: str | torch.device) -> tuple[torch.Tensor, torch.nn.Linear]:
    """The probe's tensors: an fp32 8 x 64 input and a 64 -> 64 Linear on `device`."""
    x = torch.randn(8, 64, device=device, dtype=torch.float32)
    return x, torch.nn.Linear(64, 64, device=device, dtype=torch.float32)


def probe_calls(x: torch.Tensor, linear: torch.nn.Linear) -> dict[str, Callable[[], object]]:
    """The four calls of a probe round, by the names the measurement records them under. Each
    goes through Python's argument parsing and the dispatcher; the Linear's leaf parameters make
    autograd record every F.linear and module call (run them under grad mode)."""
    y = torch.randn_like(x)
    w, b = linear.weight, linear.bias
    calls = (lambda: F.linear(x, w, b), lambda: linear(x), lambda: torch.add(x, y), lambda: x.view(64, 8))
    return dict(zip(PROBE_NAMES, calls, strict=True))


def probe(
    device: str | torch.device, *, calls: int = PROBE_CALLS, repeats: int = PROBE_REPEATS
) -> dict[str, float]:
    """One probe round on `device`: median host seconds per call of each of the four calls.

    On a CPU the calls' arithmetic runs on the host too, in torch's intra-op thread pool, whose
    threads wait for each other on every tiny call (on a busy 2-core machine an nn.Linear call
    took 0.5-1.6 ms with 2 threads, 43 us with 1): the round runs on one thread, so that it
    times issuing the calls, as on a GPU, and the previous thread count is restored after it.
    """
    sync = device_sync(device)
    threads = torch.get_num_threads()
    on_cpu = torch.device(device).type == "cpu"
    if on_cpu:
        torch.set_num_threads(1)
    try:
        x, linear = probe_inputs(device)
        with torch.enable_grad():  # a generation session may have turned grad mode off
            return {
                name: host_seconds(fn, sync, calls=calls, repeats=repeats)
                for name, fn in probe_calls(x, linear).items()
            }
    finally:
        if on_cpu:
            torch.set_num_threads(threads)
