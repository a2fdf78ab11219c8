"""A zlbench run dir: collect the units' events into rows.jsonl, ops_status.csv and run.log.

Collection is idempotent and can run any time (while a run is going, after a kill, after Slurm
jobs finish): events are the source of truth, the tables are derived from them.
"""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path
from typing import Dict, List, Tuple

from ..errors import UsageError
from ..worker import base_node, read_events
from .schema import OPS_STATUS_FIELDS, ROW_FIELDS, SEVERITY, shape_key

PLAN_FILE = "plan.json"
# Prefix of run.log lines saying a worker was not pinned to its own device.
PIN_WARNING = "[WARNING] zlbench: "


def load_plan(run_dir: Path) -> dict:
    path = run_dir / PLAN_FILE
    if not path.is_file():
        raise UsageError(f"{run_dir} is not a zlbench run dir (no {PLAN_FILE}).")
    return json.loads(path.read_text(encoding="utf-8"))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def collect(run_dir: Path) -> Tuple[List[dict], List[dict]]:
    """Derive rows and per-op status from the events of every unit of the plan."""
    plan = load_plan(run_dir)
    devices = {d["index"]: d for d in plan.get("devices", [])}
    rows: List[dict] = []
    nodes: Dict[Tuple[str, str], dict] = {}  # (node, side) -> status row
    log_lines: List[str] = []
    processes: Dict[str, dict] = {}
    kernels: Dict[str, Dict[str, set]] = {}  # side -> op -> kernel hashes
    for unit in plan["units"]:
        events = read_events(run_dir / "units" / unit["unit_id"] / "events.jsonl")
        # A resumable placeholder (its job died before the node ran) no longer applies once a
        # resume measured the node: resumes reuse the unit, so that end is in the same file.
        measured = {base_node(e["node"]) for e in events if e.get("event") == "end" and not e.get("resumable")}
        events = [e for e in events if not (e.get("event") == "end" and e.get("resumable")
                                            and base_node(e["node"]) in measured)]
        dev = unit["device"]
        # What the measuring process itself saw (torch's device name and PCI bus id) wins over the
        # enumeration: it is the proof that the worker was pinned to the device the plan gave it.
        seen = {"device_name": devices.get(dev, {}).get("name", ""), "device_bus_id": ""}
        where = {"host": "", "job_id": ""}
        for e in events:
            kind = e.get("event")
            if kind == "launch":
                where = {"host": e.get("host", ""), "job_id": e.get("job_id", "")}
            elif kind == "log":
                log_lines.append(e["line"])
            elif kind == "artifacts":
                kernels.setdefault(unit["side"], {}).setdefault(e.get("op") or "", set()).update(e["kernels"])
            elif kind == "process":
                facts = e.get("facts", {})
                processes[f"{unit['unit_id']}:{e.get('pid')}"] = {"device": dev, **facts}
                seen = {"device_name": facts.get("device_name") or seen["device_name"],
                        "device_bus_id": facts.get("device_bus_id", "")}
            elif kind == "record":
                payload = e["payload"]
                for res, timing in zip(payload.get("result") or [], e.get("timing") or []):
                    rows.append({
                        "op": payload.get("op_name"), "dtype": payload.get("dtype"),
                        "shape": shape_key(res.get("shape_detail")),
                        "legacy_shape": res.get("legacy_shape"),
                        "latency_base": res.get("latency_base"), "latency": res.get("latency"),
                        "speedup": res.get("speedup"), "gbps_base": res.get("gbps_base"),
                        "gbps": res.get("gbps"), "timer_used": timing.get("timer_used"),
                        "timer_used_base": timing.get("timer_used_base"),
                        "markers": timing.get("markers") or [],
                        "marker_reason": timing.get("marker_reason"),
                        "status": "failed" if res.get("error_msg") else "ok",
                        "reason": res.get("error_msg"), "side": unit["side"],
                        "round": unit["round"], "device": dev, **seen,
                        "node": e.get("node"), "unit": unit["unit_id"],
                    })
            elif kind == "end":
                key = (base_node(e["node"]), unit["side"])
                prev = nodes.get(key)
                entry = {
                    "op": e.get("op") or "", "test_node": key[0], "side": unit["side"],
                    "status": e["status"], "reason": (e.get("reason") or "")[:500],
                    "wall_s": float(e.get("wall_s") or 0.0), "device": dev, **where,
                }
                if prev is None:
                    nodes[key] = entry
                else:  # several rounds / items: worst status, summed wall time
                    worst = min((prev, entry), key=lambda x: SEVERITY.get(x["status"], 0))
                    nodes[key] = {**worst, "wall_s": prev["wall_s"] + entry["wall_s"],
                                  "op": prev["op"] or entry["op"]}
    # Nodes that produced no row still get one, carrying their status: nothing goes missing silently.
    rows_per = {}
    for r in rows:
        k = (base_node(r["node"] or ""), r["side"])
        rows_per[k] = rows_per.get(k, 0) + 1
    node_ops = {n["nodeid"]: n["op"] for n in plan.get("nodes", [])}
    for key, st in nodes.items():
        st["op"] = st["op"] or node_ops.get(key[0], key[0])
        st["rows"] = rows_per.get(key, 0)
        st["backend"] = plan["backend"]
        st["timer"] = plan["timer"]
        if st["rows"] == 0:
            rows.append({
                "op": st["op"], "dtype": None, "shape": None, "status": st["status"],
                "reason": st["reason"], "side": st["side"], "node": key[0], "device": st["device"],
                "markers": [], "timer_used": None,
            })
    status_rows = sorted(nodes.values(), key=lambda s: (s["op"], s["test_node"], s["side"]))
    for s in status_rows:
        s["device"] = _device_label(s["device"], devices)
    log_lines += [f"{PIN_WARNING}{w}" for w in pinning_problems(processes, devices)]
    _write_outputs(run_dir, rows, status_rows, log_lines, processes)
    _atomic_write(run_dir / "artifacts.json", json.dumps(
        {side: {op: sorted(h) for op, h in ops.items()} for side, ops in kernels.items()}, indent=1))
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


def _device_label(index, devices) -> str:
    d = devices.get(index)
    return f"{index}:{d['name']}" if d else str(index)


def _write_outputs(run_dir, rows, status_rows, log_lines, processes) -> None:
    _atomic_write(run_dir / "rows.jsonl", "".join(
        json.dumps({k: r.get(k) for k in ROW_FIELDS}) + "\n" for r in rows))
    import io

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
                                     f"`python -m zlbench.collect {run_dir}` to rebuild it from the events.")
    return out


def load_status(run_dir: Path) -> List[dict]:
    path = run_dir / "ops_status.csv"
    if not path.exists():
        collect(run_dir)
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))
