"""The local device pool: one submitit job per device, each running that device's queue in turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import submitit

from ..worker import run_queue


def launch(queues: Dict[int, List[dict]], run_dir: Path, launcher: Mapping[str, Any],
           deadline: Optional[float], restore_env: Dict[str, Optional[str]],
           visibility_keys: List[str], gpus: bool) -> List[Any]:
    executor = submitit.AutoExecutor(folder=str(run_dir / "submitit" / "%j"), cluster="local")
    timeout_min = int(launcher.get("time_min") or 60 * 24 * 7)
    executor.update_parameters(timeout_min=timeout_min, name="zlbench")
    jobs = []
    with executor.batch():
        for _device, units in sorted(queues.items()):
            jobs.append(executor.submit(run_queue, units, str(run_dir), deadline, restore_env))
    return jobs
