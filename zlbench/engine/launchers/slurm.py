"""Slurm: the device queues go out as one submitit job array; each task pins the devices Slurm
allocated to it through the backend's visibility key (Slurm sets CUDA/ROCR keys for GRES GPUs and
nothing for MUSA or Ascend, so zlbench does it), runs its queue with the same job function as the
local pool, and is requeued through submitit checkpointing on timeout or preemption, resuming from
the nodes already complete."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any, Dict, List, Mapping, Optional

import submitit

from zlbench.engine.jobs import run_queue
from zlbench.engine.launchers.base import LaunchContext, Launcher
from zlbench.engine.plain_worker import Terminated
from zlbench.errors import UsageError

# Longer than any sane Slurm KillWait (default 30 s).
KILL_WAIT_S = 300

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


class _SlurmJob:
    """A submitit job whose completion does not depend on sacct: without an accounting database
    submitit cannot tell a cancelled job from a running one, so a job that left squeue counts as
    done after a grace period."""

    def __init__(self, job, grace_s: float = 10.0):
        self.job = job
        self.job_id = job.job_id
        self.grace_s = grace_s
        self._gone_since: Optional[float] = None

    def done(self) -> bool:
        if self.job.paths.result_pickle.exists():
            return True
        if shutil.which("squeue") is None:
            return self.job.done()
        # This task alone (<job>_<task>: squeue answers for one element of an array, pending or
        # running): a task that died must read as done while the array's other tasks still run
        # (they may be waiting for the choice of more passes, engine/spares.py).
        out = subprocess.run(["squeue", "-h", "-j", str(self.job_id), "-o", "%i"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            self._gone_since = None
            return False
        self._gone_since = self._gone_since or time.time()
        return time.time() - self._gone_since > self.grace_s

    def cancel(self, check: bool = False) -> None:
        self.job.cancel(check=check)

    def result(self):
        if not self.job.paths.result_pickle.exists():
            raise RuntimeError(f"slurm job {self.job_id} ended without a result (cancelled or failed)")
        return self.job.result()


class SlurmLauncher(Launcher):
    name = "slurm"

    @property
    def waits(self) -> bool:
        return bool(self.conf.get("wait", True))

    def check(self) -> None:
        if shutil.which("sbatch") is None:
            raise UsageError("launcher=slurm: no Slurm here (sbatch is not on PATH), so nothing could be "
                             "submitted. Fix: run from a Slurm login node, or launcher=local to run on this "
                             "machine's devices.")

    def submit(self, ctx: LaunchContext) -> None:
        launcher = self.conf
        executor = submitit.AutoExecutor(folder=str(ctx.run_dir / "submitit"), cluster="slurm")
        params: Dict[str, Any] = {
            "timeout_min": int(launcher["time_min"]),
            "slurm_array_parallelism": int(launcher.get("array_parallelism") or 64),
            "cpus_per_task": int(launcher.get("cpus_per_task") or 1),
            # USR2 this long before the time limit: submitit checkpoints and requeues the task.
            "slurm_signal_delay_s": int(launcher.get("signal_delay_s") or 90),
            "name": "zlbench",
        }
        if ctx.accelerator and int(launcher.get("gpus_per_task") or 0) > 0:
            params["gpus_per_node"] = int(launcher["gpus_per_task"])
        optional = {"partition": "slurm_partition", "account": "slurm_account", "qos": "slurm_qos",
                    "constraint": "slurm_constraint", "mem_gb": "mem_gb"}
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
        jobs = executor.map_array(SlurmQueue(), [ctx.queues[d] for d in order], [str(ctx.run_dir)] * n,
                                  [ctx.deadline] * n, [ctx.restore_env] * n, [ctx.visibility_keys] * n)
        self.jobs += [_SlurmJob(j) for j in jobs]  # a plain run's later passes come as another array
