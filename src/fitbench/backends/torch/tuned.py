"""The tuned exec mode: what the card can do, not what most scripts do.

`--exec default` measures the code most users write, and on a fast card that code is often
host-bound: eager PyTorch spends ~50 us of Python and dispatch per operation, so ResNet-50 on
32 px images, BERT with AMP and `generate` at batch 1 all leave the GPU waiting. `--exec tuned`
removes that overhead the way production code does, and says in the notes what it changed:

training and classification inference (ResNet, BERT-style encoders, decoders trained as LMs)
  * BERT-style encoders are fitbench's CompactEncoder (same layout and parameters as
    transformers' BERT, attention always one mask-free SDPA call: see compact_encoder);
  * bf16 autocast wherever the device supports it (fp32 and amp-* requests become amp-bf16,
    with a warning: the precision in effect is recorded honestly); pure fp16/bf16 stay;
  * channels-last memory format for ResNets; cudnn.benchmark; TF32 for what stays in FP32;
  * SDPA attention without a padding mask (flash kernels: synthetic data has no padding);
    decoders call it with `is_causal` and no mask at all (causal_sdpa: transformers would
    otherwise build the full causal mask under CUDA-graph capture, and the kernel would compute
    the whole score square);
  * fused optimizers (Adam/AdamW `fused=True, capturable=True`), over the trainable parameters
    only;
  * LoRA (`--peft lora`): the model the default path adapts (transformers' decoder with SDPA, or
    transformers' BERT with SDPA for an encoder: peft needs a transformers model), wrapped by
    peft exactly as the default path does (peft_support.apply_lora), then the same recipe: bf16
    autocast, fused AdamW over the adapters (and an encoder's classifier), the whole step in one
    CUDA graph. QLoRA is refused: bitsandbytes' 4-bit layers are not the tuned recipe's;
  * static input buffers, a warm-up on a side stream, then forward + backward + optimizer.step()
    captured in ONE CUDA graph (PyTorch's "whole-network capture" recipe) and replayed per step.
    If capture fails with dropout in the model, it is retried with dropout off; if it still
    fails, the step runs eagerly; either way a warning says so.
  * GPUs without native bf16 run amp-fp16 with a GradScaler and no graph (the scaler's
    inf check reads a value on the host, which a graph cannot contain).
  * on CUDA with Triton, by default (RunOptions.compile_step None or True; `--no-compile` turns
    it off): the forward and loss (and so, through AOT autograd, the backward) compiled by
    torch.compile (inductor, a mode without its own CUDA graphs: fitbench captures the step
    itself) before warm-up and capture, after which the compiler's cached blocks go back to the
    driver (gc + empty_cache); the optimizer step stays the fused eager kernel. Fusing
    the small kernels around the GEMMs and convolutions (LayerNorm, residual adds, bias
    gradients, autocast's casts, batch norm's elementwise work) is what it buys: on an H200 the
    ResNet-50, BERT-base and Llama 3.2 1B training steps ran 1.3-1.4x faster, for 30-45 s of
    compiling once per run, so it is what the best code does and what the estimator models.
    If compiling, or capturing the compiled step, fails, the uncompiled step is captured, and a
    warning says why. Where inductor cannot run (a CPU, CUDA without Triton) the step stays
    uncompiled, with a warning only when `--compile` asked for it.

generation (Llama-style decoders)
  * fitbench's own StaticDecoder (fused QKV and gate/up weights) with a preallocated KV cache;
    prefill through causal SDPA, replayed from a CUDA graph of its own (the prompt's shape is
    static: the host does not issue its ~1,000 kernels one by one), then each decode step
    replayed from one captured CUDA graph that also picks the next token (greedy) and feeds it
    back;
  * on CUDA with Triton, at batches 1 to 32 (FUSED_MAX_BATCH) the decode step is fitbench's fused
    Triton kernels (five a layer: RMSNorm, rotary and the cache stores ride along with the weight
    GEMVs or batched tiles, each weight byte read once per step for all the sequences; see
    decode_kernels); at larger batches, or if those fail, the step is compiled (torch.compile,
    inductor) before capture, which fuses its small kernels (~30 s once per run). Either way the
    setup time is reported as compile_seconds.

On a CPU there are no CUDA graphs: the same code runs eagerly, and a warning says so.
"""

from __future__ import annotations

import contextlib
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fitbench.backends.base import RunOptions, Session
from fitbench.backends.torch.backend import is_oom
from fitbench.backends.torch.causal_sdpa import use_causal_sdpa
from fitbench.backends.torch.compact_encoder import CompactEncoder, build_compact_encoder
from fitbench.backends.torch.data import batch_source, prompt_ids
from fitbench.backends.torch.master_weights import (
    ADAMW_WEIGHT_DECAY,
    MasterWeightAdam,
    SplitOptimizer,
    sixteen_bit_candidates,
)
from fitbench.backends.torch.models import (
    build_decoder,
    build_encoder,
    build_resnet,
    count_parameters,
    transformers_version,
)
from fitbench.backends.torch.precision import PrecisionPlan, plan_precision, set_math_flags, tf32_flags
from fitbench.backends.torch.session import (
    LEARNING_RATES,
    SGD_MOMENTUM,
    TorchSession,
    backward_and_step,
    enable_checkpointing,
    note_cpu_threads,
    note_dataset_size,
    note_input_pipeline,
    open_device,
    precision_notes,
    release_cached_blocks,
    warn_param_mismatch,
)
from fitbench.backends.torch.static_decoder import FUSED_MAX_BATCH, StaticDecoder, StaticKVGenerator, _summary
from fitbench.core.names import Framework
from fitbench.errors import FitbenchError
from fitbench.estimate.execution import (
    STEP_FEATURE_NOTES,
    sixteen_bit_residual,
    sixteen_bit_weights,
    transformers_lacks_sdpa,
    tuned_precision,
)
from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.workload import Workload

