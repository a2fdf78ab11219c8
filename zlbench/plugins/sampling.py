"""How many samples a timing call takes, and what its samples say (inside the benchmark process).

- StopRule: `fixed` (the timer's own budget, one call, as before) or `adaptive` (as NVIDIA's nvbench
  does: keep taking batches of samples until the 95% confidence interval of the statistic the
  corpus asked for is within +-target_rel of it, after min_samples; stop at max_samples or
  max_time_ms regardless; the row says which).
- ClockLog: each batch is bracketed by the device's clock reader (plugins/clocks.py); a batch whose
  SM clock was below throttle_threshold x the device's maximum is discarded and retaken after a
  pause, at most throttle_retries times per timing call; then it is kept and the row is marked.
- bimodal(): whether a call's samples fall into two clusters, and where.

Pure numpy/statistics: no torch, no device. Defaults here equal conf/timer/*.yaml (a test checks)."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

# -- defaults: the same values as conf/timer/*.yaml and config.TimerConf (tests/test_adaptive_timing.py)
DEFAULTS: Dict[str, Any] = {
    "stop": "fixed",
    "target_rel": 0.005,
    "min_samples": 10,
    "max_samples": 1000,
    "max_time_ms": 1000.0,
    "throttle_threshold": 0.75,
    "throttle_retries": 3,
    "throttle_pause_ms": 20.0,
    "clock_reader": "none",
}
STOP_MODES = ("adaptive", "fixed")

# Why a timing call stopped (rows carry it as stop_reason).
STOP_TARGET = "target"          # the CI half-width reached target_rel
STOP_MAX_SAMPLES = "max_samples"
STOP_MAX_TIME = "max_time"
STOP_UNREACHABLE = "unreachable"  # at the rate so far the target would take longer than max_time_ms
STOP_FIXED = "fixed"            # timer.stop=fixed: the timer's own budget
STOP_NO_SAMPLES = "no_samples"  # the corpus' timer gives no per-sample times: timed as with fixed
STOP_REASONS = (STOP_TARGET, STOP_UNREACHABLE, STOP_MAX_SAMPLES, STOP_MAX_TIME, STOP_FIXED, STOP_NO_SAMPLES)
# Worst first: a row timed in several parts (timer.repeat) reports its worst reason.
_STOP_ORDER = {r: i for i, r in enumerate((STOP_MAX_TIME, STOP_UNREACHABLE, STOP_MAX_SAMPLES, STOP_NO_SAMPLES,
                                           STOP_FIXED, STOP_TARGET))}

Z95 = 1.959963984540054


# -- statistics ------------------------------------------------------------------------------------
def quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (Triton's and numpy's default)."""
    point = q * (len(ordered) - 1)
    lo, hi = math.floor(point), math.ceil(point)
    t = point - lo
    return (1 - t) * ordered[lo] + t * ordered[hi]


def summarize(samples: Sequence[float], quantiles, return_mode: str):
    """What triton.testing.do_bench returns for these samples (quantiles, or return_mode)."""
    if quantiles is not None:
        ordered = sorted(samples)
        out = [quantile(ordered, q) for q in quantiles]
        return out[0] if len(out) == 1 else out
    if return_mode == "all":
        return list(samples)
    return {"min": min, "max": max, "median": statistics.median}.get(return_mode, statistics.mean)(samples)


def median_ci(samples: Sequence[float]) -> Tuple[float, float]:
    """Distribution-free 95% confidence interval of the median: the order statistics x(k) and
    x(n+1-k) with the largest k such that P(Binomial(n, 1/2) < k) <= 2.5% (e.g. Conover, Practical
    Nonparametric Statistics, 3.6); above 1000 samples its normal approximation,
    k = floor((n - 1.96 sqrt(n)) / 2). Below n = 6 no such k exists: the whole range."""
    ordered = sorted(samples)
    n = len(ordered)
    if n > 1000:
        k = int((n - Z95 * math.sqrt(n)) / 2)
    else:
        k, cdf, term = 0, 0.0, 0.5 ** n  # cdf = P(B <= k - 1); term = P(B = k)
        while k < n // 2 and cdf + term <= 0.025:
            cdf += term
            term *= (n - k) / (k + 1)
            k += 1
    k = max(k, 1)
    return ordered[k - 1], ordered[n - k]


def ci_rel(samples: Sequence[float], statistic: str = "median") -> float:
    """Relative half-width of the 95% CI of the statistic: order statistics for the median (and
    for min/max/quantiles, which the median stands for), Student's t for the mean."""
    n = len(samples)
    if n < 2:
        return math.inf
    if statistic == "mean":
        mean = statistics.fmean(samples)
        if mean <= 0:
            return math.inf
        from scipy.stats import t as student_t

        return float(student_t.ppf(0.975, n - 1)) * statistics.stdev(samples) / math.sqrt(n) / mean
    lo, hi = median_ci(samples)
    center = statistics.median(samples)
    return (hi - lo) / 2 / center if center > 0 else math.inf


