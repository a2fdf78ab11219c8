"""Offline: do a row's interval and value hold on another GPU of the same kind? (issue 23)

Process-level intervals (zlbench/results/process_stats.py) cover what processes draw, and a small
run-level share (RUN_SD). What a GPU draws as a whole (its clocks, its memory, its neighbours) is in
no run's processes when all of them ran on that GPU: two runs on two devices differ by it too. This
script sizes it from archived repeat plain runs: it groups the runs of one caliber (the same tests,
timer, replay budget, processes, device kind), re-makes every run's rows from its planned processes
by this checkout's aggregate() (so that runs of several zlbench commits are judged alike), and, for
every ordered pair of runs in a group, tallies

- coverage: the share of A's rows whose interval holds B's value,
- |ln(B / A)| of the rows' values,

apart for pairs on one device (the same UUID) and on two. `device sd` is what the pairs on two
devices add: sqrt(max(0, mean d^2 (apart) - mean d^2 (same)) / 2) over rows of a size class, d the
ln ratio, where a group has both kinds of pair; and `coverage with DEV` what the intervals would hold
were each widened by that share of both devices (as RUN_SD is).

    python3 benchmarks/gpu/across_devices23.py /tmp/arch /work/main/.gl [--json OUT] [--device-sd 0.003]
    python3 benchmarks/gpu/across_devices23.py /tmp/arch /work/main/.gl --gate   # + history compare

`--gate`: `python -m zlbench history compare A B --fail-on none` (the two run dirs on their own,
their rows as recorded) over every unordered pair of a group: the rows it flags slower or faster,
on one device and on two (a few minutes: one process a pair).

A run with fewer than two planned processes on most rows (a cut run) is left out.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from zlbench.results.process_stats import aggregate  # noqa: E402
from zlbench.results.rundir import device_uuids  # noqa: E402

SIZES = ((0, 0.005, "< 5 us"), (0.005, 0.02, "5-20 us"), (0.02, 0.1, "20-100 us"), (0.1, 1e9, ">= 100 us"))
Z = 1.959964


def _jsonl(path: Path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def _q(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))] if v else None


def _pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


def _size(ms):
    return next(name for lo, hi, name in SIZES if lo <= ms < hi)


def discover(roots):
    """{caliber: [(run dir, device UUIDs, zlbench commit)]} for plain runs (one side) with process rows,
    each run once."""
    groups = collections.defaultdict(list)
    seen = set()
    for root in roots:
        for rows in sorted(Path(root).rglob("process_rows.jsonl")):
            run = rows.parent
            try:
                ident = json.loads((run / "run_identity.json").read_text())
            except (OSError, ValueError):
                continue
            if len(ident.get("sides") or []) > 1:
                continue
            timer = ident.get("timer") or {}
            kind = ((ident.get("devices") or [{}])[0] or {}).get("name")
            key = (json.dumps(sorted(ident.get("test_nodes") or [])), timer.get("name"), timer.get("rep_ms"),
                   timer.get("processes"), kind)
            made = (ident.get("identity_hash"), ident.get("created"))
            if made in seen:  # the same run unpacked twice
                continue
            seen.add(made)
            commit = (ident.get("versions") or {}).get("zlbench_commit")
            groups[key].append((run, frozenset(device_uuids(ident)), commit))
    return groups


def planned_rows(run: Path):
    """The run's rows made again from its planned processes; None for a cut run."""
    plan = run / "plan.json"
    rows = _jsonl(run / "process_rows.jsonl")
    processes = (json.loads(plan.read_text()).get("processes") if plan.exists() else None) or 1
    rows = [r for r in rows if (r.get("round") or 0) < processes]
    out = {}
    for r in aggregate(rows, processes):
        if r.get("status") == "ok" and r.get("latency") and (r.get("side") or "main") == "main":
            out[(r.get("node"), r["op"], r.get("dtype"), json.dumps(r.get("shape")))] = r
    counts = [r["processes"] for r in out.values()]
    if not counts or statistics.median(counts) < 2:
        return None
    return out


def _commit(c):
    return (c or "").replace("+dirty", "")


