"""CPU offload measured: accelerate's device_map under a max_memory cap, against fitbench.

A Llama-shaped model with random FP16 weights (~3.6B parameters, nothing downloaded) is built
on the meta device, placed by ``infer_auto_device_map(max_memory={0: cap, "cpu": ...},
no_split_module_classes=["LlamaDecoderLayer"])``, its tensors created directly where the map
puts them, and dispatched with ``dispatch_model`` (offloaded layers stream to the GPU every
forward). Recorded: decoder layers on the GPU, CPU RAM the offloaded weights took (the process's
resident-set growth, next to the bytes of the offloaded tensors themselves), prefill seconds
and decode tokens per second of ``generate``; next to fitbench's offload estimate for a card
whose weight budget is the same cap. Prints a table, writes JSON (--out).

The same run measures what the estimate's copy constants stand for on this host: pageable and
pinned host-to-device copy bandwidth at the model's tensor sizes (CUDA events, median), and one
offloaded decoder layer brought over through accelerate's hooks (one per leaf module:
``pre_forward`` + ``post_forward``) against the same tensors copied with a plain
``.to(device)``: the difference per tensor is the hook path's own cost. ``--rescore FILE``
recomputes the estimate of a saved run with today's estimator, with its built-in copy constants
and with the run's own measured copy figures, and prints the README's rows.

H200:  PYTHONPATH=src python benchmarks/offload_gpu.py --out benchmarks/results/offload-h200.json
Offline: PYTHONPATH=src python benchmarks/offload_gpu.py --rescore benchmarks/results/offload-h200.json
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
from fitbench.estimate.offload import HostCopy, offload_estimate
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.workload import Workload

# ~3.6B parameters: Llama-3.2-3B's shape with an untied LM head.
MODEL = {
    "hidden_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "intermediate_size": 8192,
    "vocab_size": 128256,
}
TINY = {
    "hidden_size": 256,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 704,
    "vocab_size": 2048,
}


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def fitbench_workload(cfg: dict[str, int], prompt: int, new: int) -> Workload:
    arch = TransformerArch(
        kind="decoder",
        vocab_size=cfg["vocab_size"],
        hidden_size=cfg["hidden_size"],
        num_layers=cfg["num_hidden_layers"],
        num_heads=cfg["num_attention_heads"],
        num_kv_heads=cfg["num_key_value_heads"],
        intermediate_size=cfg["intermediate_size"],
        mlp="swiglu",
        norm="rmsnorm",
        position="rotary",
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
        pooler=False,
        num_labels=0,
        max_positions=8192,
    )
    return Workload(
        name="llama-3b-random",
        arch=arch,
        mode="infer",
        precision="fp16",
        batch_size=1,
        prompt_tokens=prompt,
        new_tokens=new,
    )


def fitbench_offload(
    cfg: dict[str, int], gpu_id: str, cap: int, prompt: int, new: int, copy: HostCopy | None = None
) -> dict[str, Any]:
    """fitbench's offload estimate for a card whose weights may take `cap` bytes: accelerate's
    max_memory bounds module sizes only, so the card is given that plus the job's other memory.
    `copy`: the host's measured copy figures (default: the estimator's constants for the link)."""
    w = fitbench_workload(cfg, prompt, new)
    gpu = resolve_gpus([gpu_id])[0]
    base = estimate(w, gpu)
    non_weight = required_bytes(base.memory) - base.memory.parts["weights"]
    capped = dataclasses.replace(gpu, usable_bytes=int(cap + non_weight))
    off = offload_estimate(estimate(w, capped), ram=None, copy=copy)
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
    device_map = infer_auto_device_map(
        model, max_memory=max_memory, dtype=torch.float16, no_split_module_classes=["LlamaDecoderLayer"]
    )
    if device.startswith("cuda"):
        torch.zeros(1, device="cuda")  # the CUDA context's host memory must not count as offloaded weights
    before = rss_bytes()
    torch.manual_seed(0)
    state: dict[str, Any] = {}
    for name, param in model.named_parameters():
        where = next(
            v
            for k, v in sorted(device_map.items(), key=lambda kv: -len(kv[0]))
            if k == "" or name == k or name.startswith(k + ".")
        )
        target = "cpu" if where == "disk" else (f"cuda:{where}" if isinstance(where, int) else where)
        # In place: a temporary (randn * 0.02) could stay in the host allocator and count in RSS.
        value = torch.empty(param.shape, dtype=torch.float16, device=target).normal_(0.0, 0.02)
        if where == "disk":
            state[name] = value
        else:
            set_module_tensor_to_device(model, name, target, value=value)
    if state:  # the CPU proof: what does not fit under the cap goes to disk
        from accelerate.utils import offload_state_dict

        offload_state_dict(offload_dir, state)
        state.clear()
    model = dispatch_model(
        model,
        device_map=device_map,
        main_device=main if spill == "cpu" else "cpu",
        offload_dir=offload_dir if spill == "disk" else None,
    )
    return model.eval(), device_map, rss_bytes() - before


def hook_tensors(module: Any) -> list[tuple[str, Any]]:
    """(name, host tensor) that `module`'s offloading hook brings over, as its pre_forward walks them."""
    from accelerate.utils import named_module_tensors

    hook = getattr(module, "_hf_hook", None)
    if hook is None or not getattr(hook, "offload", False) or hook.weights_map is None:
        return []
    return [
        (name, hook.weights_map[name])
        for name, _ in named_module_tensors(
            module,
            include_buffers=hook.offload_buffers,
            recurse=hook.place_submodules,
            remove_non_persistent=True,
        )
    ]