CPU_NO_GRAPHS = "CUDA graphs need a CUDA device; ran eagerly"
#: backend_notes["input_pipeline"] of tuned runs on synthetic data: the graph reads one batch
#: that stays on the device, so no step copies inputs (with --data each step refills it).
RESIDENT_STATIC = "one batch resident on the device in static buffers (no copy per step)"
GRAPH_WARMUP_STEPS = 3  # eager steps on the side stream before capture (PyTorch's recipe uses 3)
#: torch.compile modes compile_step accepts (RunOptions.extra["compile_mode"]): none of them adds
#: inductor's own CUDA graphs, which would nest inside the graph fitbench captures.
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
#: Inductor settings on top of the mode's. combo_kernels launches independent small kernels (a
#: step's per-parameter weight casts, the gradients' casts, batch norm's per-channel work) side by
#: side as one kernel: on an H200 the ResNet-50 CIFAR step (b128) went 2.69 -> 2.42 ms and BERT-base
#: (seq 512, b16) 14.95 -> 14.82 ms, and both compiled faster (59 -> 32 s, 27 -> 19 s), the losses
#: unchanged (benchmarks/inductor_options.py; inductor-options-h200-2026-12-04.json). Coordinate
#: descent tuning was no faster and compiled 3x longer.
INDUCTOR_OPTIONS: dict[str, Any] = {"combo_kernels": True}
#: ... and for the BERT-style encoder (CompactEncoder), whose dropouts feed its residual LayerNorms:
#: fallback_random leaves dropout to aten's kernel, which draws four numbers per Philox call, where
#: inductor draws each with a Philox call of its own (tl.rand, ten rounds of 32-bit multiplies per
#: element) inside the fused dropout + residual + LayerNorm kernel, doubling its time (43.5 against
#: 21.6 us a site without dropout; benchmarks/dropout_norm.py). The BERT-base step went
#: 15.06 -> 14.54 and 15.02 -> 14.52 ms in two runs (inductor-options-h200-2026-12-04-random.json,
#: -autotune.json), speed.py's 14.9 -> 14.5 ms. Where dropout feeds a GEMM instead (LoRA's adapter
#: inputs) inductor's fused draw is the cheaper one: the Llama-3.2-1B LoRA step went 218 -> 232 ms
#: with fallback_random (speed-h200-2026-12-04-run3.json), so other models keep inductor's.
#: Since then the encoder's 24 layer sites are fitbench's own operator (compact_encoder,
#: dropout_layer_norm: a hashed mask inside the kernels; 14.44 -> 14.01 ms with the cheaper-erf
#: GELU, inductor-options-h200-2026-12-04-residual-norm.json); the option still covers the
#: embeddings' and the classifier's dropouts.
ENCODER_INDUCTOR_OPTIONS: dict[str, Any] = {"fallback_random": True}
#: keep the trained Linear weights in bf16 with FP32 masters in the optimizer where
#: estimate.execution.sixteen_bit_weights says the step does (backends/torch/master_weights.py);
#: False keeps autocast's FP32 weights (what benchmarks compare against)
SIXTEEN_BIT_WEIGHTS = True
#: keep the compact encoder's residual stream in bf16 between the layers where
#: estimate.execution.sixteen_bit_residual says the step does (CompactEncoder.residual_dtype);
#: False keeps autocast's FP32 stream (what benchmarks compare against)
SIXTEEN_BIT_RESIDUAL = True
COMPILE_UNAVAILABLE = (
    "--compile needs a CUDA device with Triton (torch.compile's inductor); the step ran uncompiled"
)

#: what torch.compile is given as its backend: "inductor", or a name / callable (tests: "aot_eager")
CompileBackend = str | Callable[..., Any]


# -- precision ------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class TunedPrecision:
    """What tuned runs for a requested precision, and whether a CUDA graph may hold the step."""

    plan: PrecisionPlan
    warnings: tuple[str, ...] = ()
    graph_allowed: bool = True


