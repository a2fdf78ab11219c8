"""Spare processes: a plain run's more passes (engine/more_processes.py) are chosen once every
planned pass has ended, and their processes' start-up (imports and collection: 7-11 s with torch
and FlagGems on an H200's host, the largest part of what a more pass cost) came after the choice.

So where processes start ahead (launcher.prestart) and the launcher waits for its jobs, each
device's job gets the units of its first more passes over every node of the run, marked spare. It
starts their processes while its last planned pass measures, held at their gates, and once its
planned units are done it waits for the choice: the orchestrator writes it to more/d<device>.json
(that device's more units, maybe none) and the job runs them, each in its spare's process where the
spare was built the same (the gate then names the chosen nodes, in the chosen order); the spares not
chosen are stopped before they measured anything. The choice file is created once (a hard link
fails where it exists): a job that sees no choice in time (the orchestrator gone) gives up by
creating it, and the orchestrator that finds it taken submits that device's more units as a job of
their own, as it did before spares."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

SPARE = "spare"  # the queue entry's key that marks a spare unit (not in plan.json)
# Seconds a job waits for the choice once every planned unit of the run is done: the orchestrator
# decides within a second or two; this long only if it is gone.
GIVE_UP_S = 120.0
POLL_S = 0.2


def choice_path(run_dir: Path, device: int) -> Path:
    return Path(run_dir) / "more" / f"d{device}.json"


def spare_queues(plan, run_dir: Path, launcher_waits: bool,
                 deadline: Optional[float]) -> Dict[int, List[dict]]:
    """Each device's spare units (queue entries), or none where the run cannot have more passes
    now, its processes do not start ahead, or nobody would wait for the choice. Clears the choices
    an interrupted run of this dir left."""
    if (plan.more_passes is None or not plan.more_together or not launcher_waits
            or (plan.max_processes or 0) <= (plan.processes or 0)
            or any(u.round >= plan.processes for u in plan.units)
            or (deadline is not None and time.time() >= deadline)):
        return {}
    shutil.rmtree(Path(run_dir) / "more", ignore_errors=True)
    everything = [n.nodeid for n in plan.nodes]
    queues: Dict[int, List[dict]] = {}
    for u in plan.more_passes(everything, plan.processes, plan.max_processes):
        if u.unit_id.endswith(".s0"):  # a device's first shard of each pass: a process over every node
            queues.setdefault(u.device, []).append({**u.to_dict(), "nodes": list(everything), SPARE: True})
    return queues


def with_spares(queues: Dict[int, List[dict]], spares: Mapping[int, List[dict]]) -> Dict[int, List[dict]]:
    return {d: list(units) + list(spares.get(d, [])) for d, units in queues.items()}


def _create_once(path: Path, content: Mapping[str, Any]) -> bool:
    """Write `path` unless it exists (then False): whole or not at all, whoever comes first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
    tmp.write_text(json.dumps(content))
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def hand_over(run_dir: Path, more: Sequence, devices: Sequence[int]) -> List:
    """Give each waiting device's job its more units (WorkUnits, maybe none); returns those that
    must go as jobs of their own (their device's job gave up waiting)."""
    left = []
    for d in devices:
        mine = [u for u in more if u.device == d]
        if not _create_once(choice_path(run_dir, d), {"units": [u.to_dict() for u in mine]}):
            left += mine
    return left + [u for u in more if u.device not in set(devices)]


def await_choice(run_dir: Path, device: int, deadline: Optional[float],
                 planned_done: Callable[[], bool]) -> List[dict]:
    """The device's more units once the orchestrator has chosen them ([] if none, or if this job
    gave up: at the run limit, or GIVE_UP_S after every planned unit was done)."""
    path = choice_path(run_dir, device)
    done_since: Optional[float] = None
    next_look = 0.0
    while True:
        if path.exists():
            return list(json.loads(path.read_text()).get("units") or [])
        now = time.time()
        why = None
        if deadline is not None and now >= deadline:
            why = "the run limit"
        elif now >= next_look:
            next_look = now + 2.0
            if planned_done():
                done_since = done_since or now
                if now - done_since > GIVE_UP_S:
                    why = f"no choice {GIVE_UP_S:.0f} s after the planned passes"
        if why and _create_once(path, {"units": [], "given_up": why}):
            return []
        time.sleep(POLL_S)


def same_but_nodes(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether a spare's unit was built as the chosen one (all but the nodes it runs)."""
    skip = {"nodes", "prestart", "pool", SPARE}
    return {k: v for k, v in a.items() if k not in skip} == {k: v for k, v in b.items() if k not in skip}
