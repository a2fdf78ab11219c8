"""Time goes where the variance is: after a plain run's timer.processes passes, a node whose
processes disagree (a row >= 20 us with an interval wider than timer.target_width) is measured in
more processes, up to timer.max_processes; the others are not (engine/run.py more_processes)."""

import csv
import json
import math
import os
import random
import time
from types import SimpleNamespace

import pytest

from zlbench.engine.more_processes import more_wanted, pass_seconds, planned_seconds
from zlbench.engine.spares import cpu_share, spares_to_start
from zlbench.planning.plan import PRESTART_AHEAD
from zlbench.planning.plan import max_processes_of
from zlbench.results.process_stats import aggregate, relative_width, wide_nodes

from .test_process_sampling import proc_rows, quiet_run
from .test_timing_rows import ON_TIMING_CORPUS

# steady and bimodal read alike in every process; luck draws a slow pick in odd passes (noisy draws
# its calls from one random sequence whose length depends on the timing: it may read apart).
# timer.more_budget: a CPU pass is mostly its process' start-up; the budget is tested on its own below.
# timer.target_width=0.5: luck's intervals are 70-97% wide; a steady op's 0.8%, but 34% where a
# process of a busy machine's was slowed (seen once in CI), which must not read as disagreeing.
OPS = ("timer=direct", "ops=[steady,bimodal,luck]", "store.url=none", "timer.processes=3",
       "timer.target_width=0.5", "timer.more_budget=100")
# Timed at real-time priority where the tests may (root): a busy machine then cannot slow one
# process of a steady op by a third and make it read as a node whose processes disagree.
QUIET = {"ZL_FIXTURE_REALTIME": "1"}


def _rows(run_dir):
    return [json.loads(x) for x in (run_dir / "rows.jsonl").read_text().splitlines()]


def _plan(run_dir):
    return json.loads((run_dir / "plan.json").read_text())


@pytest.mark.slow
def test_the_node_whose_processes_disagree_gets_more_processes_and_the_others_do_not(run_zlbench):
    res = run_zlbench(*ON_TIMING_CORPUS, *OPS, "timer.max_processes=5", env=QUIET)
    assert res.returncode == 0, res.stderr[-3000:]
    log = res.stdout + res.stderr
    assert "processes=3 per node (up to 5 where they disagree)" in log, log[-3000:]
    assert "1 node(s) whose processes disagree get 2 more process(es) each" in log and "luck" in log, log[-3000:]
    assert log.count("whose processes disagree") == 1, log[-3000:]  # chosen once, not pass after pass
    plan = _plan(res.run_dir)
    later = [u for u in plan["units"] if u["round"] >= 3]
    assert sorted({u["round"] for u in later}) == [3, 4] and plan["max_processes"] == 5
    assert {n for u in later for n in u["nodes"]} == {"benchmark/test_timing.py::test_perf_luck"}
    rows = _rows(res.run_dir)
    counts = {r["op"]: r["processes"] for r in rows}
    assert counts == {"steady": 3, "bimodal": 3, "luck": 5}, counts
    luck = [r for r in rows if r["op"] == "luck"]
    # Its five processes read 1.0x (passes 0, 2, 4) and 1.5x (1, 3): the median is the fast pick.
    assert all(r["latency"] < 0.25 and r["latency_ci"][1] > 0.25 for r in luck), luck
    # The more processes time what the planned ones did, the baseline included (no
    # corpus.baseline_off_args): the baseline is the five's.
    by_pass = {}
    for r in map(json.loads, (res.run_dir / "process_rows.jsonl").read_text().splitlines()):
        if r["op"] == "luck":
            by_pass.setdefault(r["round"], []).append(r.get("latency_base"))
    assert sorted(by_pass) == [0, 1, 2, 3, 4], by_pass
    assert all(b for p in by_pass for b in by_pass[p]), by_pass
    assert all(r["timing_base"]["processes"] == 5 and r["latency_base"] > 0.15 and r["speedup"] > 0 for r in luck), luck
    assert all("--metrics" not in u["argv"] for u in plan["units"] if u["round"] >= 3), plan["units"]
    with open(res.run_dir / "ops_status.csv") as f:
        assert {r["op"]: r["status"] for r in csv.DictReader(f)} == dict.fromkeys(counts, "ok")
    summary = (res.run_dir / "summary.md").read_text()
    assert "(2 row(s) in 5, 4 row(s) in 3 processes)" in summary and "1 node(s) got more processes than the 3 planned" in summary, summary
    assert "the more processes timed the op only" not in summary, summary
    assert "3 planned pass(es) (a process each" in summary and ", 2 more pass(es) (for tests whose processes read apart)" in summary, summary
    assert "`timer.more_budget` (the more passes' wall as a share of the planned passes', now 100)" in summary

    # A resume of the finished run measures nothing again, and no node gets more a second time.
    again = run_zlbench(*ON_TIMING_CORPUS, *OPS, "timer.max_processes=5", f"resume={res.run_dir}", env=QUIET)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "more process(es)" not in again.stdout + again.stderr
    assert len(_plan(res.run_dir)["units"]) == len(plan["units"])
    assert {r["op"]: r["processes"] for r in _rows(res.run_dir)} == counts


