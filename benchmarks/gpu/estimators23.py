"""Offline: run-to-run precision of estimators of a row's VALUE over its processes.

For every ordered pair (A, B) of repeat plain runs (same caliber, same zlbench commit, one archive
folder; discovery as benchmarks/gpu/interval_rules23.py), each estimator is computed from each run's
process_rows (side main, status ok, finite latency: the processes zlbench's aggregate() used), and
|ln(est_A / est_B)| is tallied over rows present in both runs with status ok in rows.jsonl and
>= 2 processes in each.

    python3 benchmarks/gpu/estimators23.py /tmp/arch/*   # archives unpacked as RESULTS.md, thirty-third session
"""
from __future__ import annotations

import itertools
import json
import math
import statistics
import sys
from collections import defaultdict, Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import interval_rules23 as ir  # noqa: E402  (plain_runs, load; imports zlbench process_stats)
from zlbench.results import process_stats as ps  # noqa: E402

UNSTABLE = "BENCHMARK_PROCESS_UNSTABLE"
NDW = "BENCHMARK_NO_DEVICE_WORK"


def clusters(vals, gap):
    """Sorted values split where consecutive ln-values differ by more than `gap`."""
    v = sorted(vals)
    out = [[v[0]]]
    for x in v[1:]:
        if math.log(x / out[-1][-1]) > gap:
            out.append([x])
        else:
            out[-1].append(x)
    return out


def walsh_median(v):
    return statistics.median((v[i] + v[j]) / 2 for i in range(len(v)) for j in range(i, len(v)))


def shorth(v):
    """Mean of the tightest window of n//2 + 1 sorted values (n=3: the closest pair)."""
    v = sorted(v)
    h = len(v) // 2 + 1
    i = min(range(len(v) - h + 1), key=lambda i: (math.log(v[i + h - 1] / v[i]), i))
    return statistics.fmean(v[i:i + h])


def lower_mode(gap):
    return lambda v: statistics.median(clusters(v, gap)[0])


def big_mode(gap):  # the cluster holding most processes, ties to the fastest; its median
    def f(v):
        cs = clusters(v, gap)
        return statistics.median(max(cs, key=lambda c: (len(c), -c[0])))
    return f


ESTIMATORS = {
    "median": statistics.median,
    "mean": statistics.fmean,
    "geomean": statistics.geometric_mean,
    "HL (median Walsh avg)": walsh_median,
    "shorth (tightest half)": shorth,
    "min": min,
    "lower mode g=5%": lower_mode(0.05),
    "lower mode g=15%": lower_mode(0.15),
    "largest mode g=5%": big_mode(0.05),
    "largest mode g=15%": big_mode(0.15),
}


def load_run(run: Path):
    procs = defaultdict(list)
    for line in (run / "process_rows.jsonl").open():
        if not line.strip():
            continue
        r = json.loads(line)
        lat = r.get("latency")
        if r.get("side") == "main" and r.get("status") == "ok" and lat and math.isfinite(lat) and lat > 0:
            procs[ps.row_key(r)].append(lat)
    agg = {}
    for line in (run / "rows.jsonl").open():
        if line.strip():
            r = json.loads(line)
            if r.get("side") == "main" and r.get("status") == "ok" and r.get("latency"):
                agg[ps.row_key(r)] = r
    return procs, agg


def q(xs, p):
    return float(np.quantile(np.asarray(xs), p)) if xs else float("nan")


