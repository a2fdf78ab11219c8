"""NVIDIA CUDA."""

from __future__ import annotations

from typing import List

from zlbench.backends.base import TRITON_ENV, DeviceBackend, DeviceInfo


class CudaBackend(DeviceBackend):
    name = "cuda"
    aliases = ("nvidia", "gpu", "nv")
    flag_gems_vendors = ("nvidia",)
    torch_device = "cuda"
    torch_build = ("cuda", "CUDA")
    visibility_env = "CUDA_VISIBLE_DEVICES"
    enumerate_command = (
        "nvidia-smi",
        "--query-gpu=index,name,pci.bus_id,driver_version",
        "--format=csv,noheader",
    )
    graph_class = "torch.cuda.CUDAGraph"
    upstream_graph_timer = True
    default_timer = "graph"
    # Wording carried over from the old runner's CUDA marker list. No poisoning wording is guessed
    # for CUDA: nothing observed there says the capture attempt itself kills the context.
    device_fault_wording = (
        "an illegal memory access was encountered",
        "illegal instruction",
        "misaligned address",
        "device-side assert triggered",
        "unspecified launch failure",
        "cudaErrorLaunchFailure",
        "out of memory",
    )
    capture_poison_wording = ()
    switch_env_prefixes = ("FLAGTREE_", "TRITON_")
    # CUDA runtime (CUDA C++ Programming Guide, "CUDA Environment Variables"), cuBLAS, PyTorch's allocator.
    identity_env = TRITON_ENV + (
        "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING", "CUDA_CACHE_DISABLE",
        "CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT", "CUDA_AUTO_BOOST", "NVIDIA_TF32_OVERRIDE",
        "CUBLAS_WORKSPACE_CONFIG", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    )

    def parse_devices(self, text: str) -> List[DeviceInfo]:
        devices = []
        for line in text.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 2 and parts[0].isdigit():
                devices.append(
                    DeviceInfo(
                        int(parts[0]),
                        parts[1],
                        parts[2] if len(parts) > 2 else "",
                        parts[3] if len(parts) > 3 else "",
                    )
                )
        return devices
