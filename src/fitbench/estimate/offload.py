"""CPU offload: how a model that does not fit still runs, as accelerate and llama.cpp place it.

Two ways to run a model whose weights exceed the card, with different costs:

* accelerate's ``device_map="auto"`` (``infer_auto_device_map``) walks the modules in order
  (embeddings, decoder layers, final norm and LM head) and puts each on the GPU while it fits
  under ``max_memory``; from the first one that does not fit, everything goes to the CPU. A
  decoder layer is a no-split module (``_no_split_modules``), so a layer is never cut in two.
  Because offloaded weights are copied to the GPU to run there, it first reserves room for the
  largest module on the GPU. Every forward pass (the prefill and each decoded token) then brings
  every offloaded tensor over: each offloaded leaf module has its own ``AlignDevicesHook``, whose
  ``pre_forward`` calls ``set_module_tensor_to_device`` once per tensor, a blocking
  ``.to(device)`` from pageable host memory (the driver stages it through a pinned buffer, far
  below the link's peak) followed by ``torch.cuda.empty_cache()`` (its default
  ``clear_cache=True``), and ``post_forward`` drops it again. Nothing overlaps: the blocking copy
  waits for the queued compute and the next kernel waits for the copy. A pass costs the GPU's own
  step + offloaded bytes / pageable copy rate + offloaded tensors x the per-tensor host cost.
* llama.cpp's ``--n-gpu-layers N`` puts the last N layers (and the output layer once all fit) on
  the GPU and *computes* the rest on the CPU, bound by the CPU's memory bandwidth: a token costs
  the GPU layers' share of the step plus CPU-resident bytes / CPU bandwidth. Token embeddings stay
  in CPU memory.

Both keep the KV cache and activations on the GPU for the GPU part; fitbench keeps all of the
estimate's non-weight memory there (for llama.cpp that overstates the GPU's share slightly).
The offloaded weights must fit in CPU RAM, which is read from /proc/meminfo.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fitbench.core import host
from fitbench.core.gpu import GpuSpec
from fitbench.estimate import speed
from fitbench.estimate.api import Estimate, required_bytes
from fitbench.estimate.profile import get_profile
from fitbench.estimate.verdict import OFFLOAD, OOM
from fitbench.estimate.weights import weight_bytes
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# Host link of each card: per-direction x16 peaks. SXM modules reach the host through PCIe too
# (V100 SXM2 PCIe 3.0, A100 SXM4 PCIe 4.0, H100/H200 SXM5 and MI300X OAM PCIe 5.0), so the catalog's NVLink
# figure is not the path offloaded weights take.
PCIE_BYTES_S = {"pcie3": 16e9, "pcie4": 32e9, "pcie5": 64e9}
HOST_LINK_BY_ARCHITECTURE = {
    "volta": "pcie3",
    "turing": "pcie3",
    "ampere": "pcie4",
    "ada": "pcie4",
    "hopper": "pcie5",
    "blackwell": "pcie5",
    "cdna3": "pcie5",
}
# Copy rates through accelerate's hooks, measured on the H200 host by benchmarks/offload_gpu.py,
# 2026-12-03 (PCIe 5, at the offloaded model's tensor sizes): pageable 8.2 GB/s, pinned 50.0 GB/s,
# 0.38 ms per hooked tensor beyond the plain copy.
MEASURED_LINK = "pcie5"
MEASURED_PAGEABLE_BYTES_S = 8.2e9
MEASURED_PINNED_BYTES_S = 50.0e9
# A pinned copy is pure DMA over the link: 50.0 of 64 GB/s, the efficiency every PCIe generation's
# x16 link reaches in the same way (bandwidthTest reports ~12-13 GB/s on PCIe 3, ~25 on PCIe 4).
PINNED_LINK_EFFICIENCY = MEASURED_PINNED_BYTES_S / PCIE_BYTES_S[MEASURED_LINK]
# A pageable copy is staged: the driver memcpys each chunk into a pinned bounce buffer, then DMAs
# it; the blocking copy pays both. So 1/pageable = 1/host memcpy + 1/pinned, which gives this
# host's staging memcpy rate from the two measured figures (~9.8 GB/s) without any new fitting.
# The memcpy belongs to the host, not the link, so other generations keep it and pay their own
# pinned DMA time: a slower link lowers the pageable rate, but less than in proportion. (Keeping
# the same fraction of the link would make PCIe 3 pay the link's slowness four times over although
# the memcpy part does not change; keeping the same absolute rate would ignore the DMA half.)
HOST_STAGING_BYTES_S = 1 / (1 / MEASURED_PAGEABLE_BYTES_S - 1 / MEASURED_PINNED_BYTES_S)


def _pageable(link: str) -> float:
    """Pageable rate on `link`: the measured host's staging memcpy, then DMA at the link's pinned rate
    (rounded to 1 MB/s so that the measured link gives back exactly the measured figure)."""
    pinned = PINNED_LINK_EFFICIENCY * PCIE_BYTES_S[link]
    return round(1 / (1 / HOST_STAGING_BYTES_S + 1 / pinned), -6)


PAGEABLE_H2D_BYTES_S = {link: _pageable(link) for link in PCIE_BYTES_S}
# Host time per offloaded tensor per forward pass in accelerate's hook path: the hook's Python,
# set_module_tensor_to_device's checks, the synchronising torch.cuda.empty_cache() after every
# tensor and the cudaMalloc that the next tensor then needs. Measured as one hooked layer's forward
# less the same tensors' plain copies. It is host CPU and driver time, not link time, so every link
# generation keeps it.
HOOK_SECONDS_PER_TENSOR = 0.38e-3
HOST_COPY_SOURCE = (
    "measured on the H200 host by benchmarks/offload_gpu.py, 2026-12-03: pageable 8.2 GB/s, "
    "0.38 ms per hooked tensor"
)
# Memory bandwidth a CPU achieves on llama.cpp's matrix-vector products: a desktop's dual-channel
# DDR5 reads ~60-80 GB/s in STREAM, llama.cpp reaches most of it; servers have several times more.
CPU_BANDWIDTH_BYTES_S = 50e9


@dataclass(frozen=True)
class HostCopy:
    """How fast one host moves offloaded weights to its GPU through accelerate's hooks."""

    pageable_bytes_s: float  # a blocking .to(device) from pageable memory
    seconds_per_tensor: float  # the hook path's host cost per tensor, copy excluded
    source: str = HOST_COPY_SOURCE

    def seconds(self, nbytes: float, tensors: int) -> float:
        """One forward pass's copies: nothing overlaps, so bytes and per-tensor costs add up."""
        return nbytes / self.pageable_bytes_s + tensors * self.seconds_per_tensor


