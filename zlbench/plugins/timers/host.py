"""host: the host's wall clock around each call, synchronizing the device around each (the CPU's
timer)."""

from __future__ import annotations

import time

from zlbench.plugins import guards
from zlbench.plugins.sampling import summarize
from zlbench.plugins.timers import BaseTimer, Call


class Timer(BaseTimer):
    name = "host"

    def batch(self, call: Call):
        return host_bench(call.fn, call.warmup, call.rep, call.grad_to_none, call.quantiles, call.return_mode)


def host_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Wall-clock timing of single calls, synchronizing the device around each (ms)."""
    dev = guards.device_module()
    sync = dev.synchronize if dev is not None else (lambda: None)
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    sync()
    estimate = max((time.perf_counter() - t0) * 1000 / 3, 1e-4)
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    times = []
    for _ in range(max(5, int(rep / estimate))):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        sync()
        t = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t) * 1000)
    return summarize(times, quantiles, return_mode)
