"""Offline, over the archived repeat plain runs: what more processes give a row's median, and what
letting every node with a process-unstable row choose more processes would cost.

1. Rows measured in more than 3 processes in both runs of a repeat pair (one caliber, one zlbench
   commit, discovery as interval_rules23.py): run to run |ln(A/B)| of the median of their first 3
   processes (passes 0-2) against the median of all of them, rows < 20 us and >= 20 us.
2. Nodes of runs with 3 or more processes: how many got more processes, and how many more had a row
   marked BENCHMARK_PROCESS_UNSTABLE but none chosen (what choosing nodes for such rows would add).

    python3 benchmarks/gpu/more_median23.py /tmp/arch/*   # archives unpacked as RESULTS.md, thirty-third session
"""
from __future__ import annotations

import itertools
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import interval_rules23 as ir  # noqa: E402
from zlbench.results import process_stats as ps  # noqa: E402

UNSTABLE = "BENCHMARK_PROCESS_UNSTABLE"


def by_pass(run: Path):
    """row key -> pass -> latency (ms), the main side's measured rows."""
    procs = defaultdict(dict)
    for line in (run / "process_rows.jsonl").open():
        if line.strip():
            r = json.loads(line)
            lat = r.get("latency")
            if r.get("side") == "main" and r.get("status") == "ok" and lat and lat > 0:
                procs[ps.row_key(r)][r.get("round", 0)] = lat
    return procs


def medians(folders):
    out = defaultdict(list)
    for folder in folders:
        groups = defaultdict(list)
        for run, caliber, commit in ir.plain_runs(folder):
            if (run / "process_rows.jsonl").is_file():
                groups[(caliber, commit)].append(run)
        for runs in groups.values():
            data = {r: by_pass(r) for r in runs}
            for a, b in itertools.combinations(sorted(data), 2):
                for k in data[a].keys() & data[b].keys():
                    A, B = data[a][k], data[b][k]
                    if len(A) > 3 and len(B) > 3 and all(i in A and i in B for i in range(3)):
                        first3 = [statistics.median(d[i] for i in range(3)) for d in (A, B)]
                        every = [statistics.median(d.values()) for d in (A, B)]
                        size = "< 20 us" if statistics.median(A.values()) < 0.02 else ">= 20 us"
                        for cls in ("all", size):
                            out[(cls, "median of the first 3")].append(abs(math.log(first3[0] / first3[1])))
                            out[(cls, "median of all (4-6)")].append(abs(math.log(every[0] / every[1])))
    print("| rows | value | pairs | p50 | p90 | max |\n|---|---|---|---|---|---|")
    for (cls, est), v in sorted(out.items()):
        v = np.array(v) * 100
        print(f"| {cls} | {est} | {len(v)} | {np.quantile(v, .5):.2f}% | {np.quantile(v, .9):.2f}% | {v.max():.1f}% |")


def chosen_nodes(folders):
    runs = nodes = chosen = unstable_only = 0
    for folder in folders:
        for run, _, _ in ir.plain_runs(folder):
            f = run / "rows.jsonl"
            if not f.is_file():
                continue
            rows = [r for r in map(json.loads, filter(str.strip, f.open()))
                    if r.get("status") == "ok" and r.get("side", "main") == "main"]
            if not any((r.get("processes") or 0) >= 3 for r in rows):
                continue
            runs += 1
            per_node = defaultdict(list)
            for r in rows:
                per_node[r["node"].split("[")[0]].append(r)
            for rs in per_node.values():
                more = any((r.get("processes") or 0) > 3 for r in rs)
                nodes, chosen = nodes + 1, chosen + more
                unstable_only += not more and any(UNSTABLE in (r.get("markers") or []) for r in rs)
    print(f"\nruns {runs}, nodes {nodes}: chosen for more processes {chosen}; with a process-unstable row "
          f"but not chosen {unstable_only}")


if __name__ == "__main__":
    folders = [Path(f) for f in sys.argv[1:]]
    medians(folders)
    chosen_nodes(folders)
