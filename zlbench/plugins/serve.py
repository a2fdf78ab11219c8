"""Resident benchmark process of a node-level A/B (zlbench/engine/device_ab.py drives it).

pytest collects every node of the device once, then, instead of running them in order, waits for
commands: each names one test node and the unit (side and round) whose events file it reports to.
The node's items run through pytest's own protocol (fixtures set up and torn down as in a plain
run); a `served` event tells the scheduler the command is done. Commands come through a file, not
stdin (pytest's capture owns stdin); "quit" ends the session normally.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Dict, Iterator, List

import pytest

from zlbench.results.events import base_node
from zlbench.plugins import _runtime, guards, untimed_tuning
from zlbench.plugins.record import leave_dead_context, report_reason

POLL_S = 0.002
_collect_errors: List[dict] = []


def pytest_collectreport(report):
    if report.failed:
        _collect_errors.append({"nodeid": report.nodeid, "reason": report_reason(report)})


def commands(path: str) -> Iterator[dict]:
    """New command lines as they are appended (a torn last line waits for its end)."""
    pos = 0
    while True:
        try:
            with open(path, "rb") as f:
                f.seek(pos)
                chunk = f.read()
        except FileNotFoundError:
            chunk = b""
        end = chunk.rfind(b"\n") + 1
        for line in chunk[:end].splitlines():
            yield json.loads(line)
        pos += end
        if not end:
            time.sleep(POLL_S)


def _not_collected(node: str) -> None:
    err = next((e for e in _collect_errors if node.startswith(e["nodeid"] or "\0")), None)
    reason = (f"collection error: {err['reason']}" if err
              else "not collected by pytest (deselected or missing)")
    _runtime.emit("end", node=node, status="failed", reason=reason, wall_s=0.0)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    path = _runtime.config().get("serve")
    if not path:
        return None
    if _runtime.config().get("probe_process"):
        # Only liveness probes run here: autotuners compile every config without timing it.
        _runtime.emit("probe_process", untimed_tuning=untimed_tuning.install(),
                      tuning_cache=os.environ.get("FLAGGEMS_CACHE_DIR"))
    by_node: Dict[str, list] = {}
    for item in session.items:
        by_node.setdefault(base_node(item.nodeid), []).append(item)
    _runtime.emit("ready", nodes=len(by_node), items=len(session.items))
    for cmd in commands(path):
        if cmd.get("quit"):
            break
        _runtime.redirect(cmd["events"], cmd["unit"])
        # A probe (liveness first): the node's kernels get compiled, one call per timing, nothing
        # timed; its events go to a file of their own, never read as rows.
        _runtime.probe_only = bool(cmd.get("probe"))
        items = by_node.get(cmd["node"], [])
        if not items:
            _not_collected(cmd["node"])
        for i, item in enumerate(items):
            # The next item of the same node keeps module fixtures, as in a plain run; after the
            # node's last item everything is torn down, so each command starts as a fresh run would.
            nextitem = items[i + 1] if i + 1 < len(items) else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        _runtime.probe_only = False
        # pytest keeps a failed test's traceback (sys.last_*) until the next item starts, which here
        # is after the other side's node: its frames would hold the failing shape's tensors.
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                delattr(sys, name)
        memory = guards.release_device_memory()
        _runtime.emit("served", seq=cmd["seq"], node=cmd["node"], memory=memory)
        if memory and "release_failed" in memory:
            # The node's rows are in; the context is not usable for the next one.
            leave_dead_context(f"device memory could not be released: {memory['release_failed']}")
    return True
