"""The history verbs' usage errors and report sections a tester hit: each is one line naming the
problem and the fix, exit 2, never a traceback. Synthetic run dirs (tests/history_runs.py), in process."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from zlbench.history.__main__ import main as history_main

from . import history_runs as H
from .history_runs import history

RECORD = ('[INFO] {"op_name": "exp", "dtype": "torch.float16", "mode": "kernel", "level": "core", "result": '
          '[{"legacy_shape": [%d, %d], "shape_detail": [[%d, %d]], "latency_base": 0.01, "latency": 0.02, '
          '"speedup": 0.5}]}\n')


@pytest.fixture
def two_runs(tmp_path, url, capsys):
    code, out = history(capsys, "import", *H.series(tmp_path, [{"exp": 1.0}, {"exp": 1.1}], interval=0.03),
                        "--url", url)
    assert code == 0, out.err
    return url


def test_import_skips_the_bad_lines_of_a_log_when_asked(tmp_path, url, capsys):
    """The error names --skip-bad-lines; `import` had no such option (argparse refused it)."""
    log = tmp_path / "result_x.log"
    log.write_text(RECORD % (64, 64, 64, 64) + '[INFO] {"op_name": broken\n' + RECORD % (256, 256, 256, 256))
    code, out = history(capsys, "import", log, "--url", url)
    assert code == 2 and f"{log}:2: malformed result record" in out.err and "--skip-bad-lines" in out.err
    code, out = history(capsys, "import", log, "--url", url, "--skip-bad-lines")
    assert code == 0, out.err
    assert f"recorded: {log} (2 rows; skipped 1 malformed line(s): 2)" in out.out


def test_out_below_a_file_or_where_no_folder_can_be_made_is_a_usage_error(tmp_path, two_runs, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(SystemExit) as e:  # argparse's own usage error: exit 2
        history_main(["compare", "1", "2", "--url", two_runs, "--out", str(afile / "sub")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"{afile / 'sub'} cannot be made: {afile} is a file, not a folder" in err
    if os.path.isdir("/proc"):  # a file system that takes no new folders
        for verb in (["compare", "1", "2"], ["regressions"]):
            code, out = history(capsys, *verb, "--url", two_runs, "--out", "/proc/x/sub")
            assert code == 2 and "--out /proc/x/sub: cannot make that folder in /proc" in out.err, out.err
            assert "Fix:" in out.err and not out.out


def test_compare_of_run_dirs_one_missing_or_broken_names_it_before_any_store(tmp_path, capsys, monkeypatch):
    """Two run dirs and no store named: a B that does not exist, or has no run_identity.json, is what
    the error names (not a store that could not be found, nor A's absence from one found nearby)."""
    monkeypatch.delenv("ZLBENCH_STORE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    a = H.write_run(tmp_path / "a", H.identity(), [H.row("exp", "[[64]]", 1.0, 2.0)])
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "rows.jsonl").write_text("")
    for ref, said in ((str(tmp_path / "nonexist"), "no such run dir or file"),
                      (str(broken), "is not a run dir: it holds no run_identity.json")):
        code, out = history(capsys, "compare", str(a), ref)
        assert code == 2 and f"{ref}{':' if 'such' in said else ''} {said}" in out.err, out.err
        assert "store" not in out.err, out.err


def test_compare_of_two_run_dirs_leaves_an_older_store_it_finds_as_it_is(tmp_path, capsys, monkeypatch):
    """A store of an older schema found from here (another zlbench's, in a shared folder) is looked at,
    not upgraded: the two run dirs are compared on their own and its schema stays."""
    from sqlalchemy import text

    from zlbench.store import Store

    monkeypatch.delenv("ZLBENCH_STORE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    with Store(f"sqlite:///{tmp_path / 'zlbench.db'}", target="0004"):
        pass
    runs = [H.write_run(tmp_path / name, H.identity(created=f"2026-11-0{i}T00:00:00+0000"),
                        [H.row("exp", "[[64]]", 1.0, 2.0)]) for i, name in ((1, "a"), (2, "b"))]
    code, out = history(capsys, "compare", *map(str, runs), "--fail-on", "none")
    assert code == 0 and "upgrading schema" not in out.err, out.err
    assert "has an older schema (a look does not upgrade it)" in out.err, out.err
    with Store(f"sqlite:///{tmp_path / 'zlbench.db'}", target="0004") as kept, kept.begin("reading") as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == "0004"


def test_compare_of_a_path_that_does_not_exist_says_so(tmp_path, two_runs, capsys):
    for ref in ("runs/base", str(tmp_path / "nope")):
        code, out = history(capsys, "compare", "1", ref, "--url", two_runs)
        assert code == 2 and f"{ref}: no such run dir or file" in out.err and "in the store" not in out.err, out.err
    # a folder that is no run dir (a user's /tmp, a folder of runs): importing it is not the fix
    code, out = history(capsys, "compare", "1", tmp_path, "--url", two_runs)
    assert code == 2 and f"{tmp_path} is not a run dir: it holds no run_identity.json" in out.err, out.err
    assert "import" not in out.err and "history --url" in out.err and "list" in out.err, out.err
    # a run dir that exists but was never imported: import it
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "rows.jsonl").write_text("")  # rows alone: import would refuse it, so no import Fix
    code, out = history(capsys, "compare", "1", run_dir, "--url", two_runs)
    assert code == 2 and f"{run_dir} is not a run dir" in out.err, out.err
    (run_dir / "run_identity.json").write_text(json.dumps(H.identity()))
    code, out = history(capsys, "compare", "1", run_dir, "--url", two_runs)
    assert code == 2 and f"{run_dir} is not in the store" in out.err, out.err
    # Its Fix names the store compare read (import's own default is the one beside the run dir):
    # an import into another store left the same compare failing.
    fix = re.search(r"`python -m zlbench history (--url \S+ import \S+)`", out.err)
    assert fix and shlex.split(fix.group(1))[:2] == ["--url", two_runs], out.err
    assert history(capsys, "compare", "1", "2", "--url", two_runs, "--format", "json")[0] == 1  # ids still resolve


def test_regressions_of_an_op_the_store_lacks_is_a_usage_error(tmp_path, url, capsys):
    """It printed 'No persistent step' and exited 0: a typo passed as a clean bill."""
    dirs = H.series(tmp_path, [{"exp": 1.0, "add": 2.0}] * 6, noise=0.002)
    assert history(capsys, "import", *dirs, "--url", url)[0] == 0
    code, out = history(capsys, "regressions", "--url", url, "--op", "exp", "--op", "nosuch")
    assert code == 2 and "--op nosuch: no row of the 6 run(s)" in out.err and "their ops: add, exp" in out.err, out.err
    code, out = history(capsys, "regressions", "--url", url, "--op", "exp")
    assert code == 0 and "No persistent step" in out.out, out.err


def test_regressions_over_too_few_runs_judge_nothing_and_do_not_pass_a_gate(two_runs, capsys):
    """2 runs of a caliber and -k 3: no split has 3 runs on each side. It said 'No persistent step'
    and exited 0, a gate passed on nothing; now it says so and exits 2 (--fail-on none accepts it)."""
    code, out = history(capsys, "regressions", "--url", two_runs)
    assert code == 2 and "Too few runs to look for a step: 2 run(s)" in out.out, out.out
    assert "No persistent step" not in out.out and "nothing was judged: exit 2" in out.err, out.err
    assert history(capsys, "regressions", "--url", two_runs, "--fail-on", "none")[0] == 0
    code, out = history(capsys, "regressions", "--url", two_runs, "-k", "1")  # 1 on each side: judged (+10%)
    assert code == 1 and "Too few" not in out.out and "regression" in out.out, out.out


def test_unstable_rows_are_listed_apart_from_the_changed_ones(tmp_path, url, capsys):
    """Rows whose rounds disagree far beyond any threshold (CI -76%..+273%) are 'unstable': no verdict,
    so not under Changed rows; a section of their own says what unstable means. A gate whose every row
    is unstable judged nothing: exit 2 (it passed, exit 0, over a real 2x slowdown its history blurred)."""
    dirs = H.series(tmp_path, [{"exp": 1.0, "add": 1.0}, {"exp": 1.0, "add": 0.5}], noise=0.6, rounds=4, seed=1)
    assert history(capsys, "import", *dirs, "--url", url)[0] == 0
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json")
    assert {r["verdict"] for r in json.loads(out.out)["rows"]} == {"unstable"}
    code, out = history(capsys, "compare", "1", "2", "--url", url)
    assert code == 2, out.err
    assert "**no row judged** (every paired row unstable: too noisy to judge): exit 2" in out.out, out.out
    assert history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "none")[0] == 0
    changed, _, unstable = out.out.partition("## Unstable rows (6)")
    assert "## Changed rows (0)\n\nNone." in changed and "unstable" not in changed.split("## Changed rows")[1]
    assert "rounds (or earlier runs) disagree too much to judge a change" in unstable
    assert unstable.count("| unstable ") == 6
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--all")  # --all: still in their section
    assert "## Unstable rows (6)" in out.out and "## Changed rows (0)" in out.out


