"""The demo's timer entry points, looked up at call time like FlagGems' triton.testing.do_bench.

On an accelerator with Triton these delegate to triton.testing; on the CPU they time with the host
clock. zlbench's timing plugin patches the attributes of this module (corpus.timer_modules).
"""

import statistics
import time

import torch

from .device import DEVICE, synchronize


def _triton_testing():
    if DEVICE == "cpu":
        return None
    try:
        import triton.testing as tt
    except ImportError:
        return None
    return tt


def _summarize(times, quantiles, return_mode):
    if quantiles is not None:
        ordered = sorted(times)
        return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
    if return_mode == "min":
        return min(times)
    if return_mode == "max":
        return max(times)
    if return_mode == "median":
        return statistics.median(times)
    if return_mode == "all":
        return times
    return statistics.fmean(times)


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Same signature as triton.testing.do_bench; milliseconds."""
    tt = _triton_testing()
    if tt is not None:
        return tt.do_bench(
            fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none,
            quantiles=quantiles, return_mode=return_mode,
        )
    fn()
    synchronize()
    start = time.perf_counter()
    for _ in range(3):
        fn()
    synchronize()
    estimate_ms = max((time.perf_counter() - start) * 1000 / 3, 1e-4)
    n_warmup = max(1, int(warmup / estimate_ms))
    n_repeat = max(5, int(rep / estimate_ms))
    for _ in range(n_warmup):
        fn()
    times = []
    for _ in range(n_repeat):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        synchronize()
        t0 = time.perf_counter()
        fn()
        synchronize()
        times.append((time.perf_counter() - t0) * 1000)
    return _summarize(times, quantiles, return_mode)


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    tt = _triton_testing()
    if tt is None or DEVICE != "cuda":
        raise RuntimeError(f"graph capture is not available on device '{DEVICE}'")
    return tt.do_bench_cudagraph(
        fn, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles, return_mode=return_mode
    )


__all__ = ["do_bench", "do_bench_cudagraph", "torch"]
