"""Paired A/B statistics over rounds (the unit of replication), per row and overall.

Per row: d_r = ln(B_r / A_r); estimate exp(mean d) with a paired t interval; p-values adjusted
with Benjamini-Hochberg across live rows; a verdict. Overall: geometric mean of live rows' ratios
with a bootstrap CI over their tests (a test's rows share its processes). Why rounds: a test on one
timing call's samples gave ~96% false positives in an A/A (the samples share the call's process,
placement and clocks); the per-round paired test gives ~5%, and with fresh processes every round
(ab.respawn_every=1) it covers what a process draws too (benchmarks/gpu/RESULTS.md, tenth and
eleventh sessions).

Sequential runs (rounds stopped once a row's verdict is settled, ab.min_rounds..ab.rounds): pass
min_rounds/max_rounds to analyse()/decide() and each row is judged by the rule that stopped it
(zlbench/ab/sequential.py: repeated t intervals, Bonferroni over the planned looks, anytime p-values,
then BH); a row with fewer than min_rounds rounds is "inconclusive (cut)"."""

from __future__ import annotations

import math
from typing import Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from zlbench.ab.verdict import ALPHA, POWER, UNSTABLE_SD, VERDICTS, RowStat, decide  # noqa: F401 (stats.X)

def row_stat(a: Sequence[float], b: Sequence[float]) -> RowStat:
    d = np.log(np.asarray(b, float) / np.asarray(a, float))
    n = len(d)
    logs = tuple(float(x) for x in d)
    if n == 0:
        return RowStat(0, None, None, None, None, None, d=logs)
    mean = float(d.mean())
    if n < 2:
        return RowStat(n, math.exp(mean), None, None, None, None, d=logs)
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    tcrit = float(stats.t.ppf(1 - ALPHA / 2, n - 1))
    if se == 0:
        p = 0.0 if mean != 0 else 1.0
    else:
        p = float(stats.ttest_1samp(d, 0.0).pvalue)
    mde = (tcrit + float(stats.t.ppf(POWER, n - 1))) * se
    return RowStat(n, math.exp(mean), math.exp(mean - tcrit * se), math.exp(mean + tcrit * se), sd, p,
                   mde=math.exp(mde) - 1, d=logs)


def bh(pvalues: Sequence[float]) -> List[float]:
    if not pvalues:
        return []
    return [float(q) for q in stats.false_discovery_control(np.asarray(pvalues, float), method="bh")]


def analyse(stats_rows: List[RowStat], liveness: List[Optional[bool]], threshold: float,
            min_rounds: Optional[int] = None, max_rounds: Optional[int] = None,
            family_size: Optional[int] = None, futility: bool = True) -> None:
    """Fill q (BH across rows that may be live: not-live rows are excluded) and verdicts in place.

    With min_rounds and max_rounds (a sequential run) each row's ratio, interval, sd, p and mde are
    first replaced by those of its decision look under the sequential rule (zlbench/ab/sequential.py),
    with look and stop set; a row cut below min_rounds keeps its point estimate, loses its interval
    and p (none is valid there, so it is left out of BH) and is "inconclusive (cut)". family_size
    is the one the run's stopping rule used (sequential.row_decision); None: the rows this BH
    adjusts over (not-live and cut rows left out), which is what a scheduler passing that count used.
    futility: as the run's stopping rule (sequential.row_decision; False only to calibrate the rule
    without it)."""
    if (min_rounds is None) != (max_rounds is None):
        raise ValueError("a sequential analysis needs both min_rounds and max_rounds")
    if min_rounds is not None:
        if family_size is None:
            family_size = sum(1 for s, live in zip(stats_rows, liveness) if live is not False and s.n >= min_rounds)
        _sequential_looks(stats_rows, threshold, min_rounds, max_rounds, max(1, family_size), futility)
    idx = [i for i, s in enumerate(stats_rows) if s.p is not None and liveness[i] is not False]
    for i, q in zip(idx, bh([stats_rows[i].p for i in idx])):
        stats_rows[i].q = q
    for s, live in zip(stats_rows, liveness):
        s.verdict = decide(s, threshold, live, min_rounds, max_rounds)


