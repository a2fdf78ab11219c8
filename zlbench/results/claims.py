"""Nodes claimed at run time: devices that finish their own shard early take nodes still waiting
in other shards (one side, one round only: an A/B keeps both sides of a row on one device).

A claim is a file per node under the run dir, made with link(2), which is atomic and fails when the
file exists (also on NFS), so two benchmark processes never both run a node. Its text is the unit
that claimed it: a unit restarted after a crash, or resumed, recognises its own claims.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional


def _path(claims_dir: str, node: str) -> Path:
    return Path(claims_dir) / hashlib.sha1(node.encode()).hexdigest()


def owner(claims_dir: str, node: str) -> Optional[str]:
    try:
        return _path(claims_dir, node).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def claim(claims_dir: str, node: str, unit_id: str) -> bool:
    """True when unit_id may run node: it claimed it now, or had claimed it before."""
    target = _path(claims_dir, node)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{unit_id}.{os.getpid()}")
    tmp.write_text(unit_id, encoding="utf-8")
    try:
        os.link(tmp, target)
        return True
    except FileExistsError:
        return owner(claims_dir, node) == unit_id
    finally:
        tmp.unlink()
