"""AMD ROCm (and Hygon DCU, which shares its visibility rules)."""

from __future__ import annotations

import json
from typing import List

from zlbench.backends.base import TRITON_ENV, DeviceBackend, DeviceInfo


class RocmBackend(DeviceBackend):
    name = "rocm"
    aliases = ("amd", "hip", "hygon", "dcu")
    flag_gems_vendors = ("amd", "hygon")
    torch_device = "cuda"  # ROCm builds of torch expose torch.cuda
    torch_build = ("hip", "ROCm")
    visibility_env = "HIP_VISIBLE_DEVICES"
    extra_visibility_envs = ("ROCR_VISIBLE_DEVICES",)
    enumerate_command = ("rocm-smi", "--showproductname", "--showbus", "--showdriverversion", "--json")
    graph_class = "torch.cuda.CUDAGraph"
    upstream_graph_timer = True  # ROCm's torch exposes torch.cuda: upstream's timer runs as is
    # Direct, as the runner zlbench replaces timed every backend but CUDA: graph capture is not yet
    # validated on AMD/Hygon hardware by zlbench (timer=graph stays opt-in).
    default_timer = "direct"
    device_fault_wording = (
        "memory access fault",
        "hipErrorIllegalAddress",
        "an illegal memory access was encountered",
        "out of memory",
    )
    switch_env_prefixes = ("FLAGTREE_", "TRITON_", "HIP_", "AMD_")
    # ROCm runtime (HSA_*, GPU_*), PyTorch's HIP allocator and tunable ops.
    identity_env = TRITON_ENV + ("HSA_XNACK", "HSA_ENABLE_SDMA", "HSA_OVERRIDE_GFX_VERSION", "GPU_MAX_HW_QUEUES",
                                 "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_TUNABLEOP_ENABLED")

    def parse_devices(self, text: str) -> List[DeviceInfo]:
        data = json.loads(text)
        driver = str(data.get("system", {}).get("Driver version", ""))
        devices = []
        for key, card in data.items():
            if not key.startswith("card"):
                continue
            name = card.get("Card Series") or card.get("Card series") or card.get("Card model", "")
            devices.append(
                DeviceInfo(int(key[4:]), str(name), str(card.get("PCI Bus", "")), driver)
            )
        return sorted(devices, key=lambda d: d.index)
