"""Two runs: which rows changed beyond their own noise.

The noise of a row comes from, in this order:
- its rounds, when both runs measured it in two or more rounds: the A/B report's paired test on
  per-round log ratios (report.stats.row_stat), rounds paired by index as `batch_summary --ab` does;
- its process-level intervals, when both runs measured it in two or more benchmark processes (a
  plain run with timer.processes >= 2): each run's `latency_ci` is a 95% prediction interval for the
  value another run of the same caliber would report. The row moved when EACH run's value lies
  outside the OTHER run's interval (see interval_stat for why this rule and not the intervals'
  overlap), each interval first widened to the family-wise level over the comparison's interval
  rows (ab/intervals.for_family: a gate judges them all at once). Both runs must carry one: a
  value measured in one process varies more than an interval made for a median over K processes
  allows, so one run's interval alone would flag too often;
- else its history: the run-to-run sd s of ln(latency) of that row over the earlier runs of the
  same caliber (up to `window`, at least MIN_HISTORY) since its last confirmed step (see
  regressions.py), from successive differences, so that an old regression is not taken for noise. A difference of two single runs has sd s*sqrt(2), so
  d = ln(B/A) gets a t interval with the estimator's effective degrees of freedom;
- else none: the row is reported `inconclusive`, never as a change, and the report says how to get
  intervals (timer.processes >= 2).
p-values of the rounds and history rows are then adjusted together (Benjamini-Hochberg) and each
row gets the A/B report's verdict (report.stats.decide): faster, slower, changed below threshold,
no difference beyond threshold, inconclusive, unstable. Interval rows get the same vocabulary from
interval_verdict. `fail_on` names the verdicts that make `history compare` exit 1 (a CI gate)."""

from __future__ import annotations

import functools
import math
import os
import re
import shlex
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from scipy import stats as sps
from scipy.special import stdtr

from zlbench.results.process_stats import RUN_OFFSET_SD
from zlbench.results.schema import short_dtype
from zlbench.ab import stats
from zlbench.report.ab import baseline_drift, drift_caveat, no_interval, overall_line
from zlbench.report.condensed import GITHUB_COMMENT_LIMIT, fit_markdown
from zlbench.config.secrets import has_password
from zlbench.ab.pairing import (LOST_STATUSES, adopt_node, name_shared_keys, op_with_test, pair, reconcile_sides,
                                 single_nodes)
from zlbench.store.db import Store
from zlbench.history.output import csv_text, json_text
from zlbench.ab.intervals import FAIL_ON, interval_stat, interval_verdict
from zlbench.history.query import (VERSION_FIELDS, changed_versions, said_changes, short_version, test_statuses, fetch_rows, intervals_by_run, iter_rows,
                                   list_runs, medians_by_run, row_key, url_option, identities, device_uuids)

MIN_HISTORY = 3
MIN_OFFSET_ROWS = 10  # rows a run shares with others for its offset to count
WINDOW = 20
FIELDS = ["op", "dtype", "shape", "side", "rounds", "a_processes", "b_processes", "a_ms", "b_ms", "change_pct", "ci_lo_pct", "ci_hi_pct",
          "p", "q", "mde_pct", "a_lo", "a_hi", "b_lo", "b_hi", "process_unstable", "noise", "fallback", "verdict"]
CHANGED = ("faster", "slower", "changed below threshold")
# Rows whose noise is too large to judge (ab/verdict.py: sd of ln(B/A) over rounds > UNSTABLE_SD):
# listed on their own, never among the changed rows, whatever their change.
UNSTABLE = "unstable"
UNSTABLE_NOTE = (f"Unstable: the row's rounds (or earlier runs) disagree too much to judge a change (sd of ln(B/A) "
                 f"above {stats.UNSTABLE_SD:g}); its change and CI are no verdict. Rerun it (more rounds, a quieter "
                 "machine) before reading it.")
# --fail-on choices under which a row A measured and B lost (its test crashed, timed out or failed
# in B) fails the gate: a kernel that stopped working is no better than a slower one.
LOST_FAILS = ("slower", "changed")


def _pct(x: Optional[float]) -> Optional[float]:
    return None if x is None else round((x - 1.0) * 100, 3)


@functools.lru_cache(maxsize=None)
def _t_quantiles(df: float):
    """(two-sided critical t at ALPHA, t at POWER): the A/B report's constants, once per df."""
    return float(sps.t.ppf(1 - stats.ALPHA / 2, df)), float(sps.t.ppf(stats.POWER, df))


def history_stat(a: float, b: float, history: List[float]) -> stats.RowStat:
    """A RowStat for one value per run, its noise taken from the row's history (see module doc)."""
    d = math.log(b / a)
    m = len(history)
    if m < MIN_HISTORY:
        return stats.RowStat(1, math.exp(d), None, None, None, None)
    logs = [math.log(x) for x in history]
    # The mean square successive difference (von Neumann): a step inside the history (an earlier
    # regression) adds one term instead of inflating every deviation from a common mean.
    s = math.sqrt(sum((y - x) ** 2 for x, y in zip(logs, logs[1:])) / (2 * (m - 1)))
    se = s * math.sqrt(2.0)
    # Successive differences carry less information than deviations from a mean: the estimator's
    # effective degrees of freedom (2 sd^4 / its variance, iid normal runs) are 2(m-1)^2/(3m-4),
    # about 2/3 of m-1. With m-1 the test's tails would be too thin (false positives at scale).
    df = round(2.0 * (m - 1) ** 2 / (3 * m - 4), 2)
    tcrit, tpow = _t_quantiles(df)
    # stdtr is the t CDF as a plain ufunc: the same number as t.sf, without scipy.stats' per-call overhead.
    p = (0.0 if d != 0 else 1.0) if se == 0 else float(2 * stdtr(df, -abs(d) / se))
    mde = (tcrit + tpow) * se
    return stats.RowStat(m, math.exp(d), math.exp(d - tcrit * se), math.exp(d + tcrit * se), se, p,
                         mde=math.exp(mde) - 1)


