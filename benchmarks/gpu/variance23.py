"""Where a row's variance lives, from zlbench runs that sampled processes (issue 23), and what a run
at given settings gives: interval coverage, widths, run-to-run precision, wall.

    python3 benchmarks/gpu/variance23.py components RUN_DIR [RUN_DIR ...]   # runs of one setting each
    python3 benchmarks/gpu/variance23.py runs RUN_A RUN_B [RUN_C ...]       # runs of the same setting
    python3 benchmarks/gpu/variance23.py timeline RUN_DIR [RUN_DIR ...]     # where a pass' wall goes
    python3 benchmarks/gpu/variance23.py runlevel RUN_A RUN_B [RUN_C ...]   # what a run's processes share
    python3 benchmarks/gpu/variance23.py control RUN_A RUN_B                # torch's row as a control
    python3 benchmarks/gpu/variance23.py offsets RUN_A RUN_B [RUN_C ...]    # a run's offset, by process
    python3 benchmarks/gpu/variance23.py more RUN_DIR [RUN_DIR ...]         # more processes vs planned

`components`: per run dir (one setting: replay budget, fresh or shared tuning), the between-process
sd of ln(latency) per row (from process_rows.jsonl), by row size, FlagGems and torch rows apart; the
within-call spread where the rows carry replay samples (timer.stop=adaptive: ci_rel, spread_rel);
the wall per pass; and the precision of a row's median over K processes that the measured variance
implies for K = 1..6 at that budget (sd * sqrt(var factor of a median of K)), against its wall.

`runs`: several runs of the same setting: for each pair, the share of rows whose other-run latency
lies inside this run's latency_ci, interval widths (p50/p90 of (hi - lo) / latency, rows >= 20 us
apart), run-to-run |ln ratio| (p50/p90/max; rows >= 5 us; all FlagGems rows) and the walls.
`timeline`: per benchmark process (plain units), from its events: start-up (launch to the gate:
imports, collection), the wait at the gate (a process started ahead: launcher.prestart), measuring
(gate to session end: its nodes), teardown (session end to exit); and the run's wall, first launch
to last exit. Then per node, over the planned passes: its wall and the part spent in the graph
timer's calls (warm-up, where a fresh process tunes, capture and replays): where a pass' time goes.
`more --min-more N`: count rows with N or more more processes (default 3; one a row is a weak test
a row, a count over many).
`runlevel`: runs of the same setting: per row >= 100 us measured in 3 or more processes in every run,
the variance of the runs' medians less what the processes' spread inside each run explains
(their variance times Var(median of K) / Var(one)); the mean and median of that excess over rows,
as an sd (a run-level share: process_stats.RUN_SD), and the rows with the largest.
`control`: two runs of the same setting (e.g. on two GPUs of a kind): per row, the run-to-run
|ln ratio| of FlagGems' latency, of torch's (latency_base, the same process) and of their quotient,
p50/p90/max and the correlation of the two changes: whether judging a row on its speedup would cancel
what a run or a device draws (it does where the quotient's spread is the smaller).
`offsets`: runs of the same setting: for each run and each of its processes (r0, r1, ...), the median
and mean over rows of ln(the process' latency / the median of the other runs' processes on that row),
FlagGems' latency and torch's apart, and the share of rows above +1%: whether a run reads off as a
whole (every process alike: what the run drew) or in one process (e.g. its first, cold one).
`more`: per run dir, the rows measured in 3 or more planned processes (those that timed the baseline)
and 3 or more of the more processes (past timer.processes; before 2026-12-05 they left the baseline
out): how many rows' two groups are completely apart (every more process above, or below, every
planned one) against how many chance would give (2 / C(n, k) a row, were the processes exchangeable),
in which direction, and the rows apart by more than 3%; `--by-regime`: the same for each group of runs
whose more processes measured alike (every shape of their tests or the chosen ones; baseline or not).
Prints Markdown; --json writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from zlbench.results.process_stats import median_var_factor  # noqa: E402

SIZES = ((0, 0.005, "< 5 us"), (0.005, 0.02, "5-20 us"), (0.02, 0.1, "20-100 us"), (0.1, 1e9, ">= 100 us"))


def _rows(path: Path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def _key(r):
    return (r.get("node"), r["op"], r.get("dtype"), r.get("shape"))


def _q(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))] if v else None


def _pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


def wall(run: Path):
    """Seconds per pass (process) from the units' events: first to last event of each unit."""
    out = []
    for unit in sorted((run / "units").glob("*")):
        ts = [json.loads(x)["t"] for x in (unit / "events.jsonl").read_text().splitlines() if x.strip()]
        if ts:
            out.append(max(ts) - min(ts))
    return out


