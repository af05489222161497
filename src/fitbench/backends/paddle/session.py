"""A workload built on one Paddle device: model, optimizer, mixed precision and data, ready to step.

The training step is the code Paddle users commonly write: `paddle.amp.auto_cast` (O1, or
O2 after `paddle.amp.decorate`), `paddle.amp.GradScaler(init_loss_scaling=1024)`,
`scaler.scale(loss).backward()`, `scaler.minimize(opt, scaled)`, `opt.clear_grad()`.

`--exec tuned` is what the card can do with the same eager step. On a CUDA GPU, training and
classification requested in fp32, tf32 or AMP run AMP O2 (16-bit weights, fp32 master weights
in the optimizer): bf16 without a GradScaler where the GPU has bf16 tensor cores (compute
capability 8.0 and later), fp16 with the GradScaler elsewhere; AMP generation creates 16-bit
weights. On CPU the requested precision stays (a warning says so). Adam and Momentum
update every parameter in one multi-tensor kernel (`use_multi_tensor=True`), and attention is
always paddle.nn.functional.scaled_dot_product_attention (flash or memory-efficient kernels).
Every change is a warning in the notes ("tuned changed the precision: ..."). Kernels are still
launched one by one from Python: no paddle.jit.to_static, no CUDA graphs.

Paddle quietly turns auto_cast and GradScaler into no-ops where it cannot honour them (any CPU,
bf16 on pre-Ampere GPUs), and its CPU build has no fp16/bf16 matmul or conv kernels. The AMP
code path still runs, but the session probes what really happened and says so in `notes`
("precision_in_effect" and one plain warning line), so a measurement never claims a
precision it did not run in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import paddle
import paddle.nn.functional as F

from fitbench.backends.base import RunOptions, Session
from fitbench.backends.input_pipeline import batches_to_prepare, pipeline_note
from fitbench.backends.paddle.models import build_model, recompute_fn, trainable_param_count
from fitbench.core.names import ExecMode, Framework
from fitbench.errors import FitbenchError
from fitbench.estimate.execution import tuned_changes, tuned_precision
from fitbench.workloads.workload import Workload

PADDLE_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
TUNED_CHANGED = "tuned changed the precision"
# Paddle documents `use_multi_tensor` for Adam and Momentum only (not AdamW, not SGD).
MULTI_TENSOR_OPTIMIZERS = ("adam", "momentum")
LOSS_SCALING = 1024.0  # paddle.amp.GradScaler(init_loss_scaling=1024), as typical scripts use
LEARNING_RATE = 1e-4  # speed and memory do not depend on it


# -- device ---------------------------------------------------------------------------------


def parse_device(device: str) -> tuple[str, int | None]:
    """'cpu' -> ('cpu', None); 'cuda', 'cuda:N' (or 'gpu', 'gpu:N') -> ('gpu', N)."""
    text = device.strip().lower()
    if text == "cpu":
        return "cpu", None
    kind, _, index = text.partition(":")
    if kind in ("cuda", "gpu") and (not index or index.isdigit()):
        return "gpu", int(index) if index else 0
    raise FitbenchError(
        f"unknown device '{device}'",
        "use cpu, cuda or cuda:N",
        message_zh=f"未知的设备 '{device}'",
        hint_zh="请使用 cpu、cuda 或 cuda:N",
    )


def check_gpu(index: int) -> None:
    """Raise the one-line error for a GPU this Paddle build or machine cannot use."""
    if not paddle.device.is_compiled_with_cuda():
        raise FitbenchError(
            "this PaddlePaddle build has no CUDA support",
            "install the paddlepaddle-gpu 3.3 wheel from PaddlePaddle's own index, or use --device cpu",
            message_zh="当前 PaddlePaddle 构建不支持 CUDA",
            hint_zh="请从 PaddlePaddle 官方源安装 paddlepaddle-gpu 3.3 wheel,或使用 --device cpu",
        )
    count = paddle.device.cuda.device_count()
    if index >= count:
        hint = "use --device cuda:0" if count else "check the driver with nvidia-smi, or use --device cpu"
        hint_zh = "请使用 --device cuda:0" if count else "请用 nvidia-smi 检查驱动,或使用 --device cpu"
        raise FitbenchError(
            f"no GPU cuda:{index} (PaddlePaddle sees {count})",
            hint,
            message_zh=f"没有 GPU cuda:{index}(PaddlePaddle 检测到 {count} 块)",
            hint_zh=hint_zh,
        )


def select_device(device: str) -> tuple[str, int | None]:
    kind, index = parse_device(device)
    if kind == "gpu":
        check_gpu(index)
        paddle.set_device(f"gpu:{index}")
    else:
        paddle.set_device("cpu")
    return kind, index


def device_capability(kind: str, index: int | None) -> tuple[int, int] | None:
    """The GPU's CUDA compute capability (major, minor); None on CPU."""
    if kind != "gpu":
        return None
    major, minor = paddle.device.cuda.get_device_capability(index)
    return int(major), int(minor)


