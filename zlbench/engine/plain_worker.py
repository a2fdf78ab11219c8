"""Run work units: one pytest process over a shard of test nodes, restarted when it dies.

The benchmark process appends events (start/end/record/...) to the unit's events file. The
worker watches that file: a node running past its timeout is killed (status timeout); when the
process dies, `outcome` reads what it left and decides: the node in flight gets crashed (or
poisoned, when the timing plugin said the capture attempt poisoned the context) and the rest of
the shard goes on in a fresh process. Nothing already measured is lost: events are flushed as
they are produced.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from zlbench.engine.locks import DeviceLock, held_fds
from zlbench.engine.processes import (IDLE_FLOOR_S, LAUNCH_BANNER, POLL_S, die_with_parent, idle_limit, job_id,
                                     kill_group, log_tail, process_env, pytest_argv, wait_exit)
from zlbench.results import events as ev
from zlbench.results.events import GATE_ENV, GATE_NODES_ENV, GATE_NODES_FILE, GATE_SOME
from zlbench.engine.stealing import Ownership



class Terminated(RuntimeError):
    """The job is being ended from outside (scancel, preemption, requeue): stop, claim nothing."""


@dataclass
class Attempt:
    """What one benchmark process did: the events appended while it ran, and how it ended."""

    given: List[str]  # the nodes it was given
    new: List[dict]
    returncode: int
    killed_for: Optional[str] = None  # node_timeout | startup | between_nodes | deadline | None
    log_tail: str = ""

    @property
    def started(self) -> List[dict]:
        return [e for e in self.new if e.get("event") == "start"]

    @property
    def ended(self) -> set:
        return {ev.base_node(e["node"]) for e in self.new if e.get("event") == "end"}

    def collect_error(self, node: str) -> Optional[dict]:
        return next((e for e in self.new if e.get("event") == "collect_error"
                     and node.startswith(e.get("nodeid") or "\0")), None)


@dataclass
class Outcome:
    ends: List[dict] = field(default_factory=list)  # events to append: end / retry
    stop: bool = False  # nothing more can run in this unit
    terminated: bool = False  # ended from outside: stop and claim nothing


def _end(node: str, status: str, reason: str, **extra) -> dict:
    return {"event": "end", "node": node, "status": status, "reason": reason, **extra}


def outcome(attempt: Attempt, answerable: Sequence[str], history: Sequence[dict], *,
            node_timeout: float, crash_retries: int) -> Outcome:
    """Pure: the statuses a finished benchmark process leaves to record, from its events and exit.
    `answerable`: the nodes this unit answers for now; `history`: the unit's events before it."""
    setup_error = next((e["reason"] for e in attempt.new if e.get("event") == "setup_error"), None)
    if setup_error:
        return Outcome([_end(n, "fatal", setup_error) for n in answerable if n not in attempt.ended], stop=True)
    flight = ev.in_flight(attempt.new)
    if flight is not None:
        return _in_flight_outcome(attempt, flight, history, node_timeout, crash_retries)
    return _between_nodes_outcome(attempt, answerable, node_timeout)


def _between_nodes_outcome(attempt: Attempt, answerable: Sequence[str], node_timeout: float) -> Outcome:
    """The process ended between nodes. Nodes it never started: collection errors, or a process
    that died before its first node."""
    started = {ev.base_node(s["node"]) for s in attempt.started}
    never = [n for n in answerable if n not in attempt.ended and n not in started]
    out = Outcome()
    for n in never:
        err = attempt.collect_error(n)
        if err is not None:
            out.ends.append(_end(n, "failed", f"collection error: {err.get('reason')}"))
    if not never or any(attempt.collect_error(n) for n in attempt.given):
        # pytest refuses the whole argv when a named node's file fails to import: the other
        # nodes go on in a fresh process.
        return out
    if attempt.ended and attempt.returncode not in (0, 1):
        # It left between nodes (e.g. after a device fault made its context unusable): the rest
        # goes on in a fresh process. Progress was made, so this cannot loop forever.
        return out
    for n in never:
        out.ends.append(_never_started(attempt, n, bool(started), node_timeout))
    return out


