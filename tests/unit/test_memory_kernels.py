"""Memory-bound kernels: streaming bandwidth by memory type, a fixed cost per launch, and the
own shares measured on the H200 carried to other cards by their SMs. Pure estimator code."""

from __future__ import annotations

import json
import statistics
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu, load_catalog
from fitbench.core.gpu import STREAM_EFFICIENCY
from fitbench.estimate import speed
from fitbench.estimate.profile import get_profile
from fitbench.estimate.segments import Kernel
from fitbench.workloads.presets import get_workload

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
DATA = BENCHMARKS / "data" / "stream_bandwidth.toml"
sys.path.insert(0, str(BENCHMARKS))

import memory_kernels  # noqa: E402  (imports torch only to measure)

DEFAULT = get_profile("torch", "default", use_user=False)


def _time(kernel: Kernel, gpu_id: str = "h200") -> float:
    w = get_workload("bert-base-imdb")
    return speed.time_kernels([kernel], w, get_gpu(gpu_id), DEFAULT, host_seconds_per_op=0.0).gpu_seconds


def test_stream_efficiency_is_the_mean_of_the_published_points() -> None:
    points = tomllib.loads(DATA.read_text())["point"]
    by_type: dict[str, list[float]] = defaultdict(list)
    for p in points:
        assert p["source"].startswith(("http", "fitbench's own")), p
        by_type[p["memory_type"]].append(p["measured_gb_s"] / p["datasheet_gb_s"])
    for memory_type, shares in by_type.items():
        mean = statistics.mean(shares)
        assert STREAM_EFFICIENCY[memory_type] == pytest.approx(mean, abs=0.006), memory_type


def test_every_catalog_card_names_its_memory_and_sms() -> None:
    for gpu in load_catalog().values():
        assert gpu.memory_type in STREAM_EFFICIENCY, gpu.id
        assert gpu.sm_count > 0, gpu.id


def test_memory_kernel_is_bytes_at_streaming_plus_fixed_cost_per_launch() -> None:
    h200 = get_gpu("h200")
    big = Kernel(name="add", kind="memory", flops=0.0, bytes=3e9, launches=1.0)
    rate = h200.stream_bandwidth_bytes_s * DEFAULT.memory_efficiency
    expected = 3e9 / rate + DEFAULT.kernel_fixed_seconds
    assert _time(big) == pytest.approx(expected)
    # Twenty small launches of the same bytes cost nineteen more fixed costs.
    small = Kernel(name="add", kind="memory", flops=0.0, bytes=3e9, launches=20.0)
    assert _time(small) - _time(big) == pytest.approx(19 * DEFAULT.kernel_fixed_seconds)
    # GDDR6 streams a smaller share of its datasheet figure than GDDR6X.
    assert get_gpu("t4").stream_efficiency < get_gpu("rtx-3090").stream_efficiency


def test_own_share_follows_the_sms_per_byte_of_bandwidth() -> None:
    """A share measured on the H200 is a rate per SM: cards with more SMs per byte of bandwidth
    reach more of their streaming rate (never above it), the H200 itself keeps it."""
    share = 0.43
    assert speed.own_share(share, get_gpu("h200")) == pytest.approx(share)
    assert speed.own_share(share, get_gpu("rtx-3090")) == 1.0
    a100 = speed.own_share(share, get_gpu("a100-80gb"))
    assert share < a100 < 1.0
    assert speed.own_share(share, get_gpu("b200")) < share  # 148 SMs for 8 TB/s


def test_backward_copies_keep_the_launches() -> None:
    fwd = [Kernel(name="x.layout", kind="memory", flops=0.0, bytes=1e6, ops=0.0, launches=2.0)]
    assert [k.kernel_launches for k in speed.backward_kernels(fwd)] == [2.0]
    assert Kernel(name="n", kind="memory", flops=0.0, bytes=1.0, ops=0.0).kernel_launches == 1.0


def test_memory_kernels_script_fits_and_models_without_a_gpu() -> None:
    """The benchmark's fit (streaming rate of the largest sizes, fixed cost of the smallest) and
    its model column (the estimator's time for one launch on the catalog card)."""
    rows = [
        {"bytes_moved": b, "seconds": 3e-6 + b / 4e12, "gb_s": b / (3e-6 + b / 4e12) / 1e9}
        for b in (2e3, 8e3, 1e8, 2e9, 8e9)
    ]
    fit = memory_kernels.fit(rows)
    assert fit["fixed_us"] == pytest.approx(3.0, rel=0.01)
    assert 3900 < fit["stream_gb_s"] < 4000
    h200 = get_gpu("h200")
    model = memory_kernels.modelled_seconds("copy", 2e9, "h200")
    assert model == pytest.approx(2e9 / h200.stream_bandwidth_bytes_s + DEFAULT.kernel_fixed_seconds)
    assert memory_kernels.modelled_seconds("bn_like", 2e9, "h200") > model
    assert memory_kernels.modelled_seconds("copy", 2e9, None) is None
    assert memory_kernels.sizes(tiny=False)[0] == 1 << 10 and memory_kernels.sizes(tiny=False)[-1] == 1 << 30


def test_memory_kernels_script_runs_a_subset_with_the_read_kernel_on_a_cpu(tmp_path: Path) -> None:
    """--kernels read,copy on the CPU: read moves its tensor's bytes once, copy twice, each size's
    row and each kernel's fit are written; an unknown kernel name is refused."""
    pytest.importorskip("torch")
    out = tmp_path / "mk.json"
    memory_kernels.main(["--device", "cpu", "--tiny", "--kernels", "copy,read", "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["environment"]["kernels"] == ["read", "copy"]  # in the script's order
    rows = record["rows"]
    assert {r["kernel"] for r in rows} == {"read", "copy"}
    assert len(rows) == 2 * len(memory_kernels.sizes(tiny=True))
    for r in rows:
        passes = 1 if r["kernel"] == "read" else 2
        assert r["bytes_moved"] == passes * r["bytes_per_tensor"]
        assert r["seconds"] > 0 and r["gb_s"] > 0
        assert r["kernels_per_call"] is None  # counted on CUDA only
    assert set(record["fits"]) == {"read", "copy"}
    assert memory_kernels.PASSES["read"] == 1 and memory_kernels.KERNELS[0] == "read"
    with pytest.raises(SystemExit):
        memory_kernels.main(["--device", "cpu", "--tiny", "--kernels", "reed", "--out", str(out)])
