import csv
import math

import numpy as np
import pytest

from zlbench.ab import stats
from zlbench.report.ab import compare, write
from zlbench.ab.pairing import pair


def rows(side_values, op="exp", dtype="torch.float16", shape="[[64]]", markers=None, status="ok"):
    return [{"op": op, "dtype": dtype, "shape": shape, "latency": v, "latency_base": 1.0, "round": r,
             "status": status, "markers": markers or []} for r, v in enumerate(side_values)]


def test_paired_t_interval_on_known_data():
    a = [1.0, 1.0, 1.0, 1.0]
    b = [1.10, 1.12, 1.08, 1.10]
    s = stats.row_stat(a, b)
    d = np.log(b)
    assert s.ratio == pytest.approx(math.exp(d.mean()))
    half = 3.182446305284263 * d.std(ddof=1) / 2  # t(0.975, 3) * sd / sqrt(4)
    assert s.lo == pytest.approx(math.exp(d.mean() - half))
    assert s.hi == pytest.approx(math.exp(d.mean() + half))
    assert s.p == pytest.approx(0.00102239, rel=1e-3)  # scipy.stats.ttest_1samp on ln ratios


def test_a_a_simulation_false_positive_rate_at_most_five_percent():
    """Rows with no effect and round-to-round noise: after BH, <= 5% of rows flagged."""
    rng = np.random.default_rng(7)
    flagged = total = 0
    for _ in range(40):  # 40 A/A experiments of 50 rows x 10 rounds
        row_stats, live = [], []
        for _ in range(50):
            base = rng.lognormal(0, 1)
            a = base * np.exp(rng.normal(0, 0.05, 10))
            b = base * np.exp(rng.normal(0, 0.05, 10))
            row_stats.append(stats.row_stat(a, b))
            live.append(None)
        stats.analyse(row_stats, live, threshold=0.02)
        flagged += sum(s.verdict in ("faster", "slower", "changed below threshold") for s in row_stats)
        total += len(row_stats)
    assert flagged / total <= 0.05


def test_real_effect_is_detected_with_ten_rounds():
    rng = np.random.default_rng(3)
    a = np.exp(rng.normal(0, 0.03, 10))
    b = 0.9 * np.exp(rng.normal(0, 0.03, 10))
    s = stats.row_stat(a, b)
    stats.analyse([s], [True], 0.02)
    assert s.verdict == "faster" and 0.85 < s.ratio < 0.95


def test_verdicts_cover_threshold_unstable_and_inconclusive():
    tiny = stats.row_stat([1.0] * 10, [1.005, 1.006, 1.004, 1.005, 1.005, 1.006, 1.004, 1.005, 1.005, 1.006])
    same = stats.row_stat([1.0] * 6, [1.001, 0.999, 1.0, 1.001, 0.999, 1.0])
    wild = stats.row_stat([1.0] * 5, [0.5, 2.0, 0.6, 1.8, 1.0])
    one = stats.row_stat([1.0], [0.5])
    stats.analyse([tiny, same, wild, one], [True, True, True, True], 0.02)
    assert tiny.verdict == "changed below threshold"
    assert same.verdict == "no difference beyond threshold"
    assert wild.verdict == "unstable"
    assert one.verdict == "inconclusive"
    dead = stats.row_stat([1.0, 1.0], [0.5, 0.5])
    stats.analyse([dead], [False], 0.02)
    assert dead.verdict == "not live"


def test_noisy_rounds_whose_interval_lies_beyond_the_threshold_get_their_verdict():
    # The demo's fused softmax on a busy CPU: 7x faster, rounds moving by 30%: not "unstable".
    rng = np.random.default_rng(3)
    big = stats.row_stat([1.0] * 10, 0.15 * np.exp(rng.normal(0, 0.3, 10)))
    stats.analyse([big], [True], 0.02)
    assert big.sd > stats.UNSTABLE_SD and big.hi < 0.98
    assert big.verdict == "faster"


def test_pairing_counts_unpaired_and_failed_rows():
    a = rows([1.0, 1.0]) + rows([2.0], op="only_a") + rows([1.0, 1.0], op="mm")
    b = rows([0.9, 0.9]) + rows([1.0, 1.0], op="mm", status="failed")
    p = pair(a, b)
    assert [r.key[0] for r in p.rows] == ["exp"]
    why = dict((k[0], w) for k, w in p.unpaired)
    assert why["only_a"] == "only on side A"
    assert "failed" in why["mm"]


def test_rows_that_launched_no_device_work_are_not_paired():
    """An empty replay's nanoseconds are no kernel's time: an A/B or a compare must not test them."""
    from zlbench.results.schema import MARKER_NO_DEVICE_WORK

    a = rows([1.5e-6, 1.6e-6], op="view", markers=[MARKER_NO_DEVICE_WORK]) + rows([1.0, 1.0])
    b = rows([1.4e-6, 1.9e-6], op="view", markers=[MARKER_NO_DEVICE_WORK]) + rows([1.0, 1.1])
    p = pair(a, b)
    assert [r.key[0] for r in p.rows] == ["exp"]
    why = dict((k[0], w) for k, w in p.unpaired)
    assert why["view"] == (f"launched no device work on either side ({MARKER_NO_DEVICE_WORK}: a view; its latency "
                           "times no kernel) in 2 round(s)")
    # a view on one side and a kernel on the other is a change: compared, never hidden
    copy = rows([0.5, 0.5], op="view")
    assert [(r.key[0], r.b) for r in pair(a, copy).rows] == [("view", [0.5, 0.5])]
    # only the baseline did no work (the marker is the row's): the latency still pairs
    c = rows([0.002, 0.002], op="base_view", markers=[MARKER_NO_DEVICE_WORK])
    assert [r.key[0] for r in pair(c, c).rows] == ["base_view"]


