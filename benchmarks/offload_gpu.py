"""CPU offload measured: accelerate's device_map under a max_memory cap, against fitbench.

A Llama-shaped model with random FP16 weights (~3.6B parameters, nothing downloaded) is built
on the meta device, placed by ``infer_auto_device_map(max_memory={0: cap, "cpu": ...},
no_split_module_classes=["LlamaDecoderLayer"])``, its tensors created directly where the map
puts them, and dispatched with ``dispatch_model`` (offloaded layers stream to the GPU every
forward). Recorded: decoder layers on the GPU, CPU RAM the offloaded weights took (the process's
resident-set growth), decode tokens per second of ``generate``; next to fitbench's offload
estimate for a card whose weight budget is the same cap. Prints a table, writes JSON (--out).

H200:  PYTHONPATH=src python benchmarks/offload_gpu.py --out benchmarks/results/offload-h200.json
CPU proof (the cap on "cpu", the rest offloaded to disk):
       PYTHONPATH=src python benchmarks/offload_gpu.py --device cpu --tiny --out /tmp/offload.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from fitbench.catalog import resolve_gpus
from fitbench.core.units import GiB
from fitbench.estimate.api import estimate, required_bytes
from fitbench.estimate.offload import offload_estimate
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# ~3.6B parameters: Llama-3.2-3B's shape with an untied LM head.
MODEL = {"hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 24, "num_key_value_heads": 8,
         "intermediate_size": 8192, "vocab_size": 128256}
TINY = {"hidden_size": 256, "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 704, "vocab_size": 2048}


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def fitbench_workload(cfg: dict[str, int], prompt: int, new: int) -> Workload:
    arch = TransformerArch(kind="decoder", vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
                           num_layers=cfg["num_hidden_layers"], num_heads=cfg["num_attention_heads"],
                           num_kv_heads=cfg["num_key_value_heads"],
                           intermediate_size=cfg["intermediate_size"],
                           mlp="swiglu", norm="rmsnorm", position="rotary", qkv_bias=False, out_bias=False,
                           mlp_bias=False, pooler=False, num_labels=0, max_positions=8192)
    return Workload(name="llama-3b-random", arch=arch, mode="infer", precision="fp16", batch_size=1,
                    prompt_tokens=prompt, new_tokens=new)


def fitbench_offload(cfg: dict[str, int], gpu_id: str, cap: int, prompt: int, new: int) -> dict[str, Any]:
    """fitbench's offload estimate for a card whose weights may take `cap` bytes: accelerate's
    max_memory bounds module sizes only, so the card is given that plus the job's other memory."""
    w = fitbench_workload(cfg, prompt, new)
    gpu = resolve_gpus([gpu_id])[0]
    base = estimate(w, gpu)
    non_weight = required_bytes(base.memory) - base.memory.parts["weights"]
    capped = dataclasses.replace(gpu, usable_bytes=int(cap + non_weight))
    off = offload_estimate(estimate(w, capped), ram=None)
    return off.to_dict() if off is not None else {"verdict": "fits"}


