"""Weight formats, quantization_config, --weights, --kv-cache and max_context_tokens.

The bytes of each format are checked against hand-computed bytes of one small matrix
(in_features 256, out_features 512) from the layout its library registers, and, where torch can
build the tensors on the CPU, against the real tensors' nbytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fitbench.catalog import get_gpu
from fitbench.cli.main import main
from fitbench.core.gpu import GpuSpec
from fitbench.core.quant import GGUF_BPW, LEGACY, matrix_bytes, parse_weights
from fitbench.errors import FitbenchError
from fitbench.estimate import kv_cache, speed, weights
from fitbench.estimate.api import estimate
from fitbench.estimate.matrices import block_gemms
from fitbench.estimate.memory import needed_bytes
from fitbench.estimate.profile import get_profile
from fitbench.workloads.hf_config import workload_from_config
from fitbench.workloads.presets import get_workload
from fitbench.workloads.quant_config import weight_format_from_config

FIN, FOUT = 256, 512
N = FIN * FOUT


def nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.nelement() * t.element_size() for t in tensors)


# -- layouts ------------------------------------------------------------------------------------
def test_gptq_layout_matches_autogptq_buffers() -> None:
    """AutoGPTQ QuantLinear (qlinear_cuda.py): qweight int32 [in // 32 * bits, out], qzeros int32
    [groups, out // 32 * bits], scales fp16 [groups, out], g_idx int32 [in]."""
    fmt = parse_weights("gptq")
    bits, groups = 4, FIN // 128
    qweight = torch.zeros(FIN // 32 * bits, FOUT, dtype=torch.int32)
    qzeros = torch.zeros(groups, FOUT // 32 * bits, dtype=torch.int32)
    scales = torch.zeros(groups, FOUT, dtype=torch.float16)
    g_idx = torch.zeros(FIN, dtype=torch.int32)
    assert matrix_bytes(fmt, FIN, FOUT) == (nbytes(qweight), nbytes(qzeros, scales, g_idx))
    assert matrix_bytes(fmt, FIN, FOUT) == (N // 2, 2 * 64 * 4 + 2 * 512 * 2 + 256 * 4)


def test_gptq_3bit_and_per_channel() -> None:
    """3-bit GPTQ packs 32 values in 3 int32 words (qweight [in // 32 * 3, out]); group_size -1 is
    one group over all inputs."""
    fmt = parse_weights("gptq-3bit-gall")
    qweight = torch.zeros(FIN // 32 * 3, FOUT, dtype=torch.int32)
    meta = (
        torch.zeros(1, FOUT, dtype=torch.float16),
        torch.zeros(1, FOUT // 32 * 3, dtype=torch.int32),
        torch.zeros(FIN, dtype=torch.int32),
    )
    assert matrix_bytes(fmt, FIN, FOUT) == (nbytes(qweight), nbytes(*meta))


def test_awq_layout_matches_wqlinear_gemm() -> None:
    """AutoAWQ WQLinear_GEMM: qweight int32 [in, out // 8], qzeros int32 [in // group, out // 8],
    scales fp16 [in // group, out]; no g_idx."""
    fmt = parse_weights("awq")
    qweight = torch.zeros(FIN, FOUT // 8, dtype=torch.int32)
    qzeros = torch.zeros(FIN // 128, FOUT // 8, dtype=torch.int32)
    scales = torch.zeros(FIN // 128, FOUT, dtype=torch.float16)
    assert matrix_bytes(fmt, FIN, FOUT) == (nbytes(qweight), nbytes(qzeros, scales))


def test_bitsandbytes_4bit_with_and_without_double_quant() -> None:
    """bitsandbytes quantize_4bit, blocksize 64: uint8 [n / 2], absmax fp32 [n / 64]; nested
    (compress_statistics): absmax uint8 [n / 64] + fp32 absmax per 256 blocks + one fp32 offset."""
    blocks = N // 64
    assert matrix_bytes(parse_weights("nf4"), FIN, FOUT) == (N // 2, 4 * blocks)
    assert matrix_bytes(parse_weights("nf4-dq"), FIN, FOUT) == (N // 2, blocks + 4 * (blocks // 256) + 4)
    assert matrix_bytes(LEGACY["int4"], FIN, FOUT) == matrix_bytes(parse_weights("nf4"), FIN, FOUT)


def test_bitsandbytes_int8_is_cb_plus_row_scales() -> None:
    """LLM.int8 (Int8Params): CB int8 [out, in], SCB fp32 [out]."""
    cb, scb = torch.zeros(FOUT, FIN, dtype=torch.int8), torch.zeros(FOUT, dtype=torch.float32)
    assert matrix_bytes(parse_weights("int8"), FIN, FOUT) == (nbytes(cb), nbytes(scb))


def test_fp8_block_scales_match_real_tensors() -> None:
    """transformers FP8Linear: weight float8_e4m3fn [out, in], weight_scale_inv fp32
    [ceil(out / 128), ceil(in / 128)] (DeepSeek-V3 weight_block_size [128, 128]); a ragged shape
    rounds the block count up."""
    for fin, fout in ((FIN, FOUT), (200, 300)):
        weight = torch.zeros(fout, fin, dtype=torch.float8_e4m3fn)
        scale_inv = torch.zeros(-(-fout // 128), -(-fin // 128), dtype=torch.float32)
        assert matrix_bytes(parse_weights("fp8"), fin, fout) == (nbytes(weight), nbytes(scale_inv))
    assert matrix_bytes(parse_weights("fp8-channel"), FIN, FOUT) == (N, 4 * FOUT)
    assert matrix_bytes(parse_weights("fp8-tensor"), FIN, FOUT) == (N, 4)


def test_compressed_tensors_pack_quantized() -> None:
    """compressed-tensors pack-quantized W4A16 (vLLM CompressedTensorsWNA16): weight_packed int32
    [out, in // 8], weight_scale bf16 [out, in // group], weight_shape int64 [2]."""
    cfg = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "ignore": ["lm_head"],
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": 4,
                    "type": "int",
                    "symmetric": True,
                    "strategy": "group",
                    "group_size": 128,
                },
            }
        },
    }
    fmt, kv = weight_format_from_config({"quantization_config": cfg}, "cfg")
    assert fmt is not None and kv is None and not fmt.quantize_head
    packed = torch.zeros(FOUT, FIN // 8, dtype=torch.int32)
    scale = torch.zeros(FOUT, FIN // 128, dtype=torch.bfloat16)
    shape = torch.zeros(2, dtype=torch.int64)
    assert matrix_bytes(fmt, FIN, FOUT) == (nbytes(packed), nbytes(scale, shape))


def test_gguf_types_use_llama_cpp_figures() -> None:
    """llama.cpp's quantize table: Q4_K_M 3.80 GiB and Q8_0 6.70 GiB for LLaMA-v1-7B."""
    assert GGUF_BPW["q4_k_m"] == pytest.approx(4.845, abs=1e-3)
    assert GGUF_BPW["q8_0"] == pytest.approx(8.54, abs=1e-2)
    assert sorted(GGUF_BPW, key=GGUF_BPW.get) == [
        "q2_k",
        "q3_k_m",
        "q4_0",
        "q4_k_m",
        "q5_k_m",
        "q6_k",
        "q8_0",
    ]
    values, meta = matrix_bytes(parse_weights("q4_k_m"), FIN, FOUT)
    assert values == N // 2 and (values + meta) * 8 / N == pytest.approx(GGUF_BPW["q4_k_m"], rel=1e-4)


# -- the model ----------------------------------------------------------------------------------
def test_weights_nf4_equals_precision_int4() -> None:
    """`--weights nf4` at fp16 is what `--precision int4` always meant: same bytes, same speed."""
    base = get_workload("llm-6b")
    a = base.replace(precision="int4")
    b = base.replace(weights=parse_weights("nf4"))
    gpu = get_gpu("rtx-4090")
    ea, eb = estimate(a, gpu), estimate(b, gpu)
    assert ea.breakdown == eb.breakdown
    assert ea.tokens_per_second == pytest.approx(eb.tokens_per_second)


def test_gptq_model_bytes_by_hand() -> None:
    """A GPTQ 4-bit g128 llm-6b: block matrices at their layout, the rest (embeddings, norms,
    LM head) at 2 bytes."""
    w = get_workload("llm-6b").replace(weights=parse_weights("gptq"))
    arch = w.arch
    values = meta = converted = 0
    for _, fin, fout in block_gemms(arch):
        groups = fin // 128
        values += fin * fout // 2
        meta += groups * fout * 2 + groups * fout // 8 * 4 + fin * 4
        converted += fin * fout
    L = arch.num_layers
    assert weights.weight_bytes(w) == ((w.param_count() - L * converted) * 2 + L * values, L * meta)


def test_skipped_modules_stay_16_bit() -> None:
    """modules_to_not_convert naming one layer's down_proj keeps that one matrix in fp16."""
    base = get_workload("llm-6b")
    fmt = parse_weights("fp8")
    skipped = base.replace(
        weights=fmt.__class__(**{**fmt.to_dict(), "skip": ("model.layers.0.mlp.down_proj",)})
    )
    plain = base.replace(weights=fmt)
    h, f = base.arch.hidden_size, base.arch.intermediate_size
    (w1, s1), (w0, s0) = weights.weight_bytes(skipped), weights.weight_bytes(plain)
    values, scales = matrix_bytes(fmt, f, h)
    assert w1 - w0 == 2 * f * h - values and s0 - s1 == scales


def test_kv_cache_dtype_sets_bytes_per_element() -> None:
    w = get_workload("llm-6b")
    fp16 = kv_cache.kv_cache_bytes(w)
    assert kv_cache.kv_cache_bytes(w.replace(kv_cache="fp8")) == fp16 / 2
    arch = w.arch
    int8 = kv_cache.kv_cache_bytes(w.replace(kv_cache="int8"))
    assert int8 == fp16 / 2 + 2 * arch.num_layers * w.tokens_per_sequence * arch.kv_heads * 4
    assert w.kv_cache_dtype == "fp16" and w.replace(precision="bf16").kv_cache_dtype == "bf16"


def test_fp8_prefill_uses_fp8_tensor_cores_only_where_the_card_has_them() -> None:
    """A card with an fp8 rate runs the fp8 prefill there; without one it expands to 16 bit."""
    h200 = get_gpu("h200")
    with_fp8 = GpuSpec(
        **{**h200.__dict__, "peak_flops": {**h200.peak_flops, "fp8": 2 * h200.peak_flops["bf16"]}}
    )
    without = GpuSpec(
        **{**h200.__dict__, "peak_flops": {k: v for k, v in h200.peak_flops.items() if k != "fp8"}}
    )
    w = get_workload("llm-6b").replace(precision="bf16", weights=parse_weights("fp8"), prompt_tokens=4096)
    profile = get_profile("torch", "default")
    fast = speed.generation(w, with_fp8, profile).prefill
    slow = speed.generation(w, without, profile).prefill
    assert fast.gpu_seconds < slow.gpu_seconds and fast.bytes < slow.bytes
    assert any("no fp8 tensor cores" in a for a in estimate(w, without).assumptions)


def test_decode_reads_fewer_bytes_with_fewer_bits() -> None:
    base = get_workload("llm-6b")
    gpu, profile = get_gpu("h200"), get_profile("torch", "default")
    reads = [
        speed.generation(base.replace(weights=parse_weights(n)) if n else base, gpu, profile).decode.bytes
        for n in (None, "q8_0", "gptq", "q2_k")
    ]
    assert reads == sorted(reads, reverse=True)


def test_max_context_is_the_longest_that_fits() -> None:
    w = get_workload("llm-13b").replace(batch_size=64)
    gpu, profile = get_gpu("rtx-4090"), get_profile("torch", "default")
    w = w.replace(weights=parse_weights("q4_k_m"))
    longest = estimate(w, gpu).max_context_tokens
    assert longest is not None and 2 <= longest < w.arch.max_positions
    new = w.new_tokens
    fits = w.replace(prompt_tokens=longest - new)
    assert needed_bytes(fits, profile) <= gpu.usable_bytes
    assert needed_bytes(w.replace(prompt_tokens=longest - new + 1), profile) > gpu.usable_bytes
    train = get_workload("bert-base-imdb")
    assert estimate(train, get_gpu("h200")).max_context_tokens == train.arch.max_positions  # capped


# -- config.json --------------------------------------------------------------------------------
LLAMA = {
    "model_type": "llama",
    "vocab_size": 32000,
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 16,
    "intermediate_size": 2816,
}


def write(tmp_path: Path, **extra: object) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, **extra}))
    return path


def test_config_sets_precision_weights_and_kv_with_their_origin(tmp_path: Path) -> None:
    qc = {
        "quant_method": "compressed-tensors",
        "kv_cache_scheme": {"num_bits": 8, "type": "float"},
        "config_groups": {
            "g": {
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                "input_activations": {"num_bits": 8, "type": "float", "strategy": "token"},
            }
        },
    }
    w = workload_from_config(write(tmp_path, torch_dtype="bfloat16", quantization_config=qc))
    assert w.precision == "bf16" and w.weights is not None and w.weights.method == "fp8"
    assert w.weights.compute == "fp8" and w.kv_cache == "fp8"
    assert "precision bf16 from config.json torch_dtype" in w.origin
    notes = estimate(w, get_gpu("h200")).assumptions
    assert any(n.startswith("weights: fp8 e4m3 (per channel scales) from quantization_config") for n in notes)
    w5 = workload_from_config(write(tmp_path, dtype="float16"))
    assert w5.precision == "fp16" and "precision fp16 from config.json dtype" in w5.origin


@pytest.mark.parametrize(
    ("qc", "method", "bits", "group"),
    [
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "gptq", 4, 128),
        ({"quant_method": "gptq", "bits": 8, "group_size": -1}, "gptq", 8, -1),
        (
            {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True, "version": "gemm"},
            "awq",
            4,
            64,
        ),
        (
            {
                "quant_method": "bitsandbytes",
                "load_in_4bit": True,
                "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": True,
            },
            "bnb-4bit",
            4,
            64,
        ),
        ({"load_in_8bit": True}, "bnb-int8", 8, -1),
        (
            {
                "quant_method": "fp8",
                "fmt": "e4m3",
                "activation_scheme": "dynamic",
                "weight_block_size": [128, 128],
                "modules_to_not_convert": ["lm_head"],
            },
            "fp8",
            8,
            -1,
        ),
    ],
)
def test_quantization_configs_read(qc: dict, method: str, bits: int, group: int) -> None:
    fmt, _ = weight_format_from_config({"quantization_config": qc}, "cfg")
    assert fmt is not None and (fmt.method, fmt.bits, fmt.group_size) == (method, bits, group)


def test_training_a_quantized_config_runs_unquantized(tmp_path: Path) -> None:
    w = workload_from_config(
        write(tmp_path, quantization_config={"quant_method": "awq", "bits": 4}), mode="train"
    )
    assert w.weights is None and any("not applied" in o for o in w.origin)


BAD = [
    {"quant_method": "squeezellm", "bits": 4},
    {"quant_method": "gptq", "bits": 0},
    {"quant_method": "gptq", "bits": 3.7},
    {"quant_method": "gptq", "bits": "4"},
    {"quant_method": "gptq", "bits": 4, "group_size": -5},
    {"quant_method": "gptq", "bits": 4, "group_size": 0},
    {"quant_method": "awq", "bits": 4, "group_size": [128]},
    {"quant_method": "bitsandbytes", "load_in_4bit": "yes"},
    {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": True},
    {"quant_method": "fp8", "weight_block_size": [128]},
    {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 5}}}},
    {"quant_method": 4},
    "gptq",
]


@pytest.mark.parametrize("qc", BAD)
def test_malformed_quantization_config_is_one_line(
    tmp_path: Path, qc: object, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, quantization_config=qc)
    rc = main(["estimate", "--config", str(path), "--gpu", "4090"])
    err = capsys.readouterr().err
    assert rc != 0 and err.startswith("fitbench: error:") and len(err.strip().splitlines()) == 1
    assert "quantization_config" in err


def test_bad_weights_and_kv_cache_flags(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["--weights", "q4km"],
        ["--weights", "gptq-5bit"],
        ["--kv-cache", "fp4"],
        ["--weights", "gptq", "--mode", "train"],
        ["--weights", "gptq", "--precision", "int8"],
    ):
        assert main(["estimate", "llm-6b", "--gpu", "4090", *argv]) != 0
        err = capsys.readouterr().err
        assert err.startswith("fitbench: error:") and len(err.strip().splitlines()) == 1


def test_run_refuses_what_it_cannot_build(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--weights", "fp8"], ["--kv-cache", "fp8"]):
        assert main(["run", "llm-6b", "--tiny", "--no-history", *argv]) != 0
        err = capsys.readouterr().err
        assert "fitbench run" in err and len(err.strip().splitlines()) == 1


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
    max_leaves=12,
)
_keys = st.sampled_from(
    [
        "quant_method",
        "bits",
        "group_size",
        "w_bit",
        "q_group_size",
        "load_in_4bit",
        "load_in_8bit",
        "bnb_4bit_quant_type",
        "bnb_4bit_use_double_quant",
        "weight_block_size",
        "modules_to_not_convert",
        "config_groups",
        "ignore",
        "kv_cache_scheme",
        "fmt",
        "zero_point",
        "checkpoint_format",
        "lm_head",
    ]
)
_methods = st.sampled_from(
    ["gptq", "awq", "bitsandbytes", "fp8", "fbgemm_fp8", "compressed-tensors", "GPTQ", "x"]
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=_methods, body=st.dictionaries(_keys, _json, max_size=6))
def test_quantization_config_reader_fuzz(method: str, body: dict) -> None:
    """Any quantization_config gives a weight format or one FitbenchError, never another exception."""
    qc = {"quant_method": method, **body} if "quant_method" not in body else body
    try:
        fmt, kv = weight_format_from_config({"quantization_config": qc}, "cfg")
    except FitbenchError as exc:
        assert "\n" not in exc.message
        return
    if fmt is not None:
        assert matrix_bytes(fmt, 4096, 4096)[0] > 0
    assert kv in (None, "fp8", "int8")


def test_weights_none_ignores_quantization_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, torch_dtype="float16", quantization_config={"quant_method": "awq", "bits": 4})
    assert main(["estimate", "--config", str(path), "--gpu", "4090", "--json"]) == 0
    quantized = json.loads(capsys.readouterr().out)["estimates"][0]
    assert main(["estimate", "--config", str(path), "--gpu", "4090", "--json", "--weights", "none"]) == 0
    plain = json.loads(capsys.readouterr().out)["estimates"][0]
    assert quantized["weights"] == "awq-4bit-g128" and plain["weights"] is None
    assert plain["breakdown"]["weights"] == 2 * plain["params"]
    assert quantized["breakdown"]["weights"] < plain["breakdown"]["weights"]


@pytest.mark.slow
def test_quant_gpu_benchmark_runs_on_the_cpu(tmp_path: Path) -> None:
    """benchmarks/quant_gpu.py with the tiny model: the fp8 model it builds holds exactly the
    bytes the estimate gives for weights plus quantization scales."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "q.json"
    subprocess.run(
        [
            sys.executable,
            str(root / "benchmarks" / "quant_gpu.py"),
            "--device",
            "cpu",
            "--model",
            "tiny",
            "--prompt-tokens",
            "4",
            "--new-tokens",
            "3",
            "--repeats",
            "1",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        env={**__import__("os").environ, "PYTHONPATH": str(root / "src")},
    )
    row = json.loads(out.read_text())["rows"][0]
    assert row["measured"]["weight_bytes"] == row["estimate"]["weights_bytes"]


def test_quant_gpu_band_expansion_equals_the_whole_matrix_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark expands fp8 weights one 128-row band at a time (no fp32 copy of the whole
    matrix): on a ragged 300 x 200 layer (partial blocks both ways) it gives exactly the bf16 that
    broadcasting the full block-scale grid gives."""
    import torch

    root = Path(__file__).resolve().parents[2]
    monkeypatch.syspath_prepend(str(root / "benchmarks"))
    import quant_gpu

    torch.manual_seed(0)
    layer = quant_gpu.make_fp8_linear_class(torch, "dequant")(
        torch.nn.Linear(300, 200, bias=False), torch.device("cpu")
    )
    grid = layer.weight_scale_inv.repeat_interleave(128, 0).repeat_interleave(128, 1)[:200, :300]
    whole = (layer.weight.to(torch.float32) * grid).to(torch.bfloat16)
    banded = layer.dequantized()
    assert banded.shape == (200, 300) and banded.dtype == torch.bfloat16
    assert torch.equal(banded, whole)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    text=st.text(max_size=24) | st.sampled_from(["gptq-8bit-g32", "awq-g64", "fp8-e4m3", "Q4_K_M", "nf4-dq"])
)
def test_weights_names_fuzz(text: str) -> None:
    """Any --weights text gives a format, None ('none') or one FitbenchError line."""
    try:
        fmt = parse_weights(text)
    except FitbenchError as exc:
        assert "\n" not in exc.message
        return
    assert fmt is None or matrix_bytes(fmt, 256, 512)[0] > 0


def test_workload_json_round_trip_keeps_weights_kv_and_origin(tmp_path: Path) -> None:
    """A child process gets the workload as JSON: the format, KV dtype and notes survive it."""
    from fitbench.workloads.workload import Workload

    qc = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]}
    w = workload_from_config(write(tmp_path, torch_dtype="bfloat16", quantization_config=qc), kv_cache="int8")
    again = Workload.from_dict(json.loads(json.dumps(w.to_dict())))
    assert again == w and again.weights.block == (128, 128) and again.kv_cache == "int8"
