"""Steps in a caliber's series of runs: a change that persists, not one outlier.

Runs of one caliber are ordered by creation time (a nightly run measures each commit after the
last). For every row (operator, dtype, shape, side), with one value per run (the median of its
rounds) and for every split of the series into `k` runs before and `k` runs after:

    step  = median(ln after) - median(ln before)
    noise = 1.4826 * median(|x - median(its half)|) over both halves (a robust sd of one run)

A split is a step when |step| >= ln(1 + threshold) (big enough to matter) and |step| >= z * noise
(beyond the run-to-run spread). When every run of the row carries a process-level interval (plain
runs with timer.processes >= 2: a 95% interval for the value another run would report), the
intervals replace the spread, which 2k runs estimate poorly: the step must take the median after
the split outside the before runs' interval (the medians of their bounds) and the median before
outside the after runs' interval (the compare rule, ab/intervals.py, on the two levels). One outlier moves neither median, so it is never a step; a change
must hold for most of the k runs after it. Neighbouring splits of one change all qualify; the one
where two flat segments fit the runs around them best (least squares) is reported, naming the
first run after it: its commits and versions, and
which of them changed since the run before. Steps in the last k-1 runs are not yet confirmed and
are not reported. The torch baseline's step at the same split is shown beside it: when torch moved
too, suspect the machine or torch rather than the operator."""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from tabulate import tabulate

from zlbench.ab.pairing import name_shared_keys, op_with_test
from zlbench.results.schema import NO_WORK_MS, short_dtype
from zlbench.errors import UsageError
from zlbench.store.db import Store
from zlbench.history.output import csv_text, json_text
from zlbench.history.query import (VERSION_FIELDS, changed_versions, identities, intervals_by_run, iter_rows, list_runs,
                                   medians_by_run, ops_of, said_changes)

K = 3
THRESHOLD = 0.05
NOISE_Z = 3.0
# `--fail-on` of `history regressions`: which kinds of step make it exit 1.
FAIL_ON = {"regression": ("regression",), "improvement": ("improvement",), "any": ("regression", "improvement"),
           "none": ()}
FIELDS = ["op", "dtype", "shape", "side", "kind", "change_pct", "before_ms", "after_ms", "baseline_change_pct",
          "noise_pct", "noise_from", "first_run", "first_created", "corpus_commit", "zlbench_commit", "triton_version",
          "changed"]


def _robust_sd(*halves: Sequence[float]) -> float:
    dev = [abs(x - float(np.median(h))) for h in halves for x in h]
    return 1.4826 * float(np.median(dev)) if dev else 0.0


def _windows(x: Sequence[float], k: int) -> np.ndarray:
    """Every window of k values at once."""
    return np.lib.stride_tricks.sliding_window_view(np.asarray(x, float), k)


def _beyond_intervals(med: np.ndarray, intervals: Sequence[Tuple[float, float]], k: int) -> np.ndarray:
    """Per split (before = window i-k, after = window i): each side's median outside the other side's
    interval (the medians of its runs' log bounds)."""
    lo = np.median(_windows([math.log(c[0]) for c in intervals], k), axis=1)
    hi = np.median(_windows([math.log(c[1]) for c in intervals], k), axis=1)
    before, after = med[:-k], med[k:]
    return (((after < lo[:-k]) | (after > hi[:-k])) & ((before < lo[k:]) | (before > hi[k:])))


def _half_width(intervals: Sequence[Tuple[float, float]]) -> float:
    """The typical half-width of these intervals in log units (what the report calls their noise)."""
    return float(np.median([(math.log(c[1]) - math.log(c[0])) / 2 for c in intervals]))


