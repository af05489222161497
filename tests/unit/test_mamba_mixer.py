"""Granite 4.0-H's Mamba-2 layers: the estimator against transformers' module.

The formulas in estimate/mamba_mixer.py were read off the real module (no mamba-ssm: the PyTorch
chunked scan) at a few shapes, all with a hidden size of 32; here the module is counted again
(benchmarks/linear_attention_counts.py) at other head counts, sizes, group counts, chunk
lengths, hidden sizes and lengths, and the cache transformers keeps is weighed against the
estimator's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fitbench.errors import FitbenchError
from fitbench.estimate import generate_ops, kv_cache, linear_attention, mamba_mixer, speed, transformer_cost
from fitbench.estimate.dtypes import ActivationDtypes
from fitbench.estimate.profile import get_profile
from fitbench.workloads.arch import TransformerArch
from fitbench.workloads.hf_config import arch_from_hf_config
from fitbench.workloads.workload import Workload

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "GraniteMoeHybridConfig"):
    pytest.skip("this transformers has no Granite 4.0", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import linear_attention_counts as counts  # noqa: E402
from generate_ops_families import forward_calls  # noqa: E402

pytestmark = pytest.mark.torch

MAMBA, ATTENTION = "mamba", "attention"


def _workload(arch: TransformerArch, **fields: object) -> Workload:
    base: dict[str, object] = dict(name="granite", arch=arch, precision="bf16", batch_size=2)
    base.update(fields)
    return Workload(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("batch", "heads", "head_dim", "state", "groups", "chunk", "seq"),
    [(2, 12, 8, 24, 3, 16, 72), (1, 4, 32, 16, 1, 64, 300), (3, 8, 16, 8, 2, 32, 64)],
)
def test_training_counts_hold_at_other_shapes(
    batch: int, heads: int, head_dim: int, state: int, groups: int, chunk: int, seq: int
) -> None:
    config = counts.mamba_config(heads, head_dim, state, groups, chunk)
    counted = counts.count_mamba_training(config, batch, seq, torch.bfloat16)
    estimated = counts.estimated_mamba_training(counts.arch_of(config), batch, seq, act=2)
    assert estimated["calls"] == pytest.approx(counted["calls"], abs=1)  # a padded sequence: one more
    for key, tolerance in (
        ("kernels", 0.03),
        ("backward_kernels", 0.03),
        ("bytes", 0.04),
        ("saved", 0.04),
        ("backward_bytes", 0.04),
    ):
        assert estimated[key] == pytest.approx(counted[key], rel=tolerance), key


def test_the_scan_has_no_loop_so_its_calls_do_not_grow_with_the_length() -> None:
    config = counts.mamba_config(8, 16, 16, 1, 32)
    short = counts.count_mamba_training(config, 1, 64, torch.float32)
    long = counts.count_mamba_training(config, 1, 512, torch.float32)
    assert short["calls"] == long["calls"] == mamba_mixer.FORWARD_CALLS + mamba_mixer.PROJECTION_CALLS
    assert long["kernels"] == short["kernels"] == mamba_mixer.FORWARD_LAUNCHES[False] - 1
    assert long["saved"] == pytest.approx(8 * short["saved"], rel=0.02)


def test_decode_step_bytes_per_state_element_and_kernels() -> None:
    """The bytes a decode step adds per FP32 state element, between two state sizes, and its
    kernels (the counter leaves out the convolution's product)."""
    small = counts.count_mamba_decode(
        counts.mamba_config(8, 16, 16, 1, 32, layer_types=[ATTENTION, MAMBA]), 2, torch.bfloat16
    )
    large = counts.count_mamba_decode(
        counts.mamba_config(8, 16, 48, 1, 32, layer_types=[ATTENTION, MAMBA]), 2, torch.bfloat16
    )
    added_state = 2 * 8 * 16 * (48 - 16)
    per_element = (large["bytes"] - small["bytes"]) / added_state
    assert per_element == pytest.approx(mamba_mixer.DECODE_STATE_BYTES, rel=0.1)
    assert small["kernels"] == mamba_mixer.DECODE_LAUNCHES[True] - 1
    arch = counts.arch_of(counts.mamba_config(8, 16, 16, 1, 32, layer_types=[ATTENTION, MAMBA]))
    w = _workload(arch, mode="infer", prompt_tokens=16, new_tokens=2)
    by_name = {k.name: k for k in transformer_cost.forward_kernels(w, 2, 1, kv_len=17)}
    assert by_name["linear_attention"].bytes == pytest.approx(small["bytes"], rel=0.1)


def test_the_cache_holds_the_attention_layers_keys_and_the_mamba_layers_state() -> None:
    """Prefill a tiny model and weigh every tensor transformers' cache keeps."""
    from transformers import DynamicCache

    config = counts.mamba_config(8, 16, 24, 2, 32, layer_types=[MAMBA, ATTENTION, MAMBA, MAMBA])
    model = transformers.GraniteMoeHybridForCausalLM(config).eval().to(torch.bfloat16)
    batch, prompt = 3, 40
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(torch.randint(3, 500, (batch, prompt)), past_key_values=cache, use_cache=True)
    held = 0
    for layer in cache.layers:
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            held += t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0
        for name in ("conv_states", "recurrent_states"):
            for t in (getattr(layer, name, None) or {}).values():
                held += t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0
    arch = counts.arch_of(config)
    assert (arch.linear_layers, arch.linear_kind) == (3, "mamba2")
    w = _workload(arch, mode="infer", batch_size=batch, prompt_tokens=prompt, new_tokens=1)
    assert kv_cache.kv_cache_bytes(w, tokens=prompt) == held


@pytest.mark.parametrize("experts", [0, 4])
def test_decode_calls_of_each_layer_kind_equal_transformers(experts: int) -> None:
    """A Mamba-2 layer and an attention layer each add the calls generate_ops says."""
    moe = {"num_local_experts": experts, "num_experts_per_tok": 2, "intermediate_size": 32}

    def config(types: list[str]) -> object:
        c = counts.mamba_config(8, 16, 16, 1, 32, layer_types=types)
        return transformers.GraniteMoeHybridConfig(**{**c.to_dict(), **moe})

    def model(types: list[str]) -> object:
        torch.manual_seed(0)
        return transformers.GraniteMoeHybridForCausalLM(config(types)).eval()

    def estimated(types: list[str]) -> int:
        return generate_ops.layers_calls(counts.arch_of(config(types)), 16, transformers.__version__)

    one = forward_calls(model([ATTENTION]))
    for types in ([ATTENTION, MAMBA], [ATTENTION, ATTENTION]):
        assert forward_calls(model(types)) - one == estimated(types) - estimated([ATTENTION])


@pytest.mark.parametrize("prompt", [40, 130])
def test_a_prompt_issues_the_scans_calls_beyond_a_decode_steps(prompt: int) -> None:
    types = [ATTENTION, MAMBA]
    prefill = counts.count_mamba_prefill(
        counts.mamba_config(8, 16, 16, 1, 32, layer_types=types), 2, torch.bfloat16, prompt=prompt
    )
    decode = counts.count_mamba_decode(
        counts.mamba_config(8, 16, 16, 1, 32, layer_types=types), 2, torch.bfloat16
    )
    arch = counts.arch_of(counts.mamba_config(8, 16, 16, 1, 32, layer_types=[ATTENTION, MAMBA, MAMBA]))
    extra = linear_attention.prefill_extra_calls(arch, prompt)
    assert extra == pytest.approx(2 * (prefill["calls"] - decode["calls"]), abs=2)


def test_a_training_step_saves_the_chunk_matrices() -> None:
    """At Granite 4.0-H-Small's Mamba sizes, a 4,096-token sequence makes each layer keep
    gigabytes for backward, most of it the FP32 chunk matrices (256 x 256 a chunk and head), from
    transformers 5.18 on (the newest, with no release named)."""
    config = counts.mamba_config(128, 64, 128, 1, 256)
    arch = counts.arch_of(config)
    per_token = mamba_mixer.saved_bytes_per_token(arch, 4096)
    chunk_matrices = 128 * 256 * mamba_mixer.SAVED.padded[2]
    assert 4.0e9 < 4096 * per_token < 5.0e9
    assert chunk_matrices > 0.3 * per_token
    profile = get_profile("torch", "default", use_user=False)
    assert profile.transformers_version == "5.17"  # the reference stack: the broadcast scan
    w = _workload(arch, mode="train", seq_len=4096, batch_size=1)
    mixer = next(k for k in speed.training_kernels(w, profile) if k.name == "linear_attention")
    assert mixer.ops == mamba_mixer.BROADCAST_CALLS["forward"] and mixer.compute == "fp32"


def test_mamba_sizes_that_do_not_multiply_out_are_refused_in_one_line() -> None:
    config = counts.mamba_config(8, 16, 16, 1, 32).to_dict()
    config["mamba_d_head"] = 12
    with pytest.raises(FitbenchError, match="must equal mamba_expand x hidden_size"):
        arch_from_hf_config(config)
    config = counts.mamba_config(8, 16, 16, 1, 32).to_dict()
    config["layer_types"] = ["sliding_attention"]
    with pytest.raises(FitbenchError, match="'layer_types' must list 'mamba' or 'attention'"):
        arch_from_hf_config(config)


def test_granite_files_with_no_mamba_layer_read_as_a_plain_decoder() -> None:
    config = counts.mamba_config(8, 16, 16, 1, 32, layer_types=[ATTENTION, ATTENTION]).to_dict()
    config["position_embedding_type"] = "rope"
    arch = arch_from_hf_config(config)
    assert arch.linear_layers == 0 and arch.position == "rotary"
    config["layer_types"] = [MAMBA, ATTENTION]
    config["position_embedding_type"] = "nope"
    hybrid = arch_from_hf_config(config)
    assert hybrid.linear_layers == 1 and hybrid.position == "none"


RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


@pytest.mark.parametrize("release", ["5.17", "5.24"])
def test_stored_counts_of_each_scan_hold_the_formulas(release: str) -> None:
    """Every count `linear_attention_counts.py --mixer mamba2 --json` stored for a release (5.17's
    broadcast products; 5.24's contractions), the estimate as that release runs the scan."""
    data = json.loads((RESULTS / f"mamba-scan-counts-transformers-{release}.json").read_text())
    assert data["transformers"].startswith(release) and len(data["rows"]) >= 8
    for row in data["rows"]:
        config = counts.mamba_config(row["heads"], row["head_dim"], row["state"], row["groups"], row["chunk"])
        arch = counts.arch_of(config)
        batch, seq = row["batch"], row["seq"]
        estimated = counts.estimated_mamba_training(arch, batch, seq, act=2, release=data["transformers"])
        assert estimated["calls"] == pytest.approx(row["calls"], abs=2)
        for key in ("bytes", "saved", "backward_bytes"):
            assert estimated[key] == pytest.approx(row[key], rel=0.06), (key, row)
        tokens = batch * seq
        backward = tokens * mamba_mixer.backward_transient_bytes_per_token(arch, seq, data["transformers"])
        prompt = tokens * mamba_mixer.prefill_transient_bytes_per_token(arch, seq, data["transformers"])
        assert backward == pytest.approx(row["backward_peak"], rel=0.12), row
        assert prompt == pytest.approx(row["prompt_peak"], rel=0.1), row


def test_the_installed_scans_working_set_holds_the_formulas() -> None:
    config = counts.mamba_config(10, 16, 40, 2, 32)
    arch = counts.arch_of(config)
    working = counts.mamba_working_set(config, 2, 80, torch.bfloat16)
    release = transformers.__version__
    tokens = 2 * 80
    backward = tokens * mamba_mixer.backward_transient_bytes_per_token(arch, 80, release)
    prompt = tokens * mamba_mixer.prefill_transient_bytes_per_token(arch, 80, release)
    assert backward == pytest.approx(working["backward_peak"], rel=0.12)
    assert prompt == pytest.approx(working["prompt_peak"], rel=0.1)


def test_releases_before_5_18_pay_the_broadcast_products() -> None:
    """At Granite 4.0-H-Micro's sizes a 2,048-token prompt's working set is ~17 GB a layer on 5.17
    (C.B as a chunk x state product per token and head) and well under 1 GB from 5.18 on."""
    arch = counts.arch_of(counts.mamba_config(64, 64, 128, 1, 256))
    assert mamba_mixer.broadcasts("5.17.0") and not mamba_mixer.broadcasts("5.18.0")
    assert not mamba_mixer.broadcasts(None)
    old = 2048 * mamba_mixer.prefill_transient_bytes_per_token(arch, 2048, "5.17.0")
    new = 2048 * mamba_mixer.prefill_transient_bytes_per_token(arch, 2048, "5.24.0")
    assert 14e9 < old < 20e9 and new < 1.5e9


@pytest.mark.parametrize("strategy", ["zero2", "fsdp", "tp"])
def test_sharded_estimates_follow_the_profiles_release(strategy: str) -> None:
    """Split over GPUs, a Mamba-2 model's working set is still that of the release the profile
    runs: DeepSpeed's backward walk (zero2), the sharded one-device step (fsdp) and a sharded
    prompt (tp) all hold 5.17's broadcast products (tens of GB at 2,048 tokens, against under
    1 GB from 5.18 on)."""
    from dataclasses import replace

    from fitbench.estimate.memory import memory_breakdown

    arch = counts.arch_of(counts.mamba_config(64, 64, 128, 1, 256))
    old = get_profile("torch", "default", use_user=False)
    new = replace(old, transformers_version="5.24")
    if strategy == "tp":
        w = _workload(arch, mode="infer", prompt_tokens=2048, new_tokens=8, batch_size=1)
    else:
        w = _workload(arch, mode="train", seq_len=2048, batch_size=1)
    w = w.replace(gpus=2, strategy=strategy)
    on_old = memory_breakdown(w, old, reserve=False).parts["temporaries"]
    on_new = memory_breakdown(w, new, reserve=False).parts["temporaries"]
    assert on_old > 5e9 > 1e9 > on_new


PROFILES = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def _mixer_seconds(arch: TransformerArch, batch: int, seq: int, *, training: bool, release: str) -> float:
    """The estimate's GPU time of one Mamba-2 mixer on an H100: a prompt's forward, or a training
    forward and backward."""
    from dataclasses import replace

    from fitbench.catalog import get_gpu

    gpu, profile = get_gpu("h100-sxm"), get_profile("torch", "default", use_user=False)
    dt = ActivationDtypes(act=2, res=2, mask=0, amp=False)
    w = _workload(arch, mode="infer", prompt_tokens=seq, new_tokens=1, batch_size=batch)
    kernels = mamba_mixer.timed_kernels(
        arch, dt, batch, seq, decode=False, training=training, release=release
    )
    if training:
        kernels += speed.backward_kernels(kernels)
    kernels = [replace(k, count=1) for k in kernels]
    return speed.time_kernels(kernels, w, gpu, profile, host_seconds_per_op=0.0).gpu_seconds


@pytest.mark.parametrize("shape", ["micro", "bamba", "small"])
def test_broadcast_products_run_at_their_measured_rate(shape: str) -> None:
    """One 5.17 Mamba-2 layer timed on an H100 (benchmarks/mamba_scan_profile.py): the rate of the
    broadcast products was read off the Granite 4.0-H-Micro and Bamba rows, which the estimate
    holds within 5 %; the small layout (32 heads, state 64, chunk 128) was not used and reads up to
    25 % fast. Counting the products' bytes at the stream's rate read every row about half the
    measured prompt."""
    rows = json.loads((PROFILES / f"mamba-scan-profile-h100-2026-12-07-{shape}.json").read_text())["rows"]
    tolerance = 0.25 if shape == "small" else 0.05
    for row in rows:
        s = row["shape"]
        arch = counts.arch_of(counts.mamba_config(s["heads"], s["head_dim"], s["state"], 1, s["chunk"]))
        for training, key in ((False, "prompt_seconds"), (True, "step_seconds")):
            estimated = _mixer_seconds(arch, s["batch"], s["seq"], training=training, release="5.17")
            assert estimated == pytest.approx(row[key], rel=tolerance), (s, key)
        timed = _mixer_seconds(arch, s["batch"], s["seq"], training=False, release="5.17")
        stream = (
            mamba_mixer.mixer_kernel(
                arch, _dt(), s["batch"], s["seq"], decode=False, training=False, release="5.17"
            ).bytes
            / _h100_stream()
        )
        assert stream < 0.6 * row["prompt_seconds"] < timed  # every byte at the stream: about half


def test_products_are_split_off_only_where_the_release_broadcasts() -> None:
    """The products keep the mixer's bytes in total, launch nothing of their own, and carry the
    forward's and the backward's rates; from 5.18 on there is one kernel."""
    arch = counts.arch_of(counts.mamba_config(64, 64, 128, 1, 256))
    whole = mamba_mixer.mixer_kernel(arch, _dt(), 2, 1024, decode=False, training=True, release="5.17")
    rest, products = mamba_mixer.timed_kernels(
        arch, _dt(), 2, 1024, decode=False, training=True, release="5.17"
    )
    assert rest.bytes + products.bytes == pytest.approx(whole.bytes)
    assert (rest.backward_bytes or 0) + (products.backward_bytes or 0) == pytest.approx(
        whole.backward_bytes or 0
    )
    assert products.kernel_launches == 0 and products.ops == 0
    backward = speed.backward_kernels([products])[0]
    assert products.sm_rate == mamba_mixer.BROADCAST_PRODUCT_SM_RATE["forward"]
    assert backward.sm_rate == mamba_mixer.BROADCAST_PRODUCT_SM_RATE["backward"]
    newest = mamba_mixer.timed_kernels(arch, _dt(), 2, 1024, decode=False, training=True, release="5.24")
    assert len(newest) == 1 and newest[0].name == "linear_attention"


def _dt() -> ActivationDtypes:
    return ActivationDtypes(act=2, res=2, mask=0, amp=False)


def _h100_stream() -> float:
    from fitbench.catalog import get_gpu

    return get_gpu("h100-sxm").stream_bandwidth_bytes_s
