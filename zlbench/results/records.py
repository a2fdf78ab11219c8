"""Typed records of the run dir: what a measurement becomes (Row; what the planner hands the
launchers is in zlbench/planning/units.py). Row's fields are the column registry's
(zlbench/results/columns.py): a column is declared there, not here. Rows travel as JSON
(rows.jsonl): `to_dict` / `from_dict` are the only converters, and construction validates, so a
malformed row fails where it is read, with its field."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, field, fields, make_dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from zlbench.errors import UsageError
from zlbench.results import columns as C
from zlbench.results.schema import STATUSES, case_key, shape_key


def from_dict_checked(cls, data: Mapping[str, Any], what: str):
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise UsageError(f"{what}: unknown field(s) {', '.join(unknown)} (written by another zlbench "
                         "version?). Fix: read it with the zlbench that wrote it, or start a new run.")
    try:
        return cls(**data)
    except TypeError as e:
        raise UsageError(f"{what}: {e}. Fix: read it with the zlbench that wrote it, or start a new run.")


_ANNOTATIONS = {C.STR: Optional[str], C.FLOAT: Optional[float], C.INT: Optional[int], C.BOOL: bool, C.JSON: Any,
                C.ANY: Any, C.LIST: List[str], C.INTERVAL: Optional[List[float]], C.MAPPING: Optional[Dict[str, Any]]}


def _row_field(c: C.Column):
    if c.required:
        return (c.name, _ANNOTATIONS[c.type])
    if c.type == C.LIST:
        return (c.name, _ANNOTATIONS[c.type], field(default_factory=list))
    return (c.name, _ANNOTATIONS[c.type], field(default=c.default))


def _check_status(self) -> None:
    if self.status not in STATUSES:
        raise UsageError(f"row of op {self.op}: unknown status '{self.status}'. Valid: {', '.join(STATUSES)}.")


def _log_status(result: Mapping[str, Any], timing_read: bool) -> Dict[str, Any]:
    """A result entry's status and reason: failed where it carries an error_msg; and, read from a
    log, failed where it carries no latency (it would pass as an ok row of no value, and drop out of
    every table unsaid)."""
    if result.get("error_msg"):
        return {"status": "failed", "reason": result.get("error_msg")}
    if timing_read and result.get("latency") is None:
        return {"status": "failed", "reason": "its result entry records no latency and no error_msg: not measured "
                                              "(a log edited or cut, or FlagGems' --metrics without latency)"}
    return {"status": "ok", "reason": None}


def _from_result(cls, record: Mapping[str, Any], result: Mapping[str, Any],
                 timing: Optional[Mapping[str, Any]] = None, **where: Any) -> "Row":
    """A row from one entry of a corpus record (`[INFO] {"op_name", "dtype", "result": [...]}`),
    with where it was measured and the timing facts zlbench's plugin noted for it (None for a
    record read from a result log: then what the log says). Columns of source RESULT come from the
    result entry under their own name, those of source FACTS from the timing call's facts."""
    timing_read = timing is None
    if timing is None:
        # A FlagGems log's mode (kernel, cudagraph, ...) is its timer; a zlbench side log names each
        # entry's (an earlier one none: its mode, "zlbench", names no timer).
        mode = record.get("mode") if record.get("mode") != "zlbench" else None
        timing = {"timer_used": result.get("timer_used") or mode, "timer_used_base": result.get("timer_used_base"),
                  "markers": result.get("markers"), "marker_reason": result.get("marker_reason")}
    return cls(
        op=record.get("op_name"), dtype=record.get("dtype"), shape=shape_key(result.get("shape_detail")),
        **{name: result.get(name) for name in RESULT_FIELDS},
        timer_used=timing.get("timer_used"),
        timer_used_base=timing.get("timer_used_base"), markers=list(timing.get("markers") or []),
        marker_reason=timing.get("marker_reason"),
        **_log_status(result, timing_read=timing_read),
        **_sampling_fields(timing.get("facts")),
        timing_base=dict(timing["facts_base"]) if timing.get("facts_base") else None, **where)


def _from_record(cls, record: Mapping[str, Any], timings: Optional[Sequence[Optional[Mapping[str, Any]]]] = None,
                 **where: Any) -> List["Row"]:
    """The rows of one corpus record, in its order (with `timings`, the timing facts zlbench's
    plugin noted per result entry: only entries with one become rows). Cases whose shape details
    read alike get case keys (zlbench/results/schema.py case_key): never merged into one row."""
    results = record.get("result") or []
    pairs = zip(results, timings) if timings is not None else ((res, None) for res in results)
    seen: Counter = Counter()
    rows = []
    for res, timing in pairs:
        row = cls.from_result(record, res, timing, **where)
        seen[row.shape] += 1
        row.shape = case_key(row.shape, seen[row.shape])
        if not (timing or {}).get("untimed"):  # a shape a more pass left out keeps its place, no row
            rows.append(row)
    return rows


def _to_dict(self) -> Dict[str, Any]:
    return asdict(self)


# One measured (op, dtype, shape) of one side and round, or a node's status where it gave none: a
# dataclass whose fields are the registry's row columns (zlbench/results/columns.py), in its order.
Row = make_dataclass("Row", [_row_field(c) for c in C.ROW_COLUMNS], namespace={
    "__doc__": "One measured (op, dtype, shape) of one side and round, or a node's status where it gave none "
               "(fields: zlbench/results/columns.py ROW_COLUMNS).",
    "__module__": __name__, "__post_init__": _check_status, "from_result": classmethod(_from_result),
    "from_record": classmethod(_from_record), "to_dict": _to_dict})


ROW_FIELDS = list(C.names(C.ROW_COLUMNS, C.ROWS_JSONL))  # what rows.jsonl holds, in its order
SAMPLING_FIELDS = C.names(C.ROW_COLUMNS, source=C.FACTS)
RESULT_FIELDS = C.names(C.ROW_COLUMNS, source=C.RESULT)


def _sampling_fields(facts: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The Row fields of a timing call's sampling facts (facts a newer plugin adds are ignored)."""
    return {k: facts.get(k) for k in SAMPLING_FIELDS} if facts else {}
