"""One table per operator, dtype and shape: each backend's speedup over its own torch, and its
latency, from the newest run of every (backend, device) of one corpus commit."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from typing import Dict, List, Mapping, Optional

from tabulate import tabulate

from zlbench.ab.pairing import adopt_nodes, name_shared_keys, names_tests, op_with_test
from zlbench.results.schema import did_no_device_work, kernel_speedup, short_dtype
from zlbench.errors import UsageError
from zlbench.store.db import Store
from zlbench.history.output import csv_text, json_text
from zlbench.history.query import fetch_rows, list_runs, ops_of, usable


def vendors(store: Store, corpus_commit: Optional[str] = None, ops: Optional[List[str]] = None) -> Dict:
    runs = _runs_with_commit(store, corpus_commit)
    commit = runs[-1]["corpus_commit"]  # the newest run's, unless one was asked for
    latest = _latest_per_column(runs, commit)
    columns = sorted(latest)
    by_run = {latest[c]["run_id"]: c for c in columns}
    if ops:
        have = ops_of(store, list(by_run))
        missing = [op for op in ops if op not in have]
        if missing:
            raise UsageError(f"--op {', '.join(missing)}: no row of the {len(by_run)} run(s) at corpus commit "
                             f"{str(commit)[:12]} has that op; their ops: {', '.join(have[:12]) or 'none'}"
                             + (f" (and {len(have) - 12} more)" if len(have) > 12 else "") + ". Fix: pass one of those.")
    rows = fetch_rows(store, list(by_run), ops=ops)
    # Tests of one op may time one shape: an entry per test. A FlagGems log's row names no test: it
    # joins the one test the runs that name theirs time its key with; where several do, which one it
    # is nothing says, and it keeps an entry of its own (its op shown bare).
    acc = _accumulate(_with_nodes(rows), by_run)
    table = name_shared_keys([_table_entry(key, acc[key], columns) for key in sorted(acc, key=natural_key)])
    return {"summary": {"corpus_commit": commit, "vendors": [_label(c) for c in columns],
                        "runs": {_label(c): latest[c]["run_id"] for c in columns}},
            "rows": table}


def _runs_with_commit(store: Store, corpus_commit: Optional[str]) -> List[dict]:
    """The runs and logs that record a corpus commit (starting with `corpus_commit` if given), oldest first."""
    runs = [r for r in list_runs(store) if r["kind"] in ("run", "log") and r.get("corpus_commit")]
    if corpus_commit:
        runs = [r for r in runs if r["corpus_commit"].startswith(corpus_commit)]
    if not runs:
        raise UsageError(f"no run in the store {store.shown} records a corpus commit"
                         f"{' starting with ' + corpus_commit if corpus_commit else ''}. Fix: `history list` shows "
                         "the runs' corpus commits (FlagGems logs: import them with --corpus-commit).")
    return runs


def _latest_per_column(runs: List[dict], commit: str) -> Dict[tuple, dict]:
    """The newest run of every (backend, device) at `commit`."""
    latest: Dict[tuple, dict] = {}
    for r in runs:
        if r["corpus_commit"] == commit:
            latest[(r.get("backend") or "?", r.get("device_name") or "?")] = r  # oldest first: newest wins
    return latest


def _with_nodes(rows: List[dict]) -> List[dict]:
    """Each log run's rows (a FlagGems log names no test) with their test, as the pairing finds it
    (pairing.reconcile_log, per run: a log holding two records of a key is not one test's)."""
    named = [r for r in rows if r.get("node")]
    runs: Dict[int, List[dict]] = defaultdict(list)
    for r in rows:
        runs[r["run_id"]].append(r)
    return [r for rs in runs.values()
            for r in (rs if names_tests(rs) else adopt_nodes(rs, named))]


def _accumulate(rows, by_run: Mapping) -> Dict[tuple, Dict[tuple, Dict[str, list]]]:
    """Main-side rows grouped by (op, dtype, shape, test node), then by column: their latencies,
    speedups and failures. An empty replay (BENCHMARK_NO_DEVICE_WORK) is no kernel's latency: left out."""
    acc: Dict[tuple, Dict[tuple, Dict[str, list]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for row in rows:
        if row.get("dtype") is None or (row.get("side") or "main") != "main":
            continue
        if did_no_device_work(row):
            continue
        key = (row["op"], short_dtype(row["dtype"]), row["shape"], row.get("node") or "")
        cell = acc[key][by_run[row["run_id"]]]
        if usable(row, "latency"):
            cell["latency"].append(float(row["latency"]))
        if usable(row, "speedup") and kernel_speedup(row):  # not where torch's side replayed nothing
            cell["speedup"].append(kernel_speedup(row))
        if row.get("status") != "ok":
            cell["status"].append(row["status"])
    return acc


def _table_entry(key: tuple, cells: Mapping, columns: List[tuple]) -> dict:
    entry = {"op": key[0], "dtype": key[1], "shape": key[2], "node": key[3] or None, "vendors": {}}
    for c in columns:
        cell = cells.get(c)
        if cell is None:
            continue
        entry["vendors"][_label(c)] = _vendor_cell(cell)
    return entry


def _vendor_cell(cell: Mapping) -> dict:
    return {
        "speedup": statistics.median(cell["speedup"]) if cell["speedup"] else None,
        "latency_ms": statistics.median(cell["latency"]) if cell["latency"] else None,
        "status": cell["status"][0] if cell["status"] and not cell["latency"] else "ok",
    }


def natural_key(key: tuple) -> tuple:
    """Sort shapes as numbers: [[64,64]] before [[256,256]]."""
    return tuple(tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(part))) for part in key)


def _label(c: tuple) -> str:
    return f"{c[0]} ({c[1]})"


def _cell(v: Mapping, field: str, fmt: str) -> str:
    if v is None:
        return "-"
    if v.get(field) is None:  # a failure says which; a speedup left out (a side did no work) is "-"
        return v.get("status") if v.get("status") not in (None, "ok") else "-"
    return format(v[field], fmt)


def flat_rows(result: Mapping) -> List[dict]:
    out = []
    for e in result["rows"]:
        row = {"op": op_with_test(e), "dtype": e["dtype"], "shape": e["shape"]}
        for label in result["summary"]["vendors"]:
            v = e["vendors"].get(label) or {}
            row[f"{label} speedup"] = v.get("speedup")
            row[f"{label} ms"] = v.get("latency_ms")
        out.append(row)
    return out


def render_markdown(result: Mapping) -> str:
    s = result["summary"]
    out = [f"# Vendors at corpus commit {s['corpus_commit'][:12]}", "",
           "Speedup = the vendor's torch latency / its FlagGems latency on its own device (higher is better); "
           "ms = the FlagGems latency. Runs: " + ", ".join(f"{k}: run {v}" for k, v in s["runs"].items()) + ".", ""]
    headers = ["Operator", "dtype", "shape"]
    for label in s["vendors"]:
        headers += [f"{label} speedup", f"{label} ms"]
    rows = []
    for e in result["rows"]:
        row = [op_with_test(e), e["dtype"], e["shape"]]
        for label in s["vendors"]:
            v = e["vendors"].get(label)
            row += [_cell(v, "speedup", ".3f"), _cell(v, "latency_ms", ".4g")]
        rows.append(row)
    out.append(tabulate(rows, headers=headers, tablefmt="github") if rows else "(no rows)")
    return "\n".join(out) + "\n"


def render_csv(result: Mapping) -> str:
    fields = ["op", "dtype", "shape"] + [f"{l} {x}" for l in result["summary"]["vendors"] for x in ("speedup", "ms")]
    return csv_text(flat_rows(result), fields)


def render_json(result: Mapping) -> str:
    return json_text(result)
