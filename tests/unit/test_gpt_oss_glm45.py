"""gpt-oss and GLM-4.5: what transformers builds and runs for them, checked on the real classes.

gpt-oss: biased GQA attention with a learned sink logit per head (eager attention: SDPA has no
input for it), every other layer windowed, biased experts behind a biased router, and MXFP4
experts in its checkpoint (attention, router, embeddings and LM head in bf16). GLM-4.5: GQA
attention with query/key biases, dense first layers, routed plus shared experts.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.core.quant import matrix_bytes, parse_weights
from fitbench.estimate import expert_cost, transformer_cost
from fitbench.estimate.api import estimate
from fitbench.estimate.execution import attention_as_run
from fitbench.estimate.weights import kept_in_16_bit
from fitbench.workloads import library

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from tiny_families import tiny_workload


def test_gpt_oss_reads_its_mxfp4_checkpoint_and_keeps_the_rest_16_bit() -> None:
    w = library.workload_for_model("gpt-oss-20b")
    fmt = w.weight_format
    assert fmt is not None and fmt.method == "mxfp4" and fmt.bits == 4.25
    # the wildcard entries keep every layer's attention and router, and nothing of the experts
    for layer in (0, 7, 23):
        assert any(kept_in_16_bit(e, layer, ["self_attn.q_proj"]) for e in fmt.skip)
        assert any(kept_in_16_bit(e, layer, ["mlp.router"]) for e in fmt.skip)
        assert not any(kept_in_16_bit(e, layer, ["mlp.experts.gate_proj"]) for e in fmt.skip)
    # 4.25 bits a weight over the experts, 16 bits elsewhere
    arch = w.arch
    experts = arch.num_layers * arch.num_experts * 3 * arch.hidden_size * arch.expert_intermediate_size
    stored = estimate(w, get_gpu("h100-sxm")).breakdown
    total = stored["weights"] + stored["quantization_scales"]
    assert total == pytest.approx(experts * 4.25 / 8 + (arch.param_count() - experts) * 2, rel=1e-6)
    assert 12.5 * 2**30 < total < 13 * 2**30  # the published checkpoint is 13.8 GB (12.8 GiB)


def test_mxfp4_layout_is_transformers_own() -> None:
    """Blocks of 32 e2m1 values in 16 bytes and one e8m0 byte a block, as Mxfp4GptOssExperts
    registers them (uint8 [experts, out, in / 2]) and its precision config scales them."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    mxfp4 = pytest.importorskip("transformers.integrations.mxfp4")
    config = transformers.GptOssConfig(hidden_size=64, intermediate_size=96, num_local_experts=3)
    with torch.device("meta"):
        experts = mxfp4.Mxfp4GptOssExperts(config)
    fmt = parse_weights("mxfp4")
    assert fmt is not None
    values, scales = matrix_bytes(fmt, 64, 2 * 96)
    assert 3 * values == experts.gate_up_proj.numel() * experts.gate_up_proj.element_size()
    assert scales == 2 * 96 * 64 // 32
    values, _ = matrix_bytes(fmt, 96, 64)
    assert 3 * values == experts.down_proj.numel()


def test_gpt_oss_runs_eager_attention_with_its_sinks() -> None:
    w = library.workload_for_model("gpt-oss-20b", weights="none")
    assert w.attention == "fused" and attention_as_run(w) == "eager"
    e = estimate(w, get_gpu("h100-sxm"))
    assert any("attention sinks" in line for line in e.assumptions)


