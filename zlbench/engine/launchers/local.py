"""The local device pool: one submitit job per device, each running that device's queue in turn.

A local run has no time limit of its own (a full FlagGems pass on one GPU takes hours):
launcher.run_timeout_s bounds it when asked, enforced by the worker, which marks what it cuts.

Every process of a local run dies with the orchestrator, however it ends (SIGKILL by the OOM killer
included): submitit's controller gets a parent-death signal from the orchestrator, the worker from
its controller, each benchmark process from its worker."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import submitit
from submitit.local.local import LocalJob

from zlbench.engine.jobs import run_queue
from zlbench.engine.launchers.base import LaunchContext, Launcher
from zlbench.engine.locks import RUN_DIR_ENV
from zlbench.engine.processes import child_of, descendants, die_with_parent

# submitit's local executor kills a job at its timeout_min: far beyond any run.
NO_LIMIT_MIN = 60 * 24 * 365


def local_job(units, run_dir, deadline, restore_env):
    """The job function of a local job: first tie this worker to its submitit controller."""
    die_with_parent(int(os.environ.get("SUBMITIT_LOCAL_JOB_ID") or os.getppid()))
    return run_queue(units, run_dir, deadline, restore_env)


class _Executor(submitit.LocalExecutor):
    """submitit's local executor, except how it starts a job's controller process (what
    submitit.local.local.start_controller does, for one task and no setup commands): as a child
    that dies with this process, in a session of its own (a Ctrl-C at the terminal reaches the
    orchestrator alone, which stops every job), marked as a process of the run."""

    run_dir = ""
    controllers: List[subprocess.Popen] = []

    def _submit_command(self, command: str) -> LocalJob:
        env = dict(os.environ, SUBMITIT_LOCAL_NTASKS="1", SUBMITIT_LOCAL_COMMAND=command,
                   SUBMITIT_LOCAL_TIMEOUT_S=str(int(60 * self.parameters["timeout_min"])),
                   SUBMITIT_LOCAL_SIGNAL_DELAY_S=str(int(self.parameters.get("signal_delay_s", 30))),
                   SUBMITIT_LOCAL_NODEID="0", SUBMITIT_LOCAL_JOB_NUM_NODES="1", SUBMITIT_STDERR_TO_STDOUT="",
                   SUBMITIT_EXECUTOR="local", CUDA_VISIBLE_DEVICES="", SUBMITIT_LOCAL_WITH_SHELL="")
        env[RUN_DIR_ENV] = self.run_dir
        process = subprocess.Popen([sys.executable, "-m", "submitit.local._local", str(self.folder)], env=env,
                                   start_new_session=True, preexec_fn=child_of(os.getpid()))
        self.controllers.append(process)
        return LocalJob(folder=self.folder, job_id=str(process.pid), process=process, tasks=[0])


def pidfds(processes: List[subprocess.Popen]) -> Optional[Dict[int, subprocess.Popen]]:
    """A pidfd per process (readable once it exits: select wakes on it), or None where the
    system has none (Linux < 5.3, other systems): then the watch polls."""
    fds: Dict[int, subprocess.Popen] = {}
    try:
        for p in processes:
            fds[os.pidfd_open(p.pid)] = p
    except (AttributeError, OSError):
        for fd in fds:
            os.close(fd)
        return None
    return fds


class LocalLauncher(Launcher):
    """Sees its jobs end at once: a job's controller exits right after its worker, which writes
    its result before exiting (the orchestrator waits on the controllers' pidfds, no polling)."""

    name = "local"

    def __init__(self, conf):
        super().__init__(conf)
        self._pidfds: Optional[Dict[int, subprocess.Popen]] = None

    def cancel(self) -> None:
        """Stop every process of the run at once: submitit's controllers, the workers and their
        benchmark processes (this process' descendants). Nodes cut this way get resumable
        placeholders when the run finishes; their partial rows are dropped."""
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def submit(self, ctx: LaunchContext) -> None:
        executor = _Executor(folder=str(ctx.run_dir / "submitit"))
        executor.run_dir = str(Path(ctx.run_dir).resolve())
        executor.update_parameters(timeout_min=NO_LIMIT_MIN)
        executor.controllers = []
        with executor.batch():
            for _device, units in sorted(ctx.queues.items()):
                self.jobs.append(executor.submit(local_job, units, str(ctx.run_dir), ctx.deadline, ctx.restore_env))
        # A plain run's more passes may come as another wave while the first still runs (a job
        # that gave up waiting for the choice, engine/spares.py): both waves' exits are watched.
        new = pidfds(executor.controllers)
        self._pidfds = None if new is None or (self._pidfds is None and len(self.jobs) > len(new)) \
            else {**(self._pidfds or {}), **new}
        for j in self.jobs:
            # A job whose controller has exited without a result file never gets one (the worker
            # writes it before exiting, on this machine's disk): submitit's 15 s wait for a slow
            # file system would only delay the run's tables.
            j._results_timeout_s = 0

    def wait(self, timeout: float) -> None:
        if self._pidfds is None:
            return super().wait(timeout)
        end = time.monotonic() + timeout
        while self._pidfds and (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select(list(self._pidfds), [], [], left)
            for fd in ready:
                self._pidfds.pop(fd).poll()  # reap it: the job reads as done from now on
                os.close(fd)
