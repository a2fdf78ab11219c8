"""Reader for FlagGems result logs (and zlbench's run.log): `[INFO] {json}` record lines, and the
`[WARNING] <MARKER> op=... dtype=... shape=... reason=...` lines zlbench's record plugin writes
beside them when a shape was timed another way (BENCHMARK_DIRECT_NO_CUDAGRAPH: the direct
fallback). A log whose records do not carry the markers themselves (FlagGems' own result log, an
older run.log) still has its fallbacks read from those lines, so a fallback is never lost."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from zlbench.errors import UsageError
from zlbench.results import columns as C
from zlbench.results.records import Row
from zlbench.results.schema import base_shape, interval, shape_key

# A record line: FlagGems' logger writes "[INFO] {...}"; a hand-edited one may lack the space.
RECORD_LINE = re.compile(r"^\[INFO\]\s*\{")
# The shape is JSON with spaces ("[[64, 64]]"): it runs up to " reason=" or the end of the line.
WARNING_MARKER = re.compile(r"^\[WARNING\] (?P<marker>BENCHMARK_[A-Z0-9_]+) op=(?P<op>\S+) dtype=(?P<dtype>\S+) "
                            r"shape=(?P<shape>.*?)(?: reason=(?P<reason>.*))?$")

MarkerKey = Tuple[str, str, str]  # (op, dtype, shape key)
# A result entry's numbers (latency, speedup, ...): a string there ("n/a") would reach the tables.
NUMBERS = tuple(c.name for c in C.ROW_COLUMNS if c.source == C.RESULT and c.type in (C.FLOAT, C.INT))
# ... of which these are times: a measured time is above 0 (a 0 or negative one is no measurement).
TIMES = ("latency", "latency_base")
# ... and its intervals (a zlbench run.log's latency_ci): [lo, hi], two numbers, lo <= hi.
INTERVALS = tuple(c.name for c in C.ROW_COLUMNS if c.source == C.RESULT and c.type == C.INTERVAL)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _record(text: str, path: Path, lineno: int, skipped: Optional[List[int]]) -> Optional[dict]:
    """One `[INFO] {...}` line as a record, None for a line that is not one (or skipped)."""
    try:
        rec = json.loads(text[text.index("{"):])
        result = rec.get("result") if isinstance(rec, dict) else None
        if isinstance(rec, dict) and "op_name" in rec:  # a record, whole or not
            if not isinstance(rec["op_name"], str):
                raise ValueError(f"its op_name is {rec['op_name']!r}, not a name")
            if "result" not in rec:
                raise ValueError("it has no result")
        if result is not None and not (isinstance(result, list) and all(isinstance(r, dict) for r in result)):
            raise ValueError("its result is not a list of objects")
        for entry in result or []:
            for name in NUMBERS:
                value = entry.get(name)
                if value is None:
                    continue
                if not _is_number(value):
                    raise ValueError(f"{name} is {value!r}, not a number")
                # JSON's NaN and Infinity parse as floats: no reading, and they would reach every mean
                if not math.isfinite(value):
                    raise ValueError(f"{name} is {value!r}, not a finite number")
                if name in TIMES and value <= 0:
                    raise ValueError(f"{name} is {value!r}, not a time (above 0 ms)")
            for name in INTERVALS:
                value = entry.get(name)
                if value is not None and interval(value) is None:
                    raise ValueError(f"{name} is {value!r}, not an interval [lo, hi] (0 < lo <= hi)")
    except ValueError as e:
        if skipped is not None:
            skipped.append(lineno)
            return None
        raise UsageError(
            f"{path}:{lineno}: malformed result record ({e}). Fix: repair or delete that line "
            "(each `[INFO] {...}` line is one JSON object), or add --skip-bad-lines to read the "
            "rest of the log."
        )
    return rec if isinstance(rec, dict) and "op_name" in rec and "result" in rec else None


def _marker(text: str) -> Optional[Tuple[MarkerKey, str, Optional[str]]]:
    """A `[WARNING] <MARKER> op= dtype= shape= reason=` line: (key, marker, reason), or None."""
    m = WARNING_MARKER.match(text)
    if not m:
        return None
    try:
        shape = shape_key(json.loads(m["shape"]))
    except ValueError:
        return None  # not a line zlbench wrote: passed over like any other warning
    return (m["op"], m["dtype"], shape), m["marker"], m["reason"]


def scan(path: Path, skipped: Optional[List[int]] = None,
         markers: Optional[Dict[MarkerKey, List[Tuple[str, Optional[str]]]]] = None) -> Iterator[dict]:
    """Each `[INFO] {"op_name": ..., "result": [...]}` record. Other lines (attribute dumps, the
    'logger enabled' banner, other warnings) are passed over; a broken record line is an error that
    names the line, or with `skipped` given, its number is added there and reading goes on. With
    `markers` given, the marker warnings found are added there by (op, dtype, shape)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if RECORD_LINE.match(text):
                rec = _record(text, path, lineno, skipped)
                if rec is not None:
                    yield rec
            elif markers is not None and text.startswith("[WARNING] BENCHMARK_"):
                found = _marker(text)
                if found:
                    markers[found[0]].append(found[1:])


