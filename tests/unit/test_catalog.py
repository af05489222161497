"""The GPU catalog: row invariants, datasheet facts, name lookup, and local detection without a GPU."""

from __future__ import annotations

import json
import re
import sys
from importlib import resources
from pathlib import Path

import pytest

from fitbench.catalog import (
    BRIEF_GPUS,
    PEAK_KEYS,
    get_gpu,
    gpu_to_dict,
    gpu_to_row,
    load_catalog,
    resolve_gpus,
    row_to_toml,
)
from fitbench.catalog.detect import LocalGpu, detect_local_gpus, match_catalog, nvml_available, spec_for_local
from fitbench.core.units import GB, TB, TFLOPS, GiB, MiB
from fitbench.errors import FitbenchError

CATALOG = load_catalog()
SPECS = list(CATALOG.values())
REQUIRED_IDS = {
    "rtx-3060-12gb",
    "rtx-3090",
    "rtx-4060-ti-16gb",
    "rtx-4090",
    "t4",
    "v100-16gb",
    "v100-32gb",
    "a10",
    "l4",
    "l40s",
    "a100-40gb",
    "a100-80gb-pcie",
    "a100-80gb",
    "h100-pcie",
    "h100-sxm",
    "h200",
}
GEFORCE = [s for s in SPECS if s.name.startswith("GeForce")]


def by_id(spec):
    return spec.id


# ----------------------------------------------------------------------------- every row


def test_catalog_holds_the_required_cards_and_the_brief_ones():
    assert set(CATALOG) >= REQUIRED_IDS
    assert set(CATALOG) >= set(BRIEF_GPUS)


@pytest.mark.parametrize("spec", SPECS, ids=by_id)
def test_row_numbers_are_positive_and_usable_is_below_total(spec):
    assert spec.memory_bytes > 0 and spec.memory_bytes % MiB == 0
    assert 0.9 * spec.memory_bytes < spec.usable_bytes < spec.memory_bytes
    assert spec.bandwidth_bytes_s > 0
    assert spec.interconnect_bytes_s > 0
    assert set(spec.peak_flops) <= set(PEAK_KEYS)
    assert all(v > 0 for v in spec.peak_flops.values())


@pytest.mark.parametrize("spec", SPECS, ids=by_id)
def test_tensor_rates_sit_above_the_fp32_rate(spec):
    # Every catalog card has tensor cores, so fp16 (fp32 accumulate) beats CUDA-core FP32.
    fp32 = spec.peak_flops["fp32"]
    assert spec.peak_flops["fp16"] >= 2 * fp32 * 0.99
    if "tf32" in spec.peak_flops:
        assert spec.peak_flops["tf32"] >= fp32
        # TF32 runs at half the FP16 tensor rate on every Ampere/Ada/Hopper part.
        assert spec.peak_flops["fp16"] / spec.peak_flops["tf32"] == pytest.approx(2, rel=0.03)
    if "bf16" in spec.peak_flops:
        assert spec.peak_flops["bf16"] == spec.peak_flops["fp16"]


@pytest.mark.parametrize("spec", SPECS, ids=by_id)
def test_bf16_flag_matches_having_a_bf16_rate(spec):
    assert spec.bf16 == ("bf16" in spec.peak_flops)
    if spec.architecture in ("turing", "volta"):
        assert not spec.bf16 and "tf32" not in spec.peak_flops
    else:
        assert spec.bf16 and "tf32" in spec.peak_flops


@pytest.mark.parametrize("spec", GEFORCE, ids=by_id)
def test_geforce_rows_use_the_fp32_accumulate_rate(spec):
    # GeForce tensor cores run FP32 accumulation at half the FP16-accumulate rate, which puts
    # fp16 at 2x the shader FP32 rate; the FP16-accumulate figure would show 4x.
    assert spec.peak_flops["fp16"] / spec.peak_flops["fp32"] == pytest.approx(2, rel=0.02)
    assert spec.peak_flops["tf32"] == spec.peak_flops["fp32"]


