"""Child side of a measurement: `python -m fitbench.measure.child REQUEST.json`.

Runs in a fresh process started by fitbench.measure.runner, so its peaks are its own. It drives
a backend only through the Session contract (fitbench.backends.base): build, warm up, time
steps in short windows, repeated until the latest ones agree (fitbench.measure.timing), read
memory several ways, and write one JSON result. Every exception becomes a status: the
framework's out-of-memory error is "oom" (a verdict: this batch does not fit), anything else
"error" with the traceback's tail.

Progress events go to a JSON-lines file the parent polls; the result goes to the path named in
the request, written atomically so the parent never reads half a file.

Failures are tested through the fake backend (fitbench.backends.fake), which fails inside
this process the ways a framework can; nothing here exists for tests.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from fitbench.backends.base import RunOptions, Session
from fitbench.core.host import cpu_model
from fitbench.core.names import ExecMode
from fitbench.errors import FitbenchError
from fitbench.measure import nvml
from fitbench.measure.host_speed import host_probe_fields
from fitbench.measure.runner import empty_measurement
from fitbench.measure.timing import (
    MIN_WINDOWS,
    TARGET_SPREAD,
    SampleStats,
    WindowSeries,
    percentile,
    repeat_until_stable,
    summarize,
)
from fitbench.workloads.workload import Workload

# Prefill calls a timed window: a prefill is short, so its windows are counted in calls, and a
# stable prefill costs six calls, a small part of one generation.
PREFILL_CALLS = 2
PROGRESS_INTERVAL_S = 0.2
GO_POLL_S = 0.01  # how often a child started ahead looks for its go file


# -- small helpers -----------------------------------------------------------------------------
class Events:
    """Progress events as JSON lines (the parent turns them into the progress display)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._last_emit = 0.0

    def emit(
        self,
        phase: str,
        *,
        step: int | None = None,
        of: int | None = None,
        detail: str = "",
        throttle: bool = False,
        **fields: str,
    ) -> None:
        """Append one event; `fields` fill its message (fitbench.measure.progress)."""
        if self.path is None:
            return
        now = time.monotonic()
        if throttle and now - self._last_emit < PROGRESS_INTERVAL_S:
            return
        self._last_emit = now
        event: dict[str, Any] = {"phase": phase, "t": round(now, 3)}
        if step is not None:
            event["step"] = step
        if of is not None:
            event["of"] = of
        if detail:
            event["detail"] = detail
        event.update(fields)
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(event) + "\n")
        except OSError:
            pass