def iter_records(path: Path, skipped: Optional[List[int]] = None) -> Iterator[dict]:
    """The log's records (see scan)."""
    return scan(path, skipped)


def _with_markers(row: dict, found: List[Tuple[str, Optional[str]]]) -> dict:
    for marker, reason in found:
        if marker not in row["markers"]:
            row["markers"].append(marker)
        row["marker_reason"] = row.get("marker_reason") or reason
    return row


def rows_from_log(path: Path, skipped: Optional[List[int]] = None) -> List[dict]:
    """The log's rows; see scan for `skipped`. A row measured again in the same log (a test rerun,
    or a run.log of several rounds) is the next round: the n-th record of an (op, dtype, shape) (and
    test node, where zlbench's log names it) is round n-1, as a run dir numbers them, so pairing
    two logs never drops one silently. A marker warning applies to every round of its row: a line
    does not say which record it belongs to, and over-marking a fallback is better than losing one."""
    markers: Dict[MarkerKey, List[Tuple[str, Optional[str]]]] = defaultdict(list)
    records = list(scan(path, skipped, markers))
    sides = sorted({str(rec["side"]) for rec in records if rec.get("side") is not None})
    if len(sides) > 1:
        raise UsageError(
            f"{path} holds the records of both sides of an A/B ({', '.join(sides)}): read as one run, "
            "a side would be paired with itself. Fix: pass the A/B's run dir instead (`zlbench summary RUN_DIR`, "
            "`zlbench history import RUN_DIR`), or one side's log, run.<side>.log.")
    rows = [row.to_dict() for rec in records
            for row in Row.from_record(rec, node=rec["node"] if isinstance(rec.get("node"), str) else None)]
    if not records and skipped:
        raise UsageError(f"{path}: every result record of it is malformed ({len(skipped)} skipped, lines "
                         f"{', '.join(map(str, skipped[:10]))}{' ...' if len(skipped) > 10 else ''}). Fix: repair "
                         "them (each `[INFO] {...}` line is one JSON object with op_name and result).")
    if not rows:
        raise UsageError(
            f"{path} holds no `[INFO] {{json}}` result records. Fix: pass a run dir, a zlbench "
            "run.log, or a FlagGems log written with --record log."
        )
    seen: Dict[tuple, int] = defaultdict(int)
    for r in rows:
        key = (str(r["op"]), str(r["dtype"]), str(r["shape"]))
        r["round"] = seen[(*key, r["node"])]
        seen[(*key, r["node"])] += 1
        found = markers.get((key[0], key[1], base_shape(key[2])))
        if found:  # a case key's marker line names the shape alone: it marks every case of it
            _with_markers(r, found)
    return rows
