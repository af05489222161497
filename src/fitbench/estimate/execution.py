"""What an execution mode really runs: the workload as `fitbench run --exec MODE` executes it.

The tuned modes change precision where that is how fast code is written, and each framework's
rule mirrors its backend:

The rule is written once, in `tuned_precision`, and the backends ask it:

* PyTorch (fitbench.backends.torch.tuned): FP32 and AMP requests become bf16 autocast on cards
  with native BF16 (amp-fp16 elsewhere), and AMP generation becomes pure 16-bit weights (its
  static decoder has no autocast).
* Paddle (fitbench.backends.paddle.session.tuned_plan): FP32 and AMP requests for training and
  classification become AMP O2, i.e. pure 16-bit weights with FP32 master weights in the
  optimizer: `bf16` on cards with native BF16, `fp16` (with a GradScaler) elsewhere. AMP
  generation creates 16-bit weights, fp16 where a bf16 request meets a card without BF16.

An estimate compared with a tuned measurement must describe that workload, not the requested
one, or the comparison measures the precision change instead of the estimator.

The attention kernel follows the same rule (`attention_as_run`): a fused-attention request on a
model transformers builds without SDPA (or whose SDPA call only its math path takes) runs as
eager attention.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

from fitbench.core import names
from fitbench.core.gpu import GpuSpec
from fitbench.core.names import ExecMode, Framework
from fitbench.estimate import generate_ops
from fitbench.workloads.workload import Workload

AUTOCAST_REQUESTS = ("fp32", "tf32", "amp-fp16", "amp-bf16")


def tuned_precision(workload: Workload, framework: str, *, bf16: bool) -> str:
    """The precision the tuned mode of `framework` runs `workload` at, on a device with (`bf16`)
    or without native BF16. The one statement of the rule: the estimator and both backends
    (fitbench.backends.torch.tuned, fitbench.backends.paddle.session) ask it."""
    fw = names.framework(framework)
    if fw is Framework.PADDLE:
        return _paddle_tuned(workload, bf16)
    info = workload.precision_info
    if workload.is_generation:  # one weight dtype (a static decoder has no autocast)
        if info.quant_bits is not None:
            return workload.precision
        name = info.compute if info.amp else ("fp32" if workload.precision == "tf32" else workload.precision)
        return "fp16" if name == "bf16" and not bf16 else name
    if workload.precision in AUTOCAST_REQUESTS:
        return "amp-bf16" if bf16 else "amp-fp16"
    return workload.precision


def tuned_changes(workload: Workload, framework: str) -> bool:
    """Whether the tuned mode changes this request on some device (with or without BF16)."""
    return any(tuned_precision(workload, framework, bf16=b) != workload.precision for b in (True, False))


def precision_as_run(
    workload: Workload, exec_mode: str, gpu: GpuSpec | None, framework: str = "torch"
) -> str:
    """The precision `exec_mode` runs `workload` at on `gpu` (None: a card with BF16). Only the
    tuned modes change it; `default` runs the requested precision."""
    if names.exec_mode(exec_mode) is not ExecMode.TUNED:
        return workload.precision
    return tuned_precision(workload, framework, bf16=gpu is None or gpu.bf16)


def _paddle_tuned(workload: Workload, bf16: bool) -> str:
    """Paddle's tuned precision: AMP O2 (pure 16-bit weights, the `bf16` / `fp16` modes, whose
    FP32 master weights memory.master_weights_kept counts for Paddle) for training and
    classification; 16-bit weights for AMP generation."""
    info = workload.precision_info
    if workload.is_generation:
        if not info.amp:
            return workload.precision
        return "bf16" if info.compute == "bf16" and bf16 else "fp16"
    if workload.precision in AUTOCAST_REQUESTS:
        return "bf16" if bf16 else "fp16"
    return workload.precision


def optimizer_impl_as_run(workload: Workload, exec_mode: str, framework: str = "torch") -> str:
    """The optimizer implementation `exec_mode` runs: torch's tuned mode builds every optimizer
    with fused=True (fitbench.backends.torch.tuned.make_optimizer); otherwise the workload's."""
    if exec_mode == ExecMode.TUNED and framework == Framework.TORCH:
        return "fused"
    return workload.optimizer_impl