def _process_rows(run_dir):
    return [json.loads(x) for x in (run_dir / "process_rows.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_more_passes_time_only_the_rows_whose_processes_disagree(run_zlbench):
    """A more pass times a chosen row and every shape its test timed before it in a planned pass (a
    process that skipped them read rows apart from the planned ones: RESULTS.md, thirty-eighth
    session), and leaves out the shapes after it: luck_first's lucky [[64]] gets 5 processes and its
    steady [[128]] after it keeps 3; luck_one's lucky [[128]] comes last, so both its shapes get 5.
    No log shows the stand-in of a call left out (the corpus' own result log included). A more pass
    times each chosen shape's baseline too, as the planned passes did (two calls a shape: luck_deaf,
    which times its baseline whatever --metrics asks, is a test like the others). Where a test's
    calls cannot be matched to the shapes chosen, its more passes give no row at all (never one of
    another shape) and say so: luck_rev lists its shapes in the reverse of the order it timed them."""
    res = run_zlbench(*ON_TIMING_CORPUS, "timer=direct", "ops=[steady,luck_one,luck_first,luck_deaf,luck_rev]",
                      "store.url=none", "timer.processes=3", "timer.target_width=0.5", "timer.more_budget=100",
                      "timer.max_processes=5", env=QUIET)
    assert res.returncode == 0, res.stderr[-3000:]
    log = res.stdout + res.stderr
    assert "4 node(s) whose processes disagree get 2 more process(es) each" in log, log[-3000:]
    assert "they time their tests up to those rows only" in log, log[-3000:]
    node = "benchmark/test_timing.py::test_perf_{}".format
    chosen = json.loads((res.run_dir / "more_shapes.json").read_text())["nodes"]
    assert chosen == {node("luck_one"): {node("luck_one"): {"calls": [0, 1, 2, 3], "per_shape": 2}},
                      node("luck_first"): {node("luck_first"): {"calls": [0, 1], "per_shape": 2}},
                      node("luck_deaf"): {node("luck_deaf"): {"calls": list(range(8)), "per_shape": 2}},
                      node("luck_rev"): {node("luck_rev"): {"calls": [0, 1], "per_shape": 2}}}, chosen
    later = [r for r in _process_rows(res.run_dir) if r["round"] >= 3]
    assert {(r["op"], r["shape"]) for r in later} == {("luck_one", "[[64]]"), ("luck_one", "[[128]]"),
                                                       ("luck_first", "[[64]]"),
                                                       *{("luck_deaf", f"[[{n}]]") for n in (32, 64, 128, 256)}}, later
    assert all(r["latency_base"] > 0.15 for r in later), later  # each with its baseline, as planned
    counts = {(r["op"], r["shape"]): r["processes"] for r in _rows(res.run_dir)}
    assert counts == {("steady", "[[64]]"): 3, ("steady", "[[128]]"): 3, ("luck_one", "[[64]]"): 5,
                      ("luck_one", "[[128]]"): 5, ("luck_first", "[[64]]"): 5, ("luck_first", "[[128]]"): 3,
                      **{("luck_deaf", f"[[{n}]]"): 5 for n in (32, 64, 128, 256)},
                      ("luck_rev", "[[64]]"): 3, ("luck_rev", "[[128]]"): 3}, counts
    for u in ("main.r3.d0.s0", "main.r4.d0.s0"):
        events = [json.loads(x) for x in (res.run_dir / "units" / u / "events.jsonl").read_text().splitlines()]
        why = {e["node"].rsplit("_", 1)[-1]: e["message"] for e in events if e["event"] == "warning"}
        assert set(why) == {"rev"} and "the test times every shape from here on" in why["rev"], why
        assert "not in the order they were timed" in why["rev"]
        corpus_log = (res.run_dir / "units" / u / "result.log").read_text()
        assert "123456.789" not in corpus_log and '"op_name": "luck_first"' in corpus_log, corpus_log
        assert "[128]" not in next(x for x in corpus_log.splitlines() if '"luck_first"' in x)
    with open(res.run_dir / "ops_status.csv") as f:
        assert {r["op"]: r["status"] for r in csv.DictReader(f)} == dict.fromkeys(
            ("steady", "luck_one", "luck_first", "luck_deaf", "luck_rev"), "ok")


def _drawn_as_planned(run_dir, steady=0.02, drawn=0.05, per_process=None) -> list:
    """What the machine broke of a timing-corpus run's premise (empty: nothing): in its planned
    processes every 0.2 ms row and baseline (steady's, bimodal's, luck_tiny's [[64]] baseline) within
    `steady` of 0.2 ms, and luck_tiny's [[8]] within `drawn` of the 10 or 15 us its process drew
    (odd passes the slow pick). On a machine this busy the rows' pool is no steady yardstick.
    per_process: (op, shape) -> the ms of the rows drawn per process (default luck_tiny's)."""
    per_process = per_process or {("luck_tiny", "[[8]]"): 0.01, ("luck_tiny", "[[64]]"): 0.2}
    broken = []
    for r in _process_rows(run_dir):
        if r["round"] >= 3:
            continue
        slow = 1.5 if r["round"] % 2 else 1.0
        ms = per_process.get((r["op"], r["shape"]))
        expect = ms * slow if ms else 0.2
        tol = drawn if expect < 0.1 else steady
        for what, value, want in (("latency", r["latency"], expect), ("latency_base", r["latency_base"], 0.2)):
            if abs(math.log(value / want)) > tol:
                broken.append((r["op"], r["shape"], r["round"], what, round(value * 1000, 2)))
    return broken


@pytest.mark.slow
def test_a_chosen_nodes_smaller_rows_whose_processes_disagree_ride_along_in_its_more_passes(run_zlbench, tmp_path):
    """luck_tiny's [[64]] (0.2 or 0.3 ms by process) has its node chosen; its [[8]] (10 or 15 us), under
    20 us, could not choose it, but reads apart by process too: the more passes time it as well (a
    median of 5, not 3). steady's and bimodal's nodes are not chosen (with them the pool of rows of
    0.1-1 ms is steady enough to read luck_tiny apart)."""
    for attempt in range(3):  # a run the machine disturbed (its premise broken) is made again
        res = run_zlbench(*ON_TIMING_CORPUS, "timer=direct", "ops=[steady,bimodal,luck_tiny]", "store.url=none",
                          "timer.processes=3", "timer.target_width=0.5", "timer.more_budget=100",
                          "timer.max_processes=5", env=QUIET, run_dir=tmp_path / f"run{attempt}")
        assert res.returncode == 0, res.stderr[-3000:]
        broken = _drawn_as_planned(res.run_dir)
        if not broken:
            break
    assert not broken, f"the machine disturbed every run's planned processes: {broken}"
    log = res.stdout + res.stderr
    readings = [(r["op"], r["shape"], r["round"], round(r["latency"] * 1000, 2)) for r in _process_rows(res.run_dir)]
    assert ("1 node(s) whose processes disagree get 2 more process(es) each (rows >= 20 us wider than "
            "timer.target_width=0.5; widest: luck_tiny [[64]]") in log, log[-3000:]
    assert "and 1 other row(s) of theirs that read apart by process; they time their tests up to those rows only" \
        in log, ([x for x in log.splitlines() if "more process" in x], readings)
    assert "; 1 row(s) of theirs under 20 us that read apart by process were measured in them too" in (
        res.run_dir / "summary.md").read_text()
    rows = {(r["op"], r["shape"]): r for r in _rows(res.run_dir)}
    assert {k: r["processes"] for k, r in rows.items()} == {
        ("steady", "[[64]]"): 3, ("steady", "[[128]]"): 3, ("bimodal", "[[64]]"): 3, ("bimodal", "[[128]]"): 3,
        ("luck_tiny", "[[8]]"): 5, ("luck_tiny", "[[64]]"): 5}
    assert "BENCHMARK_PROCESS_UNSTABLE" in rows[("luck_tiny", "[[8]]")]["markers"]
    # Passes 0, 2, 4 read 10 us, 1 and 3 read 15 us: the median of five is the fast pick.
    assert rows[("luck_tiny", "[[8]]")]["latency"] < 0.0125, rows[("luck_tiny", "[[8]]")]
    later = [r for r in _process_rows(res.run_dir) if r["round"] >= 3]
    assert sorted((r["round"], r["shape"]) for r in later) == [(3, "[[64]]"), (3, "[[8]]"), (4, "[[64]]"), (4, "[[8]]")]


@pytest.mark.slow
def test_riders_are_rows_whose_own_processes_disagree_in_any_case_of_the_chosen_test(run_zlbench):
    """luck_param[tiny]'s 10/15 us row rides along with luck_param[big] (another case of the same
    test: one node); luck_base's [[8]], timed after its chosen [[64]], reads apart by its baseline
    only, which does not choose a row for more processes: it keeps its 3 processes."""
    res = run_zlbench(*ON_TIMING_CORPUS, "timer=direct", "ops=[steady,bimodal,luck_base,luck_param]",
                      "store.url=none", "timer.processes=3", "timer.target_width=0.5", "timer.more_budget=100",
                      "timer.max_processes=5", env=QUIET)
    assert res.returncode == 0, res.stderr[-3000:]
    log = res.stdout + res.stderr
    assert "2 node(s) whose processes disagree get 2 more process(es) each" in log, log[-3000:]
    assert "and 1 other row(s) of theirs that read apart by process" in log, log[-3000:]
    rows = {(r["node"].rsplit("::", 1)[-1], r["shape"]): r for r in _rows(res.run_dir)}
    assert rows[("test_perf_luck_param[tiny]", "[[8]]")]["processes"] == 5
    assert rows[("test_perf_luck_param[big]", "[[64]]")]["processes"] == 5
    base_only = rows[("test_perf_luck_base", "[[8]]")]
    assert base_only["processes"] == 3 and base_only["marker_reason"].startswith("torch processes read"), base_only
    summary = (res.run_dir / "summary.md").read_text()
    assert ("2 node(s) got more processes than the 3 planned" in summary
            and "; 1 row(s) of theirs under 20 us that read apart by process were measured in them too" in summary), summary


@pytest.mark.slow
def test_another_nodes_us_row_whose_processes_disagree_joins_more_passes_that_run_anyway(run_zlbench, tmp_path):
    """luck_us (one row of 10 or 15 us, drawn per process) is a test of its own: with luck's wide 0.2 ms
    row its node joins the more passes luck's has run anyway (a median of 5); alone it chooses none (a
    pass' start-up for a us row). (bimodal: with it the pool of rows of 0.1-1 ms is steady enough to
    read luck apart, and not steady.)"""
    drawn = {("luck", "[[64]]"): 0.2, ("luck", "[[128]]"): 0.2, ("luck_us", "[[8]]"): 0.01}
    for attempt in range(3):  # a run the machine disturbed (its premise broken) is made again
        res = run_zlbench(*ON_TIMING_CORPUS, "timer=direct", "ops=[steady,bimodal,luck,luck_us]", "store.url=none",
                          "timer.processes=3", "timer.target_width=0.5", "timer.more_budget=100",
                          "timer.max_processes=5", env=QUIET, run_dir=tmp_path / f"run{attempt}")
        assert res.returncode == 0, res.stderr[-3000:]
        broken = _drawn_as_planned(res.run_dir, per_process=drawn)
        if not broken:
            break
    assert not broken, f"the machine disturbed every run's planned processes: {broken}"
    log = res.stdout + res.stderr
    assert ("1 node(s) whose processes disagree get 2 more process(es) each (rows >= 20 us wider than "
            "timer.target_width=0.5; widest: luck [[") in log, log[-3000:]
    assert "; 1 other node(s) join those passes for 1 row(s) under 20 us that read apart by process (no pass more)" \
        in log, [x for x in log.splitlines() if "more process" in x]
    rows = {(r["op"], r["shape"]): r for r in _rows(res.run_dir)}
    assert {k: r["processes"] for k, r in rows.items()} == {
        ("steady", "[[64]]"): 3, ("steady", "[[128]]"): 3, ("bimodal", "[[64]]"): 3, ("bimodal", "[[128]]"): 3,
        ("luck", "[[64]]"): 5, ("luck", "[[128]]"): 5, ("luck_us", "[[8]]"): 5}
    # Passes 0, 2, 4 read 10 us, 1 and 3 read 15 us: the median of five is the fast pick.
    assert rows[("luck_us", "[[8]]")]["latency"] < 0.0125, rows[("luck_us", "[[8]]")]
    node = "benchmark/test_timing.py::test_perf_{}".format
    later = [u for u in _plan(res.run_dir)["units"] if u["round"] >= 3]
    assert {n for u in later for n in u["nodes"]} == {node("luck"), node("luck_us")}, later
    assert "; 1 row(s) of theirs under 20 us that read apart by process were measured in them too" in (
        res.run_dir / "summary.md").read_text()

    alone = run_zlbench(*ON_TIMING_CORPUS, "timer=direct", "ops=[steady,bimodal,luck_us]", "store.url=none",
                        "timer.processes=3", "timer.target_width=0.5", "timer.more_budget=100",
                        "timer.max_processes=5", env=QUIET, run_dir=tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert "more process(es)" not in alone.stdout + alone.stderr
    assert all(u["round"] < 3 for u in _plan(alone.run_dir)["units"])
    assert {r["processes"] for r in _rows(alone.run_dir)} == {3}


@pytest.mark.slow
def test_at_max_processes_equal_to_processes_no_node_gets_more_and_what_a_cap_would_choose(run_zlbench, monkeypatch):
    res = run_zlbench(*ON_TIMING_CORPUS, *OPS, "timer.max_processes=3", env=QUIET)
    assert res.returncode == 0, res.stderr[-3000:]
    assert all(u["round"] < 3 for u in _plan(res.run_dir)["units"])
    assert {r["processes"] for r in _rows(res.run_dir)} == {3}

    # What a cap of 6 would have chosen: luck, 3 more passes; under a run limit only those that fit
    # (a pass: a process' start-up plus the node's quickest pass), none where one does not; and no
    # more than timer.more_budget of the planned passes' wall allows.
    plan = SimpleNamespace(processes=3, max_processes=6, more_passes=object(), devices=[0], more_together=False,
                           units=[SimpleNamespace(**u) for u in _plan(res.run_dir)["units"]])
    luck = "benchmark/test_timing.py::test_perf_luck"
    roomy = {"target_width": 0.5, "more_budget": 100}
    wanted, last, line, _ = more_wanted(res.run_dir, plan, roomy, None)
    assert (wanted, last) == ([luck], 6) and "1 node(s) whose processes disagree get 3 more" in line, line
    startup, measuring = pass_seconds(res.run_dir, plan, [luck])
    per_pass = startup + measuring
    assert startup > 0.2 and 0 < measuring < pass_seconds(res.run_dir, plan, [luck, "benchmark/test_timing.py::test_perf_steady"])[1]
    wanted, last, line, _ = more_wanted(res.run_dir, plan, roomy, time.time() + 2.5 * per_pass)
    assert (wanted, last) == ([luck], 5) and "2 more process(es) each, as many as fit before launcher.run_timeout_s" \
        in line, line
    wanted, last, line, _ = more_wanted(res.run_dir, plan, roomy, time.time() + 0.5 * per_pass)
    assert wanted == [] and "would not fit before launcher.run_timeout_s" in line, line
    planned = planned_seconds(res.run_dir, plan)
    assert planned > 3 * per_pass * 0.5  # three passes, their start-ups not hidden on the CPU
    one_pass = {"target_width": 0.5, "more_budget": 1.5 * per_pass / planned}
    wanted, last, line, _ = more_wanted(res.run_dir, plan, one_pass, None)
    assert (wanted, last) == ([luck], 4) and "as many as fit in timer.more_budget" in line, line
    wanted, last, line, _ = more_wanted(res.run_dir, plan, {"target_width": 0.5, "more_budget": 0.5 * per_pass / planned},
                                     time.time() + 100 * per_pass)
    assert wanted == [] and "would not fit in timer.more_budget" in line, line
    # Where processes start ahead, the more passes start together: k of them cost one start-up and k
    # measurings, so more fit the same limit.
    # (The clock held still: the time left is read inside more_wanted.)
    import zlbench.engine.more_processes as more_processes

    now = time.time()
    monkeypatch.setattr(more_processes, "time", SimpleNamespace(time=lambda: now))
    together = SimpleNamespace(**{**vars(plan), "more_together": True})
    seconds = startup + 2.5 * measuring
    assert more_wanted(res.run_dir, plan, roomy, now + seconds)[1] == 3 + int(seconds // per_pass)
    assert more_wanted(res.run_dir, together, roomy, now + seconds)[:2] == ([luck], 5)


def test_wide_nodes_are_those_with_a_row_of_20_us_or_more_wider_than_the_target():
    """Quiet 50 us rows (processes 0.2% apart) give narrow intervals; a 50 us row whose processes
    disagree by 50% is wide; so is a 10 us one, below the size that gets more processes."""
    rows = aggregate(quiet_run(random.Random(3), sd=0.002) + proc_rows([0.050, 0.075, 0.051], op="pick")
                     + proc_rows([0.010, 0.015, 0.0101], op="small"), 3)
    widths = {r["op"]: relative_width(r) for r in rows}
    assert max(w for op, w in widths.items() if op.startswith("op")) < 0.02 < widths["small"], widths
    wide = wide_nodes(rows, 0.02)
    assert set(wide) == {"n::pick"} and wide["n::pick"]["op"] == "pick"
    assert wide_nodes(rows, 10.0) == {}
    # A test's cases run in one process: its widest case stands for the test.
    a, b = proc_rows([0.050, 0.060, 0.051], op="case"), proc_rows([0.050, 0.075, 0.051], op="case", shape="[[8]]")
    for node, case in (("t::x[a]", a), ("t::x[b]", b)):
        for r in case:
            r["node"] = node
    cases = aggregate(quiet_run(random.Random(3), sd=0.002) + a + b, 3)
    assert set(wide_nodes(cases, 0.02)) == {"t::x"} and wide_nodes(cases, 0.02)["t::x"]["node"] == "t::x[b]"


@pytest.mark.parametrize("wanted,processes,backend,expected", [
    (None, 3, "cuda", 6), (None, 3, "cpu", 3), (5, 3, "cpu", 5), (2, 3, "cuda", 3), (None, 1, "cuda", 1),
    (8, 1, "cuda", 1)])
def test_max_processes_resolves_per_backend(wanted, processes, backend, expected):
    cfg = {"ab": {"name": "none"}, "timer": {"processes": processes, "max_processes": wanted}}
    assert max_processes_of(cfg, type("B", (), {"name": backend})()) == expected


def test_a_row_whose_median_process_timed_no_baseline_keeps_the_baseline_and_throughputs_of_the_others():
    """Processes that timed the alternative only (a run's more processes before 2026-12-06: no
    baseline, no throughputs of their own): the row's baseline is the median of the processes that
    timed it, its timer and throughputs come from one that has them, and its interval is what those
    processes alone give (the same stratum)."""
    def with_timers(rows):
        for r in rows:
            r["timer_used_base"] = "graph" if r["latency_base"] else None
            r["timing_base"] = {"stop_reason": "fixed"} if r["latency_base"] else None
        return rows

    # Quiet 50 us rows, and noisy 5 us ones that a wrong stratum would pool the baseline with.
    noisy = [r for i in range(10) for r in proc_rows(
        [0.005 * math.exp(random.Random(i).gauss(0, 0.03)) for _ in range(3)], op=f"us{i}",
        base=[0.004 * math.exp(random.Random(50 + i).gauss(0, 0.03)) for _ in range(3)])]
    quiet = with_timers(quiet_run(random.Random(3), sd=0.002) + noisy)
    rs = with_timers(proc_rows([0.050, 0.056, 0.054, 0.052, 0.0521], op="pick", base=[0.05, 0.0501, 0.05005, None, None]))
    for r in rs[3:]:
        r["gbps"] = None
    row = next(r for r in aggregate(quiet + rs, 3) if r["op"] == "pick")
    assert row["latency"] == 0.0521 and row["processes"] == 5  # the median is a process without a baseline
    assert row["latency_base"] == 0.05005 and row["timing_base"]["processes"] == 3
    assert row["timer_used_base"] == "graph" and row["timing_base"]["stop_reason"] == "fixed"
    assert row["speedup"] == pytest.approx(0.05005 / 0.0521)
    assert row["gbps"] == pytest.approx(100.0 / 0.0521)  # gbps = 100 / latency in proc_rows
    planned_only = next(r for r in aggregate(quiet + rs[:3], 3) if r["op"] == "pick")
    lo, hi = row["timing_base"]["latency_ci"]
    assert [lo, hi] == pytest.approx(planned_only["timing_base"]["latency_ci"]) and (hi - lo) / 0.05005 < 0.03


def test_the_planned_wall_counts_the_time_processes_lived_not_a_resumed_runs_pause(tmp_path):
    """Two devices side by side (counted once), a unit resumed 10 h after it was cut (the pause not
    counted): what timer.more_budget is a share of."""
    from zlbench.results.events import events_path

    def unit(uid, *spans):
        path = events_path(tmp_path, uid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"event": e, "t": t}) + "\n"
                                for b, f in spans for e, t in (("launch", b), ("gate", b + 1), ("exited", f))))
        return SimpleNamespace(unit_id=uid)

    plan = SimpleNamespace(units=[unit("main.r0.d0.s0", (0, 40)), unit("main.r0.d1.s0", (5, 50)),
                                  unit("main.r1.d0.s0", (45, 60), (36060, 36090))])
    assert planned_seconds(tmp_path, plan) == pytest.approx(60 + 30)


@pytest.mark.slow
def test_the_more_passes_processes_start_while_the_last_planned_pass_measures(run_zlbench):
    """Where processes start ahead (launcher.prestart), the more passes' processes start as spares
    while the last planned passes measure (once the second measures, as a pass two ahead would),
    over every node (engine/spares.py): their start-up is off the wall. Chosen, each runs the chosen
    node only, and measures once the one before has exited."""
    res = run_zlbench(*ON_TIMING_CORPUS, *OPS, "timer.max_processes=6", "launcher.prestart=true", env=QUIET)
    assert res.returncode == 0, res.stderr[-3000:]
    units = _plan(res.run_dir)["units"]
    more = [u for u in units if u["round"] >= 3]
    assert [u["round"] for u in more] == [3, 4, 5], more
    assert [u["prestart"] for u in units] == [PRESTART_AHEAD] * 3 + [2] * 3
    assert [u["more_pass"] for u in units] == [False] * 3 + [True] * 3
    events = {u["round"]: [json.loads(x) for x in (res.run_dir / "units" / u["unit_id"] / "events.jsonl")
                           .read_text().splitlines()] for u in units}
    first = lambda r, name: next(e["t"] for e in events[r] if e["event"] == name)  # noqa: E731
    luck = "benchmark/test_timing.py::test_perf_luck"
    spared = spares_to_start(3)  # as many as this machine's CPUs allow (1 on 2 cores)
    two_ahead = cpu_share(1) >= 3  # else one ahead, as a 2-CPU job keeps
    for r in (3, 4, 5):
        if r < 3 + spared:
            # long before the choice: once the second pass measures, where the CPUs allow two ahead
            assert first(0 if two_ahead else 1, "exited") <= first(r, "launch") < first(1 if two_ahead else 2, "exited"), r
            assert next(e["nodes"] for e in events[r] if e["event"] == "launch") == 3  # collected them all
        else:  # started together with the first more pass, over the chosen node
            assert first(2, "exited") < first(r, "launch") < first(3, "exited"), r
            assert next(e["nodes"] for e in events[r] if e["event"] == "launch") == 1
        assert {e["node"] for e in events[r] if e["event"] in ("start", "end")} == {luck}, events[r]
    choice = json.loads((res.run_dir / "more" / "d0.json").read_text())
    assert [u["unit_id"] for u in choice["units"]] == [u["unit_id"] for u in more] and "given_up" not in choice
    for before, after in ((3, 4), (4, 5)):
        assert first(after, "gate") >= first(before, "exited")
        assert min(e["t"] for e in events[after] if e["event"] == "start") >= first(before, "exited")
    assert {r["op"]: r["processes"] for r in _rows(res.run_dir)}["luck"] == 6


def test_a_more_pass_is_estimated_from_each_nodes_slowest_pass_but_its_first(tmp_path):
    """A node that tunes afresh in every process varies from pass to pass (a batch norm on the H200:
    6.1, 6.5, 2.9 s): its quickest pass let the more passes overrun a run limit. The first pass
    (compiling) is left out; what a process spends past its nodes is added."""
    from zlbench.results.events import events_path

    def unit(uid, r, launch, took):
        path = events_path(tmp_path, uid)
        path.parent.mkdir(parents=True, exist_ok=True)
        t, events = launch + 9.0, [("launch", launch, None), ("gate", launch + 9.0, None)]
        for node, seconds in took.items():
            events += [("start", t, node), ("end", t + seconds, node)]
            t += seconds
        events.append(("exited", t + 0.2, None))
        path.write_text("".join(json.dumps({"event": e, "t": at, **({"node": n, "status": "ok"} if n else {})}) + "\n"
                                for e, at, n in events))
        return SimpleNamespace(unit_id=uid, round=r)

    plan = SimpleNamespace(devices=[0], units=[unit("main.r0.d0.s0", 0, 0, {"t::bn": 20.0, "t::x": 1.2}),
                                               unit("main.r1.d0.s0", 1, 40, {"t::bn": 6.5, "t::x": 0.9}),
                                               unit("main.r2.d0.s0", 2, 60, {"t::bn": 2.9, "t::x": 1.0})])
    startup, measuring = pass_seconds(tmp_path, plan, ["t::bn"])
    assert startup == pytest.approx(9.0) and measuring == pytest.approx(6.5 + 0.2)
    assert pass_seconds(tmp_path, plan, ["t::bn", "t::x"])[1] == pytest.approx(6.5 + 1.0 + 0.2)
    # A unit resumed an hour after it was cut in the middle of "t::bn": the pause is no node's time.
    resumed = events_path(tmp_path, "main.r2.d0.s0")
    lines = resumed.read_text().splitlines()
    cut = [x for x in lines if json.loads(x)["event"] in ("launch", "gate")] + [
        json.dumps({"event": "start", "t": 69.5, "node": "t::bn"}), json.dumps({"event": "exited", "t": 70.0})]
    again = [json.dumps({**json.loads(x), "t": json.loads(x)["t"] + 3600}) for x in lines]
    resumed.write_text("\n".join(cut + again) + "\n")
    assert pass_seconds(tmp_path, plan, ["t::bn"])[1] == pytest.approx(6.5 + 0.2)


@pytest.mark.slow
def test_a_more_pass_cut_by_the_run_limit_leaves_its_nodes_stopped_and_the_run_whole(run_zlbench, tmp_path):
    """More passes are planned to fit the run limit, but a node that tunes afresh may take longer
    than planned (seen on the H200): the limit then stops the more pass, its process killed in
    flight or before it starts, and its nodes read as stopped, not cut: their rows keep the
    processes that ran and nothing is left to resume. A planned pass cut so reads as cut."""
    from zlbench.engine.jobs import run_plain_units
    from zlbench.results.events import events_path, final_ends, read_events, stopped
    from zlbench.results.rundir import unfinished_nodes
    from zlbench.report.run_report import report
    from zlbench.results.tables import collect

    from .conftest import FIXTURES

    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={FIXTURES / 'wait_corpus'}",
                      "ops=['wait_0[0-1]']", "store.url=none", "timer.processes=2", env={"WAIT_S": "0.1"})
    assert res.returncode == 0, res.stderr[-3000:]
    plan = _plan(res.run_dir)
    nodes = sorted(plan["units"][-1]["nodes"])

    def unit(r, more_pass):  # its nodes hold in flight until the limit kills the process
        last = plan["units"][-1]
        return {**last, "unit_id": f"main.r{r}.d0.s0", "round": r, "more_pass": more_pass, "prestart": 0,
                "env": {**last["env"], "TICKETS": str(tmp_path / f"tickets{r}"), "HOLD_FROM": "0"}}

    in_flight, not_started = unit(2, True), unit(3, True)
    plan["units"] += [in_flight, not_started]
    (res.run_dir / "plan.json").write_text(json.dumps(plan))
    run_plain_units([in_flight], str(res.run_dir), deadline=time.time() + 20)
    run_plain_units([not_started], str(res.run_dir), deadline=time.time() - 1)
    for u in (in_flight, not_started):
        events = read_events(events_path(res.run_dir, u["unit_id"]))
        assert sorted(stopped(events)) == nodes and not final_ends(events), events
        assert all("left out" in e["reason"] for e in stopped(events).values())
    flight = read_events(events_path(res.run_dir, in_flight["unit_id"]))
    assert sum(1 for e in flight if e["event"] == "launch") == 1 and any(e["event"] == "start" for e in flight)
    assert unfinished_nodes(res.run_dir) == {}
    rows, statuses = collect(res.run_dir)
    assert {s["status"] for s in statuses} == {"ok"} and {r["processes"] for r in rows} == {2}, (rows, statuses)
    assert report(res.run_dir) == 0  # whole: not cut (4)
    summary = (res.run_dir / "summary.md").read_text()
    assert "Run cut short" not in summary and "stopped 4 node run(s) of the more passes" in summary, summary

    planned = unit(4, False)  # the control: a pass that is not a more pass is cut, resumable
    plan["units"].append(planned)
    (res.run_dir / "plan.json").write_text(json.dumps(plan))
    run_plain_units([planned], str(res.run_dir), deadline=time.time() - 1)
    ends = [e for e in read_events(events_path(res.run_dir, planned["unit_id"])) if e["event"] == "end"]
    assert sorted(e["node"] for e in ends) == nodes and all(e["status"] == "timeout" and e["resumable"] for e in ends)
    assert unfinished_nodes(res.run_dir) == {planned["unit_id"]: nodes}  # what a resume measures


