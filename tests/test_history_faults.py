"""Faults a tester found in the store and the history verbs, each with the case that showed it:
synthetic run dirs (tests/history_runs.py) in process, real runs where only a run can show it."""

from __future__ import annotations

import json
import os
import socket
import shutil

import pytest

from . import history_runs as H
from .conftest import EXP_RUN, copied_run, zlbench
from .history_runs import history


def run(path, created, latency, interval=0.02):
    """A plain run dir at `path`, started at `created` (day of November 2026), exp at `latency` ms
    with process-level intervals of +-interval."""
    ident = H.identity(created=f"2026-11-{created:02d}T02:00:00+0000", processes=3)
    rows = [H.row("exp", s, latency * 4 ** j, 0.01, ci=[latency * 4 ** j * (1 - interval), latency * 4 ** j * (1 + interval)])
            for j, s in enumerate(H.SHAPES)]
    return H.write_run(path, ident, rows)


def test_a_run_dir_used_again_is_not_read_as_the_run_it_held_before(tmp_path, url, capsys):
    """Recorded at q, q cleared and run again (2x slower, store off): `compare 1 q` read q's old
    record (0 rows slower, exit 0) without a word. A path names the run it holds now."""
    base, q = run(tmp_path / "runs" / "base", 1, 1.0), run(tmp_path / "runs" / "q", 2, 1.0)
    assert history(capsys, "import", base, q, "--url", url)[0] == 0
    shutil.rmtree(q)
    run(q, 3, 2.0)
    code, out = history(capsys, "compare", base, q, "--url", url)
    assert code == 2 and f"zlbench: error: {q} is not in the store" in out.err, out.err
    assert "as it is now: the store's record of that path (run(s) 2) is of another run it held before" in out.err
    assert f"Fix: add it with `python -m zlbench history --url {url} import {q}`" in out.err, out.err
    # Following the Fix, the compare reads the run q holds now.
    assert history(capsys, "import", q, "--url", url)[0] == 0
    code, out = history(capsys, "compare", base, q, "--url", url)
    assert code == 1 and "3 row(s) slower" in out.err, out.err


def test_a_run_dir_used_again_names_the_run_it_holds_of_the_two_recorded_there(tmp_path, url, capsys):
    """The README's runs/base, runs/pr: after `rm -rf runs/pr` and a new run there (recorded), `compare
    base pr` said "'pr' names 2 runs (ids 2, 3). Fix: give a run id", though pr holds one of them."""
    base, pr = run(tmp_path / "runs" / "base", 1, 1.0), run(tmp_path / "runs" / "pr", 2, 1.0)
    assert history(capsys, "import", base, pr, "--url", url)[0] == 0
    shutil.rmtree(pr)
    assert history(capsys, "import", run(pr, 3, 2.0), "--url", url)[0] == 0
    code, out = history(capsys, "compare", base, pr, "--url", url, "--format", "json")
    assert code == 1 and "names 2 runs" not in out.err, out.err
    assert '"run_id": 3' in out.out and "3 row(s) slower" in out.err, out.err


def test_compare_latest_passes_over_a_run_that_measured_nothing(tmp_path, url, capsys):
    """A run whose every node timed out (launcher.node_timeout_s is no part of the caliber) was taken as
    --latest's A: 'share no row both measured', exit 2, though a good run of the caliber came before."""
    timed_out = H.write_run(tmp_path / "runs" / "timed_out", H.identity(created="2026-11-02T02:00:00+0000", processes=3),
                            [H.row("exp", s, 1.0, 0.01, status="timeout") for s in H.SHAPES])
    assert history(capsys, "import", timed_out, run(tmp_path / "runs" / "new", 3, 1.0), "--url", url)[0] == 0
    code, out = history(capsys, "compare", "--latest", "--url", url)
    assert code == 2 and "is the only run of its caliber" in out.err, out.err
    assert "that measured a row (1 earlier one(s) measured none: run(s) 1): nothing earlier" in out.err, out.err
    assert history(capsys, "import", run(tmp_path / "runs" / "good", 1, 1.0), "--url", url)[0] == 0
    code, out = history(capsys, "compare", "--latest", "--url", url, "--format", "json")
    assert code == 0 and '"a_chosen": "1 later run(s) of B\'s caliber measured no row' in out.out, out.err
    assert '"run_id": 3' in out.out and "passed over as A: run(s) 1" in out.err and "share no row" not in out.err


