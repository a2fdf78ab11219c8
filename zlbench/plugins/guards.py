"""Guards around a timing call's batches (inside the benchmark process), and the device helpers
they share with the timers: what a batch needs around it that is not the timer itself.

- filled_gaps: direct timing on a device that can spin keeps the device busy after each L2 clear,
  so that host launch time stays out of the kernel's events (timer.fill_gaps).
- rng_guard: a graph capture must not advance or re-register the device's default generators.
- capture_pool_guard: a failed graph capture must not leave the caching allocator capturing.
- on_capture_stream: a test's own work (around its timing calls) on the stream its captures take."""

from __future__ import annotations

import functools
import importlib
import statistics
import time
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Dict, Optional

from zlbench.backends import get_backend
from zlbench.plugins import _runtime


def device_module():
    import torch

    device = get_backend(_runtime.config().get("backend", "cpu")).torch_device
    return None if device == "cpu" else getattr(torch, device)


def release_device_memory() -> Optional[Dict[str, float]]:
    """Give the device memory this process no longer uses back to the device, and say what it still
    holds (MiB), or None where the device has no caching allocator to ask (the CPU).

    A resident process of an A/B shares its device with the other side's process (and round 1's
    prober): memory one keeps cached after a node is memory the other's next node cannot have (on an
    80 GB H100 two sides of FlagGems' 4 GiB special-function rows ran out of memory). Collected
    first: a tensor in a reference cycle is freed only by a collection."""
    import gc

    dev = device_module()
    if dev is None or not hasattr(dev, "empty_cache"):
        return None
    gc.collect()
    try:
        dev.empty_cache()
    except Exception as e:  # a context an op left broken: the node is done; the next one says so
        return {"release_failed": f"{type(e).__name__}: {str(e)[:200]}"}
    held = {}
    for key, fn in (("allocated_mib", "memory_allocated"), ("reserved_mib", "memory_reserved")):
        try:
            held[key] = round(getattr(dev, fn)() / 2**20, 1)
        except Exception:  # a vendor's module without the query: what was released still is
            pass
    return held


_spin_cache: Dict[str, Any] = {}


def device_spin() -> Optional[Callable[[float], None]]:
    """spin(us) keeps the device busy for at least about `us` microseconds, or None where the
    backend's device cannot spin. torch's <device>._sleep spins for a number of clock cycles, so
    it is calibrated once per process, after a spin that brings the clock up from idle, at the
    fastest rate seen: a clock that is lower later makes a spin longer, never shorter."""
    if "spin" not in _spin_cache:
        spin = None
        dev = device_module()
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


def host_launch_us(fn, sync) -> float:
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
    gap_us = 2 * host_launch_us(fn, device_module().synchronize) + 20

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


def event_ms_per_call(dev, fn, calls: int = 5) -> float:
    """Device time of `calls` calls between two events, per call (ms): upstream's estimate."""
    start, end = dev.Event(enable_timing=True), dev.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    dev.synchronize()
    return start.elapsed_time(end) / calls


def resolve(dotted: str):
    obj = importlib.import_module(dotted.split(".")[0])
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def graph_module(graph_class: str):
    """The module a backend's graph class lives in (torch.cuda for torch.cuda.CUDAGraph): its
    `graph` context captures."""
    return importlib.import_module(graph_class.rpartition(".")[0])


class rng_guard:
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
                scratch = resolve(self.backend.graph_class)()
                stream = self.module.Stream()
                with self.module.stream(stream):
                    with graph_module(self.backend.graph_class).graph(scratch, stream=stream):
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


class capture_pool_guard:
    """A failed capture must not leave the device's caching allocator capturing for good.

    torch's capture routes the allocations made during it to a private pool. When the capture fails
    (an op refuses it, so ending it reports the capture invalidated), CUDAGraph.capture_end raises
    before it ends that routing, and the graph, never ended, never releases its pool. The allocator
    then counts a capture as underway for the rest of the process: empty_cache() frees none of its
    general pools again (nor does its retry before an out-of-memory error): on an H100 a resident
    A/B side process held 20-75 GiB (none of it allocated) after a node whose capture was refused
    (FlagGems' unique_dim, ctc_loss), and the other side's 4 GiB rows ran out of memory.

    So, while a call is timed, the graph module's `graph` context (what Triton's
    do_bench_cudagraph and the ported timer capture with) names its pool, and where a capture
    fails before it ended, it ends the device allocator's routing and releases the pool, as an
    ended capture and its graph's deletion would. (The pinned host allocator's routing, begun with
    it, stays: torch has no call to end it from Python, and it holds back no device memory.) Where
    the graph module or torch lacks those calls (a vendor's torch keeps its allocator elsewhere),
    nothing changes."""

    def __init__(self, backend):
        self.backend = backend
        self.module, self.original = None, None

    def __enter__(self):
        try:
            import torch

            module = graph_module(self.backend.graph_class)
            original = module.graph
            calls = (module.graph_pool_handle, module.current_device,
                     getattr(torch._C, f"_{self.backend.torch_device}_endAllocateToPool"),
                     getattr(torch._C, f"_{self.backend.torch_device}_releasePool"))
        except (AttributeError, ImportError, TypeError):
            return self
        # Not twice (a guard inside another): each wrapper would release the same pool.
        if isinstance(original, type) and not getattr(original, "zlbench_gives_back", False):
            self.module, self.original = module, original
            module.graph = _pool_releasing(original, *calls)
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.module is not None:
            self.module.graph = self.original
            self.module = None
        return False


