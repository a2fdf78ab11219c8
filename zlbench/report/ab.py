"""A/B report: pair two sides, per-row paired statistics, liveness, overall verdict; Markdown for a
pull request, CSV and JSON of the same, and a forest plot."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections import Counter
from pathlib import Path
from typing import Collection, Dict, List, Mapping, Optional, Sequence

from tabulate import tabulate

from zlbench.results import columns
from zlbench.results.events import base_node
from zlbench.results.schema import short_dtype
from zlbench.results.schema import MARKER_FALLBACK
from zlbench.ab.pairing import name_shared_keys, op_with_test, pair
from zlbench.ab import stats
from zlbench.ab.intervals import interval_stat, interval_verdict
from zlbench.ab.kernels import compare_kernels
from zlbench.ab.sequential import FUTILE, SETTLED

# A row with fewer rounds than planned because runs of its node failed (crashed, timed out) in
# some rounds of a run that was not cut: ops_status.csv says which and why.
FAILED_ROUNDS = "failed rounds"

# ab.csv's columns (the registry's, zlbench/results/columns.py; ab.json's rows carry AB_JSON's).
AB_FIELDS = list(columns.names(columns.AB_COLUMNS, columns.AB_CSV))


def side_label(var: str, value, side: str) -> str:
    """How ab.md names a side: its value and, apart, its name (an A/A's sides off and on both carry
    one value: `X=1 (off)` read as a contradiction)."""
    return f"{var}={value} (side {side})"


def liveness_of(op: str, artifacts_a: Mapping[str, Sequence[str]],
                artifacts_b: Mapping[str, Sequence[str]]) -> Optional[bool]:
    """The op's kernels on each side compared (zlbench/ab/kernels.py): live, not live, or unknown."""
    return compare_kernels(artifacts_a.get(op), artifacts_b.get(op))


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _pct(x: Optional[float]) -> Optional[float]:
    return None if x is None else round((x - 1.0) * 100, 3)


LIVE_AA = "A/A"  # an A/A row's liveness column: both sides ran one value


def compare(rows_a: Sequence[dict], rows_b: Sequence[dict], label_a: str, label_b: str,
            threshold: float = 0.02, artifacts_a: Optional[Mapping[str, str]] = None,
            artifacts_b: Optional[Mapping[str, str]] = None, aa: bool = False,
            caveats: Sequence[str] = (), stops: Optional[Mapping[str, Mapping]] = None,
            rounds: Optional[Mapping[str, int]] = None, cut: Collection[str] = (),
            fixed_rounds: Optional[int] = None, failed: Collection[str] = (), round_period: int = 1,
            run_offset_sd: float = 0.0) -> Dict:
    """Pair, test and judge: {"summary", "rows", "unpaired", "markdown"} (write() puts it on disk).

    stops: test node -> the scheduler's `stopped` event (why it ran no more rounds: not live,
    settled); rounds: {"min", "max"} planned per row of a sequential run (node by node), or
    fixed_rounds: the rounds every row gets (round by round); cut: test nodes the run did not finish;
    failed: test nodes that failed (crashed, timed out) in some round; round_period: how many
    consecutive rounds shared their side processes (ab.respawn_every; 0: the whole run);
    run_offset_sd: where A and B are two runs, not the sides of one (`summary A --ab B`), the sd of
    the offset each run's rows share (process_stats.RUN_OFFSET_SD), added to the overall interval."""
    pairing = pair(rows_a, rows_b, "latency")
    one_sided = _one_sided(rows_a, rows_b, stops or {}, pairing.key)
    unpaired = [(k, why) for k, why in pairing.unpaired if k not in one_sided]
    row_stats, live = _judge(pairing, threshold, artifacts_a or {}, artifacts_b or {}, aa, rounds)
    table = [_table_row(p, s, lv) for p, s, lv in zip(pairing.rows, row_stats, live)]
    if aa:  # identical kernels by construction: liveness is not checked, not "unknown" row by row
        for t in table:
            t["live"] = LIVE_AA
    for p, t, s in zip(pairing.rows, table, row_stats):
        t["stop"] = stop_reason(p.node, t["rounds"], stops or {}, rounds, cut, s.stop, failed, s.look)
        t["look"] = s.look
        if t["stop"] == FAILED_ROUNDS and t["verdict"] == "inconclusive (cut)":
            t["verdict"] = "inconclusive"  # too few rounds to judge, but nothing to resume
    not_live = [_not_live_row(*one_sided[k]) for k, _ in pairing.unpaired if k in one_sided]
    table += not_live
    # An op whose kernels differ but whose rows did not pair (it crashed on a side after compiling)
    # shows the switch reaches the compiler: the axis is live, not dead.
    unpaired_live = not aa and any(liveness_of(k[0], artifacts_a or {}, artifacts_b or {}) for k, _ in unpaired)
    # Each row's log ratio per round, over the rounds its ratio rests on (its look): the overall
    # interval resamples rounds as well as tests.
    by_round = [{r: math.log(b / a) for r, a, b in list(zip(p.rounds, p.a, p.b))[:s.look or len(p.a)]}
                for p, s in zip(pairing.rows, row_stats)]
    summary = _summary(pairing, table, live + [False] * len(not_live), aa, len(unpaired), unpaired_live,
                       by_round + [None] * len(not_live), round_period, run_offset_sd, threshold,
                       [s.look for s in row_stats])
    summary.update(label_a=label_a, label_b=label_b, threshold=threshold, extra_caveats=list(caveats),
                   rounds_planned=_planned(rounds, fixed_rounds),
                   stops=dict(Counter(t["stop"] for t in table if t["stop"])), cut=_cut(table, unpaired, cut, pairing.views))
    c = summary["cut"] or {}
    if c.get("rows") and c.get("rows_done_all", 2) <= 1:
        # Cut after its first round: a bootstrap over tests alone would read the round's own draws
        # (its side processes, the machine then) as a change of every row. No interval.
        summary["overall"].update(lo=None, hi=None, one_round=True)
    unpaired_rows = [{"op": k[0], "dtype": short_dtype(k[1]), "shape": k[2], "node": k[3] or None, "why": why}
                     for k, why in unpaired]
    name_shared_keys(table + unpaired_rows)  # a paired and an unpaired row of one key read apart too
    result = {"summary": summary, "rows": table, "unpaired": unpaired_rows}
    result["markdown"] = render_markdown(result)
    return result