def host_copy(link: str) -> HostCopy:
    """The figures for a card on `link` (PAGEABLE_H2D_BYTES_S, HOOK_SECONDS_PER_TENSOR): measured for
    PCIe 5, derived from that measurement for the older links."""
    source = (
        HOST_COPY_SOURCE
        if link == MEASURED_LINK
        else f"derived for {link} from the PCIe 5 host measurement of benchmarks/offload_gpu.py, 2026-12-03"
    )
    return HostCopy(PAGEABLE_H2D_BYTES_S[link], HOOK_SECONDS_PER_TENSOR, source)


@dataclass(frozen=True, kw_only=True)
class OffloadEstimate:
    """Layers on the GPU, CPU memory and speed when the weights do not fit (per engine)."""

    workload: Workload
    gpu: GpuSpec
    verdict: str  # "offload" when it runs this way, else "oom"
    reason: str
    total_layers: int
    gpu_layers: int  # accelerate device_map="auto"
    gpu_weight_bytes: int
    cpu_weight_bytes: int
    reserve_bytes: int
    link: str
    link_bytes_s: float
    tokens_per_second: float | None
    prefill_seconds: float | None
    offloaded_tensors: int
    copy: HostCopy
    copy_seconds_per_pass: float
    llama_cpp_gpu_layers: int
    llama_cpp_cpu_bytes: int
    llama_cpp_tokens_per_second: float | None
    host_ram_total_bytes: int | None
    host_ram_available_bytes: int | None
    cpu_bandwidth_bytes_s: float = CPU_BANDWIDTH_BYTES_S
    assumptions: tuple[str, ...] = field(default_factory=tuple)

    @property
    def host_ram_enough(self) -> bool | None:
        if self.host_ram_available_bytes is None:
            return None
        return self.cpu_weight_bytes <= self.host_ram_available_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "total_layers": self.total_layers,
            "gpu_layers": self.gpu_layers,
            "gpu_weight_bytes": self.gpu_weight_bytes,
            "cpu_ram_bytes": self.cpu_weight_bytes,
            "reserve_bytes": self.reserve_bytes,
            "host_link": self.link,
            "host_link_bytes_s": self.link_bytes_s,
            "tokens_per_second": self.tokens_per_second,
            "prefill_seconds": self.prefill_seconds,
            "offloaded_tensors": self.offloaded_tensors,
            "pageable_h2d_bytes_s": self.copy.pageable_bytes_s,
            "hook_seconds_per_tensor": self.copy.seconds_per_tensor,
            "host_copy_source": self.copy.source,
            "copy_seconds_per_pass": self.copy_seconds_per_pass,
            "llama_cpp_gpu_layers": self.llama_cpp_gpu_layers,
            "llama_cpp_cpu_ram_bytes": self.llama_cpp_cpu_bytes,
            "llama_cpp_tokens_per_second": self.llama_cpp_tokens_per_second,
            "cpu_bandwidth_bytes_s": self.cpu_bandwidth_bytes_s,
            "host_ram_total_bytes": self.host_ram_total_bytes,
            "host_ram_available_bytes": self.host_ram_available_bytes,
            "host_ram_enough": self.host_ram_enough,
            "assumptions": list(self.assumptions),
        }