def current_level(history: List[float]) -> List[float]:
    """The runs since the row's last confirmed step (the regressions rule), or all of them: the
    noise of a row is its spread at its present level, not the size of an old regression."""
    from zlbench.history.regressions import find_steps

    steps = find_steps(history) if len(history) >= 2 * MIN_HISTORY else []
    return history[steps[-1]["index"]:] if steps else history


def describe(run: Mapping, by_path: bool = False) -> str:
    """by_path: the run named by its run dir (its id is that of a store not kept)."""
    commit = short_version(run.get("corpus_commit"), 10) if run.get("corpus_commit") else None
    name = run["path"] if by_path and run.get("path") else f"run {run['run_id']}"
    corpus = f"corpus {commit}" if commit else "corpus commit unknown"  # not a git checkout (the demo corpus)
    return f"{name} ({run['created']:%Y-%m-%d %H:%M}, {run.get('backend') or '-'}, {corpus})"


def compare_runs(store: Store, run_a: Mapping, run_b: Mapping, threshold: float = 0.02,
                 window: int = WINDOW, fail_on: str = "slower", lasting: bool = True) -> Dict:
    """Run B's rows against run A's, side by side, each judged on its own noise (module doc):
    {"summary", "rows" (largest change first), "unpaired"}. lasting=False: a store made for this
    compare alone, which the commands it prints must not name."""
    rows = fetch_rows(store, [run_a["run_id"], run_b["run_id"]])
    by_side = defaultdict(lambda: ([], []))
    for r in rows:
        by_side[str(r.get("side") or "main")][0 if r["run_id"] == run_a["run_id"] else 1].append(r)
    # A run read from a FlagGems log names no test node: its rows take the node of their test as the
    # pairing does (zlbench/ab/pairing.py), so their intervals and history are found under the
    # pairing's keys; earlier runs' log rows in the history, that of the one test timing their key.
    nodes = reconcile_sides(*([r for r in rows if r["run_id"] == run["run_id"]] for run in (run_a, run_b))).nodes
    keyed = [adopt_node(r, nodes) for r in rows]
    # How many processes each run's value of a row is over (a plain run's rows: timer.processes and
    # more; A/B rounds and older runs: unknown).
    processes = {(row_key(r), r["run_id"]): r.get("processes") for r in keyed if r.get("processes")}
    facts = _RowFacts(run_a, run_b, intervals_by_run(keyed), processes)
    noise_of = _HistoryNoise(store, run_b, window, {k: n for k, n in single_nodes(rows).items() if n})
    table, tested, unpaired = [], [], []
    statuses = [test_statuses(store, run["run_id"]) for run in (run_a, run_b)]  # what each selected, and how it ended
    failed = [{side: {n: e for n, e in nodes.items() if e[0] != "ok"} for side, nodes in run.items()} for run in statuses]
    paired = []  # (table entry, paired row, its intervals)
    for side in sorted(by_side):
        pairing = pair(*by_side[side], "latency", statuses=(failed[0].get(side), failed[1].get(side)), where="in run")
        for p in pairing.rows:
            t, cis = facts.row(p, side)
            paired.append((t, p, cis))
        unpaired += [{"op": k[0], "dtype": short_dtype(k[1]), "shape": k[2], "node": k[3] or None, "side": side,
                      "why": why, "lost_in": pairing.lost.get(k)} for k, why in pairing.unpaired]
    # The rows judged on intervals are judged together, at the family-wise level over them (ab/intervals.py).
    family = sum(1 for _, p, (ci_a, ci_b) in paired if len(p.a) < 2 and ci_a and ci_b)
    for t, p, cis in paired:
        tested += _judge_row(t, p, cis, noise_of, threshold, family)
        # A row B measured only in part before its test was cut (interrupted, timed out) and that
        # could not be judged: unchecked, so a gate counts it with the rows B lost.
        b_end = failed[1].get(t["side"], {}).get((t["node"] or "").split("[")[0])
        t["lost_in"] = "B" if t["noise"] == "none" and b_end and b_end[0] in LOST_STATUSES else None
        table.append(t)
    stats.analyse(tested, [None] * len(tested), threshold)  # BH over the rows with p-values only
    for t in table:
        _verdict_columns(t)
    order = {v: i for i, v in enumerate(("slower", "faster", "unstable", "changed below threshold"))}
    table.sort(key=lambda t: (order.get(t["verdict"], 9), -abs(math.log(t["ratio"])) if t["ratio"] else 0,
                              t["op"], t["dtype"], t["shape"], t["side"]))
    kept = identities(store, [run_a["run_id"], run_b["run_id"]])
    id_a, id_b = kept.get(run_a["run_id"]) or {}, kept.get(run_b["run_id"]) or {}
    apart = calibers_apart(run_a, run_b, id_a, id_b)
    unselected = Counter()
    if any(c.split(":")[0].startswith(SELECTION_FIELDS) for c in apart or []):
        # Runs that select different tests (a gate's recheck): a row whose test the other run did not
        # run at all is no unpaired row, it was never asked for; a row of a test both ran (lost, or a
        # shape the other did not measure) still is.
        dtypes = {side: {short_dtype(str(d)) for d in ((ident.get("config") or {}).get("dtypes") or [])}
                  for side, ident in (("A", id_a), ("B", id_b))}

        def not_selected(u: Mapping) -> Optional[str]:
            """The run that did not select u's test, or its dtype ('A', 'B'), else None."""
            other = {"only in run A": "B", "only in run B": "A"}.get(u["why"])
            node = (u["node"] or "").split("[")[0]
            mine, dtype = dtypes["A" if other == "B" else "B"], short_dtype(str(u.get("dtype")))
            if other and dtypes[other] and dtype not in dtypes[other] and (not mine or dtype in mine):
                return other  # a dtype its run asked for and the other run's dtypes= left out
            return other if other and node and node not in statuses[other == "B"].get(u["side"], {}) else None

        whose = [not_selected(u) for u in unpaired]
        unselected.update(filter(None, whose))
        unpaired = [u for u, w in zip(unpaired, whose) if not w]
    name_shared_keys(table + unpaired, ("op", "dtype", "shape", "side"))
    summary = _summary(run_a, run_b, table, unpaired, threshold, noise_of.runs, fail_on, noise_of.run_offset(), apart,
                       lasting, (id_a, id_b))
    summary["b_is_recheck"] = is_recheck(run_b)
    summary["lost_ends"] = lost_ends(table + unpaired, failed[1])
    summary["baseline_drift"] = baseline_drift([p for _, p, _ in paired])  # as ab.md reads it between sides
    # Tests that ended badly in some of a run's processes but left rows judged from the others (a
    # crash in one of three): the verdicts hold, and the crash would go unsaid.
    judged = {(t["side"], (t["node"] or "").split("[")[0]) for t in table if not t.get("lost_in")}
    summary["ended_badly"] = {run: sorted({(node, *ends[side][node]) for side, node in judged
                                           if ends.get(side, {}).get(node, ("ok",))[0] in LOST_STATUSES})
                              for run, ends in zip("AB", failed)}
    # The recheck records into this store (B's own store.url may be relative to where B ran), so the
    # follow-up compare finds it; a URL with a password is left to the environment.
    summary["recheck"] = recheck(run_b, table, unpaired, fail_on, _not_b_switches(id_a, id_b, run_b),
                                 store_url=None if has_password(store.url) or not lasting else store.url)
    if summary["recheck"]:
        # What to run after it, pasteable: A by its run dir where it has one, else its id in this store.
        a = run_a["path"] if run_a.get("path") and Path(run_a["path"]).is_dir() else run_a["run_id"]
        summary["recheck"]["compare"] = (f"python -m zlbench history {url_option(store) if lasting else ''}compare "
                                         f"{shlex.quote(str(a))} {shlex.quote(summary['recheck']['run_dir'])}")
    summary["not_selected"] = {"A": unselected["A"], "B": unselected["B"]}
    summary["devices_apart"] = devices_apart(id_a, id_b)
    # which of A and B are A/B runs (their rows are rounds, judged on rounds, not processes)
    summary["ab_runs"] = [side for side, ident in (("A", id_a), ("B", id_b))
                          if (((ident.get("config") or {}).get("ab") or {}).get("name") or "none") != "none"]
    summary["sides"] = {"a": sorted(k for k, (ra, _) in by_side.items() if ra),
                        "b": sorted(k for k, (_, rb) in by_side.items() if rb)}
    return {"summary": summary, "rows": table, "unpaired": unpaired}


