"""The HTML report as a browser shows it: headless Chromium renders it offline, the charts are in the
rendered DOM, and the screenshot is a real picture (decoded here with zlib, no imaging library).

Needs /usr/bin/chromium (Debian package `chromium`). Skipped without it, except in CI, where a
missing browser is a failure: the CI script must install it.
"""

from __future__ import annotations

import os
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from fitbench.advise.guide import size_guide
from fitbench.advise.text import guide_lines
from fitbench.catalog import get_gpu
from fitbench.cli.estimate import DEFAULT_GPUS
from fitbench.cli.report import build_model, scenarios_from_records, write_reports
from fitbench.estimate.api import estimate
from fitbench.results.agreement import error_vs_estimate
from fitbench.results.history import History
from fitbench.workloads.presets import get_workload

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.slow


def _chromium() -> str:
    if Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: .ci/run must install it (apt-get install -y chromium)")
    pytest.skip(f"{CHROMIUM} is not installed")


def _record(workload, *, device: str, scale: float) -> dict:
    """A run as `fitbench run` stores it (the measurement written out as data: there is no GPU here)."""
    est = estimate(workload, get_gpu("rtx-4090")) if device == "cuda" else None
    base = est.step_seconds if est else 0.01
    m = {
        "status": "ok",
        "backend": "torch",
        "framework_version": "2.5.1",
        "device": device,
        "device_name": "NVIDIA GeForce RTX 4090" if device == "cuda" else "CPU",
        "peak_memory_bytes": int((est.peak_memory_bytes if est else 3e8) * scale),
        "step_seconds": base * scale,
        "samples_per_second": workload.batch_size / (base * scale),
        "environment": {"python": "3.11", "torch": "2.5.1", "gpu_driver": "550.54", "cpu": "EPYC"},
    }
    return {
        "command": "run",
        "workload": workload.to_dict(),
        "estimate": est.to_dict() if est else None,
        "measurement": m,
        "environment": m["environment"],
        "error_vs_estimate": error_vs_estimate(est, m, workload),
    }


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("chromium")
    with History.open(folder / "history.sqlite") as history:
        history.add_run(_record(get_workload("resnet50-cifar10", tiny=True), device="cpu", scale=1.0))
        history.add_run(
            _record(get_workload("bert-base-imdb", precision="amp-fp16"), device="cuda", scale=1.12)
        )
        history.add_run(
            _record(get_workload("bert-base-imdb", precision="amp-fp16"), device="cuda", scale=1.04)
        )
        history.add_run(_record(get_workload("resnet50-cifar10"), device="cuda", scale=0.9))
        records = history.last_runs(10)
    rows = size_guide()
    model = build_model(
        lang="en",
        scenarios=scenarios_from_records(records, DEFAULT_GPUS),
        records=records,
        guide=guide_lines(rows, "en"),
        guide_rows=[r.to_dict() for r in rows],
    )
    return write_reports(model, html=folder / "report.html", markdown=None)[0]


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp)}
    return subprocess.run(
        [_chromium(), *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of raw pixel bytes) of an 8-bit RGB/RGBA PNG, unfiltered."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    assert header is not None
    width, height, depth, colour = header[:4]
    assert depth == 8 and colour in (2, 6), header
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) for r in rows]


def test_screenshot_is_a_real_page(report, tmp_path):
    png = tmp_path / "report.png"
    result = _run([f"--screenshot={png}", "--window-size=1280,2400", report.as_uri()], tmp_path)
    assert png.is_file(), result.stderr[-2000:]
    data = png.read_bytes()
    assert len(data) > 50_000  # a blank page compresses to a few KB
    width, height, rows = _png_pixels(data)
    assert (width, height) == (1280, 2400)
    bpp = len(rows[0]) // width
    colours = set()
    for row in rows[::40]:
        colours.update(row[i : i + 3] for i in range(0, len(row), bpp * 7))
    assert len(colours) > 50, "the screenshot is (nearly) one colour"
    # The header band is dark blue, the page below it light.
    top = rows[40][640 * bpp : 640 * bpp + 3]
    assert top[2] > top[0] and sum(top) < 300
    below = rows[2300][20 * bpp : 20 * bpp + 3]
    assert sum(below) > 600


def test_charts_are_in_the_rendered_dom(report, tmp_path):
    source = report.read_text(encoding="utf-8")
    result = _run(["--dump-dom", report.as_uri()], tmp_path)
    dom = result.stdout
    assert "<svg" in dom, result.stderr[-2000:]
    # two scenarios (memory and speed each), the error chart, the step-time history
    assert dom.count("<svg") == source.count("<svg") == 2 * 2 + 1 + 1
    assert dom.count("<rect") == source.count("<rect") > 50
    assert dom.count("<circle") == source.count("<circle") >= 3  # the history points
    for part in ("part-weights", "part-optimizer_state", "part-activations"):
        assert part in dom
