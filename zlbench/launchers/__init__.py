"""Launchers decide where work units run; the job function (zlbench.worker.run_queue) decides what.

Each launcher takes per-device queues of units and returns handles the orchestrator can wait on.
"""

from typing import Callable, Dict

from ..errors import UsageError


def get_launcher(name: str) -> Callable:
    from . import local

    launchers: Dict[str, Callable] = {"local": local.launch}
    try:
        from . import slurm

        launchers["slurm"] = slurm.launch
    except ImportError:  # pragma: no cover
        pass
    if name not in launchers:
        raise UsageError(f"unknown launcher '{name}'. Valid: {', '.join(sorted(launchers))}.")
    return launchers[name]
