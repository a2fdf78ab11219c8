"""`history compare`, `regressions` and the site on the rows' process-level intervals (plain runs
with timer.processes >= 2: a 95% interval for the value another run would report), and the exit
codes that gate CI. Synthetic run dirs in the run-dir format (tests/history_runs.py) for exact
cases; one real pair of demo runs where the running zlbench measures processes."""

from __future__ import annotations

import json
import shutil
import math
import re
import subprocess
import sys
import shlex
import statistics
from pathlib import Path

import pytest

from zlbench.ab import stats
from zlbench.ab.intervals import interval_stat, interval_verdict, moved

from . import history_runs as H
from .history_runs import history
from .conftest import FIXTURES, zlbench


def imported(capsys, url, dirs):
    code, out = history(capsys, "import", *dirs, "--url", url)
    assert code == 0, out.err
    return dirs


def verdicts(result):
    return {(r["op"], r["shape"]): (r["verdict"], r["noise"]) for r in result["rows"]}


def test_two_runs_compare_on_their_intervals_and_a_slowdown_fails_the_gate(tmp_path, url, capsys):
    """Two runs, nothing earlier: exp got 10% slower, add did not move. Their intervals (+-3%) are
    the noise: exp is flagged and `compare` exits 1; no row is 'too little history'."""
    imported(capsys, url, H.series(tmp_path, [{"exp": 1.0, "add": 2.0}, {"exp": 1.1, "add": 2.0}],
                                   noise=0.003, interval=0.03))
    code, out = history(capsys, "compare", "--latest", "--url", url, "--format", "json")
    assert code == 1 and "3 row(s) slower beyond their noise" in out.err
    result = json.loads(out.out)
    v = verdicts(result)
    assert all(v[("exp", s)] == ("slower", "intervals") for s in H.SHAPES), v
    assert all(v[("add", s)][0] not in ("slower", "faster") and v[("add", s)][1] == "intervals" for s in H.SHAPES), v
    assert result["summary"]["noise_sources"] == {"intervals": 6} and result["summary"]["failing_rows"] == 3
    exp = next(r for r in result["rows"] if r["op"] == "exp")
    assert exp["a_lo"] == pytest.approx(exp["a_ms"] * 0.97) and exp["b_hi"] == pytest.approx(exp["b_ms"] * 1.03)
    assert exp["ci_lo_pct"] > 0  # the change's interval excludes no change
    # one round each, over 3 processes each (compare.csv said rounds 1 and nothing of the processes)
    assert (exp["rounds"], exp["a_processes"], exp["b_processes"]) == (1, 3, 3), exp
    code, out = history(capsys, "compare", "--latest", "--url", url)
    assert code == 1 and "| exp " in out.out and "No process-level intervals" not in out.out
    assert "Gate (--fail-on slower): 3 row(s) slower: exit 1." in out.out
    # What fails is chosen: a faster-only gate passes this slowdown; none never fails.
    for fail_on, want in (("faster", 0), ("none", 0), ("changed", 1)):
        assert history(capsys, "compare", "1", "2", "--url", url, "--fail-on", fail_on)[0] == want, fail_on
    # The same two runs the other way round: the rule is symmetric, B is now faster.
    code, out = history(capsys, "compare", "2", "1", "--url", url, "--format", "json", "--fail-on", "faster")
    assert code == 1 and {v for (op, _), (v, _) in verdicts(json.loads(out.out)).items() if op == "exp"} == {"faster"}


def test_rows_b_lost_to_a_crash_fail_the_gate(tmp_path, url, capsys):
    """add's test crashed in B before any shape, mul's after its first, one shape of neg failed its
    check, abs was not applicable in B; exp repeated. The gate passed (exit 0) with the lost rows
    listed as unpaired: a kernel that stopped working is no better than a slower one. A skipped
    test is no loss."""
    a, b = H.series(tmp_path, [{"exp": 1.0, "add": 2.0, "mul": 1.0, "neg": 1.0, "abs": 1.0},
                               {"exp": 1.0, "mul": 1.0, "neg": 1.0}], noise=0.003, interval=0.03)
    rows = [json.loads(x) for x in (b / "rows.jsonl").read_text().splitlines()]
    blank = {k: None for k in rows[0]}
    add = {**blank, "op": "add", "node": "benchmark/test_add.py::test_perf_add", "side": "main", "round": 0,
           "status": "crashed", "reason": "exit -11 (SIGSEGV)"}
    # abs: a test FlagGems refused for the run's dtypes (not applicable): rows not measured, not lost
    skipped = {**add, "op": "abs", "node": "benchmark/test_abs.py::test_perf_abs", "status": "skipped",
               "reason": "not applicable"}
    # mul crashed after its first shape (ops_status says so; no node-level row: it has rows);
    # one shape of neg failed its check (a row of status failed)
    rows = [r for r in rows if not (r["op"] == "mul" and r["shape"] != H.SHAPES[0])]
    for r in rows:
        if r["op"] == "neg" and r["shape"] == H.SHAPES[1]:
            r.update(status="failed", reason="accuracy mismatch", latency=None)
    (b / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows + [add, skipped]))
    status = (b / "ops_status.csv").read_text().splitlines()
    (b / "ops_status.csv").write_text("\n".join(
        l.replace(",ok,", ",crashed,").replace(",1.00,,", ",1.00,exit -6 (SIGABRT),") if l.startswith("mul,") else l
        for l in status) + "\n")
    imported(capsys, url, [a, b])
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json")
    result = json.loads(out.out)
    assert code == 1 and "0 row(s) slower beyond their noise and the threshold, 6 row(s) measured in A lost in B" in out.err
    assert result["summary"]["lost_rows"] == 6 and result["summary"]["failing_rows"] == 6
    lost = sorted((u["op"], u["shape"]) for u in result["unpaired"] if u["lost_in"] == "B")
    assert lost == sorted([("add", s) for s in H.SHAPES] + [("mul", s) for s in H.SHAPES[1:]] + [("neg", H.SHAPES[1])])
    assert {u["op"] for u in result["unpaired"] if not u["lost_in"]} == {"abs"}
    assert all("run B's test crashed: exit -11 (SIGSEGV)" in u["why"] for u in result["unpaired"] if u["op"] == "add")
    assert all("run B's test crashed" in u["why"] for u in result["unpaired"] if u["op"] == "mul"), result["unpaired"]
    # mul's first shape was measured before the crash and is judged: the crash is still said
    assert [e[:2] for e in result["summary"]["ended_badly"]["B"]] == [["benchmark/test_mul.py::test_perf_mul", "crashed"]]
    assert result["summary"]["ended_badly"]["A"] == []
    code, out = history(capsys, "compare", "1", "2", "--url", url)
    assert "Gate (--fail-on slower): 0 row(s) slower, 6 row(s) lost in B" in out.out
    assert "- 1 test(s) of run B did not end ok (benchmark/test_mul.py::test_perf_mul: crashed), though their " \
        "rows were compared" in out.out, out.out
    # They fail the gate, so the recheck measures their ops again (a crash may be a flake too).
    (b / "plan.json").write_text(json.dumps({"nodes": [{"nodeid": f"benchmark/test_{op}.py::test_perf_{op}", "op": op}
                                                       for op in ("exp", "add", "mul", "neg")]}))
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json")
    assert "'ops=[add,mul,neg]'" in json.loads(out.out)["summary"]["recheck"]["command"], out.out
    # A faster-only gate does not fail on them; B's crash read the other way (A lost, B has them) is no loss.
    assert history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "faster")[0] == 0
    code, out = history(capsys, "compare", "2", "1", "--url", url, "--format", "json")
    assert code == 0 and json.loads(out.out)["summary"]["lost_rows"] == 0, out.err


