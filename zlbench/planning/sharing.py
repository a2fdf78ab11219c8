"""What the plan sets up so that a device done with its own work can take work waiting on others
(zlbench/engine/stealing.py does the taking): each unit's pool of other units' nodes and the claims
dir where a node (plain runs) or a node's round (node-level A/B) is claimed once."""

from __future__ import annotations

from itertools import zip_longest
from pathlib import Path
from typing import Dict, List, Sequence


def share_waiting_nodes(units: Sequence, claims_dir: Path) -> None:
    """Let every unit take the others' waiting nodes once its own are done, from the tails of
    their shards (LPT puts the small nodes last), one shard after another in turn. The balance
    then no longer hangs on cost estimates (an earlier run's times include compiling)."""
    for u in units:
        tails = [list(reversed(v.nodes)) for v in units if v is not u]
        u.pool = [n for group in zip_longest(*tails) for n in group if n is not None]
        u.claims_dir = str(claims_dir)
        u.plugin_config["claims_dir"] = str(claims_dir)


def share_waiting_rounds(units: Sequence, run_dir: Path) -> None:
    """Every unit of a node-level A/B on several devices: the other devices' nodes (its resident
    processes collect them, so they can run any) and the claims dir of its side and round."""
    by_device: Dict[int, List[str]] = {}
    for u in units:  # every side and round of a device holds the same nodes (no shards in this A/B)
        by_device.setdefault(u.device, u.nodes)
    for u in units:
        u.pool = [n for d, nodes in sorted(by_device.items()) if d != u.device for n in nodes]
        u.claims_dir = str(run_dir / "claims" / f"{u.side}.r{u.round}")
