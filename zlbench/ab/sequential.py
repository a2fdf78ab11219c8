"""Sequential rounds: stop measuring a row once its A/B verdict is settled, with error rates that
hold although the data are looked at after every round.

The rule: repeated confidence intervals over the planned looks, Bonferroni across the looks.
A sequential A/B plans looks after rounds k = min_rounds .. max_rounds, K = max_rounds -
min_rounds + 1 of them. At look k a row's interval is the paired t interval of its first k log
ratios d_1..d_k at level alpha/K:

    mean_k +- t(1 - alpha/(2K), k - 1) * sd_k / sqrt(k).

By the union bound (Bonferroni) the K intervals cover the row's true mean log ratio *all at once*
with probability >= 1 - alpha (the repeated confidence intervals of Jennison & Turnbull, "Repeated
confidence intervals for group sequential clinical trials", Controlled Clinical Trials 5, 1984;
Bonferroni is the simplest boundary with that property: exact as a bound, no numerical
integration, the same for any sd since the t statistic is a pivot under normal round-to-round
noise). So whatever stopping rule is used - this module's, the scheduler's "every row of the node
settled", a time limit - the interval at the look where the row stopped covers with probability
>= 1 - alpha, and every verdict read off it (faster, slower, changed below threshold, no
difference beyond threshold) is wrong with probability <= alpha per row. The union bound is
conservative: a null row looked at through all K looks is flagged with probability ~2.7% (K=8) or
~2.1% (K=18), and in simulated A/A runs, where most rows settle as "no difference" first, 0.2-1.4%
of rows are flagged, with futility or without (benchmarks/README.md, ab_calibration.py --simulate). Alternatives weighed: a Pocock-type constant calibrated
to exactly alpha narrows the final interval by ~12% but needs a simulated calibration (and
simulated tails for the p-values BH uses); anytime-valid confidence sequences (Howard, Ramdas et
al. 2021; the t confidence sequence of Wang & Ramdas 2023) spend alpha over an unbounded horizon
and are much wider at 3..20 rounds. PyPI's confseq has no wheels (sdist with a C++ build, last
release 2023), expectation needs Python >= 3.12, savvi covers regression/multinomial only.

Settled (at a look k >= min_rounds), on the ratio scale with the band [1 - threshold, 1 + threshold]:

- faster / slower: the whole interval is beyond the band (hi <= 1 - threshold, lo >= 1 + threshold)
  and the anytime p-value (below) is under alpha / family_size, family_size being the number of
  rows the final BH adjusts over: BH accepts any p-value under alpha / m whatever the other rows
  show, so a row never stops on a change that the report then calls inconclusive;
- inside the band: "no difference beyond threshold" (the interval contains 1; equivalence, TOST
  logic: decided by the interval, not by failing to reject) or "changed below threshold" (it
  excludes 1 and BH accepts the change; else the report says no difference beyond threshold,
  which the interval also shows).

An interval that excludes 1 but straddles the band's edge (the sign is known, the size against the
threshold is not) or that contains 1 and leaves the band is not settled: more rounds can tell.
At max_rounds such a row gets today's fixed-horizon verdict from the same interval and p-value.

A row's verdict rests on its *first* settled or futile look (frozen: the rounds it gets afterwards
while its node waits for other rows do not change it), else on look min(n, max_rounds); rounds
past max_rounds are not planned looks and are ignored. Its anytime p-value is min(1, K * p_t) with
p_t the two-sided t p-value at that look: under no effect P(p <= a) <= P(some look's p_t <= a/K)
<= a at any stopping time, and p <= alpha exactly when that look's interval excludes 1.

Futility (non-binding stochastic curtailment): a row that more rounds are unlikely to settle stops
as "futile", so that one noisy microsecond row, or a change straddling the band's edge, does not
hold its node to max_rounds (a node stops when every row is settled or futile). At a look k with
FUTILE_FROM <= k < N = max_rounds the row's mean log ratio at N is predicted from its first k rounds
(normal rounds with sd = sd_k, flat prior on the mean: mean_N ~ N(mean_k, sd_k^2 (N - k) / (N k)),
the predictive power of Spiegelhalter, Freedman & Blackburn, Controlled Clinical Trials 7, 1986),
and its interval at N taken as mean_N +- t(1 - alpha/(2K), N - 1) * sd_k / sqrt(N). It is futile when

- the chance that this interval is settled (inside the band, or beyond it with a BH-safe p-value)
  is below FUTILE_SETTLE (30%), and
- it already has a BH-safe change (its size against the threshold is what more rounds are unlikely
  to tell), or the chance that at N it shows a change past the threshold (interval excluding 1,
  mean beyond the band's edge: what the report calls faster/slower at max_rounds) is below
  FUTILE_CHANGE (5%).

The second condition keeps a row with a real change near or past the threshold running: without
it, a bare projection of the interval to N around mean_k (which also ignores that mean_N is still
uncertain) stopped rows with 3-5% changes at sd 1-2% as futile and lost 42-92% of their flags. No row is futile before FUTILE_FROM = 4 rounds: an sd on 2 degrees of freedom is
too rough to give up on (one time in ten it overstates sd by 1.5x). The rules weighed and the
settings' calibration: benchmarks/README.md (ab_calibration.py --simulate, --variants).

A futile row gets the verdict a row gets at max_rounds, from its look's interval and p-value:
normally "inconclusive"; a change only where the interval excludes 1 and BH accepts it, as
anywhere else. Futility adds no way to reject: the repeated intervals cover at all looks at once
and the anytime p-values are valid at any stopping time, so every error bound above holds
whichever look a row stops at. In group-sequential terms the futility boundary is non-binding:
the error rates are computed as if futility never stopped a row, and they hold whether the
scheduler follows it, ignores it (a node running on for another row) or stops elsewhere
(Jennison & Turnbull, Group Sequential Methods with Applications to Clinical Trials, 2000: ch. 10,
stochastic curtailment, and ch. 9, repeated confidence intervals).

Across rows, stats.analyse() applies Benjamini-Hochberg to these p-values. BH's FDR guarantee needs
p-values that are valid (above) and independent across rows: a row's decision look depends only on
its own rounds (first settled or futile look, else max_rounds; only a cut, which is set by time,
not by the data, ends a row elsewhere), so rows measured independently give independent p-values
although the node's stopping time couples the rows' round counts (Benjamini & Hochberg 1995: FDR <= alpha *
m0 / m for independent p-values). Rows correlated through the machine (drift) are not covered by
that theorem; Benjamini-Yekutieli would be, at a factor ~ln(m) in power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping, Optional, Sequence

import numpy as np
from scipy import stats as sps

from zlbench.ab import verdict as stats  # ALPHA, POWER, RowStat, decide

SETTLED = "settled"
FUTILE = "futile"
MAX_ROUNDS = "max rounds"

# Futility (module docstring; chosen by simulation, benchmarks/README.md): a row is futile when the
# predictive chance that its interval at max_rounds is settled is below FUTILE_SETTLE and the chance
# that it then shows a change past the threshold is below FUTILE_CHANGE; never before FUTILE_FROM rounds.
FUTILE_SETTLE = 0.30
FUTILE_CHANGE = 0.05
FUTILE_FROM = 4


@dataclass(frozen=True)
class RowDecision:
    n: int  # rounds seen (paired log ratios)
    look: Optional[int]  # the rounds the verdict rests on; None below min_rounds
    settled: bool
    stop: Optional[str]  # "settled", "futile", "max rounds", or None: more rounds wanted (or a cut, the scheduler's call)
    verdict: str  # the row's verdict with q = min(1, p * family_size) (what BH gives it at worst)
    ratio: Optional[float]  # exp(mean d) at the look: B/A latency
    lo: Optional[float]  # repeated confidence interval at the look, as ratios
    hi: Optional[float]
    p: Optional[float]  # anytime-valid p-value for "no change" (Bonferroni over the planned looks)
    sd: Optional[float]
    mde: Optional[float]  # minimum detectable relative change at 80% power with this boundary


def check_plan(min_rounds: int, max_rounds: int, family_size: int = 1) -> None:
    if family_size < 1:
        raise ValueError(f"family_size={family_size}: at least the row itself")
    if min_rounds < 2:
        raise ValueError(f"min_rounds={min_rounds}: a paired t interval needs at least 2 rounds")
    if max_rounds < min_rounds:
        raise ValueError(f"max_rounds={max_rounds} < min_rounds={min_rounds}")


def n_looks(min_rounds: int, max_rounds: int) -> int:
    check_plan(min_rounds, max_rounds)
    return max_rounds - min_rounds + 1


def look_alpha(alpha: float, min_rounds: int, max_rounds: int) -> float:
    """The two-sided level of each look's interval: alpha over the K planned looks."""
    return alpha / n_looks(min_rounds, max_rounds)