def spread_rel(samples: Sequence[float]) -> Optional[float]:
    """Interquartile range over the median: how wide the samples themselves are."""
    if len(samples) < 2:
        return None
    ordered = sorted(samples)
    center = statistics.median(ordered)
    return (quantile(ordered, 0.75) - quantile(ordered, 0.25)) / center if center > 0 else None


# -- bimodality ------------------------------------------------------------------------------------
BIMODAL_MIN_SAMPLES = 20   # below this a density estimate cannot resolve two modes
BIMODAL_MIN_CLUSTER = 5    # samples in each cluster, and
BIMODAL_MIN_SHARE = 0.20   # share of the samples in each cluster (a smaller one is a tail)
BIMODAL_MAX_VALLEY = 0.5   # density between the modes, relative to the lower mode's
BIMODAL_MIN_SEP = 0.02     # the modes' medians differ by at least 2% (ab.threshold's default)
_BINS = 512


def _density(x: np.ndarray) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """A Gaussian kernel density of sorted x with Silverman's rule-of-thumb bandwidth
    (0.9 min(sd, IQR/1.349) n^-1/5), binned on 512 points (scipy.stats.gaussian_kde's estimate up
    to the binning; a test compares them): fast enough for every timing call."""
    n = len(x)
    sd = float(np.std(x, ddof=1))
    iqr = float(np.subtract(*np.percentile(x, [75, 25])))
    scale = min(sd, iqr / 1.349) if iqr > 0 else sd
    h = 0.9 * scale * n ** -0.2
    if not h > 0:
        return None
    lo, hi = x[0] - 3 * h, x[-1] + 3 * h
    counts, edges = np.histogram(x, bins=_BINS, range=(lo, hi))
    width = (hi - lo) / _BINS
    half = int(math.ceil(4 * h / width))
    offsets = np.arange(-half, half + 1) * width
    kernel = np.exp(-0.5 * (offsets / h) ** 2)
    density = np.convolve(counts, kernel / (kernel.sum() * n * width), mode="same")
    return (edges[:-1] + edges[1:]) / 2, density


def bimodal(samples: Sequence[float]) -> Optional[Dict[str, float]]:
    """Two clusters in the samples, or None.

    On log times (so the test does not depend on the row's scale): a kernel density estimate
    (Silverman's bandwidth, which oversmooths rather than invents modes); of its adjacent modes,
    the pair with the deepest valley counts when the density at the valley is below half of the
    lower mode's, each side of the valley holds at least 5 samples and 20% of them (a smaller
    cluster is a tail: it cannot move the median), and the sides' medians differ by at least 2%
    (closer modes are below what an A/B calls a change). Simulated, 300 draws each
    (tests/test_adaptive_timing.py repeats a smaller version): normal, lognormal, Student t(3),
    gamma, exponential-tailed and uniform samples are called bimodal in at most 2% of draws at
    n = 20-30 and none at n >= 100; modes 10% apart with 30% (50%) in the upper one are found in
    67% (88%) of draws at n = 20, 91% (100%) at n = 30, 99% from n = 100; modes 3.3% apart (30%
    upper, 0.5% noise) in 63% at n = 30, 97% from n = 100."""
    x = np.asarray([s for s in samples if s and s > 0], dtype=float)
    if len(x) < BIMODAL_MIN_SAMPLES:
        return None
    x = np.sort(np.log(x))
    if x[-1] - x[0] < math.log1p(BIMODAL_MIN_SEP):
        return None
    est = _density(x)
    if est is None:
        return None
    grid, d = est
    peaks = np.flatnonzero((d[1:-1] > d[:-2]) & (d[1:-1] >= d[2:])) + 1
    need = max(BIMODAL_MIN_CLUSTER, BIMODAL_MIN_SHARE * len(x))
    best = None
    for a, b in zip(peaks, peaks[1:]):
        valley = a + int(np.argmin(d[a:b + 1]))
        depth = d[valley] / min(d[a], d[b])
        cut = int(np.searchsorted(x, grid[valley]))
        lo, hi = x[:cut], x[cut:]
        if depth >= BIMODAL_MAX_VALLEY or len(lo) < need or len(hi) < need:
            continue
        if np.median(hi) - np.median(lo) < math.log1p(BIMODAL_MIN_SEP):
            continue
        if best is None or depth < best[0]:
            best = (depth, lo, hi)
    if best is None:
        return None
    _, lo, hi = best
    return {"mode_lo_ms": float(np.exp(np.median(lo))), "mode_hi_ms": float(np.exp(np.median(hi))),
            "mode_hi_share": round(len(hi) / len(x), 4)}