def _one_sided(rows_a: Sequence[dict], rows_b: Sequence[dict], stops: Mapping[str, Mapping], key) -> Dict:
    """Rows of nodes liveness first found not live in round 1: timed on one side only (key ->
    (row, side))."""
    dead = {n for n, e in stops.items() if e.get("why") == "not live"}
    return {key(r): (r, side) for side, rows in (("a", rows_a), ("b", rows_b)) for r in rows
            if base_node(r.get("node") or "") in dead and r.get("status") == "ok"}


def _judge(pairing, threshold: float, artifacts_a: Mapping, artifacts_b: Mapping, aa: bool,
           rounds: Optional[Mapping[str, int]]):
    """Each paired row's statistics and verdict, and its liveness."""
    row_stats = [stats.row_stat(p.a, p.b) for p in pairing.rows]
    # A/A: both sides run one value, so identical kernels are the construction, not a dead axis:
    # every row is measured and counts towards the false-positive rate.
    live = [None if aa else liveness_of(p.key[0], artifacts_a, artifacts_b) for p in pairing.rows]
    # A sequential run (rounds {"min", "max"}): each row is judged by the rule that stopped it.
    stats.analyse(row_stats, live, threshold, *((rounds["min"], rounds["max"]) if rounds else ()))
    # Two plain runs (a sweep's sides, each row a median over its processes): one value a side, no
    # rounds to test, but each with its process-level interval: judged as `history compare` judges.
    # A row that compiled identical kernels keeps its verdict (not live) and, as a round row does,
    # its interval: the free A/A check the report says it is.
    # Judged together: each interval at the family-wise level over them (ab/intervals.py).
    family = sum(1 for p in pairing.rows if _judged_on_intervals(p))
    for i, p in enumerate(pairing.rows):
        if _judged_on_intervals(p):
            s = interval_stat(p.a[0], p.a_ci, p.b[0], p.b_ci, family)
            s.verdict = interval_verdict(s, threshold) if live[i] is not False else row_stats[i].verdict
            row_stats[i] = s
    return row_stats, live


def _judged_on_intervals(p) -> bool:
    """A row of two plain runs: one value a side, each with its process-level interval."""
    return len(p.a) == 1 and bool(p.a_ci and p.b_ci)


def _planned(rounds: Optional[Mapping[str, int]], fixed_rounds: Optional[int]) -> Optional[Dict]:
    if rounds:
        return dict(rounds)
    return {"min": fixed_rounds, "max": fixed_rounds} if fixed_rounds else None