def _never_started(attempt: Attempt, node: str, any_started: bool, node_timeout: float) -> dict:
    if attempt.killed_for == "startup" and not any_started:
        return _end(node, "timeout", f"the benchmark process ran {idle_limit(node_timeout):g} s (launcher."
                                     f"node_timeout_s={node_timeout:g}, at least {IDLE_FLOOR_S:g} s for a start-up) "
                                     "before its first test: imports, conftest, collection or a session fixture "
                                     f"hung; log tail: {attempt.log_tail}")
    if attempt.killed_for == "between_nodes" and not any_started:
        # A resident A/B process (engine/side_process.py) that started no test of this command.
        return _end(node, "timeout", f"the benchmark process went {idle_limit(node_timeout):g} s with no test in "
                                     f"flight (launcher.node_timeout_s={node_timeout:g}, at least {IDLE_FLOOR_S:g} s "
                                     "between tests) before it started this one: it hung between tests; log tail: "
                                     f"{attempt.log_tail}")
    if attempt.killed_for == "deadline" and not any_started:
        # zlbench killed the process before its first node (still importing the corpus): the
        # run's time limit was reached, nothing crashed.
        return _end(node, "timeout", f"{ev.DEADLINE_REASON} before it ran", resumable=True)
    if not any_started:
        return _end(node, "crashed", f"{_exit_reason(attempt.returncode)} before running any node; "
                                     f"log tail: {attempt.log_tail}")
    return _end(node, "failed", "not collected by pytest (deselected or missing)")


def _in_flight_outcome(attempt: Attempt, flight: dict, history: Sequence[dict], node_timeout: float,
                       crash_retries: int) -> Outcome:
    node, op = ev.base_node(flight["node"]), flight.get("op")
    if attempt.killed_for is None and attempt.returncode == -signal.SIGTERM:
        # Terminated from outside (scancel, preemption, a user's kill): not the node's fault.
        return Outcome([_end(flight["node"], "crashed", "terminated by SIGTERM (job cancelled or "
                             "preempted); resume to measure it", op=op, resumable=True)], terminated=True)
    poison = next((e for e in attempt.new if e.get("event") == "poison"
                   and ev.base_node(e.get("node") or "") == node), None)
    if attempt.killed_for == "node_timeout":
        status, reason = "timeout", f"exceeded launcher.node_timeout_s={node_timeout:g}s"
    elif attempt.killed_for == "deadline":
        # How long it had run says whether the limit or the node is at fault (a node that tunes
        # for a minute per process needs a longer limit, or timer.share_tuning=true).
        status, reason = "timeout", f"{ev.DEADLINE_REASON} while it ran, {time.time() - flight['t']:.0f} s in"
    elif poison is not None:
        status, reason = "poisoned", f"capture poisoned the device context: {poison['reason']}"
    else:
        status, reason = "crashed", f"{_exit_reason(attempt.returncode)}; log tail: {attempt.log_tail}"
    if status == "crashed" and ev.died_capturing(attempt.new, node) and not ev.capture_crash_retry(history, node):
        # The graph capture killed the process (no exception to fall back on): once more in a fresh
        # process, whose graph timer then times this test directly and marks it so.
        return Outcome([{"event": "retry", "node": node, "reason": reason, "capture_crash": True}])
    retried = sum(1 for e in history if e.get("event") == "retry" and e.get("node") == node
                  and not e.get("capture_crash"))
    if status == "crashed" and retried < crash_retries:
        return Outcome([{"event": "retry", "node": node, "reason": reason}])
    # Cut by the run's time limit: not the node's fault, so a resume measures it again.
    return Outcome([_end(flight["node"], status, reason, op=op, wall_s=round(time.time() - flight["t"], 3),
                         **({"resumable": True} if attempt.killed_for == "deadline" else {}))])


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"process killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"process killed by signal {-code}"
    return f"process exited with code {code}"


def _done(events: Sequence[dict]) -> Dict[str, dict]:
    """A unit's nodes with nothing left to run: a final end, or stopped (a more pass the run limit cut)."""
    return {**ev.stopped(events), **ev.final_ends(events)}