@pytest.mark.slow
def test_spares_not_chosen_are_stopped_and_leave_nothing(run_zlbench):
    """Where no node's processes disagree, the spares started for the more passes are stopped before
    they measured anything, and leave no unit or row behind."""
    ops = ("timer=direct", "ops=[steady]", "store.url=none", "timer.processes=3", "timer.target_width=0.5",
           "timer.more_budget=100")
    res = run_zlbench(*ON_TIMING_CORPUS, *ops, "timer.max_processes=6", "launcher.prestart=true", env=QUIET)
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(p.name for p in (res.run_dir / "units").iterdir()) == [f"main.r{r}.d0.s0" for r in range(3)]
    assert json.loads((res.run_dir / "more" / "d0.json").read_text()) == {"units": []}
    assert {r["processes"] for r in _rows(res.run_dir)} == {3}
    # The job waited with the spares it started (as many as this machine's CPUs allow).
    assert json.loads((res.run_dir / "more" / "d0.waiting").read_text()) == {"spares": spares_to_start(3)}


def _finished_wait_run(run_zlbench):
    from .conftest import FIXTURES

    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={FIXTURES / 'wait_corpus'}",
                      "ops=['wait_0[0-1]']", "store.url=none", "timer.processes=2", env={"WAIT_S": "0.05"})
    assert res.returncode == 0, res.stderr[-3000:]
    plan = _plan(res.run_dir)
    spare = {**plan["units"][-1], "unit_id": "main.r2.d0.s0", "round": 2, "more_pass": True, "spare": True}
    return res.run_dir, spare


