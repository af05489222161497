"""fitbench's fused decode kernels on the local GPU: correct, how fast, and the whole token.

Three parts, one run (a CUDA GPU with Triton), for each batch of --batch (sequences per step):

1. correctness at the 6.7B model's shapes in FP16 against PyTorch's operators (relative error);
2. each GEMV of a layer (and the LM head) timed under several tile configurations against
   cuBLAS (`F.linear`) for the same weights: microseconds and weight bytes per second. Weights
   rotate among copies so that no launch reads the L2 cache, and each timing is a CUDA graph of
   many launches, replayed (the median of several replays). Batch 1 sweeps the GEMV tiles,
   larger batches the batched tl.dot tiles (2 * block_n >= 16 rows);
3. the whole decode (50-token prompt, 100 new tokens): the torch.compile'd step and the fused
   step, each captured in a CUDA graph, in tokens/s beside the bandwidth roofline (weights once
   per step plus every sequence's KV positions), and how many greedy tokens the two agree on
   (random weights give near-uniform logits, so a rounding difference can change a later token;
   the first-step logits are compared too).

    python benchmarks/decode_kernels.py                      # everything at batch 1 (~3 min on an H200)
    python benchmarks/decode_kernels.py --batch 2,8,32       # the batched kernels, three batches
    python benchmarks/decode_kernels.py --skip-sweep         # correctness and the whole token only
    python benchmarks/decode_kernels.py --attention-sweep --batch 1,4   # attention: one walk a head
                                                             # against flash-decoding splits
    python benchmarks/decode_kernels.py --smoke              # tiny shapes, correctness only (a CPU
                                                             # runs it under Triton's interpreter)

Prints tables; with --json FILE writes every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F

from fitbench.backends.torch import decode_kernels as dk
from fitbench.backends.torch.fused_decode import configs_for
from fitbench.backends.torch.static_decoder import (
    StaticDecoder,
    StaticKVGenerator,
    rotary_tables,
    rotate,
)
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.presets import LLAMA_7B, TINY_LLAMA

DTYPE = torch.float16
COPIES = 6  # weight copies a timing rotates through (each projection's copies exceed the L2)
LAUNCHES = 60  # launches per captured graph
REPLAYS = 7

SWEEP = [  # batch 1: the GEMV tiles (2 * block_n rows a program, FP32 FMA accumulation)
    dk.GemvConfig(block_n=bn, block_k=bk, num_warps=w, num_stages=st)
    for bn, bk, w, st in [
        (2, 1024, 4, 3),
        (2, 2048, 4, 3),
        (4, 512, 4, 3),
        (4, 1024, 4, 3),
        (4, 1024, 8, 3),
        (4, 2048, 8, 3),
        (4, 1024, 4, 2),
        (4, 1024, 4, 4),
        (8, 1024, 4, 3),
        (8, 1024, 8, 3),
        (8, 256, 2, 3),
        (16, 256, 4, 3),
    ]
]
SWEEP_BATCHED = [  # batches 2..32: the tl.dot tiles (2 * block_n >= 16 rows)
    dk.GemvConfig(block_n=bn, block_k=bk, num_warps=w, num_stages=st)
    for bn, bk, w, st in [
        (8, 128, 4, 6),
        (8, 256, 4, 4),
        (16, 128, 4, 4),
        (16, 128, 4, 6),
        (16, 256, 4, 3),
        (16, 256, 4, 4),
        (16, 256, 8, 4),
        (32, 128, 4, 4),
        (32, 128, 8, 4),
        (32, 256, 4, 3),
        (64, 128, 8, 3),
    ]
]
# The smoke mode's shapes: TINY_LLAMA's layout (GQA) with a down projection no tile divides.
SMOKE = TransformerArch(
    **{**TINY_LLAMA.__dict__, "hidden_size": 64, "intermediate_size": 88, "vocab_size": 96}
)


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def graph_time(fn_list: list[Any]) -> float:
    """Median seconds per call of a captured graph that runs each callable of fn_list in turn,
    LAUNCHES calls in all."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in fn_list:
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(LAUNCHES):
            fn_list[i % len(fn_list)]()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / LAUNCHES)
    return statistics.median(times)


def copy_bandwidth() -> float:
    """Device-to-device copy, bytes read + written per second (the practical ceiling)."""
    a = torch.randn(512 * 1024**2, device="cuda")  # 2 GiB of float32
    b = torch.empty_like(a)
    t = graph_time([functools.partial(b.copy_, a)])
    return 2 * a.numel() * a.element_size() / t


