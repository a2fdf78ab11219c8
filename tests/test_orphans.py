"""Every process of a run dies with it: a SIGKILL of the orchestrator alone (as the OOM killer
sends it) takes submitit's controllers, the workers and the benchmark processes along, and the run
dir stays locked while any process of a run lives, so a resume right after measures every row once.
Real zlbench processes, real signals."""

import collections
import csv
import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from .conftest import FIXTURES, measured_ends, wait_for, zlbench

pytestmark = pytest.mark.slow
WAIT = FIXTURES / "wait_corpus"
ARGS = ["backend=cpu", "backend.slots=2", "corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_0*']",
        "progress=plain", "timer.processes=1"]


def start(run_dir, *extra, env=None, log=None):
    """A zlbench run in the background, its stderr into `log` (a file, not a pipe: an orphan that
    inherited the pipe would keep a reader waiting for its end)."""
    full = {k: v for k, v in os.environ.items() if k not in ("ZL_BACKEND", "OP", "OP_FILE", "TEST_NODE")}
    full.update({"WAIT_S": "0.3", **(env or {})})
    log = log or run_dir.parent / f"{run_dir.name}.stderr"
    with open(log, "a") as err:
        return subprocess.Popen([sys.executable, "-m", "zlbench", f"hydra.run.dir={run_dir}", *ARGS, *extra],
                                cwd=run_dir.parent, env=full, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)


def of_run(run_dir, known=()):
    """Live processes of the run: those known by pid, and any working in the run dir or naming it
    (benchmark processes run in their unit dirs; submitit's take its folder as argument)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if p.pid in known or p.cwd().startswith(str(run_dir)) or str(run_dir) in " ".join(p.cmdline()):
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


def rows(run_dir):
    out = collections.Counter()
    for line in (run_dir / "rows.jsonl").read_text().splitlines():
        r = json.loads(line)
        out[(r["op"], r["dtype"], str(r["shape"]))] += 1
    return out


def statuses(run_dir):
    with open(run_dir / "ops_status.csv") as f:
        return {r["test_node"]: r["status"] for r in csv.DictReader(f)}


def test_sigkill_of_the_orchestrator_alone_takes_every_process_of_the_run_and_a_resume_measures_each_row_once(
        tmp_path):
    run = tmp_path / "run"
    # Nodes 6-9 wait ten minutes: an orphan would still be measuring long after the bound below.
    proc = start(run, env={"WAIT_EACH": "0.3,0.3,0.3,0.3,0.3,0.3,600,600,600,600"})
    main = psutil.Process(proc.pid)

    def measuring():
        return (run / "units").exists() and len(measured_ends(run)) >= 3 and \
            sum(1 for p in main.children(recursive=True) if "pytest" in " ".join(p.cmdline())) >= 1

    assert wait_for(measuring, timeout=180), (tmp_path / "run.stderr").read_text()[-3000:]
    family = [p.pid for p in main.children(recursive=True)]
    # Two submitit controllers, two workers, at least one benchmark process.
    assert len(family) >= 5, family
    os.kill(proc.pid, signal.SIGKILL)  # the orchestrator alone, not its process group
    proc.wait()
    assert wait_for(lambda: not of_run(run, family), timeout=60), \
        [" ".join(psutil.Process(p).cmdline())[:200] for p in of_run(run, family)]
    # Right away: the resume measures what is missing, next to nothing of the killed run.
    res = zlbench(f"hydra.run.dir={tmp_path / 'elsewhere'}", *ARGS, f"resume={run}", cwd=tmp_path,
                  env={"WAIT_S": "0.3"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resuming" in res.stderr
    assert set(statuses(run).values()) == {"ok"} and len(statuses(run)) == 10
    counted = rows(run)
    assert len(counted) == 20 and set(counted.values()) == {1}, counted  # two shapes per node, once each
    assert set(collections.Counter(measured_ends(run)).values()) == {1}


HOLD = """
import sys
from zlbench.engine.locks import worker_of
with worker_of(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_run_waits_while_a_worker_of_an_earlier_run_holds_the_run_dir_and_is_refused_after_a_while(tmp_path):
    run = tmp_path / "run"
    assert zlbench(f"hydra.run.dir={run}", *ARGS, cwd=tmp_path, env={"WAIT_S": "0"}).returncode == 0
    before = (run / "ops_status.csv").read_text()
    # A worker of the earlier run still alive (what a worker does first: hold the run dir).
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "ZLBENCH_RUN_DIR": str(run)})
    try:
        assert holder.stdout.readline().strip() == "held"
        res = zlbench(f"hydra.run.dir={tmp_path / 'x'}", *ARGS, f"resume={run}", cwd=tmp_path,
                      env={"WAIT_S": "0", "ZLBENCH_RUN_DIR_WAIT_S": "1"})
        assert res.returncode == 2, res.stderr[-3000:]
        assert "still in use by processes of an earlier run" in res.stderr and f"pid {holder.pid}" in res.stderr
        assert "Fix:" in res.stderr and "Traceback" not in res.stderr
        assert (run / "ops_status.csv").read_text() == before
        # A run waits for them (default wait), and goes on once they are gone.
        log = tmp_path / "resumed.stderr"
        resumed = start(run, f"resume={run}", env={"WAIT_S": "0"}, log=log)
        assert wait_for(lambda: "waiting up to" in log.read_text() or resumed.poll() is not None)
        assert f"pid {holder.pid}" in log.read_text() and resumed.poll() is None, log.read_text()[-3000:]
    finally:
        holder.communicate("")  # it releases the run dir and ends
    assert resumed.wait(timeout=300) == 0, log.read_text()[-3000:]
    assert set(statuses(run).values()) == {"ok"}
