"""Cards beyond the catalog (--gpu-spec), the cards added for today's market, and job cost."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fitbench.advise.cost import COST_FIELDS, cost_cell, job_cost
from fitbench.catalog import get_gpu, gpu_to_dict, load_catalog, resolve_gpus
from fitbench.catalog.spec import load_gpu_spec
from fitbench.cli.main import main
from fitbench.core.units import GB, TFLOPS, GiB
from fitbench.errors import FitbenchError
from fitbench.estimate.api import estimate
from fitbench.workloads.presets import get_workload

NEW_CARDS = (
    "rtx-5090",
    "rtx-5080",
    "rtx-5070-ti",
    "rtx-5060-ti-16gb",
    "rtx-4070-super",
    "h20",
    "h800",
    "a800-80gb",
    "b200",
    "mi300x",
)
ASKED_FOR = (*NEW_CARDS, "rtx-4060-ti-16gb", "rtx-3090", "l4", "l40s", "a10")
RENTED = ("a100-40gb", "a100-80gb", "h100-sxm", "h200", "l4", "l40s", "a10", "b200", "mi300x")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def estimates_json(*argv: str) -> list[dict]:
    code, out = cli("estimate", *argv, "--json")
    assert code == 0
    return json.loads(out)["estimates"]


# ----------------------------------------------------------------------------- the new rows


@pytest.mark.parametrize("gid", ASKED_FOR)
def test_every_asked_for_card_has_source_memory_bandwidth_and_peaks(gid):
    g = get_gpu(gid)
    assert len(g.source) > 40
    assert g.memory_bytes >= 12 * GiB and g.bandwidth_bytes_s >= 288 * GB
    assert {"fp32", "fp16", "bf16"} <= set(g.peak_flops)


def test_fp8_marks_exactly_the_cards_with_fp8_tensor_cores():
    for g in load_catalog().values():
        has_fp8 = g.architecture in ("ada", "hopper", "blackwell", "cdna3")
        assert ("fp8" in g.peak_flops) == has_fp8, g.id
        if has_fp8:
            # 2 % slack: the L40S datasheet gives FP16 362 beside FP8 733.
            assert g.peak_flops["fp8"] == pytest.approx(2 * g.peak_flops["fp16"], rel=0.02), g.id


def test_new_card_datasheet_figures():
    assert get_gpu("rtx-5090").peak_flops["fp16"] == 209.5 * TFLOPS  # FP32 accumulate, not 419
    assert get_gpu("rtx-5090").peak_flops["fp8"] == 419 * TFLOPS
    assert get_gpu("rtx-5090").bandwidth_bytes_s == 1792 * GB
    assert get_gpu("b200").bandwidth_bytes_s == 8000 * GB and get_gpu("b200").interconnect_bytes_s == 900 * GB
    assert get_gpu("h800").peak_flops["bf16"] == get_gpu("h100-sxm").peak_flops["bf16"]
    assert get_gpu("h800").interconnect_bytes_s == 200 * GB < get_gpu("h100-sxm").interconnect_bytes_s
    assert get_gpu("h20").peak_flops["bf16"] == 148 * TFLOPS and get_gpu("h20").memory_bytes == 96 * GiB
    assert get_gpu("mi300x").peak_flops["bf16"] == 1307.4 * TFLOPS and get_gpu("mi300x").vendor == "amd"


def test_only_the_mi300x_is_unmeasured_and_its_estimate_says_so():
    assert [g.id for g in load_catalog().values() if not g.measured] == ["mi300x"]
    est = estimate(get_workload("llm-6b"), get_gpu("mi300x"))
    assert any("never been measured" in a for a in est.assumptions)
    h100 = estimate(get_workload("llm-6b"), get_gpu("h100"))
    assert not any("never been measured" in a for a in h100.assumptions)


@pytest.mark.parametrize("gid", RENTED)
def test_rented_cards_carry_a_dated_sourced_rate(gid):
    g = get_gpu(gid)
    assert 0.3 < g.rent_usd_per_hour < 20
    assert g.rent_source and len(g.rent_date) == 7


def test_fitbench_gpus_lists_the_new_cards_in_a_fresh_process():
    env = dict(os.environ, PYTHONPATH=SRC)
    out = subprocess.run(
        [sys.executable, "-m", "fitbench.cli.main", "gpus"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    for gid in ASKED_FOR:
        assert gid in lines, gid
    assert "mi300x *" in out and "not measured" in out
    assert "$1,999" in lines["rtx-5090"] and "$6.69/h" in lines["b200"]


# ----------------------------------------------------------------------------- --gpu-spec


@pytest.mark.parametrize("gid", ["rtx-4090", "t4", "h200", "mi300x", "rtx-5060-ti-16gb"])
def test_a_row_written_by_gpus_toml_reads_back_to_the_same_card_and_estimate(tmp_path, gid):
    code, text = cli("gpus", "--toml", gid)
    assert code == 0
    path = tmp_path / "card.toml"
    path.write_text(text)
    assert load_gpu_spec(str(path)) == get_gpu(gid)
    from_spec = estimates_json("llm-6b", "--gpu-spec", str(path))
    from_catalog = estimates_json("llm-6b", "--gpu", gid)
    assert from_spec == from_catalog


def test_a_row_of_gpus_json_is_a_spec_too(tmp_path):
    path = tmp_path / "card.json"
    path.write_text(json.dumps(gpu_to_dict(get_gpu("l40s"))))
    assert load_gpu_spec(str(path)) == get_gpu("l40s")


def test_inline_spec_matches_the_same_card_written_as_a_file(tmp_path):
    inline = "name=My card,memory_gib=32,bandwidth_gb_s=1792,fp16=209,bf16=209,fp32=104.8"
    path = tmp_path / "my.toml"
    path.write_text(
        'name = "My card"\nmemory_gib = 32\nbandwidth_gb_s = 1792\n'
        "tflops = { fp32 = 104.8, fp16 = 209, bf16 = 209 }\n"
    )
    a, b = load_gpu_spec(inline), load_gpu_spec(str(path))
    assert a.peak_flops == b.peak_flops == {"fp32": 104.8e12, "fp16": 209e12, "bf16": 209e12}
    assert a.memory_bytes == 32 * GiB and a.bandwidth_bytes_s == 1792e9 and a.bf16 and a.id == "my-card"
    assert a.interconnect == "pcie4" and a.interconnect_bytes_s == 32e9
    rows = estimates_json("llm-6b", "--gpu", "rtx-4090", "--gpu-spec", inline)
    assert [r["gpu"] for r in rows] == ["rtx-4090", "my-card"]


@pytest.mark.parametrize(
    ("spec", "message", "hint"),
    [
        ("name=x,bandwidth_gb_s=900,fp32=10,fp16=20", "has no memory_gib", "memory in GiB"),
        ("name=x,memory_gib=24,bandwidth_gb_s=-1,fp32=10,fp16=20", "must be positive", "datasheet"),
        (
            "name=x,memory_gib=24,bandwith_gb_s=900,fp32=10,fp16=20",
            "unknown key 'bandwith_gb_s'",
            "bandwidth_gb_s",
        ),
        ("name=x,memory_gib=24,bandwidth_gb_s=900,fp32=10", "has no fp16", "FP16"),
        ("name=x,memory_gib=lots,bandwidth_gb_s=900,fp32=10,fp16=20", "must be a number", "units"),
        (
            "name=x,memory_gib=24,bandwidth_gb_s=900,fp32=10,fp16=20,fp8=40,architecture=ampere",
            "no FP8",
            "gpus.toml",
        ),
        (
            "name=x,memory_gib=24,bandwidth_gb_s=900,fp32=10,fp16=20,interconnect=nvlink",
            "without its rate",
            "interconnect_gb_s",
        ),
        ("/no/such/card.toml", "cannot read GPU spec", "inline form"),
    ],
)
def test_bad_specs_are_one_line_errors(spec, message, hint):
    with pytest.raises(FitbenchError) as err:
        load_gpu_spec(spec)
    assert message in err.value.message and hint in (err.value.hint or "")
    assert "\n" not in str(err.value)


def test_a_bad_spec_on_the_command_line_exits_2_without_a_traceback():
    env = dict(os.environ, PYTHONPATH=SRC)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fitbench.cli.main",
            "estimate",
            "llm-6b",
            "--gpu-spec",
            "name=x,memory_gib=24,bandwidth_gb_s=-5,fp32=1,fp16=2",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2
    assert "bandwidth_gb_s" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "gid"),
    [
        ("rtx5090", "rtx-5090"),
        ("NVIDIA GeForce RTX 5090", "rtx-5090"),
        ("5060 ti", "rtx-5060-ti-16gb"),
        ("AMD Instinct MI300X", "mi300x"),
        ("B200", "b200"),
        ("NVIDIA H20", "h20"),
        ("a800", "a800-80gb"),
    ],
)
def test_new_cards_resolve_by_their_usual_names(name, gid):
    assert get_gpu(name).id == gid


@pytest.mark.parametrize(
    ("name", "first"),
    [("4090ti", "rtx-4090"), ("4070", "rtx-4070-super"), ("mi300", "mi300x"), ("5070", "rtx-5070-ti")],
)
def test_unknown_names_get_the_nearest_catalog_names_first(name, first):
    with pytest.raises(FitbenchError, match="unknown GPU") as err:
        resolve_gpus([name])
    assert err.value.hint.startswith(f"did you mean '{first}'")
    assert "--gpu-spec" in err.value.hint


# ----------------------------------------------------------------------------- cost


def test_cost_per_million_tokens_and_tokens_per_dollar_by_hand():
    spec = load_gpu_spec(
        "name=Rented,memory_gib=80,bandwidth_gb_s=3350,fp32=67,fp16=989,bf16=989,"
        "rent_usd_per_hour=3.6,rent_source=a price page,rent_date=2026-10"
    )
    est = estimate(get_workload("llm-6b"), spec)
    cost = job_cost(est)
    tps = est.tokens_per_second
    # $3.60 an hour is $0.001 a second: a million tokens take 10^6 / tps seconds.
    assert cost.cost_per_million_tokens_usd == pytest.approx(0.001 * 1e6 / tps)
    assert cost.tokens_per_dollar == pytest.approx(tps * 1000)
    assert cost.basis == "rent" and cost.price_date == "2026-10" and cost.cost_per_hour_usd == 3.6
    assert cost.cost_per_epoch_usd is None


def test_cost_per_epoch_scales_with_the_gpus_rented():
    w = get_workload("bert-base-imdb", gpus=4, strategy="ddp")
    g = get_gpu("h100-sxm")
    est = estimate(w, g)
    cost = job_cost(est)
    assert cost.cost_per_hour_usd == pytest.approx(4 * 3.99)
    assert cost.cost_per_epoch_usd == pytest.approx(est.epoch_seconds / 3600 * 4 * 3.99)
    assert cost_cell(cost, "en").endswith("/epoch") and cost_cell(cost, "zh").endswith("/轮")


def test_bought_cards_show_price_per_gib_and_no_hourly_cost():
    cost = job_cost(estimate(get_workload("llm-6b"), get_gpu("rtx-4090")))
    assert cost.basis == "purchase" and cost.price_per_gib_usd == pytest.approx(1599 / 24)
    assert cost.cost_per_million_tokens_usd is None and cost.cost_per_hour_usd is None
    assert cost_cell(cost) == "$1,599 ($66.62/GiB)"
    assert job_cost(estimate(get_workload("llm-6b"), get_gpu("t4"))).basis is None


def test_cost_fields_are_in_the_estimate_json_and_oom_has_no_cost():
    rows = {r["gpu"]: r for r in estimates_json("llm-70b", "--gpu", "h100,b200")}
    assert set(COST_FIELDS) <= set(rows["b200"])
    assert rows["h100-sxm"]["verdict"] == "oom" and rows["h100-sxm"]["cost_per_million_tokens_usd"] is None
    b200 = rows["b200"]
    assert b200["verdict"] != "oom"
    hand = 6.69 / (b200["tokens_per_second"] * 3600) * 1e6
    assert b200["cost_per_million_tokens_usd"] == pytest.approx(hand)
    assert b200["price_date"] == "2026-09"


def test_the_ranking_carries_each_cards_cost():
    from fitbench.advise.ranking import rank_catalog

    rows = {r.gpu.id: r.to_dict() for r in rank_catalog(get_workload("llm-6b"))}
    assert rows["h100-sxm"]["cost"]["cost_basis"] == "rent"
    assert rows["h100-sxm"]["cost"]["cost_per_million_tokens_usd"] > 0
    assert rows["rtx-5090"]["cost"]["cost_basis"] == "purchase"
    assert rows["v100-16gb"]["cost"]["cost_basis"] is None


def test_run_takes_one_card_to_compare_with(capsys):
    code = main(
        [
            "run",
            "resnet50-cifar10",
            "--tiny",
            "--device",
            "cpu",
            "--no-history",
            "--gpu",
            "rtx-4090",
            "--gpu-spec",
            "name=x,memory_gib=24,bandwidth_gb_s=900,fp32=10,fp16=20",
        ]
    )
    assert code == 2 and "--gpu and --gpu-spec" in capsys.readouterr().err


@pytest.mark.slow
def test_check_compares_with_a_spec_card(tmp_path):
    code, out = cli(
        "check",
        "--estimate-only",
        "--no-history",
        "--gpu",
        "rtx-4090",
        "--gpu-spec",
        "name=My card,memory_gib=32,bandwidth_gb_s=1792,fp32=104.8,fp16=209.5,bf16=209.5",
        "--html",
        str(tmp_path / "r.html"),
        "--lang",
        "en",
    )
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("scenario"))
    assert "RTX 4090" in header and "My card" in header
