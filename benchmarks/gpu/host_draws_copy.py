"""What a large host integer draw costs, by the way it is made (plugins/host_draws.py's choice).

FlagGems writes `torch.randint(..., device="cpu").to(device)`. For a core shape of 2^30 elements this
times, side by side in one process, with the device synchronised around each way:
  cpu          the draw on the CPU and its copy over (the corpus as written)
  dev+d2h+h2d  the draw on the device, copied back to pageable memory, then over again (host_draws
               as of 2026-12-04)
  dev+d2h      the same without the copy over (what a skipped second copy would leave)
  dev+pin+h2d  the draw on the device, copied back into pinned memory, then over (first and later:
               torch's pinned-memory cache reuses a freed block of the same size)
and then what emptying torch's pinned-memory cache gives back.

    python3 benchmarks/gpu/host_draws_copy.py [--numel N] [--reps R] > out.jsonl
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from zlbench.plugins.host_draws import _host_cache_emptier, _pinned_empty


def timed(fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    del out
    return dt


def ways(numel: int, dtype: torch.dtype):
    lo, hi = 0, 8
    dev = "cuda"

    def cpu():
        return torch.randint(lo, hi, (numel,), dtype=dtype, device="cpu").to(dev)

    def dev_d2h_h2d():
        return torch.randint(lo, hi, (numel,), dtype=dtype, device=dev).cpu().to(dev)

    def dev_d2h():
        return torch.randint(lo, hi, (numel,), dtype=dtype, device=dev).cpu()

    def dev_pin_h2d():
        d = torch.randint(lo, hi, (numel,), dtype=dtype, device=dev)
        h = _pinned_empty(torch, (numel,), dtype)  # as plugins/host_draws.py allocates it
        h.copy_(d)
        del d
        return h.to(dev)

    return {"cpu": cpu, "dev+d2h+h2d": dev_d2h_h2d, "dev+d2h": dev_d2h, "dev+pin+h2d": dev_pin_h2d}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--numel", type=int, default=1 << 30)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    torch.ones(1, device="cuda")  # the context, outside the times
    for dtype in (torch.int16, torch.int32):
        for rep in range(args.reps):
            for name, fn in ways(args.numel, dtype).items():
                print(json.dumps({"dtype": str(dtype), "rep": rep, "way": name, "numel": args.numel,
                                  "s": round(timed(fn), 3)}), flush=True)
    # What a node's end gives back (plugins/host_draws.release_pinned): the pinned cache, emptied.
    stats = getattr(torch.cuda, "host_memory_stats", None)
    cached = (lambda: stats().get("allocated_bytes.current")) if stats else (lambda: None)
    before = cached()
    empty = _host_cache_emptier(torch, "cuda")
    if empty is not None:
        empty()
    print(json.dumps({"emptier": getattr(empty, "__qualname__", None), "pinned_cached_before": before,
                      "pinned_cached_after": cached()}), flush=True)


if __name__ == "__main__":
    main()