# -- the stopping rule -----------------------------------------------------------------------------
def setting(timer: Mapping[str, Any], key: str) -> Any:
    """A timer setting of the plugin config, or its default when unset."""
    return DEFAULTS[key] if timer.get(key) is None else timer[key]


@dataclass(frozen=True)
class StopRule:
    mode: str = DEFAULTS["stop"]
    target_rel: float = DEFAULTS["target_rel"]
    min_samples: int = DEFAULTS["min_samples"]
    max_samples: int = DEFAULTS["max_samples"]
    max_time_ms: float = DEFAULTS["max_time_ms"]

    @classmethod
    def from_timer(cls, timer: Mapping[str, Any]) -> "StopRule":
        get = lambda k: setting(timer, k)  # noqa: E731
        mode = str(get("stop"))
        if mode not in STOP_MODES:
            raise ValueError(f"timer.stop={mode}: valid are {', '.join(STOP_MODES)}")
        return cls(mode, float(get("target_rel")), max(1, int(get("min_samples"))),
                   max(1, int(get("max_samples"))), float(get("max_time_ms")))

    @property
    def fixed(self) -> bool:
        return self.mode == "fixed"

    def check(self, samples: Sequence[float], elapsed_ms: float, statistic: str,
              paced: Optional[int] = None) -> Optional[str]:
        """Why to stop now, or None to take another batch. elapsed_ms: sampling time so far, in
        which `paced` of the samples were taken (default all; sample_until leaves the first batch
        out of both, since it holds the corpus' warm-up: FlagGems' direct timer warms up for 1 s).

        Past min_samples, a CI that would need more than the time left is not chased: a CI
        half-width shrinks as 1/sqrt(n), so reaching the target takes n (ci / target)^2 samples in
        all, at the rate seen so far (a row on a contended host: 30 ms instead of 1 s)."""
        n = len(samples)
        paced = n if paced is None else paced
        ci = ci_rel(samples, statistic) if n >= self.min_samples else math.inf
        if ci <= self.target_rel:
            return STOP_TARGET
        if n >= self.max_samples:
            return STOP_MAX_SAMPLES
        if elapsed_ms >= self.max_time_ms:
            return STOP_MAX_TIME
        if math.isfinite(ci) and elapsed_ms > 0 and paced > 0:
            needed = min(n * (ci / self.target_rel) ** 2, self.max_samples)
            if (needed - n) * elapsed_ms / paced > self.max_time_ms - elapsed_ms:
                return STOP_UNREACHABLE
        return None


# -- clocks around each batch ----------------------------------------------------------------------
@dataclass(frozen=True)
class ClockPolicy:
    threshold: float = DEFAULTS["throttle_threshold"]
    retries: int = DEFAULTS["throttle_retries"]
    pause_ms: float = DEFAULTS["throttle_pause_ms"]

    @classmethod
    def from_timer(cls, timer: Mapping[str, Any]) -> "ClockPolicy":
        get = lambda k: setting(timer, k)  # noqa: E731
        return cls(float(get("throttle_threshold")), max(0, int(get("throttle_retries"))),
                   float(get("throttle_pause_ms")))


class ClockLog:
    """One timing call's batches under a clock reader (None: no reading, nothing screened). A reader
    that raises is dropped (on_error is told why) and the call goes on unscreened."""

    def __init__(self, reader, policy: ClockPolicy, sleep: Callable[[float], None] = time.sleep,
                 on_error: Callable[[str], None] = lambda why: None):
        self.reader, self.policy, self.sleep, self.on_error = reader, policy, sleep, on_error
        self.had_reader = reader is not None
        self.discarded = 0
        self.retried = 0
        self.kept: List[Tuple[Optional[float], Optional[float]]] = []  # (sm_mhz, mem_mhz) of kept batches
        self.throttled_kept: Optional[str] = None

    def _floor(self) -> Optional[float]:
        top = getattr(self.reader, "max_sm_mhz", None)
        return self.policy.threshold * top if top and self.policy.threshold > 0 else None

    def _failed(self, e: Exception) -> None:
        self.reader = None
        self.on_error(f"clock reader failed ({type(e).__name__}: {e}); no clock reading from here on")

    def _during(self) -> None:
        if self.reader is not None:
            try:
                self.reader.during()
            except Exception as e:
                self._failed(e)

    def take(self, batch: Callable[[Callable[[], None]], Any], count: Callable[[Any], int] = len):
        """Run batch(during) bracketed by the reader; a batch whose SM clock was below the floor is
        discarded (count(result) samples) and retaken after a pause, at most `retries` times per
        timing call; after that it is kept and said to be throttled."""
        while True:
            if self.reader is None:
                return batch(_nothing)
            try:
                self.reader.begin()
            except Exception as e:
                self._failed(e)
                continue
            result = batch(self._during)
            if self.reader is None:
                return result
            try:
                sm, mem = self.reader.end()
            except Exception as e:
                self._failed(e)
                return result
            floor = self._floor()
            if sm is None or floor is None or sm >= floor:
                self.kept.append((sm, mem))
                return result
            if self.retried >= self.policy.retries:
                self.kept.append((sm, mem))
                self.throttled_kept = (f"SM clock {sm:.0f} MHz below {self.policy.threshold:g} x "
                                       f"{self.reader.max_sm_mhz:.0f} MHz after {self.retried} retries")
                return result
            self.discarded += count(result)
            self.retried += 1
            self.sleep(self.policy.pause_ms * self.retried / 1000)

    def facts(self) -> Dict[str, Any]:
        sms = [s for s, _ in self.kept if s is not None]
        mems = [m for _, m in self.kept if m is not None]
        return {"samples_discarded": self.discarded if self.had_reader else None,
                "sm_mhz": round(min(sms), 1) if sms else None,
                "mem_mhz": round(min(mems), 1) if mems else None}


