"""A plain run's rows over its benchmark processes: the median and a process-level interval per row.

On a GPU the process is the unit of variation: what a benchmark process draws when it starts and
when it allocates (autotune picks, input placement, runtime state) moves a row by several %, while
replays inside one process agree within 0.3% (benchmarks/gpu/RESULTS.md). A plain run measures
every node in K processes (timer.processes); each row here reports

- `latency`: the median over its processes (and `latency_base` the same for the baseline), a value
  a process drew where they read apart (middle);
- `processes`: how many processes measured it;
- `latency_ci` = [lo, hi] ms: a 95% prediction interval for the value another run of the same
  caliber (K processes again) would report: the processes' spread, and a small run-level share
  (RUN_SD) that what a run's processes share keeps out of their spread. A new run's value outside
  it moved beyond what process luck explains; `timing_base.latency_ci` is the baseline's.

With K = 2 or 3 a row's own spread has 1 or 2 degrees of freedom, too few for an interval alone. So
its variance is moderated (Smyth's limma idea, with a fixed prior weight): the row's own log-variance
with K-1 degrees of freedom and its stratum's typical one (rows of the run of the same size class,
implementation and timer: a 1 us row and a 1 ms row differ by an order of magnitude in process
noise, and rows a capture refused, timed directly, scatter far more than graph replays of their
size; where a stratum has too few nodes to speak, the nearest size classes of its timer join it,
and where its timer has too few at any size in a run of several timers, that timer's rows pool as
rows: a pool of few nodes, which marks no row unstable and narrows none below its own spread) with
PRIOR_DF; the interval uses a t quantile on the sum of both. A row whose processes disagree far more
than its stratum's rows do (an F test at UNSTABLE_ALPHA: typically an autotune pick that differs
between processes) keeps its own variance alone, with its own degrees of freedom (a wide, honest
interval), and is marked BENCHMARK_PROCESS_UNSTABLE. With 1 or 2 degrees of freedom that t
interval alone spans orders of magnitude (a cut run's two processes at 3.35 and 7.59 ms read
[0.0039, 6461] ms): it is capped at the span the row's processes drew, widened by that span again
on each side (or by what two processes of its stratum differ by, where that is more). Another
run's median lands among the values processes draw; over the archived repeat runs
(benchmarks/gpu/interval_rules23.py, RESULTS.md, thirty-fifth session) the unstable rows' coverage
went 95.8% -> 95.2%, their width p50 22.7% -> 17.2%, p90 188% -> 165%.

A row measured in one process (a run cut by its time limit, or a row the other processes failed)
has no spread of its own, and cannot tell whether it is one of the rows whose processes draw
different picks. Its interval is a conformal one over its stratum's rows of several processes: how
far each of their processes lands from its row's median (in units of one process' sd; scaled to
another run's median over `processes`), at its LEVEL order statistic, so that the stratum's heavy
tail (the rows a pick moves by 5-70%) is in it. It borrows only from rows of its own timer: rows
timed directly scatter far more than graph replays, so a directly timed row with no such rows
gets no interval rather than a graph row's (benchmarks/gpu/one_process23.py, RESULTS.md,
thirtieth session).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from zlbench.results.events import base_node
from zlbench.results.schema import MARKER_PROCESS_UNSTABLE, did_no_device_work

PRIOR_DF = 4
UNSTABLE_ALPHA = 0.001
LEVEL = 0.95
# Size classes (ms) whose rows share a typical process-to-process variance.
SIZE_EDGES_MS = (0.005, 0.02, 0.1, 1.0)
MIN_STRATUM = 4  # nodes a stratum needs to speak for its rows; fewer: a wider pool
MIN_ROWS = 3  # rows the run's pool needs where it has fewer nodes than that
# Scores a one-process row's conformal interval needs where it borrows from its own node alone: with
# n scores its level is at most n / (n + 1), LEVEL from 19 on. (Strata of MIN_STRATUM nodes with fewer
# take their largest score: 92% and up.)
MIN_SCORES = math.ceil(LEVEL / (1 - LEVEL))
# Var(median of n normal draws) / Var(one draw), small n exactly; large n ~ pi / (2 n).
_MEDIAN_VAR = {1: 1.0, 2: 0.5, 3: 0.4487, 4: 0.3433, 5: 0.2868, 6: 0.2309, 7: 0.2104}
KEY = ("node", "op", "dtype", "shape", "side")
# What one run's processes share and another run's do not (the machine's state over the minutes
# a run takes: clocks, temperature, neighbours): sd of ln(latency) of a row's run-level effect.
# Processes of one run cannot show it; two runs differ by it (H200, benchmarks/gpu/RESULTS.md,
# twenty-first session: 0.07-0.13% on rows >= 100 us whose processes agree within 0.15-0.25%;
# without it a 1 ms row's interval missed the next run's value 1 time in 8). It holds the offset
# all rows of a run share, 0.14% a run over 46 pairs of repeat runs (RUN_OFFSET_SD's measurement),
# and a row's own run-level part beside it. 0.14% was fitted on 128 ordered pairs of archived repeat
# runs (rows >= 1 ms covered another run's value 95.2% of the time, thirty-third session); the 40
# pairs archived since, out of that sample, read 92.2% (rows >= 20 us whose processes agree: 92.1%),
# and 0.2% gives 95.0% (94.5%); over all 188 pairs rows >= 1 ms 95.5% (benchmarks/gpu/interval_rules23.py,
# RESULTS.md, fiftieth session). A narrower interval costs none of the rows' precision: it only
# said more than the runs hold.
RUN_SD = 0.002
# What all rows of one run share against another run of the same caliber: sd of ln of a run's
# offset over its rows (the geometric mean), small rows' launch-bound times moving together among
# them. The overall line of two runs carries it (history compare, `summary A --ab B`). H200, 46
# pairs of repeat plain runs of one zlbench commit over 10 op sets (benchmarks/gpu/overall_plain23.py,
# RESULTS.md, twenty-ninth session): the pairs' median row offsets have rms 0.20% (0.14% a run), up
# to 0.5%. Resampling tests alone, 15 of the 46 overall intervals left out 0; with 0.15% a run (and
# process-unstable rows left out) 5, with 0.2% 3. Measured on an H200, used on every backend: a
# floor, since a machine with noisier runs (a shared CPU) moves more than this.
RUN_OFFSET_SD = 0.002
# Rows below this size (ms) keep the interval they have, however wide: a few-us row's processes
# differ by several % (launch timing, autotune picks) that more processes narrow slowly (issue 23
# accepts such rows wide), and they are in most op files, whose wall more processes would double.
TOP_UP_MIN_MS = 0.02


# The 95% quantile of |y - median| over the n draws of N(0, 1) whose median it is, over the normal
# 1.96: a process' distance from its row's median in units of one process' sd (n = 2: exactly
# 1/sqrt(2); n >= 5 within 1.3% of 1). Simulated, 400000 rows each: benchmarks/gpu/one_process23.py --score-scale.
_SCORE_SCALE = {2: math.sqrt(0.5), 3: 0.997, 4: 0.961}


def narrowest_width() -> float:
    """(hi - lo) / latency of the narrowest interval a row can have: processes that agree exactly
    leave the run-level share of this run and the other's."""
    return 2 * 1.959964 * math.sqrt(2) * RUN_SD


