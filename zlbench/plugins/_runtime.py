"""State shared by zlbench's plugins inside one benchmark process, and the events writer."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from zlbench.results.events import CONFIG_ENV, EventWriter, base_node, is_capture_crash_retry, parse_lines

_config: Optional[Dict[str, Any]] = None
_events = None

# Set by the record plugin around each test item; read by the timing plugin.
current_op: Optional[str] = None
current_node: Optional[str] = None
# One entry per timing call since the last corpus record: {"timer_used", "markers", "reason"}.
timing_calls: List[Dict[str, Any]] = []
# True while the timing plugin times a call (plugins/host_draws.py leaves the op's own draws alone).
in_timing_call = False
# The Triton kernels the current test launched in its recorded calls (plugins/timing.py, in an A/B).
launched: set = set()
# Set by plugins/serve.py while a resident process runs a liveness probe: compile, time nothing.
probe_only = False
# The base nodes a spare process' gate told it to run (plugins/device_setup.py); None: all it collected.
kept_nodes: Optional[set] = None


def config() -> Dict[str, Any]:
    global _config
    if _config is None:
        path = os.environ.get(CONFIG_ENV)
        if path:
            with open(path, encoding="utf-8") as f:
                _config = json.load(f)
        else:
            _config = {}
    return _config


def emit(event: str, durable: bool = True, **fields: Any) -> None:
    """Append one event line and flush: a killed process loses at most the line in flight."""
    global _events
    path = config().get("events")
    if not path:
        return
    if _events is None:
        _events = EventWriter(path)
    _events.emit(event, durable, **fields)


_capture_crashes: Dict[str, Dict[str, str]] = {}  # events path -> base node -> why


def capture_crash(node: Optional[str]) -> Optional[str]:
    """Why `node`'s graph capture is not to be tried in this process: a process of this unit's side
    died capturing it (a worker's `retry` event with `capture_crash`, in any unit of the side: a
    plain run's later passes and an A/B's later rounds need not abort once each), else None. Read
    once per events file, at its first capture: after the retries of the passes and rounds before."""
    path = config().get("events")
    if not path or not node:
        return None
    if path not in _capture_crashes:
        _capture_crashes[path] = _side_capture_crashes(Path(path))
    return _capture_crashes[path].get(base_node(node))


def _side_capture_crashes(events: Path) -> Dict[str, str]:
    """base node -> why, from the capture-crash retries in the events of every unit of this one's
    side (units/<side>.r<round>.d<device>.s<shard>/events.jsonl), or of this file alone."""
    unit = events.parent
    side = unit.name.rsplit(".", 3)[0]
    files = [events]
    if unit.parent.name == "units":
        files = [d / events.name for d in sorted(unit.parent.iterdir()) if d.name.rsplit(".", 3)[0] == side]
    found: Dict[str, str] = {}
    for f in files:
        try:
            with open(f, "rb") as fh:
                chunk = b"".join(line for line in fh if b'"capture_crash"' in line)  # a cheap sieve before parsing
        except OSError:
            continue
        found.update({base_node(e["node"]): str(e.get("reason") or "") for e in parse_lines(chunk)
                      if is_capture_crash_retry(e)})
    return found


def redirect(events: str, unit: str) -> None:
    """A resident process (plugins/serve.py) runs each command for one unit: its events go there."""
    global _events
    cfg = config()
    if cfg.get("events") == events:
        return
    cfg.update(events=events, unit=unit)
    if _events is not None:
        _events.close()
        _events = None