def _defined_source_tags() -> set[str]:
    header = resources.files("fitbench.catalog").joinpath("gpus.toml").read_text(encoding="utf-8")
    return set(re.findall(r"^#\s+\[([a-z0-9-]+)\]\s.*https://", header, flags=re.M))


@pytest.mark.parametrize("spec", SPECS, ids=by_id)
def test_every_row_cites_a_source_and_dates_its_price(spec):
    assert len(spec.source) > 20
    tags = set(re.findall(r"\[([a-z0-9-]+)\]", spec.source))
    assert tags <= _defined_source_tags()
    assert tags or "datasheet" in spec.source or "specifications" in spec.source
    if spec.price_usd is not None:
        assert spec.price_usd > 0 and spec.price_source
        assert re.fullmatch(r"\d{4}-\d{2}", spec.price_date)


@pytest.mark.parametrize("spec", SPECS, ids=by_id)
def test_ids_are_lowercase_dashed_and_every_spelling_resolves_to_its_own_card(spec):
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", spec.id)
    for spelling in (spec.id, spec.name, *spec.aliases):
        assert get_gpu(spelling).id == spec.id, spelling


def test_ids_names_and_forms_are_unique():
    assert len({s.id for s in SPECS}) == len(SPECS)
    assert len({s.name for s in SPECS}) == len(SPECS)
    assert {s.form_factor for s in SPECS} <= {"pcie", "sxm", "oam"}
    assert all((s.interconnect == "nvlink") == (s.form_factor == "sxm") for s in SPECS)
    assert all((s.interconnect == "xgmi") == (s.form_factor == "oam") for s in SPECS)


# ----------------------------------------------------------------------------- datasheet facts


def test_rtx_4090_facts():
    g = get_gpu("rtx-4090")
    assert g.memory_bytes / GiB == pytest.approx(24, rel=0.001)
    assert g.bandwidth_bytes_s == 1008 * GB
    assert g.peak_flops["fp16"] == pytest.approx(165 * TFLOPS, rel=0.01)
    assert g.peak_flops["fp32"] == pytest.approx(82.6 * TFLOPS)
    assert g.interconnect == "pcie4"


def test_data_centre_facts_are_dense_not_sparse():
    assert get_gpu("h200").bandwidth_bytes_s == 4.8 * TB
    assert get_gpu("h200").memory_bytes == 143771 * MiB
    assert get_gpu("a100-40gb").peak_flops["tf32"] == 156 * TFLOPS
    assert get_gpu("a100-40gb").peak_flops["bf16"] == 312 * TFLOPS
    assert get_gpu("h100-sxm").peak_flops["bf16"] == pytest.approx(989 * TFLOPS)
    assert get_gpu("h100-pcie").peak_flops["fp16"] == 756 * TFLOPS
    assert get_gpu("l40s").peak_flops["fp16"] == 362 * TFLOPS
    assert get_gpu("a100-80gb").bandwidth_bytes_s == 2039 * GB
    assert get_gpu("a100-80gb-pcie").bandwidth_bytes_s == 1935 * GB


def test_memory_totals_and_usable_follow_the_documented_rule():
    a100 = get_gpu("a100-40gb")
    assert a100.memory_bytes == 40960 * MiB
    assert a100.usable_bytes == 40448 * MiB  # PyTorch reports 39.50 GiB total capacity
    assert get_gpu("t4").usable_bytes / GiB == pytest.approx(14.75)
    assert get_gpu("rtx-3060-12gb").memory_bytes == 12 * GiB
    # No public observation for the H200: the catalog default reserve of 512 MiB applies.
    assert get_gpu("h200").usable_bytes == (143771 - 512) * MiB


def test_cards_without_bf16_omit_the_keys_and_fall_back_to_fp32():
    for gid in ("t4", "v100-16gb", "v100-32gb"):
        g = get_gpu(gid)
        assert set(g.peak_flops) - {"int8"} == {"fp32", "fp16"}
        assert g.peak("bf16") == g.peak_flops["fp32"]


