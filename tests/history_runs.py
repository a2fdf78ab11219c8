"""Synthetic run dirs for the history tests, written in the run-dir format itself (the same files
and fields a finished run writes: run_identity.json, rows.jsonl, ops_status.csv, ab.json), for
cases that need many runs: a series over 8 commits, several vendors, noisy histories."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Sequence

from zlbench.history.__main__ import main as history_main
from zlbench.planning.identity import identity_hash
from zlbench.results.records import ROW_FIELDS
from zlbench.results.schema import OPS_STATUS_FIELDS

SHAPES = ("[[64,64]]", "[[256,256]]", "[[1024,1024]]")
DEVICE_NAMES = {"cuda": "NVIDIA H200", "musa": "MTT S4000", "cpu": "Intel(R) Xeon(R) Processor"}


def identity(backend: str = "cuda", corpus_commit: str = "c0", zlbench_commit: str = "z0", triton: str = "3.6.0",
             created: str = "2026-11-01T00:00:00+0000", timer: str = "graph", ops: Sequence[str] = ("exp",),
             ab: Optional[str] = None, processes: int = 1) -> dict:
    """An identity with every top-level key a real run's has (see zlbench/planning/identity.py);
    processes: timer.processes (a plain run measures each node in that many processes)."""
    device = DEVICE_NAMES.get(backend, backend)
    ident = {
        "config": {"backend": {"name": backend}, "timer": {"name": timer, "repeat": 1, "processes": processes},
                   "shape": {"mode": "upstream", "level": "core", "file": None},
                   "corpus": {"name": "flaggems", "root": "/src/FlagGems"},
                   "ab": {"name": ab or "none", "var": None}, "ops": list(ops), "dtypes": ["float16"],
                   "devices": "all", "autotune": False, "isolate_caches": True},
        "backend": {"name": backend, "default_timer": timer},
        "devices": [{"index": 0, "name": device, "bus_id": "0000:19:00.0", "driver": "560"}],
        "timer": {"name": timer, "repeat": 1},
        "autotune": "0",
        "plugins": ["zlbench.plugins.device_setup", "zlbench.plugins.timing", "zlbench.plugins.record"],
        "test_nodes": [f"benchmark/test_{op}.py::test_perf_{op}" for op in ops],
        "sides": {"main": {}} if not ab else {"off": {ab: "0"}, "on": {ab: "1"}},
        "rounds": 1,
        "corpus": {"name": "flaggems", "root": "/src/FlagGems", "commit": corpus_commit},
        "versions": {"zlbench": "0.1.0", "zlbench_commit": zlbench_commit, "python": "3.11.7",
                     "torch": "2.11.0", "triton": triton, "flag_gems": "4.1", "hydra-core": "1.3.8",
                     "submitit": "1.5.4"},
        "switch_env": {},
        "host": "node1",
    }
    ident["identity_hash"] = identity_hash(ident)
    ident["provenance"] = {"env": {}, "env_overrides": [], "cli_overrides": []}
    ident["created"] = created
    ident["processes"] = [{"device": 0, "device_name": device}]
    return ident


def row(op: str, shape: str, latency: float, latency_base: float, side: str = "main", rnd: int = 0,
        dtype: str = "torch.float16", status: str = "ok", device_name: str = "NVIDIA H200",
        ci: Optional[Sequence[float]] = None, base_ci: Optional[Sequence[float]] = None,
        processes: Optional[int] = None, markers: Sequence[str] = ()) -> dict:
    """One row; ci / base_ci: the process-level intervals [lo, hi] ms of a plain run measured in
    `processes` processes (timer.processes; null: one process)."""
    r = {k: None for k in ROW_FIELDS}
    r.update({"op": op, "dtype": dtype, "shape": shape, "legacy_shape": json.loads(shape)[0],
              "latency_base": latency_base, "latency": latency, "speedup": latency_base / latency,
              "timer_used": "graph", "timer_used_base": "graph", "markers": list(markers), "status": status,
              "side": side, "round": rnd, "device": 0, "device_name": device_name,
              "node": f"benchmark/test_{op}.py::test_perf_{op}", "unit": f"{side}.r{rnd}.d0.s0",
              "processes": processes if processes is not None else (3 if ci is not None else 1),
              "latency_ci": list(ci) if ci is not None else None,
              "timing_base": {"latency_ci": list(base_ci)} if base_ci is not None else None})
    return r


def write_run(run_dir: Path, ident: Mapping, rows: Sequence[Mapping], ab: Optional[Mapping] = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run_identity.json").write_text(json.dumps(ident, indent=2) + "\n", encoding="utf-8")
    with open(run_dir / "rows.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({k: r.get(k) for k in ROW_FIELDS}) + "\n")
    status: Dict[tuple, dict] = {}
    for r in rows:
        s = status.setdefault((r["op"], r["side"]), {
            "op": r["op"], "test_node": r["node"], "side": r["side"], "status": "ok", "rows": 0,
            "backend": ident["backend"]["name"], "device": "0:" + ident["devices"][0]["name"],
            "timer": ident["timer"]["name"], "wall_s": "1.00", "reason": "", "host": ident["host"], "job_id": "1"})
        s["rows"] += 1
        if r["status"] != "ok":
            s["status"] = r["status"]
    with open(run_dir / "ops_status.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=OPS_STATUS_FIELDS)
        w.writeheader()
        w.writerows(status.values())
    if ab is not None:
        (run_dir / "ab.json").write_text(json.dumps(ab, indent=1), encoding="utf-8")
    return run_dir


def series(root: Path, latencies: Iterable[Mapping[str, float]], backend: str = "cuda", noise: float = 0.01,
           seed: int = 0, rounds: int = 1, timer: str = "graph", first: int = 0,
           interval: Optional[float] = None) -> list:
    """One run per element (one commit each, a day apart): {op: latency of its first shape}. Other
    shapes scale with it; every value gets lognormal noise of sd `noise`; torch stays put. `first`:
    the index of the first commit (another machine measuring a later commit). interval: runs with
    timer.processes=3 whose rows carry a process-level interval value x (1 -+ interval)."""
    rng = random.Random(seed)
    dirs = []
    for i, per_op in enumerate(latencies, first):
        created = f"2026-11-{i + 1:02d}T02:00:00+0000"
        ident = identity(backend=backend, corpus_commit=f"corpus{i:02d}" + "0" * 32, zlbench_commit=f"zl{i:02d}",
                         created=created, timer=timer, ops=sorted(per_op), processes=3 if interval else 1)
        rows = []
        for op, base in sorted(per_op.items()):
            for j, shape in enumerate(SHAPES):
                for rnd in range(rounds):
                    lat = base * (4 ** j) * rng.lognormvariate(0, noise)
                    torch_lat = 0.01 * (4 ** j) * rng.lognormvariate(0, noise)
                    ci = [lat * (1 - interval), lat * (1 + interval)] if interval else None
                    rows.append(row(op, shape, lat, torch_lat, rnd=rnd, device_name=DEVICE_NAMES.get(backend, backend),
                                    ci=ci))
        dirs.append(write_run(root / "zl_runs" / f"2026-11-{i + 1:02d}" / "02-00-00", ident, rows))
    return dirs


def history(capsys, *args):
    """`python -m zlbench history ARGS` in process: (exit code, captured out and err)."""
    code = history_main([str(a) for a in args])
    return code, capsys.readouterr()