@lru_cache(maxsize=1024)
def _crit(level: float, df: int) -> float:
    return float(sps.t.ppf(1 - level / 2, df))


@lru_cache(maxsize=256)
def _crits(level: float, first: int, last: int) -> np.ndarray:
    """t critical values of two-sided level `level` for looks first..last (df = k - 1)."""
    out = np.array([_crit(level, k - 1) for k in range(first, last + 1)])
    out.flags.writeable = False
    return out


@lru_cache(maxsize=512)
def _power_quantile(df: int) -> float:
    return float(sps.t.ppf(stats.POWER, df))


def band_class(lo: float, hi: float, threshold: float) -> Optional[str]:
    """What an interval (as ratios) says against the band [1 - threshold, 1 + threshold]: "faster" or
    "slower" (wholly beyond it), "changed below threshold" / "no difference beyond threshold" (inside
    it, excluding / containing 1), or None (it straddles an edge of the band)."""
    if hi <= 1 - threshold:
        return "faster"
    if lo >= 1 + threshold:
        return "slower"
    if lo >= 1 - threshold and hi <= 1 + threshold:
        return "changed below threshold" if (hi < 1 or lo > 1) else "no difference beyond threshold"
    return None


def _settled(lo, hi, t_abs, threshold: float, change_crit):
    """Settled looks (works on arrays): inside the band, or wholly beyond it with |t| past the
    family's critical value (so the change also survives BH over family_size rows)."""
    beyond = (hi <= 1 - threshold) | (lo >= 1 + threshold)
    inside = (lo >= 1 - threshold) & (hi <= 1 + threshold)
    return inside | (beyond & (t_abs > change_crit))


