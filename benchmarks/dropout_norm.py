"""What the tuned BERT step's dropout + residual + LayerNorm kernels cost, and what their random numbers cost.

The compiled BERT-base step (seq 512, b16; benchmarks/compiled_step.py --profile-only) spends about
1.9 ms a step in inductor's fused dropout + residual add + LayerNorm kernels (forward and
backward), about twice the time of the bytes they move at the card's streaming rate. Inductor draws
each dropout number with its own Philox call (tl.rand: ten rounds of 32-bit multiplies per
element) inside those 2-D reduction kernels, where aten's dropout draws four numbers per call.
This script times one BERT-base residual site (8192 tokens x 768, an fp32 residual stream plus a
bf16 sublayer output, as autocast runs it; the normalised output written in fp32 and bf16) in a
CUDA graph of repeats, forward alone and forward + backward, for:

    nodrop      no dropout: the floor of the fused kernel (its bytes and its reduction)
    inductor    F.dropout compiled by inductor (what the tuned step runs today)
    bits        the keep mask read from 16-bit random integers given as an input (keep where the
                integer is at or above the threshold for p = 0.1), drawn beforehand
    bits+draw   bits, with the draw (torch.randint, int16, one aten kernel per step for every
                site) counted at one site's share
    align       inductor with align_random_eager (aten's Philox layout), where this torch has it
    fitbench    fitbench's fused operator (backends/torch/dropout_layer_norm: two Triton kernels,
                a hashed mask regenerated in the backward), as the tuned encoder runs it

Beside them the same site's bytes at the streaming rate of a copy measured here, and the GELU of
the MLP (8192 x 3072 bf16) forward and backward against a copy of its bytes, compiled from F.gelu
(libdevice's erf) and from fitbench's erf_gelu (A&S 7.1.26). Seconds and GB/s go to one JSON file.

On an H200 (torch 2.11; dropout-norm-h200-2026-12-04.json) a site's forward took 21.6 us without
dropout and 43.5 us with inductor's; the 16-bit draw itself ran at 0.83 TB/s (15 us a site), so
bits+draw (52.3 us) lost, and the tuned step leaves dropout to aten's kernel instead
(fallback_random in backends/torch/tuned.py INDUCTOR_OPTIONS).

    PYTHONPATH=src python benchmarks/dropout_norm.py --out benchmarks/results/dropout-norm-h200-DATE.json
    PYTHONPATH=src python benchmarks/dropout_norm.py --device cpu --tiny --out /tmp/dn.json  # smoke test

On a CPU nothing is compiled (inductor's GPU kernels are the subject); the rows time the eager
functions, which checks the wiring. About 1-2 minutes on an H200 (five small compiles).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
from pathlib import Path
from typing import Any

from graph_timing import replay_seconds

P = 0.1  # BertConfig.hidden_dropout_prob
EPS = 1e-12
INT16_SPAN = 1 << 16
#: keep where the int16 draw is at or above this: P(drop) = round(P * 65536) / 65536
KEEP_FROM = -(1 << 15) + round(P * INT16_SPAN)
SITES = 25  # BERT-base: the embeddings' LayerNorm and two per layer


def site_bytes(tokens: int, hidden: int, *, backward: bool) -> int:
    """Bytes one dropout + add + LayerNorm site moves at least (forward; + backward)."""
    n = tokens * hidden
    fwd = n * (4 + 2) + n * (4 + 2) + n  # read x fp32, y bf16; write out fp32 + bf16; a keep mask
    # backward: read dout fp32 + dout bf16-path fp32 (summed), x_hat inputs, the mask; write dx, dy
    bwd = n * (4 + 4) + n * 4 + n + n * (4 + 2)
    return fwd + (bwd if backward else 0)


def fused_site_bytes(tokens: int, hidden: int, *, backward: bool) -> int:
    """Bytes fitbench's operator moves at one site: forward reads x fp32 and y bf16 and writes s
    and out in fp32 and out in bf16; backward reads both outputs' gradients and s and writes dx
    (fp32) and dy (bf16): 16 bytes an element each way, no mask."""
    n = tokens * hidden
    return n * 16 * (2 if backward else 1)


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.nn.functional as F

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--replays", type=int, default=7)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--fused-configs",
        default="",
        metavar="F_ROWS:F_WARPS:B_ROWS:B_PER_SM:B_WARPS:B_STAGES,...",
        help="also time fitbench's operator with these launch settings (norm_kernels' FORWARD_ROWS, "
        "FORWARD_WARPS, BACKWARD_ROWS, BACKWARD_PROGRAMS_PER_SM, BACKWARD_WARPS, BACKWARD_STAGES)",
    )
    parser.add_argument("--only-fused", action="store_true", help="time fitbench's operator alone")
    args = parser.parse_args(argv)
    device = args.device
    cuda = device.startswith("cuda")
    tokens, hidden, inter = (256, 64, 256) if args.tiny else (8192, 768, 3072)
    torch.manual_seed(0)
    x = torch.randn(tokens, hidden, device=device, requires_grad=True)
    y = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.ones(hidden, device=device, requires_grad=True)
    b = torch.zeros(hidden, device=device, requires_grad=True)
    g32 = torch.randn(tokens, hidden, device=device)
    g16 = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16)
    bits = torch.randint(-(1 << 15), 1 << 15, (tokens, hidden), device=device, dtype=torch.int16)

    def site(x: Any, y: Any, w: Any, b: Any, p: float) -> Any:
        out = F.layer_norm(x + F.dropout(y, p, True), (hidden,), w, b, EPS)
        return out, out.to(torch.bfloat16)

    def site_bits(x: Any, y: Any, w: Any, b: Any, bits: Any) -> Any:
        kept = torch.where(bits >= KEEP_FROM, y * (1.0 / (1.0 - P)), 0.0)
        out = F.layer_norm(x + kept, (hidden,), w, b, EPS)
        return out, out.to(torch.bfloat16)

    import torch._inductor.config as inductor_config

    has_align = hasattr(inductor_config, "align_random_eager")

    def compiled(fn: Any, **options: Any) -> Any:
        if not cuda:
            return fn
        return torch.compile(fn, options=options or None)

    variants: dict[str, Any] = {}
    f_nodrop = compiled(site)
    variants["nodrop"] = lambda: f_nodrop(x, y, w, b, 0.0)
    f_ind = compiled(site)
    variants["inductor"] = lambda: f_ind(x, y, w, b, P)
    f_bits = compiled(site_bits)
    variants["bits"] = lambda: f_bits(x, y, w, b, bits)

    def draw_share() -> None:
        # one site's share of the step's one draw for all sites: that site's numbers
        torch.randint(-(1 << 15), 1 << 15, (tokens, hidden), device=device, dtype=torch.int16)

    def bits_and_draw() -> Any:
        draw_share()
        return f_bits(x, y, w, b, bits)

    variants["bits+draw"] = bits_and_draw
    from fitbench.backends.torch.dropout_layer_norm import dropout_add_layer_norm

    seed = torch.zeros((), device=device, dtype=torch.int64)

    def site_fused() -> Any:
        return dropout_add_layer_norm(x, y, w, b, seed=seed, site=1, p=P, eps=EPS)

    variants["fitbench"] = site_fused
    if has_align:
        f_align = compiled(site, align_random_eager=True)
        variants["align"] = lambda: f_align(x, y, w, b, P)
    if args.only_fused:
        variants = {"fitbench": site_fused}
    configs = [c for c in args.fused_configs.split(",") if c]

    rows: list[dict[str, Any]] = []

    def timed(name: str, fn: Any, moved: int) -> None:
        seconds = statistics.median(replay_seconds(fn, device, args.calls, args.replays))
        rows.append({"variant": name, "seconds": seconds, "bytes": moved, "gb_per_s": moved / seconds / 1e9})
        print(f"{name:28s} {seconds * 1e6:9.1f} us  {moved / seconds / 1e9:8.0f} GB/s", flush=True)

    big = torch.empty(tokens * hidden * 4, device=device, dtype=torch.uint8)
    big_out = torch.empty_like(big)
    timed("copy (fp32 site tensor)", lambda: big_out.copy_(big), 2 * big.numel())
    for name, fn in variants.items():
        count = fused_site_bytes if name == "fitbench" else site_bytes
        timed(f"{name} forward", lambda fn=fn: fn(), count(tokens, hidden, backward=False))

        def fwd_bwd(fn: Any = fn) -> None:
            out32, out16 = fn()
            torch.autograd.backward((out32, out16), (g32, g16))

        timed(f"{name} forward+backward", fwd_bwd, count(tokens, hidden, backward=True))
        x.grad = y.grad = w.grad = b.grad = None

    from fitbench.backends.torch import norm_kernels

    names = ("FORWARD_ROWS", "FORWARD_WARPS", "BACKWARD_ROWS", "BACKWARD_PROGRAMS_PER_SM")
    names += ("BACKWARD_WARPS", "BACKWARD_STAGES")
    defaults = {n: getattr(norm_kernels, n) for n in names}
    for config in configs:
        for n, value in zip(names, config.split(":"), strict=True):
            setattr(norm_kernels, n, int(value))

        def fused_fwd_bwd() -> None:
            out32, out16 = site_fused()
            torch.autograd.backward((out32, out16), (g32, g16))

        timed(f"fitbench[{config}] forward", site_fused, fused_site_bytes(tokens, hidden, backward=False))
        timed(
            f"fitbench[{config}] forward+backward",
            fused_fwd_bwd,
            fused_site_bytes(tokens, hidden, backward=True),
        )
        x.grad = y.grad = w.grad = b.grad = None
    for n, value in defaults.items():
        setattr(norm_kernels, n, value)

    if not args.only_fused:
        _time_draw_and_gelu(timed, device, tokens, hidden, inter)
    record = {
        "benchmark": "dropout_norm",
        "date": dt.date.today().isoformat(),
        "device": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
        "torch": torch.__version__,
        "align_random_eager_available": has_align,
        "shape": {"tokens": tokens, "hidden": hidden, "intermediate": inter, "p": P, "keep_from": KEEP_FROM},
        "calls": args.calls,
        "replays": args.replays,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def _time_draw_and_gelu(timed: Any, device: str, tokens: int, hidden: int, inter: int) -> None:
    """The int16 draw for every site, and the MLP's GELU (F.gelu and erf_gelu) against a copy."""
    import torch
    import torch.nn.functional as F

    from fitbench.backends.torch.erf_gelu import erf_gelu

    cuda = device.startswith("cuda")

    def compiled(fn: Any) -> Any:
        return torch.compile(fn) if cuda else fn

    draw_all = torch.empty(SITES * tokens * hidden, device=device, dtype=torch.int16)
    timed(
        f"draw int16 for {SITES} sites",
        lambda: draw_all.random_(-(1 << 15), 1 << 15),
        2 * draw_all.numel(),
    )
    # the MLP's GELU (exact, erf), bf16 in and out, as autocast runs it
    h = torch.randn(tokens, inter, device=device, dtype=torch.bfloat16, requires_grad=True)
    gh = torch.randn(tokens, inter, device=device, dtype=torch.bfloat16)
    for label, gelu in (("gelu", F.gelu), ("erf_gelu", erf_gelu)):
        f_gelu = compiled(lambda t, gelu=gelu: gelu(t))
        timed(f"{label} forward", lambda f_gelu=f_gelu: f_gelu(h), 2 * 2 * h.numel())

        def gelu_fwd_bwd(f_gelu: Any = f_gelu) -> None:
            f_gelu(h).backward(gh)

        timed(f"{label} forward+backward", gelu_fwd_bwd, 2 * 2 * h.numel() + 3 * 2 * h.numel())
        h.grad = None
    h2 = torch.empty_like(h)
    timed("copy (gelu tensor)", lambda: h2.copy_(h.detach()), 2 * 2 * h.numel())


if __name__ == "__main__":
    raise SystemExit(main())
