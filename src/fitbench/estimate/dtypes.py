"""Bytes per element of each tensor class under a precision mode and framework.

Under autocast (AMP) PyTorch keeps parameters, the residual stream and normalisation layers in
FP32 while matmul inputs and outputs are FP16/BF16 copies (torch.amp autocast op lists), so one
activation can exist in two dtypes at once. Pure half precision stores everything in 16 bit.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitbench.workloads.workload import Workload


@dataclass(frozen=True, kw_only=True)
class ActivationDtypes:
    """act: matmul inputs/outputs; res: residual stream and norm inputs; mask: dropout masks."""

    act: int
    res: int
    mask: int
    amp: bool

    def linear_input(self, shared_width: float, consumers: int) -> float:
        """Bytes per token a group of Linear layers saves for one shared input of `shared_width`.

        Without autocast they share one saved tensor; under autocast each Linear casts the FP32
        input separately and saves its own 16-bit copy (casts of activations are not cached).
        """
        if self.amp:
            return consumers * shared_width * self.act
        return shared_width * self.res


def keeps_dropout_masks(arch: object) -> bool:
    """Whether a transformer's training blocks keep dropout masks: an encoder's (BERT's hidden
    dropouts), or a decoder's with a residual dropout (GPT-2's and GPT-BigCode's resid_pdrop:
    TransformerArch.residual_dropout_p). Those families' configs drop attention probabilities at
    the same rate, which eager attention keeps as a mask too."""
    kind = getattr(arch, "kind", None)
    return kind == "encoder" or (kind == "decoder" and getattr(arch, "residual_dropout_p", 0.0) > 0)


def activation_dtypes(workload: Workload, *, dropout: bool) -> ActivationDtypes:
    p = workload.precision_info
    act = p.activation_bytes
    res = 4 if (p.amp or p.compute in ("fp32", "tf32")) else act
    mask = 1 if (dropout and workload.is_training) else 0
    return ActivationDtypes(act=act, res=res, mask=mask, amp=p.amp)
