"""Multi-GPU verification (issue 7) from the run dirs of gpu/multi_gpu.sh.

    python benchmarks/multi_gpu.py --one RUN_1GPU --many RUN_NGPU [--ab RUN_AB] [--wall wall.txt] [--json out.json]

- pinning: every row names the GPU its process saw (torch's device name and PCI bus id); each
  device of the plan must map to one bus id, no two devices to the same one, and that bus id must be
  the one the vendor tool listed for the device;
- scaling: nodes measured per second of measuring span (first node start to last node end) and per
  second of wall time (wall.txt, end to end), N devices against one, over the nodes both runs
  measured ok;
- ab: both sides and every round of a row on one GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.run_phases import measuring_span, phases  # noqa: E402
from zlbench.results.rundir import load_plan  # noqa: E402
from zlbench.results.tables import load_rows, load_status, run_pinning_problems  # noqa: E402
from zlbench.results.schema import shape_key  # noqa: E402


def pinning(run_dir: Path) -> dict:
    """The GPU each device's rows were measured on, and zlbench's own pinning check over them."""
    plan = load_plan(run_dir)
    seen = defaultdict(set)  # device -> {(name, bus)}
    missing = 0
    for r in load_rows(run_dir):
        if r.get("status") != "ok":
            continue
        if not r.get("device_bus_id"):
            missing += 1
            continue
        seen[r["device"]].add((r.get("device_name"), r["device_bus_id"]))
    problems = [f"device {dev} measured on several GPUs: {sorted(ids)}" for dev, ids in sorted(seen.items())
                if len(ids) != 1] + run_pinning_problems(run_dir)
    return {"devices": {str(d): sorted(map(list, ids)) for d, ids in sorted(seen.items())},
            "listed": {str(d["index"]): d.get("bus_id", "") for d in plan["devices"]},
            "rows_without_bus_id": missing, "problems": problems,
            "ok": not problems and not missing and len(seen) == len(plan["devices"])}


def throughput(run_dir: Path, nodes: set, wall: float | None) -> dict:
    status = [s for s in load_status(run_dir) if s["status"] == "ok" and s["test_node"] in nodes]
    span = measuring_span(run_dir)
    plan = load_plan(run_dir)
    out = {"devices": len(plan["devices"]), "nodes": len(status), "measuring_s": round(span, 1),
           "node_s": round(sum(float(s["wall_s"]) for s in status), 1),
           "measuring_nodes_per_s": round(len(status) / span, 4)}
    if wall:
        out.update(wall_s=wall, wall_nodes_per_s=round(len(status) / wall, 4))
    return out


def ok_nodes(run_dir: Path) -> set:
    return {s["test_node"] for s in load_status(run_dir) if s["status"] == "ok"}


def ab_same_gpu(run_dir: Path) -> dict:
    where = defaultdict(set)
    for r in load_rows(run_dir):
        if r.get("status") == "ok":
            where[(r["op"], r["dtype"], shape_key(r.get("shape")))].add((r.get("device"), r.get("device_bus_id")))
    split = [k for k, buses in where.items() if len(buses) != 1]
    sides = {r.get("side") for r in load_rows(run_dir)}
    return {"rows": len(where), "rows_on_more_than_one_gpu": len(split), "sides": sorted(map(str, sides)),
            "gpus": sorted({str(b) for buses in where.values() for b in buses}), "ok": bool(where) and not split}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one", type=Path, required=True)
    p.add_argument("--many", type=Path, required=True)
    p.add_argument("--ab", type=Path)
    p.add_argument("--wall", type=Path, help="lines 'NAME SECONDS ...' (NAME = run dir name)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    walls = {}
    if args.wall and args.wall.is_file():
        for line in args.wall.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2:
                walls[parts[0]] = float(parts[1])
    nodes = ok_nodes(args.one) & ok_nodes(args.many)
    one = throughput(args.one, nodes, walls.get(args.one.name))
    many = throughput(args.many, nodes, walls.get(args.many.name))
    n = many["devices"]
    scaling = {"nodes_compared": len(nodes), "one": one, "many": many,
               "efficiency_measuring": round(many["measuring_nodes_per_s"] / one["measuring_nodes_per_s"] / n, 3)}
    if "wall_s" in one and "wall_s" in many:
        scaling["efficiency_wall"] = round(many["wall_nodes_per_s"] / one["wall_nodes_per_s"] / n, 3)
    out = {"pinning": {"one": pinning(args.one), "many": pinning(args.many)}, "scaling": scaling,
           "phases": {"one": phases(args.one), "many": phases(args.many)}}
    if args.ab:
        out["pinning"]["ab"] = pinning(args.ab)
        out["ab_same_gpu"] = ab_same_gpu(args.ab)
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
