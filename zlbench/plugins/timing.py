"""Timing policy inside the benchmark process.

Patches the corpus' timer entry points (corpus.timer_modules: FlagGems looks
`triton.testing.do_bench` up at call time) so every timing call goes through the run's policy:

- graph:  capture and replay. On CUDA, upstream triton.testing.do_bench_cudagraph itself (its
          numbers); elsewhere a port that takes stream/event/synchronize from Triton's device
          interface and the graph class from the backend.
          Launch-bound calls are given a rep that makes their replay at least
          timer.min_window_ms of device time (0: upstream's own rep).
          Per shape, a refused capture falls back to direct timing and is marked; a device fault
          is fatal; a capture that poisons the context raises BENCHMARK_CAPTURE_POISONED; an op
          whose fallback raises what its capture raised is broken, and fails with its own error.
- direct: the corpus' own direct timer (called timer.repeat times, median kept); with timer.fill_gaps the device is kept
          busy after each L2 clear, so that host launch time stays out of the kernel's events.
- host:   host wall clock around each call, synchronizing the device (the CPU's timer).
Every call records the timer actually used and its sampling facts (rows carry them).
"""

from __future__ import annotations

import importlib
import math
import statistics
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Optional, Tuple

from zlbench.backends import get_backend
from zlbench.results.schema import MARKER_FALLBACK, MARKER_FATAL, MARKER_POISONED
from zlbench.plugins import _runtime
from zlbench.plugins.sampling import Sampling

_patched: Dict[str, Any] = {}


def _note(timer_used: str, sampling: Sampling, markers=(), reason: Optional[str] = None) -> None:
    """Record one timing call for the row it belongs to: the timer used, markers with their reason,
    and its sampling facts (the row's sampling fields)."""
    facts = sampling.facts()
    markers, reasons = list(markers), [reason] if reason else []
    _runtime.timing_calls.append(
        {"timer_used": timer_used, "markers": markers, "reason": "; ".join(reasons) or None, "facts": facts}
    )


def _device_module():
    import torch

    device = get_backend(_runtime.config().get("backend", "cpu")).torch_device
    return None if device == "cpu" else getattr(torch, device)


_spin_cache: Dict[str, Any] = {}


def device_spin() -> Optional[Callable[[float], None]]:
    """spin(us) keeps the device busy for at least about `us` microseconds, or None where the
    backend's device cannot spin. torch's <device>._sleep spins for a number of clock cycles, so
    it is calibrated once per process, after a spin that brings the clock up from idle, at the
    fastest rate seen: a clock that is lower later makes a spin longer, never shorter."""
    if "spin" not in _spin_cache:
        spin = None
        dev = _device_module()
        sleep = getattr(dev, "_sleep", None)
        if sleep is not None:
            try:
                sleep(20_000_000)  # ~10 ms at an H200's boost clock, longer from idle
                rates = []
                for _ in range(3):
                    start, end = dev.Event(enable_timing=True), dev.Event(enable_timing=True)
                    start.record()
                    sleep(2_000_000)
                    end.record()
                    dev.synchronize()
                    rates.append(2_000_000 / (start.elapsed_time(end) * 1000))
                per_us = max(rates)
                spin = lambda us: sleep(max(1, int(us * per_us)))  # noqa: E731
            except Exception:
                spin = None
        _spin_cache["spin"] = spin
    return _spin_cache["spin"]


def _host_launch_us(fn, sync) -> float:
    """Host time to launch one call (no waiting on the device), in µs: the median of 5 launches
    after a first call, which may still compile or tune."""
    fn()
    sync()
    times = []
    for _ in range(5):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6)
    sync()
    return statistics.median(times)


