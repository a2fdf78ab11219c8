"""What the more passes' passengers (engine/more_processes.py passenger_rows: other tests' rows under
20 us that read apart by process, joining more passes that run anyway) would add to archived plain
runs, offline: each run dir's choice after its planned passes is made again by this tree's code, with
passengers and without, and the estimated measuring time of one more pass compared.

    python3 benchmarks/gpu/passengers23.py [--spares N] RUN_DIR [RUN_DIR ...]

Prints one JSON object a run: the tests chosen without and with passengers, the passes, the passenger
rows (op, shape, us, what their processes read) and the estimated seconds one more pass measures
(pass_seconds) either way. A run's more passes are left out before the replay (its plan's units of
round >= timer.processes and their events), so the choice sees what the run saw when it chose.
--spares: the more passes whose processes had started ahead (engine/spares.py; default 3: on the
16-core GPU machine every more pass of timer.max_processes' 6 after 3 planned)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

from zlbench.engine import more_processes as mp


def planned_only(run_dir: Path, into: Path) -> SimpleNamespace:
    shutil.copytree(run_dir, into, ignore=shutil.ignore_patterns("cache", "submitit", "more"))
    plan = json.loads((into / "plan.json").read_text())
    first = plan["processes"] or 1
    for u in plan["units"]:
        if u["round"] >= first:
            shutil.rmtree(into / "units" / u["unit_id"], ignore_errors=True)
    plan["units"] = [u for u in plan["units"] if u["round"] < first]
    (into / "plan.json").write_text(json.dumps(plan))
    for stale in ("rows.jsonl", "process_rows.jsonl", "more_shapes.json"):
        (into / stale).unlink(missing_ok=True)
    return SimpleNamespace(processes=first, max_processes=plan["max_processes"], more_passes=object(),
                           devices=plan["devices"], more_together=True,
                           units=[SimpleNamespace(**u) for u in plan["units"]])


def replay(run_dir: Path, spares: int) -> dict:
    from zlbench.results.tables import collect

    timer = json.loads((run_dir / "run_identity.json").read_text())["timer"]
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / run_dir.name
        plan = planned_only(run_dir, copy)
        with_them = mp.more_wanted(copy, plan, timer, None, spares)
        keep, mp.passenger_rows = mp.passenger_rows, lambda *a, **k: []
        try:
            without = mp.more_wanted(copy, plan, timer, None, spares)
        finally:
            mp.passenger_rows = keep
        joined = set(with_them.nodes) - set(without.nodes)
        riding = [r for r in mp.passenger_rows(collect(copy)[0], dict.fromkeys(without.nodes))
                  if mp.base_node(r.get("node") or "") in joined]

        def measuring(nodes) -> float:  # whole tests: an upper bound where a pass times up to a row
            return round(mp.pass_seconds(copy, plan, nodes)[1], 2) if nodes else 0.0

        return {"run": str(run_dir), "planned_s": round(mp.planned_seconds(copy, plan), 1),
                "passes": [without.last - plan.processes, with_them.last - plan.processes],
                "tests": [len(without.nodes), len(with_them.nodes)],
                "joined": sorted(n.rsplit("::", 1)[-1] for n in joined),
                "passenger_rows": [(r["op"], r["shape"], round(r["latency"] * 1000, 2)) for r in riding],
                "pass_measuring_s": [measuring(without.nodes), measuring(with_them.nodes)]}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spares", type=int, default=3)
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args()
    for run in args.runs:
        print(json.dumps(replay(run, args.spares)))
