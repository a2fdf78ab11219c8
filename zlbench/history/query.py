"""Reading the store: runs with filters, one run by any handle, rows of runs, a row's values."""

from __future__ import annotations

import os
import shlex
import statistics
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from sqlalchemy import exists, func, or_, select

from zlbench.config.secrets import has_password
from zlbench.errors import UsageError
from zlbench.results.rundir import device_uuids
from zlbench.results.schema import NO_WORK_MS, did_no_device_work
from zlbench.store import schema as S
from zlbench.store.db import Store

RowKey = Tuple[str, str, str, str, str]  # (op, dtype, shape, node, side): tests of one op may time one shape
RUN_COLUMNS = [c for c in S.runs.c if c.name != "identity"]


def _run_dict(r) -> dict:
    return dict(r._mapping)


def list_runs(store: Store, backend: Optional[str] = None, device: Optional[str] = None,
              op: Optional[str] = None, since: Optional[datetime] = None, commit: Optional[str] = None,
              caliber: Optional[str] = None, kind: Optional[str] = None) -> List[dict]:
    """Runs oldest first. device: part of the device name (any case); commit: prefix of the corpus
    or zlbench commit; caliber: prefix of the caliber hash."""
    q = select(*RUN_COLUMNS)
    if backend:
        q = q.where(S.runs.c.backend == backend)
    if device:
        q = q.where(func.lower(S.runs.c.device_name).contains(device.lower()))
    if since:
        q = q.where(S.runs.c.created >= since)
    if commit:
        q = q.where(or_(S.runs.c.corpus_commit.startswith(commit), S.runs.c.zlbench_commit.startswith(commit)))
    if caliber:
        q = q.where(S.runs.c.caliber.startswith(caliber))
    if kind:
        q = q.where(S.runs.c.kind == kind)
    if op:
        q = q.where(exists().where(S.rows.c.run_id == S.runs.c.run_id, S.rows.c.op == op))
    with store.begin("listing runs") as conn:
        runs = [_run_dict(r) for r in conn.execute(q.order_by(S.runs.c.created, S.runs.c.run_id))]
        # Test nodes, each once: an A/B run holds a status per node and side (a FlagGems log names
        # no node: its op, one status each).
        nodes = func.count(func.distinct(func.coalesce(func.nullif(S.statuses.c.test_node, ""), S.statuses.c.op)))
        counts = dict(conn.execute(select(S.statuses.c.run_id, nodes).group_by(S.statuses.c.run_id)).all())
        bad = dict(conn.execute(select(S.statuses.c.run_id, nodes).where(S.statuses.c.status != "ok")
                                .group_by(S.statuses.c.run_id)).all())
    for r in runs:
        r["nodes"] = counts.get(r["run_id"], 0)
        r["not_ok"] = bad.get(r["run_id"], 0)
    return runs


def url_option(store: Store) -> str:
    """`--url URL ` naming this store in a Fix (import's own default is the store beside the run dir,
    maybe not this one); nothing where the URL holds a password, which only the environment can
    give (ZLBENCH_STORE_URL: the command reads it too)."""
    return "" if has_password(store.url) else f"--url {shlex.quote(store.shown)} "


def no_such_path(ref: str, url_opt: str = "") -> UsageError:
    """A run named by a path that is not there."""
    return UsageError(f"{ref}: no such run dir or file. Fix: pass an existing run dir (the folder a run names in its "
                      "`results in ...` line), a result log, a run id or a run key prefix (`python -m zlbench "
                      f"history {url_opt}list` shows them).")


def not_a_run_dir(ref: str, url_opt: str = "") -> UsageError:
    """A run named by a folder that holds no run_identity.json (/tmp, a folder of runs, a damaged one)."""
    return UsageError(f"{ref} is not a run dir: it holds no run_identity.json (a run writes it as it starts). Fix: "
                      "pass the folder a run names in its `results in ...` line, a result log, a run id or a run key "
                      f"prefix (`python -m zlbench history {url_opt}list` shows them).")