def test_tests_of_one_op_that_time_one_shape_pair_each_with_its_own(tmp_path):
    """FlagGems' einsum trace and transpose both time [[1024,1024]]: keyed by (op, dtype, shape) the
    last of them in a round overwrote the other, and a side could pair one test with the other."""
    def of(node, values):
        return [{**r, "node": f"benchmark/test_einsum.py::{node}", "op": "einsum"} for r in rows(values)]

    a = of("test_einsum_trace", [0.0025, 0.0025]) + of("test_einsum_transpose", [0.004, 0.004])
    b = of("test_einsum_transpose", [0.004, 0.0041]) + of("test_einsum_trace", [0.0025, 0.0026])
    p = pair(a, b)
    assert sorted((r.key[3].split("::")[1], r.a, r.b) for r in p.rows) == [
        ("test_einsum_trace", [0.0025, 0.0025], [0.0025, 0.0026]),
        ("test_einsum_transpose", [0.004, 0.004], [0.004, 0.0041])]
    res = compare(a, b, "off", "on")
    write(res, tmp_path)
    assert "einsum (test_einsum_trace)" in res["markdown"] and "einsum (test_einsum_transpose)" in res["markdown"]
    assert {r["node"] for r in csv.DictReader(open(tmp_path / "ab.csv"))} == {
        "benchmark/test_einsum.py::test_einsum_trace", "benchmark/test_einsum.py::test_einsum_transpose"}
    # a FlagGems result log names no node: its row is the one test the other side times at its key
    log_rows = [{k: v for k, v in r.items() if k != "node"} for r in of("test_einsum_trace", [0.0025, 0.0025])]
    p = pair(log_rows, of("test_einsum_trace", [0.0025, 0.0026]))
    trace = "benchmark/test_einsum.py::test_einsum_trace"
    assert [(r.key, r.node, r.b) for r in p.rows] == [(("einsum", "torch.float16", "[[64]]", trace), trace, [0.0025, 0.0026])]
    assert p.key(log_rows[0]) == p.rows[0].key  # what report/ab.py looks rows up by
    # ... not where the log holds two records of the key (trace's and transpose's: the other side
    # ran trace alone): which record is trace's nothing says, and the wrong one read +700%
    two = [log_rows[0], {**log_rows[0], "latency": 0.004, "round": 1}]  # rows_from_log numbers them as rounds
    p = pair(of("test_einsum_trace", [0.0025]), two)
    assert not p.rows and [why for _, why in p.unpaired] == [
        "a side names no test (a FlagGems result log) and holds 2 records of this op, dtype and shape where the "
        "other side's one test has 1 (tests of one op, or a rerun): which is that test's is unknown"]
    # ... nor where the other side's tests share a key: which one the log's record is nothing says
    both = pair(log_rows, b)
    assert not both.rows and [why for _, why in both.unpaired] == [
        "2 tests time this op, dtype and shape, and a side names no test (a FlagGems result log): which to pair is unknown"]
    # a key the log lacks is only on the other side; a side with no rows at all is no log
    assert [why for _, why in pair([], b).unpaired] == ["only on side B", "only on side B"]
    other_log = pair(rows([1.0, 1.0]), b)  # a log of exp alone: einsum's shared key is simply not in it
    assert [(k[0], why) for k, why in other_log.unpaired] == [("einsum", "only on side B")] * 2 + [("exp", "only on side A")]
    # the dropped-rounds table lists no key the pairing left unpaired, and names tests against all rows
    from zlbench.report.batch_summary import dropped_rounds

    assert dropped_rounds(log_rows, b) == []
    lost = [r for r in b if not (r["node"].endswith("trace") and r["round"] == 1)]
    assert [(d["op"], d["test"], d["rounds_kept"]) for d in dropped_rounds(a, lost)] == [
        ("einsum", "test_einsum_trace", 1)]
    # tests of one name in two files are named by their whole node
    from zlbench.ab.pairing import name_shared_keys

    named = name_shared_keys([{"op": "e", "node": "benchmark/test_a.py::test_t"}, {"op": "e", "node": "benchmark/test_b.py::test_t"},
                              {"op": "e", "node": "benchmark/test_b.py::test_u"}], ("op",))
    assert [t["test"] for t in named] == ["benchmark/test_a.py::test_t", "benchmark/test_b.py::test_t", "test_u"]
    # a paired row and an unpaired row of one key read apart as well
    view = of("test_einsum_diagonal", [1.5e-6, 1.5e-6])
    for r in view:
        r["markers"] = ["BENCHMARK_NO_DEVICE_WORK"]
    md = compare(a + view, b + view, "off", "on")["markdown"]
    assert "einsum (test_einsum_diagonal)" in md.split("## Unpaired rows")[1]
    assert "einsum (test_einsum_trace)" in md.split("## Unpaired rows")[0]
    # a row of its own test alone keeps its op bare
    assert "| exp " in compare(rows([1.0, 1.0]), rows([1.0, 1.0]), "off", "on")["markdown"]


def test_report_marks_fallback_unpaired_and_dead_axis(tmp_path):
    a = rows([1.0, 1.01, 0.99], markers=["BENCHMARK_DIRECT_NO_CUDAGRAPH"]) + rows([1.0], op="lonely")
    b = rows([1.0, 0.99, 1.01])
    res = compare(a, b, "off", "on", artifacts_a={"exp": ["k.cubin:h1"]}, artifacts_b={"exp": ["k.cubin:h1"]})
    write(res, tmp_path)
    s = res["summary"]
    assert s["liveness"] == "not live" and s["fallback_rows"] == 1 and s["unpaired_rows"] == 1
    assert "AXIS NOT LIVE" in res["markdown"]
    assert "unpaired" in res["markdown"] and "BENCHMARK_DIRECT_NO_CUDAGRAPH" in res["markdown"]
    for name in ("ab.md", "ab.csv", "ab.json", "ab.png"):
        assert (tmp_path / name).is_file()


