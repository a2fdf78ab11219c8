"""Adaptive against fixed stopping on the CPU: the demo corpus, each setting run ROUNDS times,
settings interleaved round by round (so a machine that gets busier hurts them alike). Per setting:
wall per run, run-to-run noise of the rows (abs log ratio over every pair of runs; benchmarks/noise.py),
stop reasons and samples per timing call.

    python benchmarks/timing_cpu.py [--rounds 3] [--out results/timing_cpu.json] [--ops exp,mm,...]

The CPU's rows are host-timed and the machine may be shared: noise here is the host's, not a GPU's;
benchmarks/gpu/timing13.sh measures the same questions on FlagGems and an H200.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noise import noise  # noqa: E402

SETTINGS = {
    "fixed": ["timer.stop=fixed"],
    "adaptive": [],
    "adaptive_0.01": ["timer.target_rel=0.01"],
    "adaptive_0.003": ["timer.target_rel=0.003"],
}


def run(args, run_dir):
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "zlbench", f"hydra.run.dir={run_dir}", "progress=none",
                          "store.url=none", *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"zlbench failed ({res.returncode}): {res.stderr[-2000:]}")
    return time.perf_counter() - t0


def rows(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "rows.jsonl").read_text().splitlines() if line.strip()]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ops", default="")
    p.add_argument("--settings", default=",".join(SETTINGS))
    p.add_argument("--out")
    args = p.parse_args(argv)
    common = [f"ops=[{args.ops}]"] if args.ops else []
    names = args.settings.split(",")
    work = Path(tempfile.mkdtemp(prefix="zl_timing_cpu_"))
    walls = collections.defaultdict(list)
    for rnd in range(args.rounds):
        for name in (names if rnd % 2 == 0 else names[::-1]):
            walls[name].append(run(common + SETTINGS[name], work / f"{name}_{rnd}"))
            print(f"round {rnd} {name}: {walls[name][-1]:.1f} s", file=sys.stderr)
    out = {"machine": {"cpus": os.cpu_count(), "load": os.getloadavg()}, "rounds": args.rounds, "settings": {}}
    for name in names:
        dirs = [work / f"{name}_{r}" for r in range(args.rounds)]
        pairs = [noise(rows(a), rows(b), "latency") for a, b in itertools.combinations(dirs, 2)]
        calls = [f for d in dirs for r in rows(d) for f in ({"stop_reason": r.get("stop_reason"),
                                                             "samples": r.get("samples")}, r.get("timing_base") or {})]
        samples = [c["samples"] for c in calls if c.get("samples")]
        out["settings"][name] = {
            "wall_s": [round(w, 1) for w in walls[name]],
            "noise_latency_pairs": pairs,
            "noise_p90_pct_median_over_pairs": statistics.median(x["p90_pct"] for x in pairs) if pairs else None,
            "stop_reasons": dict(collections.Counter(c.get("stop_reason") for c in calls)),
            "samples_median": statistics.median(samples) if samples else None,
            "bimodal_rows": sum("BENCHMARK_BIMODAL" in (r.get("markers") or []) for d in dirs for r in rows(d)),
        }
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