def check_kernels(arch: TransformerArch, batch: int, device: str, dtype: torch.dtype) -> list[dict[str, Any]]:
    """Each kernel at `batch` sequences against PyTorch's operators (FP32 references)."""
    hd, h, heads, kvh, ffn = (
        arch.dim_head,
        arch.hidden_size,
        arch.num_heads,
        arch.kv_heads,
        arch.intermediate_size,
    )
    configs = configs_for(batch) if device == "cuda" else {}
    tiles = {
        name: configs.get(name, dk.GemvConfig(block_n=8, block_k=32)) for name in ("qkv", "gate_up", "down")
    }
    rows: list[dict[str, Any]] = []
    torch.manual_seed(0)
    b = batch

    def nan(*shape: int) -> torch.Tensor:
        return torch.full(shape, float("nan"), device=device, dtype=dtype)

    x = torch.randn(b, h, device=device, dtype=dtype)
    g = (torch.rand(h, device=device) + 0.5).to(dtype)
    normed = F.rms_norm(x.float(), (h,), g.float(), dk.RMS_EPS_DEFAULT)
    w = (torch.randn(h, ffn, device=device) * 0.02).to(dtype)
    hv = torch.randn(b, ffn, device=device, dtype=dtype)
    out = nan(b, h)
    dk.linear(hv, w, out, residual=x, config=tiles["down"])
    rows.append(
        {"kernel": "linear + residual (down)", "rel_error": rel(out, x.float() + hv.float() @ w.float().T)}
    )
    wg = (torch.randn(2 * ffn, h, device=device) * 0.02).to(dtype)
    o = nan(b, ffn)
    dk.swiglu(x, wg, o, norm_weight=g, config=tiles["gate_up"])
    gu = normed @ wg.float().T
    rows.append(
        {"kernel": "swiglu + rms_norm (gate_up)", "rel_error": rel(o, F.silu(gu[:, :ffn]) * gu[:, ffn:])}
    )
    length, pos = 192, 77
    wq = (torch.randn((heads + 2 * kvh) * hd, h, device=device) * 0.02).to(dtype)
    cos, sin = rotary_tables(length, hd, torch.device(device))
    kc = torch.randn(b, kvh, length, hd, device=device, dtype=dtype)
    vc = torch.randn(b, kvh, length, hd, device=device, dtype=dtype)
    q = nan(b, heads * hd)
    p = torch.tensor([pos], device=device)
    dk.qkv_rope(
        x,
        wq,
        q_out=q,
        k_cache=kc,
        v_cache=vc,
        cos=cos,
        sin=sin,
        pos=p,
        heads=heads,
        kv_heads=kvh,
        head_dim=hd,
        norm_weight=g,
        config=tiles["qkv"],
    )
    qkv = normed @ wq.float().T
    c, sn = cos[pos : pos + 1], sin[pos : pos + 1]
    q_ref = rotate(qkv[:, : heads * hd].reshape(b, heads, 1, hd), c, sn).reshape(b, -1)
    k_ref = rotate(qkv[:, heads * hd : (heads + kvh) * hd].reshape(b, kvh, 1, hd), c, sn).reshape(b, kvh, hd)
    rows.append({"kernel": "qkv + rms_norm + rotary (q)", "rel_error": rel(q, q_ref)})
    rows.append({"kernel": "qkv + rms_norm + rotary (k slot)", "rel_error": rel(kc[:, :, pos], k_ref)})
    rows.append(
        {
            "kernel": "qkv (v slot)",
            "rel_error": rel(vc[:, :, pos], qkv[:, (heads + kvh) * hd :].reshape(b, kvh, hd)),
        }
    )
    a = nan(b, heads * hd)
    dk.decode_attention(q, kc, vc, a, pos=p, heads=heads, kv_heads=kvh)
    groups = heads // kvh
    ref = F.scaled_dot_product_attention(
        q.float().view(b, heads, 1, hd),
        kc[:, :, : pos + 1].float().repeat_interleave(groups, 1),
        vc[:, :, : pos + 1].float().repeat_interleave(groups, 1),
    ).reshape(b, -1)
    rows.append({"kernel": "decode attention", "rel_error": rel(a, ref)})
    for row in rows:
        row["batch"] = batch
    return rows