class _RowFacts:
    """What a paired row of the two runs carries before it is judged: values, intervals, markers."""

    def __init__(self, run_a: Mapping, run_b: Mapping, intervals: Mapping, processes: Mapping):
        self.runs, self.intervals, self.processes = (run_a, run_b), intervals, processes

    def row(self, p, side: str):
        """The row's table entry, and each run's interval (None: it has none)."""
        key = (*p.key, side)
        ci_a, ci_b = (self.intervals.get(key, {}).get(run["run_id"]) for run in self.runs)
        return {"op": p.key[0], "dtype": short_dtype(p.key[1]), "shape": p.key[2], "node": p.key[3] or None, "side": side,
                "rounds": len(p.a), "a_processes": self.processes.get((key, self.runs[0]["run_id"])),
                "b_processes": self.processes.get((key, self.runs[1]["run_id"])),
                # geometric means over the rounds: their ratio is the change (a mean log ratio)
                "a_ms": statistics.geometric_mean(p.a), "b_ms": statistics.geometric_mean(p.b),
                "a_lo": ci_a and ci_a[0], "a_hi": ci_a and ci_a[1], "b_lo": ci_b and ci_b[0],
                "b_hi": ci_b and ci_b[1], "fallback": p.fallback,
                "process_unstable": p.process_unstable}, (ci_a, ci_b)


def _judge_row(t: Dict, p, cis, noise_of: "_HistoryNoise", threshold: float, family: int = 1) -> List[stats.RowStat]:
    """The row's statistic by its noise source (module doc) into t["stat"]; returns it where it has
    a p-value for the Benjamini-Hochberg adjustment (rounds, history), else nothing. family: the
    rows judged on intervals in this comparison."""
    ci_a, ci_b = cis
    if len(p.a) < 2 and ci_a and ci_b:
        s = interval_stat(p.a[0], ci_a, p.b[0], ci_b, family)
        s.verdict, t["noise"] = interval_verdict(s, threshold), "intervals"
        t["stat"] = s
        return []
    if len(p.a) >= 2:
        s, t["noise"] = stats.row_stat(p.a, p.b), "rounds"
    else:
        s, t["noise"] = noise_of((*p.key, t["side"]), statistics.median(p.a), statistics.median(p.b))
    t["stat"] = s
    return [s]


