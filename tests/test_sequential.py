"""Sequential rounds (zlbench/ab/sequential.py): rows looked at after every round and stopped once their
verdict is settled keep their error rates; effects are found; settled rows stop early; a row more
rounds are unlikely to settle stops as futile, and its node with it, without costing error control
or power at changes past the threshold."""

import math

import numpy as np
import pytest

from zlbench.ab import sequential, stats

THR = 0.02
FLAGGED = ("faster", "slower", "changed below threshold")


def rowstat(d):
    return stats.row_stat(np.ones(len(d)), np.exp(d))


def run_nodes(rng, n_nodes, node_rows, effect, sd, min_rounds, max_rounds, family_size, futility=False):
    """Simulate rounds node by node: after each round from min_rounds on, ask node_done (without
    futility: node_settled) and stop the node when it says so. sd: one for every row, or one per row
    of the node. Returns each row's log ratios as measured, and its true sign."""
    sds = sd if isinstance(sd, (list, tuple)) else [sd] * node_rows
    measured, signs = [], []
    for _ in range(n_nodes):
        sign = 1 if rng.random() < 0.5 else -1
        mu = math.log1p(sign * effect) if effect else 0.0
        rows = {i: [] for i in range(node_rows)}
        for k in range(1, max_rounds + 1):
            for i, d in rows.items():
                d.append(mu + rng.normal(0, sds[i]))
            if k >= min_rounds and sequential.node_done(rows, THR, min_rounds=min_rounds, max_rounds=max_rounds,
                                                        family_size=family_size, futility=futility):
                break
        measured += list(rows.values())
        signs += [sign] * node_rows
    return measured, signs


def naive_peeking_flags(rng, sd, n_rows, min_rounds=3, max_rounds=10):
    """Share of A/A rows flagged when a fixed-sample 95% t interval is looked at after every round
    and the row stops at the first settled one (vectorised over rows)."""
    from scipy import stats as sps

    d = rng.normal(0, sd, (n_rows, max_rounds))
    ks = np.arange(min_rounds, max_rounds + 1)
    mean = np.cumsum(d, 1)[:, ks - 1] / ks
    se = np.array([d[:, :k].std(1, ddof=1) for k in ks]).T / np.sqrt(ks)
    half = sps.t.ppf(0.975, ks - 1) * se
    lo, hi = np.exp(mean - half), np.exp(mean + half)
    settled = (hi <= 1 - THR) | (lo >= 1 + THR) | ((lo >= 1 - THR) & (hi <= 1 + THR))
    settled[:, -1] = True
    first = settled.argmax(1)
    rows = np.arange(n_rows)
    return float(((lo[rows, first] > 1) | (hi[rows, first] < 1)).mean())


def test_aa_looking_after_every_round_keeps_the_false_positive_rate_below_alpha():
    """A/A, one row per node, noise from half the threshold to 4x it: the rule's own verdict (no
    BH: q = p) flags at most alpha of rows although every round is looked at (union bound; ~1%
    here). The contrast: a fixed 95% interval looked at the same way flags more than 5%."""
    rng = np.random.default_rng(20261130)
    flagged = total = 0
    for sd in (0.01, 0.02, 0.04, 0.08):
        measured, _ = run_nodes(rng, 500, 1, 0.0, sd, 3, 10, family_size=1)
        for d in measured:
            r = sequential.row_decision(d, THR, min_rounds=3, max_rounds=10, futility=False)
            assert r.settled or len(d) == 10
            flagged += r.verdict in FLAGGED
        total += len(measured)
    assert flagged / total <= 0.03
    assert naive_peeking_flags(rng, 0.08, 4000) > 0.065