@pytest.mark.slow
def test_a_spare_serves_a_chosen_unit_built_the_same_and_no_other(run_zlbench):
    """A spare's process runs the chosen unit's nodes (fewer than it collected) where the unit was
    built as the spare was; one built otherwise (its env differs) gets a fresh process, and the
    spare is stopped before it measured anything."""
    from zlbench.engine.jobs import adopt
    from zlbench.engine.plain_worker import UnitRunner
    from zlbench.results.events import events_path, final_ends, read_events

    run_dir, spare = _finished_wait_run(run_zlbench)
    nodes = sorted(spare["nodes"])
    chosen = {k: v for k, v in spare.items() if k != "spare"} | {"nodes": nodes[1:]}

    runner = UnitRunner(spare, str(run_dir), fresh=True)
    runner.prestart()
    started = runner.ahead
    [served] = adopt([chosen], [runner], str(run_dir), None, None)
    assert served.ahead is started and runner.ahead is None
    assert served.run() == {"ok": 1}
    events = read_events(events_path(run_dir, spare["unit_id"]))
    assert [e["nodes"] for e in events if e["event"] == "launch"] == [2]  # one process, which collected both
    assert {e["node"] for e in events if e["event"] == "start"} == {nodes[1]} and sorted(final_ends(events)) == nodes[1:]

    other = UnitRunner(spare, str(run_dir), fresh=True)
    other.prestart()
    proc = other.ahead.proc
    [fresh] = adopt([chosen | {"env": {**chosen["env"], "ZL_OTHER": "1"}}], [other], str(run_dir), None, None)
    assert fresh.ahead is None and proc.poll() is not None  # the spare was stopped
    assert not events_path(run_dir, spare["unit_id"]).exists()  # its events went with it
    assert fresh.run() == {"ok": 1}