def test_two_runs_of_one_config_started_in_the_same_second_are_two_runs(tmp_path, url, capsys):
    """Their key was identity hash, start (to the second) and host: one was never recorded ('kept c1
    ... the same run is recorded from c2' though their latencies differ), and `compare c1 c2` failed
    'both name run 1'. A run's own id (provenance.run_uid, drawn as it starts) tells them apart."""
    c1, c2 = run(tmp_path / "c1", 1, 1.0), run(tmp_path / "c2", 1, 2.0)
    for c, uid in ((c1, "5e1f0c2b9a7d4e13"), (c2, "0b8e6a4c2d9f7e51")):
        ident = json.loads((c / "run_identity.json").read_text())
        ident["provenance"]["run_uid"] = uid
        (c / "run_identity.json").write_text(json.dumps(ident))
    code, out = history(capsys, "import", c1, c2, "--url", url)
    assert code == 0 and out.out.count("recorded:") == 2, out.out
    code, out = history(capsys, "compare", c1, c2, "--url", url)
    assert code == 1 and "3 row(s) slower" in out.err, out.err
    # A run dir made before runs had an id keeps its key: the store's record of it still finds it.
    old = run(tmp_path / "old", 2, 1.0)
    assert history(capsys, "import", old, "--url", url)[0] == 0
    assert _run_key_in_store(url, 3).endswith("@node1") and history(capsys, "compare", c1, old, "--url", url)[0] == 0


def _run_key_in_store(url, run_id):
    from sqlalchemy import select

    from zlbench.store import Store
    from zlbench.store import schema as S

    with Store(url) as store, store.begin("reading") as conn:
        return conn.execute(select(S.runs.c.run_key).where(S.runs.c.run_id == run_id)).scalar_one()


def test_a_run_draws_its_id_as_it_starts_and_a_resume_keeps_it(shared_run, tmp_path):
    res = shared_run(*EXP_RUN)
    assert res.returncode == 0, res.stderr[-2000:]
    uid = json.loads((res.run_dir / "run_identity.json").read_text())["provenance"]["run_uid"]
    assert len(uid) == 16 and int(uid, 16) >= 0, uid
    copy = copied_run(res, tmp_path / "copy")
    res = zlbench(*EXP_RUN, f"resume={copy}", "store.url=none", "progress=none", cwd=tmp_path)
    assert res.returncode == 0 and "resuming" in res.stderr, res.stderr[-2000:]
    ident = json.loads((copy / "run_identity.json").read_text())
    assert ident["provenance"]["run_uid"] == uid and len(ident["resumed"]) == 1, ident["provenance"]


@pytest.mark.parametrize("text, problem", [("[]", "it holds a list"), ("null", "it holds null"),
                                           ("{}", "it lacks config, backend, switch_env, identity_hash")])
def test_an_identity_of_the_wrong_shape_is_a_damaged_run_dir(shared_run, tmp_path, capsys, text, problem):
    """Valid JSON of the wrong shape: summary and collect died in a traceback (exit 1, the gate's
    'slower'), and `history import` recorded `{}` with a blank backend."""
    from zlbench.report import batch_summary, collect

    res = shared_run(*EXP_RUN)
    run_dir = copied_run(res, tmp_path / "zl_runs" / "d" / "run")
    (run_dir / "run_identity.json").write_text(text)
    said = f"{run_dir / 'run_identity.json'} is no run identity: {problem}"
    for main in (batch_summary.main, collect.main):
        code = main([str(run_dir)])
        err = capsys.readouterr().err
        assert code == 2 and said in err and "Fix: restore that file" in err, err
    code, out = history(capsys, "import", run_dir, "--url", tmp_path / "w.db")  # named: refused
    assert code == 2 and said in out.err and not (tmp_path / "w.db").exists(), out.err
    good = run(tmp_path / "zl_runs" / "good", 1, 1.0)
    code, out = history(capsys, "import", tmp_path / "zl_runs", "--url", tmp_path / "w.db")  # below a folder: skipped
    assert code == 0 and out.out.splitlines() == [f"recorded: {good} (3 rows)"], out.out
    assert f"skipped {run_dir}: {run_dir / 'run_identity.json'} is no run identity: {problem}" in out.err, out.err