def test_known_effect_is_found_in_fewer_rounds_and_bh_keeps_what_settled():
    """Runs of 100 rows in nodes of 4, a 5% change (sign per node) with sd 1%: after the final
    sequential analysis (BH across the run) nearly every row is flagged in the right direction,
    nodes stop well before max_rounds, and every change a row settled on survives BH."""
    rng = np.random.default_rng(5)
    right = rows = 0
    node_rounds = []
    for _ in range(4):
        measured, signs = run_nodes(rng, 25, 4, 0.05, 0.01, 3, 20, family_size=100)
        node_rounds += [len(d) for d in measured[::4]]
        row_stats = [rowstat(d) for d in measured]
        settled_as = [sequential.row_decision(d, THR, min_rounds=3, max_rounds=20, family_size=100)
                      for d in measured]
        stats.analyse(row_stats, [None] * len(row_stats), THR, min_rounds=3, max_rounds=20, family_size=100)
        for s, sign, r in zip(row_stats, signs, settled_as):
            rows += 1
            right += s.verdict == ("slower" if sign > 0 else "faster")
            if r.settled:
                assert (s.verdict, s.look, s.stop) == (r.verdict, r.look, "settled")
    assert right / rows >= 0.95
    assert np.mean(node_rounds) <= 9  # of 20 (7.7-7.8 over seeds 5-8)


def test_clearly_zero_settles_early_as_no_difference():
    rng = np.random.default_rng(11)
    measured, _ = run_nodes(rng, 100, 4, 0.0, 0.005, 3, 20, family_size=400)
    row_stats = [rowstat(d) for d in measured]
    stats.analyse(row_stats, [None] * len(row_stats), THR, min_rounds=3, max_rounds=20, family_size=400)
    assert np.mean([len(d) for d in measured[::4]]) <= 7  # of 20 (5.5-5.7 over other seeds)
    assert sum(s.verdict == "no difference beyond threshold" for s in row_stats) / len(row_stats) >= 0.99
    assert not any(s.verdict in FLAGGED for s in row_stats)


def test_fdr_across_rows_with_stopped_nodes():
    """Mixed runs: a quarter of the nodes carry a 5% change, the rest none (sd 1%). Looked at every
    round, nodes stopped when settled, BH across each run: the false discovery proportion averages
    below alpha, and wrong-direction calls do not happen."""
    rng = np.random.default_rng(99)
    fdp, wrong_sign = [], 0
    for _ in range(20):
        measured, truth = [], []
        for effect, nodes in ((0.05, 5), (0.0, 15)):
            m, signs = run_nodes(rng, nodes, 4, effect, 0.01, 3, 10, family_size=80)
            measured += m
            truth += [s if effect else 0 for s in signs]
        row_stats = [rowstat(d) for d in measured]
        stats.analyse(row_stats, [None] * len(row_stats), THR, min_rounds=3, max_rounds=10, family_size=80)
        hits = [(s, t) for s, t in zip(row_stats, truth) if s.verdict in FLAGGED]
        false = sum(t == 0 for _, t in hits)
        wrong_sign += sum(t != 0 and (s.ratio > 1) != (t > 0) for s, t in hits)
        fdp.append(false / max(1, len(hits)))
    assert np.mean(fdp) <= 0.05 and wrong_sign == 0


def test_cut_rows_never_settle_and_are_inconclusive_cut():
    r = sequential.row_decision([0.1, 0.1], THR, min_rounds=3, max_rounds=10)
    assert (r.settled, r.stop, r.look, r.p, r.lo, r.verdict) == (False, None, None, None, None, "inconclusive (cut)")
    assert sequential.row_decision([], THR, min_rounds=3, max_rounds=10).ratio is None
    assert not sequential.node_settled({"a": [0.0] * 8, "b": [0.3, 0.31]}, THR, min_rounds=3, max_rounds=10)
    assert sequential.node_settled({}, THR, min_rounds=3, max_rounds=10)
    assert "inconclusive (cut)" in stats.VERDICTS
    cut, full = rowstat([0.2, 0.21]), rowstat([0.2, 0.21, 0.2, 0.19, 0.2, 0.2])
    dead = rowstat([0.2])
    stats.analyse([cut, full, dead], [None, True, False], THR, min_rounds=3, max_rounds=10)
    assert cut.verdict == "inconclusive (cut)" and cut.p is None and cut.q is None and cut.lo is None
    assert cut.ratio == pytest.approx(math.exp(0.205))
    assert full.verdict == "slower" and full.stop == "settled" and full.look <= 6
    assert dead.verdict == "not live"  # not live before cut
    s = rowstat([0.0, 0.01])
    assert stats.decide(s, THR, True, min_rounds=3, max_rounds=10) == "inconclusive (cut)"