@pytest.mark.slow
def test_a_job_that_sees_no_choice_gives_up_and_leaves_its_more_units_to_a_job_of_their_own(run_zlbench, monkeypatch):
    """The choice file is created once: a job that waited in vain (no heartbeat of the orchestrator)
    creates it, runs nothing more and clears its spares; handing over then finds it taken and
    returns that device's more units, which the orchestrator submits as a job of their own."""
    from zlbench.engine import spares
    from zlbench.engine.jobs import run_plain_units
    from zlbench.planning.units import WorkUnit

    run_dir, spare = _finished_wait_run(run_zlbench)
    monkeypatch.setattr(spares, "GIVE_UP_S", 0.0)
    assert run_plain_units([spare], str(run_dir)) == {}
    choice = json.loads(spares.choice_path(run_dir, 0).read_text())
    assert choice["units"] == [] and "no choice" in choice["given_up"], choice
    assert not (run_dir / "units" / spare["unit_id"]).exists()
    more = WorkUnit.from_dict({k: v for k, v in spare.items() if k != "spare"})
    assert spares.hand_over(run_dir, [more], [0]) == [more]
    assert json.loads(spares.choice_path(run_dir, 0).read_text()) == choice  # not overwritten


@pytest.mark.slow
def test_a_device_whose_planned_passes_have_no_job_gets_its_more_passes_as_a_job(run_zlbench):
    """One node on four devices: its passes rotate over the devices, so a more pass may land on a
    device that ran no planned pass and so has no job waiting: it goes as a job of its own."""
    res = run_zlbench(*ON_TIMING_CORPUS, "timer=direct", "ops=[luck]", "store.url=none", "timer.processes=3",
                      "timer.target_width=0.5", "timer.more_budget=100", "timer.max_processes=6",
                      "launcher.prestart=true", "backend.slots=4", env=QUIET)
    assert res.returncode == 0, res.stderr[-3000:]
    plan = _plan(res.run_dir)
    planned = {u["device"] for u in plan["units"] if u["round"] < 3}
    more = [u for u in plan["units"] if u["round"] >= 3]
    assert {u["device"] for u in more} - planned, plan["units"]  # the case under test
    assert {r["op"]: r["processes"] for r in _rows(res.run_dir)} == {"luck": 6}
    with open(res.run_dir / "ops_status.csv") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["ok"]
    # A choice for each device that had a job and spares (a spare per device its more passes land on).
    spared = planned & {u["device"] for u in more}
    assert sorted(p.name for p in (res.run_dir / "more").glob("d*.json")) == [f"d{d}.json" for d in sorted(spared)]


