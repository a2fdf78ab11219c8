"""Which store `python -m zlbench.history` reads (zlbench/history/where.py): the one runs write
beside their run dirs, found from the current folder, said on stderr; --url before or after the
verb (issue 25 item 10, issue 26)."""

from __future__ import annotations

import json
import os
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
