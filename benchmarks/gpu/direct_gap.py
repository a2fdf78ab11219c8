"""Is direct timing (triton.testing.do_bench) of FlagGems' rows launch-bound? (issue 3: timer=direct noise)

do_bench records a start event, calls fn, records an end event, after clearing L2 by zeroing 256 MB.
When the host needs longer to launch fn than the device needs for the clear, the device reaches the
start event and then waits for the kernel: the measured time includes host launch time, which moves
from process to process. This script measures, per row (FlagGems' unary shapes, torch and gems ops):
  host_us   host time per benchmark iteration (clear + fn), launch only
  direct    do_bench median as FlagGems' kernel mode calls it (25 ms warmup, 100 ms)
  filled    the same with the device kept busy after each clear (torch.cuda._sleep for twice the
            host time), so the kernel is queued before its start event is reached
  graph     do_bench_cudagraph median (20 ms), the reference device time
Run it twice (two processes) and compare: python direct_gap.py > a.json; ... > b.json.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import triton
from triton.runtime import driver
from triton.testing import do_bench, do_bench_cudagraph

import flag_gems

SHAPES = [(1073741824,), (64, 64), (4096, 4096), (64, 512, 512), (1024, 1024, 1024)]
DTYPES = [torch.float16, torch.float32]


def cycles_per_us() -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    s.record()
    torch.cuda._sleep(20_000_000)
    e.record()
    torch.cuda.synchronize()
    return 20_000_000 / (s.elapsed_time(e) * 1000)


def host_us(fn, cache) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(50):
        cache.zero_()
        fn()
    host = (time.perf_counter() - t) / 50 * 1e6
    torch.cuda.synchronize()
    return host


def filled(fn, cycles: int, **kw) -> float:
    active = driver.active
    active.clear_cache = lambda cache: (cache.zero_(), torch.cuda._sleep(cycles))
    try:
        return do_bench(fn, **kw)
    finally:
        del active.clear_cache


def main() -> None:
    cpu = cycles_per_us()
    cache = driver.active.get_empty_cache_for_benchmark()
    rows = []
    for dtype in DTYPES:
        for shape in SHAPES:
            x = torch.randn(shape, dtype=dtype, device="cuda")
            for who in ("torch", "gems"):
                ctx = flag_gems.use_gems(exclude=["zero_"]) if who == "gems" else torch.no_grad()
                with ctx:
                    fn = lambda: torch.exp(x)  # noqa: E731
                    fn()
                    h = host_us(fn, cache)
                    t0 = time.perf_counter()
                    d = do_bench(fn, warmup=25, rep=100, return_mode="median")
                    t1 = time.perf_counter()
                    f = filled(fn, int(2 * h * cpu), warmup=25, rep=100, return_mode="median")
                    t2 = time.perf_counter()
                    g = do_bench_cudagraph(fn, rep=20, return_mode="median")
                rows.append({"dtype": str(dtype).split(".")[-1], "shape": list(shape), "who": who,
                             "host_us": round(h, 1), "direct_ms": d, "filled_ms": f, "graph_ms": g,
                             "direct_wall_s": round(t1 - t0, 3), "filled_wall_s": round(t2 - t1, 3)})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            del x
    print(json.dumps({"cycles_per_us": cpu, "torch": torch.__version__, "triton": triton.__version__,
                      "device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
