"""Does the implementation timed second read slower, at sizes of several GiB? (issue 23)

The forty-fifth session (RESULTS.md) read FlagGems' 4-byte binary rows of 2**30 elements (two 4 GiB
inputs, a 4 GiB output) at 4.70-4.77 ms where FlagGems' runner order times torch first, and at 4.22 ms
where torch's baseline was not timed before them; torch's own op, timed first, read 4.22 ms. This
times one torch op twice in a row, as FlagGems' harness times the baseline then the alternative
(graph replays, Triton's `do_bench_cudagraph`), each case in a fresh process, so that the second
call's reading can be compared with the first's:

    python3 benchmarks/gpu/second_timed23.py                  # every case, 3 processes each
    python3 benchmarks/gpu/second_timed23.py --one CASE       # one case in this process (what the above runs)

Cases: `plain` (first call, then the second), `release` (torch.cuda.empty_cache() between the two:
the first call's graph pool and output go back to the driver), `keep` (the first call's output kept
alive through the second). Prints one line per process and a table of second / first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CASES = ("plain", "release", "keep")


def one(case: str, numel: int, dtype: str) -> dict:
    import torch
    from triton.testing import do_bench_cudagraph

    dt = getattr(torch, dtype)
    a = torch.randint(0, 1 << 20, (numel,), dtype=dt, device="cuda")
    b = torch.randint(0, 8, (numel,), dtype=dt, device="cuda")
    with torch.cuda.stream(torch.cuda.Stream()):
        first = do_bench_cudagraph(lambda: torch.bitwise_left_shift(a, b), rep=100, return_mode="median")
        if case == "release":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        kept = torch.bitwise_left_shift(a, b) if case == "keep" else None  # a first output alive throughout
        second = do_bench_cudagraph(lambda: torch.bitwise_left_shift(a, b), rep=100, return_mode="median")
    del kept
    return {"case": case, "first_ms": first, "second_ms": second,
            "reserved_mib": torch.cuda.memory_reserved() / 2**20, "device": torch.cuda.get_device_name()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one", choices=CASES)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--numel", type=int, default=2**30)
    p.add_argument("--dtype", default="int32")
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.numel, args.dtype)))
        return 0
    results = {c: [] for c in CASES}
    for k in range(args.processes):
        for case in CASES:  # interleaved: a drift over the call touches every case alike
            out = subprocess.run([sys.executable, __file__, "--one", case, "--numel", str(args.numel),
                                  "--dtype", args.dtype], capture_output=True, text=True)
            if out.returncode:
                print(f"{case}: exit {out.returncode}: {out.stderr[-500:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results[case].append(r)
            print(json.dumps(r), flush=True)
    print("\n| case | processes | first ms (median) | second ms (median) | second / first |")
    print("|---|---|---|---|---|")
    for case, rs in results.items():
        if rs:
            f, s = statistics.median(r["first_ms"] for r in rs), statistics.median(r["second_ms"] for r in rs)
            print(f"| {case} | {len(rs)} | {f:.4f} | {s:.4f} | {s / f - 1:+.2%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
