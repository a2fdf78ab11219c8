"""The process is the unit of variation: a plain run measures each node in timer.processes
independent benchmark processes and reports each row's median with a process-level interval; an A/B
runs each round in a fresh pair of side processes (zlbench/results/process_stats.py, planning/plan.py)."""

import csv
import json
import math
import random
import re
import statistics
from collections import defaultdict

import pytest

from zlbench.results.process_stats import aggregate
from zlbench.results.schema import MARKER_NO_DEVICE_WORK, MARKER_PROCESS_UNSTABLE

from .test_resident import CORPUS as AB_CORPUS, node_runs
from .conftest import FIXTURES, zlbench


def proc_rows(values, op="exp", shape="[[64]]", base=None, timer="graph"):
    """One row per process (round) of one (node, op, dtype, shape)."""
    return [{"node": f"n::{op}", "op": op, "dtype": "torch.float32", "shape": shape, "side": "main",
             "status": "ok", "latency": v, "latency_base": (base[i] if base else None), "round": i,
             "markers": [], "gbps": 100.0 / v, "timer_used": timer} for i, v in enumerate(values)]


def quiet_run(rng, rows=12, k=3, sd=0.01):
    """Rows of similar size whose processes scatter by a log-normal sd."""
    out = []
    for i in range(rows):
        out += proc_rows([0.05 * math.exp(rng.gauss(0, sd)) for _ in range(k)], op=f"op{i}",
                         base=[0.04 * math.exp(rng.gauss(0, sd)) for _ in range(k)])
    return out


def test_a_size_class_of_few_nodes_is_judged_against_rows_of_the_nearest_sizes():
    """Process noise falls tenfold from 1 us to 1 ms rows: two nodes of 2 us rows (4% apart) are
    judged against the 10 us rows beside them (1.5%), not against the run's many 0.3 ms rows (0.2%),
    which made them 'unstable' and gave a one-process 2 us row a 0.3 ms row's narrow interval."""
    def spread(ms, sd):  # three processes whose log-values have variance sd**2
        return [ms * math.exp(sd * z) for z in (-1, 0, 1)]

    rows = [r for i in range(2) for r in proc_rows(spread(0.002, 0.04), op=f"tiny{i}")]
    rows += [r for i in range(4) for r in proc_rows(spread(0.010, 0.015), op=f"small{i}")]
    rows += [r for i in range(80) for r in proc_rows(spread(0.3, 0.002), op=f"big{i}")]  # 95% of all scores
    rows += proc_rows([0.002], op="tiny_cut")  # a node a cut run measured in one process
    out = {r["op"]: r for r in aggregate(rows, 3)}
    assert not any(MARKER_PROCESS_UNSTABLE in out[f"tiny{i}"]["markers"] for i in range(2))
    small, tiny_cut = _width(out["small0"]), _width(out["tiny_cut"])
    assert _width(out["tiny0"]) > small > 5 * _width(out["big0"])
    assert tiny_cut > small  # borrowed from the small rows' processes, not the big rows'


def test_a_row_is_the_median_over_its_processes_with_an_interval_around_it():
    rng = random.Random(1)
    rows = aggregate(quiet_run(rng) + proc_rows([0.050, 0.052, 0.051], op="target"), 3)
    row = next(r for r in rows if r["op"] == "target")
    assert row["latency"] == pytest.approx(0.051) and row["processes"] == 3 and row["round"] is None
    lo, hi = row["latency_ci"]
    assert lo < 0.050 and hi > 0.052  # the interval covers what its processes read
    assert row["gbps"] == pytest.approx(100.0 / 0.051)  # throughputs follow the median latency
    assert MARKER_PROCESS_UNSTABLE not in row["markers"]
    assert len(rows) == 13  # one row per (node, op, dtype, shape), not one per process
    # The baseline the same, under timing_base.
    quiet = next(r for r in rows if r["op"] == "op0")
    blo, bhi = quiet["timing_base"]["latency_ci"]
    assert blo < quiet["latency_base"] < bhi and quiet["timing_base"]["processes"] == 3
    assert quiet["speedup"] == pytest.approx(quiet["latency_base"] / quiet["latency"])


def test_intervals_cover_another_run_of_the_same_caliber():
    """Simulated runs of 200 rows whose processes scatter by 2%: another run's row value lies inside
    this run's interval for about 95% of rows (a prediction interval, not a CI of the mean)."""
    rng = random.Random(7)
    covered = total = 0
    for _ in range(10):
        truth = [0.01 * math.exp(rng.gauss(0, 1)) for _ in range(200)]
        runs = []
        for _ in range(2):
            rows = []
            for i, t in enumerate(truth):
                rows += proc_rows([t * math.exp(rng.gauss(0, 0.02)) for _ in range(3)], op=f"op{i}")
            runs.append({r["op"]: r for r in aggregate(rows, 3)})
        for op, r in runs[0].items():
            lo, hi = r["latency_ci"]
            covered += lo <= runs[1][op]["latency"] <= hi
            total += 1
    assert 0.90 <= covered / total <= 0.99, covered / total


def test_a_row_whose_processes_disagree_is_marked_unstable_with_its_own_wide_interval():
    rng = random.Random(3)
    rows = aggregate(quiet_run(rng) + proc_rows([0.050, 0.050, 0.070], op="picky"), 3)
    row = next(r for r in rows if r["op"] == "picky")
    assert MARKER_PROCESS_UNSTABLE in row["markers"]
    assert "0.07" in row["marker_reason"]
    lo, hi = row["latency_ci"]
    assert lo < 0.050 and hi > 0.070
    # Its neighbours keep their narrow intervals: one unstable row does not widen the rest.
    quiet = [r for r in rows if r["op"].startswith("op")]
    assert max((r["latency_ci"][1] - r["latency_ci"][0]) / r["latency"] for r in quiet) < 0.15


def _width(row):
    lo, hi = row["latency_ci"]
    return (hi - lo) / row["latency"]


def test_rows_timed_directly_after_a_refused_capture_do_not_widen_graph_rows_of_their_size():
    """On the H200 a refused capture's direct timing (masked_select) scattered 13-65% between
    processes; graph replays of the same size 0.2%: each timer's rows are their own stratum."""
    rng = random.Random(3)
    rows = []
    for i in range(5):
        rows += proc_rows([0.5 * math.exp(rng.gauss(0, 0.002)) for _ in range(3)], op=f"g{i}")
    for i in range(6):
        rows += proc_rows([0.5 * math.exp(rng.gauss(0, 0.2)) for _ in range(3)], op=f"d{i}", timer="direct")
    out = {r["op"]: r for r in aggregate(rows, 3)}
    assert max(_width(out[f"g{i}"]) for i in range(5)) < 0.03
    assert min(_width(out[f"d{i}"]) for i in range(6)) > 0.1


