"""CPU offload: layers on the GPU, CPU RAM, speed, and the offload rung of the verdict ladder."""

from __future__ import annotations

import pytest

from fitbench.advise.text import offload_line
from fitbench.catalog import resolve_gpus
from fitbench.core import host
from fitbench.core.units import GiB
from fitbench.estimate import offload
from fitbench.estimate.api import estimate, required_bytes
from fitbench.estimate.offload import effective_verdict, module_bytes, offload_estimate
from fitbench.estimate.verdict import FITS, OFFLOAD, OOM, TIGHT, VERDICT_ORDER
from fitbench.workloads.presets import get_workload

PLENTY = (256 * GiB, 200 * GiB)


def _est(name: str, gid: str, **kw):
    return estimate(get_workload(name).replace(**kw), resolve_gpus([gid])[0])


def test_the_ladder_puts_offload_between_tight_and_oom() -> None:
    assert VERDICT_ORDER[FITS] < VERDICT_ORDER[TIGHT] < VERDICT_ORDER[OFFLOAD] < VERDICT_ORDER[OOM]


def test_only_generation_that_does_not_fit_is_offloaded() -> None:
    assert offload_estimate(_est("llm-6b", "rtx-4090"), ram=PLENTY) is None  # fits
    train = _est("llm-6b", "rtx-3060-12gb", mode="train", seq_len=512, precision="amp-bf16")
    assert offload_estimate(train, ram=PLENTY) is None
    assert offload_estimate(_est("llm-6b", "rtx-3060-12gb"), ram=PLENTY) is not None


def test_placement_follows_accelerate_order_and_reserve() -> None:
    est = _est("llm-6b", "rtx-3060-12gb")
    off = offload_estimate(est, ram=PLENTY)
    assert off.verdict == OFFLOAD and 0 < off.gpu_layers < off.total_layers == 32
    embed, layer, head = module_bytes(est.workload)
    assert off.gpu_weight_bytes == pytest.approx(embed + off.gpu_layers * layer)
    assert off.gpu_weight_bytes + off.cpu_weight_bytes == pytest.approx(embed + 32 * layer + head, abs=1)
    # What is on the GPU, the room kept for the largest module and the non-weight memory fit.
    non_weight = required_bytes(est.memory) - est.memory.parts["weights"]
    assert off.gpu_weight_bytes + off.reserve_bytes + non_weight <= est.gpu.usable_bytes
    # One more layer would not have.
    assert off.gpu_weight_bytes + layer + off.reserve_bytes + non_weight > est.gpu.usable_bytes
    assert off.reserve_bytes == max(embed, layer, head)


def test_a_smaller_card_keeps_fewer_layers_and_runs_slower() -> None:
    big = offload_estimate(_est("llm-6b", "rtx-3060-12gb"), ram=PLENTY)
    small = offload_estimate(_est("llm-6b", "rtx-3080-10gb"), ram=PLENTY)
    assert small.gpu_layers < big.gpu_layers
    assert small.tokens_per_second < big.tokens_per_second
    # Streaming over PCIe costs more than the card's own step: far below the in-memory speed.
    fits = _est("llm-6b", "rtx-4090")
    assert big.tokens_per_second < fits.tokens_per_second / 3
    # llama.cpp computes the CPU part at CPU bandwidth, faster than shipping it over PCIe here.
    assert big.llama_cpp_tokens_per_second > big.tokens_per_second
    assert big.llama_cpp_gpu_layers >= big.gpu_layers


def test_pcie_generation_sets_the_transfer_rate() -> None:
    # An SXM module reaches the host through PCIe 5, not its NVLink.
    assert offload.host_link(resolve_gpus(["h100-sxm"])[0]) == ("pcie5", 64e9)
    assert offload.host_link(resolve_gpus(["t4"])[0]) == ("pcie3", 16e9)


def test_not_enough_cpu_ram_keeps_it_oom() -> None:
    est = _est("llm-70b", "h100-sxm")
    short = offload_estimate(est, ram=(32 * GiB, 16 * GiB))
    assert short.verdict == OOM and short.reason == "host-ram" and short.host_ram_enough is False
    assert short.tokens_per_second is None
    unknown = offload_estimate(est, ram=None)
    assert unknown.verdict == OFFLOAD and unknown.host_ram_enough is None
    assert effective_verdict(est, short) == OOM and effective_verdict(est, unknown) == OFFLOAD
    assert effective_verdict(est, None) == est.verdict


