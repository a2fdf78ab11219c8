"""Against a real single-node Slurm (munge + slurmctld + slurmd, started by .ci/start-slurm).

Skipped with a reason where no Slurm answers (a laptop without root); under CI=true a missing
Slurm fails instead, so CI can never pass these by skipping them."""

import csv
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from .conftest import FIXTURES, held, measured_ends, wait_for, zlbench

WAIT = FIXTURES / "wait_corpus"


def _slurm_up():
    if shutil.which("sinfo") is None:
        return "sinfo is not installed (run .ci/start-slurm as root)"
    res = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    if res.returncode != 0 or not res.stdout.strip():
        return f"no Slurm controller answers: {res.stderr.strip()[:200]}"
    return None


_why = _slurm_up()
if _why and os.environ.get("CI", "").lower() == "true":
    raise RuntimeError(f"CI=true but Slurm is not available: {_why}")
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.skipif(bool(_why), reason=_why or "")]
ARGS = ["backend=cpu", "launcher=slurm", "launcher.cpus_per_task=1", "launcher.time_min=10", "progress=plain", "timer.processes=1"]


def statuses(run_dir):
    with open(run_dir / "ops_status.csv") as f:
        return list(csv.DictReader(f))


def test_a_sweep_runs_as_a_job_array(tmp_path):
    run = tmp_path / "run"
    # No stealing: a task Slurm starts late would find its shard taken by the other (seen under load).
    res = zlbench(f"hydra.run.dir={run}", *ARGS, "launcher.tasks=2", "launcher.steal=false", "ops=[exp,softmax,sum]",
                  "dtypes=[float32]", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    st = statuses(run)
    assert {s["op"] for s in st} == {"exp", "softmax", "sum"}
    assert all(s["status"] == "ok" for s in st)
    assert all(s["job_id"] and "_" in s["job_id"] for s in st)  # array job ids: <job>_<task>
    assert {s["job_id"].split("_")[1] for s in st} == {"0", "1"}
    assert all(s["host"] for s in st)
    assert len([l for l in (run / "rows.jsonl").read_text().splitlines()]) == 9


def test_no_wait_then_collect(tmp_path):
    run = tmp_path / "run"
    res = zlbench(f"hydra.run.dir={run}", *ARGS, "launcher.wait=false", "corpus=flaggems",
                  f"corpus.root={WAIT}", "ops=['wait_0[0-3]']", cwd=tmp_path, env={"WAIT_S": "0.1"})
    assert res.returncode == 0 and "zlbench collect" in res.stderr
    deadline = time.time() + 600  # a bound on a hung job, not on a slow machine
    while time.time() < deadline:
        collected = subprocess.run([sys.executable, "-m", "zlbench", "collect", str(run)], capture_output=True)
        # While the job runs, its waiting nodes are listed as not measured yet (exit 4: cut).
        assert len(statuses(run)) == 4
        if collected.returncode == 0:
            break
        assert collected.returncode == 4
        time.sleep(1)
    assert {s["status"] for s in statuses(run)} == {"ok"}


def _run_until_nodes_end(tmp_path, run, args, n=3, env=None, holding=1):
    """Start a Slurm run in the background; return it and its job ids once n nodes have ended and
    the next one waits in flight (the wait corpus holds it until tmp_path/tickets/release exists;
    holding: how many wait so, one per array task: a task's nodes end only after it holds none)."""
    env = {**os.environ, "WAIT_S": "0.05", "TICKETS": str(tmp_path / "tickets"), "HOLD_FROM": str(n),
           **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "zlbench", f"hydra.run.dir={run}", *args], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert held(tmp_path / "tickets", holding) and len(measured_ends(run)) == n
    except BaseException:  # leave no run, and no job of it holding the node's cores for the tests after
        proc.kill()
        ids = [p.name.split("_")[0] for p in (run / "submitit").glob("*_submission.sh")]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True)
        raise
    # This run's own tasks (as its events name them): the Slurm may run other people's zlbench jobs.
    jobs = sorted({json.loads(line)["job_id"] for p in run.glob("units/*/events.jsonl")
                   for line in p.read_text().splitlines() if '"launch"' in line})
    assert jobs and all(jobs)
    return proc, jobs


def _pending(jobs):
    out = subprocess.run(["squeue", "-h", "-j", ",".join(jobs), "-o", "%T"], capture_output=True, text=True).stdout
    return out.split() and set(out.split()) == {"PENDING"}