def test_a_node_timed_directly_alone_among_graph_rows_borrows_its_own_rows_spread():
    """On an H100 nonzero_numpy (its capture refused: timed directly, host-bound) was the run's only
    node timed directly; its processes scattered 2-36%, and a shape whose two processes happened
    to agree read a 1.5-3% interval from the graph rows' pool, which the next run missed by 3-13%
    (RESULTS.md, forty-fifth session). Too few nodes of its timer: its rows pool by rows."""
    rng = random.Random(11)
    graph = quiet_run(rng, sd=0.003)
    direct = []
    for i in range(6):
        direct += proc_rows([0.3 * math.exp(rng.gauss(0, 0.08)) for _ in range(2)], op="nz", shape=f"[[{i}]]",
                            timer="direct")
    direct += proc_rows([0.3, 0.3003], op="nz", shape="[[99]]", timer="direct")  # two that agree
    out = {(r["op"], r["shape"]): r for r in aggregate(graph + direct, 3)}
    agreeing = out[("nz", "[[99]]")]
    assert _width(agreeing) > 0.1 and MARKER_PROCESS_UNSTABLE not in agreeing["markers"], agreeing
    alone = {(r["op"], r["shape"]): r for r in aggregate(graph, 3)}  # graph rows borrow nothing from it
    assert all(out[k]["latency_ci"] == alone[k]["latency_ci"] for k in alone)
    # A pool of few nodes marks no row unstable: one steady node's many rows do not make another
    # node's 2% spread read apart (as test_a_stratum_of_few_nodes_does_not_mark_another_nodes_row_unstable).
    steady = [r for i in range(4) for r in proc_rows([0.500, 0.5001, 0.5002 + 0.0001 * i], op="steady",
                                                      shape=f"[[{i}]]", timer="direct")]
    other = proc_rows([0.111, 0.1133, 0.1136], op="other", timer="direct")
    row = next(r for r in aggregate(graph + steady + other, 3) if r["op"] == "other")
    assert MARKER_PROCESS_UNSTABLE not in row["markers"] and row["latency_ci"][0] < 0.111 < 0.1136 < row["latency_ci"][1]
    # Two rows timed directly are too few to pool (MIN_ROWS): the run's rows speak for them, as before.
    few = {(r["op"], r["shape"]): r for r in aggregate(graph + direct[:2] + direct[-2:], 3)}
    assert _width(few[("nz", "[[99]]")]) < 0.1


def test_a_stratum_of_few_nodes_does_not_mark_another_nodes_row_unstable():
    """Rows of one node share its processes' draws: one steady node's four rows in a size class
    are not enough to call a 2% spread of another node's row beyond its peers; the graph rows of
    every size speak for it."""
    rows = []
    for i, shape in enumerate(("[[1]]", "[[2]]", "[[3]]", "[[4]]")):
        rows += proc_rows([0.500, 0.5001, 0.5002 + 0.0001 * i], op="steady", shape=shape)
    rows += proc_rows([0.111, 0.1133, 0.1136], op="other")
    rng = random.Random(5)
    for i in range(6):
        rows += proc_rows([0.01 * math.exp(rng.gauss(0, 0.01)) for _ in range(3)], op=f"small{i}")
    other = next(r for r in aggregate(rows, 3) if r["op"] == "other")
    assert MARKER_PROCESS_UNSTABLE not in other["markers"]
    lo, hi = other["latency_ci"]
    assert lo < 0.111 and hi > 0.1136


def test_a_run_of_one_node_still_pools_its_rows():
    """One op file, one test node: too few nodes for a stratum, but its rows together say how far
    its processes scatter; a row whose three processes happened to agree is not given a 0-wide
    interval."""
    rng = random.Random(11)
    rows = []
    for i, size in enumerate((0.002, 0.01, 0.05, 0.2)):
        rows += [{**r, "node": "n::one"} for r in proc_rows([size * math.exp(rng.gauss(0, 0.02)) for _ in range(3)],
                                                            op="one", shape=f"[[{i}]]")]
    rows += [{**r, "node": "n::one"} for r in proc_rows([0.5, 0.5001, 0.5002], op="one", shape="[[9]]")]
    lucky = next(r for r in aggregate(rows, 3) if r["shape"] == "[[9]]")
    assert _width(lucky) > 0.01


def test_a_row_that_timed_an_empty_replay_gets_no_interval_and_is_not_called_unstable():
    """A view (einsum 'ij->ji') replays an empty graph in 1-3 ns: noise that is no process effect."""
    rng = random.Random(6)
    view = proc_rows([1.3e-6, 1.9e-6, 2.7e-6], op="view", base=[0.004, 0.0041, 0.0042])
    for r in view:
        r["markers"] = [MARKER_NO_DEVICE_WORK]
    out = {r["op"]: r for r in aggregate(quiet_run(rng) + view, 3)}
    row = out["view"]
    assert row["latency"] == pytest.approx(1.9e-6) and row["processes"] == 3
    assert row["latency_ci"] is None and MARKER_PROCESS_UNSTABLE not in row["markers"]
    assert row["markers"] == [MARKER_NO_DEVICE_WORK]
    # its baseline did launch a kernel: that keeps its interval
    lo, hi = row["timing_base"]["latency_ci"]
    assert lo < row["latency_base"] < hi
    assert out["op0"]["latency_ci"] is not None


def test_failures_are_kept_once_and_a_row_of_one_process_says_so():
    rng = random.Random(5)
    failed = {"node": "n::bad", "op": "bad", "dtype": "torch.float32", "shape": "[[8]]", "side": "main",
              "status": "failed", "reason": "boom", "latency": None, "round": 0, "markers": []}
    rows = aggregate(quiet_run(rng) + [failed, {**failed, "round": 1}] + proc_rows([0.05], op="lonely"), 3)
    bad = [r for r in rows if r["op"] == "bad"]
    assert len(bad) == 1 and bad[0]["status"] == "failed" and bad[0]["processes"] == 0
    lonely = next(r for r in rows if r["op"] == "lonely")
    assert lonely["processes"] == 1  # the stratum's typical spread still gives it an interval
    assert lonely["latency_ci"][0] < 0.05 < lonely["latency_ci"][1]


