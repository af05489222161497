"""Torch sessions: a built workload on one device, stepped by the measurement runner.

Three kinds, chosen by what the workload does: TrainSession (forward, loss, backward, optimizer
step), InferSession (eval-mode forward under inference_mode) and GenerateSession (prefill and
greedy decoding through transformers' `generate`). Which code path builds them is chosen by the
exec mode: "default" is the code most users write (stock modules, eager execution, framework
defaults, `open_default` here); the table in fitbench.backends.torch.backend names each mode's
factory ("tuned": fitbench.backends.torch.tuned.open_tuned).
"""

from __future__ import annotations

import gc
import inspect
from typing import Any

import torch
from torch import nn

from fitbench.backends.base import RunOptions, Session
from fitbench.backends.torch.data import BatchSource, batch_source, prompt_ids
from fitbench.backends.torch.models import build_model, count_parameters, resnet_forward
from fitbench.backends.torch.precision import PrecisionPlan, apply_math_flags, plan_precision
from fitbench.errors import FitbenchError
from fitbench.workloads.workload import Workload

#: The usual learning rates of training scripts, per workload optimizer. Every exec mode uses
#: these, so modes differ only in how the optimizer runs (foreach, fused), never in what it does.
LEARNING_RATES: dict[str, float] = {"adam": 1e-4, "adamw": 2e-5, "sgd": 0.01, "momentum": 0.01}
SGD_MOMENTUM = 0.9  # the "momentum" optimizer is SGD with this momentum

#: torch.optim's keyword for each implementation (Workload.optimizer_impl): foreach is what torch
#: picks by itself when every parameter is on CUDA; fitbench asks for it explicitly so a CPU run
#: uses the same code path and the estimate's step temporaries describe what ran.
OPTIMIZER_IMPL_KWARGS: dict[str, dict[str, bool]] = {
    "foreach": {"foreach": True},
    "fused": {"fused": True},
    "for-loop": {"foreach": False},
}


def make_optimizer(name: str, params: list[nn.Parameter], impl: str = "foreach") -> torch.optim.Optimizer:
    """The workload's optimizer with the implementation asked for (foreach, fused or for-loop)."""
    kwargs: dict[str, Any] = {"lr": LEARNING_RATES[name], **OPTIMIZER_IMPL_KWARGS[impl]}
    if name == "adam":
        return torch.optim.Adam(params, **kwargs)
    if name == "adamw":
        return torch.optim.AdamW(params, **kwargs)
    return torch.optim.SGD(params, momentum=SGD_MOMENTUM if name == "momentum" else 0.0, **kwargs)


def optimizer_note(optimizer: torch.optim.Optimizer) -> str:
    """The optimizer as the notes name it, with its implementation: 'Adam(fused)'."""
    group = optimizer.param_groups[0]
    impl = "fused" if group.get("fused") else "foreach" if group.get("foreach") else "for-loop"
    return f"{type(optimizer).__name__}({impl})"


def resolve_device(device: str) -> torch.device:
    """A torch.device for 'cpu' / 'cuda' / 'cuda:N', or one clear line saying why it cannot be used."""
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise FitbenchError(
            f"unknown device '{device}'",
            "use cpu, cuda or cuda:N",
            message_zh=f"未知的设备 '{device}'",
            hint_zh="请使用 cpu、cuda 或 cuda:N",
        ) from exc
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise FitbenchError(
            f"the torch backend measures on cpu or cuda, not '{device}'",
            "use cpu, cuda or cuda:N",
            message_zh=f"torch 后端只能在 cpu 或 cuda 上实测,不支持 '{device}'",
            hint_zh="请使用 cpu、cuda 或 cuda:N",
        )
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
        raise FitbenchError(
            f"no CUDA GPU found (torch {torch.__version__}, {build}, sees none)",
            "use --device cpu",
            message_zh=f"没有找到 CUDA GPU(torch {torch.__version__},{build},未检测到任何 GPU)",
            hint_zh="请使用 --device cpu",
        )
    index = 0 if dev.index is None else dev.index
    if index >= torch.cuda.device_count():
        raise FitbenchError(
            f"no CUDA device {index}: torch sees {torch.cuda.device_count()}",
            f"use --device cuda:0 … cuda:{torch.cuda.device_count() - 1}",
            message_zh=f"没有 CUDA 设备 {index}:torch 检测到 {torch.cuda.device_count()} 块",
            hint_zh=f"请使用 --device cuda:0 … cuda:{torch.cuda.device_count() - 1}",
        )
    return torch.device("cuda", index)


