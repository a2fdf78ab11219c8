"""The Slurm launcher where Slurm misbehaves in ways a single-node Slurm cannot be made to (a squeue
that fails or hangs, a controller that does not answer): fake Slurm commands on PATH, at the
command boundary. No Slurm needed; tests/test_slurm.py runs the same launcher against a real one."""

import dataclasses
import logging
import os
import time

import pytest
import submitit

from zlbench.config.schema import SlurmLauncherConf
from zlbench.engine.launchers import LaunchContext, slurm

from .conftest import zlbench


def shim(folder, name, script):
    """A fake `name` in folder (put first on PATH): a shell script."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


TIMED_OUT = "slurm_load_jobs error: Socket timed out on send/recv operation"
NO_CONTROLLER = "Unable to contact slurm controller (connect failure)"
REFUSED = f"sbatch: error: Batch job submission failed: {NO_CONTROLLER}"
ARGS = ["backend=cpu", "launcher=slurm", "launcher.cpus_per_task=1", "launcher.time_min=10", "ops=[exp]",
        "dtypes=[float32]", "progress=plain"]


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


@pytest.fixture
def slurm_down(fake_bin):
    """Slurm's commands as they answer with the controller down (srun, which submitit looks for
    before it submits, is there: it asks no controller)."""
    shim(fake_bin, "srun", "exit 0\n")
    shim(fake_bin, "sinfo", f"echo 'slurm_load_partitions: {NO_CONTROLLER}' >&2\nexit 1\n")
    shim(fake_bin, "squeue", f"echo 'slurm_load_jobs error: {NO_CONTROLLER}' >&2\nexit 1\n")
    shim(fake_bin, "sbatch", f"echo '{REFUSED}' >&2\nexit 1\n")
    return fake_bin


def files_under(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def test_a_slurm_whose_controller_does_not_answer_is_refused_before_anything_is_written(tmp_path, slurm_down):
    # It was an internal error (FailedJobError from sbatch, exit 70) after the run dir was written.
    res = zlbench(*ARGS, cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr == (f"zlbench: error: launcher=slurm: Slurm's controller does not answer (slurm_load_partitions: "
                          f"{NO_CONTROLLER}), so nothing could be submitted. Fix: check that Slurm's controller "
                          "answers here (`sinfo`, `scontrol ping`) and run it again, or launcher=local to run on this "
                          "machine's devices.\n")
    assert files_under(tmp_path) == ["bin"] + [f"bin/{c}" for c in ("sbatch", "sinfo", "squeue", "srun")]


def test_sbatch_refusing_the_jobs_is_a_usage_error_naming_its_error(tmp_path, slurm_down):
    # sinfo answered, sbatch did not (the controller went down in between, or refused the settings).
    shim(slurm_down, "sinfo", "echo debug\n")
    res = zlbench(*ARGS, "hydra.run.dir=run", cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    error = [line for line in res.stderr.splitlines() if line.startswith("zlbench: error:")]
    assert error == [f"zlbench: error: launcher=slurm: sbatch did not submit the jobs ({REFUSED}). Fix: check that "
                     "Slurm's controller answers here (`sinfo`, `scontrol ping`) and run it again, or launcher=local "
                     "to run on this machine's devices."], res.stderr
    assert res.stderr.count(NO_CONTROLLER) == 1 and "internal error" not in res.stderr  # said once, in it
    assert not (tmp_path / "run" / "submitit").exists()  # no submission file or pickle of jobs never submitted


def test_sbatch_refusing_a_later_array_ends_its_nodes_unfinished_and_the_run_goes_on(tmp_path, slurm_down):
    """A plain run's later passes are another array, submitted once the planned passes' jobs ran:
    a refusal then is no usage error, which would leave what those jobs measured without tables."""
    launcher = slurm.SlurmLauncher(dataclasses.asdict(SlurmLauncherConf()))
    launcher.jobs.append(slurm._Unsubmitted("an earlier array"))  # stands for one that was submitted
    ctx = LaunchContext(tmp_path / "run", {0: [{"unit_id": "u3", "nodes": ["t.py::test_a"], "env": {}}]}, None, {},
                        [], False)
    launcher.submit(ctx)
    (later,) = launcher.jobs[1:]
    assert later.done() and launcher.collect()[1].error == f"sbatch did not submit it: {REFUSED}"


def _job(tmp_path, job_id, **kwargs):
    """A launcher's view of a Slurm task that has written no result."""
    return slurm._SlurmJob(submitit.SlurmJob(folder=tmp_path / "submitit", job_id=job_id), **kwargs)


def test_a_squeue_that_hangs_leaves_the_job_waited_on(tmp_path, fake_bin, monkeypatch, caplog):
    # It raised TimeoutExpired out of the run: internal error, exit 70, no tables.
    shim(fake_bin, "squeue", "exec sleep 600\n")
    monkeypatch.setattr(slurm, "SQUEUE_TIMEOUT_S", 1, raising=False)
    job = _job(tmp_path, "4242_0")
    with caplog.at_level(logging.WARNING, logger="zlbench"):
        assert job.done() is False and job.done() is False
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "squeue did not answer in 1 s" in warning and "unknown" in warning