def components(runs, as_json):
    result = {}
    lines = ["| run | impl | size | rows | between-process sd of ln: p50 / p90 / max | within-call ci_rel p50 |",
             "|---|---|---|---|---|---|"]
    for run in runs:
        per = _rows(run / "process_rows.jsonl")
        groups = defaultdict(lambda: defaultdict(list))
        within = defaultdict(list)
        for r in per:
            if r.get("status") != "ok" or not r.get("latency"):
                continue
            groups["gems"][_key(r)].append(r["latency"])
            if r.get("latency_base"):
                groups["torch"][_key(r)].append(r["latency_base"])
            if r.get("ci_rel") is not None:
                within["gems"].append(r["ci_rel"])
            if (r.get("timing_base") or {}).get("ci_rel") is not None:
                within["torch"].append(r["timing_base"]["ci_rel"])
        passes = wall(run)
        res = {"passes_s": passes, "impl": {}}
        for impl, by_row in groups.items():
            sds = {k: statistics.stdev([math.log(v) for v in vs]) for k, vs in by_row.items() if len(vs) >= 2}
            med = {k: statistics.median(by_row[k]) for k in sds}
            res["impl"][impl] = {}
            for lo, hi, name in SIZES:
                s = [sds[k] for k in sds if lo <= med[k] < hi]
                if not s:
                    continue
                res["impl"][impl][name] = {"rows": len(s), "p50": _q(s, .5), "p90": _q(s, .9), "max": max(s)}
                w = _q(within[impl], .5) if within[impl] else None
                lines.append(f"| {run.name} | {impl} | {name} | {len(s)} | {_pct(_q(s, .5))} / {_pct(_q(s, .9))} / "
                             f"{_pct(max(s))} | {_pct(w)} |")
            allsd = list(sds.values())
            if allsd:
                res["impl"][impl]["all"] = {"rows": len(allsd), "p50": _q(allsd, .5), "p90": _q(allsd, .9),
                                            "implied_p90_by_K": {k: _q(allsd, .9) * math.sqrt(median_var_factor(k))
                                                                 for k in range(1, 7)}}
        result[run.name] = res
        lines.append(f"| {run.name} | wall per pass | | | {', '.join(f'{x:.0f}' for x in passes)} s | |")
    print("\n".join(lines))
    for name, res in result.items():
        g = res["impl"].get("gems", {}).get("all")
        if g:
            print(f"\n{name}: FlagGems rows' implied p90 precision of the median over K processes: " + ", ".join(
                f"K={k} {_pct(v)}" for k, v in g["implied_p90_by_K"].items()))
    if as_json:
        Path(as_json).write_text(json.dumps(result, indent=1))


def _run_rows(run: Path, reaggregate: bool, planned_only: bool = False):
    """A run's rows; reaggregate: made again from its process rows by this checkout's
    zlbench/results/process_stats.py (what a change to the intervals would have reported);
    planned_only: from its planned processes alone (timer.processes), leaving out the more processes."""
    if not reaggregate:
        return _rows(run / "rows.jsonl")
    from zlbench.results.process_stats import aggregate

    plan = run / "plan.json"  # the tenth session's raw results kept the process rows only
    rows = _rows(run / "process_rows.jsonl")
    processes = (json.loads(plan.read_text()).get("processes") if plan.exists() else
                 len({r.get("round") for r in rows})) or 1
    if planned_only:
        rows = [r for r in rows if (r.get("round") or 0) < processes]
    return aggregate(rows, processes)


