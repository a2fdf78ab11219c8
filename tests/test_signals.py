"""A Ctrl-C is never lost: SIGINT to the orchestrator at any moment of a run's start (while it starts
submitit's job controllers, while a worker starts its benchmark process, once nodes are measured)
stops the run with exit 130, writes the tables, and leaves no process behind; SIGHUP (a closed
terminal or SSH session) is handled as SIGINT is. Real zlbench processes, real signals; each moment
is found by what appears on disk, not by sleeping."""

import json
import os
import signal

import psutil
import pytest

from .conftest import wait_for, zlbench
from .test_orphans import ARGS, of_run, start, statuses

pytestmark = pytest.mark.slow


def events(run_dir, kind):
    out = []
    for path in run_dir.glob("units/*/events.jsonl"):
        out += [e for e in map(json.loads, path.read_text().splitlines()) if e.get("event") == kind]
    return out


# The moments of a run's start, each as the first sign of it on disk.
MOMENTS = {
    # The orchestrator is starting the job controllers: it pickles each job just before it starts it.
    "starting_jobs": lambda run: any((run / "submitit").glob("*.pkl")),
    # A worker is starting its benchmark process.
    "starting_benchmark": lambda run: bool(events(run, "launch")),
    # The first node is being measured.
    "measuring": lambda run: bool(events(run, "start")),
}


@pytest.mark.parametrize("moment,signum,group", [
    ("starting_jobs", signal.SIGINT, False), ("starting_benchmark", signal.SIGINT, False),
    ("measuring", signal.SIGINT, False), ("measuring", signal.SIGHUP, False),
    # A Ctrl-C at the terminal goes to its whole foreground process group: the orchestrator's
    # processes run in sessions of their own, so it alone gets it, and stops them all.
    ("measuring", signal.SIGINT, True)])
def test_an_interrupt_at_any_moment_of_the_start_stops_the_run_and_leaves_nothing(tmp_path, moment, signum, group):
    run = tmp_path / "run"
    # Four job controllers to start (a wider window), nodes slow enough not to finish first.
    proc = start(run, "backend.slots=4", env={"WAIT_S": "2"})
    main = psutil.Process(proc.pid)
    seen = MOMENTS[moment]
    assert wait_for(lambda: (run / "submitit").is_dir() and seen(run) or proc.poll() is not None, timeout=180)
    family = [p.pid for p in main.children(recursive=True)]
    if group:
        os.killpg(proc.pid, signum)
    else:
        os.kill(proc.pid, signum)  # the orchestrator alone
    assert proc.wait(timeout=120) == 130, (tmp_path / "run.stderr").read_text()[-3000:]
    err = (tmp_path / "run.stderr").read_text()
    assert "Traceback" not in err and f"resume={run}" in err, err[-3000:]
    assert wait_for(lambda: not of_run(run, family), timeout=60), of_run(run, family)
    st = statuses(run)
    assert len(st) == 10 and set(st.values()) != {"ok"}, st  # every node listed; some left to resume


def test_an_interrupted_start_resumes_to_every_node(tmp_path):
    run = tmp_path / "run"
    proc = start(run, env={"WAIT_S": "1"})
    assert wait_for(lambda: bool(events(run, "launch")) or proc.poll() is not None, timeout=180)
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    res = zlbench(f"hydra.run.dir={tmp_path / 'x'}", *ARGS, f"resume={run}", cwd=tmp_path, env={"WAIT_S": "0.1"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert set(statuses(run).values()) == {"ok"} and len(statuses(run)) == 10


def test_a_second_interrupt_exits_at_once_and_names_the_commands_that_finish_the_run(tmp_path):
    """A double Ctrl-C said only "resume the run dir": no command with the run's overrides, and no word
    that the tables were not written nor the run recorded."""
    import time

    run = tmp_path / "run"
    proc = start(run, env={"WAIT_S": "2"})
    assert wait_for(lambda: bool(events(run, "start")) or proc.poll() is not None, timeout=180)
    os.kill(proc.pid, signal.SIGINT)
    time.sleep(0.05)  # two signals, not one merged; well before the run ends (a slow machine ended it in 0.3 s)
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    err = (tmp_path / "run.stderr").read_text()
    # What it says depends on how far the first interrupt got: the tables written (the run stops fast) or not.
    if "its tables written" in err:
        assert "interrupted twice: exiting now, its tables written but the run not recorded in the store; " \
            f"`python -m zlbench collect {run}` records it." in err and (run / "ops_status.csv").is_file(), err[-3000:]
        assert f"resume={run}`" in err, err[-3000:]  # the first interrupt's line gave the resume command
    else:
        assert ("interrupted twice: exiting now, before its tables were all written (any on disk may be partial) and "
                "without recording the run; "
                f"`python -m zlbench collect {run}` writes them from what finished") in err, err[-3000:]
        assert f"resume={run}` measures the rest." in err and "python -m zlbench " in err, err[-3000:]


def test_an_interrupted_sweep_names_its_jobs_that_never_ran_and_how_to_run_them(tmp_path):
    """A sweep interrupted in its first job listed the second as 'exit 130 ... -> DIR', a dir with
    only zlbench.log in it, and printed no way to run it (resume= refused it: no run_identity.json)."""
    import shlex
    import subprocess
    import sys

    from .conftest import start_zlbench

    sweep = tmp_path / "sweep"
    proc = start_zlbench("-m", "ab=demo_fused_softmax", "ab.side=off,on", "ab.rounds=3",
                         "ops=[exp,softmax]", "dtypes=[float32]", "store.url=none", f"hydra.sweep.dir={sweep}",
                         cwd=tmp_path)
    assert wait_for(lambda: events(sweep / "0", "start") or proc.poll() is not None, timeout=180)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    table = err[err.index("multirun jobs"):]
    assert "exit 130" in table and "ab.side=off" in table, table
    line = next(x for x in table.splitlines() if x.strip().startswith("not run"))
    assert "ab.side=on" in line and f"hydra.run.dir={sweep / '1'}" in line, table
    command = line.split("-> run it: ", 1)[1]
    assert command.startswith("python -m zlbench ")
    ran = subprocess.run([sys.executable, *shlex.split(command)[1:]], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    identity = json.loads((sweep / "1" / "run_identity.json").read_text())
    assert identity["sides"] and list(identity["sides"]) == ["on"], identity["sides"]