@pytest.mark.slow
def test_a_job_that_dies_does_not_keep_the_others_waiting_for_the_choice(tmp_path):
    """A device's job killed in its planned passes: the other device's job, waiting for the choice,
    gets it once the orchestrator sees every job waiting or ended, and the run ends (cut)."""
    from .conftest import FIXTURES, held, processes_in, start_zlbench, wait_for

    run, tickets = tmp_path / "run", tmp_path / "tickets"
    proc = start_zlbench(f"hydra.run.dir={run}", "backend=cpu", "backend.slots=2", "corpus=flaggems",
                         f"corpus.root={FIXTURES / 'wait_corpus'}", "ops=['wait_0[0-3]']", "store.url=none",
                         "timer.processes=2", "timer.max_processes=4", "launcher.prestart=true", "launcher.steal=false",
                         "progress=plain", cwd=tmp_path,
                         env={"WAIT_S": "0.05", "TICKETS": str(tickets), "HOLD_FROM": "0"})
    try:
        assert held(tickets, 2)  # a node of each device in flight
        launches = [json.loads(x) for p in run.glob("units/*.d1.*/events.jsonl") for x in p.read_text().splitlines()
                    if '"launch"' in x]
        os.kill(int(launches[0]["job_id"]), 9)  # device 1's job (submitit's controller; its worker dies with it)

        def on_device_1():
            out = []
            for pid in processes_in(run):
                try:
                    out += [pid] if ".d1." in os.readlink(f"/proc/{pid}/cwd") else []
                except OSError:
                    pass
            return out

        assert wait_for(lambda: not on_device_1(), timeout=60)  # its held node died with it
        (tickets / "release").touch()
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 4, err[-3000:]  # cut: device 1's nodes did not finish
    assert json.loads((run / "more" / "d0.json").read_text()).get("given_up") is None
    from zlbench.results.events import final_ends, read_events

    ends = {p.parent.name: {e["status"] for e in final_ends(read_events(p)).values()} for p in run.glob("units/*/events.jsonl")}
    assert {u: st for u, st in ends.items() if ".d0." in u} == {"main.r0.d0.s0": {"ok"}, "main.r1.d0.s0": {"ok"}}, ends
    assert not set().union(*(st for u, st in ends.items() if ".d1." in u)), ends  # it died in flight
    with open(run / "ops_status.csv") as f:  # each node had a pass on device 1
        assert all(r["status"] == "crashed" and "job" in r["reason"] for r in csv.DictReader(f))