def test_settled_states_and_max_rounds():
    same = sequential.row_decision([0.001, -0.001, 0.0005, 0.0, -0.0005, 0.001], THR, min_rounds=3, max_rounds=10)
    assert same.settled and same.stop == "settled" and same.verdict == "no difference beyond threshold"
    assert 1 - THR <= same.lo <= 1 <= same.hi <= 1 + THR
    tiny = sequential.row_decision([0.005, 0.0051, 0.0049, 0.005, 0.0052, 0.0048], THR, min_rounds=3, max_rounds=10)
    assert tiny.settled and tiny.verdict == "changed below threshold" and 1 < tiny.lo and tiny.hi < 1 + THR
    # 2.2% with sd 1%: the sign is known long before whether it is past 2%: never settled, and at
    # max rounds the verdict is today's (significant, point estimate past the threshold).
    rng = np.random.default_rng(1)
    edge = list(math.log(1.022) + rng.normal(0, 0.01, 10))
    r = sequential.row_decision(edge, THR, min_rounds=3, max_rounds=10, futility=False)
    assert not r.settled and r.stop == "max rounds" and r.look == 10 and r.verdict == "slower"
    assert r.lo > 1 and r.lo < 1 + THR
    assert sequential.row_decision(edge[:7], THR, min_rounds=3, max_rounds=10, futility=False).stop is None
    # With futility the change is known (BH-safe for a family of 1) by round 5 and more rounds are
    # unlikely to tell its size against 2%: futile there, with the verdict max rounds gives.
    f = sequential.row_decision(edge, THR, min_rounds=3, max_rounds=10)
    assert (f.settled, f.stop, f.look, f.verdict) == (False, "futile", 5, "slower") and f.lo > 1
    # Rounds past max_rounds are not planned looks: ignored.
    longer = sequential.row_decision(edge + [0.5, 0.5], THR, min_rounds=3, max_rounds=10, futility=False)
    assert (longer.n, longer.look, longer.ratio, longer.stop) == (12, 10, r.ratio, "max rounds")


def test_interval_and_anytime_p_value_are_bonferroni_over_the_looks():
    d = [0.05, 0.06, 0.04, 0.055, 0.045]
    r = sequential.row_decision(d, THR, min_rounds=3, max_rounds=10)  # K = 8 looks
    k = r.look
    x = np.asarray(d[:k])
    se = x.std(ddof=1) / math.sqrt(k)
    from scipy import stats as sps

    crit = sps.t.ppf(1 - 0.05 / 16, k - 1)
    assert r.lo == pytest.approx(math.exp(x.mean() - crit * se)) and r.hi == pytest.approx(math.exp(x.mean() + crit * se))
    assert r.p == pytest.approx(min(1.0, 8 * sps.ttest_1samp(x, 0.0).pvalue))
    assert r.lo > 1 + THR and r.verdict == "slower"
    # Earlier looks were not settled (the first settled look is the one reported).
    assert not sequential.row_decision(d[:k - 1], THR, min_rounds=3, max_rounds=10).settled


def test_a_change_waits_for_the_family_and_equivalence_does_not():
    d = [0.05, 0.06, 0.04, 0.055, 0.045, 0.05, 0.052, 0.049]
    alone = sequential.row_decision(d, THR, min_rounds=3, max_rounds=10)
    many = sequential.row_decision(d, THR, min_rounds=3, max_rounds=10, family_size=1000)
    assert alone.settled and many.settled and many.look > alone.look
    assert many.p < 0.05 / 1000
    zero = [0.001, -0.001, 0.0005, 0.0, -0.0005, 0.001]
    assert (sequential.row_decision(zero, THR, min_rounds=3, max_rounds=10, family_size=1000).look
            == sequential.row_decision(zero, THR, min_rounds=3, max_rounds=10).look)


