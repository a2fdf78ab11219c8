"""A run's tables, derived from its units' events: rows.jsonl (and process_rows.jsonl, a plain
run's every process), ops_status.csv, run.log (and run.<side>.log), processes.json, artifacts.json;
and reading them back.

Collection is idempotent and can run any time (while a run is going, after a kill, after Slurm
jobs finish): events are the source of truth, the tables are derived from them. The run dir's
format (file names, plan, identity, placeholders) is results/rundir.py.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

from zlbench.errors import UsageError
from zlbench.results import events as ev
from zlbench.results.process_stats import aggregate, was_measured
from zlbench.results.records import ROW_FIELDS, Row
from zlbench.results.rundir import (PROCESS_ROWS_FILE, atomic_write, load_plan, measured_nodes,
                                    unfinished_nodes)
from zlbench.results.schema import MARKER_NOT_ZLBENCH_TIMER, OPS_STATUS_FIELDS, SEVERITY, base_shape

# Prefix of run.log lines saying a worker was not pinned to its own device.
PIN_WARNING = "[WARNING] zlbench: "


class _Collector:
    """Folds the events of every unit into rows, per-node status and run.log lines."""

    def __init__(self, plan: Mapping, deselected: Optional[set] = None):
        self.plan = plan
        # (node, side) that pytest deselected (corpus.pytest_args -k/-m): the "not collected" ends
        # a worker or resident process adds for them in any round say the same, not a failure.
        self.deselected = deselected or set()
        self.devices = {d["index"]: d for d in plan.get("devices", [])}
        self.rows: List[dict] = []
        self.nodes: Dict[Tuple[str, str], dict] = {}  # (node, side) -> status row
        self.ended: set = set()  # (node, side, round) with an end, a placeholder's too
        self.log_lines: List[str] = []
        self.processes: Dict[str, dict] = {}
        self.kernels: Dict[str, Dict[str, set]] = {}  # side -> op -> kernel hashes

    def unit(self, unit: Mapping, events: List[dict], measured: set) -> None:
        """Fold one unit's events; `measured`: nodes with a final end in any unit of its side and
        round (a resume may measure a node in another unit than the one holding its placeholder)."""
        dev = unit["device"]
        # What the measuring process itself saw (torch's device name and PCI bus id) wins over the
        # enumeration: it is the proof that the worker was pinned to the device the plan gave it.
        seen = {"device_name": self.devices.get(dev, {}).get("name", ""), "device_bus_id": ""}
        where = {"host": "", "job_id": ""}
        # Rows of a node count once its attempt ended on its own: an attempt that was killed,
        # retried or left a resumable placeholder is measured again, and its rows with it.
        pending: Dict[str, List[dict]] = {}
        # A node's rows from its latest attempt only: node -> (the launch that measured it, rows).
        # A test measured again in a later launch (a resume of a run cut between its cases, a
        # retry) is measured again whole: the rows its earlier cases left are superseded.
        committed: Dict[str, Tuple[int, List[dict]]] = {}
        launches = 0
        for e in events:
            kind = e.get("event")
            if kind == "launch":
                where = {"host": e.get("host", ""), "job_id": e.get("job_id", "")}
                pending.clear()  # a new process: what the last one left unfinished is measured again
                launches += 1
            elif kind == "start":
                node = ev.base_node(e["node"])
                pending.pop(node, None)
                if committed.get(node, (launches,))[0] < launches:
                    del committed[node]
            elif kind == "log":
                self.log_lines.append(_side_labelled(e["line"], unit["side"]) if len(self.plan.get("sides") or []) > 1
                                      else e["line"])
            elif kind == "artifacts":
                self.kernels.setdefault(unit["side"], {}).setdefault(e.get("op") or "", set()).update(e.get("kernels") or [])
            elif kind == "process":
                facts = e.get("facts", {})
                self.processes[f"{unit['unit_id']}:{e.get('pid')}"] = {"device": dev, **facts}
                seen = {"device_name": facts.get("device_name") or seen["device_name"],
                        "device_bus_id": facts.get("device_bus_id", "")}
            elif kind == "record":
                pending.setdefault(ev.base_node(e.get("node") or ""), []).extend(
                    row.to_dict() for row in Row.from_record(
                        e["payload"], e.get("timing") or [], side=unit["side"], round=unit["round"],
                        device=dev, node=e.get("node"), unit=unit["unit_id"], **seen))
            elif kind == "retry":
                pending.pop(ev.base_node(e["node"]), None)
            elif kind == "end":
                node = ev.base_node(e["node"])
                self.ended.add((node, unit["side"], unit["round"]))
                if ev.is_final_end(e):
                    committed.setdefault(node, (launches, []))[1].extend(pending.pop(node, []))
                if ev.is_final_end(e) or node not in measured:
                    self._status(node, unit, dev, where, e)
        # A node a cut left unfinished here keeps what its earlier cases measured, unless a resume
        # measured it whole in another unit.
        done_here = set(ev.final_ends(events))
        for node, (_, rows) in committed.items():
            if node in done_here or node not in measured:
                self.rows.extend(rows)

    def _status(self, node: str, unit: Mapping, dev, where: Mapping, e: Mapping) -> None:
        key = (node, unit["side"])
        if key in self.deselected and not e.get("deselected"):
            return
        entry = {"op": e.get("op") or "", "test_node": node, "side": unit["side"], "status": e["status"],
                 "reason": (e.get("reason") or "")[:500], "wall_s": float(e.get("wall_s") or 0.0),
                 "device": dev, "resumable": bool(e.get("resumable")), **where}
        prev = self.nodes.get(key)
        if prev is None:
            self.nodes[key] = entry
        else:  # several rounds / items: worst status, summed wall time
            worst = min((prev, entry), key=lambda x: SEVERITY.get(x["status"], 0))
            if {prev["status"], entry["status"]} == {"ok", "skipped"}:
                # Some cases measured, others skipped (not applicable to the run's dtypes, a skipif):
                # the node measured, and says what it skipped.
                ok, skipped = (prev, entry) if prev["status"] == "ok" else (entry, prev)
                worst = {**ok, "reason": ok["reason"] or f"some cases skipped: {skipped['reason']}"}
            elif any(map(_never_ran, (prev, entry))) and {prev["status"], entry["status"]} & {"skipped", "failed"}:
                # Skipped (or failed) in the processes that ran it, not started in those the run's
                # time limit cut: it would be skipped there too, and a failure already makes the node
                # failed whatever the others read, so that is its status (nothing to resume), not a cut.
                worst = entry if _never_ran(prev) else prev
            # A process that never started (cut, still going) says no host: the one that measured does.
            where = {k: worst[k] or prev[k] or entry[k] for k in ("host", "job_id")}
            self.nodes[key] = {**worst, **where, "wall_s": prev["wall_s"] + entry["wall_s"], "op": prev["op"] or entry["op"]}

    def planned_without_end(self, run_dir: Path, measured: Dict[tuple, set]) -> None:
        """Planned nodes with no end at all (a run killed before it could say so, or still going):
        listed as resumable, never dropped."""
        for unit_id, nodes in unfinished_nodes(run_dir, self.plan, measured).items():
            unit = next(u for u in self.plan["units"] if u["unit_id"] == unit_id)
            for n in nodes:
                if (n, unit["side"], unit["round"]) in self.ended:
                    continue  # its placeholder (the run's end wrote why it was not measured) says so
                # Also where another process ended the node: measured in fewer processes than
                # planned, it is not done (the placeholders a run writes as it ends say the same).
                # Interrupted, not crashed: no fault of the node's (the run was killed from outside,
                # or is still measuring).
                self._status(n, unit, unit["device"], {"host": "", "job_id": ""},
                             {"status": "interrupted", "resumable": True,
                              "reason": "no result yet (run killed or still going); resume to measure it"})

    def status_rows(self) -> List[dict]:
        """Per node and side, with a row for every node that produced none: nothing goes missing."""
        # A plain run's processes measure the same rows again: a node's rows count once.
        processes = int(self.plan.get("processes") or 1)
        per_process = processes > 1
        rows_per = Counter(key for key, *_ in {
            ((ev.base_node(r["node"] or ""), r["side"]), r.get("op"), r.get("dtype"), r.get("shape"),
             None if per_process else r.get("round"), None if per_process else id(r)) for r in self.rows})
        # node -> the processes (a plain run) or A/B rounds with rows of it
        measured_in: Dict[Tuple[str, str], set] = {}
        # node -> the timers its rows were timed with, the op's and the baseline's (a node whose every
        # shape fell back to direct timing says so, not the run's timer; "corpus": the corpus' own)
        timed_with: Dict[Tuple[str, str], set] = {}
        for r in self.rows:
            if r.get("latency"):
                key = (ev.base_node(r["node"] or ""), r["side"])
                measured_in.setdefault(key, set()).add(r.get("round"))
                timed_with.setdefault(key, set()).update(
                    {"corpus"} if MARKER_NOT_ZLBENCH_TIMER in (r.get("markers") or []) else
                    {t for k in ("timer_used", "timer_used_base") for t in (r.get(k) or "").split("+") if t})
        # a plain run's node -> the processes planned for it (a node whose processes disagreed got more)
        planned_in: Dict[Tuple[str, str], set] = {}
        for u in self.plan.get("units", []) if per_process else ():
            for n in u.get("nodes", []):
                planned_in.setdefault((n, u["side"]), set()).add(u["round"])
        node_ops = {n["nodeid"]: n["op"] for n in self.plan.get("nodes", [])}
        for key, st in self.nodes.items():
            st.update(op=st["op"] or node_ops.get(key[0], key[0]), rows=rows_per.get(key, 0),
                      backend=self.plan["backend"], timer="+".join(sorted(timed_with.get(key) or ())) or self.plan["timer"])
            got = len(measured_in.get(key, ()))
            planned = max(processes, len(planned_in.get(key, ())))
            if st["status"] != "ok" and 0 < got < planned:  # its status and reason are the others'
                st["reason"] = f"measured in {got} of {planned} processes; not in the others: {st['reason']}"
            elif st["status"] != "ok" and got and not per_process and int(self.plan.get("rounds") or 1) > 1:
                # An A/B node that failed or was cut in some rounds: its rows of the others are kept.
                st["reason"] = f"measured in {got} round(s) (their rows kept); in the others: {st['reason']}"
            if st["rows"] == 0:
                self.rows.append(Row(op=st["op"], status=st["status"], reason=st["reason"], side=st["side"],
                                     node=key[0], device=st["device"], timer_used=None).to_dict())
        out = sorted(self.nodes.values(), key=lambda s: (s["op"], s["test_node"], s["side"]))
        for s in out:
            d = self.devices.get(s["device"])
            s["device"] = f"{s['device']}:{d['name']}" if d else str(s["device"])
        return out


def _never_ran(status: Mapping) -> bool:
    """A timeout the run's time limit gave a node before any process started it."""
    return status["status"] == "timeout" and status["reason"].endswith(f"{ev.DEADLINE_REASON} before it ran")


