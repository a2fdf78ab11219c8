"""The timing plugin's policy wrapper, driven on the CPU with a plain timer function. These tests
drive the timer's own budget."""

import json
import os
import types
from pathlib import Path

import pytest

from .sim_device import scripted_events, sim_graphs, sim_interface

from zlbench.plugins import _runtime, guards, timing
from zlbench.plugins.timers import graph
from zlbench.results import events as ev, schema


def recorded():
    """The timing calls noted, without their sampling facts."""
    return [{k: v for k, v in c.items() if k != "facts"} for c in _runtime.timing_calls]


@pytest.fixture
def plugin_config(tmp_path, monkeypatch):
    def make(**cfg):
        path = tmp_path / "plugin.json"
        cfg.setdefault("timer", {"name": "direct", "repeat": 3})
        path.write_text(json.dumps({"backend": "cpu", **cfg}))
        monkeypatch.setenv(_runtime.CONFIG_ENV, str(path))
        monkeypatch.setattr(_runtime, "_config", None)
        _runtime.timing_calls.clear()
    return make


def test_direct_takes_the_median_of_repeats_and_records_the_timer(plugin_config):
    plugin_config()
    values = iter([3.0, 1.0, 2.0])
    policy, _ = timing.make_policy(lambda fn, **kw: next(values), None)
    assert policy(lambda: None, warmup=1, rep=1) == 2.0
    assert recorded() == [{"timer_used": "direct", "markers": [], "reason": None}]
    assert _runtime.timing_calls[0]["facts"]["stop_reason"] == "fixed"


def test_calls_from_inside_triton_pass_through_unrecorded(plugin_config):
    plugin_config()
    policy, _ = timing.make_policy(lambda fn, **kw: 7.0, None)
    fake_autotuner = {"__name__": "triton.runtime.autotuner", "policy": policy}
    exec("result = policy(lambda: None)", fake_autotuner)
    assert fake_autotuner["result"] == 7.0
    assert _runtime.timing_calls == []


def test_host_timer_measures_wall_clock(plugin_config):
    plugin_config(timer={"name": "host", "repeat": 1})
    policy, _ = timing.make_policy(lambda fn, **kw: -1.0, None)
    assert policy(lambda: sum(range(1000)), warmup=1, rep=2) > 0
    assert _runtime.timing_calls[0]["timer_used"] == "host"


def test_quantiles_are_summarized_as_triton_does_bench():
    """triton.testing.do_bench summarizes with torch.quantile (linear interpolation), one quantile
    as a number: zlbench's own timers (host, the graph port) return the same for the same times."""
    import torch

    from zlbench.plugins.sampling import summarize

    times = [0.9, 1.0, 1.4, 2.0, 5.0]
    for qs in ([0.5, 0.2, 0.8], [0.25], [0.0, 1.0]):
        expected = torch.quantile(torch.tensor(times, dtype=torch.float64), torch.tensor(qs, dtype=torch.float64)).tolist()
        got = summarize(times, qs, "mean")
        assert (got if len(qs) > 1 else [got]) == pytest.approx(expected), qs
    assert summarize(times, None, "median") == 1.4 and summarize(times, None, "mean") == pytest.approx(2.06)


class FakeDevice:
    """A device interface at the boundary the timing plugin uses: events, synchronize, _sleep.
    Events report scripted elapsed times (ms), in the order they are read."""

    def __init__(self, elapsed, log, can_spin=True):
        self.elapsed, self.log = iter(elapsed), log
        if can_spin:
            self._sleep = lambda cycles: log.append(("spin", cycles))
        self.Event = scripted_events(self.elapsed)

    def synchronize(self):
        pass


@pytest.fixture
def fake_device(monkeypatch):
    """Installs a FakeDevice and a fake triton driver whose clear_cache is a class method, like
    Triton's; returns (make, log, driver)."""
    import sys
    import types

    log = []

    class Driver:
        def clear_cache(self, cache):
            log.append(("clear",))

    active = Driver()
    runtime = types.ModuleType("triton.runtime")
    runtime.driver = types.SimpleNamespace(active=active)
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    monkeypatch.setitem(sys.modules, "triton.runtime", runtime)
    monkeypatch.setattr(guards, "_spin_cache", {})

    def make(elapsed, can_spin=True):
        device = FakeDevice(elapsed, log, can_spin)
        monkeypatch.setattr(guards, "device_module", lambda: device)
        return device

    return make, log, active


def fake_do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """triton.testing.do_bench's shape: per iteration, clear L2, then time fn."""
    from triton.runtime import driver

    for _ in range(3):
        driver.active.clear_cache(None)
        fn()
    return 1.0


def test_direct_fills_the_gap_after_each_clear(plugin_config, fake_device):
    make, log, active = fake_device
    plugin_config(backend="cuda", timer={"name": "direct", "repeat": 1, "fill_gaps": True})
    make([2.0, 1.0, 1.5])  # calibration: 2M cycles took at best 1 ms -> 2000 cycles per µs
    policy, _ = timing.make_policy(fake_do_bench, None)
    assert policy(lambda: log.append(("fn",))) == 1.0
    timed = log[log.index(("clear",)):]
    # each clear is followed by a spin of at least 20 µs (40000 cycles), then the call
    assert [e[0] for e in timed] == ["clear", "spin", "fn"] * 3
    assert all(e[1] >= 40000 for e in timed if e[0] == "spin")
    assert "clear_cache" not in vars(active), "the driver's own clear_cache is restored"
    assert _runtime.timing_calls[-1]["timer_used"] == "direct"