def test_tests_of_one_op_timing_one_shape_compare_each_on_its_own(tmp_path, url, capsys):
    """FlagGems' einsum trace and transpose time the same shapes: keyed by (op, dtype, shape) they
    were one row with two values per run (no interval, either one's value); now a row per test."""
    dirs = []
    for i, slower in enumerate((1.0, 1.1)):
        rows = [{**H.row("einsum", shape, lat * (4 ** j), 0.01, ci=[lat * (4 ** j) * 0.97, lat * (4 ** j) * 1.03]),
                 "node": f"benchmark/test_einsum.py::{test}"}
                for test, lat in (("test_einsum_trace", 0.002 * slower), ("test_einsum_transpose", 0.004))
                for j, shape in enumerate(H.SHAPES)]
        ident = H.identity(corpus_commit=f"corpus{i:02d}" + "0" * 32, zlbench_commit=f"zl{i:02d}",
                           created=f"2026-11-{i + 1:02d}T02:00:00+0000", ops=["einsum"], processes=3)
        dirs.append(H.write_run(tmp_path / f"run{i}", ident, rows))
    imported(capsys, url, dirs)
    code, out = history(capsys, "compare", "--latest", "--url", url, "--format", "json")
    result = json.loads(out.out)
    got = {(r["node"].rpartition("::")[2], r["shape"]): (r["verdict"], r["noise"]) for r in result["rows"]}
    assert got == {**{("test_einsum_trace", s): ("slower", "intervals") for s in H.SHAPES},
                   **{("test_einsum_transpose", s): ("inconclusive", "intervals") for s in H.SHAPES}}  # +-3% around 2%
    assert code == 1 and not result["unpaired"]
    code, out = history(capsys, "compare", "--latest", "--url", url)
    assert "| einsum (test_einsum_trace) " in out.out


def test_rows_b_measured_too_little_before_its_test_was_cut_fail_the_gate(tmp_path, url, capsys):
    """B was interrupted after exp's first process: its exp rows have a value but no interval, and
    nothing judged them; the gate passed (exit 0) on a B that never finished. They now count with the
    rows B lost (exit 1, named, rechecked); the same rows of a B whose test ended ok do not."""
    ci = [0.0099, 0.0101]
    a = H.write_run(tmp_path / "a", H.identity(ops=["exp", "add"], processes=3, created="2026-11-01T00:00:00+0000"),
                    [H.row(op, s, 0.01, 0.01, ci=ci) for op in ("exp", "add") for s in H.SHAPES])
    rows_b = [H.row("exp", s, 0.01, 0.01, processes=1) for s in H.SHAPES] + \
        [H.row("add", s, 0.01, 0.01, ci=ci) for s in H.SHAPES]
    b = H.write_run(tmp_path / "b", H.identity(ops=["exp", "add"], processes=3, created="2026-11-02T00:00:00+0000"),
                    rows_b)
    whole = H.write_run(tmp_path / "whole", H.identity(ops=["exp", "add"], processes=3,
                                                       created="2026-11-03T00:00:00+0000"), rows_b)
    status = b / "ops_status.csv"
    lines = status.read_text().splitlines()
    status.write_text("\n".join(x.replace(",ok,", ",interrupted,") if "test_perf_exp" in x else x for x in lines) + "\n")
    assert ",interrupted," in status.read_text()
    imported(capsys, url, [a, b, whole])
    code, out = history(capsys, "compare", "1", "2", "--url", url)
    assert code == 1 and f"{len(H.SHAPES)} row(s) measured in A lost in B" in out.err, out.err
    assert "- Not judged, their test cut in B" in out.out and "exp" in out.out.split("Not judged")[1], out.out
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json")
    summary = json.loads(out.out)["summary"]
    assert summary["lost_rows"] == len(H.SHAPES) and summary["failing_rows"] == len(H.SHAPES), summary
    assert history(capsys, "compare", "1", "3", "--url", url)[0] == 0  # B complete: its unjudged rows pass


def test_a_gate_that_paired_nothing_does_not_pass(tmp_path, url, capsys):
    """Two runs of different ops share no row: `compare` used to print a caveat and exit 0, so a CI
    gate passed having checked nothing. Now it exits 2 saying why and how to fix it; the report
    (what each selected) is still printed, and --fail-on none accepts it."""
    imported(capsys, url, H.series(tmp_path, [{"exp": 1.0}, {"add": 2.0}], noise=0.003, interval=0.03))
    code, out = history(capsys, "compare", "1", "2", "--url", url)
    assert code == 2, out.err
    assert "share no row both measured" in out.err and "Fix: compare runs of the same ops" in out.err
    # the two runs selected different ops: what each measured, and that none is in common, is said
    assert "- A and B select different tests (config.ops: ['exp'] -> ['add'])" in out.out, out.out
    assert "they select different tests, and none in common (3 row(s) only in A, 3 only in B)" in out.err, out.err
    assert history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "none")[0] == 0
    # the same ops, every row of B failed: nothing was compared, but B lost every row A measured,
    # which fails the gate (exit 1, not 2), and the report says why
    dirs = []
    for i, status in enumerate(("ok", "failed")):
        rows = [H.row("exp", shape, 0.01, 0.01, status=status) for shape in H.SHAPES]
        dirs.append(H.write_run(tmp_path / f"f{i}", H.identity(corpus_commit=f"corpus{i:02d}" + "0" * 32,
                                                               created=f"2026-11-1{i}T02:00:00+0000", ops=["exp"]), rows))
    imported(capsys, url, dirs)
    code, out = history(capsys, "compare", "3", "4", "--url", url, "--format", "json")
    assert code == 1 and "3 row(s) measured in A lost in B" in out.err, out.err
    assert {(u["why"], u["lost_in"]) for u in json.loads(out.out)["unpaired"]} == {("round 0: run B failed", "B")}
    # ... and the other way round (A's rows failed, B measured them) nothing was judged: exit 2
    code, out = history(capsys, "compare", "4", "3", "--url", url, "--format", "json")
    assert code == 2 and "ops_status.csv says why" in out.err


def test_a_repeat_within_its_intervals_is_not_flagged(tmp_path, url, capsys):
    """Rows with +-3% intervals, 0.5% apart: none flagged. Judged together (6 rows), each change's
    interval is about +-4.5% wide (the rows' intervals at the family-wise level), inside 6%."""
    imported(capsys, url, H.series(tmp_path, [{"exp": 1.0, "add": 2.0}] * 2, noise=0.005, interval=0.03, seed=4))
    code, out = history(capsys, "compare", "--latest", "--url", url, "--format", "json", "--fail-on", "changed",
                        "--threshold", "0.06")
    result = json.loads(out.out)
    assert code == 0, out.err
    assert {v for v, _ in verdicts(result).values()} == {"no difference beyond threshold"}
    assert result["summary"]["failing_rows"] == 0


def test_a_compare_says_when_torchs_baseline_moved_between_the_runs(tmp_path, url, capsys):
    """Two repeat runs on a machine busy during A: every row and torch's baseline read 15% faster in
    B. `summary A --ab B` said "suspect machine drift"; `history compare` said only "-15% overall"."""
    def run(name, scale, created):
        ident = {**H.identity(ops=["exp", "add"], processes=3), "created": created}
        rows = [H.row(op, shape, lat * 4 ** j * scale, 0.01 * 4 ** j * scale, ci=[lat * 4 ** j * scale * 0.99,
                                                                                  lat * 4 ** j * scale * 1.01])
                for op, lat in (("exp", 1.0), ("add", 2.0)) for j, shape in enumerate(H.SHAPES)]
        return H.write_run(tmp_path / name, ident, rows)

    imported(capsys, url, [run("a", 1.0, "2026-11-01T00:00:00+0000"), run("b", 0.85, "2026-11-02T00:00:00+0000"),
                           run("c", 0.85 * 1.002, "2026-11-03T00:00:00+0000")])
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json", "--fail-on", "none")
    drift = json.loads(out.out)["summary"]["baseline_drift"]
    assert drift["median"] == pytest.approx(0.85) and drift["rows"] == 6, drift
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "none")
    assert code == 0 and ("- The torch baseline itself moved -15.00% between the runs (the median over 6 row(s) "
                          "timed by each run's timer") in out.out, out.out
    assert "suspect machine drift: every row's change includes it." in out.out
    code, out = history(capsys, "compare", "2", "3", "--url", url, "--fail-on", "none")  # a repeat: no word of it
    assert code == 0 and "Overall B/A latency" in out.out and "baseline itself moved" not in out.out, out.out
    # B on another vendor's device: their own speeds, no machine drift (it said "suspect machine drift").
    ident = {**H.identity(backend="musa", ops=["exp", "add"], processes=3), "created": "2026-11-04T00:00:00+0000"}
    rows = [H.row(op, shape, lat * 4 ** j * 0.7, 0.01 * 4 ** j * 0.7, device_name=H.DEVICE_NAMES["musa"],
                  ci=[lat * 4 ** j * 0.7 * 0.99, lat * 4 ** j * 0.7 * 1.01])
            for op, lat in (("exp", 1.0), ("add", 2.0)) for j, shape in enumerate(H.SHAPES)]
    imported(capsys, url, [H.write_run(tmp_path / "musa", ident, rows)])
    code, out = history(capsys, "compare", "1", "4", "--url", url, "--fail-on", "none")
    assert "- The torch baseline itself moved -30.00% between the runs" in out.out and "machine drift" not in out.out
    assert f"A and B ran on different devices (backend cuda -> musa; device {H.DEVICE_NAMES['cuda']} -> " \
        f"{H.DEVICE_NAMES['musa']}), so every row's change includes the devices' own difference. `zlbench history " \
        "vendors` compares backends" in out.out, out.out
    # A run whose device is unknown (a FlagGems log imported without --backend/--device) is no other device.
    from zlbench.history.compare import _result_lines

    s = json.loads(history(capsys, "compare", "1", "2", "--url", url, "--format", "json", "--fail-on", "none")[1].out)
    s = s["summary"]
    s["run_b"] = {**s["run_b"], "backend": None, "device_name": None}
    assert any("suspect machine drift" in line for line in _result_lines(s)), _result_lines(s)


