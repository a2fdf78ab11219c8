"""Spare processes: a plain run's more passes (engine/more_processes.py) are chosen once every
planned pass has ended, and their processes' start-up (imports and collection: 7-11 s with torch
and FlagGems on an H200's host, the largest part of what a more pass cost) came after the choice.

So where processes start ahead (launcher.prestart) and the launcher waits for its jobs, each
device's job gets the units of its more passes over every node of the run, marked spare. Where a
planned pass would start the pass after the last (two before it: planning/plan.py PRESTART_AHEAD,
but after the first pass has ended) it starts the processes of the first of them (as many as its
CPUs allow, spares_to_start), held at their gates, over every node but those whose file failed to
import. Once
its planned units are done it says so (more/d<device>.waiting) and waits for the choice: the
orchestrator chooses once every job waits or has ended (a job that died must not keep the others
waiting), writes it to more/d<device>.json (that device's more units, maybe none), and the job runs
them, each in its spare's process where the spare was built the same (the gate then names the chosen
nodes, in the chosen order); spares not chosen are stopped before they measured anything. The
choice file is created once (a hard link fails where it exists): a job that sees no choice and no
heartbeat of the orchestrator for GIVE_UP_S gives up by creating it, and the orchestrator that finds
it taken submits that device's more units as a job of their own, as it did before spares."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

SPARE = "spare"  # the queue entry's key that marks a spare unit (not in plan.json)
# A waiting job gives up once the orchestrator's heartbeat (beaten while it watches the jobs and
# while it chooses) has not changed for this long: the orchestrator is gone (on the local pool its jobs die with it; on Slurm they would
# hold their devices for nothing).
GIVE_UP_S = 300.0
POLL_S = 0.2


def choice_path(run_dir: Path, device: int) -> Path:
    return Path(run_dir) / "more" / f"d{device}.json"


def waiting_path(run_dir: Path, device: int) -> Path:
    """Written by a device's job once its planned units are done and it waits for the choice (with
    how many spare processes it started): the orchestrator chooses once every job waits or ended."""
    return Path(run_dir) / "more" / f"d{device}.waiting"


def heartbeat_path(run_dir: Path) -> Path:
    return Path(run_dir) / "more" / "heartbeat"


def beat(run_dir: Path) -> None:
    """The orchestrator is alive and will choose (waiting jobs give up once this has not changed
    for GIVE_UP_S)."""
    path = heartbeat_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(time.time()))


@contextmanager
def beating(run_dir: Path, every_s: float = 10.0) -> Iterator[None]:
    """Beat while the orchestrator chooses (reading a large run's events takes a while)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            beat(run_dir)

    beat(run_dir)
    thread = threading.Thread(target=loop, name="zlbench-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def cpu_share(devices: int = 1) -> int:
    """The CPUs one device's job has: a local pool's jobs share the host's CPUs (`devices` of
    them); a Slurm task has its own."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 2
    if not os.environ.get("SLURM_JOB_ID"):
        cpus //= max(1, devices)
    return max(1, cpus)


def spares_to_start(count: int, devices: int = 1) -> int:
    """How many of a device's spare processes its job starts: one per CPU of its share beyond the
    one measuring and the one a planned pass' start-up uses, at least one."""
    return max(1, min(count, cpu_share(devices) - 2))


def spare_queues(plan, run_dir: Path, launcher_waits: bool,
                 deadline: Optional[float]) -> Dict[int, List[dict]]:
    """Each device's spare units (queue entries), or none where the run cannot have more passes
    now, its processes do not start ahead, or nobody would wait for the choice. Clears the choices
    an interrupted run of this dir left, and its spares' dirs."""
    clear_leftovers(run_dir, plan)
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


def clear_leftovers(run_dir: Path, plan) -> None:
    """Remove the dirs of spares a killed run left (units of later passes that plan.json does not
    have): a resumed unit of that id would read their events as its own."""
    if plan.processes is None:
        return
    known = {u.unit_id for u in plan.units}
    for d in (Path(run_dir) / "units").glob("*.r*.d*.s0"):
        try:
            later = int(d.name.rsplit(".", 3)[1][1:]) >= plan.processes
        except (IndexError, ValueError):
            continue
        if later and d.name not in known:
            shutil.rmtree(d, ignore_errors=True)


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


def await_choice(run_dir: Path, device: int, deadline: Optional[float], started: int,
                 before_giving_up: Callable[[], None]) -> List[dict]:
    """The device's more units once the orchestrator has chosen them ([] if none, or if this job
    gave up: at the run limit, or once the orchestrator's heartbeat is GIVE_UP_S old; it stops its
    spares first, so that the job the orchestrator then submits finds their dirs clear)."""
    path = choice_path(run_dir, device)
    marker = waiting_path(run_dir, device)
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_name(f".{marker.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"spares": started}))
    os.replace(tmp, marker)  # a requeued job's count replaces its first attempt's
    # The heartbeat's content changes at each beat; when it last did is read on this job's clock
    # (a shared file system's clock and attribute cache need not agree with it).
    last, changed = None, time.time()
    while True:
        if path.exists():
            return list(json.loads(path.read_text()).get("units") or [])
        now = time.time()
        try:
            seen = heartbeat_path(run_dir).read_text()
        except OSError:
            seen = None
        if seen != last:
            last, changed = seen, now
        why = None
        if deadline is not None and now >= deadline:
            why = "the run limit"
        elif now - changed > GIVE_UP_S:
            why = f"no choice, and no sign of the orchestrator for {GIVE_UP_S:.0f} s"
        if why:
            before_giving_up()
            if _create_once(path, {"units": [], "given_up": why}):
                return []
            continue  # the choice came first
        time.sleep(POLL_S)


def same_but_nodes(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether a spare's unit was built as the chosen one (all but the nodes it runs)."""
    skip = {"nodes", "prestart", "pool", "claims_dir", SPARE}

    def built(u: Mapping[str, Any]) -> Dict[str, Any]:
        # A spare's claims dir (its pass over every node has a unit per device) is harmless where the
        # chosen pass has one unit: nobody else claims there.
        return {k: v for k, v in u.items() if k not in skip} | {
            "plugin_config": {k: v for k, v in (u.get("plugin_config") or {}).items() if k != "claims_dir"}}
    return built(a) == built(b)


class Waiting:
    """The planned passes' jobs as the orchestrator sees them (`jobs` in the order of `devices`):
    it chooses once each one waits for the choice or has ended (a job that died must not keep the
    others waiting), and beats while it watches."""

    def __init__(self, run_dir: Path, devices: Sequence[int], jobs: Sequence[Any]):
        self.run_dir, self.devices, self.jobs = Path(run_dir), list(devices), list(jobs)

    def all_there(self) -> bool:
        beat(self.run_dir)
        return all(waiting_path(self.run_dir, d).exists() or job.done() for d, job in zip(self.devices, self.jobs))

    def waiting(self) -> List[int]:
        return [d for d, job in zip(self.devices, self.jobs)
                if waiting_path(self.run_dir, d).exists() and not job.done()]

    def started(self, devices: Sequence[int]) -> int:
        """How many spare processes the least of `devices` started (each job starts what its CPUs allow)."""
        counts = [json.loads(waiting_path(self.run_dir, d).read_text()).get("spares", 0) for d in devices]
        return min(counts, default=0)
