"""What every launcher offers the orchestrator: submit the device queues, tell when they are done,
cancel them, and say how each job ended. The launcher decides where the work runs; the job function
(zlbench.engine.jobs.run_queue) decides what runs, the same on every launcher."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional


@dataclass
class LaunchContext:
    run_dir: Path
    queues: Dict[int, List[dict]]  # device slot -> its work units (WorkUnit.to_dict()), in order
    deadline: Optional[float]  # unix time of launcher.run_timeout_s, or None
    restore_env: Dict[str, Optional[str]]  # the orchestrator's visibility keys (None = unset)
    visibility_keys: List[str]  # the backend's keys that pin a job to its devices
    accelerator: bool  # False for the CPU backend (no GPUs to ask a scheduler for)


@dataclass
class JobEnd:
    job_id: str
    error: Optional[str] = None  # None: the job function returned


class Launcher(ABC):
    name: str

    def __init__(self, conf: Mapping[str, Any]):
        self.conf = conf
        self.jobs: List[Any] = []

    @property
    def waits(self) -> bool:
        """Whether the orchestrator waits for the jobs (false: submit and return)."""
        return True

    def check(self) -> None:
        """Raise UsageError where this launcher cannot run on this machine (before the run dir is
        written)."""

    @abstractmethod
    def submit(self, ctx: LaunchContext) -> None:
        ...

    def done(self) -> bool:
        return all(j.done() for j in self.jobs)

    def wait(self, timeout: float) -> None:
        """Return after `timeout` seconds, or sooner once every job has ended (a launcher that can
        see its jobs end says so at once; this one only sleeps: Slurm is asked at each done())."""
        time.sleep(timeout)

    def cancel(self) -> None:
        for j in self.jobs:
            try:
                j.cancel(check=False)
            except Exception:
                pass  # already gone

    def collect(self) -> List[JobEnd]:
        ends = []
        for j in self.jobs:
            try:
                j.result()
                ends.append(JobEnd(str(j.job_id)))
            except Exception as e:  # a job that died: its nodes are reported by finish as unfinished
                lines = str(e).strip().splitlines()
                ends.append(JobEnd(str(j.job_id), (lines[-1] if lines else type(e).__name__)[:300]))
        return ends