def find_steps(values: Sequence[float], k: int = K, threshold: float = THRESHOLD, z: float = NOISE_Z,
               intervals: Optional[Sequence[Tuple[float, float]]] = None) -> List[Dict]:
    """Steps in one series of positive values, oldest first: [{'index', 'step', 'noise',
    'noise_from'}], where index is the first value after the step. intervals: each value's
    process-level interval (lo, hi), every one of them, or None (the spread rule)."""
    logs = [math.log(v) for v in values]
    n = len(logs)
    if n < 2 * k:
        return []
    # At least `threshold` as a change either way: +5% up, -5% down (not -4.8%, the log of 1/1.05).
    up, down = math.log(1 + threshold), math.log(max(1e-9, 1 - threshold))
    # Every window of k runs at once: its median and its values' distances from that median.
    windows = _windows(logs, k)
    med = np.median(windows, axis=1)
    dist = np.abs(windows - med[:, None])
    # Split i (k <= i <= n-k): before = window i-k, after = window i.
    steps_all = med[k:] - med[:-k]
    noise_all = 1.4826 * np.median(np.hstack([dist[:-k], dist[k:]]), axis=1)
    beyond = (_beyond_intervals(med, intervals, k) if intervals is not None
              else np.abs(steps_all) >= z * noise_all)
    flagged = [{"index": j + k, "step": float(st), "noise": float(no)}
               for j, (st, no, out) in enumerate(zip(steps_all, noise_all, beyond))
               if (st >= up or st <= down) and out]
    groups: List[List[Dict]] = []
    for f in flagged:  # neighbouring splits of one change, same direction
        if groups and f["index"] - groups[-1][-1]["index"] <= 1 and (f["step"] > 0) == (groups[-1][-1]["step"] > 0):
            groups[-1].append(f)
        else:
            groups.append([f])
    # Medians of k runs cannot tell which of neighbouring splits is the step (several see most of
    # it, and the true one may lie a little past the last flagged split): the split where two flat
    # segments fit the runs around the group best (least squares) is the step.
    steps = []
    for g in groups:
        lo, hi = max(0, g[0]["index"] - k), min(n, g[-1]["index"] + k)

        def misfit(i):
            left, right = logs[lo:i], logs[i:hi]
            return float(np.var(left) * len(left) + np.var(right) * len(right))

        candidates = range(max(1, g[0]["index"] - k // 2), min(n - 1, g[-1]["index"] + k // 2) + 1)
        best = min(candidates, key=lambda i: (misfit(i), i))
        if best > n - k:  # fewer than k runs after it: not yet confirmed
            continue
        before, after = logs[max(0, best - k):best], logs[best:best + k]
        noise = _half_width(intervals[max(0, best - k):best + k]) if intervals is not None \
            else _robust_sd(before, after)
        steps.append({"index": best, "step": float(np.median(after) - np.median(before)), "noise": noise,
                      "noise_from": "intervals" if intervals is not None else "spread"})
    return steps


def regressions(store: Store, caliber: Optional[str] = None, k: int = K, threshold: float = THRESHOLD,
                z: float = NOISE_Z, ops: Optional[List[str]] = None, include_improvements: bool = True,
                **filters) -> Dict:
    runs = list_runs(store, caliber=caliber, **filters)
    if not runs:
        raise UsageError(f"no runs in the store {store.shown} match. Fix: `history list` shows runs and calibers.")
    series_runs, others = _one_caliber(runs)
    index = {r["run_id"]: i for i, r in enumerate(series_runs)}
    if ops:
        _check_ops(store, ops, series_runs, others)
    fields = ("run_id", "op", "dtype", "shape", "node", "side", "latency", "latency_base", "status", "markers")
    lat = medians_by_run(iter_rows(store, list(index), ops=ops, fields=fields), "latency")
    base = medians_by_run(iter_rows(store, list(index), ops=ops, fields=fields), "latency_base")
    cis = intervals_by_run(iter_rows(store, list(index), ops=ops, fields=fields + ("latency_lo", "latency_hi")))
    found = []
    for key, per_run in lat.items():
        ids = sorted(per_run, key=index.get)
        row_cis = cis.get(key, {})
        # Where the row's runs carry process-level intervals, a run whose row has none (measured in
        # one process: a cut or interrupted run) is left out of its series: with it the row fell
        # back to the runs' spread, far narrower, and one process' draw read as a step.
        with_intervals = [i for i in ids if i in row_cis]
        ids = with_intervals or ids
        if len(ids) < 2 * k:
            continue
        values = [per_run[i] for i in ids]
        intervals = [row_cis[i] for i in ids] if with_intervals else None
        for st in find_steps(values, k, threshold, z, intervals):
            if _kind(st) == "improvement" and not include_improvements:
                continue
            i = st["index"]
            first, prev = series_runs[index[ids[i]]], series_runs[index[ids[i - 1]]]
            found.append(_step_record(key, st, values, ids, base.get(key, {}), first, prev, k))
    # What changed where each step begins, the corpus checkout included (the identities the store keeps).
    kept = identities(store, sorted({f["first_run"] for f in found} | {f["prev_run"] for f in found})) if found else {}
    for f in found:
        prev, first = (series_runs[index[f[w]]] for w in ("prev_run", "first_run"))
        f["changed"] = said_changes(changed_versions(prev, first, kept.get(prev["run_id"]), kept.get(first["run_id"]))) \
            or "nothing recorded"
    found.sort(key=lambda f: (f["kind"] != "regression", f["first_created"], -abs(f["change_pct"]), f["op"]))
    # a step's test is named where another test's series has its op, dtype, shape and side
    series = [{"op": key[0], "dtype": short_dtype(key[1]), "shape": key[2], "node": key[3] or None, "side": key[4]}
              for key in lat]
    name_shared_keys(found + series, ("op", "dtype", "shape", "side"))
    return _result(series_runs, found, others, k, threshold, z)


def _check_ops(store: Store, ops: List[str], series_runs: List[dict], others: List[dict]) -> None:
    """--op names operators the series measured: one it never did is a usage error, not 'no step'."""
    have = ops_of(store, [r["run_id"] for r in series_runs])
    missing = [op for op in ops if op not in have]
    if missing:
        shown = ", ".join(have[:12]) + (f" (and {len(have) - 12} more)" if len(have) > 12 else "")
        raise UsageError(f"--op {', '.join(missing)}: no row of the {len(series_runs)} run(s) of caliber "
                         f"{series_runs[0]['caliber'][:12]} in the store {store.shown} has that op; their ops: "
                         f"{shown or 'none'}. Fix: pass one of those"
                         + (" or choose another caliber with --caliber (`history list`)" if others else "") + ".")


def _one_caliber(runs: List[dict]) -> Tuple[List[dict], List[dict]]:
    """The runs of the caliber with the most runs (a series only makes sense within one caliber), and the
    other calibers with their run counts."""
    calibers = {r["caliber"] for r in runs}
    if len(calibers) <= 1:
        return runs, []
    counts = {c: sum(1 for r in runs if r["caliber"] == c) for c in calibers}
    chosen = max(sorted(counts), key=lambda c: counts[c])
    others = [{"caliber": c, "runs": n} for c, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])) if c != chosen]
    return [r for r in runs if r["caliber"] == chosen], others


