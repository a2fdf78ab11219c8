#!/usr/bin/env python3
"""What an op's first call costs a fresh benchmark process, and what the caches it starts with change.

A plain run measures every node in several fresh processes; a node's wall in a warm process varies
by seconds from pass to pass (float_power 0.7 s in two passes, 3.1-3.6 s in four: one capture of
3 s; H200, twenty-fifth session). This probe starts fresh processes one after another, each calling
a few FlagGems ops once and again, and reports per op: the first call's wall, the second's, and how
many entries the Triton cache gained during the first call (a compile, not a cache hit):

    . benchmarks/gpu/setup.sh    # then FlagGems' src/ on the path, as its conftest would put it:
    PYTHONPATH=$PYTHONPATH:$FLAGGEMS_ROOT/src python3 benchmarks/gpu/first_use23.py [--ops float_power,...]

Scenarios, in this order, each a fresh process: `cold` (empty Triton and FlagGems caches), `warm`
(both as `cold` left them), `fresh_flaggems` (the warm Triton cache, an empty FlagGems cache dir: what
a plain run's later passes start with, FLAGGEMS_CACHE_DIR per pass), `fresh_flaggems_2` (again), and
`warm_again`. Run from the repo root of a CUDA machine set up as setup.sh says.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# name -> (inputs, the torch call FlagGems replaces under use_gems()); float16 as the runs are.
CHILD = r'''
import json, os, sys, time
from pathlib import Path
t0 = time.perf_counter()
import torch
import flag_gems
imported = time.perf_counter() - t0
cache = Path(os.environ["TRITON_CACHE_DIR"])
def entries():
    return {str(f.relative_to(cache)) for f in cache.rglob("*.json")} if cache.exists() else set()
dev = "cuda"
h = torch.float16
def make(name):
    g = torch.Generator(device=dev).manual_seed(0)
    r = lambda *s: torch.rand(*s, device=dev, dtype=h, generator=g) + 0.5
    return {
        "float_power": lambda: (torch.float_power, (r(1024), r(1024))),
        "atan": lambda: (torch.atan, (r(65536),)),
        "arctan2": lambda: (torch.atan2, (r(65536), r(65536))),
        "lgamma": lambda: (torch.lgamma, (r(65536),)),
        "add_relu": lambda: (lambda a, b: torch.relu(a + b), (r(65536), r(65536))),
        "linalg_cross": lambda: (torch.linalg.cross, (r(4096, 3), r(4096, 3))),
        "exponential_": lambda: (lambda a: a.exponential_(), (r(65536),)),
        "addbmm": lambda: (torch.addbmm, (r(256, 256), r(4, 256, 256), r(4, 256, 256))),
        "cumsum": lambda: (lambda a: torch.cumsum(a, 0), (r(65536),)),
        "softmax": lambda: (lambda a: torch.softmax(a, -1), (r(256, 1024),)),
    }[name]()
out = {"imported_s": round(imported, 2), "ops": {}}
profile = os.environ.get("ZL_PROFILE_FIRST")
for name in sys.argv[1].split(","):
    fn, args = make(name)
    torch.cuda.synchronize()
    before = entries()
    with flag_gems.use_gems():
        if profile:
            import cProfile, pstats
            prof = cProfile.Profile(); prof.enable()
        t = time.perf_counter(); fn(*args); torch.cuda.synchronize(); first = time.perf_counter() - t
        if profile:
            prof.disable()
            pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(int(profile))
        t = time.perf_counter(); fn(*args); torch.cuda.synchronize(); second = time.perf_counter() - t
    out["ops"][name] = {"first_s": round(first, 3), "second_s": round(second, 4), "compiled": len(entries() - before),
                         "new": sorted(entries() - before)[:8]}
print(json.dumps(out))
'''


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", default="float_power,atan,arctan2,lgamma,add_relu,linalg_cross,exponential_,addbmm,cumsum,softmax")
    p.add_argument("--json")
    p.add_argument("--profile", type=int, metavar="N", help="cProfile each op's first call in the `warm` process "
                   "only (the N costliest calls, cumulative, on stderr)")
    p.add_argument("--only", nargs="+", help="these scenarios only (cold always runs first: it fills the caches)")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="zl_first_use_"))
    triton, flaggems = root / "triton", root / "flaggems"
    scenarios = [("cold", flaggems), ("warm", flaggems), ("fresh_flaggems", root / "fg2"),
                 ("fresh_flaggems_2", root / "fg3"), ("warm_again", flaggems)]
    results = {}
    for name, fg in scenarios:
        if args.only and name not in args.only and name != "cold":
            continue
        env = {**os.environ, "TRITON_CACHE_DIR": str(triton), "FLAGGEMS_CACHE_DIR": str(fg)}
        if args.profile and name == "warm":
            env["ZL_PROFILE_FIRST"] = str(args.profile)
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, args.ops], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if done.returncode != 0:
            print(f"{name}: rc {done.returncode}\n{done.stderr[-3000:]}", flush=True)
            continue
        if args.profile and name == "warm":
            print(done.stderr, flush=True)
        res = json.loads(done.stdout.strip().splitlines()[-1])
        res["wall_s"] = round(wall, 2)
        results[name] = res
        print(f"## {name}: process wall {wall:.1f} s, import {res['imported_s']} s", flush=True)
        for op, r in res["ops"].items():
            print(f"  {op:14} first {r['first_s']:7.3f} s  second {r['second_s']:.4f} s  compiled {r['compiled']}", flush=True)
            if r["compiled"] and name != "cold":
                print("    new: " + " ".join(r["new"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