def test_a_failing_squeue_is_state_unknown_until_failures_last_the_bound(tmp_path, fake_bin, monkeypatch, caplog):
    # Any non-zero exit of squeue counted as "gone" after 10 s: a running job read as cancelled,
    # its nodes crashed, though it went on and finished.
    shim(fake_bin, "squeue", f"echo '{TIMED_OUT}' >&2\nexit 1\n")
    monkeypatch.setattr(slurm, "SQUEUE_OUTAGE_S", 12, raising=False)
    squeue = slurm._Squeue() if hasattr(slurm, "_Squeue") else None
    # Two tasks of one launcher: one squeue between them.
    jobs = [_job(tmp_path, f"4242_{i}", **({"squeue": squeue} if squeue else {})) for i in (0, 1)]
    start = time.time()
    with caplog.at_level(logging.WARNING, logger="zlbench"):
        while time.time() - start < 11:  # beyond the 10 s grace of a job squeue answers without
            assert not any(j.done() for j in jobs)
            time.sleep(0.5)
        assert wait_until(lambda: all(j.done() for j in jobs), 10)
    # One warning for the launcher's jobs, naming squeue's error.
    assert [r.getMessage() for r in caplog.records if "squeue" in r.getMessage()] == [
        f"[zlbench] warning: squeue failed ({TIMED_OUT}): the Slurm jobs' state is unknown while it does; waiting "
        "on for their results (a job counts as gone only after 12 s of squeue failures on end)"]
    for j in jobs:
        with pytest.raises(RuntimeError, match=f"squeue failed for 12 s on end \\({TIMED_OUT}\\): whether "
                                               f"slurm job {j.job_id} still runs is unknown$"):
            j.result()


def test_a_squeue_that_answers_again_restarts_the_bound(tmp_path, fake_bin, monkeypatch):
    flag = tmp_path / "down"
    shim(fake_bin, "squeue", f"if [ -e {flag} ]; then echo '{TIMED_OUT}' >&2; exit 1; fi\necho \"$3\"\n")
    monkeypatch.setattr(slurm, "SQUEUE_OUTAGE_S", 2, raising=False)
    job = _job(tmp_path, "4242_0")
    flag.touch()
    assert job.done() is False
    time.sleep(1.5)
    flag.unlink()
    assert job.done() is False  # listed: running
    flag.touch()
    time.sleep(1.5)
    assert job.done() is False  # 3 s of failures in all, but not on end


def wait_until(predicate, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("overrides,message", [
    # Each was submitted as given (--time=-5) or silently replaced by a default (0 -> 1, 90, 64).
    (["launcher.time_min=-5"], "launcher.time_min=-5 is not valid: it must be a number of minutes >= 0 (0: no time "
                               "limit, where the partition allows none). Fix: launcher.time_min=60."),
    (["launcher.cpus_per_task=0"], "launcher.cpus_per_task=0 is not valid: it must be an integer >= 1. Fix: "
                                   "launcher.cpus_per_task=2."),
    (["launcher.signal_delay_s=0"], "launcher.signal_delay_s=0 is not valid: it must be a number of seconds from 1 to "
                                    "65535 (before the time limit, to requeue the task). Fix: launcher.signal_delay_s=90."),
    (["launcher.signal_delay_s=65536"], "launcher.signal_delay_s=65536 is not valid: it must be a number of seconds "
                                        "from 1 to 65535"),
    (["launcher.gpus_per_task=-2"], "launcher.gpus_per_task=-2 is not valid: it must be an integer >= 0 (0: ask Slurm "
                                    "for none). Fix: launcher.gpus_per_task=1."),
    (["launcher.array_parallelism=0"], "launcher.array_parallelism=0 is not valid: it must be an integer >= 1 (array "
                                       "tasks running at once). Fix: launcher.array_parallelism=64."),
    (["launcher.mem_gb=-1"], "launcher.mem_gb=-1 is not valid: it must be a number of GB >= 0 (0: all of a node's "
                             "memory, Slurm's --mem=0), or null for the partition's default. Fix: launcher.mem_gb=null."),
    # The requeue signal would come as each task starts.
    (["launcher.time_min=1"], "launcher.signal_delay_s=90 is not below launcher.time_min=1 (60 s): Slurm would signal "
                              "each task to requeue as soon as it starts, and it would requeue over and over, measuring "
                              "nothing. Fix: launcher.time_min=60, or launcher.signal_delay_s=30."),
    (["launcher.time_min=10", "launcher.signal_delay_s=600"], "launcher.signal_delay_s=600 is not below "
                                                              "launcher.time_min=10 (600 s)"),
])
def test_a_slurm_number_out_of_range_is_refused(overrides, message):
    from zlbench.config.validate import validate_config
    from zlbench.errors import UsageError

    from .test_validate import resolved

    with pytest.raises(UsageError) as refused:
        validate_config(resolved("launcher=slurm", *overrides))
    assert str(refused.value).startswith(message) and str(refused.value).count("Fix:") == 1


@pytest.mark.parametrize("overrides", [
    ["launcher.time_min=0"],  # no time limit (and so no requeue signal)
    ["launcher.time_min=0", "launcher.signal_delay_s=65535"],
    ["launcher.gpus_per_task=0", "launcher.mem_gb=0", "launcher.cpus_per_task=1", "launcher.array_parallelism=1"],
    ["launcher.time_min=2", "launcher.signal_delay_s=119"],
])
def test_a_slurm_zero_that_means_something_is_taken(overrides):
    from zlbench.config.validate import validate_config

    from .test_validate import resolved

    validate_config(resolved("launcher=slurm", *overrides))


def test_a_dry_run_refuses_slurm_numbers_out_of_range(tmp_path):
    res = zlbench("backend=cpu", "launcher=slurm", "launcher.gpus_per_task=-2", "launcher.array_parallelism=0",
                  "dry_run=true", "ops=[exp]", cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.startswith("zlbench: error: launcher.gpus_per_task=-2 is not valid") and \
        "launcher.array_parallelism=0 is not valid" in res.stderr and files_under(tmp_path) == []
