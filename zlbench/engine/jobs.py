"""The job function every launcher runs: one device's work units (zlbench/engine/plain_worker.py runs plain
units one after another; zlbench/engine/device_ab.py runs a node-level A/B's units all at once)."""

from __future__ import annotations

import functools
from typing import Callable, Dict, List, Optional

from zlbench.engine.device_ab import run_device_ab
from zlbench.engine.locks import worker_of
from zlbench.engine.plain_worker import UnitRunner
from zlbench.engine.spares import SPARE, await_choice, choice_path, cpu_share, same_but_nodes, spares_to_start
from zlbench.results.rundir import load_plan


def run_queue(units: List[dict], run_dir: str, deadline: Optional[float] = None,
              extra_env: Optional[Dict[str, Optional[str]]] = None,
              pin: Optional[Callable[[dict], dict]] = None) -> Dict[str, Dict[str, int]]:
    """The job function both launchers run: a device's units, in order (a node-level A/B's units
    all at once, by zlbench/engine/device_ab.py). The run dir stays locked while it works. pin: how
    the launcher fits a unit to its allocation (applied to the more units chosen while it runs)."""
    with worker_of(run_dir):
        if units and load_plan(run_dir).get("schedule"):  # a node-level A/B
            return run_device_ab(units, run_dir, deadline, extra_env)
        return run_plain_units(units, run_dir, deadline, extra_env, pin)


def run_plain_units(units: List[dict], run_dir: str, deadline: Optional[float] = None,
                    extra_env: Optional[Dict[str, Optional[str]]] = None,
                    pin: Optional[Callable[[dict], dict]] = None) -> Dict[str, Dict[str, int]]:
    """A device's planned units in turn; where the queue has spare units (engine/spares.py), the
    processes of the first of them start while the last one measures, and the more units chosen
    afterwards run in them."""
    planned = [u for u in units if not u.get(SPARE)]
    spare_units = [u for u in units if u.get(SPARE)]
    # A requeued job whose choice was made already runs what was chosen (those units' dirs are
    # real units' now): no spares then.
    fresh = spare_units and not choice_path(run_dir, spare_units[0]["device"]).exists()
    spares = [UnitRunner(u, run_dir, deadline, extra_env, fresh=True) for u in spare_units] if fresh else []
    devices = len(load_plan(run_dir).get("devices") or [1]) if units else 1  # a job with no units has no plan to read
    starting = spares[:spares_to_start(len(spares), devices)] if spares else []  # the others' start when chosen
    more: List[UnitRunner] = []

    def clear_spares() -> None:
        chosen_ids = {r.unit["unit_id"] for r in more}
        for s in spares:
            s.discard_ahead()
            if s.unit["unit_id"] not in chosen_ids:
                s.wipe()

    def start_spares() -> None:
        # Not over nodes whose file failed to import here: pytest would refuse the whole list.
        broken = not_importable(run_dir, planned)
        for s in starting:
            s.prestart(leave_out=broken)

    try:
        # Processes started ahead beside the one measuring: no more than the job's other CPUs.
        counts = run_in_turn([UnitRunner(u, run_dir, deadline, extra_env) for u in planned],
                             start_spares if starting else None, max_ahead=max(1, cpu_share(devices) - 1))
        if spare_units:
            chosen = await_choice(run_dir, spare_units[0]["device"], deadline,
                                  sum(1 for s in spares if s.ahead is not None), clear_spares)
            more = adopt([(pin or (lambda u: u))(u) for u in chosen], spares, run_dir, deadline, extra_env)
            counts.update(run_in_turn(more))
        return counts
    finally:
        for r in more:
            r.discard_ahead()
        clear_spares()


def run_in_turn(runners: List[UnitRunner], after_last: Optional[Callable[[], object]] = None,
                max_ahead: Optional[int] = None) -> Dict[str, Dict[str, int]]:
    """One after another; where the plan says so (unit["prestart"] = k), a unit's process starts
    once a unit at most k places before it measures (the first unit when fewer are before it; a
    resumed queue's finished units measure nothing), and waits at its gate until the device is free.
    after_last: what comes after the last unit (the spare processes) starts as a unit after it
    would, the last unit's k places on, but not before the first unit has ended (so that the files
    that failed to import there are known), or once the last unit measures where it has no k.
    max_ahead: no k larger (the CPUs beside the measuring process)."""
    def ahead_of(runner: UnitRunner) -> int:
        k = int(runner.unit.get("prestart") or 0)  # plan.json of older runs: true/false
        return min(k, max_ahead) if max_ahead is not None else k

    ahead_of_next = (ahead_of(runners[-1]) or 1) if runners else 1
    start_next_at = max(min(1, len(runners) - 1), len(runners) - ahead_of_next)
    next_started = []

    def start_ahead(measuring: int) -> None:
        for i in range(measuring + 1, len(runners)):
            ahead = ahead_of(runners[i])
            if ahead > 0 and i - ahead <= measuring:
                runners[i].prestart()
        # >=: the unit at start_next_at may have nothing left to measure (a resumed queue)
        if after_last is not None and measuring >= start_next_at and not next_started:
            next_started.append(measuring)
            after_last()

    for j, runner in enumerate(runners):
        runner.on_measuring = functools.partial(start_ahead, j)
    try:
        counts = {}
        for r in runners:
            counts[r.unit["unit_id"]] = r.run()
            r.discard_ahead()  # started ahead, its nodes taken by another unit first: stopped now
        return counts
    finally:
        for r in runners:
            r.discard_ahead()


def adopt(chosen: List[dict], spares: List[UnitRunner], run_dir: str, deadline: Optional[float],
          extra_env: Optional[Dict[str, Optional[str]]]) -> List[UnitRunner]:
    """Runners of the chosen more units, each taking over its spare's process where the spare was
    built the same (unit id, command, env, config) and collected the chosen nodes; other spares of
    the same id are stopped and their dirs cleared first (the unit's events start afresh)."""
    by_id = {s.unit["unit_id"]: s for s in spares}
    runners = []
    for unit in chosen:
        spare = by_id.get(unit["unit_id"])
        started = spare.ahead if spare is not None else None
        fits = (started is not None and started.proc.poll() is None  # a spare that died (OOM) is not used
                and same_but_nodes(spare.unit, unit) and set(unit["nodes"]) <= set(started.collected))
        if spare is not None and not fits:
            spare.discard_ahead()
            spare.wipe()
        runner = UnitRunner(unit, run_dir, deadline, extra_env)
        if fits:
            spare.ahead = None
            runner.ahead = started.serving(unit["nodes"])
        runners.append(runner)
    return runners


def not_importable(run_dir: str, units: List[dict]) -> List[str]:
    """The units' nodes whose file failed to import in their processes so far."""
    from zlbench.results.events import events_path, read_events

    errors = [e.get("nodeid") or "" for u in units for e in read_events(events_path(run_dir, u["unit_id"]))
              if e.get("event") == "collect_error"]
    return [n for u in units for n in u["nodes"] if any(err and n.startswith(err) for err in errors)]
