"""A pre-quantized model on the local GPU against fitbench's estimate: fp8 block-scaled weights.

The model is fitbench's own Llama decoder (the one `fitbench run` builds) whose block Linear
layers are replaced by fp8 layers laid out as transformers' FP8Linear and DeepSeek-V3 store
them: weight float8_e4m3fn [out, in] and weight_scale_inv fp32 [ceil(out / 128), ceil(in / 128)];
embeddings, norms and the LM head stay bf16. Each fp8 weight is drawn on the device one layer at
a time, so no bf16 copy of the model ever exists.

How a layer multiplies (`--path`):
  triton   a Triton GEMV that reads the fp8 weight and its block scales once per 16 tokens
           (decode: once a step, what fused fp8 kernels do and what the estimator assumes);
           prefill runs it in 16-token launches, so no 16-bit copy of a weight ever exists, as
           with the fp8 tensor-core GEMMs the estimator assumes on cards that have them
           (prefill time is therefore not comparable; decode and memory are)
  dequant  every call expands the weight to bf16, one 128-row band at a time, and calls
           F.linear (the plain-PyTorch way; the expansion is a temporary the estimate omits)
  auto     triton on CUDA when Triton imports, else dequant (the CPU)

Generation runs Hugging Face `generate` (greedy, a dynamic cache), as `fitbench run` does. Peak
memory is torch.cuda.max_memory_allocated / max_memory_reserved plus the CUDA context, and NVML's
per-process peak (sampled) where available; decode tok/s is
(new tokens - 1) / (time of generate(new) - time of generate(1)). Both are printed beside
`fitbench estimate` for the same model, precision bf16 and `--weights fp8`.

    python benchmarks/quant_gpu.py --out quant-h200.json                  # on the H200 (~1 min)
    python benchmarks/quant_gpu.py --device cpu --model tiny --out x.json  # CPU smoke test
    TRITON_INTERPRET=1 python benchmarks/quant_gpu.py --device cpu --path triton --gemv-check
                                          # the Triton GEMV against the expansion, interpreted on a CPU
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fitbench.core.quant import parse_weights
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

BLOCK = 128
GEMV_ROWS = 16  # tokens per Triton GEMV launch
MODELS = {
    # Llama-3.1-8B's shapes (GQA 32/8 heads, 128k vocabulary)
    "llama3-8b": dict(
        vocab_size=128256,
        hidden_size=4096,
        num_layers=32,
        num_heads=32,
        num_kv_heads=8,
        intermediate_size=14336,
        max_positions=131072,
    ),
    # Llama-2-70B's layer widths, 8 layers: a weight stream large enough to be bandwidth-bound
    "wide-8l": dict(
        vocab_size=32000,
        hidden_size=8192,
        num_layers=8,
        num_heads=64,
        num_kv_heads=8,
        intermediate_size=28672,
        max_positions=4096,
    ),
    "tiny": dict(
        vocab_size=512,
        hidden_size=256,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=512,
        max_positions=512,
    ),
}


def workload_for(model: str, batch: int, prompt: int, new: int) -> Workload:
    arch = TransformerArch(
        kind="decoder",
        mlp="swiglu",
        norm="rmsnorm",
        position="rotary",
        pooler=False,
        num_labels=0,
        model_type="llama",
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
        **MODELS[model],
    )
    return Workload(
        name=f"quant-gpu-{model}",
        arch=arch,
        mode="infer",
        precision="bf16",
        batch_size=batch,
        prompt_tokens=prompt,
        new_tokens=new,
        weights=parse_weights("fp8"),
    )


def make_fp8_linear_class(torch: Any, path: str) -> Any:
    """The fp8 Linear module class, with the Triton GEMV compiled lazily where asked for."""
    nn, F = torch.nn, torch.nn.functional
    gemv = _triton_gemv(torch) if path == "triton" else None

    class FP8BlockLinear(nn.Module):
        def __init__(self, linear: Any, device: Any) -> None:
            super().__init__()
            out_f, in_f = linear.out_features, linear.in_features
            self.in_features, self.out_features = in_f, out_f
            w = torch.randn(out_f, in_f, device=device, dtype=torch.bfloat16) * 0.02
            rows, cols = math.ceil(out_f / BLOCK), math.ceil(in_f / BLOCK)
            padded = torch.zeros(rows * BLOCK, cols * BLOCK, device=device, dtype=torch.bfloat16)
            padded[:out_f, :in_f] = w
            del w
            blocks = padded.view(rows, BLOCK, cols, BLOCK).abs().amax(dim=(1, 3)).float().clamp(min=1e-12)
            scale_inv = blocks / 448.0  # e4m3's largest value
            q = (padded.view(rows, BLOCK, cols, BLOCK) / scale_inv[:, None, :, None]).to(torch.float8_e4m3fn)
            del padded
            self.weight = nn.Parameter(
                q.view(rows * BLOCK, cols * BLOCK)[:out_f, :in_f].contiguous(), requires_grad=False
            )
            self.weight_scale_inv = nn.Parameter(scale_inv.contiguous(), requires_grad=False)
            self.bias = None

        def dequantized(self) -> Any:
            """The bf16 expansion, one 128-row block band at a time: expanding the whole matrix
            in fp32 at once holds three fp32 copies of it (2.8 GB for a 70B-wide MLP matrix)."""
            out = torch.empty(
                self.out_features, self.in_features, device=self.weight.device, dtype=torch.bfloat16
            )
            for r in range(self.weight_scale_inv.shape[0]):
                rows = slice(r * BLOCK, min((r + 1) * BLOCK, self.out_features))
                s = self.weight_scale_inv[r].repeat_interleave(BLOCK)[: self.in_features]
                out[rows] = (self.weight[rows].to(torch.float32) * s).to(torch.bfloat16)
            return out

        def forward(self, x: Any) -> Any:
            if gemv is not None:  # decode and prefill: no 16-bit copy of the weight
                return gemv(x, self.weight, self.weight_scale_inv)
            return F.linear(x, self.dequantized())

    return FP8BlockLinear


def _triton_gemv(torch: Any) -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(
        x_ptr,
        w_ptr,
        s_ptr,
        y_ptr,
        N,
        s_stride,
        x_stride,
        M: tl.constexpr,
        K: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        pid = tl.program_id(0)
        offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        n_mask = offs_n < N
        for m in tl.static_range(M):
            acc = tl.zeros([BLOCK_N], dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                offs_k = k0 + tl.arange(0, BLOCK_K)
                k_mask = offs_k < K
                w = tl.load(
                    w_ptr + offs_n[:, None] * K + offs_k[None, :],
                    mask=n_mask[:, None] & k_mask[None, :],
                    other=0.0,
                ).to(tl.float32)
                x = tl.load(x_ptr + m * x_stride + offs_k, mask=k_mask, other=0.0).to(tl.float32)
                s = tl.load(s_ptr + (offs_n // 128) * s_stride + k0 // 128, mask=n_mask, other=0.0)
                acc += tl.sum(w * x[None, :], axis=1) * s
            tl.store(y_ptr + m * N + offs_n, acc.to(tl.bfloat16), mask=n_mask)

    def gemv(x: Any, weight: Any, scale_inv: Any) -> Any:
        x2 = x.reshape(-1, x.shape[-1])
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        n = weight.shape[0]
        y = torch.empty(x2.shape[0], n, device=x.device, dtype=torch.bfloat16)
        grid = (triton.cdiv(n, 16),)
        if x2.shape[0] <= GEMV_ROWS:  # a decode step: one launch, as transformers' fp8 matmul
            launch(grid, x2, weight, scale_inv, y)
        else:
            # At most GEMV_ROWS tokens a launch (the row loop is unrolled): a prefill is a few
            # launches that each read the weight again, slower than a tensor-core GEMM but, like the
            # fused fp8 GEMMs that serving stacks use, it never expands the weight.
            for r0 in range(0, x2.shape[0], GEMV_ROWS):
                launch(grid, x2[r0 : r0 + GEMV_ROWS], weight, scale_inv, y[r0 : r0 + GEMV_ROWS])
        return y.view(*x.shape[:-1], n)

    def launch(grid: tuple[int], xs: Any, weight: Any, scale_inv: Any, ys: Any) -> None:
        # rows at any stride (a view's), columns contiguous: no copy, no .contiguous() call
        kernel[grid](
            xs,
            weight,
            scale_inv,
            ys,
            weight.shape[0],
            scale_inv.stride(0),
            xs.stride(0),
            M=xs.shape[0],
            K=weight.shape[1],
            BLOCK_N=16,
            BLOCK_K=128,
            num_warps=4,
        )

    return gemv


def build(workload: Workload, device: Any, path: str) -> Any:
    """fitbench's decoder on the meta device, fp8 block Linears drawn on `device` one at a time,
    then every other tensor materialised there in bf16 (as the int8/int4 builder does)."""
    import torch

    from fitbench.backends.torch.models import build_model
    from fitbench.backends.torch.quant import _materialise, _rebuild_rotary

    model, _ = build_model(workload, device=torch.device("meta"), dtype=torch.bfloat16)
    fp8_linear = make_fp8_linear_class(torch, path)
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, torch.nn.Linear) and "lm_head" not in full:
                setattr(module, child_name, fp8_linear(child, device))
    _rebuild_rotary(model, device)
    _materialise(model, device)
    if workload.arch.tie_embeddings and hasattr(model, "tie_weights"):
        model.tie_weights()
    return model.eval()


def measure(workload: Workload, device_name: str, path: str, repeats: int) -> dict[str, Any]:
    import torch

    from fitbench.backends.torch.host_probe import probe
    from fitbench.measure.host_speed import host_probe_fields

    device = torch.device(device_name)
    cuda = device.type == "cuda"
    if path == "auto":
        try:
            import triton  # noqa: F401

            path = "triton" if cuda else "dequant"
        except ImportError:
            path = "dequant"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(0)
    model = build(workload, device, path)
    if cuda:  # the bf16 and fp32 temporaries of quantising stay cached otherwise
        torch.cuda.empty_cache()
    weight_bytes = sum(p.nelement() * p.element_size() for p in model.parameters())
    gemv_error = None
    if path == "triton":  # the GEMV against the plain expansion, on the first fp8 layer
        layer = next(m for m in model.modules() if hasattr(m, "weight_scale_inv"))
        x = torch.randn(1, layer.in_features, device=device, dtype=torch.bfloat16)
        with torch.inference_mode():
            ref = torch.nn.functional.linear(x, layer.dequantized()).float()
            gemv_error = float((layer(x).float() - ref).abs().max() / ref.abs().max())
    b, prompt, new = workload.batch_size, workload.prompt_tokens or 1, workload.new_tokens or 1
    ids = torch.randint(0, workload.arch.vocab_size, (b, prompt), device=device)
    mask = torch.ones_like(ids)

    def generate(n: int) -> float:
        sync()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                use_cache=True,
            )
        sync()
        assert out.shape[1] == prompt + n
        return time.perf_counter() - t0

    probe_before = probe(device)  # this host's speed, as fitbench run's child records it
    generate(new)  # warm-up: Triton compilation, cuBLAS handles, allocator blocks
    sampler = None
    if cuda:  # the GEMV check's bf16 expansion stays cached otherwise (reserved, not in use)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        from fitbench.measure import nvml

        index = nvml.cuda_index(device_name) if nvml.available() else None
        sampler = nvml.MemorySampler(index).start() if index is not None else None
    full = [generate(new) for _ in range(repeats)]
    first = [generate(1) for _ in range(repeats)]
    if sampler is not None:
        sampler.stop()
    probe_after = probe(device)
    t_full, t_first = statistics.median(full), statistics.median(first)
    # One decode step by differencing, as fitbench run's child records decode_step_seconds: the
    # one-token call holds the prefill and generate's per-call work, so neither is in the step.
    step = (t_full - t_first) / (new - 1) if t_full > t_first and new > 1 else None
    result: dict[str, Any] = {
        "path": path,
        "gemv_relative_error": gemv_error,
        "weight_bytes": weight_bytes,
        "generate_seconds": t_full,
        "generate_samples_seconds": full,
        "prefill_seconds": t_first,
        "decode_step_seconds": step,
        "decode_tokens_per_second": b / step if step else None,
        **host_probe_fields(probe_before, probe_after),
    }
    if cuda:
        result["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        # NVML's peak of this process (sampled while generating); the CUDA context is what it
        # holds beyond the allocator's reserved memory once generation is over.
        proc = nvml.process_memory(index) if index is not None else None
        if sampler is not None and sampler.peak_process is not None:
            result["nvml_process_peak_bytes"] = sampler.peak_process
        if proc is not None:
            result["context_bytes"] = max(0, proc - torch.cuda.memory_reserved())
    result.update(linear_host_seconds(torch, device, path))  # after the peaks: its layers are new
    return result


def gemv_check(device_name: str) -> int:
    """The Triton GEMV on a ragged 300 x 200 layer (partial blocks) at 1 and 3 tokens (one launch),
    20 tokens (two launches, as a prefill) and 3 tokens read through a strided view."""
    import torch

    device = torch.device(device_name)
    layer = make_fp8_linear_class(torch, "triton")(torch.nn.Linear(300, 200, bias=False), device)
    worst = 0.0
    wide = torch.randn(3, 400, device=device, dtype=torch.bfloat16)
    inputs = [torch.randn(t, 300, device=device, dtype=torch.bfloat16) for t in (1, 3, 20)] + [wide[:, :300]]
    for x in inputs:
        ref = torch.nn.functional.linear(x, layer.dequantized()).float()
        worst = max(worst, float((layer(x).float() - ref).abs().max() / ref.abs().max()))
    print(f"Triton fp8 GEMV vs bf16 expansion: max relative error {worst:.2e}")
    return 0 if worst < 2e-2 else 1


def linear_host_seconds(torch: Any, device: Any, path: str) -> dict[str, float]:
    """Host time of one decode-shaped call (1 token) of a bf16 nn.Linear and of this script's fp8
    Linear, in the same process: `calls` calls without a sync between them, best of 5, on a
    512 x 512 layer whose kernels take the GPU a few microseconds, far less than the host spends
    issuing them, so the wall time per call is the host's. fp8_linear_host_calls is the ratio,
    the profile key of the same name (an fp8 Linear's host time in Python-level torch calls,
    taking a 16-bit Linear's as one)."""
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    calls = 200 if cuda else 3  # Triton's interpreter runs a launch in milliseconds on a CPU
    plain = torch.nn.Linear(512, 512, bias=False, device=device, dtype=torch.bfloat16)
    fp8 = make_fp8_linear_class(torch, path)(plain, device)
    x = torch.randn(1, 1, 512, device=device, dtype=torch.bfloat16)

    def per_call(layer: Any) -> float:
        best = math.inf
        with torch.inference_mode():
            for _ in range(5 if cuda else 1):
                layer(x)
                sync()
                t0 = time.perf_counter()
                for _ in range(calls):
                    layer(x)
                sync()
                best = min(best, (time.perf_counter() - t0) / calls)
        return best

    bf16_s, fp8_s = per_call(plain), per_call(fp8)
    return {
        "linear_host_seconds": bf16_s,
        "fp8_linear_host_seconds": fp8_s,
        "fp8_linear_host_calls": fp8_s / bf16_s,
    }


def fitbench_estimate(workload: Workload, gpu_id: str) -> dict[str, Any]:
    from fitbench.catalog import get_gpu
    from fitbench.estimate.api import estimate

    e = estimate(workload, get_gpu(gpu_id))
    parts = e.breakdown
    allocated_like = e.peak_memory_bytes - parts["cuda_context"] - parts["workspace"] - parts["fragmentation"]
    return {
        "peak_memory_bytes": e.peak_memory_bytes,
        "allocated_bytes": allocated_like,
        "weights_bytes": parts["weights"] + parts["quantization_scales"],
        "tokens_per_second": e.tokens_per_second,
        "prefill_seconds": e.prefill_seconds,
        "bottleneck": e.bottleneck,
        "breakdown": parts,
    }


def compare(m: dict[str, Any], est: dict[str, Any]) -> dict[str, float | None]:
    def err(measured: float | None, estimated: float | None) -> float | None:
        return None if not measured or estimated is None else estimated / measured - 1

    peak = None
    if m.get("peak_reserved_bytes") is not None:
        peak = m["peak_reserved_bytes"] + m.get("context_bytes", est["breakdown"]["cuda_context"])
    return {
        "weights": err(m["weight_bytes"], est["weights_bytes"]),
        "allocated": err(m.get("peak_allocated_bytes"), est["allocated_bytes"]),
        "peak": err(peak, est["peak_memory_bytes"]),
        "decode_tokens_per_second": err(m["decode_tokens_per_second"], est["tokens_per_second"]),
    }


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def decode_tps(row: dict[str, Any]) -> float | None:
    """Decode tok/s of a row: batch / decode_step_seconds, or the stored figure (older records
    hold only decode_tokens_per_second, which the same differencing gave)."""
    m = row["measured"]
    step = m.get("decode_step_seconds")
    return row["batch"] / step if step else m.get("decode_tokens_per_second")


def pool(rows: list[dict[str, Any]], gpu_id: str) -> list[dict[str, Any]]:
    """Rows of the same model and shape from several processes: the median run by decode speed
    (the lower middle for an even count, a real run whose figures belong together), every run's
    decode tok/s and host figures, and the estimate of this checkout."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["batch"], r["prompt_tokens"], r["new_tokens"]), []).append(r)
    pooled = []
    for (model, batch, prompt, new), runs in groups.items():
        ranked = sorted(runs, key=lambda r: decode_tps(r) or 0.0)
        mid = dict(ranked[(len(ranked) - 1) // 2])
        m = dict(mid["measured"], decode_tokens_per_second=decode_tps(mid))
        workload = workload_for(model, batch, prompt, new)
        est = fitbench_estimate(workload, gpu_id)
        speeds = [decode_tps(r) for r in ranked]
        error = compare(m, est)
        error["decode_tokens_per_second_own_host"] = own_host_error(workload, gpu_id, m)
        mid.update(
            measured=m,
            estimate=est,
            error=error,
            runs=len(runs),
            decode_tokens_per_second_runs=speeds,
            fp8_linear_host_calls_runs=[r["measured"].get("fp8_linear_host_calls") for r in ranked],
        )
        pooled.append(mid)
    return pooled


def own_host_error(workload: Workload, gpu_id: str, m: dict[str, Any]) -> float | None:
    """Decode speed error against the estimate for the host that ran `m` (its probe round; None
    for runs without one), as `fitbench run` holds a measurement."""
    from fitbench.catalog import get_gpu
    from fitbench.results.agreement import estimate_for_host

    tokens = m.get("decode_tokens_per_second")
    if not tokens or not m.get("host_probe_seconds"):
        return None
    record = {"status": "ok", "device": "cuda", "host_probe_seconds": m["host_probe_seconds"]}
    here = estimate_for_host(workload, get_gpu(gpu_id), record).estimate
    return here.tokens_per_second / tokens - 1


def print_rows(rows: list[dict[str, Any]]) -> None:
    header = (
        f"{'model':<10} {'path':<8} {'runs':>4} {'weights GiB':>11} {'est':>7} {'peak GiB':>9} {'est':>7} "
        f"{'tok/s':>8} {'est':>8} {'err peak':>9} {'err tok/s':>9} {'own host':>9}  {'runs tok/s':<16} "
        f"{'fp8/bf16 host':>13}"
    )
    print(header)
    print("-" * len(header))
    gib = 2**30
    for r in rows:
        m, e, err = r["measured"], r["estimate"], r["error"]
        peak = (m.get("peak_reserved_bytes") or 0) + m.get("context_bytes", 0)
        speeds = [x for x in r.get("decode_tokens_per_second_runs", []) if x]
        spread = f"{min(speeds):.1f}-{max(speeds):.1f}" if len(speeds) > 1 else "-"
        ratio = m.get("fp8_linear_host_calls")
        print(
            f"{r['model']:<10} {m['path']:<8} {r.get('runs', 1):>4} {m['weight_bytes'] / gib:>11.2f} "
            f"{e['weights_bytes'] / gib:>7.2f} {peak / gib:>9.2f} {e['peak_memory_bytes'] / gib:>7.2f} "
            f"{m['decode_tokens_per_second'] or 0:>8.1f} "
            f"{e['tokens_per_second']:>8.1f} {fmt_pct(err['peak']):>9} "
            f"{fmt_pct(err['decode_tokens_per_second']):>9} "
            f"{fmt_pct(err.get('decode_tokens_per_second_own_host')):>9}  {spread:<16} "
            f"{'-' if ratio is None else f'{ratio:.2f}':>13}"
        )


def measure_in_processes(argv: list[str], repeat: int, done: Any) -> list[dict[str, Any]]:
    """This script, --repeat 1, in `repeat` fresh processes: eager decoding is host-bound and its
    step time differs between processes, which repeats inside one process do not show. `done`
    gets the rows so far after each process (a run cut short keeps the processes it finished)."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            out = Path(tmp) / f"run{i}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--repeat", "1", "--out", str(out)]
            print(f"process {i + 1} of {repeat}", flush=True)
            subprocess.run(cmd, check=True)
            rows += json.loads(out.read_text())["rows"]
            done(rows)
    return rows


def write(
    path: str | None, args: argparse.Namespace, rows: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> None:
    """rows: what is scored (with --repeat, the median run of each model); runs: every process's
    rows, which --rescore pools."""
    if not path:
        return
    import torch

    meta = {
        "date": dt.date.today().isoformat(),
        "device": args.device,
        "gpu_estimated": args.gpu,
        "repeat": args.repeat,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    if args.device.startswith("cuda"):
        meta["device_name"] = torch.cuda.get_device_name()
    Path(path).write_text(json.dumps({"meta": meta, "rows": rows, "runs": runs}, indent=1) + "\n")


def strip(argv: list[str], *options: str) -> list[str]:
    """argv less `options` and their values (`--opt value` or `--opt=value`)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in options:
            skip = True
        elif not any(a.startswith(o + "=") for o in options):
            out.append(a)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu", default="h200", help="catalog id the estimate is made for")
    parser.add_argument(
        "--model",
        action="append",
        choices=tuple(MODELS),
        help="repeatable; default: llama3-8b and wide-8l (tiny on the CPU)",
    )
    parser.add_argument("--path", choices=("auto", "triton", "dequant"), default="auto")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=50)
    parser.add_argument("--new-tokens", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3, help="timed generations in one process")
    parser.add_argument("--repeat", type=int, default=1, help="fresh processes (the median run scored)")
    parser.add_argument("--out", metavar="FILE", help="write every figure as JSON")
    parser.add_argument("--rescore", nargs="+", metavar="FILE", help="score stored results (pooled)")
    parser.add_argument(
        "--gemv-check",
        action="store_true",
        help="only compare the Triton GEMV with the bf16 expansion on one 300x200 layer",
    )
    args = parser.parse_args()
    if args.gemv_check:
        return gemv_check(args.device)
    if args.rescore:
        stored = [json.loads(Path(f).read_text()) for f in args.rescore]
        gpu_id = stored[0]["meta"]["gpu_estimated"]
        rows = pool([r for d in stored for r in d.get("runs", d["rows"])], gpu_id)
        print_rows(rows)
        if args.out:
            Path(args.out).write_text(json.dumps({"rescored": args.rescore, "rows": rows}, indent=1) + "\n")
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    models = args.model or (["tiny"] if args.device == "cpu" else ["llama3-8b", "wide-8l"])
    if args.repeat > 1:
        child_argv = strip(sys.argv[1:], "--repeat", "--out")
        runs = measure_in_processes(
            child_argv, args.repeat, lambda r: write(args.out, args, pool(r, args.gpu), r)
        )
        rows = pool(runs, args.gpu)
    else:
        rows = runs = []
        for name in models:
            w = workload_for(name, args.batch, args.prompt_tokens, args.new_tokens)
            m = measure(w, args.device, args.path, args.repeats)
            est = fitbench_estimate(w, args.gpu)
            rows.append(
                {
                    "model": name,
                    "params": w.param_count(),
                    "batch": args.batch,
                    "prompt_tokens": args.prompt_tokens,
                    "new_tokens": args.new_tokens,
                    "measured": m,
                    "estimate": est,
                    "error": compare(m, est),
                }
            )
    print_rows(rows)
    if args.out:
        write(args.out, args, rows, runs)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
