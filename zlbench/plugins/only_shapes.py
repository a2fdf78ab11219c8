"""A plain run's more passes time each chosen test up to its last row whose processes disagree
(engine/more_processes.py chooses them and writes the run's more_shapes.json; the plugin config's
`shapes_file` names it): the shapes after it are left out.

The file says, per test item of each chosen node, which of the item's timing calls to make (the
k-th call since the item started: corpus records list their shapes in the order they were timed,
so a row's place among its item's results gives its calls). A call left out is not made at all:
the op never runs for that shape (no tuning, no compile, no timing), the corpus gets a stand-in
value (STAND_IN_MS), and the record plugin keeps that shape out of the rows and out of every log
(plugins/record.py). Where a record cannot be matched to the calls made and left out (a test that
times its baseline whatever --metrics asks, one that lists its shapes in another order than it
timed them: the stand-in shows where it went), nothing in it becomes a row and the rest of that
item times every call: fewer rows, never a wrong one.
"""

from __future__ import annotations

import json
from typing import Dict, List, Mapping, Set

from zlbench.plugins import _runtime
from zlbench.results.events import base_node

# What a call left out returns (ms): finite and positive, as a corpus' arithmetic needs, and no
# latency a graph or direct timing returns: a result that carries it was not timed.
STAND_IN_MS = 123456.789

_loaded = False
_nodes: Set[str] = set()  # base nodes the file speaks for
_calls: Dict[str, Set[int]] = {}  # item id -> the call numbers to make
_per_shape: Dict[str, int] = {}  # item id -> the timing calls a shape takes, as chosen
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
        for item, chosen_calls in items.items():
            _calls[item] = {int(c) for c in chosen_calls["calls"]}
            _per_shape[item] = int(chosen_calls["per_shape"])


def take_call() -> bool:
    """Whether the current item's next timing call is made (counts it either way)."""
    node = _runtime.current_node
    if node is None:  # not a test's call (imports, collection): before a spare's gate, too early to load
        return True
    if not _loaded:
        _load()
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


def calls_per_shape() -> int:
    """The timing calls a shape of the current item takes, as chosen (0: not chosen)."""
    return _per_shape.get(_runtime.current_node or "", 0)


def is_stand_in(result: Mapping) -> bool:
    """Whether a corpus result carries the stand-in value (its calls were left out)."""
    return any(result.get(k) == STAND_IN_MS for k in ("latency", "latency_base"))


def chosen(shapes: List[int], per_shape: int) -> Dict[str, object]:
    """An item's entry in more_shapes.json: the call numbers of its chosen shapes (their places
    among the item's results) and the calls a shape takes."""
    return {"calls": sorted(s * per_shape + j for s in shapes for j in range(per_shape)), "per_shape": per_shape}
