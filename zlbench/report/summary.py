"""summary.md of a single run (or a FlagGems result log): status counts and per-op results."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from tabulate import tabulate

from zlbench.results.records import SAMPLING_FIELDS
from zlbench.results.schema import (MARKER_BIMODAL, MARKER_FALLBACK, MARKER_NO_DEVICE_WORK, MARKER_NOT_ZLBENCH_TIMER,
                                    MARKER_PROCESS_UNSTABLE, MARKER_THROTTLED, did_no_device_work,
                                    kernel_speedup)
from zlbench.results.schema import short_dtype
from zlbench.results.schema import SEVERITY, STATUSES


def _fmt(x: Optional[float], digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def node_file(row: dict) -> str:
    return (row.get("node") or "").split("::")[0]


def per_op_table(rows: Iterable[dict]) -> List[List[str]]:
    """One line per op, test file, side and dtype: two files' tests that carry one op mark are
    different tests (their own shapes and inputs), never merged; the file is shown where an op has
    tests in more than one."""
    groups: Dict[tuple, List[dict]] = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok" and r.get("latency"):
            groups[(r["op"], node_file(r), r.get("side") or "main", short_dtype(r.get("dtype")))].append(r)
    files_of_op: Dict[str, set] = defaultdict(set)
    for op, file, _, _ in groups:
        files_of_op[op].add(file)
    return [_table_line(f"{op} ({file or '?'})" if len(files_of_op[op]) > 1 else op, side, dtype, rs)
            for (op, file, side, dtype), rs in sorted(groups.items())]


def _median(values: List[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def _table_line(op: str, side: str, dtype: str, rs: List[dict]) -> List[str]:
    speedups = [s for s in map(kernel_speedup, rs) if s]
    no_work = sum(1 for r in rs if did_no_device_work(r) or did_no_device_work(r, "latency_base"))
    fallback = sum(1 for r in rs if MARKER_FALLBACK in (r.get("markers") or []))
    timers = sorted({_timer(r) for r in rs})
    rounds = len({r.get("round") for r in rs})
    return [
        # a shape of each test: tests of one op in one file (FlagGems' einsum) may time the same shapes
        op, side, dtype, str(len({(r.get("node"), r.get("shape")) for r in rs})) + (f" x {rounds} rounds" if rounds > 1 else ""),
        _fmt(_median([r["latency_base"] for r in rs if r.get("latency_base") is not None])),
        _fmt(_median([r["latency"] for r in rs])),
        _fmt(statistics.geometric_mean(speedups) if speedups else None, 3),
        f"{_fmt(min(speedups), 3)}..{_fmt(max(speedups), 3)}" if speedups else "-",
        ",".join(timers) + "".join(f" ({n} {what})" for n, what in ((fallback, "fallback"), (no_work, "no device work"))
                                   if n),
    ]


def _timer(r: dict) -> str:
    """What timed the row: a corpus-timed row has no zlbench timer (read back from a log, its record's
    mode stands in for one)."""
    if MARKER_NOT_ZLBENCH_TIMER in (r.get("markers") or []):
        return "corpus"
    return str(r.get("timer_used") or "-")


# A CPU thread that loses its core waits out a scheduler slice (1-10 ms; 4 ms seen on a busy 2-core
# machine). A host-timed side of at least a slice that is 50x the other side, or 10x what the same
# side of the same row measured in its other rounds, is that wait, not the op.
SLICE_MS = 1.0
IMPLAUSIBLE_RATIO = 50.0
JUMP_RATIO = 10.0
SIDES = ("latency_base", "latency")


def _host_timed(r: dict) -> bool:
    return (r.get("status") == "ok" and "host" in (r.get("timer_used"), r.get("timer_used_base"))
            and bool(r.get("latency_base")) and bool(r.get("latency")))


def contended_rows(rows: Iterable[dict]) -> List[dict]:
    """Host-timed rows with a side of at least a scheduler slice that is 50x the row's other side,
    or 10x the median of that side over the row's rounds."""
    hosted = [r for r in rows if _host_timed(r)]
    rounds: Dict[tuple, List[dict]] = defaultdict(list)
    for r in hosted:
        rounds[(r.get("node"), r.get("side"), r.get("dtype"), r.get("shape"))].append(r)
    medians = {(key, side): statistics.median(r[side] for r in rs) for key, rs in rounds.items() for side in SIDES}
    out = []
    for r in hosted:
        key = (r.get("node"), r.get("side"), r.get("dtype"), r.get("shape"))
        slow, fast = max(r[s] for s in SIDES), min(r[s] for s in SIDES)
        jumped = any(r[s] >= SLICE_MS and r[s] >= JUMP_RATIO * medians[(key, s)] for s in SIDES)
        if jumped or (slow >= SLICE_MS and slow >= IMPLAUSIBLE_RATIO * fast):
            out.append(r)
    return out


