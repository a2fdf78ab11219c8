"""Timing policy inside the benchmark process (the pytest plugin `zlbench.plugins.timing`).

Patches the corpus' timer entry points (corpus.timer_modules: FlagGems looks
`triton.testing.do_bench` up at call time, and the backend's own corpus timers, e.g. Ascend's
do_bench_npu) so that every timing call goes through the run's timer, timer.name:

- graph:  capture the op in a device graph and time its replay (timers/graph.py); a shape whose
          capture is refused falls back to direct timing, marked BENCHMARK_DIRECT_NO_CUDAGRAPH.
- direct: the corpus' own direct timer, launch gaps filled (timers/direct.py).
- host:   the host's wall clock around each call (timers/host.py): the CPU's timer.
A timer takes batches under its guards (plugins/guards.py: the RNG guard around captures, the
fill-gaps spin around direct timing); timers/__init__.py says how, and how to add one. Every call
records the timer actually used, its markers and its sampling facts (rows carry them).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import Any, Callable, Dict, Optional

import pytest

from zlbench.ab import fingerprints
from zlbench.backends import get_backend
from zlbench.config.schema import TimerConf
from zlbench.plugins import _runtime, guards, only_shapes, sampling
from zlbench.plugins.timers import Call, Context, Timed, timer_class

_patched: Dict[str, Any] = {}
_policy: Optional["TimingPolicy"] = None  # the run's timer, once installed


def _note(timed: Timed) -> None:
    """Record one timing call for the row it belongs to: the timer used, markers with their reason,
    and its sampling facts."""
    _runtime.timing_calls.append({"timer_used": timed.timer_used, "markers": list(timed.markers),
                                  "reason": timed.reason, "facts": sampling.facts()})


def _launches_recorded():
    """Records the Triton kernels launched inside into _runtime.launched where the run asks
    (record_launches: an A/B, whose liveness reads them); elsewhere records nothing."""
    if not _runtime.config().get("record_launches"):
        return contextlib.nullcontext()
    return fingerprints.recording_launches(_runtime.launched)


class TimingPolicy:
    """The run's timer, in place of the corpus' do_bench (`__call__`) and do_bench_cudagraph
    (`graph_entry`). Settings are read once from the plugin config (a TimerConf)."""

    def __init__(self, orig_bench: Callable, orig_graph: Optional[Callable]):
        cfg = _runtime.config()
        self.conf = TimerConf.from_plugin(cfg.get("timer") or {})
        self.orig_bench = orig_bench
        backend = get_backend(cfg.get("backend", "cpu"))
        ctx = Context(self.conf, backend, orig_bench, orig_graph, frozenset(cfg.get("capture_deny_ops", [])))
        self.timer = timer_class(self.conf.name)(ctx)

    def __call__(self, *a, **kw):
        # Triton's autotuner benchmarks its configs through triton.testing.do_bench too: those calls
        # are not the corpus' rows. They keep Triton's own timer and are not recorded.
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "triton" or caller.startswith("triton."):
            return self.orig_bench(*a, **kw)
        outer, _runtime.in_timing_call = _runtime.in_timing_call, True
        try:
            if _runtime.probe_only:
                return self.probe(*a, **kw)
            if not only_shapes.take_call():  # a more pass' shape whose processes agree: not made at all
                _runtime.timing_calls.append({"skipped": True, "timer_used": None, "markers": [], "reason": None,
                                              "facts": None})
                return self.stand_in(*a, **kw)
            call = Call.of(*a, **kw)
            if _runtime.config().get("record_launches") and fingerprints.launch_hook_available():
                try:
                    with _launches_recorded():
                        call.fn()  # one untimed call, its launches recorded (an A/B's liveness evidence)
                except Exception:  # the timer calls it again, inside its failure classification
                    pass
            timed = self.timer.time(call)
        finally:
            _runtime.in_timing_call = outer
        _note(timed)
        return timed.value

    def probe(self, fn, *a, quantiles=None, return_mode="mean", **kw):
        """A node-level A/B's liveness probe (plugins/serve.py): one call compiles the op's kernels;
        nothing is timed and the probe's records are not rows."""
        with _launches_recorded():
            fn()
        dev = guards.device_module()
        if dev is not None:
            dev.synchronize()
        return sampling.summarize([1.0], quantiles, return_mode)

    @staticmethod
    def stand_in(*a, **kw):
        """What a call left out returns to the corpus (its shape becomes no row)."""
        call = Call.of(*a, **kw)
        return sampling.summarize([only_shapes.STAND_IN_MS], call.quantiles, call.return_mode)

    def graph_entry(self, fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean", **kw):
        # The corpus asked for graph timing itself (--mode cudagraph): apply the same policy.
        return self(fn, warmup=25, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                    return_mode=return_mode)


def make_policy(orig_bench: Callable, orig_graph: Optional[Callable]):
    """(do_bench replacement, do_bench_cudagraph replacement) for the run's timer."""
    policy = TimingPolicy(orig_bench, orig_graph)
    return policy, policy.graph_entry


def install() -> None:
    global _policy
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
    _policy = _policy or first
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """The test under its timer's scope (the graph timer: the test on the capture stream)."""
    with _policy.timer.around_test() if _policy is not None else contextlib.nullcontext():
        return (yield)
