"""Where a run's fixed cost goes (issue 26): real CPU runs of the demo corpus, split into phases
from the run's own timestamps (units' events, zlbench.log).

    python benchmarks/post_run.py [--repeat 3] [--baseline REV] [--json OUT]

Each repeat runs every case with this checkout (and with --baseline, a `git archive` of REV run
through PYTHONPATH, interleaved) as a user would: `python -m zlbench ... progress=plain`, the
default store on. Phases per run:

  config+plan   script's start of the command -> zlbench.log's "run <dir>" line (interpreter,
                Hydra, imports, plan, identity)
  launch        -> the first benchmark process launched (submitit controller, worker start)
  worker start  -> the first node's start (benchmark process: interpreter, torch, corpus import,
                collection)
  measuring     first node start -> last node end (later processes' starts included: `restarts`)
  after last    last node end -> zlbench.log's "results in" line, split into `teardown` (last
                node end -> its process gone), `jobs end` (-> the orchestrator knows, from the
                debug line "phase: jobs ended", where the code has it) and `report` (tables, plots)
  exit          "results in" -> the command gone: `store` (-> "phase: stored", recording the run in
                the results store), then the interpreter's exit

Then the pieces those phases are made of, timed alone (`--components`): a bare interpreter,
`import torch`, the orchestrator's imports, scipy.stats and matplotlib.pyplot, a dry run.
Prints a markdown table and writes the raw numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {
    # The README's first command: 2 nodes x 3 processes (timer.processes=3, the default).
    "demo": ["ops=[exp,softmax]", "dtypes=[float32]"],
    # One node in one process.
    "one node": ["ops=[exp]", "dtypes=[float32]", "timer.processes=1"],
    # A node-level A/A whose side processes respawn every round (ab.respawn_every=1, the default):
    # 4 rounds, 2 nodes, a fresh pair of processes a round.
    "ab respawn": ["ab=demo_fused_softmax", "ab.aa=true", "ab.rounds=4", "ab.min_rounds=4", "ab.respawn_every=1",
                   "ops=[exp,softmax]", "dtypes=[float32]"],
}
LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]\[zlbench\]\[\w+\] (.*)$")
PHASES = ["config+plan", "launch", "worker start", "measuring", "after last", "exit", "wall"]
DETAIL = ["restarts", "teardown", "jobs end", "report", "store"]


def log_times(run_dir: Path) -> dict:
    """First time each marker line appears in zlbench.log (local time, ms)."""
    marks = {"run": r"\[zlbench\] (run|resuming) ", "results": r"\[zlbench\] results in ",
             "jobs ended": r"phase: jobs ended", "stored": r"phase: stored"}
    out = {}
    for line in (run_dir / "zlbench.log").read_text().splitlines():
        m = LOG_LINE.match(line)
        if not m:
            continue
        t = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
        for key, pattern in marks.items():
            if key not in out and re.search(pattern, m.group(3)):
                out[key] = t
    return out


def unit_events(run_dir: Path) -> list:
    events = []
    for path in run_dir.glob("units/*/events.jsonl"):
        events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(events, key=lambda e: e["t"])


def phases(run_dir: Path, t0: float, t_end: float) -> dict:
    marks = log_times(run_dir)
    ev = unit_events(run_dir)
    launches = [e["t"] for e in ev if e["event"] == "launch"]
    starts = [e["t"] for e in ev if e["event"] == "start"]
    ends = [e["t"] for e in ev if e["event"] == "end"]
    exited = [e["t"] for e in ev if e["event"] == "exited"]
    # Process starts inside the measuring span: a later process' launch -> its first node's start.
    restarts = 0.0
    for t in launches[1:]:
        first = min((s for s in starts if s > t), default=t)
        restarts += first - t
    p = {
        "config+plan": marks["run"] - t0,
        "launch": launches[0] - marks["run"],
        "worker start": starts[0] - launches[0],
        "measuring": ends[-1] - starts[0],
        "restarts": restarts,
        "after last": marks["results"] - ends[-1],
        "exit": t_end - marks["results"],
        "wall": t_end - t0,
    }
    if exited:  # a node-level A/B's resident processes quit without an `exited` event
        p["teardown"] = exited[-1] - ends[-1]
    if "jobs ended" in marks and exited:
        p["jobs end"] = marks["jobs ended"] - exited[-1]
        p["report"] = marks["results"] - marks["jobs ended"]
    if "stored" in marks:
        p["store"] = marks["stored"] - marks["results"]
    return {k: round(v, 3) for k, v in p.items()}


def run_case(args: list, env: dict, where: Path) -> dict:
    run_dir = where / "run"
    cmd = [sys.executable, "-m", "zlbench", *args, f"hydra.run.dir={run_dir}", "progress=plain",
           "hydra.verbose=zlbench"]
    t0 = time.time()
    res = subprocess.run(cmd, cwd=where, env=env, capture_output=True, text=True)
    t_end = time.time()
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {res.returncode}:\n{res.stderr[-3000:]}")
    return phases(run_dir, t0, t_end)


def timed(code: list, env: dict, repeat: int) -> list:
    out = []
    for _ in range(repeat):
        t0 = time.time()
        subprocess.run(code, env=env, capture_output=True, check=True, cwd=tempfile.gettempdir())
        out.append(round(time.time() - t0, 3))
    return out


def probed(code: str, env: dict, repeat: int) -> list:
    """A figure the snippet prints itself (what it times inside one interpreter)."""
    return [round(float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                       check=True).stdout), 4) for _ in range(repeat)]


# What a zygote (one interpreter that imported torch, forking each benchmark process) would pay per
# process instead of an interpreter's start and torch's import.
FORK = ("import os, time, torch\nt = time.time()\npid = os.fork()\nif pid == 0:\n    os._exit(0)\n"
        "os.waitpid(pid, 0)\nprint(time.time() - t)")


def components(env: dict, repeat: int) -> dict:
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        dry = [py, "-m", "zlbench", "ops=[exp,softmax]", "dtypes=[float32]", "dry_run=true",
               f"hydra.run.dir={tmp}/dry"]
        return {
            "python -c pass": timed([py, "-c", "pass"], env, repeat),
            "import torch": timed([py, "-c", "import torch"], env, repeat),
            "import zlbench.engine.run, launchers.local": timed(
                [py, "-c", "import zlbench.engine.run, zlbench.engine.launchers.local"], env, repeat),
            "import scipy.stats": timed([py, "-c", "import scipy.stats"], env, repeat),
            "import matplotlib.pyplot": timed([py, "-c", "import matplotlib; matplotlib.use('Agg'); "
                                              "import matplotlib.pyplot"], env, repeat),
            "import zlbench.store.db, .ingest (sqlalchemy)": timed(
                [py, "-c", "import zlbench.store.db, zlbench.store.ingest"], env, repeat),
            "python -m zlbench dry_run=true (demo)": timed(dry, env, repeat),
            "import submitit (controller)": timed([py, "-c", "import submitit"], env, repeat),
            "import zlbench.engine.jobs (worker)": timed([py, "-c", "import zlbench.engine.jobs"], env, repeat),
            "fork + exit of an interpreter with torch imported": probed(FORK, env, repeat),
        }


def baseline_tree(rev: str, into: Path) -> Path:
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def summarize(runs: list) -> str:
    lines = ["| code | case | " + " | ".join(PHASES + DETAIL) + " |",
             "|---|---|" + "---|" * (len(PHASES) + len(DETAIL))]
    keys = sorted({(r["code"], r["case"]) for r in runs}, key=lambda k: (k[1], k[0] != "this checkout"))
    for code, case in keys:
        rs = [r["phases"] for r in runs if r["code"] == code and r["case"] == case]
        cells = []
        for k in PHASES + DETAIL:
            vs = [r[k] for r in rs if k in r]
            cells.append(f"{statistics.median(vs):.2f} ({min(vs):.2f}-{max(vs):.2f})" if vs else "-")
        lines.append(f"| {code} | {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="a git revision to compare with (run from a `git archive` of it)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    ap.add_argument("--components", action="store_true", help="also time the pieces alone")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"this checkout": dict(os.environ)}
        if a.baseline:
            tree = baseline_tree(a.baseline, Path(tmp) / "baseline")
            codes[f"baseline {a.baseline}"] = dict(os.environ, PYTHONPATH=str(tree))
        runs = []
        for i in range(a.repeat):
            for case in a.cases.split(","):
                for code, env in codes.items():
                    where = Path(tmp) / f"{len(runs)}"
                    where.mkdir()
                    p = run_case(CASES[case], env, where)
                    runs.append({"code": code, "case": case, "repeat": i, "phases": p})
                    print(f"{code:>20} {case:>9} #{i}: " + " ".join(f"{k}={v}" for k, v in p.items()),
                          file=sys.stderr, flush=True)
        comp = {code: components(env, a.repeat) for code, env in codes.items()} if a.components else {}
    load = os.getloadavg()
    result = {"date": datetime.now().isoformat(timespec="seconds"), "command": " ".join(sys.argv),
              "machine": f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "load_after": [round(x, 2) for x in load], "runs": runs, "components": comp}
    print(f"{result['date']}, {result['machine']}, load average after {result['load_after']}")
    print("seconds, median (min-max) over repeats\n")
    print(summarize(runs))
    for code, pieces in comp.items():
        print(f"\n{code}, each piece alone (s, median (min-max)):\n")
        for name, vs in pieces.items():
            print(f"- {name}: {statistics.median(vs):.3f} ({min(vs):.3f}-{max(vs):.3f})")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
