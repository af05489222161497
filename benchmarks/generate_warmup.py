"""Where the first generation of a `fitbench run` goes: cProfile of generate's first call.

`fitbench check` spends most of its generation scenario in the warm-up: on an H200 the default
mode's first 100-token generation of the 6.7B model took 7.1 s against 1.9 s for the next ones
(`benchmarks/results/check-wall-*.json`, phase "warm-up"). This script opens the default-mode
session as the child process does, times three generations, and prints the functions the first
one spent its time in (by own time), which names what only the first call pays.

    PYTHONPATH=src python benchmarks/generate_warmup.py            # llm-6b on the local GPU, ~30 s
    PYTHONPATH=src python benchmarks/generate_warmup.py --cpu --tiny   # smoke test
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

TOP = 18  # functions printed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", default="llm-6b", help="a generation preset")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU")
    parser.add_argument("--tiny", action="store_true", help="the preset's tiny variant")
    args = parser.parse_args(argv)
    from fitbench.backends.base import RunOptions
    from fitbench.backends.torch.session import open_default
    from fitbench.workloads.presets import get_workload

    device = "cpu" if args.cpu else "cuda"
    started = time.perf_counter()
    session = open_default(get_workload(args.workload, tiny=args.tiny), RunOptions(device=device))
    session.sync()
    print(f"open {time.perf_counter() - started:.2f} s")
    profiler = cProfile.Profile()
    for i in range(3):
        started = time.perf_counter()
        if i == 0:
            profiler.enable()
        session.step()
        session.sync()
        if i == 0:
            profiler.disable()
        print(f"generation {i + 1}: {time.perf_counter() - started:.3f} s")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(TOP)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    print("first generation, by own time:")
    print("\n".join(line[:150] for line in lines[start : start + TOP + 1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