def build(cfg: dict[str, int], device: str, cap: int, offload_dir: str) -> tuple[Any, dict[str, Any], int]:
    import torch
    from accelerate import dispatch_model, infer_auto_device_map, init_empty_weights
    from accelerate.utils import set_module_tensor_to_device
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**cfg, max_position_embeddings=8192, tie_word_embeddings=False)
    with init_empty_weights():
        model = LlamaForCausalLM(config).to(torch.float16)
    main: Any = 0 if device.startswith("cuda") else "cpu"
    spill = "cpu" if device.startswith("cuda") else "disk"
    max_memory = {main: cap, spill: 1 << 50} if spill == "cpu" else {main: cap}
    device_map = infer_auto_device_map(model, max_memory=max_memory, dtype=torch.float16,
                                       no_split_module_classes=["LlamaDecoderLayer"])
    if device.startswith("cuda"):
        torch.zeros(1, device="cuda")  # the CUDA context's host memory must not count as offloaded weights
    before = rss_bytes()
    torch.manual_seed(0)
    state: dict[str, Any] = {}
    for name, param in model.named_parameters():
        where = next(v for k, v in sorted(device_map.items(), key=lambda kv: -len(kv[0]))
                     if k == "" or name == k or name.startswith(k + "."))
        target = "cpu" if where == "disk" else (f"cuda:{where}" if isinstance(where, int) else where)
        value = torch.randn(param.shape, dtype=torch.float16, device=target) * 0.02
        if where == "disk":
            state[name] = value
        else:
            set_module_tensor_to_device(model, name, target, value=value)
    if state:  # the CPU proof: what does not fit under the cap goes to disk
        from accelerate.utils import offload_state_dict

        offload_state_dict(offload_dir, state)
        state.clear()
    model = dispatch_model(model, device_map=device_map, main_device=main if spill == "cpu" else "cpu",
                           offload_dir=offload_dir if spill == "disk" else None)
    return model.eval(), device_map, rss_bytes() - before


def time_decode(model: Any, device: str, prompt: int, new: int, repeats: int) -> dict[str, float]:
    import torch

    dev = "cuda:0" if device.startswith("cuda") else "cpu"
    ids = torch.randint(3, model.config.vocab_size, (1, prompt), device=dev)

    def run(n: int) -> float:
        if dev != "cpu":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                           min_new_tokens=n, do_sample=False, pad_token_id=0)
        if dev != "cpu":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    run(2)
    full = statistics.median(run(new) for _ in range(repeats))
    first = statistics.median(run(1) for _ in range(repeats))
    return {"seconds": full, "prefill_seconds": first,
            "tokens_per_second": (new - 1) / max(full - first, 1e-9)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--gpu", default="h200", help="catalog card fitbench estimates for (default h200)")
    p.add_argument("--tiny", action="store_true", help="a tiny model (a CPU proof of the script)")
    p.add_argument("--cap-gib", type=float,
                   help="max_memory of the main device (default: 4 GiB; tiny: 6 MiB)")
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", metavar="PATH", help="write the results as JSON")
    args = p.parse_args(argv)

    import torch

    cfg = TINY if args.tiny else MODEL
    cap = int((args.cap_gib if args.cap_gib is not None else (6 / 1024 if args.tiny else 4.0)) * GiB)
    with tempfile.TemporaryDirectory() as offload_dir:
        model, device_map, rss = build(cfg, args.device, cap, offload_dir)
        layers = [k for k in device_map if k.startswith("model.layers.")]
        on_main = [k for k in layers if device_map[k] in (0, "cpu" if args.device == "cpu" else 0)]
        timing = time_decode(model, args.device, args.prompt_tokens, args.new_tokens, args.repeats)
    est = fitbench_offload(cfg, args.gpu, cap, args.prompt_tokens, args.new_tokens)
    measured = {"gpu_layers": len(on_main), "total_layers": len(layers), "cpu_ram_bytes": rss, **timing}
    print(f"{'':<24} {'measured':>12} {'fitbench':>12}")
    print(f"{'layers on the GPU':<24} {measured['gpu_layers']:>12} {est.get('gpu_layers', '-'):>12}")
    print(f"{'CPU RAM (GiB)':<24} {rss / GiB:>12.2f} {est.get('cpu_ram_bytes', 0) / GiB:>12.2f}")
    print(f"{'decode tok/s':<24} {timing['tokens_per_second']:>12.2f} "
          f"{est.get('tokens_per_second') or 0:>12.2f}")
    out = {"model": cfg, "params": fitbench_workload(cfg, 1, 1).param_count(), "device": args.device,
           "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
           "torch": torch.__version__, "cap_bytes": cap,
           "device_map": {k: str(v) for k, v in device_map.items()},
           "measured": measured, "fitbench": est, "estimates_for": args.gpu}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
