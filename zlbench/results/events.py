"""The run-dir's event format, in one place: every unit appends events to units/<unit>/events.jsonl
(the benchmark process and its worker both write there), and everything else (collect, progress,
resume, the worker's supervision) reads them back through this module.

An event is one JSON line: {"event": <kind>, "t": <unix time>, "pid": <writer>, ...}. Kinds:
  launch (worker: a benchmark process starts), process (its device facts), session_start,
  start / end (a node; end carries a status), record (a corpus result record), log (a run.log line),
  artifacts (kernels a node compiled), poison, collect_error, setup_error, retry, warning, exit,
  capture / captured (the graph timer around one capture: a process that died between them died
  capturing, and its node's retry times it directly: a `retry` with `capture_crash`),
  session_end, exited (worker: the process is gone); ready / served (a resident process of a
  node-level A/B is ready for commands / ran one); stopped (the A/B scheduler will not run a node
  in this unit's round: `why` is "not live", "settled" or "nothing to compare").
An `end` with `resumable: true` is a placeholder: the node did not run to an end of its own (its
job was killed, cancelled or interrupted) and a resume measures it again.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from zlbench.results.schema import STATUSES

# Bumped when the run-dir layout changes incompatibly; written into plan.json, checked on resume
# and collect. Run dirs written before it existed read as version 1.
FORMAT_VERSION = 1
EVENTS_FILE = "events.jsonl"
# Reason of the nodes a run's time limit (launcher.run_timeout_s) cut: the run reports itself cut.
DEADLINE_REASON = "whole-run time limit (launcher.run_timeout_s) reached"
# The benchmark process finds its plugin config (a JSON file in its unit dir) through this variable.
CONFIG_ENV = "ZLBENCH_PLUGIN_CONFIG"
# A plain unit's benchmark process reads one byte from this descriptor (a pipe) after collection and
# before its first node: its worker starts it ahead and lets it measure when the device is free.
GATE_ENV = "ZLBENCH_GATE_FD"
# Where a process held at its gate finds the nodes to run, when the gate says so (GATE_SOME): a
# spare process (engine/spares.py) collected every node and runs those chosen, in their order.
GATE_NODES_ENV = "ZLBENCH_GATE_NODES"
GATE_NODES_FILE = "gate_nodes.json"
GATE_SOME = b"2"


def base_node(nodeid: str) -> str:
    """The test function's node id of a (parametrized) item id."""
    return nodeid.split("[")[0]


def events_path(run_dir: Path, unit_id: str) -> Path:
    return Path(run_dir) / "units" / unit_id / EVENTS_FILE


def _on_a_new_line(f) -> str:
    """A newline where the file (opened to append) ends mid-line: a writer killed mid-write left half
    a line there, and the next event written onto it would be lost with it."""
    end = f.seek(0, os.SEEK_END)
    if not end:
        return ""
    with open(f.name, "rb") as r:
        r.seek(end - 1)
        return "" if r.read(1) == b"\n" else "\n"


def append(path: Path, event: str, **fields) -> None:
    """Append one event and make it durable (a killed writer loses at most this line)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(_on_a_new_line(f) + json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields},
                                               default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


class EventWriter:
    """An events file kept open by one process (the benchmark process writes many events)."""

    def __init__(self, path: str):
        self._file = open(path, "a", encoding="utf-8")
        self._file.write(_on_a_new_line(self._file))

    def emit(self, event: str, durable: bool = True, **fields) -> None:
        """durable=False: flushed to the OS only, which a crash of this process keeps (not one of
        the machine): for events written around every timing call, where an fsync would cost."""
        self._file.write(json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields},
                                    default=str) + "\n")
        self._file.flush()
        if durable:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _event(line: bytes) -> Optional[dict]:
    """The event a line holds; None for a line that holds none (torn by a full disk or a kill,
    or edited): never half an event."""
    try:
        e = json.loads(line)
    except ValueError:
        return None
    return e if isinstance(e, dict) and isinstance(e.get("event"), str) else None


def parse_lines(chunk: bytes) -> List[dict]:
    return [e for e in map(_event, chunk.splitlines()) if e is not None]


def read_checked(path: Path) -> Tuple[List[dict], List[int]]:
    """An events file's complete events, and the numbers (from 1) of its complete lines that hold
    none: what they held is missing from every table made from it. A last line still being written
    is neither."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return [], []
    events, bad = [], []
    for i, line in enumerate(data[:data.rfind(b"\n") + 1].splitlines(), 1):
        if (e := _event(line)) is not None:
            events.append(e)
        elif line.strip():
            bad.append(i)
    return events, bad


def read_events(path: Path) -> List[dict]:
    """All complete event lines; a torn last line (writer killed mid-write) is ignored."""
    events, _ = read_new_events(path, 0)
    return events


def read_new_events(path: Path, pos: int) -> Tuple[List[dict], int]:
    """Complete event lines appended since byte `pos`, and the position after them (a torn last
    line is left for the next read): watch loops poll often and must not re-read the file."""
    try:
        with open(path, "rb") as f:
            f.seek(pos)
            chunk = f.read()
    except OSError:
        return [], pos
    end = chunk.rfind(b"\n") + 1
    return parse_lines(chunk[:end]), pos + end


def is_final_end(e: dict) -> bool:
    """A node's own end: a terminal status that is not a placeholder left for a resume."""
    return e.get("event") == "end" and e.get("status") in STATUSES and not e.get("resumable")