def _verdict_columns(t: Dict) -> None:
    s = t.pop("stat")
    t.update({"change_pct": _pct(s.ratio), "ci_lo_pct": _pct(s.lo), "ci_hi_pct": _pct(s.hi), "p": s.p,
              "q": s.q, "mde_pct": None if s.mde is None else round(s.mde * 100, 2), "verdict": s.verdict,
              "ratio": s.ratio})


def _summary(run_a: Mapping, run_b: Mapping, table: List[Dict], unpaired: List[Dict], threshold: float,
             history_runs: int, fail_on: str, run_offset: Tuple[float, int] = (RUN_OFFSET_SD, 0),
             apart: Optional[List[str]] = None, lasting: bool = True,
             kept: Tuple[Mapping, Mapping] = ({}, {})) -> Dict:
    """lasting=False: the runs named by their run dirs, without ids (those of a store gone when compare
    ends); kept: the identities the store keeps of A and B (their corpus checkouts)."""
    lost_rows = sum(1 for u in unpaired + table if u.get("lost_in") == "B")
    failing_rows = sum(1 for t in table if t["verdict"] in FAIL_ON[fail_on])
    failing_rows += lost_rows if fail_on in LOST_FAILS else 0
    # An unstable row has a noise estimate but no verdict: a gate whose every row is unstable judged none.
    judged = sum(1 for t in table if t["noise"] != "none" and t["verdict"] != UNSTABLE)
    return {
        "run_a": _public(run_a, lasting), "run_b": _public(run_b, lasting),
        "label_a": describe(run_a, by_path=not lasting), "label_b": describe(run_b, by_path=not lasting),
        "same_caliber": run_a["caliber"] == run_b["caliber"], "threshold": threshold,
        "history_runs": history_runs, "paired_rows": len(table), "unpaired_rows": len(unpaired),
        "verdicts": dict(Counter(t["verdict"] for t in table)),
        "noise_sources": dict(Counter(t["noise"].split(" ")[0] for t in table)),
        # Rows left without any noise estimate, by the run that lacks a process-level interval.
        "without_intervals": {"A": sum(1 for t in table if t["noise"] == "none" and t["a_lo"] is None),
                              "B": sum(1 for t in table if t["noise"] == "none" and t["b_lo"] is None)},
        "process_unstable_rows": sum(1 for t in table if t["process_unstable"]),
        # Rows drawn per process or too noisy to judge are left out, and each run's offset over all its
        # rows widens the interval: without either, 15 of 46 pairs of repeat runs on the H200 read
        # an overall change whose interval left out 0; with both, 3 (process_stats.RUN_OFFSET_SD).
        "overall": {**overall_line(table, [(t["node"] or t["op"], t["side"]) for t in table],
                                   run_offset_sd=run_offset[0]), "run_offset_runs": run_offset[1]},
        "changed_versions": changed_versions(run_a, run_b, *kept),
        "fail_on": fail_on, "failing_rows": failing_rows, "lost_rows": lost_rows,
        "judged_rows": judged,
        "gate_exit": gate_exit(fail_on, judged, failing_rows),
        "recheck": None,  # compare_runs: it names the store
        "calibers_apart": apart,
    }


def recheck(run_b: Mapping, table: List[Dict], unpaired: List[Dict], fail_on: str, unset: Sequence[str] = (),
            store_url: Optional[str] = None) -> Optional[Dict[str, str]]:
    """The command that measures the ops of B's failing rows (and of rows B lost, where they fail the
    gate: a crash may be a flake too) again, in fresh processes and a new run
    dir beside B's, with B's settings: a row drawn badly by B's processes (a cut run's one or two,
    a state drawn per run) reads apart from a real change when `history compare A RECHECK` says it
    again. {"command", "run_dir"}; None where nothing fails or B's run dir is gone (a result log,
    another machine)."""
    from zlbench.results.events import base_node
    from zlbench.results.rundir import PLAN_FILE, load_plan, recheck_command
    from zlbench.errors import UsageError

    failing = [t for t in table if t["verdict"] in FAIL_ON[fail_on]]
    failing += [u for u in unpaired + table if u.get("lost_in") == "B"] if fail_on in LOST_FAILS else []
    path = Path(run_b.get("path") or "")
    if not failing or not (path / PLAN_FILE).is_file() or is_recheck(run_b):
        return None  # a recheck's failing rows failed twice: no third run is offered
    try:
        marks = {n["nodeid"]: n.get("op") for n in load_plan(path).get("nodes", [])}
    except UsageError:
        return None
    ops = sorted({marks.get(base_node(t["node"] or "")) or t["op"] for t in failing})
    # A new run dir each time: into one an earlier recheck filled, the command would resume it.
    into = next(d for d in (path.with_name(path.name + ".recheck" + (str(i) if i > 1 else "")) for i in range(1, 10**6))
                if not d.exists())
    return {"command": recheck_command(path, ops, into, unset=unset, store_url=store_url),
            "run_dir": str(into)}


def lost_ends(rows: List[Mapping], b_failed: Mapping) -> Dict[str, Any]:
    """How B's tests of the rows it lost ended: {"statuses": {status: rows}, "node_timeout":
    the limit the reason names where a test was cut by launcher.node_timeout_s, else None}."""
    ends = [b_failed.get(r["side"], {}).get((r["node"] or "").split("[")[0]) for r in rows if r.get("lost_in") == "B"]
    limits = [m.group(1) for e in ends if e and (m := re.search(r"node_timeout_s=([0-9.]+)s", e[1] or ""))]
    # the limit where every row was lost to it (a run-limit cut is a timeout too, and a resume measures it)
    return {"statuses": dict(Counter(e[0] if e else "unknown" for e in ends)),
            "node_timeout": limits[0] if ends and len(limits) == len(ends) and len(set(limits)) == 1 else None}