def _width(row) -> float:
    """A row's interval width relative to its latency: (hi - lo) / latency."""
    return (row["latency_ci"][1] - row["latency_ci"][0]) / row["latency"]


def runs_report(runs, as_json, graph_only=False, reaggregate=False, intervals_of=None, planned_only=False):
    """graph_only: leave out rows a refused capture timed directly (BENCHMARK_DIRECT_NO_CUDAGRAPH).
    intervals_of: the runs whose rows' intervals are judged per row (default all; e.g. the one run
    that measured every process where the others were cut)."""
    data = {run.name: {_key(r): r for r in _run_rows(run, reaggregate, planned_only) if r.get("status") == "ok" and r.get("latency")
                       and not (graph_only and "BENCHMARK_DIRECT_NO_CUDAGRAPH" in (r.get("markers") or []))}
            for run in runs}
    names = list(data)
    cover, widths, widths20, diffs, diffs5, ok = [], [], [], [], [], {}
    for a in names:
        for r in data[a].values():
            if r.get("latency_ci"):
                w = _width(r)
                widths.append(w)
                if r["latency"] >= 0.02:
                    widths20.append(w)
        for b in names:
            if a == b:
                continue
            hits = [r["latency_ci"][0] <= data[b][k]["latency"] <= r["latency_ci"][1]
                    for k, r in data[a].items() if k in data[b] and r.get("latency_ci")]
            cover.append(sum(hits) / len(hits) if hits else 0)
            ok[f"{a} in {b}"] = cover[-1]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for k, r in data[a].items():
                if k in data[b]:
                    d = abs(math.log(data[b][k]["latency"] / r["latency"]))
                    diffs.append(d)
                    if r["latency"] >= 0.005:
                        diffs5.append(d)
    walls = {run.name: sum(wall(run)) for run in runs}
    rows_with_ci = [r for d in data.values() for r in d.values() if r.get("latency_ci")]
    coverage_rows = []
    for k in data[names[0]]:
        if all(k in data[n] for n in names):
            inside = all(data[a][k].get("latency_ci") and data[a][k]["latency_ci"][0] <= data[b][k]["latency"]
                         <= data[a][k]["latency_ci"][1] for a in names for b in names if a != b)
            coverage_rows.append(inside)
    # Per row of a run (the reading): its interval holds every other run's value.
    judged = [n for n in names if not intervals_of or n in intervals_of]
    per_run_row = [all(r["latency_ci"][0] <= data[b][k]["latency"] <= r["latency_ci"][1] for b in names if b != a)
                   for a in judged for k, r in data[a].items()
                   if r.get("latency_ci") and all(k in data[b] for b in names)]
    w20_judged = [_width(r) for a in judged for r in data[a].values()
                  if r.get("latency_ci") and r["latency"] >= 0.02]
    out = {
        "rows_of_a_run_holding_every_other_run": (sum(per_run_row) / len(per_run_row)) if per_run_row else None,
        "judged_runs": judged, "judged_width_ge20us_p90": _q(w20_judged, .9),
        "rows": len(data[names[0]]), "rows_with_ci": len(rows_with_ci),
        "coverage_by_pair": ok, "rows_covered_by_every_other_run": (sum(coverage_rows) / len(coverage_rows)) if coverage_rows else None,
        "width_p50": _q(widths, .5), "width_p90": _q(widths, .9),
        "width_ge20us_p50": _q(widths20, .5), "width_ge20us_p90": _q(widths20, .9),
        "run_to_run_all": {"p50": _q(diffs, .5), "p90": _q(diffs, .9), "max": max(diffs) if diffs else None},
        "run_to_run_ge5us": {"p50": _q(diffs5, .5), "p90": _q(diffs5, .9), "max": max(diffs5) if diffs5 else None},
        "unit_seconds": walls,
        "unstable_rows": sum(1 for r in rows_with_ci if "BENCHMARK_PROCESS_UNSTABLE" in (r.get("markers") or [])),
    }
    print(f"rows {out['rows']} (with interval: {out['rows_with_ci']} over {len(names)} runs), unstable "
          f"{out['unstable_rows']}")
    print(f"coverage: rows whose every other run lies inside their interval: {_pct(out['rows_covered_by_every_other_run'])}; "
          f"by pair: {', '.join(f'{k} {_pct(v)}' for k, v in ok.items())}")
    print(f"rows of {', '.join(judged)} whose interval holds every other run's value: "
          f"{_pct(out['rows_of_a_run_holding_every_other_run'])}; their width, rows >= 20 us: p90 "
          f"{_pct(out['judged_width_ge20us_p90'])}")
    print(f"width (hi-lo)/latency: p50 {_pct(out['width_p50'])} p90 {_pct(out['width_p90'])}; rows >= 20 us: "
          f"p50 {_pct(out['width_ge20us_p50'])} p90 {_pct(out['width_ge20us_p90'])}")
    for name in ("run_to_run_all", "run_to_run_ge5us"):
        d = out[name]
        print(f"{name} |ln ratio|: p50 {_pct(d['p50'])} p90 {_pct(d['p90'])} max {_pct(d['max'])}")
    print("unit seconds per run: " + ", ".join(f"{k} {v:.0f}" for k, v in walls.items()))
    out["by_op"] = _by_op(data)
    print("\n| op (timer) | rows | coverage over ordered pairs | run to run p50 / max |\n|---|---|---|---|")
    for op, d in sorted(out["by_op"].items(), key=lambda x: x[1]["coverage"]):
        print(f"| {op} | {d['rows']} | {_pct(d['coverage'])} | {_pct(d['p50'])} / {_pct(d['max'])} |")
    if as_json:
        Path(as_json).write_text(json.dumps(out, indent=1))


