"""CUDA autocast's casts on the meta device, where torch.autocast does not run.

torch.autocast works on a dispatch key that only CUDA (and CPU, with another op list) tensors
carry, so a meta-device trace of an AMP training step (training_replay.py) would run every
matmul in FP32 and miss the 16-bit copies that are the step's memory. This mode re-applies
CUDA autocast's policy (ATen's autocast_mode.h: AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
AT_FORALL_FP32_SET_OPT_DTYPE) at the torch-function level, above autograd as autocast itself
sits, so autograd records each cast and saves the copies the real step saves:

- matmul-like operators take their floating inputs in the 16-bit dtype; a cast of a leaf tensor
  that requires grad (a parameter) is cached while the forward runs, as autocast's weight cache
  is, and the cache is dropped when the forward returns (autocast clears it when its outermost
  region exits); casts outside the forward (checkpointing's recompute in the backward, which
  runs under an autocast region of its own per block) are made afresh each call: the step's
  backward runs through `backward()`, with the mode on for them;
- the FP32 operators (norms, pow, rsqrt, exp, log, losses, ...) take 16-bit inputs in FP32;
- softmax, log_softmax, sum, cumsum, prod without a dtype return FP32 for a 16-bit input.

It sees Python-level calls only: a function a model reaches through a C++ composite is cast
where its Python entry point is (F.cross_entropy's inputs, already FP32 in transformers' loss).
While it is on, torch.autocast is a stand-in whose `enabled=False` regions turn the casts off,
as the real one does (peft folds its expert adapters into the weights in their own dtype).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

# Python names (functions and Tensor methods) of autocast's CUDA lists.
LOWER_PRECISION = frozenset(
    {
        "linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm", "addbmm",
        "addmv", "addr", "mv", "einsum", "chain_matmul", "prelu", "conv1d", "conv2d", "conv3d",
        "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "scaled_dot_product_attention",
    }
)  # fmt: skip
FP32 = frozenset(
    {
        "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
        "reciprocal", "rsqrt", "sinh", "tan", "pow", "__pow__", "__rpow__", "softplus",
        "layer_norm", "rms_norm", "group_norm", "cosine_similarity", "nll_loss", "kl_div",
        "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "binary_cross_entropy_with_logits",
        "logsumexp", "cdist", "dist",
    }
)  # fmt: skip
FP32_UNLESS_DTYPE = frozenset({"softmax", "log_softmax", "sum", "cumsum", "cumprod", "prod"})
LOW = (torch.float16, torch.bfloat16)


class MetaAutocast(TorchFunctionMode):
    """CUDA autocast to `dtype` for meta tensors (module docstring). `forward()` marks the region
    whose parameter casts are cached."""

    def __init__(self, dtype: torch.dtype = torch.bfloat16, *, on: bool = True) -> None:
        """`on=False`: no casts (a 16-bit or FP32 step), only torch.autocast's stand-in."""
        super().__init__()
        self.dtype = dtype
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None
        self.enabled = [on]  # torch.autocast(enabled=...) regions inside, innermost last

    def __enter__(self) -> MetaAutocast:
        # code that turns autocast off for a region (peft's expert LoRA fold, rotary tables) calls
        # torch.autocast(device_type=..., enabled=False), which refuses the meta device: a stand-in
        # that switches this mode instead, while the mode is on
        # (and torch.is_autocast_enabled says what the mode does, as checkpointing asks it which
        # state its recompute restores)
        self._saved_autocast = (torch.autocast, torch.is_autocast_enabled)
        torch.autocast = torch.amp.autocast = _region(self)  # type: ignore[misc,assignment]
        torch.is_autocast_enabled = lambda *_: self.enabled[-1]  # type: ignore[assignment]
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        autocast, torch.is_autocast_enabled = self._saved_autocast  # type: ignore[assignment]
        torch.autocast = torch.amp.autocast = autocast  # type: ignore[misc]
        super().__exit__(*exc)

    @contextlib.contextmanager
    def forward(self) -> Iterator[None]:
        self._cache = {}
        try:
            yield
        finally:
            self._cache = None

    def lower(self, t: Any) -> Any:
        """`t` as a matmul-like operator takes it: an FP32 tensor in the 16-bit dtype (as it is
        where the casts are off)."""
        if not self.enabled[-1]:
            return t
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
            return t
        cacheable = self._cache is not None and t.is_leaf and t.requires_grad
        if cacheable and id(t) in self._cache:
            return self._cache[id(t)][1]
        cast = t.to(self.dtype)
        if cacheable:
            self._cache[id(t)] = (t, cast)  # the source kept alive: its id stays its own
        return cast

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if not self.enabled[-1]:
            return func(*args, **kwargs)
        if name in LOWER_PRECISION:
            args, kwargs = tree_map(self.lower, (args, kwargs))
        elif name in FP32:
            args, kwargs = tree_map(_to_fp32, (args, kwargs))
        elif name in FP32_UNLESS_DTYPE and kwargs.get("dtype") is None:
            first = args[0] if args else kwargs.get("input")
            if isinstance(first, torch.Tensor) and first.dtype in LOW:
                kwargs = {**kwargs, "dtype": torch.float32}
        return func(*args, **kwargs)


def _region(mode: MetaAutocast) -> type:
    """A torch.autocast stand-in whose regions turn `mode`'s casts on or off (`enabled`)."""

    class Region:
        def __init__(
            self, device_type: str = "cuda", dtype: Any = None, enabled: bool = True, **_: Any
        ) -> None:
            self.on = bool(enabled) and mode.enabled[0]  # a step without autocast stays without

        def __enter__(self) -> None:
            mode.enabled.append(self.on)

        def __exit__(self, *exc: Any) -> None:
            mode.enabled.pop()

        def __call__(self, fn: Any) -> Any:  # used as a decorator
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return fn(*args, **kwargs)

            return wrapped

    return Region


def backward(loss: torch.Tensor) -> None:
    """`loss.backward()` with the active modes kept on: Tensor.backward hands itself to a torch
    function mode, which would run the whole backward with the mode off."""
    engine = torch.autograd.variable.Variable._execution_engine
    engine.run_backward(
        (loss,), (torch.ones_like(loss),), False, False, (), allow_unreachable=True, accumulate_grad=True
    )


def _to_fp32(t: Any) -> Any:
    if isinstance(t, torch.Tensor) and t.dtype in LOW:
        return t.float()
    return t