def _futile(ks, mean, var, t_abs, change_crit, threshold: float, level: float, family_size: int, max_rounds: int):
    """Futile looks (works on arrays over looks; module docstring): the predictive chances, from each
    look's mean and sd, that the row's interval at N = max_rounds is settled and that it then shows
    a change past the threshold."""
    n_max = max_rounds
    lo_e, hi_e = math.log1p(-threshold), math.log1p(threshold)  # the band's edges on the log scale
    sd = np.sqrt(var)
    hw = _crit(level, n_max - 1) * sd / math.sqrt(n_max)  # the interval's half-width at N
    hw_safe = _crit(level / family_size, n_max - 1) * sd / math.sqrt(n_max)  # |mean| past it: BH-safe at N
    spread = np.sqrt(var * (n_max - ks) / (n_max * ks))  # sd of mean_N given the first k rounds

    def below(x):  # P(mean_N <= x); a step where spread is 0 (sd 0, or k = N)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (x - mean) / np.where(spread > 0, spread, 1.0)
        return np.where(spread > 0, sps.norm.cdf(z), (mean <= x).astype(float))

    inside = np.clip(below(hi_e - hw) - below(lo_e + hw), 0.0, None)  # 0 where hw exceeds the band
    beyond = below(np.minimum(lo_e - hw, -hw_safe)) + 1 - below(np.maximum(hi_e + hw, hw_safe))
    change = below(np.minimum(lo_e, -hw)) + 1 - below(np.maximum(hi_e, hw))
    return ((ks >= FUTILE_FROM) & (ks < n_max) & (inside + beyond < FUTILE_SETTLE)
            & ((t_abs > change_crit) | (change < FUTILE_CHANGE)))


def _looks(x: np.ndarray, threshold: float, min_rounds: int, max_rounds: int, alpha: float, family_size: int,
           futility: bool):
    """Every planned look k = min_rounds..min(n, max_rounds) at once (n >= min_rounds): arrays of
    k, mean, variance, standard error, interval (ratios), |t|, the index of the first settled (or,
    with futility, futile) look (None if none) and whether that look is settled."""
    level = alpha / n_looks(min_rounds, max_rounds)
    last = min(len(x), max_rounds)
    ks = np.arange(min_rounds, last + 1)
    y = x - x[0]  # the variance of shifted data: no cancellation in the running sums
    mean_y = np.cumsum(y)[ks - 1] / ks
    var = np.maximum(np.cumsum(y * y)[ks - 1] - ks * mean_y * mean_y, 0.0) / (ks - 1)
    mean, se = mean_y + x[0], np.sqrt(var / ks)
    crit = _crits(level, min_rounds, last)
    lo, hi = np.exp(mean - crit * se), np.exp(mean + crit * se)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_abs = np.where(se > 0, np.abs(mean) / np.where(se > 0, se, 1.0), np.where(mean != 0, np.inf, 0.0))
    change_crit = _crits(level / family_size, min_rounds, last)
    settled = _settled(lo, hi, t_abs, threshold, change_crit)
    done = (settled | _futile(ks, mean, var, t_abs, change_crit, threshold, level, family_size, max_rounds)
            if futility else settled)
    hits = np.flatnonzero(done)
    first = int(hits[0]) if len(hits) else None
    return ks, mean, var, se, crit, lo, hi, t_abs, first, first is not None and bool(settled[first])


