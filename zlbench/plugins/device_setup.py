"""Device setup inside the benchmark process: import the vendor's torch extension before anything
imports flag_gems, check that flag_gems dispatched to the vendor the run asked for, record the
process' device facts (name, driver, versions) for the run identity, and freeze what imports and
collection made so that the corpus' garbage collections after every shape stop walking it."""

from __future__ import annotations

import gc
import importlib
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import pytest

from zlbench.backends import get_backend
from zlbench.plugins import _runtime, host_draws
from zlbench.results.events import GATE_ENV, GATE_NODES_ENV, GATE_SOME, base_node

_backend = get_backend(_runtime.config().get("backend", "cpu"))
# Taken at once: a process this one starts (a corpus may run pytest again) must not wait on it.
_gate_fd = os.environ.pop(GATE_ENV, None)
_gate_nodes = os.environ.pop(GATE_NODES_ENV, None)

# At import time (-p plugins load before the corpus' conftest imports flag_gems).
if _backend.torch_extension:
    try:
        importlib.import_module(_backend.torch_extension)
    except ImportError as e:  # reported at session start with a clear message
        _extension_error = (f"{_backend.torch_extension} (the vendor's torch extension) is not importable: {e}. "
                            f"Fix: install it for the benchmark's Python ({sys.executable}), or run the backend "
                            "of this machine's devices (backend=auto picks it)")
    else:
        _extension_error = None
else:
    _extension_error = None


def _version(module: str):
    mod = sys.modules.get(module)
    if mod is None:
        try:
            mod = importlib.import_module(module)
        except Exception:
            return None
    return getattr(mod, "__version__", None)


def process_facts():
    from zlbench._version_info import dist_version

    facts = {
        "python": platform.python_version(),
        "torch": dist_version("torch"),
        "triton": _version("triton") if _backend.torch_device != "cpu" else None,
        "visibility": {k: os.environ.get(k) for k in _backend.visibility([0])},
        # Where FlagGems keeps its tuning picks (an A/B's respawned side process gets a fresh one).
        "tuning_cache": os.environ.get("FLAGGEMS_CACHE_DIR"),
    }
    flag_gems = sys.modules.get("flag_gems")
    if flag_gems is not None:
        facts["flag_gems"] = getattr(flag_gems, "__version__", None)
        facts["flag_gems_vendor"] = getattr(flag_gems, "vendor_name", None)
        facts["flag_gems_device"] = getattr(flag_gems, "device", None)
    if _backend.torch_device == "cpu":
        from zlbench.backends.cpu import _cpu_model

        facts["device_name"] = _cpu_model()  # no torch import: a CPU corpus may not need it
    else:
        import torch

        facts["torch"] = torch.__version__
        try:
            dev = getattr(torch, _backend.torch_device)
            facts["device_name"] = dev.get_device_name(0)
            props = dev.get_device_properties(0)
            facts["device_bus_id"] = "{:04x}:{:02x}:{:02x}".format(
                getattr(props, "pci_domain_id", 0), getattr(props, "pci_bus_id", 0),
                getattr(props, "pci_device_id", 0))
            facts["device_uuid"] = str(getattr(props, "uuid", ""))
            facts["device_count_visible"] = dev.device_count()
        except Exception as e:  # pragma: no cover - vendor specific
            facts["device_error"] = str(e)
        # The SM clock as the process starts (through NVML where the vendor has it): an idle device
        # reads its idle clock here (345 MHz on an H200), not the clock rows ran at (their sm_mhz).
        try:
            facts["sm_clock_mhz_at_start"] = getattr(torch, _backend.torch_device).clock_rate()
        except Exception:
            facts["sm_clock_mhz_at_start"] = None
        facts["driver"] = getattr(getattr(torch, "version", None), _backend.torch_device, None)
        # Whether the device can spin (timer.fill_gaps, timer.min_window_ms act only where it can).
        facts["device_spin"] = hasattr(getattr(torch, _backend.torch_device, None), "_sleep")
    return facts


def pytest_sessionstart(session):
    if _extension_error:
        _runtime.emit("setup_error", reason=_extension_error)
        raise pytest.UsageError(f"backend={_backend.name}: {_extension_error}")
    flag_gems = sys.modules.get("flag_gems")
    if flag_gems is not None and _backend.flag_gems_vendors:
        vendor = getattr(flag_gems, "vendor_name", None)
        if vendor not in _backend.flag_gems_vendors:
            reason = (
                f"backend={_backend.name} but flag_gems dispatched to {vendor}: set GEMS_VENDOR or "
                f"pick the backend that matches this machine"
            )
            _runtime.emit("setup_error", reason=reason)
            raise pytest.UsageError(reason)
    unreachable = _device_unreachable()
    if unreachable:
        _runtime.emit("setup_error", reason=unreachable)
        raise pytest.UsageError(unreachable)
    facts = process_facts()
    if host_draws.install(_backend.torch_device):
        facts["host_draws"] = (f"integer draws of >= {host_draws.MIN_NUMEL} elements aimed at the CPU are made on "
                               f"{_backend.torch_device} (plugins/host_draws.py)")
    _runtime.emit("process", facts=facts)


