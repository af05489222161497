"""The PyTorch backend (torch, transformers, optionally torchvision and bitsandbytes).

Imported only by fitbench.backends.get_backend("torch"), inside a measurement's child process
or a test: never by `import fitbench`.
"""

from fitbench.backends.torch import tuned  # noqa: F401  (registers --exec tuned)
from fitbench.backends.torch.backend import TorchBackend

BACKEND = TorchBackend()

__all__ = ["BACKEND", "TorchBackend"]
