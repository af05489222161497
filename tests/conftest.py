"""Test-session setup shared by every test module."""

from __future__ import annotations

import os
import shutil

# Without a GPU, fitbench's Triton kernels are tested under Triton's interpreter. Triton reads
# this variable once, when it is first imported, so it is set before any test imports it.
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")