def median_var_factor(n: int) -> float:
    return _MEDIAN_VAR.get(n, math.pi / (2 * n))


def _size_class(ms: float) -> int:
    return sum(ms >= edge for edge in SIZE_EDGES_MS)


class _Spread:
    """One implementation's (latency or latency_base) log-values per row, and its strata."""

    def __init__(self, values: Mapping[tuple, List[float]], timers: Mapping[tuple, str]):
        self.logs = {k: [math.log(v) for v in vs] for k, vs in values.items()}
        self.var = {k: statistics.variance(ys) for k, ys in self.logs.items() if len(ys) >= 2}
        self.stratum = {k: (_size_class(statistics.median(vs)), timers.get(k)) for k, vs in values.items()}
        strata: Dict[tuple, List[tuple]] = defaultdict(list)
        by_timer: Dict[Optional[str], List[tuple]] = defaultdict(list)
        for k in self.var:
            strata[self.stratum[k]].append(k)
            by_timer[self.stratum[k][1]].append(k)
        # A run of a few nodes (one op file) pools all its rows, as rows: nothing wider is there.
        everything = self._pool(list(self.var)) or self._pool(list(self.var), by_nodes=False)
        # A stratum of too few nodes (a node's rows share its processes' draws) speaks for little:
        # its timer's rows of the nearest sizes do (one size class either side, then two, ...: process
        # noise falls by an order of magnitude from 1 us to 1 ms rows, and a 2 us row given the
        # typical variance of 0.3 ms rows reads far too narrow), else the run's.
        self._strata, self._by_timer = strata, by_timer
        # A timer of too few nodes at any size (a refused capture's rows, timed directly: host-bound,
        # their processes 2-36% apart) pools its own rows, not the graph rows' 0.1-1% (a node timed
        # directly alone in a run of graph rows read intervals of 1.5-3% that the next run's value
        # missed by 3-13%; RESULTS.md, forty-fifth session).
        # Such a pool is of few nodes (a node's rows share its processes' draws): it cannot say that
        # another node's row reads apart from its peers, and marks none unstable; it lends a row its
        # width, never narrows one below the row's own spread (`thin`).
        # A run of one timer keeps the run's pool (the same rows), which may mark its rows.
        self.pooled, self.thin = {}, set()
        for cls in strata:
            pool = self._nearest_pool(cls)
            if pool is None and len(by_timer) > 1 and (pool := self._pool(by_timer[cls[1]], by_nodes=False)):
                self.thin.add(cls)
            self.pooled[cls] = pool or everything
        self.everything = everything
        self._scores: Dict[tuple, List[float]] = {}

    def _nearest_pool(self, cls: tuple) -> Optional[Tuple[float, int]]:
        """The pool of this stratum's rows, else of its timer's rows within one size class of it,
        two, ..., all sizes: the first that has MIN_STRATUM nodes."""
        for reach in range(len(SIZE_EDGES_MS) + 1):
            if (pool := self._pool(self._near(*cls, reach))):
                return pool
        return None

    def _near(self, size: int, timer: Optional[str], reach: int) -> List[tuple]:
        """The rows of several processes of this timer within `reach` size classes of `size`."""
        return [k for (s, t), ks in self._strata.items() if t == timer and abs(s - size) <= reach for k in ks]

    def _one_process_scores(self, key: tuple) -> Optional[List[float]]:
        """The conformity scores of a one-process row, sorted: over the rows of several processes in
        its stratum (MIN_STRATUM nodes), else of its timer's within one size class of it, two, ...
        (MIN_STRATUM nodes, as _nearest_pool), else of its own node and timer (a cut run of one op
        file: another node's few rows would speak for their node's draws only; MIN_SCORES processes,
        as one node's draws are few), each process' |log distance| from its row's median in units of
        one process' sd (_SCORE_SCALE). Against the row's own median, a process a pick moved gives
        one large score, as one such process among a new row's would; against the median of the
        others, it would move its row's other scores too. None: no such pool."""
        size, timer = self.stratum[key]

        def enough(keys: Sequence[tuple], nodes: int, scores: int) -> bool:
            return len({k[0] for k in keys}) >= nodes and sum(len(self.logs[k]) for k in keys) >= scores

        def pools():  # (cache key, rows, nodes needed, scores needed), nearest first; made as asked
            for reach in range(len(SIZE_EDGES_MS) + 1):
                yield (size, timer, reach), self._near(size, timer, reach), MIN_STRATUM, 0
            yield (size, timer, key[0]), [k for k in self._by_timer.get(timer, []) if k[0] == key[0]], 1, MIN_SCORES

        cache, pool = next(((name, keys) for name, keys, nodes, scores in pools() if enough(keys, nodes, scores)),
                           (None, None))
        if pool is None:
            return None
        if cache not in self._scores:
            self._scores[cache] = sorted(abs(y - statistics.median(ys)) / _SCORE_SCALE.get(len(ys), 1.0)
                                         for ys in (self.logs[k] for k in pool) for y in ys)
        return self._scores[cache]

    def _one_process_interval(self, key: tuple, processes: int) -> Optional[List[float]]:
        """A one-process row's conformal interval (see the module's docstring)."""
        scores = self._one_process_scores(key)
        if not scores:
            return None
        # The ceil((n + 1) LEVEL)-th smallest of n scores: a LEVEL prediction interval for a new
        # row exchangeable with them (the largest where n < 1 / (1 - LEVEL) - 1).
        q = scores[min(len(scores), math.ceil((len(scores) + 1) * LEVEL)) - 1]
        from scipy import stats

        runs_part = 2 * (stats.norm.ppf(0.5 + LEVEL / 2) * RUN_SD) ** 2
        half = math.sqrt(q ** 2 * (1 + median_var_factor(max(processes, 1))) + runs_part)
        center = self.logs[key][0]
        return [math.exp(center - half), math.exp(center + half)]

    def _pool(self, keys: Sequence[tuple], by_nodes: bool = True) -> Optional[Tuple[float, int]]:
        """(typical variance, degrees of freedom) of these rows: the median of their variances over
        the median of chi2_d / d, robust to the few rows whose processes disagree by a pick. by_nodes:
        it needs MIN_STRATUM nodes and its degrees of freedom count nodes (a node's rows share its
        processes' draws); else MIN_ROWS rows, each row's own degrees of freedom counted."""
        nodes = len({k[0] for k in keys})
        if (nodes if by_nodes else len(keys)) < (MIN_STRATUM if by_nodes else MIN_ROWS):
            return None
        from scipy import stats  # here: 0.5 s of import a dry run or a submitted Slurm run never needs

        dfs = [len(self.logs[k]) - 1 for k in keys]
        d = statistics.median_low(dfs)
        typical = statistics.median(self.var[k] for k in keys) / (stats.chi2.median(d) / d)
        return typical, (d * nodes if by_nodes else sum(dfs))

    def interval(self, key: tuple, processes: int) -> Tuple[Optional[List[float]], bool]:
        """(the 95% prediction interval for another run's median over `processes` processes (or
        as many as this row has),
        whether the row's processes disagree beyond its stratum's)."""
        from scipy import stats

        ys = self.logs[key]
        n = len(ys)
        pooled = self.pooled.get(self.stratum[key], self.everything)
        unstable = False
        if n >= 2 and pooled:
            typical, pool_df = pooled
            own, d = self.var[key], n - 1
            thin = self.stratum[key] in self.thin
            unstable = not thin and typical > 0 and own / typical > stats.f.ppf(1 - UNSTABLE_ALPHA, d, pool_df)
            var, df = (own, d) if unstable else ((PRIOR_DF * typical + d * own) / (PRIOR_DF + d), PRIOR_DF + d)
            if thin:
                var = max(var, own)
        elif n >= 2:
            var, df = self.var[key], n - 1
        else:
            return self._one_process_interval(key, processes), False
        center = middle(ys, unstable)  # the row's value (_row): a median of logs is the log of one
        # Another run's median is over as many processes as this row's (a node that got more
        # processes here, for disagreeing ones, gets them there too), at least the planned ones.
        other = max(n, processes)
        processes_part = stats.t.ppf(0.5 + LEVEL / 2, df) ** 2 * var * (median_var_factor(n) + median_var_factor(other))
        runs_part = 2 * (stats.norm.ppf(0.5 + LEVEL / 2) * RUN_SD) ** 2  # this run's effect and the other's
        half = math.sqrt(processes_part + runs_part)
        lo, hi = center - half, center + half
        if unstable:  # no further than the span its processes drew, widened by that span again
            typical, pool_df = pooled
            margin = max(max(ys) - min(ys),  # or by what two of its stratum's processes differ by
                         math.sqrt(stats.t.ppf(0.5 + LEVEL / 2, pool_df) ** 2 * typical * 2 + runs_part))
            lo, hi = max(lo, min(ys) - margin), min(hi, max(ys) + margin)
            if _drops_latest(n, unstable):  # it reads one of the middle two (middle), off the
                # centre of what its processes drew, and another run may read the other pick: the
                # span is in (an odd count's median has its t interval around it, as before)
                lo, hi = min(lo, min(ys)), max(hi, max(ys))
        return [math.exp(lo), math.exp(hi)], unstable


