"""Plots (matplotlib, headless): speedup per op and dtype for one run; forest plot for an A/B."""

from __future__ import annotations

import math
import os
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import List, Sequence


def _headless_matplotlib():
    """matplotlib on Agg whatever MPLBACKEND says: zlbench only writes image files, and an
    MPLBACKEND matplotlib does not know fails its import, which would end a run with an internal
    error after every node was measured."""
    saved = os.environ.pop("MPLBACKEND", None)
    try:
        import matplotlib
    finally:
        if saved is not None:
            os.environ["MPLBACKEND"] = saved
    matplotlib.use("Agg")
    return matplotlib


matplotlib = _headless_matplotlib()
import matplotlib.pyplot as plt  # noqa: E402

from zlbench.results.schema import kernel_speedup, short_dtype  # noqa: E402


def log_ticks(ax, values, unit: str = "x") -> None:
    """Readable ticks on a log x axis: 1-2-5 steps spanning the values, labelled plainly ("0.5x"),
    no minor labels (matplotlib's own write 3x10^-1, 4x10^-1 on top of each other)."""
    from matplotlib.ticker import NullFormatter

    lo, hi = min(values), max(values)
    ticks = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in (1, 2, 5) if lo / 1.6 <= m * 10.0 ** e <= hi * 1.6]
    if len(ticks) > 7:  # a wide span: decades only
        ticks = [t for t in ticks if f"{t:g}".lstrip("0.").startswith("1")] or ticks
    ax.set_xticks(ticks, [f"{t:g}{unit}" for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(lo / 1.6, hi * 1.6)  # the caller may narrow it


def speedup_plot(rows: Sequence[dict], path: Path, title: str = "speedup over torch") -> bool:
    """Geometric-mean speedup (torch / alternative) per op and dtype, log scale. False if no data.
    title: what, where and when (report.condensed.plot_title: corpus, backend, device, timer, date)."""
    groups = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok" and kernel_speedup(r):  # a view's ratio compares no kernels
            groups[(r["op"], short_dtype(r.get("dtype")), r.get("side") or "main")].append(kernel_speedup(r))
    if not groups:
        return False
    keys = sorted(groups)
    values = [math.exp(sum(math.log(v) for v in groups[k]) / len(groups[k])) for k in keys]
    fig, ax = plt.subplots(figsize=(8, max(2.8, 0.3 * len(keys) + 1.4)))
    labels = [f"{op} {dt}" + ("" if side == "main" else f" [{side}]") for op, dt, side in keys]
    colors = ["tab:green" if v >= 1 else "tab:red" for v in values]
    ax.barh(range(len(keys)), values, color=colors)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=0.8)
    log_ticks(ax, values + [1.0])
    for i, v in enumerate(values):
        ax.annotate(f"{v:.3g}x", (v, i), xytext=(3 if v >= 1 else -3, 0), textcoords="offset points",
                    ha="left" if v >= 1 else "right", va="center", fontsize=7)
    ax.set_yticks(range(len(keys)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup vs torch (geomean over shapes; >1 = faster)")
    ax.set_title(textwrap.fill(title, 80), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# The forest plot's x range: the rows' point estimates and 1, widened by their span (at least +-5%)
# on each side to take in the intervals; an interval end past that is clipped at the axis and marked
# with an arrow and its true end, so one wild interval (+3296%) no longer squashes every row to a dot.
FOREST_MIN_SPAN = 2 * math.log(1.05)


def forest_range(rows: Sequence[dict]):
    points = [math.log(r["ratio"]) for r in rows]
    core_lo, core_hi = min(points + [0.0]), max(points + [0.0])
    span = max(core_hi - core_lo, FOREST_MIN_SPAN)
    ends = [math.log(e) for r in rows for e in (r.get("lo"), r.get("hi")) if e and e > 0]
    ends = [e for e in ends if core_lo - span <= e <= core_hi + span]
    lo, hi = min(ends + [core_lo]), max(ends + [core_hi])
    pad = 0.06 * max(hi - lo, FOREST_MIN_SPAN)
    return math.exp(lo - pad), math.exp(hi + pad)


def percent_ticks(ax, xmin: float, xmax: float) -> None:
    """Ticks at round % changes (-10%, 0, +10%, ...) for a narrow ratio axis."""
    from matplotlib.ticker import NullFormatter

    half = max(1 - xmin, xmax - 1)
    step = next(s for s in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0) if half / s <= 4)
    ticks = [1 + k * step for k in range(-20, 21) if xmin <= 1 + k * step <= xmax and 1 + k * step > 0]
    ax.set_xticks(ticks, ["0" if abs(t - 1) < 1e-9 else f"{(t - 1) * 100:+.0f}%" for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())


def forest_plot(rows: List[dict], path: Path, title: str) -> bool:
    """Per-row ratio B/A with its 95% CI, log scale. rows: dicts with label, ratio, lo, hi, verdict."""
    rows = [r for r in rows if r.get("ratio")]
    if not rows:
        return False
    xmin, xmax = forest_range(rows)
    fig, ax = plt.subplots(figsize=(8, max(2.8, 0.24 * len(rows) + 1.8)))
    palette = {"faster": "tab:green", "slower": "tab:red"}
    clipped = 0
    for i, r in enumerate(rows):
        lo, hi = r.get("lo") or r["ratio"], r.get("hi") or r["ratio"]
        color = palette.get(r.get("verdict"), "tab:gray")
        ax.plot([max(lo, xmin), min(hi, xmax)], [i, i], color=color, lw=1.5)
        ax.plot([r["ratio"]], [i], "o", color=color, ms=3.5)
        for end, beyond, edge, marker, dx in ((lo, lo < xmin, xmin, "<", 6), (hi, hi > xmax, xmax, ">", -6)):
            if beyond:
                clipped += 1
                ax.plot([edge], [i], marker, color=color, ms=6, clip_on=False)
                ax.annotate(f"{(end - 1) * 100:+.0f}%", (edge, i), xytext=(dx, 3), textcoords="offset points",
                            ha="left" if dx > 0 else "right", va="bottom", fontsize=7, color=color)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=0.8)
    if xmax / xmin <= 4:
        percent_ticks(ax, xmin, xmax)
        scale = "change of B vs A"
    else:
        log_ticks(ax, [xmin, xmax])
        scale = "latency ratio B / A"
    ax.set_xlim(xmin, xmax)
    ax.set_xlabel(f"{scale}, 95% CI (left: B faster)"
                  + (f"; {clipped} end(s) clipped: arrow, true end in %" if clipped else ""), fontsize=9)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_title(textwrap.fill(title, 80), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
