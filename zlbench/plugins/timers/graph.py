"""graph: capture the op in a device graph and time its replay.

On CUDA, upstream triton.testing.do_bench_cudagraph itself (its numbers); elsewhere a port that takes
stream/event/synchronize from Triton's device interface and the graph class from the backend.
Launch-bound calls are given a rep that makes their replay at least timer.min_window_ms of device
time (0: upstream's own rep). The captures run under guards.rng_guard and guards.capture_pool_guard.

Each test runs on the stream its captures take (guards.on_capture_stream), so that a backward timed
after an untimed forward (FlagGems' is_backward benchmarks) captures instead of falling back.

A call whose replay takes under NO_WORK_MS per call launched no device work (a view): it is marked
BENCHMARK_NO_DEVICE_WORK, its latency times no kernel.

Per shape, a refused capture falls back to direct timing and is marked (BENCHMARK_DIRECT_NO_CUDAGRAPH);
a capture that kills the process (an abort in a vendor library) has its test retried once in a fresh
process with every call timed directly, marked the same;
a device fault is fatal; a capture that poisons the context raises BENCHMARK_CAPTURE_POISONED; an op
whose fallback raises what its capture raised is broken, and fails with its own error."""

from __future__ import annotations

import math
import re
from contextlib import contextmanager
from typing import Tuple

from zlbench.plugins import _runtime, guards
from zlbench.plugins.sampling import summarize
from zlbench.plugins.timers import BaseTimer, Call, Timed, direct, measure
from zlbench.results.schema import MARKER_FALLBACK, MARKER_FATAL, MARKER_NO_DEVICE_WORK, MARKER_POISONED, NO_WORK_MS


class Timer(BaseTimer):
    name = "graph"

    def around_test(self):
        # A test's forward on the capture stream: its captured backward then lands in the capture.
        return guards.on_capture_stream(self.ctx.backend)

    def guards(self, call: Call):
        # The pool guard outermost: rng_guard's scratch capture after a failed one runs under it.
        return [guards.capture_pool_guard(self.ctx.backend), guards.rng_guard(self.ctx.backend)]

    def prepare(self, call: Call) -> Call:
        """The rep widened for a launch-bound call (where the device can spin to measure it)."""
        window = self.ctx.conf.min_window_ms or 0
        spin = guards.device_spin() if window > 0 else None
        if spin is None:
            return call
        eager_ms, device_ms = graph_call_estimates(call.fn, spin)
        return call.with_rep(widened_rep(eager_ms, device_ms, call.rep, window))

    def batch(self, call: Call):
        if self.ctx.backend.upstream_graph_timer and self.ctx.orig_graph is not None:
            return self.ctx.orig_graph(call.fn, rep=call.rep, grad_to_none=call.grad_to_none,
                                       quantiles=call.quantiles, return_mode=call.return_mode)
        return interface_bench_graph(call.fn, rep=call.rep, grad_to_none=call.grad_to_none, quantiles=call.quantiles,
                                     return_mode=call.return_mode, graph_class=self.ctx.backend.graph_class)

    def time(self, call: Call) -> Timed:
        op, node = _runtime.current_op, _runtime.current_node
        if op in self.ctx.capture_deny_ops:
            return self.fallback(call, f"capture not attempted: '{op}' is in capture_deny_ops")
        crash = _runtime.capture_crash(node)
        if crash is not None:
            return self.fallback(call, "capture not attempted: capturing this test killed its benchmark process "
                                       f"in an earlier attempt ({crash[:200]})")
        # Around the capture, so that a capture that kills the process (an abort inside a vendor
        # library) is known as one: the node is retried once with direct timing, marked.
        _runtime.emit("capture", durable=False, node=node, op=op)
        try:
            return _no_work_marked(Timed(measure(self, call), self.name))
        except Exception as e:
            # Only its kind is kept: the failed capture's frames are freed before the fallback runs.
            capture_error = (type(e), str(e))
        finally:
            _runtime.emit("captured", durable=False, node=node)
        return self.after_failed_capture(capture_error, call)

    def fallback(self, call: Call, reason: str) -> Timed:
        timed = direct.Timer(self.ctx).time(call)
        return Timed(timed.value, timed.timer_used, [MARKER_FALLBACK], reason)

    def after_failed_capture(self, capture_error, call: Call) -> Timed:
        """Classified by the backend's wording: a fatal or poisoning capture failure raises with
        its marker; a refused one falls back to direct timing, marked. A fallback that raises what
        the capture raised is the op's own error (it fails whatever the timer): raised as is."""
        op = _runtime.current_op
        message = f"{capture_error[0].__name__}: {capture_error[1]}"
        verdict = self.ctx.backend.classify_capture_failure(message)
        if verdict == "fatal":
            raise RuntimeError(f"{MARKER_FATAL}: op '{op}' failed on the device: {message}")
        if verdict == "poisoned":
            _runtime.emit("poison", node=_runtime.current_node, op=op, reason=message)
            raise RuntimeError(
                f"{MARKER_POISONED}: op '{op}' is capture-incompatible (the capture attempt left "
                f"the device context unusable): {message}"
            )
        try:
            return self.fallback(call, f"capture refused: {said(message)[:300]}")
        except Exception as e2:
            if (type(e2), str(e2)) == capture_error:
                raise  # a broken op (e.g. NotImplementedError for a shape): the node fails with it
            # The refused attempt left nothing usable behind: that is poisoning, not a broken op.
            _runtime.emit("poison", node=_runtime.current_node, op=op, reason=message)
            raise RuntimeError(
                f"{MARKER_POISONED}: op '{op}' is capture-incompatible: capture failed ({message}) "
                f"and the direct fallback then failed too ({type(e2).__name__}: {e2})"
            ) from e2