def gemv_cases() -> dict[str, tuple[int, int]]:
    s, hd = LLAMA_7B, LLAMA_7B.dim_head
    return {
        "qkv": ((s.num_heads + 2 * s.kv_heads) * hd, s.hidden_size),
        "o": (s.hidden_size, s.num_heads * hd),
        "gate_up": (2 * s.intermediate_size, s.hidden_size),
        "down": (s.hidden_size, s.intermediate_size),
        "head": (s.vocab_size, s.hidden_size),
    }


def _launch(name: str, w: torch.Tensor, cfg: dk.GemvConfig, bufs: dict[str, Any]) -> None:
    """One launch of the kernel that serves projection `name`, as the fused step calls it."""
    s, hd = LLAMA_7B, LLAMA_7B.dim_head
    x, g = bufs["x"], bufs["g"]
    if name == "qkv":
        dk.qkv_rope(
            x,
            w,
            q_out=bufs["q"],
            k_cache=bufs["kc"],
            v_cache=bufs["vc"],
            cos=bufs["cos"],
            sin=bufs["sin"],
            pos=bufs["pos"],
            heads=s.num_heads,
            kv_heads=s.kv_heads,
            head_dim=hd,
            norm_weight=g,
            config=cfg,
        )
    elif name == "gate_up":
        dk.swiglu(x, w, bufs["h"], norm_weight=g, config=cfg)
    elif name == "head":
        dk.linear(x, w, bufs["out"], norm_weight=g, config=cfg)
    else:
        dk.linear(x, w, bufs["out"], residual=bufs["res"], config=cfg)


def _error(name: str, w: torch.Tensor, bufs: dict[str, Any]) -> float:
    """Relative error of the last launch of projection `name` on weights `w` (FP32 reference)."""
    s, hd = LLAMA_7B, LLAMA_7B.dim_head
    x = bufs["x"].float()
    normed = F.rms_norm(x, (x.shape[-1],), bufs["g"].float(), dk.RMS_EPS_DEFAULT)
    if name == "qkv":  # the v rows: the GEMV path (rotary is checked at the 6.7B shapes above)
        v = normed @ w[(s.num_heads + s.kv_heads) * hd :].float().T
        return rel(bufs["vc"][:, :, 60], v.view(x.shape[0], s.kv_heads, hd))
    if name == "gate_up":
        gu = normed @ w.float().T
        half = gu.shape[-1] // 2
        return rel(bufs["h"], F.silu(gu[:, :half]) * gu[:, half:])
    if name == "head":
        return rel(bufs["out"], normed @ w.float().T)
    return rel(bufs["out"], bufs["res"].float() + x @ w.float().T)