def test_interconnects_per_direction():
    assert get_gpu("h100-sxm").interconnect_bytes_s == 450 * GB
    assert get_gpu("h200").interconnect_bytes_s == 450 * GB
    assert get_gpu("a100-80gb").interconnect_bytes_s == 300 * GB
    assert get_gpu("v100-16gb").interconnect_bytes_s == 150 * GB
    assert get_gpu("h100-pcie").interconnect_bytes_s == 64 * GB
    assert get_gpu("rtx-4060-ti-16gb").interconnect_bytes_s == 16 * GB  # PCIe 4.0 x8


# ----------------------------------------------------------------------------- lookup


@pytest.mark.parametrize(
    ("spelling", "gid"),
    [
        ("RTX 4090", "rtx-4090"),
        ("4090", "rtx-4090"),
        ("rtx4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("RTX-4090", "rtx-4090"),
        ("H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),
        ("Tesla T4", "t4"),
        ("Tesla V100-SXM2-16GB", "v100-16gb"),
        ("Tesla V100-SXM2-32GB", "v100-32gb"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA GeForce RTX 3060", "rtx-3060-12gb"),
        ("rtx 3060 12 GB", "rtx-3060-12gb"),
        ("NVIDIA GeForce RTX 4060 Ti", "rtx-4060-ti-16gb"),
        ("rtx4060ti", "rtx-4060-ti-16gb"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
        ("a100", "a100-40gb"),
        ("A100 80GB", "a100-80gb"),
        ("h100", "h100-sxm"),
        ("  rtx_3090  ", "rtx-3090"),
    ],
)
def test_forgiving_lookup(spelling, gid):
    assert get_gpu(spelling).id == gid


@pytest.mark.parametrize(
    ("spelling", "candidates"),
    [
        ("a100 pcie", {"a100-40gb-pcie", "a100-80gb-pcie"}),
        ("80gb", {"a100-80gb-pcie", "a100-80gb", "h100-pcie", "h100-sxm"}),
    ],
)
def test_ambiguous_names_list_the_candidates(spelling, candidates):
    with pytest.raises(FitbenchError, match="ambiguous") as err:
        get_gpu(spelling)
    named = set(re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)+|\b[a-z]\d+\b", err.value.hint))
    assert candidates <= named


@pytest.mark.parametrize(
    ("spelling", "close"),
    [
        ("rtx 4070", "rtx-4070-super"),  # the plain 4070 is not the SUPER
        ("4090ti", "rtx-4090"),
        ("rtx 3070", "rtx-3080-10gb"),
        ("NVIDIA GeForce RTX 4090 D", "rtx-4090"),  # a different, cut-down card
        ("NVIDIA A10G", "a10"),  # AWS part with other rates
        ("Tesla V100-PCIE-16GB", "v100-16gb"),  # PCIe V100 runs slower clocks
        ("NVIDIA H100 NVL", "h100-pcie"),
        ("L40", "l40s"),
    ],
)
def test_unknown_names_raise_with_the_closest_ids(spelling, close):
    with pytest.raises(FitbenchError) as err:
        get_gpu(spelling)
    assert err.value.message == f"unknown GPU '{spelling}'"
    assert f"'{close}'" in err.value.hint
    assert "fitbench gpus" in err.value.hint


def test_empty_name_is_an_error():
    with pytest.raises(FitbenchError):
        get_gpu("NVIDIA")


def test_resolve_gpus_all_lists_and_duplicates():
    assert resolve_gpus(["all"]) == SPECS
    assert [g.id for g in resolve_gpus(["ALL", "rtx-4090"])] == [s.id for s in SPECS]
    assert [g.id for g in resolve_gpus(["rtx 4090, a100", "4090"])] == ["rtx-4090", "a100-40gb"]
    assert tuple(g.id for g in resolve_gpus(BRIEF_GPUS)) == BRIEF_GPUS
    assert resolve_gpus([]) == []
    with pytest.raises(FitbenchError, match="unknown GPU"):
        resolve_gpus(["rtx-4090", "voodoo2"])


def test_gpu_to_dict_is_json_ready():
    d = json.loads(json.dumps(gpu_to_dict(get_gpu("rtx-4090"))))
    assert d["id"] == "rtx-4090"
    assert d["memory_bytes"] == 24564 * MiB
    assert d["bandwidth_gb_s"] == 1008
    assert d["peak_tflops"]["fp16"] == 165.2
    assert d["aliases"] and d["source"]
    t4 = gpu_to_dict(get_gpu("t4"))
    assert "bf16" not in t4["peak_flops"] and t4["bf16"] is False and t4["price_usd"] is None


def test_load_catalog_hands_out_copies():
    mine = load_catalog()
    mine.pop("rtx-4090")
    assert "rtx-4090" in load_catalog()
    assert list(load_catalog()) == [s.id for s in SPECS]


# ----------------------------------------------------------------------------- loader checks

ROW = """
[[gpu]]
id = "{id}"
name = "{name}"
vendor = "nvidia"
architecture = "ada"
memory_gib = 24
memory_mib = 24564
reserved_mib = 384
bandwidth_gb_s = 1008
tflops = {{ fp32 = 82.6, tf32 = 82.6, fp16 = 165.2, bf16 = 165.2 }}
bf16 = {bf16}
form_factor = "pcie"
interconnect = "pcie4"
interconnect_gb_s = 32
source = "a datasheet, for the test"
aliases = {aliases}
{extra}
"""


def _write(tmp_path: Path, *rows: str, header: str = "default_reserved_mib = 256\n") -> Path:
    path = tmp_path / "gpus.toml"
    path.write_text(header + "".join(rows), encoding="utf-8")
    return path


def _row(gid="card-a", name="Card A", bf16="true", aliases='["Alpha"]', extra=""):
    return ROW.format(id=gid, name=name, bf16=bf16, aliases=aliases, extra=extra)


def test_loader_converts_units(tmp_path):
    no_reserve = _row("card-b", "Card B", aliases="[]").replace("reserved_mib = 384\n", "")
    path = _write(tmp_path, _row(), no_reserve)
    cat = load_catalog(path)
    a, b = cat["card-a"], cat["card-b"]
    assert a.memory_bytes == 24564 * MiB and a.usable_bytes == (24564 - 384) * MiB
    assert b.usable_bytes == (24564 - 256) * MiB  # the file's default reserve
    assert a.bandwidth_bytes_s == 1008e9 and a.interconnect_bytes_s == 32e9
    assert a.peak_flops == {"fp32": 82.6e12, "tf32": 82.6e12, "fp16": 165.2e12, "bf16": 165.2e12}
    assert a.aliases == ("Alpha",) and a.price_usd is None


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ((_row(), _row("card-b", "Card B", aliases='["card a"]')), "would name both"),
        ((_row(bf16="false"),), "bf16"),
        ((_row(extra="colour = 'green'"),), "unknown key"),
        ((_row(gid="Card_A"),), "lowercase"),
        ((_row(extra="price_usd = 100"),), "price_date"),
        ((_row(), _row()), "twice"),
        ((_row(extra="gemm_tflops = { fp32 = 50 }"),), "gemm_source"),
        ((_row(extra='gemm_source = "a measurement"'),), "without gemm_tflops"),
        ((_row(extra='gemm_tflops = { fp8 = 300 }\ngemm_source = "x"'),), "takes fp32"),
        ((_row(extra='gemm_tflops = { fp32 = 5 }\ngemm_source = "x"'),), "20-130 %"),
    ],
)
def test_loader_rejects_broken_rows(tmp_path, rows, problem):
    with pytest.raises(ValueError, match=problem):
        load_catalog(_write(tmp_path, *rows))


def test_gemm_rates_read_back_and_give_the_share_of_the_peak(tmp_path):
    extra = 'gemm_tflops = { fp32 = 52.42, fp16 = 156.19 }\ngemm_source = "torch.mm, for the test"'
    card = load_catalog(_write(tmp_path, _row(extra=extra)))["card-a"]
    assert card.gemm_flops == {"fp32": 52.42e12, "fp16": 156.19e12}
    assert card.gemm_share("fp32") == pytest.approx(52.42 / 82.6)
    assert card.gemm_share("bf16") is None  # nothing published for it
    row = gpu_to_row(card)
    assert row["gemm_tflops"] == {"fp32": 52.42, "fp16": 156.19}
    assert row["gemm_source"] == "torch.mm, for the test"
    again = _write(tmp_path, row_to_toml(row).replace("[[gpu]]", "\n[[gpu]]"))
    assert load_catalog(again)["card-a"] == card


def test_published_gemm_rates_show_what_the_datasheet_hides():
    """The 72 W L4 sustains about a third of its FP32 peak in a long GEMM; GeForce Ampere and Ada
    two thirds (FP32 lanes shared with INT32); the A100 nearly all of it; the H200 reference ~0.77."""
    assert get_gpu("l4").gemm_share("fp32") < 0.4
    for card in ("rtx-3090", "rtx-4090", "rtx-3060-12gb"):
        assert 0.6 < get_gpu(card).gemm_share("fp32") < 0.7
    geforce = [s for s in SPECS if s.id.startswith("rtx-") and s.gemm_flops]
    assert len(geforce) >= 6
    assert all(s.gemm_share("fp32") < 0.75 for s in geforce)  # FP32 lanes shared with INT32
    assert get_gpu("a100-80gb").gemm_share("fp32") > 0.95
    assert 0.75 < get_gpu("h200").gemm_share("fp32") < 0.8
    assert get_gpu("t4").gemm_share("tf32") == get_gpu("t4").gemm_share("fp32")  # no TF32: its FP32


# ----------------------------------------------------------------------------- local detection


def test_detect_returns_a_list_and_no_gpu_means_empty():
    gpus = detect_local_gpus()
    assert isinstance(gpus, list)
    if not nvml_available():
        assert gpus == []


def test_detect_without_pynvml_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    assert detect_local_gpus() == []
    assert nvml_available() is False


def test_catalog_match_tells_memory_siblings_apart():
    assert match_catalog("NVIDIA GeForce RTX 3060", 12288 * MiB) == "rtx-3060-12gb"
    assert match_catalog("NVIDIA GeForce RTX 3060", 8192 * MiB) is None  # the 8 GB card
    assert match_catalog("NVIDIA H100 80GB HBM3", 81559 * MiB) == "h100-sxm"
    assert match_catalog("NVIDIA GeForce GTX 1080", 8192 * MiB) is None


def _local(name: str, mib: int, catalog_id: str | None) -> LocalGpu:
    return LocalGpu(
        index=0,
        name=name,
        uuid="GPU-0",
        memory_total_bytes=mib * MiB,
        memory_used_bytes=0,
        memory_reserved_bytes=None,
        driver_version="",
        cuda_capability=None,
        catalog_id=catalog_id,
    )


def test_spec_for_local():
    assert spec_for_local(_local("NVIDIA GeForce RTX 4090", 24564, "rtx-4090")) == get_gpu("rtx-4090")
    assert spec_for_local(_local("NVIDIA GeForce GTX 1080", 8192, None)) is None


@pytest.mark.gpu
@pytest.mark.skipif(not nvml_available(), reason="needs an NVIDIA driver")
def test_detect_real_gpus():
    gpus = detect_local_gpus()
    assert gpus, "NVML initialised but listed no GPU"
    for g in gpus:
        assert g.name and g.memory_total_bytes > 0 and 0 <= g.memory_used_bytes <= g.memory_total_bytes
        spec = spec_for_local(g)
        if spec is not None:
            assert g.memory_total_bytes == pytest.approx(spec.memory_bytes, rel=0.1)
