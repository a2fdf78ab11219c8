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
alive through the second); torch's op both times. Then FlagGems' op (`flag_gems.use_gems()`, from
$FLAGGEMS_ROOT/src) in either place: `torch_gems` (FlagGems' runner's order: torch, then FlagGems),
`torch_gems_release` (the same with empty_cache() between), `gems_torch`, `gems_gems`. Prints one line
per process and a table of second / first.

Forty-sixth session (H100, torch 2.11, triton 3.6): torch's op twice reads 4.216 then 4.218 ms in
every case (plain, release, keep): timing second costs torch nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CASES = ("plain", "release", "keep", "torch_gems", "torch_gems_release", "gems_torch", "gems_gems")


def one(case: str, numel: int, dtype: str) -> dict:
    import contextlib
    import os

    import torch
    from triton.testing import do_bench_cudagraph

    first_impl, second_impl = case.split("_")[:2] if "gems" in case else ("torch", "torch")
    if "gems" in case:
        sys.path.insert(0, os.path.join(os.environ["FLAGGEMS_ROOT"], "src"))
        import flag_gems

    def kernel(impl):  # the kernel one call launches: proof of which implementation ran
        ctx = flag_gems.use_gems() if impl == "gems" else contextlib.nullcontext()
        with ctx, torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            torch.bitwise_left_shift(a, b)
            torch.cuda.synchronize()
        return sorted({e.name[:60] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})

    def bench(impl):
        ctx = flag_gems.use_gems() if impl == "gems" else contextlib.nullcontext()
        with ctx:  # FlagGems' op is bound when the graph is captured
            return do_bench_cudagraph(lambda: torch.bitwise_left_shift(a, b), rep=100, return_mode="median")

    dt = getattr(torch, dtype)
    a = torch.randint(0, 1 << 20, (numel,), dtype=dt, device="cuda")
    b = torch.randint(0, 8, (numel,), dtype=dt, device="cuda")
    with torch.cuda.stream(torch.cuda.Stream()):
        first = bench(first_impl)
        if case.endswith("release"):
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        kept = torch.bitwise_left_shift(a, b) if case == "keep" else None  # a first output alive throughout
        second = bench(second_impl)
    del kept
    kernels = {impl: kernel(impl) for impl in (first_impl, second_impl)}
    return {"case": case, "first_ms": first, "second_ms": second, "kernels": kernels,
            "reserved_mib": torch.cuda.memory_reserved() / 2**20, "device": torch.cuda.get_device_name()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one", choices=CASES)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated, of: " + ", ".join(CASES))
    p.add_argument("--numel", type=int, default=2**30)
    p.add_argument("--dtype", default="int32")
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.numel, args.dtype)))
        return 0
    cases = args.cases.split(",")
    results = {c: [] for c in cases}
    for k in range(args.processes):
        for case in cases:  # interleaved: a drift over the call touches every case alike
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