def _by_op(data):
    """Per op (and timer: rows a refused capture timed directly apart): the share of ordered run
    pairs (a, b) whose b value lies in a's interval, over the rows every run has, and the rows' largest
    run-to-run |ln ratio| (p50 and max over rows): which ops the misses come from."""
    names = list(data)
    common = set(data[names[0]]).intersection(*(data[n] for n in names[1:]))
    tally = defaultdict(lambda: {"rows": 0, "hits": 0, "pairs": 0, "spreads": []})
    for k in common:
        first = data[names[0]][k]
        t = tally[f"{first['op']} ({first.get('timer_used')})"]
        lat = [data[n][k]["latency"] for n in names]
        t["rows"] += 1
        t["spreads"].append(math.log(max(lat) / min(lat)))
        for a in names:
            ci = data[a][k].get("latency_ci")
            for b in names:
                if a != b and ci:
                    t["pairs"] += 1
                    t["hits"] += ci[0] <= data[b][k]["latency"] <= ci[1]
    return {op: {"rows": t["rows"], "coverage": t["hits"] / t["pairs"] if t["pairs"] else None,
                 "p50": _q(t["spreads"], .5), "max": max(t["spreads"])} for op, t in tally.items()}


def timeline(runs, as_json):
    out = {}
    for run in runs:
        procs, first, last = [], None, None
        for unit in sorted((run / "units").glob("*")):
            evs = _rows(unit / "events.jsonl")
            by = defaultdict(list)
            for e in evs:
                by[e.get("event")].append(e)
            if not by["launch"]:
                continue
            launch, exited = by["launch"][0]["t"], (by["exited"] or [{}])[-1].get("t")
            gate = (by["gate"] or [None])[0]
            end = (by["session_end"] or [{}])[-1].get("t")
            nodes = sum(e.get("wall_s") or 0 for e in by["end"])
            reached = gate["reached"] if gate else (by["session_start"] or [{"t": launch}])[0]["t"]
            opened = gate["t"] if gate else reached
            # A process killed (a node's or the run's time limit) has no session end: measuring until its exit.
            procs.append({"unit": unit.name, "startup_s": reached - launch, "waited_s": opened - reached,
                          "measuring_s": (end or exited or opened) - opened, "nodes_s": nodes,
                          "teardown_s": (exited - end) if exited and end else None,
                          # since 751b3eb: what torch/Triton load on first use, at the gate; late: not hidden
                          "preload_s": gate.get("preload_s") if gate else None,
                          "preload_late_s": gate.get("preload_late_s") if gate else None})
            first = launch if first is None else min(first, launch)
            last = exited if last is None or (exited and exited > last) else last
        out[str(run)] = {"wall_s": (last - first) if first and last else None, "processes": procs,
                         "nodes": _node_walls(run)}
        print(f"### {run.name}: wall {out[str(run)]['wall_s']:.1f} s (first launch to last exit)\n")
        print("| process | start-up (s) | waited at gate (s) | preload (late) (s) | measuring (s) | nodes' wall (s) | teardown (s) |")
        print("|---|---|---|---|---|---|---|")
        for pr in procs:
            f = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
            pre = "-" if pr["preload_s"] is None else f"{pr['preload_s']:.1f} ({pr['preload_late_s']:.1f})"
            print(f"| {pr['unit']} | {f(pr['startup_s'])} | {f(pr['waited_s'])} | {pre} | {f(pr['measuring_s'])} | "
                  f"{f(pr['nodes_s'])} | {f(pr['teardown_s'])} |")
        print()
        nodes = out[str(run)]["nodes"]
        if nodes:
            print("| node (planned passes) | wall (s, median) | in the timer (s): warm-up (a fresh process tunes there), capture, replays | share |")
            print("|---|---|---|---|")
            for node, (wall, captures) in sorted(nodes.items(), key=lambda kv: -kv[1][0]):
                print(f"| {node} | {wall:.2f} | {captures:.2f} | {100 * captures / wall if wall else 0:.0f}% |")
            total = sum(w for w, _ in nodes.values())
            print(f"| all | {total:.2f} | {sum(c for _, c in nodes.values()):.2f} | "
                  f"{100 * sum(c for _, c in nodes.values()) / total if total else 0:.0f}% |\n")
    if as_json:
        Path(as_json).write_text(json.dumps(out, indent=1))