def test_a_row_of_one_process_is_as_wide_as_its_strata_tail_of_rows_a_pick_moves():
    """A cut run's row measured in one process cannot tell whether it is a row whose processes draw
    different picks. Where 3 of 12 rows of its stratum have one process 25% off (on the H200: 5-70%
    moves of us rows), its interval holds such a move; among quiet rows it stays narrow. Before, it
    took the stratum's median spread (+-1.7%) and missed 7-24% moves between two cut runs."""
    rng = random.Random(5)
    quiet = quiet_run(rng)
    lonely = proc_rows([0.05], op="lonely")
    narrow = next(r for r in aggregate(quiet + lonely, 3) if r["op"] == "lonely")
    lo, hi = narrow["latency_ci"]
    assert 0.95 * 0.05 < lo < 0.05 < hi < 1.05 * 0.05
    picky = quiet_run(random.Random(5), rows=9)
    for i in range(3):
        picky += proc_rows([0.05, 0.0502, 0.0625], op=f"picky{i}")
    wide = next(r for r in aggregate(picky + lonely, 3) if r["op"] == "lonely")
    lo, hi = wide["latency_ci"]
    assert lo < 0.05 / 1.2 and hi > 0.05 * 1.2
    assert MARKER_PROCESS_UNSTABLE not in wide["markers"]  # nothing of its own says so


def test_a_row_of_one_process_among_many_rows_takes_the_quantile_not_the_worst_row():
    """Among 40 nodes, two whose one process a pick moved 60% are 1 process in 40: a one-process
    row's interval stays narrow (the 95% score, each moved process one large score; scored against
    the median of the others, each would have moved its row's other two scores as well)."""
    rng = random.Random(12)
    rows = []
    for i in range(40):
        values = [0.05 * math.exp(rng.gauss(0, 0.003)) for _ in range(3)]
        if i < 2:
            values[0] *= 1.6
        rows += proc_rows(values, op=f"op{i}")
    lonely = next(r for r in aggregate(rows + proc_rows([0.05], op="lonely"), 3) if r["op"] == "lonely")
    assert _width(lonely) < 0.03, _width(lonely)


def test_a_row_of_one_process_borrows_from_its_timers_rows_of_every_size_then_from_one_node():
    """No rows of its size measured in several processes: its timer's rows of every size speak for
    it; in a cut run of one op file (one node), that node's rows of several processes do."""
    rng = random.Random(13)
    rows = []
    for i in range(7):  # seven nodes of ~1 ms rows, 2% apart between processes
        rows += proc_rows([1.0 * math.exp(rng.gauss(0, 0.02)) for _ in range(3)], op=f"big{i}")
    lonely = next(r for r in aggregate(rows + proc_rows([0.005], op="small"), 3) if r["op"] == "small")
    assert 0.03 < _width(lonely) < 0.3, _width(lonely)

    def node(name, sd, shapes=7):
        out = []
        for i in range(shapes):
            out += [{**r, "node": f"n::{name}"} for r in proc_rows([0.05 * math.exp(rng.gauss(0, sd)) for _ in range(3)],
                                                                   op=name, shape=f"[[{i}]]")]
        return out + [{**r, "node": f"n::{name}"} for r in proc_rows([0.05], op=name, shape="[[99]]")]

    cut = next(r for r in aggregate(node("one", 0.02), 3) if r["shape"] == "[[99]]")
    assert cut["processes"] == 1 and 0.03 < _width(cut) < 0.3, cut["latency_ci"]
    # Two such nodes: each row takes its own node's spread, whichever comes first.
    for order in ((0.002, 0.05), (0.05, 0.002)):
        out = aggregate(node("a", order[0]) + node("b", order[1]), 3)
        widths = {r["op"]: _width(r) for r in out if r["shape"] == "[[99]]"}
        assert (widths["a"] < widths["b"]) == (order[0] < order[1]), (order, widths)
    # Another node's rows speak for their node only; 2 rows of 3 processes are too few (6 scores).
    out = aggregate(node("a", 0.02) + [{**r, "node": "n::c"} for r in proc_rows([0.05], op="c")], 3)
    assert next(r for r in out if r["op"] == "c")["latency_ci"] is None
    out = aggregate(node("d", 0.02, shapes=2), 3)
    assert next(r for r in out if r["shape"] == "[[99]]")["latency_ci"] is None


def test_one_process_intervals_hold_another_runs_value_95_percent_of_the_time():
    """Simulated cut runs whose rows scatter by a log-normal 2% between processes, the stratum's rows
    measured in two processes (a process' distance from the median of two is half their difference:
    its sd is 1/sqrt(2) of one process'), the cut row in one: another run's median over 3 processes
    lies inside the cut row's interval about 95% of the time."""
    rng = random.Random(21)
    covered = total = 0
    for _ in range(300):
        rows = []
        for i in range(12):
            rows += proc_rows([0.05 * math.exp(rng.gauss(0, 0.02)) for _ in range(2)], op=f"op{i}")
        cut = next(r for r in aggregate(rows + proc_rows([0.05 * math.exp(rng.gauss(0, 0.02))], op="cut"), 3)
                   if r["op"] == "cut")
        other = statistics.median(0.05 * math.exp(rng.gauss(0, 0.02)) for _ in range(3))
        covered += cut["latency_ci"][0] <= other <= cut["latency_ci"][1]
        total += 1
    assert 0.91 <= covered / total <= 0.99, covered / total


def test_odd_values_and_process_counts_do_not_spoil_the_other_rows():
    """A NaN or infinite latency (a corrupt record) is no measurement: it widens no other row's
    interval; aggregate with no planned processes still aggregates."""
    rng = random.Random(22)
    rows = quiet_run(rng) + proc_rows([float("nan"), float("inf"), 0.05], op="odd") + proc_rows([0.05], op="lonely")
    out = {r["op"]: r for r in aggregate(rows, 3)}
    assert out["odd"]["processes"] == 1 and all(math.isfinite(x) for x in out["lonely"]["latency_ci"])
    assert _width(out["lonely"]) < 0.2
    assert aggregate(quiet_run(rng) + proc_rows([0.05], op="lonely"), 0)


def test_a_directly_timed_row_of_one_process_borrows_no_graph_rows_interval():
    """On the H200 one-process rows timed directly after a refused capture moved 3-95% between two
    cut runs, inside +-1.7% intervals taken from graph replays: 12% of them held the other run's
    value. With no directly timed rows of several processes to learn from, it gets no interval
    (an A/B of two runs then reads it inconclusive) rather than a graph row's."""
    rng = random.Random(8)
    lonely = proc_rows([0.05], op="lonely", timer="direct")
    row = next(r for r in aggregate(quiet_run(rng) + lonely, 3) if r["op"] == "lonely")
    assert row["processes"] == 1 and row["latency_ci"] is None
    # With four nodes timed directly (scattering 20%), it gets their width.
    direct = []
    for i in range(4):
        for shape in ("[[1]]", "[[2]]"):
            direct += proc_rows([0.05 * math.exp(rng.gauss(0, 0.2)) for _ in range(3)], op=f"d{i}", shape=shape,
                                timer="direct")
    row = next(r for r in aggregate(quiet_run(rng) + direct + lonely, 3) if r["op"] == "lonely")
    assert _width(row) > 0.3


