"""The measurement's host-speed fields, from the probe rounds taken before and after the timed work.

A backend that can time its host (the torch backend: fitbench.backends.torch.host_probe) gives a
round as {call name: seconds per call}; the child takes one after the model is built and one
after the timed steps or generations, because a host's speed can drift within a process. The
recorded figures are the mean of the two rounds (for two values, also their median), call by
call, so that the parts add up to the total:

  host_probe_seconds   one probe round in seconds (the sum of the parts)
  host_probe_parts     {call name: seconds per call}
  host_probe_drift     the after round's total / the before round's (None with one round)

Pure Python: no framework import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HOST_PROBE_KEYS = ("host_probe_seconds", "host_probe_parts", "host_probe_drift")


def host_probe_fields(
    before: Mapping[str, float] | None, after: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The three fields from the rounds taken (either may be None: not taken); all None if neither."""
    rounds = [r for r in (before, after) if r]
    if not rounds:
        return dict.fromkeys(HOST_PROBE_KEYS)
    names = list(rounds[0])
    parts = {name: sum(float(r[name]) for r in rounds) / len(rounds) for name in names}
    drift = None
    if before and after:
        drift = sum(after.values()) / sum(before.values())
    return {
        "host_probe_seconds": sum(parts.values()),
        "host_probe_parts": parts,
        "host_probe_drift": drift,
    }
