"""The job function every launcher runs: one device's work units (zlbench/engine/plain_worker.py runs plain
units one after another; zlbench/engine/device_ab.py runs a node-level A/B's units all at once)."""

from __future__ import annotations

import functools
from typing import Dict, List, Optional

from zlbench.engine.device_ab import run_device_ab
from zlbench.engine.locks import worker_of
from zlbench.engine.plain_worker import UnitRunner
from zlbench.results.rundir import load_plan


def run_queue(units: List[dict], run_dir: str, deadline: Optional[float] = None,
              extra_env: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, Dict[str, int]]:
    """The job function both launchers run: a device's units, in order (a node-level A/B's units
    all at once, by zlbench/engine/device_ab.py). The run dir stays locked while it works."""
    with worker_of(run_dir):
        if units and load_plan(run_dir).get("schedule"):  # a node-level A/B
            return run_device_ab(units, run_dir, deadline, extra_env)
        return run_plain_units(units, run_dir, deadline, extra_env)


def run_plain_units(units: List[dict], run_dir: str, deadline: Optional[float] = None,
                    extra_env: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, Dict[str, int]]:
    """One after another; where the plan says so (unit["prestart"] = k), a unit's process starts
    once a unit at most k places before it measures (the first unit when fewer are before it; a
    resumed queue's finished units measure nothing), and waits at its gate until the device is free."""
    runners = [UnitRunner(u, run_dir, deadline, extra_env) for u in units]

    def start_ahead(measuring: int) -> None:
        for i in range(measuring + 1, len(runners)):
            ahead = int(runners[i].unit.get("prestart") or 0)  # plan.json of older runs: true/false
            if ahead > 0 and i - ahead <= measuring:
                runners[i].prestart()

    for j, runner in enumerate(runners):
        runner.on_measuring = functools.partial(start_ahead, j)
    try:
        return {r.unit["unit_id"]: r.run() for r in runners}
    finally:
        for r in runners:
            r.discard_ahead()
