"""Device clock readers (inside the benchmark process): what the SM and memory clocks were while a
batch of samples was taken, without locking them.

Which readers a backend has is data (DeviceBackend.clock_sources, zlbench/backends); the readers
themselves live here because they import the vendor's libraries. timer.clock_reader picks one
(auto: the backend's first that works here; none: no reading). Every reader answers
begin() before a batch, during() once its work is queued (not every batch has such a moment), and
end() -> (sm_mhz, mem_mhz) after the device finished it; max_sm_mhz is the device's maximum SM
clock (None: unknown, so no sample can be called throttled).

- nvml: NVIDIA's management library through nvidia-ml-py (`pip install zlbench[nvml]`): the
  current SM and memory clocks, read while the batch runs (during) or right after it.
- kernel_timer: as nvbench does (PR #206), a one-warp Triton kernel on SM 0 reads %globaltimer (ns)
  and %clock64 (SM cycles) before and after the batch: cycles / ns is the SM clock averaged over the
  batch. No memory clock. NVIDIA only (PTX special registers).
- torch_clock_rate: torch.<device>.clock_rate() (torch asks NVML on CUDA, amdsmi on ROCm), SM only.
- replay: ZLBENCH_CLOCK_REPLAY names a JSON file of recorded readings, replayed in order (tests and
  users without the hardware, as ZLBENCH_SMI_OUTPUT replays an enumeration): {"max_sm_mhz": 1980,
  "readings": [[sm, mem], ...], "then": [sm, mem]}.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple

from zlbench.backends.base import CLOCK_REPLAY_ENV, DeviceBackend

Reading = Tuple[Optional[float], Optional[float]]


class Unavailable(Exception):
    """This reader cannot work in this process (why is the message)."""


class ClockReader:
    source = "none"
    max_sm_mhz: Optional[float] = None
    max_mem_mhz: Optional[float] = None

    def begin(self) -> None:
        pass

    def during(self) -> None:
        pass

    def end(self) -> Reading:
        return None, None

    def describe(self) -> Dict[str, Any]:
        return {"reader": self.source, "max_sm_mhz": self.max_sm_mhz, "max_mem_mhz": self.max_mem_mhz}


def _device_module(backend: DeviceBackend):
    import torch

    return getattr(torch, backend.torch_device)


def _triton_max_clocks(index: int) -> Tuple[Optional[float], Optional[float]]:
    """The device's peak SM and memory clocks (kHz in Triton's driver properties) in MHz."""
    try:
        from triton.runtime import driver

        props = driver.active.utils.get_device_properties(index)
    except Exception:
        return None, None
    sm, mem = props.get("sm_clock_rate"), props.get("mem_clock_rate")
    return (sm / 1000 if sm else None), (mem / 1000 if mem else None)


class NvmlReader(ClockReader):
    source = "nvml"

    def __init__(self, backend: DeviceBackend):
        try:
            import pynvml
        except ImportError as e:
            raise Unavailable(f"nvidia-ml-py is not installed ({e}); pip install zlbench[nvml]")
        try:
            pynvml.nvmlInit()
            self.handle = self._handle(pynvml, backend)
            self.max_sm_mhz = float(pynvml.nvmlDeviceGetMaxClockInfo(self.handle, pynvml.NVML_CLOCK_SM)) or None
            self.max_mem_mhz = float(pynvml.nvmlDeviceGetMaxClockInfo(self.handle, pynvml.NVML_CLOCK_MEM)) or None
        except Exception as e:
            raise Unavailable(f"NVML: {type(e).__name__}: {e}")
        self.nvml = pynvml
        self._reading: Optional[Reading] = None

    @staticmethod
    def _handle(pynvml, backend: DeviceBackend):
        """The NVML handle of the device this process sees as 0: NVML numbers every device of the
        machine, whatever CUDA_VISIBLE_DEVICES says, so go by the PCI bus id torch reports."""
        try:
            props = _device_module(backend).get_device_properties(0)
            bus = "{:04x}:{:02x}:{:02x}.0".format(props.pci_domain_id, props.pci_bus_id, props.pci_device_id)
            return pynvml.nvmlDeviceGetHandleByPciBusId(bus)
        except Exception:
            visible = os.environ.get(backend.visibility_env or "", "").split(",")[0].strip()
            return pynvml.nvmlDeviceGetHandleByIndex(int(visible) if visible.isdigit() else 0)

    def _read(self) -> Reading:
        n = self.nvml
        return (float(n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM)),
                float(n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_MEM)))

    def begin(self) -> None:
        self._reading = None

    def during(self) -> None:
        self._reading = self._read()

    def end(self) -> Reading:
        return self._reading if self._reading is not None else self._read()


class KernelTimerReader(ClockReader):
    source = "kernel_timer"

    def __init__(self, backend: DeviceBackend):
        try:
            import torch

            from zlbench.plugins import _clock_kernel

            dev = _device_module(backend)
            index = dev.current_device()
            self.max_sm_mhz, _ = _triton_max_clocks(index)
            sms = dev.get_device_properties(index).multi_processor_count
            self.stamp = _clock_kernel.stamp_launcher(2 * sms)
            self.buf = torch.zeros(4, dtype=torch.int64, device=f"{backend.torch_device}:{index}")
            self.sync = dev.synchronize
            self.begin()
            self.stamp(self.buf, 1)
            self.sync()
            if 0 in self.buf.tolist():
                raise RuntimeError("no block of the stamp kernel ran on SM 0")
        except Unavailable:
            raise
        except Exception as e:
            raise Unavailable(f"clock-stamp kernel: {type(e).__name__}: {e}")
        self._stamped_end = False

    def begin(self) -> None:
        self.buf.zero_()
        self.stamp(self.buf, 0)
        self._stamped_end = False

    def during(self) -> None:
        self.stamp(self.buf, 1)
        self._stamped_end = True

    def end(self) -> Reading:
        if not self._stamped_end:
            self.stamp(self.buf, 1)
        self.sync()
        ns0, cyc0, ns1, cyc1 = self.buf.tolist()
        if not (ns0 and ns1 and ns1 > ns0 and cyc1 > cyc0):
            return None, None
        return (cyc1 - cyc0) / (ns1 - ns0) * 1000.0, None


class TorchClockRateReader(ClockReader):
    source = "torch_clock_rate"

    def __init__(self, backend: DeviceBackend):
        try:
            dev = _device_module(backend)
            self.rate = dev.clock_rate
            self.max_sm_mhz, _ = _triton_max_clocks(dev.current_device())
            self.rate()
        except Exception as e:
            raise Unavailable(f"torch.{backend.torch_device}.clock_rate(): {type(e).__name__}: {e}")
        self._reading: Optional[float] = None

    def begin(self) -> None:
        self._reading = None

    def during(self) -> None:
        self._reading = float(self.rate())

    def end(self) -> Reading:
        return (self._reading if self._reading is not None else float(self.rate())), None


class ReplayReader(ClockReader):
    source = "replay"

    def __init__(self, path: str):
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise Unavailable(f"{CLOCK_REPLAY_ENV}={path}: {e}")
        self.path = path
        self.max_sm_mhz = data.get("max_sm_mhz")
        self.max_mem_mhz = data.get("max_mem_mhz")
        self.readings: List[List[Optional[float]]] = list(data.get("readings") or [])
        self.then = data.get("then") or [self.max_sm_mhz, self.max_mem_mhz]

    def end(self) -> Reading:
        sm, mem = self.readings.pop(0) if self.readings else self.then
        return sm, mem

    def describe(self) -> Dict[str, Any]:
        return {**super().describe(), "replayed_from": self.path}


SOURCES = {"nvml": NvmlReader, "kernel_timer": KernelTimerReader, "torch_clock_rate": TorchClockRateReader}

_cache: Dict[str, Any] = {}


def make_reader(backend: DeviceBackend, choice: str = "auto",
                environ=os.environ) -> Tuple[Optional[ClockReader], Dict[str, Any]]:
    """(reader or None, what this process has: the reader and its maximum clocks, or why none)."""
    replay = environ.get(CLOCK_REPLAY_ENV)
    if replay:
        try:
            reader = ReplayReader(replay)
            return reader, reader.describe()
        except Unavailable as e:
            return None, {"reader": None, "why": str(e)}
    if choice == "none":
        return None, {"reader": None, "why": "timer.clock_reader=none"}
    sources = backend.clock_sources if choice == "auto" else (choice,)
    if not sources:
        return None, {"reader": None, "why": backend.clock_reading()["reading"]}
    why = []
    for source in sources:
        if source not in SOURCES:
            why.append(f"{source}: unknown reader (known: {', '.join(SOURCES)})")
            continue
        try:
            reader = SOURCES[source](backend)
        except Unavailable as e:
            why.append(f"{source}: {e}")
            continue
        return reader, reader.describe()
    return None, {"reader": None, "why": "; ".join(why)}


def process_reader(backend: DeviceBackend, choice: str = "auto") -> Tuple[Optional[ClockReader], Dict[str, Any]]:
    """The process' reader, made once (device_setup records what it is; the timing plugin uses it)."""
    key = f"{backend.name}:{choice}"
    if key not in _cache:
        _cache[key] = make_reader(backend, choice)
    return _cache[key]


def disable(backend: DeviceBackend, choice: str, why: str) -> None:
    """A reader that failed mid-run is dropped for the rest of the process."""
    _cache[f"{backend.name}:{choice}"] = (None, {"reader": None, "why": why})