def host_link(gpu: GpuSpec) -> tuple[str, float]:
    """(name, per-direction bytes/s) of the PCIe link between the card and the host."""
    link = (
        gpu.interconnect
        if gpu.interconnect in PCIE_BYTES_S
        else HOST_LINK_BY_ARCHITECTURE.get(gpu.architecture, "pcie4")
    )
    return link, PCIE_BYTES_S[link]


def module_bytes(workload: Workload) -> tuple[float, float, float]:
    """(embeddings, one decoder layer, final norm + LM head) in bytes as stored. Quantized
    models keep embeddings and head in 16 bit (weights.weight_bytes); the layers take the rest.
    A multimodal checkpoint's vision tower and projector come first in its module order, so
    device_map places them with the embeddings."""
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    p = workload.precision_info
    weights, scales = weight_bytes(workload)
    per = 2 if workload.weight_format is not None else p.weight_bytes
    embed = (arch.embedding_params() + arch.vision_params) * per
    head = arch.head_params() * per
    layer = (weights + scales - embed - head) / arch.num_layers
    return embed, layer, head


def module_tensors(arch: TransformerArch) -> tuple[int, int, int]:
    """(embeddings, one decoder layer, final norm + LM head) in tensors as transformers stores
    them: accelerate's hook pays its per-tensor cost once for each. Experts count as transformers
    5 fuses them (gate_up and down), so a layer's count does not grow with the number of experts."""
    norm = 2 if arch.norm == "layernorm" else 1
    attn = 4 + (3 if arch.qkv_bias else 0) + (1 if arch.out_bias else 0)
    if arch.kv_lora_rank:
        attn += 2 + norm + (1 + norm if arch.q_lora_rank else 0)
    if arch.qk_norm != "none":
        attn += 2
    gated = arch.mlp in ("swiglu", "geglu")
    mlp = (3 if gated else 2) * (2 if arch.mlp_bias else 1)
    if arch.num_experts:
        mlp = 1 + 2 + (3 if arch.shared_intermediate_size else 0) + (1 if arch.shared_expert_gate else 0)
    layer = attn + mlp + arch.norms_per_layer * norm
    head = norm + (0 if arch.tie_embeddings else 1) + (1 if arch.lm_head_bias else 0)
    return 1, layer, head


def applies(est: Estimate) -> bool:
    """Offload is worth estimating for a single-GPU generation job that does not fit."""
    w = est.workload
    return est.verdict == OOM and w.is_generation and w.gpus == 1 and not w.peft


