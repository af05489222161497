"""The eager step's GPU time by kernel class, and the constants its measurement states.

Pure estimator code (no framework import). benchmarks/results/kernel-classes-h100-2026-12-05.json
holds every CUDA kernel of eleven profiled eager steps on an H100 (benchmarks/profile_step.py
--json); benchmarks/kernel_classes.py sets them beside the estimator's kernels. Two constants of
the default profile are read from it, not fitted on step times: overlap_loss (the share of the
host time a GPU-bound step ends after its kernels) and mixed_dtype_memory_efficiency (the rate
of an autocast RMSNorm decoder's elementwise kernels). The tests hold the profile to that file,
and the mechanisms to where they apply.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.estimate import speed, transformer_cost
from fitbench.estimate.profile import get_profile
from fitbench.workloads import library
from fitbench.workloads.presets import get_workload
from fitbench.workloads.workload import Workload

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import kernel_classes  # noqa: E402  (offline: no framework import)
import profile_step  # noqa: E402  (imports torch only inside main)

RESULT = BENCHMARKS / "results" / "kernel-classes-h100-2026-12-05.json"
H100 = get_gpu("h100-sxm")
DEFAULT = get_profile("torch", "default", use_user=False)


@pytest.fixture(scope="module")
def analysis() -> dict:
    return kernel_classes.analyse(json.loads(RESULT.read_text()), H100)


def test_profile_states_the_measured_overlap(analysis: dict) -> None:
    """overlap_loss is the median share of the host time the GPU-bound steps ran past their
    kernels, at the profile's own host estimate."""
    losses = [p["host_not_overlapped"] for p in analysis["points"] if p["host_not_overlapped"] is not None]
    assert len(losses) >= 7
    assert DEFAULT.overlap_loss == pytest.approx(analysis["host_not_overlapped_median"], abs=0.01)


def _autocast_decoders(analysis: dict) -> list[dict]:
    return [p for p in analysis["points"] if p["mixed_dtype_share"] is not None and not p["peft"]]


def test_profile_states_the_measured_mixed_dtype_rate(analysis: dict) -> None:
    shares = [p["mixed_dtype_share"] for p in _autocast_decoders(analysis)]
    assert len(shares) == 6  # the six autocast RMSNorm decoders; GPT-2 has none
    assert DEFAULT.mixed_dtype_memory_efficiency == pytest.approx(
        analysis["mixed_dtype_share_median"], abs=0.01
    )


def test_lora_casts_stream_at_the_mixed_dtype_rate(analysis: dict) -> None:
    """The bf16 LoRA steps' converting passes around their FP32 adapters (peft_speed's
    `lora.<name>.casts`) are the same kind of kernel: with them at the profile's mixed rate the
    steps' memory class implies a share within the autocast decoders' range."""
    lora = [p for p in analysis["points"] if p["peft"]]
    assert len(lora) == 3  # Qwen2.5-1.5B at ranks 8 and 256, Mistral-7B
    decoders = [p["mixed_dtype_share"] for p in _autocast_decoders(analysis)]
    for p in lora:
        assert p["mixed_dtype_share"] is not None, p["label"]
        assert min(decoders) - 0.05 <= p["mixed_dtype_share"] <= max(decoders) + 0.05, p["label"]


def test_classes_of_the_autocast_decoders_match_their_kernels(analysis: dict) -> None:
    """With the shares the profile states, each autocast decoder step's GEMMs, memory-bound
    kernels and whole kernel sum are within 15 % of the profiler's."""
    decoders = _autocast_decoders(analysis)
    for p in decoders:
        est, meas = p["estimated_ms"], p["measured_ms"]
        assert est["matmul"] == pytest.approx(meas["matmul"], rel=0.15), p["label"]
        assert est["memory"] == pytest.approx(meas["memory"], rel=0.15), p["label"]
        assert sum(est.values()) == pytest.approx(p["kernel_sum_ms"], rel=0.15), p["label"]


def _llama_amp():
    return library.workload_for_model("llama-3.2-1b-instruct").replace(
        mode="train", precision="amp-bf16", seq_len=256, batch_size=2
    )