def resolve_run(store: Store, ref: str) -> dict:
    """A run by id (`12`), run dir path, or a prefix of its key (identity hash). A path names the run it
    holds now: the record of that path whose key is the run's (a dir cleared and used again keeps the
    earlier run's record under the same path), else the run's record from another path."""
    ref = str(ref)
    is_path = not ref.isdigit() and Path(ref).exists()
    if not is_path and ("/" in ref or os.sep in ref):  # a run key holds no '/': a path that is not there
        raise no_such_path(ref, url_option(store))
    if is_path and Path(ref).is_dir() and not (Path(ref) / "run_identity.json").is_file():
        # a folder (/tmp, a folder of runs) is no one run: importing it would scan all below it
        raise not_a_run_dir(ref, url_option(store))
    key = _key_of(Path(ref)) if is_path else None
    with store.begin("finding a run") as conn:
        if ref.isdigit():
            rows = conn.execute(select(*RUN_COLUMNS).where(S.runs.c.run_id == int(ref))).all()
        elif is_path:
            at_path = conn.execute(select(*RUN_COLUMNS).where(S.runs.c.path == str(Path(ref).resolve()))).all()
            rows = [r for r in at_path if r.run_key == key]
        else:
            rows = conn.execute(select(*RUN_COLUMNS).where(S.runs.c.run_key.startswith(ref))).all()
    if not rows and is_path:
        rows = _same_run(store, Path(ref), key)
    if not rows and is_path:
        earlier = (f" as it is now: the store's record of that path (run(s) {', '.join(str(r.run_id) for r in at_path[:10])})"
                   " is of another run it held before (the dir was cleared and used again, or the file rewritten)"
                   if at_path else "")
        raise UsageError(f"{ref} is not in the store {store.shown}{earlier}. Fix: add it with "
                         f"`python -m zlbench history {url_option(store)}import {shlex.quote(str(ref))}`.")
    if not rows:
        raise UsageError(f"no run {ref!r} in the store {store.shown}: no run id, run key prefix, nor run dir or file "
                         f"of that name. Fix: `python -m zlbench history {url_option(store)}list` shows run "
                         f"ids; a run dir not yet recorded can be added with `history {url_option(store)}import "
                         "RUN_DIR`.")
    if len(rows) > 1:
        ids = ", ".join(str(r.run_id) for r in rows[:10])
        raise UsageError(f"{ref!r} names {len(rows)} runs (ids {ids}). Fix: give a run id or a longer key prefix.")
    return _run_dict(rows[0])


def _key_of(path: Path) -> str:
    """The key the store records a run dir or a result log under, from what it holds now."""
    from zlbench.store.ingest import log_key, run_dir_key

    return run_dir_key(path) if path.is_dir() else log_key(path)


def _same_run(store: Store, path: Path, key: str) -> list:
    """The store's record of the run a run dir (or log) holds, recorded from another path (the store
    keeps one record per run: a copy of the dir, or the dir before it moved); said on the terminal."""
    import sys

    with store.begin("finding a run") as conn:
        rows = conn.execute(select(*RUN_COLUMNS).where(S.runs.c.run_key == key)).all()
    for r in rows:
        print(f"[zlbench] {path} is recorded from {r.path}, the same run (a copy, or the dir before it moved): "
              f"its record is read. Fix, where {path}'s own tables differ: `zlbench history import {path}`.",
              file=sys.stderr)
    return rows


LATEST_WINDOW = 50  # compare --latest looks this many runs back for one on B's device


def latest_pair(store: Store, **filters) -> Tuple[dict, dict, Optional[str]]:
    """The newest run (of those the filters keep), the run of the same caliber before it, and a note
    where that is not the one just before: the latest earlier run on a device the newest ran on is
    taken over newer runs on other devices (another GPU of a kind draws its own offset, which no
    row's interval holds)."""
    runs = list_runs(store, **filters)
    if not runs:
        raise UsageError(f"the store {store.shown} holds no run{' matching the filters' if any(filters.values()) else ''}. "
                         "Fix: record runs (`history import RUN_DIR...`) or relax the filters.")
    newest = runs[-1]
    earlier = [r for r in list_runs(store, caliber=newest["caliber"]) if
               (r["created"], r["run_id"]) < (newest["created"], newest["run_id"])]
    # A run that measured no row (every node timed out or failed: launcher.node_timeout_s is no part of
    # the caliber) pairs no row with B: it is no baseline.
    measured = measured_runs(store, newest["caliber"])
    empty = [r for r in earlier if r["run_id"] not in measured]
    earlier = [r for r in earlier if r["run_id"] in measured]
    if not earlier:
        raise UsageError(f"run {newest['run_id']} ({newest['created']}) is the only run of its caliber "
                         f"{newest['caliber'][:12]}" + (f" that measured a row ({len(empty)} earlier one(s) measured "
                                                        f"none: run(s) {_ids(empty)})" if empty else "")
                         + ": nothing earlier to compare with. Fix: compare two runs by id "
                         "(`history compare A B`), or record an earlier run of the same configuration.")
    recent = earlier[-LATEST_WINDOW:]  # identities are large (their test nodes): the recent ones only
    kept = identities(store, [newest["run_id"]] + [r["run_id"] for r in recent])
    mine = device_uuids(kept.get(newest["run_id"]))
    same = [r for r in recent if mine & device_uuids(kept.get(r["run_id"]))]
    a, note = earlier[-1], None
    if mine and same and same[-1] is not earlier[-1]:
        a, skipped = same[-1], earlier[earlier.index(same[-1]) + 1:]
        note = (f"A is run {a['run_id']}, the latest earlier run of B's caliber on B's device; {len(skipped)} later "
                f"one(s) ran on other devices or did not record theirs (run(s) {_ids(skipped)}; `compare A B` names "
                "any pair)")
    passed = [r for r in empty if (r["created"], r["run_id"]) > (a["created"], a["run_id"])]
    if passed:
        note = "; ".join(filter(None, [note, f"{len(passed)} later run(s) of B's caliber measured no row (every "
                                             f"node timed out or failed), passed over as A: run(s) {_ids(passed)}"]))
    return a, newest, note


