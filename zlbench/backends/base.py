"""What every device backend declares. Nothing outside zlbench/backends names a vendor."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import ClassVar, Dict, List, Optional, Tuple

from ..results.schema import MARKER_FALLBACK, MARKER_FATAL, MARKER_POISONED  # noqa: F401 (vocabulary)

# Tests (and users without the hardware) replay a recorded enumeration output through this
# variable: the simulation stays at the device-interface boundary.
SMI_OUTPUT_ENV = "ZLBENCH_SMI_OUTPUT"


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    bus_id: str = ""
    driver: str = ""

    def as_dict(self) -> Dict[str, object]:
        return {"index": self.index, "name": self.name, "bus_id": self.bus_id, "driver": self.driver}


class DeviceBackend:
    """A vendor's runtime as zlbench sees it. Subclasses set the class attributes."""

    name: ClassVar[str]
    aliases: ClassVar[Tuple[str, ...]] = ()
    # flag_gems.vendor_name values that count as this backend, and flag_gems.device / torch device.
    flag_gems_vendors: ClassVar[Tuple[str, ...]] = ()
    torch_device: ClassVar[str] = "cpu"
    # Python module of the vendor's torch extension, imported before flag_gems (None: built in).
    torch_extension: ClassVar[Optional[str]] = None
    # Env var that pins a process to devices; extra keys get the same value.
    visibility_env: ClassVar[Optional[str]] = None
    extra_visibility_envs: ClassVar[Tuple[str, ...]] = ()
    # Command that lists devices, and the tool name used for detection.
    enumerate_command: ClassVar[Tuple[str, ...]] = ()
    # Dotted path of the device graph class (None: no graph capture).
    graph_class: ClassVar[Optional[str]] = None
    # Time graphs with upstream triton.testing.do_bench_cudagraph itself (it hardcodes torch.cuda),
    # so numbers do not move where it runs; elsewhere zlbench's port through the device interface.
    upstream_graph_timer: ClassVar[bool] = False
    default_timer: ClassVar[str] = "direct"
    # pytest plugins (dotted module paths) this backend needs in the benchmark process, planned
    # before every other plugin because they rewrite collection-time markers.
    compat_plugins: ClassVar[Tuple[str, ...]] = ()
    # Failure wording of the vendor runtime, matched case-insensitively against the exception text
    # of a graph-capture attempt: poison first, then fatal; any other failure is a refused capture.
    device_fault_wording: ClassVar[Tuple[str, ...]] = ()
    capture_poison_wording: ClassVar[Tuple[str, ...]] = ()
    # Env vars whose values change what gets compiled or timed on this backend (recorded in the identity).
    switch_env_prefixes: ClassVar[Tuple[str, ...]] = ()

    @property
    def supports_graph(self) -> bool:
        return self.graph_class is not None

    @property
    def names(self) -> Tuple[str, ...]:
        return (self.name,) + self.aliases

    # -- devices -------------------------------------------------------------------------------
    def parse_devices(self, text: str) -> List[DeviceInfo]:
        raise NotImplementedError

    def enumerate_devices(self) -> List[DeviceInfo]:
        """Devices this machine has, from the vendor tool (or a recorded output, see SMI_OUTPUT_ENV)."""
        recorded = os.environ.get(SMI_OUTPUT_ENV)
        if recorded:
            with open(recorded, encoding="utf-8") as f:
                return self.parse_devices(f.read())
        if not self.enumerate_command or shutil.which(self.enumerate_command[0]) is None:
            return []
        try:
            out = subprocess.run(
                list(self.enumerate_command), capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return []
        if out.returncode != 0:
            return []
        return self.parse_devices(out.stdout)

    def inherited_visible(self, devices: List[DeviceInfo]) -> List[DeviceInfo]:
        """The devices a visibility env set before zlbench allows (CUDA_VISIBLE_DEVICES=1 python -m
        zlbench means "GPU 1 only"); the workers then set it to their own physical index."""
        value = os.environ.get(self.visibility_env or "")
        if value is None or self.torch_device == "cpu":
            return devices
        wanted = [x.strip() for x in value.split(",") if x.strip()]
        if not all(x.isdigit() for x in wanted):
            return devices  # UUIDs or MIG names: the tool's indices cannot be matched, keep them all
        kept = [d for d in devices if str(d.index) in wanted]
        if devices and not kept:
            from ..errors import UsageError

            raise UsageError(f"{self.visibility_env}={value} was set before zlbench and hides every device "
                             f"here ({', '.join(str(d.index) for d in devices)}). Fix: unset it, or "
                             "choose devices with devices=[...].")
        return kept

    def tool_present(self) -> bool:
        return bool(self.enumerate_command) and shutil.which(self.enumerate_command[0]) is not None

    def visibility(self, indices: List[int]) -> Dict[str, str]:
        """Env that pins a worker to these physical devices."""
        if not self.visibility_env:
            return {}
        value = ",".join(str(i) for i in indices)
        env = {self.visibility_env: value}
        env.update({k: value for k in self.extra_visibility_envs})
        return env

    # -- capture failures ----------------------------------------------------------------------
    def classify_capture_failure(self, message: str) -> str:
        """'poisoned', 'fatal' or 'refused' for an exception raised while capturing a graph."""
        text = message.lower()
        if any(w.lower() in text for w in self.capture_poison_wording):
            return "poisoned"
        if any(w.lower() in text for w in self.device_fault_wording):
            return "fatal"
        return "refused"

    def describe(self) -> Dict[str, object]:
        return {
            "name": self.name,
            "torch_device": self.torch_device,
            "torch_extension": self.torch_extension,
            "visibility_env": self.visibility_env,
            "graph_class": self.graph_class,
            "upstream_graph_timer": self.upstream_graph_timer,
            "default_timer": self.default_timer,
            "compat_plugins": list(self.compat_plugins),
        }


def split_table_row(line: str) -> List[str]:
    """'| a | b |' -> ['a', 'b'] (vendor tools print boxed tables)."""
    return [c.strip() for c in line.strip().strip("|").split("|")]