def test_direct_without_fill_or_without_a_spinning_device_is_untouched(plugin_config, fake_device):
    make, log, _ = fake_device
    for cfg, can_spin in (({"fill_gaps": False}, True), ({"fill_gaps": True}, False)):
        log.clear()
        plugin_config(backend="cuda", timer={"name": "direct", "repeat": 1, **cfg})
        make([1.0] * 3, can_spin=can_spin)
        policy, _ = timing.make_policy(fake_do_bench, None)
        assert policy(lambda: log.append(("fn",))) == 1.0
        assert [e[0] for e in log] == ["clear", "fn"] * 3


def test_widened_rep_only_for_launch_bound_calls():
    # A 1 ms kernel: 20 calls fill 20 ms, nothing to widen.
    assert graph.widened_rep(eager_ms=1.0, device_ms=1.0, rep=20, min_window_ms=2) == 20
    # A 1.1 µs kernel launched in 150 µs: upstream would hold 133 calls = 0.15 ms of replay.
    rep = graph.widened_rep(eager_ms=0.15, device_ms=0.0011, rep=20, min_window_ms=2)
    calls = int(rep / 0.15)
    assert calls * 0.0011 >= 2 and calls < 2000
    # Never more than MAX_GRAPH_CALLS calls in one graph.
    rep = graph.widened_rep(eager_ms=0.15, device_ms=1e-6, rep=20, min_window_ms=2)
    assert int(rep / 0.15) <= graph.MAX_GRAPH_CALLS


def test_graph_timer_gets_the_widened_rep(plugin_config, fake_device):
    make, log, _ = fake_device
    plugin_config(backend="cuda", timer={"name": "graph", "repeat": 1, "min_window_ms": 2})
    # calibration, then 5 eager calls (0.75 ms), then 5 queued behind a spin (5.5 µs)
    make([1.0] * 3 + [0.75, 0.0055])
    seen = {}

    def upstream_graph(fn, rep=20, **kw):
        seen["rep"] = rep
        return 0.0011

    policy, _ = timing.make_policy(fake_do_bench, upstream_graph)
    assert policy(lambda: None, rep=20) == 0.0011
    assert int(seen["rep"] / 0.15) * 0.0011 >= 2
    assert _runtime.timing_calls[-1]["timer_used"] == "graph"


def test_a_graph_replay_of_no_kernel_is_marked(plugin_config):
    """A view (einsum 'ij->ji') captures no kernel: its replay reads nanoseconds per call."""
    plugin_config(backend="cuda", timer={"name": "graph", "repeat": 1, "min_window_ms": 0})
    replays = iter([1.5e-6, 0.0011])
    policy, _ = timing.make_policy(fake_do_bench, lambda fn, rep=20, **kw: next(replays))
    assert policy(lambda: None, rep=20) == 1.5e-6
    assert policy(lambda: None, rep=20) == 0.0011
    empty, kernel = recorded()
    assert empty["timer_used"] == "graph" and empty["markers"] == [schema.MARKER_NO_DEVICE_WORK]
    assert "no device work" in empty["reason"] and "1.5 ns" in empty["reason"]
    assert kernel == {"timer_used": "graph", "markers": [], "reason": None}


def test_process_facts_say_whether_the_device_can_spin(monkeypatch):
    import types

    import torch

    from zlbench.backends import get_backend
    from zlbench.plugins import device_setup

    props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=6, pci_device_id=0, uuid="u")
    base = dict(get_device_name=lambda i: "Simulated MUSA", get_device_properties=lambda i: props,
                device_count=lambda: 1, clock_rate=lambda: 1500)
    monkeypatch.setattr(device_setup, "_backend", get_backend("musa"))
    for module, can_spin in ((types.SimpleNamespace(**base), False),
                             (types.SimpleNamespace(**base, _sleep=lambda cycles: None), True)):
        monkeypatch.setattr(torch, "musa", module, raising=False)
        facts = device_setup.process_facts()
        assert facts["device_spin"] is can_spin
        assert facts["device_bus_id"] == "0000:06:00"


def test_vendor_graph_port_captures_n_calls_and_times_replays(monkeypatch):
    """interface_bench_graph (the port for vendors where upstream's torch.cuda timer cannot run),
    driven through a simulated Triton device interface and a simulated graph class."""

    log = []
    sim_interface(monkeypatch, iter([1.0] + [10.0] * 10), log)  # 5 eager calls take 1 ms; each replay 10 ms
    sim_graphs(monkeypatch, log)

    value = graph.interface_bench_graph(lambda: log.append("fn"), rep=20, graph_class="simgraph.Graph")
    captured = log[log.index("capture") + 1:log.index("captured")]
    assert captured == ["fn"] * 100  # int(20 ms / 0.2 ms per eager call)
    assert log.count("replay") == 10
    assert value == pytest.approx(10.0 / 100)


