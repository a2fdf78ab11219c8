"""Work stealing: a device that finished its own work takes work still waiting on other devices.

Plain runs (one side, one round): the plan (zlbench/planning/sharing.py) gives every unit the others' nodes as a pool;
the worker asks `Ownership` which nodes its unit answers for and which it may still take, and the
benchmark process claims each node before running it (zlbench/results/claims.py: atomic, so each node runs
once).

Node-level A/B (zlbench/engine/device_ab.py): the unit of work is a node's round, both sides of it on one
device, so the pairs stay on one device. The plan gives every (side, round) a claims
dir; a device claims a node's round for both sides (side A's claim first, so whoever holds it holds
B's) before running it, its home device included. `RoundStealing` finds, for a device done with its
own rounds, the next round of another device's node that may run now: rounds after the first (the
first decides liveness on the home device), the node's earlier rounds done, not claimed. Rows of a
taken round go to the taker's own unit of that side and round, so every events file keeps one writer.
"""

from __future__ import annotations

import time
from itertools import zip_longest
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from zlbench.results.claims import claim, owner
from zlbench.results import events as ev

HEARTBEAT_S = 5.0  # how often a device's A/B says it is alive
GONE_AFTER_S = 60.0  # a device silent this long no longer holds up the others


class Ownership:
    """Which nodes a unit answers for: its own nodes nobody else took, and any node it claimed."""

    def __init__(self, unit: dict):
        self.unit_id = unit["unit_id"]
        self.own = list(unit["nodes"])
        self.pool = list(unit.get("pool") or [])
        self.claims_dir = unit.get("claims_dir")
        self.given_up: set = set()  # others' nodes a process of ours was given and did not take

    def all_nodes(self) -> List[str]:
        return self.own + self.pool

    def answers_for(self, node: str) -> bool:
        if not self.claims_dir:
            return True
        who = owner(self.claims_dir, node)
        return who == self.unit_id or (who is None and node in self.own)

    def pending(self, done: Dict[str, dict]) -> Tuple[List[str], List[str]]:
        """(nodes still to run that this unit answers for, others' nodes nobody claimed yet)."""
        remaining = [n for n in self.all_nodes() if n not in done and self.answers_for(n)]
        takeable = [n for n in self.pool if n not in done and n not in self.given_up
                    and owner(self.claims_dir, n) is None]
        return remaining, takeable

    def note_attempt(self, takeable: Sequence[str], attempt) -> None:
        """Others' nodes a process could not take (their file fails to import, or pytest went
        through its whole list without running them) are their own unit's to account for."""
        session_done = any(e.get("event") == "session_end" for e in attempt.new)
        self.given_up.update(n for n in takeable if attempt.collect_error(n) is not None
                             or (session_done and owner(self.claims_dir, n) is None))