@pytest.mark.slow
def test_a_spare_leaves_out_a_file_that_failed_to_import(run_zlbench, tmp_path):
    """pytest refuses a whole command line when one of its files fails to import: the spares start
    over every node but those whose file failed in the planned passes, so the chosen node still
    runs in its spare, and the broken one reads failed, as it did."""
    import shutil

    from .test_timing_rows import TIMING_CORPUS

    corpus = tmp_path / "corpus"
    shutil.copytree(TIMING_CORPUS, corpus)
    (corpus / "benchmark" / "test_broken.py").write_text(
        "import pytest\nimport no_such_module  # noqa: F401\n\n\n@pytest.mark.broken\ndef test_broken():\n    pass\n")
    res = run_zlbench("corpus=flaggems", f"corpus.root={corpus}", "corpus.timer_modules=[benchmark.timing]", "backend=cpu",
                      "timer=direct", "ops=[luck,broken]", "store.url=none", "timer.processes=3", "timer.max_processes=4",
                      "timer.target_width=0.5", "timer.more_budget=100", "launcher.prestart=true", env=QUIET)
    assert res.returncode != 0  # the broken node failed
    units = {u["round"]: u for u in _plan(res.run_dir)["units"]}
    events = {r: [json.loads(x) for x in (res.run_dir / "units" / u["unit_id"] / "events.jsonl").read_text().splitlines()]
              for r, u in units.items()}
    first = lambda r, name: next(e["t"] for e in events[r] if e["event"] == name)  # noqa: E731
    assert sorted(units) == [0, 1, 2, 3] and units[3]["nodes"] == ["benchmark/test_timing.py::test_perf_luck"]
    assert [e["nodes"] for e in events[3] if e["event"] == "launch"] == [1]  # one process: the spare, luck alone
    assert first(3, "launch") < first(2, "exited")
    assert {r["op"]: r["processes"] for r in _rows(res.run_dir)}["luck"] == 4
    with open(res.run_dir / "ops_status.csv") as f:
        assert {r["op"]: r["status"] for r in csv.DictReader(f)} == {"luck": "ok", "broken": "failed"}