def native_bf16(device: torch.device) -> bool:
    """bf16 tensor cores (Ampere, sm_80, and later); torch.cuda.is_bf16_supported() also counts
    emulation, which is slower than fp16."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 8


def choose_precision(workload: Workload, device: torch.device) -> TunedPrecision:
    """fp32 / tf32 / amp-* -> amp-bf16 where bf16 is native (else amp-fp16 with a GradScaler and no
    graph for training); pure fp16 / bf16 stay as asked; int8 / int4 are not tuned."""
    info = workload.precision_info
    training = workload.is_training
    if info.quant_bits is not None:
        raise FitbenchError(
            f"--exec tuned runs fp32, AMP, fp16 and bf16 models, not {info.name} weights",
            "use --exec default for bitsandbytes int8/int4",
            message_zh=f"--exec tuned 运行 fp32、AMP、fp16 和 bf16 模型,不支持 {info.name} 权重",
            hint_zh="bitsandbytes int8/int4 请使用 --exec default",
        )
    # Which precision: the rule fitbench.estimate.execution states for the estimator too.
    target = tuned_precision(workload, Framework.TORCH, bf16=device.type == "cpu" or native_bf16(device))
    if target == info.name and not info.amp:  # pure fp16 / bf16 stay as asked
        plan = plan_precision(info.name, device, training=training)
        return TunedPrecision(plan=plan, warnings=plan.warnings)
    if target == "amp-bf16":
        plan = plan_precision("amp-bf16", device, training=training)
        if plan.in_effect == "amp-bf16":
            changed = (
                ()
                if info.name == "amp-bf16"
                else (
                    "tuned changed the precision: ran amp-bf16 (bf16 autocast, fp32 master weights) "
                    f"instead of the requested {info.name}",
                )
            )
            return TunedPrecision(plan=plan, warnings=changed + plan.warnings)
        return TunedPrecision(plan=plan, warnings=plan.warnings)  # no bf16 autocast here: fp32
    plan = plan_precision("amp-fp16", device, training=training)
    note = "this GPU has no native bf16: tuned ran amp-fp16"
    if plan.grad_scaler:
        note += " with a GradScaler and no CUDA graph (the scaler's overflow check syncs with the host)"
    changed = () if info.name == "amp-fp16" else (f"tuned changed the precision from {info.name}; {note}",)
    return TunedPrecision(plan=plan, warnings=changed or (note,), graph_allowed=not plan.grad_scaler)


def fast_math(device: torch.device) -> dict[str, Any]:
    """cudnn.benchmark (pick the fastest convolution per shape) and TF32 for what stays FP32."""
    return set_math_flags(device, allow_tf32=True, cudnn_benchmark=True)


def autocast(plan: PrecisionPlan, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """Autocast without its weight-cast cache: inside a captured graph a cached cast would be a
    stale copy of weights the captured optimizer keeps updating (make_graphed_callables demands
    cache_enabled=False for the same reason)."""
    if plan.autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=plan.autocast_dtype, cache_enabled=False)


def make_optimizer(name: str, params: list[nn.Parameter], *, capturable: bool) -> torch.optim.Optimizer:
    """The workload's optimizer, fused (one kernel for all parameters) and graph-capturable."""
    lr = LEARNING_RATES[name]
    if name in ("adam", "adamw"):
        kind = torch.optim.Adam if name == "adam" else torch.optim.AdamW
        return kind(params, lr=lr, fused=True, capturable=capturable)
    momentum = SGD_MOMENTUM if name == "momentum" else 0.0
    try:  # SGD keeps no step counter: its fused step is capture-safe without a flag
        return torch.optim.SGD(params, lr=lr, momentum=momentum, fused=True)
    except (TypeError, RuntimeError):
        return torch.optim.SGD(params, lr=lr, momentum=momentum, foreach=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


# -- models and losses ---------------------------------------------------------------------------
def _build(workload: Workload, device: torch.device, dtype: torch.dtype) -> tuple[nn.Module, dict[str, Any]]:
    """ResNets in channels-last; encoders compact (mask-free SDPA); decoders with SDPA forced."""
    arch = workload.arch
    if isinstance(arch, ResNetArch):
        model, notes = build_resnet(arch, device=device, dtype=dtype)
        model = model.to(memory_format=torch.channels_last)
        notes["memory_format"] = "channels_last"
        return model, notes
    assert isinstance(arch, TransformerArch)
    if arch.kind == "encoder" and workload.peft:
        # peft adapts transformers models by their module names: BERT itself, with SDPA
        model, notes = build_encoder(arch, attention="sdpa", device=device, dtype=dtype)
        notes["attention"] = "sdpa without a mask (flash kernel; attention dropout inside it)"
    elif arch.kind == "encoder":
        model = build_compact_encoder(arch, device=device, dtype=dtype)
        notes: dict[str, Any] = {
            "model_source": "fitbench CompactEncoder (BERT layout, stacked q/k/v, random init)",
            "attention": "sdpa without a mask (flash kernel; attention dropout inside it)",
        }
    elif transformers_lacks_sdpa(arch, transformers_version()):
        # Gemma-2: transformers builds no SDPA for it (its soft-capped scores), so eager attention
        # is the fastest it has, as the estimate assumes (estimate/execution.attention_as_run).
        model, notes = build_decoder(arch, attention="eager", device=device, dtype=dtype)
        notes["attention"] = "eager (transformers has no SDPA for this model)"
        return model, notes
    else:
        model, notes = build_decoder(arch, attention="sdpa", device=device, dtype=dtype)
        why_not = use_causal_sdpa(model, sliding_layers=arch.sliding_layers)
        notes["attention"] = (
            "causal sdpa without a mask (is_causal: half the score square)"
            if why_not is None
            else f"sdpa with transformers' mask ({why_not})"
        )
    if workload.attention != "fused":
        notes.setdefault("warnings", []).append(
            "tuned uses fused SDPA attention; the workload asked for eager attention"
        )
    return model, notes


LossFn = Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor]


