"""Faults a tester found in the store and the history verbs, each with the case that showed it:
synthetic run dirs (tests/history_runs.py) in process, real runs where only a run can show it."""

from __future__ import annotations

import shutil

from . import history_runs as H
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