def _eager_attention_ops(family: str) -> Counter:
    """The operations of a family's eager_attention_forward (attention alone: gpt-oss's rotary
    embedding differs from Llama's too) on one layer's queries, keys and values."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import importlib

    from torch.utils._python_dispatch import TorchDispatchMode

    from fitbench.backends.torch.models import build_model

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.ops[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    name = {"gpt_oss": "gpt-oss-20b", "llama": "llama-3.2-1b-instruct"}[family]
    w = tiny_workload(name, mode="infer", batch_size=1, prompt_tokens=8, new_tokens=1, weights="none")
    model, _ = build_model(w.replace(attention="eager"), device="cpu")
    model.eval()
    attention = model.model.layers[1].self_attn
    forward = importlib.import_module(
        f"transformers.models.{family}.modeling_{family}"
    ).eager_attention_forward
    heads, kv, d = w.arch.num_heads, w.arch.kv_heads, w.arch.dim_head
    q, k, v = torch.randn(1, heads, 8, d), torch.randn(1, kv, 8, d), torch.randn(1, kv, 8, d)
    with torch.no_grad(), Count() as count:
        forward(attention, q, k, v, None, scaling=d**-0.5)
    return count.ops


def test_the_sinks_add_the_operations_the_estimate_counts() -> None:
    """A cat, a max and a subtract more than Llama's eager attention (beside views)."""
    extra = _eager_attention_ops("gpt_oss") - _eager_attention_ops("llama")
    views = {"view", "expand", "slice", "reshape", "_unsafe_view", "alias", "select", "unsqueeze"}
    assert {op: n for op, n in extra.items() if op not in views} == {"cat": 1, "max": 1, "sub": 1}
    assert transformer_cost.SINK_OPS == 3


def test_eager_prefill_scratch_with_sinks_is_three_score_copies() -> None:
    """The forward's largest moment, every live tensor counted on a tiny real gpt-oss: the
    estimate's three copies of the scores in their own dtype, and no more than the masks and
    inputs beside them that it leaves out (about 0.4 of that on a CPU, as for every eager model)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from fitbench.backends.torch.live_tensors import LiveTensors
    from fitbench.backends.torch.models import build_model

    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        w = tiny_workload(
            "gpt-oss-20b", mode="infer", batch_size=4, prompt_tokens=256, new_tokens=1, precision=precision
        ).replace(weights=None, attention="eager")
        torch.manual_seed(0)
        model, _ = build_model(w, device="cpu", dtype=dtype)
        model.eval()
        ids = torch.randint(0, w.arch.vocab_size, (4, 256))
        with torch.no_grad(), LiveTensors() as live:
            model(input_ids=ids, use_cache=False, logits_to_keep=1)
        estimated = transformer_cost.inference_transient_bytes(w)
        assert estimated <= live.peak <= 1.5 * estimated, (precision, live.peak, estimated)


def test_glm45_layout() -> None:
    arch = library.workload_for_model("glm-4.5").arch
    assert arch.qk_norm == "head" and arch.qkv_bias and not arch.out_bias
    assert arch.dense_layers == 3 and arch.moe_layers == 89
    assert arch.shared_intermediate_size == arch.expert_intermediate_size
    air = library.workload_for_model("glm-4.5-air").arch
    assert air.qk_norm == "none" and air.dense_layers == 1 and air.num_experts == 128


def test_llama4_moe_does_every_experts_work_as_the_estimate_counts() -> None:
    """transformers' Llama4TextMoe repeats the tokens for every expert: FlopCounterMode on a tiny
    real block counts E experts' work for top-1 routing, which the estimate's kernels equal when
    the mode runs that code, and k experts' when an engine routes."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    from fitbench.backends.torch.models import build_model

    w = tiny_workload("llama-4-scout-17b-16e-instruct", weights="none")
    arch = w.arch
    model, _ = build_model(w, device="cpu")
    block = next(layer.feed_forward for layer in model.model.layers if layer.is_moe_layer)
    tokens = 24
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        block(torch.randn(1, tokens, arch.hidden_size))
    measured = counter.get_total_flops()

    def estimated(all_experts: bool) -> float:
        kernels = expert_cost.expert_kernels(arch, tokens, 2.0, 2.0, amp=False, all_experts=all_experts)
        return sum(k.flops for k in kernels)

    assert measured == pytest.approx(estimated(True), rel=1e-9)
    assert arch.num_experts > arch.experts_per_token
    assert estimated(False) < measured / 2


def test_llama4_decode_reads_every_expert_in_pytorch_but_not_in_an_engine() -> None:
    from fitbench.estimate.profile import get_profile
    from fitbench.estimate.speed import generation

    w = library.workload_for_model("llama-4-scout-17b-16e-instruct").replace(weights=parse_weights("nf4"))
    h200 = get_gpu("h200")
    torch_decode = generation(w, h200, get_profile("torch", "default")).decode.seconds
    engine_decode = generation(w, h200, get_profile("torch", "tuned").as_engine()).decode.seconds
    assert torch_decode > 2 * engine_decode
    assert any("all 16 experts" in line for line in estimate(w, h200).assumptions)
