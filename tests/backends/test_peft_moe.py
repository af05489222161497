"""LoRA on mixture-of-experts models, through peft on transformers 5's stacked experts.

transformers 5 stacks the routed experts into 3-D parameters; peft (0.19 on) turns a model's
transformers-4 target names into target parameters on those stacks and wraps each in a
ParamWrapper (rank x E adapters; the fused gate/up stack at twice the rank), which refuses
dropout and folds W + B·A into a new stack on every forward. The estimator counts those
adapters, the merged stacks autograd saves, and no dropout mask (estimate/peft.py).
Real tiny models on the CPU, real peft.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from fitbench.backends.torch.models import build_model  # noqa: E402
from fitbench.backends.torch.peft_support import apply_lora  # noqa: E402
from fitbench.estimate import peft  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from tiny_families import tiny_workload  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_peft_torch import saved_bytes, saved_storages  # noqa: E402  (the dense LoRA test's count)

pytestmark = pytest.mark.torch

# Qwen2-MoE is missing from peft's family map: its names reach the shared expert only.
# Phi-3.5-MoE is missing too (no shared expert: its attention alone is adapted).
NO_EXPERT_ADAPTERS = ("qwen2-57b-a14b-instruct", "phi-3.5-moe-instruct")
FAMILIES = [
    "mixtral-8x7b-instruct",
    "qwen3-30b-a3b",
    "olmoe-1b-7b",
    "qwen2-57b-a14b-instruct",
    "phi-3.5-moe-instruct",
    "deepseek-v2-lite-chat",
    "ernie-4.5-21b-a3b",
    "glm-4.5-air",
    "dots.llm1.base",
    "glm-4.7-flash",
    "solar-open-100b-shape.json",  # a layout: GLM-4.5's experts behind Llama's attention
    "exaone-moe-shape.json",  # a layout: DeepSeek-V3's experts behind EXAONE 4.0's attention
    "afmoe-shape.json",  # a layout: gated attention, sigmoid-routed and shared experts
    "flexolmo-7x7b-shape.json",  # a layout: OLMoE's experts with OLMo-2's post-norms
]


def _lora(name: str, targets: str):
    w = tiny_workload(
        name,
        mode="train",
        batch_size=2,
        seq_len=64,
        peft="lora",
        lora_rank=4,
        lora_targets=targets,
        precision="bf16",
    )
    torch.manual_seed(0)
    model, _ = build_model(w, device="cpu", dtype=torch.bfloat16)
    model = apply_lora(model, w)
    model.train()
    return w, model


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("targets", ["attention", "attention-mlp"])
def test_moe_adapter_count_matches_peft(name: str, targets: str) -> None:
    w, model = _lora(name, targets)
    assert model.get_nb_trainable_parameters()[0] == peft.trainable_param_count(w)
    stacked = bool(peft.expert_adapters(w))
    assert stacked == (targets != "attention" and name not in NO_EXPERT_ADAPTERS)
    assert (peft.lora_dropout(w) == 0.0) == stacked


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mixtral-8x7b-instruct", "olmoe-1b-7b"])
def test_the_merged_expert_stacks_are_saved_for_backward(name: str) -> None:
    """Adapting the experts saves each MoE block's merged stacks (and the adapters' 16-bit factor
    copies the fold reads, a few per cent of them, which the estimate leaves out)."""
    w_attention, attention_only = _lora(name, "attention")
    w, adapted = _lora(name, "attention-mlp")
    extra = saved_bytes(adapted, w) - saved_bytes(attention_only, w_attention)
    merged = peft.merged_expert_bytes(w) * w.arch.moe_layers
    e = w.arch.num_experts
    factors = (
        sum(rank * e * (fin + fout) * 2 for _, fin, fout, rank in peft.expert_adapters(w)) * w.arch.moe_layers
    )
    assert merged > 0
    assert merged <= extra <= merged + 2 * factors
    # the estimate: the same merged stacks, the routed copies' inputs and products their weight
    # gradients need again, and no dropout masks on the attention adapters now
    saved = sum(seg.saved_bytes for seg, _ in peft.peft_segments(w))
    saved_attention = sum(seg.saved_bytes for seg, _ in peft.peft_segments(w_attention))
    fins = [(n, fin) for n, fin, _ in peft.lora_linears(w_attention)]
    first_layer_unmasked = sum(fin for n, fin in fins if n in ("q", "k", "v"))
    masked = w.arch.num_layers * sum(fin for _, fin in fins) - first_layer_unmasked
    masks = peft.MASK_BYTES * masked * w.batch_size * w.seq_len
    arch = w.arch
    again = arch.experts_per_token * (arch.hidden_size + arch.expert_intermediate_size) * 2
    again *= w.batch_size * w.seq_len * arch.num_layers
    assert saved - saved_attention == pytest.approx(merged - masks + again)


class _SdpaCalls(torch.overrides.TorchFunctionMode):
    """Marks the time inside F.scaled_dot_product_attention and keeps each call's q, k, v and
    output."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.calls: list[tuple[torch.Tensor, ...]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is not torch.nn.functional.scaled_dot_product_attention:
            return func(*args, **(kwargs or {}))
        self.inside = True
        try:
            out = func(*args, **(kwargs or {}))
        finally:
            self.inside = False
        self.calls.append((*args[:3], out))
        return out