def _sequential_looks(stats_rows: List[RowStat], threshold: float, min_rounds: int, max_rounds: int,
                      family_size: int, futility: bool = True) -> None:
    from zlbench.ab.sequential import row_decision

    for s in stats_rows:
        if s.d is None:
            raise ValueError("a sequential analysis needs each row's log ratios: make RowStats with row_stat()")
        r = row_decision(s.d, threshold, min_rounds=min_rounds, max_rounds=max_rounds, alpha=ALPHA,
                         family_size=family_size, futility=futility)
        s.n, s.look, s.stop = r.n, r.look, r.stop
        s.ratio = r.ratio
        s.lo, s.hi, s.sd, s.p, s.mde, s.q = r.lo, r.hi, r.sd, r.p, r.mde, None


def overall(ratios: Sequence[float], seed: int = 0,
            clusters: Optional[Sequence[Hashable]] = None,
            rounds: Optional[Sequence[Optional[Mapping[int, float]]]] = None,
            round_period: int = 1) -> Dict[str, Optional[float]]:
    """Geometric mean of row ratios with a percentile bootstrap CI. clusters: each row's test (its
    node): the rows of one test share its processes' draws (autotune picks, input placement), so
    tests, not rows, are resampled; without them each row is its own. rounds: each row's log ratio
    per round number (the rounds its ratio rests on): a round's processes run every test of that
    round, so what they draw moves all its rows at once, and rounds are resampled too, crossed with
    the tests (Owen's pigeonhole bootstrap; slightly conservative). round_period: how many
    consecutive rounds share their side processes (ab.respawn_every; 0: the whole run), drawn
    together. Resampled over tests alone, 3 of 11 A/As and a neutral axis on the H200 read an
    overall change whose interval left out 0; over tests and rounds (and without the rows the
    report calls unstable: report.ab.overall_line) none did (RESULTS.md, twenty-eighth session).
    Fewer than 3 tests: no interval."""
    keys = list(clusters) if clusters is not None else list(range(len(ratios)))
    per_round = list(rounds) if rounds is not None else [None] * len(ratios)
    kept = [(math.log(r), k, d) for r, k, d in zip(ratios, keys, per_round) if r and r > 0]
    if not kept:
        return {"geomean": None, "lo": None, "hi": None, "rows": 0}
    logs = np.asarray([x for x, _, _ in kept], float)
    gm = float(np.exp(logs.mean()))
    groups: Dict[Hashable, List[int]] = {}
    for i, (_, k, _) in enumerate(kept):
        groups.setdefault(k, []).append(i)
    if len(groups) < MIN_TESTS or np.all(logs == logs[0]):
        return {"geomean": gm, "lo": None, "hi": None, "rows": int(len(logs)), "tests": len(groups)}
    test_of = np.empty(len(kept), int)
    for g, members in enumerate(groups.values()):
        test_of[members] = g
    rng = np.random.default_rng(seed)
    test_weight = _draw_counts(rng, len(groups))  # how often each test is drawn, per replicate
    row_counts = np.bincount(test_of, minlength=len(groups)).astype(float)
    by_round = [d for _, _, d in kept] if all(d for _, _, d in kept) else None
    periods = sorted({_period(r, round_period) for d in by_round for r in d}) if by_round else []
    if len(periods) >= 2:
        means = _crossed_means(by_round, test_of, test_weight, row_counts, periods, round_period, rng)
        resampled = "tests and rounds"
    else:
        means = (test_weight @ np.bincount(test_of, weights=logs, minlength=len(groups))) / (test_weight @ row_counts)
        resampled = "tests"
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {"geomean": gm, "lo": float(np.exp(lo)), "hi": float(np.exp(hi)), "rows": int(len(logs)),
            "resampled": resampled, "tests": len(groups)}


