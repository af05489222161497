"""Framework backends. Only modules below this package import torch or paddle.

The registry maps a name to a module path so that `import fitbench` never imports a framework;
`get_backend` imports on demand and turns a missing framework into one clear line.
"""

from __future__ import annotations

import importlib
import importlib.util

from fitbench.backends.base import Backend
from fitbench.errors import FitbenchError, unknown_name

# name -> (module path, the distribution that must be importable, the pip extra that installs it)
BACKENDS: dict[str, tuple[str, str, str]] = {
    "torch": ("fitbench.backends.torch", "torch", "torch"),
    "paddle": ("fitbench.backends.paddle", "paddle", "paddle"),
}


def backend_installed(name: str) -> bool:
    """True when the framework can be imported, checked without importing it."""
    return importlib.util.find_spec(BACKENDS[name][1]) is not None


def installed_backends() -> list[str]:
    return [name for name in BACKENDS if backend_installed(name)]


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise unknown_name("backend", name, BACKENDS)
    module_path, dist, extra = BACKENDS[name]
    if not backend_installed(name):
        raise FitbenchError(f"the {name} backend needs '{dist}', which is not installed",
                            f"pip install 'fitbench[{extra}]'")
    # find_spec only proves a folder of that name exists: a broken install (a missing CUDA
    # library, a version built for another Python, a half-removed package) fails on import.
    # Import the framework here so that becomes one line naming the fix, not a traceback.
    try:
        importlib.import_module(dist)
    except (ImportError, OSError) as exc:
        what = f"{type(exc).__name__}: {_short(exc)}"
        raise FitbenchError(f"the {name} backend cannot import '{dist}': {what}",
                            f"pip install 'fitbench[{extra}]', with --force-reinstall to repair an install",
                            ) from exc
    module = importlib.import_module(module_path)
    return module.BACKEND


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or "no details"
    return text if len(text) <= limit else text[: limit - 1] + "…"