def _kind(st: Mapping) -> str:
    return "regression" if st["step"] > 0 else "improvement"


def _baseline_change(b: Mapping, ids: Sequence, i: int, k: int) -> Optional[float]:
    """The torch baseline's change in % at the same split, None without baseline values on both sides."""
    bb = [b[r] for r in ids[max(0, i - k):i] if r in b]
    ba = [b[r] for r in ids[i:i + k] if r in b]
    return (float(np.median(ba)) / float(np.median(bb)) - 1) * 100 if bb and ba else None


def _step_record(key: tuple, st: Mapping, values: Sequence[float], ids: Sequence, b: Mapping,
                 first: Mapping, prev: Mapping, k: int) -> Dict:
    """One reported step of row `key`: its size, the medians around it and the run first after it."""
    i = st["index"]
    before, after = values[max(0, i - k):i], values[i:i + k]
    base_change = _baseline_change(b, ids, i, k)
    return {
        "op": key[0], "dtype": short_dtype(key[1]), "shape": key[2], "node": key[3] or None, "side": key[4],
        "kind": _kind(st),
        "change_pct": round((math.exp(st["step"]) - 1) * 100, 2),
        "before_ms": float(np.median(before)), "after_ms": float(np.median(after)),
        "baseline_change_pct": None if base_change is None else round(base_change, 2),
        "noise_pct": round((math.exp(st["noise"]) - 1) * 100, 2), "noise_from": st["noise_from"],
        "first_run": first["run_id"], "prev_run": prev["run_id"], "first_created": first["created"].isoformat(),
        "corpus_commit": first.get("corpus_commit"), "zlbench_commit": first.get("zlbench_commit"),
        "triton_version": first.get("triton_version"),
    }


