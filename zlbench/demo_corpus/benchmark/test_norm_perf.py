import pytest
import torch

from . import gems_ops
from .base import Benchmark


@pytest.mark.softmax
def test_perf_softmax():
    bench = Benchmark(op_name="softmax", torch_op=lambda x: torch.softmax(x, dim=-1))
    bench.set_gems(gems_ops.gems_softmax)
    bench.run()


@pytest.mark.layer_norm
def test_perf_layer_norm():
    bench = Benchmark(
        op_name="layer_norm",
        torch_op=lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
    )
    bench.set_gems(gems_ops.gems_layer_norm)
    bench.run()


@pytest.mark.rms_norm
def test_perf_rms_norm():
    bench = Benchmark(
        op_name="rms_norm", torch_op=lambda x: torch.nn.functional.rms_norm(x, x.shape[-1:])
    )
    bench.set_gems(gems_ops.gems_rms_norm)
    bench.run()