def main(folders):
    groups = []
    for folder in map(Path, folders):
        g = defaultdict(list)
        for run, caliber, commit in ir.plain_runs(folder):
            if (run / "process_rows.jsonl").is_file():
                g[(caliber, commit)].append(run)
        groups += [(folder.name, sorted(v)) for v in g.values() if len(v) >= 2]
    dev = defaultdict(lambda: defaultdict(list))  # class -> estimator -> [|ln A/B|]
    mismatch = checked = 0
    pairs_used = pairs_total = 0
    rows_seen = defaultdict(set)
    modes = defaultdict(Counter)  # gap -> outcome counter (unstable rows, per unordered pair)
    examples = []
    bias = defaultdict(lambda: defaultdict(list))
    worse = defaultdict(list)
    big = []
    nbias = defaultdict(list)
    used_runs = set()
    for folder, runs in groups:
        data = {}
        for run in runs:
            try:
                if ir.load(run)[1] < 2:
                    continue
                data[run] = load_run(run)
            except (OSError, ValueError) as e:
                print(f"{run}: skipped ({e!r})", file=sys.stderr)
        for run, (procs, agg) in data.items():  # same processes as zlbench? its median must match
            for k, r in agg.items():
                if len(procs.get(k, [])) >= 1:
                    checked += 1
                    mismatch += abs(math.log(statistics.median(procs[k]) / r["latency"])) > 1e-9
        for a, b in itertools.permutations(sorted(data), 2):
            pairs_total += 1
            (pa, ga), (pb, gb) = data[a], data[b]
            keys = [k for k in ga.keys() & gb.keys() if len(pa.get(k, [])) >= 2 and len(pb.get(k, [])) >= 2]
            if not keys:
                continue
            pairs_used += 1
            used_runs |= {a, b}
            for k in keys:
                va, vb = pa[k], pb[k]
                med = min(statistics.median(va), statistics.median(vb))
                unst = any(UNSTABLE in (g[k].get("markers") or []) for g in (ga, gb))
                ndw = any(NDW in (g[k].get("markers") or []) for g in (ga, gb))
                classes = ["(a) all", "(a') all but no-device-work" if not ndw else None,
                           "(b) >= 5 us" if med >= 0.005 else None, "(c) >= 20 us" if med >= 0.02 else None,
                           "(d) unstable in either" if unst else None,
                           "(d2) unstable in either, >= 20 us" if unst and med >= 0.02 else None,
                           "(e) stable in both, no NDW" if not unst and not ndw else None,
                           "(f) stable in both, >= 20 us" if not unst and med >= 0.02 else None]
                rid = (folder, str(k))
                for c in filter(None, classes):
                    rows_seen[c].add(rid)
                    for name, f in ESTIMATORS.items():
                        dev[c][name].append(abs(math.log(f(va) / f(vb))))
                        bias[c][name].append(math.log(f(va) / statistics.median(va)))
                if len(va) > len(vb):  # runs that measured the row in more processes vs fewer
                    for name, f in ESTIMATORS.items():
                        nbias[name].append(math.log(f(va) / f(vb)))
                if folder == "today" and unst and a < b:
                    print("today:", a.name, b.name, k[1], k[3], [round(x * 1e3, 2) for x in sorted(va)],
                          [round(x * 1e3, 2) for x in sorted(vb)])
                if not unst and not ndw:
                    d0 = abs(math.log(statistics.median(va) / statistics.median(vb)))
                    for name, f in ESTIMATORS.items():
                        worse[name].append(abs(math.log(f(va) / f(vb))) - d0)
                    if d0 > 0.2:
                        big.append((folder, k[1], k[3], [round(x * 1e3, 3) for x in sorted(va)], [round(x * 1e3, 3) for x in sorted(vb)]))
                if unst and a < b:
                    for gap in (0.05, 0.15):
                        cs = clusters(va + vb, gap)
                        def which(m):
                            for i, c in enumerate(cs):
                                if c[0] * (1 - 1e-12) <= m <= c[-1] * (1 + 1e-12):
                                    return i
                            return None  # between two modes (even n)
                        ia, ib = which(statistics.median(va)), which(statistics.median(vb))
                        if len(cs) == 1:
                            out = "one mode only"
                        elif ia is None or ib is None:
                            out = "a median between modes"
                        else:
                            out = "same mode" if ia == ib else "different modes"
                        modes[gap][out] += 1
                        if gap == 0.15 and out == "different modes" and len(examples) < 6:
                            examples.append((folder, k[1], k[3], [round(x * 1e3, 2) for x in sorted(va)],
                                             [round(x * 1e3, 2) for x in sorted(vb)]))
    print(f"groups: {len(groups)}; ordered pairs: {pairs_total} ({pairs_used} with usable rows); runs used: "
          f"{len(used_runs)}; median check vs rows.jsonl: {mismatch} mismatches of {checked}")
    for c in sorted(dev):
        n = len(next(iter(dev[c].values())))
        print(f"\n{c}: {n} (pair,row) items = {n // 2} unordered; {len(rows_seen[c])} distinct rows")
        print("| estimator | p50 % | p90 % | p99 % | max % | mean % | bias vs median p50 % |")
        print("|---|---|---|---|---|---|---|")
        for name, xs in dev[c].items():
            print(f"| {name} | {100*q(xs,.5):.3f} | {100*q(xs,.9):.3f} | {100*q(xs,.99):.2f} | {100*max(xs):.1f} |"
                  f" {100*statistics.fmean(xs):.3f} | {100*q(bias[c][name],.5):+.3f} |")
    print("\nstable, no-NDW (pair,row) items: share where |ln A/B| grows vs median's by > 0.5% / > 2% (and shrinks by > 0.5% / > 2%)")
    for name, ws in worse.items():
        w = np.asarray(ws)
        print(f"  {name}: worse {np.mean(w > .005):.2%} / {np.mean(w > .02):.2%}; better {np.mean(w < -.005):.2%} / {np.mean(w < -.02):.2%}")
    print(f"\nstable, no-NDW rows whose medians differ > 20% between runs: {len(big)} items")
    for e in big[:12]:
        print("  ", e)
    print(f"\nrow measured in more processes in A than in B: {len(nbias['median'])} ordered items; p50 ln(est_A/est_B) %:")
    print("  " + "; ".join(f"{n} {100*q(x,.5):+.2f} (mean {100*statistics.fmean(x):+.2f})" for n, x in nbias.items()))
    for gap, cnt in modes.items():
        print(f"\nunstable rows, unordered pairs, modes split at gap {gap:.0%} over both runs' processes: {dict(cnt)}")
    for e in examples:
        print("  e.g.", e, "(us)")


if __name__ == "__main__":
    main(sys.argv[1:])