def widened(ci, latency, dev_sd):
    """The interval with both devices' share added to its half-widths (in logs), as RUN_SD is."""
    lo, hi = math.log(ci[0] / latency), math.log(ci[1] / latency)
    extra = 2 * (Z * dev_sd) ** 2
    return (latency * math.exp(-math.sqrt(lo * lo + extra)), latency * math.exp(math.sqrt(hi * hi + extra)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("roots", nargs="+")
    p.add_argument("--json")
    p.add_argument("--gate", action="store_true", help="also history compare over every pair (slow)")
    p.add_argument("--same-commit", action="store_true",
                   help="pairs of runs of one zlbench commit only (a dirty tree counts as its commit)")
    p.add_argument("--device-sd", type=float, action="append", default=[],
                   help="coverage were each interval widened by this device share (repeatable)")
    a = p.parse_args()
    groups = discover(a.roots)
    tally = collections.defaultdict(list)  # (kind, size) -> [(covered, d, row was unstable)]
    by_group, judged = [], []
    d2 = collections.defaultdict(lambda: collections.defaultdict(list))  # size -> kind -> d^2 (groups with both)
    widen = {s: collections.defaultdict(list) for s in a.device_sd}
    for key, runs in groups.items():
        if len({dev for _, dev, _ in runs}) < 2:
            continue
        made = [(run, dev, commit, rows) for run, dev, commit in runs if (rows := planned_rows(run))]
        if len({m[1] for m in made}) < 2:
            continue
        judged.append([(run, dev, commit) for run, dev, commit, _ in made])  # the gate's runs: the same
        kinds_here = collections.defaultdict(list)
        for (ra, da, ca, rows_a), (rb, db, cb, rows_b) in itertools.permutations(made, 2):
            if a.same_commit and _commit(ca) != _commit(cb):
                continue
            kind = "same device" if da & db else "two devices"
            for k, r in rows_a.items():
                if k not in rows_b or not r.get("latency_ci"):
                    continue
                other = rows_b[k]["latency"]
                ci = r["latency_ci"]
                covered = ci[0] <= other <= ci[1]
                d = math.log(other / r["latency"])
                unstable = "BENCHMARK_PROCESS_UNSTABLE" in (r.get("markers") or [])
                tally[(kind, _size(r["latency"]))].append((covered, abs(d), unstable))
                tally[(kind, "all")].append((covered, abs(d), unstable))
                kinds_here[kind].append((covered, d, _size(r["latency"]), unstable))
                for s in a.device_sd:
                    if kind == "two devices":
                        lo, hi = widened(ci, r["latency"], s)
                        widen[s][_size(r["latency"])].append(lo <= other <= hi)
                        widen[s]["all"].append(lo <= other <= hi)
        if len(kinds_here) == 2:
            for kind, items in kinds_here.items():
                for _, d, size, unstable in items:
                    if not unstable:
                        d2[size][kind].append(d * d)
                        d2["all"][kind].append(d * d)
        by_group.append({"runs": [str(m[0]) for m in made], "devices": len({m[1] for m in made}),
                         **{kind: {"pairs_rows": len(v), "coverage": sum(c for c, *_ in v) / len(v)}
                            for kind, v in kinds_here.items()}})
    print(f"groups with runs on several devices: {len(by_group)}, runs {sum(len(g['runs']) for g in by_group)}")
    print()
    print("| rows | pairs on | (row, pair) items | coverage | coverage, stable rows | |ln B/A| p50 | p90 | max |")
    print("|---|---|---|---|---|---|---|---|")
    out = {"groups": by_group, "table": {}, "device_sd": {}, "widened": {}}
    for size in ["all"] + [s for _, _, s in SIZES]:
        for kind in ("same device", "two devices"):
            v = tally.get((kind, size))
            if not v:
                continue
            stable = [c for c, _, u in v if not u]
            ds = [d for _, d, _ in v]
            row = {"items": len(v), "coverage": sum(c for c, *_ in v) / len(v),
                   "coverage_stable": sum(stable) / len(stable) if stable else None,
                   "p50": _q(ds, .5), "p90": _q(ds, .9), "max": max(ds)}
            out["table"][f"{size} | {kind}"] = row
            print(f"| {size} | {kind} | {row['items']} | {_pct(row['coverage'])} | {_pct(row['coverage_stable'])} | "
                  f"{_pct(row['p50'])} | {_pct(row['p90'])} | {_pct(row['max'])} |")
    print()
    print("device sd (stable rows, groups with pairs of both kinds): "
          + ", ".join(f"{size} {_pct(sd)} ({len(k['two devices'])} / {len(k['same device'])} items)"
                      for size, k in d2.items()
                      if k['two devices'] and k['same device']
                      and (sd := math.sqrt(max(0.0, statistics.mean(k['two devices']) - statistics.mean(k['same device'])) / 2))
                      is not None and not out["device_sd"].update({size: sd})))
    for s, by in widen.items():
        out["widened"][s] = {size: sum(v) / len(v) for size, v in by.items()}
        print(f"coverage on two devices, intervals widened by a device sd of {_pct(s)}: "
              + ", ".join(f"{size} {_pct(sum(v) / len(v))}" for size, v in by.items()))
    print()
    for g in by_group:
        names = ", ".join(Path(r).name for r in g["runs"])
        print(f"- {g['devices']} devices, {names}: " + "; ".join(
            f"{kind} coverage {_pct(v['coverage'])} over {v['pairs_rows']}" for kind, v in g.items()
            if isinstance(v, dict)))
    if a.gate:
        out["gate"] = gate(judged)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


def gate(groups):
    """history compare over each unordered pair of runs in a group (the runs the coverage table judged:
    cut runs left out), the rows it flags (slower or faster) by pair kind, the flagged rows listed."""
    import subprocess

    tally = collections.defaultdict(lambda: {"pairs": 0, "rows": 0, "flagged": 0, "pairs_flagging": 0})
    flagged = []
    for runs in groups:
        for (ra, da, _), (rb, db, _) in itertools.combinations(runs, 2):
            done = subprocess.run([sys.executable, "-m", "zlbench.history", "compare", str(ra), str(rb),
                                   "--format", "json", "--fail-on", "none"], capture_output=True, text=True)
            try:
                rows = json.loads(done.stdout)["rows"]
            except (ValueError, KeyError):
                print(f"compare {ra} {rb} failed: {done.stderr[-300:]}")
                continue
            moved = [r for r in rows if r.get("verdict") in ("slower", "faster")]
            t = tally["same device" if da & db else "two devices"]
            t["pairs"] += 1
            t["rows"] += len(rows)
            t["flagged"] += len(moved)
            t["pairs_flagging"] += bool(moved)
            flagged += [f"{ra.name} -> {rb.name}: {r['op']} {r['shape'][:50]} {r['verdict']} {r['change_pct']:+.1f}%"
                        for r in moved]
    print()
    print("| history compare, pairs on | pairs | rows | rows flagged | pairs flagging a row |")
    print("|---|---|---|---|---|")
    for kind, t in sorted(tally.items()):
        print(f"| {kind} | {t['pairs']} | {t['rows']} | {t['flagged']} ({_pct(t['flagged'] / max(t['rows'], 1))}) | "
              f"{t['pairs_flagging']} |")
    print()
    print("\n".join(f"- {f}" for f in flagged))
    return {"tally": dict(tally), "flagged": flagged}


if __name__ == "__main__":
    main()
