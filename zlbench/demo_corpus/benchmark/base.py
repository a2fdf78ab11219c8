"""Benchmark base in FlagGems' shape: per dtype, per shape, time torch then the alternative ("gems")."""

import gc
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, List, Optional

import pytest
import torch
import yaml

from . import consts, timing
from .conftest import emit_record_logger
from .device import DEVICE, synchronize


@dataclass
class BenchmarkMetrics:
    legacy_shape: Optional[Any] = None
    shape_detail: Optional[Any] = None
    latency_base: Optional[float] = None
    latency: Optional[float] = None
    gbps_base: Optional[float] = None
    gbps: Optional[float] = None
    speedup: Optional[float] = None
    accuracy: Optional[float] = None
    tflops: Optional[float] = None
    utilization: Optional[float] = None
    compared_speedup: Optional[float] = None
    error_msg: Optional[str] = None


@dataclass
class BenchmarkResult:
    op_name: str
    dtype: str
    mode: str
    level: str
    result: List[BenchmarkMetrics] = field(default_factory=list)

    def to_json(self):
        return json.dumps(asdict(self))


def _conf():
    # Config is rebound in pytest_configure; read it through the module every time.
    from . import conftest

    return conftest.Config


class Benchmark:
    DEFAULT_SHAPES = [(64, 64), (256, 256)]

    def __init__(self, op_name, torch_op, dtypes=None, gems_op=None):
        self.op_name = op_name
        self.torch_op = torch_op
        self.gems_op = gems_op
        self.device = DEVICE
        self.dtypes = dtypes or consts.DEFAULT_DTYPES
        self.shapes = None

    def set_dtypes(self, user_desired_dtypes):
        # As FlagGems': a test refuses --dtypes it has no case of (any of them), measuring nothing.
        invalid = [d for d in user_desired_dtypes or [] if d not in self.dtypes]
        if invalid:
            raise ValueError(f"Given dtype(s) '{', '.join(str(d) for d in invalid)}'"
                             f"can't be supported by this op '{self.op_name}'")
        self.to_bench_dtypes = user_desired_dtypes or self.dtypes

    def set_gems(self, gems_op):
        self.gems_op = gems_op

    def set_shapes(self, shape_file_path):
        with open(shape_file_path, encoding="utf-8") as f:
            table = yaml.safe_load(f) or {}
        for key in [self.op_name] + [c.__name__ for c in type(self).__mro__]:
            if key in table:
                entry = table[key]
                shapes = [tuple(s) for s in entry["shapes"]]
                if _conf().bench_level == consts.BenchLevel.COMPREHENSIVE:
                    shapes += [tuple(s) for s in entry.get("comprehensive", [])]
                self.shapes = shapes
                return
        self.shapes = list(self.DEFAULT_SHAPES)

    def get_latency(self, op, *args):
        fn = lambda: op(*args)  # noqa: E731
        cfg = _conf()
        if cfg.mode == consts.BenchMode.KERNEL:
            return timing.do_bench(fn, warmup=cfg.warm_up, rep=cfg.repetition, return_mode="median")
        if cfg.mode == consts.BenchMode.CUDAGRAPH:
            return timing.do_bench_cudagraph(fn, rep=cfg.repetition, return_mode="median")
        n = 10
        for _ in range(n):
            fn()
        synchronize()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        synchronize()
        return (time.perf_counter() - start) / n * 1000

    def get_input_iter(self, dtype):
        for shape in self.shapes:
            yield (torch.randn(shape, device=self.device, dtype=dtype),)

    def get_gbps(self, args, latency):
        nbytes = sum(a.numel() * a.element_size() for a in args if torch.is_tensor(a)) * 2
        return nbytes / (latency * 1e-3) / 1e9 if latency else None

    def run(self):
        cfg = _conf()
        self.set_shapes(cfg.shape_file)
        self.set_dtypes(cfg.user_desired_dtypes)
        for dtype in self.to_bench_dtypes:
            metrics = []
            for args in self.get_input_iter(dtype):
                metric = BenchmarkMetrics()
                try:
                    metric.shape_detail = [list(a.shape) if torch.is_tensor(a) else a for a in args]
                    metric.legacy_shape = metric.shape_detail[0]
                    wanted = cfg.user_desired_metrics or consts.DEFAULT_METRICS  # FlagGems' --metrics
                    if "latency_base" in wanted:
                        metric.latency_base = self.get_latency(self.torch_op, *args)
                    metric.latency = self.get_latency(self.gems_op, *args)
                    if metric.latency_base is not None:
                        metric.speedup = metric.latency_base / metric.latency
                        metric.gbps_base = self.get_gbps(args, metric.latency_base)
                    metric.gbps = self.get_gbps(args, metric.latency)
                except Exception as e:  # same contract as FlagGems: fail, no record for this dtype
                    metric.error_msg = str(e)
                    pytest.fail(str(e))
                finally:
                    metrics.append(metric)
                    gc.collect()
            result = BenchmarkResult(
                op_name=self.op_name, dtype=str(dtype), mode=cfg.mode.value,
                level=cfg.bench_level.value, result=metrics,
            )
            emit_record_logger(result.to_json())


class BinaryBenchmark(Benchmark):
    def get_input_iter(self, dtype):
        for shape in self.shapes:
            yield (
                torch.randn(shape, device=self.device, dtype=dtype),
                torch.randn(shape, device=self.device, dtype=dtype),
            )


class MatmulBenchmark(Benchmark):
    DEFAULT_SHAPES = [(64, 64, 64)]

    def get_input_iter(self, dtype):
        for m, n, k in self.shapes:
            yield (
                torch.randn((m, k), device=self.device, dtype=dtype),
                torch.randn((k, n), device=self.device, dtype=dtype),
            )


__all__ = ["Benchmark", "BinaryBenchmark", "MatmulBenchmark"]