def _cut(table: List[Dict], unpaired: Sequence, cut: Collection[str], views: Collection = ()) -> Optional[Dict]:
    """Rows the run's end cut before their planned rounds (None: nothing was cut). An unpaired row
    counts as cut where its node is one the run did not finish (or names none), unless it is a view
    (`views`: its rounds ran and launched no device work on either side, unpaired for that)."""
    cut_rounds = [t["rounds"] for t in table if t["stop"] == "cut"] or ([0] if cut else [])
    if not cut_rounds:
        return None
    no_round = sum(1 for k, _ in unpaired if k not in views and (not k[3] or base_node(k[3]) in cut)) if cut else 0
    # rows of the unfinished tests that had settled or gone futile: their verdicts stand
    stopped = [t for t in table if t["stop"] in (SETTLED, FUTILE) and base_node(t.get("node") or "") in cut]
    return {"rows": sum(1 for t in table if t["stop"] == "cut") + no_round,
            "rounds_done": [min(cut_rounds), max(cut_rounds)],
            "below_min": sum(1 for t in table if t["verdict"] == "inconclusive (cut)"),
            "no_round": no_round, "tests": len(cut),
            "rows_done_all": max((t["rounds"] for t in table), default=0),  # the most rounds any row got
            "stopped": len(stopped), "stopped_tests": len({base_node(t.get("node") or "") for t in stopped})}


# What ab.md says a row's stop means, where it has rows that stopped so.
STOP_MEANINGS = {SETTLED: "its interval decided its verdict (wholly beyond or within the threshold band)",
                 FUTILE: "its interval was unlikely to decide it within ab.rounds"}


def stop_reason(node: Optional[str], done: int, stops: Mapping[str, Mapping], rounds: Optional[Mapping[str, int]],
                cut: Collection[str], row_stop: Optional[str] = None, failed: Collection[str] = (),
                look: Optional[int] = None) -> str:
    """Why a row has the rounds it has: settled or futile (more rounds were unlikely to settle it): its
    node stopped once every row was settled or futile, or ran on for another row; not live (the
    scheduler stopped its node), max rounds, cut (the run ended first), or failed rounds (its node
    failed in some rounds of a run that was not cut). row_stop, look: the row's own sequential stop
    and the round it was made at (stats.RowStat.stop, .look)."""
    base = base_node(node or "")
    if base in stops:
        why = str(stops[base].get("why"))
        return FUTILE if why == SETTLED and row_stop == FUTILE else why
    if base in cut:  # the run ended before its node did: a row that had settled or gone futile says so
        return row_stop if row_stop in (SETTLED, FUTILE) else "cut"
    if rounds and done < rounds["max"]:
        return FAILED_ROUNDS if base in failed else "cut"
    if rounds and (row_stop == FUTILE or row_stop == SETTLED and look and look < done):
        return row_stop  # its node ran on to max rounds for another row (one settled at the last round: max rounds)
    return "max rounds" if rounds else ""


def _median(values: Sequence[float]) -> Optional[float]:
    return float(statistics.median(values)) if values else None


def _summary(pairing, table: List[Dict], live: Sequence[Optional[bool]], aa: bool, unpaired: int,
             unpaired_live: bool = False, by_round: Optional[Sequence[Optional[Mapping[int, float]]]] = None,
             round_period: int = 1, run_offset_sd: float = 0.0, threshold: float = 0.02,
             looks: Optional[Sequence[Optional[int]]] = None) -> Dict:
    considered = [t for t, lv in zip(table, live) if lv is not False]
    considered_rounds = [d for d, lv in zip(by_round or [None] * len(table), live) if lv is not False]
    flagged = sum(1 for t in considered if t["verdict"] in ("faster", "slower", "changed below threshold"))
    return {
        "aa": aa, "liveness": LIVE_AA if aa else _axis_liveness(list(live) + [True] * unpaired_live),
        "live_rows": sum(1 for lv in live if lv), "not_live_rows": sum(1 for lv in live if lv is False),
        # Paired not-live rows, timed on both sides (round by round, two plain runs); `live` goes on past
        # them with the rows timed once, on A (a node found not live in round 1), which zip leaves out.
        "not_live_both_sides": sum(1 for _, lv in zip(pairing.rows, live) if lv is False),
        "unknown_liveness_rows": 0 if aa else sum(1 for lv in live if lv is None),
        "paired_rows": len(pairing.rows), "unpaired_rows": unpaired,
        "fallback_rows": sum(1 for p in pairing.rows if p.fallback),
        "interval_rows": sum(1 for p, lv in zip(pairing.rows, live) if lv is not False and _judged_on_intervals(p)),
        "unjudgeable_rows": sum(1 for p in pairing.rows if len(p.a) == 1 and len(p.b) == 1 and not _judged_on_intervals(p)),
        "verdicts": dict(Counter(t["verdict"] for t in table)),
        "overall": overall_line(considered, [t["node"] or t["op"] for t in considered], considered_rounds,
                                round_period, run_offset_sd),
        "baseline_drift": baseline_drift(pairing.rows),
        "baseline_moved": baseline_moved(pairing.rows, threshold, looks),
        "baseline_one_side_rows": sum(1 for p in pairing.rows if p.base_one_side),
        "flagged_rows": flagged,
        "false_positive_rate": (flagged / len(considered)) if (aa and considered) else None,
    }


