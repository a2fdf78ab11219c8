"""Engine benchmarks (issue: execution engine), measured side by side in one run on this machine.

    python benchmarks/engine.py overhead [--nodes 64]
    python benchmarks/engine.py scaling [--nodes 64 --wait 1.0 --devices 1,2,4,8]

overhead: zlbench over N no-op nodes of the waiting corpus (one pytest process per device, all
plugins), against bare pytest over the same nodes in one process, and against one pytest process
per node (the old runner's way). zlbench's own overhead per node = (zlbench - bare) / N.
scaling: the same corpus with nodes that wait (not compute, so a 2-core machine does not limit
it) on 1, 2, 4, 8 simulated devices (cpu slots); throughput relative to one device.
balance: uneven nodes (--pattern) with no cost estimates, on --devices: nodes kept where the plan
put them (launcher.steal=false) against devices taking nodes waiting elsewhere; efficiency is
(work / devices) / measuring span.
    python benchmarks/engine.py balance [--nodes 32 --devices 2,4 --pattern 3,0.5,...]
teardown: a demo A/B (--rounds) with and without the benchmark processes' interpreter teardown
(corpus.fast_exit), alternated --repeat times: wall and teardown per process.
    python benchmarks/engine.py teardown [--rounds 4 --repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.run_phases import measuring_span, phases  # noqa: E402

WAIT = REPO / "tests" / "fixtures" / "wait_corpus"


def timed(cmd, env=None, cwd=None):
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env={**os.environ, **(env or {})}, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{res.stderr[-2000:]}")
    return time.perf_counter() - t0


def zl(run_dir, nodes, extra=(), wait="0", env=None):
    return timed([sys.executable, "-m", "zlbench", f"hydra.run.dir={run_dir}", "backend=cpu",
                  "corpus=flaggems", f"corpus.root={WAIT}", f"ops=[{','.join(nodes)}]", "progress=none",
                  *extra], env={"WAIT_S": wait, **(env or {})})


def overhead(args):
    nodes = [f"wait_{i:02d}" for i in range(args.nodes)]
    ids = [str(WAIT / "benchmark" / "test_wait.py") + f"::test_{n}" for n in nodes]
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(WAIT), "-c",
            str(WAIT / "pytest.ini")]
    with tempfile.TemporaryDirectory() as tmp:
        t_zl = zl(Path(tmp) / "zl", nodes)
        t_bare = timed(base + ids, env={"WAIT_S": "0"}, cwd=tmp)
        t_per = sum(timed(base + [i], env={"WAIT_S": "0"}, cwd=tmp) for i in ids)
    out = {"nodes": args.nodes, "zlbench_s": round(t_zl, 2), "bare_pytest_one_process_s": round(t_bare, 2),
           "one_pytest_per_node_s": round(t_per, 2),
           "zlbench_overhead_per_node_s": round((t_zl - t_bare) / args.nodes, 4),
           "one_process_per_node_cost_per_node_s": round(t_per / args.nodes, 4)}
    return out


def scaling(args):
    nodes = [f"wait_{i:02d}" for i in range(args.nodes)]
    out = {"nodes": args.nodes, "wait_s": args.wait, "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.devices.split(",")]:
            t = zl(Path(tmp) / f"d{n}", nodes, [f"backend.slots={n}"], wait=str(args.wait))
            span = measuring_span(Path(tmp) / f"d{n}")
            out["runs"].append({"devices": n, "wall_s": round(t, 2), "nodes_per_s": round(args.nodes / t, 3),
                                "measuring_s": round(span, 2), "measuring_nodes_per_s": round(args.nodes / span, 3)})
    one, one_m = out["runs"][0]["nodes_per_s"], out["runs"][0]["measuring_nodes_per_s"]
    for r in out["runs"]:
        r["efficiency_wall"] = round(r["nodes_per_s"] / one / r["devices"], 3)
        r["efficiency_measuring"] = round(r["measuring_nodes_per_s"] / one_m / r["devices"], 3)
    return out


def balance(args):
    """Uneven nodes and no cost estimates (a first run; or estimates that included compiling):
    nodes where the plan put them (launcher.steal=false) against devices taking waiting nodes."""
    nodes = [f"wait_{i:02d}" for i in range(args.nodes)]
    pattern = [float(x) for x in args.pattern.split(",")]
    work = sum(pattern[i % len(pattern)] for i in range(args.nodes))
    out = {"nodes": args.nodes, "pattern_s": pattern, "work_s": round(work, 2), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.devices.split(",")]:
            row = {"devices": n, "ideal_s": round(work / n, 2)}
            for steal in ("false", "true"):
                d = Path(tmp) / f"d{n}_{steal}"
                t = zl(d, nodes, [f"backend.slots={n}", f"launcher.steal={steal}"], env={"WAIT_EACH": args.pattern})
                span = measuring_span(d)
                key = "steal" if steal == "true" else "static"
                row[f"{key}_measuring_s"] = round(span, 2)
                row[f"{key}_wall_s"] = round(t, 2)
                row[f"{key}_efficiency"] = round(work / n / span, 3)
            out["runs"].append(row)
    return out


def teardown(args):
    """An interleaved A/B of the demo corpus (one pytest process per side and round), with the
    benchmark processes' interpreter teardown (corpus.fast_exit=false) and without it (true),
    alternated --repeat times; process start and teardown per process from the events."""
    out = {"rounds": args.rounds, "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for fast in ("false", "true"):
                d = Path(tmp) / f"{fast}{i}"
                t = timed([sys.executable, "-m", "zlbench", f"hydra.run.dir={d}", "ab=demo_fused_softmax",
                           f"ab.rounds={args.rounds}", "ops=[softmax]", "progress=none", f"corpus.fast_exit={fast}"])
                p = phases(d)
                out["runs"].append({"fast_exit": fast == "true", "wall_s": round(t, 2), "processes": len(p["process_teardown_s"]),
                                    "teardown_s_median": sorted(p["process_teardown_s"])[len(p["process_teardown_s"]) // 2]})
    for fast in (False, True):
        walls = sorted(r["wall_s"] for r in out["runs"] if r["fast_exit"] == fast)
        out[f"wall_s_median_fast_exit_{str(fast).lower()}"] = walls[len(walls) // 2]
    out["ratio"] = round(out["wall_s_median_fast_exit_true"] / out["wall_s_median_fast_exit_false"], 3)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["overhead", "scaling", "balance", "teardown"])
    p.add_argument("--rounds", type=int, default=4, help="teardown: A/B rounds")
    p.add_argument("--repeat", type=int, default=3, help="teardown: runs of each, alternated")
    p.add_argument("--pattern", default="3,0.5,0.5,0.5,1,0.5,0.5,0.5",
                   help="balance: seconds each node waits, by node index modulo its length")
    p.add_argument("--nodes", type=int, default=64)
    p.add_argument("--wait", type=float, default=1.0)
    p.add_argument("--devices", default="1,2,4,8")
    args = p.parse_args()
    result = {"overhead": overhead, "scaling": scaling, "balance": balance, "teardown": teardown}[args.what](args)
    result["machine"] = f"{platform.node()} {os.cpu_count()} cores, python {platform.python_version()}"
    result["date"] = time.strftime("%Y-%m-%d")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
