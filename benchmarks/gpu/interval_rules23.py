"""Offline: two versions of the process-level interval rule (zlbench/results/process_stats.py) on
archived repeat plain runs, side by side.

For every ordered pair (A, B) of plain runs of one caliber and one zlbench commit in an archive
folder (repeat runs minutes apart: no change between them), A's per-process rows
(process_rows.jsonl) are aggregated again by each rule, and each row's interval is checked against
the value B reported (B's median over its processes, which no rule changes). Per rule and row class:
coverage (the share of A's intervals that hold B's value), widths ((hi - lo) / latency, p50 and
p90), and the share of rows flagged both ways (each run's value outside the other's interval: what
`history compare` flags before its family-wise widening).

    python3 benchmarks/gpu/interval_rules23.py [--old REV] [--set NAME=VALUE ...] FOLDER [FOLDER ...]

--old: the git revision whose process_stats.py is the first rule (default HEAD); the second is this
checkout's, with --set overriding its module constants (e.g. --set RUN_SD=0.0014). The folders hold
run dirs (the archives under benchmarks/gpu/results/, unpacked: their runs are .tgz inside)."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import subprocess
import sys
import types
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from overall_plain23 import plain_runs  # noqa: E402
import zlbench.results.process_stats as current  # noqa: E402

CLASSES = ((0.005, "<5us"), (0.02, "5-20us"), (0.1, "20-100us"), (1.0, "0.1-1ms"), (math.inf, ">=1ms"))


def rule_at(rev: str) -> types.ModuleType:
    """process_stats.py as it is at git revision `rev`, as a module of its own."""
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:zlbench/results/process_stats.py"],
                         check=True, capture_output=True, text=True).stdout
    module = types.ModuleType(f"process_stats_{rev}")
    exec(compile(src, f"{rev}:process_stats.py", "exec"), module.__dict__)
    return module


def size_class(ms: float) -> str:
    return next(name for edge, name in CLASSES if ms < edge)


def load(run: Path):
    rows = [json.loads(line) for line in (run / "process_rows.jsonl").open() if line.strip()]
    plan = json.loads((run / "plan.json").read_text())
    return rows, int(plan.get("processes") or 0)


def measured(rule: types.ModuleType, rows, k: int) -> dict:
    key = getattr(rule, "row_key", None) or rule._key  # row_key since 995d50e
    return {key(r): r for r in rule.aggregate(rows, k) if r.get("status") == "ok" and r.get("latency")}


def tally_pairs(rules, folders):
    """(rule name -> (class -> [rows, inside, widths, flagged both ways]), ordered pairs, rule name ->
    [rows, rows holding every other run's value]: issue 23's reading, over groups of 3 or more runs)."""
    tally = {name: defaultdict(lambda: [0, 0, [], 0]) for name in rules}
    every = {name: [0, 0] for name in rules}
    pairs = 0
    for folder in map(Path, folders):
        groups = defaultdict(list)
        for run, caliber, commit in plain_runs(folder):
            if (run / "process_rows.jsonl").is_file():
                groups[(caliber, commit)].append(run)
        for runs in groups.values():
            loaded = {}
            for run in runs:
                try:
                    loaded[run] = load(run)
                except (OSError, ValueError) as e:
                    print(f"{run}: skipped ({e!r})", file=sys.stderr)
            runs = [r for r in runs if r in loaded and loaded[r][1] >= 2]
            for name, rule in rules.items():
                got = {run: measured(rule, *loaded[run]) for run in runs}
                for a in runs if len(runs) >= 3 else []:
                    for key, ra in got[a].items():
                        if ra.get("latency_ci") and all(key in got[b] for b in runs):
                            lo, hi = ra["latency_ci"]
                            every[name][0] += 1
                            every[name][1] += all(lo <= got[b][key]["latency"] <= hi for b in runs if b != a)
                for a, b in itertools.permutations(sorted(runs), 2):
                    pairs += name == next(iter(rules))
                    for key in got[a].keys() & got[b].keys():
                        ra, rb = got[a][key], got[b][key]
                        if not ra.get("latency_ci"):
                            continue
                        lo, hi = ra["latency_ci"]
                        inside = lo <= rb["latency"] <= hi
                        other = rb.get("latency_ci")
                        both_out = not inside and other and not other[0] <= ra["latency"] <= other[1]
                        unstable = "BENCHMARK_PROCESS_UNSTABLE" in (ra.get("markers") or [])
                        timer = "direct" if "direct" in str(ra.get("timer_used")) else "graph"
                        for cls in ("all", size_class(ra["latency"]), "unstable" if unstable else "stable",
                                    timer, ">=20us" if ra["latency"] >= 0.02 else "<20us",
                                    ">=20us stable" if ra["latency"] >= 0.02 and not unstable else None):
                            if cls is None:
                                continue
                            t = tally[name][cls]
                            t[0] += 1
                            t[1] += inside
                            t[2].append((hi - lo) / ra["latency"])
                            t[3] += bool(both_out)
    return tally, pairs, every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--old", default="HEAD")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    for assignment in args.set:
        name, value = assignment.split("=", 1)
        setattr(current, name, type(getattr(current, name))(value))
    new_name = "this checkout" + (f" ({', '.join(args.set)})" if args.set else "")
    rules = {args.old: rule_at(args.old), new_name: current}
    tally, pairs, every = tally_pairs(rules, args.folders)
    print(f"{pairs} ordered pairs of repeat runs")
    for name, (n, held) in every.items():
        if n:
            print(f"{name}: rows of a run whose interval holds every other run's value (groups of 3 or more runs): "
                  f"{held / n:.1%} of {n}")
    print()
    print("| class | rule | rows | coverage | width p50 | width p90 | width max | flagged both ways |")
    print("|---|---|---|---|---|---|---|---|")
    order = ["all", *(n for _, n in CLASSES), "<20us", ">=20us", ">=20us stable", "stable", "unstable", "graph",
             "direct"]
    for cls in order:
        for name in rules:
            n, inside, widths, flagged = tally[name].get(cls, [0, 0, [], 0])
            if not n:
                continue
            p90 = statistics.quantiles(widths, n=10)[8] if len(widths) >= 2 else widths[0]
            print(f"| {cls} | {name} | {n} | {inside / n:.1%} | {statistics.median(widths):.2%} | {p90:.2%} | "
                  f"{max(widths):.3g} | {flagged / n:.2%} |")


if __name__ == "__main__":
    main()