def middle(values: Sequence[float], apart: bool = False) -> float:
    """A row's value over its processes, `values` (latencies, or their logs) in the order the
    processes ran: their median. Where the processes read apart (BENCHMARK_PROCESS_UNSTABLE: an
    autotune pick drawn per process) and their count is even, the mean of the two middle values
    can be one that no process drew, between two clusters (set J's max_pool2d [64,256,14,14], 3
    planned processes and 1 more at 19.1, 12.2, 12.3, 19.3 us, read 15.7 us and a speedup none of
    its kernels gives; RESULTS.md, thirty-ninth session): there it is the median of all but the
    latest process, an odd count, so one of the two middle values (for 3 planned and 1 more: the
    planned processes' median; for two: the first, not their mean)."""
    return statistics.median(values[:-1] if _drops_latest(len(values), apart) else values)


def _drops_latest(n: int, apart: bool) -> bool:
    """Whether middle() leaves the latest process out (the median of an odd count is one of the
    two middle values of the even one; of two, the first: a value one of them drew, where their
    mean is halfway between two picks)."""
    return apart and n >= 2 and n % 2 == 0


def relative_width(row: Mapping) -> Optional[float]:
    """(hi - lo) / latency of a row's process-level interval; None where it has none."""
    ci, latency = row.get("latency_ci"), row.get("latency")
    return (ci[1] - ci[0]) / latency if ci and latency else None