@contextmanager
def filled_gaps(fn, spin):
    """triton.testing.do_bench clears L2 (zeroing 256 MB), then records start, calls fn, records
    end. When launching fn takes the host longer than the clear takes the device (FlagGems' ops
    dispatched through aten: 120-180 µs of host time against ~80 µs of clearing on an H200), the
    device reaches the start event before the kernel is queued and the events time the host's
    launch too: one row read 0.054 ms in one process and 0.106 ms in another (0.025 ms filled).
    Spinning after each clear for twice the launch time queues fn before its start event."""
    try:
        from triton.runtime import driver
    except ImportError:  # a corpus timer without Triton: nothing to fill
        yield
        return
    active = driver.active
    had_own = "clear_cache" in vars(active)
    orig = active.clear_cache
    gap_us = 2 * _host_launch_us(fn, _device_module().synchronize) + 20

    def clear_and_spin(cache):
        orig(cache)
        spin(gap_us)

    active.clear_cache = clear_and_spin
    try:
        yield
    finally:
        if had_own:
            active.clear_cache = orig
        else:
            del active.clear_cache


MAX_GRAPH_CALLS = 10000


def widened_rep(eager_ms: float, device_ms: float, rep: float, min_window_ms: float) -> float:
    """The rep that gives do_bench_cudagraph a replay of at least min_window_ms of device time.

    Upstream sizes its graph from an eager estimate: int(rep / eager_ms) calls. For a µs kernel
    the eager estimate is the host's launch time (a 1.1 µs FlagGems kernel: ~150 µs), so the graph
    holds ~130 calls and its replay ~0.15 ms, and the replay's own start-up jitter is then a few
    percent of the row (rows of 64x64 moved 3.5% between processes at rep 20, 15% at rep 5).
    Unchanged where the window is wide enough; capped at MAX_GRAPH_CALLS calls."""
    if eager_ms <= 0 or device_ms <= 0:
        return rep
    if max(1, int(rep / eager_ms)) * device_ms >= min_window_ms:
        return rep
    calls = min(MAX_GRAPH_CALLS, math.ceil(min_window_ms / device_ms))
    return max(rep, (calls + 0.5) * eager_ms)


def graph_call_estimates(fn, spin) -> Tuple[float, float]:
    """Measure the two estimates widened_rep needs (ms): an eager call as upstream estimates it, and
    a call's device time with launch gaps hidden (the device spins while the host queues)."""
    dev = _device_module()
    host_us = _host_launch_us(fn, dev.synchronize)
    eager_ms = _event_ms_per_call(dev, fn)
    spin(1.5 * 5 * host_us + 50)  # longer than the host takes to queue the 5 calls below
    device_ms = _event_ms_per_call(dev, fn)
    return eager_ms, device_ms


def _event_ms_per_call(dev, fn, calls: int = 5) -> float:
    """Device time of `calls` calls between two events, per call (ms): upstream's estimate."""
    start, end = dev.Event(enable_timing=True), dev.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    dev.synchronize()
    return start.elapsed_time(end) / calls


def _summarize(times, quantiles, return_mode):
    if quantiles is not None:
        ordered = sorted(times)
        return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
    return {
        "min": min, "max": max, "median": statistics.median, "all": list,
    }.get(return_mode, statistics.fmean)(times)