def test_meminfo_is_read_without_a_dependency(tmp_path) -> None:
    f = tmp_path / "meminfo"
    f.write_text("MemTotal:       32000000 kB\nMemFree:  1000 kB\nMemAvailable:   20000000 kB\n")
    assert host.memory_bytes(str(f)) == (32000000 * 1024, 20000000 * 1024)
    assert host.memory_bytes(str(tmp_path / "missing")) is None


def test_the_advice_sentence_in_both_languages() -> None:
    off = offload_estimate(_est("llm-6b", "rtx-3060-12gb"), ram=PLENTY)
    en, zh = offload_line(off, "en"), offload_line(off, "zh")
    assert f"{off.gpu_layers} of 32 layers on the GPU" in en and "tok/s" in en
    assert f"{off.gpu_layers} 层在 GPU 上" in zh
    # Well under 1 tok/s (70B over PCIe 4) keeps two significant figures instead of rounding up.
    slow = offload_estimate(_est("llm-70b", "rtx-4090"), ram=PLENTY)
    assert slow.tokens_per_second < 0.095
    assert f"~{slow.tokens_per_second:.2g} tok/s with" in offload_line(slow, "en")
    assert f"约 {slow.tokens_per_second:.2g} tok/s" in offload_line(slow, "zh")
    short = offload_estimate(_est("llm-70b", "h100-sxm"), ram=(32 * GiB, 16 * GiB))
    assert "CPU RAM" in offload_line(short, "en") and "内存" in offload_line(short, "zh")


def test_accelerate_speed_is_the_gpu_step_plus_one_unoverlapped_copy_pass() -> None:
    # Hand arithmetic: every offloaded tensor crosses once per forward pass at the pageable rate,
    # plus the hook's per-tensor cost, added to the GPU's own step (nothing overlaps).
    est = _est("llm-6b", "rtx-3060-12gb")
    copy = offload.HostCopy(8e9, 1e-3)
    off = offload_estimate(est, ram=PLENTY, copy=copy)
    _, per_layer, per_head = offload.module_tensors(est.workload.arch)
    assert (per_layer, per_head) == (9, 2)  # Llama-like: q k v o, gate up down, two RMSNorms; norm + head
    tensors = (32 - off.gpu_layers) * 9 + 2
    assert off.offloaded_tensors == tensors
    copy_s = off.cpu_weight_bytes / 8e9 + tensors * 1e-3
    assert off.copy_seconds_per_pass == pytest.approx(copy_s, rel=1e-6)
    assert off.tokens_per_second == pytest.approx(1 / (est.step_seconds + copy_s), rel=1e-6)
    assert off.prefill_seconds == pytest.approx(est.prefill_seconds + copy_s, rel=1e-6)
    # The built-in figures: a card on PCIe 5 copies at the H200 host's measured rate and hook cost.
    built_in = offload_estimate(_est("llm-70b", "h100-sxm"), ram=PLENTY)
    assert built_in.copy.pageable_bytes_s == 8.2e9 < built_in.link_bytes_s / 2
    assert built_in.to_dict()["hook_seconds_per_tensor"] == 0.38e-3
    assert built_in.to_dict()["host_copy_source"].startswith("measured on the H200 host")


def test_older_links_keep_the_hosts_staging_memcpy_and_pay_their_own_dma() -> None:
    # Hand arithmetic in GB/s: 1/8.2 = 1/memcpy + 1/50 on PCIe 5 (50 of 64 GB/s pinned), so
    # 1/memcpy = 0.121951 - 0.02 = 0.101951; PCIe 4 pins 25 GB/s, PCIe 3 12.5 GB/s.
    rates = offload.PAGEABLE_H2D_BYTES_S
    assert rates["pcie5"] == 8.2e9
    assert rates["pcie4"] == pytest.approx(1e9 / (0.101951 + 1 / 25), rel=1e-4)  # 7.045 GB/s (to 1 MB/s)
    assert rates["pcie3"] == pytest.approx(1e9 / (0.101951 + 1 / 12.5), rel=1e-4)  # 5.496 GB/s
    ampere = offload_estimate(_est("llm-6b", "rtx-3060-12gb"), ram=PLENTY)
    assert ampere.link == "pcie4" and ampere.copy.pageable_bytes_s == rates["pcie4"]
    assert ampere.copy.seconds_per_tensor == 0.38e-3  # host time: the same on every link
    assert "derived for pcie4" in ampere.copy.source
