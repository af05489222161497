"""Compile fitbench's decode kernels for an H100 / H200 (sm_90) on any machine, GPU or not.

Triton ships ptxas, so the whole compilation (Triton IR, its GPU IR with the software pipeline,
LLVM, PTX, the cubin) runs without a device. For each kernel of the fused decode step at the
6.7B model's shapes, with the tile defaults of every batch bucket (fused_decode.GEMV_CONFIGS and
BATCHED_GEMV_CONFIGS, or --sweep: every config benchmarks/decode_kernels.py sweeps), it prints
registers per thread, bytes spilled to the stack, shared memory, and how many loads the pipeline
turned into asynchronous copies (0: the weight stream is not pipelined). Arguments are compiled
as a real launch specializes them: pointers 16-byte aligned, integer sizes multiples of 16.

    python benchmarks/decode_kernels_sm90.py            # the defaults
    python benchmarks/decode_kernels_sm90.py --sweep    # every swept batched config too
    python benchmarks/decode_kernels_sm90.py --dtype fp32   # the defaults for FP32 weights

Exits 1 if a default config spills (16-bit), needs more shared memory than a block can have, or
leaves its weight loads unpipelined.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ["TRITON_INTERPRET"] = "0"  # compile, do not interpret (read when Triton is imported)

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fitbench.backends.torch import decode_kernels as dk
from fitbench.backends.torch.fused_decode import BATCHED_GEMV_CONFIGS, GEMV_CONFIGS, configs_for
from fitbench.workloads.presets import LLAMA_7B

TARGET = GPUTarget("cuda", 90, 32)
MAX_SHARED_BYTES = 227 * 1024  # the most shared memory one block of an H100 / H200 can have
CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def compile_kernel(
    fn: Any, args: dict[str, Any], config: dk.GemvConfig | None, *, num_warps: int | None = None
) -> dict[str, Any]:
    """Compile `fn` with `args` (a str: the runtime type; anything else: a constexpr), with
    `config`'s warps and stages (else `num_warps`, default 4, and Triton's stages). Other kernels'
    tests use it too (tests/backends/test_dropout_layer_norm.py)."""
    signature, constants = {}, {}
    for name in fn.arg_names:
        value = args[name]
        if isinstance(value, str) and name != "PRECISION":
            signature[name] = value
        else:
            signature[name] = "constexpr"
            constants[name] = value
    attrs = {
        (i,): [["tt.divisibility", 16]]
        for i, name in enumerate(fn.arg_names)
        if signature[name].startswith("*") or signature[name] == "i32"
    }
    options: dict[str, int] = {"num_warps": config.num_warps if config else num_warps or 4}
    if config is not None:
        options["num_stages"] = config.num_stages
    kernel = triton.compile(ASTSource(fn, signature, constants, attrs), target=TARGET, options=options)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(kernel.asm["cubin"])
        fh.flush()
        usage = subprocess.run([str(CUOBJDUMP), "-res-usage", fh.name], capture_output=True, text=True).stdout
    regs, stack = re.search(r"REG:(\d+)", usage), re.search(r"STACK:(\d+)", usage)
    return {
        "registers": int(regs.group(1)) if regs else None,
        "stack_bytes": int(stack.group(1)) if stack else None,
        "shared_bytes": kernel.metadata.shared,
        "async_copies": kernel.asm["ttgir"].count("async_copy_global_to_local"),
    }


def cases(
    pad: int, configs: dict[str, dk.GemvConfig], dtype: str = "fp16"
) -> dict[str, tuple[Any, dict[str, Any]]]:
    """The five kernels of a layer and the LM head at 6.7B shapes, batch bucket `pad` (1: batch 1),
    with weights and activations of `dtype` (fp16, or fp32: tl.dot in full FP32)."""
    s = LLAMA_7B
    batched = pad > 1
    t = f"*{dtype}"
    common = {"x_ptr": t, "w_ptr": t, "b_ptr": t, "g_ptr": t, "eps": "fp32"}
    precision = "ieee" if dtype == "fp32" else None
    rows = {"BATCH": "i32", "ROWS_PAD": pad, "PRECISION": precision} if batched else {}

    def tile(name: str, n: int, k: int, per_program: int = 1) -> dict[str, Any]:
        block_n, block_k, even = dk._fit(configs[name], n, k, per_program, batched=batched)
        return {"BLOCK_N": block_n, "BLOCK_K": block_k, "EVEN_N": even}

    def linear(name: str, n: int, k: int, norm: bool, residual: bool, out: str) -> dict[str, Any]:
        return {
            **common,
            **rows,
            "res_ptr": t,
            "out_ptr": out,
            "N": "i32",
            "K": k,
            "NORM": norm,
            "RESIDUAL": residual,
            "HAS_BIAS": False,
            **tile(name, n, k, 2),
        }

    h, ffn, hd = s.hidden_size, s.intermediate_size, s.dim_head
    kernels = (
        (dk._linear_rows_kernel, dk._swiglu_rows_kernel, dk._qkv_rope_rows_kernel)
        if batched
        else (dk._linear_kernel, dk._swiglu_kernel, dk._qkv_rope_kernel)
    )
    linear_fn, swiglu_fn, qkv_fn = kernels
    qkv = {
        **common,
        **rows,
        "q_ptr": t,
        "k_cache_ptr": t,
        "v_cache_ptr": t,
        "cos_ptr": "*fp32",
        "sin_ptr": "*fp32",
        "pos_ptr": "*i64",
        "K": h,
        "HEADS": "i32",
        "KV_HEADS": "i32",
        "CACHE_LEN": "i32",
        "HEAD_DIM": hd,
        "NORM": True,
        "HAS_BIAS": False,
        **tile("qkv", hd // 2, h),
    }
    swiglu = {
        **common,
        **rows,
        "out_ptr": t,
        "FFN": "i32",
        "K": h,
        "NORM": True,
        "HAS_BIAS": False,
        **tile("gate_up", ffn, h),
    }
    return {
        "qkv": (qkv_fn, qkv),
        "o": (linear_fn, linear("o", h, s.num_heads * hd, False, True, t)),
        "gate_up": (swiglu_fn, swiglu),
        "down": (linear_fn, linear("down", h, ffn, False, True, t)),
        "head": (linear_fn, linear("head", s.vocab_size, h, True, False, "*fp32")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="also every batched config of the sweep")
    parser.add_argument(
        "--dtype",
        choices=("fp16", "fp32"),
        default="fp16",
        help="weight and activation type (fp32: the defaults for 4-byte weights, fused_decode."
        "configs_for; their spills are reported, shared memory over a block's 227 KB fails)",
    )
    args = parser.parse_args(argv)
    size = 4 if args.dtype == "fp32" else 2
    plans: list[tuple[str, int, dict[str, dk.GemvConfig]]] = [("default", 1, configs_for(1, size))]
    plans += [("default", pad, configs_for(pad, size)) for pad in BATCHED_GEMV_CONFIGS]
    if args.sweep:
        sys.path.insert(0, str(Path(__file__).parent))
        import decode_kernels as bench  # the sweep's configs (imports torch)

        for pad in BATCHED_GEMV_CONFIGS:
            plans += [("sweep", pad, dict.fromkeys(GEMV_CONFIGS, cfg)) for cfg in bench.SWEEP_BATCHED]
    bad = 0
    for kind, pad, configs in plans:
        for name, (fn, fn_args) in cases(pad, configs, args.dtype).items():
            cfg = configs[name]
            tiles = f"bn={cfg.block_n} bk={cfg.block_k} w={cfg.num_warps} st={cfg.num_stages}"
            label = f"{kind:<7} rows {pad:<2} {name:<7} {tiles}"
            try:
                r = compile_kernel(fn, fn_args, cfg)
            except Exception as exc:  # reported; the others still compile
                print(f"{label}: FAILED {str(exc).splitlines()[0][:160]}")
                bad += kind == "default"
                continue
            spills = r["stack_bytes"] and args.dtype == "fp16"  # FP32 tiles may spill a little
            too_big = r["shared_bytes"] > MAX_SHARED_BYTES
            worse = spills or too_big or (pad > 1 and not r["async_copies"])
            bad += bool(worse) and kind == "default"
            print(
                f"{label}: {r['registers']} regs, {r['stack_bytes']} B spilled, "
                f"{r['shared_bytes'] / 1024:.0f} KiB shared, {r['async_copies']} async copies"
                + ("  <-" if worse else "")
            )
    t = f"*{args.dtype}"
    attention = {
        "q_ptr": t,
        "k_cache_ptr": t,
        "v_cache_ptr": t,
        "out_ptr": t,
        "part_acc_ptr": t,  # one split: decode_attention passes `out`, which is never read
        "part_stats_ptr": t,
        "pos_ptr": "*i64",
        "HEADS": "i32",
        "KV_HEADS": "i32",
        "GROUPS": "i32",
        "sm_scale": "fp32",
        "CACHE_LEN": 192,
        "HEAD_DIM": LLAMA_7B.dim_head,
        "BLOCK_L": 64,
        "SPLIT_LEN": 192,
        "SPLITS": 1,
    }
    r = compile_kernel(dk._decode_attention_kernel, attention, None)
    print(f"attention (cache 192): {r['registers']} regs, {r['stack_bytes']} B spilled")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
