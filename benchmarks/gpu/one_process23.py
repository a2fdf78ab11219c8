"""Offline: the interval of a row measured in one process only, as a cut plain run has them.

A plain run measures every node in timer.processes processes; a run cut by its time limit leaves
some nodes measured in one process. Such a row has no spread of its own, so its interval comes from
its stratum (process_stats). This script simulates cut runs from archived complete ones: in run A,
a random half of the nodes keep the rows of one of their processes only, A is aggregated again with
this checkout's process_stats.aggregate, and each reduced row's interval is checked against the
value another run B of the same caliber reported (its median over all its processes). Rows of
nodes left whole are checked the same way, as the yardstick.

Usage: one_process23.py <archive folder> ...   (runs are paired within each folder, by caliber and
zlbench commit: repeat runs, not a change)
       one_process23.py --score-scale   (process_stats._SCORE_SCALE, simulated)
Both runs of a pair are cut so (each its own random half, SEEDS times; the whole nodes keep their
planned processes only), and every row both measured is counted by how many processes each side
had (K+K, 1+K, 1+1), the same rows whatever the interval rule: the share of 1-process sides (or of
K-process ones in K+K) that carry an interval, its coverage (the share that hold the other run's
value), widths, and the share of rows whose values lie each outside the other's interval (what
`history compare` flags, before its family-wise widening; a side without an interval flags
nothing); then the 1-process rows so flagged by the most."""
import itertools
import json
import math
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from overall_plain23 import plain_runs  # noqa: E402
from zlbench.results.events import base_node  # noqa: E402
from zlbench.results.process_stats import KEY, aggregate  # noqa: E402

SEEDS = 3


def key(row):
    return tuple(row.get(k) for k in KEY)


def load(run: Path):
    process_rows = [json.loads(line) for line in (run / "process_rows.jsonl").open() if line.strip()]
    final = {key(r): r for r in map(json.loads, (run / "rows.jsonl").open())
             if r.get("status") == "ok" and r.get("latency")}
    plan = json.loads((run / "plan.json").read_text())
    return process_rows, final, int(plan.get("processes") or 0)


def reduce_half(rows, rng, k):
    """A random half of the nodes measured in >= 2 processes keep one process' rows; the others
    keep their planned k processes (a cut run never reached the more processes that follow them)."""
    rows = [r for r in rows if r.get("round") is None or r["round"] < k]
    rounds = defaultdict(set)
    for r in rows:
        if r.get("status") == "ok" and r.get("round") is not None:
            rounds[base_node(r.get("node") or "")].add(r["round"])
    several = sorted(n for n, rs in rounds.items() if len(rs) >= 2)
    cut = {n: rng.choice(sorted(rounds[n])) for n in rng.sample(several, len(several) // 2)}
    kept = [r for r in rows if base_node(r.get("node") or "") not in cut
            or r.get("round") == cut[base_node(r.get("node") or "")]]
    return kept, set(cut)


def size(ms):
    return "<5us" if ms < 0.005 else "5-20us" if ms < 0.02 else "20-100us" if ms < 0.1 else ">=100us"


def main(folders):
    # (processes on each side: "K+K", "1+K" or "1+1", class) -> [values checked, inside, widths, pairs flagged]
    tally = defaultdict(lambda: [0, 0, [], 0, 0, 0])  # ..., values of those sides with or without an interval
    misses = []
    for folder in map(Path, folders):
        groups = defaultdict(list)
        for run, caliber, commit in plain_runs(folder):
            if (run / "process_rows.jsonl").is_file():
                groups[(caliber, commit)].append(run)  # repeat runs of one zlbench commit only
        for runs in groups.values():
            for a, b in itertools.combinations(sorted(runs), 2):
                try:
                    (rows_a, _, k), (rows_b, _, _) = load(a), load(b)
                except (OSError, ValueError) as e:
                    print(f"{a} {b}: skipped ({e!r})", file=sys.stderr)
                    continue
                if k < 2:
                    continue
                for seed in range(SEEDS):
                    sides = []
                    for run, rows in ((a, rows_a), (b, rows_b)):
                        kept, cut = reduce_half(rows, random.Random(f"{run}|{seed}"), k)
                        sides.append(({key(r): r for r in aggregate(kept, k)
                                       if r.get("status") == "ok" and r.get("latency")}, cut))
                    (got_a, cut_a), (got_b, cut_b) = sides
                    for kk in got_a.keys() & got_b.keys():
                        ra, rb = got_a[kk], got_b[kk]
                        one_a, one_b = base_node(kk[0] or "") in cut_a, base_node(kk[0] or "") in cut_b
                        kind = {0: "K+K", 1: "1+K", 2: "1+1"}[one_a + one_b]
                        timer = "direct" if "direct" in (ra.get("timer_used"), rb.get("timer_used")) else "graph"
                        # A value outside an interval it has; a row without one judges nothing.
                        in_a = not ra.get("latency_ci") or ra["latency_ci"][0] <= rb["latency"] <= ra["latency_ci"][1]
                        in_b = not rb.get("latency_ci") or rb["latency_ci"][0] <= ra["latency"] <= rb["latency_ci"][1]
                        for cls in ("all", size(ra["latency"]), timer):
                            t = tally[(kind, cls)]
                            for r, one, inside in ((ra, one_a, in_a), (rb, one_b, in_b)):  # a 1-process side's
                                if one or kind == "K+K":
                                    t[5] += 1
                                    if r.get("latency_ci"):
                                        t[0] += 1
                                        t[1] += inside
                                        t[2].append((r["latency_ci"][1] - r["latency_ci"][0]) / r["latency"])
                            t[3] += 1
                            t[4] += not in_a and not in_b
                        if kind != "K+K" and not in_a and not in_b:
                            misses.append((abs(rb["latency"] / ra["latency"] - 1), a.name, b.name, kind,
                                           ra.get("op"), ra.get("shape"), ra["latency"], rb["latency"]))
    print("| processes (A+B) | class | sides | with an interval | coverage | width p50 | width p90 | rows | "
          "flagged both ways |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (kind, cls), (n, inside, widths, pairs, flagged, sides) in sorted(tally.items()):
        q = statistics.quantiles(widths, n=10) if len(widths) >= 2 else (widths or [math.nan]) * 9
        print(f"| {kind} | {cls} | {sides} | {n / sides:.1%} | {inside / n if n else math.nan:.1%} | "
              f"{statistics.median(widths) if widths else math.nan:.2%} | {q[8]:.2%} | {pairs} | {flagged / pairs:.2%} |")
    print("\nRows of a 1-process side flagged both ways, by the most:")
    for m in sorted(misses, reverse=True)[:12]:
        print(f"  {m[0]:+.1%} {m[1]} vs {m[2]} ({m[3]}) {m[4]} {str(m[5])[:40]} {m[6]:.4g} -> {m[7]:.4g} ms")


def score_scale(rows: int = 400000, seed: int = 1) -> None:
    """process_stats._SCORE_SCALE, simulated: the 95% quantile of |y - median| over the n draws of
    N(0, 1) whose median it is, over the normal 1.96, for n = 2..8."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for n in range(2, 9):
        x = rng.standard_normal((rows, n))
        print(n, round(float(np.quantile(np.abs(x - np.median(x, axis=1, keepdims=True)), 0.95)) / 1.959964, 4))


if __name__ == "__main__":
    score_scale() if sys.argv[1:] == ["--score-scale"] else main(sys.argv[1:])
