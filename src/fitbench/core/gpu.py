"""GpuSpec: one catalog row. Dense datasheet figures only; sources travel with the row."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """A GPU as the estimator sees it.

    memory_bytes         total device memory as nvidia-smi reports it (a '24 GB' card has 24 GiB)
    nominal_memory_gib   the marketing size the row gives (memory_gib), kept so a row can be
                         written back out unchanged (0: not known)
    usable_bytes         what one process can allocate: the total minus what the driver keeps
    bandwidth_bytes_s    memory bandwidth, bytes per second
    peak_flops           dense peak per compute precision: fp32, tf32, fp16, bf16 (FLOP/s,
                         tensor-core rates with FP32 accumulation, no sparsity); fp8 only on cards
                         with FP8 tensor cores (``"fp8" in peak_flops`` is the test for it), int8
                         (OP/s) where the vendor publishes it
    price_usd            purchase (launch) price; rent_usd_per_hour an example on-demand rate for
                         one GPU; each with its source and date (YYYY-MM)
    measured             False where fitbench has never measured the card's framework path (its
                         efficiencies come from other hardware): the estimate is arithmetic only
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

    def has_rate(self, compute: str) -> bool:
        """Whether the card has tensor cores of this type (catalog rows list 'fp8' and 'int8'
        dense rates only for cards that have them: Ada, Hopper, Blackwell for fp8)."""
        return compute in self.peak_flops

    def peak(self, compute: str) -> float:
        """Dense peak FLOP/s for a compute precision; a rate the card lacks falls back to FP32.

        A card without BF16 (T4, V100) runs bf16 requests at its FP32 rate, which is what the
        frameworks do (emulation through fp32 paths) and why the advice prefers fp16 there; a card
        without TF32 (Turing, Volta) runs tf32 requests as plain FP32.
        """
        return self.peak_flops.get(compute, self.peak_flops["fp32"])
