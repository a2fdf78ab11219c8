"""Plots (matplotlib, headless): speedup per op and dtype for one run; forest plot for an A/B."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import List, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from zlbench.results.schema import short_dtype  # noqa: E402


def speedup_plot(rows: Sequence[dict], path: Path) -> bool:
    """Geometric-mean speedup (torch / alternative) per op and dtype, log scale. False if no data."""
    groups = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok" and r.get("speedup") and r["speedup"] > 0:
            groups[(r["op"], short_dtype(r.get("dtype")), r.get("side") or "main")].append(r["speedup"])
    if not groups:
        return False
    keys = sorted(groups)
    values = [math.exp(sum(math.log(v) for v in groups[k]) / len(groups[k])) for k in keys]
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.28 * len(keys) + 1)))
    labels = [f"{op} {dt}" + ("" if side == "main" else f" [{side}]") for op, dt, side in keys]
    colors = ["tab:green" if v >= 1 else "tab:red" for v in values]
    ax.barh(range(len(keys)), values, color=colors)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(range(len(keys)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup vs torch (geomean over shapes; >1 = faster)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def forest_plot(rows: List[dict], path: Path, title: str) -> bool:
    """Per-row ratio B/A with its 95% CI, log scale. rows: dicts with label, ratio, lo, hi, verdict."""
    rows = [r for r in rows if r.get("ratio")]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.22 * len(rows) + 1.2)))
    palette = {"faster": "tab:green", "slower": "tab:red"}
    for i, r in enumerate(rows):
        lo, hi = r.get("lo") or r["ratio"], r.get("hi") or r["ratio"]
        color = palette.get(r.get("verdict"), "tab:gray")
        ax.plot([lo, hi], [i, i], color=color, lw=1.5)
        ax.plot([r["ratio"]], [i], "o", color=color, ms=3.5)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("latency ratio B / A with 95% CI (<1 = B faster)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
