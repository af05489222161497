"""The offline estimator: pure functions from (Workload, GpuSpec) to named breakdowns and times.

memory.py   bytes: weights, gradients, optimizer state, activations, KV cache, overheads
speed.py    seconds: a per-kernel roofline plus host overhead, and the bottleneck
verdict.py  fits / tight / oom and the largest batch that fits
api.py      `estimate()` assembling the three into an `Estimate`
profile.py  efficiencies and framework constants (data in profiles.toml, with provenance)
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    """This package, callable as `fitbench.estimate(...)`.

    Python binds a loaded subpackage as its parent's attribute, so once anything imports
    fitbench.estimate, the name `fitbench.estimate` is this package rather than the public
    function of the same name; calling the package calls that function (fitbench.estimate_preset).
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from fitbench import estimate_preset

        return estimate_preset(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