def test_the_softmax_demo_case_fused_against_three_pass(tmp_path, url, capsys):
    """Issue 23: fused (A) against three-pass (B) softmax read '-69% overall', 0 changed rows, exit 0.
    Runs with intervals: every row flagged, exit 1. Runs without: one clear line saying to rerun
    with timer.processes>=2, every row inconclusive, nothing failed silently as 'no change'."""
    with_ci = H.series(tmp_path / "ci", [{"softmax": 0.31}, {"softmax": 1.0}], noise=0.01, interval=0.04)
    without = H.series(tmp_path / "one", [{"softmax": 0.31}, {"softmax": 1.0}], noise=0.01, first=2)
    imported(capsys, url, with_ci + without)
    code, out = history(capsys, "compare", "1", "2", "--url", url)
    assert code == 1 and "Changed rows (3)" in out.out and "too little history" not in out.out
    assert "not a verdict" not in out.out
    code, out = history(capsys, "compare", "3", "4", "--url", url)
    # nothing judged: the gate does not pass (it exited 0), and says so in the report and on stderr
    assert code == 2 and "Changed rows (0)" in out.out and "**no row judged**" in out.out
    assert "none of the 3 paired row(s) had a noise estimate" in out.err and "Fix:" in out.err
    assert ("**No process-level intervals** in A (3 row(s)) and B (3 row(s))" in out.out
            and "Fix: rerun with timer.processes>=2" in out.out), out.out
    assert re.search(r"Overall B/A latency: \*\*\+2\d\d\.\d\d%\*\*.*not a verdict: no row has a noise estimate",
                     out.out), out.out
    # One run with intervals is not enough (a one-process value varies more than they allow): none.
    code, out = history(capsys, "compare", "3", "2", "--url", url, "--format", "json")
    result = json.loads(out.out)
    assert code == 2 and {n for _, n in verdicts(result).values()} == {"none"}
    assert result["summary"]["gate_exit"] == 2 and result["summary"]["judged_rows"] == 0
    assert history(capsys, "compare", "3", "2", "--url", url, "--fail-on", "none")[0] == 0
    code, out = history(capsys, "compare", "3", "3", "--url", url)
    assert code == 2 and "both name run 3" in out.err
    assert result["summary"]["without_intervals"] == {"A": 3, "B": 0}


def _offset_pair(tmp_path, factor, moved_row=None, first_day=1):
    """Two plain runs of 12 ops x 3 shapes with process-level intervals (+-2%): B's rows are A's
    times factor(i) (i: the row's index). moved_row: that op's rows in B are 40% faster and marked
    BENCHMARK_PROCESS_UNSTABLE (their processes disagreed). first_day: A's date (another pair of
    the same dates would be the same two runs, which the store records once)."""
    ops = [f"op{k:02d}" for k in range(12)]
    runs = []
    for run in (0, 1):
        ident = H.identity(created=f"2026-11-{run + first_day:02d}T00:00:00+0000", processes=3, ops=ops)
        rows = []
        for i, (op, shape) in enumerate((op, shape) for op in ops for shape in H.SHAPES):
            lat = 0.01 * (1 + i % 5) * (factor(i) if run else 1.0)
            unstable = run and op == moved_row
            lat *= 0.6 if unstable else 1.0
            rows.append(H.row(op, shape, lat, 0.02, ci=[lat * 0.98, lat * 1.02],
                              markers=["BENCHMARK_PROCESS_UNSTABLE"] if unstable else []))
        runs.append(H.write_run(tmp_path / f"r{run}", ident, rows))
    return runs


def test_the_overall_line_of_two_runs_carries_their_offset_and_leaves_out_rows_drawn_per_process(tmp_path, url,
                                                                                                capsys):
    """Repeat plain runs on the H200 differ by an offset over all their rows (0.1-0.5%) that no
    resampling of rows sees: 15 of 46 such pairs read an overall change whose interval left out 0.
    B here is A plus 0.3% on every row (a little spread): the overall interval holds 0. A real 5%
    slowdown of every row stays outside it. A row whose processes disagreed (40% off in B) is left
    out of the mean, and counted."""
    imported(capsys, url, _offset_pair(tmp_path / "offset", lambda i: 1.003 + 0.0004 * (i % 3 - 1),
                                       moved_row="op05"))
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json", "--fail-on", "none")
    result = json.loads(out.out)
    o = result["summary"]["overall"]
    assert o["lo"] < 1 < o["hi"] and o["geomean"] == pytest.approx(1.003, abs=2e-4), o
    assert o["rows"] == 33 and o["process_unstable_left_out"] == 3 and o["run_offset_sd"] == 0.002
    # Each side is at least both runs' offset (1.96 x 0.2% x sqrt 2) from the estimate.
    both_runs = 1.959964 * 0.002 * math.sqrt(2)
    assert min(math.log(o["geomean"] / o["lo"]), math.log(o["hi"] / o["geomean"])) >= both_runs - 1e-9, o
    # The same kept rows resampled over tests alone read a settled +0.3%: what the line said before.
    kept = [r for r in result["rows"] if not r["process_unstable"]]
    assert stats.overall([r["ratio"] for r in kept], clusters=[r["node"] for r in kept])["lo"] > 1
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "none")
    assert re.search(r"Overall B/A latency: \*\*\+0\.30%\*\* \(95% CI -0\.\d\d% \.\. \+0\.\d\d%: a bootstrap "
                     r"resampling tests, widened by each run's offset over all its rows, sd 0\.2% a run\) over 33 "
                     r"row\(s\) \(geometric mean; negative = B faster\); 3 process-unstable row\(s\) left out", out.out), out.out
    imported(capsys, url, _offset_pair(tmp_path / "slower", lambda i: 1.05 + 0.002 * (i % 3 - 1), first_day=3))
    code, out = history(capsys, "compare", "3", "4", "--url", url, "--format", "json")
    o = json.loads(out.out)["summary"]["overall"]
    assert code == 1 and o["lo"] > 1.04 and o["process_unstable_left_out"] == 0, o


def test_the_overall_line_of_two_runs_leaves_out_rows_whose_rounds_are_too_noisy(tmp_path, url, capsys):
    """Two runs of three rounds each (no process-level intervals: the rows' own rounds are their
    noise): `pick` swings 2x from round to round in B, so its rows read unstable and judge nothing;
    they are left out of the overall line and counted."""
    runs = []
    for run in (0, 1):
        ident = H.identity(created=f"2026-11-0{run + 1}T00:00:00+0000", ops=["exp", "abs", "neg", "pick"])
        rows = [H.row(op, shape, (0.5 if run and op == "pick" and rnd != 1 else 1.0) * (1 + 0.001 * rnd), 0.5,
                      rnd=rnd) for op in ("exp", "abs", "neg", "pick") for shape in H.SHAPES for rnd in range(3)]
        runs.append(H.write_run(tmp_path / f"r{run}", ident, rows))
    imported(capsys, url, runs)
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json", "--fail-on", "none")
    result = json.loads(out.out)
    assert {r["verdict"] for r in result["rows"] if r["op"] == "pick"} == {"unstable"}, result["rows"]
    o = result["summary"]["overall"]
    assert o["rows"] == 9 and o["unstable_left_out"] == 3 and o["geomean"] == pytest.approx(1.0), o
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "none")
    assert "over 9 row(s) (geometric mean; negative = B faster); 3 unstable row(s) left out" in out.out, out.out