def _lost_how(ends: Mapping[str, Any]) -> str:
    """'their tests ran past launcher.node_timeout_s=0.3s', or 'their tests ended: crashed 2, timeout 1'."""
    statuses = ends.get("statuses") or {}
    if set(statuses) == {"timeout"}:
        return (f"their tests ran past launcher.node_timeout_s={ends['node_timeout']}s" if ends.get("node_timeout")
                else "their tests timed out")
    return "their tests ended: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))


def is_recheck(run: Mapping) -> bool:
    """A run dir a failing gate's recheck command measured into (`<B>.recheck`, `.recheck2`, ...)."""
    return bool(re.search(r"\.recheck\d*$", Path(run.get("path") or "").name))


def _not_b_switches(a: Mapping, b: Mapping, run_b: Mapping) -> List[str]:
    """Switch variables B ran without that A set or this shell sets (a, b: their identities): the
    recheck unsets them (a shell that sets the switch A had, rechecking a B that lacked it, measured
    A's kernels again)."""
    from zlbench.backends.registry import get_backend
    from zlbench.errors import UsageError
    from zlbench.planning.switches import switch_env

    try:
        here = switch_env(get_backend(str(run_b.get("backend") or "cpu")), os.environ)
    except UsageError:
        return []
    return sorted(({*(a.get("switch_env") or {})} | {*here}) - {*(b.get("switch_env") or {})})


def gate_exit(fail_on: str, judged_rows: int, failing_rows: int) -> int:
    """compare's exit code: 1 where a row fails (a verdict --fail-on names, or a row B lost); else 2
    where the gate judged no row (none paired, none with a noise estimate, or every one unstable: such a
    gate would pass having checked nothing); --fail-on none never fails."""
    if fail_on == "none":
        return 0
    if failing_rows:
        return 1
    return 0 if judged_rows else 2


class _HistoryNoise:
    """A row's noise from its history (module doc), the earlier runs read once and only when a
    row needs them."""

    def __init__(self, store: Store, run_b: Mapping, window: int, nodes: Mapping):
        # Earlier runs of B's caliber, newest `window` of them (A among them when it is one).
        self.earlier = [r["run_id"] for r in list_runs(store, caliber=run_b["caliber"])
                        if (r["created"], r["run_id"]) < (run_b["created"], run_b["run_id"])][-window:]
        self.runs = len(self.earlier)
        self.store, self.nodes = store, nodes  # a log's rows adopt the one test that times their key
        self._medians = None

    def _loaded(self):
        if self._medians is None:
            fields = ("run_id", "op", "dtype", "shape", "side", "latency", "status", "markers", "node")
            self._medians = medians_by_run(adopt_node(r, self.nodes) for r in iter_rows(self.store, self.earlier,
                                                                                           fields=fields))
        return self._medians

    def run_offset(self) -> Tuple[float, int]:
        """(sd of a run's offset over all its rows, the earlier runs it rests on): each earlier run's
        median over rows of its log distance from the row's mean over them, their sd, over the runs
        since the offsets' last step (a change that moved every row is no run's noise) and runs of
        MIN_OFFSET_ROWS rows or more (a recheck of two ops is no run's offset). RUN_OFFSET_SD,
        measured on an H200, is the floor (and the value, 0 runs, where fewer than MIN_HISTORY runs
        remain or they read less): a noisier machine (a shared CPU: 3 of 4 repeat pairs read an
        overall change whose interval left out 0) shows its own in its history."""
        if self.runs < MIN_HISTORY:
            return RUN_OFFSET_SD, 0
        distances: Dict[int, List[float]] = defaultdict(list)
        for per_run in self._loaded().values():
            present = [rid for rid in self.earlier if rid in per_run]
            if len(present) >= MIN_HISTORY:
                center = statistics.fmean(math.log(per_run[rid]) for rid in present)
                for rid in present:
                    distances[rid].append(math.log(per_run[rid]) - center)
        offsets = current_level([math.exp(statistics.median(distances[rid])) for rid in self.earlier
                                 if len(distances[rid]) >= MIN_OFFSET_ROWS])  # oldest first
        if len(offsets) < MIN_HISTORY:
            return RUN_OFFSET_SD, 0
        sd = statistics.stdev(math.log(o) for o in offsets)
        return (sd, len(offsets)) if sd > RUN_OFFSET_SD else (RUN_OFFSET_SD, 0)

    def __call__(self, key, a: float, b: float):
        per_run = self._loaded().get(key, {})
        h = current_level([per_run[rid] for rid in self.earlier if rid in per_run])  # oldest first
        return history_stat(a, b, h), (f"history ({len(h)} runs)" if len(h) >= MIN_HISTORY else "none")


def _public(run: Mapping, lasting: bool = True) -> dict:
    """The run as compare.json shows it (lasting=False: no run_id, that of a store gone)."""
    return {k: None if k == "run_id" and not lasting else (v.isoformat() if hasattr(v, "isoformat") else v)
            for k, v in run.items() if k in ("run_id", "run_key", "created", "path", "backend", "device_name", "timer",
                                             "caliber", *VERSION_FIELDS)}


def _fmt_pct(ratio: Optional[float]) -> str:
    return "-" if ratio is None else f"{(ratio - 1) * 100:+.2f}%"