def test_import_refuses_a_run_still_measuring_and_skips_it_below_a_folder(tmp_path, capsys):
    """`history import DIR` recorded a run still measuring (its tables of a moment, a resume's or a
    collect's): named, it is refused; below a folder, skipped as the README says."""
    good = run(tmp_path / "zl_runs" / "good", 1, 1.0)
    live = run(tmp_path / "zl_runs" / "live", 2, 1.0)
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": "2026-11-02T02:00:00+0000",
              "command": "python -m zlbench ops=[exp]"}
    (live / ".zlbench.lock.holder.json").write_text(json.dumps(holder))  # as a live run's lock says
    store = tmp_path / "w.db"
    code, out = history(capsys, "import", live, "--url", store)
    assert code == 2 and f"zlbench: error: {live} is still measuring (pid {os.getpid()} on" in out.err, out.err
    assert "Fix: import it after it ends" in out.err and not store.exists(), out.err
    code, out = history(capsys, "import", tmp_path / "zl_runs", "--url", store)
    assert code == 0 and out.out.splitlines() == [f"recorded: {good} (3 rows)"], out.out
    assert f"skipped {live}: is still measuring (pid {os.getpid()}" in out.err, out.err


def test_reading_never_makes_a_store_in_an_empty_file_or_another_database(tmp_path, capsys, monkeypatch):
    """`history --url zero.db list` of a 0-byte file said '(no runs)' and left a 53 KB store there;
    another program's SQLite database got a store's tables beside its own."""
    import sqlite3

    zero = tmp_path / "zero.db"
    zero.write_bytes(b"")
    for verb in (["list"], ["compare", "--latest"], ["regressions"], ["vendors"]):
        code, out = history(capsys, "--url", zero, *verb)
        assert code == 2 and f"no results store at {zero}: the file is empty; reading makes none" in out.err, out.err
    assert zero.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["zero.db"]
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    before = other.read_bytes()
    code, out = history(capsys, "--url", other, "list")
    assert code == 2 and "its 1 table(s) are another program's; reading makes none" in out.err, out.err
    assert other.read_bytes() == before and not (tmp_path / "other.db-wal").exists()
    # Two run dirs beside an empty zlbench.db: compared on their own, the file left as it is.
    runs = tmp_path / "runs"
    a, b = run(runs / "a", 1, 1.0), run(runs / "b", 2, 2.0)
    (runs / "zlbench.db").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ZLBENCH_STORE_URL", raising=False)
    code, out = history(capsys, "compare", a, b)
    assert code == 1 and "holds no store" in out.err and (runs / "zlbench.db").stat().st_size == 0, out.err


def test_a_run_that_could_not_record_itself_names_its_store_in_the_fix(tmp_path, capsys):
    """store.url=/x/garbage.db (no database): the Fix `python -m zlbench history import RUN_DIR` lacked
    --url, so following it recorded the run in the store beside the run dir, another one."""
    import re
    import shlex

    from zlbench.store import record_or_warn

    run_dir = run(tmp_path / "runs" / "r", 1, 1.0)
    garbage = tmp_path / "x" / "garbage.db"
    garbage.parent.mkdir()
    garbage.write_text("garbage\n")
    record_or_warn(run_dir, str(garbage))
    err = capsys.readouterr().err
    fix = re.search(r"later: `python -m zlbench history (.*)`\.$", err.strip())
    assert fix and shlex.split(fix.group(1)) == ["--url", str(garbage), "import", str(run_dir)], err
    garbage.unlink()  # what was wrong put right, the Fix records the run where the run meant it
    code, out = history(capsys, *shlex.split(fix.group(1)))
    assert code == 0 and garbage.is_file() and not (run_dir.parent / "zlbench.db").exists(), out.err
    # A URL with a password: left to ZLBENCH_STORE_URL, which the import reads as the run did.
    record_or_warn(run_dir, "postgresql://u:secret@127.0.0.1:1/zlbench")
    err = capsys.readouterr().err
    assert "secret" not in err and f"later: `python -m zlbench history import {run_dir}`" in err, err