def stopped_nodes(run_dir: Path, plan: Optional[Mapping] = None) -> Dict[str, dict]:
    """test node -> the A/B scheduler's first `stopped` event for it (why it ran no more rounds)."""
    out: Dict[str, dict] = {}
    for u in (plan or load_plan(run_dir))["units"]:
        for node, e in ev.stopped(ev.read_events(ev.events_path(run_dir, u["unit_id"]))).items():
            if node not in out or e.get("after_rounds", 0) < out[node].get("after_rounds", 0):
                out[node] = e
    return out


def unit_rows(unit: Mapping, events: List[dict]) -> List[dict]:
    """The rows one unit's events hold (finished attempts only), as collect makes them."""
    c = _Collector({"units": [unit], "devices": []})
    c.unit(unit, events, set())
    return c.rows


class Derived(NamedTuple):
    """What a run dir's events say, before anything is written (collect writes it)."""
    rows: List[dict]
    status_rows: List[dict]
    process_rows: Optional[List[dict]]  # a plain run over several processes: each process' own rows
    log_lines: List[str]
    processes: Dict[str, dict]
    side_logs: Dict[str, str]  # an A/B's run.<side>.log
    kernels: Dict[str, Dict[str, List[str]]]


def derive(run_dir: Path) -> Derived:
    """Rows and per-node status from the events of every unit of the plan, writing nothing."""
    plan = load_plan(run_dir)
    events = {u["unit_id"]: ev.read_events(ev.events_path(run_dir, u["unit_id"])) for u in plan["units"]}
    c = _Collector(plan, {(ev.base_node(e["node"]), u["side"]) for u in plan["units"] for e in events[u["unit_id"]]
                          if e.get("event") == "end" and e.get("deselected")})
    measured = measured_nodes(run_dir, plan, events)
    for u in plan["units"]:
        c.unit(u, events[u["unit_id"]], measured[(u["side"], u["round"])])
    c.planned_without_end(run_dir, measured)
    status_rows = c.status_rows()
    rows, log_lines, process_rows = c.rows, c.log_lines, None
    if (plan.get("processes") or 1) > 1:
        # A plain run over several processes: rows.jsonl and run.log hold each row once, over its
        # processes (median, interval); every process' own rows stay in process_rows.jsonl.
        process_rows = c.rows
        rows = aggregate(c.rows, int(plan["processes"]))
        log_lines = side_log(rows, _corpus_level(plan)).splitlines()[1:]
    elif plan.get("processes") == 1:  # a plain run of one process: its rows say so (null is an A/B's)
        rows = [{**r, "processes": 1 if was_measured(r) else 0} for r in rows]
    log_lines = log_lines + [f"{PIN_WARNING}{w}" for w in pinning_problems(c.processes, c.devices)]
    sides = [s["name"] for s in plan.get("sides", [])]
    side_logs = {side: side_log([r for r in c.rows if r.get("side") == side], _corpus_level(plan))
                 for side in sides} if len(sides) > 1 else {}
    kernels = {side: {op: sorted(h) for op, h in ops.items()} for side, ops in c.kernels.items()}
    return Derived(rows, status_rows, process_rows, log_lines, c.processes, side_logs, kernels)