def test_sqlite_file_reads_the_database_path_of_a_url_and_nothing_else():
    """import and compare read an SQLite store's file from its URL (they cut 'sqlite:///' off by hand,
    which gave a path for a URL with query options and for other databases' URLs)."""
    from zlbench.store.db import sqlite_file

    assert sqlite_file("sqlite:////tmp/runs/zlbench.db") == Path("/tmp/runs/zlbench.db")
    assert sqlite_file("sqlite:////tmp/runs/zlbench.db?timeout=5") == Path("/tmp/runs/zlbench.db")
    for url in ("sqlite:///:memory:", "sqlite://", "postgresql://u:p@host/db", "not a url"):
        assert sqlite_file(url) is None, url


def test_a_run_of_a_corpus_without_a_commit_says_so_in_compare_headers():
    """The demo corpus (no git checkout) read "corpus -"."""
    from datetime import datetime

    from zlbench.history.compare import describe

    run = {"run_id": 3, "created": datetime(2026, 12, 5, 21, 0), "backend": "cpu", "corpus_commit": None}
    assert describe(run) == "run 3 (2026-12-05 21:00, cpu, corpus commit unknown)"
    assert describe({**run, "corpus_commit": "0123456789abcdef"}) == "run 3 (2026-12-05 21:00, cpu, corpus 0123456789)"


