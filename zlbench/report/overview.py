"""Plots of a fixed size (13 x 7.5 in), whatever the number of rows: what a report draws at corpus
scale instead of one line per row (report/plots.py). An A/B: the top rows as a forest plot beside
the distribution of every row's change; one run: the distribution of speedups beside the slowest and
fastest operators. Titles name the run, device and timer (report.condensed.plot_title)."""

from __future__ import annotations

import math
import statistics
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Mapping, Sequence

from zlbench.results.schema import kernel_speedup, short_dtype

FIGSIZE = (13, 7.5)
DPI = 100
# Above this many rows (an A/B) or plotted groups (op x dtype x side), a report draws these
# overviews instead of a plot with one line per row or group.
LARGE = 40


def change_size(t: Mapping) -> float:
    """How far an A/B row moved, whichever way: |ln(B/A)|."""
    return abs(math.log(t["ratio"])) if t.get("ratio") else 0.0


def ab_overview_plot(result: Mapping, path: Path, title: str, top: int = 25) -> bool:
    """Left: the top rows by size of change, with their CIs. Right: every row's change (histogram),
    the neutral band (|change| < threshold: no change worth a verdict) shaded, the threshold marked."""
    from zlbench.report.plots import plt

    rows = [t for t in result["rows"] if t.get("ratio")]
    if not rows:
        return False
    thr = float(result["summary"].get("threshold") or 0.02)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=FIGSIZE, gridspec_kw={"width_ratios": [1.3, 1]})
    palette = {"faster": "tab:green", "slower": "tab:red", "unstable": "tab:orange"}
    top_rows = sorted(rows, key=lambda t: -change_size(t))[:top]
    for i, t in enumerate(top_rows):
        lo, hi = t.get("lo") or t["ratio"], t.get("hi") or t["ratio"]
        color = palette.get(t["verdict"], "tab:gray")
        ax1.plot([(lo - 1) * 100, (hi - 1) * 100], [i, i], color=color, lw=1.5)
        ax1.plot([(t["ratio"] - 1) * 100], [i], "o", color=color, ms=4)
    ax1.axvspan(-thr * 100, thr * 100, color="0.9", zorder=0)
    ax1.axvline(0, color="black", lw=0.8)
    ax1.set_yticks(range(len(top_rows)), [f"{t['op']} {t['dtype']} {t['shape']}"[:48] for t in top_rows], fontsize=7)
    ax1.invert_yaxis()
    ax1.set_xlabel("change of B vs A, % (95% CI); shaded: within the threshold")
    ax1.set_title(f"top {len(top_rows)} of {len(rows)} rows by size of change", fontsize=10)
    changes = [(t["ratio"] - 1) * 100 for t in rows]
    lim = max(5 * thr * 100, min(100.0, max(abs(c) for c in changes) * 1.05))
    clipped = [max(-lim, min(lim, c)) for c in changes]
    ax2.hist(clipped, bins=60, range=(-lim, lim), color="tab:blue", alpha=0.8)
    ax2.axvspan(-thr * 100, thr * 100, color="0.85", zorder=0, label=f"neutral band (+-{thr:.0%})")
    for x in (-thr * 100, thr * 100):
        ax2.axvline(x, color="tab:red", lw=0.8, ls="--")
    ax2.axvline(0, color="black", lw=0.8)
    counts = defaultdict(int)
    for t in rows:
        counts[t["verdict"]] += 1
    ax2.set_title(textwrap.fill(f"all {len(rows)} rows: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
                                70), fontsize=9)
    ax2.set_xlabel(f"change, % (clipped to +-{lim:.0f}%)")
    ax2.set_yscale("log")  # a few rows that moved stay visible beside thousands that did not
    ax2.set_ylabel("rows (log scale)")
    ax2.legend(fontsize=8, loc="upper right")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


def speedup_overview_plot(rows: Sequence[Mapping], path: Path, title: str, top: int = 15) -> bool:
    """Left: distribution of every row's speedup over torch (log axis). Right: the `top` slowest
    and fastest operators (geometric mean over their rows, with the spread across shapes)."""
    from zlbench.report.plots import plt

    by_op: Dict[tuple, List[float]] = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok" and kernel_speedup(r):  # a view's ratio compares no kernels
            by_op[(r["op"], short_dtype(r.get("dtype")))].append(kernel_speedup(r))
    if not by_op:
        return False
    logs = [math.log10(v) for vs in by_op.values() for v in vs]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=FIGSIZE)
    ax1.hist(logs, bins=60, color="tab:blue", alpha=0.8)
    ax1.axvline(0, color="black", lw=0.8)
    ax1.axvspan(math.log10(0.95), math.log10(1.05), color="0.85", zorder=0, label="within 5% of torch")
    ax1.set_xlabel("speedup vs torch, log10 (>0 = faster than torch)")
    ax1.set_ylabel("rows")
    ax1.set_title(f"{len(logs)} rows, {len(by_op)} op/dtype groups; median speedup "
                  f"{10 ** statistics.median(logs):.3f}", fontsize=10)
    ax1.legend(fontsize=8)
    gm = {k: math.exp(statistics.fmean(math.log(v) for v in vs)) for k, vs in by_op.items()}
    ordered = sorted(gm, key=gm.get)
    picked = ordered[:top] + [k for k in ordered[-top:] if k not in ordered[:top]]
    for i, k in enumerate(picked):
        vs = by_op[k]
        color = "tab:green" if gm[k] >= 1 else "tab:red"
        ax2.plot([min(vs), max(vs)], [i, i], color=color, lw=1.2, alpha=0.6)
        ax2.plot([gm[k]], [i], "o", color=color, ms=4)
    ax2.set_xscale("log")
    ax2.axvline(1.0, color="black", lw=0.8)
    ax2.set_yticks(range(len(picked)), [f"{op} {dt}"[:40] for op, dt in picked], fontsize=7)
    ax2.invert_yaxis()
    ax2.set_xlabel("speedup (geomean over shapes; line: min..max)")
    ax2.set_title(f"the {min(top, len(ordered))} slowest and fastest op/dtype groups", fontsize=10)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True