def baseline_drift(rows: Sequence) -> Dict:
    """B's torch baseline over A's, per paired row, summarised. Machine drift moves every row's
    baseline alike: it is read over the rows the runs' timer timed (a shape the capture refused is
    timed directly, and its baseline can move 50% between two processes) and as their median, which a
    few wild rows cannot move (with its distribution-free interval); its mean's interval resamples tests."""
    drifting = [p for p in rows if p.a_base and p.b_base and not p.fallback]
    drift = [(sum(p.b_base) / len(p.b_base)) / (sum(p.a_base) / len(p.a_base)) for p in drifting]
    tests = [base_node(p.node or "") or p.key[0] for p in drifting]
    return {**stats.overall(drift, clusters=tests), "median": _median(drift),
            **dict(zip(("median_lo", "median_hi"), stats.median_interval(drift)))}


def drift_caveat(d: Mapping, threshold: float, between: str = "sides") -> Optional[str]:
    """The words for a baseline that moved beyond the threshold, and beyond the rows' own scatter
    where they give an interval for their median (an A/A's baseline read +3.1% with an interval of
    -1.0 .. +4.9% and was called drift; the median's interval, not the mean's, so that one wild row
    cannot hide drift either); None where it did not."""
    lo, hi = d.get("median_lo"), d.get("median_hi")
    if d.get("median") is None or abs(d["median"] - 1) <= threshold or (lo is not None and lo <= 1 <= hi):
        return None
    ci = f"; 95% CI of their median {_fmt_pct(lo)} .. {_fmt_pct(hi)}" if lo is not None else ""
    return (f"the torch baseline itself moved {_fmt_pct(d['median'])} between {between} (the median over "
            f"{d['rows']} row(s) timed by {'the run' if between == 'sides' else 'each run'}'s timer{ci}): suspect "
            "machine drift")


def baseline_moved(rows: Sequence, threshold: float, looks: Optional[Sequence[Optional[int]]] = None) -> List[Dict]:
    """Rows whose rounds that timed torch's baseline first (an A/B with corpus.baseline_off_args: round
    1) read apart from the rounds that did not, on both sides alike, over the rounds a row's A and B
    columns rest on (looks: each row's look, as compare() has them; None: all its rounds). On an H100
    FlagGems' 4-byte ops of 2**30 elements (lshift, xor, chebyshev_u, zeros) read 11-14% slower right
    after the baseline (RESULTS.md, forty-sixth session). Listed where, on each side, the median of
    the baseline rounds lies beyond the threshold from the median of the others, in one direction on
    both sides, and outside the others' range by more than that range, with at least 3 rounds without
    the baseline (the range of 2 is too narrow: 2-9% of rows of pure noise read apart so, 0.1-2.5% with
    3); rows timed by the direct fallback are left out (their rounds move 10-50% between processes)."""
    moved = []
    for i, p in enumerate(rows):
        n = (looks[i] if looks else None) or len(p.a)  # _pair_rounds keeps a, b and with_base aligned
        with_base = p.with_base[:n]
        if p.fallback or not any(with_base) or sum(1 for w in with_base if not w) < 3:
            continue
        shifts = []
        for values in (p.a[:n], p.b[:n]):
            first = statistics.median(v for v, w in zip(values, with_base) if w)
            rest = [v for v, w in zip(values, with_base) if not w]
            lo, hi, mid = min(rest), max(rest), statistics.median(rest)
            gap = first - hi if first > hi else lo - first if first < lo else 0.0
            shifts.append(first / mid - 1 if gap > hi - lo and abs(first / mid - 1) > threshold else None)
        if None not in shifts and shifts[0] * shifts[1] > 0:
            moved.append({"op": p.key[0], "dtype": short_dtype(p.key[1]), "shape": p.key[2], "node": p.key[3] or None,
                          "a_pct": round(shifts[0] * 100, 2), "b_pct": round(shifts[1] * 100, 2)})
    return sorted(moved, key=lambda m: -min(abs(m["a_pct"]), abs(m["b_pct"])))


