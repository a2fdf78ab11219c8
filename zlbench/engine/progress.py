"""Progress while a run goes: done/total, failures by status, ETA, what each device is running.

A live rich display on a terminal; plain lines elsewhere (CI, Slurm logs). It only reads the units'
events files, so it works the same for local and Slurm jobs."""

from __future__ import annotations

import logging

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, List, Optional

from zlbench.results.events import events_path, final_ends, in_flight, read_events, stopped

log = logging.getLogger("zlbench")


class RunState:
    def __init__(self, run_dir: Path, units: List[dict]):
        self.run_dir = run_dir
        self.units = units
        self.total = sum(len(u["nodes"]) for u in units)
        # A plain run measures each node in several processes, an A/B on two sides a round: what
        # is counted is a node's run, one per process or side and round.
        self.counted = "nodes" if len({(u["side"], u["round"]) for u in units}) <= 1 else "node runs"
        self.started = time.time()
        self.initial_done: Optional[int] = None

    def poll(self):
        # Ends per side and round, wherever they ran: a unit may have taken another's nodes.
        # Placeholders of an earlier, killed job do not count: a resume measures them again.
        ended: Dict[tuple, str] = {}
        running: Dict[int, str] = {}
        for u in self.units:
            events = read_events(events_path(self.run_dir, u["unit_id"]))
            for node, e in final_ends(events).items():
                ended[(u["side"], u["round"], node)] = e["status"]
            for node in stopped(events):  # the A/B needs no more rounds of it
                ended[(u["side"], u["round"], node)] = "stopped"
            current = in_flight(events)
            if current:
                running[u["device"]] = f"{u['side']} r{u['round']}: {current['node'].split('::')[-1]}"
        planned = {(u["side"], u["round"], n) for u in self.units for n in u["nodes"]}
        statuses: Counter = Counter(st for key, st in ended.items() if key in planned)
        done = sum(statuses.values())
        if self.initial_done is None:
            self.initial_done = done
        return done, statuses, running

    def eta(self, done: int) -> str:
        fresh = done - (self.initial_done or 0)
        if fresh <= 0:
            return "?"
        left = (time.time() - self.started) / fresh * (self.total - done)
        return f"{int(left // 60)}m{int(left % 60):02d}s"


def _failures(statuses: Counter) -> str:
    bad = {k: v for k, v in statuses.items() if k not in ("ok", "stopped")}
    return ", ".join(f"{k}={v}" for k, v in sorted(bad.items())) or "none"


def watch(state: RunState, finished: Callable[[], bool], mode: str = "auto",
          wait: Callable[[float], None] = time.sleep) -> None:
    """Until finished(); between looks, wait(seconds), which may return early (the launcher's
    wait returns as soon as its jobs have ended: the run's end is noticed at once)."""
    if mode == "none":
        while not finished():
            wait(0.5)
        return
    live = mode == "live" or (mode == "auto" and sys.stderr.isatty())
    if live:
        _watch_live(state, finished, wait)
    else:
        _watch_plain(state, finished, wait)


def _watch_plain(state: RunState, finished: Callable[[], bool], wait: Callable[[float], None]) -> None:
    last = None
    last_print, last_line = 0.0, ""
    while True:
        is_done = finished()
        done, statuses, running = state.poll()
        now = time.time()
        line = (f"[zlbench] {done}/{state.total} {state.counted} | failures: {_failures(statuses)} | "
                f"ETA {state.eta(done)} | " + "; ".join(f"dev {d}: {w}" for d, w in sorted(running.items())))
        if (done, tuple(sorted(statuses.items()))) != last or now - last_print > 30 or (is_done and line != last_line):
            log.info(line)
            last, last_print, last_line = (done, tuple(sorted(statuses.items()))), now, line
        if is_done:
            return
        wait(1.0)


def _watch_live(state: RunState, finished: Callable[[], bool], wait: Callable[[float], None]) -> None:
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    def render():
        done, statuses, running = state.poll()
        table = Table(title=f"zlbench  {done}/{state.total} {state.counted}   ETA {state.eta(done)}")
        table.add_column("device")
        table.add_column("running")
        for d, w in sorted(running.items()):
            table.add_row(str(d), w)
        table.caption = f"failures: {_failures(statuses)}"
        return table

    with Live(render(), console=Console(stderr=True), refresh_per_second=2) as live:
        while not finished():
            wait(0.5)
            live.update(render())
        live.update(render())