def row_decision(d: Sequence[float], threshold: float, *, min_rounds: int, max_rounds: int,
                 alpha: float = stats.ALPHA, family_size: int = 1, futility: bool = True) -> RowDecision:
    """Where one row stands after len(d) rounds (d: its per-round ln(B/A), in round order).

    family_size: how many rows the final Benjamini-Hochberg adjusts over (the run's rows that may be
    live; an upper bound will do). A change (faster/slower) settles only once its anytime p-value is
    below alpha / family_size, which BH accepts whatever the other rows show, so a row never stops
    on a change the report then calls inconclusive. It does not touch the error control: that is
    the final BH's. Equivalence ("no difference beyond threshold", or "changed below threshold"
    when BH accepts the change) settles as soon as the interval lies inside the band. futility: a
    row more rounds are unlikely to settle stops as "futile" (False: the rule without futility,
    for calibration)."""
    K = n_looks(min_rounds, max_rounds)
    check_plan(min_rounds, max_rounds, family_size)
    x = np.asarray(d, float)
    n = len(x)
    if n < min_rounds:
        ratio = math.exp(float(x.mean())) if n else None
        return RowDecision(n, None, False, None, "inconclusive (cut)", ratio, None, None, None, None, None)
    ks, mean, var, se, crit, lo, hi, t_abs, first, settled = _looks(x, threshold, min_rounds, max_rounds, alpha,
                                                                    family_size, futility)
    i = len(ks) - 1 if first is None else first
    k = int(ks[i])
    p = min(1.0, K * float(2 * sps.t.sf(t_abs[i], k - 1)))
    mde = math.exp((crit[i] + _power_quantile(k - 1)) * se[i]) - 1
    sd = float(math.sqrt(var[i]))
    s = stats.RowStat(k, math.exp(mean[i]), float(lo[i]), float(hi[i]), sd, p, q=min(1.0, p * family_size), mde=mde)
    stop = (SETTLED if settled else FUTILE) if first is not None else (MAX_ROUNDS if n >= max_rounds else None)
    return RowDecision(n, k, settled, stop, stats.decide(s, threshold, True), s.ratio, s.lo, s.hi, p,
                       sd, mde)


def row_done(d: Sequence[float], threshold: float, *, min_rounds: int, max_rounds: int,
             alpha: float = stats.ALPHA, family_size: int = 1, futility: bool = True) -> bool:
    """Whether the row is settled or futile (row_decision(...).stop in settled, futile) without the
    rest (the scheduler asks this after every round)."""
    check_plan(min_rounds, max_rounds, family_size)
    if len(d) < min_rounds:
        return False
    return _looks(np.asarray(d, float), threshold, min_rounds, max_rounds, alpha, family_size, futility)[-2] is not None


def row_settled(d: Sequence[float], threshold: float, *, min_rounds: int, max_rounds: int,
                alpha: float = stats.ALPHA, family_size: int = 1) -> bool:
    """row_decision(...).settled without the rest."""
    return row_done(d, threshold, min_rounds=min_rounds, max_rounds=max_rounds, alpha=alpha,
                    family_size=family_size, futility=False)


def node_done(rows_d: Mapping[Any, Sequence[float]], threshold: float, *, min_rounds: int, max_rounds: int,
              alpha: float = stats.ALPHA, family_size: int = 1, futility: bool = True) -> bool:
    """True when every row (the node's live rows: the caller leaves out not-live ones) is settled or
    futile: the node stops.

    A row with fewer than min_rounds rounds is never done; a mapping without rows is (nothing left
    to measure). Reaching max_rounds is the caller's stop, not a settlement."""
    return all(row_done(d, threshold, min_rounds=min_rounds, max_rounds=max_rounds, alpha=alpha,
                        family_size=family_size, futility=futility)
               for d in rows_d.values())


def node_settled(rows_d: Mapping[Any, Sequence[float]], threshold: float, *, min_rounds: int,
                 max_rounds: int, alpha: float = stats.ALPHA, family_size: int = 1) -> bool:
    """True when every row has settled (node_done without futility)."""
    return node_done(rows_d, threshold, min_rounds=min_rounds, max_rounds=max_rounds, alpha=alpha,
                     family_size=family_size, futility=False)
