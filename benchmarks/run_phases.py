"""Where a run's time went, from its events (shared by benchmarks/engine.py and multi_gpu.py)."""

from __future__ import annotations

import json
from pathlib import Path


def measuring_span(run_dir: Path) -> float:
    """First node start to last node end, from the events: the devices' measuring time, without
    zlbench's and the interpreters' start-up (CPU work these 2 cores serialize)."""
    starts, ends = [], []
    for path in run_dir.glob("units/*/events.jsonl"):
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if e.get("event") == "start":
                starts.append(e["t"])
            elif e.get("event") == "end":
                ends.append(e["t"])
    return max(ends) - min(starts)


def phases(run_dir: Path) -> dict:
    """Where a run's fixed time goes, per benchmark process: start (launch to session_start:
    interpreter, corpus import, collection) and teardown (session_end to the process gone)."""
    start, teardown = [], []
    for path in sorted(run_dir.glob("units/*/events.jsonl")):
        t = {}
        for line in path.read_text().splitlines():
            e = json.loads(line)
            t[e.get("event")] = e["t"]
            if e.get("event") == "exited" and "session_end" in t:
                teardown.append(round(e["t"] - t["session_end"], 2))
            if e.get("event") == "session_start" and "launch" in t:
                start.append(round(e["t"] - t["launch"], 2))
    return {"process_start_s": start, "process_teardown_s": teardown}
