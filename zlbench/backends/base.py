"""What every device backend declares. Nothing outside zlbench/backends names a vendor."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import ClassVar, Dict, List, Optional, Tuple


# Tests (and users without the hardware) replay a recorded enumeration output through this
# variable: the simulation stays at the device-interface boundary.
SMI_OUTPUT_ENV = "ZLBENCH_SMI_OUTPUT"

# Variables Triton (and FlagTree, a fork of it) reads that change what it compiles or how it runs,
# recorded in the run identity wherever set. Many are read only inside libtriton.so, never in a
# .py file. Sources (triton-lang/triton, main of 2026): include/triton/Tools/Sys/GetEnv.hpp
# (CACHE_INVALIDATING_ENV_VARS and CACHE_NEUTRAL_ENV_VARS, read by tools::getBoolEnv/getStrEnv in
# the C++ passes; older releases also USE_TTGIR_LOC) and python/triton/knobs.py; FlagTree's
# (flagos-ai/FlagTree) GetEnv.hpp adds LLVM_EXTRACT_DI_LOCAL_VARIABLES and TRITON_* ones.
# TRITON_* and FLAGTREE_* are recorded by prefix too (planning/switches.py: COMMON_SWITCH).
TRITON_ENV: Tuple[str, ...] = (
    # read in C++ (GetEnv.hpp)
    "AMDGCN_ENABLE_DUMP", "AMDGCN_USE_BUFFER_OPS", "DISABLE_FAST_REDUCTION", "DISABLE_LLVM_OPT",
    "DISABLE_MMA_V3", "DISABLE_MMA_V5", "DISABLE_PTXAS_OPT", "LLVM_IR_ENABLE_DUMP", "LLVM_ENABLE_TIMING",
    "LLVM_PASS_PLUGIN_PATH", "MLIR_ENABLE_DIAGNOSTICS", "MLIR_ENABLE_DUMP", "MLIR_DUMP_PATH",
    "MLIR_ENABLE_TIMING", "MLIR_DISABLE_MULTITHREADING", "USE_IR_LOC", "USE_TTGIR_LOC", "NVPTX_ENABLE_DUMP",
    "STORE_TMEM_TO_GLOBAL_BYPASS_SMEM", "ALLOW_LHS_TMEM_LAYOUT_CONVERSION", "ENABLE_MMA_V5_ATT_PIPELINE",
    "WARP_SPECIALIZE_ATTENTION_FLAG", "TRITON_DEFAULT_FP_FUSION", "TRITON_DISABLE_LINE_INFO",
    "TRITON_DISABLE_RESHAPE_ENCODING_INFERENCE", "TRITON_ENABLE_LLVM_DEBUG", "TRITON_LLVM_DEBUG_ONLY",
    "TRITON_ENABLE_ASAN", "TRITON_OVERRIDE_ARCH", "TRITON_F32_DEFAULT", "TRITON_HIP_GLOBAL_PREFETCH",
    "TRITON_HIP_LOCAL_PREFETCH", "TRITON_HIP_USE_ASYNC_COPY", "TRITON_HIP_USE_BLOCK_PINGPONG",
    "TRITON_HIP_USE_IN_THREAD_TRANSPOSE", "TRITON_REPRODUCER_PATH",
    # read in C++ by FlagTree only
    "LLVM_EXTRACT_DI_LOCAL_VARIABLES", "TRITON_DUMP_MIR", "TRITON_PREFER_TMEM_16x256_LAYOUT",
    "TRITON_PLUGIN_PATHS",
    # read in Python (knobs.py)
    "CC", "PTXAS_OPTIONS", "AMDGCN_USE_BUFFER_ATOMICS", "AMDGCN_SCALARIZE_PACKED_FOPS", "TRITON_INTERPRET",
    "TRITON_DEBUG", "TRITON_KERNEL_OVERRIDE", "TRITON_OVERRIDE_DIR", "TRITON_ALWAYS_COMPILE",
    "TRITON_CACHE_MANAGER", "TRITON_MOCK_PTX_VERSION", "TRITON_PTXAS_PATH", "TRITON_LIBDEVICE_PATH",
    "TRITON_LIBCUDA_PATH", "TRITON_LIBHIP_PATH", "TRITON_CUDACRT_PATH", "TRITON_CUDART_PATH",
    "TRITON_ENABLE_EXPERIMENTAL_CONSAN", "TRITON_CACHE_AUTOTUNING",
)


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
    # Where torch itself carries the vendor's runtime (no extension): the torch.version attribute a
    # build for it sets, and the runtime's name. A torch built without it fails every op.
    torch_build: ClassVar[Optional[Tuple[str, str]]] = None
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
    # Timing functions a corpus calls on this vendor instead of triton.testing.do_bench ("module:attr";
    # FlagGems' base.py times Ascend with triton.backends.ascend.testing.do_bench_npu): the timing
    # plugin replaces each with zlbench's timer, so no row of this vendor escapes it.
    corpus_timer_entry_points: ClassVar[Tuple[str, ...]] = ()
    # pytest plugins (dotted module paths) this backend needs in the benchmark process, planned
    # before every other plugin because they rewrite collection-time markers.
    compat_plugins: ClassVar[Tuple[str, ...]] = ()
    # Failure wording of the vendor runtime, matched case-insensitively against the exception text
    # of a graph-capture attempt: poison first, then fatal; any other failure is a refused capture.
    device_fault_wording: ClassVar[Tuple[str, ...]] = ()
    capture_poison_wording: ClassVar[Tuple[str, ...]] = ()
    # Env vars whose values change what gets compiled or timed on this backend (recorded in the identity).
    switch_env_prefixes: ClassVar[Tuple[str, ...]] = ()
    # Env vars recorded in the identity wherever set: Triton's, then the vendor runtime's.
    identity_env: ClassVar[Tuple[str, ...]] = TRITON_ENV

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
            from zlbench.errors import UsageError

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
