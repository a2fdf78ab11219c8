"""Analysis of ab_scale.sh (issue 12's benchmark): wall per step, the dead axis' cost in plain passes,
A/A false positives and paired noise per design, live-axis agreement and time to settle; for
node-level runs, wall per round and round 1's timed runs against the compile-only probes.

    python benchmarks/gpu/ab_scale.py RUNS_DIR [--wall WALL_TXT] [--json OUT.json]
    python benchmarks/gpu/ab_scale.py --agree A B    # two runs' verdicts (run dirs or ab.csv files,
                                                     # e.g. across calls)

Paired noise: per row and round, |ln(B/A)| of the row's latencies (rows >= 5 us on both sides),
then its median and p90 over all (row, round) pairs of the run.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional

from zlbench.results.rundir import load_plan

SETTLED = {"faster", "slower", "no difference beyond threshold", "changed below threshold"}
FLAGGED = {"faster", "slower", "changed below threshold"}
# A verdict's side of the threshold band: what two runs must agree on when both settled.
BAND = {"faster": "faster", "slower": "slower", "no difference beyond threshold": "within",
        "changed below threshold": "within"}


def quantile(xs: List[float], q: float) -> Optional[float]:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def walls(path: Optional[Path]) -> Dict[str, float]:
    out = {}
    if path and path.is_file():
        for line in path.read_text().splitlines():
            # ab_scale.sh writes "step seconds"; issue23_ab.sh "step wall=seconds s rc=N".
            parts = line.split()
            if len(parts) >= 2:
                out[parts[0]] = float(parts[1].removeprefix("wall="))
    return out


def _round_ratios(run: Path) -> Dict[tuple, List[tuple]]:
    """Per row (node, op, dtype, shape): (ln(B/A), min latency) of each round both sides measured."""
    plan = json.loads((run / "plan.json").read_text())
    sides = [s["name"] for s in plan["sides"]]
    lat = defaultdict(dict)
    for line in (run / "rows.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("status") == "ok" and r.get("latency"):
            # the node too: tests of one op may time one shape (FlagGems' einsum trace and transpose)
            lat[(r.get("node"), r["op"], r["dtype"], r["shape"], r.get("round") or 0)][r["side"]] = float(r["latency"])
    out = defaultdict(list)
    for k, v in sorted(lat.items(), key=lambda kv: kv[0][4]):
        if len(sides) == 2 and sides[0] in v and sides[1] in v:
            out[k[:4]].append((math.log(v[sides[1]] / v[sides[0]]), min(v.values())))
    return out


def paired_noise(run: Path) -> Dict[str, Optional[float]]:
    d = [abs(x) for rounds in _round_ratios(run).values() for x, low in rounds if low >= 0.005]
    return {"pairs": len(d), "median_pct": _pct(quantile(d, 0.5)), "p90_pct": _pct(quantile(d, 0.9)),
            "max_pct": _pct(max(d) if d else None)}


def one_sign_rows(run: Path, share: float = 0.8, min_rounds: int = 4) -> Dict[str, int]:
    """Rows (of >= min_rounds paired rounds) whose per-round ln(B/A) keeps one sign in >= share of
    them: an A/A's constant offset between side processes, or chance (P = 0.38 / 0.22 at 5 / 6 rounds)."""
    rows = [[x for x, _ in r] for r in _round_ratios(run).values() if len(r) >= min_rounds]
    return {"rows": len(rows), "one_sign": sum(max(sum(x > 0 for x in r), sum(x < 0 for x in r)) >= share * len(r)
                                              for r in rows)}


