"""A simulated device at Triton's device-interface boundary (streams, events, synchronize) and a
simulated graph class, for the timing tests: the simulation stays at that boundary."""

import contextlib
import sys
import types


def scripted_events(elapsed):
    """An event class whose elapsed times (ms) come from `elapsed`, in the order they are read."""

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self):
            pass

        def elapsed_time(self, other):
            return next(elapsed)

    return Event


def sim_interface(monkeypatch, elapsed, log=None, **extra):
    """Install triton.runtime.driver.active.get_device_interface() -> a simulated interface whose
    events read `elapsed` (ms); synchronize appends "sync" to `log` when given."""
    interface = types.SimpleNamespace(
        Stream=lambda: "side stream", Event=scripted_events(elapsed),
        synchronize=(lambda: log.append("sync")) if log is not None else (lambda: None),
        stream=lambda s: contextlib.nullcontext(), **extra)
    runtime = types.ModuleType("triton.runtime")
    runtime.driver = types.SimpleNamespace(active=types.SimpleNamespace(get_device_interface=lambda: interface))
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    monkeypatch.setitem(sys.modules, "triton.runtime", runtime)
    return interface


def sim_graphs(monkeypatch, log) -> str:
    """Install a graph module `simgraph` (capture / captured / replay go to `log`); returns the
    dotted name of its graph class, as a backend's graph_class names it."""
    graphs = types.ModuleType("simgraph")

    class Graph:
        def replay(self):
            log.append("replay")

    @contextlib.contextmanager
    def graph(g):
        log.append("capture")
        yield
        log.append("captured")

    graphs.Graph, graphs.graph = Graph, graph
    monkeypatch.setitem(sys.modules, "simgraph", graphs)
    return "simgraph.Graph"