def test_scancel_midway_then_resume(tmp_path):
    run = tmp_path / "run"
    args = [*ARGS, "corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_0*']"]
    proc, jobs = _run_until_nodes_end(tmp_path, run, args)
    subprocess.run(["scancel", *jobs], check=True)
    out, err = proc.communicate(timeout=300)
    st = {s["test_node"]: s for s in statuses(run)}
    assert len(st) == 10
    cancelled = [s for s in st.values() if s["status"] == "crashed"]
    assert cancelled and all("job" in s["reason"] for s in cancelled), err[-2000:]
    res = zlbench(f"hydra.run.dir={tmp_path / 'other'}", *args, f"resume={run}", cwd=tmp_path, env={"WAIT_S": "0.05"})
    assert res.returncode == 0, res.stderr[-3000:]
    # Cancelled nodes were not at fault: resume measures them (and everything the job never ran).
    final = {s["test_node"]: s["status"] for s in statuses(run)}
    assert final == {k: "ok" for k in final} and len(final) == 10


def test_a_requeued_task_resumes_from_completed_nodes(tmp_path):
    run = tmp_path / "run"
    args = [*ARGS, "corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_0*']"]
    proc, jobs = _run_until_nodes_end(tmp_path, run, args)
    # What a preemption or a timeout requeue does to the task: kill it and queue it again.
    subprocess.run(["scontrol", "requeue", *jobs], check=True)
    assert wait_for(lambda: _pending(jobs))  # killed and queued again
    (tmp_path / "tickets" / "release").touch()
    # Slurm holds a requeued job back for two minutes (its BeginTime): not what is tested here.
    for job in jobs:
        subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], check=True)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    final = {s["test_node"]: s["status"] for s in statuses(run)}
    assert final == {k: "ok" for k in final} and len(final) == 10, err[-2000:]
    done = measured_ends(run)
    assert len(done) == len(set(done)) == 10  # every node measured exactly once


