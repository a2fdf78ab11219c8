import pytest
import torch

from . import gems_ops
from .base import Benchmark


class FlakyBenchmark(Benchmark):
    def get_latency(self, op, *args):
        # Draw the flaky implementation anew for every timing call of the gems side.
        if op is gems_ops.make_flaky_sum:
            op = gems_ops.make_flaky_sum()
        return super().get_latency(op, *args)


@pytest.mark.flaky_sum
def test_perf_flaky_sum():
    bench = FlakyBenchmark(op_name="flaky_sum", torch_op=torch.sum, dtypes=[torch.float32])
    bench.set_gems(gems_ops.make_flaky_sum)
    bench.run()
