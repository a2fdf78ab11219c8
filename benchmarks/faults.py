"""Fault injection: kill runs at random points, resume them, and count rows lost or duplicated.

    python benchmarks/faults.py --iterations 10 [--slots 2] [--seed 1]

Each iteration starts a real zlbench run of the wait fixture corpus (every node records one dtype,
waits, then records the other, so a kill can land between a node's records), injects one fault at a
random moment, then resumes the run dir until it completes, and compares its rows with an
uninterrupted reference run. Faults: SIGKILL of the whole process group, Ctrl-C (SIGINT) to the main
process, SIGTERM to the main process, SIGKILL of one submitit job (the worker), and SIGKILL of the
process group during the resume too. The answer must be 0 rows lost and 0 duplicated.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WAIT = REPO / "tests" / "fixtures" / "wait_corpus"
ENV = {"WAIT_S": "0.2", "PARTIAL_WAIT_S": "0.6"}
FAULTS = ("sigkill_group", "sigint_main", "sigterm_main", "sigkill_worker", "sigkill_group_twice")


def args_for(run_dir: Path, slots: int):
    return [f"hydra.run.dir={run_dir}", "backend=cpu", f"backend.slots={slots}", "corpus=flaggems",
            f"corpus.root={WAIT}", "ops=['wait_0*']", "progress=none"]


def env():
    e = {k: v for k, v in os.environ.items() if k not in ("ZL_BACKEND", "OP", "OP_FILE", "TEST_NODE")}
    return {**e, **ENV}


def rows(run_dir: Path) -> collections.Counter:
    out = collections.Counter()
    for line in (run_dir / "rows.jsonl").read_text().splitlines():
        r = json.loads(line)
        out[(r["op"], r["dtype"], r["shape"], r["status"], r["latency"])] += 1
    return out


def start(run_dir: Path, slots: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "zlbench", *args_for(run_dir, slots)], cwd=run_dir.parent,
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def worker_pids(run_dir: Path):
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"submitit.core._submit" in cmd and str(run_dir).encode() in cmd:
            out.append(int(pid))
    return out


def inject(proc: subprocess.Popen, fault: str, run_dir: Path) -> None:
    if fault.startswith("sigkill_group"):
        os.killpg(proc.pid, signal.SIGKILL)
    elif fault == "sigint_main":
        proc.send_signal(signal.SIGINT)
    elif fault == "sigterm_main":
        proc.send_signal(signal.SIGTERM)
    elif fault == "sigkill_worker":
        for pid in worker_pids(run_dir)[:1]:
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=120)


def resume_until_done(run_dir: Path, slots: int, rng: random.Random, kill_once: bool) -> int:
    """Resume until the run exits 0; returns how many resumes it took."""
    for attempt in range(1, 6):
        proc = start(run_dir, slots)
        if kill_once and attempt == 1:
            time.sleep(rng.uniform(0.5, 3.0))
            inject(proc, "sigkill_group", run_dir)
            continue
        proc.wait(timeout=300)
        if proc.returncode == 0:
            return attempt
    raise RuntimeError(f"{run_dir} did not complete after 5 resumes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args()
    rng = random.Random(a.seed)
    work = Path(tempfile.mkdtemp(prefix="zl_faults_"))
    ref = work / "reference"
    subprocess.run([sys.executable, "-m", "zlbench", *args_for(ref, a.slots)], cwd=work, env=env(), check=True,
                   capture_output=True)
    expected = rows(ref)
    total_lost = total_dup = 0
    print(f"reference: {sum(expected.values())} rows; faults at random moments, {a.iterations} iterations")
    print(f"{'iter':>4} {'fault':22} {'at_s':>5} {'exit':>4} {'resumes':>7} {'lost':>4} {'dup':>4}")
    for i in range(a.iterations):
        fault = FAULTS[i % len(FAULTS)]
        run = work / f"run{i}"
        proc = start(run, a.slots)
        at = rng.uniform(1.5, 6.0)
        time.sleep(at)
        inject(proc, fault, run)
        if not (run / "plan.json").exists():
            print(f"{i:4d} {fault:22} {at:5.1f}  (killed before the plan was written; skipped)")
            continue
        resumes = resume_until_done(run, a.slots, rng, kill_once=fault == "sigkill_group_twice")
        got = rows(run)
        lost = sum((expected - got).values())
        dup = sum((got - expected).values())
        total_lost += lost
        total_dup += dup
        print(f"{i:4d} {fault:22} {at:5.1f} {proc.returncode:4d} {resumes:7d} {lost:4d} {dup:4d}")
    print(f"rows lost: {total_lost}, rows duplicated: {total_dup} (work dir {work})")
    return 0 if total_lost == total_dup == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
