import pytest
import torch

from . import gems_ops
from .base import Benchmark


@pytest.mark.sum
def test_perf_sum():
    bench = Benchmark(op_name="sum", torch_op=torch.sum)
    bench.set_gems(gems_ops.gems_sum)
    bench.run()


@pytest.mark.amax
def test_perf_amax():
    bench = Benchmark(op_name="amax", torch_op=lambda x: torch.amax(x, dim=-1))
    bench.set_gems(gems_ops.gems_amax)
    bench.run()
