"""Slurm: the device queues go out as one submitit job array; each task pins the devices Slurm
allocated to it through the backend's visibility key (Slurm sets CUDA/ROCR keys for GRES GPUs and
nothing for MUSA or Ascend, so zlbench does it), runs its queue with the same job function as the
local pool, and is requeued through submitit checkpointing on timeout or preemption, resuming from
the nodes already complete."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional

import submitit

from zlbench.engine.jobs import run_queue
from zlbench.config import output_dir
from zlbench.engine.launchers.base import LaunchContext, Launcher
from zlbench.engine.plain_worker import Terminated
from zlbench.errors import UsageError

log = logging.getLogger("zlbench")

# Longer than any sane Slurm KillWait (default 30 s).
KILL_WAIT_S = 300
# squeue may fail or hang for a while (a busy or restarting controller: "Socket timed out"), which
# says nothing of the jobs: they run on, and each one's result file still tells when it ends. A job
# without a result counts as gone once squeue answers without it, or after SQUEUE_OUTAGE_S seconds
# of squeue failures on end.
SQUEUE_TIMEOUT_S = 30
SQUEUE_OUTAGE_S = 600

# How long `sinfo` may take to say that Slurm's controller answers, before anything is written.
CONTROLLER_TIMEOUT_S = 60
FIX_SLURM = ("check that Slurm's controller answers here (`sinfo`, `scontrol ping`) and run it again, or "
             "launcher=local to run on this machine's devices")
# sbatch's words for a controller it could not reach (anything else: it refused the job's settings).
UNREACHABLE = ("unable to contact", "timed out", "connection refused", "connect failure")
FIX_SETTINGS = ("change what Slurm refused (launcher.partition, account, qos, constraint, time_min, mem_gb, "
                "gpus_per_task, additional_parameters; `sinfo` lists the partitions), or launcher=local to run on "
                "this machine's devices")

# Where Slurm says which GPUs this task got, most specific first.
ALLOCATION_ENVS = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


def allocated_devices(environ: Mapping[str, str]) -> Optional[str]:
    for key in ALLOCATION_ENVS:
        value = environ.get(key)
        if value and value.strip() not in ("", "NoDevFiles"):
            return value.strip()
    return None


class SlurmQueue(submitit.helpers.Checkpointable):
    """The job function on Slurm: re-pin units to the allocation, then run them. Checkpointable:
    on timeout or preemption submitit resubmits it with the same arguments, and the worker skips
    every node that already has a status."""

    def __call__(self, units: List[dict], run_dir: str, deadline: Optional[float],
                 restore_env: Dict[str, Optional[str]], visibility_keys: List[str]) -> Dict:
        allocation = allocated_devices(os.environ)
        env = {k: v for k, v in restore_env.items() if k not in ALLOCATION_ENVS}

        def pin(u: dict) -> dict:
            u = dict(u, env=dict(u["env"]))
            if allocation is not None:
                for key in visibility_keys:
                    if key in u["env"]:
                        u["env"][key] = allocation
            u["env"]["ZLBENCH_SLURM_JOB"] = os.environ.get("SLURM_JOB_ID", "")
            return u

        try:
            # The more units chosen while it runs (engine/spares.py) are pinned the same way.
            return run_queue([pin(u) for u in units], run_dir, deadline, env, pin)
        except Terminated:
            # Slurm is ending this task (scancel, preemption, scontrol requeue) and will SIGKILL it
            # after KillWait. Returning now would write a result and make a requeued task look
            # finished; wait to be killed instead (a requeued task then simply runs again and
            # resumes from the nodes already complete).
            time.sleep(KILL_WAIT_S)
            raise


def _span(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 120 else f"{seconds:g} s"


class _Squeue:
    """squeue, as a launcher's jobs ask it whether each task is still there: its answer, or why
    there is none (a failure or a hang says nothing of the job: its state is unknown). Shared by
    the launcher's jobs, so that a failing squeue is said once and its run of failures timed once."""

    def __init__(self):
        self.failing_since: Optional[float] = None
        self.error = ""
        self.warned = False

    def lists(self, job_id: str) -> Optional[bool]:
        """Whether squeue lists the task (pending, running or completing); None: unknown."""
        try:
            out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%i"], capture_output=True, text=True,
                                 timeout=SQUEUE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return self._failed(f"squeue did not answer in {SQUEUE_TIMEOUT_S} s")
        except OSError as e:
            return self._failed(f"squeue could not run: {e}")
        said = " ".join(out.stderr.split())
        if out.returncode == 0:
            self.failing_since = None
            return bool(out.stdout.strip())
        if "Invalid job id" in said:  # the controller answered: it holds no such job (any more)
            self.failing_since = None
            return False
        return self._failed(said or f"squeue exited {out.returncode}")

    def _failed(self, error: str) -> Optional[bool]:
        self.error = error[:160]
        self.failing_since = self.failing_since or time.time()
        if not self.warned:
            self.warned = True
            log.warning(f"[zlbench] warning: squeue failed ({self.error}): the Slurm jobs' state is unknown while "
                        f"it does; waiting on for their results (a job counts as gone only after "
                        f"{_span(SQUEUE_OUTAGE_S)} of squeue failures on end)")
        return None

    def outage_s(self) -> float:
        return time.time() - self.failing_since if self.failing_since is not None else 0.0


