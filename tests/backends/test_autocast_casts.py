"""The estimator's count of autocast casts equals the casts the real models issue.

Each cast that autocast issues from C++ costs the host `cast_host_share` of an operation, so
the speed model needs their number per step: `Kernel.cast_ops` in resnet_cost and
transformer_cost. Here the models fitbench runs (its torch backend's builders, tiny configs)
take one forward pass under CPU autocast with a dispatch mode that counts every FP32 to BF16
copy of a parameter or of an activation that feeds a Linear (or the stem's image). CPU and
CUDA autocast agree on what matters here: Linear and convolution run in 16 bit, LayerNorm in
FP32; CPU's SDPA math path adds casts of the 4-D per-head tensors (queries, scores), which
CUDA's fused kernels do not make and which the count leaves out.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from fitbench.backends.torch.models import build_model  # noqa: E402
from fitbench.estimate import resnet_cost, transformer_cost  # noqa: E402
from fitbench.workloads.presets import get_workload  # noqa: E402

pytestmark = pytest.mark.torch


class CastCounter(TorchDispatchMode):
    """Counts aten._to_copy from FP32 to BF16 of parameters and of tensors `width` wide."""

    def __init__(self, params: list[torch.Tensor], widths: set[int]) -> None:
        super().__init__()
        self.param_ptrs = {p.data_ptr() for p in params}
        self.widths = widths
        self.counted = 0
        self.left_out: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (
            func.overloadpacket is torch.ops.aten._to_copy
            and args[0].dtype == torch.float32
            and kwargs.get("dtype") == torch.bfloat16
        ):
            t = args[0]
            if t.data_ptr() in self.param_ptrs or t.shape[-1] in self.widths:
                self.counted += 1
            else:
                self.left_out.append(tuple(t.shape))
        return func(*args, **kwargs)


def modelled_casts(kernels) -> float:
    return sum(k.cast_ops * k.count for k in kernels)


@pytest.mark.parametrize("name", ["bert-base-imdb", "llm-6b"])
@pytest.mark.parametrize("layers", [1, 3])
def test_transformer_casts_match_the_model(name, layers):
    workload = get_workload(name, tiny=True, precision="amp-bf16", batch_size=2)
    workload = workload.replace(arch=dataclasses.replace(workload.arch, num_layers=layers))
    arch = workload.arch
    model, _ = build_model(workload, device="cpu")
    ids = torch.randint(0, arch.vocab_size, (2, 8))
    with (
        CastCounter(list(model.parameters()), {arch.hidden_size}) as counter,
        torch.autocast("cpu", torch.bfloat16),
    ):
        model(input_ids=ids)
    expected = modelled_casts(transformer_cost.forward_kernels(workload, 2, 8))
    assert counter.counted == expected
    # what the count left out is CPU's SDPA math path: per-head tensors (batch, heads, seq, *)
    assert all(len(shape) == 4 and shape[1] in (arch.num_heads, arch.kv_heads) for shape in counter.left_out)


def test_resnet_casts_match_the_model():
    workload = get_workload("resnet50-cifar10", tiny=True, precision="amp-bf16", batch_size=2)
    model, _ = build_model(workload, device="cpu")
    size = workload.image_size
    with CastCounter(list(model.parameters()), {size}) as counter, torch.autocast("cpu", torch.bfloat16):
        model(torch.randn(2, 3, size, size))
    assert counter.counted == modelled_casts(resnet_cost.forward_kernels(workload)) > 0
    assert counter.left_out == []


def test_no_casts_outside_autocast():
    for name in ("bert-base-imdb", "llm-6b", "resnet50-cifar10"):
        workload = get_workload(name, tiny=True, precision="fp32", batch_size=2)
        if workload.is_resnet:
            kernels = resnet_cost.forward_kernels(workload)
        else:
            kernels = transformer_cost.forward_kernels(workload, 2, 8)
        assert modelled_casts(kernels) == 0
