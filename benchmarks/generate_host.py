"""Where the host time of Hugging Face `generate` goes, per decode step and per layer.

The estimator charges eager generation `generate_host_seconds_per_op` for every framework
operation its kernel list issues per decode step, plus a fixed count per token
(estimate/speed.py). This script checks both parts of that on the local device, model by model:

* per decode step, the time of `generate` (eager, dynamic cache), from two generations that
  differ only in their number of new tokens (the prefill cancels);
* at two depths (layers) of the same model, so that the step splits into a per-layer part
  and a fixed part (embedding, head, sampling, the generate loop);
* the operations one decode forward issues: Python-level torch calls (a TorchFunctionMode)
  and aten operations reaching the dispatcher (a TorchDispatchMode), per layer and fixed;
* next to the estimator's operation count and host time for the same workload;
* with `--kernels`, where the rest of the step goes (torch.profiler over two generations,
  per decode step): GPU kernel time, and the host's time in cudaMalloc/cudaFree and in waits
  for the device (stream/device synchronisation, device-to-host copies). A per-layer time
  that grows with batch x context while the calls do not is GPU time if the kernel time
  grows with it, the allocator if cudaMalloc does, the host otherwise.

Python-level calls are counted less attribute reads (`.shape`, `.dtype`: C getters that cost
nanoseconds), the unit of estimate/generate_ops.py.

    python benchmarks/generate_host.py --out results/generate-host.json     # on cuda
    python benchmarks/generate_host.py --device cpu --tiny                  # a smoke test

Models are built from transformers' config classes with random weights; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from fitbench.catalog import get_gpu
from fitbench.estimate import generate_ops
from fitbench.estimate.profile import get_profile
from fitbench.estimate.speed import generation
from fitbench.measure.timing import summarize
from fitbench.workloads import library
from fitbench.workloads.hf_config import workload_from_config

# name -> (config.json fields, batch, prompt tokens). Published layouts at reduced depth: the
# host cost of a step does not depend on the width, and two depths separate per-layer from fixed.
CASES: dict[str, tuple[dict[str, Any], int, int]] = {
    "llama-7b b1 p50": (
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
        },
        1,
        50,
    ),
    "llama-7b b8 p512": (
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
        },
        8,
        512,
    ),
    "qwen2.5-1.5b b8 p50": (
        {
            "model_type": "qwen2",
            "hidden_size": 1536,
            "intermediate_size": 8960,
            "num_attention_heads": 12,
            "num_key_value_heads": 2,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
            "max_position_embeddings": 32768,
        },
        8,
        50,
    ),
    "qwen2.5-1.5b b8 p512": (
        {
            "model_type": "qwen2",
            "hidden_size": 1536,
            "intermediate_size": 8960,
            "num_attention_heads": 12,
            "num_key_value_heads": 2,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
            "max_position_embeddings": 32768,
        },
        8,
        512,
    ),
    "mistral w1024 b4 p2048": (
        {
            "model_type": "mistral",
            "hidden_size": 2048,
            "intermediate_size": 5632,
            "num_attention_heads": 16,
            "num_key_value_heads": 4,
            "vocab_size": 32000,
            "sliding_window": 1024,
            "max_position_embeddings": 8192,
        },
        4,
        2048,
    ),
    "mixtral 8x b4 p256": (
        {
            "model_type": "mixtral",
            "hidden_size": 2048,
            "intermediate_size": 3584,
            "num_attention_heads": 16,
            "num_key_value_heads": 4,
            "vocab_size": 32000,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "max_position_embeddings": 8192,
        },
        4,
        256,
    ),
}

# LFM2-1.2B's widths (gated short convolutions, attention in every third layer at any depth):
# a decode step whose GPU work does not grow with the batch, so a step that does is the host's.
LFM2_1_2B = {
    k: v
    for k, v in library.get_model("lfm2-1.2b").config.items()
    if k not in ("num_hidden_layers", "full_attn_idxs", "torch_dtype")
}
# Baichuan2-7B as fitbench runs it (Llama blocks, a 125,696-token vocabulary) beside the same
# blocks with Llama-2's 32,000: the users set's FP16 batch-2 decode read 40.7 ms a step where the
# estimate said 27.4, and the vocabulary is the one thing the two cases do not share.
LLAMA_7B_VOCAB = {**CASES["llama-7b b1 p50"][0]}
BAICHUAN2_7B = {**LLAMA_7B_VOCAB, "vocab_size": 125696}
CASES.update(
    {
        "baichuan2-7b b2 p512": (BAICHUAN2_7B, 2, 512),
        "llama-7b b2 p512": (LLAMA_7B_VOCAB, 2, 512),
        "lfm2-1.2b b1 p512": (LFM2_1_2B, 1, 512),
        "lfm2-1.2b b8 p1024": (LFM2_1_2B, 8, 1024),
        "lfm2-1.2b b32 p256": (LFM2_1_2B, 32, 256),
    }
)


def with_depth(fields: dict[str, Any], layers: int) -> dict[str, Any]:
    """The config fields at `layers` layers; LFM2's attention layers re-placed to fit the depth."""
    out = {**fields, "num_hidden_layers": layers}
    if fields.get("model_type") == "lfm2":
        out["full_attn_idxs"] = [i for i in range(layers) if i % 3 == 2]
    return out


