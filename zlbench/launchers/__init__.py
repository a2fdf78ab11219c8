"""Launchers decide where work units run; the job function (zlbench.worker.run_queue) decides what.

Each launcher takes per-device queues of units and returns handles the orchestrator can wait on.
"""

from typing import Callable, Dict

from ..errors import UsageError


def get_launcher(name: str) -> Callable:
    from . import local, slurm

    launchers: Dict[str, Callable] = {"local": local.launch, "slurm": slurm.launch}
    if name not in launchers:
        raise UsageError(f"unknown launcher '{name}'. Valid: {', '.join(sorted(launchers))}.")
    return launchers[name]
