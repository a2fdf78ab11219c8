"""MThreads MUSA."""

from __future__ import annotations

import re
from typing import List

from zlbench.backends.base import TRITON_ENV, DeviceBackend, DeviceInfo, split_table_row

_DRIVER = re.compile(r"Driver Version:\s*([\w.\-]+)")


class MusaBackend(DeviceBackend):
    name = "musa"
    aliases = ("mthreads", "mt", "moore", "moorethreads")
    flag_gems_vendors = ("mthreads",)
    torch_device = "musa"
    torch_extension = "torch_musa"
    visibility_env = "MUSA_VISIBLE_DEVICES"
    enumerate_command = ("mthreads-gmi",)
    graph_class = "torch.musa.MUSAGraph"
    default_timer = "direct"
    compat_plugins = ("zlbench.backends.musa_compat",)
    device_fault_wording = (
        "musaErrorIllegalAddress",
        "illegal memory access",
        "unspecified launch failure",
        "out of memory",
    )
    # The observed shape of a poisoned context on MUSA: the capture attempt leaves the context in
    # an error state that every later call reports.
    capture_poison_wording = (
        "musaErrorContextIsDestroyed",
        "context is destroyed",
        "invalid device context",
        "musaErrorStreamCaptureWrongThread",
    )
    switch_env_prefixes = ("FLAGTREE_", "TRITON_", "MUSA_")  # MUSA_* also covers the runtime's own
    identity_env = TRITON_ENV


    def parse_devices(self, text: str) -> List[DeviceInfo]:
        # mthreads-gmi prints an nvidia-smi-like boxed table: a row "| 0  MTT S4000  ... | bus | ..."
        driver_match = _DRIVER.search(text)
        driver = driver_match.group(1) if driver_match else ""
        devices = []
        for line in text.splitlines():
            if not line.startswith("|"):
                continue
            cells = split_table_row(line)
            m = re.match(r"^(\d+)\s+(.+?)\s*$", cells[0]) if cells else None
            if m and "MTT" in m.group(2).upper():
                bus = cells[1].split()[0] if len(cells) > 1 and cells[1] else ""
                devices.append(DeviceInfo(int(m.group(1)), m.group(2).strip(), bus, driver))
        return devices
