"""fitbench's fused decode kernels on the local GPU: correct, how fast, and the whole token.

Three parts, one run (a CUDA GPU with Triton):

1. correctness at the 6.7B model's shapes in FP16 against PyTorch's operators (relative error);
2. each GEMV of a layer (and the LM head) timed under several tile configurations against
   cuBLAS (`F.linear`) for the same weights: microseconds and weight bytes per second. Weights
   rotate among copies so that no launch reads the L2 cache, and each timing is a CUDA graph of
   many launches, replayed (the median of several replays);
3. the whole decode at batch 1 (50-token prompt, 100 new tokens): the torch.compile'd step and
   the fused step, each captured in a CUDA graph, in tokens/s beside the bandwidth roofline,
   and how many greedy tokens the two agree on (random weights give near-uniform logits, so a
   rounding difference can change a later token; the first-step logits are compared too).

    python benchmarks/decode_kernels.py                # everything (about 3 minutes on an H200)
    python benchmarks/decode_kernels.py --skip-sweep   # correctness and the whole token only

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
from fitbench.backends.torch.fused_decode import GEMV_CONFIGS
from fitbench.backends.torch.static_decoder import (
    StaticDecoder,
    StaticKVGenerator,
    rotary_tables,
    rotate,
)
from fitbench.workloads.presets import LLAMA_7B

DTYPE = torch.float16
COPIES = 6  # weight copies a timing rotates through (each projection's copies exceed the L2)
LAUNCHES = 60  # launches per captured graph
REPLAYS = 7

SWEEP = [
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


def check_kernels() -> list[dict[str, Any]]:
    s, hd = LLAMA_7B, LLAMA_7B.dim_head
    h, heads, kvh, ffn = s.hidden_size, s.num_heads, s.kv_heads, s.intermediate_size
    rows: list[dict[str, Any]] = []
    torch.manual_seed(0)
    x = torch.randn(h, device="cuda", dtype=DTYPE)
    g = (torch.rand(h, device="cuda") + 0.5).to(DTYPE)
    normed = F.rms_norm(x.float(), (h,), g.float(), dk.RMS_EPS_DEFAULT)
    w = torch.randn(h, ffn, device="cuda", dtype=DTYPE) * 0.02
    hv = torch.randn(ffn, device="cuda", dtype=DTYPE)
    out = torch.full((h,), float("nan"), device="cuda", dtype=DTYPE)
    dk.linear(hv, w, out, residual=x, config=GEMV_CONFIGS["down"])
    ref = x.float() + w.float() @ hv.float()
    rows.append({"kernel": "linear + residual (down)", "rel_error": rel(out, ref)})
    wg = torch.randn(2 * ffn, h, device="cuda", dtype=DTYPE) * 0.02
    o = torch.full((ffn,), float("nan"), device="cuda", dtype=DTYPE)
    dk.swiglu(x, wg, o, norm_weight=g, config=GEMV_CONFIGS["gate_up"])
    gu = wg.float() @ normed
    rows.append({"kernel": "swiglu + rms_norm (gate_up)", "rel_error": rel(o, F.silu(gu[:ffn]) * gu[ffn:])})
    length, pos = 192, 77
    wq = torch.randn((heads + 2 * kvh) * hd, h, device="cuda", dtype=DTYPE) * 0.02
    cos, sin = rotary_tables(length, hd, torch.device("cuda"))
    kc = torch.randn(kvh, length, hd, device="cuda", dtype=DTYPE)
    vc = torch.randn(kvh, length, hd, device="cuda", dtype=DTYPE)
    q = torch.full((heads * hd,), float("nan"), device="cuda", dtype=DTYPE)
    dk.qkv_rope(
        x,
        wq,
        q_out=q,
        k_cache=kc,
        v_cache=vc,
        cos=cos,
        sin=sin,
        pos=torch.tensor([pos], device="cuda"),
        heads=heads,
        kv_heads=kvh,
        head_dim=hd,
        norm_weight=g,
        config=GEMV_CONFIGS["qkv"],
    )
    qkv = wq.float() @ normed
    c, sn = cos[pos : pos + 1], sin[pos : pos + 1]
    q_ref = rotate(qkv[: heads * hd].view(heads, 1, hd), c, sn).reshape(-1)
    k_ref = rotate(qkv[heads * hd : (heads + kvh) * hd].view(kvh, 1, hd), c, sn).reshape(kvh, hd)
    rows.append({"kernel": "qkv + rms_norm + rotary (q)", "rel_error": rel(q, q_ref)})
    rows.append({"kernel": "qkv + rms_norm + rotary (k slot)", "rel_error": rel(kc[:, pos], k_ref)})
    v_ref = qkv[(heads + kvh) * hd :].view(kvh, hd)
    rows.append({"kernel": "qkv (v slot)", "rel_error": rel(vc[:, pos], v_ref)})
    a = torch.full((heads * hd,), float("nan"), device="cuda", dtype=DTYPE)
    dk.decode_attention(q, kc, vc, a, pos=torch.tensor([pos], device="cuda"), heads=heads, kv_heads=kvh)
    ref = F.scaled_dot_product_attention(
        q.float().view(heads, 1, hd), kc[:, : pos + 1].float(), vc[:, : pos + 1].float()
    ).reshape(-1)
    rows.append({"kernel": "decode attention", "rel_error": rel(a, ref)})
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


def sweep(names: list[str], configs: list[dk.GemvConfig]) -> list[dict[str, Any]]:
    s, hd = LLAMA_7B, LLAMA_7B.dim_head
    rows = []
    for name, (n, k) in gemv_cases().items():
        if name not in names:
            continue
        ws = [torch.randn(n, k, device="cuda", dtype=DTYPE) * 0.02 for _ in range(COPIES)]
        length = 192
        cos, sin = rotary_tables(length, hd, torch.device("cuda"))
        bufs = {
            "x": torch.randn(k, device="cuda", dtype=DTYPE),
            "g": torch.ones(k, device="cuda", dtype=DTYPE),
            "out": torch.empty(n, device="cuda", dtype=torch.float32 if name == "head" else DTYPE),
            "res": torch.empty(n, device="cuda", dtype=DTYPE).normal_(),
            "h": torch.empty(n // 2, device="cuda", dtype=DTYPE),
            "kc": torch.zeros(s.kv_heads, length, hd, device="cuda", dtype=DTYPE),
            "vc": torch.zeros(s.kv_heads, length, hd, device="cuda", dtype=DTYPE),
            "q": torch.empty(s.num_heads * hd, device="cuda", dtype=DTYPE),
            "cos": cos,
            "sin": sin,
            "pos": torch.tensor([60], device="cuda"),
        }
        weight_bytes = n * k * 2
        x_row = bufs["x"].view(1, -1)
        cublas_out = torch.empty(1, n, device="cuda", dtype=DTYPE)
        t = graph_time([functools.partial(torch.matmul, x_row, w.t(), out=cublas_out) for w in ws])
        rows.append(
            {
                "gemv": name,
                "n": n,
                "k": k,
                "impl": "cublas F.linear",
                "us": t * 1e6,
                "weight_TBps": weight_bytes / t / 1e12,
            }
        )
        for cfg in configs:
            try:
                t = graph_time([functools.partial(_launch, name, w, cfg, bufs) for w in ws])
            except Exception as exc:  # a config that does not compile is reported, not fatal
                rows.append({"gemv": name, "impl": str(cfg), "error": str(exc).splitlines()[0][:120]})
                continue
            rows.append(
                {
                    "gemv": name,
                    "n": n,
                    "k": k,
                    "impl": f"bn={cfg.block_n} bk={cfg.block_k} w={cfg.num_warps} st={cfg.num_stages}",
                    "us": t * 1e6,
                    "weight_TBps": weight_bytes / t / 1e12,
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


def attention_time(length: int = 192, pos: int = 149) -> float:
    s, hd = LLAMA_7B, LLAMA_7B.dim_head
    caches = [
        (
            torch.randn(s.kv_heads, length, hd, device="cuda", dtype=DTYPE),
            torch.randn(s.kv_heads, length, hd, device="cuda", dtype=DTYPE),
        )
        for _ in range(COPIES)
    ]
    q = torch.randn(s.num_heads * hd, device="cuda", dtype=DTYPE)
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


def whole_token(
    best: dict[str, dk.GemvConfig], prompt_tokens: int = 50, new_tokens: int = 100
) -> dict[str, Any]:
    torch.manual_seed(0)
    model = StaticDecoder(LLAMA_7B, device="cuda", dtype=DTYPE)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    prompt = torch.randint(3, LLAMA_7B.vocab_size, (1, prompt_tokens), device="cuda")
    result: dict[str, Any] = {"weight_bytes": weight_bytes}
    generated = {}
    first_logits = {}
    for mode in ("compiled", "fused", "fused-best"):
        if mode == "fused-best" and not best:
            continue
        gen = StaticKVGenerator(
            model, batch=1, prompt_tokens=prompt_tokens, new_tokens=new_tokens, use_graph=True
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
        result[mode] = {
            "tokens_per_s": statistics.median(rates),
            "all": rates,
            "setup_s": setup,
            "graph": gen.graph is not None,
            "capture_error": gen.capture_error,
        }
        del gen
        torch.cuda.empty_cache()
    if "compiled" in generated and "fused" in generated:
        a, b = generated["compiled"][0, prompt_tokens:], generated["fused"][0, prompt_tokens:]
        same = (a == b).int()
        result["tokens_equal_prefix"] = int(same.cumprod(0).sum())
        result["tokens_equal_total"] = int(same.sum())
    if "fused" in generated and "fused-best" in generated:  # other tiles sum in another order
        same_tokens = torch.equal(generated["fused"], generated["fused-best"])
        result["fused_best_tokens_equal_fused"] = bool(same_tokens)
    # First decode step's logits: fused vs the full forward in FP16 (the reference the tests use).
    ref_gen = StaticKVGenerator(model, batch=1, prompt_tokens=prompt_tokens, new_tokens=2, use_graph=False)
    ref_gen.prefill(prompt)
    seq = ref_gen.tokens[:, : prompt_tokens + 1]
    full = model.forward_full(seq)[0, -1].float()
    if first_logits.get("fused") is not None:
        result["first_step_logits_rel_error_vs_full_forward"] = rel(first_logits["fused"], full)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--only", default="qkv,o,gate_up,down,head", help="GEMVs to sweep")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU (tests/backends/test_decode_kernels.py checks the kernels on a CPU)")
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    import triton

    report["triton"] = triton.__version__
    report["checks"] = check_kernels()
    copy_bandwidth()  # once to bring the clocks up, then measured
    report["copy_TBps"] = copy_bandwidth() / 1e12
    print(
        f"{report['device']}  torch {report['torch']}  triton {report['triton']}  "
        f"copy {report['copy_TBps']:.2f} TB/s (read + write)"
    )
    report["attention_us"] = attention_time() * 1e6
    print(f"  decode attention, 32 heads, cache 192, pos 149: {report['attention_us']:.1f} us")
    for row in report["checks"]:
        print(f"  check {row['kernel']:<34} rel error {row['rel_error']:.2e}")
    if not args.skip_sweep:
        report["sweep"] = sweep(args.only.split(","), SWEEP)
        for row in report["sweep"]:
            if "error" in row:
                print(f"  {row['gemv']:<8} {row['impl']:<30} ERROR {row['error']}")
            else:
                print(
                    f"  {row['gemv']:<8} {row['impl']:<30} {row['us']:8.1f} us  {row['weight_TBps']:.2f} TB/s"
                )
    best = best_configs(report.get("sweep", []))
    report["best_configs"] = {name: dataclasses.asdict(cfg) for name, cfg in best.items()}
    for name, cfg in best.items():
        print(f"  best {name:<8} {cfg}")
    report["token"] = whole_token(best)
    tok = report["token"]
    # A read-only stream can move what the copy moves in reads and writes together.
    tok["roofline_tokens_per_s_at_copy_rate"] = report["copy_TBps"] * 1e12 / tok["weight_bytes"]
    print(
        f"whole decode, batch 1: {tok['weight_bytes'] / 1e9:.2f} GB of weights per token; at the copy "
        f"rate {tok['roofline_tokens_per_s_at_copy_rate']:.0f} tok/s"
    )
    for mode in ("compiled", "fused", "fused-best"):
        print(f"  {mode:<10} {json.dumps(tok.get(mode))}")
    print(
        f"  tokens equal: prefix {tok.get('tokens_equal_prefix')}, total {tok.get('tokens_equal_total')}; "
        f"first-step logits vs full forward {tok.get('first_step_logits_rel_error_vs_full_forward')}"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