def _nothing() -> None:
    return None


# -- one timing call -------------------------------------------------------------------------------
@dataclass
class Sampling:
    """What one timing call measured: its samples (None where the timer gives only its summary),
    why it stopped, and what the clock log saw."""

    stop_reason: str
    samples: Optional[List[float]] = None
    statistic: str = "median"
    clocks: Dict[str, Any] = field(default_factory=dict)
    throttled: Optional[str] = None
    # timer.placements: how many memory placements of the inputs were timed, the spread of their
    # values ((max - min) / median), and why there was one only where more were asked for.
    placements: Optional[int] = None
    placement_spread_rel: Optional[float] = None
    placement_note: Optional[str] = None

    def facts(self) -> Dict[str, Any]:
        s = self.samples
        out: Dict[str, Any] = {
            "stop_reason": self.stop_reason,
            "samples": len(s) if s is not None else None,
            "ci_rel": _round(ci_rel(s, self.statistic)) if s else None,
            "spread_rel": _round(spread_rel(s)) if s else None,
            "min_ms": min(s) if s else None,
            "samples_discarded": None, "sm_mhz": None, "mem_mhz": None,
            "mode_lo_ms": None, "mode_hi_ms": None, "mode_hi_share": None,
            "placements": self.placements, "placement_spread_rel": _round(self.placement_spread_rel),
            "placement_note": self.placement_note,
        }
        out.update(self.clocks)
        if s:
            out.update(bimodal(s) or {})
        return out


def _round(x: Optional[float]) -> Optional[float]:
    return None if x is None or not math.isfinite(x) else float(f"{x:.4g}")


def sample_until(take: Callable[[bool, Callable[[], None]], List[float]], rule: StopRule, log: ClockLog,
                 statistic: str, clock: Callable[[], float] = time.perf_counter) -> Sampling:
    """Adaptive sampling: take(first, during) returns one batch's samples (ms); batches are taken
    through the clock log until the rule says stop. The time budget and the pace start after the
    first batch, which holds the corpus' warm-up."""
    samples: List[float] = list(log.take(lambda during: take(True, during)))
    start, first_batch = clock(), len(samples)
    while True:
        reason = rule.check(samples, (clock() - start) * 1000, statistic, paced=len(samples) - first_batch)
        if reason:
            return Sampling(reason, samples, statistic, log.facts(), log.throttled_kept)
        samples.extend(log.take(lambda during: take(False, during)))


def merge(parts: List[Sampling]) -> Sampling:
    """Several timings of one call (timer.repeat): pooled samples, the worst stop reason, the
    clock logs summed."""
    if len(parts) == 1:
        return parts[0]
    reason = min((p.stop_reason for p in parts), key=lambda r: _STOP_ORDER.get(r, 0))
    pooled = [x for p in parts for x in p.samples] if all(p.samples for p in parts) else None
    clocks: Dict[str, Any] = {}
    for key, pick in (("samples_discarded", sum), ("sm_mhz", min), ("mem_mhz", min)):
        values = [p.clocks.get(key) for p in parts if p.clocks.get(key) is not None]
        clocks[key] = pick(values) if values else None
    throttled = next((p.throttled for p in parts if p.throttled), None)
    return Sampling(reason, pooled, parts[0].statistic, clocks, throttled)


def statistic_of(return_mode: str, quantiles) -> str:
    """The statistic whose precision decides the stop: the mean for return_mode=mean, else the
    median (min, max and quantiles are order statistics the median's interval stands for)."""
    return "mean" if quantiles is None and return_mode == "mean" else "median"