def build(fields: dict[str, Any], layers: int, device: str, dtype: Any) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(**with_depth(fields, layers))
    cfg._attn_implementation = "sdpa"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model.eval()


def step_seconds(model: Any, batch: int, prompt: int, new: int, device: str, repeats: int) -> float:
    """Median seconds of one decode step of `generate`: (t(new) - t(1)) / (new - 1)."""
    import torch

    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)
    mask = torch.ones_like(ids)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def timed(n: int) -> float:
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        sync()
        return time.perf_counter() - t0

    timed(4)  # warm-up: allocator, kernels, lazy inits
    per_step = [(timed(new) - timed(1)) / (new - 1) for _ in range(repeats)]
    return summarize(per_step).median


def decode_op_counts(model: Any, batch: int, prompt: int, device: str) -> tuple[int, int]:
    """(Python-level torch calls, aten operations) of one decode forward with a filled cache."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import DynamicCache

    class CountFunctions(TorchFunctionMode):
        n = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") != "__get__":
                CountFunctions.n += 1
            return func(*args, **(kwargs or {}))

    class CountAten(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            CountAten.n += 1
            return func(*args, **(kwargs or {}))

    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)
    nxt = ids[:, -1:]
    mask = torch.ones(batch, prompt + 1, dtype=torch.long, device=device)
    pos = torch.tensor([prompt], device=device)
    for mode in (CountFunctions(), CountAten()):
        with torch.no_grad():
            cache = DynamicCache(config=model.config)
            model(ids, past_key_values=cache, use_cache=True)
            with mode:
                model(nxt, past_key_values=cache, attention_mask=mask, cache_position=pos, use_cache=True)
    return CountFunctions.n, CountAten.n


def kernel_profile(
    model: Any, batch: int, prompt: int, new: int, device: str
) -> tuple[dict[str, float], dict[str, float]]:
    """Per decode step: GPU kernel seconds, and host seconds and calls in the allocator's CUDA
    calls and in waits for the device, from torch.profiler over generate(new) minus generate(1);
    and the eight kernels with the most device time a step (seconds, by name)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)
    mask = torch.ones_like(ids)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    waits = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpyAsync", "cudaEventSynchronize")

    def totals(n: int) -> dict[str, float]:
        with torch.no_grad(), profile(activities=activities) as prof:
            model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        out = {
            "gpu_kernel_seconds": 0.0,
            "malloc_calls": 0.0,
            "malloc_seconds": 0.0,
            "wait_calls": 0.0,
            "wait_seconds": 0.0,
        }
        for e in prof.key_averages():
            device_us = getattr(e, "self_device_time_total", None)
            if device_us is None:
                device_us = getattr(e, "self_cuda_time_total", 0.0)
            # An operator's row (aten::mm) carries the device time of the kernels it launched,
            # which have rows of their own: only the kernels' rows are counted.
            if device_us and getattr(e, "device_type", DeviceType.CPU) != DeviceType.CPU:
                out["gpu_kernel_seconds"] += device_us * 1e-6
                kernels[n][e.key] = kernels[n].get(e.key, 0.0) + device_us * 1e-6
            if e.key in ("cudaMalloc", "cudaFree"):
                out["malloc_calls"] += e.count
                out["malloc_seconds"] += e.self_cpu_time_total * 1e-6
            elif e.key in waits:
                out["wait_calls"] += e.count
                out["wait_seconds"] += e.self_cpu_time_total * 1e-6
        return out

    kernels: dict[int, dict[str, float]] = {new: {}, 1: {}, 2: {}}
    totals(2)  # warm-up
    long, short = totals(new), totals(1)
    per_step = {k: (long[k] - short[k]) / (new - 1) for k in long}
    by_kernel = {k: (v - kernels[1].get(k, 0.0)) / (new - 1) for k, v in kernels[new].items()}
    top = sorted(by_kernel.items(), key=lambda kv: -kv[1])[:8]
    return per_step, {k[:90]: v for k, v in top}