#: the optimizers whose tuned step keeps 16-bit weights with FP32 masters (sixteen_bit_weights)
MASTER_WEIGHT_OPTIMIZERS = ("adam", "adamw")
#: the tuned step's features that an older backend ran without (the rules below, by name), and
#: the backend note a run that had the feature writes (backends/torch/tuned.py)
STEP_FEATURE_NOTES = {"sixteen_bit_weights": "sixteen_bit_weights", "sixteen_bit_residual": "residual_stream"}
STEP_FEATURES = tuple(STEP_FEATURE_NOTES)
_features_off: frozenset[str] = frozenset()


@contextmanager
def without_step_features(*features: str) -> Iterator[None]:
    """Estimate the tuned step as a backend without `features` ran it: inside, the named rules
    answer False. A stored measurement of an older step (its backend notes lack the feature) is
    scored against the estimate of the step it measured, not of today's."""
    global _features_off
    unknown = set(features) - set(STEP_FEATURES)
    if unknown:
        raise ValueError(f"unknown step features {sorted(unknown)}; known: {STEP_FEATURES}")
    before = _features_off
    _features_off = before | frozenset(features)
    _forget_feature_dependent_caches()
    try:
        yield
    finally:
        _features_off = before
        _forget_feature_dependent_caches()


def features_not_run(workload: Workload, backend_notes: Mapping[str, object]) -> tuple[str, ...]:
    """The tuned step's features that a stored run's backend notes do not name: a run from before
    them measured the step without them, and is compared with that step's estimate
    (without_step_features). Generation has none of them (its notes never name them)."""
    if workload.is_generation:
        return ()
    return tuple(feature for feature, note in STEP_FEATURE_NOTES.items() if note not in backend_notes)


#: the cache_clear of every cached estimate that the step features change
_feature_dependent_caches: list[Callable[[], None]] = []
Cached = TypeVar("Cached")


def cleared_with_step_features(cached: Cached) -> Cached:
    """Register an lru_cache'd estimate (keyed by workload, not by the step features) so that
    without_step_features clears it when it turns features off and on: a cached peak made for
    today's step must not answer for an older one."""
    _feature_dependent_caches.append(cached.cache_clear)  # type: ignore[attr-defined]
    return cached


def _forget_feature_dependent_caches() -> None:
    for clear in _feature_dependent_caches:
        clear()


def sixteen_bit_weights(workload: Workload, precision: str, exec_mode: str, framework: str = "torch") -> bool:
    """Whether the step keeps its Linear weights and biases in bf16, with FP32 masters in the
    optimizer, so that autocast casts none of them (fitbench.backends.torch.master_weights):
    torch's tuned full-parameter training of a dense transformer at `precision` amp-bf16 (the
    precision as run) with Adam or AdamW, one GPU, no accumulation. ResNets (convolutions), MoE
    models (routers that compute in FP32, expert weights autocast never casts), LoRA (a frozen
    base has no update to fold a cast into) and fp16 (its GradScaler unscales FP32 gradients)
    keep autocast's FP32 weights."""
    arch = workload.arch
    return (
        "sixteen_bit_weights" not in _features_off
        and names.exec_mode(exec_mode) is ExecMode.TUNED
        and names.framework(framework) is Framework.TORCH
        and workload.is_training
        and precision == "amp-bf16"
        and not workload.peft
        and workload.optimizer in MASTER_WEIGHT_OPTIMIZERS
        and workload.gpus == 1
        and workload.grad_accum == 1
        and not workload.is_resnet
        and getattr(arch, "num_experts", 0) == 0
    )


def sixteen_bit_tied_head_params(workload: Workload) -> int:
    """The parameters of a decoder's LM head tied to its embedding, which a step keeping 16-bit
    weights leaves in FP32 (the lookup shares the matrix: backends/torch/master_weights.
    sixteen_bit_candidates) and autocast casts at each use as before; 0 without one."""
    arch = workload.arch
    tied = getattr(arch, "kind", None) == "decoder" and getattr(arch, "tie_embeddings", False)
    return arch.vocab_size * arch.hidden_size if tied else 0  # type: ignore[union-attr]