def collect(run_dir: Path) -> Tuple[List[dict], List[dict]]:
    """Derive rows and per-node status from the events, and write the run dir's tables."""
    d = derive(run_dir)
    if d.process_rows is not None:
        atomic_write(run_dir / PROCESS_ROWS_FILE, _jsonl(d.process_rows))
    _write_outputs(run_dir, d.rows, d.status_rows, d.log_lines, d.processes)
    for side, text in d.side_logs.items():
        atomic_write(run_dir / f"run.{side}.log", text)
    atomic_write(run_dir / "artifacts.json", json.dumps(d.kernels, indent=1))
    return d.rows, d.status_rows


def bus_key(bus_id: str):
    """'00000000:19:00.0' (nvidia-smi) and '0000:19:00' (torch) name the same GPU: (domain, bus, dev)."""
    parts = re.split(r"[:.]", (bus_id or "").strip().lower())
    try:
        return tuple(int(x, 16) for x in parts[:3]) if len(parts) >= 3 else None
    except ValueError:
        return None


def pinning_problems(processes: Dict[str, dict], devices: Dict[int, dict]) -> List[str]:
    """Workers of different devices that measured on one GPU, or on another GPU than the plan's."""
    problems, owner = [], {}
    for key, p in sorted(processes.items()):
        bus = bus_key(p.get("device_bus_id", ""))
        if bus is None:
            continue
        dev = p.get("device")
        planned = bus_key(devices.get(dev, {}).get("bus_id", ""))
        if planned is not None and planned != bus:
            problems.append(f"process {key} of device {dev} measured on bus {p['device_bus_id']}, but "
                            f"device {dev} is {devices[dev]['bus_id']}: its visibility env did not pin it.")
        other = owner.setdefault(bus, dev)
        if other != dev:
            problems.append(f"devices {other} and {dev} both measured on bus {p['device_bus_id']}: "
                            "their rows are not independent.")
    return problems