# -- node-level A/B: a node's round as the unit of work ------------------------------------------
class RunEvents:
    """Every unit's events of the run, read incrementally (other devices' units grow as they run),
    with what each says is done and its rows folded only when it grew."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._seen: Dict[str, Tuple[int, List[dict]]] = {}
        self._done: Dict[str, set] = {}
        self._rows: Dict[str, Tuple[int, List[dict]]] = {}

    def of(self, unit_id: str) -> List[dict]:
        pos, events = self._seen.get(unit_id, (0, []))
        new, pos = ev.read_new_events(ev.events_path(self.run_dir, unit_id), pos)
        events.extend(new)
        self._seen[unit_id] = (pos, events)
        # Done only grows: a final end or a stop is never taken back.
        self._done.setdefault(unit_id, set()).update(ev.done_nodes(new) if new else ())
        return events

    def done(self, unit_id: str) -> set:
        self.of(unit_id)
        return self._done[unit_id]

    def rows(self, unit: Mapping) -> List[dict]:
        from zlbench.results.tables import unit_rows

        events = self.of(unit["unit_id"])
        seen, rows = self._rows.get(unit["unit_id"], (-1, []))
        if seen != len(events):
            rows = unit_rows(unit, events)
            self._rows[unit["unit_id"]] = (len(events), rows)
        return rows


class RoundStealing:
    """One device's view of a node-level A/B's rounds on every device (from plan.json's units)."""

    def __init__(self, plan_units: Sequence[Mapping], device: int, sides: Sequence[str], rounds: int, run_dir: Path):
        self.device, self.sides, self.rounds = device, list(sides), rounds
        self.units = list(plan_units)
        self.home = {n: u["device"] for u in self.units for n in u["nodes"]}
        self.mine = {(u["side"], u["round"]): u for u in self.units if u["device"] == device}
        self.events = RunEvents(run_dir)
        self.beat_dir = Path(run_dir) / "resident"

    @property
    def on(self) -> bool:
        return any(u.get("claims_dir") for u in self.units)

    # -- claims -----------------------------------------------------------------------------------
    def take(self, node: str, r: int) -> bool:
        """Claim node's round r for this device, both sides (side A's first); True when it is ours."""
        if not self.on:
            return True
        for s in self.sides:
            u = self.mine[(s, r)]
            if not claim(u["claims_dir"], node, u["unit_id"]):
                return False
        return True

    def elsewhere(self, unit: Mapping, node: str) -> bool:
        """Another device claimed this node in unit's side and round (it runs and reports it there)."""
        who = owner(unit["claims_dir"], node) if unit.get("claims_dir") else None
        return who is not None and who != unit["unit_id"]

    def answered(self, unit: Mapping) -> List[str]:
        """The nodes unit answers for: its own that nobody else took, and others' it took."""
        own = [n for n in unit["nodes"] if not self.elsewhere(unit, n)]
        taken = [n for n in unit.get("pool") or [] if unit.get("claims_dir")
                 and owner(unit["claims_dir"], n) == unit["unit_id"]]
        return own + taken

    # -- what is done, on any device --------------------------------------------------------------
    def _units_of(self, side: str, r: int) -> Iterable[Mapping]:
        return (u for u in self.units if u["side"] == side and u["round"] == r)

    def done(self, side: str, r: int) -> set:
        return {n for u in self._units_of(side, r) for n in self.events.done(u["unit_id"])}

    def rows_before(self, r: int, nodes: Sequence[str]) -> Dict[str, List[dict]]:
        """Rows of rounds < r of these nodes, wherever they ran (the stop rules' input), and a
        node-level row (dtype and shape None, its status) for each final end of theirs that is not
        ok: a node that ended without rows (skipped, failed before any shape) and a case that failed
        or crashed after others recorded rows."""
        wanted = set(nodes)
        out: Dict[str, List[dict]] = {}
        for s in self.sides:
            rows: List[dict] = []
            for rr in range(r):
                for u in self._units_of(s, rr):
                    rows += [row for row in self.events.rows(u) if ev.base_node(row.get("node") or "") in wanted]
                    rows += [{"node": ev.base_node(e["node"]), "status": e.get("status"), "reason": e.get("reason"),
                              "dtype": None, "shape": None, "side": s, "round": rr}
                             for e in self.events.of(u["unit_id"])
                             if e.get("event") == "end" and ev.is_final_end(e) and e.get("status") != "ok"
                             and ev.base_node(e["node"]) in wanted]
            out[s] = rows
        return out

    def home_nodes(self, node: str) -> List[str]:
        return [n for n, d in self.home.items() if d == self.home[node]]

    def home_order(self, node: str, r: int) -> List[str]:
        """The node order of node's home device in round r (its ABBA parity comes from it)."""
        return next(u["nodes"] for u in self._units_of(self.sides[0], r) if u["device"] == self.home[node])

    # -- what this device may take ----------------------------------------------------------------
    def next_round(self) -> Tuple[Optional[Tuple[str, int]], bool]:
        """(node, round) another device's node may run here now, or None; and whether anything of
        other devices is still waiting (so that waiting for it to become takeable makes sense)."""
        waiting = False
        for r in range(1, self.rounds):
            done = {s: self.done(s, r) for s in self.sides}
            before = {s: self.done(s, r - 1) for s in self.sides}
            for n in self.others_tails_first(r):
                if all(n in done[s] for s in self.sides):
                    continue
                waiting = True
                if not all(n in before[s] for s in self.sides):
                    continue  # its earlier round still runs (or waits) on its device
                if any(self.elsewhere(self.mine[(s, r)], n) for s in self.sides):
                    continue
                return (n, r), True
        return None, waiting

    def others_tails_first(self, r: int) -> List[str]:
        """Other devices' nodes of round r, from the tails of their orders (a home device runs its
        order front to back, so a taker and its home meet last), one device after another in turn."""
        tails = [list(reversed(u["nodes"])) for u in self._units_of(self.sides[0], r) if u["device"] != self.device]
        return [n for group in zip_longest(*tails) for n in group if n is not None]

    # -- liveness of the devices --------------------------------------------------------------------
    def beat(self) -> None:
        """This device is at work (engine/device_ab.py beats every HEARTBEAT_S while its A/B runs)."""
        self.beat_dir.mkdir(parents=True, exist_ok=True)
        (self.beat_dir / f"d{self.device}.alive").write_text(str(time.time()))

    def finished(self) -> None:
        self.beat_dir.mkdir(parents=True, exist_ok=True)
        (self.beat_dir / f"d{self.device}.alive").write_text("finished")

    def others_running(self) -> bool:
        """Another device's A/B is still at work (said so within GONE_AFTER_S)."""
        for d in {u["device"] for u in self.units} - {self.device}:
            try:
                text = (self.beat_dir / f"d{d}.alive").read_text()
            except FileNotFoundError:
                continue
            if text != "finished" and time.time() - (self.beat_dir / f"d{d}.alive").stat().st_mtime < GONE_AFTER_S:
                return True
        return False