def offloaded_tensors(model: Any) -> list[tuple[str, Any]]:
    """(name, host tensor) of every offloaded weight, from the hooks' weights maps."""
    return [
        (f"{name}.{key}", value)
        for name, module in model.named_modules()
        for key, value in hook_tensors(module)
    ]


class Timer:
    """Seconds of a callable: CUDA events around it on a GPU, the wall clock on the CPU."""

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")

    def __call__(self, fn: Any) -> float:
        import torch

        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


def copy_bench(model: Any, device: str, repeats: int) -> dict[str, Any]:
    """Pageable and pinned host-to-device copies at the offloaded tensors' sizes, and one offloaded
    decoder layer through its accelerate hook against the same tensors copied plainly."""
    import torch

    dev = "cuda:0" if device.startswith("cuda") else "cpu"
    timer = Timer(device)
    tensors = offloaded_tensors(model)

    # .to("cpu") on the CPU proof is a no-op: a clone stands in for the copy there.
    def move(x: Any, **kw: Any) -> Any:
        return x.to(dev, **kw) if dev != "cpu" else x.clone()

    sizes: dict[int, Any] = {}
    for _, value in tensors:
        sizes.setdefault(value.numel() * value.element_size(), value)
    by_size = []
    for nbytes, value in sorted(sizes.items()):
        move(value)  # first touch: allocator and staging buffers
        pageable = statistics.median(timer(lambda v=value: move(v)) for _ in range(repeats))
        row = {
            "bytes": nbytes,
            "count": sum(1 for _, v in tensors if v.numel() * v.element_size() == nbytes),
            "pageable_seconds": pageable,
            "pageable_bytes_s": nbytes / pageable,
        }
        if dev != "cpu":
            pinned_src = value.pin_memory()
            move(pinned_src, non_blocking=True)
            pinned = statistics.median(
                timer(lambda v=pinned_src: move(v, non_blocking=True)) for _ in range(repeats)
            )
            row.update(pinned_seconds=pinned, pinned_bytes_s=nbytes / pinned)
            del pinned_src
        by_size.append(row)
    total_bytes = sum(r["bytes"] * r["count"] for r in by_size)
    out: dict[str, Any] = {
        "sizes": by_size,
        "offloaded_tensors": len(tensors),
        "offloaded_bytes": total_bytes,
        "pageable_bytes_s": total_bytes / sum(r["pageable_seconds"] * r["count"] for r in by_size),
    }
    if dev != "cpu":
        out["pinned_bytes_s"] = total_bytes / sum(r["pinned_seconds"] * r["count"] for r in by_size)
    # One offloaded decoder layer: its hook (copy + empty_cache per tensor, then drop) vs plain copies.
    # accelerate hooks each leaf module of a CPU-offloaded layer (attach_align_device_hook): time the
    # hooks of the first offloaded decoder layer, in order, against plain copies of its tensors.
    hooked = [(n, m) for n, m in model.named_modules() if n.startswith("model.layers.") and hook_tensors(m)]
    first = hooked[0][0].split(".")[2] if hooked else ""
    modules = [m for n, m in hooked if n.split(".")[2] == first]
    if modules:
        values = [v for m in modules for _, v in hook_tensors(m)]
        x = torch.zeros(1, 1, model.config.hidden_size, dtype=torch.float16, device=dev)

        def through_hook() -> None:
            for m in modules:
                m._hf_hook.pre_forward(m, x)
                m._hf_hook.post_forward(m, x)

        def plain() -> None:
            for v in values:
                move(v)

        through_hook(), plain()
        hook_s = statistics.median(timer(through_hook) for _ in range(repeats))
        plain_s = statistics.median(timer(plain) for _ in range(repeats))
        out["layer"] = {
            "name": f"model.layers.{first}",
            "hooks": len(modules),
            "tensors": len(values),
            "bytes": sum(v.numel() * v.element_size() for v in values),
            "hook_seconds": hook_s,
            "plain_copy_seconds": plain_s,
        }
        out["hook_seconds_per_tensor"] = max(hook_s - plain_s, 0.0) / len(values)
    return out


