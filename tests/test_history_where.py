"""Which store `python -m zlbench.history` reads (zlbench/history/where.py): the one runs write
beside their run dirs, found from the current folder, said on stderr; --url before or after the
verb (issue 25 item 10, issue 26)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from zlbench.store import record_run

from . import history_runs as H
from .conftest import zlbench


def history(*args, cwd, env=None):
    full_env = {k: v for k, v in os.environ.items() if k != "ZLBENCH_STORE_URL"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "zlbench.history", *map(str, args)], cwd=cwd, env=full_env,
                          capture_output=True, text=True)


def recorded(run_dir, ident=None):
    """A finished run dir (run-dir format) written into the store a run would write: beside it."""
    from zlbench.store import default_url

    H.write_run(run_dir, ident or H.identity(), [H.row("exp", "[[64,64]]", 1.0, 0.5)])
    record_run(run_dir, default_url(run_dir))
    return run_dir


def test_a_run_with_its_own_run_dir_is_found_by_history(tmp_path):
    """A real run with hydra.run.dir=runs/x writes runs/zlbench.db; `history list` from the folder it
    ran in reads that store and says so (it used to say there was no store)."""
    res = zlbench("hydra.run.dir=runs/x", "progress=none", "ops=[exp]", "dtypes=[float32]", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "runs" / "zlbench.db").is_file() and not (tmp_path / "zl_runs").exists()
    out = history("list", "--format", "json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert [r["path"] for r in listed] == [str(tmp_path / "runs" / "x")]
    assert f"[zlbench] store {tmp_path / 'runs' / 'zlbench.db'}" in out.stderr and "found below" in out.stderr
    # --url before the verb, as after it; a folder or a run dir names the store beside it.
    for args in (["--url", "runs", "list"], ["list", "--url", "runs/x"], ["--url", "runs/zlbench.db", "list"]):
        out = history(*args, "--format", "json", cwd=tmp_path)
        assert out.returncode == 0 and len(json.loads(out.stdout)) == 1, (args, out.stderr)
        assert "[zlbench] store" not in out.stderr  # named, not found: nothing to say
    # The verb's --url wins over the one before it.
    out = history("--url", "nowhere.db", "list", "--url", "runs", "--format", "json", cwd=tmp_path)
    assert out.returncode == 0 and len(json.loads(out.stdout)) == 1, out.stderr
    out = history("--url", "nowhere.db", "list", cwd=tmp_path)
    assert out.returncode == 2 and "no results store at" in out.stderr and not (tmp_path / "nowhere.db").exists()


def test_the_default_store_wins_and_the_others_are_named(tmp_path):
    recorded(tmp_path / "zl_runs" / "2026-11-01" / "02-00-00")
    recorded(tmp_path / "mine" / "run1", H.identity(created="2026-11-02T00:00:00+0000"))
    out = history("list", "--format", "json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert [r["path"] for r in json.loads(out.stdout)] == [str(tmp_path / "zl_runs" / "2026-11-01" / "02-00-00")]
    assert f"store {tmp_path / 'zl_runs' / 'zlbench.db'}; other stores below {tmp_path}: mine/zlbench.db" in out.stderr


def test_several_stores_and_none_are_one_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    out = history("list", cwd=tmp_path / "empty")
    assert out.returncode == 2
    assert "no results store found. Looked at: --url (not given), $ZLBENCH_STORE_URL" in out.stderr
    assert str(tmp_path / "empty" / "zl_runs" / "zlbench.db") in out.stderr and "Fix:" in out.stderr
    assert not list((tmp_path / "empty").iterdir())  # reading creates nothing
    recorded(tmp_path / "a" / "run")
    recorded(tmp_path / "b" / "c" / "run")
    out = history("compare", "--latest", cwd=tmp_path)
    assert out.returncode == 2 and "2 results stores below" in out.stderr
    assert "a/zlbench.db, b/c/zlbench.db" in out.stderr and "--url" in out.stderr
    # The environment names one: no search, no note.
    out = history("list", cwd=tmp_path, env={"ZLBENCH_STORE_URL": f"sqlite:///{tmp_path / 'a' / 'zlbench.db'}"})
    assert out.returncode == 0 and "[zlbench] store" not in out.stderr and "|    1 |" in out.stdout, out.stdout


def test_import_makes_the_folder_of_a_new_store(tmp_path):
    """import builds a store, so `--url ci/store/zlbench.db` makes ci/store (it said the folder did not
    exist); a run's store.url into a missing folder is still refused, said, and the run kept (a typo
    there would scatter stores)."""
    run = H.write_run(tmp_path / "runs" / "x", H.identity(), [H.row("exp", "[[64,64]]", 1.0, 0.5)])
    out = history("import", "--url", tmp_path / "ci" / "store" / "zlbench.db", run, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ci" / "store" / "zlbench.db").is_file()
    # A trailing slash means a folder: the store in it (it made a database file named like the folder).
    out = history("import", "--url", f"{tmp_path / 'ci2' / 'store'}/", run, cwd=tmp_path)
    assert out.returncode == 0 and (tmp_path / "ci2" / "store" / "zlbench.db").is_file(), out.stderr
    # A folder that cannot be made is named as --url's, not --out's.
    (tmp_path / "afile").write_text("x")
    out = history("import", "--url", tmp_path / "afile" / "sub" / "zlbench.db", run, cwd=tmp_path)
    assert out.returncode == 2 and "--url " in out.stderr and "--out" not in out.stderr, out.stderr
    res = zlbench("progress=none", "ops=[exp]", "dtypes=[float32]", f"store.url={tmp_path / 'no' / 'zlbench.db'}",
                  cwd=tmp_path)
    assert res.returncode == 0 and "results store not written" in res.stderr and "does not exist" in res.stderr, \
        res.stderr[-2000:]
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("where", ["folder", "run dir"])
def test_import_into_a_folder_or_beside_a_run_dir(tmp_path, where):
    run = H.write_run(tmp_path / "runs" / "x", H.identity(), [H.row("exp", "[[64,64]]", 1.0, 0.5)])
    target = tmp_path / "elsewhere" if where == "folder" else run
    target.mkdir(exist_ok=True)
    out = history("--url", target, "import", run, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    store = tmp_path / "elsewhere" / "zlbench.db" if where == "folder" else tmp_path / "runs" / "zlbench.db"
    assert store.is_file() and str(store) in out.stderr


def _pair(a_dir, b_dir):
    """A plain run and a repeat with one row 10% slower, both with process-level intervals."""
    ident = H.identity(processes=3)
    rows_a = [H.row("exp", s, 1.0, 0.5, ci=[0.99, 1.01]) for s in H.SHAPES]
    rows_b = [H.row("exp", s, 1.1 if s == H.SHAPES[0] else 1.0, 0.5, ci=[1.09, 1.11] if s == H.SHAPES[0] else [0.99, 1.01])
              for s in H.SHAPES]
    return H.write_run(a_dir, ident, rows_a), H.write_run(b_dir, {**ident, "created": "2026-11-02T00:00:00+0000"}, rows_b)


def test_compare_of_two_run_dirs_without_a_store_reads_them_alone(tmp_path):
    """Runs made with store.url=none (or copied from another machine) compare as run dirs: no store
    is needed, none is left behind, and the slower row fails the gate (it said no store was found)."""
    a, b = _pair(tmp_path / "one" / "a", tmp_path / "two" / "b")
    (tmp_path / "here").mkdir()
    out = history("compare", a, b, cwd=tmp_path / "here")
    assert out.returncode == 1, out.stderr
    assert "compared the two run dirs on their own" in out.stderr and "1 row(s) slower" in out.stderr
    assert "| exp " in out.stdout and "+10.00%" in out.stdout, out.stdout
    assert not list(tmp_path.rglob("zlbench.db*"))
    # ... named by their run dirs (the temporary store's ids mean nothing after); copies of one run are one
    out = history("compare", a, b, "--format", "json", cwd=tmp_path / "here")
    s = json.loads(out.stdout)["summary"]
    assert s["run_a"]["run_id"] is None and s["label_a"].startswith(str(a)), s["label_a"]
    shutil.copytree(a, tmp_path / "one" / "a_copy")
    out = history("compare", a, tmp_path / "one" / "a_copy", cwd=tmp_path / "here")
    assert out.returncode == 2 and "copies of one run dir" in out.stderr and "history list" not in out.stderr
    # A store found from here that holds only A is passed over, and said so (not "none found").
    (tmp_path / "here" / "other").mkdir()
    record_run(a, f"sqlite:///{tmp_path / 'here' / 'other' / 'zlbench.db'}")
    out = history("compare", a, b, cwd=tmp_path / "here")
    assert out.returncode == 1 and "does not hold both" in out.stderr and "on their own" in out.stderr, out.stderr
    # A store beside both run dirs (where their runs wrote it) is the one read, said so.
    record_run(a, f"sqlite:///{tmp_path / 'one' / 'zlbench.db'}")
    c, d = _pair(tmp_path / "runs" / "c", tmp_path / "runs" / "d")
    for run in (c, d):
        record_run(run, f"sqlite:///{tmp_path / 'runs' / 'zlbench.db'}")
    out = history("compare", c, d, cwd=tmp_path / "here")
    assert out.returncode == 1 and "runs/zlbench.db (it holds both runs)" in out.stderr, out.stderr
    # Not for ids, nor where --url names a store: those errors stand.
    (tmp_path / "empty").mkdir()
    out = history("compare", "1", "2", cwd=tmp_path / "empty")
    assert out.returncode == 2 and "no results store found" in out.stderr, out.stderr


def test_url_env_and_store_url_read_a_store_the_same_way(tmp_path, monkeypatch):
    """--url, $ZLBENCH_STORE_URL and a run's store.url take the same forms (a URL, an SQLite file, a
    folder: its zlbench.db, a run dir: the store beside it), read by one function: the variable was
    taken as it was (a folder read as an SQLite file: 'no results store at'), and store.url=FOLDER
    made the run's store fail ('cannot reach ... start the database server')."""
    from zlbench.history.where import find_store
    from zlbench.store import default_url, run_url
    from zlbench.store.db import normalize_url

    run = recorded(tmp_path / "runs" / "x")
    (tmp_path / "folder").mkdir()
    forms = {"folder": (tmp_path / "folder", f"sqlite:///{tmp_path / 'folder' / 'zlbench.db'}"),
             "run dir": (run, default_url(run)),
             "file": (tmp_path / "a.db", f"sqlite:///{tmp_path / 'a.db'}"),
             "url": (f"sqlite:///{tmp_path / 'b.db'}", f"sqlite:///{tmp_path / 'b.db'}")}
    for name, (given, meant) in forms.items():
        monkeypatch.delenv("ZLBENCH_STORE_URL", raising=False)
        read = [normalize_url(find_store(str(given), create=True)[0]),
                normalize_url(run_url(run, str(given)))]
        monkeypatch.setenv("ZLBENCH_STORE_URL", str(given))
        read.append(normalize_url(find_store(None, create=True)[0]))
        assert read == [meant] * 3, (name, read)