def _ids(runs: Sequence[Mapping]) -> str:
    return ", ".join(str(r["run_id"]) for r in runs[:8]) + (" ..." if len(runs) > 8 else "")


def measured_runs(store: Store, caliber: str) -> set:
    """The ids of the caliber's runs with a row measured (status ok, a latency)."""
    q = select(S.runs.c.run_id).where(S.runs.c.caliber == caliber, exists().where(
        S.rows.c.run_id == S.runs.c.run_id, S.rows.c.status == "ok", S.rows.c.latency > 0))
    with store.begin("finding the runs that measured a row") as conn:
        return {run_id for (run_id,) in conn.execute(q)}


ROW_FIELDS = ("run_id", "op", "dtype", "shape", "node", "side", "round", "latency", "latency_base", "speedup",
              "status", "reason", "markers", "marker_reason", "timer_used", "processes", "latency_lo", "latency_hi")


def fetch_rows(store: Store, run_ids: Sequence[int], ops: Optional[Iterable[str]] = None,
               fields: Sequence[str] = ROW_FIELDS) -> List[dict]:
    if not run_ids:
        return []
    q = select(*[S.rows.c[f] for f in fields]).where(S.rows.c.run_id.in_(list(run_ids)))
    if ops:
        q = q.where(S.rows.c.op.in_(list(ops)))
    with store.begin("reading rows") as conn:
        return [dict(zip(fields, r)) for r in conn.execute(q)]  # zip: 3x faster than Row._mapping


def ops_of(store: Store, run_ids: Sequence[int]) -> List[str]:
    """The operators the runs' rows name, sorted."""
    q = select(S.rows.c.op).where(S.rows.c.run_id.in_(list(run_ids))).distinct()
    with store.begin("reading operators") as conn:
        return sorted(str(op) for (op,) in conn.execute(q) if op is not None)


def test_statuses(store: Store, run_id: int) -> Dict[str, Dict[str, Tuple[str, str]]]:
    """A run's tests as its ops_status ended them, whatever the status (what it selected): side ->
    test node -> (status, reason)."""
    q = select(S.statuses.c.side, S.statuses.c.test_node, S.statuses.c.status, S.statuses.c.reason).where(
        S.statuses.c.run_id == run_id)
    out: Dict[str, Dict[str, Tuple[str, str]]] = defaultdict(dict)
    with store.begin("reading statuses") as conn:
        for side, node, status, reason in conn.execute(q):
            if node:
                out[str(side or "main")][node.split("[")[0]] = (str(status), reason or "-")
    return out


def identities(store: Store, run_ids: Sequence[int]) -> Dict[int, Optional[dict]]:
    """The run identities the store keeps (what run_identity.json held when the run was recorded;
    a FlagGems log's holds only its source), by run id: readable where the run dir is gone."""
    q = select(S.runs.c.run_id, S.runs.c.identity).where(S.runs.c.run_id.in_(list(run_ids)))
    with store.begin("reading identities") as conn:
        return {run_id: identity if isinstance(identity, dict) else None for run_id, identity in conn.execute(q)}


def iter_rows(store: Store, run_ids: Sequence[int], ops: Optional[Iterable[str]] = None,
              fields: Sequence[str] = ROW_FIELDS) -> Iterator[dict]:
    """fetch_rows, one row at a time: a series of 100 runs of 10,000 rows never sits in memory as
    dicts (medians_by_run keeps one float per row)."""
    if not run_ids:
        return
    q = select(*[S.rows.c[f] for f in fields]).where(S.rows.c.run_id.in_(list(run_ids)))
    if ops:
        q = q.where(S.rows.c.op.in_(list(ops)))
    with store.begin("reading rows") as conn:
        for r in conn.execute(q):
            yield dict(zip(fields, r))


