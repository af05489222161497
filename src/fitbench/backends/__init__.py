"""Framework backends. Only modules below this package import torch or paddle.

BACKENDS is the explicit table of them: a name, the class that implements the Backend protocol
(fitbench.backends.base) as a module path, and the package it needs. Nothing registers itself
when imported, and `import fitbench` never imports a framework: `get_backend` imports on demand
and turns a missing framework into one clear line.

The `fake` backend (fitbench.backends.fake) is pure Python and listed too, but never chosen by
default nor shown in help: a user who names it gets a stand-in that runs the whole pipeline
(runner, child process, history, report) without a framework, which is how fitbench's own
tests exercise it, faults included (`fake:oom`, `fake:error`, ...).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from fitbench.backends.base import Backend
from fitbench.errors import FitbenchError, unknown_name


@dataclass(frozen=True)
class BackendEntry:
    """One row of the registry.

    implementation  "module:Class", the class implementing the Backend protocol
    requires        the importable package the backend needs (None: pure Python)
    extra           the pip extra that installs it
    framework       whose memory behaviour and efficiencies its estimates use
    listed          offered in help and chosen by default when installed
    takes_option    accepts `NAME:OPTION` (the fake backend's fault)
    """

    implementation: str
    requires: str | None
    extra: str
    framework: str
    listed: bool = True
    takes_option: bool = False


BACKENDS: dict[str, BackendEntry] = {
    "torch": BackendEntry("fitbench.backends.torch.backend:TorchBackend", "torch", "torch", "torch"),
    "paddle": BackendEntry("fitbench.backends.paddle:PaddleBackend", "paddle", "paddle", "paddle"),
    "fake": BackendEntry(
        "fitbench.backends.fake:FakeBackend", None, "", "torch", listed=False, takes_option=True
    ),
}


def split_name(name: str) -> tuple[str, str | None]:
    """'fake:oom-above:8' -> ('fake', 'oom-above:8'); 'torch' -> ('torch', None)."""
    base, sep, option = name.partition(":")
    return base, (option if sep else None)


def entry(name: str) -> BackendEntry:
    """The registry row of a backend name (an option after ':' only where the backend takes one)."""
    base, option = split_name(name)
    row = BACKENDS.get(base)
    if row is None or (option is not None and not row.takes_option):
        raise unknown_name("backend", name, listed_backends(), kind_zh="后端")
    return row


def listed_backends() -> list[str]:
    """The backends a user is offered (help, choices, the default)."""
    return [name for name, row in BACKENDS.items() if row.listed]


def framework_of(name: str) -> str:
    """The framework whose estimates describe what backend `name` measures."""
    return entry(name).framework


def backend_installed(name: str) -> bool:
    """True when the backend's package can be imported, checked without importing it."""
    requires = entry(name).requires
    return requires is None or importlib.util.find_spec(requires) is not None


def installed_backends() -> list[str]:
    """The listed backends whose framework is installed, in the registry's order of preference."""
    return [name for name in listed_backends() if backend_installed(name)]


def get_backend(name: str) -> Backend:
    """A fresh instance of backend `name`, its framework imported now."""
    row = entry(name)
    base, option = split_name(name)
    if row.requires is not None:
        if not backend_installed(name):
            raise FitbenchError(
                f"the {base} backend needs '{row.requires}', which is not installed",
                f"pip install 'fitbench[{row.extra}]'",
                message_zh=f"{base} 后端需要 '{row.requires}',但它没有安装",
                hint_zh=f"pip install 'fitbench[{row.extra}]'",
            )
        # find_spec only proves a folder of that name exists: a broken install (a missing CUDA
        # library, a version built for another Python, a half-removed package) fails on import.
        # Import the framework here so that becomes one line naming the fix, not a traceback.
        try:
            importlib.import_module(row.requires)
        except (ImportError, OSError) as exc:
            what = f"{type(exc).__name__}: {_short(exc)}"
            raise FitbenchError(
                f"the {base} backend cannot import '{row.requires}': {what}",
                f"pip install 'fitbench[{row.extra}]', with --force-reinstall to repair an install",
                message_zh=f"{base} 后端无法导入 '{row.requires}':{what}",
                hint_zh=f"pip install 'fitbench[{row.extra}]',可加 --force-reinstall 修复安装",
            ) from exc
    module_path, _, class_name = row.implementation.partition(":")
    cls = getattr(importlib.import_module(module_path), class_name)
    backend = cls(option) if row.takes_option else cls()
    if not isinstance(backend, Backend):
        raise TypeError(f"{row.implementation} does not implement fitbench.backends.base.Backend")
    return backend


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or "no details"
    return text if len(text) <= limit else text[: limit - 1] + "…"