def native_bf16(capability: tuple[int, int] | None) -> bool:
    """bf16 tensor cores: Ampere (sm_80) and later, the same major >= 8 test Paddle's AMP makes
    before it honours dtype='bfloat16'. None (CPU) has none."""
    return capability is not None and capability[0] >= 8


# -- precision ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PrecisionPlan:
    """How a precision name is run in Paddle.

    runs           the fitbench precision this plan runs when the device honours it (tuned may
                   change the request; the session still probes what really happened)
    amp_level      'O1' (auto_cast casts per op, fp32 weights) or 'O2' (decorate: half weights),
                   None for no auto_cast
    master_weight  O2 training: the optimizer keeps fp32 master weights (decorate's master_weight)
    half_weights   generation only: create the weights directly in this dtype (no fp32 copy)
    loss_scaling   GradScaler's initial scale, None for no scaler
    notes          warnings the plan itself implies (a changed precision, an unswitched tf32)
    """

    requested: str
    runs: str
    amp_level: str | None = None
    amp_dtype: str | None = None
    master_weight: bool = False
    half_weights: str | None = None
    loss_scaling: float | None = None
    notes: tuple[str, ...] = ()


def plan_precision(
    workload: Workload, exec_mode: str = "default", capability: tuple[int, int] | None = None
) -> PrecisionPlan:
    """Map fitbench's precision names onto Paddle's AMP levels, for a device of `capability`
    (a GPU's CUDA compute capability; None for CPU). A pure function, so every device's plan
    can be checked anywhere.

    amp-fp16 -> O1 fp16 + GradScaler; amp-bf16 -> O1 bf16; fp16 -> O2 fp16 + GradScaler;
    bf16 -> O2 bf16; generation in fp16/bf16 creates the weights in that dtype instead.
    bf16 has fp32's exponent range and needs no loss scaling, but typical training code uses a
    GradScaler whatever the dtype, so 'default' keeps it (one unscale and finite check per step)
    and 'tuned' drops it for bf16. On a GPU 'tuned' also changes the request (tuned_plan).
    """
    p = workload.precision_info
    if p.quant_bits is not None:
        raise FitbenchError(
            f"the paddle backend does not run {p.name} weights",
            "use --backend torch, or `fitbench estimate` for quantized memory and speed",
            message_zh=f"paddle 后端不能运行 {p.name} 权重",
            hint_zh="请使用 --backend torch,或用 `fitbench estimate` 估算量化后的显存与速度",
        )
    if exec_mode == ExecMode.TUNED:
        if capability is not None:
            plan = tuned_plan(workload, native_bf16(capability))
            if plan is not None:
                return plan
        elif tuned_changes(workload, Framework.PADDLE):
            change = (
                "generates AMP requests with 16-bit weights"
                if workload.is_generation
                else (f"runs {p.name} as AMP O2")
            )
            cpu_note = f"tuned {change} on CUDA GPUs only; on CPU it kept the requested {p.name}"
            plan = _requested_plan(workload, exec_mode)
            return dataclasses.replace(plan, notes=(*plan.notes, cpu_note))
    return _requested_plan(workload, exec_mode)