def overall_line(considered: Sequence[Mapping], clusters: Sequence, by_round: Optional[Sequence] = None,
                 round_period: int = 1, run_offset_sd: float = 0.0) -> Dict:
    """The overall change over the table rows `considered` (clusters: each row's test, resampled as
    one; by_round: each row's log ratio per round, or None) but those the report calls unstable: rounds so
    noisy (sd of the log ratio > stats.UNSTABLE_SD) that nothing is judged carry noise, not
    information, into a mean over rows (one such row of 85 moved an A/A's overall interval to
    -7..+9%); they are left out, and counted, as are rows of two plain runs whose processes
    disagreed on a side (process-unstable: their value is a draw). run_offset_sd: see compare();
    `history compare` makes its overall line here too."""
    kept = [(t, k, d) for t, k, d in zip(considered, clusters, by_round or [None] * len(considered))
            if t["verdict"] != "unstable" and not t.get("process_unstable")]
    o = stats.overall([t["ratio"] for t, _, _ in kept], clusters=[k for _, k, _ in kept],
                      rounds=[d for _, _, d in kept], round_period=round_period)
    return {**stats.widened(o, run_offset_sd * math.sqrt(2.0)), "run_offset_sd": run_offset_sd or None,
            "unstable_left_out": sum(1 for t in considered if t["verdict"] == "unstable"),
            "process_unstable_left_out": sum(1 for t in considered
                                             if t["verdict"] != "unstable" and t.get("process_unstable"))}


def _table_row(p, s, lv) -> Dict:
    return {
        "op": p.key[0], "dtype": short_dtype(p.key[1]), "shape": p.key[2], "node": p.key[3] or None, "rounds": s.n,
        # Geometric means over the rounds the change and verdict rest on (a row frozen at an earlier
        # look while its node ran on for other rows: that look's rounds), so B/A = the change.
        "a_ms": _geomean(p.a[:s.look or len(p.a)]), "b_ms": _geomean(p.b[:s.look or len(p.b)]),
        "change_pct": _pct(s.ratio), "ci_lo_pct": _pct(s.lo), "ci_hi_pct": _pct(s.hi),
        "p": s.p, "q": s.q, "mde_pct": None if s.mde is None else round(s.mde * 100, 2),
        "live": {True: "live", False: "not live", None: "unknown"}[lv],
        "fallback": p.fallback, "verdict": s.verdict, "ratio": s.ratio, "lo": s.lo, "hi": s.hi,
        "process_unstable": p.process_unstable,
    }


def _not_live_row(r: Mapping, side: str) -> Dict:
    """A row liveness first did not time on its second side: the first side's round-1 number."""
    return {"op": r.get("op"), "dtype": short_dtype(r.get("dtype")), "shape": r.get("shape"),
            "node": r.get("node"), "rounds": 1,
            "a_ms": r.get("latency") if side == "a" else None, "b_ms": r.get("latency") if side == "b" else None,
            "change_pct": None, "ci_lo_pct": None, "ci_hi_pct": None, "p": None, "q": None, "mde_pct": None,
            "live": "not live", "fallback": False, "process_unstable": False, "verdict": "not live", "ratio": None,
            "lo": None, "hi": None,
            "stop": "not live"}


def fmt_ms(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.5g}"


def _axis_liveness(live: Sequence[Optional[bool]]) -> str:
    known = [lv for lv in live if lv is not None]
    if not known:
        return "unknown"
    return "live" if any(known) else "not live"


def no_interval(o: Mapping) -> str:
    """Why an overall line has no interval, where it is that it resamples too few tests."""
    tests = o.get("tests")
    return (f" (no interval: it resamples tests and needs {stats.MIN_TESTS} or more; this has {tests})"
            if tests is not None and tests < stats.MIN_TESTS else "")


# Where ab.md lists rows a line counts (a page that shows the head alone says where they are instead).
LISTED_BELOW = "listed below"


