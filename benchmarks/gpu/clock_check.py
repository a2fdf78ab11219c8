"""Clock readers on a real GPU (issue 13, item 2): each reader zlbench has for the cuda backend
(plugins/clocks.py) reads the SM clock around a device spin of 0, 2 and 50 ms, twice; the readers
should agree with each other (and with nvidia-smi). Also each reader's host cost per batch.

    python benchmarks/gpu/clock_check.py > clocks.json
"""

import json
import time

import torch

from zlbench.backends import get_backend
from zlbench.plugins import clocks


def main():
    backend = get_backend("cuda")
    torch.cuda.init()
    torch.cuda._sleep(50_000_000)  # bring the clock up from idle
    torch.cuda.synchronize()
    out = {"device": torch.cuda.get_device_name(0)}
    for source, cls in clocks.SOURCES.items():
        try:
            reader = cls(backend)
        except clocks.Unavailable as e:
            out[source] = {"unavailable": str(e)}
            continue
        readings = []
        for _ in range(2):
            for spin_ms in (0, 2, 50):
                reader.begin()
                torch.cuda._sleep(int(spin_ms * 1.98e6))  # ~spin_ms at an H200's 1980 MHz
                reader.during()
                readings.append({"spin_ms": spin_ms, "sm_mhz_mem_mhz": reader.end()})
        t0 = time.perf_counter()
        for _ in range(100):
            reader.begin()
            reader.end()
        cost_us = (time.perf_counter() - t0) / 100 * 1e6
        out[source] = {**reader.describe(), "readings": readings, "host_us_per_batch": round(cost_us, 1)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
