"""The local device pool: one submitit job per device, each running that device's queue in turn.

A local run has no time limit of its own (a full FlagGems pass on one GPU takes hours):
launcher.run_timeout_s bounds it when asked, enforced by the worker, which marks what it cuts."""

from __future__ import annotations

import submitit

from ..worker import run_queue
from .base import LaunchContext, Launcher

# submitit's local executor kills a job at its timeout_min: far beyond any run.
NO_LIMIT_MIN = 60 * 24 * 365


class LocalLauncher(Launcher):
    name = "local"

    def submit(self, ctx: LaunchContext) -> None:
        executor = submitit.AutoExecutor(folder=str(ctx.run_dir / "submitit" / "%j"), cluster="local")
        executor.update_parameters(timeout_min=NO_LIMIT_MIN, name="zlbench")
        with executor.batch():
            for _device, units in sorted(ctx.queues.items()):
                self.jobs.append(executor.submit(run_queue, units, str(ctx.run_dir), ctx.deadline, ctx.restore_env))