def _peak_rss_bytes() -> int:
    """Peak resident set size of this process (ru_maxrss: kB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _current_rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _environment(extra: dict[str, Any]) -> dict[str, Any]:
    from fitbench import __version__

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "fitbench_version": __version__,
        "gpu_driver": nvml.driver_version(),
    }
    env.update(extra)
    return env


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# -- the measurement ---------------------------------------------------------------------------
class Measurement:
    """One run of one request; `run()` returns the result dict and never raises (but Ctrl-C)."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.workload = Workload.from_dict(request["workload"])
        self.options = RunOptions(**request["options"])
        self.backend_name = str(request["backend"])
        self.min_steps = int(request["min_steps"])
        self.min_seconds = float(request["min_seconds"])
        self.warmup = int(request["warmup"])
        self.max_seconds = float(request["max_seconds"])
        # Spread: timed windows repeated until they agree within target_spread, for spread_budget s.
        self.target_spread = float(request.get("target_spread", TARGET_SPREAD))
        self.min_windows = int(request.get("min_windows", MIN_WINDOWS))
        self.spread_budget = float(request.get("spread_budget_seconds", 2 * self.min_seconds))
        self.windows_used = self.min_windows
        self.deadline = math.inf
        self.events = Events(request.get("progress_path"))
        self.m = empty_measurement(self.workload, self.backend_name, self.options)
        self.m["warmup_steps"] = self.warmup
        self.phase = "init"
        self.backend: Any = None
        self.session: Session | None = None
        self.cuda_index = nvml.cuda_index(self.options.device)
        self.sampler: nvml.MemorySampler | None = None
        self.device_baseline: int | None = None
        self.context_bytes: int | None = None
        self.env_extra: dict[str, Any] = {}

    # -- driving ------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        m = self.m
        try:
            self._run()
            m["status"] = "ok"
        except FitbenchError as exc:
            m.update(status="error", error=exc.message, hint=exc.hint, error_type="FitbenchError")
            # The Chinese text travels beside the English one, for the parent's one-line error.
            m.update({k: v for k, v in (("error_zh", exc.message_zh), ("hint_zh", exc.hint_zh)) if v})
        except Exception as exc:
            if self.backend is not None and self._is_oom(exc):
                m.update(
                    status="oom",
                    error=f"out of memory at batch {self.workload.batch_size} (phase: {self.phase})",
                    oom_detail=_first_line(exc)[:500],
                )
            else:
                lines = traceback.format_exception(exc)
                m.update(
                    status="error",
                    error=_first_line(exc)[:1000],
                    error_type=type(exc).__name__,
                    traceback="".join(lines)[-6000:],
                )
        finally:
            self._finish()
        return _jsonable(m)

    def _finish(self) -> None:
        """Notes, memory and environment, each read even if another fails: an error here must not
        replace the measurement (or the failure it records) with a child that wrote no result."""

        def environment() -> None:
            self.m["environment"] = _environment(self.env_extra)

        for part in (self._read_notes, self._collect_memory, environment):
            try:
                part()
            except Exception as exc:
                self.m["warnings"].append(f"fitbench could not record everything: {_first_line(exc)}")

    def _is_oom(self, exc: BaseException) -> bool:
        try:
            return bool(self.backend.is_oom(exc))
        except Exception:
            return False

    def _run(self) -> None:
        from fitbench.backends import get_backend

        m, w = self.m, self.workload
        self.events.emit("importing framework")
        self.backend = get_backend(self.backend_name)
        m["framework_version"] = self.backend.version()
        self.events.emit("importing model libraries")
        self.backend.prepare(w, self.options)  # imports (no device): kept out of load_seconds
        self._wait_for_go()

        if self.cuda_index is not None:
            self.device_baseline = nvml.device_used(self.cuda_index)
            self.sampler = nvml.MemorySampler(self.cuda_index).start()
        self.events.emit("initialising device")
        info = self.backend.device_info(self.options.device)
        m["device_name"] = info.get("name")
        m["device_total_memory_bytes"] = info.get("total_memory_bytes")
        self.env_extra.update(info.get("environment") or {})
        if self.cuda_index is not None:
            self._measure_context(info)
        limit = self.options.memory_limit_bytes
        if limit is not None and self.cuda_index is not None:
            # The card being emulated has `limit` bytes for this process; its context takes its
            # share first, as it would there.
            allocator = limit - (self.context_bytes or 0)
            if allocator <= 0:
                raise FitbenchError(
                    f"the emulated card's {limit / 2**30:.2f} GiB is less than this process's CUDA context "
                    f"({(self.context_bytes or 0) / 2**30:.2f} GiB)",
                    "emulate a card with more memory",
                    message_zh=(
                        f"模拟显卡的 {limit / 2**30:.2f} GiB 小于本进程的 CUDA 上下文("
                        f"{(self.context_bytes or 0) / 2**30:.2f} GiB)"
                    ),
                    hint_zh="请模拟显存更大的显卡",
                )
            self.backend.limit_memory(self.options.device, allocator)
            m["memory_limit_bytes"] = limit

        self.phase = "build"
        # Tuned sessions compile and capture while they open (up to a minute): say so, or it looks hung.
        tuned = self.options.exec_mode == ExecMode.TUNED
        self.events.emit("building model, compiling and capturing CUDA graphs" if tuned else "building model")
        t0 = time.perf_counter()
        self.session = self.backend.open(w, self.options)
        self.session.sync()
        m["load_seconds"] = time.perf_counter() - t0
        m["memory_after_load_bytes"] = self._memory_now()
        m["memory_after_load_allocated_bytes"] = (self.session.memory() or {}).get("allocated")
        before = self._host_probe("before")

        self.phase = "generate" if w.is_generation else "step"
        if w.is_generation:
            self._generation()
        else:
            self._steps()
        if before is not None:
            m.update(host_probe_fields(before, self._host_probe("after")))

    def _wait_for_go(self) -> None:
        """A child started ahead of its turn (fitbench.measure.runner.Launch) waits here, its
        imports done and the device untouched, until the parent writes the go file: the
        measurement before it has then ended, and this one has the device to itself."""
        go = self.request.get("go_path")
        if not go:
            return
        self.events.emit("waiting for its turn")
        while not os.path.exists(go):
            time.sleep(GO_POLL_S)

    def _host_probe(self, when: str) -> dict[str, float] | None:
        """One round of the backend's host-speed probe (fitbench.measure.host_speed), recorded at
        once so that a run that fails later still has it; a probe that fails is a warning, not a
        failed measurement. Taken outside the timed loops and before warm-up resets the peaks."""
        self.events.emit("timing the host")
        try:
            parts = self.backend.host_probe(self.options.device)
        except Exception as exc:
            self.m["warnings"].append(f"the host-speed probe ({when}) failed: {_first_line(exc)}")
            return None
        if parts and when == "before":
            self.m.update(host_probe_fields(parts))
        return parts or None

    def _measure_context(self, info: dict[str, Any]) -> None:
        """CUDA context size: process memory right after device init, minus what the allocator holds."""
        index = self.cuda_index
        assert index is not None
        proc: int | None = None
        if nvml.available():
            nvml.wait_for(lambda: nvml.process_memory(index) is not None, timeout=1.0, interval=0.02)
            proc = nvml.process_memory(index)
            if proc is None and self.device_baseline is not None:
                used = nvml.device_used(index)
                proc = used - self.device_baseline if used is not None else None
        if proc is not None:
            self.context_bytes = max(0, proc - int(info.get("reserved_bytes") or 0))
        self.m["cuda_context_bytes"] = self.context_bytes

    def _read_notes(self) -> None:
        """Copy what the session says it ran (read at the end: sessions add notes while stepping)."""
        m = self.m
        notes = dict(getattr(self.session, "notes", {}) or {}) if self.session is not None else {}
        m["precision_in_effect"] = notes.pop("precision_in_effect", None)
        m["warnings"] = [*notes.pop("warnings", []), *m["warnings"]]
        params = notes.pop("params", None)
        if params is None and self.backend is not None:
            try:
                params = self.backend.param_count(self.workload)
            except Exception:
                params = None
        m["params"] = params
        if notes.get("dataset_size"):
            m["dataset_size"] = int(notes["dataset_size"])
        m["backend_notes"] = notes

    def _memory_now(self) -> int | None:
        """What the process holds now: NVML on a GPU (what nvidia-smi shows), RSS on a CPU."""
        if self.cuda_index is None:
            return _current_rss_bytes()
        if self.sampler is not None:
            proc, used = self.sampler.sample()
            if proc is not None:
                return proc
            if used is not None and self.device_baseline is not None:
                return used - self.device_baseline
        mem = self.session.memory() if self.session is not None else {}
        reserved = mem.get("reserved")
        return None if reserved is None else reserved + (self.context_bytes or 0)

    # -- timed loops ----------------------------------------------------------------------------
    def _window_plan(self, min_calls: int) -> tuple[int, Any, float]:
        """(windows used, calls of window i, seconds a window): the timed bounds split into windows.

        min_steps and min_seconds bound the figure's samples as before; they are split over
        `min_windows` windows (10 steps as 4, 3 and 3; 3 s as three of 1 s) so that a stable
        figure costs what one timed loop of those bounds did. A repeated window takes the calls
        of the window it follows in that cycle. A run asked for fewer steps than windows gets that
        many windows of one step.
        """
        windows = max(1, min(self.min_windows, min_calls))
        base, extra = divmod(min_calls, windows)

        def calls(index: int) -> int:
            return base + (1 if index % windows < extra else 0)

        return windows, calls, self.min_seconds / windows

    def _window(self, once: Any, calls: int, seconds: float, progress: Any) -> list[float]:
        """Time `once()` until `calls` calls and `seconds` both hold, or the wall limit comes."""
        assert self.session is not None
        samples: list[float] = []
        start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            once()
            self.session.sync()
            now = time.perf_counter()
            samples.append(now - t0)
            progress(1)
            if len(samples) >= calls and now - start >= seconds:
                break
            if now >= self.deadline:
                break
        return samples

    def _series(self, window: Any) -> WindowSeries:
        """Repeat `window` until its figures settle (fitbench.measure.timing.repeat_until_stable)."""
        return repeat_until_stable(
            window,
            budget_seconds=self.spread_budget,
            target=self.target_spread,
            min_windows=self.windows_used,
            deadline=self.deadline,
        )

    def _counter(self, label: str, unit: str, *, timed: bool = True) -> Any:
        """A progress callback counting a series' calls across its windows (`timed`: against
        min_steps and min_seconds, as `_emit_timed` shows them; else a plain count)."""
        state = {"count": 0, "start": time.perf_counter()}

        def progress(n: int) -> None:
            state["count"] += n
            if timed:
                self._emit_timed(label, unit, state["count"], time.perf_counter() - state["start"])
            else:
                self.events.emit(label, step=state["count"], unit=unit, throttle=True)

        return progress

    def _record_spreads(self, series: WindowSeries) -> None:
        """Record each figure's spread under the figure's own name (`spreads`: name -> spread,
        stable, windows, windows_run) and the target it was held to."""
        spreads = self.m.get("spreads") or {}
        for name, fs in series.spreads().items():
            spreads[name] = fs.to_dict()
        self.m["spreads"] = spreads
        self.m["spread_target"] = self.target_spread

    def _emit_timed(self, label: str, unit: str, count: int, elapsed: float) -> None:
        """Progress of a timed loop against the bound that keeps it going: the step count until
        min_steps is reached (7/10 steps), then the timed seconds against min_seconds (a fast step
        runs far more than min_steps times, and "2611/10" would read as a broken counter)."""
        if count < self.min_steps:
            self.events.emit(label, step=count, of=self.min_steps, unit=unit, throttle=True)
            return
        seconds, floor = f"{min(elapsed, self.min_seconds):.1f}", f"{self.min_seconds:.1f}"
        self.events.emit(
            label,
            step=count,
            unit=unit,
            detail=f"{seconds}/{floor} s timed",
            detail_key="progress.timed_seconds",
            seconds=seconds,
            min_seconds=floor,
            throttle=True,
        )

    def _record_steps(self, samples: list[float]) -> SampleStats:
        """Record the step samples with their statistics: a training step and a whole generate
        call are reported under the same names."""
        stats = summarize(samples)
        if stats.count < self.min_steps:
            self.m["warnings"].append(
                f"stopped after {stats.count} of {self.min_steps} steps: "
                f"the {self.max_seconds:.0f} s budget of the timed loop ran out"
            )
        self.m.update(
            steps=stats.count,
            step_seconds=stats.median,
            step_seconds_p90=stats.p90,
            step_seconds_mean=stats.mean,
            step_seconds_min=stats.min,
            step_samples_seconds=samples,
        )
        return stats

    def _warm(self, once: Any) -> None:
        assert self.session is not None
        for i in range(self.warmup):
            self.events.emit("warm-up", step=i + 1, of=self.warmup)
            once()
            self.session.sync()
        if self.sampler is not None:
            self.sampler.sample()
        mem = self.session.memory() or {}
        self.m["warmup_peak_allocated_bytes"] = mem.get("peak_allocated")
        self.m["warmup_peak_reserved_bytes"] = mem.get("peak_reserved")
        # Steady state from here: the first steps allocate optimizer state and pick kernels.
        self.session.reset_peak()

    def _steps(self) -> None:
        session, w, m = self.session, self.workload, self.m
        assert session is not None
        self._warm(session.step)
        self.windows_used, calls, seconds = self._window_plan(self.min_steps)
        self.deadline = time.perf_counter() + self.max_seconds
        progress = self._counter("measuring", "steps")
        windows: list[list[float]] = []

        def window() -> dict[str, float | None]:
            windows.append(self._window(session.step, calls(len(windows)), seconds, progress))
            return {"step_seconds": percentile(windows[-1], 50)}

        series = self._series(window)
        stats = self._record_steps([x for one in windows[-series.used :] for x in one])
        self._record_spreads(series)
        m["samples_per_second"] = w.batch_size / stats.median
        if not w.is_resnet and w.seq_len:
            m["tokens_per_second"] = w.batch_size * w.seq_len / stats.median
        # A real dataset (--data) sets the epoch; synthetic data uses the workload's size.
        dataset = (getattr(session, "notes", {}) or {}).get("dataset_size") or w.dataset_size
        if dataset:
            m["dataset_size"] = dataset
            m["epoch_seconds"] = stats.median * math.ceil(dataset / w.batch_size)

    def _generation(self) -> None:
        session, w, m = self.session, self.workload, self.m
        assert session is not None
        new_tokens = int(w.new_tokens or 0)
        # A backend whose decode() runs the whole generate call (prefill included) says so; one
        # whose decode() continues from prefill() gets prefill() called first.
        includes_prefill = bool(getattr(session, "notes", {}).get("decode_includes_prefill", False))

        def generate(tokens: int) -> None:
            if not includes_prefill:
                session.prefill()
            session.decode(tokens)

        def generate_once() -> None:
            generate(new_tokens)

        def prefill_once() -> None:
            session.prefill()

        self._warm(generate_once)
        self.windows_used, calls, seconds = self._window_plan(self.min_steps)
        self.deadline = time.perf_counter() + self.max_seconds

        # Prefill: short calls, windows of PREFILL_CALLS each.
        prefills: list[list[float]] = []
        prefill_progress = self._counter("prefill", "calls", timed=False)

        def prefill_window() -> dict[str, float | None]:
            prefills.append(self._window(prefill_once, PREFILL_CALLS, 0.0, prefill_progress))
            return {"prefill_seconds": percentile(prefills[-1], 50)}

        prefill_series = self._series(prefill_window)
        prefill_samples = [x for one in prefills[-prefill_series.used :] for x in one]
        prefill = summarize(prefill_samples)

        # Generations: each window's n-token calls, then one one-token call for the decode step.
        fulls: list[list[float]] = []
        ones: list[float | None] = []
        progress = self._counter("generating", "generations")

        def generation_window() -> dict[str, float | None]:
            fulls.append(self._window(generate_once, calls(len(fulls)), seconds, progress))
            full = percentile(fulls[-1], 50)
            values: dict[str, float | None] = {"step_seconds": full}
            ones.append(self._one_token(generate) if new_tokens >= 2 else None)
            if ones[-1] is not None:
                values["decode_step_seconds"] = (full - ones[-1]) / (new_tokens - 1)
            return values

        series = self._series(generation_window)
        stats = self._record_steps([x for one in fulls[-series.used :] for x in one])
        kept_ones = [x for x in ones[-series.used :] if x is not None]
        if kept_ones:
            self._decode_step(new_tokens, stats.median, prefill.median, percentile(kept_ones, 50))
        self._record_spreads(prefill_series)
        self._record_spreads(series)
        if m.get("decode_step_seconds") is None:
            m["spreads"].pop("decode_step_seconds", None)
        tokens = w.batch_size * new_tokens
        m.update(prefill_seconds=prefill.median, prefill_samples_seconds=prefill_samples)
        m["tokens_per_second"] = tokens / stats.median  # end to end: prefill + decode
        m["samples_per_second"] = m["tokens_per_second"]
        m["prefill_tokens_per_second"] = w.batch_size * int(w.prompt_tokens or 0) / prefill.median
        decode = stats.median - prefill.median
        if decode > 0:
            m["decode_seconds"] = decode
            m["decode_tokens_per_second"] = tokens / decode
            m["decode_tokens_per_second_per_sequence"] = new_tokens / decode
        else:
            m["warnings"].append(
                "generation was not measurably slower than prefill; decode speed not derived"
            )

    def _one_token(self, generate: Any) -> float:
        """One timed one-token generation: the prefill and the generate call's once-per-call work."""
        assert self.session is not None
        self.events.emit("one-token generation")
        t0 = time.perf_counter()
        generate(1)
        self.session.sync()
        return time.perf_counter() - t0

    def _decode_step(self, new_tokens: int, full: float, prefill: float, one: float) -> None:
        """One decode step, by differencing: (t(n) - t(1)) / (n - 1), t(k) a k-token generation.

        decode_seconds (a generation less a separately timed prefill) also holds what the
        generate call does once per call: validating its arguments, building the cache and the
        logits processors, picking the first token. Spread over n tokens, that per-call work
        lowers decode tok/s below the rate of the decode steps themselves, which is what a
        standalone loop times and what an estimate of one decode step predicts. A one-token
        generation holds the prefill and that per-call work and no decode step, so the
        difference is the steps alone; both figures are recorded. Each timed window ends with one
        one-token generation; `one` is their median over the windows used.
        """
        self.m["one_token_generate_seconds"] = one
        self.m["generate_call_overhead_seconds"] = one - prefill
        step = (full - one) / (new_tokens - 1)
        # a key that comes and goes with timing noise would change the JSON's shape: a difference
        # lost in the noise (t(n) <= t(1) on a tiny model) is recorded as not measured
        self.m["decode_step_seconds"] = step if step > 0 else None

    # -- memory -----------------------------------------------------------------------------------
    def _collect_memory(self) -> None:
        m = self.m
        mem: dict[str, Any] = {}
        if self.session is not None:
            try:
                mem = self.session.memory() or {}
            except Exception:
                mem = {}
        m["peak_allocated_bytes"] = mem.get("peak_allocated")
        m["peak_reserved_bytes"] = mem.get("peak_reserved")
        m["peak_rss_bytes"] = _peak_rss_bytes()
        if self.sampler is not None:
            self.sampler.stop()
            m["nvml_process_peak_bytes"] = self.sampler.peak_process
            m["nvml_device_used_bytes"] = self.sampler.peak_device_used
            m["nvml_device_baseline_bytes"] = self.device_baseline
            m["nvml_samples"] = self.sampler.samples
            if self.sampler.peak_process is not None:
                m["nvml_process_source"] = "process"
            elif self.sampler.peak_device_used is not None and self.device_baseline is not None:
                # Inside a container NVML may list host pids only: use the device-wide growth.
                m["nvml_process_peak_bytes"] = self.sampler.peak_device_used - self.device_baseline
                m["nvml_process_source"] = "device-delta"
        if self.cuda_index is not None:
            if m.get("nvml_process_peak_bytes") is not None:
                m["peak_memory_bytes"], m["peak_memory_source"] = m["nvml_process_peak_bytes"], "nvml"
            elif m["peak_reserved_bytes"] is not None:
                m["peak_memory_bytes"] = m["peak_reserved_bytes"] + (self.context_bytes or 0)
                m["peak_memory_source"] = "allocator-reserved+context"
        else:
            m["peak_memory_bytes"], m["peak_memory_source"] = m["peak_rss_bytes"], "rss"


def run_request(request: dict[str, Any]) -> dict[str, Any]:
    return Measurement(request).run()


def write_json_atomic(path: str, data: dict[str, Any]) -> None:
    """Write JSON through a temporary file and a rename: a reader never sees half a result."""
    target = Path(path)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(json.dumps(data, default=str))
    os.replace(tmp, target)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m fitbench.measure.child REQUEST.json", file=sys.stderr)
        return 2
    request = json.loads(Path(args[0]).read_text())
    result = run_request(request)
    write_json_atomic(request["result_path"], result)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: freeing a multi-GB model and a CUDA context can take seconds,
    # and the result is already on disk.
    os._exit(code)