def _pct(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(100 * (math.exp(x) - 1), 3)


def ab_facts(run: Path) -> Dict:
    if not (run / "ab.json").is_file():
        return {"missing": True}
    ab = json.loads((run / "ab.json").read_text())
    s = ab["summary"]
    rows = ab["rows"]
    considered = [r for r in rows if r["live"] != "not live"]
    return {
        "liveness": s["liveness"], "rows": len(rows), "verdicts": s["verdicts"], "stops": s.get("stops"),
        "flagged": sum(r["verdict"] in FLAGGED for r in considered), "considered": len(considered),
        "false_positive_rate": s.get("false_positive_rate"),
        "rounds_mean": round(sum(r["rounds"] for r in rows) / max(1, len(rows)), 2),
        "noise": paired_noise(run), "one_sign_80pct": one_sign_rows(run),
    }


def node_walls(run: Path) -> Dict:
    """Where a node-level run's time went: wall per round (first start to last end, both sides), when
    each round was done counted from the run's first launch (the issue's "every row at ab.min_rounds
    within 10 minutes": round min_rounds - 1's; a resumed run's count holds the time between its
    calls), and, per node of round 1, the first side's timed run against the second side's
    compile-only probe."""
    plan = json.loads((run / "plan.json").read_text())
    spans: Dict[int, List[float]] = defaultdict(list)
    # Per device: first start to last end, and the time its nodes ran (on several devices a round's
    # wall overlaps the other devices' rounds; these say how evenly the devices were loaded).
    dev_times: Dict[str, List[float]] = defaultdict(list)
    dev_busy: Dict[str, float] = defaultdict(float)
    timed: Dict[str, float] = {}
    probed: Dict[str, float] = {}
    home = {n: u["device"] for u in plan["units"] for n in u["nodes"]}
    taken = set()  # (node, round) another device took from its home device (zlbench/engine/stealing.py)
    launches: List[float] = []
    for u in plan["units"]:
        for name, into in (("events.jsonl", timed), ("probe.jsonl", probed)):
            path = run / "units" / u["unit_id"] / name
            if not path.is_file():
                continue
            starts = {}
            for line in path.read_text().splitlines():
                e = json.loads(line)
                dev = str(u.get("device"))
                if e["event"] == "launch":
                    launches.append(e["t"])
                elif e["event"] == "start":
                    starts[e["node"]] = e["t"]
                    spans[u["round"]].append(e["t"])
                    dev_times[dev].append(e["t"])
                elif e["event"] == "end" and e["node"] in starts:
                    spans[u["round"]].append(e["t"])
                    dev_times[dev].append(e["t"])
                    if name == "events.jsonl":
                        dev_busy[dev] += e["t"] - starts[e["node"]]
                        if home.get(e["node"], u.get("device")) != u.get("device"):
                            taken.add((e["node"], u["round"]))
                    if u["round"] == 0 and (name == "probe.jsonl" or e["node"] not in into):
                        into[e["node"].split("::")[-1]] = round(e["t"] - starts[e["node"]], 2)
    t0 = min((t for ts in dev_times.values() for t in ts), default=0.0)
    launched = min(launches, default=t0)
    return {"round_wall_s": {r: round(max(t) - min(t), 1) for r, t in sorted(spans.items())},
            "round_done_at_s": {r: round(max(t) - launched, 1) for r, t in sorted(spans.items())},
            "device_span_s": {d: [round(min(t) - t0, 1), round(max(t) - t0, 1)] for d, t in sorted(dev_times.items())},
            "device_timed_s": {d: round(b, 1) for d, b in sorted(dev_busy.items())},
            "rounds_taken_across_devices": len(taken),
            "round1_timed_vs_probe_s": {n: [timed.get(n), p] for n, p in sorted(probed.items())}}


def verdicts(run: Path) -> Dict[tuple, str]:
    """A run's verdict per row, from its run dir's ab.json or from an ab.csv file."""
    if run.is_dir():
        rows = json.loads((run / "ab.json").read_text())["rows"]
    else:
        with open(run, newline="") as f:
            rows = list(csv.DictReader(f))
    return {(r["op"], r["dtype"], r["shape"]): r["verdict"] for r in rows}


def agreement(a: Path, b: Path) -> Dict:
    """Rows settled in both runs: how many have the same verdict, and the same side of the band."""
    ra, rb = verdicts(a), verdicts(b)
    both = [k for k in ra if k in rb and ra[k] in SETTLED and rb[k] in SETTLED]
    return {"both_settled": len(both), "agree": sum(ra[k] == rb[k] for k in both),
            "agree_band": sum(BAND[ra[k]] == BAND[rb[k]] for k in both),
            "disagree": sorted(f"{k[0]} {k[2]}: {ra[k]} vs {rb[k]}" for k in both if ra[k] != rb[k])[:20]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", type=Path, nargs="?")
    p.add_argument("--wall", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--agree", type=Path, nargs=2, metavar=("A", "B"))
    args = p.parse_args()
    if args.agree:
        print(json.dumps(agreement(*args.agree), indent=1))
        return
    if args.runs is None:
        p.error("RUNS_DIR or --agree A B")
    wall = walls(args.wall or args.runs.parent / "wall.txt")
    out: Dict = {"wall_s": wall, "runs": {}}
    for run in sorted(x for x in args.runs.iterdir() if (x / "plan.json").is_file()):
        out["runs"][run.name] = ab_facts(run)
        if load_plan(run).get("schedule"):  # a node-level A/B (plan.json of either layout)
            out["runs"][run.name]["where_the_time_went"] = node_walls(run)
    if "plain" in wall:
        out["wall_over_plain"] = {k: round(v / wall["plain"], 2) for k, v in wall.items()}
    # CHAIN01's steps on both GPUs against their 1-GPU runs: end-to-end scaling (1.0 = linear).
    for name in [k for k in wall if k.endswith("_2gpu") and k[:-5] in wall]:
        out.setdefault("two_gpu_scaling", {})[name[:-5]] = round(wall[name[:-5]] / (2 * wall[name]), 3)
    for a, b in (("live_node", "live_round"), ("aa_node", "aa_round")):
        if (args.runs / a / "ab.json").is_file() and (args.runs / b / "ab.json").is_file():
            out[f"{a}_vs_{b}"] = agreement(args.runs / a, args.runs / b)
            if a in wall and b in wall:
                out[f"{a}_vs_{b}"]["wall_ratio"] = round(wall[a] / wall[b], 3)
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