def _node_walls(run: Path) -> Dict[str, Tuple[float, float]]:
    """node -> (its wall, the seconds between its calls' capture and captured events: the graph
    timer's measure(), i.e. the warm-up, where a fresh process tunes, the capture and the replays
    (timer.rep a call)), medians over the planned passes."""
    planned_k = _planned_processes(run)
    walls, captures = defaultdict(list), defaultdict(list)
    for unit in sorted((run / "units").glob("*")):
        parts = unit.name.split(".")
        if len(parts) < 2 or not parts[1].startswith("r") or int(parts[1][1:] or 0) >= planned_k:
            continue
        node, opened, inside = None, None, 0.0
        for e in _rows(unit / "events.jsonl"):
            kind = e.get("event")
            if kind == "start":
                node, inside = e["node"].split("::")[-1], 0.0
            elif kind == "capture":
                opened = e["t"]
            elif kind == "captured" and opened is not None:
                inside, opened = inside + e["t"] - opened, None
            elif kind == "end" and node:
                walls[node].append(e.get("wall_s") or 0.0)
                captures[node].append(inside)
    return {n: (statistics.median(walls[n]), statistics.median(captures[n])) for n in walls}


def runlevel(runs, as_json, min_ms=0.1):
    """What the processes of one run share and another run's do not (see the module doc)."""
    per_row = defaultdict(list)
    for run in runs:
        logs = defaultdict(list)
        for r in _rows(run / "process_rows.jsonl"):
            if r.get("status") == "ok" and r.get("latency"):
                logs[_key(r)].append(math.log(r["latency"]))
        for k, ys in logs.items():
            per_row[k].append(ys)
    excess = []
    for k, by_run in per_row.items():
        if len(by_run) != len(runs) or min(map(len, by_run)) < 3 or math.exp(statistics.median(by_run[0])) < min_ms:
            continue
        between = statistics.variance([statistics.median(ys) for ys in by_run])
        within = statistics.mean(statistics.variance(ys) * median_var_factor(len(ys)) for ys in by_run)
        excess.append((between - within, k, math.sqrt(between), math.sqrt(statistics.mean(
            statistics.variance(ys) for ys in by_run))))
    if not excess:
        print("no row >= %g ms in 3 or more processes in every run" % min_ms)
        return
    values = [e[0] for e in excess]
    out = {"rows": len(excess), "run_sd_from_mean": math.sqrt(max(0.0, statistics.mean(values))),
           "run_sd_from_median": math.sqrt(max(0.0, statistics.median(values)))}
    print(f"{len(excess)} rows >= {min_ms * 1000:g} us over {len(runs)} runs: run-level sd "
          f"{_pct(out['run_sd_from_mean'])} (mean excess), {_pct(out['run_sd_from_median'])} (median excess)\n")
    print("| row | sd of the runs' medians | sd of the processes in a run |\n|---|---|---|")
    for e in sorted(excess, key=lambda e: e[0], reverse=True)[:8]:
        print(f"| {e[1][1]} {e[1][3]} | {_pct(e[2])} | {_pct(e[3])} |")
    if as_json:
        Path(as_json).write_text(json.dumps(out, indent=1))


