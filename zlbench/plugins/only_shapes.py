"""A plain run's more passes time only the rows whose processes disagree (engine/more_processes.py
chooses them and writes the run's more_shapes.json; the plugin config's `shapes_file` names it).

The file says, per test item of each chosen node, which of the item's timing calls to make (the
k-th call since the item started: corpus records list their shapes in the order they were timed,
so a row's place among its item's results gives its calls). A call left out is not made at all:
the op never runs for that shape (no tuning, no compile, no timing), the corpus gets a stand-in
value, and the record plugin keeps that shape out of the rows (plugins/record.py). Where a record's
calls do not fit its shapes as expected (a test that times its baseline whatever --metrics asks),
nothing in it becomes a row and the rest of that item times every call: fewer rows, never a wrong
one.
"""

from __future__ import annotations

import json
from typing import Dict, List, Set

from zlbench.plugins import _runtime
from zlbench.results.events import base_node

_loaded = False
_nodes: Set[str] = set()  # base nodes the file speaks for
_calls: Dict[str, Set[int]] = {}  # item id -> the call numbers to make
_off: Set[str] = set()  # items a record of which did not fit: every call made from there on
_made: Dict[str, int] = {}  # item id -> timing calls so far (made or not)


def _load() -> None:
    global _loaded
    _loaded = True
    path = _runtime.config().get("shapes_file")
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as f:
            chosen = json.load(f)
    except (OSError, ValueError):
        return  # no choice recorded (a copied run dir, an old run): every shape is timed
    for node, items in (chosen.get("nodes") or {}).items():
        _nodes.add(node)
        for item, calls in items.items():
            _calls[item] = {int(c) for c in calls}


def take_call() -> bool:
    """Whether the current item's next timing call is made (counts it either way)."""
    if not _loaded:
        _load()
    node = _runtime.current_node
    if node is None:
        return True
    k = _made.get(node, 0)
    _made[node] = k + 1
    if node in _off or base_node(node) not in _nodes:
        return True
    return k in _calls.get(node, ())


def give_up(reason: str) -> None:
    """A record's calls did not fit the current item's shapes: it times every call from here on."""
    node = _runtime.current_node
    if node is not None and node not in _off:
        _off.add(node)
        _runtime.emit("warning", node=node, message=f"more pass: {reason}; the test times every shape from here on")


def wanted_calls(shapes: List[int], calls_per_shape: int) -> List[int]:
    """The call numbers of an item's chosen shapes (their places among the item's results)."""
    return sorted(s * calls_per_shape + j for s in shapes for j in range(calls_per_shape))