def test_the_plugin_defaults_fill_gaps_as_the_config_does(plugin_config):
    from zlbench.config.schema import TimerConf

    plugin_config(timer={"name": "direct"})
    assert timing.TimingPolicy(lambda fn, **kw: 1.0, None).conf.fill_gaps is TimerConf().fill_gaps


# -- graph capture failures, through a simulated device interface and graph class ---------------

CAPTURE_REFUSED = "operation not permitted when stream is capturing"
OFFSET_ERROR = "Offset increment outside graph capture encountered unexpectedly"


class SimGenerator:
    def __init__(self):
        self.offset = 0

    def get_state(self):
        return self.offset

    def set_state(self, offset):
        self.offset = offset


@pytest.fixture
def sim_capture(plugin_config, monkeypatch, tmp_path):
    """A simulated MUSA: Triton's device interface (events, streams, default generators) and a
    graph class whose capture behaves as a CUDA-like runtime's does: it registers the default
    generators and a capture that fails midway never unregisters them, so the next random draw
    outside a capture raises. Returns (configure, device); device.draw() is a random draw."""
    import contextlib
    import itertools
    import sys
    import types

    from zlbench.backends import get_backend

    device = types.SimpleNamespace(capturing=False, registered=False, log=[], generator=SimGenerator())

    def draw():
        if device.registered and not device.capturing:
            raise RuntimeError(OFFSET_ERROR)
        device.generator.offset += 1

    device.draw = draw
    interface = types.SimpleNamespace(
        Stream=lambda: "side stream", Event=scripted_events(itertools.repeat(1.0)),
        synchronize=lambda: None, stream=lambda s: contextlib.nullcontext(),
        default_generators=[device.generator])
    runtime = types.ModuleType("triton.runtime")
    runtime.driver = types.SimpleNamespace(
        active=types.SimpleNamespace(get_device_interface=lambda: interface))
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    monkeypatch.setitem(sys.modules, "triton.runtime", runtime)

    graphs = types.ModuleType("simgraph")
    streams = itertools.count(1)

    class Stream(str):
        def wait_stream(self, other):  # the order kept between two streams, logged
            device.log.append(("wait", str(self), str(other)))

    device.current, device.capture_stream = Stream("default stream"), None

    class Graph:
        def replay(self):
            device.log.append("replay")

    class graph:
        """As torch.cuda.graph: captures on `stream`, else on a stream its class makes once."""

        default_capture_stream = None

        def __init__(self, g, pool=None, stream=None):
            if stream is None and type(self).default_capture_stream is None:
                type(self).default_capture_stream = graphs.Stream()
            self.capture_stream = stream or type(self).default_capture_stream

        def __enter__(self):
            device.log.append("capture")
            device.capturing = device.registered = True
            self.before, device.current = device.current, self.capture_stream
            device.capture_stream = self.capture_stream

        def __exit__(self, exc_type, exc, tb):
            device.capturing, device.current = False, self.before
            if exc_type is None:
                device.registered = False  # only a capture that completes unregisters the generators
                device.log.append("captured")
            return False

    @contextlib.contextmanager
    def stream(s):
        before, device.current = device.current, s
        try:
            yield
        finally:
            device.current = before

    def launch(on_stream):
        """A kernel launched on `on_stream`: a capture fails where it is not the capture's stream."""
        if device.capturing and on_stream != device.capture_stream:
            raise RuntimeError("operation failed due to a previous error during capture "
                               "(cudaErrorStreamCaptureInvalidated)")
        device.log.append(("kernel", on_stream))

    device.launch = launch
    graphs.Graph, graphs.graph = Graph, graph
    graphs.Stream, graphs.stream = (lambda: Stream(f"stream {next(streams)}")), stream
    graphs.current_stream = lambda: device.current
    monkeypatch.setitem(sys.modules, "simgraph", graphs)
    monkeypatch.setattr(type(get_backend("musa")), "graph_class", "simgraph.Graph")
    monkeypatch.setattr(guards, "device_module", lambda: types.SimpleNamespace())  # cannot spin
    monkeypatch.setattr(guards, "_spin_cache", {})
    monkeypatch.setattr(_runtime, "_events", None)
    monkeypatch.setattr(_runtime, "current_op", "op")
    events = tmp_path / "events.jsonl"

    def configure(timer="graph", **cfg):
        plugin_config(backend="musa", events=str(events), timer={"name": timer, "repeat": 1}, **cfg)

    def emitted(kind):
        lines = events.read_text().splitlines() if events.exists() else []
        return [e for e in map(json.loads, lines) if e["event"] == kind]

    device.emitted = emitted
    return configure, device


def direct_bench(device):
    """The corpus' direct timer: calls fn; says with what generator offset it started."""

    def bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        device.log.append(("direct", device.generator.offset))
        for _ in range(3):
            fn()
        return 5.0

    return bench


def test_a_captured_op_is_graph_timed_and_leaves_the_generators_as_they_were(sim_capture):
    configure, device = sim_capture
    configure()
    policy, _ = timing.make_policy(direct_bench(device), None)
    # 5 eager calls take 1 ms: the graph holds int(20 ms / 0.2 ms) calls; each replay takes 1 ms
    assert policy(device.draw, rep=20) == pytest.approx(1.0 / 100)
    assert device.generator.offset == 0 and device.log.count("replay") == 10
    assert recorded() == [{"timer_used": "graph", "markers": [], "reason": None}]