def row_key(r: Mapping) -> RowKey:
    return (str(r.get("op")), str(r.get("dtype")), str(r.get("shape")), str(r.get("node") or ""),
            str(r.get("side") or "main"))


def usable(r: Mapping, field: str = "latency") -> bool:
    v = r.get(field)
    return r.get("status") == "ok" and isinstance(v, (int, float)) and v > 0


def medians_by_run(rows: Iterable[Mapping], field: str = "latency") -> Dict[RowKey, Dict[int, float]]:
    """Per row key and run: the median over the run's rounds of the usable values. An empty replay
    (a view: no kernel) reads NO_WORK_MS, the most it can be: its nanoseconds of replay noise are no
    kernel's time, but a view that becomes a copy (or a copy a view) is a step in the series."""
    acc: Dict[RowKey, Dict[int, List[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:  # usable() and row_key() inlined: this loop sees every row of a series
        v = r.get(field)
        if r.get("status") != "ok" or not isinstance(v, (int, float)) or v <= 0:
            continue
        if r.get("dtype") is None and r.get("shape") is None:
            continue  # a node-level status row
        if did_no_device_work(r, field):
            v = NO_WORK_MS
        acc[(str(r["op"]), str(r["dtype"]), str(r["shape"]), str(r.get("node") or ""),
             str(r.get("side") or "main"))][r["run_id"]].append(float(v))
    return {k: {rid: (v[0] if len(v) == 1 else statistics.median(v)) for rid, v in per.items()}
            for k, per in acc.items()}


def interval_of(r: Mapping, lo: str = "latency_lo", hi: str = "latency_hi") -> Optional[Tuple[float, float]]:
    """A row's process-level interval (lo, hi) in ms, or None: measured in one process, an A/B round,
    a row of an older run, or not a usable interval (0 < lo <= hi)."""
    a, b = r.get(lo), r.get(hi)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and 0 < a <= b:
        return float(a), float(b)
    return None


def intervals_by_run(rows: Iterable[Mapping], lo: str = "latency_lo", hi: str = "latency_hi",
                     field: str = "latency") -> Dict[RowKey, Dict[int, Tuple[float, float]]]:
    """Per row key and run: the row's interval, where the run measured the row once (a plain run's
    row over its processes) with a usable value and interval."""
    seen: Dict[RowKey, Dict[int, Optional[Tuple[float, float]]]] = defaultdict(dict)
    for r in rows:
        if not usable(r, field) or (r.get("dtype") is None and r.get("shape") is None):
            continue
        per = seen[row_key(r)]
        # A second row of the key in one run (rounds): its value is a median over rounds, not the
        # value the interval was made for.
        per[r["run_id"]] = None if r["run_id"] in per else interval_of(r, lo, hi)
    return {k: {rid: ci for rid, ci in per.items() if ci is not None} for k, per in seen.items()}


VERSION_FIELDS = ("corpus_commit", "zlbench_commit", "triton_version", "torch_version", "flag_gems_version",
                  "python_version")


def changed_versions(a: Mapping, b: Mapping, ia: Optional[Mapping] = None,
                     ib: Optional[Mapping] = None) -> Dict[str, List[Optional[str]]]:
    """The versions two runs differ in, and (from their identities ia, ib) the corpus checkout: it is
    not in the caliber (a PR's checkout beside main's is one series), so a step where a series moved
    to another checkout says so, a checkout that is no git repo (no commit) included."""
    out = {f: [a.get(f), b.get(f)] for f in VERSION_FIELDS if a.get(f) != b.get(f)}
    ra, rb = (((i or {}).get("corpus") or {}).get("root") for i in (ia, ib))
    if ra and rb and ra != rb:
        out["corpus.root"] = [ra, rb]
    return out


def said_changes(changes: Mapping[str, Sequence[Optional[str]]]) -> str:
    """changed_versions' result on one line: versions shortened, a checkout's path whole."""
    return "; ".join(f"{f} {a} -> {b}" if f == "corpus.root" else f"{f} {short_version(a)} -> {short_version(b)}"
                     for f, (a, b) in changes.items())


def short_version(value: Optional[str], n: int = 12) -> str:
    """A version as a line shows it: a commit's first 12 characters, what follows a '+' kept (a
    checkout's +dirty, torch's +cu130) and a dotted version whole (two nightlies apart by a day), so
    two versions that differ read apart (n: a commit's characters)."""
    if not value:
        return "-"
    head, plus, tail = str(value).partition("+")
    return (head if "." in head else head[:n]) + plus + tail  # a dotted version is kept whole