def open_device(device: str) -> torch.device:
    """`resolve_device`, then make a GPU the current CUDA device.

    Every exec mode opens its device this way: code that allocates on "cuda" without an index
    (streams, CUDA graphs, library workspaces) must land on the device being measured, not GPU 0.
    """
    dev = resolve_device(device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    return dev


def warn_param_mismatch(warnings: list[str], params: int, workload: Workload) -> None:
    """Append a warning when the built model's parameter count differs from the workload's.

    The estimate is computed from the workload's numbers, so a measurement of a model of another
    size would be compared against the wrong prediction; every exec mode says so the same way.
    """
    if params != workload.param_count():
        warnings.append(
            f"the built model has {params:,} parameters; the workload describes {workload.param_count():,}"
        )


def precision_notes(plan: PrecisionPlan, *, params: int, warnings: list[str]) -> dict[str, Any]:
    """The notes that say what a built model ran in, shared by every exec mode's step sessions.

    One place for these keys and their formatting ("bfloat16", not "torch.bfloat16") keeps the
    records of different exec modes comparable.
    """
    return {
        "precision_in_effect": plan.in_effect,
        "warnings": warnings,
        "params": params,
        "param_dtype": str(plan.param_dtype).removeprefix("torch."),
        "autocast_dtype": str(plan.autocast_dtype).removeprefix("torch.") if plan.autocast_dtype else None,
    }


def note_cpu_threads(notes: dict[str, Any], device: torch.device) -> None:
    """Record torch's intra-op thread count on a CPU: CPU speed depends on it as much as on the chip."""
    if device.type == "cpu":
        notes["cpu_threads"] = torch.get_num_threads()


def note_dataset_size(notes: dict[str, Any], data: BatchSource) -> None:
    """Record the real dataset's size when --data gave one (synthetic batches have none)."""
    if data.dataset_size:
        notes["dataset_size"] = data.dataset_size


def note_input_pipeline(notes: dict[str, Any], data: BatchSource) -> None:
    """Record how inputs reach the device (fitbench.backends.input_pipeline) and how many distinct
    prepared batches the steps cycle through."""
    notes["input_pipeline"] = data.pipeline
    notes["input_batches_prepared"] = data.prepared_batches
    notes["input_batch_bytes"] = data.batch_bytes


def backward_and_step(
    loss: torch.Tensor, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None
) -> None:
    """Backward and optimizer step, through the GradScaler when fp16 AMP needs one.

    The scaler multiplies the loss so small fp16 gradients do not underflow, then unscales them
    and skips the step on inf/NaN; without a scaler this is the plain backward and step.
    """
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()


class TorchSession(Session):
    """What every torch session shares: device synchronisation and allocator statistics."""

    def __init__(
        self,
        *,
        workload: Workload,
        options: RunOptions,
        device: torch.device,
        plan: PrecisionPlan,
        model: nn.Module,
        notes: dict[str, Any],
    ) -> None:
        self.workload = workload
        self.options = options
        self.device = device
        self.plan = plan
        self.model = model
        self.notes = notes

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def reset_peak(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def memory(self) -> dict[str, int | None]:
        if self.device.type != "cuda":
            return {"peak_allocated": None, "peak_reserved": None, "allocated": None, "reserved": None}
        return {
            "peak_allocated": int(torch.cuda.max_memory_allocated(self.device)),
            "peak_reserved": int(torch.cuda.max_memory_reserved(self.device)),
            "allocated": int(torch.cuda.memory_allocated(self.device)),
            "reserved": int(torch.cuda.memory_reserved(self.device)),
        }

    def close(self) -> None:
        self.model = None  # type: ignore[assignment]
        release_cached_blocks(self.device)


def release_cached_blocks(device: torch.device) -> None:
    """Collect garbage, then hand the caching allocator's free blocks back to the driver (on a
    GPU): what a compile, a warm-up or a closed session freed stops counting against the process,
    and a CUDA graph captured next gets the memory for its own pool."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def enable_checkpointing(model: nn.Module) -> None:
    """transformers' activation checkpointing (renamed in 5.x; the old name still works)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


class TrainSession(TorchSession):
    """One training step: zero_grad, forward and loss (under autocast for AMP), backward, step."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        w = self.workload
        self.model.train()
        # Only what trains: with LoRA the frozen base has no gradients and no optimizer state.
        self.optimizer = make_optimizer(
            w.optimizer, [p for p in self.model.parameters() if p.requires_grad], w.optimizer_impl
        )
        self.micro_batches = 0
        self.scaler = torch.amp.GradScaler(self.device.type) if self.plan.grad_scaler else None
        if w.checkpointing and not w.is_resnet:
            enable_checkpointing(self.model)
        data = batch_source(w, self.options, self.device, self.plan.input_dtype)
        self.next_batch = data.next_batch
        self.notes.update(
            data_source=data.description,
            optimizer=optimizer_note(self.optimizer),
            grad_scaler=self.scaler is not None,
            checkpointing=w.checkpointing,
            grad_accum=w.grad_accum,
        )
        note_dataset_size(self.notes, data)
        note_input_pipeline(self.notes, data)

    def _loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        w = self.workload
        if w.is_resnet:
            logits = resnet_forward(self.model, batch["pixel_values"], checkpointing=w.checkpointing)
            return nn.functional.cross_entropy(logits, batch["labels"])
        if w.family == "encoder":
            return self.model(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                token_type_ids=batch["token_type_ids"],
                labels=batch["labels"],
            ).loss
        ids = batch["input_ids"]  # causal LM: predict each next token of the sequence itself
        return self.model(input_ids=ids, labels=ids, use_cache=False).loss

    def step(self) -> None:
        """One micro-batch. With grad_accum N, gradients are set to None before the first of N
        micro-batches and the optimizer steps after the last: the timed loop's average step is
        one micro-batch with 1/N of an update, as the estimate counts it."""
        n = self.workload.grad_accum
        batch = self.next_batch()
        if self.micro_batches % n == 0:
            self.optimizer.zero_grad(set_to_none=True)
        with self.plan.autocast(self.device):
            loss = self._loss(batch)
        self.micro_batches += 1
        if n == 1:
            backward_and_step(loss, self.optimizer, self.scaler)
            return
        loss = loss / n
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        if self.micro_batches % n == 0:
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()


class InferSession(TorchSession):
    """One classification forward pass in eval mode under torch.inference_mode."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model.eval()
        data = batch_source(self.workload, self.options, self.device, self.plan.input_dtype)
        self.next_batch = data.next_batch
        self.notes["data_source"] = data.description
        note_dataset_size(self.notes, data)
        note_input_pipeline(self.notes, data)

    def step(self) -> None:
        batch = self.next_batch()
        with torch.inference_mode(), self.plan.autocast(self.device):
            if self.workload.is_resnet:
                self.model(batch["pixel_values"])
            else:
                self.model(
                    input_ids=batch["input_ids"],
                    attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"],
                )


class GenerateSession(TorchSession):
    """Greedy generation the way most users write it: `model.generate(...)` with the KV cache.

    `decode(n)` is the whole generate call (its own prefill included), so the runner derives
    decode speed by subtracting the separately timed `prefill()`.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model.eval()
        self.input_ids = prompt_ids(self.workload, self.device, self.options.seed)
        self.attention_mask = torch.ones_like(self.input_ids)
        params = inspect.signature(self.model.forward).parameters
        # generate() computes logits for the last prompt position only; the timed prefill does too.
        self.prefill_kwargs: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        self.notes.update(
            decode_includes_prefill=True,
            data_source="random prompt token ids",
            generation="transformers generate(do_sample=False, use_cache=True)",
        )
        self._checked = False

    def prefill(self) -> None:
        with torch.inference_mode(), self.plan.autocast(self.device):
            self.model(
                input_ids=self.input_ids,
                attention_mask=self.attention_mask,
                use_cache=True,
                **self.prefill_kwargs,
            )

    def decode(self, new_tokens: int) -> None:
        with torch.inference_mode(), self.plan.autocast(self.device):
            out = self.model.generate(
                input_ids=self.input_ids,
                attention_mask=self.attention_mask,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                use_cache=True,
            )
        if not self._checked:
            produced = int(out.shape[1] - self.input_ids.shape[1])
            self.notes["generated_tokens"] = produced
            if produced != new_tokens:
                self.notes.setdefault("warnings", []).append(
                    f"generate produced {produced} new tokens instead of {new_tokens}"
                )
            self._checked = True

    def step(self) -> None:
        self.decode(int(self.workload.new_tokens or 1))


def _build(workload: Workload, device: torch.device, plan: PrecisionPlan) -> tuple[nn.Module, dict[str, Any]]:
    if workload.peft == "qlora":
        from fitbench.backends.torch.peft_support import quantize_for_qlora

        return quantize_for_qlora(
            workload, device=device, dtype=plan.param_dtype, compute_dtype=plan.autocast_dtype
        )
    if plan.quant_bits is not None:
        from fitbench.backends.torch.quant import build_quantized

        return build_quantized(workload, bits=plan.quant_bits, device=device)
    return build_model(workload, device=device, dtype=plan.param_dtype)


def open_default(workload: Workload, options: RunOptions) -> Session:
    """The default exec mode: stock modules, eager execution, torch and transformers defaults."""
    device = open_device(options.device)
    plan = plan_precision(workload.precision, device, training=workload.is_training)
    math_flags = apply_math_flags(plan, device)
    torch.manual_seed(options.seed)
    model, notes = _build(workload, device, plan)
    params = count_parameters(model)  # the base model, before any adapters
    if workload.peft:
        from fitbench.backends.torch.peft_support import apply_lora, lora_summary

        model = apply_lora(model, workload)
        notes["peft"] = lora_summary(model)
    warnings = [*plan.warnings, *notes.pop("warnings", [])]
    warn_param_mismatch(warnings, params, workload)
    notes.update(precision_notes(plan, params=params, warnings=warnings))
    if math_flags:
        notes["math_flags"] = math_flags
    note_cpu_threads(notes, device)
    kind: type[TorchSession]
    if workload.is_generation:
        kind = GenerateSession
    elif workload.is_training:
        kind = TrainSession
    else:
        kind = InferSession
    return kind(workload=workload, options=options, device=device, plan=plan, model=model, notes=notes)
