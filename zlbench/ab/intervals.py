"""Two values, each with its run's process-level interval: did the row move?

A plain run with timer.processes=K >= 2 reports each row's median over K benchmark processes and
`latency_ci`, a 95% prediction interval for the value another run of the same caliber would
report (zlbench/results/process_stats.py). So for two runs A and B of a row:

    moved  <=>  B lies outside A's interval  AND  A lies outside B's interval

Why this rule and not "the two intervals do not overlap": each interval is made for exactly the
question asked here (would another run report this value?), so B outside A's interval is already a
test at about 5% per row. Asking it both ways keeps the rule symmetric (`compare A B` flags what
`compare B A` flags) and guards against one run whose interval came out too narrow by chance (2 or
3 processes). Asking the intervals not to overlap would need a change about twice as large as
either interval allows, so a real step of 1.5 interval widths would pass unflagged, for no gain in
validity.

As an interval for the change B/A the rule reads: under a shift (B's level = r x A's), B / r is
another run of A's caliber, so r lies in [B / A_hi, B / A_lo] with 95%; likewise in [B_lo / A,
B_hi / A]. The reported interval is the hull of the two, and "moved" is 1 outside it. A row is
flagged when it moved AND changed by at least the threshold (a CI gate should not fail on a real
but negligible 0.5% change).

A comparison judges many rows at once, and a gate fails on any one of them. Per row the rule
flagged 0.66% of the rows of repeat runs on the H200 as slower, so a `--fail-on slower` gate
failed 11 of 48 pairs of repeat runs (40-95 rows each). The intervals are therefore first widened
to a family-wise level over the comparison's m interval rows (`for_family`: Bonferroni, 1 - 0.05/m,
on the normal quantile): 3 pairs of 48 failed (two of them cut runs), and a real 5% slowdown of
every row was still flagged on 68% of the rows (77% without). benchmarks/gpu/RESULTS.md,
twenty-ninth session."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Dict, FrozenSet, Tuple

from scipy.stats import norm

from zlbench.ab import stats

Interval = Tuple[float, float]

# `--fail-on` of `history compare`: which verdicts make it exit 1.
FAIL_ON: Dict[str, FrozenSet[str]] = {
    "slower": frozenset({"slower"}),
    "faster": frozenset({"faster"}),
    "changed": frozenset({"slower", "faster"}),
    "none": frozenset(),
}


@lru_cache(maxsize=None)
def family_factor(family: int) -> float:
    """How much wider (in log space) a 95% interval gets at the family-wise level over `family` rows."""
    return float(norm.ppf(1 - stats.ALPHA / 2 / max(1, family)) / norm.ppf(1 - stats.ALPHA / 2))


def for_family(ci: Interval, family: int) -> Interval:
    """A row's 95% interval widened about its log center to the family-wise level (module doc)."""
    center, half = (math.log(ci[0]) + math.log(ci[1])) / 2, (math.log(ci[1]) - math.log(ci[0])) / 2
    half *= family_factor(family)
    return math.exp(center - half), math.exp(center + half)


def interval_stat(a: float, a_ci: Interval, b: float, b_ci: Interval, family: int = 1) -> stats.RowStat:
    """The change B/A with the hull interval of the module doc (n = 1: one value per run, no p);
    family: the interval rows judged together (the intervals widened to that family's level)."""
    if family > 1:
        a_ci, b_ci = for_family(a_ci, family), for_family(b_ci, family)
    lo = min(b / a_ci[1], b_ci[0] / a)
    hi = max(b / a_ci[0], b_ci[1] / a)
    return stats.RowStat(1, b / a, lo, hi, None, None)


def moved(s: stats.RowStat) -> bool:
    """Each run's value outside the other run's interval."""
    return s.lo is not None and (s.lo > 1.0 or s.hi < 1.0)


def interval_verdict(s: stats.RowStat, threshold: float) -> str:
    """The A/B report's vocabulary for a row compared on its intervals."""
    change = abs(s.ratio - 1.0)
    if moved(s):
        if change < threshold:
            return "changed below threshold"
        return "faster" if s.ratio < 1 else "slower"
    if s.lo >= 1 - threshold and s.hi <= 1 + threshold:
        return "no difference beyond threshold"
    return "inconclusive"
