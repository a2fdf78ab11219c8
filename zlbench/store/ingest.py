"""From a finished run dir (or a FlagGems result log) to the store, idempotently.

A run's key is its identity hash, creation time, host and run id (a FlagGems log's: the hash of its bytes), so
the same run written twice finds itself; a write whose content did not change does nothing, one
whose content changed (a `collect` after more results, a resume) replaces the run in one
transaction. The run dir is only read, never written."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional

from sqlalchemy import and_, delete, or_, select
from sqlalchemy.exc import SQLAlchemyError

from zlbench.errors import UsageError
from zlbench.results import columns as C
from zlbench.results.identity_layout import NOT_HASHED, hashed_layout
from zlbench.results.rundir import IDENTITY_FILE
from zlbench.results.schema import interval
from zlbench.store import schema as S
from zlbench.store.db import Store, explain

AB_FILE = "ab.json"


# How long a test may run and how often a crash is retried decide whether a test is measured, not
# the number it gets (a run's identity keeps them: a resume under another limit would judge its
# tests by two), and whether a device is locked against other runs neither: a run that raises one
# for a slow op goes on its series (store revision 0007).
NOT_CALIBER_LAUNCHER = ("node_timeout_s", "crash_retries", "device_lock")


def caliber_fields(identity: Mapping[str, Any]) -> Dict[str, Any]:
    """What a caliber is a hash of: the identity without versions, commits and times. The resolved
    test nodes and the corpus' location are left out too: they follow from the selection (kept) and
    the corpus commit (left out), and a corpus that gains a file must not break the series. What the
    identity's hash leaves out (how the run was judged: fail_on; what it observed) is left out too."""
    caliber = {k: v for k, v in hashed_layout(identity).items() if k not in NOT_HASHED + ("versions", "test_nodes")}
    if isinstance(caliber.get("corpus"), dict):
        caliber["corpus"] = {k: v for k, v in caliber["corpus"].items() if k not in ("commit", "root")}
    config = caliber.get("config")
    if isinstance(config, dict) and isinstance(config.get("corpus"), dict):
        # corpus.root as configured: two checkouts of FlagGems side by side (main and a PR) are one
        # series (until store revision 0005 it was kept here, and each checkout began a series).
        caliber["config"] = config = {**config, "corpus": {k: v for k, v in config["corpus"].items() if k != "root"}}
    if isinstance(config, dict) and isinstance(config.get("launcher"), dict):
        caliber["config"] = {**config, "launcher": {k: v for k, v in config["launcher"].items()
                                                    if k not in NOT_CALIBER_LAUNCHER}}
    return caliber


def caliber_of(identity: Mapping[str, Any]) -> str:
    """Runs with equal calibers are comparable and form one series across commits (caliber_fields)."""
    text = json.dumps(caliber_fields(identity), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def recompute_calibers(conn) -> None:
    """A store revision's step where the caliber's fields change (0005 to 0007): each stored run's
    caliber computed again from its stored identity; a FlagGems log's holds no identity and stays."""
    import sqlalchemy as sa

    runs = sa.table("runs", sa.column("run_id", sa.Integer), sa.column("kind", sa.String),
                    sa.column("caliber", sa.String), sa.column("identity", sa.JSON))
    for run_id, caliber, identity in conn.execute(
            sa.select(runs.c.run_id, runs.c.caliber, runs.c.identity).where(runs.c.kind != "log")).all():
        identity = json.loads(identity) if isinstance(identity, str) else identity
        if isinstance(identity, dict) and "config" in identity:
            now = caliber_of(identity)
            if now != caliber:
                conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(caliber=now))


def parse_created(text: Optional[str], fallback: float) -> datetime:
    """UTC, naive (the same on SQLite and PostgreSQL)."""
    if text:
        for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S"):
            try:
                dt = datetime.strptime(text, fmt)
                break
            except ValueError:
                continue
        else:
            dt = None
        if dt is not None:
            return (dt.astimezone(timezone.utc) if dt.tzinfo else dt).replace(tzinfo=None)
    return datetime.fromtimestamp(fallback, timezone.utc).replace(tzinfo=None)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


