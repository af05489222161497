"""The host-speed probe: its round on the CPU, the fields a measurement records from it, and the
profile's reference round it is held against."""

from __future__ import annotations

import math

import pytest

from fitbench.backends.base import RunOptions
from fitbench.estimate.profile import get_profile
from fitbench.measure.host_speed import HOST_PROBE_KEYS, host_probe_fields
from fitbench.measure.runner import empty_measurement
from fitbench.records.measurement import MEASUREMENT_KEYS, Measurement
from fitbench.workloads.presets import get_workload

NAMES = {"F.linear (autograd on)", "nn.Linear module call", "torch.add", "Tensor.view"}


@pytest.mark.torch
def test_a_probe_round_on_the_cpu_times_the_four_calls() -> None:
    torch = pytest.importorskip("torch")
    from fitbench.backends.torch.host_probe import probe

    threads = torch.get_num_threads()
    with torch.no_grad():  # as in a generation session: the probe records autograd regardless
        parts = probe("cpu", calls=50, repeats=3)
    assert torch.get_num_threads() == threads  # the round's single thread is given back
    assert set(parts) == NAMES
    assert all(math.isfinite(v) and v > 0 for v in parts.values())


def test_two_rounds_give_their_mean_call_by_call_and_the_drift() -> None:
    before = {"a": 2e-6, "b": 4e-6}
    after = {"a": 4e-6, "b": 8e-6}
    fields = host_probe_fields(before, after)
    assert fields["host_probe_parts"] == pytest.approx({"a": 3e-6, "b": 6e-6})
    assert fields["host_probe_seconds"] == pytest.approx(9e-6)
    assert fields["host_probe_drift"] == pytest.approx(2.0)
    one = host_probe_fields(before, None)
    assert one["host_probe_seconds"] == pytest.approx(6e-6) and one["host_probe_drift"] is None
    assert host_probe_fields(None, None) == dict.fromkeys(HOST_PROBE_KEYS)


def test_a_measurement_keeps_the_host_probe_fields_through_json() -> None:
    data: dict[str, object] = dict.fromkeys(MEASUREMENT_KEYS)
    data.update(status="ok", warnings=[], step_samples_seconds=[], environment={})
    before, after = {"torch.add": 6e-6, "Tensor.view": 1e-6}, {"torch.add": 7e-6, "Tensor.view": 1e-6}
    data.update(host_probe_fields(before, after))
    m = Measurement.from_dict(data)
    assert m.host_probe_seconds == pytest.approx(7.5e-6)
    assert m.host_probe_parts == {"torch.add": pytest.approx(6.5e-6), "Tensor.view": pytest.approx(1e-6)}
    assert m.host_probe_drift == pytest.approx(8 / 7)
    assert m.extra == {}
    assert m.to_dict() == data
    # not measured (another backend, a failure before the model was built): null, and kept null
    skeleton = empty_measurement(get_workload("bert-base-imdb", tiny=True), "paddle", RunOptions())
    assert Measurement.from_dict(skeleton).to_dict() == skeleton
    assert all(skeleton[k] is None for k in HOST_PROBE_KEYS)
    # a stored record from before the probe existed reads back without them, key for key
    old = {k: v for k, v in data.items() if k not in HOST_PROBE_KEYS}
    assert Measurement.from_dict(old).to_dict() == old


def test_the_profiles_hold_the_reference_round_where_it_was_measured() -> None:
    reference = get_profile("torch", "default", use_user=False).host_probe_reference_seconds
    assert reference == pytest.approx(19.92e-6 + 16.09e-6 + 6.61e-6 + 1.25e-6)
    assert get_profile("paddle", "default", use_user=False).host_probe_reference_seconds is None