def test_two_ab_runs_too_short_to_judge_are_told_about_rounds_not_processes(tmp_path, url, capsys):
    """Two A/B runs, B cut after one round: the Fix was 'rerun with timer.processes>=2', which an A/B
    has no use for; it is rounds (resume the cut run)."""
    runs = []
    for i, rounds in enumerate((3, 1)):
        rs = [H.row("exp", "[[64]]", 1.0 + 0.01 * r, 2.0, side="on", rnd=r) for r in range(rounds)]
        runs.append(H.write_run(tmp_path / f"ab{i}", H.identity(ab="DEMO_GEMS_FUSED_SOFTMAX",
                                                                created=f"2026-11-0{i + 1}T00:00:00+0000"), rs))
    assert history(capsys, "import", *runs, "--url", url)[0] == 0
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "none")
    assert "**Too few rounds** to judge 1 row(s): A and B are A/B runs" in out.out, out.out
    assert "timer.processes>=2" not in out.out, out.out


def test_regressions_says_when_it_lists_only_some_other_calibers():
    from zlbench.history.regressions import render_markdown

    others = [{"caliber": f"{i:02d}" * 8, "runs": 1} for i in range(10)]
    summary = {"caliber": "c" * 16, "backend": "cpu", "device_name": "cpu", "runs": 6, "first": "2026-11-01T00:00",
               "last": "2026-11-06T00:00", "k": 3, "threshold": 0.05, "z": 3.0, "regressions": 0, "improvements": 0,
               "other_calibers": others, "too_few_runs": False}
    text = render_markdown({"summary": summary, "steps": []})
    assert "10 other(s): " in text and f"{'07' * 6} (1 run), ..." in text, text


def _sqlite_error(words: str):
    import sqlite3

    from sqlalchemy.exc import OperationalError

    return OperationalError("PRAGMA journal_mode=WAL", {}, sqlite3.OperationalError(words))


