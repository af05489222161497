"""Fit the estimator's efficiencies to measurements from this machine.

Each constant is fitted only from the measurements that it governs, so the fit stays physical:
  host_seconds_per_op            training/inference steps the estimate calls overhead-bound
  generate_host_seconds_per_op   generation decode steps the estimate calls overhead-bound
  matmul/conv/attention_efficiency  steps the estimate calls compute-bound
  memory_efficiency              steps the estimate calls memory-bound (not decode steps)
  decode_memory_efficiency       generation decode steps the estimate calls memory-bound
  decode_compiled_memory_efficiency  the same, at batches a mode decodes with its other step
                                 (torch.tuned: the compiled step above batch 32, or where a run's
                                 record says that step ran)
  decode_fused_batched_memory_efficiency  the same, at 2 sequences up to the batches the mode's
                                 fused kernels take (torch.tuned: their batched tiles)
  context_bytes                  NVML process memory minus the allocator's reservation
  host_probe_reference_seconds   the median host probe round of the points that fitted
                                 host_seconds_per_op
  generate_host_probe_seconds    the same of the points that fitted generate_host_seconds_per_op
A constant scales by the median ratio of measured to estimated time over its points (one
multiplicative step: the governed term dominates those points by construction). Constants
with no governing point keep their value. The result is written as a user profile
(fitbench.estimate.profile.user_profile_path) that every later estimate reads.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.core.gpu import GpuSpec
from fitbench.errors import FitbenchError
from fitbench.estimate.api import estimate
from fitbench.estimate.execution import features_not_run, without_step_features
from fitbench.estimate.profile import (
    HOST_ROUND_KEYS,
    HOST_TIME_KEYS,
    Profile,
    following_release,
    forget_loaded,
    get_profile,
    user_profile_path,
)
from fitbench.records.measurement import Measurement
from fitbench.workloads.workload import Workload

EFFICIENCY_KEYS = {
    "compute": ("matmul_efficiency", "conv_efficiency", "attention_efficiency"),
    "memory": ("memory_efficiency",),
    "decode": ("decode_memory_efficiency",),
    # decode steps of a batch the mode runs with its other (compiled) decode step
    "decode_compiled": ("decode_compiled_memory_efficiency",),
    # decode steps of 2 or more sequences through the mode's fused kernels (batched tiles)
    "decode_fused_batched": ("decode_fused_batched_memory_efficiency",),
}
# Fitted values outside these bounds mean a broken measurement, not a machine.
BOUNDS = {
    "matmul_efficiency": (0.05, 1.0),
    "conv_efficiency": (0.05, 1.0),
    "attention_efficiency": (0.05, 1.0),
    "memory_efficiency": (0.05, 1.0),
    "decode_memory_efficiency": (0.05, 1.0),
    "decode_compiled_memory_efficiency": (0.05, 1.0),
    "decode_fused_batched_memory_efficiency": (0.05, 1.0),
    "host_seconds_per_op": (1e-7, 1e-3),
    "generate_host_seconds_per_op": (1e-7, 1e-3),
    "context_bytes": (0, 8 << 30),
    "host_probe_reference_seconds": (1e-7, 1e-2),
    "generate_host_probe_seconds": (1e-7, 1e-2),
}


@dataclass(frozen=True, kw_only=True)
class Fit:
    """The fitted constants, the points behind each, and the ratios they came from."""

    framework: str
    exec_mode: str
    values: dict[str, float]
    evidence: dict[str, list[float]] = field(default_factory=dict)
    #: the transformers release the points generated with (the most common one), where the base
    #: profile counts a release at all: the fitted shares describe that release's decode step,
    #: so a profile keeping them must estimate that release's calls and copies too.
    transformers_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "exec_mode": self.exec_mode,
            "values": self.values,
            "evidence": self.evidence,
            "transformers_version": self.transformers_version,
        }


# A measurement as calibration takes it: the record, or the JSON a benchmark stored it as.
MeasurementLike = Measurement | Mapping[str, Any]


def _measured_step(m: Measurement, workload: Workload) -> float | None:
    """Seconds of one step comparable with the estimate's step_seconds (a decode step for
    generation: Measurement.decode_step)."""
    return m.decode_step(workload.new_tokens) if workload.is_generation else m.step_seconds


def fit_profile(points: Sequence[tuple[Workload, MeasurementLike]], gpu: GpuSpec, base: Profile) -> Fit:
    """Fit `base`'s constants to (workload, measurement) pairs measured on `gpu`."""
    ratios, contexts, probes = _evidence(points, gpu, base)
    values: dict[str, float] = {}
    evidence: dict[str, list[float]] = {}
    for key in HOST_TIME_KEYS:
        # A mode without host cost (tuned: CUDA graphs) has none to scale: a step it estimates
        # as launch-floor-bound measures no constant fitted here.
        if ratios.get(key) and base.in_force(key) > 0:
            values[key] = base.in_force(key) * statistics.median(ratios[key])
            evidence[key] = ratios[key]
    for bottleneck, keys in EFFICIENCY_KEYS.items():
        if ratios.get(bottleneck):
            scale = statistics.median(ratios[bottleneck])
            for key in keys:
                values[key] = base.in_force(key) / scale
                evidence[key] = ratios[bottleneck]
    for key, round_key in HOST_ROUND_KEYS.items():
        # A fitted host time describes the hosts of its points: their probe round is the one a
        # later run's own round rescales it by (profile.host_scaled_profile). Known only where
        # every such point probed its host; else the fit leaves the round out.
        rounds = probes.get(key, [])
        if key in values and rounds and all(r is not None for r in rounds):
            values[round_key] = statistics.median(rounds)
            evidence[round_key] = rounds
    if contexts:
        values["context_bytes"] = int(statistics.median(contexts))
        evidence["context_bytes"] = contexts
    for key, value in values.items():
        low, high = BOUNDS[key]
        values[key] = type(value)(min(max(value, low), high))
    return Fit(
        framework=base.framework,
        exec_mode=base.exec_mode,
        values=values,
        evidence=evidence,
        transformers_version=_release_of(points, base) if values else None,
    )