def contention_warning(rows: List[dict]) -> Optional[str]:
    """One line when rows look measured on a busy CPU; None when none does."""
    bad = contended_rows(rows)
    if not bad:
        return None
    r = max(bad, key=lambda x: max(x["latency_base"], x["latency"]) / min(x["latency_base"], x["latency"]))
    return (f"{len(bad)} of {sum(map(_host_timed, rows))} host-timed rows look contended: a side took at "
            f"least a scheduler slice ({SLICE_MS:g} ms) and {IMPLAUSIBLE_RATIO:g}x the other side or "
            f"{JUMP_RATIO:g}x its other rounds, which a thread that lost its core explains and the op does "
            f"not (e.g. {r['op']} {short_dtype(r.get('dtype'))} {r.get('shape')}: torch {r['latency_base']:.4g} ms, "
            f"alternative {r['latency']:.4g} ms). Rerun on an idle machine (or with fewer backend.slots) "
            "before trusting them.")


def _timing_calls(rows: Iterable[dict]):
    """(row, timed side, sampling facts) of every timing call of ok rows that says how it sampled
    (rows of older runs and result logs do not)."""
    for r in rows:
        if r.get("status") != "ok":
            continue
        facts = {k: r.get(k) for k in SAMPLING_FIELDS}
        if facts.get("stop_reason"):
            yield r, "alternative", facts
        base = r.get("timing_base") or {}
        if base.get("stop_reason"):
            yield r, "torch", base


def _placement_lines(calls) -> List[str]:
    """timer.placements: how many placements the calls got, the widest spread between them, and how
    many calls got fewer than asked (their rows' placement_note says why)."""
    counted = [c for c in calls if c[2].get("placements") is not None]
    if not counted:
        return []
    by_count = Counter(c[2]["placements"] for c in counted)
    text = "- memory placements per call: " + ", ".join(f"{k}: {v} call(s)" for k, v in sorted(by_count.items(), reverse=True))
    spread = [c for c in counted if c[2].get("placement_spread_rel") is not None]
    if spread:
        r, side, f = max(spread, key=lambda c: c[2]["placement_spread_rel"])
        text += (f"; widest spread between placements {_pct(f['placement_spread_rel'])} ({r['op']} "
                 f"{short_dtype(r.get('dtype'))} {r.get('shape')}, {side}; the median is kept)")
    short = sum(1 for c in counted if c[2].get("placement_note"))
    if short:
        text += f"; {short} call(s) got fewer than asked (placement_note says why)"
    return [text]


def _pct(x: Optional[float]) -> str:
    """Two significant digits, never in exponent form (an interval 6.6 times its latency: 660%)."""
    return "-" if x is None else f"{100 * x:.0f}%" if abs(x) >= 1 else f"{100 * x:.2g}%"