class UnitRunner:
    """Runs one work unit to completion: every node it answers for gets a terminal status."""

    def __init__(self, unit: dict, run_dir: str, deadline: Optional[float] = None,
                 extra_env: Optional[Dict[str, Optional[str]]] = None, fresh: bool = False):
        self.unit = unit
        self.dir = Path(run_dir) / "units" / unit["unit_id"]
        if fresh:  # a spare (engine/spares.py): what an interrupted run left there is no unit's
            self.wipe()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.events = self.dir / ev.EVENTS_FILE
        self.log = self.dir / "pytest.log"
        self.deadline = deadline
        self.node_timeout = float(unit["node_timeout_s"])
        self.owner = Ownership(unit)
        cfg_path = self.dir / "plugin_config.json"
        cfg_path.write_text(json.dumps({**unit["plugin_config"], "events": str(self.events)}, indent=1))
        self.env = process_env(unit, extra_env or {}, cfg_path)
        self.ahead: Optional[Started] = None  # its first process, started ahead by prestart()
        # Called once this unit's process may measure (run_queue starts later units' then).
        self.on_measuring: Optional[Callable[[], None]] = None

    def run(self) -> Dict[str, int]:
        stopped_running = set()  # nodes this call's run limit stopped while they ran (their end is recorded)
        while True:
            history = ev.read_events(self.events)
            done = _done(history)
            remaining, takeable = self.owner.pending(done)
            if not remaining and not takeable:
                break
            if self.deadline is not None and time.time() >= self.deadline:
                # A node the limit stopped while it ran has its end already ("... while it ran"):
                # resumable, so not done, but not one that never ran either.
                for n in remaining:
                    if ev.base_node(n) not in stopped_running:
                        self._record(_end(n, "timeout", f"{ev.DEADLINE_REASON} before it ran", resumable=True))
                break
            if self.ahead is not None and remaining and set(remaining) <= set(self.ahead.collected):
                takeable = []  # the process started ahead runs this unit's own nodes; others' come after
            attempt = self._launch(remaining + takeable)
            self.owner.note_attempt(takeable, attempt)
            answerable = [n for n in remaining + takeable if self.owner.answers_for(n)]
            result = outcome(attempt, answerable, history, node_timeout=self.node_timeout,
                             crash_retries=int(self.unit.get("crash_retries", 0)))
            for e in result.ends:
                self._record(e)
                if e.get("event") == "end" and e.get("resumable") and attempt.killed_for == "deadline":
                    stopped_running.add(ev.base_node(e["node"]))
            if result.terminated:
                raise Terminated(f"unit {self.unit['unit_id']}: the benchmark process got SIGTERM")
            if result.stop:
                break
        return status_counts(ev.read_events(self.events), [n for n in self.owner.all_nodes()
                                                            if self.owner.answers_for(n)])

    def _record(self, e: dict) -> None:
        """Append an end (or retry) to the unit's events. A more pass cut by the run's time limit
        leaves its nodes `stopped`, not cut: more processes never turn a whole run into a cut one
        (their number is estimated to fit; a node that tunes afresh may take longer than planned)."""
        if self.unit.get("more_pass") and e.get("event") == "end" and e.get("status") == "timeout" \
                and e.get("resumable"):
            e = {"event": "stopped", "node": e["node"], "reason": f"{e['reason']}: a more process of a "
                 "node whose processes disagreed, left out (its rows keep the processes that ran)"}
        ev.append(self.events, **e)

    def prestart(self, leave_out: Sequence[str] = ()) -> None:
        """Start this unit's first benchmark process now, held at its gate (imports and collection
        need no device) until run() lets it measure: a pass before it on this device is still
        measuring, so a process' start-up (8-12 s with torch and FlagGems) is off the wall."""
        if self.ahead is not None or (self.deadline is not None and time.time() >= self.deadline):
            return
        remaining, _ = self.owner.pending(_done(ev.read_events(self.events)))
        skip = set(leave_out)
        remaining = [n for n in remaining if n not in skip]
        if remaining:  # its own nodes only: others' are claimed when taken, not ahead
            self.ahead = self._start(remaining)

    def discard_ahead(self) -> None:
        """Stop a process started ahead that will not measure (the run was cut or stopped)."""
        started, self.ahead = self.ahead, None
        if started is not None:
            started.discard()

    def wipe(self) -> None:
        """Remove the unit's dir (a spare's, not chosen: it measured nothing)."""
        shutil.rmtree(self.dir, ignore_errors=True)

    def _launch(self, nodes: List[str]) -> Attempt:
        started, self.ahead = self.ahead, None
        if started is not None and not (nodes and set(nodes) <= set(started.collected)):
            started.discard()
            started = None
        if started is None:
            started = self._start(nodes)
        started.serving(nodes)  # fewer than it collected where another device took some first (or a spare)
        waiting = lambda holder: ev.append(self.events, "warning", message=f"waiting for device lock "  # noqa: E731
                                           f"{self.unit.get('device_lock')} held by {holder}")
        with DeviceLock(self.unit.get("device_lock"), waiting):
            started.open_gate()
            if self.on_measuring is not None:
                self.on_measuring()
            killed_for = _watch(started.proc, self.events, started.pos, self.node_timeout, self.deadline)
        started.log.close()
        proc = started.proc
        # When the process was gone (after session_end: the interpreter's and device's teardown).
        ev.append(self.events, "exited", returncode=proc.returncode, killed_for=killed_for)
        new, _ = ev.read_new_events(self.events, started.pos)
        # Given: its command line's nodes (pytest refuses them all where one fails to import).
        return Attempt(started.collected, new, proc.returncode, killed_for, log_tail(self.log))

    def _start(self, nodes: List[str]) -> "Started":
        """A benchmark process over `nodes`, waiting at its gate (plugins/device_setup.py) before
        its first node. It dies with this worker, and holds the run dir's lock while it lives (its
        device may still be in use for a moment after this worker is gone)."""
        pos = self.events.stat().st_size if self.events.exists() else 0
        argv = pytest_argv(list(self.unit["argv"]) + [str(Path(self.unit["corpus_root"]) / n) for n in nodes],
                           self.dir)
        ev.append(self.events, "launch", nodes=len(nodes), host=socket.gethostname(), job_id=job_id())
        log = open(self.log, "a", encoding="utf-8")
        log.write(f"\n{LAUNCH_BANNER} launching pytest over {len(nodes)} node(s)\n")
        log.flush()
        gate_read, gate_write = os.pipe()
        gate_nodes = self.dir / GATE_NODES_FILE
        gate_nodes.unlink(missing_ok=True)
        try:
            proc = subprocess.Popen(argv, cwd=self.dir, env={**self.env, GATE_ENV: str(gate_read),
                                                               GATE_NODES_ENV: str(gate_nodes)}, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=functools.partial(die_with_parent, os.getpid()),
                                    pass_fds=held_fds() + (gate_read,))
        except BaseException:
            os.close(gate_write)
            log.close()
            raise
        finally:
            os.close(gate_read)
        return Started(proc, list(nodes), pos, gate_write, log, gate_nodes)


