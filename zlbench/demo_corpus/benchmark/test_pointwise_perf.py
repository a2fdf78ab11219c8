import pytest
import torch

from . import gems_ops
from .base import Benchmark, BinaryBenchmark


@pytest.mark.exp
def test_perf_exp():
    bench = Benchmark(op_name="exp", torch_op=torch.exp)
    bench.set_gems(gems_ops.gems_exp)
    bench.run()


@pytest.mark.add
def test_perf_add():
    bench = BinaryBenchmark(op_name="add", torch_op=torch.add)
    bench.set_gems(gems_ops.gems_add)
    bench.run()


@pytest.mark.gelu
def test_perf_gelu():
    bench = Benchmark(
        op_name="gelu", torch_op=lambda x: torch.nn.functional.gelu(x, approximate="tanh")
    )
    bench.set_gems(gems_ops.gems_gelu)
    bench.run()
