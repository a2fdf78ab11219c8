"""Reports that stay readable at corpus scale (700 files x 3 dtypes x shapes): a pull-request
Markdown under GitHub's comment limit and plots of a fixed size, whatever the number of rows.

- Markdown: the headline, the top changes, then every other row inside <details>, cut where the
  text would pass the limit (the cut is said, and the CSV keeps every row).
- Plots (fixed 13 x 7.5 in): the top-N rows as a forest plot beside the distribution of all rows'
  changes with the neutral band (no change) and the threshold band; for one run, the distribution
  of speedups beside the slowest and fastest operators. Titles name the run, device and timer.

    python -m zlbench.report.condensed RUN_DIR [--out DIR] [--top 25] [--limit 65536]

New module: report/ab.py and report/summary.py are left as they are; this one reads their outputs
(ab.json, rows.jsonl) and reuses their headline."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from tabulate import tabulate

from zlbench.results.schema import short_dtype
from zlbench.report.ab import fmt_ms
from zlbench.errors import UsageError

GITHUB_COMMENT_LIMIT = 65_536
CHANGED = ("slower", "faster", "changed below threshold", "unstable")
FIGSIZE = (13, 7.5)
DPI = 100


def _md_table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    return tabulate(rows, headers=list(headers), tablefmt="github")


def fit_markdown(head: str, top_title: str, top_rows: Sequence[Sequence[str]], rest_rows: Sequence[Sequence[str]],
                 headers: Sequence[str], limit: int = GITHUB_COMMENT_LIMIT, where_all: str = "the CSV") -> str:
    """head + the top rows + the rest in <details>, cut to stay under `limit` characters. The top
    table is cut too when it alone would pass the limit."""
    reserve = 400  # the closing lines and the note about the cut

    def fitting(rows, budget):
        lo, hi = 0, len(rows)  # the most rows whose table fits the budget (tables grow with rows)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(_md_table(rows[:mid], headers)) <= budget:
                lo = mid
            else:
                hi = mid - 1
        return lo

    out = head.rstrip() + "\n\n"
    budget = limit - len(out) - reserve
    n_top = fitting(list(top_rows), budget - len(top_title) - 4)
    if top_rows:
        out += f"{top_title}\n\n{_md_table(top_rows[:n_top], headers)}\n"
        if n_top < len(top_rows):
            out += f"\n{len(top_rows) - n_top} more changed row(s) did not fit: see {where_all}.\n"
    else:
        out += f"{top_title}\n\nNone.\n"
    if rest_rows:
        budget = limit - len(out) - reserve
        n_rest = fitting(list(rest_rows), budget) if budget > 0 else 0
        summary = f"The other {len(rest_rows)} row(s)" + ("" if n_rest == len(rest_rows) else
                                                          f" ({n_rest} shown; every row is in {where_all})")
        if n_rest:
            out += f"\n<details><summary>{summary}</summary>\n\n{_md_table(rest_rows[:n_rest], headers)}\n\n</details>\n"
        else:
            out += f"\n{summary}.\n"
    return out


def _ab_cells(t: Mapping) -> List[str]:
    ci = f"{t['ci_lo_pct']:+.2f}%..{t['ci_hi_pct']:+.2f}%" if t.get("ci_lo_pct") is not None else "-"
    return [t["op"], t["dtype"], t["shape"], fmt_ms(t["a_ms"]), fmt_ms(t["b_ms"]),
            "-" if t.get("change_pct") is None else f"{t['change_pct']:+.2f}%", ci,
            "-" if t.get("q") is None else f"{t['q']:.3g}", t["verdict"] + (" (fallback)" if t.get("fallback") else "")]


AB_HEADERS = ["Operator", "dtype", "shape", "A ms", "B ms", "change", "95% CI", "q", "verdict"]


def _size(t: Mapping) -> float:
    return abs(math.log(t["ratio"])) if t.get("ratio") else 0.0


def ab_markdown(result: Mapping, limit: int = GITHUB_COMMENT_LIMIT, top: int = 25) -> str:
    """The A/B report (report.ab.compare's result or ab.json) for a pull request, under `limit`."""
    from zlbench.report.ab import headline

    s = result["summary"]
    head = f"# A/B: {s['label_a']} (A) vs {s['label_b']} (B)\n\n" + "\n".join(f"- {l}" for l in headline(s))
    rows = sorted(result["rows"], key=lambda t: (-_size(t), t["op"], t["dtype"], t["shape"]))
    changed = [t for t in rows if t["verdict"] in CHANGED]
    top_rows, rest = changed[:top], changed[top:] + [t for t in rows if t["verdict"] not in CHANGED]
    text = fit_markdown(head, f"## Top {len(top_rows)} change(s) of {len(changed)}, largest first",
                        [_ab_cells(t) for t in top_rows], [_ab_cells(t) for t in rest], AB_HEADERS, limit,
                        "ab.csv")
    if result.get("unpaired") and len(text) < limit - 200:
        text += f"\n{len(result['unpaired'])} row(s) unpaired: listed in ab.json.\n"
    return text


def plot_title(identity: Optional[Mapping], what: str) -> str:
    if not identity:
        return what
    dev = next((p.get("device_name") for p in identity.get("processes") or [] if p.get("device_name")), None) \
        or ", ".join(sorted({d.get("name", "") for d in identity.get("devices") or []}))
    return (f"{what} - {(identity.get('corpus') or {}).get('name')} corpus - "
            f"{(identity.get('backend') or {}).get('name')} {dev} - timer {(identity.get('timer') or {}).get('name')} - "
            f"{identity.get('created', '')[:16].replace('T', ' ')}")


def ab_overview_plot(result: Mapping, path: Path, title: str, top: int = 25) -> bool:
    """Left: the top rows by size of change, with their CIs. Right: every row's change (histogram),
    the neutral band (|change| < threshold: no change worth a verdict) shaded, the threshold marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [t for t in result["rows"] if t.get("ratio")]
    if not rows:
        return False
    thr = float(result["summary"].get("threshold") or 0.02)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=FIGSIZE, gridspec_kw={"width_ratios": [1.3, 1]})
    palette = {"faster": "tab:green", "slower": "tab:red", "unstable": "tab:orange"}
    top_rows = sorted(rows, key=lambda t: -_size(t))[:top]
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_op: Dict[tuple, List[float]] = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok" and isinstance(r.get("speedup"), (int, float)) and r["speedup"] > 0:
            by_op[(r["op"], short_dtype(r.get("dtype")))].append(float(r["speedup"]))
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m zlbench.report.condensed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--out", type=Path, help="folder for the outputs (default: the run dir)")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--limit", type=int, default=GITHUB_COMMENT_LIMIT, help="Markdown size limit (characters)")
    args = p.parse_args(argv)
    try:
        from zlbench.results.rundir import load_rows

        run_dir, out = args.run_dir, args.out or args.run_dir
        if not (run_dir / "run_identity.json").is_file():
            raise UsageError(f"{run_dir} is not a zlbench run dir (no run_identity.json). Fix: pass a run dir.")
        identity = json.loads((run_dir / "run_identity.json").read_text(encoding="utf-8"))
        out.mkdir(parents=True, exist_ok=True)
        written = []
        if speedup_overview_plot(load_rows(run_dir), out / "speedup_overview.png", plot_title(identity, "speedup")):
            written.append("speedup_overview.png")
        if (run_dir / "ab.json").is_file():
            result = json.loads((run_dir / "ab.json").read_text(encoding="utf-8"))
            (out / "ab_condensed.md").write_text(ab_markdown(result, args.limit, args.top), encoding="utf-8")
            written.append("ab_condensed.md")
            if ab_overview_plot(result, out / "ab_overview.png", plot_title(identity, "A/B"), args.top):
                written.append("ab_overview.png")
        print(f"[zlbench] wrote {', '.join(written) or 'nothing (no rows)'} in {out}", file=sys.stderr)
        return 0
    except UsageError as e:
        print(f"zlbench: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