# -- real runs of the demo corpus ------------------------------------------------------------------
@pytest.mark.slow
def test_a_plain_run_at_defaults_measures_every_node_in_several_processes(run_zlbench):
    res = run_zlbench("backend=cpu", "ops=[exp,gelu]", "dtypes=[float32]", "store.url=none", defaults=True)
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    plan = json.loads((d / "plan.json").read_text())
    k = plan["processes"]
    assert k >= 2 and plan["rounds"] == k
    # Each pass its own process with a tuning cache of its own, the node order shuffled per pass.
    caches = {u["round"]: u["env"]["FLAGGEMS_CACHE_DIR"] for u in plan["units"]}
    assert len(set(caches.values())) == k
    procs = json.loads((d / "processes.json").read_text())
    assert len(procs) == k and {p["tuning_cache"] for p in procs.values()} == set(caches.values())
    rows = [json.loads(x) for x in (d / "rows.jsonl").read_text().splitlines()]
    per_process = [json.loads(x) for x in (d / "process_rows.jsonl").read_text().splitlines()]
    assert len(per_process) == k * len(rows)
    keys = {(r["op"], r["shape"]) for r in rows}
    assert len(keys) == len(rows)  # one row per shape
    for r in rows:
        assert r["status"] == "ok" and r["processes"] == k
        lo, hi = r["latency_ci"]
        assert lo <= r["latency"] <= hi
        values = sorted(p["latency"] for p in per_process if (p["op"], p["shape"]) == (r["op"], r["shape"]))
        assert r["latency"] == pytest.approx(values[len(values) // 2] if k % 2 else sum(values[k // 2 - 1:k // 2 + 1]) / 2)
        assert r["timing_base"]["latency_ci"][0] <= r["latency_base"] <= r["timing_base"]["latency_ci"][1]
    summary = (d / "summary.md").read_text()
    assert "## Processes" in summary and f"({len(rows)} row(s) in {k} processes)" in summary
    # Where its wall went, pass by pass, and what trades time for what it samples.
    time_part = summary.split("## Time", 1)[1]
    took = re.search(rf"- (\d+) s of benchmark processes running: {k} planned pass\(es\) \(a process each, timing "
                     rf"every selected test once\) spent ((?:[\d.]+, )*[\d.]+) s in their tests", time_part)
    assert took and len(took.group(2).split(", ")) == k, time_part
    assert "more pass" not in time_part  # none on the CPU
    # On the CPU processes start one after another, and nothing tunes: no share_tuning to offer.
    assert "s in all, each process starting when the one before ended" in time_part, time_part
    assert "- to spend less: `timer.processes=1`" in time_part and "share_tuning" not in time_part
    # ops_status counts a node's rows once, not once per process; run.log holds each row once.
    status = (d / "ops_status.csv").read_text().splitlines()[1:]
    assert {line.split(",")[4] for line in status} == {str(len(rows) // 2)}
    logged = [json.loads(x[len("[INFO] "):]) for x in (d / "run.log").read_text().splitlines()[1:]]
    assert sum(len(rec["result"]) for rec in logged) == len(rows)
    # what FlagGems' own tools read of a record (benchmark/summary_for_plot.py parse_log: data["level"])
    assert all({"op_name", "dtype", "mode", "level", "result"} <= set(rec) for rec in logged), logged[0]
    # run.log read back (zlbench summary LOG, history import LOG) keeps each row's interval: it
    # used to lose it, and a log compared on "too little history" where its run had intervals.
    from zlbench.results.flaggems_log import rows_from_log

    by_key = {(r["op"], r["shape"]): r for r in rows}
    back = rows_from_log(d / "run.log")
    assert len(back) == len(rows)
    for r in back:
        want = by_key[(r["op"], r["shape"])]
        assert r["processes"] == k and r["latency_ci"] == pytest.approx(want["latency_ci"]), r


def test_cases_whose_shapes_read_alike_stay_rows_of_their_own_over_processes(run_zlbench, faulty_corpus):
    # FlagGems' bincount: one shape detail, several cases (class counts). Merged by key, they read as
    # one row of twice the processes, "unstable", its median between the cases.
    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={faulty_corpus}", "ops=[cases]",
                      "store.url=none", "timer.processes=2")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(x) for x in (res.run_dir / "rows.jsonl").read_text().splitlines()]
    assert [(r["shape"], r["latency"], r["processes"]) for r in rows] == [("[[64]]", 0.5, 2), ("[[64]] #2", 4.0, 2)]
    assert not [r for r in rows if "BENCHMARK_PROCESS_UNSTABLE" in r["markers"]]


def test_tests_of_one_op_timing_one_shape_stay_apart_in_a_plain_run_and_an_aa(run_zlbench, faulty_corpus):
    """FlagGems' einsum trace and transpose (one mark, one op name) time the same shapes: rows of
    their own in rows.jsonl, run.log (and read back), ab.md and ab.csv, never paired across tests."""
    from zlbench.results.flaggems_log import rows_from_log

    base = ["backend=cpu", "corpus=flaggems", f"corpus.root={faulty_corpus}", "ops=[shared]", "store.url=none"]
    res = run_zlbench(*base, "timer.processes=2")
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    rows = [json.loads(x) for x in (d / "rows.jsonl").read_text().splitlines()]
    mine = {(r["node"].rpartition("::")[2], r["shape"]): (r["latency"], r["processes"]) for r in rows}
    assert mine == {("test_perf_shared_trace", "[[64,64]]"): (0.5, 2), ("test_perf_shared_trace", "[[128,128]]"): (1.0, 2),
                    ("test_perf_shared_transpose", "[[64,64]]"): (4.0, 2),
                    ("test_perf_shared_transpose", "[[128,128]]"): (8.0, 2)}
    back = rows_from_log(d / "run.log")
    assert sorted((r["node"].rpartition("::")[2], r["shape"], round(r["latency"], 9), r["round"]) for r in back) == sorted(
        (node, shape, lat, 0) for (node, shape), (lat, _) in mine.items())
    assert "| shared | float16 |        4 |" in (d / "summary.md").read_text()  # 2 tests x 2 shapes
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "zlbench", "summary", str(d / "run.log")], capture_output=True, text=True)
    assert out.returncode == 0 and "| ok       |            2 |" in out.stdout, out.stdout  # two test nodes

    res = run_zlbench(*base, "ab=triton_fp_fusion", "ab.aa=true", "ab.rounds=2", "ab.min_rounds=2",
                      run_dir=d.parent / "aa")
    assert res.returncode == 0, res.stderr[-3000:]
    ab = json.loads((res.run_dir / "ab.json").read_text())
    paired = {(r["node"].rpartition("::")[2], r["shape"]): (round(r["a_ms"], 9), round(r["b_ms"], 9))
              for r in ab["rows"]}
    assert paired == {k: (lat, lat) for k, (lat, _) in mine.items()}
    md = (res.run_dir / "ab.md").read_text()
    assert "shared (test_perf_shared_trace)" in md and "shared (test_perf_shared_transpose)" in md
    # A compiler switch on the CPU: the start-up note went to stderr only; ab.md says it too
    assert ("ab=triton_fp_fusion switches TRITON_DEFAULT_FP_FUSION, a Triton/FlagTree compiler setting, and this "
            "run was on the CPU, which runs no Triton kernel") in " ".join(md.split()), md