class _SlurmJob:
    """A submitit job whose completion does not depend on sacct: without an accounting database
    submitit cannot tell a cancelled job from a running one, so a job that left squeue counts as
    done after a grace period. A squeue that fails or hangs leaves the job waited on (its result
    file still says when it ends), up to SQUEUE_OUTAGE_S of failures on end."""

    def __init__(self, job, grace_s: float = 10.0, squeue: Optional[_Squeue] = None):
        self.job = job
        self.job_id = job.job_id
        self.grace_s = grace_s
        self.squeue = squeue or _Squeue()
        self._gone_since: Optional[float] = None
        self._lost = ""  # why the job counts as gone though no squeue answer said so

    def done(self) -> bool:
        if self.job.paths.result_pickle.exists():
            return True
        if self._lost:
            return True
        if shutil.which("squeue") is None:
            return self.job.done()
        # This task alone (<job>_<task>: squeue answers for one element of an array, pending or
        # running): a task that died must read as done while the array's other tasks still run
        # (they may be waiting for the choice of more passes, engine/spares.py).
        listed = self.squeue.lists(str(self.job_id))
        if listed is None:
            if self.squeue.outage_s() <= SQUEUE_OUTAGE_S:
                return False
            self._lost = (f"squeue failed for {_span(SQUEUE_OUTAGE_S)} on end ({self.squeue.error}): whether "
                          f"slurm job {self.job_id} still runs is unknown")
            return True
        if listed:
            self._gone_since = None
            return False
        self._gone_since = self._gone_since or time.time()
        return time.time() - self._gone_since > self.grace_s

    def cancel(self, check: bool = False) -> None:
        self.job.cancel(check=check)

    def result(self):
        if not self.job.paths.result_pickle.exists():
            raise RuntimeError(self._lost or f"slurm job {self.job_id} ended without a result (cancelled or failed)")
        return self.job.result()