def runs_residual_site_operator(workload: Workload) -> bool:
    """Whether the workload's compiled (tuned) step runs fitbench's residual-site operator: the
    tuned mode's BERT-style text encoders do (backends/torch/compact_encoder); LoRA-adapted ones
    are transformers' BERT, vision transformers (patches) and decoders are pre-norm."""
    arch = workload.arch
    return (
        getattr(arch, "kind", None) == "encoder"
        and getattr(arch, "norm", None) == "layernorm"
        and not getattr(arch, "patch_size", 0)
        and not workload.peft
    )


def sixteen_bit_residual(
    workload: Workload, precision: str, exec_mode: str, framework: str = "torch"
) -> bool:
    """Whether the step keeps its residual stream in bf16 between the layers (compact_encoder's
    `residual_dtype`), as Megatron-LM's bf16 training does, where autocast keeps it in FP32:
    torch's tuned BERT-style encoder (runs_residual_site_operator) at `precision` amp-bf16 (the
    precision as run), training or inference. Each residual site then moves 10 bytes an element
    each way instead of 16; the norms still compute in FP32."""
    return (
        "sixteen_bit_residual" not in _features_off
        and names.exec_mode(exec_mode) is ExecMode.TUNED
        and names.framework(framework) is Framework.TORCH
        and precision == "amp-bf16"
        and runs_residual_site_operator(workload)
    )


# transformers model types built without SDPA (`_supports_sdpa = False`): Gemma-2 soft-caps its
# attention scores (tanh), which SDPA cannot do, so transformers runs its eager attention there
# (scores materialized per layer) unless flash-attention 2 is installed, which fitbench does not use.
# gpt-oss adds a learned sink logit to every softmax row, which SDPA has no input for: eager too.
EAGER_ONLY_MODEL_TYPES = ("gemma2", "gpt_oss")
# Model types transformers builds with SDPA only from a release on; before it, asking for SDPA
# raises, and the torch backend asks for eager attention. GPT-J's attention went through
# transformers' attention interface in 5.24 (5.17-5.23 refuse SDPA; checked in the releases'
# modeling_gptj.py). The estimate, which knows no installed release, takes the newest.
SDPA_SINCE = {"gptj": (5, 24)}


def attention_as_run(workload: Workload, framework: str = "torch") -> str:
    """The attention implementation PyTorch runs `workload` with: eager where transformers has no
    fused kernel for the model (EAGER_ONLY_MODEL_TYPES, which the torch backend builds eager:
    backends/torch/models.attention_impl) or where SDPA can only take its math path, which
    keeps what eager attention keeps; else the requested one."""
    arch = workload.arch
    if framework == Framework.TORCH and (
        transformers_lacks_sdpa(arch) or sdpa_math_only(arch) or fp32_grouped_heads_math(workload)
    ):
        return "eager"
    return workload.attention


def fp32_grouped_heads_math(workload: Workload) -> bool:
    """FP32 training of a decoder whose key/value heads are fewer than its query heads: for a
    causal batch without padding transformers hands SDPA the grouped heads with enable_gqa
    (integrations/sdpa_attention.py use_gqa_in_sdpa), and of PyTorch's CUDA kernels only flash
    and cuDNN take grouped heads, both 16-bit only; memory-efficient attention takes equal head
    counts only (sdp_utils.cpp: check_batch_size_and_num_heads_dense<false>). FP32 therefore runs
    SDPA's math path, which repeats the keys and values to every head and keeps the FP32 score
    matrices as eager attention does. Under autocast or in 16-bit weights flash runs. Generation
    is left to its own rules: a decode step's query is packed onto the key/value heads."""
    arch = workload.arch
    return (
        workload.is_training
        and workload.precision == "fp32"
        and getattr(arch, "kind", "") == "decoder"
        and not getattr(arch, "is_mla", False)
        and getattr(arch, "kv_heads", 0) < getattr(arch, "num_heads", 0)
    )


