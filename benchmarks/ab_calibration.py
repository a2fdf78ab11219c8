"""A/B calibration on the CPU demo corpus (issue: A/B experiments), three runs side by side per
A/B schedule (--schedules node,round: node by node with resident side processes and sequential
rounds, or whole passes per round), and an A/A node by node with ab.respawn_every=N (--respawn):

1. the demo's real switch (DEMO_GEMS_FUSED_SOFTMAX) with 10 rounds: softmax rows should be found;
2. an A/A run (same value on both sides): the share of rows flagged after BH (target <= 5%);
3. a dead axis (a variable nothing reads): must come out unknown/inconclusive, never a difference.

    python benchmarks/ab_calibration.py [--rounds 10] [--ops softmax,exp,add,layer_norm] [--schedules node,round] [--respawn 1]

--simulate: no runs; simulated rounds through the sequential rule (zlbench/ab/sequential.py:
repeated t intervals, Bonferroni over the looks min_rounds..max_rounds, BH across rows), looked at
after every round, each node stopped once all its rows are done, each cell twice: without futility
(a node stops when every row has settled) and with it (when every row is settled or futile). Per
plan (min, max rounds) and round-to-round sd of ln(B/A) (or a mix: --mixed QUIET:NOISY, nodes of
quiet rows with one noisy row, as FlagGems' nodes of 5 shapes): the A/A false-positive rate per
row (the row's own rule, no BH) and per run after BH (the chance a run flags anything), for naive
peeking (a fixed 95% t interval looked at after every round) and today's fixed rounds too; power
at known effects; mean rounds per node and the rounds rows' verdicts rest on; the share of A/A rows
called "no difference beyond threshold".

    python benchmarks/ab_calibration.py --simulate [--plans 3:10,4:10,4:20] [--sds 0.005,0.01,0.02]
        [--mixed 0.003:0.025,0.003:0.015] [--effects 0.01,0.03,0.05] [--node-rows 5] [--run-rows 100] [--seed 1]
        [--family-1] [--replay benchmarks/gpu/results/2026-11-30b_ab_scale_live_node_ab.csv]

--variants: the futility rules weighed (settings of the chosen rule, two looks in a row, bare
projections of the interval to max_rounds), on a few 5-row node mixes and the --replay csv.

    python benchmarks/ab_calibration.py --variants --replay benchmarks/gpu/results/2026-11-30b_ab_scale_live_node_ab.csv

--replay CSV: also simulate the nodes of a measured ab.csv (node = op: FlagGems' test function per op,
5 shapes each): every row with its measured change as the true one and the sd its interval implies
at its rounds (level alpha/K; rows that settled earlier had a narrower interval there, so this
overstates their sd), 200 replays of the whole axis, rounds per node with and without futility.
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


def _node_rounds(paths, min_rounds: int, max_rounds: int, family_size: int, naive: bool = False,
                 futility: bool = True) -> int:
    """Rounds a node runs: looked at after every round from min_rounds on, stopped when every row is
    settled (or futile, with futility)."""
    from zlbench.ab import sequential, stats

    for k in range(min_rounds, max_rounds):
        if naive:  # a fixed-sample 95% interval, as if every look were the only one
            ss = [stats.row_stat(np.ones(k), np.exp(d[:k])) for d in paths]
            if all(sequential.band_class(s.lo, s.hi, THRESHOLD) is not None for s in ss):
                return k
        elif sequential.node_done({i: d[:k] for i, d in enumerate(paths)}, THRESHOLD, min_rounds=min_rounds,
                                  max_rounds=max_rounds, family_size=family_size, futility=futility):
            return k
    return max_rounds


def simulate_runs(rng, effect: float, sd, runs: int, rows: int, node_rows: int, min_rounds: int,
                  max_rounds: int, rule: str = "sequential", per_row: bool = False,
                  family_size: int = 0, futility: bool = True) -> dict:
    """runs simulated A/B runs of `rows` rows (nodes of node_rows rows), every row with true B/A
    latency 1 + effect (sign drawn per node) and round-to-round sd `sd` of ln(B/A) (a number, or a
    list of one sd per row of the node).

    rule: "sequential" (this module's), "naive" (fixed 95% intervals looked at every round),
    "fixed" (max_rounds rounds, today's analysis). per_row: each row judged alone (its own q = p),
    i.e. the rule's per-row error rate; else BH across the run's rows. family_size: what the stopping
    rule is told (0: the run's rows, as the final BH; 1: changes settle on the row's own p-value and
    BH may then undo some). futility: the sequential rule with futility (the scheduler's) or without."""
    from zlbench.ab import stats

    sds = list(sd) if isinstance(sd, (list, tuple)) else [sd] * node_rows
    family = 1 if per_row else (family_size or rows)
    seq = dict(min_rounds=min_rounds, max_rounds=max_rounds) if rule == "sequential" else {}
    flagged = right = settled = futile = no_diff = 0
    any_flag, fdp, node_rounds, looks = [], [], [], []
    for _ in range(runs):
        row_stats, truth = [], []
        for _ in range(rows // node_rows):
            sign = 1 if rng.random() < 0.5 else -1
            mu = math.log1p(sign * effect) if effect else 0.0
            paths = [mu + rng.normal(0, s, max_rounds) for s in sds]
            k = max_rounds if rule == "fixed" else _node_rounds(paths, min_rounds, max_rounds, family, rule == "naive",
                                                                futility)
            node_rounds.append(k)
            row_stats += [stats.row_stat(np.ones(k), np.exp(d[:k])) for d in paths]
            truth += [sign] * node_rows
        if rule == "sequential":
            stats.analyse(row_stats, [None] * len(row_stats), THRESHOLD, min_rounds, max_rounds, family_size=family,
                          futility=futility)
        elif not per_row:
            stats.analyse(row_stats, [None] * len(row_stats), THRESHOLD)
        if per_row:  # one row's own verdict: q = p (sequential: p is already anytime-valid)
            for s in row_stats:
                s.q = s.p
                s.verdict = stats.decide(s, THRESHOLD, None, *seq.values())
        hits = [s.verdict in FLAGGED for s in row_stats]
        flagged += sum(hits)
        right += sum(h and (s.ratio > 1) == (sign > 0) for h, s, sign in zip(hits, row_stats, truth))
        settled += sum(s.stop == "settled" for s in row_stats)
        futile += sum(s.stop == "futile" for s in row_stats)
        no_diff += sum(s.verdict == "no difference beyond threshold" for s in row_stats)
        looks += [s.look or s.n for s in row_stats]
        any_flag.append(any(hits))
        false = sum(hits) if not effect else sum(h and (s.ratio > 1) != (sign > 0) for h, s, sign in zip(hits, row_stats, truth))
        fdp.append(false / max(1, sum(hits)))
    n = runs * (rows // node_rows) * node_rows
    return {"rows": n, "flagged": round(flagged / n, 4), "right_direction": round(right / n, 4),
            "settled": round(settled / n, 3), "futile": round(futile / n, 3), "no_difference": round(no_diff / n, 3),
            "mean_node_rounds": round(float(np.mean(node_rounds)), 2),
            "mean_look": round(float(np.mean(looks)), 2), "runs_with_a_flag": round(float(np.mean(any_flag)), 3),
            "fdr": round(float(np.mean(fdp)), 4)}


def replay_nodes(path: str, min_rounds: int, max_rounds: int) -> dict:
    """A measured ab.csv as simulation input: node (op) -> [(true ln ratio, sd), ...] per row, the sd
    implied by the row's interval (level alpha/K) at its look: the look whose implied t statistic
    gives the row's p-value back (a row that settled rests on an earlier look than its rounds), else
    (p = 1: no information) its rounds, which overstates the sd of a row that settled earlier."""
    import csv

    from scipy import stats as sps

    K = max_rounds - min_rounds + 1
    nodes = {}
    for r in csv.DictReader(open(path)):
        if r.get("ci_lo_pct") in (None, "") or r.get("live") == "not live":
            continue
        lo, hi = math.log1p(float(r["ci_lo_pct"]) / 100), math.log1p(float(r["ci_hi_pct"]) / 100)
        mu, p = math.log1p(float(r["change_pct"]) / 100), float(r["p"])

        def sd_at(k):
            return (hi - lo) / 2 * math.sqrt(k) / sps.t.ppf(1 - 0.05 / K / 2, k - 1)

        def p_at(k):
            return min(1.0, K * 2 * sps.t.sf(abs(mu) / (sd_at(k) / math.sqrt(k)), k - 1))

        looks = range(min_rounds, min(int(r["rounds"]), max_rounds) + 1)
        k = min(looks, key=lambda k: abs(math.log(p_at(k)) - math.log(p))) if 0 < p < 1 else looks[-1]
        nodes.setdefault(r["op"], []).append((mu, sd_at(k)))
    return nodes


def simulate_replay(rng, path: str, min_rounds: int, max_rounds: int, replays: int = 200) -> dict:
    from zlbench.ab import sequential

    spec = replay_nodes(path, min_rounds, max_rounds)
    family = sum(len(v) for v in spec.values())
    out = {"csv": path, "plan": f"{min_rounds}:{max_rounds}", "replays": replays,
           "rows": {op: [{"change_pct": round(math.expm1(mu) * 100, 3), "sd_pct": round(sd * 100, 3)} for mu, sd in v]
                    for op, v in spec.items()}}
    for futility in (False, True):
        rounds = {op: [] for op in spec}
        futile = 0
        for _ in range(replays):
            for op, rows in spec.items():
                paths = [mu + rng.normal(0, sd, max_rounds) for mu, sd in rows]
                k = _node_rounds(paths, min_rounds, max_rounds, family, futility=futility)
                rounds[op].append(k)
                futile += sum(sequential.row_decision(d[:k], THRESHOLD, min_rounds=min_rounds, max_rounds=max_rounds,
                                                      family_size=family, futility=futility).stop == "futile"
                              for d in paths)
        out["futility" if futility else "without"] = {
            "node_rounds": {op: round(float(np.mean(v)), 2) for op, v in rounds.items()},
            "mean_node_rounds": round(float(np.mean([x for v in rounds.values() for x in v])), 2),
            "nodes_stopped_by_round_5": round(float(np.mean([x <= 5 for v in rounds.values() for x in v])), 3),
            "futile_rows": round(futile / (replays * family), 3)}
    return out


def _cell(rng, args, sd, mn: int, mx: int) -> dict:
    """One plan and noise level: A/A and effects, without and with futility."""
    row = {}
    aa_runs = max(1, args.aa_rows // args.run_rows)
    common = (args.run_rows, args.node_rows, mn, mx)
    row["aa_naive_per_row"] = simulate_runs(rng, 0.0, sd, aa_runs, *common, "naive", per_row=True)
    row["aa_fixed_per_row"] = simulate_runs(rng, 0.0, sd, aa_runs, *common, "fixed", per_row=True)
    for futility, tag in ((False, "without"), (True, "futility")):
        row[tag] = {"aa_per_row": simulate_runs(rng, 0.0, sd, aa_runs, *common, per_row=True, futility=futility),
                    "aa_run_bh": simulate_runs(rng, 0.0, sd, aa_runs, *common, futility=futility), "effects": {}}
        for eff in (float(x) for x in args.effects.split(",")):
            runs = max(1, args.effect_rows // args.run_rows)
            row[tag]["effects"][eff] = {"sequential": simulate_runs(rng, eff, sd, runs, *common, futility=futility)}
            if args.family_1:
                row[tag]["effects"][eff]["sequential_family_1"] = simulate_runs(rng, eff, sd, runs, *common,
                                                                                family_size=1, futility=futility)
            if not futility:
                row[tag]["effects"][eff]["fixed"] = simulate_runs(rng, eff, sd, runs, *common, "fixed")
    return row


def simulate(args) -> dict:
    rng = np.random.default_rng(args.seed)
    out = {"mode": "simulate", "seed": args.seed, "threshold": THRESHOLD, "node_rows": args.node_rows,
           "run_rows": args.run_rows, "machine": f"{os.cpu_count()} cores, python {platform.python_version()}",
           "date": time.strftime("%Y-%m-%d"), "futility": _futility_settings(), "plans": []}
    t0 = time.time()
    noises = [(float(x), float(x)) for x in args.sds.split(",") if x]
    for mix in (m for m in args.mixed.split(",") if m):  # quiet:noisy, one noisy row per node
        quiet, noisy = (float(x) for x in mix.split(":"))
        noises.append((mix, [quiet] * (args.node_rows - 1) + [noisy]))
    for plan in args.plans.split(","):
        mn, mx = (int(x) for x in plan.split(":"))
        for label, sd in noises:
            row = {"min_rounds": mn, "max_rounds": mx, "sd": label, **_cell(rng, args, sd, mn, mx)}
            out["plans"].append(row)
            print(f"plan {mn}:{mx} sd {label}: {time.time() - t0:.0f} s", file=sys.stderr)
    if args.replay:
        mn, mx = (int(x) for x in args.replay_plan.split(":"))
        out["replay"] = simulate_replay(rng, args.replay, mn, mx)
    out["seconds"] = round(time.time() - t0, 1)
    return out


# Futility rules weighed (--variants): the module's rule with other settings, and two bare projections
# (the interval at max_rounds around today's mean with today's sd, no chance involved).
VARIANTS = {
    "chosen": {},
    "settle < 0.1": {"FUTILE_SETTLE": 0.1},
    "settle < 0.2": {"FUTILE_SETTLE": 0.2},
    "settle < 0.4": {"FUTILE_SETTLE": 0.4},
    "settle < 0.5": {"FUTILE_SETTLE": 0.5},
    "change < 0.10": {"FUTILE_CHANGE": 0.10},
    "from round 3": {"FUTILE_FROM": 3},
    "two looks in a row": {"rule": "two looks"},
    "projection": {"rule": "projection"},
    "projection + change": {"rule": "projection + change"},
}
SCENARIOS = {  # (effect, sd per row of a 5-row node)
    "A/A 0.3% x4 + 2.5%": (0.0, [0.003] * 4 + [0.025]), "A/A 0.3% x4 + 1.5%": (0.0, [0.003] * 4 + [0.015]),
    "A/A 1%": (0.0, [0.01] * 5), "A/A 2%": (0.0, [0.02] * 5), "±1% sd 0.5%": (0.01, [0.005] * 5),
    "±3% sd 1%": (0.03, [0.01] * 5), "±3% sd 2%": (0.03, [0.02] * 5), "±5% sd 2%": (0.05, [0.02] * 5),
}


def _with_variant(name: str):
    """The futility rule swapped for a variant (a context manager over report/sequential.py's globals)."""
    import contextlib

    from zlbench.ab import sequential as sq

    spec = dict(VARIANTS[name])
    rule = spec.pop("rule", None)
    chosen = sq._futile

    def projection(ks, mean, var, t_abs, change_crit, threshold, level, family_size, max_rounds):
        # The interval at N around mean_k with sd_k straddles an edge of the band (no settlement).
        lo_e, hi_e = math.log1p(-threshold), math.log1p(threshold)
        sd = np.sqrt(var)
        hw = sq._crit(level, max_rounds - 1) * sd / math.sqrt(max_rounds)
        hw_safe = sq._crit(level / family_size, max_rounds - 1) * sd / math.sqrt(max_rounds)
        settles = (((mean - hw >= lo_e) & (mean + hw <= hi_e))
                   | (((mean + hw <= lo_e) | (mean - hw >= hi_e)) & (np.abs(mean) > hw_safe)))
        futile = (ks >= sq.FUTILE_FROM) & (ks < max_rounds) & ~settles
        if rule == "projection + change":  # ... unless it would then show a change past the threshold
            past = (mean < np.minimum(lo_e, -hw)) | (mean > np.maximum(hi_e, hw))
            futile &= (t_abs > change_crit) | ~past
        return futile

    def two_looks(*a):
        f = chosen(*a)
        return f & np.r_[False, f[:-1]]

    @contextlib.contextmanager
    def swapped():
        saved = {k: getattr(sq, k) for k in spec}
        for k, v in spec.items():
            setattr(sq, k, v)
        if rule:
            sq._futile = two_looks if rule == "two looks" else projection
        try:
            yield
        finally:
            for k, v in saved.items():
                setattr(sq, k, v)
            sq._futile = chosen

    return swapped()


def variants(args) -> dict:
    """Each futility variant on SCENARIOS (plan --variant-plan, nodes of 5 rows, BH over --run-rows)
    and on the --replay csv (at its plan, --replay-plan): rounds per node, 'no difference' (A/A) or
    flagged (changes)."""
    mn, mx = (int(x) for x in args.variant_plan.split(":"))
    rmn, rmx = (int(x) for x in args.replay_plan.split(":"))
    out = {"plan": f"{mn}:{mx}", "nodes": args.variant_nodes, "variants": {}}
    t0 = time.time()
    for name in ["without"] + list(VARIANTS):
        res = {}
        with _with_variant(name if name != "without" else "chosen"):
            for scen, (eff, sds) in SCENARIOS.items():
                r = simulate_runs(np.random.default_rng(args.seed), eff, sds, args.variant_nodes * 5 // args.run_rows,
                                  args.run_rows, 5, mn, mx, futility=name != "without")
                res[scen] = {"node_rounds": r["mean_node_rounds"],
                             "share": r["no_difference"] if eff == 0 else r["flagged"]}
            if args.replay:
                rp = simulate_replay(np.random.default_rng(args.seed), args.replay, rmn, rmx, replays=100)
                res["replay"] = rp["futility" if name != "without" else "without"]["mean_node_rounds"]
        out["variants"][name] = res
        print(f"variant {name}: {time.time() - t0:.0f} s", file=sys.stderr)
    return out


def variants_table(out: dict) -> str:
    scen = list(SCENARIOS)
    head = ("| rule | " + " | ".join(f"{s}: {'no diff.' if SCENARIOS[s][0] == 0 else 'flagged'} / rounds per node"
                                     for s in scen) + " | replay: rounds per node |")
    lines = [head, "|" + "---|" * (len(scen) + 2)]
    for name, res in out["variants"].items():
        cells = [f"{res[s]['share']:.0%} / {res[s]['node_rounds']:.1f}" for s in scen]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {res.get('replay', '-')} |")
    return "\n".join(lines)


def _futility_settings() -> dict:
    from zlbench.ab import sequential

    return {"settle_below": sequential.FUTILE_SETTLE, "change_below": sequential.FUTILE_CHANGE,
            "from_round": sequential.FUTILE_FROM}


def _noise(sd) -> str:
    if isinstance(sd, str):
        quiet, noisy = (float(x) for x in sd.split(":"))
        return f"{quiet:.1%} x{{n-1}} + {noisy:.1%}"
    return f"{sd:.1%}"


def table(out: dict) -> str:
    """Before (without futility) -> after (with it), cell by cell."""
    effs = list(out["plans"][0]["without"]["effects"]) if out["plans"] else []
    head = ("| min:max | sd of ln(B/A) | A/A flagged per row: without -> with futility (naive peeking / fixed) | "
            "A/A runs with a flag (BH) | A/A 'no difference' | A/A rounds per node (per row) | "
            + " | ".join(f"±{float(e):.0%}: flagged (fixed) / rounds per node" for e in effs) + " |")
    lines = [head, "|" + "---|" * (6 + len(effs))]
    for r in out["plans"]:
        wo, fu = r["without"], r["futility"]
        cells = [f"{r['min_rounds']}:{r['max_rounds']}", _noise(r["sd"]).replace("{n-1}", str(out["node_rows"] - 1)),
                 f"{wo['aa_per_row']['flagged']:.1%} -> {fu['aa_per_row']['flagged']:.1%} "
                 f"({r['aa_naive_per_row']['flagged']:.1%} / {r['aa_fixed_per_row']['flagged']:.1%})",
                 f"{wo['aa_run_bh']['runs_with_a_flag']:.0%} -> {fu['aa_run_bh']['runs_with_a_flag']:.0%} "
                 f"of {wo['aa_run_bh']['rows'] // out['run_rows']}",
                 f"{wo['aa_run_bh']['no_difference']:.0%} -> {fu['aa_run_bh']['no_difference']:.0%}",
                 f"{wo['aa_run_bh']['mean_node_rounds']:.1f} ({wo['aa_run_bh']['mean_look']:.1f}) -> "
                 f"**{fu['aa_run_bh']['mean_node_rounds']:.1f}** ({fu['aa_run_bh']['mean_look']:.1f})"]
        for e in effs:
            a, b, fx = wo["effects"][e]["sequential"], fu["effects"][e]["sequential"], wo["effects"][e]["fixed"]
            cells.append(f"{a['flagged']:.0%} -> {b['flagged']:.0%} ({fx['flagged']:.0%}) / "
                         f"{a['mean_node_rounds']:.1f} -> {b['mean_node_rounds']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    rp = out.get("replay")
    if rp:
        wo, fu = rp["without"], rp["futility"]
        lines += ["", f"Replay of `{rp['csv']}` (plan {rp['plan']}, {rp['replays']} replays): rounds per node "
                      "without -> with futility", "",
                  "| node | rows: change, sd | without | with futility |", "|---|---|---|---|"]
        for op, rows in rp["rows"].items():
            desc = ", ".join(f"{x['change_pct']:+.1f}% sd {x['sd_pct']:.2f}%" for x in rows)
            lines.append(f"| {op} | {desc} | {wo['node_rounds'][op]:.2f} | **{fu['node_rounds'][op]:.2f}** |")
        lines.append(f"| all | nodes stopped by round 5: {wo['nodes_stopped_by_round_5']:.0%} -> "
                     f"{fu['nodes_stopped_by_round_5']:.0%}; futile rows {fu['futile_rows']:.0%} | "
                     f"{wo['mean_node_rounds']:.2f} | **{fu['mean_node_rounds']:.2f}** |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--ops", default="softmax,exp,add,layer_norm")
    p.add_argument("--schedules", default="node,round", help="A/B schedules to run side by side (ab.schedule)")
    p.add_argument("--respawn", type=int, default=1, help="also an A/A node by node with ab.respawn_every=N (0: not)")
    p.add_argument("--simulate", action="store_true", help="simulate the sequential rule instead of running")
    p.add_argument("--plans", default="3:10,4:10,4:20", help="min_rounds:max_rounds,...")
    p.add_argument("--sds", default="0.005,0.01,0.02", help="round-to-round sd of ln(B/A)")
    p.add_argument("--mixed", default="0.003:0.025,0.003:0.015",
                   help="quiet:noisy sd, nodes of node_rows-1 quiet rows and one noisy row ('' for none)")
    p.add_argument("--effects", default="0.01,0.03,0.05", help="true relative changes (B/A - 1), sign random per node")
    p.add_argument("--node-rows", type=int, default=5, help="rows per node (a node stops when all are done)")
    p.add_argument("--family-1", action="store_true",
                   help="also stop changes on the row's own p-value (family_size=1; BH may then undo some)")
    p.add_argument("--replay", default="", help="a measured ab.csv to replay (node = op)")
    p.add_argument("--replay-plan", default="3:10", help="min:max rounds of the replayed run")
    p.add_argument("--run-rows", type=int, default=100, help="rows per run (the BH family)")
    p.add_argument("--variants", action="store_true",
                   help="the futility rules weighed (VARIANTS) on a few node mixes and the --replay csv")
    p.add_argument("--variant-nodes", type=int, default=400, help="nodes per variant and mix")
    p.add_argument("--variant-plan", default="3:10", help="min:max rounds of --variants' node mixes")
    p.add_argument("--aa-rows", type=int, default=4000, help="A/A rows per plan and sd")
    p.add_argument("--effect-rows", type=int, default=800, help="rows per effect, plan and sd")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.variants:
        out = variants(args)
        print(json.dumps(out, indent=1))
        print(variants_table(out))
        return
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