def _requested_plan(workload: Workload, exec_mode: str) -> PrecisionPlan:
    """The requested precision as Paddle code commonly runs it (see plan_precision)."""
    p = workload.precision_info
    dtype = PADDLE_DTYPES.get(p.compute)
    if dtype is None:
        notes = ()
        if p.name == "tf32":
            notes = (
                "tf32 is not switched by the paddle backend; fp32 ran with Paddle's default matmul settings",
            )
        return PrecisionPlan(requested=p.name, runs="fp32" if p.name == "tf32" else p.name, notes=notes)
    scaling = LOSS_SCALING if workload.is_training and (dtype == "float16" or exec_mode != "tuned") else None
    if p.amp:
        return PrecisionPlan(
            requested=p.name, runs=p.name, amp_level="O1", amp_dtype=dtype, loss_scaling=scaling
        )
    if workload.is_generation:
        return PrecisionPlan(requested=p.name, runs=p.name, half_weights=dtype)
    return PrecisionPlan(
        requested=p.name,
        runs=p.name,
        amp_level="O2",
        amp_dtype=dtype,
        master_weight=workload.is_training,
        loss_scaling=scaling,
    )


def tuned_plan(workload: Workload, bf16: bool) -> PrecisionPlan | None:
    """What tuned runs on a CUDA GPU with (`bf16`) or without bf16 tensor cores; None where it
    runs the request as asked (pure fp16 / bf16, fp32 generation).

    Training and classification inference requested as fp32, tf32 or AMP run AMP O2: 16-bit
    weights and activations, fp32 master weights in the optimizer (decorate's master_weight),
    and a GradScaler only for fp16, whose exponent range needs one. AMP generation creates its
    weights in 16 bit (no fp32 copy to cast from each forward).
    """
    p = workload.precision_info
    if not tuned_changes(workload, Framework.PADDLE):
        return None
    # Which precision: the rule fitbench.estimate.execution states for the estimator too.
    half = tuned_precision(workload, Framework.PADDLE, bf16=bf16)
    no_bf16 = "" if bf16 else "; this GPU has no native bf16"
    if workload.is_generation:
        why = no_bf16 if p.compute == "bf16" else ""
        note = f"{TUNED_CHANGED}: generated with {half} weights instead of {p.name}{why}"
        return PrecisionPlan(requested=p.name, runs=half, half_weights=PADDLE_DTYPES[half], notes=(note,))
    dtype = PADDLE_DTYPES[half]
    training = workload.is_training
    how = f"Paddle AMP O2: {half} weights" + (", fp32 master weights" if training else "")
    if training and not bf16:
        how += ", GradScaler"
    note = f"{TUNED_CHANGED}: ran {half} ({how}) instead of the requested {p.name}{no_bf16}"
    return PrecisionPlan(
        requested=p.name,
        runs=half,
        amp_level="O2",
        amp_dtype=dtype,
        master_weight=training,
        loss_scaling=LOSS_SCALING if training and not bf16 else None,
        notes=(note,),
    )


def autocast_probe(dtype: str) -> tuple[bool, list[str]]:
    """Whether auto_cast really casts on the current device, and what Paddle warned.

    An fp32 matmul is on every AMP white list, so under an active O1 auto_cast it comes out
    in half precision; Paddle disables auto_cast (with a warning) on CPU and on GPUs without
    the dtype, and then it stays fp32.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = paddle.ones([8, 8], dtype="float32")
        with paddle.amp.auto_cast(enable=True, level="O1", dtype=dtype):
            out = paddle.matmul(a, a)
    return out.dtype == getattr(paddle, dtype), [str(w.message) for w in caught]


def half_kernels_probe(dtype: str) -> str | None:
    """None when matmul runs in `dtype` on the current device, else Paddle's reason (first line)."""
    try:
        a = paddle.ones([8, 8], dtype=dtype)
        paddle.matmul(a, a)
    except (RuntimeError, NotImplementedError, ValueError) as exc:
        return str(exc).strip().splitlines()[0][:200]
    return None


@contextlib.contextmanager
def default_dtype(dtype: str | None) -> Iterator[None]:
    """Create parameters directly in `dtype` (a 7B model in fp16 never exists in fp32)."""
    if dtype is None:
        yield
        return
    previous = paddle.get_default_dtype()
    paddle.set_default_dtype(dtype)
    try:
        yield
    finally:
        paddle.set_default_dtype(previous)


# -- data -----------------------------------------------------------------------------------