def timing_lines(rows: List[dict], identity: Optional[dict] = None) -> List[str]:
    """## Timing: why timing calls stopped, how precise they got, the clocks they saw, and the
    rows whose samples fall into two clusters. Nothing for rows that do not say."""
    calls = list(_timing_calls(rows))
    if not calls:
        return []
    # Every call now stops at the timer's fixed budget and reads no clock: the stop and clock lines
    # only for runs made with adaptive stopping or clock screening (their identity or rows say so).
    earlier = "clocks" in (identity or {}) or "stop" in ((identity or {}).get("timer") or {})
    lines = [_stop_line(calls, identity)] if earlier or any(f["stop_reason"] != "fixed" for _, _, f in calls) else []
    lines += _samples_lines(calls)
    if earlier or any(f.get("samples_discarded") is not None for _, _, f in calls):
        lines.append("- " + _clock_line(calls, rows, identity))
    lines += _placement_lines(calls)
    lines += _bimodal_lines(calls)
    return ["## Timing", ""] + lines + [""] if lines else []


def _stop_line(calls, identity: Optional[dict]) -> str:
    reasons = Counter(f["stop_reason"] for _, _, f in calls)
    timer = (identity or {}).get("timer") or {}
    stop = timer.get("stop")
    # The target only where it decides (adaptive): a fixed stop takes the timer's own budget.
    rule = (f" (timer.stop={stop}" + (f", target +-{_pct(timer.get('target_rel'))}" if stop == "adaptive" else "")
            + ")" if stop else "")
    return f"- {len(calls)} timing calls stopped: " + ", ".join(f"{k} {v}" for k, v in reasons.most_common()) + rule


def _samples_lines(calls) -> List[str]:
    """Samples per call and the precision they reached, the worst call named."""
    sampled = [f for _, _, f in calls if f.get("samples")]
    if not sampled:
        return []
    n = sorted(f["samples"] for f in sampled)
    cis = sorted(f["ci_rel"] for f in sampled if f.get("ci_rel") is not None)
    text = f"- samples per call: median {statistics.median(n):g} ({n[0]}..{n[-1]})"
    if cis:
        worst = max((c for c in calls if c[2].get("ci_rel") is not None), key=lambda c: c[2]["ci_rel"])
        text += f"; 95% CI half-width: median {_pct(statistics.median(cis))}, worst {_pct(cis[-1])}"
        r = worst[0]
        text += f" ({r['op']} {short_dtype(r.get('dtype'))} {r.get('shape')}, {worst[1]})"
    return [text]


def _bimodal_lines(calls) -> List[str]:
    bimodal = [(r, side, f) for r, side, f in calls if f.get("mode_lo_ms") is not None]
    if not bimodal:
        return []
    return ["", f"### Bimodal rows ({MARKER_BIMODAL}): {len(bimodal)} timing call(s) whose samples fall "
            "into two clusters", "", tabulate(
                [[r["op"], short_dtype(r.get("dtype")), r.get("shape"), side, _fmt(f["mode_lo_ms"]),
                  _fmt(f["mode_hi_ms"]), _pct(f.get("mode_hi_share"))] for r, side, f in bimodal],
                headers=["op", "dtype", "shape", "timed", "low mode ms", "high mode ms", "share high"],
                tablefmt="github")]