# How a row's reason says that its op's own processes disagree (its baseline's: "torch processes read";
# "baseline processes read" in runs made before 2026-12-05).
OP_READ_APART = "processes read "


def op_read_apart(row: Mapping) -> bool:
    """Whether the row's op, not only its baseline, is marked for processes that disagree (a marked
    row whose reason names no baseline's processes counts as the op's)."""
    if MARKER_PROCESS_UNSTABLE not in (row.get("markers") or []):
        return False
    parts = (row.get("marker_reason") or "").split("; ")
    return any(part.startswith(OP_READ_APART) for part in parts) or not any(f" {OP_READ_APART}" in part for part in parts)


def wide_rows(rows: Sequence[Mapping], target_width: float, min_ms: float = TOP_UP_MIN_MS) -> List[Mapping]:
    """The measured rows of at least `min_ms` whose interval is wider than `target_width`
    (aggregated rows, as aggregate() makes them), widest first: where more processes narrow what a
    run reports (timer.max_processes)."""
    wide = [r for r in rows if r.get("status") == "ok" and relative_width(r) is not None
            and r["latency"] >= min_ms and relative_width(r) > target_width]
    return sorted(wide, key=relative_width, reverse=True)


def wide_nodes(rows: Sequence[Mapping], target_width: float, min_ms: float = TOP_UP_MIN_MS) -> Dict[str, Mapping]:
    """test node (its base id: a process runs all its cases) -> its widest row, for the nodes with
    a wide row (wide_rows)."""
    out: Dict[str, Mapping] = {}
    for r in wide_rows(rows, target_width, min_ms):
        out.setdefault(base_node(r.get("node") or ""), r)
    return out