def _said(text: str) -> str:
    """A Slurm command's error output as one line: its error lines (all of it where none says error)."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()] or lines
    return "; ".join(dict.fromkeys(errors))[:300]


class _Unsubmitted:
    """An array sbatch refused after earlier ones were submitted (a plain run's later passes): it
    ends at once, and its nodes are reported unfinished with sbatch's error (resume= runs them),
    while the jobs already submitted are waited for and their results written."""

    job_id = "(not submitted)"

    def __init__(self, error: str):
        self.error = error

    def done(self) -> bool:
        return True

    def cancel(self, check: bool = False) -> None:
        pass

    def result(self):
        raise RuntimeError(self.error)


class SlurmLauncher(Launcher):
    name = "slurm"

    def __init__(self, conf: Mapping[str, Any]):
        super().__init__(conf)
        self.squeue = _Squeue()

    @property
    def waits(self) -> bool:
        return bool(self.conf.get("wait", True))

    def check(self) -> None:
        if shutil.which("sbatch") is None:
            raise UsageError("launcher=slurm: no Slurm here (sbatch is not on PATH), so nothing could be "
                             "submitted. Fix: run from a Slurm login node, or launcher=local to run on this "
                             "machine's devices.")
        self._check_controller()

    def _check_controller(self) -> None:
        """Refuse the run before its run dir is written where no Slurm controller answers: sbatch
        would fail after the plan is written, and on a resume after the run dir was touched."""
        if shutil.which("sinfo") is None:
            return  # sbatch says so as it submits
        clusters = (self.conf.get("additional_parameters") or {}).get("clusters")
        command = ["sinfo", "-h", "-o", "%P", *(["-M", str(clusters)] if clusters else [])]
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=CONTROLLER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            said = f"sinfo did not answer in {CONTROLLER_TIMEOUT_S} s"
        except OSError as e:
            said = f"sinfo could not run: {e}"
        else:
            if out.returncode == 0:
                return
            said = _said(out.stderr) or f"sinfo exited {out.returncode}"
        raise UsageError(f"launcher=slurm: Slurm's controller does not answer ({said}), so nothing could be "
                         f"submitted. Fix: {FIX_SLURM}.")

    def submit(self, ctx: LaunchContext) -> None:
        launcher = self.conf
        folder = ctx.run_dir / "submitit"
        held = set(os.listdir(folder)) if folder.is_dir() else None  # what an earlier run's jobs left there
        executor = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
        # Each number as given: its range was checked with the config (config/schema.py), and a 0
        # means what Slurm makes of it (time_min: no limit; mem_gb: a node's memory).
        params: Dict[str, Any] = {
            "timeout_min": int(launcher["time_min"]),
            "slurm_array_parallelism": int(launcher["array_parallelism"]),
            "cpus_per_task": int(launcher["cpus_per_task"]),
            # USR2 this long before the time limit: submitit checkpoints and requeues the task.
            "slurm_signal_delay_s": int(launcher["signal_delay_s"]),
            "name": "zlbench",
        }
        if ctx.accelerator and int(launcher["gpus_per_task"]) > 0:
            params["gpus_per_node"] = int(launcher["gpus_per_task"])
        if launcher.get("mem_gb") is not None:
            params["mem_gb"] = int(launcher["mem_gb"])
        optional = {"partition": "slurm_partition", "account": "slurm_account", "qos": "slurm_qos",
                    "constraint": "slurm_constraint"}
        for key, name in optional.items():
            if launcher.get(key):
                params[name] = launcher[key]
        if launcher.get("setup"):
            params["slurm_setup"] = list(launcher["setup"])
        if launcher.get("additional_parameters"):
            params["slurm_additional_parameters"] = dict(launcher["additional_parameters"])
        executor.update_parameters(**params)
        order = sorted(ctx.queues)
        n = len(order)
        printed = io.StringIO()  # submitit prints sbatch's error output itself before it raises: said once, below
        try:
            with contextlib.redirect_stderr(printed):
                jobs = executor.map_array(SlurmQueue(), [ctx.queues[d] for d in order], [str(ctx.run_dir)] * n,
                                          [ctx.deadline] * n, [ctx.restore_env] * n, [ctx.visibility_keys] * n)
        except (submitit.core.utils.FailedJobError, submitit.core.utils.FailedSubmissionError, OSError) as e:
            said = _said(str(e)) or _said(printed.getvalue()) or type(e).__name__
            output_dir.remove_written_since(folder, held)  # the submission file and pickles of jobs never submitted
            if not self.jobs:
                unreachable = any(w in said.lower() for w in UNREACHABLE)
                raise UsageError(f"launcher=slurm: sbatch did not submit the jobs ({said}). Fix: "
                                 f"{FIX_SLURM if unreachable else FIX_SETTINGS}.")
            # The jobs already submitted measured what they did: their results are waited for.
            log.warning(f"[zlbench] warning: sbatch did not submit the later passes ({said}): their nodes are "
                        "reported unfinished (resume= runs them)")
            self.jobs.append(_Unsubmitted(f"sbatch did not submit it: {said}"))
            return
        except BaseException:
            sys.stderr.write(printed.getvalue())  # with whatever else went wrong
            raise
        sys.stderr.write(printed.getvalue())
        self.jobs += [_SlurmJob(j, squeue=self.squeue) for j in jobs]  # a plain run's later passes come as another array