def test_live_axis_with_artifacts_that_differ():
    res = compare(rows([1.0, 1.0, 1.0]), rows([0.8, 0.81, 0.79]), "off", "on",
                  artifacts_a={"exp": ["k.cubin:h1"]}, artifacts_b={"exp": ["k.cubin:h2"]})
    assert res["summary"]["liveness"] == "live"
    assert res["rows"][0]["verdict"] == "faster"


def test_rows_of_a_node_found_not_live_in_round_1_are_said_to_be_timed_once():
    """Node by node, a node whose probes compiled identical kernels is timed once, on side A: ab.md
    called its rows 'a free A/A check', which they are only where both sides timed them."""
    def on(node, rs):
        return [{**r, "node": node} for r in rs]
    exp, add = "benchmark/test_exp.py::test_exp", "benchmark/test_add.py::test_add"
    a = on(exp, rows([1.0, 1.0, 1.0])) + on(add, rows([2.0], op="add"))
    b = on(exp, rows([0.8, 0.81, 0.79]))
    arts_a, arts_b = {"exp": ["k.cubin:h1"], "add": ["a.cubin:x"]}, {"exp": ["k.cubin:h2"], "add": ["a.cubin:x"]}
    res = compare(a, b, "off", "on", artifacts_a=arts_a, artifacts_b=arts_b, stops={add: {"why": "not live"}})
    s = res["summary"]
    assert (s["live_rows"], s["not_live_rows"], s["not_live_both_sides"]) == (1, 1, 0)
    assert "1 row(s) compiled identical kernels (excluded; timed once, on side A)." in res["markdown"]
    # Both sides timed it (round by round): then it is the free A/A check.
    res = compare(a, b + on(add, rows([2.01], op="add")), "off", "on", artifacts_a=arts_a, artifacts_b=arts_b)
    assert res["summary"]["not_live_both_sides"] == 1
    assert "(excluded; they are a free A/A check)." in res["markdown"]


def test_unknown_liveness_is_never_called_live():
    res = compare(rows([1.0, 1.0]), rows([1.0, 1.0]), "off", "on")
    assert res["summary"]["liveness"] == "unknown"
    assert "cannot tell a dead switch" in res["markdown"]


def test_liveness_compares_kernel_by_kernel():
    from zlbench.report.ab import liveness_of

    a = {"op": ["k1.cubin:x", "k2.cubin:y"]}
    assert liveness_of("op", a, {"op": ["k1.cubin:x", "k2.cubin:y"]}) is False
    assert liveness_of("op", a, {"op": ["k1.cubin:x", "k2.cubin:z"]}) is True
    # B stopped early and compiled only k1 (identical): comparable kernels are all equal.
    assert liveness_of("op", a, {"op": ["k1.cubin:x"]}) is False
    # No variant in common: the switch changed the kernel's code.
    assert liveness_of("op", {"op": ["k.cubin:x"]}, {"op": ["k.cubin:y", "k.cubin:z"]}) is True
    # A duplicate (or extra) variant on one side, the rest identical: not live, never unknown.
    assert liveness_of("op", {"op": ["k.cubin:x"]}, {"op": ["k.cubin:x", "k.cubin:y"]}) is False
    # Variants that differ both ways while sharing some: not comparable.
    assert liveness_of("op", {"op": ["k.cubin:x", "k.cubin:w"]},
                       {"op": ["k.cubin:x", "k.cubin:y", "k.cubin:z"]}) is None
    assert liveness_of("op", a, {}) is None


def test_shared_state_is_a_caveat():
    from zlbench.report.run_report import shared_state_caveats

    ident = {"switch_env": {"FLAGGEMS_DB_URL": "sqlite:///x.db"}, "config": {"isolate_caches": False}}
    caveats = shared_state_caveats(ident)
    assert len(caveats) == 2
    res = compare(rows([1.0, 1.0]), rows([1.0, 1.0]), "off", "on", caveats=caveats)
    assert "one tuning database" in res["markdown"] and "isolate_caches=false" in res["markdown"]


def test_resident_side_processes_say_process_effects_are_not_sampled():
    from zlbench.report.run_report import shared_state_caveats

    resident = {"switch_env": {}, "config": {"ab": {"schedule": "node", "respawn_every": 0}}}
    assert any(c.startswith("process effects not sampled") for c in shared_state_caveats(resident))
    fresh = {"switch_env": {}, "config": {"ab": {"schedule": "node", "respawn_every": 1}}}
    assert not shared_state_caveats(fresh)
    # ab.tuning=replay runs round by round in fresh processes whatever respawn_every says: ab.md said
    # "kept one process per side for the whole run" of a run whose every round had its own.
    replay = {"switch_env": {}, "rounds": 4, "config": {"ab": {"name": "demo_fused_softmax", "schedule": "node",
                                                                "respawn_every": 0, "tuning": "replay"},
                                                         "corpus": {"baseline_off_args": ["--x"]}}}
    said = shared_state_caveats(replay)
    assert not any("process effects not sampled" in c for c in said), said
    assert any("the torch baseline was timed in round 1 only" in c for c in said), said
    # Every other round: a row's rounds pair up in processes, and the baseline is its first period's.
    two = {"switch_env": {}, "rounds": 8, "config": {"ab": {"name": "demo_fused_softmax", "schedule": "node",
                                                             "respawn_every": 2},
                                                      "corpus": {"baseline_off_args": ["--x"]}}}
    said = shared_state_caveats(two)
    assert any(c.startswith("ab.respawn_every=2: each side's processes ran 2 rounds in a row") for c in said), said
    assert any("the torch baseline was timed in the first 2 rounds (one process a side) only" in c for c in said), said
    # A period no shorter than the run (a review: respawn_every=5 over 4 rounds) is one process a
    # side throughout, as 0: not "5 rounds in a row", nor a baseline timed in rounds that never ran.
    long = {**two, "rounds": 4, "config": {**two["config"], "ab": {**two["config"]["ab"], "respawn_every": 5}}}
    said = shared_state_caveats(long)
    assert said[0].startswith("process effects not sampled: ab.respawn_every=5 (no fewer than the run's 4 rounds) "
                              "kept one process per side"), said
    assert not any("rounds in a row" in c or "torch baseline" in c for c in said), said