def transformers_lacks_sdpa(arch: object, transformers: str | None = None) -> bool:
    """Whether transformers refuses SDPA for this model (EAGER_ONLY_MODEL_TYPES, or a model type
    of SDPA_SINCE under an older `transformers` release; None: the newest): the torch backend
    then asks for its eager attention."""
    kind = getattr(arch, "rules_type", "")
    if kind in EAGER_ONLY_MODEL_TYPES:
        return True
    since = SDPA_SINCE.get(kind)
    known = generate_ops.release(transformers)
    return since is not None and known is not None and known < since


def sdpa_math_only(arch: object) -> bool:
    """Falcon's first layout (multi-query, one norm a block: Falcon-7B) hands SDPA one key/value
    head against all the query heads without enable_gqa; SDPA's fused kernels take equal head
    counts only, so it runs its math path, which materializes the scores like eager attention
    (and, while decoding, copies the keys and values to every head in FP32:
    transformer_cost.math_sdpa_kv_kernels). The new layout (Falcon-40B/180B) expands the keys and
    values to every head first."""
    return (
        getattr(arch, "rules_type", "") == "falcon"
        and getattr(arch, "norms_per_layer", 2) == 1
        and getattr(arch, "kv_heads", 0) < getattr(arch, "num_heads", 0)
    )


def workload_as_run(
    workload: Workload, exec_mode: str, gpu: GpuSpec | None, framework: str = "torch"
) -> Workload:
    """`workload` with the precision, optimizer implementation and attention `exec_mode` really
    uses on `gpu`."""
    precision = precision_as_run(workload, exec_mode, gpu, framework)
    impl = optimizer_impl_as_run(workload, exec_mode, framework)
    attention = attention_as_run(workload, framework)
    as_asked = (workload.precision, workload.optimizer_impl, workload.attention)
    if (precision, impl, attention) == as_asked:
        return workload
    return workload.replace(precision=precision, optimizer_impl=impl, attention=attention)


def tuned_generation_gaps(arch: object, lang: str = "en") -> str:
    """What of a decoder's blocks PyTorch's tuned generator (backends/torch/static_decoder.py:
    one RMSNorm before attention and one before a dense SwiGLU MLP, rotary positions) would leave
    out, named; '' when nothing is. Its session refuses such a model, and an estimate of the tuned mode says
    so. Sliding windows are not among them: within the window full causal attention is the
    same (backends/torch/tuned.refuse_beyond_window refuses longer sequences)."""
    norms = getattr(arch, "norms_per_layer", 2)
    mlp, norm = getattr(arch, "mlp", "swiglu"), getattr(arch, "norm", "rmsnorm")
    position = getattr(arch, "position", "rotary")
    parts = [
        (mlp != "swiglu", "a two-matrix MLP", "双矩阵 MLP"),
        (norm != "rmsnorm", f"{norm} norms", f"{norm} 归一化层"),
        (position != "rotary", f"{position} positions", f"{position} 位置编码"),
        (getattr(arch, "is_moe", False), "experts", "专家层"),
        (getattr(arch, "is_mla", False), "latent attention", "潜在注意力"),
        (
            bool(getattr(arch, "linear_layers", 0)),
            "linear-attention, Mamba-2 or short-convolution layers",
            "线性注意力层、Mamba-2 层或短卷积层",
        ),
        (getattr(arch, "qk_norm", "none") != "none", "query/key norms", "query/key 归一化"),
        (norms != 2, f"{norms} norms a block", f"每块 {norms} 个归一化层"),
        (getattr(arch, "parallel_block", False), "parallel attention and MLP", "并行的注意力与 MLP"),
        (
            getattr(arch, "lm_head_bias", False) or bool(getattr(arch, "extra_params", 0)),
            "extra parameters",
            "额外参数",
        ),
    ]
    return (", " if lang == "en" else "、").join(en if lang == "en" else zh for hit, en, zh in parts if hit)