def test_a_one_process_run_log_names_its_tests_and_reads_back_by_them(run_zlbench, faulty_corpus):
    """timer.processes=1: run.log is the corpus' own records, which named no test: read back, trace's
    and transpose's records of one shape were two rounds of one row, and against the run dir every
    shape was unpaired ('which to pair is unknown'). Each record now names its test node."""
    import subprocess
    import sys

    from zlbench.results.flaggems_log import rows_from_log

    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={faulty_corpus}", "ops=[shared]",
                      "store.url=none", "timer.processes=1")
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    rows = [json.loads(line) for line in (d / "rows.jsonl").read_text().splitlines()]
    # each row says it is one process' (null is an A/B row's), with no interval of its own
    assert rows and all(r["processes"] == 1 and r["latency_ci"] is None for r in rows), rows
    back = rows_from_log(d / "run.log")
    assert sorted((r["node"].rpartition("::")[2], r["shape"], r["round"]) for r in back) == [
        ("test_perf_shared_trace", "[[128,128]]", 0), ("test_perf_shared_trace", "[[64,64]]", 0),
        ("test_perf_shared_transpose", "[[128,128]]", 0), ("test_perf_shared_transpose", "[[64,64]]", 0)]
    out = subprocess.run([sys.executable, "-m", "zlbench", "summary", str(d), "--ab", str(d / "run.log"),
                          "--out", str(d.parent / "cmp")], capture_output=True, text=True)
    ab = json.loads((d.parent / "cmp" / "ab.json").read_text())
    assert ab["summary"]["paired_rows"] == 4 and not ab["unpaired"], (out.stderr[-2000:], ab["unpaired"])


def _unit_events(run_dir):
    plan = json.loads((run_dir / "plan.json").read_text())
    return [(u, [json.loads(x) for x in (run_dir / "units" / u["unit_id"] / "events.jsonl").read_text().splitlines()])
            for u in plan["units"]]