def event_file_problems(run_dir: Path) -> List[str]:
    """A warning per unit whose events file holds lines that are no event (torn by a full disk or
    a kill, or edited): what they held (a row, a node's end) is missing from the tables; or the
    events of another unit (a file copied over: its processes would count twice)."""
    out = []
    for u in load_plan(run_dir)["units"]:
        path = ev.events_path(run_dir, u["unit_id"])
        events, bad = ev.read_checked(path)
        others = sorted({str(e["unit"]) for e in events
                         if e.get("event") == "session_start" and e.get("unit") not in (None, u["unit_id"])})
        if others:
            out.append(f"{path.relative_to(run_dir)} holds the events of {', '.join(others)}, not of "
                       f"{u['unit_id']} (a file copied over?): its rows are counted as {u['unit_id']}'s. Fix: "
                       "restore the unit's own file, or measure the run again.")
        if bad:
            where = ", ".join(map(str, bad[:5])) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            out.append(f"{path.relative_to(run_dir)}: {len(bad)} line(s) hold no event (line {where}): "
                       "torn by a full disk or a kill, or edited. What they held is missing from these "
                       "tables: a node without its end is resumable (resume= measures it again), a lost "
                       "row is not (a new run measures it).")
    return out


def run_pinning_problems(run_dir: Path) -> List[str]:
    """pinning_problems of a collected run dir (its processes.json against its plan's devices)."""
    path = run_dir / "processes.json"
    processes = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return pinning_problems(processes, {d["index"]: d for d in load_plan(run_dir).get("devices", [])})