def test_a_backward_timed_after_its_untimed_forward_is_captured_where_the_test_ran_on_the_capture_stream(sim_capture):
    """Autograd runs a backward kernel on its forward's stream. FlagGems' is_backward benchmarks run
    the forward once, untimed, and time the backward: with the forward on the default stream, the
    capture (on a stream of its own) was invalidated and the shape timed directly. The graph timer
    puts the test on the capture stream, made once, so the backward's kernels land in the capture."""
    configure, device = sim_capture
    configure()
    policy, _ = timing.make_policy(direct_bench(device), None)

    def forward():
        on = device.current
        return lambda: device.launch(on)  # the backward, on the forward's stream

    backward = forward()  # as before: the test on the default stream
    assert policy(backward, rep=20) == 5.0
    assert _runtime.timing_calls[-1]["markers"] == [schema.MARKER_FALLBACK]

    streams = set()
    for _ in range(2):  # two tests
        _runtime.timing_calls.clear()
        with policy.timer.around_test():
            streams.add(device.current)
            backward = forward()
            assert policy(backward, rep=20) == pytest.approx(1.0 / 100)
        assert recorded() == [{"timer_used": "graph", "markers": [], "reason": None}]
        assert device.current == "default stream"  # the test's scope ends with it
    import simgraph
    assert streams == {simgraph.graph.default_capture_stream} != {None}


def test_a_test_on_the_capture_stream_starts_after_its_set_up_and_its_teardown_after_it(sim_capture):
    """A side stream does not wait for the default stream: without the waits, the test's first
    kernels could read inputs its fixtures were still writing there."""
    configure, device = sim_capture
    configure()
    policy, _ = timing.make_policy(direct_bench(device), None)
    device.launch(device.current)  # the set-up's kernel
    with policy.timer.around_test():
        side = str(device.current)
        device.launch(device.current)
    device.launch(device.current)  # the teardown's
    assert side != "default stream"
    assert device.log == [("kernel", "default stream"), ("wait", side, "default stream"), ("kernel", side),
                          ("wait", "default stream", side), ("kernel", "default stream")]


def test_a_refused_wait_after_the_test_leaves_its_outcome_alone(sim_capture, monkeypatch):
    configure, device = sim_capture
    configure()
    policy, _ = timing.make_policy(direct_bench(device), None)
    def wait_stream(stream, other):  # the default stream's wait for the test's refused
        if stream == "default stream":
            raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(type(device.current), "wait_stream", wait_stream)
    with policy.timer.around_test():
        assert device.current != "default stream"
    assert device.current == "default stream"


def test_only_the_graph_timer_moves_a_test_off_its_stream(sim_capture):
    configure, device = sim_capture
    configure(timer="direct")
    policy, _ = timing.make_policy(direct_bench(device), None)
    with policy.timer.around_test():
        assert device.current == "default stream"


def test_a_refused_capture_falls_back_to_direct_with_the_generators_recovered(sim_capture):
    configure, device = sim_capture
    configure()

    def op():
        device.draw()
        if device.capturing:
            raise RuntimeError(CAPTURE_REFUSED)

    policy, _ = timing.make_policy(direct_bench(device), None)
    assert policy(op, rep=20) == 5.0
    # The failed capture left the generators registered: a scratch capture closed the registration
    # (else the fallback's first draw raises), and their offset is back where it was.
    assert device.log[-3:] == ["capture", "captured", ("direct", 0)] and not device.registered
    [call] = _runtime.timing_calls
    assert call["timer_used"] == "direct" and call["markers"] == [schema.MARKER_FALLBACK]
    assert CAPTURE_REFUSED in call["reason"] and not device.emitted("poison")


def test_a_refused_captures_reason_is_one_line_with_the_error_code(sim_capture):
    # CUDA's wording on an H200 (2026-12-05, FlagGems' avg_pool3d_backward): the first line says
    # what happened, the rest is advice that would crowd the reason out of summary.md's tables.
    configure, device = sim_capture
    configure()
    cuda_said = ("CUDA error: operation failed due to a previous error during capture\n"
                 "Search for `cudaErrorStreamCaptureInvalidated' in https://docs.nvidia.com/cuda/"
                 "cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
                 "CUDA kernel errors might be asynchronously reported at some other API call, so the "
                 "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n")

    def op():
        device.draw()
        if device.capturing:
            raise RuntimeError(CAPTURE_REFUSED + "\n" + cuda_said)

    policy, _ = timing.make_policy(direct_bench(device), None)
    assert policy(op, rep=20) == 5.0
    [call] = _runtime.timing_calls
    assert call["markers"] == [schema.MARKER_FALLBACK]
    assert call["reason"] == f"capture refused: RuntimeError: {CAPTURE_REFUSED} (cudaErrorStreamCaptureInvalidated)"


def test_a_device_fault_during_capture_is_fatal_without_a_fallback(sim_capture):
    configure, device = sim_capture
    configure()

    def op():
        if device.capturing:
            raise RuntimeError("musaErrorIllegalAddress: an illegal memory access")

    policy, _ = timing.make_policy(direct_bench(device), None)
    with pytest.raises(RuntimeError, match=schema.MARKER_FATAL):
        policy(op, rep=20)
    assert not [e for e in device.log if e[0] == "direct"] and _runtime.timing_calls == []