def test_a_plain_runs_more_passes_run_in_the_spares_its_job_started(tmp_path):
    """On Slurm the more passes' spare processes start in the planned passes' job and the choice
    reaches it there (engine/spares.py): pinned to the allocation as the planned units were, the
    chosen unit is the spare's, whose process was launched before the last planned pass ended."""
    from .test_timing_rows import ON_TIMING_CORPUS

    run = tmp_path / "run"
    args = [a for a in ARGS if a != "timer.processes=1" and a != "backend=cpu"]
    res = zlbench(f"hydra.run.dir={run}", *ON_TIMING_CORPUS, *args, "timer=direct", "ops=[luck]", "store.url=none",
                  "timer.processes=3", "timer.max_processes=4", "timer.target_width=0.3", "timer.more_budget=100",
                  "launcher.prestart=true", cwd=tmp_path, env={"ZL_FIXTURE_REALTIME": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    units = json.loads((run / "plan.json").read_text())["units"]
    assert [u["round"] for u in units] == [0, 1, 2, 3], units
    events = {u["round"]: [json.loads(x) for x in (run / "units" / u["unit_id"] / "events.jsonl").read_text().splitlines()]
              for u in units}
    first = lambda r, name: next(e["t"] for e in events[r] if e["event"] == name)  # noqa: E731
    assert [e["event"] for e in events[3]].count("launch") == 1 and first(3, "launch") < first(2, "exited")
    assert {e["job_id"] for r in (2, 3) for e in events[r] if e["event"] == "launch"} == \
        {next(e["job_id"] for e in events[2] if e["event"] == "launch")}  # one job ran both
    assert {r["op"]: r["processes"] for r in map(json.loads, (run / "rows.jsonl").read_text().splitlines())} == {"luck": 4}


def test_a_squeue_that_fails_or_hangs_while_the_job_runs_waits_for_it(tmp_path):
    """A squeue hiccup (exit 1, "Socket timed out": what a busy controller answers, which a real
    Slurm here cannot be made to do, so a fake squeue before the real one on PATH) marked the
    running job dead after 10 s (its nodes crashed, exit 4), and a squeue that hung was an internal
    error (exit 70, no tables). The job goes on and finishes: the run waits for it, saying so once."""
    from .test_slurm_faults import TIMED_OUT, shim

    mode = tmp_path / "squeue_mode"
    shim(tmp_path / "bin", "squeue", f"""case "$(cat {mode} 2>/dev/null)" in
  fail) echo '{TIMED_OUT}' >&2; exit 1;;
  hang) exec sleep 600;;
esac
exec {shutil.which("squeue")} "$@"
""")
    run = tmp_path / "run"
    args = [*ARGS, "launcher.tasks=2", "launcher.steal=false", "corpus=flaggems", f"corpus.root={WAIT}",
            "ops=['wait_0*']"]
    proc, jobs = _run_until_nodes_end(tmp_path, run, args, n=2, holding=2,
                                      env={"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"})
    try:
        mode.write_text("fail")
        time.sleep(15)  # beyond the 10 s after which a job squeue did not list counted as gone
        mode.write_text("hang")
        time.sleep(35)  # beyond squeue's 30 s timeout
        assert proc.poll() is None  # still waiting for the jobs
        (tmp_path / "tickets" / "release").touch()
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
        subprocess.run(["scancel", *jobs], capture_output=True)  # ended already, unless the test failed
    assert proc.returncode == 0, err[-3000:]
    assert err.count("squeue failed") == 1 and TIMED_OUT in err and "ended early" not in err, err[-3000:]
    final = {s["test_node"]: s["status"] for s in statuses(run)}
    assert final == {k: "ok" for k in final} and len(final) == 10, err[-2000:]


def test_a_job_the_controller_does_not_hold_is_gone(tmp_path):
    """squeue's "Invalid job id specified" (exit 1) is the controller's answer, not a failure: a
    task it no longer holds (purged after MinJobAge) ends as it did before squeue failures waited."""
    import submitit

    from zlbench.engine.launchers.slurm import _SlurmJob

    job = _SlurmJob(submitit.SlurmJob(folder=tmp_path, job_id="67000000"), grace_s=0)
    assert wait_for(job.done, timeout=10)
    with pytest.raises(RuntimeError, match="ended without a result"):
        job.result()


def test_a_partition_slurm_refuses_is_a_usage_error(tmp_path):
    res = zlbench(f"hydra.run.dir={tmp_path / 'run'}", *ARGS, "launcher.partition=nosuch", "ops=[exp]",
                  "dtypes=[float32]", cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-3000:]
    (error,) = [line for line in res.stderr.splitlines() if line.startswith("zlbench: error:")]
    assert error == ("zlbench: error: launcher=slurm: sbatch did not submit the jobs (sbatch: error: invalid partition "
                     "specified: nosuch; sbatch: error: Batch job submission failed: Invalid partition name specified). "
                     "Fix: change what Slurm refused (launcher.partition, account, qos, constraint, time_min, mem_gb, "
                     "gpus_per_task, additional_parameters; `sinfo` lists the partitions), or launcher=local to run on "
                     "this machine's devices."), res.stderr[-3000:]
    assert "internal error" not in res.stderr


def _contents(run):
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_resuming_where_the_controller_does_not_answer_leaves_the_run_dir_as_it_was(tmp_path):
    """A real run cut by scancel, then resumed while Slurm's controller does not answer (a fake
    sinfo and sbatch before the real ones on PATH: a real controller here is other tests' too)."""
    from .test_slurm_faults import NO_CONTROLLER, REFUSED, shim

    run = tmp_path / "run"
    args = [*ARGS, "corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_0*']"]
    proc, jobs = _run_until_nodes_end(tmp_path, run, args)
    subprocess.run(["scancel", *jobs], check=True)
    proc.communicate(timeout=300)
    assert proc.returncode == 4 and len(measured_ends(run)) == 3
    before = _contents(run)
    down = tmp_path / "bin"
    shim(down, "sinfo", f"echo 'slurm_load_partitions: {NO_CONTROLLER}' >&2\nexit 1\n")
    shim(down, "sbatch", f"echo '{REFUSED}' >&2\nexit 1\n")
    path = {"PATH": f"{down}{os.pathsep}{os.environ['PATH']}", "WAIT_S": "0.05"}
    res = zlbench(*args, f"resume={run}", cwd=tmp_path, env=path)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.startswith("zlbench: error: launcher=slurm: Slurm's controller does not answer (") and \
        res.stderr.count("\n") == 1, res.stderr[-3000:]
    assert _contents(run) == before and not (tmp_path / "zl_runs").exists()
    # sinfo answered, sbatch did not: what was measured stays, and the tables as they were.
    (down / "sinfo").unlink()
    res = zlbench(*args, f"resume={run}", cwd=tmp_path, env=path)
    assert res.returncode == 2 and f"sbatch did not submit the jobs ({REFUSED})" in res.stderr, res.stderr[-3000:]
    after = _contents(run)
    # Only the resume's record of itself and its log lines: nothing of what sbatch did not take.
    assert sorted(k for k in {*before, *after} if before.get(k) != after.get(k)) == ["run_identity.json", "zlbench.log"]
    assert len(measured_ends(run)) == 3


def test_slurm_numbers_reach_sbatch_as_given(tmp_path):
    """A 0 that means something to Slurm means it (mem_gb=0 was dropped: Slurm's default memory);
    none is replaced by a default (cpus_per_task=0 became 1, signal_delay_s=0 became 90: now refused)."""
    run = tmp_path / "run"
    args = [a for a in ARGS if not a.startswith("launcher.time_min=")]
    res = zlbench(f"hydra.run.dir={run}", *args, "launcher.time_min=0", "launcher.mem_gb=0", "launcher.signal_delay_s=30",
                  "launcher.array_parallelism=1", "launcher.tasks=2", "ops=[exp,sum]", "dtypes=[float32]", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    (script,) = (run / "submitit").glob("*_submission.sh")
    lines = set(script.read_text().splitlines())
    assert {"#SBATCH --time=0", "#SBATCH --mem=0GB", "#SBATCH --signal=USR2@30", "#SBATCH --cpus-per-task=1",
            "#SBATCH --array=0-1%1"} <= lines, sorted(lines)
    assert {s["status"] for s in statuses(run)} == {"ok"}
