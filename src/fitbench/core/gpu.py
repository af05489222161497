"""GpuSpec: one catalog row. Dense datasheet figures only; sources travel with the row."""

from __future__ import annotations

from dataclasses import dataclass, field

# Achieved / datasheet bandwidth of a streaming kernel (copy, triad: large arrays, every byte read
# or written once) by memory type: the ceiling a well-written memory-bound kernel reaches. Each
# value is the mean of the published per-card measurements in benchmarks/data/stream_bandwidth.toml
# (sources there). DEFAULT_STREAM_EFFICIENCY is their median, for a card whose type is not given.
STREAM_EFFICIENCY = {
    "hbm2": 0.85,  # V100 0.83, A100 40GB 0.87
    "hbm2e": 0.86,  # no card measured here: between HBM2 and HBM3
    "hbm3": 0.91,  # GH200 96GB: coalesced read 0.90, write 0.93
    "hbm3e": 0.88,  # H200 (fitbench's own copy: 4.2-4.3 of 4.8 TB/s)
    "gddr6": 0.75,  # T4 (device-to-device copy)
    "gddr6x": 0.91,  # RTX 4090
    "gddr7": 0.88,  # RTX 5090 (cub's BabelStream triad)
}
DEFAULT_STREAM_EFFICIENCY = 0.88


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """A GPU as the estimator sees it.

    memory_bytes         total device memory as nvidia-smi reports it (a '24 GB' card has 24 GiB)
    nominal_memory_gib   the marketing size the row gives (memory_gib), kept so a row can be
                         written back out unchanged (0: not known)
    usable_bytes         what one process can allocate: the total minus what the driver keeps
    bandwidth_bytes_s    memory bandwidth, bytes per second
    memory_type          hbm2 / hbm2e / hbm3 / hbm3e / gddr6 / gddr6x / gddr7 ('' not known): what
                         share of the datasheet bandwidth a streaming kernel reaches (STREAM_EFFICIENCY)
    sm_count             streaming multiprocessors (AMD: compute units); 0 where not known
    peak_flops           dense peak per compute precision: fp32, tf32, fp16, bf16 (FLOP/s,
                         tensor-core rates with FP32 accumulation, no sparsity); fp8 only on cards
                         with FP8 tensor cores (``"fp8" in peak_flops`` is the test for it), int8
                         (OP/s) where the vendor publishes it
    price_usd            purchase (launch) price; rent_usd_per_hour an example on-demand rate for
                         one GPU; each with its source and date (YYYY-MM)
    measured             False where fitbench has never measured the card's framework path (its
                         efficiencies come from other hardware): the estimate is arithmetic only
    gemm_flops           the rate a large torch.mm really sustains on the card, per precision
                         (FLOP/s, published measurements named in gemm_source): below the datasheet
                         peak where the card holds a lower clock under load (a 72 W L4 runs an FP32
                         GEMM at ~0.36 of its boost-clock peak) or its FP32 lanes are shared with
                         INT32 (GeForce Ampere, Ada, Blackwell: 0.58-0.70), above it where the card boosts
                         past the datasheet clock (GeForce tensor rates). Empty where none is published.
    """

    id: str
    name: str
    vendor: str
    architecture: str
    memory_bytes: int
    usable_bytes: int
    bandwidth_bytes_s: float
    peak_flops: dict[str, float]
    bf16: bool
    memory_type: str = ""
    sm_count: int = 0
    nominal_memory_gib: float = 0.0
    form_factor: str = ""
    interconnect: str = ""
    interconnect_bytes_s: float = 0.0
    price_usd: float | None = None
    price_source: str = ""
    price_date: str = ""
    rent_usd_per_hour: float | None = None
    rent_source: str = ""
    rent_date: str = ""
    measured: bool = True
    source: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)
    notes: str = ""
    gemm_flops: dict[str, float] = field(default_factory=dict)
    gemm_source: str = ""

    @property
    def stream_efficiency(self) -> float:
        """Achieved / datasheet bandwidth of a streaming kernel on this card's memory type."""
        return STREAM_EFFICIENCY.get(self.memory_type, DEFAULT_STREAM_EFFICIENCY)

    @property
    def stream_bandwidth_bytes_s(self) -> float:
        """The bandwidth a large copy or elementwise kernel really reaches, bytes per second."""
        return self.bandwidth_bytes_s * self.stream_efficiency

    def has_rate(self, compute: str) -> bool:
        """Whether the card has tensor cores of this type (catalog rows list 'fp8' and 'int8'
        dense rates only for cards that have them: Ada, Hopper, Blackwell for fp8)."""
        return compute in self.peak_flops

    def gemm_share(self, compute: str) -> float | None:
        """The published sustained GEMM rate over the dense peak that `peak(compute)` gives, or
        None where no rate is published for it (a rate the card lacks is its FP32 one, as in peak)."""
        key = compute if compute in self.peak_flops else "fp32"
        measured = self.gemm_flops.get(key)
        return None if measured is None else measured / self.peak_flops[key]

    def peak(self, compute: str) -> float:
        """Dense peak FLOP/s for a compute precision; a rate the card lacks falls back to FP32.

        A card without BF16 (T4, V100) runs bf16 requests at its FP32 rate, which is what the
        frameworks do (emulation through fp32 paths) and why the advice prefers fp16 there; a card
        without TF32 (Turing, Volta) runs tf32 requests as plain FP32.
        """
        return self.peak_flops.get(compute, self.peak_flops["fp32"])