def test_aa_measures_every_row_although_its_kernels_are_identical():
    # On a GPU an A/A compiles identical kernels on both sides: that is the construction, not a
    # dead axis, so no row may be excluded as "not live" and the false-positive rate is defined.
    same = {"exp": ["k.cubin:h1"]}
    res = compare(rows([1.0, 1.01, 0.99, 1.0]), rows([1.0, 0.99, 1.01, 1.0]), "x=0 (a)", "x=0 (b)",
                  artifacts_a=same, artifacts_b=same, aa=True)
    s = res["summary"]
    assert s["liveness"] != "not live" and s["not_live_rows"] == 0
    assert s["false_positive_rate"] == 0.0 and "identical by construction" in res["markdown"]
    assert "AXIS NOT LIVE" not in res["markdown"]
    # each row says liveness was not checked, and ab.md does not tag every verdict "[unknown]"
    assert [t["live"] for t in res["rows"]] == ["A/A"] and "[unknown]" not in res["markdown"]
    assert s["liveness"] == "A/A" and s["unknown_liveness_rows"] == 0  # the run's too (history html shows it)


def test_latency_columns_use_the_changes_estimator():
    # Arithmetic means over rounds could show A 25.8 | B 8.0 | +24%: the columns are geometric
    # means, so B/A equals the change column's ratio exactly.
    res = compare(rows([1.0, 100.0, 1.0]), rows([2.0, 50.0, 2.0]), "off", "on")
    t = res["rows"][0]
    assert abs(t["b_ms"] / t["a_ms"] - t["ratio"]) < 1e-9


def test_a_dead_axis_headline_counts_rows_whose_liveness_is_unknown():
    a = rows([1.0, 1.01, 0.99]) + rows([2.0, 2.0, 2.0], op="torch_only")
    b = rows([1.0, 0.99, 1.01]) + rows([2.0, 2.01, 1.99], op="torch_only")
    res = compare(a, b, "off", "on", artifacts_a={"exp": ["k.cubin:h1"]}, artifacts_b={"exp": ["k.cubin:h1"]})
    assert res["summary"]["liveness"] == "not live" and res["summary"]["unknown_liveness_rows"] == 1
    assert "1 row(s) had no kernels to compare (liveness unknown)" in res["markdown"]


def _with_base(rs, base):
    return [{**r, "latency_base": base} for r in rs]