def headline(summary: Mapping) -> List[str]:
    lines = [cut_line(summary)] if summary.get("cut") else []
    lines.append(_liveness_line(summary))
    o = summary["overall"]
    if o["geomean"] is not None and o.get("one_round"):  # no interval, and nothing in bold
        lines.append(f"Overall B/A latency: {_fmt_pct(o['geomean'])} over {o['rows']} row(s) of one round each (no "
                     "interval: the run was cut after its first round, whose draws, its side processes, are in "
                     "every row at once; resume the run dir for more rounds).")
    elif o["geomean"] is not None:
        ci = (f" (95% bootstrap CI {_fmt_pct(o['lo'])} .. {_fmt_pct(o['hi'])}, resampling "
              f"{o.get('resampled') or 'tests'}"
              + (f", widened by each run's offset over all its rows, sd {o['run_offset_sd'] * 100:.2g}% a run"
                 if o.get("run_offset_sd") else "") + ")") if o["lo"] is not None else no_interval(o)
        left_out = (f"; {o['unstable_left_out']} unstable row(s) left out: their rounds judge nothing"
                    if o.get("unstable_left_out") else "")
        left_out += (f"; {o['process_unstable_left_out']} process-unstable row(s) left out: each judged on its "
                     "own intervals" if o.get("process_unstable_left_out") else "")
        lines.append(f"Overall B/A latency: **{_fmt_pct(o['geomean'])}**{ci} over {o['rows']} row(s) "
                     f"(geometric mean; negative = B faster{left_out}).")
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(summary["verdicts"].items())) or "none"
    unstable = (f" Unstable: the rounds' B/A moved by more than {stats.UNSTABLE_SD:g} (sd of its log), and "
                f"its interval does not lie wholly beyond the threshold or its q is not below {stats.ALPHA:g}, so "
                "nothing is judged: more rounds, or a quieter machine." if summary["verdicts"].get("unstable") else "")
    lines.append(f"Verdicts: {counts}.{unstable}")
    planned = summary.get("rounds_planned")
    if planned and summary.get("stops"):
        why = ", ".join(f"{v} at {k}" if k == "max rounds" else f"{v} {k}" for k, v in sorted(summary["stops"].items()))
        span = f"{planned['min']} to {planned['max']}" if planned["min"] != planned["max"] else f"{planned['max']}"
        # Planned, not run: a row stops early once settled, futile or not live (the table's rounds column).
        meanings = "; ".join(f"{w}: {m}" for w, m in STOP_MEANINGS.items() if w in summary["stops"])
        lines.append(f"Rounds planned: {span} per row; rows stopped: {why} "
                     f"(the rounds each row ran: its rounds column{'; ' + meanings if meanings else ''}).")
    if summary.get("aa"):
        fpr = summary["false_positive_rate"]
        lines.append(f"A/A mode: {summary['flagged_rows']} row(s) flagged after BH "
                     f"(false positive rate {fpr:.1%})." if fpr is not None else "A/A mode: no rows.")
    caveats = _caveats(summary)
    if caveats:
        lines.append("Caveats: " + "; ".join(caveats) + ".")
    return lines


def _liveness_line(summary: Mapping) -> str:
    if summary.get("aa"):
        return ("A/A: both sides ran the same value, so their kernels are identical by construction; "
                "every row is measured, and a row flagged (faster, slower or changed below threshold) is a false "
                "positive; an inconclusive or unstable row flags nothing, it only had too few or too noisy rounds.")
    if summary["liveness"] == "not live":
        unknown = summary.get("unknown_liveness_rows") or 0
        return ("**AXIS NOT LIVE**: both sides compiled byte-identical kernels for every row with "
                "artifacts; the switch did not reach the compiler, so no row is compared (their interval, "
                "where a row has one, is an A/A noise check, not an effect)." +
                (f" {unknown} row(s) had no kernels to compare (liveness unknown)." if unknown else ""))
    if summary["liveness"] == "unknown":
        plain = (" Two plain runs at defaults (`share_kernels`) load what an earlier run of their compile "
                 "environment compiled, and record only what they compile: make a pair's sides with "
                 "share_kernels=false for the evidence.") if summary.get("interval_rows") else ""
        return ("Liveness: **unknown** (no compiled artifacts to compare: e.g. a CPU run, or shared "
                "caches). A 'no difference' here cannot tell a dead switch from a neutral one." + plain)
    if not summary["live_rows"]:
        return (f"Liveness: **live**, on no paired row: an unpaired op compiled other kernels on each side (its "
                f"rows are {LISTED_BELOW}); {summary['not_live_rows']} row(s) compiled identical kernels (excluded).")
    dead, both = summary["not_live_rows"], summary.get("not_live_both_sides", 0)
    how = ("they are a free A/A check" if both == dead else
           "timed once, on side A" if not both else
           f"{both} of them timed on both sides, a free A/A check")
    return f"Liveness: **live** on {summary['live_rows']} row(s); {dead} row(s) compiled identical kernels (excluded; {how})."


