"""Huawei Ascend (CANN, torch_npu)."""

from __future__ import annotations

import re
from typing import List

from zlbench.backends.base import TRITON_ENV, DeviceBackend, DeviceInfo, split_table_row

_VERSION = re.compile(r"Version:\s*([\w.\-]+)")


class AscendBackend(DeviceBackend):
    name = "ascend"
    aliases = ("npu", "huawei", "cann")
    flag_gems_vendors = ("ascend",)
    torch_device = "npu"
    torch_extension = "torch_npu"
    visibility_env = "ASCEND_RT_VISIBLE_DEVICES"
    enumerate_command = ("npu-smi", "info")
    graph_class = "torch_npu.npu.NPUGraph"
    default_timer = "direct"
    corpus_timer_entry_points = ("triton.backends.ascend.testing:do_bench_npu",)
    device_fault_wording = ("aicore exception", "EZ9999", "out of memory")
    switch_env_prefixes = ("FLAGTREE_", "TRITON_", "ASCEND_")
    # torch_npu's task queue, allocator and overflow mode.
    identity_env = TRITON_ENV + ("TASK_QUEUE_ENABLE", "PYTORCH_NPU_ALLOC_CONF", "INF_NAN_MODE_ENABLE")


    def parse_devices(self, text: str) -> List[DeviceInfo]:
        # npu-smi info: per NPU two table rows; the first is "| 0  910B3 | OK | ..." and the
        # second "| 0 | 0000:C1:00.0 | ...". Names come from the first, bus ids from the second.
        version = _VERSION.search(text)
        driver = version.group(1) if version else ""
        devices: List[DeviceInfo] = []
        expect_bus_for = None
        for line in text.splitlines():
            if not line.startswith("|"):
                continue
            cells = split_table_row(line)
            head = cells[0] if cells else ""
            m = re.match(r"^(\d+)\s+(\S.*)$", head)
            if m and len(cells) >= 2 and cells[1] in ("OK", "Warning", "Alarm", "Critical"):
                devices.append(DeviceInfo(int(m.group(1)), m.group(2).strip(), "", driver))
                expect_bus_for = len(devices) - 1
                continue
            if expect_bus_for is not None and re.match(r"^\d+$", head) and len(cells) > 1:
                bus = cells[1].split()[0] if cells[1] else ""
                d = devices[expect_bus_for]
                devices[expect_bus_for] = DeviceInfo(d.index, d.name, bus, d.driver)
                expect_bus_for = None
        return devices
