"""fitbench's fused Triton decode kernels, run by Triton's interpreter on CPU tensors.

Each kernel is checked against the PyTorch operators it replaces on fresh random inputs (never
zeros), with outputs poisoned first so that an unwritten element fails; shapes include ones that
no tile divides (the masked paths). Every kernel runs for one token ([K], the batch-1 GEMVs) and
for batches of 1, 2, 3 and 5 sequences ([B, K]: a batch of one takes the batch-1 kernels, more
the batched tiles, odd batches leave padded rows masked). The fused decode step must generate
exactly the tokens of a full-sequence forward, for every decoder layout the static decoder
supports, at batch 1 and at batch 3.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import torch.nn.functional as F  # noqa: E402

from fitbench.backends.torch import decode_kernels as dk  # noqa: E402
from fitbench.backends.torch.fused_decode import FusedDecodeStep, unsupported_reason  # noqa: E402
from fitbench.backends.torch.static_decoder import (  # noqa: E402
    FUSED_MAX_BATCH,
    RMS_EPS,
    StaticDecoder,
    StaticKVGenerator,
    reference_greedy,
    rotary_tables,
    rotate,
)
from fitbench.workloads.arch import TransformerArch  # noqa: E402
from fitbench.workloads.presets import TINY_LLAMA  # noqa: E402

pytestmark = pytest.mark.torch

if not dk.INTERPRETED and not torch.cuda.is_available():
    pytest.skip("triton was imported before TRITON_INTERPRET was set", allow_module_level=True)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SMALL_TILES = dk.GemvConfig(block_n=4, block_k=32)  # several programs and K steps on tiny shapes


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int, seed: int, scale: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.randn(*shape, generator=_gen(seed)) * scale).to(DEVICE, dtype)


def _poisoned(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.full(shape, float("nan"), device=DEVICE, dtype=dtype)


# -- each kernel against PyTorch ------------------------------------------------------------------
# None: one token as a vector [K]; a number: that many sequences [B, K].
BATCHES = [None, 1, 2, 3, 5]


def _rows(batch: int | None, *shape: int) -> tuple[int, ...]:
    return shape if batch is None else (batch, *shape)


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize(("n", "k"), [(64, 128), (40, 96), (37, 50)])
@pytest.mark.parametrize("fold", ["plain", "norm+bias", "norm+bias+residual"])
def test_linear_equals_rms_norm_then_linear(n, k, fold, batch):
    x, w = _randn(*_rows(batch, k), seed=1), _randn(n, k, seed=2, scale=0.1)
    g, b, r = _randn(k, seed=3).abs() + 0.5, _randn(n, seed=4), _randn(*_rows(batch, n), seed=5)
    norm, bias, residual = "norm" in fold, "bias" in fold, "residual" in fold
    out = _poisoned(*_rows(batch, n))
    dk.linear(
        x,
        w,
        out,
        bias=b if bias else None,
        norm_weight=g if norm else None,
        residual=r if residual else None,
        config=SMALL_TILES,
    )
    h = F.rms_norm(x, (k,), g, dk.RMS_EPS_DEFAULT) if norm else x
    ref = F.linear(h, w, b if bias else None) + (r if residual else 0)
    assert not out.isnan().any()
    assert _rel(out, ref) < 1e-5


@pytest.mark.parametrize("batch", BATCHES)
def test_linear_adds_the_residual_in_place(batch):
    x, w, r = (
        _randn(*_rows(batch, 48), seed=6),
        _randn(24, 48, seed=7, scale=0.1),
        _randn(*_rows(batch, 24), seed=8),
    )
    stream = r.clone()
    dk.linear(x, w, stream, residual=stream, config=SMALL_TILES)
    assert _rel(stream, r + x @ w.T) < 1e-5


@pytest.mark.parametrize("batch", BATCHES)
def test_linear_writes_fp32_logits_from_half_weights(batch):
    x = _randn(*_rows(batch, 64), seed=9, dtype=torch.float16)
    w = _randn(100, 64, seed=10, scale=0.1, dtype=torch.float16)
    out = _poisoned(*_rows(batch, 100))
    dk.linear(x, w, out, config=SMALL_TILES)
    assert out.dtype == torch.float32
    assert _rel(out, x.float() @ w.float().T) < 1e-5  # FP32 accumulation of exact half products


def test_a_batch_of_one_is_the_batch_one_kernel():
    """[1, K] runs the very kernel [K] runs (the tuned batch-1 GEMV): identical bits."""
    x, w, g = _randn(50, seed=26), _randn(37, 50, seed=27, scale=0.1), _randn(50, seed=28).abs() + 0.5
    vector, rows = _poisoned(37), _poisoned(1, 37)
    dk.linear(x, w, vector, norm_weight=g, config=SMALL_TILES)
    dk.linear(x.view(1, -1), w, rows, norm_weight=g, config=SMALL_TILES)
    assert torch.equal(rows.view(-1), vector)


def test_the_batched_kernels_refuse_more_sequences_than_they_tile():
    x, w = _randn(dk.MAX_BATCH + 1, 16, seed=29), _randn(16, 16, seed=30)
    with pytest.raises(ValueError, match=f"up to {dk.MAX_BATCH} sequences"):
        dk.linear(x, w, torch.empty(dk.MAX_BATCH + 1, 16, device=DEVICE))


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize(("ffn", "k"), [(32, 64), (43, 80)])
def test_swiglu_equals_silu_gate_times_up(ffn, k, batch):
    x, w = _randn(*_rows(batch, k), seed=11), _randn(2 * ffn, k, seed=12, scale=0.1)
    g, b = _randn(k, seed=13).abs() + 0.5, _randn(2 * ffn, seed=14)
    out = _poisoned(*_rows(batch, ffn))
    dk.swiglu(x, w, out, bias=b, norm_weight=g, config=SMALL_TILES)
    gate_up = F.linear(F.rms_norm(x, (k,), g, dk.RMS_EPS_DEFAULT), w, b)
    ref = F.silu(gate_up[..., :ffn]) * gate_up[..., ffn:]
    assert not out.isnan().any()
    assert _rel(out, ref) < 1e-5


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize(("heads", "kv_heads", "head_dim"), [(4, 2, 16), (3, 3, 8), (2, 1, 12)])
@pytest.mark.parametrize("pos", [0, 9])
@pytest.mark.parametrize("with_bias", [True, False])
def test_qkv_rope_rotates_q_and_k_and_stores_k_and_v_at_pos(heads, kv_heads, head_dim, pos, with_bias, batch):
    k, length, b = 48, 16, batch or 1
    rows = (heads + 2 * kv_heads) * head_dim
    x, w = _randn(*_rows(batch, k), seed=15), _randn(rows, k, seed=16, scale=0.1)
    g, bias = _randn(k, seed=17).abs() + 0.5, _randn(rows, seed=18) if with_bias else None
    cos, sin = rotary_tables(length, head_dim, torch.device(DEVICE))
    k_cache = _randn(b, kv_heads, length, head_dim, seed=19)
    v_cache = _randn(b, kv_heads, length, head_dim, seed=20)
    k_before, v_before = k_cache.clone(), v_cache.clone()
    q = _poisoned(*_rows(batch, heads * head_dim))
    dk.qkv_rope(
        x,
        w,
        q_out=q,
        k_cache=k_cache if batch else k_cache[0],
        v_cache=v_cache if batch else v_cache[0],
        cos=cos,
        sin=sin,
        pos=torch.tensor([pos], device=DEVICE),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        bias=bias,
        norm_weight=g,
        config=dk.GemvConfig(block_n=2, block_k=16),
    )
    qkv = F.linear(F.rms_norm(x, (k,), g, dk.RMS_EPS_DEFAULT), w, bias).view(b, rows)
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    c, s = cos[pos : pos + 1], sin[pos : pos + 1]
    q_ref = rotate(qkv[:, :q_dim].reshape(b, heads, 1, head_dim), c, s).reshape(b, -1)
    assert _rel(q.view(b, -1), q_ref) < 1e-5
    k_ref = rotate(qkv[:, q_dim : q_dim + kv_dim].reshape(b, kv_heads, 1, head_dim), c, s)
    assert _rel(k_cache[:, :, pos], k_ref.view(b, kv_heads, head_dim)) < 1e-5
    assert _rel(v_cache[:, :, pos], qkv[:, q_dim + kv_dim :].reshape(b, kv_heads, head_dim)) < 1e-5
    others = [i for i in range(length) if i != pos]
    assert torch.equal(k_cache[:, :, others], k_before[:, :, others])  # no other slot touched
    assert torch.equal(v_cache[:, :, others], v_before[:, :, others])


@pytest.mark.parametrize("splits", [1, 3])  # 3: slots 0-15, 16-31, 32-39, merged (flash-decoding)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (6, 1)])
@pytest.mark.parametrize("pos", [0, 7, 39])
def test_decode_attention_sees_slots_up_to_pos_only(heads, kv_heads, pos, batch, splits):
    head_dim, length, b = 16, 40, batch or 1  # 40 slots: the last block of 16 is partly outside the cache
    q = _randn(*_rows(batch, heads * head_dim), seed=21)
    k_cache = _randn(b, kv_heads, length, head_dim, seed=22)
    v_cache = _randn(b, kv_heads, length, head_dim, seed=23)

    def attend() -> torch.Tensor:
        out = _poisoned(*_rows(batch, heads * head_dim))
        dk.decode_attention(
            q,
            k_cache if batch else k_cache[0],
            v_cache if batch else v_cache[0],
            out,
            pos=torch.tensor([pos], device=DEVICE),
            heads=heads,
            kv_heads=kv_heads,
            block_l=16,
            splits=splits,
        )
        return out

    out = attend()
    groups = heads // kv_heads
    keys = k_cache.repeat_interleave(groups, 1)[:, :, : pos + 1]
    values = v_cache.repeat_interleave(groups, 1)[:, :, : pos + 1]
    ref = F.scaled_dot_product_attention(q.view(b, heads, 1, head_dim), keys, values).reshape(b, -1)
    assert not out.isnan().any()
    assert _rel(out.view(b, -1), ref) < 1e-5
    # What lies beyond pos must not matter: change it and get the same answer.
    k_cache[:, :, pos + 1 :] = 1e4
    assert torch.equal(attend(), out)


def test_a_long_cache_is_split_for_enough_programs_and_a_short_one_is_walked_once():
    # a 7B model at batch 1 on an H200: 32 heads, 132 SMs
    assert dk.attention_splits(64, 32, 132, 64) == (1, 64)  # one block: one walk
    assert dk.attention_splits(192, 32, 132, 64, min_slots=256) == (1, 192)  # at or below the threshold
    assert dk.attention_splits(192, 32, 132, 64) == (3, 64)  # a 50-token prompt's cache: three splits
    splits, split_len = dk.attention_splits(576, 32, 132, 64)
    assert split_len % 64 == 0 and splits * split_len >= 576 > (splits - 1) * split_len
    assert splits * 32 >= dk.ATTENTION_PROGRAMS_PER_SM * 132 or split_len == 64
    assert dk.attention_splits(32768, 1, 132, 64)[0] == dk.MAX_ATTENTION_SPLITS
    assert dk.attention_splits(4096, 32 * 32, 132, 64) == (1, 4096)  # enough programs already


def test_decode_attention_refuses_a_head_size_that_is_not_a_power_of_two():
    q, cache = _randn(24, seed=24), _randn(2, 8, 12, seed=25)
    with pytest.raises(ValueError, match="power-of-two"):
        dk.decode_attention(q, cache, cache, torch.empty_like(q), pos=torch.tensor([0]), heads=2, kv_heads=2)


# -- the fused step ---------------------------------------------------------------------------------
# The interpreter's cost is per program (one per 2 * block_n output rows), and the kernels do not
# depend on width: the layouts are TINY_LLAMA narrowed (hidden 32, FFN 44, vocabulary 96) so that
# a step is ~80 programs instead of ~280, with the same paths taken: 2 layers, a masked last K
# step in the down projection (44 columns), and (MHA) a vocabulary no tile divides.
SMALL_GQA = TransformerArch(
    **{**TINY_LLAMA.__dict__, "hidden_size": 32, "intermediate_size": 44, "vocab_size": 96}
)
MHA = TransformerArch(**{**SMALL_GQA.__dict__, "num_kv_heads": None, "vocab_size": 100})
QWEN_LIKE = TransformerArch(**{**SMALL_GQA.__dict__, "qkv_bias": True, "tie_embeddings": True})
ALL_BIASES = TransformerArch(
    **{
        **SMALL_GQA.__dict__,
        "num_heads": 8,
        "num_kv_heads": 2,
        "qkv_bias": True,
        "out_bias": True,
        "mlp_bias": True,
    }
)
# The interpreter takes a few seconds a generation: every layout runs, marked slow (CI runs them).
ARCHS = [
    pytest.param(SMALL_GQA, id="gqa"),
    pytest.param(MHA, id="mha", marks=pytest.mark.slow),
    pytest.param(QWEN_LIKE, id="qwen-like", marks=pytest.mark.slow),
    pytest.param(ALL_BIASES, id="biases", marks=pytest.mark.slow),
]


def _model(arch: TransformerArch) -> StaticDecoder:
    torch.manual_seed(0)
    model = StaticDecoder(arch, device=DEVICE, dtype=torch.float32)
    with torch.no_grad():  # biases drawn too, so that a dropped bias changes the tokens
        for name, p in model.named_parameters():
            if name.split(".")[-1].startswith("b"):
                p.normal_(0.0, 0.02)
    return model


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_fused_step_generates_what_the_full_forward_generates(arch):
    model = _model(arch)
    prompt = torch.randint(3, arch.vocab_size, (1, 9), generator=_gen(2)).to(DEVICE)
    gen = StaticKVGenerator(model, batch=1, prompt_tokens=9, new_tokens=8, use_graph=False)
    assert gen.use_fused_kernels(prompt) is None
    assert isinstance(gen._step, FusedDecodeStep)
    gen.prefill(prompt)
    gen.decode(8)
    assert torch.equal(gen.generated(), reference_greedy(model, prompt, 8).cpu())


@pytest.mark.slow
def test_fused_step_over_a_split_cache_generates_what_the_full_forward_generates():
    """A prompt long enough that the cache passes ATTENTION_SPLIT_MIN_SLOTS: every step's attention
    runs as splits and a merge (flash-decoding), and the tokens stay the reference's."""
    model = _model(SMALL_GQA)
    prompt_tokens = dk.ATTENTION_SPLIT_MIN_SLOTS + 10
    prompt = torch.randint(3, SMALL_GQA.vocab_size, (1, prompt_tokens), generator=_gen(4)).to(DEVICE)
    gen = StaticKVGenerator(model, batch=1, prompt_tokens=prompt_tokens, new_tokens=4, use_graph=False)
    assert gen.length > dk.ATTENTION_SPLIT_MIN_SLOTS
    splits, _ = dk.attention_splits(gen.length, SMALL_GQA.num_heads, dk._sm_count(torch.device(DEVICE)), 64)
    assert splits > 1  # the attention of every decode step runs as splits and a merge
    assert gen.use_fused_kernels(prompt) is None
    gen.prefill(prompt)
    gen.decode(4)
    assert torch.equal(gen.generated(), reference_greedy(model, prompt, 4).cpu())