def _resnet_loss(checkpointing: bool) -> LossFn:
    from fitbench.backends.torch.models import resnet_forward

    def loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = resnet_forward(model, batch["pixel_values"], checkpointing=checkpointing)
        return F.cross_entropy(logits.float(), batch["labels"])

    return loss


def _encoder_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    # The compact encoder attends without a mask (flash kernels); the loss is computed here, so
    # no labels-dependent Python runs in the captured region.
    logits = model(batch["input_ids"], batch["token_type_ids"])
    if logits.shape[-1] == 1:
        return F.mse_loss(logits.squeeze(-1).float(), batch["labels"].float())
    return F.cross_entropy(logits.float(), batch["labels"])


def _hf_encoder_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    # transformers' BERT under peft (LoRA): keyword arguments, no mask (flash-eligible SDPA).
    logits = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"]).logits
    if logits.shape[-1] == 1:
        return F.mse_loss(logits.squeeze(-1).float(), batch["labels"].float())
    return F.cross_entropy(logits.float(), batch["labels"])


def _causal_lm_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    ids = batch["input_ids"]
    logits = model(input_ids=ids, use_cache=False).logits
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())


def _loss_fn(workload: Workload) -> LossFn:
    if workload.is_resnet:
        return _resnet_loss(workload.checkpointing)
    if workload.family == "encoder":
        return _hf_encoder_loss if workload.peft else _encoder_loss
    return _causal_lm_loss


