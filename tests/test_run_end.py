"""The time after a run's last node (issue 26): the jobs' end noticed at once (no polling interval,
no wait for a result file a job that died never writes), and nothing heavy imported where it is
not used (benchmarks/post_run.md measures the phases)."""

import os
import subprocess
import sys
import time

from zlbench.engine.launchers import LaunchContext, get_launcher
from zlbench.engine.processes import wait_exit

from .conftest import _env, pinned


def test_the_local_launcher_wakes_when_its_jobs_end(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    launcher = get_launcher({"name": "local"})
    launcher.submit(LaunchContext(run, {0: [], 1: []}, None, {}, [], False))  # two jobs with nothing to do
    start = time.monotonic()
    launcher.wait(600)
    # Woken by the jobs' end, not by the timeout (the old watch slept its interval through).
    assert time.monotonic() - start < 300
    assert launcher.done()
    assert [j.error for j in launcher.collect()] == [None, None]


def test_a_worker_wakes_when_its_process_exits():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = time.monotonic()
    assert wait_exit(proc, 600)
    assert time.monotonic() - start < 300 and proc.returncode == 0
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        assert not wait_exit(sleeper, 0.05)  # still running: the wait ends at its timeout
    finally:
        sleeper.kill()
        sleeper.wait()
    assert wait_exit(sleeper, 600)


def imported(stderr: str) -> set:
    return {line.split("|")[-1].strip().split(".")[0] for line in stderr.splitlines()
            if line.startswith("import time:")}


def test_scipy_and_matplotlib_are_imported_only_where_used(tmp_path):
    """A dry run (and a Slurm submission, the same path) and every job's worker import neither:
    scipy cost each worker 0.45 s at start, matplotlib is for the report."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "zlbench", "dry_run=true",
                          *pinned(["ops=[exp]", "dtypes=[float32]"]), f"hydra.run.dir={tmp_path / 'dry'}"],
                         cwd=tmp_path, env=_env(None), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    names = imported(res.stderr)
    assert "zlbench" in names and not names & {"scipy", "matplotlib"}
    worker = subprocess.run([sys.executable, "-X", "importtime", "-c",
                             "import zlbench.engine.jobs, zlbench.engine.launchers.local"],
                            env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert worker.returncode == 0, worker.stderr[-2000:]
    names = imported(worker.stderr)
    assert "submitit" in names and not names & {"scipy", "matplotlib"}


def test_a_run_logs_the_phases_the_benchmark_reads(tmp_path):
    """benchmarks/post_run.py splits a run's time by its events and these zlbench.log lines
    (debug ones with hydra.verbose=zlbench); every phase comes out, none negative."""
    import importlib.util

    from .conftest import FIXTURES, zlbench

    run = tmp_path / "run"
    t0 = time.time()
    res = zlbench(f"hydra.run.dir={run}", "hydra.verbose=zlbench", "backend=cpu", "corpus=flaggems",
                  f"corpus.root={FIXTURES / 'wait_corpus'}", "ops=['wait_01']", "progress=plain",
                  cwd=tmp_path, env={"WAIT_S": "0"})
    assert res.returncode == 0, res.stderr[-3000:]
    lines = (run / "zlbench.log").read_text().splitlines()
    marks = ["] run ", "phase: jobs submitted", "phase: jobs ended", "] results in ", "phase: stored"]
    at = [next(i for i, line in enumerate(lines) if m in line) for m in marks]
    assert at == sorted(at)
    spec = importlib.util.spec_from_file_location("post_run", FIXTURES.parents[1] / "benchmarks" / "post_run.py")
    post_run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(post_run)
    phases = post_run.phases(run, t0, time.time())
    assert set(post_run.PHASES + post_run.DETAIL) <= set(phases)
    assert min(phases.values()) >= 0, phases


def test_the_finish_imports_stop_between_modules_and_get_their_priority_back(tmp_path, monkeypatch):
    """On cores saturated by other work the import thread at nice 19 got ~1% of a core and the run's
    finish waited minutes for it: finish() stops it after the module in flight and raises it back."""
    import threading

    from zlbench.engine.run import WarmImports

    (tmp_path / "zl_gate.py").write_text("import threading\nentered, release = threading.Event(), threading.Event()\n")
    (tmp_path / "zl_slow.py").write_text(
        "import os, zl_gate\nzl_gate.nice_in = os.getpriority(os.PRIO_PROCESS, 0)\nzl_gate.entered.set()\n"
        "zl_gate.release.wait(60)\nzl_gate.nice_after = os.getpriority(os.PRIO_PROCESS, 0)\n")
    (tmp_path / "zl_next.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    import zl_gate

    base = os.getpriority(os.PRIO_PROCESS, 0)
    warm = WarmImports(["zl_slow", "zl_next"], yield_cpu=True)
    assert zl_gate.entered.wait(60)
    threading.Timer(0.3, zl_gate.release.set).start()  # after finish() has stopped and raised it
    warm.finish()
    assert "zl_slow" in sys.modules and "zl_next" not in sys.modules  # stopped after the one in flight
    assert zl_gate.nice_in == 19  # while the jobs run: the lowest priority
    try:  # may this process raise a thread's priority (root, CAP_SYS_NICE, RLIMIT_NICE)?
        os.setpriority(os.PRIO_PROCESS, 0, base - 1)
        os.setpriority(os.PRIO_PROCESS, 0, base)
        allowed = True
    except OSError:
        allowed = False
    assert zl_gate.nice_after == (base if allowed else zl_gate.nice_in)
