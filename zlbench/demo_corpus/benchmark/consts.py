"""Mirrors FlagGems' benchmark/consts.py where the runner touches it."""

import enum

import torch

DEFAULT_WARMUP_TIME = 20  # ms (FlagGems: 1000)
DEFAULT_ITER_TIME = 50  # ms (FlagGems: 100)

FLOAT_DTYPES = [torch.float16, torch.float32, torch.bfloat16]
INT_DTYPES = [torch.int16, torch.int32]
BOOL_DTYPES = [torch.bool]
DEFAULT_DTYPES = [torch.float32, torch.bfloat16]
ALL_AVAILABLE_METRICS = ["latency_base", "latency", "speedup", "gbps", "tflops", "accuracy"]
DEFAULT_METRICS = ["latency_base", "latency", "speedup", "gbps"]


class BenchMode(enum.Enum):
    KERNEL = "kernel"
    OPERATOR = "operator"
    WRAPPER = "wrapper"
    CUDAGRAPH = "cudagraph"


class BenchLevel(enum.Enum):
    COMPREHENSIVE = "comprehensive"
    CORE = "core"