def test_an_sqlite_store_that_cannot_be_opened_names_the_file_and_why(tmp_path, capsys, monkeypatch):
    """SQLite's "unable to open database file" and "attempt to write a readonly database" said 'cannot
    reach the results store ... Fix: start the database server' (there is none): they name the file
    and what is wrong with it (a folder, a missing folder, read-only), and the fix."""
    import zlbench.store.db as db
    from zlbench.store import record_or_warn

    run = H.write_run(tmp_path / "runs" / "x", H.identity(), [H.row("exp", "[[64,64]]", 1.0, 0.5)])
    folder = tmp_path / "afolder"
    folder.mkdir()
    # a folder named as the SQLite file: for real, from a run's end and from import
    record_or_warn(run, f"sqlite:///{folder}")
    err = capsys.readouterr().err
    assert f"the results store {folder} is a folder, not an SQLite file" in err and str(folder / "zlbench.db") in err
    assert "database server" not in err and "results store not written" in err, err
    code, out = history(capsys, "import", run, "--url", f"sqlite:///{folder}")
    assert code == 2 and "is a folder, not an SQLite file" in out.err and "database server" not in out.err, out.err
    assert not list(folder.iterdir())

    def said(url, words="unable to open database file"):
        return str(db.explain(_sqlite_error(words), url, "opening the store"))

    # a folder missing, or a file where a folder should be
    msg = said(f"sqlite:///{tmp_path / 'gone' / 'sub' / 'zlbench.db'}")
    assert f"{tmp_path / 'gone'} does not exist" in msg and f"mkdir -p {tmp_path / 'gone' / 'sub'}" in msg, msg
    (tmp_path / "afile").write_text("")
    msg = said(f"sqlite:///{tmp_path / 'afile' / 'zlbench.db'}")
    assert f"{tmp_path / 'afile'} is a file, not a folder" in msg and "mkdir" not in msg, msg
    # read-only: the file, its -wal file, its folder (os.access, as this test may run as root)
    store = tmp_path / "ro" / "zlbench.db"
    store.parent.mkdir()
    store.write_text("")
    (tmp_path / "ro" / "zlbench.db-wal").write_text("")
    real_access = os.access
    for denied, words in ((store, f"the results store file {store} is read-only for this user"),
                          (Path(f"{store}-wal"), f"the results store file {store}-wal is read-only"),
                          (store.parent, f"the results store's folder {store.parent} is read-only for this user")):
        monkeypatch.setattr(db.os, "access", lambda p, mode, d=denied: not (Path(p) == d and mode & os.W_OK)
                            and real_access(p, mode))
        for error in ("attempt to write a readonly database", "unable to open database file"):
            msg = said(f"sqlite:///{store}", error)
            assert words in msg and "chmod u+" in msg and "database server" not in msg, msg
    monkeypatch.setattr(db.os, "access", lambda p, mode: Path(p) != store and real_access(p, mode))
    assert f"the results store file {store} cannot be read by this user" in said(f"sqlite:///{store}")
    monkeypatch.setattr(db.os, "access", real_access)
    msg = said(f"sqlite:///{store}", "attempt to write a readonly database")  # nothing on disk says why
    assert f"SQLite can only read the results store {store}" in msg and "chmod u+rw" in msg, msg
    # a server's store keeps the server's words
    msg = said("postgresql+psycopg://user@127.0.0.1:9/zlbench", "connection refused")
    assert "cannot reach the results store" in msg and "start the database server" in msg, msg


def test_import_of_a_folder_skips_the_run_dirs_it_cannot_import(tmp_path, capsys):
    """One unfinished run dir below a folder (a run still measuring, one whose Slurm submission failed:
    run_identity.json and no tables) imported nothing of the folder, and made no store: each such dir
    is skipped with why, the rest imported; exit 2 only when nothing can be; a run dir named itself
    that cannot be imported still refuses the whole import, nothing written."""
    runs = tmp_path / "zl_runs"
    good = H.write_run(runs / "2026-11-01" / "a", H.identity(), [H.row("exp", "[[64,64]]", 1.0, 0.5)])
    unfinished = runs / "2026-11-02" / "b"
    unfinished.mkdir(parents=True)
    (unfinished / "run_identity.json").write_text(json.dumps(H.identity(created="2026-11-02T00:00:00+0000")))
    damaged = H.write_run(runs / "2026-11-03" / "c", H.identity(created="2026-11-03T00:00:00+0000"),
                          [H.row("exp", "[[64,64]]", 1.0, 0.5)])
    (damaged / "run_identity.json").write_text("{not json")
    store = tmp_path / "new" / "zlbench.db"
    code, out = history(capsys, "import", runs, "--url", store)
    assert code == 0, out.err
    assert out.out.splitlines() == [f"recorded: {good} (1 rows)"], out.out
    assert f"[zlbench] skipped {unfinished}: has no rows.jsonl or ops_status.csv" in out.err, out.err
    assert f"[zlbench] skipped {damaged}: {damaged / 'run_identity.json'} is not valid JSON" in out.err, out.err
    assert "1 run(s); 2 run dir(s) skipped (said above)" in out.err and "zlbench: error" not in out.err, out.err
    code, out = history(capsys, "list", "--url", store, "--format", "json")
    assert code == 0 and [r["path"] for r in json.loads(out.out)] == [str(good)], out.err
    # nothing below the folder can be imported: exit 2, no store (nor its folder) made
    only_bad = tmp_path / "only_bad"
    only_bad.mkdir()
    shutil.copytree(unfinished, only_bad / "b")
    code, out = history(capsys, "import", only_bad, "--url", f"{tmp_path / 'none'}/")
    assert code == 2 and f"skipped {only_bad / 'b'}: has no rows.jsonl" in out.err, out.err
    assert "zlbench: error: nothing imported: none of the 1 run dir(s) below" in out.err and "Fix:" in out.err
    assert not (tmp_path / "none").exists() and not out.out
    # a run dir named itself is meant: refused, and nothing of the rest written (nor the store's folder)
    code, out = history(capsys, "import", runs, unfinished, "--url", f"{tmp_path / 'named'}/")
    assert code == 2 and f"zlbench: error: {unfinished} has no rows.jsonl" in out.err, out.err
    assert not (tmp_path / "named").exists() and not out.out