def _no_work_marked(timed: Timed) -> Timed:
    """The call marked where its replay took under NO_WORK_MS per call: a graph of no kernel."""
    values = timed.value if isinstance(timed.value, (list, tuple)) else [timed.value]
    if values and all(isinstance(v, (int, float)) and v < NO_WORK_MS for v in values):
        timed.markers.append(MARKER_NO_DEVICE_WORK)
        timed.reason = (f"the call replays in {max(values) * 1e6:.3g} ns: it launched no device work (a view "
                        "or a no-op), so its latency times an empty graph, not a kernel")
    return timed


MAX_GRAPH_CALLS = 10000

# The name of an error code a vendor's message cites (`cudaErrorStreamCaptureInvalidated`, hipError...).
_ERROR_CODE = re.compile(r"\b((?:cuda|hip|musa)Error\w+|ACL_ERROR_\w+)")


def said(message: str) -> str:
    """What an error says, on one line: its first line and the error code its advice cites. CUDA
    appends lines of advice (where to search, CUDA_LAUNCH_BLOCKING=1, TORCH_USE_CUDA_DSA) that
    crowd a row's reason out of a table."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return message.strip()
    if lines[0].endswith(":") and len(lines) > 1:  # `RuntimeError: ` and the text on the next line
        lines[:2] = [f"{lines[0]} {lines[1]}"]
    head = lines[0] if len(lines[0]) <= 250 else lines[0][:249] + "…"
    code = next((m[1] for line in lines for m in [_ERROR_CODE.search(line)] if m), None)
    return head + (f" ({code})" if code and code not in head else "")


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
    dev = guards.device_module()
    host_us = guards.host_launch_us(fn, dev.synchronize)
    eager_ms = guards.event_ms_per_call(dev, fn)
    spin(1.5 * 5 * host_us + 50)  # longer than the host takes to queue the 5 calls below
    device_ms = guards.event_ms_per_call(dev, fn)
    return eager_ms, device_ms


@contextmanager
def graph_replayer(fn, rep=20, grad_to_none=None, graph_class: str = "torch.cuda.CUDAGraph"):
    """The set-up of triton.testing.do_bench_cudagraph, ported to any vendor (stream, events and
    synchronize from Triton's device interface, the graph class from the backend): estimate an
    eager call, capture int(rep / estimate) calls in one graph; yields replay(), which times one
    replay of it and returns the time per call (ms)."""
    import torch
    from triton.runtime import driver

    di = driver.active.get_device_interface()
    graph_cls = guards.resolve(graph_class)
    capture = guards.graph_module(graph_class).graph
    with di.stream(di.Stream()):
        fn()
        if grad_to_none is not None:
            for x in grad_to_none:
                x.detach_(); x.requires_grad_(True); x.grad = None  # noqa: E702
        estimate_ms = guards.event_ms_per_call(di, fn)
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
    return summarize(times, quantiles, return_mode)