@functools.lru_cache(maxsize=None)
def _pool_releasing(graph_context: type, pool_handle, current_device, end_allocate, release_pool) -> type:
    """graph_context (torch.cuda.graph), with its pool named and given back where its capture fails.
    Made once per graph context, not per timed call: the class keeps the capture stream torch
    gives it on first use (default_capture_stream), as torch's own class does."""

    class graph(graph_context):
        zlbench_gives_back = True

        def __init__(self, cuda_graph, pool=None, *args, **kwargs):
            self.zlbench_pool = pool_handle() if pool is None else pool
            super().__init__(cuda_graph, self.zlbench_pool, *args, **kwargs)
            try:  # the capture's device is its stream's (torch switches to it), else the current one
                self.zlbench_device = self.capture_stream.device.index
            except AttributeError:
                self.zlbench_device = None

        def __enter__(self):
            try:
                if self.zlbench_device is None:
                    self.zlbench_device = current_device()
                return super().__enter__()
            except BaseException:
                self.zlbench_give_back(begun=False)
                raise

        def __exit__(self, *exc):
            try:
                return super().__exit__(*exc)
            except BaseException:
                self.zlbench_give_back(begun=True)
                raise

        def zlbench_give_back(self, begun: bool) -> None:
            """End the routing and release the pool of a capture that began and did not end. Where
            entering failed, it began only if its routing is still on: a caller's pool (one a live
            graph owns) must not be released for a capture that never took it."""
            try:
                self.cuda_graph.pool()  # raises unless the capture ended: its graph then releases the pool
                return
            except Exception:
                pass
            try:
                end_allocate(self.zlbench_device, self.zlbench_pool)
                begun = True
            except Exception:  # capture_end got past it before failing, or the capture never began
                pass
            if begun:
                try:
                    release_pool(self.zlbench_device, self.zlbench_pool)
                except Exception:
                    pass

    graph.__qualname__ = graph.__name__ = graph_context.__name__
    return graph


def _wait_quietly(stream, other) -> None:
    """stream waits for other; where the device refuses (a context a failed capture left broken),
    the test's own outcome stands: the next call on that device says what broke."""
    try:
        stream.wait_stream(other)
    except Exception:
        pass


@contextmanager
def on_capture_stream(backend):
    """A test's own work on the stream the graph module's captures take (its default_capture_stream).

    Autograd runs each backward kernel on the stream its forward ran on. A corpus that runs the
    forward once, untimed, and times the backward (FlagGems' is_backward benchmarks time
    torch.autograd.grad of the output) ran that forward on the default stream; in the capture, on a
    stream of its own, the backward's kernels went to the default stream and invalidated it
    (cudaErrorStreamCaptureInvalidated), so every such shape was timed directly. With the test on
    the capture stream, they land in the capture. Where the graph module keeps no capture stream
    of its class (a vendor's torch without one), the test runs as it did."""
    with ExitStack() as scope:
        try:
            module = graph_module(backend.graph_class)
            context = module.graph  # torch's own class: capture_pool_guard's stands in only while timing
            stream = getattr(context, "default_capture_stream", False)
            if stream is None:  # made on first use, as torch's class would make it at its first capture
                stream = context.default_capture_stream = module.Stream()
            if stream is not False:
                # Torch's side streams do not wait for the default stream: the test's first kernels
                # wait for what its set-up queued there, and its teardown for the test's last ones.
                before = module.current_stream()
                stream.wait_stream(before)
                scope.callback(_wait_quietly, before, stream)
                scope.enter_context(module.stream(stream))
        except Exception:  # no graph module, no device: nothing to put on its stream
            pass
        yield