def make_optimizer(
    name: str, parameters: list[Any], *, multi_tensor: bool = False
) -> paddle.optimizer.Optimizer:
    """The workload's optimizer; `multi_tensor` (tuned) updates all parameters of a dtype in one
    kernel where Paddle offers it (Adam, Momentum: `use_multi_tensor=True`)."""
    if name == "adam":
        return paddle.optimizer.Adam(
            learning_rate=LEARNING_RATE, parameters=parameters, use_multi_tensor=multi_tensor
        )
    if name == "adamw":
        return paddle.optimizer.AdamW(learning_rate=LEARNING_RATE, parameters=parameters, weight_decay=0.01)
    if name == "sgd":
        return paddle.optimizer.SGD(learning_rate=LEARNING_RATE, parameters=parameters)
    if name == "momentum":
        return paddle.optimizer.Momentum(
            learning_rate=LEARNING_RATE, momentum=0.9, parameters=parameters, use_multi_tensor=multi_tensor
        )
    raise FitbenchError(
        f"the paddle backend has no optimizer '{name}'",
        "use adam, adamw, sgd or momentum",
        message_zh=f"paddle 后端没有优化器 '{name}'",
        hint_zh="请使用 adam、adamw、sgd 或 momentum",
    )


def optimizer_note(name: str, optimizer: paddle.optimizer.Optimizer, *, multi_tensor: bool) -> str:
    """The optimizer as the notes name it, with how its update is launched when tuned asked."""
    kind = type(optimizer).__name__
    if not multi_tensor:
        return kind
    if name in MULTI_TENSOR_OPTIMIZERS:
        return f"{kind}(use_multi_tensor=True)"
    return f"{kind} (per-parameter update: Paddle's {kind} has no use_multi_tensor)"