def load_artifacts(run_dir: Path) -> Dict[str, Dict[str, str]]:
    path = run_dir / "artifacts.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _side_labelled(line: str, side: str) -> str:
    """An A/B's run.log record with the side that measured it (a key FlagGems' tools pass over):
    every round of both sides goes into that one log, and reading it back must not pair a side
    with itself."""
    if line.startswith("[INFO] {"):
        try:
            record = json.loads(line[len("[INFO] "):])
        except ValueError:
            return line
        if isinstance(record, dict):
            return "[INFO] " + json.dumps({**record, "side": side})
    return line


def _corpus_level(plan: Mapping) -> Optional[str]:
    """The --level the run passed its corpus (planning/plan.py corpus_args), as its records say it."""
    argv = list((plan.get("units") or [{}])[0].get("argv") or [])
    return argv[argv.index("--level") + 1] if "--level" in argv[:-1] else None


def side_log(rows: List[dict], level: Optional[str] = None) -> str:
    """One side of an interleaved A/B as a FlagGems result log (its tools keep the last record of a
    row, so rounds must not reach them as separate records): one record per test node, op and dtype
    (as FlagGems' own log has one per test), each shape's latencies the geometric mean over rounds,
    as the A/B report aggregates them. A record names its node: tests of one op may time one shape,
    and reading the log back must not take one test's row for another's round."""
    groups: Dict[Tuple[str, str, str], Dict[str, List[dict]]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("latency") and r.get("shape") is not None:
            groups.setdefault((r.get("node") or "", r["op"], r["dtype"]), {}).setdefault(r["shape"], []).append(r)
    lines = ["[INFO] Benchmark record logger enabled"]
    for (node, op, dtype), shapes in sorted(groups.items()):
        result = []
        for shape, rs in shapes.items():
            latency = _geomean([r["latency"] for r in rs])
            base = _geomean([r["latency_base"] for r in rs if r.get("latency_base")]) or None
            # The speedup of the rounds that timed the baseline (an A/B times it in its first round and
            # the drift checks), each over its own round's latency, as summary.md reckons a row's.
            timed = [r["latency_base"] / r["latency"] for r in rs if r.get("latency_base") and r.get("latency")]
            result.append({"legacy_shape": rs[0].get("legacy_shape"), "shape_detail": json.loads(base_shape(shape)),
                           "latency_base": base, "latency": latency,
                           "speedup": _geomean(timed) or None, "rounds": len(rs),
                           # read back (zlbench summary LOG --ab LOG), a row keeps how it was timed
                           "markers": sorted({m for r in rs for m in (r.get("markers") or [])}),
                           # ... what timed it (else the record's mode is read as its timer) and why it is marked
                           **{k: _joined(rs, k, sep) for k, sep in (("timer_used", "+"), ("timer_used_base", "+"),
                                                                    ("marker_reason", "; "))},
                           **({"processes": rs[0]["processes"], "latency_ci": rs[0].get("latency_ci")}
                              if len(rs) == 1 and rs[0].get("processes") else {})})
        # op_name, dtype, mode, level and result: what FlagGems' tools (summary_for_plot.py) read of a record
        lines.append("[INFO] " + json.dumps({"op_name": op, "dtype": dtype, "mode": "zlbench",
                                             **({"level": level} if level else {}), "result": result,
                                             **({"node": node} if node else {})}))
    return "\n".join(lines) + "\n"


def _joined(rows: List[dict], key: str, sep: str) -> Optional[str]:
    """The rows' distinct values of key, joined (None where none has one)."""
    return sep.join(sorted({str(r[key]) for r in rows if r.get(key)})) or None


def _geomean(values: List[float]) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0


def _jsonl(rows: Iterable[Mapping]) -> str:
    return "".join(json.dumps({k: r.get(k) for k in ROW_FIELDS}) + "\n" for r in rows)


def _write_outputs(run_dir, rows, status_rows, log_lines, processes) -> None:
    atomic_write(run_dir / "rows.jsonl", _jsonl(rows))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=OPS_STATUS_FIELDS, extrasaction="ignore")
    w.writeheader()
    for s in status_rows:
        w.writerow({**s, "wall_s": f"{s['wall_s']:.2f}"})
    atomic_write(run_dir / "ops_status.csv", buf.getvalue())
    header = ["[INFO] Benchmark record logger enabled"]
    atomic_write(run_dir / "run.log", "\n".join(header + log_lines) + "\n")
    atomic_write(run_dir / "processes.json", json.dumps(processes, indent=1, default=str))


def load_rows(run_dir: Path) -> List[dict]:
    path = run_dir / "rows.jsonl"
    if not path.exists():
        collect(run_dir)
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as e:
                    raise UsageError(f"{path}:{lineno}: malformed row ({e}). Fix: run "
                                     f"`zlbench collect {run_dir}` to rebuild it from the events.")
    return out


def load_status(run_dir: Path) -> List[dict]:
    path = run_dir / "ops_status.csv"
    if not path.exists():
        collect(run_dir)
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def wall_times(*run_dirs: Optional[str]) -> Dict[str, float]:
    """Wall time per test node from the first of these earlier runs that has its tables (for
    balancing shards)."""
    for d in run_dirs:
        if d and (Path(d) / "ops_status.csv").is_file():
            return {r["test_node"]: float(r["wall_s"] or 0) for r in load_status(Path(d))}
    return {}