def control(runs, as_json):
    """FlagGems' latency, torch's and their quotient, run A to run B (module doc)."""
    if len(runs) != 2:
        sys.exit("control takes two run dirs")
    a, b = ({_key(r): r for r in _rows(run / "rows.jsonl")} for run in runs)
    changes = {"gems": [], "torch": [], "gems/torch": []}
    for k, ra in a.items():
        rb = b.get(k)
        if not rb or not all(r.get(f) for r in (ra, rb) for f in ("latency", "latency_base")):
            continue
        gems, torch = math.log(rb["latency"] / ra["latency"]), math.log(rb["latency_base"] / ra["latency_base"])
        changes["gems"].append(gems)
        changes["torch"].append(torch)
        changes["gems/torch"].append(gems - torch)
    out = {name: {"rows": len(v), "mean": statistics.fmean(v) if v else None, "p50": _q([abs(x) for x in v], 0.5),
                  "p90": _q([abs(x) for x in v], 0.9), "max": max((abs(x) for x in v), default=None)}
           for name, v in changes.items()}
    out["correlation"] = (statistics.correlation(changes["gems"], changes["torch"])
                          if len(changes["gems"]) > 2 else None)
    print(f"### {runs[0].name} -> {runs[1].name}: run-to-run |ln ratio| per row\n")
    print("| latency | rows | mean ln ratio | p50 | p90 | max |\n|---|---|---|---|---|---|")
    for name in ("gems", "torch", "gems/torch"):
        o = out[name]
        print(f"| {name} | {o['rows']} | {_pct(o['mean'])} | {_pct(o['p50'])} | {_pct(o['p90'])} | {_pct(o['max'])} |")
    if out["correlation"] is not None:
        print(f"\ncorrelation of the gems and torch changes: {out['correlation']:.2f}")
    if as_json:
        Path(as_json).write_text(json.dumps(out, indent=1) + "\n")


