"""Efficiency profiles: the estimator's only tunable constants, stored as data with provenance."""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

from fitbench.errors import FitbenchError, unknown_name

BUILTIN = Path(__file__).with_name("profiles.toml")
# Fractions of a datasheet peak: the speed model divides by them.
_EFFICIENCIES = (
    "matmul_efficiency",
    "conv_efficiency",
    "attention_efficiency",
    "memory_efficiency",
    "decode_memory_efficiency",
    "bn_native_nchw_efficiency",
)
# Execution modes a framework runs with another mode's table, and why. Paddle's `tuned` changes
# what runs (AMP O2 precision, which fitbench.estimate.execution applies to the workload, and
# multi-tensor Adam/Momentum updates: fitbench.backends.paddle.session) but still launches every
# kernel eagerly from Python like `default` (no CUDA graphs, no paddle.jit.to_static), so default's
# efficiencies and host costs are the honest ones; the reason travels in the profile's
# provenance, which the estimate's assumptions quote.
SHARED_TABLES: dict[tuple[str, str], tuple[str, str]] = {
    ("paddle", "tuned"): (
        "default",
        "Paddle's default profile (its tuned mode changes the precision to AMP O2 and the optimizer "
        "to a multi-tensor update, but launches kernels eagerly like default, so default's "
        "efficiencies and host costs apply)",
    ),
}


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
    # A memory-bound kernel's fixed GPU time (launch, ramp-up, tail) beside its bytes at the
    # streaming bandwidth; independent of the card's bandwidth.
    kernel_fixed_seconds: float = 0.0
    host_seconds_per_op: float
    generate_host_seconds_per_op: float
    context_bytes: int
    workspace_bytes: int
    fragmentation: float
    fragmentation_cnn: float
    overlap_loss: float
    kv_growth_stale_share: float = 0.0
    autocast_cache_share: float = 1.0
    cast_host_share: float = 1.0  # an autocast cast's host cost / host_seconds_per_op
    # Host time of one fp8 Linear in an eager decode step (its Triton launch), in Python-level
    # torch calls (generate_host_seconds_per_op); 1.0: as a 16-bit Linear's F.linear.
    fp8_linear_host_calls: float = 1.0
    decode_memory_efficiency: float | None = None  # None: the decode step streams like any kernel
    # Bandwidth share of PyTorch's native NCHW batch-norm kernels (estimate/resnet_cost.py);
    # None: memory_efficiency.
    bn_native_nchw_efficiency: float | None = None
    # One host-speed probe round (fitbench.backends.torch.host_probe) on the machines the host
    # constants were fitted on, in seconds; None: unknown. A measurement records its own round as
    # host_probe_seconds, so that an estimate can be held against it at that host's speed.
    host_probe_reference_seconds: float | None = None
    provenance: str = ""

    @property
    def decode_efficiency(self) -> float:
        """The bandwidth share of a generation's decode step (its own kernels where it has them)."""
        own = self.decode_memory_efficiency
        return self.memory_efficiency if own is None else own

    def in_force(self, key: str) -> float:
        """The value the estimator uses for `key` (an absent decode share is memory_efficiency)."""
        return self.decode_efficiency if key == "decode_memory_efficiency" else getattr(self, key)

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
            message_zh=f"无法读取效率配置文件 {path}:{exc}",
            hint_zh="请修正或删除该文件;`fitbench calibrate` 会重新写出它",
        ) from None


def forget_loaded() -> None:
    """Drop the profile files read so far, so the next get_profile reads them again (after
    `fitbench calibrate` rewrites the user's copy)."""
    _load.cache_clear()


def exec_modes(framework: str) -> tuple[str, ...]:
    """The execution modes `framework` has a profile for (its own table or a shared one)."""
    builtin = _load(BUILTIN)
    if framework not in builtin:
        raise unknown_name("framework", framework, builtin, kind_zh="框架")
    shared = (mode for fw, mode in SHARED_TABLES if fw == framework)
    return tuple(sorted({*builtin[framework], *shared}))


def get_profile(framework: str = "torch", exec_mode: str = "default", *, use_user: bool = True) -> Profile:
    """Built-in constants, overridden key by key by the user's calibrated file when present.

    An unknown framework or exec mode is an error, not another table's numbers: an estimate
    that silently used torch's or the default mode's efficiencies would present them as the
    requested mode's. The only stand-ins are the explicit SHARED_TABLES, whose provenance says so.
    """
    builtin = _load(BUILTIN)
    if exec_mode not in exec_modes(framework):
        raise unknown_name(
            f"{framework} exec mode", exec_mode, exec_modes(framework), kind_zh=f" {framework} 执行模式"
        )
    table_mode, note = SHARED_TABLES.get((framework, exec_mode), (exec_mode, ""))
    values = dict(builtin[framework][table_mode])
    if use_user:
        path = user_profile_path()
        user = _load(path).get(framework, {})
        # A calibration of the mode itself wins over one of the table it shares.
        if isinstance(user, dict) and exec_mode in user:
            table_mode, note = exec_mode, ""
        values.update(_checked(user, table_mode, path))
    if note:
        values["provenance"] = f"{note}: {values.get('provenance') or 'profiles.toml'}"
    allowed = {f.name for f in fields(Profile)} - {"framework", "exec_mode"}
    return Profile(
        framework=framework, exec_mode=exec_mode, **{k: v for k, v in values.items() if k in allowed}
    )


def _checked(modes: object, exec_mode: str, path: Path) -> dict[str, object]:
    """The user's values for `exec_mode`, refused with a one-line error when a hand edit broke
    them (a string, a negative time, a zero efficiency the speed model would divide by)."""
    hint = "fix or delete the file; `fitbench calibrate` writes it again"
    hint_zh = "请修正或删除该文件;`fitbench calibrate` 会重新写出它"
    table = modes.get(exec_mode, {}) if isinstance(modes, dict) else None
    if not isinstance(table, dict):
        raise FitbenchError(
            f"efficiency profile {path}: expected a table per framework and mode",
            hint,
            message_zh=f"效率配置文件 {path}:每个框架和模式下应为一个表",
            hint_zh=hint_zh,
        )
    for key, value in table.items():
        if key == "provenance":
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not number or value < 0 or (key in _EFFICIENCIES and value == 0):
            raise FitbenchError(
                f"efficiency profile {path}: {key} = {value!r} is not a usable value",
                hint,
                message_zh=f"效率配置文件 {path}:{key} = {value!r} 不是可用的值",
                hint_zh=hint_zh,
            )
    return table
