"""The Slurm launcher where Slurm misbehaves in ways a single-node Slurm cannot be made to (a squeue
that fails or hangs, a controller that does not answer): fake Slurm commands on PATH, at the
command boundary. No Slurm needed; tests/test_slurm.py runs the same launcher against a real one."""

import logging
import os
import time

import pytest
import submitit

from zlbench.engine.launchers import slurm


def shim(folder, name, script):
    """A fake `name` in folder (put first on PATH): a shell script."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


TIMED_OUT = "slurm_load_jobs error: Socket timed out on send/recv operation"


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


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