def row_key(row: Mapping) -> tuple:
    return tuple(row.get(k) for k in KEY)


def _timers(measured: Mapping[tuple, List[dict]], field: str) -> Dict[tuple, str]:
    """The timer each row's processes used (the run's timer, or the direct fallback where a capture
    was refused); rows whose processes were timed differently form a stratum of their own."""
    return {k: "+".join(sorted({str(r.get(field)) for r in rs})) for k, rs in measured.items()}


def was_measured(row: Mapping) -> bool:
    """Whether a process' row holds a latency (not a status row, nor one the node's failure left)."""
    return row.get("status") == "ok" and bool(row.get("latency")) and math.isfinite(row["latency"])


def aggregate(rows: Sequence[dict], processes: int) -> List[dict]:
    """One row per (node, op, dtype, shape, side) from the rows of every process of a plain run
    (each a `round`), in the order rows first appear. Status rows and rows no process measured are
    kept as they are (one per key: a failure is never averaged away, nor repeated K times)."""
    measured: Dict[tuple, List[dict]] = defaultdict(list)
    order: List[tuple] = []
    others: Dict[tuple, dict] = {}
    for r in rows:
        k = row_key(r)
        if k not in measured and k not in others:
            order.append(k)
        if was_measured(r):
            measured[k].append(r)
        else:
            others.setdefault(k, r)
    for rs in measured.values():  # in the order the processes ran (middle)
        rs.sort(key=lambda r: r.get("round") or 0)
    # A row that timed an empty replay (no device work) gets no interval: nanoseconds of replay
    # noise say nothing of processes, and its rows stay out of the strata.
    spread = _Spread({k: [r["latency"] for r in rs] for k, rs in measured.items()
                      if not any(did_no_device_work(r) for r in rs)}, _timers(measured, "timer_used"))
    # The baseline's values and timers are those of the processes that timed it (a plain run's more
    # processes timed the alternative only before 2026-12-06: their timer_used_base is null).
    with_base = {k: [r for r in rs if r.get("latency_base") and math.isfinite(r["latency_base"])]
                 for k, rs in measured.items()}
    base = _Spread({k: [r["latency_base"] for r in rs] for k, rs in with_base.items()
                    if rs and not any(did_no_device_work(r, "latency_base") for r in rs)},
                   _timers(with_base, "timer_used_base"))
    out = []
    for k in order:
        if k in measured:
            out.append(_row(measured[k], k, spread, base, processes))
        else:
            out.append({**others[k], "round": None, "processes": 0, "latency_ci": None})
    return out