def render_markdown(result: Mapping, all_rows: bool = False, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    s = result["summary"]
    out = [f"# History: {s['label_a']} (A) vs {s['label_b']} (B)", ""]
    out += _caliber_lines(s)
    out += _result_lines(s)
    out += _unpaired_lines(result)
    listed = (*CHANGED, UNSTABLE)
    if not all_rows:
        out.append(f"- {sum(1 for t in result['rows'] if t['verdict'] not in listed)} other row(s) not flagged "
                   "(their verdicts above; --all lists them, and so do compare.csv and compare.json under --out).")
    changed = [_row_cells(t) for t in result["rows"] if t["verdict"] in CHANGED]  # rows come largest change first
    unstable = [_row_cells(t) for t in result["rows"] if t["verdict"] == UNSTABLE]
    rest = [_row_cells(t) for t in result["rows"] if t["verdict"] not in listed] if all_rows else []
    headers = ["Operator", "dtype", "shape", "side", "A ms (geo)", "B ms (geo)", "change", "95% CI", "q", "noise", "verdict"]
    # Under a pull-request comment's limit at corpus scale: the rest goes inside <details>, cut if need be.
    text = fit_markdown("\n".join(out), f"## Changed rows ({len(changed)})", changed, [] if unstable else rest,
                        headers, limit, "compare.csv")
    if unstable:
        text = fit_markdown(text, f"## Unstable rows ({len(unstable)})\n\n{UNSTABLE_NOTE}", unstable, rest, headers,
                            limit, "compare.csv")
    return text


# Caliber fields that choose which tests run, not how a row is measured.
SELECTION_FIELDS = ("config.ops", "config.op_file", "config.test_node", "config.dtypes")


def calibers_apart(run_a: Mapping, run_b: Mapping, ia: Mapping, ib: Mapping) -> Optional[List[str]]:
    """'key: A's -> B's' for each caliber field A and B differ in, read from the identities the store
    keeps (ia, ib: a run dir moved or on another machine is no matter); None where the calibers are
    equal or a run is a FlagGems log (no identity)."""
    from zlbench.report.batch_summary import _changes, _flat
    from zlbench.results.identity_layout import said_once
    from zlbench.store.ingest import caliber_fields

    if run_a["caliber"] == run_b["caliber"]:
        return None
    if not ("config" in ia and "config" in ib):
        return None
    # lists kept whole: 'config.ops: [exp, add] -> [exp]'
    fa, fb = (_flat(caliber_fields(i), lists=False) for i in (ia, ib))
    keys = said_once(fa, fb, fa.keys() | fb.keys())  # the timer once, not again under config

    def said_as(key: str, other: str) -> bool:
        return other in keys and (fa.get(key), fb.get(key)) == (fa.get(other), fb.get(other))
    # `rounds` is timer.processes (a plain run) or ab.rounds (an A/B) again.
    return _changes(fa, fb, [k for k in keys if not (
        k == "rounds" and (said_as(k, "timer.processes") or said_as(k, "config.ab.rounds")))])


def devices_apart(ia: Mapping, ib: Mapping) -> Optional[Dict[str, List[str]]]:
    """{"a", "b": the device UUIDs each run's benchmark processes ran on} where the two runs share
    none (another machine of the same kind: its caliber is the same), else None. A device's own
    offset (clocks, memory) is drawn per device, not per process: no row's interval holds it."""
    a, b = device_uuids(ia), device_uuids(ib)
    return {"a": sorted(a), "b": sorted(b)} if a and b and not a & b else None


def _caliber_lines(s: Mapping) -> List[str]:
    """What differs between A and B besides the code: their selections, calibers and versions."""
    out = []
    apart = s.get("calibers_apart") or []
    chosen = [c for c in apart if c.split(":")[0].startswith(SELECTION_FIELDS)]
    others = [c for c in apart if c not in chosen]
    sides = s.get("sides") or {}
    if sides.get("a") and sides.get("b") and not set(sides["a"]) & set(sides["b"]):
        # A plain run against an A/B (or two sides of a sweep): no row could pair, whatever each selected.
        out.append(f"- A holds rows of side {', '.join(sides['a'])} and B of side {', '.join(sides['b'])}: rows pair "
                   "within one side (the same A/B side, or plain runs' main), so none paired. Two sides of an A/B "
                   "pair with `zlbench summary A_DIR --ab B_DIR`; an A/B run's own ab.md judges it.")
        if chosen:
            out.append(f"- A and B select different tests as well ({'; '.join(chosen)}).")
    elif chosen:
        left = s.get("not_selected") or {}
        left_out = " and ".join(f"{n} row(s) of {side}'s that {other} did not select" for side, other in (("A", "B"), ("B", "A"))
                                if (n := left.get(other)))
        both = "the rows both measured are compared" if s["paired_rows"] else "no row is in both" + (
            f" (B lost the {s['lost_rows']} row(s) of A's tests it selected: {_lost_how(s['lost_ends'])})"
            if s.get("lost_rows") and s.get("lost_ends") else "")
        out.append(f"- A and B select different tests ({'; '.join(chosen)}): {both}"
                   + (f"; {left_out} are left out" if left_out else "") + ".")
    if others or (not s["same_caliber"] and not apart):
        out.append("- **Different calibers**: A and B differ in more than versions and commits"
                   + (" and their selection" if chosen else "") + " ("
                   + ("; ".join(others[:6]) + ("; ..." if len(others) > 6 else "") if others else
                      "backend, timer, selection, switches ...")
                   + "); a change may be the configuration, not the code.")
    if s.get("a_chosen"):
        out.append(f"- {s['a_chosen']}.")
    if s.get("devices_apart"):
        short = {k: ", ".join(u[:8] for u in v) for k, v in s["devices_apart"].items()}
        out.append(f"- **Different devices**: A ran on {short['a']}, B on {short['b']} (device UUIDs): a device's "
                   "own offset is in neither run's intervals (over archived repeat runs on 2-4 GPUs of a kind, 86% of "
                   "rows' intervals held another GPU's value against 95% on one GPU; in those pairs compare flagged "
                   "0.9% of rows between GPUs, most against one GPU, and 0.05% on one: RESULTS.md, fortieth "
                   "session), and a recheck runs where B did. A row judged moved may be the device's; runs of one "
                   "device judge the code.")
    if s["changed_versions"]:
        out.append("- Changed between A and B: " + said_changes(s["changed_versions"]) + ".")
    return out


def _result_lines(s: Mapping) -> List[str]:
    """The overall change, the verdicts, where the noise came from and what fails the comparison."""
    out = []
    o = s["overall"]
    known = sum(v for k, v in s["noise_sources"].items() if k != "none")
    if o["geomean"] is not None:
        ci = (f" (95% CI {_fmt_pct(o['lo'])} .. {_fmt_pct(o['hi'])}: a bootstrap resampling tests, widened by "
              f"each run's offset over all its rows, sd {o['run_offset_sd'] * 100:.2g}% a run"
              + (f" (from {o['run_offset_runs']} earlier runs of B's caliber)" if o.get("run_offset_runs") else "")
              + ")") if o["lo"] is not None \
            else no_interval(o)
        out.append(f"- Overall B/A latency: **{_fmt_pct(o['geomean'])}**{ci} over {o['rows']} row(s) "
                   "(geometric mean; negative = B faster)" + _left_out(o)
                   + ("; not a verdict: no row has a noise estimate." if not known else "."))
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(s["verdicts"].items())) or "none"
    out.append(f"- Verdicts: {counts}.")
    ra, rb = s.get("run_a") or {}, s.get("run_b") or {}
    where = {k: (ra.get(k), rb.get(k)) for k in ("backend", "device_name")
             if ra.get(k) and rb.get(k) and ra.get(k) != rb.get(k)}  # a log imported without them: unknown, not apart
    drift = drift_caveat(s.get("baseline_drift") or {}, s["threshold"], between="the runs")
    if drift and where:
        # Two devices (or vendors): their own speeds, not a machine drifting.
        said = "; ".join(f"{'device' if k == 'device_name' else k} {a or '-'} -> {b or '-'}" for k, (a, b) in where.items())
        out.append(f"- {drift[0].upper()}{drift[1:].replace(': suspect machine drift', '')}: A and B ran on different "
                   f"devices ({said}), so every row's change includes the devices' own difference. "
                   + ("`zlbench history vendors` compares backends on their speedups over torch." if "backend" in where
                      else "Compare runs of one device to judge the code."))
    elif drift:
        out.append(f"- {drift[0].upper()}{drift[1:]}: every row's change includes it. Compare runs made on one "
                   "quiet machine, or measure B again (a gate's recheck) before reading the rows.")
    out += _noise_lines(s)
    for run, ended in (s.get("ended_badly") or {}).items():
        if ended:
            listed = "; ".join(f"{node}: {status}" for node, status, _ in ended[:3]) + \
                (f"; {len(ended) - 3} more" if len(ended) > 3 else "")
            out.append(f"- {len(ended)} test(s) of run {run} did not end ok ({listed}), though their rows "
                       "were compared, from the processes that measured them: no verdict here says it, and "
                       "the gate does not count it; see that run's ops_status.csv.")
    if s.get("process_unstable_rows"):
        out.append(f"- {s['process_unstable_rows']} row(s) whose op's processes read apart in A or B "
                   "(BENCHMARK_PROCESS_UNSTABLE, e.g. an autotune pick): their intervals rest on their own spread.")
    wanted = sorted(FAIL_ON[s["fail_on"]])
    if wanted and s.get("gate_exit") == 2:
        out.append(f"- Gate (--fail-on {s['fail_on']}): **no row judged** ("
                   + ("no row paired" if not s["paired_rows"] else
                      "every paired row unstable: too noisy to judge" if set(s.get("verdicts") or {}) == {UNSTABLE}
                      else "no paired row had a noise estimate")
                   + "): exit 2, a gate that checked nothing does not pass.")
    elif wanted:
        lost = s.get("lost_rows", 0) if s["fail_on"] in LOST_FAILS else 0
        out.append(f"- Gate (--fail-on {s['fail_on']}): {s['failing_rows'] - lost} row(s) {' or '.join(wanted)}"
                   + (f", {lost} row(s) lost in B (measured in A; in B their test crashed, timed out, failed or was "
                      "interrupted, leaving no row or one too little measured to judge)" if lost else "")
                   + (": exit 1." if s["failing_rows"] else ": exit 0."))
        if s.get("recheck"):
            out.append("- Before reading them as regressions, measure their ops again in fresh processes: "
                       f"`{s['recheck']['command']}`, then compare A with that run (`{s['recheck']['compare']}`): "
                       "a row slower again is one. Two runs of one commit fail a gate now and then, where a "
                       "row's processes or its run drew another state.")
        elif s.get("b_is_recheck") and s["failing_rows"]:
            judged = s["failing_rows"] - lost  # rows with a failing verdict in the recheck itself
            if judged:
                out.append(f"- B is a gate's recheck (the failing rows' ops measured again in fresh processes): "
                           f"{judged} row(s) {' or '.join(wanted)} in this second run of B's code too: **confirmed**, "
                           "not a draw of one run.")
            ends = s.get("lost_ends") or {}
            if lost and set(ends.get("statuses") or ()) == {"timeout"} and ends.get("node_timeout"):
                limit = f"launcher.node_timeout_s={ends['node_timeout']}s"
                other = any(c.startswith("config.launcher.node_timeout_s:") for c in s.get("calibers_apart") or [])
                out.append(f"- The recheck lost {lost} row(s): their tests ran past {limit} in it, so under B's code "
                           "they take longer than that limit (slower, or hung), and a recheck at the same limit "
                           "cannot measure them"
                           + ("; A ran under another limit (above), so A's rows may be as slow" if other else "")
                           + ". To measure them, run the recheck again with a longer launcher.node_timeout_s.")
            elif lost:
                out.append(f"- The recheck lost {lost} row(s) ({_lost_how(ends) if ends else 'cut, crashed or failed'}): "
                           "they are no confirmation; resume it as its run printed, or run the recheck again.")
    return out


