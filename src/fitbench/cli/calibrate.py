"""`fitbench calibrate`: fit the estimator's efficiencies to this machine and keep them.

Measures a few workloads chosen so that each constant has points it governs (an
overhead-bound CNN step, compute-bound transformer steps, an overhead-bound generation), or
reads stored measurements with --from, then writes the fitted values to the user profile.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fitbench.advise.i18n import resolve_lang, t
from fitbench.cli.common import add_command, add_exec_arg, print_json
from fitbench.core.names import FRAMEWORKS
from fitbench.errors import FitbenchError

EPILOG = """examples:
  fitbench calibrate                          measure on this GPU (about 2 minutes) and keep the fit
  fitbench calibrate --dry-run                show the fit, keep nothing
  fitbench calibrate --from benchmarks/results/accuracy-h200-2026-12-02.json
                                              fit from stored measurements (no GPU needed)
  fitbench calibrate --exec tuned --from benchmarks/results/speed-h200-2026-12-02.json
                                              fit the tuned profile from speed.py's tuned runs
  fitbench calibrate --reset                  forget the fitted values
"""

# What to measure: each governs one group of constants (see fitbench.estimate.calibrate).
PLAN: tuple[tuple[str, dict[str, Any]], ...] = (
    ("resnet50-cifar10", {"batch_size": 128}),  # host overhead per op
    ("bert-base-imdb", {"batch_size": 32}),  # FP32 matmuls
    ("bert-base-imdb", {"batch_size": 32, "precision": "amp-bf16"}),  # tensor cores
    ("llm-6b", {"batch_size": 1, "new_tokens": 50}),  # generation overhead
)


def register(subparsers: argparse._SubParsersAction, name: str, help_text: str) -> None:
    parser = add_command(subparsers, name, help_text, EPILOG, description=__doc__)
    parser.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="fit from a stored benchmarks/accuracy.py or speed.py result",
    )
    parser.add_argument(
        "--backend", choices=FRAMEWORKS, default="torch", help="framework to measure with (default torch)"
    )
    add_exec_arg(parser)
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N (default cuda)")
    parser.add_argument("--dry-run", action="store_true", help="print the fit, do not keep it")
    parser.add_argument("--reset", action="store_true", help="delete the fitted values and use the defaults")
    parser.add_argument("--json", action="store_true", help="print the fit as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from fitbench.estimate import calibrate
    from fitbench.estimate.profile import get_profile, user_profile_path

    lang = resolve_lang(getattr(args, "lang", None))
    path = user_profile_path()
    if args.reset:
        if path.exists():
            path.unlink()
            print(t("calibrate.removed", lang, path=path))
        else:
            print(t("calibrate.nothing_to_remove", lang, path=path))
        return 0
    if args.source:
        fit, gpu = calibrate.calibrate_from_file(
            Path(args.source), framework=args.backend, exec_mode=args.exec_mode
        )
        source = Path(args.source).name
    else:
        fit, gpu = _measure_and_fit(args, lang)
        source = f"measurements on {gpu.name}"
    base = get_profile(args.backend, args.exec_mode, use_user=False)
    if args.json:
        print_json({"gpu": gpu.id, "fit": fit.to_dict(), "kept": not args.dry_run})
    else:
        print(t("calibrate.fitted", lang, gpu=gpu.name, backend=args.backend, exec_mode=args.exec_mode))
        for key, value in fit.values.items():
            points = t("calibrate.points", lang, n=len(fit.evidence.get(key, [])))
            before = base.in_force(key)
            shown = "-" if before is None else f"{before:.4g}"
            print(f"  {key:30s} {shown:>12s} -> {value:.4g}  ({points})")
        if fit.transformers_version:
            print(t("calibrate.release", lang, release=fit.transformers_version))
        if not fit.values:
            print("  " + t("calibrate.nothing", lang))
    if not args.dry_run and fit.values:
        saved = calibrate.save_fit(fit, source=source)
        if not args.json:
            print(t("calibrate.kept", lang, path=saved))
    return 0


def _measure_and_fit(args: argparse.Namespace, lang: str = "en") -> tuple[Any, Any]:
    from fitbench.backends.base import RunOptions
    from fitbench.catalog import get_gpu
    from fitbench.catalog.detect import detect_local_gpus
    from fitbench.estimate import calibrate
    from fitbench.estimate.profile import get_profile
    from fitbench.measure import nvml
    from fitbench.measure.runner import measure
    from fitbench.records.measurement import Measurement
    from fitbench.workloads.presets import get_workload

    if not args.device.startswith("cuda"):
        raise FitbenchError(
            "calibration fits GPU efficiencies and needs a CUDA device",
            "run it on a GPU machine, or fit stored measurements with --from FILE",
            message_zh="校准拟合的是 GPU 效率,需要 CUDA 设备",
            hint_zh="请在有 GPU 的机器上运行,或用 --from FILE 拟合已保存的实测结果",
        )
    local = detect_local_gpus()
    index = nvml.cuda_index(args.device) or 0
    if index >= len(local):
        found = f"no NVIDIA GPU {index} found ({len(local)} present)" if local else "no NVIDIA GPU found"
        found_zh = f"没有找到 NVIDIA GPU {index}(共有 {len(local)} 块)" if local else "没有找到 NVIDIA GPU"
        raise FitbenchError(
            found,
            "run it on a GPU machine, pick --device cuda:N, or use --from FILE",
            message_zh=found_zh,
            hint_zh="请在有 GPU 的机器上运行、用 --device cuda:N 选择显卡,或使用 --from FILE",
        )
    card = local[index]
    if card.catalog_id is None:
        raise FitbenchError(
            f"{card.name} is not in the catalog",
            "calibration compares with the card's datasheet figures",
            message_zh=f"{card.name} 不在显卡目录中",
            hint_zh="校准要与该显卡的数据手册数值比较",
        )
    gpu = get_gpu(card.catalog_id)
    points = []
    for name, overrides in PLAN:
        workload = get_workload(name, **overrides)
        print(t("calibrate.measuring", lang, name=name, overrides=overrides), flush=True)
        options = RunOptions(device=args.device, exec_mode=args.exec_mode)
        m = Measurement.from_dict(measure(workload, args.backend, options, min_seconds=2.0, timeout_s=300))
        if not m.completed:
            print("  " + t("calibrate.skipped", lang, status=m.status, error=m.error))
        points.append((workload, m))
    return calibrate.fit_profile(points, gpu, get_profile(args.backend, args.exec_mode, use_user=False)), gpu
