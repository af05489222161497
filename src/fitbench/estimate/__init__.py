"""The offline estimator: pure functions from (Workload, GpuSpec) to named breakdowns and times.

memory.py   bytes: weights, gradients, optimizer state, activations, KV cache, overheads
speed.py    seconds: a per-kernel roofline plus host overhead, and the bottleneck
verdict.py  fits / tight / oom and the largest batch that fits
api.py      `estimate()` assembling the three into an `Estimate`
profile.py  efficiencies and framework constants (data in profiles.toml, with provenance)
"""
