"""Launchers decide where work units run; the job function (zlbench.engine.jobs.run_queue) decides what.

Each launcher (zlbench.engine.launchers.base.Launcher) takes per-device queues of units, and the
orchestrator waits on it, cancels it, and reads how each job ended.
"""

from typing import Any, Mapping

from zlbench.errors import UsageError
from zlbench.engine.launchers.base import JobEnd, LaunchContext, Launcher


def get_launcher(conf: Mapping[str, Any]) -> Launcher:
    from zlbench.engine.launchers.local import LocalLauncher
    from zlbench.engine.launchers.slurm import SlurmLauncher

    launchers = {cls.name: cls for cls in (LocalLauncher, SlurmLauncher)}
    name = conf.get("name")
    if name not in launchers:
        raise UsageError(f"unknown launcher '{name}'. Valid: {', '.join(sorted(launchers))}.")
    return launchers[name](conf)


__all__ = ["JobEnd", "LaunchContext", "Launcher", "get_launcher"]