def _picked(values: Sequence[float], value: float) -> str:
    """What a reason adds where middle() took one of the two middle values (an even count), so that
    the row's value is not mistaken for the median of the values listed."""
    if len(values) % 2 or value == statistics.median(values):
        return ""
    return f" (an even count: the row reads {value:.4g}, the middle one nearer the earlier processes' median)"


def _row(rs: List[dict], key: tuple, spread: _Spread, base: _Spread, processes: int) -> dict:
    latencies = sorted(r["latency"] for r in rs)
    ci, unstable = spread.interval(key, processes) if key in spread.logs else (None, False)
    median = middle([r["latency"] for r in rs], unstable)  # rs: in the order the processes ran

    def nearest(field: str = "latency") -> dict:
        """The process nearest the median among those that measured `field` (a plain run's more
        processes timed the alternative only before 2026-12-06: no baseline, no throughputs)."""
        having = [r for r in rs if r.get(field)] or rs
        return min(having, key=lambda r: (abs(math.log(r["latency"] / median)), r.get("round") or 0))

    rep = nearest()
    row = {**rep, "round": None, "unit": None, "latency": median, "processes": len(rs), "latency_ci": ci}
    reasons = []
    if unstable:
        reasons.append(f"{OP_READ_APART}{', '.join(f'{v:.4g}' for v in latencies)} ms{_picked(latencies, median)}")
    for field in ("gbps", "tflops"):  # throughputs scale inversely with the latency
        src = nearest(field)
        if src.get(field):
            row[field] = src[field] * src["latency"] / median
    bases = [r["latency_base"] for r in rs if r.get("latency_base")]
    if bases:
        ci_base, unstable_base = base.interval(key, processes) if key in base.logs else (None, False)
        row["latency_base"] = middle(bases, unstable_base)
        bases.sort()
        src = nearest("latency_base")
        row["timer_used_base"] = src.get("timer_used_base")
        row["timing_base"] = {**(src.get("timing_base") or {}), "latency_ci": ci_base, "processes": len(bases)}
        if src.get("gbps_base"):
            row["gbps_base"] = src["gbps_base"] * src["latency_base"] / row["latency_base"]
        row["speedup"] = row["latency_base"] / median
        if unstable_base:
            reasons.append(f"torch processes read {', '.join(f'{v:.4g}' for v in bases)} ms"
                           f"{_picked(bases, row['latency_base'])}")
    markers = sorted({m for r in rs for m in (r.get("markers") or [])})
    if reasons:
        markers.append(MARKER_PROCESS_UNSTABLE)
        row["marker_reason"] = "; ".join(filter(None, [rep.get("marker_reason"), *reasons]))
    row["markers"] = markers
    return row