def _left_out(o: Mapping) -> str:
    parts = [f"{n} {what} row(s)" for n, what in ((o.get("unstable_left_out"), "unstable"),
                                                   (o.get("process_unstable_left_out"), "process-unstable")) if n]
    return f"; {' and '.join(parts)} left out (each judged on its own)" if parts else ""


def _noise_lines(s: Mapping) -> List[str]:
    """Where the rows' noise came from, and what to do for rows that had none."""
    legend = {"intervals": "each run's own process-level 95% interval, a row moved when each value lies outside "
                           "the other run's interval",
              "rounds": "the rows' own rounds",
              "history": f"the row over {s['history_runs']} earlier run(s) of this caliber",
              "none": "no interval and too little history, so inconclusive"}
    sources = sorted(s["noise_sources"].items())
    out = [f"- Noise from: {', '.join(f'{k}: {v}' for k, v in sources) or '-'}"
           + (f" ({'; '.join(f'{k}: {legend[k]}' for k, _ in sources if k in legend)})." if sources else ".")]
    missing = s.get("without_intervals") or {}
    if s["noise_sources"].get("none") and s.get("ab_runs"):
        out.append(f"- **Too few rounds** to judge {s['noise_sources']['none']} row(s): {' and '.join(s['ab_runs'])} "
                   f"{'is an A/B run' if len(s['ab_runs']) == 1 else 'are A/B runs'}, whose rows are rounds, and "
                   "a row is judged on its rounds where both runs have 2 or more of it (else on earlier runs of "
                   "its caliber). Fix: resume a run cut before its second round (its overrides and "
                   "resume=RUN_DIR); its own ab.md judges each A/B.")
    elif s["noise_sources"].get("none"):
        which = " and ".join(f"{k} ({v} row(s))" for k, v in sorted(missing.items()) if v) or "A or B"
        out.append(f"- **No process-level intervals** in {which}: measured in one process (timer.processes=1, "
                   "a zlbench before intervals, or a run cut before its other processes, with too few rows of "
                   "several processes like them to borrow a spread from), and too little history to judge "
                   f"{s['noise_sources']['none']} row(s). Fix: rerun with timer.processes>=2 (the default), or "
                   "resume a cut run (its overrides and resume=RUN_DIR); two such runs compare on their own intervals.")
    return out