def test_a_capture_that_destroys_the_context_is_poisoned(sim_capture):
    configure, device = sim_capture
    configure()

    def op():
        if device.capturing:
            raise RuntimeError("musaErrorContextIsDestroyed: context is destroyed")

    policy, _ = timing.make_policy(direct_bench(device), None)
    with pytest.raises(RuntimeError, match=schema.MARKER_POISONED):
        policy(op, rep=20)
    assert not [e for e in device.log if e[0] == "direct"]
    assert [e["op"] for e in device.emitted("poison")] == ["op"]


def test_a_refused_capture_whose_fallback_fails_differently_is_poisoned(sim_capture):
    configure, device = sim_capture
    configure()
    dead = []

    def op():
        if dead:
            raise RuntimeError("MUSA error: invalid resource handle")
        if device.capturing:
            dead.append(True)
            raise RuntimeError(CAPTURE_REFUSED)

    policy, _ = timing.make_policy(direct_bench(device), None)
    with pytest.raises(RuntimeError, match=schema.MARKER_POISONED) as raised:
        policy(op, rep=20)
    assert CAPTURE_REFUSED in str(raised.value) and "invalid resource handle" in str(raised.value)
    assert len(device.emitted("poison")) == 1


@pytest.mark.parametrize("timer", ["graph", "direct"])
def test_an_op_that_raises_whatever_the_timer_fails_with_its_own_error(sim_capture, timer):
    configure, device = sim_capture
    configure(timer=timer)

    def op():
        raise NotImplementedError("shape (3, 5) is not supported")

    policy, _ = timing.make_policy(direct_bench(device), None)
    with pytest.raises(NotImplementedError, match=r"shape \(3, 5\)") as raised:
        policy(op, rep=20)
    assert schema.MARKER_POISONED not in str(raised.value)
    assert not device.emitted("poison") and _runtime.timing_calls == []
    assert [e[0] for e in device.log if e[0] == "direct"] == ["direct"]  # the fallback did run


def test_an_op_on_the_deny_list_is_timed_directly_without_a_capture(sim_capture):
    configure, device = sim_capture
    configure(capture_deny_ops=["op"])
    policy, _ = timing.make_policy(direct_bench(device), None)
    assert policy(device.draw, rep=20) == 5.0
    assert "capture" not in device.log
    [call] = _runtime.timing_calls
    assert call["markers"] == [schema.MARKER_FALLBACK] and "capture_deny_ops" in call["reason"]


def test_a_capture_is_bracketed_by_events_and_a_test_whose_capture_killed_its_process_is_timed_directly(
        sim_capture, monkeypatch):
    """A capture that aborts inside a vendor library kills the process: no exception to fall back
    on. Every capture is bracketed by capture / captured events so the worker can tell; the fresh
    process of the retry (its unit's events hold the worker's retry with capture_crash) times that
    test directly, marked with why, and other tests are captured as before."""
    configure, device = sim_capture
    configure()
    monkeypatch.setattr(_runtime, "current_node", "benchmark/test_x.py::test_a[float16]")
    monkeypatch.setattr(_runtime, "_capture_crashes", {})
    policy, _ = timing.make_policy(direct_bench(device), None)
    policy(device.draw, rep=20)
    assert [(e["event"], e["node"]) for e in device.emitted("capture") + device.emitted("captured")] == [
        ("capture", "benchmark/test_x.py::test_a[float16]"), ("captured", "benchmark/test_x.py::test_a[float16]")]
    ev.append(Path(_runtime.config()["events"]), "retry", node="benchmark/test_x.py::test_a", capture_crash=True,
              reason="process killed by signal SIGABRT; log tail: Fatal Python error: Aborted")
    monkeypatch.setattr(_runtime, "_capture_crashes", {})  # a fresh process reads its unit's events anew
    _runtime.timing_calls.clear()
    device.log.clear()
    assert policy(device.draw, rep=20) == 5.0
    assert "capture" not in device.log and len(device.emitted("capture")) == 1
    [call] = _runtime.timing_calls
    assert call["markers"] == [schema.MARKER_FALLBACK]
    assert "capturing this test killed its benchmark process in an earlier attempt (process killed by signal " \
           "SIGABRT" in call["reason"]
    monkeypatch.setattr(_runtime, "current_node", "benchmark/test_x.py::test_b[float16]")
    policy(device.draw, rep=20)
    assert "capture" in device.log  # another test of the process is captured as before