def test_baseline_drift_is_read_where_the_runs_timer_timed_and_as_a_median():
    # 8 rows whose torch baselines agree between sides, 3 timed by the direct fallback (a refused
    # capture) whose baselines moved 45%: not machine drift (an H200 A/A read -5% as drift so).
    a, b = [], []
    for i in range(8):
        a += _with_base(rows([1.0, 1.0, 1.0], shape=f"[[{i}]]"), 1.0)
        b += _with_base(rows([1.0, 1.0, 1.0], shape=f"[[{i}]]"), 1.001)
    for i in range(3):
        fb = ["BENCHMARK_DIRECT_NO_CUDAGRAPH"]
        a += _with_base(rows([1.0, 1.0, 1.0], shape=f"[[f{i}]]", markers=fb), 1.0)
        b += _with_base(rows([1.0, 1.0, 1.0], shape=f"[[f{i}]]", markers=fb), 0.55)
    res = compare(a, b, "off", "on")
    assert res["summary"]["baseline_drift"]["rows"] == 8
    assert "suspect machine drift" not in res["markdown"]
    # Every baseline 10% slower on side B: drift, said with the rows it was read over.
    res = compare(a, [{**r, "latency_base": 1.1} for r in b], "off", "on")
    assert res["summary"]["baseline_drift"]["median"] == pytest.approx(1.1)
    assert "moved +10.00% between sides (the median over 8 row(s) timed by the run's timer" in res["markdown"]
    # Baselines that scatter about +3% with an interval holding 0 are noise, not drift (a CPU A/A
    # read so); the same shift with rows that agree is drift, said with its interval.
    scattered = [0.93, 1.12, 0.97, 1.03, 1.08, 0.95, 1.04, 1.09]
    res = compare(a, [{**r, "latency_base": scattered[i // 3] if i < 24 else r["latency_base"]} for i, r in enumerate(b)],
                  "off", "on")
    d = res["summary"]["baseline_drift"]
    assert d["median"] > 1.02 and d["median_lo"] < 1 < d["median_hi"] and "suspect machine drift" not in res["markdown"], d
    # its mean's interval resamples tests, as the overall line's does: these 8 rows are one test's (exp)
    assert d["tests"] == 1 and d["lo"] is None, d
    tight = [1.04 + 0.001 * (i % 3) for i in range(8)]
    res = compare(a, [{**r, "latency_base": tight[i // 3] if i < 24 else r["latency_base"]} for i, r in enumerate(b)],
                  "off", "on")
    assert "suspect machine drift" in res["markdown"] and "95% CI of their median +4." in res["markdown"], res["markdown"]
    # Only fallback rows: drift cannot be read, and ab.md says so rather than nothing.
    fallback_only = compare(a[24:], b[24:], "off", "on")
    assert fallback_only["summary"]["baseline_drift"]["rows"] == 0
    assert "machine drift not checked" in fallback_only["markdown"]


def _baseline_first_round(rs):
    """An A/B with corpus.baseline_off_args: torch's baseline is timed in round 1 (round 0) only."""
    return [{**r, "latency_base": 1.0 if r["round"] == 0 else None} for r in rs]


def test_rows_that_read_apart_in_the_round_that_timed_the_baseline_are_named():
    """An H100 A/A read FlagGems' 4-byte ops of 2**30 elements 11-14% slower in round 1, right after
    torch's baseline, than in rounds 2+ (baseline left out), on both sides: their A and B columns mix
    the two orders. ab.md names such rows; quiet rows, noisy rows, one side alone and direct-timed
    rows are not named."""
    def side(*values, **kw):
        return _baseline_first_round(rows(list(values), **kw))

    a = side(4.75, 4.22, 4.23, 4.22, shape="[[1073741824]]") + side(1.0, 1.002, 0.999, 1.0, shape="[[64]]")
    b = side(4.76, 4.22, 4.22, 4.23, shape="[[1073741824]]") + side(1.001, 1.0, 1.001, 0.999, shape="[[64]]")
    # noisy: round 1 beyond the threshold, but no further from the rest than they scatter
    a += side(1.10, 1.0, 1.12, 0.95, shape="[[128]]")
    b += side(1.10, 0.96, 1.0, 1.13, shape="[[128]]")
    # one side only: a change in round 1 (the switch's, or that side's process'), not the order's
    a += side(1.2, 1.0, 1.0, 1.0, shape="[[256]]")
    b += side(1.0, 1.0, 1.0, 1.0, shape="[[256]]")
    fb = ["BENCHMARK_DIRECT_NO_CUDAGRAPH"]
    a += side(1.5, 1.0, 1.0, 1.0, shape="[[512]]", markers=fb)
    b += side(1.5, 1.0, 1.0, 1.0, shape="[[512]]", markers=fb)
    res = compare(a, b, "off", "on")
    moved = res["summary"]["baseline_moved"]
    assert [m["shape"] for m in moved] == ["[[1073741824]]"], moved
    assert moved[0]["a_pct"] == pytest.approx(12.56, abs=0.01) and moved[0]["b_pct"] == pytest.approx(12.80, abs=0.01)
    assert "1 row(s) read apart, alike on both sides, in the round(s) that timed torch's baseline first" in res["markdown"]
    assert "(widest: exp float16 [[1073741824]], A +12.6% and B +12.8%)" in res["markdown"], res["markdown"]
    # Every round timed the baseline (a plain pair, or an A/B without baseline_off_args): nothing to tell.
    plain = compare(rows([4.75, 4.22, 4.23, 4.22]), rows([4.76, 4.22, 4.22, 4.23]), "off", "on")
    assert plain["summary"]["baseline_moved"] == [] and "baseline first" not in plain["markdown"]
    # Two rounds without the baseline span too narrow a range to tell noise from a shift (a review:
    # 1.030 against 1.000, 1.004 on both sides read apart by chance): a row cut at 3 rounds is not named.
    cut = compare(side(1.030, 1.000, 1.004), side(1.025, 0.998, 1.001), "off", "on")
    assert cut["summary"]["baseline_moved"] == []
    assert compare(side(1.030, 1.000, 1.004, 1.001), side(1.025, 0.998, 1.001, 1.0), "off", "on")[
        "summary"]["baseline_moved"], "the same shift with 3 rounds without the baseline is named"
    # A row settled at its look (round 4) whose node ran on: what its A and B columns mix is read over
    # the rounds they rest on, not over the later ones.
    v = [1.20, 1.00, 1.00, 1.00, 1.30, 1.30, 1.30, 1.30]
    looked = compare(side(*v), side(*v), "off", "on", rounds={"min": 4, "max": 8})
    assert looked["rows"][0]["look"] == 4 and looked["summary"]["baseline_moved"][0]["a_pct"] == pytest.approx(20.0)


def test_rows_paired_across_orders_are_said_to_be():
    """One side's rounds all timed the baseline first (a run without corpus.baseline_off_args), the
    other's only round 1: B/A of the later rounds compares two orders, which alone moved H100 rows by
    11-14%. ab.md says so, rather than call the order's effect the switch's."""
    a = rows([4.75, 4.75, 4.76, 4.75])
    b = _baseline_first_round(rows([4.76, 4.22, 4.22, 4.23]))
    res = compare(a, b, "off", "on")
    assert res["summary"]["baseline_one_side_rows"] == 1
    assert "1 row(s) timed torch's baseline on one side only in some rounds" in res["markdown"]
    alike = compare(_baseline_first_round(rows([4.75, 4.22, 4.22, 4.22])), b, "off", "on")
    assert alike["summary"]["baseline_one_side_rows"] == 0 and "on one side only" not in alike["markdown"]


def test_the_rounds_cell_says_which_look_a_rows_numbers_rest_on():
    from zlbench.report.ab import _rounds_cell

    assert _rounds_cell({"rounds": 6, "stop": "futile", "look": 4}) == "6 (futile at 4)"
    # Rounds past the planned maximum (a resume ran more) are no planned look: the numbers rest on 2.
    assert _rounds_cell({"rounds": 3, "stop": "max rounds", "look": 2}) == "3 (max rounds at 2)"
    assert _rounds_cell({"rounds": 4, "stop": "max rounds", "look": 4}) == "4 (max rounds)"


def test_a_row_lost_to_a_crash_on_one_side_says_so():
    """An op that crashed in B before any shape left its rows 'only on side A': now the reason names
    B's test status (the crash was nowhere in ab.md or history compare)."""
    a = [{**r, "node": "benchmark/test_exp.py::test_exp"} for r in rows([1.0])]
    b = [{"op": "exp", "dtype": None, "shape": None, "node": "benchmark/test_exp.py::test_exp", "round": 0,
          "status": "crashed", "reason": "exit -11 (SIGSEGV)"}]
    assert [why for _, why in pair(a, b).unpaired] == ["only on side A (side B's test crashed: exit -11 (SIGSEGV))"]
    assert [why for _, why in pair(a, []).unpaired] == ["only on side A"]  # not run in B: nothing more to say


def test_an_axis_whose_only_live_op_lost_its_rows_on_a_side_is_not_called_dead():
    """live_op compiled other kernels under B but crashed before timing; dead_op paired with identical
    kernels. Read over paired rows alone the axis was 'not live' (AXIS NOT LIVE, exit 3)."""
    a = rows([1.0], op="dead_op") + rows([1.0], op="live_op")
    b = rows([1.0], op="dead_op")
    res = compare(a, b, "x=0", "x=1", artifacts_a={"dead_op": ["k:h1"], "live_op": ["k:h2"]},
                  artifacts_b={"dead_op": ["k:h1"], "live_op": ["k:h3"]})
    assert res["summary"]["liveness"] == "live" and "AXIS NOT LIVE" not in res["markdown"]
    assert "live**, on no paired row: an unpaired op compiled other kernels" in res["markdown"]
    dead = compare(a, b, "x=0", "x=1", artifacts_a={"dead_op": ["k:h1"], "live_op": ["k:h2"]},
                   artifacts_b={"dead_op": ["k:h1"], "live_op": ["k:h2"]})
    assert dead["summary"]["liveness"] == "not live"


def test_the_overall_interval_resamples_tests_not_rows():
    """A test's rows share its processes: one test of 20 rows at +5% and three of one row near 0.
    Resampled as rows, the overall change looked settled (+3.5..+5%); as tests, it is not."""
    from zlbench.ab.stats import overall

    ratios = [1.05] * 20 + [0.99, 1.0, 1.01]
    tests = ["x"] * 20 + ["y", "z", "w"]
    by_rows, by_tests = overall(ratios), overall(ratios, clusters=tests)
    assert by_rows["geomean"] == by_tests["geomean"] == pytest.approx(1.0433, abs=1e-4)
    assert by_rows["lo"] > 1.03 and by_tests["lo"] < 1.0 < by_tests["hi"], (by_rows, by_tests)
    # fewer than three tests: no interval to speak of
    assert overall(ratios[:21], clusters=tests[:21])["lo"] is None


def test_the_overall_interval_resamples_rounds_as_well_as_tests():
    """A round's side processes run every test of that round, so what they draw moves all its rows:
    an A/A whose 12 tests share round offsets of -1.2..+1% (a +0.2% mean) and rows that agree within
    0.1% reads a settled overall change resampled over tests alone; resampled over rounds too, 0 is
    inside. A real -5% on every row stays outside."""
    import numpy as np

    from zlbench.ab.stats import overall

    rng = np.random.default_rng(1)
    offsets = [0.01, -0.012, 0.008, 0.003, -0.004, 0.006]  # one per round, shared by every row
    tests = [f"t{i // 3}" for i in range(36)]
    for effect in (0.0, -0.05):
        rounds = [{r: effect + off + rng.normal(0, 0.001) for r, off in enumerate(offsets)} for _ in tests]
        ratios = [float(np.exp(np.mean(list(d.values())))) for d in rounds]
        by_tests = overall(ratios, clusters=tests)
        crossed = overall(ratios, clusters=tests, rounds=rounds)
        assert by_tests["geomean"] == crossed["geomean"]
        assert crossed["resampled"] == "tests and rounds" and by_tests["resampled"] == "tests"
        if effect == 0.0:
            assert by_tests["lo"] > 1.0, by_tests  # narrow, and wrong
            assert crossed["lo"] < 1.0 < crossed["hi"], crossed
        else:
            assert crossed["hi"] < 0.97, crossed
    # rounds that shared their processes (ab.respawn_every=3: two periods of three) are drawn
    # together, and a run that never respawned (0) has one period: tests alone
    by_period = overall(ratios, clusters=tests, rounds=rounds, round_period=3)
    assert by_period["resampled"] == "tests and rounds" and by_period["lo"] != crossed["lo"]
    assert overall(ratios, clusters=tests, rounds=rounds, round_period=0)["resampled"] == "tests"
    # one round only (two plain runs: a value a side): tests alone, as before
    one = [{0: 0.01 * (i % 3 - 1)} for i in range(36)]
    same = overall([float(np.exp(d[0])) for d in one], clusters=tests, rounds=one)
    assert same["resampled"] == "tests"
    assert same == {**overall([float(np.exp(d[0])) for d in one], clusters=tests), "resampled": "tests"}


def test_the_overall_line_leaves_out_rows_too_noisy_to_judge_and_says_how_many():
    """An A/A of four quiet ops and one whose rounds swing 2x (a pick drawn per process): the report
    calls that row unstable and judges nothing; in a mean over five rows it moved the overall by
    -10%. It is left out of the overall line, and counted there."""
    a, b = [], []
    for i, op in enumerate(["exp", "abs", "neg", "sin"]):
        a += rows([1.0, 1.0, 1.0, 1.0, 1.0, 1.0], op=op)
        b += rows([1.0 + 0.001 * ((r + i) % 3 - 1) for r in range(6)], op=op)
    a += rows([1.0] * 6, op="pick")
    b += rows([0.5, 1.0, 0.5, 0.5, 1.0, 0.5], op="pick")
    res = compare(a, b, "off", "on", aa=True)
    verdicts = {t["op"]: t["verdict"] for t in res["rows"]}
    assert verdicts["pick"] == "unstable"
    o = res["summary"]["overall"]
    assert o["rows"] == 4 and o["unstable_left_out"] == 1 and abs(o["geomean"] - 1) < 0.002, o
    assert "over 4 row(s) (geometric mean; negative = B faster; 1 unstable row(s) left out" in res["markdown"]
    # Its interval lies wholly beyond the threshold; its q does not clear 0.05: the line explaining
    # "unstable" said only the first reason, which this row contradicts.
    pick = next(t for t in res["rows"] if t["op"] == "pick")
    assert pick["hi"] < 0.98 and pick["q"] >= 0.05, pick
    assert ("its interval does not lie wholly beyond the threshold or its q is not below 0.05, so nothing is "
            "judged") in res["markdown"]


def test_an_offset_shared_by_every_row_widens_the_overall_interval_in_quadrature():
    """Two runs' offset over all their rows: no resampling of rows sees it, so overall()'s interval
    gets it added to each side (95%: 1.96 sd); the point estimate stays, no interval stays none."""
    o = {"geomean": 1.01, "lo": 1.005, "hi": 1.02, "rows": 30}
    w = stats.widened(o, 0.004)
    extra = 1.959964 * 0.004
    assert w["geomean"] == 1.01 and w["rows"] == 30
    assert math.log(1.01 / w["lo"]) == pytest.approx(math.hypot(math.log(1.01 / 1.005), extra), rel=1e-4)
    assert math.log(w["hi"] / 1.01) == pytest.approx(math.hypot(math.log(1.02 / 1.01), extra), rel=1e-4)
    assert stats.widened(o, 0.0) is o
    assert stats.widened({"geomean": 1.0, "lo": None, "hi": None, "rows": 2}, 0.004)["lo"] is None
    # Two separate runs compared as an A/B (`summary A --ab B`): rows 0.3% apart with little spread
    # read a change without the run offset, and none with it.
    a = [r for i, op in enumerate(["exp", "abs", "neg", "sin", "cos", "tanh"]) for r in rows([1.0], op=op)]
    b = [r for i, op in enumerate(["exp", "abs", "neg", "sin", "cos", "tanh"])
         for r in rows([1.003 + 0.0005 * (i % 3 - 1)], op=op)]
    tight = compare(a, b, "A", "B")["summary"]["overall"]
    assert tight["lo"] > 1 and tight["run_offset_sd"] is None
    res = compare(a, b, "A", "B", run_offset_sd=0.002)
    o = res["summary"]["overall"]
    assert o["lo"] < 1 < o["hi"] and o["geomean"] == pytest.approx(tight["geomean"]) and o["run_offset_sd"] == 0.002
    both_runs = 1.959964 * 0.002 * math.sqrt(2)  # each run's offset: two runs, sqrt 2
    assert min(math.log(o["geomean"] / o["lo"]), math.log(o["hi"] / o["geomean"])) >= both_runs - 1e-9
    assert "widened by each run's offset over all its rows, sd 0.2% a run" in res["markdown"]


def test_two_plain_runs_overall_leaves_out_rows_whose_processes_disagreed():
    """`summary A --ab B` of two plain runs: a row marked BENCHMARK_PROCESS_UNSTABLE (its processes
    read two autotune picks) moved 40%; its value is a draw, so the overall leaves it out, counts
    it, and its own intervals judge it. A row marked for its torch baseline alone is no draw of the
    op's latency: it stays in."""
    a, b = [], []
    for op in ["exp", "abs", "neg", "sin", "pick", "tune", "torch_apart"]:
        for side, out in ((a, 1.0), (b, 0.6 if op == "pick" else 1.0)):
            marked = (op == "pick" and side is b) or (op in ("tune", "torch_apart") and side is a)  # on either side
            reason = "torch processes read 0.5, 0.9 ms" if op == "torch_apart" else "processes read 0.6, 1 ms"
            r = rows([out], op=op, markers=["BENCHMARK_PROCESS_UNSTABLE"] if marked else None)[0]
            side.append({**r, "latency_ci": [out * 0.98, out * 1.02], "processes": 3,
                         **({"marker_reason": reason} if marked else {})})
    res = compare(a, b, "A", "B", run_offset_sd=0.002)
    o = res["summary"]["overall"]
    assert o["rows"] == 5 and o["process_unstable_left_out"] == 2 and o["geomean"] == pytest.approx(1.0), o
    assert "2 process-unstable row(s) left out: each judged on its own intervals" in res["markdown"]
    verdicts = {t["op"]: t["verdict"] for t in res["rows"]}
    assert verdicts["pick"] == "faster" and "| faster (process-unstable) [unknown]" in res["markdown"]
    assert {t["op"] for t in res["rows"] if t["process_unstable"]} == {"pick", "tune"}


def test_a_cut_runs_first_line_says_what_the_cut_voided():
    from zlbench.report.ab import cut_line

    planned = {"min": 4, "max": 10}
    line = lambda **c: cut_line({"cut": {"rows": 3, "rounds_done": [5, 6], "below_min": 0, **c},  # noqa: E731
                                 "rounds_planned": planned})
    assert "each reached the minimum, so its verdict stands" in line()
    # A fixed plan (ab.schedule=round: 10 rounds every row, no minimum of its own) cut at 4
    fixed = cut_line({"cut": {"rows": 3, "rounds_done": [4, 4], "below_min": 0}, "rounds_planned": {"min": 10, "max": 10}})
    assert "got 4 of the 10 rounds" in fixed and "reached the minimum" not in fixed, fixed
    assert "each verdict rests on the rounds it got" in fixed, fixed
    assert "2 of them, below the minimum, read 'inconclusive (cut)'" in line(below_min=2)
    # Interrupted in round 1: no row got a round; they are unpaired, not 'inconclusive (cut)'.
    text = line(rounds_done=[0, 0], no_round=3)
    assert "got 0 of the 4 to 10 rounds" in text and "3 got no round measured on both sides" in text
    assert "reached the minimum" not in text


def test_an_ab_cut_after_its_first_round_gives_its_overall_no_interval():
    """Every row one round (the run cut in round 2): a bootstrap over tests alone read the round's own
    draws as a change of every row, in bold, beside rows all 'inconclusive (cut)'."""
    a, b = [], []
    for i in range(6):
        node = f"t.py::test_op{i}"
        a += [{**r, "node": node} for r in rows([1.0], op=f"op{i}")]
        b += [{**r, "node": node} for r in rows([0.8 + 0.001 * i], op=f"op{i}")]
    nodes = {f"t.py::test_op{i}" for i in range(6)}
    res = compare(a, b, "off", "on", rounds={"min": 4, "max": 10}, cut=nodes)
    assert {t["verdict"] for t in res["rows"]} == {"inconclusive (cut)"}, res["rows"]
    line = next(x for x in res["markdown"].splitlines() if "Overall B/A latency" in x)
    assert "**" not in line and "over 6 row(s) of one round each (no interval" in line, line
    assert res["summary"]["overall"]["lo"] is None and res["summary"]["overall"]["hi"] is None  # ab.json too
    # The same rows over 2 rounds each: an interval, as before.
    a2 = a + [{**r, "round": 1} for r in a]
    b2 = b + [{**r, "round": 1, "latency": r["latency"] * 1.01} for r in b]
    res = compare(a2, b2, "off", "on", rounds={"min": 4, "max": 10}, cut=nodes)
    line = next(x for x in res["markdown"].splitlines() if "Overall B/A latency" in x)
    assert "**" in line and "95% bootstrap CI" in line, line


def test_a_cut_run_counts_as_cut_only_the_unpaired_rows_of_nodes_it_did_not_finish():
    """On the H200 a cut A/A said '12 got no round on both sides': its 12 unpaired rows were views of
    a finished node (no device work on either side), not rows the cut left without a round."""
    from zlbench.results.schema import MARKER_NO_DEVICE_WORK

    def side(late_status):
        out = [{**r, "node": "t.py::test_exp"} for r in rows([1.0] * 5)]
        out += [{**r, "node": "t.py::test_view", "latency": 2e-6} for r in rows([2e-6] * 5, op="view",
                                                                               markers=[MARKER_NO_DEVICE_WORK])]
        out += [{**r, "node": "t.py::test_late", "latency": None}
                for r in rows([None], op="late", status=late_status)]
        return out

    res = compare(side("timeout"), side("timeout"), "A", "B", aa=True, rounds={"min": 4, "max": 10},
                  cut=["t.py::test_late"])
    assert {u["op"] for u in res["unpaired"]} == {"view", "late"}
    assert res["summary"]["cut"]["no_round"] == 1, res["summary"]["cut"]
    assert "1 got no round measured on both sides" in res["markdown"]
    # A view of a node the cut left unfinished did get its rounds: not counted either.
    res = compare(side("timeout"), side("timeout"), "A", "B", aa=True, rounds={"min": 4, "max": 10},
                  cut=["t.py::test_late", "t.py::test_view"])
    assert res["summary"]["cut"]["no_round"] == 1, res["summary"]["cut"]


def test_a_run_cut_between_tests_says_how_many_tests_it_left_unfinished():
    """Cut before a test started: no row on either side, so no row to count; the line counts tests."""
    a = [{**r, "node": "t.py::test_exp"} for r in rows([1.0] * 5)]
    res = compare(a, [dict(r) for r in a], "A", "B", aa=True, rounds={"min": 4, "max": 10},
                  stops={"t.py::test_exp": {"why": "settled"}}, cut=["t.py::test_late", "t.py::test_later"])
    first = res["markdown"].splitlines()[2]
    assert "**Run cut short**: 2 test(s) not finished before the run ended" in first, first
    assert "row(s) got" not in first


def test_rows_of_one_value_a_side_without_intervals_say_why_they_are_not_judged():
    from . import history_runs as H
    from zlbench.report.ab import render_markdown

    # An A/B side's log, a FlagGems log: one value a row, no latency_ci. Shown, not judged.
    a = [H.row("exp", "[[64]]", 0.010, 0.02), H.row("abs", "[[64]]", 0.020, 0.02)]
    b = [H.row("exp", "[[64]]", 0.005, 0.02), H.row("abs", "[[64]]", 0.021, 0.02)]
    result = compare(a, b, "a.log", "b.log")
    assert result["summary"]["unjudgeable_rows"] == 2 and result["summary"]["verdicts"] == {"inconclusive": 2}
    assert "2 row(s) have one value a side and no process-level interval on both" in render_markdown(result)
    # Two plain runs' rows carry their intervals: judged on them, nothing to explain.
    a = [H.row("exp", "[[64]]", 0.010, 0.02, ci=[0.0099, 0.0101])]
    b = [H.row("exp", "[[64]]", 0.005, 0.02, ci=[0.0049, 0.0051])]
    result = compare(a, b, "a", "b")
    assert result["summary"]["unjudgeable_rows"] == 0 and "not judged" not in render_markdown(result)


def test_an_overall_line_without_an_interval_says_why():
    """ab.md and compare printed an overall change of one or two tests with no interval and no word
    of why (every demo A/B of one op): the interval resamples tests and needs three."""
    from zlbench.report.ab import no_interval

    two = stats.overall([0.5, 0.6, 0.7], clusters=["t1", "t1", "t2"])
    assert two["lo"] is None and two["tests"] == 2
    assert no_interval(two) == " (no interval: it resamples tests and needs 3 or more; this has 2)"
    three = stats.overall([0.5, 0.6, 0.7], clusters=["t1", "t2", "t3"])
    assert three["lo"] is not None and three["tests"] == 3 and no_interval(three) == ""


def test_a_medians_interval_is_distribution_free_and_needs_six_values():
    """The baseline drift check reads the median's interval: the mean's let one wild row of 21 (a
    baseline at 0.2x) stretch it over 1 and hide a 5% drift of the other 20."""
    assert stats.median_interval([1.0] * 5) == (None, None)
    assert stats.median_interval([0.2, 1.0, 1.01, 1.02, 1.03, 1.04, 1.05, 9.0]) == (0.2, 9.0)  # 8: the extremes
    lo, hi = stats.median_interval([1.05 + 0.001 * i for i in range(20)] + [0.2])
    assert lo > 1.05 and hi < 1.07, (lo, hi)
    assert stats.overall([1.05 + 0.001 * i for i in range(20)] + [0.2])["lo"] < 1  # the mean's
