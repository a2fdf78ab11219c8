"""Node-level A/B on one device, with one resident benchmark process per side.

Each side's process (its env and caches fixed when it starts) collects the device's nodes once and
then runs them one command at a time (plugins/serve.py). Sides alternate per node, ABBA within a
round (A n1, B n1, B n2, A n2, ...; node order shuffled per round by the planner), so both sides of
a row are timed seconds apart, and only one process runs a node on the device at a time.

Liveness first: before round 1 is timed, each side's prober (a resident process of its own, with
untimed autotuning and a scratch tuning cache: plugins/untimed_tuning.py) compiles every node, both
sides at once where each has a Triton cache of its own; a node whose kernels are identical on both
sides is timed once, on side A, and never again ("not live"), nor is a node with nothing to compare
(every row skipped or a view, on both sides) from round 2. The timed runs then find their kernels
compiled: a dead axis costs one compile pass and one timed pass. From
`min_rounds` on, a node whose live rows all have a settled verdict (zlbench/ab/sequential.py, valid
although it looks after every round) stops. Both decisions are written as `stopped` events into the
rounds left out, so a resume makes the same ones and nothing reads as cut. On several devices a
device done with its own rounds takes later rounds of other devices' nodes, both sides of a round at
once (zlbench/engine/stealing.py): nodes stop at different rounds, so devices would otherwise finish far
apart. A node that crashes or hangs gets crashed / timeout as in a plain run (worker.outcome) and
its side a fresh process; `respawn_every` rounds both sides restart, each start with a FlagGems
tuning cache of its own, so process-level luck (allocation addresses, autotune picks) is drawn again
rather than baked into one side.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from zlbench.engine.locks import DeviceLock
from zlbench.ab.fingerprints import cache_entries
from zlbench.ab.kernels import compare_kernels
from zlbench.results import events as ev
from zlbench.results.schema import did_no_device_work
from zlbench.results.rundir import load_plan
from zlbench.engine.side_process import SideProcess, wait_served
from zlbench.engine.stealing import HEARTBEAT_S, RoundStealing
from zlbench.engine.processes import POLL_S, job_id, log_tail
from zlbench.engine.plain_worker import Attempt, Terminated, outcome, status_counts

class DeviceAB:
    """The node-level A/B of one device: every (side, round) unit of the plan on that device."""

    def __init__(self, units: Sequence[dict], run_dir: str, deadline: Optional[float],
                 extra_env: Optional[Dict[str, Optional[str]]]):
        self.run_dir = Path(run_dir)
        self.units = {(u["side"], u["round"]): u for u in units}
        plan = load_plan(self.run_dir)  # run.py writes plan.json before any job starts
        self.schedule = plan["schedule"]
        self.sides: List[str] = list(self.schedule["sides"])
        self.rounds = int(plan["rounds"])
        self.deadline = deadline
        first = self.units[(self.sides[0], 0)]
        for u in units:
            ev.events_path(self.run_dir, u["unit_id"]).parent.mkdir(parents=True, exist_ok=True)
        # With respawns, each side process tunes afresh, so autotune picks are drawn again per
        # respawn instead of being baked into one side (Triton's kernel cache, code only, is kept).
        retune = bool(self.schedule.get("respawn_every"))
        # Every device's units: this device may take later rounds of other devices' nodes.
        self.steal = RoundStealing(plan["units"], first["device"], self.sides, self.rounds, self.run_dir)
        # They collect other devices' nodes too (`pool`): this device may take their later rounds.
        collected = list(first["nodes"]) + list(first.get("pool") or [])
        self.procs = {s: SideProcess(s, self.units[(s, 0)], self.run_dir, collected, extra_env or {}, retune=retune,
                                     index=i) for i, s in enumerate(self.sides)}
        # Liveness first: one prober per side, a process of its own so that its untimed tuning
        # picks never reach the side's timed runs.
        self.liveness = not self.schedule.get("aa")
        self.probers = {s: SideProcess(s, self.units[(s, 0)], self.run_dir, first["nodes"], extra_env or {},
                                       prober=True, index=i)
                        for i, s in enumerate(self.sides)} if self.liveness else {}
        # Both sides probe at once only where each compiles into a Triton cache of its own: in a
        # shared one each probe would read the other's compiles as its own kernels.
        caches = [self.units[(s, 0)]["env"].get("TRITON_CACHE_DIR") for s in self.sides]
        self.probe_together = None not in caches and len(set(caches)) == len(caches)
        self.node_timeout = float(first["node_timeout_s"])
        self.crash_retries = int(first.get("crash_retries") or 0)
        self.lock = first.get("device_lock")
        # Taken rounds (other devices' nodes): node -> the respawn period its round ran in, in the
        # processes now running.
        self.taken_in: Dict[str, int] = {}

    # -- what is done ------------------------------------------------------------------------
    def _events(self, unit: Mapping) -> List[dict]:
        return ev.read_events(ev.events_path(self.run_dir, unit["unit_id"]))

    def _done(self, unit: Mapping) -> set:
        return ev.done_nodes(self._events(unit))

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> Dict[str, Dict[str, int]]:
        waiting = lambda holder: ev.append(  # noqa: E731
            ev.events_path(self.run_dir, self.units[(self.sides[0], 0)]["unit_id"]), "warning",
            message=f"waiting for device lock {self.lock} held by {holder}")
        alive = threading.Event()
        heart = threading.Thread(target=self._heartbeat, args=(alive,), daemon=True)
        heart.start()
        try:
            with DeviceLock(self.lock, waiting):
                try:
                    if all(self._round(r) for r in range(self.rounds)):
                        self._take_others()
                finally:
                    for p in [*self.procs.values(), *self.probers.values()]:
                        p.stop()
        finally:
            alive.set()
            heart.join()  # a beat under way would land after the mark and read as alive
            self.steal.finished()
        return {u["unit_id"]: status_counts(self._events(u), self.steal.answered(u)) for u in self.units.values()}

    def _heartbeat(self, done: threading.Event) -> None:
        """Other devices wait for rounds of ours to take only while this device says it is alive."""
        while not done.is_set():
            self.steal.beat()
            done.wait(HEARTBEAT_S)

    def _round(self, r: int) -> bool:
        """Run round r; False when the run's time limit cut it (everything left is marked)."""
        if r:
            self._respawn_if_due(r)
            self._stop_decided(r)
        order = self.units[(self.sides[0], r)]["nodes"]
        done = {s: self._done(self.units[(s, r)]) for s in self.sides}
        # Started before the probes, the timed processes collect while the probers compile.
        self._start_sides(r, order, done)
        if r == 0 and self.liveness:
            if not self._probe_round(order, done):
                return False
            done = {s: self._done(self.units[(s, r)]) for s in self.sides}
        for i, node in enumerate(order):
            first, second = self.sides if (i + r) % 2 == 0 else self.sides[::-1]
            if any(node not in done[s] for s in self.sides) and not self.steal.take(node, r):
                continue  # another device took this round of the node (it reports it there)
            if not self._node_round(node, r, (first, second), done):
                return False
        return True

    def _start_sides(self, r: int, order: Sequence[str], done: Mapping[str, set]) -> None:
        """At a round's start, the processes a respawn (or the run's start) left to start, all at
        once: each one's start-up (imports, collection: 5-12 s with torch and FlagGems) runs beside
        the other's (and in round 1 beside the probes), where started at its side's first node it
        ran after the other side's first node."""
        if self.deadline is not None and time.time() >= self.deadline:
            return
        for side in self.sides:
            proc = self.procs[side]
            if not proc.alive() and not proc.broken and any(n not in done[side] for n in order):
                proc.start(self.units[(side, r)])

    def _respawn_if_due(self, r: int) -> None:
        """Every respawn_every rounds both sides start afresh (the next node starts them)."""
        every = int(self.schedule.get("respawn_every") or 0)
        if every and r % every == 0:
            for p in self.procs.values():
                p.stop()

    def _node_round(self, node: str, r: int, order: Sequence[str], done: Mapping[str, set]) -> bool:
        """Both sides of one node's round r in the given order; False when the time limit cut it."""
        for side in order:
            if node in done[side]:
                continue
            if self.deadline is not None and time.time() >= self.deadline:
                self._cut_by_deadline()
                return False
            self._run_node(side, self.units[(side, r)], node)
        return True

    # -- liveness first ----------------------------------------------------------------------------
    def _probe_round(self, order: Sequence[str], done: Mapping[str, set]) -> bool:
        """Before round 1 is timed: every node left to time is probed on both sides; one whose
        kernels are identical gets `stopped` (not live) in every round but side A's first. False
        when the time limit cut the probes."""
        left = [n for n in order if any(n not in done[s] for s in self.sides)]
        earlier = {s: self._earlier_probes(s) for s in self.sides}
        try:
            for side in self.sides:  # both at once: each one's start-up runs beside the other's
                if any(n not in earlier[side] for n in left):
                    self._start_prober(side)
            for node in left:
                if self.deadline is not None and time.time() >= self.deadline:
                    self._cut_by_deadline()
                    return False
                if self._liveness(node, {s: earlier[s].get(node) for s in self.sides}) is False:
                    # Later rounds first: once round 1 reads as done, other devices could take round 2.
                    self._stop(node, "not live", 1)
                    self._stop(node, "not live", 0, sides=self.sides[1:])
        finally:
            for p in self.probers.values():
                p.stop()  # their GPU memory back before anything is timed
        return True

    def _probe_file(self, side: str) -> Path:
        return ev.events_path(self.run_dir, self.units[(side, 0)]["unit_id"]).with_name("probe.jsonl")

    def _earlier_probes(self, side: str) -> Dict[str, Tuple[set, bool]]:
        """node -> (kernels, failed): what the probes of the run a resume goes on with found on this
        side (their `artifacts` in its round-1 unit), and whether a case of one failed."""
        found: Dict[str, Tuple[set, bool]] = {}
        for e in self._events(self.units[(side, 0)]):
            if e.get("event") == "artifacts" and e.get("probe"):
                node = ev.base_node(e.get("node") or "")
                kernels, failed = found.get(node, (set(), False))
                found[node] = (kernels | set(e.get("kernels") or []), failed or bool(e.get("probe_failed")))
        return found

    def _liveness(self, node: str, earlier: Mapping[str, Optional[Tuple[set, bool]]]) -> Optional[bool]:
        """The node's kernels on both sides, each compiled by its side's prober without timing (a
        probe; `earlier`: a side's from the run a resume goes on with), compared: False (not live)
        when identical. None (unknown, the node is timed on both sides as usual): a side compiled
        nothing for it, a probe failed or died, or a prober cannot start."""
        found = {s: earlier[s] for s in self.sides if earlier.get(s)}
        sent = {}
        for s in self.sides:
            if s in found:
                continue
            if any(p.broken for p in self.probers.values()):
                return None
            sent[s] = self._send_probe(s, node)
            if not self.probe_together:
                found[s] = self._await_probe(s, node, *sent.pop(s))
        for s, (seq, pos, cached) in sent.items():
            found[s] = self._await_probe(s, node, seq, pos, cached)
        if any(failed or not kernels for kernels, failed in found.values()):
            return None
        return compare_kernels(*(found[s][0] for s in self.sides))

    def _send_probe(self, side: str, node: str) -> Tuple[int, int, set]:
        proc, probe_file = self.probers[side], self._probe_file(side)
        pos = probe_file.stat().st_size if probe_file.exists() else 0
        cached = cache_entries(self.units[(side, 0)]["env"].get("TRITON_CACHE_DIR"))
        self._start_prober(side)
        return proc.send(self.units[(side, 0)], node, events=probe_file, probe=True), pos, cached

    def _await_probe(self, side: str, node: str, seq: int, pos: int, cached: set) -> Tuple[set, bool]:
        """The probe's kernels once it is served, written into the side's round-1 unit (the report
        reads liveness from there, as if the timed run compiled them); nothing when it died."""
        proc, probe_file, unit = self.probers[side], self._probe_file(side), self.units[(side, 0)]
        if proc.broken:
            return set(), True
        served, _ = wait_served(proc, seq, probe_file, pos, self.node_timeout, self.deadline)
        if not served:
            proc.kill()
            # What it compiled before it died sits in the Triton cache it shares with its side, and
            # its `artifacts` event never came: the side's timed run would compile nothing and
            # leave the node's liveness unknown (or a resume's probe find nothing new). Gone, the
            # timed run (or the next probe) compiles them again and says which they are.
            triton = unit["env"].get("TRITON_CACHE_DIR")
            _forget(triton, cache_entries(triton) - cached)
            self._check_prober(side, proc.proc.pid)
            return set(), True
        new, _ = ev.read_new_events(probe_file, pos)
        kernels = node_kernels(new, node)
        # A case that failed (out of memory beside the other side's probe, say) compiled only part
        # of the node's kernels: identical parts prove nothing.
        failed = any(e.get("event") == "end" and e.get("status") not in ("ok", "skipped") for e in new)
        if kernels:
            ev.append(ev.events_path(self.run_dir, unit["unit_id"]), "artifacts", node=node,
                      op=next((e.get("op") for e in new if e.get("event") == "start"), None),
                      kernels=sorted(kernels), probe=True, **({"probe_failed": True} if failed else {}))
        return kernels, failed

    def _start_prober(self, side: str) -> None:
        proc = self.probers[side]
        if proc.proc is not None and not proc.alive():
            self._check_prober(side, proc.proc.pid)  # the eager start may have failed already
        if not proc.alive() and not proc.broken:
            proc.start(self.units[(side, 0)], events=self._probe_file(side))

    def _check_prober(self, side: str, pid: int) -> None:
        """A prober process that ended before it was ready: starting it again per node would only
        repeat that, so the rest are timed unprobed, and the run says why."""
        proc = self.probers[side]
        if proc.broken or any(e.get("event") == "ready" and e.get("pid") == pid
                              for e in ev.read_events(self._probe_file(side))):
            return
        proc.broken = f"the prober exited before it was ready; log tail: {log_tail(proc.log)}"
        ev.append(ev.events_path(self.run_dir, self.units[(side, 0)]["unit_id"]), "warning",
                  message=f"liveness first: side {side}'s prober cannot start, so every node left "
                          f"is timed on both sides ({proc.broken})")

    def _stop(self, node: str, why: str, from_round: int, sides: Optional[Sequence[str]] = None) -> None:
        """`stopped` events: the node runs in none of these sides' rounds from_round.. (those this
        device holds: a round another device took is that device's to report)."""
        # Every round claimed before any reads as done: a round stopped (done) makes the next one
        # takeable on another device.
        held = [rr for rr in range(from_round, self.rounds) if self.steal.take(node, rr)]
        for rr in held:
            for s in sides or self.sides:
                ev.append(ev.events_path(self.run_dir, self.units[(s, rr)]["unit_id"]), "stopped",
                          node=node, why=why, after_rounds=max(1, from_round))

    def _run_node(self, side: str, unit: Mapping, node: str) -> None:
        proc = self.procs[side]
        path = ev.events_path(self.run_dir, unit["unit_id"])
        while True:
            if proc.broken:
                ev.append(path, "end", node=node, status="crashed",
                          reason=f"the side's benchmark process cannot start: {proc.broken}")
                return
            history = ev.read_events(path)
            pos = path.stat().st_size if path.exists() else 0
            fresh = not proc.alive()
            ev.append(path, "launch", nodes=1, host=socket.gethostname(), job_id=job_id(), resident=True)
            triton = unit["env"].get("TRITON_CACHE_DIR")
            cached = cache_entries(triton)
            if fresh:
                proc.start(unit)
            seq = proc.send(unit, node)
            served, killed_for = wait_served(proc, seq, path, pos, self.node_timeout, self.deadline)
            if served:
                return
            proc.proc.wait()
            # As for a probe that dies: what the node compiled before its process ended has no
            # `artifacts` event, so its retry (or a resume) would compile nothing and leave its
            # liveness unknown; gone, the next run of the node compiles them again and says so.
            _forget(triton, cache_entries(triton) - cached)
            ev.append(path, "exited", returncode=proc.proc.returncode, killed_for=killed_for)
            new, _ = ev.read_new_events(path, pos)
            attempt = Attempt([node], new, proc.proc.returncode, killed_for, log_tail(proc.log))
            result = outcome(attempt, [node], history, node_timeout=self.node_timeout,
                             crash_retries=self.crash_retries)
            for e in result.ends:
                ev.append(path, **e)
            if result.terminated:
                raise Terminated(f"unit {unit['unit_id']}: the benchmark process got SIGTERM")
            if fresh and killed_for is None and not any(e.get("event") == "ready" for e in new):
                # It died before it could take a command: starting it again per node would only
                # repeat that for every node of the side.
                setup = next((e["reason"] for e in new if e.get("event") == "setup_error"), None)
                proc.broken = setup or f"exited with code {proc.proc.returncode} before it was ready; " \
                                       f"log tail: {log_tail(proc.log)}"
            if not any(e.get("event") == "retry" for e in result.ends):
                return

    def _cut_by_deadline(self) -> None:
        """The run's time limit: every (side, round, node) left that this device answers for gets
        timeout, as plain units do."""
        for unit in self.units.values():
            path = ev.events_path(self.run_dir, unit["unit_id"])
            events = self._events(unit)
            done = ev.done_nodes(events) | set(ev.placeholders(events))
            for n in self.steal.answered(unit):
                if n not in done:
                    ev.append(path, "end", node=n, status="timeout", resumable=True,
                              reason=f"{ev.DEADLINE_REASON} before it ran")

    # -- stopping --------------------------------------------------------------------------------
    def _stop_decided(self, r: int) -> None:
        """Before round r: nodes with nothing to compare (from round 2) and nodes whose rows have all
        settled (from min_rounds) stop (rounds r.. get `stopped`)."""
        nodes = self.units[(self.sides[0], r)]["nodes"]
        stopped = set(ev.stopped(self._events(self.units[(self.sides[0], r)])))
        live = [n for n in nodes if n not in stopped]
        rows = self._rows_so_far(r)
        for n in uncomparable_nodes(rows, live, self.sides):
            self._stop(n, NOTHING_TO_COMPARE, r)
            live.remove(n)
        if r < int(self.schedule["min_rounds"]):
            return
        for n in settled_nodes(rows, live, self.schedule, self.rounds):
            self._stop(n, "settled", r)

    def _rows_so_far(self, r: int) -> Dict[str, List[dict]]:
        """Rows of this device's nodes in rounds < r, wherever they ran (another device may have
        taken some of their rounds)."""
        return self.steal.rows_before(r, self.units[(self.sides[0], 0)]["nodes"])

    # -- other devices' rounds ---------------------------------------------------------------------
    def _take_others(self) -> None:
        """Done with its own rounds, the device takes later rounds of other devices' nodes, as long
        as any may still become takeable (their device is at work on an earlier round)."""
        if not self.steal.on:
            return
        while True:
            if self.deadline is not None and time.time() >= self.deadline:
                self._cut_by_deadline()
                return
            if any(p.broken for p in self.procs.values()):
                return  # every round it took would end crashed at once: their home devices run them
            # Read before looking: a device that finishes after the look may have just made a
            # round takeable (a round this device claimed before a cut waits on its earlier one).
            running = self.steal.others_running()
            found, waiting = self.steal.next_round()
            if found is None:
                if not waiting or not running:
                    return
                time.sleep(POLL_S)
                continue
            node, r = found
            if self.steal.take(node, r) and not self._run_taken(node, r):
                return

    def _run_taken(self, node: str, r: int) -> bool:
        """Another device's node, round r, both sides here, in the ABBA order its device would have
        used; False when the run's time limit cut it."""
        before = self.steal.rows_before(r, self.steal.home_nodes(node))
        if uncomparable_nodes(before, [node], self.sides):
            self._stop(node, NOTHING_TO_COMPARE, r)
            return True
        if r >= int(self.schedule["min_rounds"]) and settled_nodes(before, [node], self.schedule, self.rounds):
            self._stop(node, "settled", r)
            return True
        every = int(self.schedule.get("respawn_every") or 0)
        if every and self.taken_in.get(node, r // every) != r // every:
            # The processes ran another period's round of it: rounds of a node in different
            # periods get processes of their own, as on its home device.
            for p in self.procs.values():
                p.stop()
            self.taken_in.clear()
        if every:
            self.taken_in[node] = r // every
        i = self.steal.home_order(node, r).index(node)
        for side in (self.sides if (i + r) % 2 == 0 else self.sides[::-1]):
            if node in self._done(self.units[(side, r)]):
                continue  # measured here before a cut: a resume runs only the side left (as _round does)
            if self.deadline is not None and time.time() >= self.deadline:
                self._cut_by_deadline()
                return False
            self._run_node(side, self.units[(side, r)], node)
        return True


def _forget(folder: Optional[str], entries: set) -> None:
    for name in entries:
        shutil.rmtree(os.path.join(folder, name), ignore_errors=True)


def node_kernels(events: Sequence[dict], node: str) -> set:
    """The kernels one node compiled, as its `artifacts` events say."""
    return {k for e in events if e.get("event") == "artifacts" and ev.base_node(e.get("node") or "") == node
            for k in e.get("kernels", [])}


# Why a node stopped after its first round: each of its rows was skipped (not applicable) or launched
# no device work on both sides (a view): no round can ever give it a row to compare, and a node kept
# running would keep every later round alive (two process start-ups a round with respawn).
NOTHING_TO_COMPARE = "nothing to compare"


def uncomparable_nodes(rows: Mapping[str, List[dict]], nodes: Sequence[str], sides: Sequence[str]) -> List[str]:
    """Nodes that ran on every side and gave nothing a later round could compare: every row of
    theirs is a skip (a node-level row: not applicable) or timed no device work
    (results.schema.did_no_device_work). A case that failed, crashed or timed out (its node-level
    row, RoundStealing.rows_before) is not such a row: it may measure in a later round."""
    def nothing(r: dict) -> bool:
        if r.get("dtype") is None and r.get("shape") is None:
            return r.get("status") == "skipped"
        return r.get("status") == "ok" and did_no_device_work(r, "latency")

    by_side = {s: {} for s in sides}
    for s in sides:
        for r in rows.get(s, []):
            by_side[s].setdefault(ev.base_node(r.get("node") or ""), []).append(r)
    return [n for n in nodes
            if all(by_side[s].get(n) and all(nothing(r) for r in by_side[s][n]) for s in sides)]


def settled_nodes(rows: Mapping[str, List[dict]], nodes: Sequence[str], schedule: Mapping, rounds: int) -> List[str]:
    """Nodes all of whose paired rows are done after the rounds so far (of at most `rounds`): a
    settled sequential verdict, or futile (more rounds are unlikely to settle the row;
    zlbench/ab/sequential.py). The report says which rows were futile; the node's `stopped` event says
    "settled"."""
    from zlbench.ab.sequential import node_done
    from zlbench.ab.pairing import pair

    sides = list(schedule["sides"])
    pairing = pair(rows[sides[0]], rows[sides[1]], "latency")
    by_node: Dict[str, Dict[tuple, List[float]]] = {}
    for p in pairing.rows:
        d = [math.log(b / a) for a, b in zip(p.a, p.b)]
        by_node.setdefault(ev.base_node(p.node or ""), {})[p.key] = d
    # A change settles once BH over the run's rows would accept it whatever the others show: the
    # run's row count is not known on one device yet, so this device's rows times the devices
    # bound it (an upper bound only makes stopping more careful; the final BH is the report's).
    family = max(1, len(pairing.rows) * int(schedule.get("devices") or 1))
    return [n for n in nodes if by_node.get(n) and node_done(
        by_node[n], float(schedule["threshold"]), min_rounds=int(schedule["min_rounds"]),
        max_rounds=rounds, family_size=family)]


def run_device_ab(units: List[dict], run_dir: str, deadline: Optional[float] = None,
                  extra_env: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, Dict[str, int]]:
    """The job function of a device's node-level A/B (zlbench/engine/jobs.py hands it over)."""
    return DeviceAB(units, run_dir, deadline, extra_env).run()