def _release_of(points: Sequence[tuple[Workload, MeasurementLike]], base: Profile) -> str | None:
    """The transformers release most of the points ran with, where `base` counts one."""
    if base.transformers_version is None:
        return None
    releases = [
        r
        for _, stored in points
        if isinstance(r := (Measurement.from_dict(stored).environment or {}).get("transformers"), str) and r
    ]
    return statistics.mode(releases) if releases else None


def _ran_uncompiled(m: Measurement, workload: Workload, base: Profile) -> bool:
    """Whether a training or classification step of a mode that compiles it (Profile.
    fuses_pointwise) ran uncompiled (`--no-compile`, a failed compile, or a record older than
    the compiled step): its time measures other kernels than the profile's estimate counts."""
    if not base.fuses_pointwise or workload.is_generation:
        return False
    return (m.backend_notes or {}).get("compiled_step") is not True


def _evidence(
    points: Sequence[tuple[Workload, MeasurementLike]], gpu: GpuSpec, base: Profile
) -> tuple[dict[str, list[float]], list[float], dict[str, list[float | None]]]:
    """Measured / estimated step time per bottleneck (the constant each one scales), the CUDA
    context sizes the measurements show, and per host time the host probe round of each point
    that measures it (None where it has none)."""
    ratios: dict[str, list[float]] = {}
    contexts: list[float] = []
    probes: dict[str, list[float | None]] = {}
    for workload, stored in points:
        m = Measurement.from_dict(stored)
        if not m.completed:
            continue
        measured = _measured_step(m, workload)
        if _ran_uncompiled(m, workload, base):
            measured = None  # its step is not the compiled one the profile's mode is estimated as
        as_run = _profile_as_run(m, workload, base)
        # a record of a tuned step from before one of its features is held against that step
        # (the features are torch's tuned step's: other modes' estimates do not change)
        with without_step_features(*features_not_run(workload, m.backend_notes or {})):
            est = estimate(workload, gpu, framework=base.framework, exec_mode=base.exec_mode, profile=as_run)
        key = _ratio_key(est.bottleneck, workload, as_run)
        if measured and est.step_seconds and key is not None:
            ratios.setdefault(key, []).append(measured / est.step_seconds)
            if key in HOST_TIME_KEYS:
                probe = m.host_probe_seconds
                probes.setdefault(key, []).append(probe if m.on_gpu and probe and probe > 0 else None)
        nvml, reserved = m.nvml_process_peak_bytes, m.peak_reserved_bytes
        if nvml and reserved and nvml > reserved:
            contexts.append(float(nvml - reserved))
    return ratios, contexts, probes


def _profile_as_run(m: Measurement, workload: Workload, base: Profile) -> Profile:
    """`base` with the decode step the run's record says ran: the transformers release it ran
    with (the decode step's calls and copies follow it), and a batch the mode's fused kernels
    take, decoded by the compiled step instead (a record from before the fused kernels took
    batches above 1, or their fallback), estimated, and measuring a share, as that step."""
    base = following_release(base, (m.environment or {}).get("transformers"))
    notes = m.backend_notes or {}
    batch = workload.batch_size
    took_other = notes.get("fused_kernels") is False and notes.get("compiled_step") is True
    if workload.is_generation and took_other and 1 < batch <= base.decode_fused_max_batch:
        return replace(base, decode_fused_max_batch=1)
    return base