def host_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Wall-clock timing of single calls, synchronizing the device around each (ms)."""
    dev = _device_module()
    sync = dev.synchronize if dev is not None else (lambda: None)
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    sync()
    estimate = max((time.perf_counter() - t0) * 1000 / 3, 1e-4)
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    times = []
    for _ in range(max(5, int(rep / estimate))):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        sync()
        t = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t) * 1000)
    return _summarize(times, quantiles, return_mode)


def _resolve(dotted: str):
    obj = importlib.import_module(dotted.split(".")[0])
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


@contextmanager
def graph_replayer(fn, rep=20, grad_to_none=None, graph_class: str = "torch.cuda.CUDAGraph"):
    """The set-up of triton.testing.do_bench_cudagraph, ported to any vendor (stream, events and
    synchronize from Triton's device interface, the graph class from the backend): estimate an
    eager call, capture int(rep / estimate) calls in one graph; yields replay(), which times one
    replay of it and returns the time per call (ms)."""
    import torch
    from triton.runtime import driver

    di = driver.active.get_device_interface()
    graph_cls = _resolve(graph_class)
    capture = importlib.import_module(graph_class.rpartition(".")[0]).graph
    with di.stream(di.Stream()):
        fn()
        if grad_to_none is not None:
            for x in grad_to_none:
                x.detach_(); x.requires_grad_(True); x.grad = None  # noqa: E702
        estimate_ms = _event_ms_per_call(di, fn)
        n_repeat = 1000 if estimate_ms == 0 else max(1, int(rep / estimate_ms))
        g = graph_cls()
        with capture(g):
            for _ in range(n_repeat):
                fn()
        di.synchronize()

        def replay() -> float:
            start, end = di.Event(enable_timing=True), di.Event(enable_timing=True)
            start.record()
            g.replay()
            end.record()
            di.synchronize()
            return start.elapsed_time(end) / n_repeat

        yield replay
    del torch


def interface_bench_graph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean",
                          graph_class: str = "torch.cuda.CUDAGraph"):
    """triton.testing.do_bench_cudagraph, ported to any vendor: 10 replays of one capture."""
    with graph_replayer(fn, rep, grad_to_none, graph_class) as replay:
        times = [replay() for _ in range(10)]
    return _summarize(times, quantiles, return_mode)


class _rng_guard:
    """Capture must not advance or re-register the default generators.

    A capture registers the device's default generators with the graph; one that fails midway
    (a kernel refusing capture) never unregisters them, and the next random tensor then raises
    "Offset increment outside graph capture encountered unexpectedly". So: save the generators'
    states, and after a failed attempt run an empty scratch capture (which closes the
    registration) and restore them. Skipped when the device interface exposes no
    default_generators: there is then no registration to protect."""

    def __init__(self, backend):
        self.backend = backend
        self.gens, self.states, self.module = [], [], None

    def __enter__(self):
        try:
            from triton.runtime import driver

            self.module = driver.active.get_device_interface()
        except Exception:
            self.module = None
        self.gens = list(getattr(self.module, "default_generators", None) or [])
        self.states = [g.get_state() for g in self.gens]
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self.gens:
            return False
        if exc_type is not None:
            try:
                graph_module = importlib.import_module(self.backend.graph_class.rpartition(".")[0])
                scratch = _resolve(self.backend.graph_class)()
                stream = self.module.Stream()
                with self.module.stream(stream):
                    with graph_module.graph(scratch, stream=stream):
                        pass
                self.module.synchronize()
            except Exception:
                pass  # a dead context: the fallback's own failure will say so
        try:
            for g, s in zip(self.gens, self.states):
                g.set_state(s)
        except Exception:
            pass
        return False


class TimingPolicy:
    """The run's timer, in place of the corpus' do_bench (`__call__`) and do_bench_cudagraph
    (`graph_entry`). Settings are read once from the plugin config; each timing call records the
    timer it actually used and its sampling facts.

    Each call takes the timer's own budget (one call of the corpus' timer or of upstream's graph
    timer, timer.repeat times)."""

    def __init__(self, orig_bench: Callable, orig_graph: Optional[Callable]):
        cfg = _runtime.config()
        timer = cfg.get("timer", {})
        self.orig_bench, self.orig_graph = orig_bench, orig_graph
        self.name = timer.get("name", "direct")
        self.repeat = max(1, int(timer.get("repeat", 1)))
        self.fill_gaps = bool(timer.get("fill_gaps", True))
        self.min_window_ms = float(timer.get("min_window_ms") or 0)
        self.backend = get_backend(cfg.get("backend", "cpu"))
        self.capture_deny_ops = set(cfg.get("capture_deny_ops", []))
        self.timer = {"graph": self.graph, "direct": self.timed_direct, "host": self.timed_host}[self.name]

    def __call__(self, *a, **kw):
        # Triton's autotuner benchmarks its configs through triton.testing.do_bench too: those calls
        # are not the corpus' rows. They keep Triton's own timer and are not recorded.
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "triton" or caller.startswith("triton."):
            return self.orig_bench(*a, **kw)
        if _runtime.probe_only:
            return self.probe(*a, **kw)
        return self.timer(*a, **kw)

    def probe(self, fn, *a, quantiles=None, return_mode="mean", **kw):
        """A node-level A/B's liveness probe (plugins/serve.py): one call compiles the op's kernels;
        nothing is timed and the probe's records are not rows."""
        fn()
        dev = _device_module()
        if dev is not None:
            dev.synchronize()
        return _summarize([1.0], quantiles, return_mode)

    def graph_entry(self, fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean", **kw):
        # The corpus asked for graph timing itself (--mode cudagraph): apply the same policy.
        return self(fn, warmup=25, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                    return_mode=return_mode)

    # -- the three timers, recorded ------------------------------------------------------------
    def timed_direct(self, *a, **kw):
        value, sampling = self.direct(*a, **kw)
        _note("direct", sampling)
        return value

    def timed_host(self, *a, **kw):
        value, sampling = self.host(*a, **kw)
        _note("host", sampling)
        return value

    def graph(self, fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean",
              **kw):
        op = _runtime.current_op
        if op in self.capture_deny_ops:
            value, sampling = self.direct(fn, warmup, rep, grad_to_none, quantiles, return_mode, **kw)
            _note("direct", sampling, [MARKER_FALLBACK], f"capture not attempted: '{op}' is in capture_deny_ops")
            return value
        try:
            value, sampling = self.captured(fn, rep, grad_to_none, quantiles, return_mode)
        except Exception as e:
            # Only its kind is kept: the failed capture's frames are freed before the fallback runs.
            capture_error = (type(e), str(e))
        else:
            _note("graph", sampling)
            return value
        return self.after_failed_capture(capture_error, fn, warmup, rep, grad_to_none, quantiles,
                                         return_mode, **kw)

    # -- direct and host -----------------------------------------------------------------------
    def direct(self, fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean",
               **kw):
        spin = device_spin() if self.fill_gaps else None
        if spin is None:
            return self.fixed_direct(fn, warmup, rep, grad_to_none, quantiles, return_mode, **kw)
        with filled_gaps(fn, spin):
            return self.fixed_direct(fn, warmup, rep, grad_to_none, quantiles, return_mode, **kw)

    def fixed_direct(self, fn, warmup, rep, grad_to_none, quantiles, return_mode, **kw):
        """The corpus' timer with its own budget, timer.repeat times (median kept), as before."""
        if quantiles is not None or self.repeat == 1:
            return self.orig_bench(fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none,
                                   quantiles=quantiles, return_mode=return_mode, **kw), Sampling()
        value = statistics.median(
            self.orig_bench(fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none, return_mode=return_mode, **kw)
            for _ in range(self.repeat)
        )
        return value, Sampling()

    def host(self, fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean",
             **kw):
        values = [host_bench(fn, warmup, rep, grad_to_none, quantiles, return_mode) for _ in range(self.repeat)]
        return (values[0] if quantiles is not None else statistics.median(values)), Sampling()

    # -- graph capture -------------------------------------------------------------------------
    def captured(self, fn, rep, grad_to_none, quantiles, return_mode):
        """timer.repeat captures and replays (median kept). Raises what a capture attempt raised."""
        with _rng_guard(self.backend):
            graph_rep, = self.window_reps(fn, rep)
            values = [self.capture(fn, graph_rep, grad_to_none, quantiles, return_mode) for _ in range(self.repeat)]
        return (values[0] if quantiles is not None else statistics.median(values)), Sampling()

    def window_reps(self, fn, *reps) -> Tuple[float, ...]:
        """The reps for this call's captures, each widened for a launch-bound call (the call is
        measured once for all of them)."""
        spin = device_spin() if self.min_window_ms > 0 else None
        if spin is None:
            return reps
        eager_ms, device_ms = graph_call_estimates(fn, spin)
        return tuple(widened_rep(eager_ms, device_ms, r, self.min_window_ms) for r in reps)

    def capture(self, fn, rep, grad_to_none, quantiles, return_mode):
        if self.backend.upstream_graph_timer and self.orig_graph is not None:
            return self.orig_graph(fn, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                                   return_mode=return_mode)
        return interface_bench_graph(fn, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                                     return_mode=return_mode, graph_class=self.backend.graph_class)

    def after_failed_capture(self, capture_error, fn, warmup, rep, grad_to_none, quantiles,
                             return_mode, **kw):
        """Classified by the backend's wording: a fatal or poisoning capture failure raises with
        its marker; a refused one falls back to direct timing, marked. A fallback that raises what
        the capture raised is the op's own error (it fails whatever the timer): raised as is."""
        op = _runtime.current_op
        message = f"{capture_error[0].__name__}: {capture_error[1]}"
        verdict = self.backend.classify_capture_failure(message)
        if verdict == "fatal":
            raise RuntimeError(f"{MARKER_FATAL}: op '{op}' failed on the device: {message}")
        if verdict == "poisoned":
            _runtime.emit("poison", node=_runtime.current_node, op=op, reason=message)
            raise RuntimeError(
                f"{MARKER_POISONED}: op '{op}' is capture-incompatible (the capture attempt left "
                f"the device context unusable): {message}"
            )
        try:
            value, sampling = self.direct(fn, warmup, rep, grad_to_none, quantiles, return_mode, **kw)
        except Exception as e2:
            if (type(e2), str(e2)) == capture_error:
                raise  # a broken op (e.g. NotImplementedError for a shape): the node fails with it
            # The refused attempt left nothing usable behind: that is poisoning, not a broken op.
            _runtime.emit("poison", node=_runtime.current_node, op=op, reason=message)
            raise RuntimeError(
                f"{MARKER_POISONED}: op '{op}' is capture-incompatible: capture failed ({message}) "
                f"and the direct fallback then failed too ({type(e2).__name__}: {e2})"
            ) from e2
        _note("direct", sampling, [MARKER_FALLBACK], f"capture refused: {message[:300]}")
        return value


def make_policy(orig_bench: Callable, orig_graph: Optional[Callable]):
    """(do_bench replacement, do_bench_cudagraph replacement) for the run's timer."""
    policy = TimingPolicy(orig_bench, orig_graph)
    return policy, policy.graph_entry


def install() -> None:
    cfg = _runtime.config()
    first = None
    for modname in cfg.get("timer_modules", []):
        if modname in _patched:
            continue
        try:
            mod = importlib.import_module(modname)
        except ImportError as e:
            _runtime.emit("warning", message=f"timer module {modname} not importable: {e}")
            continue
        orig_bench = mod.do_bench
        orig_graph = getattr(mod, "do_bench_cudagraph", None)
        policy, graph_entry = make_policy(orig_bench, orig_graph)
        first = first or policy
        _patched[modname] = (orig_bench, orig_graph)
        mod.do_bench = policy
        if orig_graph is not None:
            mod.do_bench_cudagraph = graph_entry
    if first is not None:
        install_entry_points(get_backend(cfg.get("backend", "cpu")).corpus_timer_entry_points, first)


def install_entry_points(entry_points, policy) -> None:
    """The backend's own corpus timers ("module:attr", e.g. Ascend's do_bench_npu, which FlagGems
    calls with fn alone, counting iterations) become zlbench's timer too: the timer's own budget,
    the median kept, as for do_bench."""
    for entry in entry_points:
        modname, _, attr = entry.partition(":")
        if entry in _patched:
            continue
        try:
            mod = importlib.import_module(modname)
            orig = getattr(mod, attr)
        except (ImportError, AttributeError) as e:
            _runtime.emit("warning", message=f"corpus timer {entry} not found ({e}): rows it would time "
                          "are not timed by zlbench (marked BENCHMARK_NOT_ZLBENCH_TIMER)")
            continue
        _patched[entry] = (orig, None)
        setattr(mod, attr, lambda fn, *args, **kwargs: policy(fn, return_mode="median"))


def pytest_sessionstart(session):
    install()
