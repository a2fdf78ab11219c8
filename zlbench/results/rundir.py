"""A zlbench run dir, its one owner: the plan (with the format version), placeholders for nodes
whose job ended early, and collection of the units' events into rows.jsonl, ops_status.csv,
run.log and processes.json.

Collection is idempotent and can run any time (while a run is going, after a kill, after Slurm
jobs finish): events are the source of truth, the tables are derived from them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from zlbench.errors import UsageError
from zlbench.results import events as ev
from zlbench.results.process_stats import aggregate
from zlbench.results.records import ROW_FIELDS, Row
from zlbench.results.schema import OPS_STATUS_FIELDS, SEVERITY

PLAN_FILE = "plan.json"
IDENTITY_FILE = "run_identity.json"
PROCESS_ROWS_FILE = "process_rows.jsonl"  # a plain run over several processes: every process' rows
# Held by a run's orchestrator (engine/locks.py); beside a lock, `<lock>.holder.json` names its holder.
RUN_LOCK_FILE = ".zlbench.lock"
# Prefix of run.log lines saying a worker was not pinned to its own device.
PIN_WARNING = "[WARNING] zlbench: "
# Reason of a placeholder for a planned node that got no end of its own.
NOT_RUN = ("its job ended before the node finished (worker killed, job cancelled, interrupted or "
           "preempted); resume to measure it")


def holder_record(lock: Path) -> Path:
    return lock.with_name(lock.name + ".holder.json")


def describe_holder(record: Path) -> str:
    """Who holds a lock (a run dir's or a device's), as its holder record says."""
    try:
        h = json.loads(record.read_text(encoding="utf-8"))
        return f"pid {h['pid']} on {h['host']}, started {h['started']}: {h.get('command', '')}"
    except (OSError, ValueError, KeyError):
        return "holder unknown"


def live_run(run_dir: Path) -> Optional[str]:
    """Who holds the run dir, where that is a live process of this host (a run still measuring);
    None otherwise. Read-only: a run starting meanwhile is not disturbed."""
    record = holder_record(Path(run_dir) / RUN_LOCK_FILE)
    try:
        h = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    import socket

    import psutil

    if h.get("host") != socket.gethostname() or not psutil.pid_exists(int(h.get("pid", -1))):
        return None
    return describe_holder(record)


def write_identity(run_dir: Path, identity: Mapping) -> Path:
    path = run_dir / IDENTITY_FILE
    _atomic_write(path, json.dumps(identity, indent=2, default=str, sort_keys=False) + "\n")
    return path


def read_identity(run_dir: Path) -> dict:
    path = Path(run_dir) / IDENTITY_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{run_dir} is not a zlbench run dir (no {IDENTITY_FILE}).")
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e}): the run dir is damaged. Fix: start a new run.")


def add_process_facts(run_dir: Path) -> None:
    """Merge what the benchmark processes found (device names, driver, flag_gems vendor) into the
    identity, without changing its hash (facts observed, not chosen)."""
    facts_path = run_dir / "processes.json"
    if not (run_dir / IDENTITY_FILE).exists() or not facts_path.exists():
        return
    identity = read_identity(run_dir)
    facts = json.loads(facts_path.read_text(encoding="utf-8"))
    unique = {json.dumps(f, sort_keys=True) for f in facts.values()}
    identity["processes"] = [json.loads(u) for u in sorted(unique)]
    write_identity(run_dir, identity)


def resume_command(run_dir: Path) -> str:
    """The command that resumes this run dir: the overrides it ran with (Hydra's
    .hydra/overrides.yaml) and resume=, since a resume with other settings is another caliber."""
    try:
        import yaml

        overrides = yaml.safe_load((Path(run_dir) / ".hydra" / "overrides.yaml").read_text()) or []
    except (OSError, ValueError, AttributeError, ImportError):
        overrides = []
    keep = [str(o) for o in overrides if str(o).split("=", 1)[0].lstrip("+~") not in ("resume", "hydra.run.dir")]
    return " ".join(["python -m zlbench", *map(shlex.quote, keep), shlex.quote(f"resume={run_dir}")])


def write_plan(run_dir: Path, plan: Mapping) -> None:
    _atomic_write(run_dir / PLAN_FILE, json.dumps({"format": ev.FORMAT_VERSION, **plan}, indent=1))


def load_plan(run_dir: Path) -> dict:
    path = Path(run_dir) / PLAN_FILE
    if not path.is_file():
        raise UsageError(f"{run_dir} is not a zlbench run dir (no {PLAN_FILE}). Fix: pass the folder "
                         "that holds run_identity.json and plan.json.")
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e}): the run dir is damaged. Fix: start a new run.")
    version = plan.get("format", 1)
    if version != ev.FORMAT_VERSION:
        raise UsageError(f"{run_dir} was written in run-dir format {version}; this zlbench reads format "
                         f"{ev.FORMAT_VERSION}. Fix: collect or resume it with the zlbench version that "
                         "wrote it, or start a new run.")
    return _one_schedule(plan)


def _one_schedule(plan: dict) -> dict:
    """A node-level A/B's schedule is written once, as plan["schedule"] (null: none). A plan.json
    written before that carried a copy on every unit, with max_rounds (plan["rounds"]): read it as
    written now, so such a run is still collected and resumed."""
    units = plan.get("units") or []
    if "schedule" not in plan:
        plan["schedule"] = next((u["schedule"] for u in units if u.get("schedule")), None)
    for u in units:
        u.pop("schedule", None)
    if plan["schedule"]:
        plan["schedule"].pop("max_rounds", None)
    return plan


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():  # a full disk mid-write: never leave the half-written copy behind
            tmp.unlink()


def measured_nodes(run_dir: Path, plan: Mapping, events: Optional[Mapping[str, List[dict]]] = None
                   ) -> Dict[tuple, set]:
    """(side, round) -> nodes with a final end in any of its units (a unit may take another's), or
    that the A/B scheduler stopped (not live, settled): nothing left to measure there."""
    done: Dict[tuple, set] = {}
    for u in plan["units"]:
        unit_events = events[u["unit_id"]] if events is not None else ev.read_events(ev.events_path(run_dir, u["unit_id"]))
        done.setdefault((u["side"], u["round"]), set()).update(ev.done_nodes(unit_events))
    return done


def unfinished_nodes(run_dir: Path, plan: Optional[Mapping] = None,
                     done: Optional[Dict[tuple, set]] = None) -> Dict[str, List[str]]:
    """unit id -> planned nodes with no final end, wherever they ran (a unit may have taken
    another's nodes): the note goes to the unit that claimed the node, else to the plan's."""
    from zlbench.results.claims import owner

    plan = plan or load_plan(run_dir)
    units = {u["unit_id"]: u for u in plan["units"]}
    done = done if done is not None else measured_nodes(run_dir, plan)
    missing: Dict[str, List[str]] = {}
    for u in plan["units"]:
        for n in u.get("nodes", []):
            if n not in done[(u["side"], u["round"])]:
                who = owner(u["claims_dir"], n) if u.get("claims_dir") else None
                missing.setdefault(who if who in units else u["unit_id"], []).append(n)
    return missing


def write_placeholders(run_dir: Path, missing: Mapping[str, List[str]], why: str = "") -> None:
    """Resumable ends for nodes whose job ended from outside: reported, never dropped, and measured
    by resume=RUN_DIR (they were not at fault). `why`: what ended the jobs, when known."""
    reason = f"not measured ({why}); resume to measure it" if why else NOT_RUN
    for unit_id, nodes in missing.items():
        path = ev.events_path(run_dir, unit_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        known = ev.placeholders(ev.read_events(path))
        for n in nodes:
            if n not in known:
                ev.append(path, "end", node=n, status="crashed", resumable=True, reason=reason)


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
        for e in events:
            kind = e.get("event")
            if kind == "launch":
                where = {"host": e.get("host", ""), "job_id": e.get("job_id", "")}
                pending.clear()  # a new process: what the last one left unfinished is measured again
            elif kind == "start":
                pending.pop(ev.base_node(e["node"]), None)
            elif kind == "log":
                self.log_lines.append(e["line"])
            elif kind == "artifacts":
                self.kernels.setdefault(unit["side"], {}).setdefault(e.get("op") or "", set()).update(e["kernels"])
            elif kind == "process":
                facts = e.get("facts", {})
                self.processes[f"{unit['unit_id']}:{e.get('pid')}"] = {"device": dev, **facts}
                seen = {"device_name": facts.get("device_name") or seen["device_name"],
                        "device_bus_id": facts.get("device_bus_id", "")}
            elif kind == "record":
                pending.setdefault(ev.base_node(e.get("node") or ""), []).extend(
                    Row.from_result(e["payload"], res, timing, side=unit["side"], round=unit["round"],
                                    device=dev, node=e.get("node"), unit=unit["unit_id"], **seen).to_dict()
                    for res, timing in zip(e["payload"].get("result") or [], e.get("timing") or []))
            elif kind == "retry":
                pending.pop(ev.base_node(e["node"]), None)
            elif kind == "end":
                node = ev.base_node(e["node"])
                self.rows.extend(pending.pop(node, []) if ev.is_final_end(e) else ())
                if ev.is_final_end(e) or node not in measured:
                    self._status(node, unit, dev, where, e)

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
            self.nodes[key] = {**worst, "wall_s": prev["wall_s"] + entry["wall_s"], "op": prev["op"] or entry["op"]}

    def planned_without_end(self, run_dir: Path, measured: Dict[tuple, set]) -> None:
        """Planned nodes with no end at all (a run killed before it could say so, or still going):
        listed as resumable, never dropped."""
        for unit_id, nodes in unfinished_nodes(run_dir, self.plan, measured).items():
            unit = next(u for u in self.plan["units"] if u["unit_id"] == unit_id)
            for n in nodes:
                if (n, unit["side"]) not in self.nodes:
                    self._status(n, unit, unit["device"], {"host": "", "job_id": ""},
                                 {"status": "crashed", "resumable": True,
                                  "reason": "no result yet (run killed or still going); resume to measure it"})

    def status_rows(self) -> List[dict]:
        """Per node and side, with a row for every node that produced none: nothing goes missing."""
        # A plain run's processes measure the same rows again: a node's rows count once.
        per_process = (self.plan.get("processes") or 1) > 1
        rows_per = Counter(key for key, *_ in {
            ((ev.base_node(r["node"] or ""), r["side"]), r.get("op"), r.get("dtype"), r.get("shape"),
             None if per_process else r.get("round"), None if per_process else id(r)) for r in self.rows})
        node_ops = {n["nodeid"]: n["op"] for n in self.plan.get("nodes", [])}
        for key, st in self.nodes.items():
            st.update(op=st["op"] or node_ops.get(key[0], key[0]), rows=rows_per.get(key, 0),
                      backend=self.plan["backend"], timer=self.plan["timer"])
            if st["rows"] == 0:
                self.rows.append(Row(op=st["op"], status=st["status"], reason=st["reason"], side=st["side"],
                                     node=key[0], device=st["device"], timer_used=None).to_dict())
        out = sorted(self.nodes.values(), key=lambda s: (s["op"], s["test_node"], s["side"]))
        for s in out:
            d = self.devices.get(s["device"])
            s["device"] = f"{s['device']}:{d['name']}" if d else str(s["device"])
        return out


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


def collect(run_dir: Path) -> Tuple[List[dict], List[dict]]:
    """Derive rows and per-node status from the events of every unit of the plan."""
    plan = load_plan(run_dir)
    events = {u["unit_id"]: ev.read_events(ev.events_path(run_dir, u["unit_id"])) for u in plan["units"]}
    c = _Collector(plan, {(ev.base_node(e["node"]), u["side"]) for u in plan["units"] for e in events[u["unit_id"]]
                          if e.get("event") == "end" and e.get("deselected")})
    measured = measured_nodes(run_dir, plan, events)
    for u in plan["units"]:
        c.unit(u, events[u["unit_id"]], measured[(u["side"], u["round"])])
    c.planned_without_end(run_dir, measured)
    status_rows = c.status_rows()
    rows, log_lines = c.rows, c.log_lines
    if (plan.get("processes") or 1) > 1:
        # A plain run over several processes: rows.jsonl and run.log hold each row once, over its
        # processes (median, interval); every process' own rows stay in process_rows.jsonl.
        _atomic_write(run_dir / PROCESS_ROWS_FILE, _jsonl(c.rows))
        rows = aggregate(c.rows, int(plan["processes"]))
        log_lines = side_log(rows).splitlines()[1:]
    log_lines = log_lines + [f"{PIN_WARNING}{w}" for w in pinning_problems(c.processes, c.devices)]
    _write_outputs(run_dir, rows, status_rows, log_lines, c.processes)
    sides = [s["name"] for s in plan.get("sides", [])]
    if len(sides) > 1:
        for side in sides:
            _atomic_write(run_dir / f"run.{side}.log", side_log([r for r in c.rows if r.get("side") == side]))
    _atomic_write(run_dir / "artifacts.json", json.dumps(
        {side: {op: sorted(h) for op, h in ops.items()} for side, ops in c.kernels.items()}, indent=1))
    return rows, status_rows


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


def run_pinning_problems(run_dir: Path) -> List[str]:
    """pinning_problems of a collected run dir (its processes.json against its plan's devices)."""
    path = run_dir / "processes.json"
    processes = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return pinning_problems(processes, {d["index"]: d for d in load_plan(run_dir).get("devices", [])})


def load_artifacts(run_dir: Path) -> Dict[str, Dict[str, str]]:
    path = run_dir / "artifacts.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def side_log(rows: List[dict]) -> str:
    """One side of an interleaved A/B as a FlagGems result log (its tools keep the last record of a
    row, so rounds must not reach them as separate records): one record per op and dtype, each
    shape's latencies the geometric mean over rounds, as the A/B report aggregates them."""
    groups: Dict[Tuple[str, str], Dict[str, List[dict]]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("latency") and r.get("shape") is not None:
            groups.setdefault((r["op"], r["dtype"]), {}).setdefault(r["shape"], []).append(r)
    lines = ["[INFO] Benchmark record logger enabled"]
    for (op, dtype), shapes in sorted(groups.items()):
        result = []
        for shape, rs in shapes.items():
            latency = _geomean([r["latency"] for r in rs])
            base = _geomean([r["latency_base"] for r in rs if r.get("latency_base")]) or None
            result.append({"legacy_shape": rs[0].get("legacy_shape"), "shape_detail": json.loads(shape),
                           "latency_base": base, "latency": latency,
                           "speedup": base / latency if base else None, "rounds": len(rs),
                           **({"processes": rs[0]["processes"], "latency_ci": rs[0].get("latency_ci")}
                              if len(rs) == 1 and rs[0].get("processes") else {})})
        lines.append("[INFO] " + json.dumps({"op_name": op, "dtype": dtype, "mode": "zlbench", "result": result}))
    return "\n".join(lines) + "\n"


def _geomean(values: List[float]) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0


def _jsonl(rows: Iterable[Mapping]) -> str:
    return "".join(json.dumps({k: r.get(k) for k in ROW_FIELDS}) + "\n" for r in rows)


def _write_outputs(run_dir, rows, status_rows, log_lines, processes) -> None:
    _atomic_write(run_dir / "rows.jsonl", _jsonl(rows))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=OPS_STATUS_FIELDS, extrasaction="ignore")
    w.writeheader()
    for s in status_rows:
        w.writerow({**s, "wall_s": f"{s['wall_s']:.2f}"})
    _atomic_write(run_dir / "ops_status.csv", buf.getvalue())
    header = ["[INFO] Benchmark record logger enabled"]
    _atomic_write(run_dir / "run.log", "\n".join(header + log_lines) + "\n")
    _atomic_write(run_dir / "processes.json", json.dumps(processes, indent=1, default=str))


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