def test_each_pass_process_starts_while_the_one_before_measures_and_waits_at_its_gate(run_zlbench):
    """launcher.prestart (on by default for accelerators): a pass' process imports and collects while
    the pass before it measures, and measures only after that one has exited."""
    res = run_zlbench("backend=cpu", "backend.slots=2", "ops=[exp,softmax]", "dtypes=[float32]", "store.url=none",
                      "timer.processes=3", "launcher.prestart=true")
    assert res.returncode == 0, res.stderr[-3000:]
    units = _unit_events(res.run_dir)
    assert len(units) == 6 and all(u["prestart"] and u["pool"] for u, _ in units)  # two devices: pools to steal from
    first = lambda evs, name: next(e for e in evs if e["event"] == name)  # noqa: E731
    queues = [[(u, evs) for u, evs in units if u["device"] == d] for d in (0, 1)]
    for (_, before), (_, after) in [pair for q in queues for pair in zip(q, q[1:])]:
        exited = first(before, "exited")["t"]
        assert first(after, "launch")["t"] < exited  # started ahead, while the pass before ran
        gate = first(after, "gate")  # passed only once the pass before had exited
        assert gate["t"] >= exited and gate["t"] - gate["reached"] == pytest.approx(gate["waited_s"], abs=0.01)
        starts = [e["t"] for e in after if e["event"] == "start"]
        assert starts and min(starts) >= exited
    # Two ahead (PRESTART_AHEAD) where the job has the CPUs for it: a third pass starts while the
    # first measures, so its start-up is hidden behind two passes, not one (tests/test_run_in_turn.py
    # has the order on any machine).
    from zlbench.engine.spares import cpu_share

    if cpu_share(2) >= 3:
        for q in queues:
            assert first(q[2][1], "launch")["t"] < first(q[0][1], "exited")["t"]
    rows = [json.loads(x) for x in (res.run_dir / "rows.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "ok" and r["processes"] == 3 for r in rows)
    assert {r["op"] for r in rows} == {"exp", "softmax"}
    # Not a caliber: the same run without it resumes as the same run (nothing left to measure).
    again = run_zlbench("backend=cpu", "backend.slots=2", "ops=[exp,softmax]", "dtypes=[float32]", "store.url=none",
                        "timer.processes=3", f"resume={res.run_dir}")
    assert again.returncode == 0, again.stderr[-3000:]


@pytest.mark.slow
def test_a_process_started_ahead_of_a_cut_pass_is_stopped_and_its_nodes_are_resumable(run_zlbench, tmp_path):
    """A run cut by its time limit while the next pass' process waits at its gate: that process is
    killed (no orphan left), its nodes read as cut (resumable), never as crashed."""
    import psutil

    # Nodes that wait 4 s each: the first pass (16 s) is surely cut by the 10 s limit, however fast
    # the machine (a demo run of two ops once fitted in its limit).
    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={FIXTURES / 'wait_corpus'}",
                      "ops=['wait_0[0-3]']", "store.url=none", "timer.processes=3", "launcher.prestart=true",
                      "launcher.run_timeout_s=10", env={"WAIT_S": "4"})
    assert res.returncode == 4, res.stderr[-3000:]
    units = _unit_events(res.run_dir)
    assert sum(1 for _, evs in units for e in evs if e["event"] == "launch") >= 2  # one started ahead
    ends = [e for _, evs in units for e in evs if e["event"] == "end"]
    assert ends and not [e for e in ends if e["status"] == "crashed"]
    assert any(e["status"] == "timeout" and e.get("resumable") for e in ends)
    # The banner tells nodes the first pass measured (rows from fewer processes) from the rest.
    rows = [json.loads(x) for x in (res.run_dir / "rows.jsonl").read_text().splitlines()]
    partly = {r["node"] for r in rows if r["status"] == "ok"}
    assert all(r["processes"] < 3 for r in rows if r["status"] == "ok")
    banner = (res.run_dir / "summary.md").read_text().splitlines()[0]
    assert "Run cut short" in banner and "4 of 4 node(s)" in banner
    # `zlbench summary` of the run dir says the same (it read ops_status.csv, which keeps no
    # resumable column: the banner was gone), and exits as the run did: 4, cut (it exited 0).
    summarized = zlbench("summary", res.run_dir, defaults=True)
    assert summarized.returncode == 4 and summarized.stdout.strip() == (res.run_dir / "summary.md").read_text().strip(), \
        summarized.stdout[:3000]
    assert (f"not measured in all 3 processes ({len(partly)} in fewer" in banner) if partly else \
        "node(s) not measured. Resume" in banner
    # ops_status.csv says so per node, beside the reason the later passes did not measure it.
    with open(res.run_dir / "ops_status.csv") as f:
        reasons = {r["test_node"]: r["reason"] for r in csv.DictReader(f)}
    assert len(reasons) == 4
    for node, reason in reasons.items():
        assert reason.startswith("measured in 1 of 3 processes; not in the others: ") == (node in partly), reason

    def of_the_run(proc):  # a benchmark process runs in its unit's dir
        try:
            return proc.cwd().startswith(str(res.run_dir)) and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    assert not [p for p in psutil.process_iter() if of_the_run(p)]


def test_the_cpu_backend_starts_no_process_ahead_by_default(tmp_path):
    from zlbench.backends import get_backend
    from zlbench.planning.plan import prestarts

    assert not prestarts(get_backend("cpu"), {})
    assert prestarts(get_backend("cuda"), {}) and prestarts(get_backend("musa"), {"prestart": None})
    assert not prestarts(get_backend("cuda"), {"prestart": False})


FREEZE_PROBE = """
import gc, json, os, weakref
import pytest

class Cycle:
    pass

seen, _refs = [], {}

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    c = Cycle(); c.me = c  # garbage with a cycle, made while the node runs: only a collection frees it
    _refs[item.nodeid] = weakref.ref(c)
    del c
    frozen = gc.get_freeze_count()
    yield
    seen.append({"node": item.nodeid, "frozen": frozen, "cycle_freed": _refs[item.nodeid]() is None})

def pytest_sessionfinish(session):
    with open(os.environ["FREEZE_PROBE_OUT"], "a") as f:
        f.write(json.dumps(seen) + "\\n")
"""


def test_a_benchmark_process_freezes_its_import_heap_and_still_collects_what_nodes_make(run_zlbench, tmp_path):
    """The corpus collects garbage after every shape (FlagGems and the demo corpus: gc.collect()); a
    process freezes what imports and collection made (plugins/device_setup.py) so that those
    collections no longer walk it, and a cycle a node makes is still freed by them."""
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    (probe_dir / "freeze_probe.py").write_text(FREEZE_PROBE)
    out = tmp_path / "probe.jsonl"
    res = run_zlbench("backend=cpu", "ops=[exp,softmax]", "dtypes=[float32]", "store.url=none", "timer.processes=2",
                      f"corpus.pythonpath=[{probe_dir}]", "corpus.pytest_args=[-p,freeze_probe]",
                      env={"FREEZE_PROBE_OUT": str(out)})
    assert res.returncode == 0, res.stderr[-3000:]
    processes = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(processes) == 2 and all(len(nodes) == 2 for nodes in processes)
    for node in (n for nodes in processes for n in nodes):
        assert node["frozen"] > 10_000, node  # torch and the corpus, at least
        assert node["cycle_freed"], node


@pytest.mark.slow
def test_one_process_per_node_says_its_rows_carry_no_process_level_interval(run_zlbench):
    res = run_zlbench("backend=cpu", "ops=[exp]", "dtypes=[float32]", "store.url=none", "timer.processes=1")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(x) for x in (res.run_dir / "rows.jsonl").read_text().splitlines()]
    assert rows and all(r["processes"] == 1 and r["latency_ci"] is None for r in rows)
    assert not (res.run_dir / "process_rows.jsonl").exists()
    summary = (res.run_dir / "summary.md").read_text()
    assert "no process-level interval" in summary
    assert "1 planned pass(es) (a process each" in summary and "to spend less" not in summary


def test_passes_spread_a_nodes_processes_over_the_devices_each_with_its_own_claims(tmp_path):
    from zlbench.backends import get_backend
    from zlbench.planning.plan import make_plan

    from .test_plan import MINI, cfg, devs

    plan = make_plan(cfg(timer={"processes": 3}), get_backend("cpu", slots=3), devs(3), MINI, tmp_path)
    assert plan.rounds == plan.processes == 3 and len(plan.units) == 9
    devices = defaultdict(set)
    for u in plan.units:
        for node in u.nodes:
            devices[node].add(u.device)
        # A device done with its nodes of a pass takes others' waiting nodes of the same pass only.
        assert u.claims_dir == str(tmp_path / "claims" / f"main.r{u.round}")
        assert set(u.pool) == {n for v in plan.units if v.round == u.round and v is not u for n in v.nodes}
    assert devices and all(d == {0, 1, 2} for d in devices.values()), devices
    orders = {tuple(u.nodes) for u in plan.units if u.device == 0}
    assert len(orders) == 3  # each pass its own nodes (rotated) in its own shuffled order


@pytest.mark.slow
def test_an_aa_at_defaults_runs_every_round_in_fresh_side_processes(run_zlbench):
    res = run_zlbench(*AB_CORPUS, "ops=[live_op]", "ab.aa=true", "ab.rounds=3", "ab.min_rounds=3",
                      "store.url=none", defaults=True)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = node_runs(res.run_dir)
    pids = {(side, rnd): pid for _, _, side, rnd, _, pid, _ in runs}
    assert len(pids) == 6 and len(set(pids.values())) == 6, runs  # 2 sides x 3 rounds, 6 processes
    assert "process effects not sampled" not in (res.run_dir / "ab.md").read_text()
    assert "## Time" not in (res.run_dir / "summary.md").read_text()  # a plain run's passes only
    resident = run_zlbench(*AB_CORPUS, "ops=[live_op]", "ab.aa=true", "ab.rounds=3", "ab.min_rounds=3",
                           "store.url=none", "ab.respawn_every=0", run_dir=res.run_dir.parent / "resident")
    assert resident.returncode == 0, resident.stderr[-3000:]
    assert "process effects not sampled" in (resident.run_dir / "ab.md").read_text()


