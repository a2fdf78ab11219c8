"""The local device pool: one submitit job per device, each running that device's queue in turn.

A local run has no time limit of its own (a full FlagGems pass on one GPU takes hours):
launcher.run_timeout_s bounds it when asked, enforced by the worker, which marks what it cuts."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import List

import submitit

from zlbench.engine.jobs import run_queue
from zlbench.engine.launchers.base import LaunchContext, Launcher

# submitit's local executor kills a job at its timeout_min: far beyond any run.
NO_LIMIT_MIN = 60 * 24 * 365


def descendants(pid: int) -> List[int]:
    """Every process below pid (Linux /proc), children first found first."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for children in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(c) for c in children.read_text().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


class LocalLauncher(Launcher):
    name = "local"

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
        executor = submitit.AutoExecutor(folder=str(ctx.run_dir / "submitit"), cluster="local")
        executor.update_parameters(timeout_min=NO_LIMIT_MIN, name="zlbench")
        with executor.batch():
            for _device, units in sorted(ctx.queues.items()):
                self.jobs.append(executor.submit(run_queue, units, str(ctx.run_dir), ctx.deadline, ctx.restore_env))