def process_lines(rows: List[dict], identity: Optional[dict] = None,
                  status_rows: Sequence[Mapping] = ()) -> List[str]:
    """## Processes: how many benchmark processes measured each row, how wide the process-level
    intervals are, and the rows whose processes disagree (BENCHMARK_PROCESS_UNSTABLE).
    status_rows: whether a resume would measure the processes that are missing."""
    measured = [r for r in rows if r.get("status") == "ok" and r.get("latency")]
    if any(r.get("side") not in (None, "main") for r in measured):
        return []  # an A/B's rows are its sides' rounds, each one process: ab.md judges them
    planned = ((identity or {}).get("timer") or {}).get("processes")
    with_ci = [r for r in measured if r.get("latency_ci")]
    if not with_ci:
        if planned == 1 and measured:
            return ["## Processes", "", "- one benchmark process per row (timer.processes=1): rows carry no "
                    "process-level interval, so their precision is that of one process only; what a process "
                    "draws at start (autotune picks, input placement) is not sampled", ""]
        if measured and planned:  # a run cut before its second process, with no row of several to borrow from
            # Only a cut leaves nodes to resume; a timeout or a crash in the other processes is final.
            resumable = [s for s in status_rows if s.get("resumable") or s.get("status") == "interrupted"]
            final = sorted({s["status"] for s in status_rows if s.get("status") not in ("ok", "skipped")} -
                           {"interrupted"})
            why = ("resume the run to measure the others" if resumable or not final else
                   f"the other processes ended {', '.join(final)} (ops_status.csv says why): a resume does not "
                   "run them again; fix the cause (e.g. a larger launcher.node_timeout_s) in a new run")
            return ["## Processes", "", f"- {len(measured)} row(s) measured in fewer processes than the {planned} "
                    f"planned, and none with an interval to borrow: no row carries a process-level interval ({why})",
                    ""]
        return []
    widths = sorted((((r["latency_ci"][1] - r["latency_ci"][0]) / r["latency"], r) for r in with_ci),
                    key=lambda w: w[0])  # equal widths keep their order (rows do not compare)
    counts = Counter(r["processes"] for r in measured)
    unstable = [r for r in measured if MARKER_PROCESS_UNSTABLE in (r.get("markers") or [])]
    lines = ["## Processes", "",
             "- each row is the median over its benchmark processes (" + ", ".join(
                 f"{v} row(s) in {k}" for k, v in sorted(counts.items(), reverse=True)) + " processes); its interval "
             "(`latency_ci` in rows.jsonl, beside `processes`) is a 95% interval for the value "
             "another run with these settings would report, its spread moderated by the run's rows of its "
             "size and timer (a run of few tests: by all its rows)"
             + (f"; {len(measured) - len(with_ci)} row(s) have none (one process, and too few tests of its "
                "timer measured in several to borrow a spread from)" if len(with_ci) < len(measured) else ""),
             f"- interval width (hi - lo) / latency: median {_pct(statistics.median(w for w, _ in widths))}, "
             f"p90 {_pct(widths[math.ceil(0.9 * len(widths)) - 1][0])}, widest {_pct(widths[-1][0])} "
             f"({_row_name(widths[-1][1])})"]
    from zlbench.results.events import base_node
    from zlbench.results.process_stats import TOP_UP_MIN_MS, op_read_apart

    more_rows = [r for r in measured if planned and r["processes"] > planned]
    more = {base_node(r.get("node") or "") for r in more_rows}  # a process runs all of a test's cases
    if more:
        # Runs from 9279d69 to 2026-12-06 timed the op only in them (corpus.baseline_off_args): no
        # row's baseline has more than the planned processes (since, a baseline one process failed
        # leaves it one short of the row's, not at the planned count).
        with_base = [r for r in more_rows if r.get("latency_base")]
        no_base = bool(with_base) and all(((r.get("timing_base") or {}).get("processes") or 0) <= planned
                                          for r in with_base)
        riders = sum(r["latency"] < TOP_UP_MIN_MS and op_read_apart(r) for r in more_rows)
        lines.append(f"- {len(more)} node(s) got more processes than the {planned} planned: a row of theirs of 20 us "
                     f"or more was wider than timer.target_width after {planned}, or its processes disagreed "
                     "(time goes where the variance is)"
                     + (f"; {riders} row(s) of theirs under 20 us that read apart by process were measured in them "
                        "too" if riders else "")
                     + (f"; the more processes timed the op only, the baseline is the planned {planned}' "
                        "(corpus.baseline_off_args)" if no_base else ""))
    if unstable:
        lines.append(_unstable_line(unstable))
    return lines + [""]


def _unstable_line(unstable: List[dict]) -> str:
    from zlbench.results.process_stats import op_read_apart

    def narrowness(r: dict) -> float:
        """lo / hi of the interval of the side whose processes read apart (the op's, else torch's)."""
        ci = r.get("latency_ci") if op_read_apart(r) else (r.get("timing_base") or {}).get("latency_ci")
        return ci[0] / ci[1] if ci and ci[1] else 0.0

    widest = sorted(unstable, key=narrowness)[:3]
    return (f"- {len(unstable)} row(s) {MARKER_PROCESS_UNSTABLE}: their processes disagree far beyond rows of "
            "their size and timer (on a GPU an autotune pick or input placement drawn per process; on a busy CPU a "
            "slowed process); widest: "
            + "; ".join(_row_name(r) + (f": {_what_processes_read(r)}" if r.get("marker_reason") else "")
                        for r in widest))


