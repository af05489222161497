"""Statistics of step-time samples: the one place medians and percentiles are computed."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fitbench.measure.timing import percentile, summarize

durations = st.lists(
    st.floats(min_value=0, max_value=1e4, allow_nan=False, allow_infinity=False), min_size=1, max_size=200
)


def test_median_of_odd_and_even_counts():
    assert summarize([3.0, 1.0, 2.0]).median == 2.0
    assert summarize([4.0, 1.0, 3.0, 2.0]).median == 2.5


def test_p90_interpolates_between_order_statistics():
    samples = [float(i) for i in range(1, 11)]  # 1..10
    stats = summarize(samples)
    # position (10 - 1) * 0.9 = 8.1 -> 9 + 0.1 * (10 - 9)
    assert stats.p90 == pytest.approx(9.1)
    assert stats.count == 10
    assert stats.mean == pytest.approx(5.5)
    assert stats.min == 1.0 and stats.max == 10.0
    assert stats.total == pytest.approx(55.0)


def test_median_ignores_a_slow_outlier_that_moves_the_mean():
    samples = [0.010] * 9 + [1.0]
    stats = summarize(samples)
    assert stats.median == pytest.approx(0.010)
    assert stats.mean > 0.1


def test_single_sample():
    stats = summarize([0.25])
    assert (stats.count, stats.median, stats.p90, stats.min, stats.max) == (1, 0.25, 0.25, 0.25, 0.25)


@pytest.mark.parametrize("bad", [[], [-1.0], [float("nan")]])
def test_rejects_empty_or_invalid_samples(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_percentile_bounds():
    with pytest.raises(ValueError):
        percentile([1.0], 101)
    with pytest.raises(ValueError):
        percentile([], 50)
    assert percentile([5.0, 1.0, 3.0], 0) == 1.0
    assert percentile([5.0, 1.0, 3.0], 100) == 5.0


@given(durations)
def test_order_of_statistics(samples):
    stats = summarize(samples)
    assert stats.min <= stats.median <= stats.p90 <= stats.max
    assert stats.min <= stats.mean * (1 + 1e-12) + 1e-12
    assert stats.mean <= stats.max * (1 + 1e-12) + 1e-12
    assert stats.count == len(samples)
    assert math.isclose(stats.total, math.fsum(samples), rel_tol=1e-12, abs_tol=1e-12)


@given(durations, st.floats(min_value=0, max_value=100))
def test_percentile_matches_numpy_linear(samples, q):
    np = pytest.importorskip("numpy")
    assert percentile(samples, q) == pytest.approx(float(np.percentile(samples, q)), rel=1e-9, abs=1e-9)


def test_to_dict_keys():
    assert set(summarize([1.0, 2.0]).to_dict()) == {"count", "median", "p90", "mean", "min", "max", "total"}