def test_what_torch_loads_on_first_use_loads_while_the_process_waits_at_its_gate(monkeypatch, tmp_path):
    """On a device backend the lazy imports run in a thread while the process waits at its gate
    (the gate opens only once the import has begun), are finished before the first test, and a
    module this torch or Triton lacks is skipped. The CPU backend preloads nothing."""
    import sys
    import threading
    import types

    from zlbench.backends import get_backend
    from zlbench.plugins import device_setup

    signals = types.ModuleType("zl_preload_signals")
    signals.began = threading.Event()
    monkeypatch.setitem(sys.modules, "zl_preload_signals", signals)
    (tmp_path / "zl_slow_lazy.py").write_text(
        "import time, zl_preload_signals as s\ns.began.set()\ntime.sleep(0.2)\ndone = True\n")
    (tmp_path / "zl_calls.py").write_text("calls = []\ndef key():\n    calls.append(1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(device_setup, "LAZY_IMPORTS", ("zl_no_such_module", "zl_slow_lazy"))
    monkeypatch.setattr(device_setup, "LAZY_CALLS", (("zl_calls", "key"), ("zl_calls", "missing")))
    emitted = []
    monkeypatch.setattr(_runtime, "emit", lambda event, **kw: emitted.append((event, kw)))
    session = types.SimpleNamespace(items=[])

    for backend, preloads in (("musa", True), ("cpu", False)):
        for name in ("zl_slow_lazy", "zl_calls"):
            sys.modules.pop(name, None)
        signals.began.clear()
        emitted.clear()
        read, write = os.pipe()
        monkeypatch.setattr(device_setup, "_gate_fd", str(read))
        monkeypatch.setattr(device_setup, "_backend", get_backend(backend))
        opener = threading.Thread(target=lambda: (signals.began.wait(10), os.write(write, b"1")))
        opener.start()
        if not preloads:  # nothing begins the import: the gate opens on its own
            signals.began.set()
        device_setup.pytest_collection_finish(session)
        opener.join()
        os.close(write)
        gate = dict(emitted)["gate"]
        if preloads:
            assert sys.modules["zl_slow_lazy"].done is True  # finished before the hook returned
            assert sys.modules["zl_calls"].calls == [1]
            assert gate["preload_s"] >= 0.2 and gate["preload_late_s"] >= 0.0, gate
        else:
            assert "zl_slow_lazy" not in sys.modules and "preload_s" not in gate, gate


@pytest.mark.parametrize("message,reason", [
    ("", ""),
    ("  \n ", ""),
    ("RuntimeError: \nCUDA error: x\nSearch for `cudaErrorStreamCaptureUnsupported' in ...",
     "RuntimeError: CUDA error: x (cudaErrorStreamCaptureUnsupported)"),
    ("AcceleratorError: CUDA error: x (cudaErrorIllegalAddress)\nSearch for `cudaErrorOther'",
     "AcceleratorError: CUDA error: x (cudaErrorIllegalAddress)"),
    ("RuntimeError: HIP error: hipErrorStreamCaptureUnsupported", "RuntimeError: HIP error: hipErrorStreamCaptureUnsupported"),
    ("RuntimeError: " + "y" * 400 + "\nSearch for `cudaErrorStreamCaptureInvalidated'",
     "RuntimeError: " + "y" * 235 + "… (cudaErrorStreamCaptureInvalidated)"),
])
def test_a_reason_keeps_its_first_line_and_the_code_it_cites(message, reason):
    from zlbench.plugins.timers.graph import said

    assert said(message) == reason


def test_an_ab_records_the_kernels_each_timing_call_launches_in_one_untimed_call(plugin_config, monkeypatch):
    """record_launches (an A/B's plugin config): one call of the op before the timer, under Triton's
    launch hook (simulated at that boundary: no Triton on the CPU), its launches named; the timer's
    own calls are not recorded. A plain run makes no such call; a call that raises there is left
    to the timer, whose classification sees the failure (a review: an OOM read "failed", not fatal)."""
    import sys
    import types

    from zlbench.ab import fingerprints

    chain = []
    triton = types.ModuleType("triton")
    triton.knobs = types.SimpleNamespace(runtime=types.SimpleNamespace(launch_enter_hook=types.SimpleNamespace(
        add=chain.append, remove=chain.remove)))
    monkeypatch.setitem(sys.modules, "triton", triton)
    fingerprints.launch_hook_available.cache_clear()
    monkeypatch.setattr(_runtime, "launched", set())
    calls = []

    def op():
        calls.append(1)
        for hook in list(chain):
            hook(types.SimpleNamespace(data={"name": f"k{len(calls)}"}))

    try:
        for record, extra in ((False, 0), (True, 1)):
            plugin_config(record_launches=record)
            calls.clear()
            policy, _ = timing.make_policy(lambda fn, **kw: (fn(), 1.0)[1], None)
            assert policy(op, warmup=1, rep=1) == 1.0
            assert len(calls) == 3 + extra  # the direct timer's 3 repeats, and the recorded call
        assert _runtime.launched == {"k1"} and chain == []  # the recorded call only; the hook removed

        def broken():
            raise RuntimeError("CUDA out of memory")

        with pytest.raises(RuntimeError, match="out of memory"):  # from the timer's own call
            policy(broken, warmup=1, rep=1)
        assert chain == []
    finally:
        fingerprints.launch_hook_available.cache_clear()


class CachingAllocator:
    """A device module's memory calls: freed blocks stay cached (reserved) until empty_cache."""

    def __init__(self):
        self.allocated = self.reserved = 0

    def alloc(self, nbytes):
        self.allocated += nbytes
        self.reserved = max(self.reserved, self.allocated)

    def free(self, nbytes):
        self.allocated -= nbytes

    def empty_cache(self):
        self.reserved = self.allocated

    def memory_allocated(self):
        return self.allocated

    def memory_reserved(self):
        return self.reserved


def test_release_device_memory_frees_cycles_and_the_cache(monkeypatch):
    """A resident process' node leaves nothing held for the other side's process: an input kept
    alive only by a reference cycle is collected, then the cached blocks go back to the device."""
    dev = CachingAllocator()
    monkeypatch.setattr(guards, "device_module", lambda: dev)

    class Input:
        def __init__(self, nbytes):
            self.nbytes = nbytes
            dev.alloc(nbytes)
            self.me = self  # a cycle: reference counting alone never frees it

        def __del__(self):
            dev.free(self.nbytes)

    Input(4 * 2**30)
    kept = Input(2**20)
    dev.alloc(2**30)
    dev.free(2**30)  # a freed block, still cached
    assert dev.memory_allocated() == 4 * 2**30 + 2**20 and dev.memory_reserved() == dev.memory_allocated() + 2**30
    assert guards.release_device_memory() == {"allocated_mib": 1.0, "reserved_mib": 1.0}
    assert dev.memory_allocated() == dev.memory_reserved() == kept.nbytes


def test_release_device_memory_on_the_cpu_and_without_queries(monkeypatch):
    monkeypatch.setattr(guards, "device_module", lambda: None)
    assert guards.release_device_memory() is None
    emptied = []
    monkeypatch.setattr(guards, "device_module", lambda: types.SimpleNamespace(empty_cache=lambda: emptied.append(1)))
    assert guards.release_device_memory() == {} and emptied == [1]  # released; nothing to say it held

    def broken():
        raise RuntimeError("CUDA error: unspecified launch failure")

    monkeypatch.setattr(guards, "device_module", lambda: types.SimpleNamespace(empty_cache=broken))
    # the node it follows was served: a failed release is said, never raised out of the serve loop
    assert guards.release_device_memory() == {"release_failed": "RuntimeError: CUDA error: unspecified launch failure"}


class CapturingAllocator(CachingAllocator):
    """CachingAllocator with torch's capture bookkeeping (c10/cuda/CUDACachingAllocator.cpp): a
    capture routes allocations to a private pool, whose use count each capture that takes it
    raises and each release lowers (below zero torch asserts, and in a graph's destructor that
    aborts the process); while any routing is on, empty_cache frees none of the general pools."""

    def __init__(self):
        super().__init__()
        self.underway, self.pools, self.next_pool = [], {}, 0

    def handle(self):
        self.next_pool += 1
        return (0, self.next_pool)

    def begin(self, pool):
        self.pools[pool] = self.pools.get(pool, 0) + 1
        self.underway.append(pool)

    def end(self, device, pool):
        if pool not in self.underway:
            raise RuntimeError("endAllocatePool: not currently recording to mempool_id")
        self.underway.remove(pool)

    def release(self, device, pool):
        if pool not in self.pools:
            raise RuntimeError("no such pool")
        self.pools[pool] -= 1
        if self.pools[pool] < 0:
            raise AssertionError("use_count below 0: torch aborts here inside a graph's destructor")

    def empty_cache(self):
        if not self.underway:
            super().empty_cache()


@pytest.fixture
def sim_cuda_graphs(monkeypatch):
    """A graph module `simcuda` shaped as torch.cuda's (aten/src/ATen/cuda/CUDAGraph.cpp): entering
    graph(g) begins routing to the pool; on exit capture_end raises before it ends the routing where
    the capture was invalidated (an op refused it); a graph whose capture ended releases its pool
    when deleted (reset()). mod.fail picks another point to fail at: before routing begins, after
    it begins, after capture_end ended it, or at instantiation, after the capture ended."""
    import sys

    import torch

    alloc = CapturingAllocator()
    mod = types.ModuleType("simcuda")
    mod.fail = None

    class Graph:
        def __init__(self):
            self.ended, self.mempool = False, None

        def pool(self):
            if not self.ended:
                raise RuntimeError("Called CUDAGraph::pool() without a preceding successful capture.")
            return self.mempool

        def reset(self):  # what its destructor does
            if self.ended:
                alloc.release(0, self.mempool)
                self.ended = False

    class graph:  # torch.cuda.graph's shape: a class, the pool its second argument
        def __init__(self, cuda_graph, pool=None, stream=None):
            self.cuda_graph, self.pool = cuda_graph, pool

        def __enter__(self):
            if mod.fail == "before_begin":
                raise RuntimeError("CUDA graphs must be captured on a non-default stream.")
            self.cuda_graph.mempool = self.pool or alloc.handle()
            alloc.begin(self.cuda_graph.mempool)
            if mod.fail == "after_begin":
                raise RuntimeError("CUDA error: operation not permitted (cudaStreamBeginCapture)")

        def __exit__(self, exc_type, exc, tb):
            if exc_type is not None:
                raise RuntimeError("CUDA error: operation failed due to a previous error during capture "
                                   "(cudaErrorStreamCaptureInvalidated)")
            alloc.end(0, self.cuda_graph.mempool)
            if mod.fail == "after_end":
                raise RuntimeError("Invalid capture.")
            self.cuda_graph.ended = True
            if mod.fail == "instantiate":
                raise RuntimeError("CUDA error: cudaGraphInstantiateWithFlags failed")

    mod.Graph, mod.graph, mod.graph_pool_handle, mod.current_device = Graph, graph, alloc.handle, lambda: 0
    monkeypatch.setitem(sys.modules, "simcuda", mod)
    monkeypatch.setattr(torch._C, "_simcuda_endAllocateToPool", alloc.end, raising=False)
    monkeypatch.setattr(torch._C, "_simcuda_releasePool", alloc.release, raising=False)
    backend = types.SimpleNamespace(graph_class="simcuda.Graph", torch_device="simcuda")
    return mod, alloc, backend


def _refused_capture(mod, alloc):
    """An op that allocates 256 MiB and then syncs inside the capture (torch raises there)."""
    with pytest.raises(RuntimeError, match="cudaErrorStreamCaptureInvalidated"):
        with mod.graph(mod.Graph()):
            alloc.alloc(256 * 2**20)
            alloc.free(256 * 2**20)
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")


@pytest.mark.parametrize("guarded", [False, True])
def test_a_refused_capture_leaves_the_allocator_capturing_unless_guarded(sim_cuda_graphs, guarded):
    """H100, 2026-12-06: after a node whose capture was refused, a resident side process kept 20-75
    GiB reserved through every later release (empty_cache frees none of the general pools while a
    capture counts as underway), and the other side's 4 GiB rows ran out of memory. Guarded, the
    failed capture's routing is ended and its pool released: the next node's memory goes back to
    the device. Unguarded is torch's own behaviour, the premise."""
    import contextlib

    mod, alloc, backend = sim_cuda_graphs
    with guards.capture_pool_guard(backend) if guarded else contextlib.nullcontext():
        _refused_capture(mod, alloc)
    assert mod.graph.__name__ == "graph" and not hasattr(mod.graph, "zlbench_gives_back")  # put back
    alloc.alloc(2**30)  # the next node's
    alloc.free(2**30)
    alloc.empty_cache()
    if guarded:
        assert not alloc.underway and set(alloc.pools.values()) == {0}  # ended, and its pool freeable
        assert alloc.memory_reserved() == 0
    else:
        assert alloc.underway and alloc.memory_reserved() == 2**30


@pytest.mark.parametrize("fail", ["before_begin", "after_begin", "after_end", "instantiate"])
def test_a_failed_capture_into_a_live_graphs_pool_releases_it_once(sim_cuda_graphs, fail):
    """A capture that shares the pool of a graph that lives (torch.cuda.make_graphed_callables does)
    and fails anywhere: the guard gives back what that capture took and no more, so when the live
    graph goes, its release is the pool's last (one release too many aborts the process), and no
    routing stays on. A capture that ended (instantiation failed after it) is left to its graph."""
    mod, alloc, backend = sim_cuda_graphs
    with guards.capture_pool_guard(backend):
        owner = mod.Graph()
        with mod.graph(owner):
            pass
        shared = owner.pool()
        mod.fail = fail
        failed = mod.Graph()
        with pytest.raises(RuntimeError):
            with mod.graph(failed, shared):
                pass
    mod.fail = None
    failed.reset()  # its destructor: releases only what an ended capture holds
    assert alloc.pools[shared] == 1 and not alloc.underway
    owner.reset()
    assert alloc.pools[shared] == 0


def test_a_guard_inside_another_releases_a_failed_capture_once(sim_cuda_graphs):
    mod, alloc, backend = sim_cuda_graphs
    with guards.capture_pool_guard(backend):
        with guards.capture_pool_guard(backend):
            _refused_capture(mod, alloc)
        assert mod.graph.zlbench_gives_back  # the outer guard's, still on
    assert not alloc.underway and set(alloc.pools.values()) == {0}


def test_the_graph_timer_captures_under_the_pool_guard_outermost():
    """Outermost: rng_guard's scratch capture after a failed capture runs under it too."""
    backend = types.SimpleNamespace(graph_class="simcuda.Graph", torch_device="simcuda")
    timer = graph.Timer(types.SimpleNamespace(backend=backend))
    assert [type(g) for g in timer.guards(None)] == [guards.capture_pool_guard, guards.rng_guard]


def test_the_pool_guard_changes_nothing_where_the_graph_module_lacks_the_calls(monkeypatch):
    """A vendor's torch (torch_musa, torch_npu) keeps its allocator calls elsewhere, and the CPU has
    no graph class: the guard then leaves the graph context as it is."""
    import sys

    mod = types.ModuleType("simvendor")
    original = mod.graph = type("graph", (), {})
    monkeypatch.setitem(sys.modules, "simvendor", mod)
    for backend in (types.SimpleNamespace(graph_class="simvendor.Graph", torch_device="simvendor"),
                    types.SimpleNamespace(graph_class=None, torch_device="cpu")):
        with guards.capture_pool_guard(backend):
            assert mod.graph is original


def test_the_pool_guard_builds_its_graph_context_once(sim_cuda_graphs):
    """One wrapper class per graph context, not one per timed call: the class keeps the capture
    stream torch gives it on first use, as torch's own class does."""
    mod, alloc, backend = sim_cuda_graphs
    wrappers = []
    for _ in range(2):
        with guards.capture_pool_guard(backend):
            wrappers.append(mod.graph)
    assert wrappers[0] is wrappers[1] and wrappers[0].zlbench_gives_back