def _what_processes_read(r: dict) -> str:
    """The values its processes read, without the rest of its marker reason (a refused capture's
    error runs over several lines)."""
    parts = [p for p in r["marker_reason"].split("; ") if "processes read" in p]
    return "; ".join(parts) or r["marker_reason"]


def _row_name(r: dict) -> str:
    return f"{r['op']} {short_dtype(r.get('dtype'))} {r.get('shape')}"


def _clock_line(calls, rows: List[dict], identity: Optional[dict]) -> str:
    read = [f for _, _, f in calls if f.get("samples_discarded") is not None]
    if not read:
        reading = ((identity or {}).get("clocks") or {}).get("reading")
        return f"clocks: not read ({reading or 'no clock reading in these rows'})"
    sms = [f["sm_mhz"] for f in read if f.get("sm_mhz")]
    mems = [f["mem_mhz"] for f in read if f.get("mem_mhz")]
    discarded = [f["samples_discarded"] for f in read if f["samples_discarded"]]
    text = "clocks over the kept samples: SM " + (f"{min(sms):g}..{max(sms):g} MHz" if sms else "not read")
    text += ", memory " + (f"{min(mems):g}..{max(mems):g} MHz" if mems else "not read")
    text += (f"; {sum(discarded)} sample(s) discarded for a low SM clock in {len(discarded)} call(s)" if discarded
             else "; no sample discarded for a low clock")
    throttled = sum(1 for r in rows if MARKER_THROTTLED in (r.get("markers") or []))
    if throttled:
        text += f"; {throttled} row(s) kept a throttled sample ({MARKER_THROTTLED})"
    return text


def _worst_per_node(status_rows: List[dict]) -> Dict[str, str]:
    """Per test node: its worst status over sides and rounds (status rows are per node and side)."""
    worst: Dict[str, str] = {}
    for st in status_rows:
        node = st.get("test_node") or st["op"]
        if node not in worst or SEVERITY.get(st["status"], 0) < SEVERITY.get(worst[node], 0):
            worst[node] = st["status"]
    return worst


def _identity_lines(identity: dict, gpus_note: Optional[str] = None) -> List[str]:
    return [
        f"- backend: **{identity.get('backend', {}).get('name')}**, devices: "
        + ", ".join(f"{d['index']} ({d['name']})" for d in identity.get("devices", [])),
        f"- timer: **{identity.get('timer', {}).get('name')}** "
        f"(repeat {identity.get('timer', {}).get('repeat')}"
        + (f", stop {identity['timer']['stop']}" if identity.get("timer", {}).get("stop") else "")
        + f"), autotune (USE_FLAGTUNE): "
        f"{identity.get('autotune')}",
        f"- corpus: {identity.get('corpus', {}).get('name')} at {identity.get('corpus', {}).get('root')}",
        f"- identity: `{identity.get('identity_hash', '')[:16]}`",
    ] + ([f"- **GPUs changed**: {gpus_note}"] if gpus_note else []) + [""]


def render_summary(rows: List[dict], status_rows: List[dict], title: str,
                   identity: Optional[dict] = None, gpus_note: Optional[str] = None) -> str:
    """gpus_note: where the run's processes ran on several GPUs under one device index (run_report.gpus_note)."""
    lines = [f"# {title}", ""]
    contention = contention_warning(rows)
    if contention:
        lines += [f"> **Warning**: {contention}", ""]
    if identity:
        lines += _identity_lines(identity, gpus_note)
    lines += _status_lines(status_rows)
    lines += _results_lines(rows)
    lines += _marker_notes(rows)
    for section in (process_lines(rows, identity, status_rows), timing_lines(rows, identity)):
        if section:
            lines += [""] + section[:-1]
    return "\n".join(lines) + "\n"


