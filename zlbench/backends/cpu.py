"""The host CPU: a real backend with N simulated device slots and the host wall-clock timer."""

from __future__ import annotations

import os
import platform
from typing import Dict, List

from zlbench.backends.base import TRITON_ENV, DeviceBackend, DeviceInfo

SLOT_ENV = "ZLBENCH_CPU_SLOT"
# glibc malloc serves a large block with mmap, and moves that threshold (and the heap's trim
# threshold) as blocks are freed: which tensors a process allocated first decides whether an op's
# buffers are page-faulted afresh every call. The demo's softmax [[512,2048]] read 7-10 ms that way
# and 2 ms once the thresholds were fixed, its [[256,1024]] 5x slower in whichever process ran it
# first (benchmarks/README.md). Fixed, every process times the op on a settled heap.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(256 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class CpuBackend(DeviceBackend):
    name = "cpu"
    aliases = ("host",)
    torch_device = "cpu"
    visibility_env = SLOT_ENV
    default_timer = "host"
    slots = 1
    # ATen's vector ISA and the math library's threads (OMP_NUM_THREADS is set per slot: visibility()).
    identity_env = TRITON_ENV + ("ATEN_CPU_CAPABILITY", "MKL_NUM_THREADS", "KMP_AFFINITY", "OMP_PROC_BIND")


    def parse_devices(self, text: str) -> List[DeviceInfo]:
        model = _cpu_model()
        return [DeviceInfo(i, f"{model} (slot {i})") for i in range(int(text))]

    def enumerate_devices(self) -> List[DeviceInfo]:
        return self.parse_devices(str(self.slots))

    def tool_present(self) -> bool:
        return True

    @property
    def threads(self) -> int:
        """Threads per slot. The cores are shared among the slots so simulated devices do not fight
        over them, and one core is left to the harness and the system: a parallel op waits at its
        barrier for its slowest thread, so one preempted thread stretches a 0.1 ms call to a
        scheduler slice (4-8 ms seen on a busy 2-core machine)."""
        return max(1, ((os.cpu_count() or 1) - 1) // max(1, self.slots))

    def visibility(self, indices: List[int]) -> Dict[str, str]:
        env = super().visibility(indices)
        env["OMP_NUM_THREADS"] = str(self.threads)
        return {**env, **MALLOC_ENV}

    def describe(self) -> Dict[str, object]:
        return {**super().describe(), "threads_per_slot": self.threads, "malloc": dict(MALLOC_ENV)}