@dataclass
class Started:
    """A benchmark process started over `nodes`: held at its gate until open_gate()."""

    proc: subprocess.Popen
    nodes: List[str]
    pos: int  # where its events begin in the unit's events file
    gate: Optional[int]  # the gate pipe's write end while the gate is shut
    log: object
    gate_nodes: Optional[Path] = None  # where the gate names the nodes to run, where not all it collected
    collected: List[str] = field(default_factory=list)

    def __post_init__(self):
        self.collected = list(self.nodes)

    def serving(self, nodes: List[str]) -> "Started":
        """This process, to run `nodes` (some of those it collected, in this order) once its gate opens."""
        self.nodes = list(nodes)
        return self

    def open_gate(self) -> None:
        if self.gate is not None:
            message = b"1"  # run what it collected
            if self.nodes != self.collected and self.gate_nodes is not None:
                self.gate_nodes.write_text(json.dumps(self.nodes))
                message = GATE_SOME
            try:
                os.write(self.gate, message)
            except OSError:  # it has died already: its exit says how
                pass
            os.close(self.gate)
            self.gate = None

    def discard(self) -> None:
        """Kill it before it measured anything (its gate shut: it never reached a node)."""
        kill_group(self.proc)
        self.proc.wait()
        if self.gate is not None:
            os.close(self.gate)
            self.gate = None
        self.log.close()


def _watch(proc: subprocess.Popen, events: Path, pos: int, node_timeout: float,
           deadline: Optional[float]) -> Optional[str]:
    """Wait for the process; kill its process group on a node timeout or the run deadline. The node
    clock runs between nodes too: a start-up (imports, conftest, collection) or a teardown that
    hangs (a stuck driver, a cache lock on NFS) waited for ever, as no node was in flight."""
    current, started_any = None, False
    since = time.time()
    while not wait_exit(proc, POLL_S):  # its exit ends the wait at once, not at the next look
        new, pos = ev.read_new_events(events, pos)
        for e in new:
            if e.get("event") == "start":
                current, since, started_any = e["node"], e["t"], True
            elif e.get("event") == "end":
                current, since = None, time.time()
        now = time.time()
        reason = None
        if current is not None and now - since > node_timeout:
            reason = "node_timeout"
        elif current is None and now - since > idle_limit(node_timeout):
            reason = "between_nodes" if started_any else "startup"
        elif deadline is not None and now > deadline:
            reason = "deadline"
        if reason:
            kill_group(proc)
            return reason
    return None


def status_counts(events: Sequence[dict], nodes: Sequence[str]) -> Dict[str, int]:
    done = _done(events)
    counts: Dict[str, int] = {}
    for n in nodes:
        s = done[n].get("status", "stopped") if n in done else "missing"  # a stopped event has no status
        counts[s] = counts.get(s, 0) + 1
    return counts
