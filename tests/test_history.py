"""The results store and `python -m zlbench.history`, with real parts: SQLite files, a real
PostgreSQL server (started by .ci/start-postgres; ZLBENCH_TEST_PG_URL), real run dirs made by
`python -m zlbench`, synthetic run dirs in the run-dir format for many-run cases, and the site
loaded in a real headless Chromium.

Without PostgreSQL or Chromium those tests skip with the reason; under CI=true they fail instead."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from zlbench.errors import UsageError
from zlbench.history.__main__ import main as history_main
from zlbench.store import Store, default_url, record_run
from zlbench.store import schema as S
from zlbench.store.db import normalize_url
from zlbench.store.schema import SCHEMA_HEAD

from . import history_runs as H
from .conftest import zlbench

CI = os.environ.get("CI", "").lower() == "true"
PG_DEFAULT = "postgresql://zlbench:zlbench@localhost:5432/zlbench_test"


def _pg_admin_url():
    """The test server's URL, or (None, why)."""
    url = os.environ.get("ZLBENCH_TEST_PG_URL") or PG_DEFAULT
    try:
        engine = create_engine(normalize_url(url), connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return url, None
    except Exception as e:  # noqa: BLE001 - any failure means: no server for these tests
        return None, f"no PostgreSQL at {url} ({type(e).__name__}); run .ci/start-postgres as root"


PG_URL, PG_WHY = _pg_admin_url()
if PG_WHY and CI:
    raise RuntimeError(f"CI=true but PostgreSQL is not available: {PG_WHY}")


def _fresh_pg_database():
    """A new, empty database on the test server (dropped after the test)."""
    admin = create_engine(normalize_url(PG_URL), isolation_level="AUTOCOMMIT")
    name = "zlt_" + uuid.uuid4().hex[:12]
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(normalize_url(PG_URL)).set(database=name).render_as_string(hide_password=False)

    def drop():
        # FORCE ends the database's other connections; one the server itself has there for a moment
        # (seen once in CI: InsufficientPrivilege on a process of another role) makes it fail, so
        # the drop is tried again for a few seconds before it counts as an error.
        for attempt in range(20):
            try:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                break
            except DBAPIError:
                if attempt == 19:
                    raise
                time.sleep(0.25)
        admin.dispose()

    return url, drop


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
        return
    if PG_WHY:
        pytest.skip(PG_WHY)
    url, drop = _fresh_pg_database()
    yield url
    drop()


@pytest.fixture(autouse=True)
def _store_dir(tmp_path):
    (tmp_path / "store").mkdir()


def count(url, table, **where):
    with Store(url) as store, store.begin("counting") as conn:
        q = select(func.count()).select_from(table)
        for k, v in where.items():
            q = q.where(table.c[k] == v)
        return conn.execute(q).scalar_one()


def history(*args, capsys=None):
    code = history_main([str(a) for a in args])
    out = capsys.readouterr() if capsys else None
    return code, out


# ---- real run dirs, made once for the module by `python -m zlbench` (the demo corpus on the CPU)

@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    runs = {}
    for name, args in (("a", ["ops=[exp]"]), ("b", ["ops=[exp]"]),
                       ("ab", ["ops=[softmax]", "ab=demo_fused_softmax", "ab.rounds=2"])):
        run_dir = root / "zl_runs" / "2026-11-30" / f"run-{name}"
        # store.url=none: these tests decide what goes into which store.
        res = zlbench(f"hydra.run.dir={run_dir}", "progress=none", "dtypes=[float32]", "store.url=none",
                      *args, cwd=root)
        assert res.returncode == 0, res.stderr[-3000:]
        runs[name] = run_dir
    return runs


def snapshot(run_dir: Path) -> dict:
    return {str(p.relative_to(run_dir)): (p.stat().st_mtime_ns, p.read_bytes()) for p in run_dir.rglob("*")
            if p.is_file()}


def test_record_run_writes_a_real_run_once(real_runs, store_url):
    run_dir = real_runs["a"]
    before = snapshot(run_dir)
    record_run(run_dir, store_url)
    rows = [json.loads(l) for l in (run_dir / "rows.jsonl").read_text().splitlines() if l.strip()]
    statuses = (run_dir / "ops_status.csv").read_text().strip().splitlines()[1:]
    identity = json.loads((run_dir / "run_identity.json").read_text())
    assert count(store_url, S.rows) == len(rows) == 3
    assert count(store_url, S.statuses) == len(statuses) == 1
    with Store(store_url) as store, store.begin("reading") as conn:
        run = conn.execute(select(S.runs)).one()
        stored_rows = conn.execute(select(S.rows.c.op, S.rows.c.shape, S.rows.c.latency)).all()
    assert run.identity_hash == identity["identity_hash"] and run.backend == "cpu" and run.kind == "run"
    assert run.corpus_commit == identity["corpus"]["commit"] and run.timer == "host"
    assert run.identity["created"] == identity["created"]
    assert sorted((r.shape, r.latency) for r in stored_rows) == sorted((r["shape"], r["latency"]) for r in rows)
    # Twice: nothing changes, not even the run's id or its recording time.
    record_run(run_dir, store_url)
    with Store(store_url) as store, store.begin("reading") as conn:
        again = conn.execute(select(S.runs)).one()
    assert (again.run_id, again.recorded) == (run.run_id, run.recorded)
    assert count(store_url, S.rows) == 3
    assert snapshot(run_dir) == before  # the run dir is only read


def test_ab_run_keeps_its_verdicts(real_runs, store_url):
    record_run(real_runs["ab"], store_url)
    ab = json.loads((real_runs["ab"] / "ab.json").read_text())
    assert count(store_url, S.ab_rows) == len(ab["rows"]) == 3
    with Store(store_url) as store, store.begin("reading") as conn:
        summary = conn.execute(select(S.ab_summaries)).one()
        verdicts = sorted(r.verdict for r in conn.execute(select(S.ab_rows.c.verdict)))
        run = conn.execute(select(S.runs.c.kind, S.runs.c.ab_axis)).one()
    assert summary.liveness == "unknown" and summary.summary["paired_rows"] == 3
    assert verdicts == sorted(r["verdict"] for r in ab["rows"])
    assert tuple(run) == ("ab", "demo_fused_softmax")
    assert count(store_url, S.rows) == 12  # 3 shapes x 2 sides x 2 rounds


def test_changed_run_dir_replaces_its_run(real_runs, tmp_path, store_url):
    """A collect or resume rewrites the tables (a resume by a zlbench before 2026-11-30 also the
    creation time): the store holds the run's newest state, once. A fresh run into the same dir (no
    resume listed) is another run."""
    run_dir = tmp_path / "zl_runs" / "d" / "t"
    shutil.copytree(real_runs["a"], run_dir)
    record_run(run_dir, store_url)
    lines = (run_dir / "rows.jsonl").read_text().splitlines()
    (run_dir / "rows.jsonl").write_text("\n".join(lines[:2]) + "\n")
    ident = json.loads((run_dir / "run_identity.json").read_text())
    ident["created"] = "2030-01-01T00:00:00+0000"
    ident["resumed"] = [{"at": ident["created"], "overrides": []}]
    (run_dir / "run_identity.json").write_text(json.dumps(ident))
    record_run(run_dir, store_url)
    assert count(store_url, S.runs) == 1 and count(store_url, S.rows) == 2
    del ident["resumed"]
    ident["created"] = "2030-01-02T00:00:00+0000"
    (run_dir / "run_identity.json").write_text(json.dumps(ident))
    record_run(run_dir, store_url)
    assert count(store_url, S.runs) == 2


def test_default_url_is_beside_the_run_dirs(tmp_path):
    assert default_url(tmp_path / "zl_runs" / "2026-11-30" / "05-00-00") == \
        f"sqlite:///{tmp_path / 'zl_runs' / 'zlbench.db'}"
    assert default_url(tmp_path / "mine" / "run1") == f"sqlite:///{tmp_path / 'mine' / 'zlbench.db'}"
    assert default_url(tmp_path / "zl_runs") == f"sqlite:///{tmp_path / 'zl_runs' / 'zlbench.db'}"


def test_store_off_writes_nothing(real_runs, tmp_path):
    for off in (None, "none", "None", "off"):
        record_run(real_runs["a"], off)
    assert not list(real_runs["a"].parent.parent.glob("*.db"))


def test_unreachable_server_is_one_clear_error(real_runs):
    before = snapshot(real_runs["a"])
    with pytest.raises(UsageError) as e:
        record_run(real_runs["a"], "postgresql://zlbench:zlbench@127.0.0.1:1/nothere")
    msg = str(e.value)
    assert "cannot reach the results store" in msg and "Fix:" in msg and "store.url=none" in msg
    assert "zlbench:zlbench@" not in msg  # the password is never printed
    assert snapshot(real_runs["a"]) == before


def test_locked_sqlite_store_is_one_clear_error(real_runs, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
    Store(url).close()
    monkeypatch.setenv("ZLBENCH_STORE_LOCK_TIMEOUT_S", "0.3")
    holder = sqlite3.connect(tmp_path / "store" / "zlbench.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(UsageError) as e:
            record_run(real_runs["a"], url)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "locked by another writer" in str(e.value) and "Fix:" in str(e.value)
    record_run(real_runs["a"], url)  # once the lock is gone, the same write goes through
    assert count(url, S.runs) == 1


INTERVAL_COLUMNS = ("processes", "latency_lo", "latency_hi", "latency_base_lo", "latency_base_hi")  # revision 0003


def test_old_store_opens_after_upgrade(real_runs, tmp_path, store_url):
    from zlbench.store.ingest import run_dir_record, write_record

    with Store(store_url, target="0001") as old:  # the first schema, as an older zlbench made it
        record = run_dir_record(real_runs["a"])
        record["rows"] = [{k: v for k, v in r.items() if k not in INTERVAL_COLUMNS} for r in record["rows"]]
        write_record(old, record)
        assert "ix_rows_run_id_op" not in {i["name"] for i in inspect(old.engine).get_indexes("rows")}
        assert "latency_lo" not in {c["name"] for c in inspect(old.engine).get_columns("rows")}
    # This zlbench: upgrades, then writes a run whose rows carry process-level intervals.
    ident = H.identity(processes=3)
    record_run(H.write_run(tmp_path / "new" / "run", ident, [
        H.row("exp", "[[64,64]]", 1.0, 0.5, ci=[0.97, 1.04], base_ci=[0.49, 0.52])]), store_url)
    with Store(store_url) as store:
        assert "ix_rows_run_id_op" in {i["name"] for i in inspect(store.engine).get_indexes("rows")}
        with store.begin("reading") as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == SCHEMA_HEAD
            got = conn.execute(select(S.rows.c.run_id, *[S.rows.c[c] for c in INTERVAL_COLUMNS])
                               .order_by(S.rows.c.run_id)).all()
    assert count(store_url, S.runs) == 2 and count(store_url, S.rows) == 4
    # The old run's rows keep no interval; the new one's are stored as its rows.jsonl says.
    assert [tuple(r)[1:] for r in got[:3]] == [(None,) * 5] * 3
    assert tuple(got[3])[1:] == (3, 0.97, 1.04, 0.49, 0.52)


def test_two_checkouts_of_the_corpus_are_one_caliber_and_an_old_store_is_recomputed(tmp_path, store_url):
    """corpus.root as configured was kept in the caliber: a PR's checkout beside main's began a series
    of its own, and `compare` called them 'Different calibers (config.corpus.root: ...)'. Revision
    0005 computes the stored runs' calibers again from their identities."""
    import copy

    from zlbench.store.ingest import caliber_of, run_dir_record, write_record

    main_ident = H.identity()
    pr_ident = copy.deepcopy(main_ident)
    pr_ident["config"]["corpus"]["root"] = pr_ident["corpus"]["root"] = "/ci/pr-123/FlagGems"
    assert caliber_of(pr_ident) == caliber_of(main_ident)
    other = copy.deepcopy(main_ident)
    other["config"]["corpus"]["name"] = "vendor_fork"
    assert caliber_of(other) != caliber_of(main_ident)  # what the corpus is still counts
    run = H.write_run(tmp_path / "old", main_ident, [H.row("exp", "[[64,64]]", 1.0, 0.5)])
    with Store(store_url, target="0004") as old:  # a store an older zlbench wrote, its caliber with the root
        record = run_dir_record(run)
        record["run"]["caliber"] = "caliber-with-root"
        write_record(old, record)
    with Store(store_url) as store, store.begin("reading") as conn:
        assert conn.execute(select(S.runs.c.caliber)).scalar_one() == caliber_of(main_ident)


def test_what_a_run_fails_on_is_no_part_of_its_caliber_and_an_old_store_is_recomputed(tmp_path, store_url):
    """fail_on=[] (a run that should not fail CI) began a series of its own: `compare --latest` found
    nothing earlier, and a resume with another fail_on recorded the run again under a new caliber.
    The identity's hash always left fail_on out; revision 0006 recomputes the stored calibers."""
    import copy

    from zlbench.store.ingest import caliber_of, run_dir_record, write_record

    gate = H.identity()
    gate["fail_on"] = ["failed", "crashed", "timeout", "poisoned", "fatal"]
    lenient = copy.deepcopy(gate)
    lenient["fail_on"] = []
    assert caliber_of(lenient) == caliber_of(gate)
    run = H.write_run(tmp_path / "old", lenient, [H.row("exp", "[[64,64]]", 1.0, 0.5)])
    with Store(store_url, target="0005") as old:  # a store an older zlbench wrote, its caliber with fail_on
        record = run_dir_record(run)
        record["run"]["caliber"] = "caliber-with-fail-on"
        write_record(old, record)
    with Store(store_url) as store, store.begin("reading") as conn:
        assert conn.execute(select(S.runs.c.caliber)).scalar_one() == caliber_of(gate)


def test_a_runs_test_time_limit_is_no_part_of_its_caliber_and_an_old_store_is_recomputed(tmp_path, store_url):
    """launcher.node_timeout_s raised for one slow op (or crash_retries, device_lock) began a series of
    its own: `compare --latest` found nothing earlier. Revision 0007 recomputes the stored calibers."""
    import copy

    from zlbench.store.ingest import caliber_of, run_dir_record, write_record

    usual = H.identity()
    usual["config"]["launcher"] = {"name": "local", "node_timeout_s": 900.0, "crash_retries": 1,
                                   "device_lock": True}
    longer = copy.deepcopy(usual)
    longer["config"]["launcher"].update(node_timeout_s=1800.0, crash_retries=0, device_lock=False)
    assert caliber_of(longer) == caliber_of(usual)
    other = copy.deepcopy(usual)
    other["config"]["launcher"]["name"] = "slurm"  # another launcher is still another caliber
    assert caliber_of(other) != caliber_of(usual)
    run = H.write_run(tmp_path / "old", longer, [H.row("exp", "[[64,64]]", 1.0, 0.5)])
    with Store(store_url, target="0006") as old:  # a store an older zlbench wrote, its caliber with the limit
        record = run_dir_record(run)
        record["run"]["caliber"] = "caliber-with-node-timeout"
        write_record(old, record)
    with Store(store_url) as store, store.begin("reading") as conn:
        assert conn.execute(select(S.runs.c.caliber)).scalar_one() == caliber_of(usual)


def test_newer_store_says_how_to_migrate(store_url):
    with Store(store_url) as store, store.begin("stamping") as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    with pytest.raises(UsageError) as e:
        Store(store_url)
    msg = str(e.value)
    assert "revision 0099, newer than this zlbench knows" in msg and "pip install -U zlbench" in msg
    assert "history import" in msg


def test_foreign_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (x INTEGER)")
    with pytest.raises(UsageError, match="not a zlbench store"):
        Store(f"sqlite:///{path}")


def test_a_store_file_that_is_no_database_names_a_fix_that_works(tmp_path):
    """Its Fix said to rebuild the store with `history import ... --url URL`: into the same file,
    which fails the same way."""
    path = tmp_path / "notes.db"
    path.write_text("my notes\n" * 200)
    with pytest.raises(UsageError) as e:
        Store(f"sqlite:///{path}")
    assert "is no SQLite database (file is not a database)" in str(e.value) and "--url NEW_URL" in str(e.value)
    assert "point store.url (or --url) at another file, or move that file away" in str(e.value), e.value
    assert path.read_text() == "my notes\n" * 200  # left as it was
    # A damaged store is told so (not "no SQLite database"); a PostgreSQL "malformed" value is neither.
    from sqlalchemy.exc import DatabaseError

    from zlbench.store.db import explain

    damaged = explain(DatabaseError("SELECT", {}, sqlite3.DatabaseError("database disk image is malformed")),
                      f"sqlite:///{path}", "reading")
    assert "is damaged (database disk image is malformed)" in str(damaged) and "no SQLite" not in str(damaged)
    pg = explain(DatabaseError("SELECT", {}, Exception("malformed array literal")), "postgresql://h/db", "reading")
    assert "damaged" not in str(pg) and "no SQLite" not in str(pg), pg


def test_reading_a_missing_store_creates_nothing(tmp_path, capsys):
    code, out = history("list", "--url", f"sqlite:///{tmp_path / 'typo.db'}", capsys=capsys)
    assert code == 2 and "no results store at" in out.err and "history import" in out.err
    assert not (tmp_path / "typo.db").exists()


# ---- history commands


def test_import_list_and_compare_latest_of_real_runs(real_runs, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
    code, out = history("import", real_runs["a"], real_runs["b"], real_runs["ab"], "--url", url, capsys=capsys)
    assert code == 0 and out.out.count("recorded:") == 3
    code, out = history("import", real_runs["a"].parent, "--url", url, capsys=capsys)  # a folder of runs
    assert code == 0 and out.out.count("unchanged:") == 3
    code, out = history("list", "--url", url, "--op", "exp", "--format", "json", capsys=capsys)
    listed = json.loads(out.out)
    assert [r["kind"] for r in listed] == ["run", "run"] and listed[0]["caliber"] == listed[1]["caliber"]
    # The newest run overall is the A/B, the only run of its caliber: --latest says there is nothing before it.
    code, out = history("compare", "--latest", "--url", url, capsys=capsys)
    assert code == 2 and "only run of its caliber" in out.err and "Fix:" in out.err
    code, out = history("compare", "--latest", "--caliber", listed[0]["caliber"][:12], "--url", url,
                        "--format", "json", "--out", tmp_path / "cmp", capsys=capsys)
    assert code == 2 and "the gate judged nothing" in out.err  # two one-process runs: nothing to judge on
    result = json.loads(out.out)
    s = result["summary"]
    assert s["same_caliber"] and len(result["rows"]) == 3
    assert [s["run_a"]["run_id"], s["run_b"]["run_id"]] == [listed[0]["run_id"], listed[1]["run_id"]]
    assert {r["noise"] for r in result["rows"]} == {"none"}  # two runs: no noise known ...
    assert {r["verdict"] for r in result["rows"]} == {"inconclusive"}  # ... so never a change
    assert (tmp_path / "cmp" / "compare.md").read_text().startswith("# History: run")
    assert (tmp_path / "cmp" / "compare.csv").read_text().splitlines()[0].startswith("op,dtype,shape,side,rounds")


def test_compare_uses_the_rows_history(tmp_path, store_url, capsys):
    """Six runs with 1% noise; the newest has exp 10% slower and add unchanged."""
    lat = [{"exp": 1.0, "add": 2.0}] * 5 + [{"exp": 1.1, "add": 2.0}]
    dirs = H.series(tmp_path, lat, noise=0.01, seed=3)
    assert history("import", *dirs, "--url", store_url, capsys=capsys)[0] == 0
    code, out = history("compare", "--latest", "--url", store_url, "--format", "json", capsys=capsys)
    result = json.loads(out.out)
    verdicts = {(r["op"], r["shape"]): r["verdict"] for r in result["rows"]}
    assert all(verdicts[("exp", s)] == "slower" for s in H.SHAPES), verdicts
    assert not any(verdicts[("add", s)] in ("slower", "faster") for s in H.SHAPES), verdicts
    assert {r["noise"] for r in result["rows"]} == {"history (5 runs)"}
    assert result["summary"]["changed_versions"]["corpus_commit"][1].startswith("corpus05")
    code, out = history("compare", "--latest", "--url", store_url, capsys=capsys)
    assert "| exp " in out.out and "slower" in out.out and "3 other row(s)" in out.out


def test_a_flaggems_log_compares_with_a_run_on_the_runs_history(tmp_path, store_url, capsys):
    """A FlagGems log names no test node: its rows pair with a run's, and the run's earlier runs
    still give each row its noise (keyed by node, they found none: every row 'inconclusive')."""
    from zlbench.results.tables import side_log

    lat = [{"exp": 1.0, "add": 2.0}] * 5 + [{"exp": 1.1, "add": 2.0}]
    dirs = H.series(tmp_path, lat, noise=0.01, seed=3)
    first = [json.loads(x) for x in (dirs[0] / "rows.jsonl").read_text().splitlines()]
    log = tmp_path / "result_flaggems.log"
    log.write_text(side_log([{k: v for k, v in r.items() if k != "node"} for r in first]))
    assert history("import", *dirs, "--url", store_url, capsys=capsys)[0] == 0
    assert history("import", str(log), "--url", store_url, "--backend", "cuda", "--device", "NVIDIA H200",
                   capsys=capsys)[0] == 0
    code, out = history("compare", "7", "6", "--url", store_url, "--format", "json", capsys=capsys)
    result = json.loads(out.out)
    assert not result["unpaired"] and len(result["rows"]) == 6
    assert {r["noise"] for r in result["rows"]} == {"history (5 runs)"}
    assert {r["verdict"] for r in result["rows"] if r["op"] == "exp"} == {"slower"}


def test_compare_uses_the_rows_rounds(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
    dirs = H.series(tmp_path, [{"exp": 1.0}, {"exp": 0.8}], noise=0.01, rounds=5)
    history("import", *dirs, "--url", url, capsys=capsys)
    code, out = history("compare", "1", "2", "--url", url, "--format", "csv", capsys=capsys)
    lines = out.out.strip().splitlines()
    assert len(lines) == 4 and all(l.endswith(",rounds,False,faster") for l in lines[1:]), lines


def test_a_run_recorded_again_keeps_its_id(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
    first, second = H.series(tmp_path, [{"exp": 1.0}, {"exp": 1.2}], noise=0.01)
    history("import", first, second, "--url", url, capsys=capsys)
    with open(first / "rows.jsonl", "a") as f:
        f.write("\n")  # collected again: its tables' bytes moved
    code, out = history("import", first, "--url", url, capsys=capsys)
    assert code == 0 and out.out.startswith("replaced:"), out
    code, out = history("list", "--url", url, "--format", "json", capsys=capsys)
    assert sorted((r["run_id"], r["path"]) for r in json.loads(out.out)) == [(1, str(first)), (2, str(second))]


def test_a_copy_of_a_run_dir_is_the_same_run_and_either_path_finds_it(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
    base, pr = H.series(tmp_path, [{"exp": 1.0}, {"exp": 1.2}], noise=0.01, interval=0.02)
    copy = shutil.copytree(pr, tmp_path / "pr_copy")
    history("import", base, pr, "--url", url, capsys=capsys)
    (copy / "rows.jsonl").write_text("")  # a damaged copy
    code, out = history("import", copy, "--url", url, capsys=capsys)
    assert code == 0 and out.out.startswith("kept:") and f"recorded from {pr}, which still holds it" in out.out, out
    code, out = history("list", "--url", url, "--format", "json", capsys=capsys)
    assert len(json.loads(out.out)) == 2  # one record per run, not two
    # The copy's path finds the run's record (the first path's, not the damaged copy's).
    code, out = history("compare", base, copy, "--url", url, "--format", "json", capsys=capsys)
    assert code == 1 and f"{copy} is recorded from {pr}, the same run" in out.err, out.err
    assert {r["verdict"] for r in json.loads(out.out)["rows"]} == {"slower"}
    # A dir moved: its record follows it, and the old path finds it too.
    moved = pr.rename(tmp_path / "pr_moved")
    code, out = history("import", moved, "--url", url, capsys=capsys)
    assert out.out.startswith("replaced:") and f"recorded from {pr}, which no longer holds it" in out.out, out
    code, out = history("compare", base, moved, "--url", url, "--format", "json", capsys=capsys)
    assert code == 1 and {r["verdict"] for r in json.loads(out.out)["rows"]} == {"slower"}


def test_regressions_name_the_first_commit_of_a_step(tmp_path, store_url, capsys):
    """8 commits: exp steps up 20% from commit 5 on; add has one 30% outlier at commit 2."""
    lat = [{"exp": 1.0, "add": 2.0}, {"exp": 1.0, "add": 2.0}, {"exp": 1.0, "add": 2.6}, {"exp": 1.0, "add": 2.0},
           {"exp": 1.0, "add": 2.0}, {"exp": 1.2, "add": 2.0}, {"exp": 1.2, "add": 2.0}, {"exp": 1.2, "add": 2.0}]
    dirs = H.series(tmp_path, lat, noise=0.01, seed=1)
    history("import", *dirs, "--url", store_url, capsys=capsys)
    code, out = history("regressions", "--url", store_url, "--format", "json", capsys=capsys)
    assert code == 1 and "3 step(s) of kind regression: exit 1" in out.err  # a CI gate
    result = json.loads(out.out)
    steps = result["steps"]
    assert {(s["op"], s["kind"]) for s in steps} == {("exp", "regression")}, steps
    assert len(steps) == 3  # each shape of exp
    for s in steps:
        assert s["first_run"] == 6 and s["corpus_commit"].startswith("corpus05")
        assert 17 < s["change_pct"] < 23 and abs(s["baseline_change_pct"]) < 3
        assert "corpus_commit corpus040000 -> corpus050000" in s["changed"]
    code, out = history("regressions", "--url", store_url, capsys=capsys)
    assert "| exp " in out.out and "regression" in out.out and "| add " not in out.out
    for fail_on in ("none", "improvement"):  # what fails is chosen
        assert history("regressions", "--url", store_url, "--fail-on", fail_on, capsys=capsys)[0] == 0
    assert history("regressions", "--url", store_url, "--fail-on", "any", capsys=capsys)[0] == 1


def test_a_step_where_the_series_moved_to_another_checkout_names_it(tmp_path, store_url, capsys):
    """corpus.root is not in the caliber (a PR's checkout beside main's is one series): a step that
    began where the runs moved to another checkout of no git repo said 'nothing recorded'."""
    dirs = H.series(tmp_path, [{"exp": 1.0}] * 4 + [{"exp": 1.3}] * 4, noise=0.01, seed=3)
    for i, d in enumerate(dirs):
        ident = json.loads((d / "run_identity.json").read_text())
        ident["corpus"]["commit"] = None  # a checkout that is no git repo
        ident["versions"]["zlbench_commit"] = "zl00"
        if i >= 4:
            ident["corpus"]["root"] = ident["config"]["corpus"]["root"] = "/ci/pr-7/FlagGems"
        (d / "run_identity.json").write_text(json.dumps(ident))
    history("import", *dirs, "--url", store_url, capsys=capsys)
    code, out = history("regressions", "--url", store_url, "--format", "json", capsys=capsys)
    steps = json.loads(out.out)["steps"]
    assert code == 1 and steps and {s["first_run"] for s in steps} == {5}, steps  # one series: one caliber
    assert {s["changed"] for s in steps} == {"corpus.root /src/FlagGems -> /ci/pr-7/FlagGems"}
    assert {s["prev_run"] for s in steps} == {4}
    code, out = history("compare", dirs[3], dirs[4], "--url", store_url, capsys=capsys)
    assert "- Changed between A and B: corpus.root /src/FlagGems -> /ci/pr-7/FlagGems." in out.out, out.out
    assert "Different calibers" not in out.out
    code, out = history("compare", dirs[0], dirs[3], "--url", store_url, capsys=capsys)
    assert "Changed between A and B" not in out.out  # one checkout, one commit: nothing to name


def test_regression_in_the_last_runs_is_not_yet_confirmed(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
    dirs = H.series(tmp_path, [{"exp": 1.0}] * 6 + [{"exp": 1.5}] * 2, noise=0.01)
    history("import", *dirs, "--url", url, capsys=capsys)
    code, out = history("regressions", "--url", url, "--format", "json", capsys=capsys)
    assert json.loads(out.out)["steps"] == []


def test_vendor_table(tmp_path, store_url, capsys):
    cuda = H.series(tmp_path / "cuda", [{"exp": 0.5}], backend="cuda")
    musa = H.series(tmp_path / "musa", [{"exp": 2.0}], backend="musa")
    history("import", *cuda, *musa, "--url", store_url, capsys=capsys)
    code, out = history("vendors", "--url", store_url, "--format", "json", capsys=capsys)
    result = json.loads(out.out)
    assert result["summary"]["vendors"] == ["cuda (NVIDIA H200)", "musa (MTT S4000)"]
    first = result["rows"][0]
    assert first["op"] == "exp" and first["dtype"] == "float16"
    assert first["vendors"]["cuda (NVIDIA H200)"]["speedup"] == pytest.approx(0.02, rel=0.05)
    assert first["vendors"]["musa (MTT S4000)"]["speedup"] == pytest.approx(0.005, rel=0.05)
    code, out = history("vendors", "--url", store_url, capsys=capsys)
    assert "cuda (NVIDIA H200) speedup" in out.out and "musa (MTT S4000) ms" in out.out
    # An op no vendor's run has: said, not an empty table.
    code, out = history("vendors", "--url", store_url, "--op", "nosuch", capsys=capsys)
    assert code == 2 and "--op nosuch: no row of the 2 run(s)" in out.err and "their ops: exp" in out.err


def test_vendor_table_keeps_tests_apart_and_leaves_empty_replays_out(tmp_path, store_url, capsys):
    """A run dir's two tests of einsum at one shape: an entry each; a FlagGems log's row (no test
    named) joins the one test that times its key, and keeps its own entry where two do; a view's
    empty replay (BENCHMARK_NO_DEVICE_WORK) is no latency."""
    commit = "corpus00" + "0" * 32
    rows = [H.row("exp", "[[64,64]]", 0.02, 0.01)] + [
        {**H.row("einsum", "[[64,64]]", lat, 0.01), "node": f"benchmark/test_einsum.py::{t}"}
        for t, lat in (("test_einsum_trace", 0.5), ("test_einsum_transpose", 2.0))] + [
        H.row("alias", "[[64,64]]", 1.5e-6, 1.4e-6, markers=["BENCHMARK_NO_DEVICE_WORK"]),
        # torch's side a view, gems' a kernel: its latency is gems', its speedup (6.7e-5) compares nothing
        H.row("unfold", "[[64,64]]", 0.02, 1.4e-6, markers=["BENCHMARK_NO_DEVICE_WORK"])]
    run = H.write_run(tmp_path / "cuda", H.identity(corpus_commit=commit, ops=["exp", "einsum", "alias", "unfold"]), rows)
    log = tmp_path / "result_musa.log"
    log.write_text("".join("[INFO] " + json.dumps({"op_name": op, "dtype": "torch.float16", "result": [
        {"shape_detail": [[64, 64]], "latency_base": 0.01, "latency": lat, "speedup": 0.01 / lat}]}) + "\n"
        for op, lat in (("exp", 0.04), ("einsum", 1.0))) + "[INFO] " + json.dumps({
            "op_name": "unfold", "dtype": "torch.float16", "result": [  # FlagGems marks no empty replay
                {"shape_detail": [[64, 64]], "latency_base": 5e-5, "latency": 0.03, "speedup": 5e-5 / 0.03}]}) + "\n")
    history("import", run, "--url", store_url, capsys=capsys)
    history("import", log, "--url", store_url, "--backend", "musa", "--device", "MTT S4000", "--corpus-commit", commit,
            capsys=capsys)
    code, out = history("vendors", "--url", store_url, "--format", "json", capsys=capsys)
    got = {(r["op"], r.get("test")): {v: c["latency_ms"] for v, c in r["vendors"].items()}
           for r in json.loads(out.out)["rows"]}
    assert got == {("einsum", "test_einsum_trace"): {"cuda (NVIDIA H200)": 0.5},
                   ("einsum", "test_einsum_transpose"): {"cuda (NVIDIA H200)": 2.0},
                   ("einsum", ""): {"musa (MTT S4000)": 1.0},
                   ("exp", None): {"cuda (NVIDIA H200)": 0.02, "musa (MTT S4000)": 0.04},
                   ("unfold", None): {"cuda (NVIDIA H200)": 0.02, "musa (MTT S4000)": 0.03}}, got
    unfold = next(r for r in json.loads(out.out)["rows"] if r["op"] == "unfold")
    assert {c["speedup"] for c in unfold["vendors"].values()} == {None}, unfold
    code, out = history("vendors", "--url", store_url, capsys=capsys)
    line = next(x for x in out.out.splitlines() if x.startswith("| unfold"))
    assert "ok" not in line and "| -" in line, line  # a speedup left out reads "-", not "ok"



def test_vendors_keeps_a_log_of_two_tests_apart_from_the_one_test_the_runs_time(tmp_path, store_url, capsys):
    """Two backends' runs time einsum's trace alone; a third backend's FlagGems log holds trace's and
    transpose's records of the key. Pooled over both runs, trace had 2 rows, as many as the log's
    records, so the log's two records were taken for trace's: one cell, their median (2.25 ms)."""
    commit = "corpus00" + "0" * 32
    for backend in ("cuda", "rocm"):
        rows = [{**H.row("einsum", "[[64,64]]", 0.5, 0.01), "node": "benchmark/test_einsum.py::test_einsum_trace"}]
        run = H.write_run(tmp_path / backend, H.identity(backend=backend, corpus_commit=commit, ops=["einsum"]), rows)
        history("import", run, "--url", store_url, capsys=capsys)
    log = tmp_path / "result_musa.log"
    log.write_text("".join("[INFO] " + json.dumps({"op_name": "einsum", "dtype": "torch.float16", "result": [
        {"shape_detail": [[64, 64]], "latency_base": 0.01, "latency": lat, "speedup": 0.01 / lat}]}) + "\n"
        for lat in (0.5, 4.0)))
    history("import", log, "--url", store_url, "--backend", "musa", "--device", "MTT S4000", "--corpus-commit", commit,
            capsys=capsys)
    code, out = history("vendors", "--url", store_url, "--format", "json", capsys=capsys)
    got = {(r["op"], r.get("test")): sorted(r["vendors"]) for r in json.loads(out.out)["rows"]}
    assert all("musa (MTT S4000)" not in v for (op, test), v in got.items() if test == "test_einsum_trace"), got
    assert any(v == ["musa (MTT S4000)"] for v in got.values()), got  # an entry of its own

FLAGGEMS_LOG = """[INFO] Benchmark record logger enabled
[INFO] {"op_name": "exp", "dtype": "torch.float16", "mode": "kernel", "level": "core", "result": [{"legacy_shape": [64, 64], "shape_detail": [[64, 64]], "latency_base": 0.01, "latency": 0.02, "gbps_base": 1.0, "gbps": 0.5, "speedup": 0.5, "accuracy": null, "tflops": null, "utilization": null, "compared_speedup": null, "error_msg": null}, {"legacy_shape": [256, 256], "shape_detail": [[256, 256]], "latency_base": 0.04, "latency": 0.02, "gbps_base": 1.0, "gbps": 2.0, "speedup": 2.0, "accuracy": null, "tflops": null, "utilization": null, "compared_speedup": null, "error_msg": null}]}
"""


def test_import_flaggems_log(tmp_path, store_url, capsys):
    log = tmp_path / "result_test_exp--level_core--record_log.log"
    log.write_text(FLAGGEMS_LOG)
    args = ("import", log, "--url", store_url, "--backend", "musa", "--device", "MTT S4000", "--corpus-commit", "abc123")
    code, out = history(*args, capsys=capsys)
    assert code == 0 and "recorded:" in out.out
    code, out = history(*args, capsys=capsys)
    assert "unchanged:" in out.out
    assert count(store_url, S.rows) == 2
    # Imported again without its facts (a folder's import): the record keeps them.
    code, out = history("import", log, "--url", store_url, capsys=capsys)
    assert code == 0 and "unchanged:" in out.out, out.out
    # A copy of the log beside it is the same run, recorded once; it said the first path "no longer
    # holds it (the dir moved)" and put its record in place of the first's.
    copy = tmp_path / "copy.log"
    copy.write_text(FLAGGEMS_LOG)
    code, out = history("import", copy, "--url", store_url, capsys=capsys)
    assert code == 0 and f"kept: {copy}" in out.out and f"recorded from {log}, which still holds it" in out.out, out.out
    # A forgotten or wrong --device is corrected by importing again with it ("unchanged" kept the old).
    code, out = history("import", log, "--url", store_url, "--device", "MTT S5000", capsys=capsys)
    assert code == 0 and "replaced:" in out.out, out.out
    code, out = history("list", "--url", store_url, "--format", "json", capsys=capsys)
    (run,) = json.loads(out.out)
    assert (run["backend"], run["device_name"], run["path"]) == ("musa", "MTT S5000", str(log)), run
    history("import", log, "--url", store_url, "--device", "MTT S4000", capsys=capsys)
    # Every log is read before the store is opened: a malformed one records nothing of the others,
    # and a missing one leaves no empty store behind.
    bad = tmp_path / "bad.log"
    bad.write_text('[INFO] {"op_name": "exp", "result": [{"latency": "n/a"}]}\n')
    fresh = f"sqlite:///{tmp_path / 'fresh' / 'zlbench.db'}"
    code, out = history("import", copy, bad, "--url", fresh, capsys=capsys)
    assert code == 2 and "malformed result record" in out.err and not (tmp_path / "fresh" / "zlbench.db").exists()
    code, out = history("import", tmp_path / "typo.log", "--url", fresh, capsys=capsys)
    assert code == 2 and "does not exist" in out.err and not (tmp_path / "fresh" / "zlbench.db").exists(), out.err
    code, out = history("vendors", "--url", store_url, "--format", "json", capsys=capsys)
    rows = json.loads(out.out)["rows"]
    assert [r["vendors"]["musa (MTT S4000)"]["speedup"] for r in rows] == [0.5, 2.0]


# ---- the site, in a real browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and CI:
    raise RuntimeError("CI=true but chromium is not installed (apt-get install chromium)")


def chromium(*args, profile: Path, timeout=90):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_site_renders_in_chromium(real_runs, tmp_path):
    url = f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
    lat = [{"exp": 1.0, "add": 2.0}] * 4 + [{"exp": 1.3, "add": 2.0}] * 4
    history("import", *H.series(tmp_path / "series", lat), *H.series(tmp_path / "musa", [{"exp": 2.0}], backend="musa", first=7),
            real_runs["ab"], "--url", url)
    site = tmp_path / "site"
    assert history("html", "--out", site, "--url", url)[0] == 0
    index = site / "index.html"
    dom = chromium("--dump-dom", index.as_uri() + "#sort=runs:0:asc", profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    from html.parser import HTMLParser

    class Page(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.current, self.svgs, self.polylines, self.sorted_th = {}, None, 0, 0, []
            self.in_td, self.cell = False, ""

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "table":
                self.current = a.get("id")
                self.tables[self.current] = []
            elif tag == "tr" and self.current:
                self.tables[self.current].append([])
            elif tag == "td":
                self.in_td, self.cell = True, ""
            elif tag == "svg" and "trend" in (a.get("class") or ""):
                self.svgs += 1
            elif tag == "polyline":
                self.polylines += 1
            elif tag == "th" and a.get("data-dir"):
                self.sorted_th.append(a["data-dir"])

        def handle_endtag(self, tag):
            if tag == "td" and self.current:
                self.tables[self.current][-1].append(self.cell.strip())
                self.in_td = False
            elif tag == "table":
                self.current = None

        def handle_data(self, data):
            if self.in_td:
                self.cell += data

    p = Page()
    p.feed(page)
    runs = [r for r in p.tables["runs"] if r]
    assert len(runs) == 10
    assert [int(r[0]) for r in runs] == list(range(1, 11))  # the script ran: the link's sort applied
    assert p.sorted_th == ["asc"]
    assert p.svgs == 2 and p.polylines == 2  # exp and add of the 8-run caliber, one dtype each
    regs = [r for r in p.tables["regressions"] if r]
    assert {(r[1], r[5]) for r in regs} == {("exp", "regression")} and len(regs) == 3
    vendors = [r for r in p.tables["vendors"] if r]
    assert vendors and len(vendors[0]) == 3 + 2 * 2  # op dtype shape + (speedup, ms) for cuda and musa
    assert "ab-10" in p.tables and len([r for r in p.tables["ab-10"] if r]) == 3
    shot = tmp_path / "site.png"
    res = chromium(f"--screenshot={shot}", "--window-size=1400,2000", index.as_uri(), profile=tmp_path / "profile2")
    assert res.returncode == 0 and shot.stat().st_size > 10_000, res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- packaging: the migrations travel with `pip install .`

@pytest.mark.slow
def test_wheel_carries_the_migrations(tmp_path):
    from .conftest import REPO

    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path / "dist"), str(REPO)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    target = tmp_path / "site"
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target),
                           str(next((tmp_path / "dist").glob("zlbench-*.whl")))], capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr[-2000:]
    assert (target / "zlbench" / "store" / "migrations" / "versions" / "0001_initial.py").is_file()
    code = ("import zlbench.store as s, sys; from zlbench.store import Store; "
            "assert s.__file__.startswith(sys.argv[1]), s.__file__; "
            "st = Store('sqlite:///' + sys.argv[2]); "
            "print(st.engine.connect().exec_driver_sql('select version_num from alembic_version').scalar())")
    res = subprocess.run([sys.executable, "-c", code, str(target), str(tmp_path / "w.db")], cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(target)}, capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == SCHEMA_HEAD, res.stderr[-2000:]


def test_runs_finishing_at_once_share_a_new_store(tmp_path, store_url):
    """Four processes record four runs into a store that does not exist yet, all at once (a sweep
    whose jobs finish together): each run lands once, none fails."""
    dirs = [H.series(tmp_path / f"m{i}", [{"exp": 1.0 + i}], seed=i, first=i)[0] for i in range(4)]
    code = ("import sys, time; from pathlib import Path; from zlbench.store import record_run; "
            "import zlbench.store.db, alembic.command, zlbench.store.ingest; "
            "time.sleep(max(0.0, float(sys.argv[3]) - time.time())); record_run(Path(sys.argv[1]), sys.argv[2])")
    start = time.time() + 4  # after the imports, all at one instant
    procs = [subprocess.Popen([sys.executable, "-c", code, str(d), store_url, str(start)], stderr=subprocess.PIPE,
                              text=True) for d in dirs]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    assert count(store_url, S.runs) == 4 and count(store_url, S.rows) == 12
    if store_url.startswith("sqlite"):  # an earlier lock on the database file itself corrupted it
        with sqlite3.connect(make_url(store_url).database) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_identical_machines_at_the_same_second_are_two_runs(tmp_path):
    """A nightly cron on two identical machines: same identity hash, same creation second."""
    url = f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
    for host in ("node1", "node2"):
        ident = H.identity()
        ident["host"] = host  # not part of the hash: the caliber is the same
        record_run(H.write_run(tmp_path / host / "run", ident, [H.row("exp", "[[64,64]]", 1.0, 0.5)]), url)
    assert count(url, S.runs) == 2


def test_list_filters(tmp_path, store_url, capsys):
    cuda = H.series(tmp_path / "cuda", [{"exp": 1.0}] * 3)
    musa = H.series(tmp_path / "musa", [{"exp": 1.0, "add": 1.0}], backend="musa", first=2)
    history("import", *cuda, *musa, "--url", store_url, capsys=capsys)

    def ids(*args):
        code, out = history("list", "--url", store_url, "--format", "json", *args, capsys=capsys)
        assert code == 0, out.err
        return [r["run_id"] for r in json.loads(out.out)]

    assert ids() == [1, 2, 3, 4]
    assert ids("--backend", "musa") == [4] and ids("--device", "h200") == [1, 2, 3]
    assert ids("--since", "2026-11-02") == [2, 3, 4] and ids("--op", "add") == [4]
    assert ids("--commit", "corpus01") == [2]
    cal = json.loads(history("list", "--url", store_url, "--format", "json", capsys=capsys)[1].out)[0]["caliber"]
    assert ids("--caliber", cal[:8]) == [1, 2, 3]
    code, out = history("regressions", "--url", store_url, capsys=capsys)
    assert "1 other(s)" in out.out and "(1 run)" in out.out  # the musa caliber, named, not mixed in


def test_unfinished_run_dir_is_refused_and_left_alone(real_runs, tmp_path):
    run_dir = tmp_path / "zl_runs" / "d" / "t"
    shutil.copytree(real_runs["a"], run_dir)
    (run_dir / "rows.jsonl").unlink()
    before = snapshot(run_dir)
    with pytest.raises(UsageError, match=r"has no rows.jsonl.*zlbench collect"):
        record_run(run_dir, f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}")
    assert snapshot(run_dir) == before



@pytest.mark.parametrize("url", ["post gres://u:secret@h/db", "postgresql://u:secret@h:notaport/db",
                                 "mysql://u:secret@localhost/db"])
def test_bad_store_url_is_one_clear_error_without_the_password(url):
    with pytest.raises(UsageError) as e:
        Store(url)
    assert "Fix:" in str(e.value) and "secret" not in str(e.value)


def test_an_old_step_is_not_taken_for_noise(tmp_path, capsys):
    """exp stepped up 30% at the 4th of 9 runs and stayed there: its noise is its spread since the
    step (1%), not the step itself, so an unchanged newest run is a tight 'no difference'."""
    url = f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
    dirs = H.series(tmp_path, [{"exp": 1.0}] * 3 + [{"exp": 1.3}] * 6, noise=0.005, seed=2)
    history("import", *dirs, "--url", url, capsys=capsys)
    code, out = history("compare", "--latest", "--url", url, "--format", "json", "--threshold", "0.05",
                        capsys=capsys)
    rows = json.loads(out.out)["rows"]
    assert {r["noise"] for r in rows} == {"history (5 runs)"}  # runs 4..8, since the step
    assert all(r["ci_hi_pct"] - r["ci_lo_pct"] < 10 for r in rows), rows  # with the step inside: about +-40%
    assert all(r["verdict"] == "no difference beyond threshold" for r in rows), rows


def test_non_finite_numbers_are_stored_as_null(tmp_path, store_url):
    """Python's json writes NaN; PostgreSQL's JSON refuses it: an A/B summary with a NaN still lands."""
    ident = H.identity(ab="X")
    ab = {"summary": {"label_a": "X=0", "label_b": "X=1", "liveness": "unknown", "overall": {"geomean": float("nan")}},
          "rows": [{"op": "exp", "dtype": "float16", "shape": "[[64,64]]", "rounds": 2, "a_ms": 1.0, "b_ms": 1.0,
                    "change_pct": 0.0, "p": float("nan"), "verdict": "inconclusive"}]}
    run = H.write_run(tmp_path / "run", ident, [H.row("exp", "[[64,64]]", float("nan"), 1.0, side="off"),
                                                H.row("exp", "[[64,64]]", 1.0, 1.0, side="on")], ab=ab)
    record_run(run, store_url)
    with Store(store_url) as store, store.begin("reading") as conn:
        summary = conn.execute(select(S.ab_summaries.c.summary)).scalar_one()
        p = conn.execute(select(S.ab_rows.c.p)).scalar_one()
        latencies = sorted(conn.execute(select(S.rows.c.latency)).scalars(), key=lambda v: v is None)
    assert summary["overall"]["geomean"] is None and p is None and latencies == [1.0, None]


def test_the_site_names_the_tests_of_ab_rows_that_share_a_key(tmp_path, store_url, capsys):
    """Two tests of one op timing one shape (FlagGems' einsum trace and transpose): the store keeps
    each A/B row's node (revision 0004) and the site's A/B table names them."""
    ident = H.identity(ab="X")
    ab = {"summary": {"label_a": "X=0", "label_b": "X=1", "liveness": "unknown", "overall": {"geomean": 1.0}},
          "rows": [{"op": "einsum", "dtype": "float16", "shape": "[[64,64]]", "rounds": 2, "a_ms": lat, "b_ms": lat,
                    "change_pct": 0.0, "verdict": "no difference beyond threshold",
                    "node": f"benchmark/test_einsum.py::{test}"}
                   for test, lat in (("test_einsum_trace", 1.0), ("test_einsum_transpose", 2.0))]}
    run = H.write_run(tmp_path / "run", ident, [H.row("exp", "[[64,64]]", 1.0, 1.0, side=s) for s in ("off", "on")],
                      ab=ab)
    record_run(run, store_url)
    with Store(store_url) as store, store.begin("reading") as conn:
        assert sorted(conn.execute(select(S.ab_rows.c.node)).scalars()) == [r["node"] for r in ab["rows"]]
    assert history("html", "--out", str(tmp_path / "site"), "--url", store_url, capsys=capsys)[0] == 0
    page = (tmp_path / "site" / "index.html").read_text()
    assert "einsum (test_einsum_trace)" in page and "einsum (test_einsum_transpose)" in page


def test_one_run_written_by_four_processes_at_once_lands_once(tmp_path, store_url):
    """A collect racing the run's own end (or four collects): one run, its rows once, no error.
    The processes read the run dir first, then all write at the same instant."""
    run = H.series(tmp_path, [{f"op{i}": 1.0 for i in range(100)}])[0]  # 300 rows: writes overlap
    Store(store_url).close()  # the store exists: the race is on the run, not on creating the schema
    code = ("import sys, time; from pathlib import Path; from zlbench.store import Store; "
            "from zlbench.store.ingest import run_dir_record, write_record; "
            "rec = run_dir_record(Path(sys.argv[1])); st = Store(sys.argv[2]); "
            "time.sleep(max(0.0, float(sys.argv[3]) - time.time())); print(write_record(st, rec).outcome)")
    start = time.time() + 4
    procs = [subprocess.Popen([sys.executable, "-c", code, str(run), store_url, str(start)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [o[1][-2000:] for o in outs]
    assert sorted(o[0].strip() for o in outs) == ["recorded", "unchanged", "unchanged", "unchanged"], outs
    assert count(store_url, S.runs) == 1 and count(store_url, S.rows) == 300


def test_two_versions_that_differ_never_read_the_same():
    """compare and regressions printed `zlbench_commit df73e359b900 -> df73e359b900` for a clean and a
    dirty checkout of one commit (the 12 characters cut the +dirty off); history list the same."""
    from zlbench.history.query import short_version

    clean, dirty = "df73e359b900aaaabbbbccccddddeeeeffff0000", "df73e359b900aaaabbbbccccddddeeeeffff0000+dirty"
    assert short_version(clean) == "df73e359b900" and short_version(dirty) == "df73e359b900+dirty"
    assert short_version(dirty, 10) == "df73e359b9+dirty" and short_version("2.11.0+cu130") == "2.11.0+cu130"
    assert short_version(None) == "-"
    # A version that is no commit is kept whole: two nightlies read apart.
    assert short_version("2.6.0.dev20241112+cu124") != short_version("2.6.0.dev20241113+cu124")


def test_history_list_counts_an_ab_runs_test_nodes_once(tmp_path, capsys):
    """An A/B run holds a status per node and side: `history list` said nodes=2 for a run of one node
    (and not ok 2 for one failed node)."""
    rows = [H.row("exp", "[[64]]", 0.01, 0.01, side=side) for side in ("off", "on")]
    rows += [H.row("add", "[[64]]", 0.01, 0.01, side=side, status="failed") for side in ("off", "on")]
    run = H.write_run(tmp_path / "ab", H.identity(ops=["exp", "add"]), rows)
    url = f"sqlite:///{tmp_path / 'z.db'}"
    assert history("import", run, "--url", url, capsys=capsys)[0] == 0
    code, out = history("list", "--url", url, "--format", "json", capsys=capsys)
    (listed,) = json.loads(out.out)
    assert code == 0 and (listed["nodes"], listed["not_ok"]) == (2, 1), listed
    code, out = history("list", "--url", url, capsys=capsys)  # Markdown names each run's dir beside its id
    assert str(run) in out.out.splitlines()[2], out.out
    # A FlagGems log names no test node: each op is one (it read 0 nodes).
    log = tmp_path / "result_flaggems.log"
    log.write_text("".join("[INFO] " + json.dumps({"op_name": op, "dtype": "torch.float16", "result": [
        {"shape_detail": [[64]], "latency_base": 0.01, "latency": 0.02, "speedup": 0.5}]}) + "\n" for op in ("exp", "add")))
    assert history("import", log, "--url", url, "--backend", "cuda", capsys=capsys)[0] == 0
    code, out = history("list", "--url", url, "--format", "json", capsys=capsys)
    assert [(r["kind"], r["nodes"]) for r in json.loads(out.out)][-1][1] == 2, out.out


def test_the_site_shows_a_dirty_checkouts_commit_as_list_does(tmp_path, store_url, capsys):
    """`history list` shows 3dafff35cf+dirty; the site's runs table cut it to 3dafff35cf, and its own
    regression table said 3dafff35cf0e -> 3dafff35cf0e+dirty."""
    ident = H.identity(zlbench_commit="3dafff35cf0e1234567890abcdef1234567890ab+dirty")
    record_run(H.write_run(tmp_path / "run", ident, [H.row("exp", "[[64,64]]", 1.0, 1.0)]), store_url)
    assert history("html", "--out", str(tmp_path / "site"), "--url", store_url, capsys=capsys)[0] == 0
    assert "3dafff35cf+dirty" in (tmp_path / "site" / "index.html").read_text()


def test_the_sites_ab_section_says_what_ab_md_says(real_runs, tmp_path, store_url, capsys):
    """The site's A/B part showed liveness, a bare overall change and verdict counts: no interval, no
    stops and no caveats. It now shows ab.md's head, caveats included."""
    run = tmp_path / "zl_runs" / "ab"
    shutil.copytree(real_runs["ab"], run)
    ab = json.loads((run / "ab.json").read_text())
    ab["summary"].update(fallback_rows=2, unpaired_rows=1)  # caveats ab.md would print
    (run / "ab.json").write_text(json.dumps(ab))
    record_run(run, store_url)
    assert history("html", "--out", str(tmp_path / "site"), "--url", store_url, capsys=capsys)[0] == 0
    page = (tmp_path / "site" / "index.html").read_text()
    assert "2 row(s) timed by the direct fallback on a side" in page
    # the unpaired rows ab.md lists below its head are not in the store: the page says where they are
    assert "1 row(s) unpaired (listed in its ab.md)" in page and "listed below" not in page
    assert "Rounds planned: 2 per row" in page and "Liveness: <b>unknown</b>" in page
    overall = ab["summary"]["overall"]
    ab_part = page.split('<h2 id="ab">')[1]  # (a PostgreSQL URL's password reads *** above it)
    assert f"<b>{(overall['geomean'] - 1) * 100:+.2f}%</b>" in ab_part and "**" not in ab_part
    # a summary the head cannot read (hand-edited, or of another zlbench) keeps the page, one line for it
    ab["summary"]["verdicts"] = None
    (run / "ab.json").write_text(json.dumps(ab))
    record_run(run, store_url)
    assert history("html", "--out", str(tmp_path / "site"), "--url", store_url, capsys=capsys)[0] == 0
    assert "Liveness: <b>unknown</b>; overall B/A latency" in (tmp_path / "site" / "index.html").read_text()


def test_a_trend_charts_axis_is_logarithmic_and_never_reads_below_zero():
    """A review: a flaky row at 8.36x beside rows near 1.0 padded a linear axis to -0.48x, and
    squashed every other point near 1.0."""
    import re
    from datetime import datetime

    from zlbench.history.site import trend_svg

    runs = [{"run_id": i, "created": datetime(2026, 12, 1, i), "corpus_commit": "abc"} for i in range(1, 5)]
    svg = trend_svg("flaky_sum", runs, {"float32": {1: 1.0, 2: 0.2, 3: 8.36, 4: 1.01}})
    labels = [float(v) for v in re.findall(r">(-?[\d.]+)x</text>", svg)]
    assert len(labels) == 2 and 0 < min(labels) < 0.2 and max(labels) > 8.36, labels
    top, bottom = 18, 170 - 22
    ys = [float(cy) for cy in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"', svg)]
    assert all(top <= y <= bottom for y in ys)
    # 1.0 lies as far above 0.2x as 5x would: well clear of the bottom (linear: its lowest 15%)
    assert (bottom - ys[0]) / (bottom - top) > 0.3, ys
