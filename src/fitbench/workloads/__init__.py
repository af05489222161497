"""Workload definitions: architectures, presets and Hugging Face config import.

Framework-free: the estimator reads these, and the backends build real models from them.
"""

from fitbench.workloads.arch import ResNetArch, TransformerArch
from fitbench.workloads.workload import Workload

__all__ = ["ResNetArch", "TransformerArch", "Workload"]