def estimated(
    fields: dict[str, Any],
    layers: int,
    batch: int,
    prompt: int,
    new: int,
    gpu_id: str,
    precision: str = "bf16",
) -> dict[str, float]:
    """The estimator's operations and host seconds per decode step for the same job."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(with_depth(fields, layers)))
        w = workload_from_config(
            path,
            mode="infer",
            batch_size=batch,
            prompt_tokens=prompt,
            new_tokens=new,
            precision=precision,
        )
    profile = get_profile("torch", "default")
    arch = w.arch
    ops = generate_ops.decode_step_calls(arch, prompt + (new + 1) // 2)
    gen = generation(w, get_gpu(gpu_id), profile)
    return {
        "ops": ops,
        "host_seconds": gen.decode.host_seconds,
        "step_seconds": gen.decode.seconds,
        "gpu_seconds": gen.decode.gpu_seconds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu", default="h200", help="catalog card for the estimate")
    parser.add_argument("--tiny", action="store_true", help="two cases, few tokens (CPU smoke test)")
    parser.add_argument("--layers", default="4,12", help="the two depths")
    parser.add_argument("--new-tokens", type=int, default=33)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--kernels",
        action="store_true",
        help="also profile GPU kernel, allocator and wait time per decode step",
    )
    parser.add_argument("--cases", help="only the cases whose names contain one of these (commas)")
    parser.add_argument(
        "--dtype",
        choices=("bf16", "fp16"),
        default="bf16",
        help="weights and activations on a GPU (a CPU runs FP32)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch
    import transformers

    on_gpu = args.device.startswith("cuda")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype] if on_gpu else torch.float32
    shallow, deep = (int(x) for x in args.layers.split(","))
    cases = dict(list(CASES.items())[2:4]) if args.tiny else CASES
    if args.cases:
        wanted = args.cases.split(",")
        cases = {k: v for k, v in CASES.items() if any(w in k for w in wanted)}
    rows = []
    for name, (fields, batch, prompt) in cases.items():
        if args.tiny:
            fields = {
                **fields,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "vocab_size": 512,
            }
            batch, prompt = 2, 16
        row: dict[str, Any] = {"case": name, "batch": batch, "prompt": prompt, "fields": fields}
        for layers in (shallow, deep):
            model = build(fields, layers, args.device, dtype)
            step = step_seconds(model, batch, prompt, args.new_tokens, args.device, args.repeats)
            functions, aten = decode_op_counts(model, batch, prompt, args.device)
            est = estimated(fields, layers, batch, prompt, args.new_tokens, args.gpu, args.dtype)
            row[str(layers)] = {
                "step_seconds": step,
                "torch_functions": functions,
                "aten_ops": aten,
                "estimate": est,
            }
            if args.kernels:
                row[str(layers)]["profile"], row[str(layers)]["top_kernels"] = kernel_profile(
                    model, batch, prompt, args.new_tokens, args.device
                )
            del model
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
        a, b = row[str(shallow)], row[str(deep)]
        span = deep - shallow
        row["per_layer"] = {
            "step_seconds": (b["step_seconds"] - a["step_seconds"]) / span,
            "torch_functions": (b["torch_functions"] - a["torch_functions"]) / span,
            "aten_ops": (b["aten_ops"] - a["aten_ops"]) / span,
            "estimate_ops": (b["estimate"]["ops"] - a["estimate"]["ops"]) / span,
            "estimate_host_seconds": (b["estimate"]["host_seconds"] - a["estimate"]["host_seconds"]) / span,
        }
        pl = row["per_layer"]
        row["fixed"] = {
            "step_seconds": a["step_seconds"] - shallow * pl["step_seconds"],
            "torch_functions": a["torch_functions"] - shallow * pl["torch_functions"],
            "aten_ops": a["aten_ops"] - shallow * pl["aten_ops"],
            "estimate_ops": a["estimate"]["ops"] - shallow * pl["estimate_ops"],
            "estimate_host_seconds": a["estimate"]["host_seconds"] - shallow * pl["estimate_host_seconds"],
        }
        if args.kernels:
            prof_a, prof_b = a["profile"], b["profile"]
            row["per_layer"]["profile"] = {k: (prof_b[k] - prof_a[k]) / span for k in prof_a}
            slope = row["per_layer"]["profile"]
            row["fixed"]["profile"] = {k: prof_a[k] - shallow * slope[k] for k in prof_a}
        rows.append(row)
        print(f"{name}: done", flush=True)

    print()
    head = (
        f"{'case':24} {'part':9} {'meas ms':>8} {'est ms':>7} {'py calls':>8} {'aten':>6} "
        f"{'est ops':>7} {'us/call':>7} {'us/aten':>7}"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        for part in ("per_layer", "fixed"):
            p = row[part]
            ms = p["step_seconds"] * 1e3
            print(
                f"{row['case']:24} {part:9} {ms:8.3f} {p['estimate_host_seconds'] * 1e3:7.3f} "
                f"{p['torch_functions']:8.1f} {p['aten_ops']:6.1f} {p['estimate_ops']:7.1f} "
                f"{1e3 * ms / max(p['torch_functions'], 1):7.1f} {1e3 * ms / max(p['aten_ops'], 1):7.1f}"
            )
    if args.kernels:
        head = (
            f"{'case':24} {'part':9} {'meas ms':>8} {'gpu ms':>7} {'malloc':>6} {'malloc ms':>9} "
            f"{'waits':>5} {'wait ms':>7}"
        )
        print("\n" + head)
        print("-" * len(head))
        for row in rows:
            for part in ("per_layer", "fixed"):
                p, q = row[part], row[part]["profile"]
                print(
                    f"{row['case']:24} {part:9} {p['step_seconds'] * 1e3:8.3f} "
                    f"{q['gpu_kernel_seconds'] * 1e3:7.3f} {q['malloc_calls']:6.1f} "
                    f"{q['malloc_seconds'] * 1e3:9.3f} {q['wait_calls']:5.1f} "
                    f"{q['wait_seconds'] * 1e3:7.3f}"
                )
        for row in rows:
            print(f"\n{row['case']}, {deep} layers: the most device time a decode step (ms)")
            for name, seconds in row[str(deep)]["top_kernels"].items():
                print(f"  {seconds * 1e3:7.3f}  {name}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "benchmark": "generate_host",
                    "device": args.device,
                    "gpu": args.gpu,
                    "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
                    "torch": torch.__version__,
                    "transformers": transformers.__version__,
                    "layers": [shallow, deep],
                    "dtype": args.dtype if on_gpu else "fp32",
                    "new_tokens": args.new_tokens,
                    "rows": rows,
                },
                indent=1,
            )
        )
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