def _result(series_runs: List[dict], found: List[Dict], others: List[dict], k: int, threshold: float,
            z: float) -> Dict:
    return {"summary": {"caliber": series_runs[0]["caliber"], "runs": len(series_runs), "k": k,
                        "too_few_runs": len(series_runs) < 2 * k,  # no split has k runs on each side
                        "threshold": threshold, "z": z,
                        "backend": series_runs[0].get("backend"), "device_name": series_runs[0].get("device_name"),
                        "first": series_runs[0]["created"].isoformat(), "last": series_runs[-1]["created"].isoformat(),
                        "regressions": sum(1 for f in found if f["kind"] == "regression"),
                        "improvements": sum(1 for f in found if f["kind"] == "improvement"),
                        "other_calibers": others},
            "steps": found,
            "runs": [{"run_id": r["run_id"], "created": r["created"].isoformat(),
                      **{f: r.get(f) for f in VERSION_FIELDS}} for r in series_runs]}


def render_markdown(result: Mapping) -> str:
    s = result["summary"]
    out = [f"# Regressions: caliber {s['caliber'][:12]} ({s['backend']}, {s['device_name']})", "",
           f"- {s['runs']} run(s) from {s['first'][:16]} to {s['last'][:16]}, ordered by date.",
           f"- Rule: median of the {s['k']} runs after a split vs the {s['k']} before, a step of at least "
           f"{s['threshold']:.0%} and {s['z']:g}x the runs' robust spread (rows whose runs carry process-level "
           "intervals: beyond those intervals instead, over those runs alone); one outlier never counts.",
           f"- Found: {s['regressions']} regression(s), {s['improvements']} improvement(s)."]
    if s.get("other_calibers"):
        out.append(f"- The caliber with the most runs of those matching; {len(s['other_calibers'])} other(s): "
                   + ", ".join(f"{o['caliber'][:12]} ({o['runs']} run{'s' if o['runs'] != 1 else ''})" for o in s["other_calibers"][:8])
                   + (", ..." if len(s["other_calibers"]) > 8 else "")
                   + " (choose one with --caliber).")
    out.append("")
    if result["steps"]:
        out.append(tabulate([[op_with_test(f), f["dtype"], f["shape"], f["side"], f["kind"], f"{f['change_pct']:+.1f}%",
                              _level_cell(f["before_ms"]), _level_cell(f["after_ms"]),
                              "-" if f["baseline_change_pct"] is None else f"{f['baseline_change_pct']:+.1f}%",
                              f"{f['noise_pct']:.1f}% ({f['noise_from']})", f"run {f['first_run']} ({f['first_created'][:16]})",
                              f["changed"]] for f in result["steps"]],
                            headers=["Operator", "dtype", "shape", "side", "step", "change", "before ms", "after ms",
                                     "torch change", "noise", "first after", "what changed"], tablefmt="github"))
    elif s["too_few_runs"]:
        out.append(f"Too few runs to look for a step: {s['runs']} run(s) of this caliber, and a step needs {s['k']} "
                   f"before it and {s['k']} after it ({2 * s['k']}; -k sets how many). Nothing was judged.")
    else:
        out.append("No persistent step.")
    return "\n".join(out) + "\n"


def _level_cell(ms: float) -> str:
    """A level of the series; an empty replay's (a view) reads NO_WORK_MS, the most it can be."""
    return f"{ms:.5g}" if ms > NO_WORK_MS else f"<= {NO_WORK_MS:g} (no device work)"


def render_csv(result: Mapping) -> str:
    return csv_text(result["steps"], FIELDS)


def render_json(result: Mapping) -> str:
    return json_text(result)
