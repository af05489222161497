"""Sixteen-bit matmul weights with FP32 master copies: mixed precision without autocast's casts.

Under autocast every Linear casts its FP32 weight (and bias) to 16 bits in the forward, and the
backward casts the 16-bit weight gradient back to the FP32 `.grad`: 6 + 6 bytes a parameter a
step that compute nothing (BERT-base: 1.0 GB, ~0.25 ms of an H200's bandwidth, and a kernel per
cast). Megatron-LM's and DeepSpeed's bf16 optimizers keep the matmul weights in 16 bits in the
model and FP32 "main" copies in the optimizer instead, which is what the tuned step does here:

* the model's Linear weights and biases are bf16 (autocast casts nothing: they already are);
* the optimizer holds their FP32 masters and Adam moments, reads the bf16 gradients, updates the
  masters in FP32 and writes their bf16 rounding back into the model, in one pass a tensor
  (compiled: inductor fuses each tensor's update into one kernel, combo kernels put them side
  by side), 28 bytes a parameter as fused AdamW over FP32 weights moves.

The numbers are autocast's: its cast of an FP32 weight is the round-to-nearest bf16 value the
update writes here, and the weight gradient it casts up to FP32 is the same bf16 gradient read
here. Parameters that any other module shares (a head tied to the embedding) stay FP32 with the
workload's own optimizer, as do embeddings and norms (autocast never casts those).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

#: the modules whose parameters autocast casts to 16 bits at every use: nn.Linear, and
#: transformers' Conv1D (GPT-2's and GPT-BigCode-style projections: addmm over its weight), by name
CAST_MODULES = (nn.Linear,)
CAST_MODULE_NAMES = ("Conv1D",)
#: torch.optim.AdamW's default weight decay, which the tuned AdamW keeps
ADAMW_WEIGHT_DECAY = 0.01
#: the compiled update's tensors side by side in combo kernels (False: one kernel a tensor)
UPDATE_COMBO_KERNELS = True


def sixteen_bit_candidates(model: nn.Module) -> list[nn.Parameter]:
    """The trainable FP32 parameters that only CAST_MODULES (or CAST_MODULE_NAMES) use (a weight
    shared with an embedding, as a tied LM head's, is left out: the lookup would turn 16-bit), outside
    the modules a transformers model keeps in FP32 (`_keep_in_fp32_modules`: their code computes
    in FP32 with autocast off)."""
    keep = [*(getattr(model, "_keep_in_fp32_modules", None) or ())]
    keep += [*(getattr(model, "_keep_in_fp32_modules_strict", None) or ())]
    users: dict[int, list[nn.Module]] = {}
    order: list[nn.Parameter] = []
    kept_fp32: set[int] = set()
    for name, module in model.named_modules():
        fp32 = any(key in name.split(".") for key in keep)
        for param in module.parameters(recurse=False):
            if id(param) not in users:
                users[id(param)] = []
                order.append(param)
            users[id(param)].append(module)
            if fp32:
                kept_fp32.add(id(param))
    return [
        p
        for p in order
        if p.requires_grad
        and p.dtype == torch.float32
        and id(p) not in kept_fp32
        and all(_cast_by_autocast(m) for m in users[id(p)])
    ]


def _cast_by_autocast(module: nn.Module) -> bool:
    return isinstance(module, CAST_MODULES) or type(module).__name__ in CAST_MODULE_NAMES


def adam_scalars(
    step: torch.Tensor, *, lr: float, beta1: float, beta2: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's count advanced and its (step size, sqrt of the second bias correction) as FP32
    scalars on the device, so a captured step counts its replays. The corrections are taken in
    FP64, as torch's AdamW takes them (in FP32, 1 - 0.999 is 1.3e-5 off, which the first steps'
    update would carry), outside the per-element update, which reads them once a program."""
    step.add_(1)
    count = step.double()
    step_size = (lr / (1 - torch.pow(beta1, count))).float()
    bias2_sqrt = (1 - torch.pow(beta2, count)).sqrt().float()
    return step_size, bias2_sqrt


def adam_apply(
    weights: list[torch.Tensor],
    masters: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    step_size: torch.Tensor,
    bias2_sqrt: torch.Tensor,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
) -> None:
    """One AdamW update (torch.optim.AdamW's arithmetic; weight_decay 0 is Adam) of FP32 masters
    from 16-bit gradients, then each master's 16-bit rounding into its weight: per tensor, one
    pass that reads the gradient, master and moments and writes master, moments and weight."""
    tensors = zip(weights, masters, grads, exp_avgs, exp_avg_sqs, strict=True)
    for weight, master, grad, exp_avg, exp_avg_sq in tensors:
        g = grad.float()
        if weight_decay:
            master.mul_(1 - lr * weight_decay)
        exp_avg.lerp_(g, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        master.sub_(step_size * exp_avg / (exp_avg_sq.sqrt() / bias2_sqrt + eps))
        weight.copy_(master)


class MasterWeightAdam:
    """Adam / AdamW over FP32 masters of 16-bit weights (the weights are converted here).

    The update runs eagerly until compile() routes it through torch.compile (inductor on a GPU:
    one fused kernel a tensor, combo kernels side by side); uncompile() goes back."""

    def __init__(
        self,
        params: list[nn.Parameter],
        *,
        lr: float,
        weight_decay: float,
        dtype: torch.dtype = torch.bfloat16,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = params
        self.masters = [p.detach().clone() for p in params]
        for p in params:
            p.data = p.data.to(dtype)
        self.exp_avgs = [torch.zeros_like(m) for m in self.masters]
        self.exp_avg_sqs = [torch.zeros_like(m) for m in self.masters]
        device = params[0].device if params else torch.device("cpu")
        self.step_count = torch.zeros((), dtype=torch.float32, device=device)
        self.hyper = {"lr": lr, "beta1": betas[0], "beta2": betas[1], "eps": eps}
        self.hyper["weight_decay"] = weight_decay
        self._apply: Callable[..., None] = adam_apply

    def compile(self, backend: str | Callable[..., Any], options: dict[str, Any] | None = None) -> None:
        """Compile the update at its next call with `backend` (and inductor's `options`, with
        UPDATE_COMBO_KERNELS deciding combo kernels)."""
        extra = {"options": {**options, "combo_kernels": UPDATE_COMBO_KERNELS}} if options else {}
        self._apply = torch.compile(adam_apply, backend=backend, dynamic=False, **extra)

    def uncompile(self) -> None:
        self._apply = adam_apply

    @property
    def numel(self) -> int:
        return sum(p.numel() for p in self.params)

    def step(self) -> None:
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        with torch.no_grad():
            self._step(live)

    def _step(self, live: list[int]) -> None:
        hyper = self.hyper
        step_size, bias2_sqrt = adam_scalars(
            self.step_count, lr=hyper["lr"], beta1=hyper["beta1"], beta2=hyper["beta2"]
        )
        self._apply(
            [self.params[i] for i in live],
            [self.masters[i] for i in live],
            [self.params[i].grad for i in live],
            [self.exp_avgs[i] for i in live],
            [self.exp_avg_sqs[i] for i in live],
            step_size,
            bias2_sqrt,
            **hyper,
        )

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()


class SplitOptimizer:
    """The step's two optimizers as one: the workload's fused optimizer for the FP32 parameters
    and MasterWeightAdam for the 16-bit ones (what backward_and_step and the session call)."""

    def __init__(self, fp32: torch.optim.Optimizer | None, sixteen_bit: MasterWeightAdam) -> None:
        self.fp32 = fp32
        self.sixteen_bit = sixteen_bit

    def step(self) -> None:
        if self.fp32 is not None:
            self.fp32.step()
        self.sixteen_bit.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        if self.fp32 is not None:
            self.fp32.zero_grad(set_to_none=set_to_none)
        self.sixteen_bit.zero_grad(set_to_none=set_to_none)