def test_a_folder_in_the_environment_or_store_url_is_the_store_in_it(tmp_path):
    """The brief's case: ZLBENCH_STORE_URL=FOLDER for a run and for `history list`, and
    store.url=FOLDER, write and read FOLDER/zlbench.db."""
    (tmp_path / "env").mkdir()
    res = zlbench("hydra.run.dir=runs/x", "progress=none", "ops=[exp]", "dtypes=[float32]", cwd=tmp_path,
                  env={"ZLBENCH_STORE_URL": str(tmp_path / "env")})
    assert res.returncode == 0 and "results store not written" not in res.stderr, res.stderr[-2000:]
    assert (tmp_path / "env" / "zlbench.db").is_file() and not (tmp_path / "runs" / "zlbench.db").exists()
    out = history("list", "--format", "json", cwd=tmp_path, env={"ZLBENCH_STORE_URL": str(tmp_path / "env")})
    assert out.returncode == 0 and [r["path"] for r in json.loads(out.stdout)] == [str(tmp_path / "runs" / "x")], \
        out.stderr
    # store.url=FOLDER (as a collect's --store-url: record_or_warn reads both)
    (tmp_path / "opt").mkdir()
    res = subprocess.run([sys.executable, "-m", "zlbench", "collect", str(tmp_path / "runs" / "x"), "--store-url",
                          str(tmp_path / "opt")], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0 and "results store not written" not in res.stderr, res.stderr[-2000:]
    assert (tmp_path / "opt" / "zlbench.db").is_file()
    # import reads the variable as --url: a folder gets its store
    (tmp_path / "imp").mkdir()
    out = history("import", tmp_path / "runs" / "x", cwd=tmp_path, env={"ZLBENCH_STORE_URL": str(tmp_path / "imp")})
    assert out.returncode == 0 and (tmp_path / "imp" / "zlbench.db").is_file(), out.stderr
    # a reader given a folder with no store is refused, naming the variable, and makes none
    (tmp_path / "empty").mkdir()
    out = history("list", cwd=tmp_path, env={"ZLBENCH_STORE_URL": str(tmp_path / "empty")})
    assert out.returncode == 2 and f"$ZLBENCH_STORE_URL={tmp_path / 'empty'} is a folder without a results store" \
        in out.stderr, out.stderr
    assert not list((tmp_path / "empty").iterdir())