def offload_estimate(
    est: Estimate,
    *,
    framework: str | None = None,
    ram: tuple[int, int] | bool | None = True,
    copy: HostCopy | None = None,
) -> OffloadEstimate | None:
    """How `est`'s job runs with CPU offload, or None where offload does not apply.

    `ram`: (total, available) bytes of the machine's RAM, None when unknown, or True to read
    this machine's /proc/meminfo. `copy`: the host's copy rates (default: host_copy of the card's link).
    """
    if not applies(est):
        return None
    w, gpu = est.workload, est.gpu
    arch = w.arch
    assert isinstance(arch, TransformerArch)
    framework = framework or est.framework
    embed, layer, head = module_bytes(w)
    total = embed + arch.num_layers * layer + head
    non_weight = (
        required_bytes(est.memory)
        - est.memory.parts.get("weights", 0)
        - est.memory.parts.get("quantization_scales", 0)
    )
    budget = gpu.usable_bytes - non_weight
    reserve = max(embed, layer, head)
    # accelerate: modules in order, on the GPU while they fit under the budget less the reserve.
    avail = budget - reserve
    n_embed, n_layer, n_head = module_tensors(arch)
    on_gpu, layers_on = 0.0, 0
    tensors_off = n_embed + arch.num_layers * n_layer + n_head
    if avail >= embed:
        avail -= embed
        on_gpu += embed
        layers_on = int(min(arch.num_layers, max(avail, 0) // layer))
        avail -= layers_on * layer
        on_gpu += layers_on * layer
        tensors_off -= n_embed + layers_on * n_layer
        if layers_on == arch.num_layers and avail >= head:
            on_gpu += head
            tensors_off -= n_head
    cpu_bytes = total - on_gpu
    link, link_bw = host_link(gpu)
    copy = copy or host_copy(link)
    copy_s = copy.seconds(cpu_bytes, tensors_off)
    ram_info = host.memory_bytes() if ram is True else (ram or None)
    ram_total, ram_avail = ram_info if ram_info else (None, None)
    verdict, reason = OFFLOAD, ""
    if budget < reserve:
        verdict, reason = OOM, "no-room-for-largest-layer"
    elif ram_avail is not None and cpu_bytes > ram_avail:
        verdict, reason = OOM, "host-ram"
    tps = cpp_tps = prefill_s = None
    # llama.cpp: as many layers as the budget holds (no reserve: CPU layers never come to the GPU).
    cpp_layers = int(min(arch.num_layers, max(budget, 0) // layer))
    cpp_gpu = cpp_layers * layer + (
        head if cpp_layers == arch.num_layers and budget - cpp_layers * layer >= head else 0
    )
    cpp_cpu = total - cpp_gpu
    if verdict == OFFLOAD and est.step_seconds:
        tps = w.batch_size / (est.step_seconds + copy_s)
        prefill_s = (est.prefill_seconds or 0.0) + copy_s
        tuned = speed.generation(w, gpu, get_profile(framework, "tuned")).decode.seconds
        cpp_step = tuned * (cpp_gpu / total) + cpp_cpu / CPU_BANDWIDTH_BYTES_S
        cpp_tps = w.batch_size / cpp_step if cpp_step > 0 else None
    assumptions = (
        f"accelerate device_map='auto': decoder layers are not split; {reserve / 2**30:.2f} GiB kept free "
        f"on the GPU for the largest module; each forward pass copies {tensors_off} offloaded tensors "
        f"one at a time over {link} from pageable memory at {copy.pageable_bytes_s / 1e9:.1f} GB/s "
        f"plus {copy.seconds_per_tensor * 1e3:.2f} ms of hook cost each ({copy.source}), "
        "not overlapped with compute",
        f"llama.cpp --n-gpu-layers {cpp_layers}: CPU layers read at {CPU_BANDWIDTH_BYTES_S / 1e9:.0f} GB/s "
        "(a desktop's DDR5; servers have more)",
    )
    return OffloadEstimate(
        workload=w,
        gpu=gpu,
        verdict=verdict,
        reason=reason,
        total_layers=arch.num_layers,
        gpu_layers=layers_on,
        gpu_weight_bytes=int(on_gpu),
        cpu_weight_bytes=math.ceil(cpu_bytes),
        reserve_bytes=int(reserve),
        link=link,
        link_bytes_s=link_bw,
        tokens_per_second=tps,
        prefill_seconds=prefill_s,
        offloaded_tensors=tensors_off,
        copy=copy,
        copy_seconds_per_pass=copy_s,
        llama_cpp_gpu_layers=cpp_layers,
        llama_cpp_cpu_bytes=math.ceil(cpp_cpu),
        llama_cpp_tokens_per_second=cpp_tps,
        host_ram_total_bytes=ram_total,
        host_ram_available_bytes=ram_avail,
        assumptions=assumptions,
    )


def effective_verdict(est: Estimate, off: OffloadEstimate | None) -> str:
    """The verdict with offload counted: 'offload' where the GPU alone is oom but offload runs."""
    return OFFLOAD if off is not None and off.verdict == OFFLOAD else est.verdict