def _device_unreachable() -> Optional[str]:
    """Where torch itself is the vendor's runtime (CUDA, ROCm): a torch built without it, or one that
    finds no device, fails every op ("Torch not compiled with CUDA enabled") as if the op were broken."""
    if not _backend.torch_build:
        return None
    import torch

    attr, runtime = _backend.torch_build
    if getattr(torch, _backend.torch_device).is_available():
        return None
    said = f"backend={_backend.name}: torch {torch.__version__} cannot reach a {runtime} device"
    built = getattr(torch.version, attr, None)
    if not built:
        return (f"{said}: it is built without {runtime} (torch.version.{attr} is None), so no op could run. "
                f"Fix: install a {runtime} build of torch for the benchmark's Python ({sys.executable}), "
                "or backend=cpu to measure on the CPU")
    shown = {k: os.environ[k] for k in _backend.visibility([0]) if k in os.environ}
    hidden = f" (this process has {', '.join(f'{k}={v}' for k, v in shown.items())} here)" if shown else ""
    return (f"{said}: built for {runtime} {built}, torch.{_backend.torch_device}.is_available() is False: no "
            f"driver loaded, or the devices are hidden{hidden}. Fix: check that "
            f"`{_backend.enumerate_command[0]}` lists the device and the driver matches this torch, or "
            "backend=cpu to measure on the CPU")


def pytest_runtest_logfinish(nodeid, location):
    # After the item's teardown has dropped its arguments (also where a finalizer raised).
    host_draws.release_pinned()


@pytest.hookimpl(tryfirst=True)  # before the record plugin's session_end
def pytest_sessionfinish(session, exitstatus):
    if host_draws.counts["moved"] or host_draws.counts["fell_back"]:
        _runtime.emit("host_draws", **host_draws.counts)


@pytest.hookimpl(tryfirst=True)  # the nodes it runs are known before other plugins look at the items
def pytest_collection_finish(session):
    """Freeze the import-time heap, then wait at the gate (engine/plain_worker.py) before the first
    node: until here (imports, collection) nothing needs the device, so the process may start while
    another measures. A spare process (engine/spares.py) learns there which of its nodes to run.
    What torch and Triton would load in the first test (LAZY_IMPORTS) loads meanwhile."""
    freeze_import_heap()
    preload = Preload() if _backend.torch_device != "cpu" else None
    fd = _gate_fd
    if fd is None:
        Preload.finish(preload)
        return
    reached = time.time()
    try:
        opened = os.read(int(fd), 1)
        os.close(int(fd))
    except (OSError, ValueError):
        Preload.finish(preload)
        return
    if not opened:  # the worker went away, or stopped this process before it measured
        os._exit(1)
    if opened == GATE_SOME and _gate_nodes:
        keep_only(session, json.loads(Path(_gate_nodes).read_text()))
    waited = time.time() - reached
    late = Preload.finish(preload)
    _runtime.emit("gate", reached=round(reached, 3), waited_s=round(waited, 3),
                  **({"preload_s": round(preload.seconds, 3), "preload_late_s": round(late, 3)} if preload else {}))


def keep_only(session, nodes) -> None:
    """Run the items of `nodes` only, in that order (each node's items in collection order)."""
    order = {n: i for i, n in enumerate(nodes)}
    session.items[:] = sorted((it for it in session.items if base_node(it.nodeid) in order),
                              key=lambda it: order[base_node(it.nodeid)])
    _runtime.kept_nodes = set(order)


# What torch and Triton load on first use, inside the first test of a process that needs them:
# torch._refs imports sympy (through symbolic_shapes) on the first torch.broadcast_shapes, which
# FlagGems' ops call, and Triton hashes its own installation (triton_key) on the first kernel it
# looks up: 2.5 s and 0.4 s inside one node of every benchmark process on an H200's host, paid by
# whichever node came first in that pass (benchmarks/gpu/RESULTS.md, twenty-sixth session).
LAZY_IMPORTS = ("torch._refs", "torch.fx.experimental.symbolic_shapes")
LAZY_CALLS = (("triton.runtime.cache", "triton_key"),)


class Preload(threading.Thread):
    """LAZY_IMPORTS imported and LAZY_CALLS called (each caches its result) in a thread while the
    process waits at its gate, where a prestarted pass spends seconds doing nothing. Before the
    gate, as start-up, they were not hidden on passes that measure for less than a start-up (the
    twenty-sixth session's quick set). Joined before the first test, whether or not the wait hid
    them: every process of a run then starts its tests in the same state. What this torch or Triton
    lacks is skipped."""

    def __init__(self):
        super().__init__(name="zlbench-preload", daemon=True)
        self.imports, self.calls, self.seconds = LAZY_IMPORTS, LAZY_CALLS, 0.0
        self.start()

    def run(self) -> None:
        started = time.perf_counter()
        for module in self.imports:
            try:
                importlib.import_module(module)
            except Exception:
                pass
        for module, name in self.calls:
            try:
                getattr(importlib.import_module(module), name)()
            except Exception:
                pass
        self.seconds = time.perf_counter() - started

    @staticmethod
    def finish(preload: Optional["Preload"]) -> float:
        """Wait for it (the seconds waited: what the gate did not hide) and freeze what it loaded
        with the rest of the import heap (freeze_import_heap)."""
        if preload is None:
            return 0.0
        started = time.perf_counter()
        preload.join()
        gc.freeze()
        return time.perf_counter() - started


def freeze_import_heap() -> None:
    """FlagGems' harness collects garbage after every shape (gc.collect() in Benchmark.run; the demo
    corpus' too), and a full collection walks every object torch, Triton, FlagGems and the collected
    tests made: 0.19 s a shape on the H200's host (25.6 of a process' 57 s on 16 FlagGems nodes),
    paid in each of a row's processes. Moved to the permanent generation (gc.freeze), they are no
    longer walked; what the nodes make still is, and garbage without cycles (most tensors) is freed
    by reference counting as before. Outside every timed section: no value moves
    (benchmarks/gpu/RESULTS.md, thirteenth session)."""
    gc.collect()
    gc.freeze()