def test_plan_is_checked_and_fixed_analysis_is_unchanged():
    with pytest.raises(ValueError):
        sequential.row_decision([0.0] * 3, THR, min_rounds=1, max_rounds=10)
    with pytest.raises(ValueError):
        sequential.node_settled({"a": [0.0]}, THR, min_rounds=5, max_rounds=4)
    with pytest.raises(ValueError):
        stats.analyse([rowstat([0.0, 0.1, 0.0])], [None], THR, min_rounds=3)
    with pytest.raises(ValueError):
        sequential.row_decision([0.0] * 3, THR, min_rounds=3, max_rounds=10, family_size=0)
    a, b = rowstat([0.1, 0.12, 0.08, 0.1]), rowstat([0.1, 0.12, 0.08, 0.1])
    stats.analyse([a], [None], THR)
    stats.analyse([b], [None], THR, min_rounds=None, max_rounds=None)
    assert (a.verdict, a.lo, a.p, a.look, a.stop) == (b.verdict, b.lo, b.p, None, None)


# -- futility -----------------------------------------------------------------------------------------

QUIET, NOISY = [0.003] * 4, [0.025]  # a FlagGems node: four quiet shapes and one noisy microsecond row


def test_a_noisy_row_in_a_node_of_quiet_rows_is_futile_and_the_node_stops_early():
    """A/A nodes of five rows, one of them noisy (sd 2.5%: its interval cannot get inside the 2% band
    by round 10). Without futility it holds its node to max_rounds nearly always; with futility it
    stops as futile (verdict inconclusive) from round 4 and the node with it, while the quiet rows
    still settle as no difference."""
    rng = np.random.default_rng(7)
    before, _ = run_nodes(rng, 150, 5, 0.0, QUIET + NOISY, 3, 10, family_size=100)
    after, _ = run_nodes(rng, 150, 5, 0.0, QUIET + NOISY, 3, 10, family_size=100, futility=True)
    assert np.mean([len(d) for d in before[::5]]) >= 9.5  # 9.85 over 100 nodes of seed 1
    rounds_after = [len(d) for d in after[::5]]
    assert np.mean(rounds_after) <= 5.5 and np.median(rounds_after) <= 5  # ~4.9 (benchmarks/README.md)
    decisions = [sequential.row_decision(d, THR, min_rounds=3, max_rounds=10, family_size=100) for d in after]
    noisy, quiet = decisions[4::5], [r for i, r in enumerate(decisions) if i % 5 != 4]
    assert sum(r.stop == "futile" for r in noisy) / len(noisy) >= 0.7
    assert all(r.verdict == "inconclusive" and r.look >= sequential.FUTILE_FROM for r in noisy if r.stop == "futile")
    assert all(r.stop == "settled" and r.verdict == "no difference beyond threshold" for r in quiet)


def test_futility_waits_for_four_rounds_and_the_node_stops_with_it():
    quiet = [0.001, -0.001, 0.0005, 0.0, -0.0005]
    noisy = [0.03, -0.03, 0.025, -0.02, 0.0]
    node = {i: quiet for i in range(4)} | {"noisy": noisy}
    plan = dict(min_rounds=3, max_rounds=10, family_size=5)
    cut = lambda k: {i: d[:k] for i, d in node.items()}  # noqa: E731
    # Round 3: the quiet rows are settled, the noisy one is not, and no row is futile before 4 rounds.
    assert sequential.row_settled(quiet[:3], THR, **plan) and not sequential.node_done(cut(3), THR, **plan)
    assert sequential.node_done(cut(4), THR, **plan) and not sequential.node_settled(cut(5), THR, **plan)
    r = sequential.row_decision(noisy, THR, **plan)
    assert (r.settled, r.stop, r.look, r.verdict) == (False, "futile", 4, "inconclusive")
    # The verdict rests on the futile look (frozen, as a settled row's): more rounds do not move it.
    later = sequential.row_decision(noisy + [0.0] * 5, THR, **plan)
    assert (later.n, later.look, later.stop, later.verdict, later.lo) == (10, 4, "futile", "inconclusive", r.lo)
    assert sequential.row_decision(noisy, THR, **plan, futility=False).stop is None