def offsets(runs, as_json):
    """Each run's processes against the other runs' (module doc)."""
    if len(runs) < 2:
        sys.exit("offsets takes two or more run dirs")
    by_run = []
    for run in runs:
        lat = defaultdict(dict)  # (row, gems|torch) -> process -> latency
        for r in _rows(run / "process_rows.jsonl"):
            if r.get("status") != "ok":
                continue
            proc = (r.get("unit") or "?").split(".")[1] if "." in (r.get("unit") or "") else r.get("unit")
            for side, value in (("gems", r.get("latency")), ("torch", r.get("latency_base"))):
                if value:
                    lat[(_key(r), side)][proc] = value
        by_run.append(lat)
    out = {}
    print("| run | latency | process | rows | median ln ratio | mean | rows > +1% |\n|---|---|---|---|---|---|---|")
    for i, run in enumerate(runs):
        for side in ("gems", "torch"):
            per_proc = defaultdict(list)
            for (k, s_), procs in by_run[i].items():
                if s_ != side:
                    continue
                others = [v for j, lat in enumerate(by_run) if j != i for v in lat.get((k, side), {}).values()]
                if len(others) < 3:
                    continue
                ref = statistics.median(others)
                for proc, v in procs.items():
                    per_proc[proc].append(math.log(v / ref))
            for proc in sorted(per_proc):
                xs = per_proc[proc]
                o = {"rows": len(xs), "median": statistics.median(xs), "mean": statistics.fmean(xs),
                     "share_above_1pct": sum(x > 0.01 for x in xs) / len(xs)}
                out.setdefault(run.name, {}).setdefault(side, {})[proc] = o
                print(f"| {run.name} | {side} | {proc} | {o['rows']} | {_pct(o['median'])} | {_pct(o['mean'])} | "
                      f"{100 * o['share_above_1pct']:.0f}% |")
    if as_json:
        Path(as_json).write_text(json.dumps(out, indent=1) + "\n")


def _planned_processes(run: Path) -> int:
    """timer.processes of a run (its plan.json; 3, the default, where the raw results kept none)."""
    plan = run / "plan.json"
    return (json.loads(plan.read_text()).get("processes") if plan.exists() else None) or 3


def _more_regime(run: Path) -> str:
    """How a run's more processes measured, read from the run itself: every shape of their tests or
    the chosen ones only (more_shapes.json, since 33239d0), with the baseline or without it
    (corpus.baseline_off_args, 9279d69 to 2026-12-05)."""
    planned_k = _planned_processes(run)
    extra = [r for r in _rows(run / "process_rows.jsonl") if (r.get("round") or 0) >= planned_k]
    if not extra:
        return "no more processes"
    shapes_file = run / "more_shapes.json"
    nodes = json.loads(shapes_file.read_text()).get("nodes") if shapes_file.is_file() else None
    # (an item's entry was the list of its calls before the calls a shape takes were recorded beside it)
    calls = [c["calls"] if isinstance(c, dict) else c for items in (nodes or {}).values() for c in items.values()]
    # since db6ea04 every item's calls run from its first (its test up to the wide row)
    shapes = ("every shape" if not nodes else "each test up to its wide rows"
              if all(c == list(range(len(c))) for c in calls) else "the wide rows' shapes only")
    base = any(r.get("latency_base") for r in extra)
    return f"{shapes}, {'with' if base else 'without'} the baseline"


def more_by_regime(runs, as_json, min_more=3):
    """`more` for each group of runs whose more processes measured alike (_more_regime)."""
    groups = defaultdict(list)
    for run in runs:
        groups[_more_regime(run)].append(run)
    results = {}
    for label in sorted(groups):
        if label == "no more processes":
            continue
        print(f"### more processes: {label}\n")
        results[label] = more(groups[label], None, min_more)
        print()
    if as_json:
        Path(as_json).write_text(json.dumps(results, indent=1) + "\n")