def time_decode(model: Any, device: str, prompt: int, new: int, repeats: int) -> dict[str, float]:
    import torch

    dev = "cuda:0" if device.startswith("cuda") else "cpu"
    ids = torch.randint(3, model.config.vocab_size, (1, prompt), device=dev)

    def run(n: int) -> float:
        if dev != "cpu":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                pad_token_id=0,
            )
        if dev != "cpu":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    run(2)
    full = statistics.median(run(new) for _ in range(repeats))
    first = statistics.median(run(1) for _ in range(repeats))
    return {
        "seconds": full,
        "prefill_seconds": first,
        "tokens_per_second": (new - 1) / max(full - first, 1e-9),
    }


def measured_copy(run: dict[str, Any]) -> HostCopy | None:
    """The host's copy figures from a run's microbenchmark (None for runs without one)."""
    hc = run.get("host_copy") or {}
    if "pageable_bytes_s" not in hc or "hook_seconds_per_tensor" not in hc:
        return None
    return HostCopy(
        hc["pageable_bytes_s"],
        hc["hook_seconds_per_tensor"],
        source=f"measured on {run.get('device_name', 'the host')} by benchmarks/offload_gpu.py",
    )


def rescore(run: dict[str, Any]) -> dict[str, Any]:
    """Today's estimates for a run (built-in copy constants, and the run's measured copy figures
    where recorded); prints measured against both and the README's rows."""
    cfg, cap, gpu = run["model"], run["cap_bytes"], run.get("estimates_for", "h200")
    prompt, new = run.get("prompt_tokens", 32), run.get("new_tokens", 16)  # the defaults of early runs
    est = fitbench_offload(cfg, gpu, cap, prompt, new)
    copy = measured_copy(run)
    est_host = fitbench_offload(cfg, gpu, cap, prompt, new, copy=copy) if copy else None
    m = run["measured"]
    hc = run.get("host_copy") or {}

    def cell(d: dict[str, Any] | None, key: str, scale: float = 1.0, fmt: str = ".2f") -> str:
        v = d.get(key) if d else None
        if not isinstance(v, (int, float)):
            return "-"
        return format(v, fmt) if fmt == "d" else format(v / scale, fmt)

    rows = [
        (
            "layers on the GPU",
            cell(m, "gpu_layers", fmt="d"),
            cell(est, "gpu_layers", fmt="d"),
            cell(est_host, "gpu_layers", fmt="d"),
        ),
        (
            "CPU RAM, RSS growth (GiB)",
            cell(m, "cpu_ram_bytes", GiB),
            cell(est, "cpu_ram_bytes", GiB),
            cell(est_host, "cpu_ram_bytes", GiB),
        ),
        (
            "offloaded weights (GiB)",
            cell(m, "offloaded_weight_bytes", GiB),
            cell(est, "cpu_ram_bytes", GiB),
            cell(est_host, "cpu_ram_bytes", GiB),
        ),
        (
            "prefill (s)",
            cell(m, "prefill_seconds"),
            cell(est, "prefill_seconds"),
            cell(est_host, "prefill_seconds"),
        ),
        (
            "decode tok/s",
            cell(m, "tokens_per_second"),
            cell(est, "tokens_per_second"),
            cell(est_host, "tokens_per_second"),
        ),
    ]
    print(f"{'':<27} {'measured':>10} {'fitbench':>10} {'with host':>10}")
    for label, *cells in rows:
        print(f"{label:<27} " + " ".join(f"{c:>10}" for c in cells))
    if hc:
        print(
            f"host copies: pageable {hc['pageable_bytes_s'] / 1e9:.1f} GB/s"
            + (f", pinned {hc['pinned_bytes_s'] / 1e9:.1f} GB/s" if "pinned_bytes_s" in hc else "")
            + (
                f", hook {hc['hook_seconds_per_tensor'] * 1e3:.2f} ms/tensor"
                if "hook_seconds_per_tensor" in hc
                else ""
            )
            + f" over {hc.get('offloaded_tensors', '?')} tensors"
        )
    if copy:
        print(
            f"the estimator's constants from this host: PAGEABLE_H2D_BYTES_S[<its link>] = "
            f"{copy.pageable_bytes_s:.3g}, HOOK_SECONDS_PER_TENSOR = {copy.seconds_per_tensor:.3g}"
        )
    print("\nREADME rows (measured | fitbench | fitbench with this run's copy figures):")
    for label, *cells in rows:
        print(f"| {label} | " + " | ".join(cells) + " |")
    return {"fitbench": est, "fitbench_with_host_copy": est_host}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--gpu", default="h200", help="catalog card fitbench estimates for (default h200)")
    p.add_argument("--tiny", action="store_true", help="a tiny model (a CPU proof of the script)")
    p.add_argument(
        "--cap-gib", type=float, help="max_memory of the main device (default: 4 GiB; tiny: 6 MiB)"
    )
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", metavar="PATH", help="write the results as JSON")
    p.add_argument("--rescore", metavar="FILE", help="re-score a saved run with today's estimator (no torch)")
    args = p.parse_args(argv)
    if args.rescore:
        rescore(json.loads(Path(args.rescore).read_text()))
        return 0

    import torch

    cfg = TINY if args.tiny else MODEL
    cap = int((args.cap_gib if args.cap_gib is not None else (6 / 1024 if args.tiny else 4.0)) * GiB)
    with tempfile.TemporaryDirectory() as offload_dir:
        model, device_map, rss = build(cfg, args.device, cap, offload_dir)
        layers = [k for k in device_map if k.startswith("model.layers.")]
        on_main = [k for k in layers if device_map[k] in (0, "cpu" if args.device == "cpu" else 0)]
        timing = time_decode(model, args.device, args.prompt_tokens, args.new_tokens, args.repeats)
        host_copy = copy_bench(model, args.device, max(args.repeats, 5))
    measured = {
        "gpu_layers": len(on_main),
        "total_layers": len(layers),
        "cpu_ram_bytes": rss,
        "offloaded_weight_bytes": host_copy["offloaded_bytes"],
        **timing,
    }
    out = {
        "model": cfg,
        "params": fitbench_workload(cfg, 1, 1).param_count(),
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "cap_bytes": cap,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "device_map": {k: str(v) for k, v in device_map.items()},
        "measured": measured,
        "host_copy": host_copy,
        "estimates_for": args.gpu,
    }
    try:
        import accelerate

        out["accelerate"] = accelerate.__version__
    except ImportError:
        pass
    out.update(rescore(out))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