def _elementwise(workload) -> list:
    ks = transformer_cost.forward_kernels(workload, workload.batch_size, workload.seq_len or 1)
    return [k for k in ks if k.name == "elementwise"]


def test_only_autocast_rmsnorm_elementwise_is_mixed() -> None:
    amp = _llama_amp()
    (kernel,) = _elementwise(amp)
    assert kernel.mixed_dtypes
    assert all(k.mixed_dtypes for k in speed.backward_kernels([kernel]))
    assert not _elementwise(amp.replace(precision="bf16"))[0].mixed_dtypes
    bert = get_workload("bert-base-imdb", precision="amp-fp16")
    assert not any(k.mixed_dtypes for k in _elementwise(bert))


def test_mixed_kernel_streams_at_the_profile_share() -> None:
    amp = _llama_amp()
    (kernel,) = _elementwise(amp)
    same = dataclasses.replace(kernel, mixed_dtypes=False)
    fixed = kernel.kernel_launches * DEFAULT.kernel_fixed_seconds

    def gpu(k) -> float:
        return speed.time_kernels([k], amp, H100, DEFAULT, host_seconds_per_op=0.0).gpu_seconds

    streaming = gpu(same) - fixed * kernel.count
    assert gpu(kernel) - fixed * kernel.count == pytest.approx(
        streaming / DEFAULT.mixed_dtype_memory_efficiency, rel=1e-9
    )


def test_fp32_attention_keeps_one_share() -> None:
    """The head-dimension exponent is about tensor-core attention's exponentials; FP32 attention
    runs its products on the CUDA cores and keeps the flat share."""
    bert = get_workload("bert-base-imdb")  # head_dim 64
    assert speed.attention_share(DEFAULT, bert.replace(precision="fp32")) == DEFAULT.attention_efficiency
    assert speed.attention_share(DEFAULT, bert.replace(precision="amp-bf16")) == pytest.approx(
        DEFAULT.attention_efficiency * 0.5**DEFAULT.attention_head_dim_exponent
    )


def test_generation_keeps_its_own_overlap() -> None:
    """A generation's steps take generate_overlap_loss (generate waits on its stopping check every
    token); a training step takes overlap_loss."""
    assert DEFAULT.generate_overlap_loss is not None
    assert DEFAULT.generate_overlap_loss != DEFAULT.overlap_loss
    gen = get_workload("llm-6b", batch_size=1)
    assert speed._generation_overlap_loss(gen, DEFAULT) == DEFAULT.generate_overlap_loss
    plain = dataclasses.replace(DEFAULT, generate_overlap_loss=None)
    assert speed._generation_overlap_loss(gen, plain) is None


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "matmul"),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x64x8", "matmul"),
        ("fmha_cutlassB_f32_aligned_64x64_k64_dropout_sm80(PyTorchMemEffAttention", "attention"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16", "attention"),
        ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<", "optimizer"),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<", "loss"),
        ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda", "memory"),
    ],
)
def test_profiler_kernels_are_classed_by_name(name: str, cls: str) -> None:
    assert profile_step.kernel_class(name) == cls


def test_stored_profiles_leave_annotations_out() -> None:
    rows = json.loads(RESULT.read_text())
    for r in rows:
        names = [k["name"] for k in r["kernels"]]
        assert not any(n.startswith(profile_step.ANNOTATIONS) for n in names), r["label"]
        assert r["kernel_ms_per_step"] == pytest.approx(sum(k["ms_per_step"] for k in r["kernels"]))


def _head(workload):
    ks = transformer_cost.forward_kernels(workload, workload.batch_size, workload.seq_len or 1)
    (head,) = [k for k in ks if k.name == "lm_head"]
    return head