def median_interval(values: Sequence[float], level: float = 0.95) -> Tuple[Optional[float], Optional[float]]:
    """A distribution-free interval for the median of `values` (order statistics at binomial ranks:
    from 9 values on, one wild value is left outside it); (None, None) for fewer than 6, too few
    for 95%."""
    xs = sorted(values)
    n = len(xs)
    j = int(stats.binom.ppf((1 - level) / 2, n, 0.5)) if n else 0
    if j < 1:
        return None, None
    return xs[j - 1], xs[n - j]


MIN_TESTS = 3  # tests an overall interval resamples: fewer give none
BOOTSTRAP = 2000
CHUNK = 200  # replicates at a time: a corpus-wide A/B has thousands of rows


def _draw_counts(rng: np.random.Generator, n: int) -> np.ndarray:
    """(BOOTSTRAP x n) how often each of n units is drawn, n draws with replacement per replicate."""
    return np.apply_along_axis(np.bincount, 1, rng.integers(0, n, size=(BOOTSTRAP, n)), minlength=n).astype(float)


def _period(round_number: int, round_period: int) -> int:
    return round_number // round_period if round_period else 0


def _crossed_means(per_round: Sequence[Mapping[int, float]], test_of: np.ndarray, test_weight: np.ndarray,
                   row_counts: np.ndarray, periods: Sequence[int], round_period: int,
                   rng: np.random.Generator) -> np.ndarray:
    """The overall mean log ratio per replicate: tests drawn (test_weight) and, crossed with them,
    the run's round periods, the same draw for every row. Each row's mean is over the drawn rounds
    it has; a row none of whose rounds was drawn keeps its own mean."""
    round_numbers = sorted({r for d in per_round for r in d})
    col = {r: j for j, r in enumerate(round_numbers)}
    values = np.zeros((len(per_round), len(round_numbers)))
    present = np.zeros_like(values)
    for i, d in enumerate(per_round):
        for r, x in d.items():
            values[i, col[r]], present[i, col[r]] = x, 1.0
    own = values.sum(axis=1) / present.sum(axis=1)
    period_col = np.asarray([periods.index(_period(r, round_period)) for r in round_numbers])
    round_weight = _draw_counts(rng, len(periods))[:, period_col]  # a drawn period brings all its rounds
    by_test = np.argsort(test_of, kind="stable")  # rows grouped by test: each test's sum is one reduceat
    starts = np.searchsorted(test_of[by_test], np.arange(len(row_counts)))
    means = np.empty(BOOTSTRAP)
    for lo in range(0, BOOTSTRAP, CHUNK):
        w = round_weight[lo:lo + CHUNK]
        total, count = w @ values.T, w @ present.T
        row_means = np.where(count > 0, total / np.where(count > 0, count, 1.0), own)
        t = test_weight[lo:lo + CHUNK]
        test_sums = np.add.reduceat(row_means[:, by_test], starts, axis=1)
        means[lo:lo + CHUNK] = (t * test_sums).sum(axis=1) / (t @ row_counts)
    return means


def widened(o: Dict, shared_sd: float) -> Dict:
    """overall()'s interval with an offset the bootstrap cannot see added in quadrature to each side:
    shared_sd, the sd of ln of an offset every row shares (two runs measured at different times: the
    machine's state each ran under). The point estimate stays; no interval stays none."""
    if o.get("lo") is None or not shared_sd:
        return o
    center, extra = math.log(o["geomean"]), (float(stats.norm.ppf(1 - ALPHA / 2)) * shared_sd) ** 2
    below, above = max(0.0, center - math.log(o["lo"])), max(0.0, math.log(o["hi"]) - center)
    return {**o, "lo": math.exp(center - math.sqrt(below ** 2 + extra)),
            "hi": math.exp(center + math.sqrt(above ** 2 + extra))}
