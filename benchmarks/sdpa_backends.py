"""Which scaled-dot-product-attention backend trains fastest, per shape.

PyTorch's `F.scaled_dot_product_attention` picks a backend by a fixed priority (on Hopper with
PyTorch 2.11: cuDNN's fused attention first when it accepts the inputs, then FlashAttention-2,
then the memory-efficient kernel, then math). The tuned training step of a decoder spends a
large share of its time there: Llama-3.2-1B at seq 2048 batch 4 on an H200 spent 29.6 ms of a
206 ms step in cuDNN's SDPA forward and backward (benchmarks/results/compiled-step-*-profile),
130 TFLOP/s at head dimension 64. This script times forward + backward of each backend that
accepts a shape and prints the achieved TFLOP/s (causal: half the score square), so that the
tuned mode can choose by measurement and the estimator's attention share can be checked per head
dimension.

On a GPU ten passes are captured in one CUDA graph and its replays timed (graph_timing; the
median of --repeats replays), as the tuned step runs them: timed eagerly, one BERT-sized call
is mostly launch time (~0.6 ms against 0.27 ms in the graph), which made the backends look
alike. BERT-style shapes run with the attention dropout (0.1) of their training step.

    PYTHONPATH=src python benchmarks/sdpa_backends.py                 # ~1 min on an H200
    PYTHONPATH=src python benchmarks/sdpa_backends.py --cpu --tiny    # smoke test (math only)
    PYTHONPATH=src python benchmarks/sdpa_backends.py --seq-sweep     # causal, seq 512-16384

Writes benchmarks/results/sdpa-backends-<gpu>-<date>.json (or --out).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
from pathlib import Path
from typing import Any

import graph_timing  # benchmarks/ on the path: the CUDA-graph timer

RESULTS = Path(__file__).resolve().parent / "results"

# (name, batch, heads, kv_heads, seq, head_dim, causal, padding mask, dropout)
SHAPES = [
    ("llama-3.2-1b b4 s2048", 4, 32, 8, 2048, 64, True, False, 0.0),
    ("llama-3.2-1b b8 s2048", 8, 32, 8, 2048, 64, True, False, 0.0),
    ("llama-3-8b b2 s2048", 2, 32, 8, 2048, 128, True, False, 0.0),
    ("qwen2.5-1.5b b8 s1024", 8, 12, 2, 1024, 128, True, False, 0.0),
    ("bert-base b16 s512 (no mask)", 16, 12, 12, 512, 64, False, False, 0.1),
    ("bert-base b16 s512 (no dropout)", 16, 12, 12, 512, 64, False, False, 0.0),
    ("bert-base b16 s512 (padding mask)", 16, 12, 12, 512, 64, False, True, 0.1),
    ("roberta-base b32 s256", 32, 12, 12, 256, 64, False, False, 0.1),
]
# --seq-sweep: causal attention at one number of tokens (b x s = 16,384) from seq 512 to 16,384,
# at head dimensions 64 and 128 (32 query heads over 8 key/value heads), the default backend only:
# how the fused kernels' rate grows with the sequence they stream over
SWEEP_TOKENS = 16384
SWEEP_SEQS = (512, 1024, 2048, 4096, 8192, 16384)
SWEEP = [
    (f"hd{d} b{SWEEP_TOKENS // s} s{s}", SWEEP_TOKENS // s, 32, 8, s, d, True, False, 0.0)
    for d in (64, 128)
    for s in SWEEP_SEQS
]
TINY = [
    ("tiny", 2, 4, 2, 64, 16, True, False, 0.0),
    ("tiny mask", 2, 4, 4, 32, 16, False, True, 0.1),
]
GRAPH_CALLS = 10  # forward + backward passes captured per graph replay


def _flops(b: int, h: int, s: int, d: int, causal: bool) -> float:
    """Forward + backward FLOPs of attention: QK^T and PV forward (4 b h s^2 d), backward 2.5x
    (FlashAttention's recompute of the scores); causal does half."""
    fwd = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    return fwd * 3.5


def measure(shape: tuple, device: str, repeats: int, *, default_only: bool = False) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    name, b, h, kvh, s, d, causal, masked, dropout = shape
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    q = torch.randn(b, h, s, d, device=device, dtype=dtype, requires_grad=True)
    # keys and values expanded to every query head, as transformers does before SDPA for GQA
    k0 = torch.randn(b, kvh, s, d, device=device, dtype=dtype, requires_grad=True)
    v0 = torch.randn(b, kvh, s, d, device=device, dtype=dtype, requires_grad=True)
    mask = None
    if masked:  # a padding mask as BERT's extended mask: every row sees the first 3/4 of the keys
        mask = torch.zeros(b, 1, 1, s, device=device, dtype=dtype)
        mask[..., (3 * s) // 4 :] = torch.finfo(dtype).min
    grad = torch.randn(b, h, s, d, device=device, dtype=dtype)
    out: dict[str, Any] = {
        "shape": name,
        "batch": b,
        "heads": h,
        "kv_heads": kvh,
        "seq": s,
        "head_dim": d,
        "causal": causal,
        "padding_mask": masked,
        "dropout": dropout,
        "timing": "cuda graph" if device.startswith("cuda") else "eager",
        "backends": {},
    }
    backends = {
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "math": SDPBackend.MATH,
    }

    def step(chosen: list) -> None:
        with sdpa_kernel(chosen):
            if default_only:  # the sweep: grouped heads handed over as transformers 5 trains them
                o = F.scaled_dot_product_attention(q, k0, v0, is_causal=causal, enable_gqa=True)
            else:
                k = k0.repeat_interleave(h // kvh, dim=1)
                v = v0.repeat_interleave(h // kvh, dim=1)
                o = F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, is_causal=causal, dropout_p=dropout
                )
            torch.autograd.backward(o, grad)

    for label, backend in [("default", None), *([] if default_only else backends.items())]:
        chosen = list(backends.values()) if backend is None else [backend]
        try:
            calls = GRAPH_CALLS if device.startswith("cuda") else 1
            times = graph_timing.replay_seconds(lambda chosen=chosen: step(chosen), device, calls, repeats)
            seconds = statistics.median(times)
        except RuntimeError as exc:  # the backend does not take this shape / mask / card
            out["backends"][label] = {"error": str(exc).splitlines()[0][:160]}
            continue
        out["backends"][label] = {
            "seconds": seconds,
            "tflops": _flops(b, h, s, d, causal) / seconds / 1e12,
        }
    return out


LABELS = ("default", "cudnn", "flash", "efficient", "math")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seq-sweep", action="store_true", help="causal, seq 512-16384, default backend")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import torch

    device = "cpu" if args.cpu else "cuda"
    gpu = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    shapes = TINY if args.tiny else SWEEP if args.seq_sweep else SHAPES
    rows = [measure(shape, device, args.repeats, default_only=args.seq_sweep) for shape in shapes]
    print(f"{'shape':38s} " + " ".join(f"{b:>16s}" for b in LABELS))
    for r in rows:
        cells = []
        for label in LABELS:
            m = r["backends"].get(label, {})
            cells.append(
                f"{m['seconds'] * 1e3:7.3f} ms {m['tflops']:4.0f}T" if "seconds" in m else f"{'-':>16s}"
            )
        print(f"{r['shape']:38s} " + " ".join(f"{c:>16s}" for c in cells))
    slug = gpu.lower().replace("nvidia ", "").split()[0] if device == "cuda" else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    kind = "sdpa-seq-sweep" if args.seq_sweep else "sdpa-backends"
    path = args.out / f"{kind}-{slug}-{dt.date.today().isoformat()}.json"
    record = {"benchmark": "sdpa_backends", "gpu": gpu, "torch": torch.__version__, "rows": rows}
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