@pytest.mark.slow
def test_fused_step_writes_the_same_cache_and_logits_as_the_eager_step():
    model = _model(SMALL_GQA)
    prompt = torch.randint(3, SMALL_GQA.vocab_size, (1, 6), generator=_gen(3)).to(DEVICE)
    eager = StaticKVGenerator(model, batch=1, prompt_tokens=6, new_tokens=4, use_graph=False)
    fused = StaticKVGenerator(model, batch=1, prompt_tokens=6, new_tokens=4, use_graph=False)
    assert fused.use_fused_kernels(prompt) is None
    for gen in (eager, fused):
        gen.prefill(prompt)
        gen.decode(4)
    assert torch.equal(eager.generated(), fused.generated())
    for a, b in zip(eager.keys + eager.values, fused.keys + fused.values, strict=True):
        assert _rel(b[:, :, :9], a[:, :, :9]) < 1e-5  # prompt + 3 decode steps
    step = fused._step
    assert isinstance(step, FusedDecodeStep)
    reference = model.forward_full(fused.generated()[:, :-1].to(DEVICE))[0, -1]
    assert _rel(step.logits, reference) < 1e-4


# Batch 3: the batched tiles with padded rows masked, every sequence its own cache and token.
# The eager step is the reference; the random prompts differ per sequence, so a row that read
# another's cache, position or activations would generate other tokens.
BATCHED_ARCHS = [
    pytest.param(QWEN_LIKE, id="qwen-like"),  # GQA, qkv bias, tied head
    pytest.param(MHA, id="mha", marks=pytest.mark.slow),
    pytest.param(ALL_BIASES, id="biases", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("arch", BATCHED_ARCHS)
def test_fused_step_at_batch_three_generates_what_the_eager_step_generates(arch):
    model = _model(arch)
    prompt = torch.randint(3, arch.vocab_size, (3, 9), generator=_gen(4)).to(DEVICE)
    eager = StaticKVGenerator(model, batch=3, prompt_tokens=9, new_tokens=8, use_graph=False)
    fused = StaticKVGenerator(model, batch=3, prompt_tokens=9, new_tokens=8, use_graph=False)
    assert fused.use_fused_kernels(prompt) is None
    step = fused._step
    assert isinstance(step, FusedDecodeStep)
    for gen in (eager, fused):
        gen.prefill(prompt)
        gen.decode(8)
    tokens = fused.generated()
    assert len({tuple(row) for row in tokens[:, 9:].tolist()}) > 1  # the sequences' continuations differ
    assert torch.equal(tokens, eager.generated())
    assert torch.equal(tokens, reference_greedy(model, prompt, 8).cpu())
    for a, b in zip(eager.keys + eager.values, fused.keys + fused.values, strict=True):
        assert _rel(b[:, :, :16], a[:, :, :16]) < 1e-5  # prompt + 7 decode steps, every sequence
    reference = model.forward_full(tokens[:, :-1].to(DEVICE))[:, -1]
    assert _rel(step.logits, reference) < 1e-4


def test_fused_step_runs_batches_up_to_its_tiles_and_says_why_not_beyond():
    model = _model(TINY_LLAMA)
    batch = dk.MAX_BATCH + 1
    gen = StaticKVGenerator(model, batch=batch, prompt_tokens=4, new_tokens=4, use_graph=False)
    why = f"the fused decode kernels run batches 1 to {dk.MAX_BATCH}, not {batch}"
    assert unsupported_reason(gen) == why
    prompt = torch.randint(3, 100, (batch, 4)).to(DEVICE)
    assert gen.use_fused_kernels(prompt) == why
    gen.prefill(prompt)
    gen.decode(2)  # the eager step stayed
    assert not isinstance(gen._step, FusedDecodeStep)
    assert torch.equal(gen.generated(), reference_greedy(model, prompt, 2).cpu())
    for ok in (1, 2, dk.MAX_BATCH):
        small = StaticKVGenerator(model, batch=ok, prompt_tokens=4, new_tokens=4, use_graph=False)
        assert unsupported_reason(small) is None


def test_fused_step_needs_a_power_of_two_head_size():
    arch = TransformerArch(**{**TINY_LLAMA.__dict__, "hidden_size": 48, "num_heads": 4, "num_kv_heads": 2})
    model = StaticDecoder(arch, device=DEVICE, dtype=torch.float32)
    gen = StaticKVGenerator(model, batch=1, prompt_tokens=4, new_tokens=2, use_graph=False)
    assert math.log2(model.shape.head_dim) % 1 != 0
    assert "power-of-two head size" in (unsupported_reason(gen) or "")


def test_the_rms_eps_of_the_kernels_is_the_decoder_s():
    assert dk.RMS_EPS_DEFAULT == RMS_EPS


def test_the_tuned_session_and_the_estimate_agree_on_the_decode_step_that_runs():
    """The tuned mode runs the fused kernels up to FUSED_MAX_BATCH (within what they take) and the
    compiled static-cache step above; the estimator's torch.tuned profile times the same steps."""
    from fitbench.backends.torch.static_decoder import CACHE_ALIGN, GRAPH_WARMUP_STEPS
    from fitbench.estimate.profile import get_profile
    from fitbench.estimate.speed import STATIC_CACHE_WARMUP_SLOTS

    tuned = get_profile("torch", "tuned", use_user=False)
    assert 1 <= FUSED_MAX_BATCH <= dk.MAX_BATCH
    assert tuned.decode_fused_max_batch == FUSED_MAX_BATCH
    assert tuned.decode_cache_align == CACHE_ALIGN
    assert STATIC_CACHE_WARMUP_SLOTS == GRAPH_WARMUP_STEPS


def test_the_benchmark_s_smoke_mode_checks_the_kernels_on_this_machine(capsys):
    """benchmarks/decode_kernels.py --smoke: tiny shapes at batch 3 (here under the interpreter)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "decode_kernels.py"
    spec = importlib.util.spec_from_file_location("decode_kernels_benchmark", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--smoke", "--batch", "3"]) == 0
    out = capsys.readouterr().out
    assert "(ok)" in out and "b3   fused generation == eager generation (8 tokens a sequence): True" in out


def test_the_tile_layout_benchmark_computes_every_layout_and_norm_mode_right(capsys):
    """benchmarks/decode_tiles.py --smoke: both tile layouts (x @ W^T and W @ x^T) with no norm,
    the sum of squares, and the norm weight folded in, against float64 (here under the
    interpreter)."""
    benchmarks = str(Path(__file__).resolve().parents[2] / "benchmarks")
    sys.path.insert(0, benchmarks)
    try:
        path = f"{benchmarks}/decode_tiles.py"
        spec = importlib.util.spec_from_file_location("decode_tiles_benchmark", path)
        assert spec is not None and spec.loader is not None
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(benchmarks)
    assert bench.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert out.count("relative error") == 18 and "smoke: ok" in out


def test_every_default_tile_compiles_for_an_h200_unspilled_and_pipelined():
    """benchmarks/decode_kernels_sm90.py: Triton's own ptxas compiles each kernel for sm_90 with
    the tile defaults of every batch bucket, here without a GPU; it fails where a default spills
    registers or leaves the batched tiles' weight loads out of the asynchronous pipeline."""
    nvidia = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    if not (nvidia / "ptxas").exists() or not (nvidia / "cuobjdump").exists():
        pytest.skip("this Triton ships no ptxas / cuobjdump")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "TRITON_INTERPRET": "0"}

    def compile_tiles(*args: str) -> subprocess.CompletedProcess[str]:
        script = str(root / "benchmarks" / "decode_kernels_sm90.py")
        return subprocess.run(
            [sys.executable, script, *args], capture_output=True, text=True, env=env, timeout=300, check=False
        )

    done = compile_tiles()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert sum(" rows 16 " in line or " rows 32 " in line for line in lines) == 10
    assert all("0 B spilled" in line for line in lines)
    # FP32 weights (fused_decode.configs_for halves block_k): every tile fits a block's shared
    # memory and keeps its weight loads pipelined (a few hundred bytes of spills are allowed)
    fp32 = compile_tiles("--dtype", "fp32")
    assert fp32.returncode == 0, fp32.stdout + fp32.stderr
    assert " rows 32 qkv     bn=64 bk=64 " in fp32.stdout
