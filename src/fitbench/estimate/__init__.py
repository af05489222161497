"""The offline estimator: pure functions from (Workload, GpuSpec) to named breakdowns and times.

One road, every import pointing down it (tests/unit/test_estimate_imports.py holds it):

    execution.py   the job as a mode runs it (precision as run, the optimizer it uses)
    memory.py      bytes: single_device.py, or peft.py, then sharding.py for one GPU of several
    timing.py      seconds: speed.py, or peft_speed.py, then communication.py for several GPUs
    limits.py      the largest batch, the longest context, the fewest GPUs (verdict.py's ladder)
    api.py         `estimate()` assembling them into an `Estimate`
    profile.py     efficiencies and framework constants (data in profiles.toml, with provenance)
"""

from __future__ import annotations

import sys
import types
from typing import Any

import fitbench


class _CallablePackage(types.ModuleType):
    """This package, callable as `fitbench.estimate(...)`.

    Python binds a loaded subpackage as its parent's attribute, so once anything imports
    fitbench.estimate, the name `fitbench.estimate` is this package rather than the public
    function of the same name; calling the package calls that function (fitbench.estimate_preset).
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return fitbench.estimate_preset(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
