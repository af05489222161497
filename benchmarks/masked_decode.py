"""What a materialised attention mask costs a GQA decoder's decode step in Hugging Face `generate`.

A decode step of a full-attention model with an all-ones attention mask runs SDPA with no mask
(`enable_gqa`, flash). Once a sliding window is reached (or a batch carries padding) the mask is
materialised, and transformers < 5.23 then copies keys and values to every query head
(`repeat_kv`: three Python calls per tensor, a copy kernel each) because SDPA's fused kernels take
no GQA with a mask; transformers >= 5.23 folds the query instead (`pack_gqa`, one reshape). This
script runs the same layout in one process as

* `window reached`   : every layer slides, the prompt longer than the window (mask, repeat);
* `no window`        : the same model without a window (no mask);
* `window not reached`: a window longer than the context (no mask, window layers' cache code);
* `padded batch`     : no window, one sequence left-padded (a mask from padding);

and reports per decode step: seconds (two generations differenced), Python-level torch calls and
aten operations of one decode forward, GPU kernel seconds (torch.profiler), and the estimator's
figures for the same job where it can express it.

    python benchmarks/masked_decode.py --out results/masked-decode.json       # on cuda (~1 min)
    python benchmarks/masked_decode.py --device cpu --tiny                    # a smoke test

Random weights from config classes; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate_host  # benchmarks/ on the path: its model builder, timers and op counters

# The models_gpu sliding-window point's layout (16 layers, 16 heads over 8 KV heads).
FIELDS: dict[str, Any] = {
    "model_type": "mistral",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
}
LAYERS, BATCH, PROMPT = 16, 4, 2048
VARIANTS: dict[str, dict[str, Any]] = {
    "window reached": {"sliding_window": 1024},
    "no window": {"sliding_window": None},
    "window not reached": {"sliding_window": 8192},
    "padded batch": {"sliding_window": None, "_pad": 64},
}


def padded_step_seconds(
    model: Any, batch: int, prompt: int, pad: int, new: int, device: str, repeats: int
) -> float:
    """generate_host.step_seconds with the first sequence left-padded by `pad` tokens."""
    import time

    import torch

    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)
    mask = torch.ones_like(ids)
    mask[0, :pad] = 0
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def timed(n: int) -> float:
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        sync()
        return time.perf_counter() - t0

    timed(4)
    samples = sorted((timed(new) - timed(1)) / (new - 1) for _ in range(repeats))
    return samples[len(samples) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu", default="h200", help="catalog card for the estimate")
    parser.add_argument("--tiny", action="store_true", help="a toy width and context (CPU smoke test)")
    parser.add_argument("--new-tokens", type=int, default=33)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch
    import transformers

    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    fields, layers, batch, prompt = dict(FIELDS), LAYERS, BATCH, PROMPT
    variants = {k: dict(v) for k, v in VARIANTS.items()}
    if args.tiny:
        fields.update(
            hidden_size=64,
            intermediate_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=512,
        )
        layers, batch, prompt = 2, 2, 48
        variants["window reached"]["sliding_window"] = 16
        variants["padded batch"]["_pad"] = 4
        args.new_tokens = 9
    rows = []
    for name, variant in variants.items():
        pad = variant.pop("_pad", 0)
        model_fields = {**fields, **variant}
        model = generate_host.build(model_fields, layers, args.device, dtype)
        if pad:
            step = padded_step_seconds(model, batch, prompt, pad, args.new_tokens, args.device, args.repeats)
        else:
            step = generate_host.step_seconds(
                model, batch, prompt, args.new_tokens, args.device, args.repeats
            )
        # counted on an unpadded forward: for the padded batch they would describe another path
        functions, aten = (
            (None, None) if pad else generate_host.decode_op_counts(model, batch, prompt, args.device)
        )
        row: dict[str, Any] = {
            "variant": name,
            "fields": model_fields,
            "layers": layers,
            "batch": batch,
            "prompt": prompt,
            "padding": pad,
            "step_seconds": step,
            "torch_functions": functions,
            "aten_ops": aten,
        }
        if args.device.startswith("cuda"):
            row["profile"] = generate_host.kernel_profile(model, batch, prompt, 9, args.device)
            if not pad:
                row["estimate"] = generate_host.estimated(
                    model_fields, layers, batch, prompt, args.new_tokens, args.gpu
                )
        rows.append(row)
        est = row.get("estimate", {})
        print(
            f"{name:20s} step {step * 1e3:7.2f} ms  calls {functions or 0:5d}  aten {aten or 0:5d}  "
            f"gpu {row.get('profile', {}).get('gpu_kernel_seconds', 0) * 1e3:6.2f} ms  "
            f"est {est.get('step_seconds', 0) * 1e3:6.2f} ms",
            flush=True,
        )
        del model
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    result = {
        "benchmark": "masked_decode",
        "device": args.device,
        "device_name": torch.cuda.get_device_name()
        if args.device.startswith("cuda")
        else platform.processor(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "rows": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