def test_a_killed_runs_spare_dirs_are_cleared_when_its_run_goes_on(tmp_path):
    """A spare's dir holds its launch and process facts: a killed run leaves them, and a resumed
    unit of that id (one started without spares) would read them as its own."""
    from zlbench.engine.spares import spare_queues

    for name in ("main.r0.d0.s0", "main.r1.d0.s0", "main.r3.d0.s0", "main.r4.d1.s0", "main.r3.d0.s1"):
        (tmp_path / "units" / name).mkdir(parents=True)
    plan = SimpleNamespace(processes=3, max_processes=6, more_passes=None, more_together=True,
                           units=[SimpleNamespace(unit_id="main.r0.d0.s0", round=0)])
    assert spare_queues(plan, tmp_path, True, None) == {}
    assert sorted(p.name for p in (tmp_path / "units").iterdir()) == ["main.r0.d0.s0", "main.r1.d0.s0", "main.r3.d0.s1"]


def test_the_shapes_before_a_wide_row_are_those_its_test_ran_before_it(tmp_path):
    """A more pass times its test up to the wide row in the order the items run: an item that failed
    in the first planned pass and ended ok in a later one keeps its place (it was placed by when it
    first ended ok, after the items it runs before, whose shapes were then left out)."""
    from types import SimpleNamespace

    from zlbench.engine.more_processes import chosen_shapes
    from zlbench.results.events import events_path

    def unit(uid, r, items):
        path = events_path(tmp_path, uid)
        path.parent.mkdir(parents=True, exist_ok=True)
        events = []
        for t, (item, status) in enumerate(items):
            events.append({"event": "start", "t": t, "node": item})
            if status == "ok":
                events.append({"event": "record", "t": t, "node": item, "timing": [{"calls": 1}, {"calls": 1}],
                               "payload": {"op_name": "f", "dtype": "float32",
                                           "result": [{"shape_detail": [[n]], "latency": 1.0} for n in (8, 64)]}})
            events.append({"event": "end", "t": t + 0.5, "node": item, "status": status})
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
        return SimpleNamespace(unit_id=uid, round=r)

    a, b, c = (f"t.py::test_f[{x}]" for x in "abc")
    plan = SimpleNamespace(processes=3, units=[unit("main.r0.d0.s0", 0, [(a, "ok"), (b, "failed"), (c, "ok")]),
                                               unit("main.r1.d0.s0", 1, [(a, "ok"), (b, "ok"), (c, "ok")]),
                                               unit("main.r2.d0.s0", 2, [(a, "ok"), (b, "ok"), (c, "ok")])])

    def calls(wide_item):
        shapes, shares = chosen_shapes(tmp_path, plan, [{"node": wide_item, "op": "f", "dtype": "float32",
                                                         "shape": "[[8]]"}])
        return {k.split("::")[1]: v["calls"] for k, v in shapes["t.py::test_f"].items()}, shares["t.py::test_f"]

    assert calls(c) == ({"test_f[a]": [0, 1], "test_f[b]": [0, 1], "test_f[c]": [0]}, 5 / 6)
    assert calls(b) == ({"test_f[a]": [0, 1], "test_f[b]": [0]}, 3 / 6)  # c, after it, never runs
    # An item before the wide one that never ended ok in a planned pass: its calls are not known,
    # so the node's more passes time everything (no entry), rather than skip what ran before the row.
    plan.units = [unit(f"main.r{r}.d0.s0", r, [(a, "ok"), (b, "failed"), (c, "ok")]) for r in range(3)]
    shapes, _ = chosen_shapes(tmp_path, plan, [{"node": c, "op": "f", "dtype": "float32", "shape": "[[8]]"}])
    assert "t.py::test_f" not in shapes, shapes


def test_a_more_pass_record_with_another_number_of_calls_a_shape_than_chosen_is_not_matched(monkeypatch):
    """A test that made 2 calls a shape where its planned passes made 1 (its records cannot say which
    call was whose): the record's shapes become no row, and why is said (plugins/record.py)."""
    from zlbench.plugins import only_shapes, record

    monkeypatch.setattr(only_shapes, "calls_per_shape", lambda: 1)
    made, left = {"timer_used": "graph"}, {"timer_used": "graph", "skipped": True}
    results = [{"latency": 0.2, "latency_base": 0.2}, {"latency": only_shapes.STAND_IN_MS}]
    assert record._misfit(results, [[made, made], [left, left]], True, [False, True]) == \
        "2 call(s) a shape, not the 1 chosen"
    monkeypatch.setattr(only_shapes, "calls_per_shape", lambda: 2)
    assert record._misfit(results, [[made, made], [left, left]], True, [False, True]) == ""
    assert record._misfit(results[::-1], [[made, made], [left, left]], True, [False, True]) == \
        "the results are not in the order they were timed"