def more(runs, as_json, min_more=3):
    """More processes against planned ones, row by row (module doc): rows with >= 3 planned and
    >= min_more more processes (one more process is apart, above or below all 3 planned, by chance
    half the time: a weak test a row, a count over many rows)."""
    apart, expected, tested, shifts, used = [], 0.0, 0, [], 0
    seen = set()  # a run unpacked from two archives counts once
    for run in runs:
        content = (run / "process_rows.jsonl").read_bytes() if (run / "process_rows.jsonl").is_file() else b""
        if content in seen:
            continue
        seen.add(content)
        counted = tested
        planned_k = _planned_processes(run)
        by_row = defaultdict(lambda: ([], []))
        for r in _rows(run / "process_rows.jsonl"):
            if r.get("status") == "ok" and r.get("latency"):
                by_row[_key(r)][(r.get("round") or 0) >= planned_k].append(r["latency"])
        for k, (planned, extra) in by_row.items():
            if len(planned) < 3 or len(extra) < min_more:
                continue
            tested += 1
            expected += 2 / math.comb(len(planned) + len(extra), len(extra))
            shift = math.log(statistics.median(extra) / statistics.median(planned))
            if max(extra) < min(planned) or min(extra) > max(planned):
                apart.append((run.name, k, shift))
                if abs(shift) > 0.03:
                    shifts.append((run.name, k, shift, sorted(planned), sorted(extra)))
        used += tested > counted
    out = {"rows": tested, "apart": len(apart), "expected_by_chance": expected,
           "more_faster": sum(a[2] < 0 for a in apart), "more_slower": sum(a[2] > 0 for a in apart)}
    print(f"{tested} rows over {used} runs with >= 3 planned and >= {min_more} more processes: {len(apart)} completely "
          f"apart (chance: {expected:.1f}); the more processes faster in {out['more_faster']}, slower in "
          f"{out['more_slower']}\n")
    print("| run | row | more / planned (median) | planned ms | more ms |\n|---|---|---|---|---|")
    for name, k, shift, planned, extra in sorted(shifts, key=lambda x: -abs(x[2])):
        print(f"| {name} | {k[1]} {str(k[3])[:48]} | {_pct(math.exp(shift) - 1)} | "
              f"{', '.join(f'{v:.4g}' for v in planned)} | {', '.join(f'{v:.4g}' for v in extra)} |")
    if as_json:
        Path(as_json).write_text(json.dumps(out, indent=1) + "\n")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("components", "runs", "timeline", "runlevel", "control", "offsets", "more"))
    p.add_argument("run_dirs", nargs="+", type=Path)
    p.add_argument("--json")
    p.add_argument("--graph-only", action="store_true", help="runs: leave out rows timed by the direct fallback")
    p.add_argument("--reaggregate", action="store_true",
                   help="runs: rows made again from process_rows.jsonl by this checkout's process_stats")
    p.add_argument("--by-regime", action="store_true",
                   help="more: apart for each way the runs' more processes measured (shapes, baseline)")
    p.add_argument("--min-more", type=int, default=3,
                   help="more: the fewest more processes a row needs to be counted (default 3)")
    p.add_argument("--planned-only", action="store_true",
                   help="runs --reaggregate: rows from the planned processes alone (the more processes left out)")
    p.add_argument("--intervals-of", action="append", metavar="RUN",
                   help="runs: judge the intervals of this run's rows only (repeatable; default every run)")
    p.add_argument("--prior-df", type=int, metavar="N",
                   help="runs --reaggregate: the intervals with this prior weight on the stratum's variance "
                        "(process_stats.PRIOR_DF) instead of the shipped one: width against coverage")
    args = p.parse_args()
    if args.prior_df is not None:
        import zlbench.results.process_stats as process_stats

        process_stats.PRIOR_DF = args.prior_df
    if args.planned_only:
        args.reaggregate = True  # rows made again from the planned processes' rows
    if args.what == "more":
        return (more_by_regime if args.by_regime else more)(args.run_dirs, args.json, args.min_more)
    if args.what == "runs":
        return runs_report(args.run_dirs, args.json, args.graph_only, args.reaggregate, args.intervals_of,
                           args.planned_only)
    {"components": components, "runs": runs_report, "timeline": timeline, "runlevel": runlevel,
     "control": control, "offsets": offsets, "more": more}[args.what](
        args.run_dirs, args.json)


if __name__ == "__main__":
    main()