class Batches:
    """Inputs for each step, fed by the rule of fitbench.backends.input_pipeline.

    fitbench.datasets gives the batches (synthetic ones of the workload's shape, or a
    local dataset's); every distinct batch is converted once to the tensors the model takes and
    kept in host memory, page-locked (Tensor.pin_memory) on a GPU. Each step copies the next one
    with Tensor.cuda(blocking=False), as a paddle.io.DataLoader with pinned memory feeds a
    training loop: the copy stays in the step's device time, the host does not wait for it.
    On a CPU the prepared tensors are the inputs.
    """

    def __init__(self, workload: Workload, options: RunOptions, gpu_index: int | None) -> None:
        from fitbench import datasets

        self.workload = workload
        self.gpu_index = gpu_index
        arch = workload.arch
        b = workload.batch_size
        seq = workload.prompt_tokens if workload.is_generation else workload.seq_len
        if workload.is_resnet:
            cycler, size, self.desc = datasets.image_batches(
                options.data, b, workload.image_size, arch.num_classes, options.seed
            )
        else:
            cycler, size, self.desc = datasets.text_batches(
                options.data, b, seq, arch.vocab_size, max(arch.num_labels, 2), options.seed
            )
        self.dataset_size: int | None = size if options.data else None
        first = next(cycler)
        self.batch_bytes = sum(int(value.nbytes) for value in self._fields(first).values())
        count = batches_to_prepare(cycler.size, cycler.batch_size, self.batch_bytes)
        numpy_batches = [first, *(next(cycler) for _ in range(count - 1))]
        self.prepared = [self._host(raw) for raw in numpy_batches]
        self.pipeline = pipeline_note(gpu_index is not None)
        self._pos = 0

    def _fields(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The arrays the model takes, under the model's names, integers widened to int64."""
        w = self.workload
        out: dict[str, Any] = {}
        for key, value in raw.items():
            if w.is_resnet:
                out["pixel_values" if key == "images" else key] = value
                continue
            if self._takes(key, value):
                out[key] = value.astype("int64", copy=False)
        return out

    def _takes(self, key: str, value: Any) -> bool:
        """Whether the model reads this text field: decoders input_ids only; encoders also labels,
        token types where the model has them, and the mask of a padded batch (without padding
        attention needs none)."""
        if key == "input_ids":
            return True
        if self.workload.family != "encoder":
            return False
        if key == "attention_mask":
            return not bool(value.all())
        if key == "token_type_ids":
            return bool(getattr(self.workload.arch, "type_vocab_size", 0))
        return key == "labels"

    def _host(self, raw: dict[str, Any]) -> dict[str, paddle.Tensor]:
        out: dict[str, paddle.Tensor] = {}
        for key, value in self._fields(raw).items():
            tensor = paddle.to_tensor(value, place=paddle.CPUPlace())
            out[key] = tensor.pin_memory() if self.gpu_index is not None else tensor
        return out

    def next(self) -> dict[str, Any]:
        batch = self.prepared[self._pos]
        self._pos = (self._pos + 1) % len(self.prepared)
        if self.gpu_index is None:
            return batch
        return {key: tensor.cuda(self.gpu_index, blocking=False) for key, tensor in batch.items()}


# -- the session ------------------------------------------------------------------------------


class PaddleSession(Session):
    """One workload on one device. Built by `open_session`; driven by the runner."""

    def __init__(self, workload: Workload, options: RunOptions) -> None:
        self.workload = workload
        self.options = options
        self.kind, self.index = select_device(options.device)
        self.tuned = options.exec_mode == "tuned"
        paddle.seed(options.seed)
        self.capability = device_capability(self.kind, self.index)
        self.plan = plan_precision(workload, options.exec_mode, self.capability)
        if workload.checkpointing and workload.is_training and recompute_fn() is None:
            raise FitbenchError(
                "this PaddlePaddle build has no paddle.distributed.fleet.utils.recompute",
                "run without --checkpointing",
                message_zh="当前 PaddlePaddle 构建没有 paddle.distributed.fleet.utils.recompute",
                hint_zh="去掉 --checkpointing 运行",
            )
        warn: list[str] = list(self.plan.notes)
        framework_warnings: list[str] = []
        in_effect = self.plan.runs
        where = self._where()

        # What the device really supports, probed before building anything large.
        amp_active = True
        if self.plan.amp_level is not None:
            amp_active, caught = autocast_probe(self.plan.amp_dtype)
            framework_warnings += caught
        half_weights = self._half_weights(warn, framework_warnings, where)
        if half_weights is None and self.plan.half_weights is not None:
            in_effect = "fp32"

        with default_dtype(half_weights):
            self.model, source = build_model(
                workload.arch, checkpointing=workload.checkpointing and workload.is_training
            )
        self.params = trainable_param_count(self.model)
        attention = self._choose_attention(warn)
        if workload.is_training:
            self.model.train()
        else:
            self.model.eval()

        self.optimizer = None
        if workload.is_training:
            self.optimizer = make_optimizer(
                workload.optimizer, self.model.parameters(), multi_tensor=self.tuned
            )
        if self.plan.amp_level == "O2":
            amp_active = self._decorate_o2(framework_warnings) and amp_active
        if self.plan.amp_level is not None and not amp_active:
            in_effect = "fp32"
            device_word = "CPU" if self.kind == "cpu" else "this GPU"
            what = (
                "auto_cast is a no-op"
                if self.plan.amp_level == "O1"
                else "paddle.amp.decorate(level='O2') kept fp32 weights and auto_cast is a no-op"
            )
            warn.append(f"{where}: {self.plan.requested} requested, {what} on {device_word}; ran in fp32")
        if in_effect == "fp32" and self.plan.runs != "fp32":
            # tuned's change did not happen here; the line above says what ran instead
            warn = [line for line in warn if not line.startswith(TUNED_CHANGED)]

        self.scaler = None
        if self.plan.loss_scaling is not None:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self.scaler = paddle.amp.GradScaler(init_loss_scaling=self.plan.loss_scaling)
            framework_warnings += [str(w.message) for w in caught]

        self.batches = Batches(workload, options, self.index if self.kind == "gpu" else None)
        self._caches: list[list[paddle.Tensor]] | None = None
        self._next: paddle.Tensor | None = None
        self._pos = 0

        self.notes: dict[str, Any] = {
            "framework": "paddle",
            "framework_version": paddle.__version__,
            "device": "cpu" if self.kind == "cpu" else f"gpu:{self.index}",
            "model": source,
            "params": self.params,
            "precision_requested": self.plan.requested,
            "precision_in_effect": in_effect,
            "amp_level": self.plan.amp_level,
            "amp_dtype": self.plan.amp_dtype,
            "weights_dtype": str(next(iter(self.model.parameters())).dtype).replace("paddle.", ""),
            "loss_scaling": self.plan.loss_scaling,
            "optimizer": (
                optimizer_note(workload.optimizer, self.optimizer, multi_tensor=self.tuned)
                if self.optimizer is not None
                else None
            ),
            "master_weights": bool(self.plan.master_weight and in_effect != "fp32"),
            "checkpointing": bool(workload.checkpointing and workload.is_training),
            "attention": attention,
            "data": self.batches.desc,
            "input_pipeline": self.batches.pipeline,
            "input_batches_prepared": len(self.batches.prepared),
            "input_batch_bytes": self.batches.batch_bytes,
            "warnings": _unique(warn),
            "framework_warnings": _unique(framework_warnings),
        }
        if self.batches.dataset_size is not None:
            self.notes["dataset_size"] = self.batches.dataset_size
        if workload.is_generation:
            self.notes["kv_cache"] = "per layer [batch, tokens, kv_heads, head_dim], grown by concatenation"
            self.notes["decode_includes_prefill"] = True
            self.notes["decoding"] = (
                "greedy, counted like transformers' generate(max_new_tokens=n): "
                "a prefill picks the first token, then n-1 single-token forwards"
            )

    # -- setup helpers ----------------------------------------------------------------------
    def _half_weights(self, warn: list[str], framework_warnings: list[str], where: str) -> str | None:
        """The dtype to create the weights in (generation in 16 bit), or None where the device
        has no matmul kernel for it and the model runs in fp32 (said in `warn`)."""
        half_weights = self.plan.half_weights
        if half_weights is None:
            return None
        reason = half_kernels_probe(half_weights)
        if reason is None:
            return half_weights
        device_word = "CPU" if self.kind == "cpu" else "this GPU"
        warn.append(
            f"{where}: {self.plan.requested} requested, no {half_weights} matmul kernel "
            f"on {device_word}; ran in fp32"
        )
        framework_warnings.append(reason)
        return None

    def _decorate_o2(self, framework_warnings: list[str]) -> bool:
        """AMP O2: 16-bit weights through paddle.amp.decorate (with fp32 master weights in the
        optimizer when training); whether the weights really became 16 bit."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if self.optimizer is not None:
                self.model, self.optimizer = paddle.amp.decorate(
                    models=self.model,
                    optimizers=self.optimizer,
                    level="O2",
                    dtype=self.plan.amp_dtype,
                    master_weight=self.plan.master_weight,
                )
            else:
                self.model = paddle.amp.decorate(models=self.model, level="O2", dtype=self.plan.amp_dtype)
        framework_warnings += [str(w.message) for w in caught]
        weight = next(p for p in self.model.parameters() if len(p.shape) >= 2)
        return weight.dtype == getattr(paddle, self.plan.amp_dtype)

    def _where(self) -> str:
        if not paddle.device.is_compiled_with_cuda():
            return "PaddlePaddle CPU build"
        if self.kind == "cpu":
            return "PaddlePaddle on CPU"
        return f"PaddlePaddle on {paddle.device.cuda.get_device_name(self.index)}"

    def _choose_attention(self, warn: list[str]) -> str | None:
        """'sdpa' for fused attention on a GPU (always under tuned); the explicit form elsewhere.

        On CPU Paddle's scaled_dot_product_attention has no fused kernel (it falls back to
        the same math as the explicit form), so the explicit form is used and noted.
        """
        if self.workload.is_resnet:
            return None
        fused = self.workload.attention == "fused" or self.tuned
        impl = "sdpa" if fused and self.kind == "gpu" else "eager"
        self.model.body.set_attention(impl)
        if impl == "sdpa" and self.workload.attention != "fused":
            warn.append(
                "tuned uses fused attention (scaled_dot_product_attention); "
                "the workload asked for eager attention"
            )
        if impl == "eager" and self.workload.attention == "fused":
            return "eager (fused attention requested; scaled_dot_product_attention has no fused CPU kernel)"
        return "paddle.nn.functional.scaled_dot_product_attention" if impl == "sdpa" else "eager"

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.plan.amp_level is None:
            return contextlib.nullcontext()
        return paddle.amp.auto_cast(enable=True, level=self.plan.amp_level, dtype=self.plan.amp_dtype)

    # -- the work ---------------------------------------------------------------------------
    def _forward(self, batch: dict[str, Any]) -> paddle.Tensor:
        """Logits for a batch (the loss is computed from them in fp32)."""
        if self.workload.is_resnet:
            return self.model(batch["pixel_values"])
        if self.workload.family == "encoder":
            return self.model(batch["input_ids"], batch.get("token_type_ids"), batch.get("attention_mask"))
        return self.model(batch["input_ids"])

    def _loss(self, batch: dict[str, Any], logits: paddle.Tensor) -> paddle.Tensor:
        logits = logits.astype("float32")
        if self.workload.family == "decoder":
            ids = batch["input_ids"]
            vocab = logits.shape[-1]
            return F.cross_entropy(logits[:, :-1].reshape([-1, vocab]), ids[:, 1:].reshape([-1]))
        return F.cross_entropy(logits, batch["labels"])

    def step(self) -> None:
        if self.workload.is_generation:
            self.decode(int(self.workload.new_tokens or 1))
            return
        batch = self.batches.next()
        if not self.workload.is_training:
            with paddle.no_grad(), self._autocast():
                self._forward(batch)
            return
        with self._autocast():
            loss = self._loss(batch, self._forward(batch))
        if self.scaler is not None:
            scaled = self.scaler.scale(loss)
            scaled.backward()
            self.scaler.minimize(self.optimizer, scaled)
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.clear_grad()

    def prefill(self) -> None:
        """The prompt through the model into a fresh KV cache; its last position picks the first token."""
        if not self.workload.is_generation:
            raise TypeError("this workload does not generate")
        prompt = self.batches.next()["input_ids"]
        with paddle.no_grad(), self._autocast():
            self._caches = self.model.new_cache()
            logits = self.model(prompt, self._caches, start=0, last_only=True)
            self._next = paddle.argmax(logits[:, -1], axis=-1, keepdim=True)
        self._pos = prompt.shape[1]

    def decode(self, new_tokens: int) -> None:
        """A whole greedy generation of `new_tokens` tokens, counted as transformers' generate counts
        them: the prefill picks the first, then new_tokens - 1 single-token forwards through the cache.

        Including the prefill (notes: decode_includes_prefill) makes Paddle's and PyTorch's
        tokens per second the same quantity; the runner times prefill() on its own and
        subtracts it for the decode rate.
        """
        if not self.workload.is_generation:
            raise TypeError("this workload does not generate")
        self.prefill()
        self._continue(new_tokens - 1)

    def _continue(self, steps: int) -> None:
        """Single-token forwards after a prefill, each feeding its argmax to the next."""
        if self._caches is None or self._next is None:
            raise RuntimeError("decoding needs prefill() first")
        with paddle.no_grad(), self._autocast():
            for _ in range(steps):
                logits = self.model(self._next, self._caches, start=self._pos, last_only=True)
                self._next = paddle.argmax(logits[:, -1], axis=-1, keepdim=True)
                self._pos += 1

    @property
    def cached_tokens(self) -> int:
        """Tokens held in the KV cache (prompt plus decoded), 0 before prefill."""
        return int(self._caches[0][0].shape[1]) if self._caches and self._caches[0] else 0

    # -- clocks and memory ------------------------------------------------------------------
    def sync(self) -> None:
        if self.kind == "gpu":
            paddle.device.cuda.synchronize(self.index)

    def reset_peak(self) -> None:
        if self.kind == "gpu":
            paddle.device.cuda.reset_max_memory_allocated(self.index)
            paddle.device.cuda.reset_max_memory_reserved(self.index)

    def memory(self) -> dict[str, int | None]:
        """Paddle's allocator statistics on GPU; None on CPU, where the runner reads peak RSS."""
        if self.kind != "gpu":
            return {"peak_allocated": None, "peak_reserved": None, "allocated": None, "reserved": None}
        cuda = paddle.device.cuda
        return {
            "peak_allocated": int(cuda.max_memory_allocated(self.index)),
            "peak_reserved": int(cuda.max_memory_reserved(self.index)),
            "allocated": int(cuda.memory_allocated(self.index)),
            "reserved": int(cuda.memory_reserved(self.index)),
        }

    def close(self) -> None:
        self._caches = None
        self._next = None
        self.batches = None  # type: ignore[assignment]
        self.scaler = None
        self.optimizer = None
        self.model = None  # type: ignore[assignment]
        if self.kind == "gpu":
            paddle.device.cuda.empty_cache()


def _unique(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))


def open_session(workload: Workload, options: RunOptions) -> PaddleSession:
    return PaddleSession(workload, options)