def final_ends(events: Iterable[dict]) -> Dict[str, dict]:
    """base node id -> its last final end (placeholders never count: resume measures those). A node
    whose latest end is a placeholder (or a retry) is not done, even where an earlier item of it ended:
    a run cut between the cases of a parametrized test ([float16] measured, [float32] cut) measures
    the whole test again on resume."""
    marks = [e for e in events if e.get("event") in ("start", "end", "retry") and e.get("node")]
    ends = [e for e in marks if e["event"] != "start"]
    # A retry reopens its test: a later case crashed after earlier ones ended ok, and the whole
    # test runs again (its earlier cases' ends say nothing of the case that crashed). So does a
    # case started after them with no end (the whole run killed meanwhile, its worker too).
    latest = {base_node(e["node"]): e for e in marks}
    return {base_node(e["node"]): e for e in ends
            if is_final_end(e) and is_final_end(latest[base_node(e["node"])])}


def node_seconds(events: Iterable[dict]) -> Dict[str, float]:
    """base node id -> seconds from its start to its end in one process (the wall it took; a node
    measured again in a later process of the unit, a retry or a resume, counts from its start there,
    not across the pause)."""
    started: Dict[str, float] = {}
    took: Dict[str, float] = {}
    for e in events:
        node = base_node(e.get("node") or "")
        if e.get("event") == "launch":
            started.clear()
        elif e.get("event") == "start":
            started.setdefault(node, e["t"])
        elif e.get("event") == "end" and node in started:
            took[node] = e["t"] - started[node]
    return took


def startup_seconds(events: Iterable[dict]) -> Optional[float]:
    """Seconds from a unit's first launch to its gate (imports, collection), plus what of the device
    preload (plugins/device_setup.py) was still loading when the gate opened: its first node waited
    for it. None if it got no gate."""
    return next((seconds for _, seconds in launch_startups(events)), None)


def launch_startups(events: Iterable[dict]) -> List[Tuple[float, float]]:
    """(launch time, start-up seconds) of each launch of a unit that reached its gate: a unit whose
    process crashed or timed out is launched again, and each launch starts up anew."""
    out, launch = [], None
    for e in events:
        if e.get("event") == "launch":
            launch = e["t"]
        elif e.get("event") == "gate" and launch is not None:
            out.append((launch, (e.get("reached") or e["t"]) - launch + float(e.get("preload_late_s") or 0.0)))
            launch = None
    return out


def process_spans(events: Iterable[dict]) -> List[Tuple[float, float]]:
    """(launch, exit) of each benchmark process of a unit that exited (a resumed unit has one per
    invocation; the time between is not in them)."""
    spans, launched = [], None
    for e in events:
        if e.get("event") == "launch":
            launched = e["t"]
        elif e.get("event") == "exited" and launched is not None:
            spans.append((launched, e["t"]))
            launched = None
    return spans


def alive_seconds(spans: Iterable[Tuple[float, float]]) -> float:
    """The seconds that any of these (begin, end) spans covers, overlaps counted once: the wall
    processes side by side on several devices took, a resumed run's pause left out."""
    total, end = 0.0, None
    for begin, finish in sorted(spans):
        if end is None or begin > end:
            total, end = total + finish - begin, finish
        elif finish > end:
            total, end = total + finish - end, finish
    return total


def stopped(events: Iterable[dict]) -> Dict[str, dict]:
    """base node id -> the A/B scheduler's decision not to run it in this unit (not live, settled):
    done, not unfinished, and not a status of the node."""
    return {base_node(e["node"]): e for e in events if e.get("event") == "stopped"}


def done_nodes(events: Iterable[dict]) -> set:
    """base node ids with nothing left to measure in a unit: a final end, or stopped by the A/B."""
    events = list(events)
    return set(final_ends(events)) | set(stopped(events))


def placeholders(events: Sequence[dict]) -> Dict[str, dict]:
    """base node id -> its resumable placeholder, for nodes that have no final end."""
    final = final_ends(events)
    return {base_node(e["node"]): e for e in events
            if e.get("event") == "end" and e.get("resumable") and base_node(e["node"]) not in final}


def died_capturing(events: Sequence[dict], node: str) -> bool:
    """Whether a process' events for `node` stop inside a capture (a `capture` with no `captured`
    after it): the capture itself killed the process."""
    last = None
    for e in events:
        if e.get("event") in ("capture", "captured") and base_node(e.get("node") or "") == node:
            last = e["event"]
    return last == "capture"


def is_capture_crash_retry(e: dict) -> bool:
    """A worker's `retry` of a node whose capture killed its process."""
    return e.get("event") == "retry" and bool(e.get("capture_crash")) and bool(e.get("node"))


def capture_crash_retry(events: Iterable[dict], node: str) -> Optional[dict]:
    """The `retry` event that sent `node` back after its capture killed the process, if any."""
    return next((e for e in events if is_capture_crash_retry(e) and base_node(e["node"]) == node), None)


def in_flight(events: Sequence[dict]) -> Optional[dict]:
    """The start event of the node a process was running when its events stop, if any."""
    current = None
    for e in events:
        if e.get("event") == "start":
            current = e
        elif e.get("event") == "end" and current is not None and e.get("node") == current.get("node"):
            current = None
    return current