def test_a_vocabulary_off_the_tensor_core_alignment_runs_the_slow_gemm() -> None:
    """GPT-2's 50,257-word head in 16 bit runs cuBLAS's align-1 kernels (the stored GPT-2-large
    step: 0.126 of the peak over its three head products); FP32 and aligned vocabularies do not."""
    gpt2 = library.workload_for_model("gpt2").replace(mode="train", precision="amp-bf16", seq_len=256)
    head = _head(gpt2)
    assert head.misaligned
    assert all(k.misaligned for k in speed.backward_kernels([head]))
    assert not _head(gpt2.replace(precision="fp32")).misaligned
    assert not _head(_llama_amp()).misaligned  # 128,256 words
    aligned = dataclasses.replace(head, misaligned=False)

    def gemm(k) -> float:
        return speed.time_kernels([k], gpt2, H100, DEFAULT, host_seconds_per_op=0.0).compute_seconds

    fixed = head.kernel_launches * DEFAULT.matmul_fixed_seconds
    assert gemm(head) - fixed == pytest.approx(
        head.flops / (H100.peak("bf16") * DEFAULT.misaligned_matmul_efficiency)
    )
    assert gemm(head) > 4 * gemm(aligned)


def test_a_wider_alignment_takes_a_share_per_element_of_it() -> None:
    """The head kernels load as many bytes as the vocabulary's alignment allows: OLMo-3's 100,278
    words (divisible by 2, not 4) run at twice the align-1 share, 100,276 (divisible by 4) at four
    times it, capped at an aligned GEMM's; the alignment follows every dimension's."""
    assert transformer_cost.misaligned_gemm(_llama_amp(), 50257) == 1
    assert transformer_cost.misaligned_gemm(_llama_amp(), 100278) == 2
    assert transformer_cost.misaligned_gemm(_llama_amp(), 100276, 4096) == 4
    assert transformer_cost.misaligned_gemm(_llama_amp(), 100276, 4098) == 2
    assert transformer_cost.misaligned_gemm(_llama_amp(), 128256) == 0
    olmo3 = library.workload_for_model("olmo-3-7b").replace(mode="train", precision="amp-bf16", seq_len=512)
    head = _head(olmo3)
    assert head.misaligned == 2

    def gemm(k) -> float:
        t = speed.time_kernels([k], olmo3, H100, DEFAULT, host_seconds_per_op=0.0).compute_seconds
        return t - k.kernel_launches * DEFAULT.matmul_fixed_seconds

    align1 = gemm(dataclasses.replace(head, misaligned=1))
    assert gemm(head) == pytest.approx(align1 / 2)
    assert gemm(dataclasses.replace(head, misaligned=4)) == pytest.approx(align1 / 4)
    aligned = gemm(dataclasses.replace(head, misaligned=0))
    assert gemm(dataclasses.replace(head, misaligned=8)) == pytest.approx(aligned)  # never faster


def test_the_misaligned_share_is_the_stored_head_kernels() -> None:
    """misaligned_matmul_efficiency is the GPT-2-large step's align-1 head kernels: their FLOPs
    over their time at the H100's bf16 peak."""
    rows = json.loads(RESULT.read_text())
    (step,) = [r for r in rows if r["label"].startswith("gpt2-large")]
    align1 = [k for k in step["kernels"] if "align1" in k["name"] and k["class"] == "matmul"]
    assert len(align1) == 3
    w = Workload.from_dict(step["workload"])
    flops = 3 * 2 * w.batch_size * w.seq_len * w.arch.hidden_size * w.arch.vocab_size
    seconds = sum(k["ms_per_step"] for k in align1) / 1e3
    assert DEFAULT.misaligned_matmul_efficiency == pytest.approx(
        flops / seconds / H100.peak("bf16"), abs=0.002
    )


def test_classes_of_the_bf16_lora_steps_match_their_kernels(analysis: dict) -> None:
    """With peft's FP32 rank-r products at fp32_adapter_gemm_stream_share and the adapters'
    passes counted forward and backward (peft_speed._adapter_passes), the memory-bound LoRA
    steps' GEMM and memory classes are within 15 % of the profiler's (Qwen2.5-1.5B at r8,
    Mistral-7B at r16). At r256 the FP32 products are compute-bound and ran at 0.64 of the FP32
    peak where the estimate takes matmul_efficiency's 0.80: left out."""
    checked = [p for p in analysis["points"] if p["peft"] and "lora_rank=256" not in p["label"]]
    assert len(checked) == 2
    for p in checked:
        est, meas = p["estimated_ms"], p["measured_ms"]
        assert est["matmul"] == pytest.approx(meas["matmul"], rel=0.15), p["label"]
        assert est["memory"] == pytest.approx(meas["memory"], rel=0.15), p["label"]