def _float(v) -> Optional[float]:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(v) -> Optional[int]:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _str(v, limit: int = 0) -> Optional[str]:
    if v is None or v == "":
        return None
    s = str(v)
    return s[:limit] if limit else s


def json_safe(value: Any) -> Any:
    """NaN and infinities (Python's json writes them) as null: PostgreSQL's JSON refuses them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _stored(column: C.Column, value: Any) -> Dict[str, Any]:
    """A registry column's value as the store keeps it, by its type (results/columns.py): over-long
    text cut to the store column's length, non-finite floats as null, a missing value as the
    column's default where it has one."""
    if column.type == C.INTERVAL:
        return _interval(value, *column.store_names)
    if column.type in (C.STR, C.ANY):
        v = _str(value, column.length)
    elif column.type == C.FLOAT:
        v = _float(value)
    elif column.type == C.INT:
        v = _int(value)
    elif column.type == C.BOOL:
        v = bool(value)
    elif column.type == C.LIST:
        v = list(value or [])
    else:
        v = json_safe(value)
    return {column.name: column.default if v is None and column.default not in (None, "") else v}


def _record(columns, item: Mapping[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for c in columns:
        if C.STORE in c.outputs:
            out.update(_stored(c, item.get(c.name)))
    return out


def rows_said(record: Mapping[str, Any]) -> str:
    """"N rows", and how many of them were measured where not all were: a node that measured nothing
    (fatal, interrupted) is kept as a row without a latency, which "recorded (2 rows)" counted."""
    rows = record["rows"]
    measured = sum(1 for r in rows if r.get("latency") is not None)
    return f"{len(rows)} rows" + (f", {measured} measured" if measured < len(rows) else "")


def _row_record(r: Mapping[str, Any]) -> Dict[str, Any]:
    base = r.get("timing_base")
    # The baseline's interval lives inside timing_base (a mapping, not a store column of its own).
    return {**_record(C.ROW_COLUMNS, r),
            **_interval(base.get("latency_ci") if isinstance(base, Mapping) else None,
                        "latency_base_lo", "latency_base_hi")}


def _interval(ci, lo_name: str, hi_name: str) -> Dict[str, Optional[float]]:
    """A row's [lo, hi] as two columns; anything schema.interval does not read as one (a row of an
    older run, or one measured in a single process: null) is stored as no interval."""
    lo, hi = interval(ci) or (None, None)
    return {lo_name: lo, hi_name: hi}


def _status_record(s: Mapping[str, Any]) -> Dict[str, Any]:
    return {
        "op": _str(s.get("op"), 255), "test_node": _str(s.get("test_node")), "side": _str(s.get("side"), 64),
        "status": _str(s.get("status"), 16), "rows": _int(s.get("rows")), "backend": _str(s.get("backend"), 64),
        "device": _str(s.get("device"), 255), "timer": _str(s.get("timer"), 64),
        "wall_s": _float(s.get("wall_s")), "reason": _str(s.get("reason")), "host": _str(s.get("host"), 255),
        "job_id": _str(s.get("job_id"), 64),
    }


def _ab_row_record(t: Mapping[str, Any]) -> Dict[str, Any]:
    return _record(C.AB_COLUMNS, t)


def _device_name(identity: Mapping[str, Any], rows: List[dict]) -> Optional[str]:
    for p in identity.get("processes") or []:
        if p.get("device_name"):
            return p["device_name"]
    for r in rows:
        if r.get("device_name"):
            return r["device_name"]
    names = sorted({d.get("name") for d in identity.get("devices") or [] if d.get("name")})
    return ", ".join(names) or None


def run_dir_record(run_dir: Path) -> Dict[str, Any]:
    """Everything the store keeps of one run dir, read through the run-dir format's readers."""
    from zlbench.results.rundir import read_identity
    from zlbench.results.tables import load_rows, load_status

    run_dir = Path(run_dir).resolve()
    identity = read_identity(run_dir)
    # A run dir without its tables is not finished; the readers would collect them, i.e. write
    # into the run dir, which the store never does.
    missing = [n for n in ("rows.jsonl", "ops_status.csv") if not (run_dir / n).is_file()]
    if missing:
        raise UsageError(f"{run_dir} has no {' or '.join(missing)}: the run has not finished or was not "
                         f"collected. Fix: `zlbench collect {run_dir}`, then record it again.")
    rows, status = load_rows(run_dir), load_status(run_dir)
    ab_path = run_dir / AB_FILE
    ab = None
    if ab_path.is_file():
        try:
            ab = json.loads(ab_path.read_text(encoding="utf-8"))
        except ValueError as e:
            raise UsageError(f"{ab_path} is not valid JSON ({e}). Fix: rebuild it with "
                             f"`zlbench collect {run_dir}`.")
    digest = hashlib.sha256(str(run_dir).encode())
    for name in (IDENTITY_FILE, "rows.jsonl", "ops_status.csv", AB_FILE):
        p = run_dir / name
        digest.update(name.encode() + b"\0" + (p.read_bytes() if p.is_file() else b"") + b"\0")
    versions = identity.get("versions") or {}
    corpus = identity.get("corpus") or {}
    ab_cfg = ((identity.get("config") or {}).get("ab") or {})
    created = parse_created(identity.get("created"), (run_dir / IDENTITY_FILE).stat().st_mtime)
    run = {
        "run_key": _run_key(identity, created),
        "content_hash": digest.hexdigest(), "kind": "ab" if ab is not None else "run",
        "identity_hash": identity.get("identity_hash"), "caliber": caliber_of(identity),
        "created": created, "path": str(run_dir), "host": _str(identity.get("host"), 255),
        "backend": _str((identity.get("backend") or {}).get("name"), 64),
        "device_name": _str(_device_name(identity, rows), 255),
        "timer": _str((identity.get("timer") or {}).get("name"), 64),
        "corpus": _str(corpus.get("name"), 64), "corpus_commit": _str(corpus.get("commit"), 64),
        "zlbench_version": _str(versions.get("zlbench"), 64),
        "zlbench_commit": _str(versions.get("zlbench_commit"), 64),
        "triton_version": _str(versions.get("triton"), 64), "torch_version": _str(versions.get("torch"), 64),
        "flag_gems_version": _str(versions.get("flag_gems"), 64),
        "python_version": _str(versions.get("python"), 32),
        "ab_axis": _str(ab_cfg.get("name") if ab_cfg.get("name") not in (None, "none") else None, 128),
        "identity": json_safe(identity),
    }
    return {"run": run, "rows": [_row_record(r) for r in rows], "statuses": [_status_record(s) for s in status],
            "ab": ab}


def _run_key(identity: Mapping[str, Any], created: datetime) -> str:
    """One record per run: a copy of a run dir, or the dir moved, is the same run. The host too:
    identical machines running one nightly config from cron share hash and second; and the run's own
    id (provenance.run_uid, drawn as it starts), where it has one: two runs of one config started in
    the same second on one host share the rest (a run made before it had none keeps its key)."""
    key = f"{identity.get('identity_hash', 'nohash')}@{created.isoformat()}@{identity.get('host') or ''}"
    provenance = identity.get("provenance")
    uid = provenance.get("run_uid") if isinstance(provenance, Mapping) else None
    return f"{key}@{uid}" if uid else key


def run_dir_key(run_dir: Path) -> str:
    """The key the store records a run dir under (run_dir_record's), from its identity alone."""
    from zlbench.results.rundir import read_identity

    identity = read_identity(Path(run_dir))
    return _run_key(identity, parse_created(identity.get("created"), (Path(run_dir) / IDENTITY_FILE).stat().st_mtime))


def log_key(path: Path) -> str:
    """The key the store records a FlagGems log under: its bytes' (a copy is the same log)."""
    return "log:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def log_record(path: Path, backend: Optional[str] = None, device_name: Optional[str] = None,
               corpus_commit: Optional[str] = None, skipped: Optional[List[int]] = None) -> Dict[str, Any]:
    """A FlagGems `--record log` result file. It carries no identity: its series (caliber) is the
    log's file name (FlagGems names it after its argv) on the given backend and device. `skipped`:
    a list, to pass over malformed record lines (their numbers added to it); None refuses them."""
    from zlbench.results.flaggems_log import rows_from_log

    path = Path(path).resolve()
    if not path.is_file():
        raise UsageError(f"{path} does not exist. Fix: pass a run dir or a FlagGems result_*.log.")
    data = path.read_bytes()
    rows = rows_from_log(path, skipped)
    caliber = hashlib.sha256(json.dumps(["flaggems-log", backend, device_name, path.name]).encode()).hexdigest()
    status: Dict[str, dict] = {}
    for r in rows:
        s = status.setdefault(r["op"], {"op": r["op"], "side": "main", "status": "ok", "rows": 0,
                                        "backend": backend})
        s["rows"] += 1
        if r["status"] != "ok":
            s["status"], s["reason"] = r["status"], r.get("reason")
    mode = next((r.get("timer_used") for r in rows if r.get("timer_used")), None)
    run = {
        "run_key": "log:" + hashlib.sha256(data).hexdigest(),
        "content_hash": hashlib.sha256(str(path).encode() + b"\0" + data).hexdigest(), "kind": "log",
        "identity_hash": None, "caliber": caliber,
        "created": parse_created(None, path.stat().st_mtime), "path": str(path), "host": None,
        "backend": _str(backend, 64), "device_name": _str(device_name, 255), "timer": _str(mode, 64),
        "corpus": "flaggems", "corpus_commit": _str(corpus_commit, 64), "zlbench_version": None,
        "zlbench_commit": None, "triton_version": None, "torch_version": None, "flag_gems_version": None,
        "python_version": None, "ab_axis": None,
        "identity": {"source": "flaggems result log", "file": path.name},
    }
    return {"run": run, "rows": [_row_record(r) for r in rows], "statuses": [_status_record(s) for s in status.values()],
            "ab": None}


# What `history import LOG` is told of a log (--backend, --device, --corpus-commit): the log does not say.
SAID_OF_A_LOG = ("backend", "device_name", "corpus_commit")


def recorded_log_facts(store: Store, path: Path) -> Dict[str, Optional[str]]:
    """What an earlier import said of this log (the same bytes): its backend, device and corpus commit,
    so that importing it again without them keeps them, and with them corrects them."""
    key = log_key(path)
    with store.begin("reading the log's record") as conn:
        found = conn.execute(select(*(S.runs.c[k] for k in SAID_OF_A_LOG)).where(S.runs.c.run_key == key)).first()
    return dict(zip(SAID_OF_A_LOG, found)) if found else {}


def _still_holds(path: str, host: Optional[str], run: Mapping[str, Any]) -> bool:
    """Whether a recorded path, another than this record's, still holds the same run: a copy's
    record does not displace it (an edited or damaged copy would stand in for the run), a moved
    dir's does. A path on another host cannot be looked at: it holds the record."""
    if path == run["path"]:
        return False
    if host != run["host"]:
        return True
    try:
        if run["kind"] == "log":  # a log's key is its bytes': a copy beside it holds the same run
            return log_key(Path(path)) == run["run_key"]
        return run_dir_key(Path(path)) == run["run_key"]
    except (OSError, UsageError):
        return False


class Written(NamedTuple):
    """What writing a run did: 'unchanged', 'recorded' (new), 'replaced', or 'kept' (a copy of a run
    dir whose first recorded path still holds the run: that record stays); `elsewhere`: the other
    path the same run was recorded from, if any."""
    outcome: str
    elsewhere: Optional[str] = None

    @property
    def note(self) -> str:
        """What it did to the record of the same run from another path, for the terminal."""
        if not self.elsewhere:
            return ""
        if self.outcome == "kept":
            return (f"; the same run is recorded from {self.elsewhere}, which still holds it: that record stays "
                    "(one record per run; either path finds it)")
        return (f"; it was recorded from {self.elsewhere}, which no longer holds it (moved or changed): the store "
                "keeps one record per run")


def write_record(store: Store, record: Mapping[str, Any]) -> Written:
    """Write one run in one transaction (see Written). Two writers
    of the same run at once (a collect racing the run's own end): the loser's insert hits the
    unique key, and its retry finds the winner's write."""
    from sqlalchemy.exc import IntegrityError

    for attempt in (1, 2):
        try:
            with store.engine.begin() as conn:
                return _write(conn, record)
        except IntegrityError as e:
            if attempt == 2:
                raise explain(e, store.url, f"recording {record['run']['path']}") from None
        except SQLAlchemyError as e:
            raise explain(e, store.url, f"recording {record['run']['path']}") from None
    raise AssertionError("unreachable")


def _write(conn, record: Mapping[str, Any]) -> Written:
    run = dict(record["run"])
    # The same run (its key), or, for a resumed run, an earlier state of its run dir: same host, path
    # and identity hash (a zlbench before 2026-11-30 rewrote the creation time on a resume). A fresh
    # run into a dir that held another (`rm -rf runs/pr && zlbench ... hydra.run.dir=runs/pr`) is a
    # run of its own: it replaced the earlier run's record, and the history never grew.
    resumed = bool((run.get("identity") or {}).get("resumed"))
    earlier_state = and_(S.runs.c.path == run["path"], S.runs.c.host == run["host"],
                         S.runs.c.identity_hash == run["identity_hash"])
    same = conn.execute(select(S.runs.c.run_id, S.runs.c.run_key, S.runs.c.content_hash, S.runs.c.path,
                               S.runs.c.host, *(S.runs.c[k] for k in SAID_OF_A_LOG)).where(
        or_(S.runs.c.run_key == run["run_key"], earlier_state) if resumed and run["host"] and run["identity_hash"]
        else S.runs.c.run_key == run["run_key"])).all()
    # A log's facts come from its import's options: given again otherwise, they correct the record.
    if len(same) == 1 and same[0].run_key == run["run_key"] and same[0].content_hash == run["content_hash"] \
            and (run["kind"] != "log" or all(getattr(same[0], k) == run[k] for k in SAID_OF_A_LOG)):
        return Written("unchanged")
    elsewhere = next((r.path for r in same if r.run_key == run["run_key"] and r.path != run["path"]), None)
    if any(r.run_key == run["run_key"] and _still_holds(r.path, r.host, run) for r in same):
        return Written("kept", elsewhere)  # a copy of a run dir whose first path still holds it: that record stays
    old_ids = [r.run_id for r in same]
    if old_ids:
        for table in S.CHILD_TABLES:
            conn.execute(delete(table).where(table.c.run_id.in_(old_ids)))
        conn.execute(delete(S.runs).where(S.runs.c.run_id.in_(old_ids)))
    run["recorded"] = _utcnow()
    if old_ids:  # the run keeps its id (`history compare 4 10` copied from a list still works)
        run["run_id"] = min(old_ids)
    run_id = conn.execute(S.runs.insert().values(**run)).inserted_primary_key[0]
    for table, items in ((S.rows, record["rows"]), (S.statuses, record["statuses"])):
        if items:
            conn.execute(table.insert(), [{**item, "run_id": run_id} for item in items])
    ab = record.get("ab")
    if ab:
        summary = ab.get("summary") or {}
        conn.execute(S.ab_summaries.insert().values(
            run_id=run_id, label_a=_str(summary.get("label_a")), label_b=_str(summary.get("label_b")),
            liveness=_str(summary.get("liveness"), 16), summary=json_safe(summary)))
        ab_rows = [_ab_row_record(t) for t in ab.get("rows") or []]
        if ab_rows:
            conn.execute(S.ab_rows.insert(), [{**t, "run_id": run_id} for t in ab_rows])
    return Written("replaced" if old_ids else "recorded", elsewhere)
