"""Work stealing: a device that finished its own nodes takes nodes still waiting on other devices
(one side, one round only: an A/B keeps both sides of a row on one device).

Plan time: `share_waiting_nodes` gives every unit the others' nodes as a pool. Run time: the worker
asks `Ownership` which nodes its unit answers for and which it may still take; the benchmark process
claims each node before running it (zlbench/claims.py: atomic, so each node runs once).
"""

from __future__ import annotations

from itertools import zip_longest
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from .claims import owner


def share_waiting_nodes(units: Sequence, claims_dir: Path) -> None:
    """Let every unit take the others' waiting nodes once its own are done, from the tails of
    their shards (LPT puts the small nodes last), one shard after another in turn. The balance
    then no longer hangs on cost estimates (an earlier run's times include compiling)."""
    for u in units:
        tails = [list(reversed(v.nodes)) for v in units if v is not u]
        u.pool = [n for group in zip_longest(*tails) for n in group if n is not None]
        u.claims_dir = str(claims_dir)
        u.plugin_config["claims_dir"] = str(claims_dir)


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