def _caveats(summary: Mapping) -> List[str]:
    caveats = []
    if summary.get("interval_rows"):
        caveats.append(f"{summary['interval_rows']} row(s) have one value a side (two plain runs: each a median over "
                       "its processes) and are judged on the two runs' process-level intervals (latency_ci), as "
                       "`history compare` judges them: moved when each value lies outside the other's interval")
    if summary.get("unjudgeable_rows") and not summary.get("rounds_planned"):  # two runs or logs, not rounds
        caveats.append(f"{summary['unjudgeable_rows']} row(s) have one value a side and no process-level interval on "
                       "both (a side's log of an A/B run holds a mean over its rounds; a FlagGems log, or a run of "
                       "one process, one value): their change is shown, not judged (inconclusive). To judge them, "
                       "pair two plain zlbench runs (rows with latency_ci), or read an A/B run's own ab.md")
    if summary["unpaired_rows"]:
        caveats.append(f"{summary['unpaired_rows']} row(s) unpaired ({LISTED_BELOW}): the comparison is incomplete")
    if summary["fallback_rows"]:
        caveats.append(f"{summary['fallback_rows']} row(s) timed by the direct fallback on a side "
                       f"({MARKER_FALLBACK}): another timing regime")
    d = summary["baseline_drift"]
    if not d["rows"] and summary["fallback_rows"]:
        caveats.append("machine drift not checked: no row with a torch baseline was timed by the run's timer "
                       "(the direct fallback's baselines move too much between processes to tell)")
    if (drift := drift_caveat(d, summary["threshold"])):
        caveats.append(drift)
    moved = summary.get("baseline_moved") or []
    if moved:
        m = moved[0]
        caveats.append(f"{len(moved)} row(s) read apart, alike on both sides, in the round(s) that timed torch's "
                       f"baseline first (round 1 under corpus.baseline_off_args, also the round that filled each "
                       f"side's caches) against the later rounds (widest: {m['op']} {m['dtype']} {m['shape']}, A "
                       f"{m['a_pct']:+.1f}% and B {m['b_pct']:+.1f}%): their A and B columns average both orders, "
                       "while their change, B/A paired within each round, is unaffected (all of them: "
                       "summary.baseline_moved in ab.json)")
    if summary.get("baseline_one_side_rows"):
        caveats.append(f"{summary['baseline_one_side_rows']} row(s) timed torch's baseline on one side only in some "
                       "rounds (runs that differ in corpus.baseline_off_args, or a baseline that failed on a side): "
                       "in those rounds B/A compares an op timed right after the baseline with one timed without it, "
                       "which alone moved rows by up to 14% on an H100; pair runs that time the baseline alike")
    return caveats + list(summary.get("extra_caveats") or [])


def cut_line(summary: Mapping) -> str:
    """The first line of a cut A/B: rounds planned against done, rows cut, verdicts it voids."""
    c, planned = summary["cut"], summary.get("rounds_planned") or {}
    done = c["rounds_done"][0] if c["rounds_done"][0] == c["rounds_done"][1] else "{}..{}".format(*c["rounds_done"])
    plan = (f"{planned['min']} to {planned['max']}" if planned.get("min") != planned.get("max")
            else str(planned.get("max", "?")))
    below = "; ".join(filter(None, [
        f"{c['below_min']} of them, below the minimum, read 'inconclusive (cut)'" if c["below_min"] else "",
        f"{c['no_round']} got no round measured on both sides (listed as unpaired)" if c.get("no_round") else "",
    ])) or ("each verdict rests on the rounds it got (rounds planned alike for every row: where a time limit "
            "cut them says nothing of the data)" if planned.get("min") == planned.get("max") else
            "each reached the minimum, so its verdict stands on the rounds it got")
    if not c["rows"] and c.get("stopped"):  # the unfinished tests' rows had all stopped on their own
        tests, with_rows = c.get("tests", 0), c.get("stopped_tests", c.get("tests", 0))
        others = (f"; the other {tests - with_rows} had no row compared (measured on both sides)"
                  if tests > with_rows else "")
        return (f"**Run cut short**: {tests} test(s) not finished before the run ended; the {c['stopped']} row(s) "
                f"of {with_rows} of them had settled or gone futile, so their verdicts stand{others}. Resume the "
                "run dir to finish them.")
    if not c["rows"]:  # cut between tests: the unfinished ones left no row measured on both sides
        return (f"**Run cut short**: {c.get('tests', 0)} test(s) not finished before the run ended, none with a row "
                "compared (measured on both sides). Resume the run dir to finish them.")
    return (f"**Run cut short**: {c['rows']} row(s) got {done} of the {plan} rounds planned before the run ended; "
            f"{below}. Resume the run dir to finish them.")


def _fmt_pct(ratio: Optional[float]) -> str:
    return "-" if ratio is None else f"{(ratio - 1) * 100:+.2f}%"