def test_a_change_well_beyond_the_threshold_is_never_futile_before_it_settles():
    """5-10% changes (2.5-5x the threshold) with sd 0.5-1%, 8-10% with sd 2%: every row's first
    stop is settled (or max rounds), never futile, at plans 3..10 and 4..10 and a 100-row family."""
    rng = np.random.default_rng(3)
    for effect, sd in ((0.05, 0.005), (0.05, 0.01), (0.10, 0.01), (0.08, 0.02), (0.10, 0.02)):
        for min_rounds in (3, 4):
            for _ in range(300):
                sign = 1 if rng.random() < 0.5 else -1
                d = math.log1p(sign * effect) + rng.normal(0, sd, 10)
                r = sequential.row_decision(d, THR, min_rounds=min_rounds, max_rounds=10, family_size=100)
                assert r.stop in ("settled", "max rounds"), (effect, sd, list(d))
                assert r.stop == "max rounds" or r.verdict == ("slower" if sign > 0 else "faster")


def test_futility_keeps_the_aa_false_positive_rate_and_the_power_at_changes_past_the_threshold():
    """A/A nodes of five rows (sd 0.5% to 8%, and quiet rows with a noisy one) stopped when every row
    is settled or futile: the rows' own verdicts flag at most 3% (alpha 5%), and after BH across
    100-row runs at most 1% of rows. Changes of 3% (sd 1%) and 5% (sd 2%): futility takes no more
    than 3 points of power off the rule without it (benchmarks/README.md: none at all over 800 rows)."""
    rng = np.random.default_rng(20261201)
    own = bh = total = 0
    for sd in (0.005, 0.01, 0.02, 0.04, 0.08, QUIET + NOISY):
        for _ in range(2):
            measured, _ = run_nodes(rng, 20, 5, 0.0, sd, 3, 10, family_size=100, futility=True)
            row_stats = [rowstat(d) for d in measured]
            stats.analyse(row_stats, [None] * 100, THR, min_rounds=3, max_rounds=10, family_size=100)
            bh += sum(s.verdict in FLAGGED for s in row_stats)
            for s in row_stats:
                s.q = s.p  # the row's own verdict: no BH
                own += stats.decide(s, THR, None, 3, 10) in FLAGGED
            total += len(row_stats)
    assert own / total <= 0.03 and bh / total <= 0.01
    for effect, sd in ((0.03, 0.01), (0.05, 0.02)):
        power = {}
        for futility in (False, True):
            measured, signs = run_nodes(np.random.default_rng(11), 60, 5, effect, sd, 3, 10, family_size=300,
                                        futility=futility)
            row_stats = [rowstat(d) for d in measured]
            stats.analyse(row_stats, [None] * 300, THR, min_rounds=3, max_rounds=10, family_size=300,
                          futility=futility)
            power[futility] = np.mean([s.verdict == ("slower" if g > 0 else "faster")
                                       for s, g in zip(row_stats, signs)])
        assert power[True] >= power[False] - 0.03, (effect, sd, power)


