"""The estimator's accuracy on committed measurements, held to the bounds the README reports.

Pure estimator code (no framework import): the stored H200 measurements in sample and under the
held-out protocol, any committed measurement of the points the fit never saw, and the published
figures on other cards. The bounds live in benchmarks/results/accuracy-bounds.toml, one place.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import accuracy_protocol as protocol  # noqa: E402

BOUNDS = protocol.load_bounds()
# The H200 is the card the built-in profile was fitted on; each set's H200 files have bounds of
# their own, and every other card's files are pooled under [other_cards].
NEW_POINT_FILES = sorted(protocol.RESULTS.glob("accuracy-holdout-h200-*.json"))
FAMILY_FILES = sorted(protocol.RESULTS.glob("accuracy-families-h200-*.json")) + sorted(
    protocol.RESULTS.glob("accuracy-recent-h200-*.json")
)
UNSEEN_FILES = sorted(protocol.RESULTS.glob("accuracy-unseen-h200-*.json"))
OTHER_CARD_FILES = sorted(
    path
    for pattern in (
        "holdout",
        "families",
        "recent",
        "unseen",
        "users",
        "quantized",
        "kernels",
        "newest",
        "followup",
        "newfamilies",
        "moetrain",
        "moecheck",
        "vision",
        "longctx",
        "longcheck",
        "losscheck",
        "replaycheck",
        "lorareplay",
    )
    for path in protocol.RESULTS.glob(f"accuracy-{pattern}-*.json")
    if "-h200-" not in path.name
)
# Sources kept out of the public set on purpose: they serve as an independent check.
INDEPENDENT_SOURCES = ("lambdalabs.com", "lambda.ai", "ggerganov/llama.cpp", "ggml-org/llama.cpp")


@pytest.fixture(scope="module")
def samples() -> list[protocol.Sample]:
    return protocol.in_sample()


@pytest.fixture(scope="module")
def held_out(samples: list[protocol.Sample]) -> dict:
    return protocol.held_out(samples)


def _worst(rows: list[dict], key: str, bound: float) -> list[str]:
    return [f"{r['label']}: {key} {r[key]:+.1%}" for r in rows if r[key] is not None and abs(r[key]) > bound]


def test_in_sample_points_within_reported_bounds(samples: list[protocol.Sample]) -> None:
    rows = protocol.in_sample_rows(samples)
    assert len(rows) >= 23
    bounds = BOUNDS["in_sample"]
    assert not _worst(rows, "peak", bounds["peak_max_abs"])
    assert not _worst(rows, "speed", bounds["speed_max_abs"])


@pytest.mark.parametrize("split", ["leave_one_family_out", "fixed_split"])
def test_held_out_points_within_reported_bounds(held_out: dict, split: str) -> None:
    rows = held_out[split]
    bounds = BOUNDS["held_out"]
    assert rows, "the protocol scored nothing"
    assert not _worst(rows, "peak", bounds["peak_max_abs"])
    assert not _worst(rows, "speed", bounds["speed_max_abs"])
    assert protocol.summary([r["speed"] for r in rows], 0.2)["median_abs"] <= bounds["speed_median_abs"]


def test_leave_one_family_out_scores_every_point_once(samples: list[protocol.Sample], held_out: dict) -> None:
    """Each point is held out exactly once, by a fit that did not see its family."""
    labels = [r["label"] for r in held_out["leave_one_family_out"]]
    assert sorted(labels) == sorted(s.label for s in samples)
    for family in {s.family for s in samples}:
        fit = held_out["fits"][f"without {family}"]
        assert set(fit["fitted"]) | set(fit["kept"]) <= set(protocol.FITTED_KEYS)
        assert not set(fit["fitted"]) & set(fit["kept"])


def test_fixed_split_holds_out_every_second_point_of_each_family(samples: list[protocol.Sample]) -> None:
    train, test = protocol.fixed_split(samples)
    assert not {s.label for s in train} & {s.label for s in test}
    assert len(train) + len(test) == len(samples)
    assert {s.family for s in test} >= {"CNN", "encoder", "decoder-inference"}


def test_a_fit_on_other_families_changes_the_constants() -> None:
    """The held-out fit is a real fit: without the CNN points the host cost moves off its value."""
    samples = protocol.in_sample()
    base = protocol.get_profile("torch", "default", use_user=False)
    train = [s for s in samples if s.family != "CNN"]
    profile, keys = protocol.fitted(train, protocol.get_gpu("h200"), base)
    assert "host_seconds_per_op" in keys
    assert profile.host_seconds_per_op != base.host_seconds_per_op


def _assert_shares(paths: list[Path], bounds: dict[str, float], at_least: int) -> None:
    """The points of `paths`, pooled: peak within ±10 % and speed within ±20 % on the shares
    `bounds` report."""
    rows = [protocol.errors(s) for path in paths for s in protocol.load_samples(path)]
    assert len(rows) >= at_least
    peak = protocol.summary([r["peak"] for r in rows], 0.10)
    speed = protocol.summary([r["speed"] for r in rows], 0.20)
    assert peak["share_within"] >= bounds["peak_share_within_10"]
    assert speed["share_within"] >= bounds["speed_share_within_20"]


@pytest.mark.parametrize("path", NEW_POINT_FILES, ids=[p.name for p in NEW_POINT_FILES])
def test_new_points_within_reported_bounds(path: Path) -> None:
    _assert_shares([path], BOUNDS["new_points"], 16)


def test_family_points_within_reported_bounds() -> None:
    """The decoder families and recent checkpoints, pooled: too few in each file for a share."""
    _assert_shares(FAMILY_FILES, BOUNDS["families"], 15)


def test_unseen_points_within_reported_bounds() -> None:
    """The points no estimator change was made against (accuracy.py --set unseen)."""
    _assert_shares(UNSEEN_FILES, BOUNDS["unseen"], 13)


def test_settings_points_within_reported_bounds() -> None:
    """Settings no point had run (accuracy.py --set settings: GradScaler, accumulation, SGD,
    checkpointed full fine-tuning, decoding at batch 64), written down before they ran."""
    _assert_shares(sorted(protocol.RESULTS.glob("accuracy-settings-*.json")), BOUNDS["settings"], 8)


def test_other_cards_points_within_reported_bounds() -> None:
    """The same sets measured on cards the built-in profile was not fitted on (an H100), pooled."""
    _assert_shares(OTHER_CARD_FILES, BOUNDS["other_cards"], 65)


def test_public_points_are_sourced_and_independent_of_the_check_set() -> None:
    points = protocol.load_public()
    ids = [p["id"] for p in points]
    assert len(ids) == len(set(ids))
    for p in points:
        assert p["source"].startswith("https://"), p["id"]
        assert p.get("setting") and p.get("differs"), p["id"]
        assert not any(s in p["source"] for s in INDEPENDENT_SOURCES), p["id"]
        assert p.get("exec_mode", "default") in ("default", "tuned"), p["id"]


def test_public_points_within_reported_bounds() -> None:
    rows = protocol.score_public(protocol.load_public())
    bounds = BOUNDS["public"]
    assert len(rows) >= bounds["min_points"]
    assert all(r["speed"] is not None for r in rows)
    s = protocol.summary([r["speed"] for r in rows], 0.30)
    assert s["median_abs"] <= bounds["speed_median_abs"]
    assert s["share_within"] >= bounds["speed_share_within_30"]
    assert s["max_abs"] <= bounds["speed_max_abs"], [(r["id"], round(r["speed"], 2)) for r in rows]


@pytest.mark.slow
def test_scoring_imports_no_framework() -> None:
    """The guard stays fast and runs anywhere: scoring imports neither torch nor paddle."""
    import subprocess

    code = (
        f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); import accuracy_protocol as p; "
        "p.score_public(p.load_public()); p.in_sample_rows(p.in_sample()); "
        "assert 'torch' not in sys.modules and 'paddle' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


# -- the holdout set: what it measures, and that it fits one device call -----------------------
import accuracy  # noqa: E402  (benchmarks/accuracy.py: measurement code, no framework import)

HOLDOUT = [
    (name, overrides, *accuracy.build_workload(name, overrides)) for name, overrides in accuracy.HOLDOUT
]


def test_holdout_set_builds_every_point_with_distinct_labels() -> None:
    labels = [accuracy.label(name, overrides) for name, overrides, _, _ in HOLDOUT]
    assert len(labels) >= 16
    assert len(set(labels)) == len(labels)
    assert {protocol.family_of(w) for *_, w, _ in HOLDOUT} == set(protocol.FAMILIES)


def test_holdout_set_fits_the_device_call_on_an_h200() -> None:
    """The whole set, start-up and margin included, in at most 9 minutes (a call may run 10)."""
    total = sum(accuracy.estimated_seconds(w, "h200", accuracy.HOLDOUT_MIN_SECONDS) for *_, w, _ in HOLDOUT)
    assert total <= 9 * 60


def test_holdout_set_covers_the_jobs_the_fit_never_saw() -> None:
    works = [(overrides, w) for _, overrides, w, _ in HOLDOUT]
    gqa = [w for _, w in works if w.is_generation and w.arch.kv_heads < w.arch.num_heads]
    assert {w.arch.model_type for w in gqa} >= {"qwen2", "llama", "mistral"}
    assert all(w.prompt_tokens >= 1024 and w.batch_size >= 4 for w in gqa)
    assert any(w.arch.sliding_layers and w.prompt_tokens > w.arch.sliding_window for w in gqa)
    full = {
        (w.optimizer, w.precision.startswith("amp"), o.get("optimizer_impl"))
        for o, w in works
        if protocol.family_of(w) == "decoder-training" and w.arch.model_type == "llama"
    }
    assert {opt for opt, _, _ in full} == {"adam", "adamw"}
    assert {amp for _, amp, _ in full} == {True, False}
    assert {impl for _, _, impl in full} == {"foreach", "fused"}
    assert any(w.arch.model_type == "gpt2" and w.is_training for _, w in works)
    lora = {(w.lora_rank, w.checkpointing) for _, w in works if w.peft == "lora"}
    assert lora == {(r, c) for r in (8, 64, 256) for c in (False, True)}
    assert any(w.family == "encoder" and w.arch.num_layers == 24 and w.is_training for _, w in works)
    assert any(w.family == "encoder" and not w.is_training for _, w in works)
    sizes = {w.image_size for _, w in works if w.family == "resnet" and w.optimizer == "momentum"}
    assert sizes == {128, 224}


def test_shrunk_points_keep_the_job() -> None:
    for *_, w, _ in HOLDOUT:
        small = accuracy.shrink(w)
        assert small.param_count() < 2_000_000
        assert (small.mode, small.peft, small.checkpointing, small.optimizer) == (
            w.mode,
            w.peft,
            w.checkpointing,
            w.optimizer,
        )


@pytest.mark.parametrize("name", ["users", "quantized", "kernels", "newest", "longctx"])
def test_the_later_sets_build_every_point_and_fit_one_device_call(name: str) -> None:
    """Every point names a library model, applies every declared field, has a label of its own,
    and the set runs in one device call on an H100 (9 minutes, start-up and margin included)."""
    points = accuracy.SETS[name]
    built = [accuracy.build_workload(model, overrides) for model, overrides in points]
    assert all(not unapplied for _, unapplied in built)
    labels = {accuracy.label(model, overrides) for model, overrides in points}
    assert len(labels) == len(points) >= 9
    total = sum(accuracy.estimated_seconds(w, "h100-sxm", accuracy.HOLDOUT_MIN_SECONDS) for w, _ in built)
    assert total <= 9 * 60
    if name == "quantized":  # bitsandbytes weights in every decode, QLoRA in every fine-tune
        for w, _ in built:
            assert w.peft == "qlora" if w.is_training else w.weight_format.method.startswith("bnb")