def test_the_interval_rule_each_value_outside_the_others_interval():
    # B outside A's interval, but A inside B's (B's interval is wide): not moved, whatever the change.
    s = interval_stat(1.0, (0.97, 1.03), 1.10, (0.90, 1.30))
    assert not moved(s) and interval_verdict(s, 0.02) == "inconclusive"
    # Both outside: moved; by 1% only: below the threshold.
    s = interval_stat(1.0, (0.998, 1.002), 1.01, (1.008, 1.012))
    assert moved(s) and interval_verdict(s, 0.02) == "changed below threshold"
    # The intervals overlap (1.03 > 1.01) and still each value is outside the other's: flagged,
    # where a non-overlap rule would call it no change.
    s = interval_stat(1.0, (0.96, 1.03), 1.05, (1.01, 1.10))
    assert moved(s) and interval_verdict(s, 0.02) == "slower"
    # Symmetric: swapping the runs gives the inverse change and the same decision.
    back = interval_stat(1.05, (1.01, 1.10), 1.0, (0.96, 1.03))
    assert back.ratio == pytest.approx(1 / s.ratio) and interval_verdict(back, 0.02) == "faster"
    assert (back.lo, back.hi) == pytest.approx((1 / s.hi, 1 / s.lo))
    # A tight pair well inside the threshold: no difference beyond it.
    s = interval_stat(1.0, (0.995, 1.005), 1.002, (0.997, 1.007))
    assert interval_verdict(s, 0.02) == "no difference beyond threshold"


def test_rows_judged_together_are_judged_at_the_family_wise_level():
    """A gate fails on any one of a comparison's rows: per row the interval rule flagged 0.66% of
    repeat runs' rows on the H200, and 9 of 47 pairs of repeat runs failed `--fail-on slower`. Over
    m rows each 95% interval is widened to the 1 - 0.05/m level (Bonferroni on the normal quantile)."""
    from zlbench.ab.intervals import family_factor, for_family

    assert family_factor(1) == pytest.approx(1.0) and family_factor(50) == pytest.approx(3.2905 / 1.95996, rel=1e-4)
    lo, hi = for_family((0.98, 1.0 / 0.98), 50)  # symmetric in log space about 1
    assert math.log(hi) == pytest.approx(-math.log(lo)) == pytest.approx(-math.log(0.98) * family_factor(50))
    # 2.5% apart with +-2% intervals: moved when judged alone, not among 50 rows.
    a, ci_a, b, ci_b = 1.0, (0.98, 1.02), 1.025, (1.005, 1.046)
    assert interval_verdict(interval_stat(a, ci_a, b, ci_b), 0.02) == "slower"
    assert interval_verdict(interval_stat(a, ci_a, b, ci_b, family=50), 0.02) == "inconclusive"
    # A 10% slowdown is still one.
    assert interval_verdict(interval_stat(1.0, (0.98, 1.02), 1.10, (1.078, 1.122), family=50), 0.02) == "slower"


def test_process_unstable_rows_are_named(tmp_path, url, capsys):
    """A row whose op's processes read apart is named process-unstable; one marked for its torch
    baseline's processes alone is not (the store keeps the marker's reason, which tells them apart)."""
    ident = [H.identity(created=f"2026-11-0{i}T00:00:00+0000", processes=3) for i in (1, 2)]

    def rows(i, lat):
        marked = ["BENCHMARK_PROCESS_UNSTABLE"] if i else []
        op = H.row("exp", "[[64,64]]", lat, 0.5, ci=[lat * 0.8, lat * 1.25], markers=marked)
        base = H.row("abs", "[[64,64]]", lat, 0.5, ci=[lat * 0.99, lat * 1.01], markers=marked)
        if i:
            op["marker_reason"] = f"processes read {lat * 0.8:.4g}, {lat:.4g}, {lat * 1.2:.4g} ms"
            base["marker_reason"] = "torch processes read 0.4, 0.5, 0.6 ms"
        return [op, base]

    runs = [H.write_run(tmp_path / f"r{i}", ident[i], rows(i, lat)) for i, lat in enumerate((1.0, 1.002))]
    imported(capsys, url, runs)
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--all")
    assert code == 0 and "1 row(s) whose op's processes read apart in A or B" in out.out, out.out
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json")
    assert {r["op"]: r["process_unstable"] for r in json.loads(out.out)["rows"]} == {"exp": True, "abs": False}


def test_regressions_use_the_intervals_of_runs_that_carry_them(tmp_path, url, capsys):
    """exp steps up 6% at the 4th of 6 runs with a run-to-run noise of 0.2%. The spread rule calls it
    a regression; runs whose intervals are +-15% (their processes disagree that much) do not: the
    step lies inside them. With +-1% intervals it is a regression again, its noise the intervals'."""
    lat = [{"exp": 1.0}] * 3 + [{"exp": 1.06}] * 3
    cases = {"spread": (None, 1), "wide": (0.15, 0), "narrow": (0.01, 1)}
    for name, (interval, want) in cases.items():
        store = f"sqlite:///{tmp_path / f'{name}.db'}"
        imported(capsys, store, H.series(tmp_path / name, lat, noise=0.002, seed=5, interval=interval))
        code, out = history(capsys, "regressions", "--url", store, "--format", "json")
        steps = json.loads(out.out)["steps"]
        assert code == want and len(steps) == 3 * want, (name, steps)
        if interval:
            assert all(s["noise_from"] == "intervals" and s["noise_pct"] == pytest.approx(100 * interval, rel=0.1)
                       for s in steps), steps
        elif steps:
            assert {s["noise_from"] for s in steps} == {"spread"}