def _status_lines(status_rows: List[dict]) -> List[str]:
    """## Status: test nodes by their worst status; ## Not ok: each node that was not; ## Measured in
    part: the ok ones that skipped some of their cases (the reason says which)."""
    counts = Counter(_worst_per_node(status_rows).values())
    lines = ["## Status", "", tabulate([[s, counts.get(s, 0)] for s in STATUSES if counts.get(s, 0)] or [["(none)", 0]],
                                       headers=["status", "test nodes"], tablefmt="github"), ""]
    for title, nodes in (("## Not ok", [s for s in status_rows if s["status"] != "ok"]),
                         # ok, with a reason: some cases skipped (not applicable to the run's dtypes)
                         ("## Measured in part", [s for s in status_rows if s["status"] == "ok" and s.get("reason")])):
        if nodes:
            lines += [title, "", tabulate(
                [[s["op"], s["test_node"], s.get("side", ""), s["status"], (s.get("reason") or "")[:160]]
                 for s in nodes],
                headers=["op", "test node", "side", "status", "reason"], tablefmt="github"), ""]
    return lines


def _results_lines(rows: List[dict]) -> List[str]:
    table = per_op_table(rows)
    rounds = any(" x " in line[3] for line in table)  # rows of rounds: an A/B's (or a log's records)
    headers = ["op", "side", "dtype", "shapes", "torch ms (median)", "gems ms (median)",
               "speedup (geomean)", "range", "timer"]
    if len({line[1] for line in table}) <= 1:  # one side (a plain run's "main"): the column says nothing
        headers.pop(1)
        table = [line[:1] + line[2:] for line in table]
    if rounds:
        legend = ("torch ms and gems ms: the median over shapes and rounds of each row's latency (a row: one round's "
                  "value); speedup: the geometric mean of each row's torch / gems over the rows that timed torch (an "
                  "A/B times it where it serves: its first round and the drift checks), so it need not equal the "
                  "ratio of the two medians; range: the lowest and highest row speedup.")
    else:
        legend = ("torch ms and gems ms: the median over shapes of each row's latency (a row's latency: a plain "
                  "run's median over its processes; in an A/B side's run.<side>.log, the geometric mean over its "
                  "rounds); speedup: the geometric mean over shapes of each row's torch / gems, so it "
                  "need not equal the ratio of the two medians; range: the lowest and highest row speedup.")
    if any(MARKER_NO_DEVICE_WORK in (r.get("markers") or []) for r in rows):
        legend += (" Rows that launched no device work on a side (a view) are left out of the speedup and its range "
                   "(their ratio compares no kernels), and counted in the timer column.")
    return ["## Results per op and dtype", "", legend, "",
            tabulate(table, headers=headers, tablefmt="github") if table else "(no measured rows)"]


def _marker_notes(rows: List[dict]) -> List[str]:
    """A note for rows timed outside the run's regime: the direct fallback, an empty replay, the corpus'
    own timer."""
    lines = []
    fallback_rows = sum(1 for r in rows if MARKER_FALLBACK in (r.get("markers") or []))
    if fallback_rows:
        lines += ["", f"> {fallback_rows} row(s) were timed by the direct fallback "
                  f"({MARKER_FALLBACK}): their regime differs from graph replay."]
    no_work = [r for r in rows if MARKER_NO_DEVICE_WORK in (r.get("markers") or [])]
    if no_work:
        lines += ["", f"> {len(no_work)} row(s) launched no device work on a side ({MARKER_NO_DEVICE_WORK}: the op "
                  "returns a view or does nothing, so its graph replays nothing): that side's latency times no "
                  "kernel and carries no process-level interval; e.g. "
                  + ", ".join(f"{_row_name(r)} ({'gems' if did_no_device_work(r) else 'torch'}, {r.get('node')})"
                              for r in no_work[:3])]
    corpus_timed = sum(1 for r in rows if MARKER_NOT_ZLBENCH_TIMER in (r.get("markers") or []))
    if corpus_timed:
        lines += ["", f"> {corpus_timed} row(s) were timed by the corpus itself ({MARKER_NOT_ZLBENCH_TIMER}: a "
                  "timing path zlbench does not patch, e.g. FlagGems' --mode operator|wrapper): their regime is "
                  "the corpus', not the run's timer."]
    return lines
