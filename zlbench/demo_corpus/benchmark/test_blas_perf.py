import pytest
import torch

from . import gems_ops
from .base import MatmulBenchmark


@pytest.mark.mm
def test_perf_mm():
    bench = MatmulBenchmark(op_name="mm", torch_op=torch.mm)
    bench.set_gems(gems_ops.gems_mm)
    bench.run()
