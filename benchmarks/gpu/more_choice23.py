#!/usr/bin/env python3
"""Which wide rows are worth more processes: replays a choice rule on plain runs already measured.

A plain run at defaults measures every node in timer.processes passes, then gives more passes (up to
timer.max_processes) to the nodes with a row >= 20 us wider than timer.target_width. Some of those
rows cannot come near the target however many processes they get: their processes drew different
autotune picks, or a refused capture timed them directly, and each more pass pays the node's tuning
again. This script takes runs that got more passes and asks, for each `--slack` S, what the run
would have reported and saved had only the wide rows whose projected width at max_processes
(projected_width below, from the row's interval
as process_stats made it) is at most S x target_width got them:

    python3 benchmarks/gpu/more_choice23.py --group F RUN_A RUN_B RUN_C --group H RUN_D RUN_E ...

Per group (runs of one set in one call) and slack: the interval coverage between the runs, the width
of rows >= 20 us (p50/p90), run to run |ln ratio| of rows >= 5 us and of all rows (p90/max), and the
more passes' node seconds a run would not have spent, against its wall. The runs' more passes measured
what they measured; a rule that leaves nodes out cannot add passes that were not run (under the
budget, the nodes kept might have fitted more), so the widths are an upper bound for the rule.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Mapping, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from variance23 import _q, runs_report  # noqa: E402
from zlbench.results.events import base_node, node_seconds, read_events  # noqa: E402
from zlbench.results.process_stats import (KEY, LEVEL, PRIOR_DF, RUN_SD, aggregate,  # noqa: E402
                                           median_var_factor, relative_width, wide_rows)
from zlbench.results.schema import MARKER_PROCESS_UNSTABLE  # noqa: E402


def _latency_unstable(row: Mapping) -> bool:
    """Whether the row's own latency (not only its baseline) is marked for processes that disagree
    (_row's reason for it: 'processes read ...'; the baseline's is 'baseline processes read ...')."""
    reasons = (row.get("marker_reason") or "").split("; ")
    return MARKER_PROCESS_UNSTABLE in (row.get("markers") or []) and any(
        r.startswith("processes read ") for r in reasons)


def projected_width(row: Mapping, processes: int) -> Optional[float]:
    """The relative width (hi - lo) / latency the row's interval would have over `processes`
    processes if their spread stayed what its processes show now: what more processes can bring it
    (the t quantile and the median's variance both shrink; the run-level share does not). A row
    whose processes disagree beyond its stratum's (a pick drawn per process) keeps its own variance
    with its own degrees of freedom; the others the moderated one. None where it has no interval."""
    from scipy import stats

    ci, latency, n = row.get("latency_ci"), row.get("latency"), row.get("processes") or 0
    if not ci or not latency or n < 2 or processes < n:
        return relative_width(row) if ci and latency else None
    df_now, df_then = (n - 1, processes - 1) if _latency_unstable(row) else (PRIOR_DF + n - 1, PRIOR_DF + processes - 1)
    runs_part = 2 * (stats.norm.ppf(0.5 + LEVEL / 2) * RUN_SD) ** 2
    half = math.log(ci[1] / ci[0]) / 2
    var = max(0.0, half * half - runs_part) / (stats.t.ppf(0.5 + LEVEL / 2, df_now) ** 2 * 2 * median_var_factor(n))
    half = math.sqrt(stats.t.ppf(0.5 + LEVEL / 2, df_then) ** 2 * var * 2 * median_var_factor(processes) + runs_part)
    center = math.log(ci[0]) + math.log(ci[1] / ci[0]) / 2
    return (math.exp(center + half) - math.exp(center - half)) / latency


def _rows(path: Path) -> List[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wall(run: Path) -> float:
    times = [e["t"] for u in (run / "units").glob("*") for e in read_events(u / "events.jsonl")
             if e.get("event") in ("launch", "exited") and e.get("t")]
    return max(times) - min(times) if times else 0.0


def simulate(run: Path, slack, target: float, out: Path) -> Dict[str, float]:
    """Writes the run's rows as the rule would have made them under out/<run name>/rows.jsonl;
    returns what it chose and saved."""
    plan = json.loads((run / "plan.json").read_text())
    first, last = plan.get("processes") or 3, plan.get("max_processes") or 6
    rows = _rows(run / "process_rows.jsonl")
    planned = [r for r in rows if (r.get("round") or 0) < first]
    wide = wide_rows(aggregate(planned, first), target)
    kept = [r for r in wide if slack is None or (projected_width(r, last) or 0) <= slack * target]
    keys = {tuple(r.get(k) for k in KEY) for r in kept}
    nodes = {base_node(r.get("node") or "") for r in kept}
    chosen = planned + [r for r in rows if (r.get("round") or 0) >= first and tuple(r.get(k) for k in KEY) in keys]
    saved = 0.0
    for unit in (run / "units").glob("*"):
        if int(unit.name.split(".r")[1].split(".")[0]) >= first:
            saved += sum(s for n, s in node_seconds(read_events(unit / "events.jsonl")).items()
                         if base_node(n) not in nodes)
    dest = out / run.name
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in aggregate(chosen, first)))
    (dest / "units").mkdir(exist_ok=True)
    return {"wide": len(wide), "kept": len(kept), "nodes_kept": len(nodes),
            "nodes_wide": len({base_node(r.get("node") or "") for r in wide}), "saved_s": saved, "wall_s": _wall(run)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--group", nargs="+", action="append", required=True, metavar=("NAME", "RUN"))
    p.add_argument("--slack", type=float, nargs="+", default=[1.0, 1.5, 2.0, 3.0])
    p.add_argument("--target", type=float, default=0.02)
    p.add_argument("--json")
    args = p.parse_args()
    result = {}
    for name, *runs in args.group:
        for slack in [None, *args.slack]:
            with tempfile.TemporaryDirectory() as tmp:
                chose = {Path(r).name: simulate(Path(r), slack, args.target, Path(tmp)) for r in runs}
                report = Path(tmp) / "report.json"
                import contextlib
                import io
                with contextlib.redirect_stdout(io.StringIO()):
                    runs_report([Path(tmp) / Path(r).name for r in runs], str(report))
                rep = json.loads(report.read_text())
            label = "every wide row (as run)" if slack is None else f"projected <= {slack:g} x target"
            saved = sum(c["saved_s"] for c in chose.values()) / sum(c["wall_s"] for c in chose.values())
            result[f"{name} {label}"] = {"chose": chose, "report": rep, "saved_share": saved}
            print(f"{name:4} {label:28} rows kept {sum(c['kept'] for c in chose.values()):3}/"
                  f"{sum(c['wide'] for c in chose.values()):3} nodes {sum(c['nodes_kept'] for c in chose.values()):2}/"
                  f"{sum(c['nodes_wide'] for c in chose.values()):2} | saved {100 * saved:4.1f}% of wall | coverage "
                  f"{100 * (rep['rows_of_a_run_holding_every_other_run'] or math.nan):5.1f}% | width>=20us p50 "
                  f"{100 * rep['width_ge20us_p50']:.2f}% p90 {100 * rep['width_ge20us_p90']:.2f}% | >=5us p90 "
                  f"{100 * rep['run_to_run_ge5us']['p90']:.2f}% max {100 * rep['run_to_run_ge5us']['max']:.1f}% | all p90 "
                  f"{100 * rep['run_to_run_all']['p90']:.2f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