def _rounds_cell(t: Mapping) -> str:
    """Rounds done and why they stopped; where a row's verdict (and its A, B and change columns) rests
    on an earlier look, which: a settled or futile row whose node ran on for another row, "6 (futile
    at 4)"; rounds past the planned maximum (a resume), "3 (max rounds at 2)"."""
    if not t.get("stop"):
        return f"{t['rounds']}"
    look = t.get("look")
    at = f" at {look}" if look and look != t["rounds"] else ""
    return f"{t['rounds']} ({t['stop']}{at})"


def _ci_cell(t: Mapping) -> str:
    return f"{t['ci_lo_pct']:+.2f}%..{t['ci_hi_pct']:+.2f}%" if t.get("ci_lo_pct") is not None else "-"


def _verdict_cell(t: Mapping) -> str:
    live = t.get("live")
    return (t["verdict"] + (" (fallback)" if t.get("fallback") else "")
            + (" (process-unstable)" if t.get("process_unstable") else "")
            + ("" if live in (None, "live", LIVE_AA, t["verdict"]) else f" [{live}]"))


# How ab.md shows a column (columns.AB_MD); a column not named here shows its value.
_CELLS = {
    "op": op_with_test,
    "rounds": _rounds_cell, "a_ms": lambda t: fmt_ms(t.get("a_ms")), "b_ms": lambda t: fmt_ms(t.get("b_ms")),
    "change_pct": lambda t: "-" if t.get("change_pct") is None else f"{t['change_pct']:+.2f}%",
    "ci_lo_pct": _ci_cell, "q": lambda t: "-" if t.get("q") is None else f"{t['q']:.3g}", "verdict": _verdict_cell,
}
MD_COLUMNS = [c for c in columns.AB_COLUMNS if columns.AB_MD in c.outputs]
MD_HEADERS = [c.label or c.name for c in MD_COLUMNS]


def table_cells(t: Mapping) -> List[str]:
    """An A/B row as ab.md's table shows it (MD_HEADERS); report/condensed.py's tables too."""
    return [_CELLS[c.name](t) if c.name in _CELLS else t.get(c.name) for c in MD_COLUMNS]


def title(s: Mapping) -> str:
    """ab.md's first line; an A/A says so, its two sides carrying the same value."""
    kind = "A/A" if s.get("aa") else "A/B"
    return f"# {kind}: {s['label_a']} (A) vs {s['label_b']} (B)"


def render_markdown(result: Mapping) -> str:
    s = result["summary"]
    out = [title(s), ""]
    out += [f"- {line}" for line in headline(s)]
    out.append("")
    rows = [table_cells(t) for t in result["rows"]]
    out.append(tabulate(rows, headers=MD_HEADERS, tablefmt="github") if rows else "(no paired rows)")
    if result["unpaired"]:
        out += ["", "## Unpaired rows", ""]
        out.append(tabulate([[op_with_test(u), u["dtype"], u["shape"], u["why"][:240]] for u in result["unpaired"]],
                            headers=["Operator", "dtype", "shape", "why"], tablefmt="github"))
    return "\n".join(out) + "\n"


def write(result: Mapping, out_dir: Path, where: str = "") -> None:
    """ab.md (result["markdown"]), ab.csv, ab.json and ab.png; where: the plot's what/where/when
    (condensed.plot_title). ab.png's form is decided before drawing: a forest plot with a line per
    row up to overview.LARGE rows, past that the fixed-size overview (one plot, drawn once)."""
    from zlbench.report.overview import LARGE

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "ab.md").write_text(result["markdown"], encoding="utf-8")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=AB_FIELDS, extrasaction="ignore")
    w.writeheader()
    w.writerows(result["rows"])
    (out_dir / "ab.csv").write_text(buf.getvalue(), encoding="utf-8")
    (out_dir / "ab.json").write_text(json.dumps({k: v for k, v in result.items() if k != "markdown"},
                                                indent=1, default=str), encoding="utf-8")
    if len(result["rows"]) > LARGE:
        from zlbench.report.overview import ab_overview_plot

        s = result["summary"]
        ab_overview_plot(result, out_dir / "ab.png", where or f"A/B: {s['label_b']} / {s['label_a']}")
    else:
        from zlbench.report.plots import forest_plot

        forest_plot([{**t, "label": f"{op_with_test(t)} {t['dtype']} {t['shape']}"} for t in result["rows"]],
                    out_dir / "ab.png", f"{result['summary']['label_b']} / {result['summary']['label_a']}"
                    + (f" - {where}" if where else ""))