@pytest.mark.slow
def test_an_ab_times_the_baseline_in_round_one_only(run_zlbench):
    res = run_zlbench("backend=cpu", "ab=demo_fused_softmax", "ops=[softmax]", "dtypes=[float32]", "ab.rounds=3",
                      "ab.min_rounds=3", "store.url=none", defaults=True)  # respawns: each round its argv
    assert res.returncode in (0, 1), res.stderr[-3000:]
    rows = [json.loads(x) for x in (res.run_dir / "rows.jsonl").read_text().splitlines()]
    by_round = defaultdict(list)
    for r in rows:
        if r["status"] == "ok":
            by_round[r["round"]].append(r)
    assert sorted(by_round) == [0, 1, 2]
    assert all(r["latency_base"] for r in by_round[0]) and all(r["latency"] for rs in by_round.values() for r in rs)
    assert all(r["latency_base"] is None for rnd in (1, 2) for r in by_round[rnd])
    plan = json.loads((res.run_dir / "plan.json").read_text())
    assert all(("--metrics" in u["argv"]) == (u["round"] > 0) for u in plan["units"])
    assert "baseline was timed in round 1 only" in (res.run_dir / "ab.md").read_text()


def test_processes_that_agree_exactly_still_leave_room_for_another_runs_share():
    """A run's processes share what another run does not (process_stats.RUN_SD): rows whose
    processes read alike to 0.01% get an interval of about +-0.55%, not a point; a row whose
    processes spread keeps the width its spread gives (the run-level share adds in quadrature)."""
    from zlbench.results.process_stats import RUN_SD, narrowest_width

    rows = aggregate(quiet_run(random.Random(5), sd=0.0001), 3)
    widths = [_width(r) for r in rows]
    floor = 2 * 1.96 * math.sqrt(2) * RUN_SD
    assert all(floor * 0.98 < w < floor * 1.1 for w in widths), (floor, widths)
    # config_notes warns of a timer.target_width below it: a width no number of processes reaches
    assert floor < 0.012 and floor == pytest.approx(narrowest_width(), rel=1e-4)
    spread = aggregate(quiet_run(random.Random(5), sd=0.02), 3)
    assert min(_width(r) for r in spread) > 3 * floor


def test_an_unstable_rows_interval_stays_near_what_its_processes_drew():
    """A row whose processes disagree keeps its own spread, with 1 or 2 degrees of freedom: its t
    interval alone spanned orders of magnitude (a cut run's two processes at 3.35 and 7.59 ms read
    [0.0039, 6461] ms; summary.md's p90 width read 1.2e+05%). It is capped at the span the
    processes drew, widened by that span again: a 2x slowdown of the next run now falls outside."""
    quiet = quiet_run(random.Random(3), sd=0.002)
    for values in ([3.35, 7.59], [4.89, 5.13, 8.77]):
        row = next(r for r in aggregate(quiet + proc_rows(values, op="pick"), 3) if r["op"] == "pick")
        assert MARKER_PROCESS_UNSTABLE in row["markers"], row
        lo, hi = row["latency_ci"]
        span = max(values) / min(values)
        assert min(values) / span == pytest.approx(lo) and hi == pytest.approx(max(values) * span), (lo, hi)
    assert lo > 2.44  # the 2.44 ms the row read in a run before: outside, a move


def test_an_even_count_of_processes_in_two_clusters_reads_a_value_one_of_them_drew():
    # Set J's max_pool2d row on an H100 (RESULTS.md, thirty-ninth session): 3 planned processes and 1
    # more, two at each autotune pick; the mean of the middle two (15.7 us) was drawn by none.
    rng = random.Random(5)
    drawn = [0.01914, 0.01224, 0.01226, 0.01928]  # rounds 0-2 planned, 3 the more process
    rows = aggregate(quiet_run(rng) + proc_rows(drawn, op="picky", base=[0.0148] * 4), 3)
    row = next(r for r in rows if r["op"] == "picky")
    assert MARKER_PROCESS_UNSTABLE in row["markers"]
    assert row["latency"] == 0.01226  # the planned processes' median, not 0.0157
    assert "(an even count: the row reads 0.01226," in row["marker_reason"]
    assert row["speedup"] == pytest.approx(0.0148 / 0.01226)
    lo, hi = row["latency_ci"]
    assert lo < 0.01224 and hi > 0.01928  # the interval still holds both picks
    # Round order decides, not the order the rows came in: the same processes listed backwards.
    shuffled = quiet_run(random.Random(5)) + list(reversed(proc_rows(drawn, op="picky", base=[0.0148] * 4)))
    assert next(r for r in aggregate(shuffled, 3) if r["op"] == "picky")["latency"] == 0.01226
    # The other cluster where the planned processes drew it twice.
    other = aggregate(quiet_run(random.Random(5)) + proc_rows([0.01224, 0.01914, 0.01928, 0.01226], op="picky"), 3)
    assert next(r for r in other if r["op"] == "picky")["latency"] == 0.01914


@pytest.mark.parametrize("drawn", [
    [0.0200, 0.0300, 0.0201, 0.0301, 0.0202, 0.0302],  # 3 planned and 3 more, 3 at each pick
    [0.0191, 0.0122, 0.0123, 0.0193, 0.0124, 0.0192],
    [0.0200, 0.0300, 0.0201, 0.0301, 0.0202, 0.0302, 0.0203, 0.0303],
])
def test_an_even_split_of_six_or_eight_processes_keeps_every_pick_inside_its_interval(drawn):
    # The row reads one pick (middle); another run may read the other, so its interval holds both.
    rows = aggregate(quiet_run(random.Random(5)) + proc_rows(drawn, op="picky"), 3)
    row = next(r for r in rows if r["op"] == "picky")
    assert MARKER_PROCESS_UNSTABLE in row["markers"]
    assert row["latency"] == statistics.median(drawn[:-1]) and row["latency"] in drawn
    lo, hi = row["latency_ci"]
    assert lo <= min(drawn) and hi >= max(drawn)