def _unpaired_lines(result: Mapping) -> List[str]:
    s = result["summary"]
    out = []
    cut = [t for t in result["rows"] if t.get("lost_in") == "B"]
    if cut:
        counted = "; a gate counts them with the rows B lost" if s["fail_on"] in LOST_FAILS else ""
        out.append(f"- Not judged, their test cut in B (measured there too little to judge{counted}): " + "; ".join(f"{op_with_test(t)} {t['dtype']} {t['shape']} [{t['side']}]"
                                                        for t in cut[:5])
                   + (f"; ... {len(cut) - 5} more in compare.json" if len(cut) > 5 else "") + ".")
    if s["unpaired_rows"]:
        out.append(f"- Caveat: {s['unpaired_rows']} row(s) unpaired: the comparison is incomplete.")
    if result["unpaired"]:
        out.append("- Unpaired: " + "; ".join(f"{op_with_test(u)} {u['dtype']} {u['shape']} [{u['side']}]: {u['why'][:120]}"
                                               for u in result["unpaired"][:5])
                   + (f"; ... {len(result['unpaired']) - 5} more in compare.json" if len(result["unpaired"]) > 5 else "")
                   + ".")
    return out


def _row_cells(t: Mapping) -> List[str]:
    ci = f"{t['ci_lo_pct']:+.2f}%..{t['ci_hi_pct']:+.2f}%" if t["ci_lo_pct"] is not None else "-"
    return [op_with_test(t), t["dtype"], t["shape"], t["side"], f"{t['a_ms']:.5g}", f"{t['b_ms']:.5g}",
            f"{t['change_pct']:+.2f}%", ci, "-" if t["q"] is None else f"{t['q']:.3g}", t["noise"],
            t["verdict"] + (" (fallback)" if t["fallback"] else "")
            + (" (process-unstable)" if t.get("process_unstable") else "")]


def render_csv(result: Mapping) -> str:
    return csv_text(result["rows"], FIELDS)


def render_json(result: Mapping) -> str:
    return json_text(result)


def write(result: Mapping, out_dir: Path, all_rows: bool = False) -> List[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in (("compare.md", render_markdown(result, all_rows)), ("compare.csv", render_csv(result)),
                       ("compare.json", render_json(result))):
        (out_dir / name).write_text(text, encoding="utf-8")
        paths.append(out_dir / name)
    return paths