def _ratio_key(bottleneck: str, workload: Workload, base: Profile | None = None) -> str | None:
    """Which constant a step limited by `bottleneck` measures (None: none that is fitted). A
    memory-bound decode step of a batch that `base` runs with its other decode step (torch.tuned:
    the compiled one above batch 32) measures that step's share, and one of 2 or more sequences
    through its fused kernels their batched tiles' share, not the batch-1 GEMVs'."""
    if bottleneck == "overhead":
        return "generate_host_seconds_per_op" if workload.is_generation else "host_seconds_per_op"
    if bottleneck == "memory" and workload.is_generation:
        batch = workload.batch_size
        compiled = base is not None and base.decode_compiled_memory_efficiency is not None
        if compiled and base.runs_other_decode_step(batch):
            return "decode_compiled"
        batched = base is not None and base.decode_fused_batched_memory_efficiency is not None
        if batched and 1 < batch <= base.decode_fused_max_batch:
            return "decode_fused_batched"
        return "decode"
    return bottleneck if bottleneck in EFFICIENCY_KEYS else None


def points_from_result_file(
    path: Path, exec_mode: str = "default"
) -> tuple[str, list[tuple[Workload, Measurement]]]:
    """(gpu id, points) from a stored benchmark result: benchmarks/accuracy.py's JSON ("points")
    or benchmarks/speed.py's ("scenarios", a default and a tuned run each). Only measurements
    taken in `exec_mode` count: a tuned run fits the tuned profile, an eager one the default."""
    try:
        data = json.loads(Path(path).read_text())
        gpu_id = data["gpu"]
        if isinstance(gpu_id, dict):  # speed.py stores the whole catalog card
            gpu_id = gpu_id["id"]
        if "scenarios" in data:
            pairs = [
                (s["workload"], s["runs"][mode]["measurement"])
                for s in data["scenarios"]
                for mode in s["runs"]
            ]
        else:
            pairs = [(p["workload"], p["measurement"]) for p in data["points"]]
        points = [
            (Workload.from_dict(w), Measurement.from_dict(m))
            for w, m in pairs
            if (m or {}).get("exec_mode", "default") == exec_mode
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FitbenchError(
            f"cannot read measurements from {path}: {exc}",
            "pass a JSON written by benchmarks/accuracy.py or benchmarks/speed.py",
            message_zh=f"无法从 {path} 读取实测结果:{exc}",
            hint_zh="请传入 benchmarks/accuracy.py 或 benchmarks/speed.py 写出的 JSON",
        ) from None
    if not gpu_id:
        raise FitbenchError(
            f"{path} holds CPU measurements",
            "calibration needs measurements from a GPU",
            message_zh=f"{path} 中是 CPU 上的实测结果",
            hint_zh="校准需要在 GPU 上实测的结果",
        )
    if not points:
        raise FitbenchError(
            f"{path} holds no measurements taken with --exec {exec_mode}",
            "pass --exec with the mode the file measured, or another file",
            message_zh=f"{path} 中没有用 --exec {exec_mode} 实测的结果",
            hint_zh="请用该文件实测时的模式传入 --exec,或换一个文件",
        )
    return gpu_id, points


def save_fit(fit: Fit, *, source: str, path: Path | None = None) -> Path:
    """Merge the fit into the user profile file (other frameworks and modes are kept)."""
    path = path or user_profile_path()
    current: dict[str, Any] = {}
    if path.exists():
        try:
            current = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise FitbenchError(
                f"cannot read {path}: {exc}",
                "delete it and calibrate again",
                message_zh=f"无法读取 {path}:{exc}",
                hint_zh="删除它,然后重新校准",
            ) from None
    table = current.setdefault(fit.framework, {}).setdefault(fit.exec_mode, {})
    table.update(fit.values)
    if fit.transformers_version:
        table["transformers_version"] = fit.transformers_version
    table["provenance"] = f"fitted by fitbench calibrate from {source} on {dt.date.today().isoformat()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Efficiencies fitted on this machine by `fitbench calibrate` (delete to use the defaults)."]
    for framework, modes in current.items():
        for mode, values in modes.items():
            lines.append(f"\n[{framework}.{mode}]")
            for key, value in values.items():
                lines.append(f"{key} = {_toml_value(value)}")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)
    forget_loaded()
    return path


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        return repr(value)
    return str(value)


def calibrate_from_file(
    path: Path, *, framework: str = "torch", exec_mode: str = "default"
) -> tuple[Fit, GpuSpec]:
    gpu_id, points = points_from_result_file(path, exec_mode)
    gpu = get_gpu(gpu_id)
    return fit_profile(points, gpu, get_profile(framework, exec_mode, use_user=False)), gpu