def test_a_run_without_intervals_in_a_series_that_has_them_is_no_step(tmp_path, url, capsys):
    """Six runs whose rows carry +-6% intervals, and two cut runs among them whose rows were measured
    in one process (no interval) and read 8% slower: the row fell back to the runs' spread (0.2%)
    and steps were reported. Such runs are left out of the row's series; a real step still shows."""
    def runs(root, before, between, after):
        cut = H.series(root / "cut", [{"exp": between}] * 2, noise=0.002, seed=6, first=3, interval=0.06)
        for run in cut:  # the same caliber (3 processes planned), each row measured in one
            rows = [{**json.loads(x), "processes": 1, "latency_ci": None} for x in (run / "rows.jsonl").read_text().splitlines()]
            (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return (H.series(root / "a", [{"exp": before}] * 3, noise=0.002, seed=5, interval=0.06) + cut
                + H.series(root / "b", [{"exp": after}] * 3, noise=0.002, seed=7, first=5, interval=0.06))

    imported(capsys, url, runs(tmp_path / "flat", 1.0, 1.08, 1.0))
    code, out = history(capsys, "regressions", "--url", url, "--format", "json")
    assert code == 0 and json.loads(out.out)["steps"] == [], out.out
    stepped = f"sqlite:///{tmp_path / 'stepped.db'}"
    imported(capsys, stepped, runs(tmp_path / "real", 1.0, 1.08, 1.3))
    code, out = history(capsys, "regressions", "--url", stepped, "--format", "json")
    assert code == 1 and {s["noise_from"] for s in json.loads(out.out)["steps"]} == {"intervals"}, out.out


def test_regressions_name_the_test_of_a_step_and_pass_over_empty_replays(tmp_path, url, capsys):
    """Two tests of one op timing one shape: a step of one is named by its test. A view's empty
    replay (BENCHMARK_NO_DEVICE_WORK) reading 1.2 then 2.5 ns is no regression; a view that became
    a 3 us copy is one (it was passed over with the empty replays)."""
    dirs = []
    for i in range(8):
        step = 1.3 if i >= 4 else 1.0
        rows = [{**H.row("einsum", "[[64,64]]", lat, 0.01), "node": f"benchmark/test_einsum.py::{test}"}
                for test, lat in (("test_einsum_trace", 0.002 * step), ("test_einsum_outer", 0.004))]
        rows.append(H.row("alias", "[[64,64]]", (2.5e-6 if i >= 4 else 1.2e-6), 0.01, markers=["BENCHMARK_NO_DEVICE_WORK"]))
        rows.append(H.row("unfold", "[[64,64]]", 0.003 * (1 + i % 2 / 100) if i >= 4 else 1.5e-6 * (1 + i % 2), 0.01,
                          markers=[] if i >= 4 else ["BENCHMARK_NO_DEVICE_WORK"]))
        ident = H.identity(corpus_commit=f"corpus{i:02d}" + "0" * 32, zlbench_commit=f"zl{i:02d}",
                           created=f"2026-11-{i + 1:02d}T02:00:00+0000", ops=["einsum", "alias", "unfold"])
        dirs.append(H.write_run(tmp_path / f"run{i}", ident, rows))
    imported(capsys, url, dirs)
    code, out = history(capsys, "regressions", "--url", url, "--format", "json")
    steps = json.loads(out.out)["steps"]
    assert code == 1 and sorted((s["op"], s.get("test"), s["first_run"]) for s in steps) == [
        ("einsum", "test_einsum_trace", 5), ("unfold", None, 5)], steps
    unfold = next(s for s in steps if s["op"] == "unfold")
    assert unfold["kind"] == "regression" and unfold["before_ms"] == pytest.approx(1e-4) and unfold["after_ms"] >= 0.003
    code, out = history(capsys, "regressions", "--url", url)
    assert "einsum (test_einsum_trace)" in out.out and "alias" not in out.out.split("|", 1)[-1]
    assert "no device work" in out.out  # the view's side of the step says what it was


def test_the_site_draws_each_runs_interval(tmp_path, url, capsys):
    from html.parser import HTMLParser

    imported(capsys, url, H.series(tmp_path / "ci", [{"exp": 1.0}] * 3, interval=0.03) +
             H.series(tmp_path / "one", [{"exp": 1.0}] * 3, first=3))
    assert history(capsys, "html", "--out", tmp_path / "site", "--url", url)[0] == 0

    class Bars(HTMLParser):
        def __init__(self):
            super().__init__()
            self.charts, self.bars = [], []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "svg":
                self.charts.append(0)
            elif tag == "line" and a.get("class") == "ci":
                self.charts[-1] += 1
                self.bars.append((float(a["y1"]), float(a["y2"])))

    page = Bars()
    page.feed((tmp_path / "site" / "index.html").read_text())
    # Two calibers (with and without processes), one chart each: bars only where runs carry intervals.
    assert sorted(page.charts) == [0, 3], page.charts
    assert all(y1 - y2 > 5 for y1, y2 in page.bars), page.bars  # +-3% spans pixels (y grows downwards)
    html = (tmp_path / "site" / "index.html").read_text()
    assert "process-level interval" in html
    # The trends' x axis says when: each end names its run and date (and commit, where known).
    import re

    ends = re.findall(r'<text class="x-axis"[^>]*>([^<]*)</text>', html)
    assert ends and all(re.match(r"run \d+ \d{4}-\d{2}-\d{2}", e) for e in ends), ends


def _plain_runs(tmp_path, *switches, args=("share_kernels=false",)):
    """Real plain runs of the fixture corpus whose effect is known (live_op: ZL_FIXTURE_EFFECT, 30%,
    slower with the switch on; its reported latencies do not depend on the machine's load), each node
    in 2 processes, into zl_runs/ (one store); returns their run dirs. share_kernels=false: each run
    compiles its kernels itself (the evidence `zlbench summary A --ab B` compares)."""
    runs = []
    for switch in switches:
        run_dir = tmp_path / "zl_runs" / f"{len(list(tmp_path.glob('zl_runs/*-*')))}-{switch}"
        res = zlbench(f"hydra.run.dir={run_dir}", "progress=none", f"corpus.root={FIXTURES / 'ab_corpus'}",
                      "corpus.name=fixture", "ops=[live_op]", "timer.processes=2", *args, cwd=tmp_path,
                      env={"ZL_FIXTURE_SWITCH": switch})
        assert res.returncode == 0, res.stderr[-3000:]
        rows = [json.loads(line) for line in (run_dir / "rows.jsonl").read_text().splitlines()]
        assert rows and all(r["processes"] == 2 and r["latency_ci"] for r in rows), rows
        runs.append(run_dir)
    return runs


def _compare(tmp_path, a, b):
    res = subprocess.run([sys.executable, "-m", "zlbench", "history", "compare", str(a), str(b), "--format", "json"],
                         cwd=tmp_path, capture_output=True, text=True)
    return res, (json.loads(res.stdout) if res.stdout.strip().startswith("{") else None)


@pytest.mark.slow
def test_real_runs_compare_on_their_intervals_a_slowdown_fails_a_repeat_passes(tmp_path, capsys):
    """Two real runs of the same caliber compare on their own process-level intervals (no "too little
    history"): a 30% slowdown is flagged and exits 1, a repeat flags nothing and exits 0. A run's
    run.log imported in its place keeps its intervals (it lost them: no noise, inconclusive)."""
    off, again, on = _plain_runs(tmp_path, "0", "0", "1")
    res, result = _compare(tmp_path, off, on)
    assert res.returncode == 1, res.stderr[-2000:]
    assert result["rows"] and {r["noise"] for r in result["rows"]} == {"intervals"}
    assert {r["verdict"] for r in result["rows"]} == {"slower"}, result["rows"]
    # The same two runs as a sweep's sides (`zlbench summary A --ab B`): one value a side, judged on
    # the same intervals (they read 'inconclusive' on no rounds). A repeat compiled identical
    # kernels: not live, whatever its values.
    for other, want in ((on, {"slower"}), (again, {"not live"})):
        out_dir = tmp_path / f"ab-{other.name}"
        res = zlbench("summary", str(off), "--ab", str(other), "--out", str(out_dir), cwd=tmp_path, defaults=True)
        ab = json.loads((out_dir / "ab.json").read_text())
        assert ab["rows"] and {r["verdict"] for r in ab["rows"]} == want, (res.stderr[-2000:], ab["rows"])
        assert ab["summary"]["interval_rows"] == (len(ab["rows"]) if other == on else 0)  # judged so
        # identical kernels keep their intervals (the free A/A check ab.md says they are), not a verdict
        assert all(r["lo"] is not None and r["lo"] <= r["ratio"] <= r["hi"] for r in ab["rows"]), ab["rows"]
    assert "judged on the two runs' process-level intervals" in (tmp_path / f"ab-{on.name}" / "ab.md").read_text()
    url = f"sqlite:///{tmp_path / 'logs.db'}"
    imported(capsys, url, [off / "run.log", on])
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json")
    logged = json.loads(out.out)
    assert code == 1 and logged["rows"] and not logged["unpaired"], out.err
    assert {(r["noise"], r["verdict"]) for r in logged["rows"]} == {("intervals", "slower")}, logged["rows"]
    res, result = _compare(tmp_path, off, again)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "slower" not in {r["verdict"] for r in result["rows"]} and "faster" not in {r["verdict"] for r in result["rows"]}
    assert result["summary"]["recheck"] is None  # nothing failed: nothing to measure again

    # A failing gate names the command that measures the failing rows' ops again with B's settings,
    # in a run dir beside B's; run as printed (in B's environment), it is B's caliber and fails again.
    res, result = _compare(tmp_path, off, on)
    recheck = result["summary"]["recheck"]
    assert recheck["run_dir"] == str(on) + ".recheck" and "ops=[live_op]" in recheck["command"], recheck
    argv = shlex.split(recheck["command"])  # B's switch first: the command is B's caliber in any shell
    assert argv[:5] == ["env", "ZL_FIXTURE_SWITCH=1", "python", "-m", "zlbench"], argv
    assert sum(a.startswith("ops=") for a in argv) == 1, argv
    md = subprocess.run([sys.executable, "-m", "zlbench", "history", "compare", str(off), str(on)], cwd=tmp_path,
                        capture_output=True, text=True).stdout
    assert f"`{recheck['command']}`" in md and f"then compare A with that run (`{recheck['compare']}`)" in md, md
    follow = shlex.split(recheck["compare"])  # pasteable: A by its run dir, this store named
    assert follow[:4] == ["python", "-m", "zlbench", "history"] and follow[-3:] == ["compare", str(off), f"{on}.recheck"]
    rerun = subprocess.run([argv[0], argv[1], sys.executable, *argv[3:]], cwd=tmp_path, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    res, again_slower = _compare(tmp_path, off, Path(recheck["run_dir"]))
    assert res.returncode == 1 and {r["verdict"] for r in again_slower["rows"]} == {"slower"}, again_slower["rows"]
    # slower twice: confirmed, and no third run is offered
    assert again_slower["summary"]["b_is_recheck"] and again_slower["summary"]["recheck"] is None
    md = subprocess.run([sys.executable, "-m", "zlbench", "history", "compare", str(off), recheck["run_dir"]],
                        cwd=tmp_path, capture_output=True, text=True).stdout
    assert "row(s) slower in this second run of B's code too: **confirmed**" in md and "Before reading them" not in md, md
    assert recheck["command"].count("store.url=") == 1 and f"store.url=sqlite:///{tmp_path}" in recheck["command"], \
        recheck["command"]  # the store compare used: the follow-up compare finds the recheck there
    assert _compare(tmp_path, on, Path(recheck["run_dir"]))[1]["summary"]["same_caliber"]  # B's, its selection aside
    # Asked again, the gate names a new run dir: into the one the first recheck filled, the command
    # would resume it and measure nothing.
    assert _compare(tmp_path, off, on)[1]["summary"]["recheck"]["run_dir"] == str(on) + ".recheck2"

    # At defaults (share_kernels) the second run of one compile environment compiles nothing: it has
    # no kernels to compare, and the repeat reads as one with liveness unknown, judged, not "not live".
    first, second = _plain_runs(tmp_path, "0", "0", args=())
    kernels = [json.loads((d / "artifacts.json").read_text()) for d in (first, second)]
    assert kernels[0]["main"]["live_op"] and not kernels[1], kernels
    out_dir = tmp_path / "ab-shared"
    zlbench("summary", str(first), "--ab", str(second), "--out", str(out_dir), cwd=tmp_path, defaults=True)
    ab = json.loads((out_dir / "ab.json").read_text())
    assert ab["rows"] and "not live" not in {r["verdict"] for r in ab["rows"]}, ab["rows"]
    assert not {"slower", "faster"} & {r["verdict"] for r in ab["rows"]}, ab["rows"]
    md = (out_dir / "ab.md").read_text()
    assert "Liveness: **unknown**" in md and "share_kernels=false for the evidence" in md, md[:2000]


@pytest.mark.slow
def test_an_aa_run_as_two_plain_runs_is_read_as_an_aa(tmp_path):
    """ab.aa=true ab.side=off, then =on: both sides one value. Read with `zlbench summary A --ab B`
    it said AXIS NOT LIVE and exited 3; it is an A/A (each side's rounds paired)."""
    dirs = []
    for side in ("off", "on"):
        run_dir = tmp_path / side
        res = zlbench(f"hydra.run.dir={run_dir}", "progress=none", f"corpus.root={FIXTURES / 'ab_corpus'}",
                      "corpus.name=fixture", "ops=[live_op]", "ab=env", "ab.var=ZL_FIXTURE_SWITCH",
                      "ab.values=[0,1]", "ab.aa=true", f"ab.side={side}", "ab.rounds=3",
                      "store.url=none", cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        dirs.append(run_dir)
    res = zlbench("summary", str(dirs[0]), "--ab", str(dirs[1]), "--out", str(tmp_path / "cmp"), cwd=tmp_path,
                  defaults=True)
    ab = json.loads((tmp_path / "cmp" / "ab.json").read_text())
    assert res.returncode == 0 and ab["summary"]["aa"] and ab["summary"]["liveness"] == "A/A", res.stderr[-2000:]
    assert ab["rows"] and "not live" not in {r["verdict"] for r in ab["rows"]}
    # two logs of different ops share no row: nothing was compared, and the exit says so
    other = tmp_path / "other.log"
    other.write_text('[INFO] {"op_name": "zz", "dtype": "torch.float16", "result": [{"shape_detail": [[8]], '
                     '"latency_base": 0.01, "latency": 0.02, "speedup": 0.5}]}\n')
    res = zlbench("summary", str(dirs[0] / "run.log"), "--ab", str(other), cwd=tmp_path, defaults=True)
    assert res.returncode == 2 and "share no row both measured" in res.stderr, res.stderr[-2000:]
    # `history compare` pairs rows within a side: the two sides share none, and it says so and where
    # they pair (it said "no row both measured", every row listed as on one side only).
    url = f"sqlite:///{tmp_path / 'sides.db'}"
    assert zlbench("history", "--url", url, "import", *map(str, dirs), cwd=tmp_path, defaults=True).returncode == 0
    res = zlbench("history", "--url", url, "compare", "1", "2", cwd=tmp_path, defaults=True)
    assert res.returncode == 2 and "run 1 holds rows of side off and run 2 of side on" in res.stderr, res.stderr[-2000:]
    assert "`zlbench summary A_DIR --ab B_DIR`" in res.stderr
    # the report says so too, not that the runs select different tests (a review: a plain run of
    # exp and softmax against an A/B of softmax read "no row is in both", every row unselected)
    assert "- A holds rows of side off and B of side on: rows pair within one side" in res.stdout, res.stdout
    assert "select different tests" not in res.stdout


def test_the_run_offset_is_read_from_the_calibers_history_where_it_has_one(tmp_path, url, capsys):
    """The overall line's run offset (0.2% a run) was measured on an H200 and used everywhere: on a
    shared CPU 3 of 4 repeat pairs read an overall change whose interval left out 0. Where earlier
    runs of B's caliber share rows, their own offsets give it (the H200's figure its floor)."""
    offsets = [1.0, 1.02, 0.985, 1.01, 0.99, 1.015, 1.0]  # each run moves all its rows together
    ops = {f"op{i:02d}": 0.01 * (1 + i) for i in range(8)}
    dirs = H.series(tmp_path, [{op: v * f for op, v in ops.items()} for f in offsets], noise=0.001, interval=0.03)
    imported(capsys, url, dirs)
    code, out = history(capsys, "compare", "6", "7", "--url", url, "--format", "json", "--fail-on", "none")
    o = json.loads(out.out)["summary"]["overall"]
    assert o["run_offset_runs"] == 6 and o["run_offset_sd"] == pytest.approx(statistics.stdev(
        math.log(f) for f in offsets[:6]), rel=0.15), o  # the 6 runs before B, A among them
    assert o["lo"] < 1 < o["hi"], o  # B is 1.5% below A: within what this machine's runs move by
    code, out = history(capsys, "compare", "6", "7", "--url", url, "--fail-on", "none")
    assert "(from 6 earlier runs of B's caliber)" in out.out, out.out
    # Two runs with no history keep the floor.
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json", "--fail-on", "none")
    o = json.loads(out.out)["summary"]["overall"]
    assert o["run_offset_sd"] == 0.002 and o["run_offset_runs"] == 0



def test_a_step_in_the_history_is_no_run_offset(tmp_path, url, capsys):
    """A change that moved every row 5% four runs before B read as a 2.6% run offset and widened a
    real +3% change's overall interval to -4 .. +11%: the offsets since their last step count."""
    ops = {f"op{i:02d}": 0.01 * (1 + i) for i in range(8)}
    factors = [1.0, 1.001, 0.999, 1.0005, 0.9995, 1.0, 1.05, 1.051, 1.049, 1.05, 1.05 * 1.03]
    dirs = H.series(tmp_path, [{op: v * f for op, v in ops.items()} for f in factors], noise=0.0005, interval=0.01)
    imported(capsys, url, dirs)
    code, out = history(capsys, "compare", "10", "11", "--url", url, "--format", "json", "--fail-on", "none")
    o = json.loads(out.out)["summary"]["overall"]
    assert (o["run_offset_sd"], o["run_offset_runs"]) == (0.002, 0), o  # the runs since the step agree: the floor
    assert o["lo"] > 1.02, o


def test_the_recheck_clears_switches_b_ran_without_and_drops_its_time_limit(tmp_path, monkeypatch):
    """A ran with DEMO_GEMS_FUSED_SOFTMAX=1, B without: the recheck printed in A's shell measured A's
    kernels again and cleared a real regression. And B's launcher.run_timeout_s=5 cut its recheck
    again (a time limit is no setting of what a row means)."""
    from zlbench.history.compare import _not_b_switches
    from zlbench.results.rundir import recheck_command

    a, b = tmp_path / "a", tmp_path / "b"
    for run, env in ((a, {"DEMO_GEMS_FUSED_SOFTMAX": "1"}), (b, {"TRITON_DEFAULT_FP_FUSION": "0"})):
        run.mkdir()
        (run / "run_identity.json").write_text(json.dumps({"switch_env": env, "provenance": {"job_overrides": [
            "launcher.run_timeout_s=5", "ops=[exp,softmax]", "dtypes=[float32]"]}}))
    monkeypatch.setenv("TRITON_DEBUG", "1")  # a switch this shell sets, B did not
    ident_a, ident_b = (json.loads((run / "run_identity.json").read_text()) for run in (a, b))  # as the store keeps them
    unset = _not_b_switches(ident_a, ident_b, {"backend": "cpu"})
    assert unset == ["DEMO_GEMS_FUSED_SOFTMAX", "TRITON_DEBUG"], unset
    words = shlex.split(recheck_command(b, ["softmax"], tmp_path / "b.recheck", unset))
    assert words[:8] == ["env", "-u", "DEMO_GEMS_FUSED_SOFTMAX", "-u", "TRITON_DEBUG", "TRITON_DEFAULT_FP_FUSION=0",
                         "python", "-m"], words
    assert "dtypes=[float32]" in words and "ops=[softmax]" in words and not any("run_timeout_s" in w for w in words)


def test_compare_names_what_sets_two_calibers_apart_and_a_selection_is_no_other_caliber(tmp_path, url, capsys):
    """'Different calibers ... (backend, timer, selection, switches ...)' named nothing; a recheck of
    a gate's failing ops (another selection) read as another configuration."""
    a = H.write_run(tmp_path / "a", H.identity(ops=["exp", "add"], created="2026-11-01T00:00:00+0000"),
                    [H.row(op, s, 0.01, 0.01, ci=[0.0099, 0.0101]) for op in ("exp", "add") for s in H.SHAPES])
    sub = H.write_run(tmp_path / "sub", H.identity(ops=["exp"], created="2026-11-02T00:00:00+0000"),
                      [H.row("exp", s, 0.01, 0.01, ci=[0.0099, 0.0101]) for s in H.SHAPES])
    ident = H.identity(ops=["exp", "add"], created="2026-11-03T00:00:00+0000")
    ident["config"]["timer"]["repeat"] = 2
    other = H.write_run(tmp_path / "other", ident, [H.row("exp", s, 0.01, 0.01, ci=[0.0099, 0.0101]) for s in H.SHAPES])
    imported(capsys, url, [a, sub, other])
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "none")
    assert "- A and B select different tests (config.ops: ['exp', 'add'] -> ['exp']): the rows both measured " \
        f"are compared; {len(H.SHAPES)} row(s) of A's that B did not select are left out" in out.out, out.out
    # the rows B never asked for are no unpaired rows: the comparison of what B measured is complete
    assert "Different calibers" not in out.out and "unpaired" not in out.out.lower(), out.out
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "none", "--format", "json")
    summary = json.loads(out.out)["summary"]
    assert summary["unpaired_rows"] == 0 and summary["not_selected"] == {"A": 0, "B": len(H.SHAPES)}, summary
    # B ran exp but measured one shape fewer: that row is unpaired (B's test ran), not "not selected"
    short = H.write_run(tmp_path / "short", H.identity(ops=["exp"], created="2026-11-04T00:00:00+0000"),
                        [H.row("exp", s, 0.01, 0.01, ci=[0.0099, 0.0101]) for s in H.SHAPES[1:]])
    imported(capsys, url, [short])
    code, out = history(capsys, "compare", "1", "4", "--url", url, "--fail-on", "none", "--format", "json")
    result = json.loads(out.out)
    assert result["summary"]["not_selected"] == {"A": 0, "B": len(H.SHAPES)}, result["summary"]
    assert [(u["op"], u["shape"], u["why"]) for u in result["unpaired"]] == [("exp", H.SHAPES[0], "only in run A")]
    code, out = history(capsys, "compare", "1", "3", "--url", url, "--fail-on", "none")
    assert "**Different calibers**: A and B differ in more than versions and commits (config.timer.repeat: 1 -> 2)" \
        in out.out, out.out
    # A recheck of a B that set a switch A did not: another selection and another caliber, both said;
    # the rows it did not select are still counted, not listed as unpaired
    ident = H.identity(ops=["exp"], created="2026-11-05T00:00:00+0000")
    ident["switch_env"] = {"ZL_FIXTURE_SWITCH": "1"}
    switched = H.write_run(tmp_path / "b.recheck", ident, [H.row("exp", s, 0.01, 0.01, ci=[0.0099, 0.0101]) for s in H.SHAPES])
    imported(capsys, url, [switched])
    code, out = history(capsys, "compare", "1", "5", "--url", url, "--fail-on", "none")
    assert f"- A and B select different tests (config.ops: ['exp', 'add'] -> ['exp']): the rows both measured are " \
        f"compared; {len(H.SHAPES)} row(s) of A's that B did not select are left out." in out.out, out.out
    assert "- **Different calibers**: A and B differ in more than versions and commits and their selection " \
        "(switch_env.ZL_FIXTURE_SWITCH: None -> 1)" in out.out and "unpaired" not in out.out.lower(), out.out
    # the identities come from the store: a run dir moved away since it was recorded is no matter
    shutil.move(str(sub), str(tmp_path / "moved"))
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--fail-on", "none")
    assert "- A and B select different tests (config.ops: ['exp', 'add'] -> ['exp'])" in out.out, out.out


def test_a_recheck_whose_tests_ran_past_the_node_timeout_says_so(tmp_path, url, capsys):
    """A gate's recheck of exp timed out again at B's launcher.node_timeout_s: compare said "no row is
    in both" and "run the recheck again", which at the same limit measures nothing again."""
    a = H.write_run(tmp_path / "a", H.identity(ops=["exp", "add"], created="2026-11-01T00:00:00+0000", processes=3),
                    [H.row(op, s, 0.01, 0.01, ci=[0.0099, 0.0101]) for op in ("exp", "add") for s in H.SHAPES])
    cut = {**{k: None for k in H.row("exp", H.SHAPES[0], 1, 1)}, "op": "exp", "side": "main", "round": 0,
           "node": "benchmark/test_exp.py::test_perf_exp", "status": "timeout",
           "reason": "exceeded launcher.node_timeout_s=0.2s"}
    b = H.write_run(tmp_path / "b.recheck", H.identity(ops=["exp"], created="2026-11-02T00:00:00+0000", processes=3),
                    [cut])
    status = (b / "ops_status.csv").read_text()
    (b / "ops_status.csv").write_text(status.replace(",1.00,,", ",1.00,exceeded launcher.node_timeout_s=0.2s,"))
    imported(capsys, url, [a, b])
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json")
    assert code == 1 and json.loads(out.out)["summary"]["lost_ends"] == {"statuses": {"timeout": len(H.SHAPES)},
                                                                           "node_timeout": "0.2"}, out.out
    code, out = history(capsys, "compare", "1", "2", "--url", url)
    assert f"no row is in both (B lost the {len(H.SHAPES)} row(s) of A's tests it selected: their tests ran past " \
        "launcher.node_timeout_s=0.2s)" in out.out, out.out
    assert f"- The recheck lost {len(H.SHAPES)} row(s): their tests ran past launcher.node_timeout_s=0.2s in it" \
        in out.out and "a recheck at the same limit cannot measure them. To measure them, run the recheck again " \
        "with a longer launcher.node_timeout_s." in out.out and "or run the recheck again." not in out.out, out.out
    # Rows lost to the run's own time limit are timeouts too, and a resume measures them: only rows that
    # all ran past a node limit get the node-limit words.
    from zlbench.history.compare import lost_ends

    lost = [{"side": "main", "node": f"t.py::test_{i}", "lost_in": "B"} for i in (1, 2)]
    mixed = {"main": {"t.py::test_1": ("timeout", "exceeded launcher.node_timeout_s=0.2s"),
                      "t.py::test_2": ("timeout", "whole-run time limit (launcher.run_timeout_s) reached before it ran")}}
    assert lost_ends(lost, mixed) == {"statuses": {"timeout": 2}, "node_timeout": None}
    # A crash is another matter: a draw of one run may not repeat, so running it again is the advice.
    crashed = H.write_run(tmp_path / "c.recheck", H.identity(ops=["exp"], created="2026-11-03T00:00:00+0000",
                                                             processes=3), [{**cut, "status": "crashed"}])
    (crashed / "ops_status.csv").write_text(status.replace(",timeout,", ",crashed,").replace(",1.00,,", ",1.00,exit -11,"))
    imported(capsys, url, [crashed])
    code, out = history(capsys, "compare", "1", "3", "--url", url)
    assert f"- The recheck lost {len(H.SHAPES)} row(s) (their tests ended: crashed {len(H.SHAPES)}): they are no " \
        "confirmation; resume it as its run printed, or run the recheck again." in out.out, out.out


def test_rows_of_a_dtype_the_other_run_did_not_select_are_left_out_not_unpaired(tmp_path, url, capsys):
    """dtypes=[float16,bfloat16] against dtypes=[float16]: B never asked for the bfloat16 rows, so they
    are counted as not selected (a selection, not a caliber), never unpaired or lost."""
    ia = H.identity(created="2026-11-01T00:00:00+0000")
    ia["config"]["dtypes"] = ["float16", "bfloat16"]
    rows_a = [H.row("exp", s, 0.01, 0.01, ci=[0.0099, 0.0101], dtype=d) for d in ("torch.float16", "torch.bfloat16")
              for s in H.SHAPES]
    a = H.write_run(tmp_path / "a", ia, rows_a)
    b = H.write_run(tmp_path / "b", H.identity(created="2026-11-02T00:00:00+0000"),
                    [H.row("exp", s, 0.01, 0.01, ci=[0.0099, 0.0101]) for s in H.SHAPES])
    imported(capsys, url, [a, b])
    code, out = history(capsys, "compare", "1", "2", "--url", url)
    assert code == 0 and "- A and B select different tests (config.dtypes: ['float16', 'bfloat16'] -> ['float16'])" \
        in out.out, out.out
    assert f"{len(H.SHAPES)} row(s) of A's that B did not select are left out" in out.out, out.out
    assert "Different calibers" not in out.out and "unpaired" not in out.out.lower(), out.out


def test_a_step_down_is_held_to_the_threshold_as_a_step_up(tmp_path, url, capsys):
    """The rule's 5% was a log step both ways: an improvement of -4.8% (the log of 1/1.05) was
    reported under 'a step of at least 5%'."""
    for name, after, want in (("small", 0.952, 0), ("large", 0.945, 1)):
        store = f"sqlite:///{tmp_path / f'{name}.db'}"
        imported(capsys, store, H.series(tmp_path / name, [{"exp": 1.0}] * 3 + [{"exp": after}] * 3, noise=0.0005))
        code, out = history(capsys, "regressions", "--url", store, "--format", "json")
        steps = json.loads(out.out)["steps"]
        assert len(steps) == 3 * want and all(s["kind"] == "improvement" for s in steps), (name, steps)


def _on_devices(dirs, uuids):
    for d, uuid in zip(dirs, uuids):
        ident = json.loads((d / "run_identity.json").read_text())
        ident["processes"] = [{"device": 0, "device_name": "NVIDIA H200", "device_uuid": uuid}]
        (d / "run_identity.json").write_text(json.dumps(ident))
    return dirs


def test_latest_pairs_runs_of_one_device_where_it_can(tmp_path, url, capsys):
    """`compare --latest` on a store fed by two GPUs of a kind: A is the latest earlier run on B's
    device, said on stderr with the runs passed over; where none is, the run just before (and the
    report says the devices differ)."""
    dirs = _on_devices(H.series(tmp_path, [{"exp": 1.0}] * 4, noise=0.003, interval=0.03), ("x", "y", "y", "x"))
    imported(capsys, url, dirs)
    code, out = history(capsys, "compare", "--latest", "--url", url, "--format", "json")
    s = json.loads(out.out)["summary"]
    assert (s["run_a"]["run_id"], s["run_b"]["run_id"]) == (1, 4) and s["devices_apart"] is None, s
    assert "A is run 1, the latest earlier run of B's caliber on B's device; 2 later one(s) ran on other devices " \
           "or did not record theirs (run(s) 2, 3" in out.err, out.err
    assert s["a_chosen"].startswith("A is run 1, the latest earlier run")  # in compare.json and .md too
    code, out = history(capsys, "compare", "--latest", "--url", url)
    assert "- A is run 1, the latest earlier run of B's caliber on B's device" in out.out
    more = _on_devices(H.series(tmp_path / "z", [{"exp": 1.0}], noise=0.003, interval=0.03, first=4), ("z",))
    imported(capsys, url, more)
    code, out = history(capsys, "compare", "--latest", "--url", url, "--format", "json")
    s = json.loads(out.out)["summary"]
    assert (s["run_a"]["run_id"], s["run_b"]["run_id"]) == (4, 5) and s["devices_apart"] == {"a": ["x"], "b": ["z"]}
    assert "latest earlier run" not in out.err


def test_runs_on_different_devices_say_so(tmp_path, url, capsys):
    """Two runs of one caliber on two GPUs of a kind (their processes' device UUIDs share none):
    compare says a device's own offset is in neither run's intervals (RESULTS.md, fortieth session:
    86% of rows held another GPU's value, 95% on one GPU); on one GPU it says nothing of devices."""
    dirs = _on_devices(H.series(tmp_path, [{"exp": 1.0}, {"exp": 1.0}], noise=0.003, interval=0.03),
                       ("a6501279-86c2", "5ffe901a-3faf"))
    imported(capsys, url, dirs)
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json")
    assert json.loads(out.out)["summary"]["devices_apart"] == {"a": ["a6501279-86c2"], "b": ["5ffe901a-3faf"]}
    code, out = history(capsys, "compare", "1", "2", "--url", url)
    assert "**Different devices**: A ran on a6501279, B on 5ffe901a" in out.out, out.out
    ident = json.loads((dirs[1] / "run_identity.json").read_text())
    ident["processes"][0]["device_uuid"] = "a6501279-86c2"
    (dirs[1] / "run_identity.json").write_text(json.dumps(ident))
    imported(capsys, url, dirs[1:])  # recorded again: the store keeps the identity it reads now
    code, out = history(capsys, "compare", "1", "2", "--url", url)
    assert "Different devices" not in out.out, out.out


def test_compare_shows_a_and_b_as_geometric_means_over_rounds(tmp_path, url, capsys):
    """Two runs of 3 rounds: A ms and B ms are the rounds' geometric means, so B/A is the change shown
    (arithmetic means read -4.31% beside a change of -4.44%)."""
    import statistics

    a_vals, b_vals = [1.0, 1.5, 1.2], [0.9, 1.5, 1.1]
    dirs = []
    for i, vals in enumerate((a_vals, b_vals)):
        rs = [H.row("exp", "[[64]]", v, 2.0, rnd=r) for r, v in enumerate(vals)]
        dirs.append(H.write_run(tmp_path / f"r{i}", H.identity(created=f"2026-11-0{i + 1}T00:00:00+0000"), rs))
    imported(capsys, url, dirs)
    code, out = history(capsys, "compare", "1", "2", "--url", url, "--format", "json", "--fail-on", "none")
    row = json.loads(out.out)["rows"][0]
    assert row["a_ms"] == pytest.approx(statistics.geometric_mean(a_vals))
    assert row["b_ms"] == pytest.approx(statistics.geometric_mean(b_vals))
    assert row["b_ms"] / row["a_ms"] - 1 == pytest.approx(row["change_pct"] / 100, abs=1e-4), row


def test_a_caliber_change_is_named_once_not_under_each_key_that_holds_it():
    # A review: 3 processes against 1 read "config.timer.processes: 3 -> 1; rounds: 3 -> 1;
    # timer.processes: 3 -> 1" (the layout copies the timer into config; rounds is the process count).
    from zlbench.history.compare import calibers_apart

    def ident(processes, repeat=1):
        return {"config": {"ops": ["exp"], "ab": {"name": "none", "rounds": 10}},
                "timer": {"name": "host", "processes": processes, "repeat": repeat}, "rounds": processes}

    apart = calibers_apart({"caliber": "a"}, {"caliber": "b"}, ident(3), ident(1, repeat=2))
    assert apart == ["timer.processes: 3 -> 1", "timer.repeat: 1 -> 2"], apart
    # an A/B's rounds are ab.rounds: said there
    ab = [{**ident(1), "config": {"ops": ["exp"], "ab": {"name": "env", "rounds": n}}, "rounds": n} for n in (10, 6)]
    assert calibers_apart({"caliber": "a"}, {"caliber": "b"}, *ab) == ["config.ab.rounds: 10 -> 6"]