def test_an_even_count_of_processes_that_agree_keeps_the_mean_of_the_middle_two():
    rows = aggregate(quiet_run(random.Random(6)) + proc_rows([0.0500, 0.0502, 0.0501, 0.0503], op="calm"), 3)
    row = next(r for r in rows if r["op"] == "calm")
    assert MARKER_PROCESS_UNSTABLE not in row["markers"]
    assert row["latency"] == pytest.approx(0.05015)
    lo, hi = row["latency_ci"]
    assert lo < 0.05015 < hi


def _write_process_events(path, t0, nodes, seconds, ahead=0.0, exited=True, bad_t=False, late=0.0):
    """A benchmark process' events: launch, gate, its nodes one after another, exit. late: seconds of
    device preload its gate waited for once opened."""
    path.parent.mkdir(parents=True, exist_ok=True)
    evs = [{"event": "launch", "t": t0}, {"event": "gate", "t": t0 + 2 + ahead + late, "reached": t0 + 2,
                                           **({"preload_late_s": late} if late else {})}]
    t = t0 + 2 + ahead + late
    for n in nodes:
        evs += [{"event": "start", "t": t, "node": n}, {"event": "end", "t": t + seconds, "node": n, "status": "ok"}]
        t += seconds
    if exited:
        evs += [{"event": "session_end", "t": t}, {"event": "exited", "t": t + 0.5}]
    if bad_t:
        evs.append({"event": "end", "t": "soon", "node": nodes[0], "status": "ok"})
    path.write_text("".join(json.dumps(e) + "\n" for e in evs))


def test_the_time_section_reads_the_runs_own_settings_and_leaves_damaged_times_out(tmp_path):
    from zlbench.report.run_report import time_lines, unit_events

    nodes = ["t.py::test_a", "t.py::test_b"]
    units = [{"unit_id": f"main.r{r}.d0.s0", "round": r, "prestart": 1 if r else 0, "more_pass": r == 3}
             for r in range(4)]
    for r, t0 in enumerate((0.0, 5.0, 10.0, 15.0)):
        _write_process_events(tmp_path / "units" / units[r]["unit_id"] / "events.jsonl", t0, nodes if r < 3 else nodes[:1],
                     2.0, ahead=0.0 if r == 0 else 3.0, exited=r != 2, bad_t=r == 1)
    plan = {"processes": 3, "devices": [0], "units": units}
    identity = {"config": {"ab": {"name": "none"}}, "backend": {"name": "cuda"},
                "timer": {"processes": 3, "more_budget": 0.3, "share_tuning": True}}
    lines = time_lines(plan, identity, unit_events(tmp_path, plan))
    assert lines[0] == "## Time"
    assert ("3 planned pass(es) (a process each, timing every selected test once) spent 4.0, 4.0, 4.0 s in their "
            "tests, 1 more pass(es) (for tests whose processes read apart) 2.0 s") in lines[2], lines
    assert "start-up (torch import, pytest collection) 2.0 s for the first process; the later " \
        "ones started" in lines[2]  # no device preload here (the CPU's processes have none)
    # what the run was set to, not the defaults; share_tuning already on is not offered again
    assert "now 0.3)" in lines[3] and "share_tuning" not in lines[3], lines
    # An A/B's rounds are not passes: ab.md speaks for them.
    assert time_lines(plan, {**identity, "config": {"ab": {"name": "demo_fused_softmax"}}}, unit_events(tmp_path, plan)) == []
    # The first process' device preload still loading when its gate opened is start-up too.
    _write_process_events(tmp_path / "units" / units[0]["unit_id"] / "events.jsonl", 0.0, nodes, 2.0, late=1.5)
    for u in units[:1]:  # a device's processes preload (their gate says how long)
        path = tmp_path / "units" / u["unit_id"] / "events.jsonl"
        evs = [json.loads(x) for x in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**e, "preload_s": 2.0} if e["event"] == "gate" else e) + "\n"
                                for e in evs))
    lines = time_lines(plan, identity, unit_events(tmp_path, plan))
    assert "the device preload) 3.5 s for the first process" in lines[2], lines
    # A run cut before its third pass measured: 2 of the 3 planned passes, not "2 planned".
    (tmp_path / "units" / units[2]["unit_id"] / "events.jsonl").write_text("")
    lines = time_lines(plan, identity, unit_events(tmp_path, plan))
    assert "2 of the 3 planned pass(es) (a process each" in lines[2], lines


def test_two_processes_that_read_apart_give_the_first_ones_value_not_their_mean():
    # A run of timer.processes=2 (or a 3-process run cut after two): the mean of 0.01396 and 0.05349
    # (a review's flaky_sum) is halfway between two picks, a value neither process drew.
    rows = aggregate(quiet_run(random.Random(5)) + proc_rows([0.01396, 0.05349], op="picky", base=[0.02] * 2), 2)
    row = next(r for r in rows if r["op"] == "picky")
    assert MARKER_PROCESS_UNSTABLE in row["markers"]
    assert row["latency"] == 0.01396 and row["speedup"] == pytest.approx(0.02 / 0.01396)
    assert "(an even count: the row reads 0.01396," in row["marker_reason"]
    lo, hi = row["latency_ci"]
    assert lo < 0.01396 and hi > 0.05349  # another run may read the other pick


def test_the_time_section_counts_the_start_up_of_every_launch_of_a_unit(tmp_path):
    """A review: a unit whose process timed out started again, and the Time line counted the first
    launch's start-up only (5.1 s 'in all' of 9.8 s)."""
    from zlbench.report.run_report import time_lines, unit_events

    units = [{"unit_id": f"main.r{r}.d0.s0", "round": r} for r in range(2)]
    for r, u in enumerate(units):
        path = tmp_path / "units" / u["unit_id"] / "events.jsonl"
        _write_process_events(path, 10.0 * r, ["t.py::test_a"], 1.0)
        # the first process timed out in test_b and was launched again for it: a second start-up
        again = [{"event": "launch", "t": 10.0 * r + 5}, {"event": "gate", "t": 10.0 * r + 8, "reached": 10.0 * r + 8},
                 {"event": "start", "t": 10.0 * r + 8, "node": "t.py::test_b"},
                 {"event": "end", "t": 10.0 * r + 9, "node": "t.py::test_b", "status": "ok"},
                 {"event": "exited", "t": 10.0 * r + 9.5}]
        path.write_text(path.read_text() + "".join(json.dumps(e) + "\n" for e in again))
    plan = {"processes": 2, "devices": [0], "units": units}
    identity = {"config": {"ab": {"name": "none"}}, "backend": {"name": "cpu"}, "timer": {"processes": 2}}
    lines = time_lines(plan, identity, unit_events(tmp_path, plan))
    assert "start-up (torch import, pytest collection) 10.0 s in all" in lines[2], lines  # 2 + 3 s a unit