def sweep(names: list[str], configs: list[dk.GemvConfig], batch: int) -> list[dict[str, Any]]:
    s, hd = LLAMA_7B, LLAMA_7B.dim_head
    rows = []
    b = batch
    for name, (n, k) in gemv_cases().items():
        if name not in names:
            continue
        ws = [torch.randn(n, k, device="cuda", dtype=DTYPE) * 0.02 for _ in range(COPIES)]
        length = 192
        cos, sin = rotary_tables(length, hd, torch.device("cuda"))
        bufs = {
            "x": torch.randn(b, k, device="cuda", dtype=DTYPE),
            "g": torch.ones(k, device="cuda", dtype=DTYPE),
            "out": torch.empty(b, n, device="cuda", dtype=torch.float32 if name == "head" else DTYPE),
            "res": torch.empty(b, n, device="cuda", dtype=DTYPE).normal_(),
            "h": torch.empty(b, n // 2, device="cuda", dtype=DTYPE),
            "kc": torch.zeros(b, s.kv_heads, length, hd, device="cuda", dtype=DTYPE),
            "vc": torch.zeros(b, s.kv_heads, length, hd, device="cuda", dtype=DTYPE),
            "q": torch.empty(b, s.num_heads * hd, device="cuda", dtype=DTYPE),
            "cos": cos,
            "sin": sin,
            "pos": torch.tensor([60], device="cuda"),
        }
        weight_bytes = n * k * 2
        cublas_out = torch.empty(b, n, device="cuda", dtype=DTYPE)
        t = graph_time([functools.partial(torch.matmul, bufs["x"], w.t(), out=cublas_out) for w in ws])
        base = {"batch": b, "gemv": name, "n": n, "k": k}
        rows.append(
            {**base, "impl": "cublas F.linear", "us": t * 1e6, "weight_TBps": weight_bytes / t / 1e12}
        )
        default = configs_for(b)[name]  # the step's own tiles are always timed
        for cfg in configs + ([default] if default not in configs else []):
            impl = f"bn={cfg.block_n} bk={cfg.block_k} w={cfg.num_warps} st={cfg.num_stages}"
            try:
                t = graph_time([functools.partial(_launch, name, w, cfg, bufs) for w in ws])
                _launch(name, ws[0], cfg, bufs)
                torch.cuda.synchronize()
            except Exception as exc:  # a config that does not compile is reported, not fatal
                rows.append({**base, "impl": impl, "error": str(exc).splitlines()[0][:120]})
                continue
            rows.append(
                {
                    **base,
                    "impl": impl,
                    "us": t * 1e6,
                    "weight_TBps": weight_bytes / t / 1e12,
                    "rel_error": _error(name, ws[0], bufs),
                    "config": dataclasses.asdict(cfg),
                }
            )
        del ws
        torch.cuda.empty_cache()
    return rows


def best_configs(rows: list[dict[str, Any]]) -> dict[str, dk.GemvConfig]:
    """The fastest swept configuration of each GEMV."""
    best: dict[str, tuple[float, dk.GemvConfig]] = {}
    for row in rows:
        if "config" in row and (row["gemv"] not in best or row["us"] < best[row["gemv"]][0]):
            best[row["gemv"]] = (row["us"], dk.GemvConfig(**row["config"]))
    return {name: cfg for name, (_, cfg) in best.items()}


def attention_time(batch: int, length: int = 192, pos: int = 149) -> float:
    s, hd = LLAMA_7B, LLAMA_7B.dim_head
    caches = [
        (
            torch.randn(batch, s.kv_heads, length, hd, device="cuda", dtype=DTYPE),
            torch.randn(batch, s.kv_heads, length, hd, device="cuda", dtype=DTYPE),
        )
        for _ in range(COPIES)
    ]
    q = torch.randn(batch, s.num_heads * hd, device="cuda", dtype=DTYPE)
    out = torch.empty_like(q)
    p = torch.tensor([pos], device="cuda")
    return graph_time(
        [
            lambda kv=kv: dk.decode_attention(
                q, kv[0], kv[1], out, pos=p, heads=s.num_heads, kv_heads=s.kv_heads
            )
            for kv in caches
        ]
    )


# Cache lengths of the attention sweep: static caches of 50..4,000-token prompts (cache_length
# rounds up to 64), below and above ATTENTION_SPLIT_MIN_SLOTS.
SWEEP_CACHE_LENGTHS = (64, 128, 192, 256, 320, 576, 1088, 2112, 4160)


# Programs per SM the attention sweep also tries (decode_kernels.ATTENTION_PROGRAMS_PER_SM is the
# default's): more splits, shorter walks, a larger merge.
SWEEP_PROGRAMS_PER_SM = (4, 8)


def _attention_at(kv_heads: int, batch: int, length: int, sms: int) -> dict[str, Any]:
    """One attention sweep row at one cache length: one walk a head, the chosen splits, the
    splits with no length threshold, and the splits for SWEEP_PROGRAMS_PER_SM programs per SM."""
    s, hd = LLAMA_7B, LLAMA_7B.dim_head
    pos = length - 40
    shape = (batch, kv_heads, length, hd)
    caches = [
        (torch.randn(shape, device="cuda", dtype=DTYPE), torch.randn(shape, device="cuda", dtype=DTYPE))
        for _ in range(COPIES)
    ]
    q = torch.randn(batch, s.num_heads * hd, device="cuda", dtype=DTYPE)
    p = torch.tensor([pos], device="cuda")
    kv_bytes = 2 * batch * kv_heads * (pos + 1) * hd * 2
    programs = s.num_heads * batch
    auto, _ = dk.attention_splits(length, programs, sms, 64)
    # What the splits would be with no threshold (a cache of more than one block is split).
    unlimited, _ = dk.attention_splits(length, programs, sms, 64, min_slots=64)
    row: dict[str, Any] = {
        "kv_heads": kv_heads,
        "batch": batch,
        "cache_len": length,
        "splits": auto,
        "splits_without_threshold": unlimited,
    }
    variants: list[tuple[str, int | None]] = [
        ("one_walk", 1),
        ("chosen", None),
        ("without_threshold", unlimited),
    ]
    for per_sm in SWEEP_PROGRAMS_PER_SM:
        n, _ = dk.attention_splits(length, programs, sms, 64, programs_per_sm=per_sm)
        row[f"splits_{per_sm}_per_sm"] = n
        variants.append((f"per_sm_{per_sm}", n))
    outs = {}
    for label, splits in variants:
        out = torch.empty_like(q)

        def attend(
            kv: tuple[torch.Tensor, torch.Tensor], out: torch.Tensor = out, splits: int | None = splits
        ) -> None:
            dk.decode_attention(
                q, kv[0], kv[1], out, pos=p, heads=s.num_heads, kv_heads=kv_heads, splits=splits
            )

        row[f"{label}_us"] = 1e6 * graph_time([functools.partial(attend, kv) for kv in caches])
        row[f"{label}_TBps"] = kv_bytes / row[f"{label}_us"] / 1e6
        attend(caches[0])
        outs[label] = out.float()
    row["rel_difference"] = max(rel(outs[label], outs["one_walk"]) for label, _ in variants)
    return row


def attention_sweep(batches: list[int]) -> list[dict[str, Any]]:
    """The attention kernel at each cache length, one walk a head (splits=1) against the chosen
    splits (flash-decoding), for the 6.7B model (32 heads) and a GQA layout of it (8 kv heads):
    microseconds and the KV bytes read per second (slots 0..pos, pos 40 before the end)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows: list[dict[str, Any]] = []
    for kv_heads in (LLAMA_7B.kv_heads, 8):
        for batch in batches:
            for length in SWEEP_CACHE_LENGTHS:
                row = _attention_at(kv_heads, batch, length, sms)
                rows.append(row)
                print(
                    f"  kv_heads {kv_heads:>2} b{batch:<2} cache {length:>5}: "
                    f"one walk {row['one_walk_us']:7.1f} us ({row['one_walk_TBps']:.2f} TB/s) | "
                    f"{row['splits']} splits {row['chosen_us']:7.1f} us ({row['chosen_TBps']:.2f} TB/s) | "
                    f"{row['splits_without_threshold']} splits {row['without_threshold_us']:7.1f} us | "
                    + " | ".join(
                        f"{row[f'splits_{n}_per_sm']} splits {row[f'per_sm_{n}_us']:6.1f} us"
                        for n in SWEEP_PROGRAMS_PER_SM
                    )
                    + f" | rel diff {row['rel_difference']:.1e}"
                )
    return rows


TOKEN_MODES = ("compiled", "fused", "fused-best")


def whole_token(
    best: dict[str, dk.GemvConfig],
    batch: int,
    prompt_tokens: int = 50,
    new_tokens: int = 100,
    modes: tuple[str, ...] = TOKEN_MODES,
) -> dict[str, Any]:
    torch.manual_seed(0)
    model = StaticDecoder(LLAMA_7B, device="cuda", dtype=DTYPE)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    # KV bytes a step reads: every sequence's slots 0..pos at the mean position of the decode.
    mean_pos = prompt_tokens + new_tokens // 2
    kv_bytes = batch * LLAMA_7B.num_layers * 2 * LLAMA_7B.kv_heads * LLAMA_7B.dim_head * 2 * mean_pos
    prompt = torch.randint(3, LLAMA_7B.vocab_size, (batch, prompt_tokens), device="cuda")
    result: dict[str, Any] = {"batch": batch, "weight_bytes": weight_bytes, "kv_bytes_per_step": kv_bytes}
    generated = {}
    first_logits = {}
    for mode in modes:
        if mode == "fused-best" and not best:
            continue
        gen = StaticKVGenerator(
            model, batch=batch, prompt_tokens=prompt_tokens, new_tokens=new_tokens, use_graph=True
        )
        t0 = time.perf_counter()
        if mode == "compiled":
            why = gen.compile_step(prompt)
        else:
            why = gen.use_fused_kernels(prompt, configs=best if mode == "fused-best" else None)
        if why is not None:
            result[mode] = {"error": why}
            continue
        if mode == "fused":  # the first decode step's logits, for the comparison below
            gen.prefill(prompt)
            gen._step()
            first_logits[mode] = gen._step.logits.clone()
        setup = time.perf_counter() - t0
        gen.capture(prompt)
        rates = []
        for _ in range(5):
            gen.prefill(prompt)
            torch.cuda.synchronize()
            t = time.perf_counter()
            gen.decode(new_tokens)
            torch.cuda.synchronize()
            rates.append((new_tokens - 1) / (time.perf_counter() - t))
        generated[mode] = gen.generated()
        steps_per_s = statistics.median(rates)
        result[mode] = {
            "step_ms": 1e3 / steps_per_s,
            "tokens_per_s": batch * steps_per_s,
            "all_steps_per_s": rates,
            "setup_s": setup,
            "graph": gen.graph is not None,
            "capture_error": gen.capture_error,
        }
        del gen
        torch.cuda.empty_cache()
    if "compiled" in generated and "fused" in generated:
        a, b = generated["compiled"][:, prompt_tokens:], generated["fused"][:, prompt_tokens:]
        same = (a == b).int()
        result["tokens_equal_prefix_min"] = int(same.cumprod(1).sum(1).min())
        result["tokens_equal_total"] = int(same.sum())
    if "fused" in generated and "fused-best" in generated:  # other tiles sum in another order
        result["fused_best_tokens_equal_fused"] = bool(
            torch.equal(generated["fused"], generated["fused-best"])
        )
    # First decode step's logits: fused vs the full forward in FP16 (the reference the tests use).
    ref_gen = StaticKVGenerator(
        model, batch=batch, prompt_tokens=prompt_tokens, new_tokens=2, use_graph=False
    )
    ref_gen.prefill(prompt)
    seq = ref_gen.tokens[:, : prompt_tokens + 1]
    full = model.forward_full(seq)[:, -1].float()
    if first_logits.get("fused") is not None:
        result["first_step_logits_rel_error_vs_full_forward"] = rel(first_logits["fused"], full)
    return result


def smoke(batches: list[int]) -> int:
    """Tiny shapes, correctness only: on CUDA compiled, elsewhere under Triton's interpreter."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = DTYPE if device == "cuda" else torch.float32
    worst = 0.0
    for batch in batches:
        rows = check_kernels(SMOKE, batch, device, dtype)
        bad = max(rows, key=lambda row: row["rel_error"])
        worst = max(worst, bad["rel_error"])
        print(f"  b{batch:<3} {len(rows)} checks, worst rel error {bad['rel_error']:.2e} ({bad['kernel']})")
    limit = 1e-2 if dtype == DTYPE else 1e-5
    print(f"smoke on {device}: worst rel error {worst:.2e} ({'ok' if worst < limit else 'FAIL'})")
    same = all(generation_agrees(batch, device) for batch in batches)
    return 0 if worst < limit and same else 1


def generation_agrees(batch: int, device: str, new_tokens: int = 8) -> bool:
    """A tiny FP32 model (GQA, qkv bias: Qwen2's layout) generates the same greedy tokens with the
    fused step as with the eager one, every sequence (FP32 throughout: ties are improbable)."""
    arch = TransformerArch(**{**SMOKE.__dict__, "qkv_bias": True})
    torch.manual_seed(0)
    model = StaticDecoder(arch, device=device, dtype=torch.float32)
    with torch.no_grad():
        for layer in model.layers:
            layer.bqkv.normal_(0.0, 0.02)
    prompt = torch.randint(3, arch.vocab_size, (batch, 9), device=device)
    out = []
    for fused in (False, True):
        gen = StaticKVGenerator(model, batch=batch, prompt_tokens=9, new_tokens=new_tokens, use_graph=False)
        why = gen.use_fused_kernels(prompt) if fused else None
        if why is not None:
            print(f"  b{batch:<3} fused step refused: {why}")
            return False
        gen.prefill(prompt)
        gen.decode(new_tokens)
        out.append(gen.generated())
    same = torch.equal(out[0], out[1])
    print(f"  b{batch:<3} fused generation == eager generation ({new_tokens} tokens a sequence): {same}")
    return same


def run_batch(batch: int, args: argparse.Namespace, copy_tbps: float) -> dict[str, Any]:
    """Checks, sweep and whole token at one batch; prints a few lines."""
    report: dict[str, Any] = {"batch": batch, "checks": check_kernels(LLAMA_7B, batch, "cuda", DTYPE)}
    worst = max(row["rel_error"] for row in report["checks"])
    report["attention_us"] = attention_time(batch) * 1e6
    attention = f"attention (cache 192, pos 149) {report['attention_us']:.1f} us"
    print(f"b{batch}: checks worst rel error {worst:.2e}; {attention}")
    if not args.skip_sweep:
        configs = SWEEP if batch == 1 else SWEEP_BATCHED
        if args.quick:
            configs = configs[::3]
        report["sweep"] = sweep(args.only.split(","), configs, batch)
        defaults = configs_for(batch)
        for name in args.only.split(","):
            mine = [r for r in report["sweep"] if r["gemv"] == name and "us" in r]
            cublas = next((r for r in mine if r["impl"].startswith("cublas")), None)
            fastest = min((r for r in mine if "config" in r), key=lambda r: r["us"], default=None)
            default = next((r for r in mine if r.get("config") == dataclasses.asdict(defaults[name])), None)
            errors = sum(1 for r in report["sweep"] if r["gemv"] == name and "error" in r)
            wrong = max((r["rel_error"] for r in mine if "rel_error" in r), default=0.0)
            if fastest is None or cublas is None:
                print(f"  {name:<8} no timing ({errors} configs failed)")
                continue
            print(
                f"  {name:<8} cublas {cublas['weight_TBps']:.2f} TB/s | best {fastest['impl']} "
                f"{fastest['weight_TBps']:.2f} TB/s"
                + (f" | default {default['weight_TBps']:.2f}" if default else "")
                + (f" | {errors} failed" if errors else "")
                + f" | worst rel error {wrong:.1e}"
            )
    best = best_configs(report.get("sweep", []))
    report["best_configs"] = {name: dataclasses.asdict(cfg) for name, cfg in best.items()}
    if not args.skip_token:
        tok = whole_token(best, batch, modes=tuple(args.token_modes.split(",")))
        step_bytes = tok["weight_bytes"] + tok["kv_bytes_per_step"]
        tok["roofline_step_ms_at_copy_rate"] = step_bytes / (copy_tbps * 1e12) * 1e3
        report["token"] = tok
        parts = []
        for mode in TOKEN_MODES:
            r = tok.get(mode)
            if r is None:
                continue
            if "error" in r:
                parts.append(f"{mode} error: {r['error'][:80]}")
            else:
                share = tok["roofline_step_ms_at_copy_rate"] / r["step_ms"]
                parts.append(f"{mode} {r['step_ms']:.2f} ms ({r['tokens_per_s']:.0f} tok/s, {share:.0%})")
        print(f"  token b{batch}: " + "; ".join(parts))
        logits_error = tok.get("first_step_logits_rel_error_vs_full_forward", float("nan"))
        print(
            f"    roofline at copy rate {tok['roofline_step_ms_at_copy_rate']:.2f} ms; tokens equal "
            f"prefix(min) {tok.get('tokens_equal_prefix_min')}, total {tok.get('tokens_equal_total')}; "
            f"first-step logits vs full forward {logits_error:.1e}"
        )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", default="1", help="comma-separated sequences per step, e.g. 1,2,8,32")
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--quick", action="store_true", help="every third swept config (and the defaults)")
    parser.add_argument("--skip-token", action="store_true", help="no whole-token timing")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny shapes, correctness only (CPU: interpreter)"
    )
    parser.add_argument("--only", default="qkv,o,gate_up,down,head", help="GEMVs to sweep")
    parser.add_argument(
        "--token-modes",
        default=",".join(TOKEN_MODES),
        help="whole-token steps to time (the compiled one compiles for ~1 min a batch)",
    )
    parser.add_argument(
        "--attention-sweep",
        action="store_true",
        help="only the attention kernel: one walk against flash-decoding splits over cache lengths",
    )
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batch.split(",")]
    if args.smoke:
        return smoke(batches)
    if not torch.cuda.is_available():
        sys.exit(
            "needs a CUDA GPU (--smoke runs tiny shapes on a CPU; tests/backends/test_decode_kernels.py)"
        )
    import triton

    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
    }
    copy_bandwidth()  # once to bring the clocks up, then measured
    report["copy_TBps"] = copy_bandwidth() / 1e12
    print(
        f"{report['device']}  torch {report['torch']}  triton {report['triton']}  "
        f"copy {report['copy_TBps']:.2f} TB/s (read + write)"
    )
    if args.attention_sweep:
        report["attention_sweep"] = attention_sweep(batches)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(report, fh, indent=1)
        return 0
    report["batches"] = []
    for batch in batches:
        report["batches"].append(run_batch(batch, args, report["copy_TBps"]))
        if args.json:  # rewritten after each batch: a run cut short keeps what it measured
            with open(args.json, "w") as fh:
                json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