# -- training and classification inference -----------------------------------------------------
class GraphedStepSession(TorchSession):
    """A step over static buffers, replayed from one CUDA graph when capture succeeds.

    Subclasses define `_body()` (the work of one step, returning its output tensor) and
    `_before_capture()` (e.g. clear gradients so the captured backward allocates them).
    """

    def __init__(
        self,
        *,
        use_graph: bool,
        compile_backend: CompileBackend | None = None,
        compile_mode: str = "default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        w, dev = self.workload, self.device
        data = batch_source(w, self.options, dev, self.plan.input_dtype)
        first = data.next_batch()
        keep = {"pixel_values", "labels"} if w.is_resnet else {"input_ids", "token_type_ids", "labels"}
        # Static buffers: the graph reads these addresses every replay.
        self.static: dict[str, torch.Tensor] = {}
        for name, tensor in first.items():
            if name not in keep:
                continue
            if name == "pixel_values":
                self.static[name] = tensor.contiguous(memory_format=torch.channels_last)
            else:
                self.static[name] = tensor.clone()
        self._refill = data.next_batch if self.options.data else None
        source = data.description
        source += (
            "; each step copies the next batch into static buffers"
            if self._refill
            else ("; one batch kept on the device in static buffers")
        )
        self.notes["data_source"] = source
        note_dataset_size(self.notes, data)
        note_input_pipeline(self.notes, data)
        if self._refill is None:
            self.notes["input_pipeline"] = RESIDENT_STATIC
        if not w.is_resnet and self.options.data:
            self.notes["warnings"].append(
                "tuned attends without the padding mask (flash attention): speed as for full-length "
                "sequences, not the padded model's outputs"
            )
        self.graph: torch.cuda.CUDAGraph | None = None
        self.use_graph = use_graph
        self.static_out: torch.Tensor | None = None
        self.compile_backend = compile_backend
        self.compile_mode = compile_mode
        self.compiled = False
        self.compile_seconds: float | None = None
        # The forward part of the step (what torch.compile covers); set by each subclass.
        self._eager_forward: Callable[[], torch.Tensor] | None = None
        self._forward_fn: Callable[[], torch.Tensor] | None = None

    # hooks
    @abstractmethod
    def _body(self) -> torch.Tensor:
        """The step's work (forward, and backward and update when training): what is captured."""

    @abstractmethod
    def _make_forward(self) -> Callable[[], torch.Tensor]:
        """The forward part of the step as a closure over the model and the static buffers (not
        a bound method: torch.compile then guards on a few tensors, not on the session)."""

    def _use_forward(self) -> None:
        """Called at the end of each subclass's __init__: the eager forward is the step's first."""
        self._eager_forward = self._forward_fn = self._make_forward()

    def _forward(self) -> torch.Tensor:
        assert self._forward_fn is not None, "subclasses call _use_forward() in __init__"
        return self._forward_fn()

    def _before_capture(self) -> None:
        """Called before warm-up steps and before capture."""

    def _compile_update(self) -> None:
        """Compile what the step runs beside the forward (the optimizer's update), if anything."""

    def _uncompile_update(self) -> None:
        """Back to the eager form of what _compile_update compiled."""

    def _after_failed_capture(self) -> None:
        """Undo what a failed capture left behind (e.g. gradients in the graph's pool)."""

    # compile
    def _compile(self) -> str | None:
        """Route the forward through torch.compile and compile it by running one real step (the
        backward compiles at its first call too); None when that worked, else why not (the
        eager forward stays). An OOM is raised: it is a verdict."""
        started = time.perf_counter()
        assert self._eager_forward is not None and self.compile_backend is not None
        try:
            self._forward_fn = torch.compile(
                self._eager_forward,
                backend=self.compile_backend,
                dynamic=False,
                **compile_settings(self.compile_backend, self.compile_mode, self.model),
            )
            self._compile_update()
            self._before_capture()
            self._body()
            self.sync()
        except Exception as exc:
            if is_oom(exc):
                raise
            self._uncompile()
            return _summary(exc)
        self.compiled = True
        self.compile_seconds = time.perf_counter() - started
        self._release_compile_memory()
        return None

    def _release_compile_memory(self) -> None:
        """Hand the compile's transient blocks back to the driver before warm-up and capture.

        The first compiled step runs dynamo, AOT autograd and inductor (benchmarking kernels,
        autotuning) with the step's own tensors live; what they allocate stays cached in PyTorch's
        allocator after they free it, so without this the process keeps the compiler's peak
        (on an H200 the reserved peak was 1.3-2x the allocated one) and the step's graph pool comes
        on top. Collected and emptied here, the whole-process peak is the step's, not the
        compiler's. A no-op for memory on a CPU (gc only)."""
        release_cached_blocks(self.device)

    def _uncompile(self) -> None:
        """Back to the eager forward; dynamo's caches (and what they hold) are dropped."""
        self._forward_fn = self._eager_forward
        self._uncompile_update()
        self.compiled = False
        self.compile_seconds = None
        self._after_failed_capture()
        torch._dynamo.reset()

    # capture
    def _try_capture(self) -> str | None:
        """Warm up on a side stream, then capture `_body` once. None on success, else why not."""
        dev = self.device
        stream = torch.cuda.Stream(dev)
        stream.wait_stream(torch.cuda.current_stream(dev))
        try:
            with torch.cuda.stream(stream):
                for _ in range(GRAPH_WARMUP_STEPS):
                    self._before_capture()
                    self._body()
            torch.cuda.current_stream(dev).wait_stream(stream)
            torch.cuda.synchronize(dev)
            self._before_capture()
            # The warm-up's activations go back to the driver: the graph gets its own pool.
            release_cached_blocks(dev)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                out = self._body()
            torch.cuda.synchronize(dev)
        except Exception as exc:
            if is_oom(exc):
                raise
            self._after_failed_capture()
            torch.cuda.synchronize(dev)
            return _first_line(exc)
        self.graph, self.static_out = graph, out
        return None

    def capture(self) -> None:
        """Compile the forward when asked; capture the step (the compiled one, else the uncompiled
        one, with dropout off if it must), or fall back to eager; a warning says each fallback."""
        warnings = self.notes["warnings"]
        if self.compile_backend is not None:
            why = self._compile()
            if why is not None:
                warnings.append(f"torch.compile of the step failed ({why}); the uncompiled step ran")
        if self.use_graph:
            started = time.perf_counter()
            if self.compiled:
                why = self._try_capture()
                if why is not None:
                    self._uncompile()
                    warnings.append(
                        f"CUDA graph capture of the compiled step failed ({why}); "
                        "fell back to the uncompiled step"
                    )
            if self.graph is None:
                self._capture_uncompiled()
            self.notes["cuda_graph"] = self.graph is not None
            self.notes["capture_seconds"] = round(time.perf_counter() - started, 3)
        self.notes["compiled_step"] = self.compiled
        self.notes.pop("compile_mode", None)
        self.notes.pop("compile_seconds", None)
        if self.compiled and self.compile_seconds is not None:
            self.notes["compile_mode"] = self.compile_mode
            self.notes["compile_seconds"] = round(self.compile_seconds, 3)

    def _capture_uncompiled(self) -> None:
        """Capture the step, with dropout off if it must, or leave it eager with a warning."""
        why = self._try_capture()
        dropouts = _dropouts_on(self.model) if why is not None else []
        if dropouts:
            for module, _ in dropouts:
                module.p = 0.0
            retry = self._try_capture()
            if retry is None:
                self.notes["warnings"].append(
                    f"CUDA graph capture with dropout failed ({why}); captured with dropout off (p=0): "
                    "the step skips dropout's random masks"
                )
                self.notes["dropout"] = "off (p=0) for graph capture"
            else:  # no graph either way: the eager step keeps the model's dropout
                for module, p in dropouts:
                    module.p = p
                why = f"{why}; with dropout off: {retry}"
        if self.graph is None:
            self.notes["warnings"].append(f"CUDA graph capture failed ({why}); the tuned step ran eagerly")

    def step(self) -> None:
        if self._refill is not None:
            batch = self._refill()
            for name, buffer in self.static.items():
                buffer.copy_(batch[name], non_blocking=True)
        if self.graph is not None:
            self.graph.replay()
        else:
            self._eager_step()

    def _eager_step(self) -> None:
        self._before_capture()
        self._body()

    def close(self) -> None:
        self.graph = None
        self.static_out = None
        super().close()


def _dropouts_on(model: nn.Module) -> list[tuple[nn.Module, float]]:
    """The dropout modules with a non-zero probability, and that probability."""
    return [
        (m, float(m.p)) for m in model.modules() if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0
    ]


class TunedTrainSession(GraphedStepSession):
    """forward + loss + backward + optimizer.step(), one CUDA graph (or eager with a GradScaler)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        w = self.workload
        self.model.train()
        graphed = self.use_graph
        trained = [p for p in self.model.parameters() if p.requires_grad]
        self.scaler = torch.amp.GradScaler(self.device.type) if self.plan.grad_scaler else None
        self.sixteen_bit: MasterWeightAdam | None = None
        keep_16 = SIXTEEN_BIT_WEIGHTS and sixteen_bit_weights(w, self.plan.in_effect, "tuned")
        if keep_16 and self.scaler is None:
            sixteen = sixteen_bit_candidates(self.model)
            self.sixteen_bit = MasterWeightAdam(
                sixteen,
                lr=LEARNING_RATES[w.optimizer],
                weight_decay=ADAMW_WEIGHT_DECAY if w.optimizer == "adamw" else 0.0,
            )
            kept = {id(p) for p in sixteen}
            trained = [p for p in trained if id(p) not in kept]
        fp32 = make_optimizer(w.optimizer, trained, capturable=graphed) if trained else None
        if self.sixteen_bit is None:
            assert fp32 is not None
            self.optimizer: torch.optim.Optimizer | SplitOptimizer = fp32
        else:
            self.optimizer = SplitOptimizer(fp32, self.sixteen_bit)
            self.notes[STEP_FEATURE_NOTES["sixteen_bit_weights"]] = {
                "params": self.sixteen_bit.numel,
                "tensors": len(self.sixteen_bit.params),
                "dtype": "bf16",
                "masters": "fp32, in the optimizer (autocast casts none of these weights)",
            }
        if w.checkpointing and isinstance(self.model, CompactEncoder):
            self.model.checkpointing = True
        elif w.checkpointing and not w.is_resnet:
            enable_checkpointing(self.model)
        self.loss = _loss_fn(w)
        group = fp32.param_groups[0] if fp32 is not None else {"fused": True, "capturable": graphed}
        flags = [k for k in ("fused", "foreach", "capturable") if group.get(k)]
        name = type(fp32).__name__ if fp32 is not None else ("AdamW" if w.optimizer == "adamw" else "Adam")
        described = f"{name}({', '.join(flags)})"
        if self.sixteen_bit is not None:
            described += " + the same update over FP32 masters of the bf16 weights"
        self.notes.update(
            optimizer=described,
            grad_scaler=self.scaler is not None,
            checkpointing=w.checkpointing,
        )
        self._use_forward()

    def _make_forward(self) -> Callable[[], torch.Tensor]:
        model, batch, loss, plan, device = self.model, self.static, self.loss, self.plan, self.device

        def forward_and_loss() -> torch.Tensor:
            with autocast(plan, device):
                return loss(model, batch)

        return forward_and_loss

    def _body(self) -> torch.Tensor:
        loss = self._forward()
        # A scaler is never inside a graph (use_graph is off with a scaler).
        backward_and_step(loss, self.optimizer, self.scaler)
        return loss.detach()

    def _before_capture(self) -> None:
        # Gradients set to None: the captured backward allocates them from the graph's pool and
        # every replay refills those same tensors, so no zero_grad is needed between replays.
        self.optimizer.zero_grad(set_to_none=True)

    def _after_failed_capture(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def _compile_update(self) -> None:
        if self.sixteen_bit is not None and self.compile_backend is not None:
            options = compile_settings(self.compile_backend, self.compile_mode).get("options")
            self.sixteen_bit.compile(self.compile_backend, options)

    def _uncompile_update(self) -> None:
        if self.sixteen_bit is not None:
            self.sixteen_bit.uncompile()

    def close(self) -> None:
        self.optimizer = None  # type: ignore[assignment]
        self.sixteen_bit = None
        super().close()


class TunedInferSession(GraphedStepSession):
    """One eval-mode forward pass over static inputs, captured in a CUDA graph."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model.eval()
        self._use_forward()

    def _make_forward(self) -> Callable[[], torch.Tensor]:
        model, batch, plan, device = self.model, self.static, self.plan, self.device
        resnet = self.workload.is_resnet

        def forward() -> torch.Tensor:
            with torch.no_grad(), autocast(plan, device):
                if resnet:
                    return model(batch["pixel_values"])
                return model(batch["input_ids"], batch["token_type_ids"])

        return forward

    def _body(self) -> torch.Tensor:
        return self._forward()


def compile_settings(backend: CompileBackend, mode: str, model: nn.Module | None = None) -> dict[str, Any]:
    """torch.compile's keyword arguments for the step of `model`: inductor gets the mode's settings
    plus INDUCTOR_OPTIONS, and ENCODER_INDUCTOR_OPTIONS for a CompactEncoder (torch.compile takes a
    mode or options, not both, so the mode is spelled out as its options); another backend (the
    tests' aot_eager) gets none."""
    if backend != "inductor":
        return {}
    import torch._inductor

    options = {**torch._inductor.list_mode_options(mode), **INDUCTOR_OPTIONS}
    if isinstance(model, CompactEncoder):
        options.update(ENCODER_INDUCTOR_OPTIONS)
    return {"options": options}


def step_compiler(options: RunOptions, device: torch.device) -> tuple[CompileBackend | None, str, str | None]:
    """(torch.compile backend for the step or None, its mode, a warning when --compile cannot be
    honoured here): inductor on CUDA with Triton unless compile_step is False; elsewhere the step
    stays uncompiled, with a warning only where compile_step is True (asked for: None, the
    default, asked for nothing)."""
    mode = str((options.extra or {}).get("compile_mode") or "default")
    if mode not in COMPILE_MODES:
        raise FitbenchError(
            f"unknown compile mode '{mode}'",
            f"use one of {', '.join(COMPILE_MODES)}",
            message_zh=f"未知的编译模式 '{mode}'",
            hint_zh=f"请使用以下之一:{'、'.join(COMPILE_MODES)}",
        )
    if options.compile_step is False:
        return None, mode, None
    if not inductor_available(device):
        return None, mode, COMPILE_UNAVAILABLE if options.compile_step else None
    return "inductor", mode, None


def open_step_session(
    workload: Workload,
    options: RunOptions,
    device: torch.device,
    *,
    compile_backend: CompileBackend | None = None,
) -> Session:
    """The tuned training / classification session, captured. `compile_backend` overrides the
    choice of step_compiler (tests compile on a CPU with "aot_eager": dynamo and AOT autograd's
    trace, run eagerly)."""
    backend, mode, why_not = step_compiler(options, device)
    if compile_backend is not None:
        backend, why_not = compile_backend, None
    choice = choose_precision(workload, device)
    plan = choice.plan
    math = fast_math(device)
    torch.manual_seed(options.seed)
    model, notes = _build(workload, device, plan.param_dtype)
    if (
        isinstance(model, CompactEncoder)
        and SIXTEEN_BIT_RESIDUAL
        and sixteen_bit_residual(workload, plan.in_effect, "tuned")
    ):
        model.residual_dtype = torch.bfloat16
        notes[STEP_FEATURE_NOTES["sixteen_bit_residual"]] = (
            "bf16 between the layers (norms in fp32; Megatron-LM's bf16 recipe)"
        )
    params = count_parameters(model)  # the base model, before any adapters
    if workload.peft:
        from fitbench.backends.torch.peft_support import apply_lora, lora_summary

        model = apply_lora(model, workload)  # what the default path runs, adapters and all
        notes["peft"] = lora_summary(model)
    warnings = [*choice.warnings, *notes.pop("warnings", [])]
    warn_param_mismatch(warnings, params, workload)
    if device.type != "cuda":
        warnings.append(CPU_NO_GRAPHS)
    if why_not is not None:
        warnings.append(why_not)
    notes.update(precision_notes(plan, params=params, warnings=warnings), cuda_graph=False)
    if math:
        notes["math_flags"] = math
    note_cpu_threads(notes, device)
    kind = TunedTrainSession if workload.is_training else TunedInferSession
    session = kind(
        workload=workload,
        options=options,
        device=device,
        plan=plan,
        model=model,
        notes=notes,
        use_graph=device.type == "cuda" and choice.graph_allowed,
        compile_backend=backend,
        compile_mode=mode,
    )
    session.capture()
    return session


# -- generation ------------------------------------------------------------------------------------
GENERATION_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def generation_precision(workload: Workload, device: torch.device) -> tuple[str, torch.dtype, list[str]]:
    """Weights in one dtype: fp32 / fp16 / bf16 as asked; amp-X -> X weights (say so)."""
    info = workload.precision_info
    if info.quant_bits is not None:
        raise FitbenchError(
            f"--exec tuned generates with fp16, bf16 or fp32 weights, not {info.name}",
            "use --exec default for bitsandbytes int8/int4",
            message_zh=f"--exec tuned 只用 fp16、bf16 或 fp32 权重生成,不支持 {info.name}",
            hint_zh="bitsandbytes int8/int4 请使用 --exec default",
        )
    warnings: list[str] = []
    # Which weights: the rule fitbench.estimate.execution states for the estimator too.
    name = tuned_precision(workload, Framework.TORCH, bf16=device.type != "cuda" or native_bf16(device))
    if info.amp:
        warnings.append(
            f"tuned changed the precision: generated with {info.compute} weights instead of {info.name}"
        )
    if name == "fp16" and info.compute == "bf16":
        warnings.append("this GPU has no native bf16: tuned generated with fp16 weights")
    plan = plan_precision(name, device, training=False)
    warnings.extend(plan.warnings)
    return plan.in_effect, plan.param_dtype, warnings


def inductor_available(device: torch.device) -> bool:
    """torch.compile's GPU code generator needs Triton (CUDA wheels of PyTorch bring it)."""
    if device.type != "cuda":
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


class TunedGenerateSession(TorchSession):
    """Prefill through SDPA and decode steps, each replayed from a CUDA graph (see static_decoder)."""

    def __init__(self, *, generator: StaticKVGenerator, prompt: torch.Tensor, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.generator = generator
        self.prompt = prompt

    def prefill(self) -> None:
        self.generator.prefill(self.prompt)

    def decode(self, new_tokens: int) -> None:
        self.generator.decode(new_tokens)

    def step(self) -> None:
        self.prefill()
        self.decode(int(self.workload.new_tokens or 1))

    def close(self) -> None:
        self.generator = None  # type: ignore[assignment]
        self.prompt = None  # type: ignore[assignment]
        super().close()


def refuse_beyond_window(workload: Workload) -> None:
    """The StaticDecoder attends to every cached token: the same as a sliding window only while
    each sequence fits in the window, so a longer one is refused, not measured as another model."""
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    window = arch.sliding_window if arch.sliding_layers else None
    if window is not None and workload.tokens_per_sequence > window:
        raise FitbenchError(
            f"--exec tuned attends to every cached token; this model's {arch.sliding_layers} "
            f"sliding-window layers see only the last {window}, fewer than the "
            f"{workload.tokens_per_sequence} tokens of each sequence here",
            f"use --exec default, or keep prompt + new tokens within {window}",
            message_zh=f"--exec tuned 会关注所有缓存的 token;这个模型的 {arch.sliding_layers} 个滑动窗口层"
            f"只看最后 {window} 个,少于这里每条序列的 {workload.tokens_per_sequence} 个 token",
            hint_zh=f"请使用 --exec default,或让提示词加新 token 不超过 {window}",
        )


def open_generate_session(workload: Workload, options: RunOptions, device: torch.device) -> Session:
    arch = workload.arch
    assert isinstance(arch, TransformerArch)
    refuse_beyond_window(workload)
    in_effect, dtype, warnings = generation_precision(workload, device)
    torch.manual_seed(options.seed)
    model = StaticDecoder(arch, device=device, dtype=dtype)
    params = count_parameters(model)
    warn_param_mismatch(warnings, params, workload)  # the layout is meant to match exactly
    use_graph = device.type == "cuda"
    if not use_graph:
        warnings.append(CPU_NO_GRAPHS)
    prompt_tokens, new_tokens = int(workload.prompt_tokens or 1), int(workload.new_tokens or 1)
    generator = StaticKVGenerator(
        model,
        batch=workload.batch_size,
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        use_graph=use_graph,
    )
    prompt = prompt_ids(workload, device, options.seed)
    compiled = fused = False
    if inductor_available(device):  # CUDA with Triton: fitbench's fused kernels, else torch.compile
        fused_batch = workload.batch_size <= FUSED_MAX_BATCH  # where they are the faster step
        why_not_fused = generator.use_fused_kernels(prompt) if fused_batch else ""
        fused = why_not_fused is None
        if not fused:
            why = generator.compile_step(prompt)
            compiled = why is None
            if why is not None:
                warnings.append(
                    f"torch.compile of the decode step failed ({why}); the eager step was captured"
                )
            if why_not_fused:  # batches the fused kernels are meant for: say why they did not run
                warnings.append(f"fused decode kernels not used ({why_not_fused})")
    generator.capture(prompt)
    if generator.capture_error is not None:
        warnings.append(f"CUDA graph capture failed ({generator.capture_error}); decode steps ran eagerly")
    if generator.prefill_capture_error is not None:
        warnings.append(
            f"CUDA graph capture of the prefill failed ({generator.prefill_capture_error}); "
            "the prefill ran eagerly"
        )
    notes: dict[str, Any] = {
        "precision_in_effect": in_effect,
        "warnings": warnings,
        "params": params,
        "param_dtype": str(dtype).removeprefix("torch."),
        "model_source": "fitbench StaticDecoder (Llama layout, fused qkv and gate/up weights, random init)",
        "generation": (
            "greedy over a static KV cache; "
            + ("decode step as fitbench's fused Triton kernels (5 a layer); " if fused else "")
            + ("decode step compiled (torch.compile, inductor); " if compiled else "")
            + (
                "each decode step replayed from one CUDA graph"
                if generator.graph is not None
                else "decode steps run eagerly"
            )
            + ("; the prefill replayed from a CUDA graph" if generator.prefill_graph is not None else "")
        ),
        "compiled_step": compiled,
        "fused_kernels": fused,
        "decode_includes_prefill": False,
        "decode_steps_per_call": max(0, new_tokens - 1),
        "kv_cache_shape": list(generator.cache_shape),
        "kv_cache_bytes": generator.cache_bytes,
        "data_source": "random prompt token ids",
        "cuda_graph": generator.graph is not None,
        "prefill_cuda_graph": generator.prefill_graph is not None,
        "attention": "sdpa (causal prefill); "
        + ("fused decode attention over the static cache" if fused else "masked static-cache decode"),
    }
    if generator.capture_seconds is not None:
        notes["capture_seconds"] = round(generator.capture_seconds, 3)
    if generator.compile_seconds is not None:
        notes["compile_seconds"] = round(generator.compile_seconds, 3)
    if workload.attention != "fused":
        warnings.append("tuned uses fused SDPA attention; the workload asked for eager attention")
    if device.type == "cuda":
        notes["math_flags"] = tf32_flags()  # left as they are: fp32 generation stays strict fp32
    note_cpu_threads(notes, device)
    plan = PrecisionPlan(requested=workload.precision, in_effect=in_effect, param_dtype=dtype)
    return TunedGenerateSession(
        workload=workload,
        options=options,
        device=device,
        plan=plan,
        model=model,
        notes=notes,
        generator=generator,
        prompt=prompt,
    )


# -- the exec mode ---------------------------------------------------------------------------------
def open_tuned(workload: Workload, options: RunOptions) -> Session:
    """Session factory of `--exec tuned` (registered below)."""
    if workload.peft == "qlora":
        raise FitbenchError(
            "--exec tuned does not measure QLoRA: bitsandbytes' 4-bit layers dequantize outside "
            "the tuned step (no bf16 autocast recipe, no CUDA graph)",
            "use --exec default for QLoRA, or --peft lora with --exec tuned",
            message_zh="--exec tuned 不实测 QLoRA:bitsandbytes 的 4 位层在调优步骤之外反量化"
            "(没有 bf16 autocast 方案,也没有 CUDA 图)",
            hint_zh="QLoRA 请使用 --exec default,或在 --exec tuned 下使用 --peft lora",
        )
    device = open_device(options.device)
    if workload.is_generation:
        return open_generate_session(workload, options, device)
    return open_step_session(workload, options, device)
