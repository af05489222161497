"""A one-line progress display on stderr while a measurement runs.

A real run spends seconds to minutes importing a framework, building a model and stepping it;
without feedback it looks hung. The display shows the phase ("building model", "measuring
7/10", ...) and the elapsed time. It draws only when stderr is a terminal (or when forced), so
logs, pipes and `--json` consumers never see spinner characters; forced onto a non-terminal it
prints one plain line per phase instead of redrawing.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_EVENT_KEYS = ("phase", "step", "of", "unit", "detail", "detail_key", "t")


def _say(key: str, fallback: str, lang: str, params: dict[str, Any]) -> str:
    """A phase or detail in the reader's language (fitbench.advise.i18n `progress.*`); one without a
    message, or whose values are missing, is shown as the child worded it."""
    from fitbench.advise.i18n import has, t

    if not has(key):
        return fallback
    try:
        return t(key, lang, **params)
    except (KeyError, IndexError):
        return fallback


def should_show(force: bool | None, stream: TextIO | None = None) -> bool:
    """--progress (True) / --no-progress (False) win; otherwise only on a terminal."""
    if force is not None:
        return force
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """Callable with progress events: {"phase": str, "step": k, "of": n, "unit": str, "detail": str}.

    Use as a context manager around the work; `label` names what runs (workload, precision).
    `delay` keeps the line away for work that finishes quickly. Phases are shown in `lang`: an
    event's other keys (`ranks`, `batch`) fill its message, and `detail_key` names the detail's.
    """

    def __init__(
        self,
        *,
        enabled: bool,
        label: str = "",
        stream: TextIO | None = None,
        delay: float = 0.5,
        interval: float = 0.1,
        lang: str = "en",
    ) -> None:
        self.enabled = enabled
        self.lang = lang
        self.params: dict[str, Any] = {}
        self.detail_key: str | None = None
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.delay = delay
        self.interval = interval
        self.phase = "starting"
        self.step: int | None = None
        self.of: int | None = None
        self.unit: str | None = None
        self.detail = ""
        self._start = time.monotonic()
        self._phase_start = self._start
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._drawn = False
        self._tick = 0
        try:
            self._tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self._tty = False

    # -- events -----------------------------------------------------------------------------
    def __call__(self, event: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with self._lock:
            phase = str(event.get("phase", self.phase))
            changed = phase != self.phase
            self.phase = phase
            self.step = event.get("step")
            self.of = event.get("of")
            self.unit = event.get("unit")
            self.detail = str(event.get("detail") or "")
            self.detail_key = event.get("detail_key")
            self.params = {k: v for k, v in event.items() if k not in _EVENT_KEYS}
            if changed:
                self._phase_start = time.monotonic()
        if changed and not self._tty:
            self._write_line(self._text())

    def set_label(self, label: str) -> None:
        self.label = label

    # -- drawing ------------------------------------------------------------------------------
    def _text(self) -> str:
        elapsed = time.monotonic() - self._start
        parts = [self.label] if self.label else []
        phase = _say(f"progress.{self.phase}", self.phase, self.lang, self.params)
        if self.step is not None:
            # A total is shown only while the count is within it: past it, it is no total.
            phase += f" {self.step}" + (f"/{self.of}" if self.of and self.step <= self.of else "")
            if self.unit:
                phase += " " + _say(f"progress.unit.{self.unit}", self.unit, self.lang, {})
        parts.append(phase)
        if self.detail:
            key = self.detail_key
            parts.append(_say(key, self.detail, self.lang, self.params) if key else self.detail)
        parts.append(f"{elapsed:.1f}s")
        return " · ".join(parts)

    def _write_line(self, text: str) -> None:
        try:
            self.stream.write(f"fitbench: {text}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def _draw(self) -> None:
        with self._lock:
            self._tick += 1
            text = f"{SPINNER[self._tick % len(SPINNER)]} {self._text()}"
        try:
            self.stream.write("\r\033[K" + text[:200])
            self.stream.flush()
            self._drawn = True
        except (OSError, ValueError):
            pass

    def _loop(self) -> None:
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            self._draw()
            self._stop.wait(self.interval)

    def clear(self) -> None:
        if self._drawn:
            try:
                self.stream.write("\r\033[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._drawn = False

    # -- lifetime -----------------------------------------------------------------------------
    def start(self) -> Progress:
        self._start = time.monotonic()
        if self.enabled and self._tty and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="fitbench-progress", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        self.clear()

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