def saved_bytes_with_fused_attention(model, workload) -> int:
    """Distinct storages autograd saves (parameters excluded), attention counted as CUDA's fused
    kernels keep it: q, k, v, the output and an FP32 log-sum-exp a query row, in place of what
    the CPU's SDPA saves. Latent attention's query/key heads are wider than its values, which
    sends the CPU to SDPA's math path: FP32 copies of q, kᵀ and v and the FP32 scores, 262 KB a
    layer of tiny DeepSeek-V2's 2.3 MB, which no CUDA kernel keeps."""
    sdpa = _SdpaCalls()
    with sdpa:
        seen = saved_storages(model, workload, skip=lambda: sdpa.inside)
    assert sdpa.calls, "no SDPA call: the attention ran another way"
    lse = 0
    for q, *others in sdpa.calls:
        for t in (q, *others):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        lse += q.shape[:-1].numel() * 4
    return sum(seen.values()) + lse


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("targets", ["attention", "attention-mlp"])
def test_saved_activations_of_an_adapted_moe_match_the_estimate(name: str, targets: str) -> None:
    """A frozen MoE block saves what full training does less each routed copy's gathered input
    and product (weight gradients only), which adapted experts need again; within 8 % on the
    CPU's tiny models with attention as CUDA keeps it (the routing of random weights varies; the
    factor copies are left out)."""
    w, model = _lora(name, targets)
    measured = saved_bytes_with_fused_attention(model, w)
    estimated = sum(seg.saved_bytes for seg, _ in peft.peft_segments(w))
    if peft.lora_dropout(w) > 0:  # a CPU's dropout keeps FP32 noise, not CUDA's bool mask
        linears = peft.lora_linears(w)
        qkv = sum(fin for n, fin, _ in linears if n in ("q", "k", "v"))
        masked = w.arch.num_layers * sum(fin for _, fin, _ in linears) - qkv
        estimated += (4 - peft.MASK_BYTES) * masked * w.batch_size * w.seq_len
    assert estimated == pytest.approx(measured, rel=0.08)


class _BaddbmmCalls(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the baddbmm calls (peft's fold of W + B·A into a stack) dispatched inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.split(".")[0] == "baddbmm":
            self.calls += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "olmoe-1b-7b"])
def test_each_forward_folds_every_adapted_stack_as_often_as_the_estimate_counts(name: str) -> None:
    from fitbench.estimate import peft_speed

    w, model = _lora(name, "attention-mlp")
    ids = torch.randint(0, w.arch.vocab_size, (w.batch_size, w.seq_len))
    with _BaddbmmCalls() as calls:
        model(input_ids=ids, use_cache=False)
    merges, _ = peft_speed.expert_adapter_kernels(w)
    assert calls.calls == sum(k.count for k in merges)
    # peft's registration check and the forward's own read: twice per stack and MoE block
    assert calls.calls == peft_speed.PARAMETRIZATION_EVALUATIONS * 2 * w.arch.moe_layers
