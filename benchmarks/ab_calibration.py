"""A/B calibration on the CPU demo corpus (issue: A/B experiments), three runs side by side per
A/B schedule (--schedules node,round: node by node with resident side processes and sequential
rounds, or whole passes per round), and an A/A node by node with ab.respawn_every=N (--respawn):

1. the demo's real switch (DEMO_GEMS_FUSED_SOFTMAX) with 10 rounds: softmax rows should be found;
2. an A/A run (same value on both sides): the share of rows flagged after BH (target <= 5%);
3. a dead axis (a variable nothing reads): must come out unknown/inconclusive, never a difference.

    python benchmarks/ab_calibration.py [--rounds 10] [--ops softmax,exp,add,layer_norm] [--schedules node,round] [--respawn 1]

--simulate: no runs; simulated rounds through the sequential rule (zlbench/report/sequential.py:
repeated t intervals, Bonferroni over the looks min_rounds..max_rounds, BH across rows), looked at
after every round, each node stopped once all its rows are settled. Per plan (min, max rounds) and
round-to-round sd of ln(B/A): the A/A false-positive rate per row (the row's own rule, no BH) and
per run after BH (the chance a run flags anything), the same for naive peeking (a fixed 95% t
interval looked at after every round) and for today's fixed rounds; power at known effects; mean
rounds per node and the rounds rows' verdicts rest on.

    python benchmarks/ab_calibration.py --simulate [--plans 3:10,3:20,4:10,4:20,5:20] [--sds 0.005,0.01,0.02]
        [--effects 0.01,0.03,0.05,0.10] [--node-rows 4] [--run-rows 100] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FLAGGED = ("faster", "slower", "changed below threshold")
THRESHOLD = 0.02


def run(run_dir: Path, *args):
    started = time.time()
    res = subprocess.run([sys.executable, "-m", "zlbench", f"hydra.run.dir={run_dir}", "progress=none", *args],
                         capture_output=True, text=True)
    wall = round(time.time() - started, 1)
    if res.returncode != 0:
        raise SystemExit(res.stderr[-3000:])
    ab = json.loads((run_dir / "ab.json").read_text())
    rows = ab["rows"]
    s = ab["summary"]
    return {
        "liveness": s["liveness"], "rows": len(rows), "verdicts": s["verdicts"],
        "flagged": sum(r["verdict"] in FLAGGED for r in rows),
        "flagged_share": round(sum(r["verdict"] in FLAGGED for r in rows) / max(1, len(rows)), 3),
        "overall_pct": None if s["overall"]["geomean"] is None else round((s["overall"]["geomean"] - 1) * 100, 2),
        "softmax_flagged": sum(r["verdict"] in FLAGGED for r in rows if r["op"] == "softmax"),
        "softmax_rows": sum(r["op"] == "softmax" for r in rows),
        "wall_s": wall, "rounds_mean": round(sum(r["rounds"] for r in rows) / max(1, len(rows)), 2),
        "stops": s.get("stops"),
    }


def _node_rounds(paths, min_rounds: int, max_rounds: int, family_size: int, naive: bool = False) -> int:
    """Rounds a node runs: looked at after every round from min_rounds on, stopped when settled."""
    from zlbench.report import sequential, stats

    for k in range(min_rounds, max_rounds):
        if naive:  # a fixed-sample 95% interval, as if every look were the only one
            ss = [stats.row_stat(np.ones(k), np.exp(d[:k])) for d in paths]
            if all(sequential.band_class(s.lo, s.hi, THRESHOLD) is not None for s in ss):
                return k
        elif sequential.node_settled({i: d[:k] for i, d in enumerate(paths)}, THRESHOLD, min_rounds=min_rounds,
                                     max_rounds=max_rounds, family_size=family_size):
            return k
    return max_rounds


def simulate_runs(rng, effect: float, sd: float, runs: int, rows: int, node_rows: int, min_rounds: int,
                  max_rounds: int, rule: str = "sequential", per_row: bool = False,
                  family_size: int = 0) -> dict:
    """runs simulated A/B runs of `rows` rows (nodes of node_rows rows), every row with true B/A
    latency 1 + effect (sign drawn per node) and round-to-round sd `sd` of ln(B/A).

    rule: "sequential" (this module's), "naive" (fixed 95% intervals looked at every round),
    "fixed" (max_rounds rounds, today's analysis). per_row: each row judged alone (its own q = p),
    i.e. the rule's per-row error rate; else BH across the run's rows. family_size: what the stopping
    rule is told (0: the run's rows, as the final BH; 1: changes settle on the row's own p-value and
    BH may then undo some)."""
    from zlbench.report import stats

    family = 1 if per_row else (family_size or rows)
    flagged = right = settled = 0
    any_flag, fdp, node_rounds, looks = [], [], [], []
    for _ in range(runs):
        row_stats, truth = [], []
        for _ in range(rows // node_rows):
            sign = 1 if rng.random() < 0.5 else -1
            mu = math.log1p(sign * effect) if effect else 0.0
            paths = [mu + rng.normal(0, sd, max_rounds) for _ in range(node_rows)]
            k = max_rounds if rule == "fixed" else _node_rounds(paths, min_rounds, max_rounds, family, rule == "naive")
            node_rounds.append(k)
            row_stats += [stats.row_stat(np.ones(k), np.exp(d[:k])) for d in paths]
            truth += [sign] * node_rows
        if rule == "sequential":
            stats.analyse(row_stats, [None] * len(row_stats), THRESHOLD, min_rounds, max_rounds, family_size=family)
        elif not per_row:
            stats.analyse(row_stats, [None] * len(row_stats), THRESHOLD)
        if per_row:  # one row's own verdict: q = p (sequential: p is already anytime-valid)
            for s in row_stats:
                s.q = s.p
                s.verdict = stats.decide(s, THRESHOLD, None, *((min_rounds, max_rounds) if rule == "sequential" else ()))
        hits = [s.verdict in FLAGGED for s in row_stats]
        flagged += sum(hits)
        right += sum(h and (s.ratio > 1) == (sign > 0) for h, s, sign in zip(hits, row_stats, truth))
        settled += sum(s.stop == "settled" for s in row_stats)
        looks += [s.look or s.n for s in row_stats]
        any_flag.append(any(hits))
        false = sum(hits) if not effect else sum(h and (s.ratio > 1) != (sign > 0) for h, s, sign in zip(hits, row_stats, truth))
        fdp.append(false / max(1, sum(hits)))
    n = runs * rows
    return {"rows": n, "flagged": round(flagged / n, 4), "right_direction": round(right / n, 4),
            "settled": round(settled / n, 3), "mean_node_rounds": round(float(np.mean(node_rounds)), 2),
            "mean_look": round(float(np.mean(looks)), 2), "runs_with_a_flag": round(float(np.mean(any_flag)), 3),
            "fdr": round(float(np.mean(fdp)), 4)}


def simulate(args) -> dict:
    rng = np.random.default_rng(args.seed)
    out = {"mode": "simulate", "seed": args.seed, "threshold": THRESHOLD, "node_rows": args.node_rows,
           "run_rows": args.run_rows, "machine": f"{os.cpu_count()} cores, python {platform.python_version()}",
           "date": time.strftime("%Y-%m-%d"), "plans": []}
    t0 = time.time()
    for plan in args.plans.split(","):
        mn, mx = (int(x) for x in plan.split(":"))
        for sd in (float(x) for x in args.sds.split(",")):
            row = {"min_rounds": mn, "max_rounds": mx, "sd": sd}
            aa_runs = max(1, args.aa_rows // args.run_rows)
            row["aa_per_row"] = simulate_runs(rng, 0.0, sd, aa_runs, args.run_rows, args.node_rows, mn, mx, per_row=True)
            row["aa_naive_per_row"] = simulate_runs(rng, 0.0, sd, aa_runs, args.run_rows, args.node_rows, mn, mx,
                                                    "naive", per_row=True)
            row["aa_fixed_per_row"] = simulate_runs(rng, 0.0, sd, aa_runs, args.run_rows, args.node_rows, mn, mx,
                                                    "fixed", per_row=True)
            row["aa_run_bh"] = simulate_runs(rng, 0.0, sd, aa_runs, args.run_rows, args.node_rows, mn, mx)
            row["effects"] = {}
            for eff in (float(x) for x in args.effects.split(",")):
                runs = max(1, args.effect_rows // args.run_rows)
                row["effects"][eff] = {
                    "sequential": simulate_runs(rng, eff, sd, runs, args.run_rows, args.node_rows, mn, mx),
                    "fixed": simulate_runs(rng, eff, sd, runs, args.run_rows, args.node_rows, mn, mx, "fixed"),
                    "sequential_family_1": simulate_runs(rng, eff, sd, runs, args.run_rows, args.node_rows, mn, mx,
                                                         family_size=1)}
            out["plans"].append(row)
            print(f"plan {mn}:{mx} sd {sd}: {time.time() - t0:.0f} s", file=sys.stderr)
    out["seconds"] = round(time.time() - t0, 1)
    return out


def table(out: dict) -> str:
    effs = list(out["plans"][0]["effects"]) if out["plans"] else []
    head = ("| min:max | sd of ln(B/A) | A/A flagged per row: sequential / naive peeking / fixed | "
            "A/A runs with a flag (BH, sequential) | A/A rounds per node (per row) | "
            + " | ".join(f"±{float(e):.0%}: flagged, sequential (fixed) / rounds per node (family 1: rounds, flagged)" for e in effs) + " |")
    lines = [head, "|" + "---|" * (5 + len(effs))]
    for r in out["plans"]:
        cells = [f"{r['min_rounds']}:{r['max_rounds']}", f"{r['sd']:.1%}",
                 f"{r['aa_per_row']['flagged']:.1%} / {r['aa_naive_per_row']['flagged']:.1%} / "
                 f"{r['aa_fixed_per_row']['flagged']:.1%}",
                 f"{r['aa_run_bh']['runs_with_a_flag']:.0%} of {r['aa_run_bh']['rows'] // out['run_rows']}",
                 f"{r['aa_run_bh']['mean_node_rounds']:.1f} ({r['aa_run_bh']['mean_look']:.1f})"]
        for e in effs:
            sq, fx, f1 = (r["effects"][e][k] for k in ("sequential", "fixed", "sequential_family_1"))
            cells.append(f"{sq['flagged']:.0%} ({fx['flagged']:.0%}) / {sq['mean_node_rounds']:.1f} "
                         f"({f1['mean_node_rounds']:.1f}, {f1['flagged']:.0%})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--ops", default="softmax,exp,add,layer_norm")
    p.add_argument("--schedules", default="node,round", help="A/B schedules to run side by side (ab.schedule)")
    p.add_argument("--respawn", type=int, default=1, help="also an A/A node by node with ab.respawn_every=N (0: not)")
    p.add_argument("--simulate", action="store_true", help="simulate the sequential rule instead of running")
    p.add_argument("--plans", default="3:10,3:20,4:10,4:20,5:20", help="min_rounds:max_rounds,...")
    p.add_argument("--sds", default="0.005,0.01,0.02", help="round-to-round sd of ln(B/A)")
    p.add_argument("--effects", default="0.01,0.03,0.05,0.10", help="true relative changes (B/A - 1), sign random per node")
    p.add_argument("--node-rows", type=int, default=4, help="rows per node (a node stops when all are settled)")
    p.add_argument("--run-rows", type=int, default=100, help="rows per run (the BH family)")
    p.add_argument("--aa-rows", type=int, default=4000, help="A/A rows per plan and sd")
    p.add_argument("--effect-rows", type=int, default=800, help="rows per effect, plan and sd")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.simulate:
        out = simulate(args)
        print(json.dumps(out, indent=1))
        print(table(out))
        return
    common = [f"ops=[{args.ops}]", f"ab.rounds={args.rounds}"]
    out = {"rounds": args.rounds, "ops": args.ops,
           "machine": f"{os.cpu_count()} cores, python {platform.python_version()}", "date": time.strftime("%Y-%m-%d")}
    with tempfile.TemporaryDirectory() as tmp:
        for schedule in args.schedules.split(","):
            plan = [*common, f"ab.schedule={schedule}"]
            out[schedule] = {
                "real_switch": run(Path(tmp) / f"real_{schedule}", "ab=demo_fused_softmax", *plan),
                "a_a": run(Path(tmp) / f"aa_{schedule}", "ab=demo_fused_softmax", "ab.aa=true", *plan),
                "dead_axis": run(Path(tmp) / f"dead_{schedule}", "ab=env", "ab.var=ZL_NOTHING_READS_THIS", *plan),
            }
            if schedule == "node" and args.respawn:
                out[schedule][f"a_a_respawn_every_{args.respawn}"] = run(
                    Path(tmp) / "aa_respawn", "ab=demo_fused_softmax", "ab.aa=true", f"ab.respawn_every={args.respawn}", *plan)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
