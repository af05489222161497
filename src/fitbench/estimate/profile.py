"""Efficiency profiles: the estimator's only tunable constants, stored as data with provenance."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

from fitbench.errors import FitbenchError

BUILTIN = Path(__file__).with_name("profiles.toml")


@dataclass(frozen=True, kw_only=True)
class Profile:
    """How efficiently one framework in one execution mode uses a GPU (see profiles.toml)."""

    framework: str
    exec_mode: str
    matmul_efficiency: float
    conv_efficiency: float
    attention_efficiency: float
    memory_efficiency: float
    kernel_floor_seconds: float
    host_seconds_per_op: float
    generate_host_seconds_per_op: float
    context_bytes: int
    workspace_bytes: int
    fragmentation: float
    fragmentation_cnn: float
    overlap_loss: float
    provenance: str = ""

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def user_profile_path() -> Path:
    """Where `fitbench calibrate` keeps values fitted on this machine."""
    home = os.environ.get("FITBENCH_HOME")
    base = (
        Path(home)
        if home
        else Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "fitbench"
    )
    return base / "profiles.toml"


@cache
def _load(path: Path) -> dict[str, dict[str, dict[str, object]]]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FitbenchError(
            f"cannot read efficiency profile {path}: {exc}",
            "fix or delete the file; `fitbench calibrate` writes it again",
        ) from None


def get_profile(framework: str = "torch", exec_mode: str = "default", *, use_user: bool = True) -> Profile:
    """Built-in constants, overridden key by key by the user's calibrated file when present."""
    builtin = _load(BUILTIN)
    if framework not in builtin:
        framework = "torch"
    table = builtin[framework].get(exec_mode) or builtin[framework]["default"]
    values = dict(table)
    if use_user and not os.environ.get("FITBENCH_NO_USER_PROFILE"):
        values.update(_load(user_profile_path()).get(framework, {}).get(exec_mode, {}))
    allowed = {f.name for f in fields(Profile)} - {"framework", "exec_mode"}
    return Profile(
        framework=framework, exec_mode=exec_mode, **{k: v for k, v in values.items() if k in allowed}
    )