def test_the_ab_report_says_which_rows_were_futile(tmp_path):
    import csv

    from zlbench.report.ab import compare, stop_reason, write

    quiet = [0.001, -0.001, 0.0005, 0.0, -0.0005]
    noisy = [0.03, -0.03, 0.025, -0.02, 0.0]
    node = "benchmark/test_unary.py::test_exp"

    def side(b):
        return [{"op": "exp", "dtype": "torch.float16", "shape": shape, "latency": math.exp(x) if b else 1.0,
                 "round": r, "status": "ok", "node": node, "markers": []}
                for shape, d in (("[[64]]", noisy), *((f"[[{n}]]", quiet) for n in (1024, 2048, 4096, 8192)))
                for r, x in enumerate(d)]

    res = compare(side(False), side(True), "off", "on", stops={node: {"why": "settled", "round": 5}},
                  rounds={"min": 3, "max": 10})
    by_shape = {t["shape"]: t for t in res["rows"]}
    assert by_shape["[[64]]"]["stop"] == "futile" and by_shape["[[64]]"]["verdict"] == "inconclusive"
    assert {t["stop"] for s, t in by_shape.items() if s != "[[64]]"} == {"settled"}
    assert res["summary"]["stops"] == {"futile": 1, "settled": 4}
    assert "rows stopped: 1 futile, 4 settled" in res["markdown"]
    assert ("its rounds column; settled: its interval decided its verdict (wholly beyond or within the threshold "
            "band); futile: its interval was unlikely to decide it within ab.rounds)") in res["markdown"]
    assert "Rounds planned: " in res["markdown"]  # the plan, not what a row ran (its rounds column)
    assert "| 5 (futile at 4) " in res["markdown"]
    write(res, tmp_path)
    assert {r["shape"]: r["stop"] for r in csv.DictReader(open(tmp_path / "ab.csv"))}["[[64]]"] == "futile"
    # A futile row of a node that ran on to max rounds for another row; a dead node keeps its reason.
    assert stop_reason(node, 10, {}, {"min": 3, "max": 10}, (), "futile") == "futile"
    assert stop_reason(node, 10, {}, {"min": 3, "max": 10}, (), None) == "max rounds"
    # ... and a settled one (it read "6 (max rounds at 5)": its columns rest on 5 rounds, settled there)
    assert stop_reason(node, 10, {}, {"min": 3, "max": 10}, (), "settled", look=5) == "settled"
    assert stop_reason(node, 10, {}, {"min": 3, "max": 10}, (), "settled", look=10) == "max rounds"
    # A node the run's end cut: its rows that had settled or gone futile say so, the others were cut.
    assert stop_reason(node, 5, {}, {"min": 3, "max": 10}, {node}, "futile") == "futile"
    assert stop_reason(node, 5, {}, {"min": 3, "max": 10}, {node}, "settled") == "settled"
    assert stop_reason(node, 5, {}, {"min": 3, "max": 10}, {node}, None) == "cut"
    cut = compare(side(False), side(True), "off", "on", rounds={"min": 3, "max": 10}, cut={node})
    assert cut["summary"]["stops"] == {"futile": 1, "settled": 4}, cut["summary"]["stops"]
    assert "| 5 (settled at 3) " in cut["markdown"] and "(cut" not in cut["markdown"], cut["markdown"]
    assert ("**Run cut short**: 1 test(s) not finished before the run ended; the 5 row(s) of 1 of them had settled "
            "or gone futile, so their verdicts stand. Resume") in cut["markdown"], cut["markdown"]
    # ... and a cut test that left no row compared is said apart
    two = compare(side(False), side(True), "off", "on", rounds={"min": 3, "max": 10}, cut={node, "t.py::test_none"})
    assert "the 5 row(s) of 1 of them had settled or gone futile, so their verdicts stand; the other 1 had no row " \
        "compared" in two["markdown"], two["markdown"]
    assert stop_reason(node, 1, {node: {"why": "not live"}}, {"min": 3, "max": 10}, (), "futile") == "not live"


def test_the_scheduler_stops_a_node_whose_last_open_row_is_futile():
    """resident.settled_nodes, what the node-level A/B asks before each round: the node of four quiet
    shapes and a noisy one stops at round 4 (its noisy row futile); without futility it would not."""
    from zlbench.engine.device_ab import settled_nodes

    quiet = [0.001, -0.001, 0.0005, 0.0, -0.0005]
    noisy = [0.03, -0.03, 0.025, -0.02, 0.0]
    node = "benchmark/test_unary.py::test_exp"
    shapes = (("[[64]]", noisy), *((f"[[{n}]]", quiet) for n in (1024, 2048, 4096, 8192)))

    def rows(k):
        return {side: [{"op": "exp", "dtype": "torch.float16", "shape": shape, "status": "ok", "round": r,
                        "node": f"{node}[{shape}]", "latency": math.exp(d[r]) if side == "on" else 1.0}
                       for shape, d in shapes for r in range(k)] for side in ("off", "on")}

    schedule = {"sides": ["off", "on"], "threshold": THR, "min_rounds": 3, "devices": 1}
    assert settled_nodes(rows(3), [node], schedule, rounds=10) == []
    assert settled_nodes(rows(4), [node], schedule, rounds=10) == [node]
    assert not sequential.node_settled({s: d[:4] for s, d in shapes}, THR, min_rounds=3, max_rounds=10)
